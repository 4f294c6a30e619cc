/* bleu.c - BLEU (Papineni et al., 2002) as sacreBLEU 2.3.1 computes it
 * (sacrebleu/metrics/bleu.py).
 *
 * A segment's statistics are the hypothesis length, the length of the
 * reference closest to it (a tie goes to the shorter reference), and per
 * n-gram order the hypothesis n-grams and the "clipped" matches: each
 * distinct hypothesis n-gram matches at most as often as it occurs in any
 * one reference.  Lengths count words after lowercasing (optional),
 * stripping trailing whitespace and tokenizing; words are what Python's
 * str.split() returns.
 *
 * The score (BLEU.compute_bleu): brevity penalty exp(1 - r/c) when the
 * hypothesis is shorter (0 for an empty one), then the geometric mean of the
 * n-gram precisions, where a zero precision is smoothed ("exp": 1/2^k of a
 * match, k counting the zero orders so far; "floor": smooth_value matches;
 * "add-k": smooth_value added to matches and totals above order 1).  No
 * match at all gives 0 without smoothing.  An order with no hypothesis
 * n-grams ends the product; with effective_order the mean is over the
 * orders before it, without it such a score is 0 (log 0 is taken as
 * -9999999999, as sacreBLEU's my_log does). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "metrics_internal.h"

static tfm_status nomem(tfm_error *err)
{
    return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
}

/* BLEU._preprocess_segment: lowercase, rstrip, tokenize, into out. */
static tfm_status prepare(const tfm_metric_params *p, tfm_metric_scratch *s, const char *text,
                          size_t len, tfm_ids *out)
{
    if (tfm_py_decode(text, len, &s->text) != TFM_OK) return TFM_ERR_NOMEM;
    if (p->lowercase) {
        if (tfm_py_lower(&s->text, &s->tmp) != TFM_OK) return TFM_ERR_NOMEM;
        tfm_ids t = s->text;
        s->text = s->tmp;
        s->tmp = t;
    }
    s->text.len = tfm_py_rstrip(s->text.data, s->text.len);
    return tfm_bleu_tokenize_cps(p->tokenize, &s->text, out, &s->tmp);
}

/* The word numbers of the words of t (split on whitespace) into s->tokens;
 * with add, new words get numbers, otherwise they are -1. */
static tfm_status number_words(tfm_metric_scratch *s, const tfm_ids *t, tfm_py_words *w, bool add)
{
    if (tfm_py_split(t->data, t->len, w) != TFM_OK) return TFM_ERR_NOMEM;
    tfm_ids_clear(&s->tokens);
    for (size_t i = 0; i < w->n; i++) {
        int64_t id = tfm_ngrams_word(&s->ngrams, t->data + w->start[i], w->len[i], add);
        if (id == -2 || tfm_cp_push(&s->tokens, (int32_t)id) != TFM_OK) return TFM_ERR_NOMEM;
    }
    return TFM_OK;
}

tfm_status tfm_bleu_segment(const tfm_metric_params *p, tfm_metric_scratch *s, const char *hyp,
                            size_t hyp_len, const char *const *refs, const size_t *ref_lens,
                            int n_refs, double *stats, tfm_error *err)
{
    int order = p->max_order;
    if (prepare(p, s, hyp, hyp_len, &s->hyp) != TFM_OK) return nomem(err);
    if (tfm_py_split(s->hyp.data, s->hyp.len, &s->hyp_words) != TFM_OK) return nomem(err);
    size_t n_hyp = s->hyp_words.n;
    if (tfm_ngrams_reset(&s->ngrams, n_hyp, n_hyp * (size_t)order) != TFM_OK ||
        number_words(s, &s->hyp, &s->hyp_words, true) != TFM_OK ||
        tfm_ngrams_count(s, s->tokens.data, s->tokens.len, p->max_order, 0, true) != TFM_OK)
        return nomem(err);

    int64_t closest_len = -1, closest_diff = -1;
    for (int r = 0; r < n_refs; r++) {
        if (prepare(p, s, refs[r], ref_lens[r], &s->refs[0]) != TFM_OK) return nomem(err);
        tfm_ids_clear(&s->touched);
        if (number_words(s, &s->refs[0], &s->ref_words, false) != TFM_OK ||
            tfm_ngrams_count(s, s->tokens.data, s->tokens.len, p->max_order, 0, false) != TFM_OK)
            return nomem(err);
        /* Clipping counts: the most any one reference has of each n-gram. */
        for (size_t k = 0; k < s->touched.len; k++) {
            int32_t id = s->touched.data[k];
            if (s->ref_count.v[id] > s->ref_max.v[id]) s->ref_max.v[id] = s->ref_count.v[id];
            s->ref_count.v[id] = 0;
        }
        /* BLEU._get_closest_ref_len */
        int64_t len = (int64_t)s->ref_words.n, diff = llabs((long long)n_hyp - len);
        if (closest_diff == -1 || diff < closest_diff) {
            closest_diff = diff;
            closest_len = len;
        } else if (diff == closest_diff && len < closest_len) {
            closest_len = len;
        }
    }

    memset(stats, 0, (2 + 2 * (size_t)order) * sizeof *stats);
    stats[0] = (double)n_hyp;
    stats[1] = (double)closest_len;
    double *correct = stats + 2, *total = stats + 2 + order;
    for (int64_t id = 0; id < s->ngrams.n_ids; id++) {
        int64_t slot = s->order_of.v[id], h = s->hyp_count.v[id], m = s->ref_max.v[id];
        total[slot] += (double)h;
        correct[slot] += (double)(h < m ? h : m);
        s->hyp_count.v[id] = 0;
        s->ref_max.v[id] = 0;
    }
    return TFM_OK;
}

/* sacreBLEU's my_log: log 0 is a large negative number, not -inf. */
static double my_log(double x)
{
    return x == 0.0 ? -9999999999.0 : log(x);
}

void tfm_bleu_compute(const tfm_metric_params *p, const double *stats, tfm_score *out)
{
    int order = p->max_order;
    double correct[TFM_BLEU_MAX_ORDER], total[TFM_BLEU_MAX_ORDER];
    memcpy(correct, stats + 2, (size_t)order * sizeof *correct);
    memcpy(total, stats + 2 + order, (size_t)order * sizeof *total);
    double sys_len = stats[0], ref_len = stats[1];
    double smooth_value = p->smooth_value;
    if (smooth_value < 0) smooth_value = tfm_bleu_smooth_default_value(p->smooth);

    memset(out, 0, sizeof *out);
    out->order = order;
    out->hyp_len = (int64_t)sys_len;
    out->ref_len = (int64_t)ref_len;
    out->ratio = ref_len != 0 ? sys_len / ref_len : 0.0;
    if (sys_len < ref_len) out->bp = sys_len > 0 ? exp(1.0 - ref_len / sys_len) : 0.0;
    else out->bp = 1.0;

    bool any_match = false;
    for (int n = 0; n < order; n++) any_match |= correct[n] != 0;
    if (!any_match) return; /* sacreBLEU #141: no smoothing without a single match */

    double smooth_mteval = 1.0;
    int eff_order = order;
    for (int n = 1; n <= order; n++) {
        if (p->smooth == TFM_BLEU_SMOOTH_ADD_K && n > 1) {
            correct[n - 1] += smooth_value;
            total[n - 1] += smooth_value;
        }
        if (total[n - 1] == 0) break;
        if (p->effective_order) eff_order = n;
        if (correct[n - 1] == 0) {
            if (p->smooth == TFM_BLEU_SMOOTH_EXP) {
                smooth_mteval *= 2;
                out->precisions[n - 1] = 100.0 / (smooth_mteval * total[n - 1]);
            } else if (p->smooth == TFM_BLEU_SMOOTH_FLOOR) {
                out->precisions[n - 1] = 100.0 * smooth_value / total[n - 1];
            }
        } else {
            out->precisions[n - 1] = 100.0 * correct[n - 1] / total[n - 1];
        }
    }
    double sum = 0;
    for (int n = 0; n < eff_order; n++) sum += my_log(out->precisions[n]);
    out->score = out->bp * exp(sum / eff_order);
}

/* sacreBLEU's default smooth_value of each method (BLEU.SMOOTH_DEFAULTS). */
double tfm_bleu_smooth_default_value(tfm_bleu_smooth smooth)
{
    return smooth == TFM_BLEU_SMOOTH_FLOOR ? 0.1 : smooth == TFM_BLEU_SMOOTH_ADD_K ? 1.0 : 0.0;
}
