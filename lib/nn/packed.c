/* packed.c - the linear layers of decoding with their weights packed once.
 *
 * A decoder step multiplies a few dozen rows (sentences x beam) by every
 * weight matrix of the decoder and by the output projection.  OpenBLAS packs
 * both operands of every sgemm into its own layout first; with so few rows,
 * re-packing the weights on each call took a tenth of decoding.  OpenBLAS
 * has no interface to keep a packed operand (MKL's cblas_sgemm_pack), so
 * this file packs the weights once, at tfm_model_pack_for_decoding, and
 * multiplies with a small AVX2/FMA kernel that reads them in place.  On a
 * CPU without AVX2 and FMA nothing is packed and the layers go to sgemm.
 *
 * Layout: W [N, K] (one row per output) becomes panels of 16 outputs; panel
 * p holds, for k = 0 .. K-1, the 16 floats W[16p .. 16p+15][k] (zeros past
 * N).  The kernel keeps a 6 x 16 block of the result in twelve registers
 * and walks k: two loads of the panel, six broadcasts of x, twelve FMAs. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/layers.h"

enum { PANEL = 16, ROWS = 6 };

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define HAVE_KERNEL 1

#define KERNEL_TARGET __attribute__((target("avx2,fma")))

/* out [MR, cols] = x [MR, K] (rows ldx apart) times one panel, plus bias
 * [cols] (may be NULL); MR is 1 to ROWS and constant where inlined, so the
 * loops over it unroll and c stays in registers. */
KERNEL_TARGET __attribute__((always_inline)) static inline void
block(float *out, size_t ldo, const float *x, size_t ldx, int MR, const float *panel, int K,
      int cols, const float *bias)
{
    /* Written out row by row: with the twelve sums in an array indexed in a
     * loop, GCC kept them in memory and the kernel ran at half speed.  Rows
     * past MR read row 0 again and are never stored. */
    const float *x0 = x, *x1 = MR > 1 ? x + ldx : x, *x2 = MR > 2 ? x + 2 * ldx : x,
                *x3 = MR > 3 ? x + 3 * ldx : x, *x4 = MR > 4 ? x + 4 * ldx : x,
                *x5 = MR > 5 ? x + 5 * ldx : x;
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00,
           c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
#pragma GCC unroll 4
    for (int k = 0; k < K; k++) {
        const __m256 w0 = _mm256_loadu_ps(panel + (size_t)k * PANEL);
        const __m256 w1 = _mm256_loadu_ps(panel + (size_t)k * PANEL + 8);
        __m256 a = _mm256_broadcast_ss(x0 + k);
        c00 = _mm256_fmadd_ps(a, w0, c00);
        c01 = _mm256_fmadd_ps(a, w1, c01);
        if (MR > 1) {
            a = _mm256_broadcast_ss(x1 + k);
            c10 = _mm256_fmadd_ps(a, w0, c10);
            c11 = _mm256_fmadd_ps(a, w1, c11);
        }
        if (MR > 2) {
            a = _mm256_broadcast_ss(x2 + k);
            c20 = _mm256_fmadd_ps(a, w0, c20);
            c21 = _mm256_fmadd_ps(a, w1, c21);
        }
        if (MR > 3) {
            a = _mm256_broadcast_ss(x3 + k);
            c30 = _mm256_fmadd_ps(a, w0, c30);
            c31 = _mm256_fmadd_ps(a, w1, c31);
        }
        if (MR > 4) {
            a = _mm256_broadcast_ss(x4 + k);
            c40 = _mm256_fmadd_ps(a, w0, c40);
            c41 = _mm256_fmadd_ps(a, w1, c41);
        }
        if (MR > 5) {
            a = _mm256_broadcast_ss(x5 + k);
            c50 = _mm256_fmadd_ps(a, w0, c50);
            c51 = _mm256_fmadd_ps(a, w1, c51);
        }
    }
    const __m256 lo[ROWS] = {c00, c10, c20, c30, c40, c50}, hi[ROWS] = {c01, c11, c21, c31, c41, c51};
    for (int r = 0; r < MR; r++) {
        float *o = out + (size_t)r * ldo;
        if (cols == PANEL) {
            __m256 b0 = bias ? _mm256_loadu_ps(bias) : _mm256_setzero_ps();
            __m256 b1 = bias ? _mm256_loadu_ps(bias + 8) : _mm256_setzero_ps();
            _mm256_storeu_ps(o, _mm256_add_ps(lo[r], b0));
            _mm256_storeu_ps(o + 8, _mm256_add_ps(hi[r], b1));
        } else { /* the last panel of an N that is not a multiple of 16 */
            float tmp[PANEL];
            _mm256_storeu_ps(tmp, lo[r]);
            _mm256_storeu_ps(tmp + 8, hi[r]);
            for (int j = 0; j < cols; j++) o[j] = tmp[j] + (bias ? bias[j] : 0.0f);
        }
    }
}

/* Folds a row's next values v [cols] (columns c0 ..) into its running
 * log-softmax statistics: the maximum and its first index so far, and
 * sum = sum of exp(value - max) over the values so far (rescaled when the
 * maximum grows), so the output projection's logits are read while still
 * in the first-level cache instead of in two more passes. */
KERNEL_TARGET __attribute__((always_inline)) static inline void
fold_stats(const float *v, int cols, int c0, tfm_logit_stats *st, double *sum)
{
    float bm = v[0];
    int bj = 0;
    for (int j = 1; j < cols; j++)
        if (v[j] > bm) {
            bm = v[j];
            bj = j;
        }
    if (bm > st->max) { /* strictly: an earlier column keeps a tie */
        *sum *= exp((double)st->max - (double)bm);
        st->max = bm;
        st->argmax = c0 + bj;
    }
    const float m = st->max;
    if (cols == PANEL) {
        nn_f32x8 e0 = nn_load8(v) - m, e1 = nn_load8(v + 8) - m;
        nn_exp8_nonpositive(&e0);
        nn_exp8_nonpositive(&e1);
        const nn_f32x8 e = e0 + e1;
        *sum += (((double)e[0] + e[1]) + ((double)e[2] + e[3])) +
                (((double)e[4] + e[5]) + ((double)e[6] + e[7]));
    } else {
        for (int j = 0; j < cols; j++) *sum += nn_exp1_nonpositive(v[j] - m);
    }
}

/* out [R, N] = x [R, K] W^T + bias, panel by panel: a panel (16 K floats)
 * stays in the first-level caches while every row block passes over it.
 * With stats [R] (and sums [R], scratch), each row's logit statistics too. */
KERNEL_TARGET static void packed_forward_avx2(float *out, const float *x,
                                              const nn_packed_linear *p, int R,
                                              tfm_logit_stats *stats, double *sums)
{
    if (stats)
        for (int r = 0; r < R; r++) {
            stats[r] = (tfm_logit_stats){.max = -INFINITY, .log_sum = 0, .argmax = 0};
            sums[r] = 0;
        }
    const int N = p->N, K = p->K;
    for (int c0 = 0, pi = 0; c0 < N; c0 += PANEL, pi++) {
        const float *panel = p->panels + (size_t)pi * K * PANEL;
        const int cols = N - c0 < PANEL ? N - c0 : PANEL;
        const float *bias = p->bias ? p->bias + c0 : NULL;
        int r = 0;
        for (; r + ROWS <= R; r += ROWS)
            block(out + (size_t)r * N + c0, (size_t)N, x + (size_t)r * K, (size_t)K, ROWS, panel,
                  K, cols, bias);
        float *o = out + (size_t)r * N + c0;
        const float *xr = x + (size_t)r * K;
        switch (R - r) {
        case 5: block(o, (size_t)N, xr, (size_t)K, 5, panel, K, cols, bias); break;
        case 4: block(o, (size_t)N, xr, (size_t)K, 4, panel, K, cols, bias); break;
        case 3: block(o, (size_t)N, xr, (size_t)K, 3, panel, K, cols, bias); break;
        case 2: block(o, (size_t)N, xr, (size_t)K, 2, panel, K, cols, bias); break;
        case 1: block(o, (size_t)N, xr, (size_t)K, 1, panel, K, cols, bias); break;
        default: break;
        }
        if (stats)
            for (int i = 0; i < R; i++)
                fold_stats(out + (size_t)i * N + c0, cols, c0, &stats[i], &sums[i]);
    }
    if (stats)
        for (int r = 0; r < R; r++) stats[r].log_sum = (float)log(sums[r]);
}
#endif

bool nn_packed_supported(void)
{
#ifdef HAVE_KERNEL
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    return false;
#endif
}

tfm_status nn_pack_linear(nn_packed_linear *p, const float *weight, const float *bias, int N,
                          int K)
{
    *p = (nn_packed_linear){.weight = weight, .bias = bias, .panels = NULL, .N = N, .K = K};
    if (!nn_packed_supported() || N <= 0 || K <= 0) return TFM_OK; /* sgemm, unpacked */
    const size_t n_panels = ((size_t)N + PANEL - 1) / PANEL;
    float *panels = malloc(n_panels * K * PANEL * sizeof *panels);
    if (!panels) return TFM_ERR_NOMEM;
    tfm_advise_huge_pages(panels, n_panels * K * PANEL * sizeof *panels);
    for (size_t pi = 0; pi < n_panels; pi++) {
        float *panel = panels + pi * K * PANEL;
        for (int k = 0; k < K; k++)
            for (int j = 0; j < PANEL; j++) {
                size_t n = pi * PANEL + (size_t)j;
                panel[(size_t)k * PANEL + j] = n < (size_t)N ? weight[n * K + k] : 0.0f;
            }
    }
    p->panels = panels;
    return TFM_OK;
}

void nn_packed_linear_free(nn_packed_linear *p)
{
    free(p->panels);
    p->panels = NULL;
}

void nn_packed_forward(float *out, const float *x, const nn_packed_linear *p, int R)
{
    if (R <= 0 || p->N <= 0) return;
#ifdef HAVE_KERNEL
    if (p->panels) {
        packed_forward_avx2(out, x, p, R, NULL, NULL);
        return;
    }
#endif
    linear_forward(out, x, p->weight, p->bias, R, p->K, p->N);
}

void nn_packed_forward_stats(float *out, const float *x, const nn_packed_linear *p, int R,
                             tfm_logit_stats *stats, double *sums)
{
    if (R <= 0 || p->N <= 0) return;
#ifdef HAVE_KERNEL
    if (p->panels) {
        packed_forward_avx2(out, x, p, R, stats, sums);
        return;
    }
#endif
    linear_forward(out, x, p->weight, p->bias, R, p->K, p->N);
    logit_stats(out, R, p->N, stats);
}

/* ---- the decoder's weights ---------------------------------------------------- */

void tfm_packed_decoder_free(tfm_packed_decoder *pd)
{
    if (!pd) return;
    for (int l = 0; l < pd->n_layers; l++) {
        nn_packed_layer *L = &pd->layers[l];
        nn_packed_linear *all[] = {&L->self_qkv, &L->self_out, &L->cross_q,
                                   &L->cross_out, &L->fc1, &L->fc2};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) nn_packed_linear_free(all[i]);
    }
    nn_packed_linear_free(&pd->output);
    free(pd->layers);
    free(pd);
}

tfm_status tfm_model_pack_for_decoding(tfm_model *m, tfm_error *err)
{
    if (m->packed || !nn_packed_supported()) return TFM_OK;
    const tfm_config *c = &m->config;
    const int D = c->d_model, F = c->d_ff, NL = c->n_decoder_layers;
    tfm_packed_decoder *pd = calloc(1, sizeof *pd);
    if (pd) pd->layers = calloc((size_t)NL, sizeof *pd->layers);
    if (!pd || !pd->layers) {
        free(pd);
        return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory packing the decoder");
    }
    pd->n_layers = NL;
    tfm_status st = TFM_OK;
    for (int l = 0; l < NL && st == TFM_OK; l++) {
        const tfm_decoder_layer *W = &m->params.decoder_layers[l];
        nn_packed_layer *L = &pd->layers[l];
        /* q, k and v of self-attention lie in a row: one [3D, D] layer */
        st = nn_pack_linear(&L->self_qkv, W->self_attn.q_proj.weight, W->self_attn.q_proj.bias,
                            3 * D, D);
        if (st == TFM_OK)
            st = nn_pack_linear(&L->self_out, W->self_attn.out_proj.weight,
                                W->self_attn.out_proj.bias, D, D);
        if (st == TFM_OK)
            st = nn_pack_linear(&L->cross_q, W->encoder_attn.q_proj.weight,
                                W->encoder_attn.q_proj.bias, D, D);
        if (st == TFM_OK)
            st = nn_pack_linear(&L->cross_out, W->encoder_attn.out_proj.weight,
                                W->encoder_attn.out_proj.bias, D, D);
        if (st == TFM_OK) st = nn_pack_linear(&L->fc1, W->fc1.weight, W->fc1.bias, F, D);
        if (st == TFM_OK) st = nn_pack_linear(&L->fc2, W->fc2.weight, W->fc2.bias, D, F);
    }
    if (st == TFM_OK)
        st = nn_pack_linear(&pd->output, m->params.output_proj, NULL, c->tgt_vocab_size, D);
    if (st != TFM_OK) {
        tfm_packed_decoder_free(pd);
        return tfm_error_set(err, st, "out of memory packing the decoder");
    }
    m->packed = pd;
    return TFM_OK;
}
