/* testsearch.h - the fixtures of the search tests (test_search.c and
 * test_constrained.c): a random tiny model (the "tiny" preset with a
 * 40-token vocabulary, every parameter nudged off its initial value, and
 * the </s> embedding scaled so that some hypotheses end early and others run
 * to their max length) and random sources encoded by it; a search run; the
 * scores recomputed by the full (uncached) decoder.
 *
 * Tolerances: a sentence's log-probs depend on the rows decoded beside it
 * only through the BLAS's blocking of a product (a few float roundings,
 * ~1e-6), and the full decoder sums in another order, so scores are compared
 * to 1e-4; ids are compared exactly (random models have no near-ties that
 * small, and the models are fixed by their seeds).
 */
#ifndef TFM_TEST_SEARCH_H
#define TFM_TEST_SEARCH_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "search/search_internal.h"
#include "tfm/pass.h"
#include "tfm/search.h"

enum { V = 40, MAXN = 32, MAX_SRC = 12 };

/* The sanitizer build (make check's build/asan) decodes some five times
 * slower; there the tests that check one property on every sentence of a
 * large batch, over many models or settings, decode fewer sentences:
 * SENTENCES(n, m) is m there, n elsewhere.  A fixture's first m sentences
 * are those of its n (the same draws in the same order): the empty source
 * first, then random lengths, every model and setting still run, and each
 * place says what the batch still holds. */
#if SANITIZED
#define SENTENCES(n, m) (m)
#else
#define SENTENCES(n, m) (n)
#endif

/* ---- fixtures -------------------------------------------------------------------- */

typedef struct fixture {
    tfm_model *m;
    tfm_decoder *d;
    tfm_search *s;
    int n;
    int lens[MAXN];
    const float *states[MAXN];
    float *packed; /* [sum(lens), D] */
} fixture;

/* A tiny random model and n random sources (lengths 0 .. MAX_SRC, the first
 * one empty) encoded by it.  eos_scale > 1 makes </s> likelier to win. */
static inline bool fixture_make(fixture *f, uint64_t seed, int n, float eos_scale, bool pre_norm)
{
    memset(f, 0, sizeof *f);
    tfm_error err;
    tfm_config c;
    tfm_config_preset("tiny", &c, NULL);
    c.src_vocab_size = c.tgt_vocab_size = V;
    c.pre_norm = pre_norm;
    if (tfm_model_create(&c, NULL, seed, &f->m, &err) != TFM_OK) {
        printf("FAIL: model: %s\n", err.msg);
        return false;
    }
    tfm_rng rng;
    tfm_rng_seed(&rng, seed + 1000);
    size_t np = tfm_params_count(&c);
    for (size_t i = 0; i < np; i++) f->m->data[i] += 0.2f * (tfm_rng_float(&rng) - 0.5f);
    const int D = c.d_model;
    float *e = f->m->params.output_proj + (size_t)c.eos_id * D; /* shared with the embeddings */
    for (int i = 0; i < D; i++) e[i] *= eos_scale;

    f->n = n;
    int32_t ids[MAXN][MAX_SRC];
    const int32_t *idp[MAXN];
    int total = 0;
    for (int i = 0; i < n; i++) {
        f->lens[i] = i == 0 ? 0 : (int)tfm_rng_below(&rng, MAX_SRC + 1);
        for (int j = 0; j < f->lens[i]; j++) ids[i][j] = 4 + (int32_t)tfm_rng_below(&rng, V - 4);
        idp[i] = ids[i];
        total += f->lens[i];
    }
    f->packed = malloc(((size_t)total + 1) * D * sizeof(float));
    tfm_encoder *enc = NULL;
    bool ok = f->packed && tfm_encoder_create(f->m, &enc, &err) == TFM_OK &&
              tfm_encoder_forward(enc, n, idp, f->lens, f->packed, &err) == TFM_OK &&
              tfm_decoder_create(f->m, &f->d, &err) == TFM_OK &&
              tfm_search_create(f->m, &f->s, &err) == TFM_OK;
    tfm_encoder_free(enc);
    if (!ok) {
        printf("FAIL: fixture: %s\n", err.msg);
        return false;
    }
    for (int i = 0, off = 0; i < n; off += f->lens[i], i++) f->states[i] = f->packed + (size_t)off * D;
    return true;
}

static inline void fixture_free(fixture *f)
{
    tfm_search_free(f->s);
    tfm_decoder_free(f->d);
    tfm_model_free(f->m);
    free(f->packed);
}

/* The input of sentences [first, first + n) of f. */
static inline tfm_search_input input_of(const fixture *f, int first, int n)
{
    return (tfm_search_input){.n_sentences = n, .states = f->states + first,
                              .src_lens = f->lens + first};
}

static inline bool same_ids(const tfm_hypothesis *a, const tfm_hypothesis *b)
{
    return a->len == b->len && memcmp(a->ids, b->ids, (size_t)a->len * sizeof *a->ids) == 0;
}

/* Runs a search on s; reports a failure. */
static inline bool run(tfm_search *s, tfm_decoder *d, const tfm_search_params *p,
                       const tfm_search_input *in, search_algo algo)
{
    tfm_error err;
    tfm_status st = search_run(s, d, p, in, algo, &err);
    CHECK_MSG(st == TFM_OK, "%s", err.msg);
    return st == TFM_OK;
}

/* The log-prob of h recomputed by the full decoder, and each token's in tok,
 * with the first min_len steps taken without </s>: their
 * token log-probs are those of the distribution over the tokens allowed
 * (</s>, <pad> and <s> left out), lp - log(1 - p(</s>) - p(<pad>) - p(<s>)). */
static inline double recompute_min_length(const tfm_model *m, const float *states, int src_len,
                                          const tfm_hypothesis *h, int min_len, float *tok)
{
    const int T = h->len + 1;
    int32_t *tgt = malloc((size_t)T * sizeof *tgt);
    float *lp = malloc((size_t)T * V * sizeof *lp);
    tgt[0] = TFM_ID_BOS;
    memcpy(tgt + 1, h->ids, (size_t)h->len * sizeof *tgt);
    tfm_error err;
    double sum = NAN;
    if (tfm_decoder_forward_full(m, states, src_len, tgt, T, lp, &err) == TFM_OK) {
        sum = 0;
        for (int j = 0; j < T; j++) {
            int32_t next = j < h->len ? h->ids[j] : TFM_ID_EOS;
            const float *row = lp + (size_t)j * V;
            const double p_out = exp((double)row[TFM_ID_EOS]) + exp((double)row[TFM_ID_PAD]) +
                                 exp((double)row[TFM_ID_BOS]);
            tok[j] = row[next] - (j < min_len ? (float)log1p(-p_out) : 0.0f);
            sum += tok[j];
        }
    }
    free(tgt);
    free(lp);
    return sum;
}

/* The log-prob of h recomputed by the full decoder, and each token's in tok. */
static inline double recompute(const tfm_model *m, const float *states, int src_len,
                               const tfm_hypothesis *h, float *tok)
{
    return recompute_min_length(m, states, src_len, h, 0, tok);
}

void openblas_set_num_threads(int num_threads);

#endif
