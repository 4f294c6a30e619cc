/* search.c - the searcher: parameters and their checks, the length rules,
 * the per-run setup shared by all searches (max lengths, result slots), the
 * rules every search obeys (search_constrain), candidate selection, and the
 * entry point that picks greedy search, sampling or beam search. */
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

/* Both rules are >= 1 for m >= 1 and grow with m for alpha >= 0 (beam.c's
 * bound on the greedy path relies on it). */
double tfm_length_penalty(tfm_length_rule rule, int m, float alpha)
{
    if (alpha == 0.0f) return 1.0;
    if (rule == TFM_LENGTH_GNMT) return pow((5.0 + m) / 6.0, (double)alpha);
    return pow((double)m, (double)alpha);
}

const char *tfm_length_rule_name(tfm_length_rule rule)
{
    switch (rule) {
    case TFM_LENGTH_POWER: return "power";
    case TFM_LENGTH_GNMT: return "gnmt";
    }
    return NULL;
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

/* Makes b hold at least n elements of size bytes (contents kept) and returns
 * them, or NULL when memory runs out or the size overflows. */
static void *reserve(tfm_buf *b, size_t n, size_t size)
{
    if (size && n > (SIZE_MAX - 1) / size) return NULL;
    size_t bytes = n * size;
    if (bytes > b->len || !b->data) {
        if (tfm_buf_reserve(b, bytes - b->len) != TFM_OK) return NULL;
        b->len = bytes;
    }
    return b->data;
}

void *search_work(tfm_search *s, int i, size_t n, size_t size)
{
    return reserve(&s->work[i], n, size);
}

/* ---- the run ---------------------------------------------------------------------- */

/* An empty source is translated into the empty sentence (only </s>), in
 * every search and whatever its prefix: a model given no source would
 * otherwise invent a sentence from its language model alone. */
static bool source_empty(const tfm_search_input *in, int sent)
{
    return in->src_lens[sent] == 0;
}

static int prefix_len(const tfm_search_input *in, int sent)
{
    if (!in->prefixes || !in->prefix_lens || source_empty(in, sent)) return 0;
    return in->prefix_lens[sent];
}

int search_prefix_len(const tfm_search *s, int sent)
{
    return prefix_len(s->in, sent);
}

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

    int *max_len = reserve(&s->b_max_len, (size_t)n, sizeof(int));
    int *count = reserve(&s->b_count, (size_t)n, sizeof(int));
    bool *met = reserve(&s->b_met, (size_t)n, sizeof(bool));
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
        if (source_empty(in, i)) len = 0;
        max_len[i] = (int)len;
        if (max_len[i] + 1 > S) S = max_len[i] + 1;
        count[i] = 0;
    }

    size_t n_slots = (size_t)n * spp;
    tfm_hypothesis *hyps = reserve(&s->b_hyps, n_slots, sizeof *hyps);
    int32_t *ids = reserve(&s->b_ids, n_slots * S, sizeof *ids);
    float *lps = reserve(&s->b_lps, n_slots * S, sizeof *lps);
    size_t rows = (size_t)n * rows_per_sentence;
    float *logits = reserve(&s->b_logits, rows * s->V, sizeof(float));
    tfm_logit_stats *stats = reserve(&s->b_stats, rows, sizeof *stats);
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
        /* k finished slots and k rows per sentence, beam 1 (greedy) too */
        st = search_setup(s, p, in, p->beam, p->beam, err);
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

/* ---- rules and helpers shared by the searches ------------------------------------------- */

/* Leaves only tok allowed in lp [V]. */
static void force(float *lp, int V, int32_t tok)
{
    float keep = lp[tok];
    for (int v = 0; v < V; v++) lp[v] = -INFINITY;
    lp[tok] = keep;
}

bool search_any_allowed(const float *lp, int V)
{
    for (int v = 0; v < V; v++)
        if (lp[v] > -INFINITY) return true;
    return false;
}

void search_constrain(const tfm_search *s, int sent, const int32_t *hist, int t, float *lp)
{
    const tfm_search_params *p = s->p;
    const int V = s->V;
    int plen = prefix_len(s->in, sent);
    if (t < plen) {
        force(lp, V, s->in->prefixes[sent][t]);
        return;
    }
    if (t >= s->max_len[sent]) {
        force(lp, V, s->eos);
        return;
    }
    /* never wanted as output: training never makes them targets */
    lp[s->pad] = -INFINITY;
    lp[s->bos] = -INFINITY;

    const float eos_lp = lp[s->eos];
    bool banned = false; /* whether anything beyond <pad> and <s> was forbidden */
    if (t < p->min_length) {
        lp[s->eos] = -INFINITY;
        banned = true;
    }
    /* n-gram blocking: the last N-1 ids, followed by v, must not equal any
     * earlier N-gram hist[i .. i+N) */
    const int N = p->no_repeat_ngram_size;
    if (N > 0 && t >= N) {
        const int32_t *tail = hist + t - (N - 1);
        for (int i = 0; i + N <= t; i++) {
            if (memcmp(hist + i, tail, (size_t)(N - 1) * sizeof *hist) == 0) {
                lp[hist[i + N - 1]] = -INFINITY;
                banned = true;
            }
        }
    }
    /* never leave a hypothesis without a way forward: </s> comes back */
    if (banned && !search_any_allowed(lp, V)) lp[s->eos] = eos_lp;
}

int32_t search_argmax(const float *lp, int V)
{
    int32_t best = -1;
    float best_lp = -INFINITY;
    for (int v = 0; v < V; v++) {
        if (lp[v] > best_lp) {
            best_lp = lp[v];
            best = v;
        }
    }
    return best;
}

float search_score(const tfm_search *s, int len, double log_prob)
{
    return (float)(log_prob / tfm_length_penalty(s->p->length_rule, len + 1,
                                                 s->p->length_penalty));
}

void search_hyp_write(const tfm_search *s, tfm_hypothesis *h, const int32_t *ids,
                      const float *lps, int len, float eos_lp, double log_prob)
{
    /* the slot storage behind h belongs to the searcher and is writable */
    int32_t *out_ids = (int32_t *)(uintptr_t)h->ids;
    float *out_lps = (float *)(uintptr_t)h->token_log_probs;
    if (out_ids != ids) memmove(out_ids, ids, (size_t)len * sizeof *ids);
    if (out_lps != lps) memmove(out_lps, lps, (size_t)len * sizeof *lps);
    out_lps[len] = eos_lp;
    h->len = len;
    h->log_prob = (float)log_prob;
    h->score = search_score(s, len, log_prob);
}

/* ---- skipping what cannot get in ------------------------------------------------------ */

/* The lowest logit of a row (base: its hypothesis's log-prob; st: its stats)
 * whose candidate could still enter the full heap h, lowered by a margin far
 * above the rounding of search_lp, so the exact test (search_heap_offer)
 * decides every case near the edge. */
float search_logit_cut(const search_heap *h, double base, const tfm_logit_stats *st)
{
    double cut = h->c[0].score - base + st->max + st->log_sum;
    double margin = 1e-3 * (1.0 + fabs(cut) + fabs(st->max) + fabs(st->log_sum));
    return (float)(cut - margin);
}

/* The first v in [from, V) whose value is not below cut (a NaN is not):
 * sixteen values at a time, blocks entirely below skipped with a few
 * vector compares, as most of a row's are. */
int search_next_not_below(const float *row, int from, int V, float cut)
{
    typedef float f32x4 __attribute__((vector_size(16)));
    typedef int32_t i32x4 __attribute__((vector_size(16)));
    int v = from;
    for (; v + 16 <= V; v += 16) {
        f32x4 x[4];
        memcpy(x, row + v, sizeof x);
        const i32x4 below = (x[0] < cut) & (x[1] < cut) & (x[2] < cut) & (x[3] < cut);
        if (!(below[0] & below[1] & below[2] & below[3])) break; /* a lane is not below */
    }
    while (v < V && row[v] < cut) v++;
    return v;
}

/* ---- the candidate heap ---------------------------------------------------------------- */

static void swap_cand(search_cand *a, search_cand *b)
{
    search_cand t = *a;
    *a = *b;
    *b = t;
}

/* Restores the min-heap below i over the first n entries. */
static void sift_down(search_cand *c, int n, int i)
{
    for (;;) {
        int l = 2 * i + 1, r = l + 1, w = i;
        if (l < n && search_cand_better(&c[w], &c[l])) w = l;
        if (r < n && search_cand_better(&c[w], &c[r])) w = r;
        if (w == i) return;
        swap_cand(&c[i], &c[w]);
        i = w;
    }
}

void search_heap_push_slow(search_heap *h, search_cand c)
{
    if (h->cap <= 0) return;
    if (h->n < h->cap) {
        int i = h->n++;
        h->c[i] = c;
        while (i > 0) { /* sift up: the worse of the two goes above */
            int parent = (i - 1) / 2;
            if (!search_cand_better(&h->c[parent], &h->c[i])) break;
            swap_cand(&h->c[parent], &h->c[i]);
            i = parent;
        }
        return;
    }
    if (!search_cand_better(&c, &h->c[0])) return;
    h->c[0] = c;
    sift_down(h->c, h->n, 0);
}

void search_heap_sort(search_heap *h)
{
    /* heapsort of a min-heap: the worst goes to the end first, leaving the
     * array best first */
    for (int n = h->n; n > 1; n--) {
        swap_cand(&h->c[0], &h->c[n - 1]);
        sift_down(h->c, n - 1, 0);
    }
}
