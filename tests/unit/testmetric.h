/* testmetric.h - what the tests of the metrics (test_metrics.c and
 * test_metrics_output.c) share: a corpus of hypotheses and references,
 * scored or printed by a metric made for it, the metrics' default
 * parameters, and sacreBLEU's README example. */
#ifndef TFM_TEST_METRIC_H
#define TFM_TEST_METRIC_H

#include <string.h>

#include "check.h"
#include "tfm.h"

/* ---- helpers ----------------------------------------------------------------------- */

/* A corpus: n segments, hyps[i] with refs[r][i] for r < n_refs ("" = none). */
typedef struct corpus {
    int n, n_refs;
    const char *const *hyps;
    const char *const *refs[4];
} corpus;

static inline tfm_metric *make(tfm_metric_params p)
{
    tfm_metric *m = NULL;
    tfm_error err;
    tfm_status s = tfm_metric_create(&p, &m, &err);
    CHECK_MSG(s == TFM_OK, "%s", err.msg);
    return m;
}

/* Adds every segment of c to m; returns the first failure. */
static inline tfm_status add_corpus(tfm_metric *m, const corpus *c)
{
    for (int i = 0; i < c->n; i++) {
        const char *refs[4];
        size_t lens[4];
        for (int r = 0; r < c->n_refs; r++) {
            refs[r] = c->refs[r][i];
            lens[r] = strlen(refs[r]);
        }
        tfm_error err;
        tfm_status s = tfm_metric_add(m, c->hyps[i], strlen(c->hyps[i]), refs, lens, c->n_refs, &err);
        if (s != TFM_OK) return s;
    }
    return TFM_OK;
}

/* The corpus score of c under p. */
static inline double score_of(tfm_metric_params p, const corpus *c)
{
    tfm_metric *m = make(p);
    if (!m) return -1;
    CHECK(add_corpus(m, c) == TFM_OK);
    tfm_score s;
    tfm_metric_corpus_score(m, &s);
    tfm_metric_free(m);
    return s.score;
}

/* One hypothesis against one reference. */
static inline double score1(tfm_metric_params p, const char *hyp, const char *ref)
{
    const char *h[1] = {hyp}, *r[1] = {ref};
    corpus c = {1, 1, h, {r}};
    return score_of(p, &c);
}

/* The text sacreBLEU prints for c under p. */
static inline void format_of(tfm_metric_params p, const corpus *c, tfm_score_format f, tfm_buf *out)
{
    tfm_metric *m = make(p);
    if (!m) return;
    CHECK(add_corpus(m, c) == TFM_OK);
    tfm_score s;
    tfm_metric_corpus_score(m, &s);
    f.nrefs = tfm_metric_nrefs(m);
    tfm_buf_clear(out);
    CHECK(tfm_metric_format(m, &s, &f, out) == TFM_OK);
    tfm_metric_free(m);
}

#define CHECK_STR(got, want) CHECK_MSG(strcmp((got), (want)) == 0, "got '%s', want '%s'", (got), (want))

static inline tfm_metric_params bleu(void) { return tfm_metric_default_params(TFM_METRIC_BLEU); }
static inline tfm_metric_params chrf(void) { return tfm_metric_default_params(TFM_METRIC_CHRF); }
static inline tfm_metric_params ter(void) { return tfm_metric_default_params(TFM_METRIC_TER); }

/* sacreBLEU's README example ("Using SacreBLEU from Python"), also
 * test_corpus_bleu_cases of test/test_bleu.py. */
static const char *const readme_hyps[] = {"The dog bit the man.", "It wasn't surprising.",
                                          "The man had just bitten him."};
static const char *const readme_ref1[] = {"The dog bit the man.", "It was not unexpected.",
                                          "The man bit him first."};
static const char *const readme_ref2[] = {"The dog had bit the man.", "No one was surprised.",
                                          "The man had bitten the dog."};
static const corpus readme = {3, 2, readme_hyps, {readme_ref1, readme_ref2}};

#endif
