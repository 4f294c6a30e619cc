/* search.c - the searcher: parameters and their checks, the per-run setup
 * shared by all searches (max lengths, result slots), and the entry point
 * that picks greedy search, sampling, beam search or constrained beam
 * search.  The rules every search obeys and the helpers they share are
 * rules.c's, below all of them. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "search/search_internal.h"

enum { MAX_BEAM = 1024 };

tfm_search_params tfm_search_default_params(void)
{
    return (tfm_search_params){
        .beam = 4,
        .nbest = 1,
        .length_rule = TFM_LENGTH_POWER,
        .length_penalty = 1.0f,
        .max_length_offset = 50,
        .max_length = 0,
        .min_length = 0,
        .no_repeat_ngram_size = 0,
        .sampling = false,
        .log_probs = true,
        .top_k = 0,
        .top_p = 1.0f,
        .temperature = 1.0f,
        .seed = 0,
    };
}

tfm_status tfm_search_params_validate(const tfm_search_params *p, tfm_error *err)
{
    if (p->beam < 1 || p->beam > MAX_BEAM)
        return tfm_error_set(err, TFM_ERR_RANGE, "beam %d: must be 1 to %d", p->beam, MAX_BEAM);
    int most = p->sampling ? MAX_BEAM : p->beam;
    if (p->nbest < 1 || p->nbest > most)
        return tfm_error_set(err, TFM_ERR_RANGE, "nbest %d: must be 1 to %d%s", p->nbest, most,
                             p->sampling ? "" : " (the beam)");
    if (!tfm_length_rule_name(p->length_rule))
        return tfm_error_set(err, TFM_ERR_RANGE, "length rule %d: must be %d (power) or %d (gnmt)",
                             (int)p->length_rule, (int)TFM_LENGTH_POWER, (int)TFM_LENGTH_GNMT);
    if (!(p->length_penalty >= 0.0f && p->length_penalty <= 100.0f))
        return tfm_error_set(err, TFM_ERR_RANGE, "length penalty %g: must be 0 to 100",
                             (double)p->length_penalty);
    if (p->max_length_offset < 0)
        return tfm_error_set(err, TFM_ERR_RANGE, "max length offset %d: must be >= 0",
                             p->max_length_offset);
    if (p->max_length < 0)
        return tfm_error_set(err, TFM_ERR_RANGE, "max length %d: must be >= 0 (0: no cap)",
                             p->max_length);
    if (p->min_length < 0)
        return tfm_error_set(err, TFM_ERR_RANGE, "min length %d: must be >= 0", p->min_length);
    if (p->no_repeat_ngram_size < 0)
        return tfm_error_set(err, TFM_ERR_RANGE, "no-repeat n-gram size %d: must be >= 0",
                             p->no_repeat_ngram_size);
    if (p->top_k < 0)
        return tfm_error_set(err, TFM_ERR_RANGE, "top-k %d: must be >= 0", p->top_k);
    if (!(p->top_p > 0.0f && p->top_p <= 1.0f))
        return tfm_error_set(err, TFM_ERR_RANGE, "top-p %g: must be in (0, 1]",
                             (double)p->top_p);
    if (!(p->temperature >= 0.0f && p->temperature < INFINITY))
        return tfm_error_set(err, TFM_ERR_RANGE, "temperature %g: must be finite and >= 0",
                             (double)p->temperature);
    return TFM_OK;
}

/* ---- the searcher ----------------------------------------------------------------- */

tfm_status tfm_search_create(const tfm_model *m, tfm_search **out, tfm_error *err)
{
    *out = NULL;
    tfm_search *s = calloc(1, sizeof *s);
    if (!s) return tfm_error_set(err, TFM_ERR_NOMEM, "search: out of memory");
    s->m = m;
    s->V = m->config.tgt_vocab_size;
    s->max_positions = m->config.max_positions;
    s->pad = m->config.pad_id;
    s->bos = m->config.bos_id;
    s->eos = m->config.eos_id;
    tfm_buf *bufs[] = {&s->b_max_len, &s->b_count, &s->b_hyps, &s->b_ids, &s->b_lps,
                       &s->b_logits, &s->b_stats, &s->b_met};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) tfm_buf_init(bufs[i]);
    for (int i = 0; i < SEARCH_WORK; i++) tfm_buf_init(&s->work[i]);
    *out = s;
    return TFM_OK;
}

void tfm_search_free(tfm_search *s)
{
    if (!s) return;
    tfm_buf *bufs[] = {&s->b_max_len, &s->b_count, &s->b_hyps, &s->b_ids, &s->b_lps,
                       &s->b_logits, &s->b_stats, &s->b_met};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) tfm_buf_free(bufs[i]);
    for (int i = 0; i < SEARCH_WORK; i++) tfm_buf_free(&s->work[i]);
    free(s);
}

bool tfm_search_met(const tfm_search *s, int i)
{
    return i >= 0 && i < s->n ? s->met[i] : true;
}

tfm_nbest tfm_search_result(const tfm_search *s, int i)
{
    if (i < 0 || i >= s->n) return (tfm_nbest){NULL, 0};
    return (tfm_nbest){s->hyps + (size_t)i * s->spp, s->count[i]};
}

/* ---- the run ---------------------------------------------------------------------- */

/* Whether id is among in->vocab's ids (all are without one). */
static bool in_vocab(const tfm_search_input *in, int32_t id)
{
    int lo = 0, hi = in->vocab ? in->vocab_size : 0;
    if (!in->vocab) return true;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (in->vocab[mid] < id) lo = mid + 1;
        else hi = mid;
    }
    return lo < in->vocab_size && in->vocab[lo] == id;
}

tfm_status search_setup(tfm_search *s, const tfm_search_params *p, const tfm_search_input *in,
                        int spp, int rows_per_sentence, tfm_error *err)
{
    const int n = in->n_sentences;
    s->p = p;
    s->in = in;
    s->n = 0;
    if (n < 0) return tfm_error_set(err, TFM_ERR_ARG, "search: %d sentences", n);
    if (n > 0 && (!in->states || !in->src_lens))
        return tfm_error_set(err, TFM_ERR_ARG, "search: no source states given");
    if (in->prefixes && !in->prefix_lens)
        return tfm_error_set(err, TFM_ERR_ARG, "search: prefixes without their lengths");
    if (in->vocab && !in_vocab(in, s->eos))
        return tfm_error_set(err, TFM_ERR_ARG, "search: the restricted vocabulary lacks </s>");
    if (n > 0 && (spp > INT_MAX / n || rows_per_sentence > INT_MAX / n))
        return tfm_error_set(err, TFM_ERR_RANGE, "search: %d sentences are too many", n);

    int *max_len = tfm_buf_array(&s->b_max_len, (size_t)n, sizeof(int));
    int *count = tfm_buf_array(&s->b_count, (size_t)n, sizeof(int));
    bool *met = tfm_buf_array(&s->b_met, (size_t)n, sizeof(bool));
    if (!max_len || !count || !met)
        return tfm_error_set(err, TFM_ERR_NOMEM, "search: out of memory");
    for (int i = 0; i < n; i++) met[i] = true;
    s->met = met;
    int S = 1;
    for (int i = 0; i < n; i++) {
        int src_len = in->src_lens[i];
        if (src_len < 0 || src_len > s->max_positions)
            return tfm_error_set(err, TFM_ERR_RANGE,
                                 "search: sentence %d: source of %d states; the model takes 0 to %d",
                                 i, src_len, s->max_positions);
        int plen = in->prefixes && in->prefix_lens ? in->prefix_lens[i] : 0;
        if (plen < 0 || plen > s->max_positions - 1)
            return tfm_error_set(err, TFM_ERR_RANGE,
                                 "search: sentence %d: prefix of %d ids; the model takes 0 to %d", i,
                                 plen, s->max_positions - 1);
        if (plen > 0 && !in->prefixes[i])
            return tfm_error_set(err, TFM_ERR_ARG, "search: sentence %d: prefix ids missing", i);
        for (int j = 0; j < plen; j++) {
            int32_t id = in->prefixes[i][j];
            if (id < 0 || id >= s->V || id == s->eos)
                return tfm_error_set(err, TFM_ERR_RANGE,
                                     "search: sentence %d: prefix id %d at %d is %s", i, (int)id, j,
                                     id == s->eos ? "</s>" : "outside the target vocabulary");
            if (!in_vocab(in, id))
                return tfm_error_set(err, TFM_ERR_ARG, "search: sentence %d: prefix id %d at %d "
                                     "is not in the restricted vocabulary", i, (int)id, j);
        }
        /* max_len = min(src + offset, cap, model limit), at least the prefix */
        int64_t len = (int64_t)src_len + p->max_length_offset;
        if (p->max_length > 0 && len > p->max_length) len = p->max_length;
        if (len > s->max_positions - 1) len = s->max_positions - 1;
        if (len < plen) len = plen;
        if (search_source_empty(in, i)) len = 0;
        max_len[i] = (int)len;
        if (max_len[i] + 1 > S) S = max_len[i] + 1;
        count[i] = 0;
    }

    size_t n_slots = (size_t)n * spp;
    tfm_hypothesis *hyps = tfm_buf_array(&s->b_hyps, n_slots, sizeof *hyps);
    int32_t *ids = tfm_buf_array(&s->b_ids, n_slots * S, sizeof *ids);
    float *lps = tfm_buf_array(&s->b_lps, n_slots * S, sizeof *lps);
    size_t rows = (size_t)n * rows_per_sentence;
    float *logits = tfm_buf_array(&s->b_logits, rows * s->V, sizeof(float));
    tfm_logit_stats *stats = tfm_buf_array(&s->b_stats, rows, sizeof *stats);
    if (!hyps || !ids || !lps || !logits || !stats)
        return tfm_error_set(err, TFM_ERR_NOMEM, "search: out of memory for %d sentences", n);
    for (size_t i = 0; i < n_slots; i++)
        hyps[i] = (tfm_hypothesis){.ids = ids + i * S, .token_log_probs = lps + i * S};
    s->max_len = max_len;
    s->count = count;
    s->hyps = hyps;
    s->ids = ids;
    s->lps = lps;
    s->logits = logits;
    s->stats = stats;
    s->S = S;
    s->spp = spp;
    return TFM_OK;
}

tfm_status search_run(tfm_search *s, tfm_decoder *d, const tfm_search_params *p,
                      const tfm_search_input *in, search_algo algo, tfm_error *err)
{
    s->n = 0;
    tfm_status st = tfm_search_params_validate(p, err);
    if (st != TFM_OK) return st;
    if (in->constraints && p->sampling)
        return tfm_error_set(err, TFM_ERR_ARG, "search: constraints need beam or greedy search, "
                             "not sampling");
    if (algo == SEARCH_AUTO) algo = p->sampling || p->beam == 1 ? SEARCH_ROWS : SEARCH_BEAM;
    if (in->constraints) {
        /* k finished slots and k rows per sentence; greedy gives a few to
         * the sentences with constraints */
        const int k = search_constrained_most_rows(p, in);
        st = search_setup(s, p, in, k, k, err);
        if (st == TFM_OK && in->n_sentences > 0) st = search_constrained(s, d, err);
    } else if (algo == SEARCH_ROWS) {
        int m = p->sampling ? p->nbest : 1; /* rows and slots per sentence */
        st = search_setup(s, p, in, m, m, err);
        if (st == TFM_OK && in->n_sentences > 0) st = search_rows(s, d, err);
    } else {
        /* k slots for the finished list and one for the greedy path; k rows
         * (the greedy path's among them) */
        st = search_setup(s, p, in, p->beam + 1, p->beam, err);
        if (st == TFM_OK && in->n_sentences > 0) st = search_beam(s, d, err);
    }
    s->n = st == TFM_OK ? in->n_sentences : 0;
    s->p = NULL;
    s->in = NULL;
    return st;
}

tfm_status tfm_search_run(tfm_search *s, tfm_decoder *d, const tfm_search_params *p,
                          const tfm_search_input *in, tfm_error *err)
{
    return search_run(s, d, p, in, SEARCH_AUTO, err);
}
