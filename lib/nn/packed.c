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
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/layers.h"

enum {
    /* How far ahead of the kernel the float kernels ask for the panel's
     * bytes (_mm_prefetch), in bytes: at a few rows a product is bound by
     * memory, and the hardware's own prefetchers alone left the loads
     * waiting.  On an Intel Xeon (AVX-512, 2 CPUs), a 150 MB walk over
     * panels read by two processes at once: 4 rows 9.2 -> 12.5 GB/s each
     * with 4 KB ahead, 1 row a little; 2 to 8 KB did about as well. */
    PREFETCH_BYTES = 4096,
    STATS_GROUP = 16, /* columns folded into the logit statistics at a time */
    ROW_BYTES = 512 * 1024, /* rows of x a pass over the panels keeps in cache */
    MAX_PREPARED_ROWS = 1024 /* int8 and bf16 rows prepared at a time, at most */
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

/* Asks for the `lines` cache lines of the panel row PREFETCH_BYTES past
 * `row` (read at a later k; past the panel's end, the next panel's, or
 * nothing: a prefetch never faults).  Changes no result. */
#define PREFETCH_AHEAD(row, lines)                                                           \
    do {                                                                                   \
        for (int l_ = 0; l_ < (lines); l_++)                                               \
            _mm_prefetch((const char *)(row) + PREFETCH_BYTES + 64 * l_, _MM_HINT_T0);      \
    } while (0)

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
                                                size_t stride, int K, int cols,
                                                const float *bias)
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
        PREFETCH_AHEAD(panel + (size_t)k * stride, 1); /* the 64 bytes read */
        const __m256 w0 = _mm256_loadu_ps(panel + (size_t)k * stride);
        const __m256 w1 = _mm256_loadu_ps(panel + (size_t)k * stride + 8);
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

/* panel: k by k, stride floats apart (AVX2_WIDTH, or the 32 of a packed
 * file's panels, read as two halves) */
AVX2_TARGET static void avx2_block(float *out, size_t ldo, const float *x, size_t ldx, int rows,
                                   const float *panel, size_t stride, int K, int cols,
                                   const float *bias)
{
    switch (rows) {
    case 6: avx2_rows(out, ldo, x, ldx, 6, panel, stride, K, cols, bias); break;
    case 5: avx2_rows(out, ldo, x, ldx, 5, panel, stride, K, cols, bias); break;
    case 4: avx2_rows(out, ldo, x, ldx, 4, panel, stride, K, cols, bias); break;
    case 3: avx2_rows(out, ldo, x, ldx, 3, panel, stride, K, cols, bias); break;
    case 2: avx2_rows(out, ldo, x, ldx, 2, panel, stride, K, cols, bias); break;
    case 1: avx2_rows(out, ldo, x, ldx, 1, panel, stride, K, cols, bias); break;
    default: break;
    }
}

/* ---- AVX2 on the 32-wide panels of a packed file: 3 rows x 32 columns ---- */

enum { AVX2_WIDE_ROWS = 3 };

/* As avx2_rows, with four registers per row (a whole 32-float row of the
 * panel per k, one pass over it: the panel streams from memory once at
 * batch 1): twelve sums, four panel loads and three broadcasts for twelve
 * FMAs per k.  Each output's sum is the same chain of FMAs in k. */
AVX2_TARGET static ALWAYS_INLINE void avx2_wide_rows(float *out, size_t ldo, const float *x,
                                                     size_t ldx, const int MR,
                                                     const float *panel, int K, int cols,
                                                     const float *bias)
{
    /* written out row by row, as avx2_rows: the sums stay in registers */
    const float *x0 = x, *x1 = MR > 1 ? x + ldx : x, *x2 = MR > 2 ? x + 2 * ldx : x;
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c02 = c00, c03 = c00, c10 = c00, c11 = c00,
           c12 = c00, c13 = c00, c20 = c00, c21 = c00, c22 = c00, c23 = c00;
#define AVX2_WIDE_FMA(i)                                                                   \
    if (MR > i) {                                                                          \
        const __m256 a = _mm256_broadcast_ss(x##i + k);                                    \
        c##i##0 = _mm256_fmadd_ps(a, w0, c##i##0);                                         \
        c##i##1 = _mm256_fmadd_ps(a, w1, c##i##1);                                         \
        c##i##2 = _mm256_fmadd_ps(a, w2, c##i##2);                                         \
        c##i##3 = _mm256_fmadd_ps(a, w3, c##i##3);                                         \
    }
#pragma GCC unroll 2
    for (int k = 0; k < K; k++) {
        const float *w = panel + (size_t)k * 32;
        PREFETCH_AHEAD(w, 2);
        const __m256 w0 = _mm256_loadu_ps(w), w1 = _mm256_loadu_ps(w + 8),
                     w2 = _mm256_loadu_ps(w + 16), w3 = _mm256_loadu_ps(w + 24);
        AVX2_WIDE_FMA(0) AVX2_WIDE_FMA(1) AVX2_WIDE_FMA(2)
    }
    float v[AVX2_WIDE_ROWS * 32]; /* the sums, for store_block */
#define AVX2_WIDE_SUMS(i)                                                                  \
    if (MR > i) {                                                                          \
        _mm256_storeu_ps(v + i * 32, c##i##0);                                             \
        _mm256_storeu_ps(v + i * 32 + 8, c##i##1);                                         \
        _mm256_storeu_ps(v + i * 32 + 16, c##i##2);                                        \
        _mm256_storeu_ps(v + i * 32 + 24, c##i##3);                                        \
    }
    AVX2_WIDE_SUMS(0) AVX2_WIDE_SUMS(1) AVX2_WIDE_SUMS(2)
#undef AVX2_WIDE_SUMS
#undef AVX2_WIDE_FMA
    store_block(out, ldo, v, MR, 32, cols, bias);
}

AVX2_TARGET static void avx2_wide_block(float *out, size_t ldo, const float *x, size_t ldx,
                                        int rows, const float *panel, int K, int cols,
                                        const float *bias)
{
    switch (rows) {
    case 3: avx2_wide_rows(out, ldo, x, ldx, 3, panel, K, cols, bias); break;
    case 2: avx2_wide_rows(out, ldo, x, ldx, 2, panel, K, cols, bias); break;
    case 1: avx2_wide_rows(out, ldo, x, ldx, 1, panel, K, cols, bias); break;
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
        PREFETCH_AHEAD(panel + (size_t)k * AVX512_WIDTH, 2);
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

/* ---- the walk over panels and rows, the same for every kernel ---- */

/* The float kernels as a walk's block: out [rows, cols] = rows of x (K
 * floats, row_bytes apart) times panel pi, plus bias. */
static void avx2_panel(float *out, size_t ldo, const void *x, size_t row_bytes, const float *xs,
                       int rows, const nn_packed_linear *p, int pi, int cols)
{
    const float *panel = (const float *)p->panels + (size_t)pi * p->K * AVX2_WIDTH;
    avx2_block(out, ldo, x, row_bytes / sizeof(float), rows, panel, AVX2_WIDTH, p->K, cols,
               p->bias ? p->bias + pi * AVX2_WIDTH : NULL);
}

/* A 32-wide panel of a packed file under the AVX2 kernel: a block of 6 rows
 * as two halves of 16 columns (6 x 16, the panel's rows 32 floats apart),
 * fewer rows (a decoding step at batch 1) three at a time over whole panel
 * rows, so that the panel streams once.  Measured on an Intel Xeon with
 * TFM_ISA=avx2, base preset: the halves alone ran batch-1 beam 4 a fifth
 * slower than the plain file's 16-wide panels, 3 x 32 alone batch 64 a
 * third slower.  The same sums either way. */
static void avx2_wide_panel(float *out, size_t ldo, const void *x, size_t row_bytes,
                            const float *xs, int rows, const nn_packed_linear *p, int pi, int cols)
{
    (void)xs;
    const float *panel = (const float *)p->panels + (size_t)pi * p->K * AVX512_WIDTH;
    const float *bias = p->bias ? p->bias + pi * AVX512_WIDTH : NULL;
    const size_t ldx = row_bytes / sizeof(float);
    if (rows < AVX2_ROWS) {
        for (int r = 0; r < rows; r += AVX2_WIDE_ROWS)
            avx2_wide_block(out + (size_t)r * ldo, ldo, (const float *)x + (size_t)r * ldx, ldx,
                            rows - r < AVX2_WIDE_ROWS ? rows - r : AVX2_WIDE_ROWS, panel, p->K,
                            cols, bias);
        return;
    }
    for (int h = 0; h < 2 && h * AVX2_WIDTH < cols; h++) {
        const int n = cols - h * AVX2_WIDTH < AVX2_WIDTH ? cols - h * AVX2_WIDTH : AVX2_WIDTH;
        avx2_block(out + h * AVX2_WIDTH, ldo, x, ldx, rows, panel + h * AVX2_WIDTH,
                   AVX512_WIDTH, p->K, n, bias ? bias + h * AVX2_WIDTH : NULL);
    }
}

static void avx512_panel(float *out, size_t ldo, const void *x, size_t row_bytes,
                         const float *xs, int rows, const nn_packed_linear *p, int pi, int cols)
{
    const float *panel = (const float *)p->panels + (size_t)pi * p->K * AVX512_WIDTH;
    avx512_block(out, ldo, x, row_bytes / sizeof(float), rows, panel, p->K, cols,
                 p->bias ? p->bias + pi * AVX512_WIDTH : NULL);
}
#endif

typedef double f64x4 __attribute__((vector_size(32)));

/* Lane by lane, the larger of a and b, a NaN in b never chosen (a NaN only
 * where both are). */
#define MAX_NOT_NAN(T, a, b)                                                                  \
    (((T)(a) & (((T)((a) > (b))) | (T)((b) != (b)))) |                                         \
     ((T)(b) & ~(((T)((a) > (b))) | (T)((b) != (b)))))

/* The largest of 16 values, as the loop `m = v[0]; m = v[j] > m ? v[j] : m`
 * finds it: a NaN first is the answer, a NaN elsewhere is passed over. */
NN_INLINE float max16(const float *v)
{
    if (v[0] != v[0]) return v[0];
    const nn_f32x8 lo = nn_load8(v), hi = nn_load8(v + 8);
    const nn_i32x8 m8 = MAX_NOT_NAN(nn_i32x8, lo, hi);
    nn_f32x8 f8;
    memcpy(&f8, &m8, sizeof f8);
    nn_f32x4 a, b;
    memcpy(&a, &f8, sizeof a);
    memcpy(&b, (const char *)&f8 + sizeof a, sizeof b);
    const nn_i32x4 m4 = MAX_NOT_NAN(nn_i32x4, a, b);
    float m[4];
    memcpy(m, &m4, sizeof m);
    float r = m[0]; /* not a NaN: v[0] is not, and took part */
    for (int j = 1; j < 4; j++) r = m[j] > r ? m[j] : r;
    return r;
}

/* Folds a row's next values v [cols] (columns c0 ..; cols <= STATS_GROUP)
 * into its running log-softmax statistics: the maximum and its first index
 * so far, and (sum not NULL) in sum four partial sums of exp(value - max)
 * over the values so far (rescaled when the maximum grows), so the output
 * projection's logits are read while still in the first-level cache
 * instead of in two more passes.  Always 16 columns at a time, whatever
 * the kernel: the same sums in the same order for all of them (plain C
 * with vector extensions: the same IEEE operations whatever instructions
 * compile them). */
NN_INLINE void fold_stats(nn_isa isa, const float *v, int cols, int c0, tfm_logit_stats *st,
                          double sum[NN_STATS_SUMS])
{
    float bm = v[0]; /* the largest (exact in any order) */
    if (cols == STATS_GROUP) bm = max16(v);
    else
        for (int j = 1; j < cols; j++) bm = v[j] > bm ? v[j] : bm;
    if (bm > st->max) { /* strictly: an earlier column keeps a tie */
        int bj = 0;
        while (bj < cols - 1 && v[bj] != bm) bj++; /* the first of the largest */
        if (sum) {
            const double rescale = exp((double)st->max - (double)bm);
            for (int i = 0; i < NN_STATS_SUMS; i++) sum[i] *= rescale;
        }
        st->max = bm;
        st->argmax = c0 + bj;
    }
    if (!sum) return; /* the maximum and its argmax only */
    const float m = st->max;
    if (cols == STATS_GROUP) { /* four double lanes take the 16 values' exp */
        nn_f32x8 e0, e1; /* the exp of the two halves */
        if (isa == NN_ISA_AVX512) { /* in one sixteen-lane vector */
            nn_f32x16 e16 = nn_load16(v) - m;
            nn_exp16_nonpositive(&e16);
            memcpy(&e0, &e16, sizeof e0);
            memcpy(&e1, (const char *)&e16 + sizeof e0, sizeof e1);
        } else { /* in two of eight lanes: without AVX-512, GCC moves
                    sixteen-lane vectors through memory (2.5x slower on AVX2) */
            e0 = nn_load8(v) - m;
            e1 = nn_load8(v + 8) - m;
            nn_exp8_nonpositive(&e0);
            nn_exp8_nonpositive(&e1);
        }
        const nn_f32x8 e = e0 + e1; /* the halves, added lane by lane */
        nn_f32x4 e_lo, e_hi;
        memcpy(&e_lo, &e, sizeof e_lo);
        memcpy(&e_hi, (const char *)&e + sizeof e_lo, sizeof e_hi);
        /* sum[i] += (double)e[i] + (double)e[i + 4], the four lanes at once */
        const f64x4 lo = __builtin_convertvector(e_lo, f64x4);
        const f64x4 hi = __builtin_convertvector(e_hi, f64x4);
        f64x4 acc;
        memcpy(&acc, sum, sizeof acc);
        acc += lo + hi;
        memcpy(sum, &acc, sizeof acc);
    } else {
        for (int j = 0; j < cols; j++) sum[0] += nn_exp1_nonpositive(v[j] - m);
    }
}

/* How a kernel walks a product: its block function, the outputs of a
 * panel, the rows of a block, and whether the rows are prepared (int8,
 * bf16) or read as they are (float). */
typedef struct walk_kernel {
    nn_quant_block_fn *block;
    int width, rows;
    bool prepared;
} walk_kernel;

static walk_kernel walk_kernel_of(const nn_packed_linear *p)
{
    const nn_kernel k = p->kernel;
    walk_kernel w = {.width = QUANT_WIDTH, .prepared = true};
#ifdef HAVE_KERNELS
    if (k == NN_KERNEL_AVX2 && p->wide)
        return (walk_kernel){avx2_wide_panel, AVX512_WIDTH, AVX2_ROWS, false};
    if (k == NN_KERNEL_AVX2) return (walk_kernel){avx2_panel, AVX2_WIDTH, AVX2_ROWS, false};
    if (k == NN_KERNEL_AVX512) return (walk_kernel){avx512_panel, AVX512_WIDTH, AVX512_ROWS, false};
#endif
    w.block = nn_quant_block(k, &w.rows);
    return w;
}

/* The bytes of one row as the kernel reads it, and the rows of a slice:
 * as many as fit in ROW_BYTES, whole blocks, at least one block. */
static size_t walk_row_bytes(const nn_packed_linear *p, walk_kernel w)
{
    return w.prepared ? nn_quant_row_bytes(p) : (size_t)p->K * sizeof(float);
}

static int walk_slice_rows(const nn_packed_linear *p, walk_kernel w)
{
    size_t slice = ROW_BYTES / walk_row_bytes(p, w) / (size_t)w.rows * (size_t)w.rows;
    if (w.prepared && slice > MAX_PREPARED_ROWS) slice = MAX_PREPARED_ROWS; /* bounds the scratch */
    return slice < (size_t)w.rows ? w.rows : (int)slice;
}

size_t nn_packed_scratch_bytes(const nn_packed_linear *p)
{
    if (!p->panels) return 0;
    walk_kernel w = walk_kernel_of(p);
    if (!w.prepared) return 0;
    const size_t rows = (size_t)walk_slice_rows(p, w);
    return rows * (walk_row_bytes(p, w) + sizeof(float)) + 64;
}

/* Where a walk finds its prepared rows (int8, bf16) in scratch: the rows
 * 64-byte aligned, their scales after them. */
static void *prepared_rows(void *scratch)
{
    return (void *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
}

static float *prepared_scales(const nn_packed_linear *p, walk_kernel w, void *scratch)
{
    const size_t slice = (size_t)walk_slice_rows(p, w);
    return (float *)(void *)((char *)prepared_rows(scratch) + slice * walk_row_bytes(p, w));
}

/* Each row's logit statistics started, before the first fold. */
static void stats_start(tfm_logit_stats *stats, double *sums, int R)
{
    for (int r = 0; r < R; r++) {
        stats[r] = (tfm_logit_stats){.max = -INFINITY, .log_sum = NAN, .argmax = 0};
        for (int i = 0; sums && i < NN_STATS_SUMS; i++) sums[(size_t)r * NN_STATS_SUMS + i] = 0;
    }
}

/* Folds columns [c0, c0 + cols) of row i of out [., N] into its statistics,
 * STATS_GROUP at a time from c0. */
NN_INLINE void fold_columns(nn_isa isa, const float *out, int N, int i, int c0, int cols,
                            tfm_logit_stats *stats, double *sums)
{
    for (int g = c0; g < c0 + cols; g += STATS_GROUP)
        fold_stats(isa, out + (size_t)i * N + g,
                   c0 + cols - g < STATS_GROUP ? c0 + cols - g : STATS_GROUP, g, &stats[i],
                   sums ? sums + (size_t)i * NN_STATS_SUMS : NULL);
}

static void stats_finish(tfm_logit_stats *stats, const double *sums, int R)
{
    for (int r = 0; sums && r < R; r++) {
        const double *sum = sums + (size_t)r * NN_STATS_SUMS;
        stats[r].log_sum = (float)log((sum[0] + sum[1]) + (sum[2] + sum[3]));
    }
}

/* out [R, N] = x [R, K] W^T + bias over panels [pi0, pi1): for each slice of
 * rows that fits in the cache (prepared first into scratch for int8 and
 * bf16, unless rows_ready says a single slice of them is there already),
 * panel by panel (a panel stays in the first- or second-level cache while
 * every block of rows passes over it).  With stats [R] (and sums [R,
 * NN_STATS_SUMS], scratch), each row's logit statistics too, taken panel
 * by panel while the panel's logits are in the cache. */
NN_INLINE void packed_walk_body(nn_isa isa, float *out, const float *x, const nn_packed_linear *p,
                                int R, void *scratch, tfm_logit_stats *stats, double *sums,
                                int pi0, int pi1, bool rows_ready)
{
    const walk_kernel w = walk_kernel_of(p);
    const int N = p->N, slice = walk_slice_rows(p, w);
    const size_t row_bytes = walk_row_bytes(p, w);
    void *xq = prepared_rows(scratch);
    float *xs = prepared_scales(p, w, scratch);
    if (stats) stats_start(stats, sums, R);
    for (int r0 = 0; r0 < R; r0 += slice) {
        const int r1 = R - r0 < slice ? R : r0 + slice;
        const char *rows = (const char *)(x + (size_t)r0 * p->K);
        if (w.prepared) {
            if (!rows_ready)
                nn_quant_prepare(p, x + (size_t)r0 * p->K, (size_t)p->K, r1 - r0, xq, xs);
            rows = xq;
        }
        for (int pi = pi0; pi < pi1; pi++) {
            const int c0 = pi * w.width, cols = N - c0 < w.width ? N - c0 : w.width;
            for (int r = r0; r < r1; r += w.rows)
                w.block(out + (size_t)r * N + c0, (size_t)N, rows + (size_t)(r - r0) * row_bytes,
                        row_bytes, xs + (r - r0), r1 - r < w.rows ? r1 - r : w.rows, p, pi, cols);
            if (stats)
                for (int i = r0; i < r1; i++) fold_columns(isa, out, N, i, c0, cols, stats, sums);
        }
    }
    if (stats) stats_finish(stats, sums, R);
}
NN_VERSIONS_512(static, packed_walk,
                (float *out, const float *x, const nn_packed_linear *p, int R, void *scratch,
                 tfm_logit_stats *stats, double *sums, int pi0, int pi1, bool rows_ready),
                (out, x, p, R, scratch, stats, sums, pi0, pi1, rows_ready))

/* The statistics of rows [0, R) of out [R, N], folded in the order the walk
 * folds them (per row, column groups from 0 up): the same bits. */
NN_INLINE void packed_stats_body(nn_isa isa, const float *out, int N, int R,
                                 tfm_logit_stats *stats, double *sums)
{
    stats_start(stats, sums, R);
    for (int i = 0; i < R; i++) fold_columns(isa, out, N, i, 0, N, stats, sums);
    stats_finish(stats, sums, R);
}
NN_VERSIONS_512(static, packed_stats,
                (const float *out, int N, int R, tfm_logit_stats *stats, double *sums),
                (out, N, R, stats, sums))

/* ---- halving a product with the helper -------------------------------------------------- */

/* The helper the products may use (nn_packed_set_helper), or NULL; and the
 * weights a product needs, at least, for the handover (a few microseconds)
 * to pay.  Measured on an Intel Xeon (2 CPUs), a base-shaped model's
 * packed file, one line, best of 9 on a busy machine: decode 98 ms alone,
 * 82 ms halving the products of 1M weights and more (the feed-forward
 * layers and the output layer), 71 ms halving those of 512 x 512 too.
 * At batch 1 a product reads its weights from memory, and two CPUs read
 * them faster than one, though not twice as fast here. */
static tfm_helper *product_helper;
enum { MIN_HALVED_WEIGHTS = 1 << 18 };

void nn_packed_set_helper(tfm_helper *helper)
{
    product_helper = helper;
}

typedef struct halved_walk {
    float *out;
    const float *x;
    const nn_packed_linear *p;
    int R, n_panels;
    void *scratch;
} halved_walk;

static void walk_half(void *ctx, int part)
{
    const halved_walk *h = ctx;
    const int mid = (h->n_panels + 1) / 2;
    packed_walk(h->out, h->x, h->p, h->R, h->scratch, NULL, NULL, part ? mid : 0,
                part ? h->n_panels : mid, true);
}

/* The walk of the whole product: its panels halved between this thread and
 * the helper when the helper is free, the rows few (one slice) and the
 * weights many; the statistics then folded after, in the walk's order.
 * Every output is the same sum whichever thread makes it. */
static void packed_walk_all(float *out, const float *x, const nn_packed_linear *p, int R,
                            void *scratch, tfm_logit_stats *stats, double *sums)
{
    const walk_kernel w = walk_kernel_of(p);
    const int n_panels = (p->N + w.width - 1) / w.width;
    const bool halve = product_helper && R <= walk_slice_rows(p, w) && n_panels >= 2 &&
                       (size_t)p->N * (size_t)p->K >= MIN_HALVED_WEIGHTS;
    bool rows_ready = false; /* int8, bf16: prepared once for both halves */
    if (halve) {
        if (w.prepared)
            nn_quant_prepare(p, x, (size_t)p->K, R, prepared_rows(scratch),
                             prepared_scales(p, w, scratch));
        rows_ready = w.prepared;
        halved_walk h = {out, x, p, R, n_panels, scratch};
        if (tfm_helper_run(product_helper, walk_half, &h)) {
            if (stats) packed_stats(out, p->N, R, stats, sums);
            return;
        }
    }
    /* whole: no helper, or it was busy */
    packed_walk(out, x, p, R, scratch, stats, sums, 0, n_panels, rows_ready);
}

/* The kernel this CPU runs best, less if TFM_ISA asks for less. */
nn_kernel nn_packed_best_kernel(void)
{
#ifdef HAVE_KERNELS
    const nn_isa isa = nn_isa_level();
    if (isa == NN_ISA_PLAIN || !__builtin_cpu_supports("fma")) return NN_KERNEL_SGEMM;
    return isa == NN_ISA_AVX512 ? NN_KERNEL_AVX512 : NN_KERNEL_AVX2;
#else
    return NN_KERNEL_SGEMM;
#endif
}

bool nn_packed_kernel_runs(nn_kernel kernel)
{
    switch (kernel) {
    case NN_KERNEL_SGEMM:
    case NN_KERNEL_INT8_C:
    case NN_KERNEL_BF16_C: return true;
    default: break;
    }
#ifdef HAVE_KERNELS
    __builtin_cpu_init();
    const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    const bool avx512 = avx2 && __builtin_cpu_supports("avx512f");
    const bool bw = avx512 && __builtin_cpu_supports("avx512bw");
    switch (kernel) {
    case NN_KERNEL_AVX2:
    case NN_KERNEL_INT8_AVX2:
    case NN_KERNEL_BF16_AVX2: return avx2;
    case NN_KERNEL_AVX512: return avx512;
    case NN_KERNEL_INT8_AVX512BW:
    case NN_KERNEL_BF16_AVX512BW: return bw;
    case NN_KERNEL_INT8_VNNI: return bw && __builtin_cpu_supports("avx512vnni");
    case NN_KERNEL_BF16_AVX512: return bw && __builtin_cpu_supports("avx512bf16");
    default: break;
    }
#endif
    return false;
}

nn_kernel nn_quant_best_kernel(tfm_compute_type type)
{
    const nn_isa_asked asked = nn_isa_asked_for();
    if (asked == NN_ASKED_PLAIN)
        return type == TFM_COMPUTE_BF16 ? NN_KERNEL_BF16_C : NN_KERNEL_INT8_C;
    /* fastest first; TFM_ISA=avx512bw or avx2 starts the list lower */
    static const nn_kernel int8[] = {NN_KERNEL_INT8_VNNI, NN_KERNEL_INT8_AVX512BW,
                                     NN_KERNEL_INT8_AVX2, NN_KERNEL_INT8_C};
    static const nn_kernel bf16[] = {NN_KERNEL_BF16_AVX512, NN_KERNEL_BF16_AVX512BW,
                                     NN_KERNEL_BF16_AVX2, NN_KERNEL_BF16_C};
    const nn_kernel *order = type == TFM_COMPUTE_BF16 ? bf16 : int8;
    size_t i = 0;
    if (asked == NN_ASKED_AVX512BW) i = 1;
    if (asked == NN_ASKED_AVX2) i = 2;
    while (!nn_packed_kernel_runs(order[i])) i++;
    return order[i];
}

tfm_status nn_pack_linear_for(nn_packed_linear *p, const float *weight, const float *bias, int N,
                              int K, nn_kernel kernel)
{
    *p = (nn_packed_linear){.weight = weight, .bias = bias, .N = N, .K = K,
                            .kernel = NN_KERNEL_SGEMM};
    if (kernel == NN_KERNEL_SGEMM || !nn_packed_kernel_runs(kernel) || N <= 0 || K <= 0)
        return TFM_OK; /* sgemm, unpacked */
#ifdef HAVE_KERNELS
    if (kernel != NN_KERNEL_AVX2 && kernel != NN_KERNEL_AVX512) return TFM_ERR_ARG;
    const size_t width = kernel == NN_KERNEL_AVX512 ? AVX512_WIDTH : AVX2_WIDTH;
    const size_t n_panels = ((size_t)N + width - 1) / width;
    float *panels = malloc(n_panels * K * width * sizeof *panels);
    if (!panels) return TFM_ERR_NOMEM;
    tfm_advise_huge_pages(panels, n_panels * K * width * sizeof *panels);
    if (width == NN_PANEL_WIDTH) { /* AVX-512's panels are a packed file's (panel.c) */
        const nn_panel_rows rows = {weight, NULL, N, K, TFM_COMPUTE_FLOAT32};
        nn_panels_make(&rows, (uint32_t *)(void *)panels, NULL, NULL);
    } else {
        for (size_t pi = 0; pi < n_panels; pi++) {
            float *panel = panels + pi * K * width;
            for (int k = 0; k < K; k++)
                for (size_t j = 0; j < width; j++) {
                    size_t n = pi * width + j;
                    panel[(size_t)k * width + j] = n < (size_t)N ? weight[n * K + k] : 0.0f;
                }
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

tfm_status nn_borrow_panels(nn_packed_linear *p, const void *panels, const float *scale,
                            const int32_t *sums, const float *bias, int N, int K,
                            nn_kernel kernel)
{
    *p = (nn_packed_linear){.bias = bias, .N = N, .K = K, .kernel = kernel, .borrowed = true};
    const bool float32 = kernel == NN_KERNEL_AVX2 || kernel == NN_KERNEL_AVX512;
    if (!float32 && !nn_kernel_is_int8(kernel) && !nn_kernel_is_bf16(kernel)) return TFM_ERR_ARG;
    if (!nn_packed_kernel_runs(kernel)) return TFM_ERR_ARG;
    p->wide = kernel == NN_KERNEL_AVX2;
    /* the kernels only read them */
    p->panels = (void *)(uintptr_t)panels;
    p->scale = (float *)(uintptr_t)scale;
    p->col_sums = (int32_t *)(uintptr_t)sums;
    return TFM_OK;
}

void nn_packed_linear_free(nn_packed_linear *p)
{
    if (!p->borrowed) {
        free(p->panels);
        free(p->scale);
        free(p->col_sums);
    }
    p->panels = NULL;
    p->scale = NULL;
    p->col_sums = NULL;
}

/* Every layout lies in 4-byte units (a float; an int8 group of 4; a bf16
 * pair): panel pi holds, for each unit u of its columns, width units side
 * by side.  Sets *width and *units (per column); false for no panels. */
static bool panel_layout(const nn_packed_linear *p, size_t *width, size_t *units)
{
    if (!p->panels) return false;
    if (nn_kernel_is_int8(p->kernel)) {
        *width = QUANT_WIDTH;
        *units = ((size_t)p->K + 3) / 4;
    } else if (nn_kernel_is_bf16(p->kernel)) {
        *width = QUANT_WIDTH;
        *units = ((size_t)p->K + 1) / 2;
    } else {
#ifdef HAVE_KERNELS
        *width = p->kernel == NN_KERNEL_AVX512 || p->wide ? AVX512_WIDTH : AVX2_WIDTH;
#else
        return false;
#endif
        *units = (size_t)p->K;
    }
    return true;
}

tfm_status nn_packed_gather(nn_packed_linear *dst, const nn_packed_linear *src,
                            const int32_t *cols, int n, tfm_buf *memory)
{
    *dst = (nn_packed_linear){.N = n, .K = src->K, .kernel = src->kernel, .wide = src->wide};
    size_t width, units;
    if (!panel_layout(src, &width, &units) || n <= 0) return TFM_ERR_ARG;
    const size_t n_panels = ((size_t)n + width - 1) / width;
    const size_t n_words = n_panels * width * units + 32; /* as nn_pack_*: slack for the kernels */
    const size_t n_cols = src->scale ? n_panels * width : 0; /* int8: a scale and a sum each */
    const size_t n_bias = src->bias ? (size_t)n : 0;
    /* [n_words] panels, then [n_cols] scales, then [n_cols] sums, then
     * [n_bias] biases: 4 bytes each */
    uint32_t *words = tfm_buf_array(memory, n_words + 2 * n_cols + n_bias, sizeof *words);
    if (!words) return TFM_ERR_NOMEM;
    /* the memory is reused from batch to batch: the padding is zeroed, not
     * taken fresh from calloc (a shortlist's panels are megabytes, and
     * fresh pages cost their zeroing every batch) */
    const uint32_t *from = src->panels;
    for (int j = 0; j < n; j++) {
        const size_t c = (size_t)cols[j];
        const uint32_t *in = from + c / width * width * units + c % width;
        uint32_t *out = words + (size_t)j / width * width * units + (size_t)j % width;
        for (size_t u = 0; u < units; u++) out[u * width] = in[u * width];
    }
    for (size_t j = (size_t)n; j < n_panels * width; j++) {
        uint32_t *out = words + j / width * width * units + j % width;
        for (size_t u = 0; u < units; u++) out[u * width] = 0;
    }
    memset(words + n_words - 32, 0, 32 * sizeof *words);
    dst->panels = words;
    if (n_cols) {
        dst->scale = (float *)(void *)(words + n_words);
        dst->col_sums = (int32_t *)(void *)(words + n_words + n_cols);
        for (size_t j = 0; j < n_cols; j++) {
            dst->scale[j] = j < (size_t)n ? src->scale[cols[j]] : 0.0f;
            dst->col_sums[j] = j < (size_t)n ? src->col_sums[cols[j]] : 0;
        }
    }
    if (n_bias) {
        float *bias = (float *)(void *)(words + n_words + 2 * n_cols);
        for (int j = 0; j < n; j++) bias[j] = src->bias[cols[j]];
        dst->bias = bias;
    }
    return TFM_OK;
}

void nn_packed_forward(float *out, const float *x, const nn_packed_linear *p, int R,
                       void *scratch)
{
    if (R <= 0 || p->N <= 0) return;
    if (p->panels) packed_walk_all(out, x, p, R, scratch, NULL, NULL);
    else linear_forward(out, x, p->weight, p->bias, R, p->K, p->N);
}

void nn_packed_forward_stats(float *out, const float *x, const nn_packed_linear *p, int R,
                             void *scratch, tfm_logit_stats *stats, double *sums)
{
    if (R <= 0 || p->N <= 0) return;
    if (p->panels) {
        packed_walk_all(out, x, p, R, scratch, stats, sums);
        return;
    }
    linear_forward(out, x, p->weight, p->bias, R, p->K, p->N);
    logit_stats(out, R, p->N, stats);
}

/* out [R, n_out] = in [R, n_in] W^T + bias: with the packed copy of W when
 * there is one (packed not NULL), else with sgemm. */
void packed_or_linear_forward(float *out, const float *in, const nn_packed_linear *packed,
                              void *scratch, const float *weight, const float *bias, int R,
                              int n_in, int n_out)
{
    if (packed) nn_packed_forward(out, in, packed, R, scratch);
    else linear_forward(out, in, weight, bias, R, n_in, n_out);
}

void packed_ffn_forward(float *out, float *hidden, const float *inp, const nn_packed_layer *P,
                        void *scratch, const tfm_linear *fc1, const tfm_linear *fc2, int N, int D,
                        int F, tfm_activation act)
{
    packed_or_linear_forward(hidden, inp, P ? &P->fc1 : NULL, scratch, fc1->weight, fc1->bias, N,
                             D, F);
    activation_forward(act, hidden, (size_t)N * F);
    packed_or_linear_forward(out, hidden, P ? &P->fc2 : NULL, scratch, fc2->weight, fc2->bias, N,
                             F, D);
}
