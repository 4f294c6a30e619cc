/* testgrad.h - finite differences in double precision and double-precision
 * references of the layers, for the gradient checks of
 * test_layer_gradients.c (each layer) and test_model_gradients.c (the whole
 * model, whose reference is built from these).
 *
 * How the double-precision check works.  The kernels compute in float (they
 * are cblas_sgemm calls), and finite differences of a float function are
 * mostly rounding noise.  So beside each kernel the tests hold a plain-loop
 * reference of the same function in double (here; and one of the whole
 * model, in test_model_gradients.c, written from the paper and the layer
 * definitions, sharing no code with lib/nn and lib/pass).  For each check:
 *   1. the float forward is compared with the double reference at the same
 *      point, so the two are the same function (to float rounding);
 *   2. the float backward's gradient is compared with central differences
 *      (f(x + h) - f(x - h)) / 2h of the double reference, h = 1e-5, whose
 *      error is ~1e-10: any disagreement beyond float rounding (~1e-6 of
 *      the gradient's scale; we allow 1e-4 relative plus a small absolute
 *      floor) is a wrong backward, not noise.
 * The objective of a layer check is sum(w * y) with random weights w, so the
 * gradient handed to the backward (dy) is w. */
#ifndef TFM_TEST_GRAD_H
#define TFM_TEST_GRAD_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "check.h"
#include "nn/layers.h"

/* ---- helpers ------------------------------------------------------------------ */

static inline void fill_uniform(double *x, size_t n, double lo, double hi, tfm_rng *rng)
{
    for (size_t i = 0; i < n; i++) x[i] = lo + (hi - lo) * tfm_rng_double(rng);
}

/* The float nearest each double, and the double of each float back, so
 * float and double versions start from exactly the same point. */
static inline float *to_float(double *x, size_t n)
{
    float *f = malloc((n ? n : 1) * sizeof *f);
    for (size_t i = 0; i < n; i++) {
        f[i] = (float)x[i];
        x[i] = f[i];
    }
    return f;
}

static inline double max_abs(const float *x, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs((double)x[i]));
    return m;
}

static inline double max_diff_fd(const float *a, const double *b, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (!(d <= m)) m = d;
    }
    return m;
}

static inline double dot(const double *a, const double *b, size_t n)
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
static inline fd_result fd_compare(const float *analytic, double *x, size_t n, objective_fn f,
                                   void *ctx, double rtol, double atol, size_t max_points,
                                   uint64_t seed)
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
static inline void ref_linear(double *out, const double *in, int n, int n_in, int n_out,
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
static inline void ref_layer_norm(double *out, const double *in, int n, int D, const double *w,
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
static inline void ref_ffn_act(double *out, const double *in, int n, int D, int F,
                               const double *w1, const double *b1, const double *w2,
                               const double *b2, tfm_activation act)
{
    double *h = malloc((size_t)n * F * sizeof *h);
    ref_linear(h, in, n, D, F, w1, b1);
    const double k = act == TFM_ACT_GELU_SIGMOID ? (double)1.702f : 1.0;
    for (int i = 0; i < n * F; i++)
        h[i] = act == TFM_ACT_RELU ? (h[i] > 0 ? h[i] : 0) : h[i] / (1.0 + exp(-k * h[i]));
    ref_linear(out, h, n, F, D, w2, b2);
    free(h);
}

static inline void ref_ffn(double *out, const double *in, int n, int D, int F, const double *w1,
                           const double *b1, const double *w2, const double *b2)
{
    ref_ffn_act(out, in, n, D, F, w1, b1, w2, b2, TFM_ACT_RELU);
}

/* Does query i (at position q_pos + i) see key j?  Written from the rule in
 * layers.h: causal keys up to the query; a window of r keys on each side
 * (before only, when causal). */
static inline bool ref_visible(attention_mask m, int i, int j)
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
static inline int ref_bucket(int j, int pos, int K)
{
    int d = j - pos;
    return K + (d < -K ? -K : d > K ? K : d);
}

/* out [n_q, H*Dh] (rows H*Dh apart): per head softmax(q (k + a^K)^T /
 * sqrt(Dh)), masked, dropped out with keep (NULL: none; laid out as the
 * kernel keeps it, [H, n_q, band width]) and rate p, times v + a^V.  q rows
 * ldq apart; k and v rows ldk apart. */
static inline void ref_attention(double *out, const double *q, int ldq, const double *k,
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

#endif
