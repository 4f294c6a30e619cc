/* fuzz_metrics.c - libFuzzer target for the metrics (score bleu, chrf,
 * chrf++, ter) on arbitrary hypothesis and reference bytes.
 *
 * The first byte picks the metric and its options (tokenizer, lowercase,
 * smoothing, orders, TER's flags); the rest is the hypothesis, a newline,
 * then up to four references separated by tabs.  Whatever the bytes:
 *   - every segment is scored, empty references too (a reference of no
 *     words, as sacreBLEU 2.3.1's metrics take it);
 *   - its statistics are the same when computed twice;
 *   - the score is finite, BLEU and chrF in [0, 100] (up to rounding), TER
 *     at least 0;
 *   - the corpus score of the one segment equals the score of its
 *     statistics;
 *   - TER of the hypothesis against itself (without --normalized) makes
 *     no edits, and scores 0 unless the line has no words (sacreBLEU
 *     scores that 100). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tfm/metrics.h"

enum { MAX_REFS = 4 };

static tfm_metric_params params_from(unsigned char b)
{
    static const tfm_metric_kind kinds[] = {TFM_METRIC_BLEU, TFM_METRIC_CHRF, TFM_METRIC_CHRF,
                                            TFM_METRIC_TER};
    tfm_metric_params p = tfm_metric_default_params(kinds[b & 3]);
    const unsigned opt = b >> 2;
    switch (p.kind) {
    case TFM_METRIC_BLEU:
        p.tokenize = (tfm_bleu_tok)(opt % 5);
        p.smooth = (tfm_bleu_smooth)((opt / 5) % 4);
        p.lowercase = (opt / 20) & 1;
        p.effective_order = (opt / 40) & 1;
        break;
    case TFM_METRIC_CHRF:
        if ((b & 3) == 2) p.word_order = 2; /* chrF++ */
        p.char_order = 1 + (int)(opt % 6);
        p.lowercase = (opt / 6) & 1;
        p.whitespace = (opt / 12) & 1;
        p.eps_smoothing = (opt / 24) & 1;
        break;
    case TFM_METRIC_TER:
        p.case_sensitive = opt & 1;
        p.normalized = (opt >> 1) & 1;
        p.no_punct = (opt >> 2) & 1;
        break;
    }
    return p;
}

static void score_or_abort(tfm_metric *m, const char *hyp, size_t hyp_len,
                           const char *const *refs, const size_t *lens, int n_refs)
{
    const size_t n_stats = tfm_metric_n_stats(m);
    double *stats = calloc(n_stats, sizeof *stats), *again = calloc(n_stats, sizeof *again);
    if (!stats || !again) abort();
    tfm_error err;
    int used = 0;
    if (tfm_metric_segment(m, hyp, hyp_len, refs, lens, n_refs, stats, &used, &err) != TFM_OK ||
        used != n_refs)
        abort();
    if (tfm_metric_segment(m, hyp, hyp_len, refs, lens, n_refs, again, NULL, &err) != TFM_OK ||
        memcmp(stats, again, n_stats * sizeof *stats) != 0)
        abort();
    if (tfm_metric_add_stats(m, stats, used, &err) != TFM_OK) abort();
    tfm_score one, corpus;
    tfm_metric_compute(m, stats, &one);
    tfm_metric_corpus_score(m, &corpus);
    if (!isfinite(one.score) || one.score != corpus.score) abort();
    const tfm_metric_kind kind = tfm_metric_get_params(m)->kind;
    /* exp(mean(log p)) of precisions all 100 may round to 100 + 1e-14, as in
     * sacreBLEU, which computes it the same way */
    if (kind != TFM_METRIC_TER && (one.score < 0 || one.score > 100 + 1e-9)) abort();
    if (kind == TFM_METRIC_TER && one.score < 0) abort();
    free(stats);
    free(again);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    if (size < 1) return 0;
    const tfm_metric_params p = params_from(data[0]);
    const char *text = (const char *)data + 1;
    const size_t n = size - 1;
    const char *nl = memchr(text, '\n', n);
    const size_t hyp_len = nl ? (size_t)(nl - text) : n;
    const char *refs[MAX_REFS];
    size_t lens[MAX_REFS];
    int n_refs = 0;
    if (nl) {
        const char *at = nl + 1, *end = text + n;
        while (n_refs < MAX_REFS) {
            const char *tab = memchr(at, '\t', (size_t)(end - at));
            const char *stop = tab && n_refs < MAX_REFS - 1 ? tab : end;
            refs[n_refs] = at;
            lens[n_refs] = (size_t)(stop - at);
            n_refs++;
            if (stop == end) break;
            at = stop + 1;
        }
    } else { /* no reference given: the hypothesis is its own */
        refs[0] = text;
        lens[0] = hyp_len;
        n_refs = 1;
    }
    tfm_metric *m = NULL;
    tfm_error err;
    if (tfm_metric_create(&p, &m, &err) != TFM_OK) abort();
    score_or_abort(m, text, hyp_len, refs, lens, n_refs);
    tfm_metric_free(m);

    /* TER of the hypothesis against itself: no edits.  Not with Tercom's
     * normalisation: sacreBLEU tokenizes a reference twice and the
     * hypothesis once (lib/metrics/ter.c does the same), and that tokenizer
     * is not idempotent (",\xc3\xc3..2" against itself makes 2 edits). */
    if (p.kind == TFM_METRIC_TER && hyp_len > 0 && !p.normalized) {
        if (tfm_metric_create(&p, &m, &err) != TFM_OK) abort();
        const char *self[1] = {text};
        const size_t self_len[1] = {hyp_len};
        if (tfm_metric_add(m, text, hyp_len, self, self_len, 1, &err) != TFM_OK) abort();
        tfm_score s;
        tfm_metric_corpus_score(m, &s);
        /* a line of no words (after TER's tokenization) scores 100 against
         * an empty reference, as sacreBLEU 2.3.1 does, with no edits */
        if (s.num_edits != 0 || (s.ref_length > 0 && s.score != 0)) abort();
        tfm_metric_free(m);
    }
    return 0;
}
