/* packed.c - the linear layers of inference with their weights packed once.
 *
 * A decoder step multiplies a few dozen rows (sentences x beam) by every
 * weight matrix of the decoder and by the output projection.  OpenBLAS packs
 * both operands of every sgemm into its own layout first; with so few rows,
 * re-packing the weights on each call took a tenth of decoding.  OpenBLAS
 * has no interface to keep a packed operand (MKL's cblas_sgemm_pack), so
 * this file packs the weights once, at tfm_model_pack_for_decoding (and
 * _for_encoding: the encoder's products gain from the kernel too), and
 * multiplies with a small kernel that reads them in place: AVX-512 where
 * the CPU has it, else AVX2 with FMA, else nothing is packed and the layers
 * go to sgemm.  TFM_ISA=avx2 (or none) in the environment asks for less.
 * AVX-512's registers are twice as wide: on the AMD Zen 5 of our benchmark
 * machine, decoding at 64 rows ran 1.4x faster with it than with AVX2.
 *
 * Layout: W [N, K] (one row per output) becomes panels of `width` outputs
 * (16 for AVX2, 32 for AVX-512): panel p holds, for k = 0 .. K-1, the width
 * floats W[width p .. width p + width - 1][k] (zeros past N).  A kernel
 * keeps a block of the result (6 rows x 16 columns in twelve AVX2
 * registers, 8 x 32 in sixteen AVX-512 ones) and walks k: per k, a
 * load of the panel's row, a broadcast of each row's x, the FMAs.
 *
 * Every output is sum_k x[k] W[n][k] gathered by FMA in the order of k,
 * then plus its bias, whatever the kernel: the AVX2 and AVX-512 kernels
 * give the same bits (tested), so encoder states and translations do not
 * depend on which of them the CPU runs, nor a row's result on the other
 * rows of the product. */
#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/layers.h"

enum {
    STATS_GROUP = 16, /* columns folded into the logit statistics at a time */
    ROW_BYTES = 512 * 1024 /* rows of x a pass over the panels keeps in cache */
};

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define HAVE_KERNELS 1

#define AVX2_TARGET __attribute__((target("avx2,fma")))
#define AVX512_TARGET __attribute__((target("avx2,fma,avx512f")))
#define ALWAYS_INLINE __attribute__((always_inline)) inline

/* A kernel: out [rows, cols] = x [rows, K] (rows ldx apart) times one panel,
 * plus bias [cols] (may be NULL); rows 1 .. max_rows, cols 1 .. width. */
typedef void block_fn(float *out, size_t ldo, const float *x, size_t ldx, int rows,
                      const float *panel, int K, int cols, const float *bias);

/* out [MR, cols] (rows ldo apart) = a kernel's sums v [MR, width] plus
 * bias [cols] (may be NULL); cols < width in the last panel of an N that
 * is not a multiple of width. */
AVX2_TARGET static ALWAYS_INLINE void store_block(float *out, size_t ldo, const float *v, int MR,
                                                  int width, int cols, const float *bias)
{
    for (int r = 0; r < MR; r++) {
        float *o = out + (size_t)r * ldo;
        const float *vr = v + (size_t)r * width;
        int j = 0;
        for (; j + 8 <= cols; j += 8) {
            nn_f32x8 b = {0};
            if (bias) b = nn_load8(bias + j);
            nn_store8(o + j, nn_load8(vr + j) + b);
        }
        for (; j < cols; j++) o[j] = vr[j] + (bias ? bias[j] : 0.0f);
    }
}

/* ---- AVX2: 6 rows x 16 columns ---- */

enum { AVX2_WIDTH = 16, AVX2_ROWS = 6 };

/* Written out row by row: with the twelve sums in an array indexed in a
 * loop, GCC kept them in memory and the kernel ran at half speed.  MR is
 * constant where inlined, so the rows past it are compiled away. */
AVX2_TARGET static ALWAYS_INLINE void avx2_rows(float *out, size_t ldo, const float *x,
                                                size_t ldx, const int MR, const float *panel,
                                                int K, int cols, const float *bias)
{
#define AVX2_ROW_X(i) const float *x##i = MR > i ? x + i * ldx : x
    AVX2_ROW_X(0); AVX2_ROW_X(1); AVX2_ROW_X(2); AVX2_ROW_X(3); AVX2_ROW_X(4); AVX2_ROW_X(5);
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00,
           c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
#define AVX2_ROW_FMA(i)                                                                    \
    if (MR > i) {                                                                          \
        const __m256 a = _mm256_broadcast_ss(x##i + k);                                    \
        c##i##0 = _mm256_fmadd_ps(a, w0, c##i##0);                                         \
        c##i##1 = _mm256_fmadd_ps(a, w1, c##i##1);                                         \
    }
#pragma GCC unroll 4
    for (int k = 0; k < K; k++) {
        const __m256 w0 = _mm256_loadu_ps(panel + (size_t)k * AVX2_WIDTH);
        const __m256 w1 = _mm256_loadu_ps(panel + (size_t)k * AVX2_WIDTH + 8);
        AVX2_ROW_FMA(0) AVX2_ROW_FMA(1) AVX2_ROW_FMA(2) AVX2_ROW_FMA(3) AVX2_ROW_FMA(4)
        AVX2_ROW_FMA(5)
    }
    float v[AVX2_ROWS * AVX2_WIDTH]; /* the sums, for store_block */
#define AVX2_ROW_SUMS(i)                                                                   \
    if (MR > i) {                                                                          \
        _mm256_storeu_ps(v + i * AVX2_WIDTH, c##i##0);                                     \
        _mm256_storeu_ps(v + i * AVX2_WIDTH + 8, c##i##1);                                 \
    }
    AVX2_ROW_SUMS(0) AVX2_ROW_SUMS(1) AVX2_ROW_SUMS(2) AVX2_ROW_SUMS(3) AVX2_ROW_SUMS(4)
    AVX2_ROW_SUMS(5)
    store_block(out, ldo, v, MR, AVX2_WIDTH, cols, bias);
#undef AVX2_ROW_SUMS
#undef AVX2_ROW_X
#undef AVX2_ROW_FMA
}

AVX2_TARGET static void avx2_block(float *out, size_t ldo, const float *x, size_t ldx, int rows,
                                   const float *panel, int K, int cols, const float *bias)
{
    switch (rows) {
    case 6: avx2_rows(out, ldo, x, ldx, 6, panel, K, cols, bias); break;
    case 5: avx2_rows(out, ldo, x, ldx, 5, panel, K, cols, bias); break;
    case 4: avx2_rows(out, ldo, x, ldx, 4, panel, K, cols, bias); break;
    case 3: avx2_rows(out, ldo, x, ldx, 3, panel, K, cols, bias); break;
    case 2: avx2_rows(out, ldo, x, ldx, 2, panel, K, cols, bias); break;
    case 1: avx2_rows(out, ldo, x, ldx, 1, panel, K, cols, bias); break;
    default: break;
    }
}

/* ---- AVX-512: 8 rows x 32 columns ---- */

enum { AVX512_WIDTH = 32, AVX512_ROWS = 8 };

/* As avx2_rows, with two 16-lane registers per row: 16 sums, two panel
 * loads and eight broadcasts for 16 FMAs per k.  (Twelve rows, 24 sums,
 * ran a fifth slower on AMD Zen 5; six rows as fast as eight.) */
AVX512_TARGET static ALWAYS_INLINE void avx512_rows(float *out, size_t ldo, const float *x,
                                                    size_t ldx, const int MR,
                                                    const float *panel, int K, int cols,
                                                    const float *bias)
{
#define AVX512_ROW_X(i) const float *x##i = MR > i ? x + i * ldx : x
    AVX512_ROW_X(0); AVX512_ROW_X(1); AVX512_ROW_X(2); AVX512_ROW_X(3);
    AVX512_ROW_X(4); AVX512_ROW_X(5); AVX512_ROW_X(6); AVX512_ROW_X(7);
    __m512 c00 = _mm512_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00,
           c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00, c60 = c00,
           c61 = c00, c70 = c00, c71 = c00;
#define AVX512_ROW_FMA(i)                                                                  \
    if (MR > i) {                                                                          \
        const __m512 a = _mm512_set1_ps(x##i[k]);                                          \
        c##i##0 = _mm512_fmadd_ps(a, w0, c##i##0);                                         \
        c##i##1 = _mm512_fmadd_ps(a, w1, c##i##1);                                         \
    }
#pragma GCC unroll 2
    for (int k = 0; k < K; k++) {
        const __m512 w0 = _mm512_loadu_ps(panel + (size_t)k * AVX512_WIDTH);
        const __m512 w1 = _mm512_loadu_ps(panel + (size_t)k * AVX512_WIDTH + 16);
        AVX512_ROW_FMA(0) AVX512_ROW_FMA(1) AVX512_ROW_FMA(2) AVX512_ROW_FMA(3)
        AVX512_ROW_FMA(4) AVX512_ROW_FMA(5) AVX512_ROW_FMA(6) AVX512_ROW_FMA(7)
    }
    float v[AVX512_ROWS * AVX512_WIDTH]; /* the sums, for store_block */
#define AVX512_ROW_SUMS(i)                                                                 \
    if (MR > i) {                                                                          \
        _mm512_storeu_ps(v + i * AVX512_WIDTH, c##i##0);                                   \
        _mm512_storeu_ps(v + i * AVX512_WIDTH + 16, c##i##1);                              \
    }
    AVX512_ROW_SUMS(0) AVX512_ROW_SUMS(1) AVX512_ROW_SUMS(2) AVX512_ROW_SUMS(3)
    AVX512_ROW_SUMS(4) AVX512_ROW_SUMS(5) AVX512_ROW_SUMS(6) AVX512_ROW_SUMS(7)
    store_block(out, ldo, v, MR, AVX512_WIDTH, cols, bias);
#undef AVX512_ROW_SUMS
#undef AVX512_ROW_X
#undef AVX512_ROW_FMA
}

AVX512_TARGET static void avx512_block(float *out, size_t ldo, const float *x, size_t ldx,
                                       int rows, const float *panel, int K, int cols,
                                       const float *bias)
{
    switch (rows) {
    case 8: avx512_rows(out, ldo, x, ldx, 8, panel, K, cols, bias); break;
    case 7: avx512_rows(out, ldo, x, ldx, 7, panel, K, cols, bias); break;
    case 6: avx512_rows(out, ldo, x, ldx, 6, panel, K, cols, bias); break;
    case 5: avx512_rows(out, ldo, x, ldx, 5, panel, K, cols, bias); break;
    case 4: avx512_rows(out, ldo, x, ldx, 4, panel, K, cols, bias); break;
    case 3: avx512_rows(out, ldo, x, ldx, 3, panel, K, cols, bias); break;
    case 2: avx512_rows(out, ldo, x, ldx, 2, panel, K, cols, bias); break;
    case 1: avx512_rows(out, ldo, x, ldx, 1, panel, K, cols, bias); break;
    default: break;
    }
}

/* ---- the walk over panels and rows, the same for both ---- */

/* Folds a row's next values v [cols] (columns c0 ..; cols <= STATS_GROUP)
 * into its running log-softmax statistics: the maximum and its first index
 * so far, and in sum four partial sums of exp(value - max) over the values
 * so far (rescaled when the maximum grows), so the output projection's
 * logits are read while still in the first-level cache instead of in two
 * more passes.  Always 16 columns at a time, whatever the panel width: the
 * same sums in the same order for both kernels. */
AVX2_TARGET static ALWAYS_INLINE void fold_stats(const float *v, int cols, int c0,
                                                 tfm_logit_stats *st, double sum[NN_STATS_SUMS])
{
    float bm;
    if (cols == STATS_GROUP) { /* the largest of the 16, then rarely where it is */
        __m256 m8 = _mm256_max_ps(_mm256_loadu_ps(v), _mm256_loadu_ps(v + 8));
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m8), _mm256_extractf128_ps(m8, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1));
        bm = _mm_cvtss_f32(m4);
    } else {
        bm = v[0];
        for (int j = 1; j < cols; j++) bm = v[j] > bm ? v[j] : bm;
    }
    __m256d acc = _mm256_loadu_pd(sum);
    if (bm > st->max) { /* strictly: an earlier column keeps a tie */
        int bj = 0;
        while (bj < cols - 1 && v[bj] != bm) bj++; /* the first of the largest */
        acc = _mm256_mul_pd(acc, _mm256_set1_pd(exp((double)st->max - (double)bm)));
        st->max = bm;
        st->argmax = c0 + bj;
    }
    const float m = st->max;
    if (cols == STATS_GROUP) { /* four double lanes take the 16 values' exp */
        nn_f32x8 e0 = nn_load8(v) - m, e1 = nn_load8(v + 8) - m;
        nn_exp8_nonpositive(&e0);
        nn_exp8_nonpositive(&e1);
        nn_f32x8 e = e0 + e1;
        __m256 e8;
        memcpy(&e8, &e, sizeof e8);
        acc = _mm256_add_pd(acc, _mm256_add_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(e8)),
                                               _mm256_cvtps_pd(_mm256_extractf128_ps(e8, 1))));
        _mm256_storeu_pd(sum, acc);
    } else {
        _mm256_storeu_pd(sum, acc);
        for (int j = 0; j < cols; j++) sum[0] += nn_exp1_nonpositive(v[j] - m);
    }
}

/* out [R, N] = x [R, K] W^T + bias: for each slice of rows that fits in
 * the cache, panel by panel (a panel stays in the first- or second-level
 * cache while every block of rows passes over it).  With stats [R] (and
 * sums [R, NN_STATS_SUMS], scratch), each row's logit statistics too, taken
 * panel by panel while the panel's logits are in the cache. */
AVX2_TARGET static void packed_forward_kernel(float *out, const float *x,
                                              const nn_packed_linear *p, int R,
                                              tfm_logit_stats *stats, double *sums)
{
    block_fn *block = p->kernel == NN_KERNEL_AVX512 ? avx512_block : avx2_block;
    const int width = p->kernel == NN_KERNEL_AVX512 ? AVX512_WIDTH : AVX2_WIDTH;
    const int rows = p->kernel == NN_KERNEL_AVX512 ? AVX512_ROWS : AVX2_ROWS;
    const int N = p->N, K = p->K;
    int slice = ROW_BYTES / (int)(K * sizeof(float)) / rows * rows;
    if (slice < rows) slice = rows;
    if (stats)
        for (int r = 0; r < R; r++) {
            stats[r] = (tfm_logit_stats){.max = -INFINITY, .log_sum = 0, .argmax = 0};
            for (int i = 0; i < NN_STATS_SUMS; i++) sums[(size_t)r * NN_STATS_SUMS + i] = 0;
        }
    for (int r0 = 0; r0 < R; r0 += slice) {
        const int r1 = R - r0 < slice ? R : r0 + slice;
        for (int c0 = 0, pi = 0; c0 < N; c0 += width, pi++) {
            const float *panel = p->panels + (size_t)pi * K * width;
            const int cols = N - c0 < width ? N - c0 : width;
            const float *bias = p->bias ? p->bias + c0 : NULL;
            for (int r = r0; r < r1; r += rows)
                block(out + (size_t)r * N + c0, (size_t)N, x + (size_t)r * K, (size_t)K,
                      r1 - r < rows ? r1 - r : rows, panel, K, cols, bias);
            if (stats)
                for (int i = r0; i < r1; i++)
                    for (int g = c0; g < c0 + cols; g += STATS_GROUP)
                        fold_stats(out + (size_t)i * N + g,
                                   c0 + cols - g < STATS_GROUP ? c0 + cols - g : STATS_GROUP, g,
                                   &stats[i], sums + (size_t)i * NN_STATS_SUMS);
        }
    }
    if (stats)
        for (int r = 0; r < R; r++) {
            const double *sum = sums + (size_t)r * NN_STATS_SUMS;
            stats[r].log_sum = (float)log((sum[0] + sum[1]) + (sum[2] + sum[3]));
        }
}
#endif

/* The kernel this CPU runs best, less if TFM_ISA asks for less. */
nn_kernel nn_packed_best_kernel(void)
{
#ifdef HAVE_KERNELS
    __builtin_cpu_init();
    nn_kernel best = NN_KERNEL_SGEMM;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        best = NN_KERNEL_AVX2;
        if (__builtin_cpu_supports("avx512f")) best = NN_KERNEL_AVX512;
    }
    const char *asked = getenv("TFM_ISA");
    if (asked && strcmp(asked, "avx2") == 0 && best > NN_KERNEL_AVX2) best = NN_KERNEL_AVX2;
    if (asked && strcmp(asked, "none") == 0) best = NN_KERNEL_SGEMM;
    return best;
#else
    return NN_KERNEL_SGEMM;
#endif
}

bool nn_packed_kernel_runs(nn_kernel kernel)
{
#ifdef HAVE_KERNELS
    __builtin_cpu_init();
    switch (kernel) {
    case NN_KERNEL_SGEMM: return true;
    case NN_KERNEL_AVX2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case NN_KERNEL_AVX512:
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
               __builtin_cpu_supports("avx512f");
    }
#endif
    return kernel == NN_KERNEL_SGEMM;
}

tfm_status nn_pack_linear_for(nn_packed_linear *p, const float *weight, const float *bias, int N,
                              int K, nn_kernel kernel)
{
    *p = (nn_packed_linear){.weight = weight, .bias = bias, .N = N, .K = K,
                            .kernel = NN_KERNEL_SGEMM};
    if (kernel == NN_KERNEL_SGEMM || !nn_packed_kernel_runs(kernel) || N <= 0 || K <= 0)
        return TFM_OK; /* sgemm, unpacked */
#ifdef HAVE_KERNELS
    const size_t width = kernel == NN_KERNEL_AVX512 ? AVX512_WIDTH : AVX2_WIDTH;
    const size_t n_panels = ((size_t)N + width - 1) / width;
    float *panels = malloc(n_panels * K * width * sizeof *panels);
    if (!panels) return TFM_ERR_NOMEM;
    tfm_advise_huge_pages(panels, n_panels * K * width * sizeof *panels);
    for (size_t pi = 0; pi < n_panels; pi++) {
        float *panel = panels + pi * K * width;
        for (int k = 0; k < K; k++)
            for (size_t j = 0; j < width; j++) {
                size_t n = pi * width + j;
                panel[(size_t)k * width + j] = n < (size_t)N ? weight[n * K + k] : 0.0f;
            }
    }
    p->panels = panels;
    p->kernel = kernel;
#endif
    return TFM_OK;
}

tfm_status nn_pack_linear(nn_packed_linear *p, const float *weight, const float *bias, int N,
                          int K)
{
    return nn_pack_linear_for(p, weight, bias, N, K, nn_packed_best_kernel());
}

void nn_packed_linear_free(nn_packed_linear *p)
{
    free(p->panels);
    p->panels = NULL;
}

void nn_packed_forward(float *out, const float *x, const nn_packed_linear *p, int R)
{
    if (R <= 0 || p->N <= 0) return;
#ifdef HAVE_KERNELS
    if (p->panels) {
        packed_forward_kernel(out, x, p, R, NULL, NULL);
        return;
    }
#endif
    linear_forward(out, x, p->weight, p->bias, R, p->K, p->N);
}

void nn_packed_forward_stats(float *out, const float *x, const nn_packed_linear *p, int R,
                             tfm_logit_stats *stats, double *sums)
{
    if (R <= 0 || p->N <= 0) return;
#ifdef HAVE_KERNELS
    if (p->panels) {
        packed_forward_kernel(out, x, p, R, stats, sums);
        return;
    }
#endif
    linear_forward(out, x, p->weight, p->bias, R, p->K, p->N);
    logit_stats(out, R, p->N, stats);
}

/* out [R, n_out] = in [R, n_in] W^T + bias: with the packed copy of W when
 * there is one (packed not NULL), else with sgemm. */
void packed_or_linear_forward(float *out, const float *in, const nn_packed_linear *packed,
                              const float *weight, const float *bias, int R, int n_in, int n_out)
{
    if (packed) nn_packed_forward(out, in, packed, R);
    else linear_forward(out, in, weight, bias, R, n_in, n_out);
}

/* ---- a model's weights ---------------------------------------------------- */

static void packed_layers_free(nn_packed_layer *layers, int n)
{
    for (int l = 0; layers && l < n; l++) {
        nn_packed_layer *L = &layers[l];
        nn_packed_linear *all[] = {&L->self_qkv, &L->self_out, &L->cross_q, &L->cross_kv,
                                   &L->cross_out, &L->fc1, &L->fc2};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) nn_packed_linear_free(all[i]);
    }
    free(layers);
}

void tfm_packed_model_free(tfm_packed_model *pm)
{
    if (!pm) return;
    packed_layers_free(pm->encoder, pm->n_encoder_layers);
    packed_layers_free(pm->decoder, pm->n_decoder_layers);
    nn_packed_linear_free(&pm->output);
    free(pm);
}

/* Packs one layer: self-attention (q, k and v lie in a row: one [3D, D]
 * layer), encoder-decoder attention when cross is not NULL (q alone, k and
 * v as one [2D, D] layer for the sources), the FFN. */
static tfm_status pack_layer(nn_packed_layer *L, const tfm_attention *self,
                             const tfm_attention *cross, const tfm_linear *fc1,
                             const tfm_linear *fc2, int D, int F)
{
    tfm_status st = nn_pack_linear(&L->self_qkv, self->q_proj.weight, self->q_proj.bias, 3 * D, D);
    if (st == TFM_OK)
        st = nn_pack_linear(&L->self_out, self->out_proj.weight, self->out_proj.bias, D, D);
    if (st == TFM_OK && cross)
        st = nn_pack_linear(&L->cross_q, cross->q_proj.weight, cross->q_proj.bias, D, D);
    if (st == TFM_OK && cross)
        st = nn_pack_linear(&L->cross_kv, cross->k_proj.weight, cross->k_proj.bias, 2 * D, D);
    if (st == TFM_OK && cross)
        st = nn_pack_linear(&L->cross_out, cross->out_proj.weight, cross->out_proj.bias, D, D);
    if (st == TFM_OK) st = nn_pack_linear(&L->fc1, fc1->weight, fc1->bias, F, D);
    if (st == TFM_OK) st = nn_pack_linear(&L->fc2, fc2->weight, fc2->bias, D, F);
    return st;
}

/* The model's packed weights, created empty on first use; NULL when this
 * CPU has no packed kernel or memory ran out (*st says which). */
static tfm_packed_model *packed_model(tfm_model *m, tfm_status *st)
{
    *st = TFM_OK;
    if (!m->packed && nn_packed_best_kernel() != NN_KERNEL_SGEMM) {
        m->packed = calloc(1, sizeof *m->packed);
        if (!m->packed) *st = TFM_ERR_NOMEM;
    }
    return m->packed;
}

tfm_status tfm_model_pack_for_encoding(tfm_model *m, tfm_error *err)
{
    tfm_status st;
    tfm_packed_model *pm = packed_model(m, &st);
    if (st != TFM_OK) return tfm_error_set(err, st, "out of memory packing the encoder");
    if (!pm || pm->encoder) return TFM_OK; /* no kernel, or packed already */
    const tfm_config *c = &m->config;
    const int NL = c->n_encoder_layers;
    nn_packed_layer *layers = calloc((size_t)NL + 1, sizeof *layers);
    st = layers ? TFM_OK : TFM_ERR_NOMEM;
    for (int l = 0; l < NL && st == TFM_OK; l++) {
        const tfm_encoder_layer *W = &m->params.encoder_layers[l];
        st = pack_layer(&layers[l], &W->self_attn, NULL, &W->fc1, &W->fc2, c->d_model, c->d_ff);
    }
    if (st != TFM_OK) {
        packed_layers_free(layers, NL);
        return tfm_error_set(err, st, "out of memory packing the encoder");
    }
    pm->encoder = layers;
    pm->n_encoder_layers = NL;
    return TFM_OK;
}

tfm_status tfm_model_pack_for_decoding(tfm_model *m, tfm_error *err)
{
    tfm_status st;
    tfm_packed_model *pm = packed_model(m, &st);
    if (st != TFM_OK) return tfm_error_set(err, st, "out of memory packing the decoder");
    if (!pm || pm->decoder) return TFM_OK; /* no kernel, or packed already */
    const tfm_config *c = &m->config;
    const int D = c->d_model, NL = c->n_decoder_layers;
    nn_packed_layer *layers = calloc((size_t)NL + 1, sizeof *layers);
    st = layers ? TFM_OK : TFM_ERR_NOMEM;
    for (int l = 0; l < NL && st == TFM_OK; l++) {
        const tfm_decoder_layer *W = &m->params.decoder_layers[l];
        /* k and v of encoder-decoder attention lie in a row too */
        assert(W->encoder_attn.v_proj.weight == W->encoder_attn.k_proj.weight + (size_t)D * D);
        assert(W->encoder_attn.v_proj.bias == W->encoder_attn.k_proj.bias + D);
        st = pack_layer(&layers[l], &W->self_attn, &W->encoder_attn, &W->fc1, &W->fc2, D,
                        c->d_ff);
    }
    if (st == TFM_OK)
        st = nn_pack_linear(&pm->output, m->params.output_proj, NULL, c->tgt_vocab_size, D);
    if (st != TFM_OK) {
        packed_layers_free(layers, NL);
        nn_packed_linear_free(&pm->output);
        return tfm_error_set(err, st, "out of memory packing the decoder");
    }
    pm->decoder = layers;
    pm->n_decoder_layers = NL;
    return TFM_OK;
}

const char *tfm_model_kernel_name(const tfm_model *m)
{
    const tfm_packed_model *pm = m->packed;
    const nn_packed_layer *L = !pm ? NULL : pm->encoder ? pm->encoder : pm->decoder;
    nn_kernel k = L ? L->self_qkv.kernel : NN_KERNEL_SGEMM;
    return k == NN_KERNEL_AVX512 ? "AVX-512" : k == NN_KERNEL_AVX2 ? "AVX2" : "OpenBLAS sgemm";
}
