/* test_gradients.c - the backward pass: every layer's backward and the whole
 * model's gradient against central finite differences in double precision
 * (relative position representations and restricted attention included);
 * restricted attention, kept and differentiated band by band, against the
 * same computation over whole masked matrices; the training forward against
 * the inference path; batching, padding, dropout, accumulation and argument
 * checks of the training API.
 *
 * How the double-precision check works.  The kernels compute in float (they
 * are cblas_sgemm calls), and finite differences of a float function are
 * mostly rounding noise.  So beside each kernel this file holds a plain-loop
 * reference of the same function in double (and one of the whole model,
 * written from the paper and the layer definitions, sharing no code with
 * lib/nn and lib/pass).  For each check:
 *   1. the float forward is compared with the double reference at the same
 *      point, so the two are the same function (to float rounding);
 *   2. the float backward's gradient is compared with central differences
 *      (f(x + h) - f(x - h)) / 2h of the double reference, h = 1e-5, whose
 *      error is ~1e-10: any disagreement beyond float rounding (~1e-6 of
 *      the gradient's scale; we allow 1e-4 relative plus a small absolute
 *      floor) is a wrong backward, not noise.
 * The objective of a layer check is sum(w * y) with random weights w, so the
 * gradient handed to the backward (dy) is w.
 *
 * Dropout: the layer checks replay a mask the kernel drew, in the double
 * reference.  The whole model is checked in double with dropout off; with
 * dropout on it is checked against float finite differences of
 * tfm_model_loss with the generator reseeded at every evaluation (so every
 * evaluation draws the same masks), with a step and tolerance sized for
 * float (see test_model_gradient_with_dropout).
 *
 * Threads: a whole batch on 1, 2 and 3 threads gives the same results bit
 * for bit (test_threads_bit_for_bit).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "testmodel.h"
#include "nn/layers.h"
#include "tfm/pass.h"
#include "core/chunks.h"
#include "pass/batch.h"

/* The sanitizer build (make check's build/asan) runs this file's double
 * references and the passes some five to ten times slower; there the
 * checks that repeat over many points or cases do fewer (each place says
 * what the rest still covers). */

/* ---- helpers ------------------------------------------------------------------ */

static void fill_uniform(double *x, size_t n, double lo, double hi, tfm_rng *rng)
{
    for (size_t i = 0; i < n; i++) x[i] = lo + (hi - lo) * tfm_rng_double(rng);
}

/* The float nearest each double, and the double of each float back, so
 * float and double versions start from exactly the same point. */
static float *to_float(double *x, size_t n)
{
    float *f = malloc((n ? n : 1) * sizeof *f);
    for (size_t i = 0; i < n; i++) {
        f[i] = (float)x[i];
        x[i] = f[i];
    }
    return f;
}

static double max_abs(const float *x, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs((double)x[i]));
    return m;
}

static double max_diff_fd(const float *a, const double *b, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (!(d <= m)) m = d;
    }
    return m;
}

static double dot(const double *a, const double *b, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

typedef double (*objective_fn)(void *ctx);

enum { ALL_POINTS = 0 };
#define FD_STEP 1e-5

/* Where a finite-difference check was worst. */
typedef struct fd_result {
    double ratio;    /* max over points of |analytic - fd| / (rtol |fd| + atol); <= 1 passes */
    size_t at;
    double analytic, fd;
    size_t points;
} fd_result;

/* Central differences of f with respect to x[i] (x restored after), against
 * analytic[i], for all i in [0, n) or, when max_points is not 0 and n is
 * larger, for max_points + 1 indices: the index of the largest analytic
 * value, the first and the last, and max_points - 2 drawn from seed. */
static fd_result fd_compare(const float *analytic, double *x, size_t n, objective_fn f,
                            void *ctx, double rtol, double atol, size_t max_points, uint64_t seed)
{
    fd_result r = {0, 0, 0, 0, 0};
    tfm_rng rng;
    tfm_rng_seed(&rng, seed);
    size_t argmax = 0;
    for (size_t i = 1; i < n; i++)
        if (fabs(analytic[i]) > fabs(analytic[argmax])) argmax = i;
    bool sample = max_points && n > max_points;
    size_t count = sample ? max_points + 1 : n;
    for (size_t k = 0; k < count; k++) {
        size_t i = !sample ? k
                   : k == 0 ? argmax
                   : k == 1 ? 0
                   : k == 2 ? n - 1
                            : (size_t)tfm_rng_below(&rng, n);
        double keep = x[i];
        x[i] = keep + FD_STEP;
        double fp = f(ctx);
        x[i] = keep - FD_STEP;
        double fm = f(ctx);
        x[i] = keep;
        double fd = (fp - fm) / (2 * FD_STEP);
        double ratio = fabs(analytic[i] - fd) / (rtol * fabs(fd) + atol);
        if (!(ratio <= r.ratio)) { /* NaN is the worst */
            r.ratio = ratio;
            r.at = i;
            r.analytic = analytic[i];
            r.fd = fd;
        }
        r.points++;
    }
    return r;
}

/* The layer checks' tolerance: 1e-4 relative, plus 1e-5 of the tensor's
 * largest gradient (float rounding of sums of terms of that size). */
#define CHECK_GRAD(what, grad, x, n, f, ctx)                                                \
    do {                                                                                   \
        fd_result r_ = fd_compare((grad), (x), (n), (f), (ctx), 1e-4,                      \
                                  1e-5 * max_abs((grad), (n)) + 1e-9, ALL_POINTS, 0);       \
        CHECK_MSG(r_.ratio <= 1, "%s[%zu]: backward %.9g, finite difference %.9g", (what), \
                  r_.at, r_.analytic, r_.fd);                                              \
    } while (0)

/* ---- double-precision references of the layers ---------------------------------------- */

/* out [n, n_out] = in [n, n_in] W^T + b; W: [n_out, n_in]; b may be NULL */
static void ref_linear(double *out, const double *in, int n, int n_in, int n_out,
                       const double *W, const double *b)
{
    /* row pointers: the sums in the same order, with less of the sanitizer
     * build's checks on index arithmetic in the loop that takes most of
     * the whole-model checks' time */
    for (int i = 0; i < n; i++) {
        const double *x = in + (size_t)i * n_in;
        for (int o = 0; o < n_out; o++) {
            const double *w = W + (size_t)o * n_in;
            double s = b ? b[o] : 0;
            for (const double *xk = x, *wk = w, *end = x + n_in; xk < end; xk++, wk++)
                s += *xk * *wk;
            out[(size_t)i * n_out + o] = s;
        }
    }
}

/* out, in: [n, D] (may be the same) */
static void ref_layer_norm(double *out, const double *in, int n, int D, const double *w,
                           const double *b, double eps)
{
    for (int i = 0; i < n; i++) {
        double m = 0, v = 0;
        for (int d = 0; d < D; d++) m += in[i * D + d];
        m /= D;
        for (int d = 0; d < D; d++) v += (in[i * D + d] - m) * (in[i * D + d] - m);
        v /= D;
        double s = 1 / sqrt(v + eps);
        for (int d = 0; d < D; d++) out[i * D + d] = (in[i * D + d] - m) * s * w[d] + b[d];
    }
}

/* out [n, D] = relu(in W1^T + b1) W2^T + b2 */
/* act: relu, or x sigmoid(k x) (swish k = 1, Marian's gelu k = 1.702) */
static void ref_ffn_act(double *out, const double *in, int n, int D, int F, const double *w1,
                        const double *b1, const double *w2, const double *b2, tfm_activation act)
{
    double *h = malloc((size_t)n * F * sizeof *h);
    ref_linear(h, in, n, D, F, w1, b1);
    const double k = act == TFM_ACT_GELU_SIGMOID ? (double)1.702f : 1.0;
    for (int i = 0; i < n * F; i++)
        h[i] = act == TFM_ACT_RELU ? (h[i] > 0 ? h[i] : 0) : h[i] / (1.0 + exp(-k * h[i]));
    ref_linear(out, h, n, F, D, w2, b2);
    free(h);
}

static void ref_ffn(double *out, const double *in, int n, int D, int F, const double *w1,
                    const double *b1, const double *w2, const double *b2)
{
    ref_ffn_act(out, in, n, D, F, w1, b1, w2, b2, TFM_ACT_RELU);
}

/* Does query i (at position q_pos + i) see key j?  Written from the rule in
 * layers.h: causal keys up to the query; a window of r keys on each side
 * (before only, when causal). */
static bool ref_visible(attention_mask m, int i, int j)
{
    int pos = m.q_pos + i;
    if (m.causal && j > pos) return false;
    if (m.window > 0 && (m.causal ? j < pos - m.window : abs(j - pos) > m.window)) return false;
    return true;
}

/* Relative position tables in double: a^K and a^V [2K+1, Dh], K = clip
 * (0: none, the tables are then not read). */
typedef struct ref_relative {
    const double *keys, *values;
    int clip;
} ref_relative;

/* The row of the tables for key j seen from query position pos: Shaw et
 * al.'s clip(j - pos, -K, K), shifted to 0 .. 2K. */
static int ref_bucket(int j, int pos, int K)
{
    int d = j - pos;
    return K + (d < -K ? -K : d > K ? K : d);
}

/* out [n_q, H*Dh] (rows H*Dh apart): per head softmax(q (k + a^K)^T /
 * sqrt(Dh)), masked, dropped out with keep (NULL: none; laid out as the
 * kernel keeps it, [H, n_q, band width]) and rate p, times v + a^V.  q rows
 * ldq apart; k and v rows ldk apart. */
static void ref_attention(double *out, const double *q, int ldq, const double *k,
                          const double *v, int ldk, int n_q, int n_k, int H, int Dh,
                          attention_mask m, ref_relative rel, const uint8_t *keep, double p)
{
    const int D = H * Dh, K = rel.clip, width = attention_band_width(n_k, m);
    double *a = malloc(((size_t)n_k + 1) * sizeof *a);
    for (int h = 0; h < H; h++)
        for (int i = 0; i < n_q; i++) {
            const int pos = m.q_pos + i;
            double mx = -INFINITY, sum = 0;
            for (int j = 0; j < n_k; j++) {
                a[j] = -INFINITY;
                if (!ref_visible(m, i, j)) continue;
                double s = 0;
                for (int c = 0; c < Dh; c++) {
                    double key = k[j * ldk + h * Dh + c];
                    if (K) key += rel.keys[ref_bucket(j, pos, K) * Dh + c];
                    s += q[i * ldq + h * Dh + c] * key;
                }
                a[j] = s / sqrt((double)Dh);
                mx = fmax(mx, a[j]);
            }
            for (int j = 0; j < n_k; j++) {
                a[j] = a[j] == -INFINITY ? 0 : exp(a[j] - mx);
                sum += a[j];
            }
            const int first = attention_band_first(m, i, n_k);
            for (int j = 0; j < n_k; j++) {
                a[j] = sum > 0 ? a[j] / sum : 0;
                if (keep && a[j] != 0)
                    a[j] *= keep[((size_t)h * n_q + i) * width + (j - first)] / (1 - p);
            }
            for (int c = 0; c < Dh; c++) {
                double o = 0;
                for (int j = 0; j < n_k; j++) {
                    double value = v[j * ldk + h * Dh + c];
                    if (K) value += rel.values[ref_bucket(j, pos, K) * Dh + c];
                    o += a[j] * value;
                }
                out[i * D + h * Dh + c] = o;
            }
        }
    free(a);
}

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

/* ---- a double-precision reference of the whole model ------------------------------------- */

/* The parameters as doubles, in the layout of m->data: the tensor at float
 * pointer ptr of m->params is at TH(r, ptr). */
typedef struct ref_model {
    const tfm_model *m;
    double *theta;
    const tfm_pair_batch *batch;
} ref_model;

#define TH(r, ptr) ((r)->theta + ((ptr) - (r)->m->data))

/* x [n, D] = embeddings * sqrt(D) + positions (from the paper's formula,
 * or the learned table when there is one, or none for relative positions
 * alone) */
static void ref_embed(const ref_model *r, double *x, const int32_t *ids, int n,
                      const float *table, const float *learned)
{
    const tfm_config *c = &r->m->config;
    const int D = c->d_model;
    /* the decoder's <s> is a zero vector when it starts from zeros */
    const int32_t zero_id = table == r->m->params.tgt_embed && c->decoder_start_zero ? c->bos_id
                                                                                     : -1;
    for (int i = 0; i < n; i++)
        for (int d = 0; d < D; d++) {
            /* Marian's layout: sines of the D/2 frequencies, then their cosines */
            const bool concat = c->positions == TFM_POS_SINUSOIDAL_CONCAT;
            const int k = concat ? d % (D / 2) : d / 2;
            const bool sine = concat ? d < D / 2 : d % 2 == 0;
            const double angle = i / pow(10000.0, 2.0 * k / D);
            double pe = c->positions == TFM_POS_NONE ? 0
                        : learned ? TH(r, learned)[i * D + d]
                        : sine ? sin(angle) : cos(angle);
            const double e = ids[i] == zero_id ? 0 : TH(r, table)[ids[i] * D + d];
            x[i * D + d] = e * sqrt((double)D) + pe;
        }
}

/* Marian's LayerNorm of the embeddings x [n, D] in place, when the model has
 * one (--transformer-postprocess-emb nd; the dropout after it is off here). */
static void ref_embed_norm(const ref_model *r, double *x, int n, const tfm_layer_norm *ln)
{
    const tfm_config *c = &r->m->config;
    if (c->embedding_layer_norm)
        ref_layer_norm(x, x, n, c->d_model, TH(r, ln->weight), TH(r, ln->bias),
                       c->layer_norm_eps);
}

/* The sublayer's input: LN(x) into y (pre-norm) or x. */
static const double *ref_sub_in(const ref_model *r, double *y, const double *x, int n,
                                const tfm_layer_norm *ln)
{
    const tfm_config *c = &r->m->config;
    if (!c->pre_norm) return x;
    ref_layer_norm(y, x, n, c->d_model, TH(r, ln->weight), TH(r, ln->bias), c->layer_norm_eps);
    return y;
}

/* x = x + sub (pre-norm) or LN(x + sub) (post-norm) */
static void ref_sub_out(const ref_model *r, double *x, const double *sub, int n,
                        const tfm_layer_norm *ln)
{
    const tfm_config *c = &r->m->config;
    for (int i = 0; i < n * c->d_model; i++) x[i] += sub[i];
    if (!c->pre_norm)
        ref_layer_norm(x, x, n, c->d_model, TH(r, ln->weight), TH(r, ln->bias),
                       c->layer_norm_eps);
}

/* out [nq, D]: multi-head attention of queries from qin [nq, D] over keys
 * and values from kvin [nk, D], with separate q, k, v projections. */
static void ref_mha(const ref_model *r, double *out, const double *qin, int nq,
                    const double *kvin, int nk, const tfm_attention *a, attention_mask mask)
{
    const int D = r->m->config.d_model, H = r->m->config.n_heads;
    const size_t rows = (size_t)(nq > nk ? nq : nk) + 1;
    double *q = malloc(rows * D * sizeof *q), *k = malloc(rows * D * sizeof *k);
    double *v = malloc(rows * D * sizeof *v), *ctx = malloc(rows * D * sizeof *ctx);
    ref_linear(q, qin, nq, D, D, TH(r, a->q_proj.weight), TH(r, a->q_proj.bias));
    ref_linear(k, kvin, nk, D, D, TH(r, a->k_proj.weight), TH(r, a->k_proj.bias));
    ref_linear(v, kvin, nk, D, D, TH(r, a->v_proj.weight), TH(r, a->v_proj.bias));
    ref_relative rel = {NULL, NULL, 0};
    if (a->relative_keys)
        rel = (ref_relative){TH(r, a->relative_keys), TH(r, a->relative_values),
                             r->m->config.relative_positions};
    ref_attention(ctx, q, D, k, v, D, nq, nk, H, D / H, mask, rel, NULL, 0);
    ref_linear(out, ctx, nq, D, D, TH(r, a->out_proj.weight), TH(r, a->out_proj.bias));
    free(q);
    free(k);
    free(v);
    free(ctx);
}

static void ref_ffn_layer(const ref_model *r, double *out, const double *in, int n,
                          const tfm_linear *fc1, const tfm_linear *fc2)
{
    const tfm_config *c = &r->m->config;
    ref_ffn_act(out, in, n, c->d_model, c->d_ff, TH(r, fc1->weight), TH(r, fc1->bias),
                TH(r, fc2->weight), TH(r, fc2->bias), c->activation);
}

/* The label-smoothed loss of one pair (dropout off); token_logp: [T + 1]
 * receives log p(label) (0 for a <pad> label), or NULL. */
static double ref_pair_loss(const ref_model *r, const int32_t *src, int S, const int32_t *tgt,
                            int Tn, double *token_logp)
{
    const tfm_config *c = &r->m->config;
    const tfm_params *p = &r->m->params;
    const int D = c->d_model, V = c->tgt_vocab_size, T = Tn + 1;
    const size_t rows = (size_t)(S > T ? S : T) + 1;
    double *x = malloc(rows * D * sizeof *x), *y = malloc(rows * D * sizeof *y);
    double *sub = malloc(rows * D * sizeof *sub), *enc = malloc(rows * D * sizeof *enc);
    double *logp = malloc((size_t)V * sizeof *logp);
    int32_t *in_ids = malloc((size_t)T * sizeof *in_ids);

    ref_embed(r, x, src, S, p->src_embed, p->src_positions);
    ref_embed_norm(r, x, S, &p->encoder_embedding_norm);
    for (int l = 0; l < c->n_encoder_layers; l++) {
        const tfm_encoder_layer *L = &p->encoder_layers[l];
        const double *in = ref_sub_in(r, y, x, S, &L->self_attn_layer_norm);
        ref_mha(r, sub, in, S, in, S, &L->self_attn,
                (attention_mask){0, false, c->attention_window});
        ref_sub_out(r, x, sub, S, &L->self_attn_layer_norm);
        in = ref_sub_in(r, y, x, S, &L->final_layer_norm);
        ref_ffn_layer(r, sub, in, S, &L->fc1, &L->fc2);
        ref_sub_out(r, x, sub, S, &L->final_layer_norm);
    }
    if (c->pre_norm)
        ref_layer_norm(x, x, S, D, TH(r, p->encoder_layer_norm.weight),
                       TH(r, p->encoder_layer_norm.bias), c->layer_norm_eps);
    memcpy(enc, x, (size_t)S * D * sizeof *enc);

    in_ids[0] = c->bos_id;
    for (int t = 1; t < T; t++) in_ids[t] = tgt[t - 1];
    ref_embed(r, x, in_ids, T, p->tgt_embed, p->tgt_positions);
    ref_embed_norm(r, x, T, &p->decoder_embedding_norm);
    for (int l = 0; l < c->n_decoder_layers; l++) {
        const tfm_decoder_layer *L = &p->decoder_layers[l];
        const double *in = ref_sub_in(r, y, x, T, &L->self_attn_layer_norm);
        ref_mha(r, sub, in, T, in, T, &L->self_attn,
                (attention_mask){0, true, c->attention_window});
        ref_sub_out(r, x, sub, T, &L->self_attn_layer_norm);
        in = ref_sub_in(r, y, x, T, &L->encoder_attn_layer_norm);
        ref_mha(r, sub, in, T, enc, S, &L->encoder_attn, (attention_mask){0, false, 0});
        ref_sub_out(r, x, sub, T, &L->encoder_attn_layer_norm);
        in = ref_sub_in(r, y, x, T, &L->final_layer_norm);
        ref_ffn_layer(r, sub, in, T, &L->fc1, &L->fc2);
        ref_sub_out(r, x, sub, T, &L->final_layer_norm);
    }
    if (c->pre_norm)
        ref_layer_norm(x, x, T, D, TH(r, p->decoder_layer_norm.weight),
                       TH(r, p->decoder_layer_norm.bias), c->layer_norm_eps);

    double loss = 0, eps = c->label_smoothing;
    for (int t = 0; t < T; t++) {
        int32_t label = t < Tn ? tgt[t] : c->eos_id;
        ref_linear(logp, x + t * D, 1, D, V, TH(r, p->output_proj),
                   p->output_bias ? TH(r, p->output_bias) : NULL);
        double mx = -INFINITY, sum = 0, smooth = 0;
        for (int v = 0; v < V; v++) mx = fmax(mx, logp[v]);
        for (int v = 0; v < V; v++) sum += exp(logp[v] - mx);
        const double lse = mx + log(sum);
        for (int v = 0; v < V; v++) {
            logp[v] -= lse;
            smooth -= logp[v];
        }
        if (token_logp) token_logp[t] = label == c->pad_id ? 0 : logp[label];
        if (label == c->pad_id) continue;
        loss += (1 - eps) * -logp[label] + eps / V * smooth;
    }
    free(x);
    free(y);
    free(sub);
    free(enc);
    free(logp);
    free(in_ids);
    return loss;
}

static double ref_batch_loss(void *p)
{
    const ref_model *r = p;
    const tfm_pair_batch *b = r->batch;
    double loss = 0;
    for (int i = 0; i < b->B; i++)
        loss += ref_pair_loss(r, b->src[i], b->src_lens[i], b->tgt[i], b->tgt_lens[i], NULL);
    return loss;
}

/* ---- models and batches for the whole-model tests ------------------------------------------ */

/* D 8, 2 heads, F 16, vocabulary 12 (11 on the source side when not
 * shared), 8 positions; dropout off unless a test turns it on. */
static tfm_config tiny_config(bool pre_norm, bool shared, tfm_pos_kind pos, int window,
                              int layers)
{
    tfm_config c;
    tfm_config_preset("tiny", &c, NULL);
    c.d_model = 8;
    c.d_ff = 16;
    c.n_heads = 2;
    c.n_encoder_layers = layers;
    c.n_decoder_layers = layers;
    c.max_positions = 8;
    c.positions = pos;
    c.pre_norm = pre_norm;
    c.shared_embeddings = shared;
    c.attention_window = window;
    c.src_vocab_size = shared ? 12 : 11;
    c.tgt_vocab_size = 12;
    c.dropout = 0;
    c.attention_dropout = 0;
    return c;
}

enum { MAX_PAIRS = 6, MAX_LEN = 8 };

/* A batch that owns its ids. */
typedef struct test_batch {
    int32_t src[MAX_PAIRS][MAX_LEN], tgt[MAX_PAIRS][MAX_LEN];
    const int32_t *srcp[MAX_PAIRS], *tgtp[MAX_PAIRS];
    int src_lens[MAX_PAIRS], tgt_lens[MAX_PAIRS];
    tfm_pair_batch b;
} test_batch;

/* Pairs of the given lengths with ids drawn from the non-special ones. */
static void make_batch(test_batch *t, const tfm_config *c, int B, const int *src_lens,
                       const int *tgt_lens, uint64_t seed)
{
    tfm_rng rng;
    tfm_rng_seed(&rng, seed);
    memset(t, 0, sizeof *t);
    for (int b = 0; b < B; b++) {
        t->src_lens[b] = src_lens[b];
        t->tgt_lens[b] = tgt_lens[b];
        for (int i = 0; i < MAX_LEN; i++) {
            t->src[b][i] = 4 + (int32_t)tfm_rng_below(&rng, (uint64_t)c->src_vocab_size - 4);
            t->tgt[b][i] = 4 + (int32_t)tfm_rng_below(&rng, (uint64_t)c->tgt_vocab_size - 4);
        }
        t->srcp[b] = t->src[b];
        t->tgtp[b] = t->tgt[b];
    }
    t->b = (tfm_pair_batch){B, t->srcp, t->src_lens, t->tgtp, t->tgt_lens};
}

/* One pair of t as a batch of its own. */
static tfm_pair_batch single(const test_batch *t, int b)
{
    return (tfm_pair_batch){1, &t->srcp[b], &t->src_lens[b], &t->tgtp[b], &t->tgt_lens[b]};
}

/* The tensors of a model, for walking gradients tensor by tensor. */
typedef struct tensor_list {
    const float *base;
    int n;
    char names[128][96];
    size_t off[128], size[128];
} tensor_list;

static void collect_tensor(void *ctx, const char *name, int ndim, const int64_t *shape,
                           float *data)
{
    tensor_list *l = ctx;
    if (l->n >= 128) return;
    size_t n = 1;
    for (int i = 0; i < ndim; i++) n *= (size_t)shape[i];
    snprintf(l->names[l->n], sizeof l->names[0], "%s", name);
    l->off[l->n] = (size_t)(data - l->base);
    l->size[l->n] = n;
    l->n++;
}

/* The whole model's gradient against double finite differences of the
 * reference, every tensor: all its points when it has up to MODEL_FD_POINTS,
 * else its largest, first and last and MODEL_FD_POINTS - 2 drawn.  Under
 * the sanitizers 3 rather than 24 (these points, two evaluations of the
 * reference each, were half of test_gradients' time there): every tensor
 * of every model still checked at four points, its largest gradient, both
 * ends and one drawn (all of a tensor of 3). */
#define MODEL_FD_POINTS (SANITIZED ? 3 : 24)
static void check_model_gradient(const char *name, const tfm_config *c, uint64_t seed)
{
    tfm_model *m = test_nudged_model(c, seed);
    if (!m) return;
    const int src_lens[3] = {4, 3, 5}, tgt_lens[3] = {3, 5, 0};
    test_batch t;
    make_batch(&t, c, 3, src_lens, tgt_lens, seed + 1);

    tfm_pass_workspace *ws;
    tfm_error err;
    CHECK(tfm_pass_workspace_create(m, &ws, &err) == TFM_OK);
    size_t n = tfm_params_count(c);
    float *grads = calloc(n, sizeof *grads);
    tfm_loss_sums sums;
    tfm_status st = tfm_model_forward_backward(ws, &t.b, NULL, 1.0f, grads, &sums, &err);
    CHECK_MSG(st == TFM_OK, "%s: %s", name, err.msg);

    double *theta = malloc(n * sizeof *theta);
    for (size_t i = 0; i < n; i++) theta[i] = m->data[i];
    ref_model r = {m, theta, &t.b};
    double want = ref_batch_loss(&r);
    CHECK_MSG(fabs(sums.loss - want) <= 1e-5 * want, "%s: loss %.9g, reference %.9g", name,
              sums.loss, want);
    CHECK(sums.n_tokens == 4 + 6 + 1);

    tensor_list *tl = calloc(1, sizeof *tl);
    tl->base = m->data;
    tfm_params_visit(c, &m->params, collect_tensor, tl);
    double gmax = max_abs(grads, n);
    CHECK(gmax > 0);
    double worst = 0;
    for (int i = 0; i < tl->n; i++) {
        fd_result res = fd_compare(grads + tl->off[i], theta + tl->off[i], tl->size[i],
                                   ref_batch_loss, &r, 1e-3, 1e-5 * gmax, MODEL_FD_POINTS,
                                   seed + (uint64_t)i);
        worst = fmax(worst, res.ratio);
        CHECK_MSG(res.ratio <= 1, "%s: %s[%zu]: backward %.9g, finite difference %.9g", name,
                  tl->names[i], res.at, res.analytic, res.fd);
    }
    if (getenv("TFM_TEST_VERBOSE")) printf("%s: worst ratio %.3g\n", name, worst);
    free(tl);
    free(theta);
    free(grads);
    tfm_pass_workspace_free(ws);
    tfm_model_free(m);
}

static void test_model_gradient(void)
{
    tfm_config c = tiny_config(false, true, TFM_POS_SINUSOIDAL, 0, 1);
    check_model_gradient("post-norm, shared, sinusoidal", &c, 21);
    c = tiny_config(true, false, TFM_POS_LEARNED, 0, 1);
    check_model_gradient("pre-norm, unshared, learned", &c, 22);
    c = tiny_config(false, false, TFM_POS_LEARNED, 1, 2);
    check_model_gradient("post-norm, unshared, learned, window 1, 2 layers", &c, 23);
    c = tiny_config(true, true, TFM_POS_SINUSOIDAL, 2, 2);
    check_model_gradient("pre-norm, shared, sinusoidal, window 2, 2 layers", &c, 24);
    /* relative positions clipped at 2 (pairs up to 5 apart), alone and with
     * absolute ones and a window */
    c = tiny_config(false, true, TFM_POS_NONE, 0, 1);
    c.relative_positions = 2;
    check_model_gradient("post-norm, shared, relative 2 alone", &c, 25);
    c = tiny_config(true, false, TFM_POS_SINUSOIDAL, 1, 2);
    c.relative_positions = 3;
    check_model_gradient("pre-norm, unshared, sinusoidal + relative 3, window 1, 2 layers", &c,
                         26);
    /* A vocabulary per side: the decoder's input embedding is the output
     * projection, whose gradient is the sum of both uses. */
    c = tiny_config(false, false, TFM_POS_NONE, 0, 1);
    c.shared_decoder_embeddings = true;
    c.relative_positions = 2;
    check_model_gradient("post-norm, decoder embeddings shared, relative 2", &c, 27);
    /* the variants of imported models that train: an output bias, a decoder
     * starting from zeros (the <s> row learns nothing), Marian's sinusoids */
    c = tiny_config(false, false, TFM_POS_SINUSOIDAL_CONCAT, 0, 2);
    c.shared_decoder_embeddings = true;
    c.output_bias = c.decoder_start_zero = true;
    check_model_gradient("post-norm, output bias, zero start, concatenated sinusoids", &c, 28);
    /* and the gated activations of OPUS-MT models, post- and pre-norm */
    c.activation = TFM_ACT_SWISH;
    check_model_gradient("post-norm, swish, output bias, zero start", &c, 29);
    c = tiny_config(true, true, TFM_POS_SINUSOIDAL_CONCAT, 0, 2);
    c.activation = TFM_ACT_GELU_SIGMOID;
    c.output_bias = c.decoder_start_zero = true;
    check_model_gradient("pre-norm, gelu-sigmoid, shared, output bias, zero start", &c, 30);
    /* Marian's LayerNorm of the embeddings (the postnorm-gelu-untied fixture's
     * shape: nothing tied), and pre-norm with swish and shared embeddings */
    c = tiny_config(false, false, TFM_POS_SINUSOIDAL_CONCAT, 0, 2);
    c.activation = TFM_ACT_GELU_SIGMOID;
    c.output_bias = c.decoder_start_zero = c.embedding_layer_norm = true;
    check_model_gradient("post-norm, gelu-sigmoid, embedding LayerNorm, untied", &c, 35);
    c = tiny_config(true, true, TFM_POS_SINUSOIDAL_CONCAT, 0, 2);
    c.activation = TFM_ACT_SWISH;
    c.output_bias = c.decoder_start_zero = c.embedding_layer_norm = true;
    check_model_gradient("pre-norm, swish, embedding LayerNorm, shared", &c, 36);
    c = tiny_config(false, false, TFM_POS_LEARNED, 0, 1);
    c.shared_decoder_embeddings = true;
    c.embedding_layer_norm = true;
    check_model_gradient("post-norm, relu, embedding LayerNorm, decoder embeddings shared, "
                         "learned", &c, 37);
}

/* With dropout on, the gradient of the loss under fixed masks, against
 * float finite differences of tfm_model_loss (the generator reseeded for
 * each evaluation, so each draws the same masks).  Float forward noise is
 * ~1e-6 of the loss, so the step is 3e-3 and the tolerance 3% plus 1% of
 * the largest gradient: loose, but a mask missing from one backward path
 * changes gradients by O(1). */
static void check_model_gradient_with_dropout(const char *name, const tfm_config *cp)
{
    tfm_config c = *cp;
    c.dropout = 0.3f;
    c.attention_dropout = 0.2f;
    c.activation_dropout = 0.25f;
    tfm_model *m = test_nudged_model(&c, 31);
    if (!m) return;
    const int src_lens[3] = {4, 3, 5}, tgt_lens[3] = {3, 4, 2};
    test_batch t;
    make_batch(&t, &c, 3, src_lens, tgt_lens, 32);
    tfm_pass_workspace *ws;
    tfm_error err;
    CHECK(tfm_pass_workspace_create(m, &ws, &err) == TFM_OK);
    size_t n = tfm_params_count(&c);
    float *grads = calloc(n, sizeof *grads);
    tfm_rng rng;
    tfm_rng_seed(&rng, 33);
    tfm_loss_sums with, without;
    CHECK(tfm_model_forward_backward(ws, &t.b, &rng, 1.0f, grads, &with, &err) == TFM_OK);
    CHECK(tfm_model_loss(ws, &t.b, false, NULL, &without, NULL, NULL, &err) == TFM_OK);
    CHECK(fabs(with.loss - without.loss) > 1e-3); /* dropout did something */

    tensor_list *tl = calloc(1, sizeof *tl);
    tl->base = m->data;
    tfm_params_visit(&c, &m->params, collect_tensor, tl);
    const double gmax = max_abs(grads, n), h = 3e-3;
    tfm_rng pick;
    tfm_rng_seed(&pick, 34);
    int bad = 0, points = 0;
    for (int i = 0; i < tl->n; i++) {
        const float *g = grads + tl->off[i];
        size_t argmax = 0;
        for (size_t j = 1; j < tl->size[i]; j++)
            if (fabs(g[j]) > fabs(g[argmax])) argmax = j;
        for (int k = 0; k < 4; k++) {
            size_t j = k == 0 ? argmax : (size_t)tfm_rng_below(&pick, tl->size[i]);
            float *x = m->data + tl->off[i] + j, keep = *x;
            double f[2], at[2];
            for (int s = 0; s < 2; s++) {
                *x = keep + (s ? -1 : 1) * (float)h;
                at[s] = *x; /* the point float can represent */
                tfm_rng_seed(&rng, 33);
                tfm_loss_sums sm;
                tfm_model_loss(ws, &t.b, true, &rng, &sm, NULL, NULL, &err);
                f[s] = sm.loss;
            }
            *x = keep;
            double fd = (f[0] - f[1]) / (at[0] - at[1]);
            points++;
            if (fabs(g[j] - fd) > 0.03 * fabs(fd) + 0.01 * gmax) {
                if (bad++ < 5)
                    printf("  %s: %s[%zu]: backward %.6g, finite difference %.6g\n", name,
                           tl->names[i], j, g[j], fd);
            }
        }
    }
    CHECK_MSG(bad == 0, "%s: %d of %d points off", name, bad, points);
    free(tl);
    free(grads);
    tfm_pass_workspace_free(ws);
    tfm_model_free(m);
}

static void test_model_gradient_with_dropout(void)
{
    tfm_config c = tiny_config(false, true, TFM_POS_LEARNED, 0, 1);
    check_model_gradient_with_dropout("learned positions", &c);
    c = tiny_config(false, true, TFM_POS_NONE, 2, 1);
    c.relative_positions = 2;
    check_model_gradient_with_dropout("relative 2 alone, window 2", &c);
    /* activation dropout after a gated activation: its mask kept per layer */
    c = tiny_config(false, true, TFM_POS_LEARNED, 0, 2);
    c.activation = TFM_ACT_SWISH;
    check_model_gradient_with_dropout("swish, 2 layers", &c);
    c = tiny_config(true, false, TFM_POS_SINUSOIDAL_CONCAT, 0, 1);
    c.activation = TFM_ACT_GELU_SIGMOID;
    c.output_bias = c.decoder_start_zero = true;
    check_model_gradient_with_dropout("pre-norm, gelu-sigmoid", &c);
    /* and Marian's LayerNorm of the embeddings before their dropout */
    c = tiny_config(false, false, TFM_POS_SINUSOIDAL_CONCAT, 0, 2);
    c.activation = TFM_ACT_GELU_SIGMOID;
    c.output_bias = c.decoder_start_zero = c.embedding_layer_norm = true;
    check_model_gradient_with_dropout("gelu-sigmoid, embedding LayerNorm, untied", &c);
    c = tiny_config(true, true, TFM_POS_LEARNED, 0, 1);
    c.activation = TFM_ACT_SWISH;
    c.embedding_layer_norm = true;
    check_model_gradient_with_dropout("pre-norm, swish, embedding LayerNorm", &c);
}

/* ---- the training forward against the inference path, batching, the API ------------------- */

/* tfm_model_loss's per-token log-probabilities (dropout off) equal those of
 * the encoder + tfm_decoder_forward_full, pair by pair. */
static void check_against_inference(const char *name, const tfm_config *c, uint64_t seed)
{
    tfm_model *m = test_nudged_model(c, seed);
    if (!m) return;
    const int V = c->tgt_vocab_size, D = c->d_model;
    const int src_lens[4] = {5, 0, 7, 2}, tgt_lens[4] = {4, 3, 6, 0};
    test_batch t;
    make_batch(&t, c, 4, src_lens, tgt_lens, seed + 1);
    tfm_pass_workspace *ws;
    tfm_encoder *enc;
    tfm_error err;
    CHECK(tfm_pass_workspace_create(m, &ws, &err) == TFM_OK);
    CHECK(tfm_encoder_create(m, &enc, &err) == TFM_OK);
    float token_lp[32];
    double sentence_lp[4];
    tfm_loss_sums sums;
    CHECK(tfm_model_loss(ws, &t.b, false, NULL, &sums, sentence_lp, token_lp, &err) == TFM_OK);
    int off = 0;
    double worst = 0, nll = 0;
    for (int b = 0; b < 4; b++) {
        const int S = src_lens[b], T = tgt_lens[b] + 1;
        float states[MAX_LEN * 8 + 1], logp[MAX_LEN * 12];
        int32_t dec_in[MAX_LEN];
        CHECK(D <= 8 && V <= 12);
        const int32_t *ids[1] = {t.src[b]};
        CHECK(tfm_encoder_forward(enc, 1, ids, &S, states, &err) == TFM_OK);
        dec_in[0] = c->bos_id;
        for (int i = 1; i < T; i++) dec_in[i] = t.tgt[b][i - 1];
        CHECK(tfm_decoder_forward_full(m, S ? states : NULL, S, dec_in, T, logp, &err) == TFM_OK);
        double sum = 0;
        for (int i = 0; i < T; i++) {
            int32_t label = i < T - 1 ? t.tgt[b][i] : c->eos_id;
            worst = fmax(worst, fabs(token_lp[off + i] - logp[i * V + label]));
            sum += logp[i * V + label];
        }
        CHECK_NEAR(sentence_lp[b], sum, 1e-4);
        nll -= sum;
        off += T;
    }
    CHECK_MSG(worst <= 1e-5, "%s: token log-probs differ by %g", name, worst);
    CHECK_NEAR(sums.nll, nll, 1e-4);
    CHECK(sums.n_tokens == off);
    tfm_encoder_free(enc);
    tfm_pass_workspace_free(ws);
    tfm_model_free(m);
}

static void test_loss_matches_inference(void)
{
    /* dropout set in the model: tfm_model_loss(dropout false) must ignore it */
    tfm_config c = tiny_config(false, true, TFM_POS_SINUSOIDAL, 0, 2);
    c.dropout = 0.3f;
    c.attention_dropout = 0.1f;
    check_against_inference("post-norm", &c, 41);
    c = tiny_config(true, false, TFM_POS_LEARNED, 2, 2);
    check_against_inference("pre-norm, learned, window 2", &c, 42);
    c = tiny_config(false, true, TFM_POS_NONE, 0, 2);
    c.relative_positions = 2;
    check_against_inference("post-norm, relative 2 alone", &c, 43);
    c = tiny_config(true, true, TFM_POS_LEARNED, 2, 2);
    c.relative_positions = 1;
    check_against_inference("pre-norm, learned + relative 1, window 2", &c, 44);
    /* every variant of imported models, forward */
    for (int v = 0; v < 2; v++) {
        c = tiny_config(v == 1, v == 0, TFM_POS_SINUSOIDAL_CONCAT, 0, 2);
        c.activation = v ? TFM_ACT_GELU_SIGMOID : TFM_ACT_SWISH;
        c.output_bias = c.decoder_start_zero = c.embedding_layer_norm = true;
        check_against_inference(v ? "Marian pre-norm, gelu" : "Marian post-norm, swish", &c,
                                45 + v);
    }
}

/* The loss and the gradient of a batch equal the sums over its pairs taken
 * one at a time, with empty sources and targets among them. */
static void check_batched_equals_single(const tfm_config *cp)
{
    tfm_config c = *cp;
    tfm_model *m = test_nudged_model(&c, 51);
    if (!m) return;
    const int src_lens[5] = {5, 0, 7, 2, 3}, tgt_lens[5] = {4, 3, 6, 0, 2};
    test_batch t;
    make_batch(&t, &c, 5, src_lens, tgt_lens, 52);
    tfm_pass_workspace *ws;
    tfm_error err;
    CHECK(tfm_pass_workspace_create(m, &ws, &err) == TFM_OK);
    const size_t n = tfm_params_count(&c);
    float *batched = calloc(n, sizeof *batched), *singles = calloc(n, sizeof *singles);
    tfm_loss_sums all, one, sum = {0, 0, 0};
    CHECK(tfm_model_forward_backward(ws, &t.b, NULL, 1.0f, batched, &all, &err) == TFM_OK);
    for (int b = 0; b < 5; b++) {
        tfm_pair_batch s = single(&t, b);
        /* the singles' gradients accumulate into one buffer */
        CHECK(tfm_model_forward_backward(ws, &s, NULL, 1.0f, singles, &one, &err) == TFM_OK);
        sum.loss += one.loss;
        sum.nll += one.nll;
        sum.n_tokens += one.n_tokens;
    }
    CHECK_NEAR(all.loss, sum.loss, 1e-5 * sum.loss);
    CHECK_NEAR(all.nll, sum.nll, 1e-5 * sum.nll);
    CHECK(all.n_tokens == sum.n_tokens && all.n_tokens == 4 + 3 + 6 + 0 + 2 + 5);
    double diff = 0, gmax = max_abs(batched, n);
    for (size_t i = 0; i < n; i++) diff = fmax(diff, fabs(batched[i] - singles[i]));
    CHECK_MSG(diff <= 1e-5 * gmax, "gradients differ by %g (largest %g)", diff, gmax);

    /* forward-only gives the same loss as the training forward without dropout */
    tfm_loss_sums fwd;
    CHECK(tfm_model_loss(ws, &t.b, false, NULL, &fwd, NULL, NULL, &err) == TFM_OK);
    CHECK(fwd.loss == all.loss && fwd.nll == all.nll);
    free(batched);
    free(singles);
    tfm_pass_workspace_free(ws);
    tfm_model_free(m);
}

static void test_batched_equals_single(void)
{
    tfm_config c = tiny_config(true, true, TFM_POS_LEARNED, 0, 2);
    check_batched_equals_single(&c);
    c = tiny_config(false, true, TFM_POS_NONE, 2, 2);
    c.relative_positions = 3;
    check_batched_equals_single(&c);
}

/* Training with a window no shorter than the sentences is training with
 * full attention (the same loss and gradients, to rounding), and with a
 * short window it is not. */
static void test_window_covering_equals_full(void)
{
    tfm_config c = tiny_config(true, true, TFM_POS_SINUSOIDAL, 0, 2);
    c.relative_positions = 3;
    tfm_model *m = test_nudged_model(&c, 81);
    if (!m) return;
    const int src_lens[3] = {5, 7, 3}, tgt_lens[3] = {4, 6, 2};
    test_batch t;
    make_batch(&t, &c, 3, src_lens, tgt_lens, 82);
    tfm_pass_workspace *ws;
    tfm_error err;
    CHECK(tfm_pass_workspace_create(m, &ws, &err) == TFM_OK);
    const size_t n = tfm_params_count(&c);
    const int windows[3] = {0, 8, 2};
    float *g[3];
    tfm_loss_sums sums[3];
    for (int w = 0; w < 3; w++) {
        m->config.attention_window = windows[w];
        g[w] = calloc(n, sizeof(float));
        CHECK(tfm_model_forward_backward(ws, &t.b, NULL, 1.0f, g[w], &sums[w], &err) == TFM_OK);
    }
    double same = 0, other = 0, gmax = max_abs(g[0], n);
    for (size_t i = 0; i < n; i++) {
        same = fmax(same, fabs(g[1][i] - g[0][i]));
        other = fmax(other, fabs(g[2][i] - g[0][i]));
    }
    CHECK_NEAR(sums[1].loss, sums[0].loss, 1e-6 * sums[0].loss);
    CHECK_MSG(same <= 1e-6 * gmax, "a covering window: gradients differ by %g (largest %g)", same,
              gmax);
    CHECK(fabs(sums[2].loss - sums[0].loss) > 1e-4 && other > 1e-3 * gmax);
    for (int w = 0; w < 3; w++) free(g[w]);
    tfm_pass_workspace_free(ws);
    tfm_model_free(m);
}

/* Gradients accumulate and scale; dropout steps repeat exactly from the same
 * seed; a <pad> label counts nowhere. */
static void test_accumulate_scale_repeat(void)
{
    tfm_config c = tiny_config(false, true, TFM_POS_SINUSOIDAL, 0, 1);
    c.dropout = 0.2f;
    c.attention_dropout = 0.1f;
    tfm_model *m = test_nudged_model(&c, 61);
    if (!m) return;
    const int src_lens[3] = {3, 4, 5}, tgt_lens[3] = {4, 2, 5};
    test_batch t;
    make_batch(&t, &c, 3, src_lens, tgt_lens, 62);
    tfm_pass_workspace *ws;
    tfm_error err;
    CHECK(tfm_pass_workspace_create(m, &ws, &err) == TFM_OK);
    const size_t n = tfm_params_count(&c);
    float *g1 = calloc(n, sizeof *g1), *g2 = calloc(n, sizeof *g2), *g3 = calloc(n, sizeof *g3);
    tfm_rng rng;
    tfm_loss_sums s1, s2, s3;
    tfm_rng_seed(&rng, 5);
    CHECK(tfm_model_forward_backward(ws, &t.b, &rng, 1.0f, g1, &s1, &err) == TFM_OK);
    tfm_rng after = rng;
    tfm_rng_seed(&rng, 5);
    CHECK(tfm_model_forward_backward(ws, &t.b, &rng, 1.0f, g2, &s2, &err) == TFM_OK);
    CHECK(memcmp(&after, &rng, sizeof rng) == 0);
    CHECK(s1.loss == s2.loss && memcmp(g1, g2, n * sizeof *g1) == 0); /* bit for bit */
    tfm_rng_seed(&rng, 5);
    CHECK(tfm_model_forward_backward(ws, &t.b, &rng, 1.0f, g2, &s2, &err) == TFM_OK);
    tfm_rng_seed(&rng, 5);
    CHECK(tfm_model_forward_backward(ws, &t.b, &rng, 0.25f, g3, &s3, &err) == TFM_OK);
    double d2 = 0, d3 = 0, gmax = max_abs(g1, n);
    for (size_t i = 0; i < n; i++) {
        d2 = fmax(d2, fabs(g2[i] - 2.0 * g1[i]));
        d3 = fmax(d3, fabs(g3[i] - 0.25 * g1[i]));
    }
    CHECK_MSG(d2 <= 1e-6 * gmax && d3 <= 1e-6 * gmax, "accumulate %g, scale %g", d2, d3);
    /* another seed, other masks */
    tfm_rng_seed(&rng, 6);
    CHECK(tfm_model_forward_backward(ws, &t.b, &rng, 1.0f, g3, &s3, &err) == TFM_OK);
    CHECK(s3.loss != s1.loss);

    /* a <pad> label: not counted, log-prob 0, and the other tokens unchanged */
    float lp_before[16], lp_after[16];
    tfm_loss_sums before, pad;
    CHECK(tfm_model_loss(ws, &t.b, false, NULL, &before, NULL, lp_before, &err) == TFM_OK);
    t.tgt[1][1] = c.pad_id; /* pair 1's second token: last before </s> */
    CHECK(tfm_model_loss(ws, &t.b, false, NULL, &pad, NULL, lp_after, &err) == TFM_OK);
    CHECK(pad.n_tokens == before.n_tokens - 1);
    CHECK(lp_after[5 + 1] == 0.0f);
    /* pair 0's tokens come before pair 1's and do not see it */
    for (int i = 0; i < 5; i++) CHECK_NEAR(lp_after[i], lp_before[i], 1e-6);
    free(g1);
    free(g2);
    free(g3);
    tfm_pass_workspace_free(ws);
    tfm_model_free(m);
}

/* A batch of B pairs of random lengths in [lo, hi], allocated. */
typedef struct big_batch {
    int32_t *ids;
    const int32_t **srcp, **tgtp;
    int *src_lens, *tgt_lens;
    tfm_pair_batch b;
} big_batch;

static void make_big_batch(big_batch *t, const tfm_config *c, int B, int lo, int hi,
                           uint64_t seed)
{
    tfm_rng rng;
    tfm_rng_seed(&rng, seed);
    t->ids = malloc((size_t)B * 2 * hi * sizeof *t->ids);
    t->srcp = malloc((size_t)B * sizeof *t->srcp);
    t->tgtp = malloc((size_t)B * sizeof *t->tgtp);
    t->src_lens = malloc((size_t)B * sizeof *t->src_lens);
    t->tgt_lens = malloc((size_t)B * sizeof *t->tgt_lens);
    for (int b = 0; b < B; b++) {
        int32_t *s = t->ids + (size_t)b * 2 * hi, *g = s + hi;
        for (int i = 0; i < hi; i++) {
            s[i] = 4 + (int32_t)tfm_rng_below(&rng, (uint64_t)c->src_vocab_size - 4);
            g[i] = 4 + (int32_t)tfm_rng_below(&rng, (uint64_t)c->tgt_vocab_size - 4);
        }
        t->srcp[b] = s;
        t->tgtp[b] = g;
        t->src_lens[b] = lo + (int)tfm_rng_below(&rng, (uint64_t)(hi - lo + 1));
        t->tgt_lens[b] = lo + (int)tfm_rng_below(&rng, (uint64_t)(hi - lo + 1));
    }
    t->src_lens[B / 2] = 0; /* an empty source among them */
    t->b = (tfm_pair_batch){B, t->srcp, t->src_lens, t->tgtp, t->tgt_lens};
}

static void free_big_batch(big_batch *t)
{
    free(t->ids);
    free(t->srcp);
    free(t->tgtp);
    free(t->src_lens);
    free(t->tgt_lens);
}

int openblas_get_num_threads(void);

/* check_threads' model width (d_model; d_ff twice it; the vocabulary V),
 * its batch's pairs and the thread counts it compares with one thread.  A
 * pass over rows goes on the threads when it has 4 chunks or more
 * (batch_for_rows; 16384 / width rows each): at D = 32 and V = 40, 180
 * pairs of 6 to 20 tokens make about 2300 source rows and 2500 target
 * rows, 4 chunks of 512 and more.  Under the sanitizers, where these passes
 * took a third of test_gradients' time, a model twice as wide and 65 pairs
 * (about 830 source and 900 target rows: each pass still in 4 chunks, of
 * 256 rows at D = V = 64 and 128 at d_ff = 128, checked below; a quarter
 * fewer floats per pass, a third of the pairs and their attention), on 1
 * and 3 threads: 3 threads use every thread slot 2 do and split the chunks
 * unevenly, and 2 threads still run the batch without dropout, against its
 * pairs one by one. */
#if SANITIZED
enum { THREADS_D = 64, THREADS_V = 64, THREADS_PAIRS = 65 };
static const int THREAD_COUNTS[] = {1, 3};
#else
enum { THREADS_D = 32, THREADS_V = 40, THREADS_PAIRS = 180 };
static const int THREAD_COUNTS[] = {1, 2, 3};
#endif
enum { N_THREAD_COUNTS = sizeof THREAD_COUNTS / sizeof THREAD_COUNTS[0] };

/* The workspace's threads change nothing: a batch big enough that every
 * pass splits into several chunks gives the same loss, gradients, token
 * log-probabilities and generator state on 1, 2 and 3 threads
 * (THREAD_COUNTS), bit for bit, with dropout on the sublayers and the
 * attention; OpenBLAS's thread count is given back.  And the threaded
 * result is right: it equals the sum over the pairs taken one at a time
 * (which the tiny tests check against finite differences).  marian: a
 * gated activation with activation dropout and the embeddings' LayerNorm
 * too. */
static void check_threads(const char *name, bool pre_norm, int relative, bool marian,
                          uint64_t seed)
{
    tfm_config c = tiny_config(pre_norm, !pre_norm, pre_norm ? TFM_POS_LEARNED : TFM_POS_SINUSOIDAL,
                               pre_norm ? 3 : 0, 2);
    c.relative_positions = relative;
    if (marian) {
        c.activation = TFM_ACT_GELU_SIGMOID;
        c.activation_dropout = 0.1f;
        c.embedding_layer_norm = true;
    }
    c.d_model = THREADS_D;
    c.d_ff = 2 * THREADS_D;
    c.n_heads = 4;
    c.max_positions = 24;
    c.src_vocab_size = c.tgt_vocab_size = THREADS_V;
    c.dropout = 0.1f;
    c.attention_dropout = 0.1f;
    tfm_model *m = test_nudged_model(&c, seed);
    if (!m) return;
    big_batch t;
    make_big_batch(&t, &c, THREADS_PAIRS, 6, 20, seed + 1);
    int rows = 0, src_rows = 0;
    for (int b = 0; b < THREADS_PAIRS; b++) rows += t.tgt_lens[b] + 1, src_rows += t.src_lens[b];
    /* every pass over rows (D, d_ff or V wide) in 4 chunks at least, so on
     * the threads (batch_for_rows), on both sides */
    const int widths[3] = {c.d_model, c.d_ff, c.tgt_vocab_size};
    for (int i = 0; i < 3; i++) {
        const size_t chunk = batch_row_chunk((size_t)widths[i]);
        CHECK_MSG(tfm_chunk_count((size_t)rows, chunk) >= 4 &&
                      (i == 2 || tfm_chunk_count((size_t)src_rows, chunk) >= 4),
                  "%s: %d target rows, %d source rows: not 4 chunks of %zu", name, rows,
                  src_rows, chunk);
    }
    tfm_pass_workspace *ws;
    tfm_error err;
    CHECK(tfm_pass_workspace_create(m, &ws, &err) == TFM_OK);
    const size_t n = tfm_params_count(&c);
    float *g[N_THREAD_COUNTS], *lp[N_THREAD_COUNTS];
    tfm_loss_sums sums[N_THREAD_COUNTS], fsums[N_THREAD_COUNTS];
    tfm_rng after[N_THREAD_COUNTS];
    int blas = openblas_get_num_threads();
    for (int k = 0; k < N_THREAD_COUNTS; k++) {
        g[k] = calloc(n, sizeof(float));
        lp[k] = malloc((size_t)rows * sizeof(float));
        tfm_pass_workspace_set_threads(ws, THREAD_COUNTS[k]);
        tfm_rng rng;
        tfm_rng_seed(&rng, seed + 2);
        CHECK(tfm_model_forward_backward(ws, &t.b, &rng, 1.0f, g[k], &sums[k], &err) == TFM_OK);
        after[k] = rng;
        tfm_rng_seed(&rng, seed + 2);
        CHECK(tfm_model_loss(ws, &t.b, true, &rng, &fsums[k], NULL, lp[k], &err) == TFM_OK);
        CHECK(openblas_get_num_threads() == blas);
    }
    CHECK(THREAD_COUNTS[0] == 1);
    CHECK(sums[0].loss == fsums[0].loss); /* the forward alone draws the same masks */
    for (int k = 1; k < N_THREAD_COUNTS; k++) {
        CHECK_MSG(sums[k].loss == sums[0].loss && sums[k].nll == sums[0].nll,
                  "%s, %d threads: loss %.17g, one thread %.17g", name, THREAD_COUNTS[k],
                  sums[k].loss, sums[0].loss);
        CHECK_MSG(memcmp(g[k], g[0], n * sizeof(float)) == 0, "%s, %d threads: gradients differ",
                  name, THREAD_COUNTS[k]);
        CHECK(memcmp(lp[k], lp[0], (size_t)rows * sizeof(float)) == 0);
        CHECK(memcmp(&after[k], &after[0], sizeof after[0]) == 0);
    }

    /* without dropout, the threaded batch equals the sum of its pairs */
    m->config.dropout = m->config.attention_dropout = m->config.activation_dropout = 0;
    float *batched = calloc(n, sizeof(float)), *singles = calloc(n, sizeof(float));
    tfm_loss_sums all, one, sum = {0, 0, 0};
    tfm_pass_workspace_set_threads(ws, 2);
    CHECK(tfm_model_forward_backward(ws, &t.b, NULL, 1.0f, batched, &all, &err) == TFM_OK);
    tfm_pass_workspace_set_threads(ws, 1);
    for (int b = 0; b < THREADS_PAIRS; b++) {
        tfm_pair_batch s = {1, &t.srcp[b], &t.src_lens[b], &t.tgtp[b], &t.tgt_lens[b]};
        CHECK(tfm_model_forward_backward(ws, &s, NULL, 1.0f, singles, &one, &err) == TFM_OK);
        sum.loss += one.loss;
        sum.n_tokens += one.n_tokens;
    }
    CHECK(all.n_tokens == sum.n_tokens && all.n_tokens == rows);
    CHECK_NEAR(all.loss, sum.loss, 1e-5 * sum.loss);
    double diff = 0, gmax = max_abs(batched, n);
    for (size_t i = 0; i < n; i++) diff = fmax(diff, fabs(batched[i] - singles[i]));
    /* ~2e-4 of the largest here, as before threads: float sums over ~2700
     * rows of a nudged model's large gradients; a chunk lost or counted
     * twice would be O(1) */
    CHECK_MSG(diff <= 1e-3 * gmax, "%s: batched and single gradients differ by %g (largest %g)",
              name, diff, gmax);
    free(batched);
    free(singles);
    for (int k = 0; k < N_THREAD_COUNTS; k++) {
        free(g[k]);
        free(lp[k]);
    }
    free_big_batch(&t);
    tfm_pass_workspace_free(ws);
    tfm_model_free(m);
}

static void test_threads_bit_for_bit(void)
{
    check_threads("post-norm, shared, sinusoidal", false, 0, false, 91);
    check_threads("pre-norm, unshared, learned, window 3", true, 0, false, 92);
    /* each sentence's part of the relative tables' gradients added in order */
    check_threads("pre-norm, unshared, learned + relative 4, window 3", true, 4, false, 93);
    /* the embeddings' LayerNorm's weight and bias gradients, chunk by chunk */
    check_threads("post-norm, gelu-sigmoid, activation dropout, embedding LayerNorm", false, 0,
                  true, 94);
}

static void test_arguments(void)
{
    tfm_config c = tiny_config(false, true, TFM_POS_SINUSOIDAL, 0, 1);
    c.dropout = 0.1f;
    tfm_model *m = test_nudged_model(&c, 71);
    if (!m) return;
    const int src_lens[2] = {3, 4}, tgt_lens[2] = {2, 3};
    test_batch t;
    make_batch(&t, &c, 2, src_lens, tgt_lens, 72);
    tfm_pass_workspace *ws;
    tfm_error err;
    CHECK(tfm_pass_workspace_create(m, &ws, &err) == TFM_OK);
    const size_t n = tfm_params_count(&c);
    float *g = calloc(n, sizeof *g);
    tfm_rng rng;
    tfm_rng_seed(&rng, 1);
    tfm_loss_sums s;

    /* dropout without a generator */
    CHECK(tfm_model_forward_backward(ws, &t.b, NULL, 1.0f, g, &s, &err) == TFM_ERR_ARG);
    CHECK(tfm_model_loss(ws, &t.b, true, NULL, &s, NULL, NULL, &err) == TFM_ERR_ARG);
    /* an id outside the vocabulary, named in the message; grads untouched */
    t.tgt[1][2] = 12;
    CHECK(tfm_model_forward_backward(ws, &t.b, &rng, 1.0f, g, &s, &err) == TFM_ERR_RANGE);
    CHECK(strstr(err.msg, "pair 1") != NULL);
    t.tgt[1][2] = 5;
    t.src[0][0] = -1;
    CHECK(tfm_model_loss(ws, &t.b, false, NULL, &s, NULL, NULL, &err) == TFM_ERR_RANGE);
    t.src[0][0] = 5;
    /* too long: a target takes max_positions - 1 tokens, a source max_positions */
    t.tgt_lens[0] = 8;
    CHECK(tfm_model_loss(ws, &t.b, false, NULL, &s, NULL, NULL, &err) == TFM_ERR_RANGE);
    t.tgt_lens[0] = 7;
    t.src_lens[0] = 8;
    CHECK(tfm_model_loss(ws, &t.b, false, NULL, &s, NULL, NULL, &err) == TFM_OK);
    CHECK(s.n_tokens == 8 + 4);
    t.src_lens[0] = 9;
    CHECK(tfm_model_loss(ws, &t.b, false, NULL, &s, NULL, NULL, &err) == TFM_ERR_RANGE);
    t.src_lens[0] = -1;
    CHECK(tfm_model_loss(ws, &t.b, false, NULL, &s, NULL, NULL, &err) == TFM_ERR_RANGE);
    t.src_lens[0] = 3;
    t.b.B = -1;
    CHECK(tfm_model_loss(ws, &t.b, false, NULL, &s, NULL, NULL, &err) == TFM_ERR_ARG);
    CHECK(tfm_model_forward_backward(ws, &t.b, &rng, 1.0f, NULL, &s, &err) == TFM_ERR_ARG);
    for (size_t i = 0; i < n; i++) CHECK(g[i] == 0.0f);
    /* an empty batch is no work */
    t.b.B = 0;
    CHECK(tfm_model_forward_backward(ws, &t.b, &rng, 1.0f, g, &s, &err) == TFM_OK);
    CHECK(s.loss == 0 && s.nll == 0 && s.n_tokens == 0);
    for (size_t i = 0; i < n; i++) CHECK(g[i] == 0.0f);
    tfm_pass_workspace_free(NULL);
    free(g);
    tfm_pass_workspace_free(ws);
    tfm_model_free(m);
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
    RUN(test_model_gradient);
    RUN(test_model_gradient_with_dropout);
    RUN(test_loss_matches_inference);
    RUN(test_batched_equals_single);
    RUN(test_window_covering_equals_full);
    RUN(test_accumulate_scale_repeat);
    RUN(test_threads_bit_for_bit);
    RUN(test_arguments);
    CHECK_DONE();
}
