/* test_layer_gradients.c - the backward pass, layer by layer: every layer's
 * backward (linear, the feed-forward block, LayerNorm, softmax, attention
 * with relative position representations and restricted attention, the
 * embeddings, dropout, the label-smoothed loss) against central finite
 * differences of its double-precision reference (testgrad.h says how the
 * check works); restricted attention, kept and differentiated band by band,
 * against the same computation over whole masked matrices; the bias sums and
 * the dropout streams of the threaded passes.  The whole model's gradient is
 * test_model_gradients.c's.
 *
 * Dropout: the layer checks replay a mask the kernel drew, in the double
 * reference.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "testgrad.h"
#include "nn/layers.h"

/* ---- each layer ------------------------------------------------------------------------ */

typedef struct linear_case {
    int N, n_in, n_out;
    double *x, *W, *b, *w; /* w: the objective's weights [N, n_out] */
} linear_case;

static double linear_objective(void *p)
{
    linear_case *c = p;
    double *y = malloc((size_t)c->N * c->n_out * sizeof *y);
    ref_linear(y, c->x, c->N, c->n_in, c->n_out, c->W, c->b);
    double s = dot(y, c->w, (size_t)c->N * c->n_out);
    free(y);
    return s;
}

static void test_linear_backward(void)
{
    enum { N = 3, NI = 4, NO = 5 };
    double x[N * NI], W[NO * NI], b[NO], w[N * NO], y[N * NO];
    tfm_rng rng;
    tfm_rng_seed(&rng, 1);
    fill_uniform(x, N * NI, -1, 1, &rng);
    fill_uniform(W, NO * NI, -1, 1, &rng);
    fill_uniform(b, NO, -1, 1, &rng);
    fill_uniform(w, N * NO, -1, 1, &rng);
    float *xf = to_float(x, N * NI), *Wf = to_float(W, NO * NI), *bf = to_float(b, NO);
    float *wf = to_float(w, N * NO);
    float yf[N * NO];
    linear_forward(yf, xf, Wf, bf, N, NI, NO);
    ref_linear(y, x, N, NI, NO, W, b);
    CHECK(max_diff_fd(yf, y, N * NO) < 1e-6);

    /* gradients start from 0.5, not 0: the backward must add, not overwrite */
    float dx[N * NI], dW[NO * NI], db[NO];
    for (int i = 0; i < N * NI; i++) dx[i] = 0.5f;
    for (int i = 0; i < NO * NI; i++) dW[i] = 0.5f;
    for (int i = 0; i < NO; i++) db[i] = 0.5f;
    linear_backward(dx, dW, db, wf, xf, Wf, N, NI, NO);
    for (int i = 0; i < N * NI; i++) dx[i] -= 0.5f;
    for (int i = 0; i < NO * NI; i++) dW[i] -= 0.5f;
    for (int i = 0; i < NO; i++) db[i] -= 0.5f;
    linear_case c = {N, NI, NO, x, W, b, w};
    CHECK_GRAD("dx", dx, x, N * NI, linear_objective, &c);
    CHECK_GRAD("dW", dW, W, NO * NI, linear_objective, &c);
    CHECK_GRAD("db", db, b, NO, linear_objective, &c);

    /* without a bias and without dinp */
    float dW2[NO * NI] = {0};
    linear_backward(NULL, dW2, NULL, wf, xf, Wf, N, NI, NO);
    c.b = NULL;
    CHECK_GRAD("dW (no bias)", dW2, W, NO * NI, linear_objective, &c);
    free(xf);
    free(Wf);
    free(bf);
    free(wf);
}

/* The finite-difference check can fail: a gradient off by 1% in one entry,
 * or a missing factor, is caught. */
static void test_check_can_fail(void)
{
    enum { N = 2, NI = 3, NO = 2 };
    double x[N * NI], W[NO * NI], b[NO], w[N * NO];
    tfm_rng rng;
    tfm_rng_seed(&rng, 2);
    fill_uniform(x, N * NI, -1, 1, &rng);
    fill_uniform(W, NO * NI, -1, 1, &rng);
    fill_uniform(b, NO, -1, 1, &rng);
    fill_uniform(w, N * NO, -1, 1, &rng);
    float *xf = to_float(x, N * NI), *Wf = to_float(W, NO * NI), *wf = to_float(w, N * NO);
    float dW[NO * NI] = {0};
    linear_backward(NULL, dW, NULL, wf, xf, Wf, N, NI, NO);
    linear_case c = {N, NI, NO, x, W, b, w};
    double atol = 1e-5 * max_abs(dW, NO * NI);
    CHECK(fd_compare(dW, W, NO * NI, linear_objective, &c, 1e-4, atol, 0, 0).ratio <= 1);
    dW[3] *= 1.01f;
    CHECK(fd_compare(dW, W, NO * NI, linear_objective, &c, 1e-4, atol, 0, 0).ratio > 1);
    dW[3] /= 1.01f;
    for (int i = 0; i < NO * NI; i++) dW[i] *= 2; /* accumulated twice */
    CHECK(fd_compare(dW, W, NO * NI, linear_objective, &c, 1e-4, atol, 0, 0).ratio > 1);
    free(xf);
    free(Wf);
    free(wf);
}

typedef struct ffn_case {
    int N, D, F;
    double *x, *w1, *b1, *w2, *b2, *w;
} ffn_case;

static double ffn_objective(void *p)
{
    ffn_case *c = p;
    double *y = malloc((size_t)c->N * c->D * sizeof *y);
    ref_ffn(y, c->x, c->N, c->D, c->F, c->w1, c->b1, c->w2, c->b2);
    double s = dot(y, c->w, (size_t)c->N * c->D);
    free(y);
    return s;
}

static void test_ffn_backward(void)
{
    enum { N = 3, D = 4, F = 6 };
    double x[N * D], w1[F * D], b1[F], w2[D * F], b2[D], w[N * D], y[N * D];
    tfm_rng rng;
    tfm_rng_seed(&rng, 3);
    fill_uniform(x, N * D, -1, 1, &rng);
    fill_uniform(w1, F * D, -1, 1, &rng);
    fill_uniform(b1, F, -0.5, 0.5, &rng);
    fill_uniform(w2, D * F, -1, 1, &rng);
    fill_uniform(b2, D, -1, 1, &rng);
    fill_uniform(w, N * D, -1, 1, &rng);
    float *xf = to_float(x, N * D), *w1f = to_float(w1, F * D), *b1f = to_float(b1, F);
    float *w2f = to_float(w2, D * F), *b2f = to_float(b2, D), *wf = to_float(w, N * D);
    float yf[N * D], hidden[N * F], dhidden[N * F];
    ffn_forward(yf, hidden, xf, w1f, b1f, w2f, b2f, N, D, F);
    ref_ffn(y, x, N, D, F, w1, b1, w2, b2);
    CHECK(max_diff_fd(yf, y, N * D) < 1e-6);
    int dead = 0; /* some units must be off, or the ReLU's backward goes untested */
    for (int i = 0; i < N * F; i++) dead += hidden[i] == 0.0f;
    CHECK(dead > 0 && dead < N * F);

    float dx[N * D] = {0}, dw1[F * D] = {0}, db1[F] = {0}, dw2[D * F] = {0}, db2[D] = {0};
    ffn_backward(dx, dw1, db1, dw2, db2, dhidden, wf, xf, hidden, w1f, w2f, N, D, F, 0.0f);
    ffn_case c = {N, D, F, x, w1, b1, w2, b2, w};
    CHECK_GRAD("dx", dx, x, N * D, ffn_objective, &c);
    CHECK_GRAD("dw1", dw1, w1, F * D, ffn_objective, &c);
    CHECK_GRAD("db1", db1, b1, F, ffn_objective, &c);
    CHECK_GRAD("dw2", dw2, w2, D * F, ffn_objective, &c);
    CHECK_GRAD("db2", db2, b2, D, ffn_objective, &c);
    free(xf);
    free(w1f);
    free(b1f);
    free(w2f);
    free(b2f);
    free(wf);
}

typedef struct norm_case {
    int N, D;
    double *x, *g, *b, *w;
} norm_case;

static double norm_objective(void *p)
{
    norm_case *c = p;
    double *y = malloc((size_t)c->N * c->D * sizeof *y);
    ref_layer_norm(y, c->x, c->N, c->D, c->g, c->b, 1e-5);
    double s = dot(y, c->w, (size_t)c->N * c->D);
    free(y);
    return s;
}

static void test_layer_norm_backward(void)
{
    enum { N = 3, D = 6 };
    double x[N * D], g[D], b[D], w[N * D], y[N * D];
    tfm_rng rng;
    tfm_rng_seed(&rng, 4);
    fill_uniform(x, N * D, -2, 2, &rng);
    for (int i = 0; i < D; i++) x[2 * D + i] += 5; /* a row far from 0 */
    fill_uniform(g, D, 0.5, 1.5, &rng);
    fill_uniform(b, D, -1, 1, &rng);
    fill_uniform(w, N * D, -1, 1, &rng);
    float *xf = to_float(x, N * D), *gf = to_float(g, D), *bf = to_float(b, D);
    float *wf = to_float(w, N * D);
    float yf[N * D], mean[N], rstd[N];
    layer_norm_forward(yf, mean, rstd, xf, gf, bf, N, D, 1e-5f);
    ref_layer_norm(y, x, N, D, g, b, 1e-5f);
    CHECK(max_diff_fd(yf, y, N * D) < 1e-5);

    float dx[N * D] = {0}, dg[D] = {0}, db[D] = {0};
    layer_norm_backward(dx, dg, db, wf, xf, mean, rstd, gf, N, D);
    norm_case c = {N, D, x, g, b, w};
    CHECK_GRAD("dx", dx, x, N * D, norm_objective, &c);
    CHECK_GRAD("dweight", dg, g, D, norm_objective, &c);
    CHECK_GRAD("dbias", db, b, D, norm_objective, &c);
    free(xf);
    free(gf);
    free(bf);
    free(wf);
}

typedef struct softmax_case {
    int n;
    double *x, *w;
} softmax_case;

static double softmax_objective(void *p)
{
    softmax_case *c = p;
    double mx = -INFINITY, sum = 0, s = 0;
    for (int i = 0; i < c->n; i++) mx = fmax(mx, c->x[i]);
    for (int i = 0; i < c->n; i++) sum += exp(c->x[i] - mx);
    for (int i = 0; i < c->n; i++) s += c->w[i] * exp(c->x[i] - mx) / sum;
    return s;
}

static void test_softmax_backward(void)
{
    enum { n = 7 };
    double x[n], w[n];
    tfm_rng rng;
    tfm_rng_seed(&rng, 5);
    fill_uniform(x, n, -3, 3, &rng);
    fill_uniform(w, n, -1, 1, &rng);
    float *xf = to_float(x, n), *wf = to_float(w, n);
    softmax_forward(xf, n); /* now the weights y */
    float dx[n];
    for (int i = 0; i < n; i++) dx[i] = 0.25f;
    softmax_backward(dx, wf, xf, n);
    for (int i = 0; i < n; i++) dx[i] -= 0.25f;
    softmax_case c = {n, x, w};
    CHECK_GRAD("dx", dx, x, n, softmax_objective, &c);

    /* exp_nonpositive against exp, over the vector body and the tail */
    float lp[11];
    for (int i = 0; i < 11; i++) lp[i] = -0.7f * (float)i;
    exp_nonpositive(lp, 11);
    for (int i = 0; i < 11; i++) CHECK_NEAR(lp[i], exp(-0.7f * (float)i), 3e-7 * exp(-0.7 * i));
    free(xf);
    free(wf);
}

/* One attention check: q rows and k, v rows in buffers laid out as the
 * model lays them out (a fused [n, 3D] q,k,v buffer for self-attention;
 * queries [n_q, D] and a [rows, 2D] k,v buffer for encoder-decoder
 * attention), with masks, dropout, relative position tables, and keys past
 * n_k (padding rows of the buffer) that must neither matter nor receive
 * gradient. */
typedef struct attention_case {
    int n_q, n_k, kv_rows, H, Dh;
    bool fused;
    attention_mask mask;
    double *qbuf, *kvbuf, *w; /* fused: qbuf is the q,k,v buffer and kvbuf NULL */
    double *relk, *relv;      /* [2K+1, Dh] each, K = rel_clip (0: none) */
    int rel_clip;
    const uint8_t *keep;
    double p;
} attention_case;

static void attention_case_pointers(const attention_case *c, double *qbuf, double *kvbuf,
                                    double **q, double **k, double **v, int *ldq, int *ldk)
{
    const int D = c->H * c->Dh;
    if (c->fused) {
        *q = qbuf;
        *k = qbuf + D;
        *v = qbuf + 2 * D;
        *ldq = *ldk = 3 * D;
    } else {
        *q = qbuf;
        *k = kvbuf;
        *v = kvbuf + D;
        *ldq = D;
        *ldk = 2 * D;
    }
}

static double attention_objective(void *p)
{
    attention_case *c = p;
    const int D = c->H * c->Dh;
    double *q, *k, *v;
    int ldq, ldk;
    attention_case_pointers(c, c->qbuf, c->kvbuf, &q, &k, &v, &ldq, &ldk);
    double *out = malloc((size_t)c->n_q * D * sizeof *out);
    ref_relative rel = {c->relk, c->relv, c->rel_clip};
    ref_attention(out, q, ldq, k, v, ldk, c->n_q, c->n_k, c->H, c->Dh, c->mask, rel, c->keep,
                  c->p);
    double s = dot(out, c->w, (size_t)c->n_q * D);
    free(out);
    return s;
}

/* What one check_attention runs. */
typedef struct attention_setup {
    const char *name;
    int n_q, n_k, kv_rows;
    bool fused;
    attention_mask mask;
    float p_drop;
    int rel_clip;
    uint64_t seed;
} attention_setup;

static void check_attention(attention_setup t)
{
    enum { H = 2, Dh = 3, D = H * Dh };
    const char *name = t.name;
    const int n_q = t.n_q, n_k = t.n_k, kv_rows = t.kv_rows, K = t.rel_clip;
    const bool fused = t.fused;
    const attention_mask mask = t.mask;
    tfm_rng rng;
    tfm_rng_seed(&rng, t.seed);
    const size_t nqb = (size_t)(fused ? kv_rows * 3 * D : n_q * D);
    const size_t nkvb = fused ? 0 : (size_t)kv_rows * 2 * D;
    const size_t nrel = (size_t)attention_relative_rows(K) * Dh;
    double *qbuf = malloc(nqb * sizeof *qbuf), *kvbuf = malloc((nkvb + 1) * sizeof *kvbuf);
    double *w = malloc((size_t)n_q * D * sizeof *w), *ref = malloc((size_t)n_q * D * sizeof *ref);
    double *relk = malloc((nrel + 1) * sizeof *relk), *relv = malloc((nrel + 1) * sizeof *relv);
    fill_uniform(qbuf, nqb, -1.5, 1.5, &rng);
    fill_uniform(kvbuf, nkvb, -1.5, 1.5, &rng);
    fill_uniform(w, (size_t)n_q * D, -1, 1, &rng);
    fill_uniform(relk, nrel, -1, 1, &rng);
    fill_uniform(relv, nrel, -1, 1, &rng);
    float *qf = to_float(qbuf, nqb), *kvf = to_float(kvbuf, nkvb), *wf = to_float(w, (size_t)n_q * D);
    float *relkf = to_float(relk, nrel), *relvf = to_float(relv, nrel);

    attention_case c = {n_q, n_k, kv_rows, H, Dh, fused, mask, qbuf, fused ? NULL : kvbuf, w,
                        relk, relv, K, NULL, t.p_drop};
    const attention_relative rel = {relkf, relvf, K};
    const attention_relative *relp = K ? &rel : NULL;
    float *q, *k, *v;
    int ldq, ldk;
    if (fused) {
        q = qf, k = qf + D, v = qf + 2 * D, ldq = ldk = 3 * D;
    } else {
        q = qf, k = kvf, v = kvf + D, ldq = D, ldk = 2 * D;
    }
    size_t ns = attention_scratch_size(n_q, n_k, mask, K);
    size_t nd = attention_dropout_scratch_size(n_q, n_k, mask, K);
    float *scratch = malloc((ns > nd ? ns : nd) * sizeof *scratch);
    const size_t n_att = attention_weights_size(n_q, n_k, H, mask);
    float *att = malloc((n_att + 1) * sizeof *att);
    uint8_t *keep = malloc(n_att + 1);
    float *out = malloc((size_t)n_q * D * sizeof *out);
    attention_forward(out, D, q, ldq, k, ldk, v, ldk, n_q, n_k, H, Dh, mask, relp, scratch, att);
    if (t.p_drop > 0) {
        attention_dropout_forward(out, D, v, ldk, att, keep, n_q, n_k, H, Dh, mask, relp,
                                  t.p_drop, &rng, scratch);
        c.keep = keep; /* the reference replays the mask drawn */
    }
    double *rq, *rk, *rv;
    int rldq, rldk;
    attention_case_pointers(&c, qbuf, kvbuf, &rq, &rk, &rv, &rldq, &rldk);
    ref_attention(ref, rq, rldq, rk, rv, rldk, n_q, n_k, H, Dh, mask,
                  (ref_relative){relk, relv, K}, c.keep, t.p_drop);
    CHECK_MSG(max_diff_fd(out, ref, (size_t)n_q * D) < 1e-5, "%s: forward off by %g", name,
              max_diff_fd(out, ref, (size_t)n_q * D));

    /* gradients into zeroed buffers laid out as the inputs */
    float *dqf = calloc(nqb, sizeof *dqf), *dkvf = calloc(nkvb + 1, sizeof *dkvf);
    float *drelk = calloc(nrel + 1, sizeof *drelk), *drelv = calloc(nrel + 1, sizeof *drelv);
    float *dq, *dk, *dv;
    if (fused)
        dq = dqf, dk = dqf + D, dv = dqf + 2 * D;
    else
        dq = dqf, dk = dkvf, dv = dkvf + D;
    const attention_relative_grad drel = {drelk, drelv};
    float *bscratch =
        malloc(attention_backward_scratch_size(n_q, n_k, mask, K) * sizeof *bscratch);
    attention_backward(dq, dk, dv, &drel, wf, D, q, ldq, k, ldk, v, ldk, att, c.keep, t.p_drop,
                       n_q, n_k, H, Dh, mask, relp, bscratch);
    char what[96];
    snprintf(what, sizeof what, "%s: d%s", name, fused ? "qkv" : "q");
    CHECK_GRAD(what, dqf, qbuf, nqb, attention_objective, &c);
    if (!fused) {
        snprintf(what, sizeof what, "%s: dkv", name);
        CHECK_GRAD(what, dkvf, kvbuf, nkvb, attention_objective, &c);
    }
    if (K) {
        snprintf(what, sizeof what, "%s: drelative_keys", name);
        CHECK_GRAD(what, drelk, relk, nrel, attention_objective, &c);
        snprintf(what, sizeof what, "%s: drelative_values", name);
        CHECK_GRAD(what, drelv, relv, nrel, attention_objective, &c);
    }
    /* padding rows past n_k were never written */
    bool untouched = true;
    for (int r = n_k; r < kv_rows; r++)
        for (int i = 0; i < (fused ? 0 : 2 * D); i++) untouched &= dkvf[(size_t)r * 2 * D + i] == 0;
    CHECK_MSG(untouched, "%s: a padding key received gradient", name);

    free(qbuf);
    free(kvbuf);
    free(w);
    free(ref);
    free(relk);
    free(relv);
    free(qf);
    free(kvf);
    free(wf);
    free(relkf);
    free(relvf);
    free(scratch);
    free(att);
    free(keep);
    free(out);
    free(dqf);
    free(dkvf);
    free(drelk);
    free(drelv);
    free(bscratch);
}

static void test_attention_backward(void)
{
    const attention_mask full = {0, false, 0}, causal = {0, true, 0};
    /* self-attention through the fused q,k,v buffer */
    check_attention((attention_setup){"full", 5, 5, 5, true, full, 0, 0, 11});
    check_attention((attention_setup){"causal", 5, 5, 5, true, causal, 0, 0, 12});
    check_attention((attention_setup){"causal window 2", 6, 6, 6, true, {0, true, 2}, 0, 0, 13});
    check_attention((attention_setup){"window 1", 6, 6, 6, true, {0, false, 1}, 0, 0, 14});
    /* encoder-decoder attention: n_q != n_k, keys from a [rows, 2D] buffer;
     * the padding mask: 3 real keys in a buffer of 5 rows */
    check_attention((attention_setup){"cross", 4, 6, 6, false, full, 0, 0, 15});
    check_attention((attention_setup){"cross, padded keys", 4, 3, 5, false, full, 0, 0, 16});
    /* attention dropout with the mask it drew, whole and banded */
    check_attention((attention_setup){"causal + dropout", 5, 5, 5, true, causal, 0.3f, 0, 17});
    check_attention((attention_setup){"cross + dropout", 3, 4, 4, false, full, 0.5f, 0, 18});
    check_attention((attention_setup){"window 1 + dropout", 6, 6, 6, true, {0, false, 1}, 0.3f,
                                      0, 19});
    /* relative positions: distances clipped at 2 (so some are clipped), with
     * each mask, and with dropout; a query block starting past position 0 */
    check_attention((attention_setup){"relative 2", 6, 6, 6, true, full, 0, 2, 20});
    check_attention((attention_setup){"relative 2, causal", 6, 6, 6, true, causal, 0, 2, 21});
    check_attention((attention_setup){"relative 1, window 2", 7, 7, 7, true, {0, false, 2}, 0, 1,
                                      22});
    check_attention((attention_setup){"relative 3, causal window 1, dropout", 6, 6, 6, true,
                                      {0, true, 1}, 0.3f, 3, 23});
    check_attention((attention_setup){"relative 2, queries at 3", 3, 6, 6, true, {3, true, 0}, 0,
                                      2, 24});
}

/* The gradients of ref_attention with q, k, v laid out [n, H*Dh] (rows
 * H*Dh apart), worked out on the whole [n_q, n_k] matrix of each head with
 * the mask applied entry by entry, as the backward pass did before it went
 * band by band: dq, dk, dv [n, H*Dh] and drelk, drelv [2K+1, Dh] are
 * overwritten; dout [n_q, H*Dh]. */
static void ref_attention_backward(double *dq, double *dk, double *dv, double *drelk,
                                   double *drelv, const double *dout, const double *q,
                                   const double *k, const double *v, int n_q, int n_k, int H,
                                   int Dh, attention_mask m, ref_relative rel,
                                   const uint8_t *keep, double p)
{
    const int D = H * Dh, K = rel.clip, width = attention_band_width(n_k, m);
    const double scale = 1 / sqrt((double)Dh);
    memset(dq, 0, (size_t)n_q * D * sizeof *dq);
    memset(dk, 0, (size_t)n_k * D * sizeof *dk);
    memset(dv, 0, (size_t)n_k * D * sizeof *dv);
    if (K) {
        memset(drelk, 0, (size_t)(2 * K + 1) * Dh * sizeof *drelk);
        memset(drelv, 0, (size_t)(2 * K + 1) * Dh * sizeof *drelv);
    }
    double *P = malloc((size_t)n_k * sizeof *P), *drop = malloc((size_t)n_k * sizeof *drop);
    double *dP = malloc((size_t)n_k * sizeof *dP);
    for (int h = 0; h < H; h++)
        for (int i = 0; i < n_q; i++) {
            const int pos = m.q_pos + i, first = attention_band_first(m, i, n_k);
            const double *qi = q + (size_t)i * D + h * Dh, *gi = dout + (size_t)i * D + h * Dh;
            /* the forward's weights P and their dropout factors */
            double mx = -INFINITY, sum = 0;
            for (int j = 0; j < n_k; j++) {
                P[j] = -INFINITY;
                if (!ref_visible(m, i, j)) continue;
                double s = 0;
                for (int c = 0; c < Dh; c++)
                    s += qi[c] * (k[(size_t)j * D + h * Dh + c] +
                                  (K ? rel.keys[ref_bucket(j, pos, K) * Dh + c] : 0));
                P[j] = s * scale;
                mx = fmax(mx, P[j]);
            }
            for (int j = 0; j < n_k; j++) {
                P[j] = P[j] == -INFINITY ? 0 : exp(P[j] - mx);
                sum += P[j];
            }
            double dot_pd = 0;
            for (int j = 0; j < n_k; j++) {
                P[j] = sum > 0 ? P[j] / sum : 0;
                drop[j] = !keep || P[j] == 0 ? 1
                          : keep[((size_t)h * n_q + i) * width + (j - first)] / (1 - p);
                /* dV += P' dO;  dP' = dO (v + a^V);  dP = dP' through the mask */
                double dpj = 0;
                for (int c = 0; c < Dh; c++) {
                    double value = v[(size_t)j * D + h * Dh + c];
                    if (K) {
                        value += rel.values[ref_bucket(j, pos, K) * Dh + c];
                        drelv[ref_bucket(j, pos, K) * Dh + c] += P[j] * drop[j] * gi[c];
                    }
                    dv[(size_t)j * D + h * Dh + c] += P[j] * drop[j] * gi[c];
                    dpj += gi[c] * value;
                }
                dP[j] = dpj * drop[j];
                dot_pd += dP[j] * P[j];
            }
            /* dS = P (dP - <dP, P>);  dq += dS (k + a^K) scale;  dk, da^K += dS q scale */
            for (int j = 0; j < n_k; j++) {
                double ds = P[j] * (dP[j] - dot_pd) * scale;
                if (ds == 0) continue;
                for (int c = 0; c < Dh; c++) {
                    double key = k[(size_t)j * D + h * Dh + c];
                    if (K) {
                        key += rel.keys[ref_bucket(j, pos, K) * Dh + c];
                        drelk[ref_bucket(j, pos, K) * Dh + c] += ds * qi[c];
                    }
                    dq[(size_t)i * D + h * Dh + c] += ds * key;
                    dk[(size_t)j * D + h * Dh + c] += ds * qi[c];
                }
            }
        }
    free(P);
    free(drop);
    free(dP);
}

/* The largest |a - b| over n values, against the largest |b|. */
static double rel_error(const float *a, const double *b, size_t n)
{
    double scale = 1e-30;
    for (size_t i = 0; i < n; i++) scale = fmax(scale, fabs(b[i]));
    return max_diff_fd(a, b, n) / scale;
}

/* Restricted attention over several query blocks (150 queries: blocks of
 * 64 and more), kept as bands and differentiated band by band, equals the
 * computation over whole masked matrices, forward and backward, with and
 * without relative positions and dropout; so does full and causal
 * attention, block by block. */
static void test_windowed_backward_equals_dense(void)
{
    enum { N = 150, H = 2, Dh = 4, D = H * Dh, K = 3, NR = (2 * K + 1) * Dh };
    tfm_rng rng;
    tfm_rng_seed(&rng, 77);
    static double q[N * D], k[N * D], v[N * D], g[N * D], rk[NR], rv[NR], ref[N * D];
    static double dq[N * D], dk[N * D], dv[N * D], drk[NR], drv[NR];
    fill_uniform(q, N * D, -1.5, 1.5, &rng);
    fill_uniform(k, N * D, -1.5, 1.5, &rng);
    fill_uniform(v, N * D, -1, 1, &rng);
    fill_uniform(g, N * D, -1, 1, &rng);
    fill_uniform(rk, NR, -1, 1, &rng);
    fill_uniform(rv, NR, -1, 1, &rng);
    float *qf = to_float(q, N * D), *kf = to_float(k, N * D), *vf = to_float(v, N * D);
    float *gf = to_float(g, N * D), *rkf = to_float(rk, NR), *rvf = to_float(rv, NR);
    static float out[N * D], fdq[N * D], fdk[N * D], fdv[N * D], fdrk[NR], fdrv[NR];
    static float att[H * N * N];
    static uint8_t keep[H * N * N];
    const int windows[] = {0, 1, 5, 70};
    for (int wi = 0; wi < 4; wi++)
        for (int causal = 0; causal < 2; causal++)
            for (int variant = 0; variant < 3; variant++) {
                const int clip = variant >= 1 ? K : 0;
                const float p = variant == 2 ? 0.2f : 0.0f;
                const attention_mask m = {0, causal, windows[wi]};
                const attention_relative rel = {rkf, rvf, clip};
                const attention_relative *relp = clip ? &rel : NULL;
                size_t ns = attention_scratch_size(N, N, m, clip);
                size_t nd = attention_dropout_scratch_size(N, N, m, clip);
                float *scratch = malloc((ns > nd ? ns : nd) * sizeof *scratch);
                float *bscratch =
                    malloc(attention_backward_scratch_size(N, N, m, clip) * sizeof *bscratch);
                attention_forward(out, D, qf, D, kf, D, vf, D, N, N, H, Dh, m, relp, scratch,
                                  att);
                if (p > 0)
                    attention_dropout_forward(out, D, vf, D, att, keep, N, N, H, Dh, m, relp, p,
                                              &rng, scratch);
                memset(fdq, 0, sizeof fdq);
                memset(fdk, 0, sizeof fdk);
                memset(fdv, 0, sizeof fdv);
                memset(fdrk, 0, sizeof fdrk);
                memset(fdrv, 0, sizeof fdrv);
                const attention_relative_grad drel = {fdrk, fdrv};
                attention_backward(fdq, fdk, fdv, &drel, gf, D, qf, D, kf, D, vf, D, att,
                                   p > 0 ? keep : NULL, p, N, N, H, Dh, m, relp, bscratch);
                const ref_relative rr = {rk, rv, clip};
                ref_attention(ref, q, D, k, v, D, N, N, H, Dh, m, rr, p > 0 ? keep : NULL, p);
                ref_attention_backward(dq, dk, dv, drk, drv, g, q, k, v, N, N, H, Dh, m, rr,
                                       p > 0 ? keep : NULL, p);
                double e = rel_error(out, ref, N * D);
                e = fmax(e, rel_error(fdq, dq, N * D));
                e = fmax(e, rel_error(fdk, dk, N * D));
                e = fmax(e, rel_error(fdv, dv, N * D));
                if (clip) e = fmax(e, fmax(rel_error(fdrk, drk, NR), rel_error(fdrv, drv, NR)));
                CHECK_MSG(e < 2e-5, "window %d causal %d relative %d dropout %g: off by %g",
                          windows[wi], causal, clip, (double)p, e);
                /* a narrow window keeps a band, O(window n) floats */
                if (windows[wi] == 1)
                    CHECK(attention_weights_size(N, N, H, m) == (size_t)H * N * (causal ? 2 : 3));
                free(scratch);
                free(bscratch);
            }
    free(qf);
    free(kf);
    free(vf);
    free(gf);
    free(rkf);
    free(rvf);
}

typedef struct embed_case {
    int N1, N2, D;
    const int32_t *ids1, *ids2;
    double *E, *P, *w1, *w2;
    int pos0_2;
} embed_case;

/* Two uses of one table (as a shared matrix is used by the source and the
 * target): a sentence at positions 0.. and rows all at position pos0_2. */
static double embed_objective(void *p)
{
    embed_case *c = p;
    double s = 0, scale = sqrt((double)c->D);
    for (int n = 0; n < c->N1; n++)
        for (int d = 0; d < c->D; d++)
            s += c->w1[n * c->D + d] * (c->E[c->ids1[n] * c->D + d] * scale + c->P[n * c->D + d]);
    for (int n = 0; n < c->N2; n++)
        for (int d = 0; d < c->D; d++)
            s += c->w2[n * c->D + d] *
                 (c->E[c->ids2[n] * c->D + d] * scale + c->P[c->pos0_2 * c->D + d]);
    return s;
}

static void test_embedding_backward(void)
{
    enum { V = 5, D = 4, NP = 8, N1 = 6, N2 = 3 };
    const int32_t ids1[N1] = {1, 3, 3, 0, 4, 1}, ids2[N2] = {3, 2, 3};
    double E[V * D], P[NP * D], w1[N1 * D], w2[N2 * D], ref[N1 * D];
    tfm_rng rng;
    tfm_rng_seed(&rng, 6);
    fill_uniform(E, V * D, -1, 1, &rng);
    fill_uniform(P, NP * D, -1, 1, &rng);
    fill_uniform(w1, N1 * D, -1, 1, &rng);
    fill_uniform(w2, N2 * D, -1, 1, &rng);
    float *Ef = to_float(E, V * D), *Pf = to_float(P, NP * D);
    float *w1f = to_float(w1, N1 * D), *w2f = to_float(w2, N2 * D);
    float out[N1 * D];
    embedding_forward(out, ids1, Ef, Pf, 0, 1, N1, D, -1);
    for (int n = 0; n < N1; n++)
        for (int d = 0; d < D; d++) ref[n * D + d] = E[ids1[n] * D + d] * 2 + P[n * D + d];
    CHECK(max_diff_fd(out, ref, N1 * D) < 1e-6);

    float dE[V * D] = {0}, dP[NP * D] = {0};
    embedding_backward(dE, dP, ids1, w1f, 0, 1, N1, D, -1);
    embedding_backward(dE, dP, ids2, w2f, 5, 0, N2, D, -1);
    embed_case c = {N1, N2, D, ids1, ids2, E, P, w1, w2, 5};
    CHECK_GRAD("dembed (two uses)", dE, E, V * D, embed_objective, &c);
    CHECK_GRAD("dpositions", dP, P, NP * D, embed_objective, &c);
    /* sinusoidal positions learn nothing: no table, same embedding gradient */
    float dE2[V * D] = {0};
    embedding_backward(dE2, NULL, ids1, w1f, 0, 1, N1, D, -1);
    embedding_backward(dE2, NULL, ids2, w2f, 5, 0, N2, D, -1);
    CHECK(memcmp(dE, dE2, sizeof dE) == 0);
    free(Ef);
    free(Pf);
    free(w1f);
    free(w2f);
}

typedef struct dropout_case {
    int n;
    double *x, *w, p;
    const uint8_t *keep;
} dropout_case;

static double dropout_objective(void *v)
{
    dropout_case *c = v;
    double s = 0;
    for (int i = 0; i < c->n; i++) s += c->w[i] * c->x[i] * c->keep[i] / (1 - c->p);
    return s;
}

static void test_dropout(void)
{
    enum { n = 41 };
    double x[n], w[n];
    tfm_rng rng;
    tfm_rng_seed(&rng, 7);
    fill_uniform(x, n, -1, 1, &rng);
    fill_uniform(w, n, -1, 1, &rng);
    float *xf = to_float(x, n), *wf = to_float(w, n);
    uint8_t keep[n];
    const float p = 0.25f;
    dropout_forward(xf, keep, n, p, &rng);
    int kept = 0;
    double worst = 0;
    for (int i = 0; i < n; i++) {
        CHECK(keep[i] == 0 || keep[i] == 1);
        kept += keep[i];
        worst = fmax(worst, fabs(xf[i] - x[i] * keep[i] / (1 - p)));
    }
    CHECK(worst < 1e-6);
    CHECK(kept > 0 && kept < n);
    float dx[n] = {0};
    dropout_backward(dx, wf, keep, n, p);
    dropout_case c = {n, x, w, p, keep};
    CHECK_GRAD("dx (fixed mask)", dx, x, n, dropout_objective, &c);

    /* the same seed draws the same mask; the rate is p */
    enum { BIG = 200000 };
    float *a = calloc(BIG, sizeof *a), *b = calloc(BIG, sizeof *b);
    uint8_t *ka = malloc(BIG), *kb = malloc(BIG);
    for (int i = 0; i < BIG; i++) a[i] = b[i] = 1;
    tfm_rng r1, r2;
    tfm_rng_seed(&r1, 99);
    tfm_rng_seed(&r2, 99);
    dropout_forward(a, ka, BIG, 0.1f, &r1);
    dropout_forward(b, kb, BIG, 0.1f, &r2);
    CHECK(memcmp(ka, kb, BIG) == 0 && memcmp(a, b, BIG * sizeof *a) == 0);
    long total = 0;
    for (int i = 0; i < BIG; i++) total += ka[i];
    CHECK_MSG(fabs(total / (double)BIG - 0.9) < 0.005, "kept %ld of %d", total, BIG);
    CHECK_NEAR(a[0] + a[1] + a[2] + a[3] + a[4], (ka[0] + ka[1] + ka[2] + ka[3] + ka[4]) / 0.9f,
               1e-5);
    /* p = 0: the identity, and no draw */
    tfm_rng before = r1;
    dropout_forward(a, NULL, BIG, 0.0f, &r1);
    CHECK(memcmp(&before, &r1, sizeof r1) == 0 && memcmp(a, b, BIG * sizeof *a) == 0);
    free(a);
    free(b);
    free(ka);
    free(kb);
    free(xf);
    free(wf);
}

/* ---- threads: bias sums and dropout streams -------------------------------------------- */

/* linear_backward's bias gradient (summed four columns at a time) equals a
 * plain loop over the rows, bit for bit, for a width with a ragged end. */
static void test_bias_sums(void)
{
    enum { N = 97, NI = 5, NO = 603 };
    tfm_rng rng;
    tfm_rng_seed(&rng, 81);
    float *x = malloc(N * NI * sizeof *x), *W = malloc(NO * NI * sizeof *W);
    float *dy = malloc(N * NO * sizeof *dy), *dW = calloc(NO * NI, sizeof *dW);
    float *db = malloc(NO * sizeof *db), *want = malloc(NO * sizeof *want);
    for (int i = 0; i < N * NI; i++) x[i] = tfm_rng_float(&rng) - 0.5f;
    for (int i = 0; i < NO * NI; i++) W[i] = tfm_rng_float(&rng) - 0.5f;
    for (int i = 0; i < N * NO; i++) dy[i] = 100.0f * (tfm_rng_float(&rng) - 0.5f);
    for (int o = 0; o < NO; o++) db[o] = want[o] = 0.25f * (float)o; /* accumulates onto this */
    linear_backward(NULL, dW, db, dy, x, W, N, NI, NO);
    for (int n = 0; n < N; n++)
        for (int o = 0; o < NO; o++) want[o] += dy[n * NO + o];
    CHECK(memcmp(db, want, NO * sizeof *db) == 0);
    free(x);
    free(W);
    free(dy);
    free(dW);
    free(db);
    free(want);
}

/* dropout_stream: the same seed and index give the same generator; another
 * index or seed another one. */
static void test_dropout_stream(void)
{
    tfm_rng a, b, c, d;
    dropout_stream(&a, 42, 7);
    dropout_stream(&b, 42, 7);
    dropout_stream(&c, 42, 8);
    dropout_stream(&d, 43, 7);
    int same_ab = 0, same_ac = 0, same_ad = 0;
    for (int i = 0; i < 64; i++) {
        uint64_t x = tfm_rng_u64(&a);
        same_ab += x == tfm_rng_u64(&b);
        same_ac += x == tfm_rng_u64(&c);
        same_ad += x == tfm_rng_u64(&d);
    }
    CHECK(same_ab == 64 && same_ac == 0 && same_ad == 0);
    /* neighbouring indices do not give shifted copies of one sequence */
    tfm_rng e, f;
    dropout_stream(&e, 1, 0);
    dropout_stream(&f, 1, 1);
    uint64_t first[8];
    for (int i = 0; i < 8; i++) first[i] = tfm_rng_u64(&e);
    int shared = 0;
    for (int i = 0; i < 64; i++) {
        uint64_t y = tfm_rng_u64(&f);
        for (int k = 0; k < 8; k++) shared += y == first[k];
    }
    CHECK(shared == 0);
}

typedef struct loss_case {
    int N, V;
    double *z, eps, scale;
    const int32_t *labels;
    int32_t ignore;
} loss_case;

/* scale * sum of fairseq's label-smoothed loss over the rows whose label is
 * not ignored, from the logits z: written from the formula in loss.c. */
static double ref_loss(const loss_case *c, double *row_loss, double *row_nll)
{
    double total = 0;
    for (int n = 0; n < c->N; n++) {
        const double *z = c->z + n * c->V;
        double mx = -INFINITY, sum = 0, smooth = 0;
        for (int v = 0; v < c->V; v++) mx = fmax(mx, z[v]);
        for (int v = 0; v < c->V; v++) sum += exp(z[v] - mx);
        double lse = mx + log(sum);
        for (int v = 0; v < c->V; v++) smooth -= z[v] - lse;
        double nll = -(z[c->labels[n]] - lse);
        double loss = (1 - c->eps) * nll + c->eps / c->V * smooth;
        if (c->labels[n] == c->ignore) loss = nll = 0;
        if (row_loss) row_loss[n] = loss;
        if (row_nll) row_nll[n] = nll;
        total += loss;
    }
    return c->scale * total;
}

static double loss_objective(void *p) { return ref_loss(p, NULL, NULL); }

static void test_label_smoothed_loss(void)
{
    enum { N = 5, V = 7 };
    const int32_t labels[N] = {3, 0, 6, 1, 3}; /* row 1 is padding (id 0) */
    const float epss[2] = {0.1f, 0.0f};
    for (int e = 0; e < 2; e++) {
        double z[N * V], loss[N], nll[N];
        tfm_rng rng;
        tfm_rng_seed(&rng, 8 + e);
        fill_uniform(z, N * V, -3, 3, &rng);
        float *lp = to_float(z, N * V);
        loss_case c = {N, V, z, epss[e], 0.7, labels, 0};
        double want = ref_loss(&c, loss, nll);

        log_softmax_forward(lp, N, V);
        double got_loss[N], got_nll[N], sum = 0;
        label_smoothed_loss_forward(got_loss, got_nll, lp, labels, N, V, epss[e], 0);
        for (int n = 0; n < N; n++) {
            CHECK_NEAR(got_loss[n], loss[n], 1e-5);
            CHECK_NEAR(got_nll[n], nll[n], 1e-5);
            sum += got_loss[n];
        }
        CHECK(got_loss[1] == 0 && got_nll[1] == 0);
        CHECK_NEAR(0.7 * sum, want, 1e-5);
        /* the smoothed loss is the cross-entropy against q = (1-eps) onehot + eps/V */
        double ce = 0;
        for (int v = 0; v < V; v++)
            ce -= ((v == labels[0] ? 1 - epss[e] : 0) + epss[e] / V) * lp[v];
        CHECK_NEAR(ce, got_loss[0], 1e-5);

        label_smoothed_loss_backward(lp, labels, N, V, epss[e], 0, 0.7f);
        CHECK_GRAD(e == 0 ? "dlogits (eps 0.1)" : "dlogits (eps 0)", lp, z, N * V,
                   loss_objective, &c);
        for (int v = 0; v < V; v++) CHECK(lp[1 * V + v] == 0.0f);
        free(lp);
    }
}

int main(void)
{
    RUN(test_linear_backward);
    RUN(test_check_can_fail);
    RUN(test_ffn_backward);
    RUN(test_layer_norm_backward);
    RUN(test_softmax_backward);
    RUN(test_attention_backward);
    RUN(test_windowed_backward_equals_dense);
    RUN(test_embedding_backward);
    RUN(test_dropout);
    RUN(test_bias_sums);
    RUN(test_dropout_stream);
    RUN(test_label_smoothed_loss);
    CHECK_DONE();
}
