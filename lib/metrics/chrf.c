/* chrf.c - chrF (Popović, 2015) and chrF++ (Popović, 2017) as sacreBLEU
 * 2.3.1 computes them (sacrebleu/metrics/chrf.py, metrics/helpers.py).
 *
 * Character n-grams (orders 1..char_order) are taken from the line with all
 * whitespace removed (unless whitespace is asked for); chrF++ adds word
 * n-grams (orders 1..word_order) of the words of str.split(), where a word
 * of two or more characters that ends (else begins) with an ASCII
 * punctuation character is split in two: "word," -> "word" ",".
 *
 * A segment's statistics are, per order, the hypothesis n-grams (0 when the
 * reference has none of that order), the reference n-grams and the matches
 * (each n-gram matching min(hyp count, ref count) times).  With several
 * references the one with the best sentence-level F-score counts (the first
 * of equals).
 *
 * The score (CHRF._compute_f_score): by default sacreBLEU's effective
 * order: precision and recall are averaged over the orders where both sides
 * have n-grams, and F-beta is taken of the averages.  With eps_smoothing,
 * chrF++.py's way: an F-beta per order with 1e-16 standing for an undefined
 * precision or recall, averaged over all orders. */
#include "metrics_internal.h"

static tfm_status nomem(tfm_error *err)
{
    return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
}

/* string.punctuation */
static bool is_ascii_punct(int32_t c)
{
    return (c >= '!' && c <= '/') || (c >= ':' && c <= '@') || (c >= '[' && c <= '`') ||
           (c >= '{' && c <= '~');
}

/* CHRF._preprocess_segment (lowercase), then the character sequence and
 * the word numbers (words added to the table only for the hypothesis). */
static tfm_status prepare(const tfm_metric_params *p, tfm_metric_scratch *s, const char *text,
                          size_t len, tfm_ids *chars, bool add)
{
    if (tfm_py_decode(text, len, &s->text) != TFM_OK) return TFM_ERR_NOMEM;
    if (p->lowercase) {
        if (tfm_py_lower(&s->text, &s->tmp) != TFM_OK) return TFM_ERR_NOMEM;
        tfm_ids t = s->text;
        s->text = s->tmp;
        s->tmp = t;
    }
    tfm_ids_clear(chars);
    for (size_t i = 0; i < s->text.len; i++)
        if ((p->whitespace || !tfm_py_isspace(s->text.data[i])) &&
            tfm_cp_push(chars, s->text.data[i]) != TFM_OK)
            return TFM_ERR_NOMEM;
    tfm_ids_clear(&s->tokens);
    if (p->word_order == 0) return TFM_OK;
    tfm_py_words *w = &s->ref_words;
    if (tfm_py_split(s->text.data, s->text.len, w) != TFM_OK) return TFM_ERR_NOMEM;
    for (size_t k = 0; k < w->n; k++) {
        const int32_t *word = s->text.data + w->start[k];
        size_t n = w->len[k], cut = 0; /* split into word[0..cut) and word[cut..n) */
        if (n > 1 && is_ascii_punct(word[n - 1])) cut = n - 1;
        else if (n > 1 && is_ascii_punct(word[0])) cut = 1;
        int64_t a = cut ? tfm_ngrams_word(&s->ngrams, word, cut, add)
                        : tfm_ngrams_word(&s->ngrams, word, n, add);
        if (a == -2 || tfm_cp_push(&s->tokens, (int32_t)a) != TFM_OK) return TFM_ERR_NOMEM;
        if (cut) {
            int64_t b = tfm_ngrams_word(&s->ngrams, word + cut, n - cut, add);
            if (b == -2 || tfm_cp_push(&s->tokens, (int32_t)b) != TFM_OK) return TFM_ERR_NOMEM;
        }
    }
    return TFM_OK;
}

static double n_grams(size_t len, int n)
{
    return len >= (size_t)n ? (double)(len - (size_t)n + 1) : 0.0;
}

tfm_status tfm_chrf_segment(const tfm_metric_params *p, tfm_metric_scratch *s, const char *hyp,
                            size_t hyp_len, const char *const *refs, const size_t *ref_lens,
                            int n_refs, double *stats, tfm_error *err)
{
    int nc = p->char_order, nw = p->word_order, n_orders = nc + nw;
    /* Room for the n-grams of the hypothesis (at most a character per
     * byte, a word per two), so that the tables seldom grow. */
    size_t expected = (hyp_len + 1) * (size_t)n_orders;
    if (expected > ((size_t)1 << 16)) expected = (size_t)1 << 16;
    if (tfm_ngrams_reset(&s->ngrams, nw ? hyp_len / 2 + 8 : 8, expected) != TFM_OK ||
        tfm_counts_reserve(&s->hyp_count, expected) != TFM_OK ||
        tfm_counts_reserve(&s->order_of, expected) != TFM_OK ||
        tfm_counts_reserve(&s->ref_count, expected) != TFM_OK)
        return nomem(err);
    /* The hypothesis: s->hyp holds its characters, s->hyp_num its words. */
    if (prepare(p, s, hyp, hyp_len, &s->hyp, true) != TFM_OK) return nomem(err);
    tfm_ids_clear(&s->hyp_num);
    for (size_t i = 0; i < s->tokens.len; i++)
        if (tfm_cp_push(&s->hyp_num, s->tokens.data[i]) != TFM_OK) return nomem(err);
    if (tfm_ngrams_count(s, s->hyp.data, s->hyp.len, nc, 0, true) != TFM_OK ||
        tfm_ngrams_count(s, s->hyp_num.data, s->hyp_num.len, nw, nc, true) != TFM_OK)
        return nomem(err);

    double best_f = -1.0, cur[3 * TFM_CHRF_MAX_ORDER];
    for (int r = 0; r < n_refs; r++) {
        if (prepare(p, s, refs[r], ref_lens[r], &s->refs[0], false) != TFM_OK) return nomem(err);
        tfm_ids_clear(&s->touched);
        if (tfm_ngrams_count(s, s->refs[0].data, s->refs[0].len, nc, 0, false) != TFM_OK ||
            tfm_ngrams_count(s, s->tokens.data, s->tokens.len, nw, nc, false) != TFM_OK)
            return nomem(err);
        for (int k = 0; k < n_orders; k++) {
            bool chars = k < nc;
            int n = chars ? k + 1 : k - nc + 1;
            double n_ref = n_grams(chars ? s->refs[0].len : s->tokens.len, n);
            double n_hyp = n_grams(chars ? s->hyp.len : s->hyp_num.len, n);
            cur[3 * k] = n_ref > 0 ? n_hyp : 0.0; /* "Don't count hits if no reference exists" */
            cur[3 * k + 1] = n_ref;
            cur[3 * k + 2] = 0.0;
        }
        for (size_t t = 0; t < s->touched.len; t++) {
            int32_t id = s->touched.data[t];
            int64_t h = s->hyp_count.v[id], c = s->ref_count.v[id];
            cur[3 * s->order_of.v[id] + 2] += (double)(h < c ? h : c);
            s->ref_count.v[id] = 0;
        }
        double f = tfm_chrf_f_score(p, cur);
        if (f > best_f) {
            best_f = f;
            for (int k = 0; k < 3 * n_orders; k++) stats[k] = cur[k];
        }
    }
    for (int64_t id = 0; id < s->ngrams.n_ids; id++) s->hyp_count.v[id] = 0;
    return TFM_OK;
}

double tfm_chrf_f_score(const tfm_metric_params *p, const double *stats)
{
    const double eps = 1e-16;
    int n_orders = p->char_order + p->word_order, effective_order = 0;
    double factor = (double)p->beta * p->beta, score = 0.0, avg_prec = 0.0, avg_rec = 0.0;
    for (int i = 0; i < n_orders; i++) {
        double n_hyp = stats[3 * i], n_ref = stats[3 * i + 1], n_match = stats[3 * i + 2];
        double prec = n_hyp > 0 ? n_match / n_hyp : eps;
        double rec = n_ref > 0 ? n_match / n_ref : eps;
        double denom = factor * prec + rec;
        score += denom > 0 ? (1 + factor) * prec * rec / denom : eps;
        if (n_hyp > 0 && n_ref > 0) {
            avg_prec += prec;
            avg_rec += rec;
            effective_order++;
        }
    }
    if (p->eps_smoothing) return 100 * score / n_orders;
    if (effective_order == 0) {
        avg_prec = avg_rec = 0.0;
    } else {
        avg_prec /= effective_order;
        avg_rec /= effective_order;
    }
    if (avg_prec + avg_rec == 0) return 0.0;
    score = (1 + factor) * avg_prec * avg_rec;
    score /= (factor * avg_prec) + avg_rec;
    return 100 * score;
}
