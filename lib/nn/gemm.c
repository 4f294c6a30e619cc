/* gemm.c - training's matrix products on kernels of the project's own.
 *
 * nn_sgemm is cblas_sgemm (row-major, either operand transposed) for the
 * products of training: the linear layers' forward and backward, the
 * output projection, attention's and relative positions' products.  They
 * went to OpenBLAS, whose kernels are picked by the CPU it recognises: an
 * OpenBLAS older than the CPU, or OPENBLAS_CORETYPE=Haswell (as the
 * project's machines set it), runs AVX2 kernels on an AVX-512 CPU at half
 * its rate.  Here the kernel is chosen as encode's and decode's are
 * (nn_isa_level: AVX-512, else AVX2 with FMA; TFM_ISA=avx2 asks for less);
 * without either, the product goes to cblas_sgemm.
 *
 * The method is Goto's (and BLIS's).  For each block of KC values of k,
 * op(B)'s rows k .. k + KC - 1 are packed into panels of NR columns (for
 * each k, NR consecutive floats), and a kernel keeps an MR x NR block of C
 * in registers while it walks k: per k, NR/16 (or /8) loads of the panel,
 * MR broadcasts of A, the FMAs.  A is read in place, MR rows at a time (a
 * transposed A is packed first into panels of MR rows).  A panel of B
 * (KC x NR floats, 32 KB with AVX-512) stays in the first- or
 * second-level cache while the kernel runs down MC rows of A.  KC is 256
 * for the sums' sake: each block of k is summed from zero and then added
 * to C, so the rounding error grows with KC, not with K.  With 512, a
 * weight gradient's sum over 4,096 tokens had 1.3 times OpenBLAS's
 * root-mean-square error (8.7e-6 against 6.8e-6 in double's units); with
 * 256, 6.4e-6, at the same speed (bench/gemm, AMD EPYC Zen 4, 3
 * interleaved rounds: 103.6-105.1 against 104.6-105.9 GFLOP/s on 1
 * thread, 199-205 against 201-205 on 2; on an Intel Xeon, 512 had looked
 * faster by about the machine's noise).
 *
 * Every C[i][j] is beta C[i][j] plus alpha times the sum over k, gathered
 * by FMA in the order of k within each block of KC and block after block:
 * its bits depend on K, not on M, N, the other rows or columns, the
 * threads or where the operands lie in memory.  So a row's result is the
 * same computed alone or in a batch, and the same at any thread count.  The
 * AVX2 and AVX-512 kernels make the same FMAs in the same order and give
 * the same bits.
 *
 * Threads: op(B) is packed once for all of them, and C is cut into tiles
 * that each takes as it finishes the last (gemm_job, below), when the
 * product is big enough to pay for starting them (tfm_blas_thread_count:
 * the programs' thread count, 1 inside a one-thread section of
 * core/blas.h). */
#include <cblas.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/blas.h"
#include "nn/layers.h"

enum {
    KC = 256,  /* values of k per block */
    MC = 192,  /* rows of A per tile: 192 x 256 floats, 192 KB */
    IN_PLACE_MAX_ROWS = 64, /* op(A) rows up to which B is not packed */
    TURNED_MAX_FLOATS = 16384, /* ... if transposed, up to this size (64 KB) */
    /* A product of fewer multiply-adds than this runs on one thread. */
    PARALLEL_MIN_MACS = 1 << 21
};

/* One product's operands, as cblas_sgemm takes them (row-major). */
typedef struct {
    bool trans_a, trans_b;
    int M, N, K;
    float alpha;
    const float *A;
    int lda;
    const float *B;
    int ldb;
    float beta;
    float *C;
    int ldc;
    const float *bias; /* NULL, or [N]: C = bias (each row) + alpha op(A) op(B) */
} gemm_args;

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define HAVE_GEMM_KERNELS 1

#define ALWAYS_INLINE __attribute__((always_inline)) inline

/* dst [panels of kc x MR] (MR 6 or 8): rows i0 .. i0 + m - 1 of op(A) =
 * A^T, columns k0 .. k0 + kc - 1, in panels of MR rows (dst[p][k][r] =
 * A[k0 + k][i0 + p MR + r]), zeros past m.
 *
 * PACK_A_KS values of k at a time: their rows of A (a few KB) stay in the
 * first-level cache while every panel takes its part of them, 512
 * contiguous bytes.  (Panel by panel over all of k, the rows were read lda
 * apart, a few values at a time, and packing took 5% of a training step;
 * k by k over all panels, each k wrote a few values to every panel, kc MR
 * floats apart: 8 KB, a multiple of the cache's way size, so the panels'
 * lines all fell in one set and evicted one another, and packing took 5%
 * again.) */
enum { PACK_A_KS = 16 };

static void pack_a_transposed(float *dst, const gemm_args *g, int i0, int m, int k0, int kc,
                              int MR)
{
    const int whole = m / MR * MR; /* the rows of whole panels */
    for (int kb = 0; kb < kc; kb += PACK_A_KS) {
        const int ke = kc - kb < PACK_A_KS ? kc : kb + PACK_A_KS;
        for (int p = 0; p < whole; p += MR) {
            const float *s = g->A + (size_t)(k0 + kb) * g->lda + i0 + p;
            float *d = dst + (size_t)p * kc + (size_t)kb * MR;
            if (MR == 8) /* copies of a constant size, made inline */
                for (int k = kb; k < ke; k++, s += g->lda, d += 8) memcpy(d, s, 32);
            else if (MR == 6)
                for (int k = kb; k < ke; k++, s += g->lda, d += 6) memcpy(d, s, 24);
            else
                for (int k = kb; k < ke; k++, s += g->lda, d += MR)
                    memcpy(d, s, (size_t)MR * sizeof *d);
        }
        if (whole < m)
            for (int k = kb; k < ke; k++) {
                const float *s = g->A + (size_t)(k0 + k) * g->lda + i0 + whole;
                float *d = dst + (size_t)whole * kc + (size_t)k * MR;
                memcpy(d, s, (size_t)(m - whole) * sizeof *d);
                for (int r = m - whole; r < MR; r++) d[r] = 0.0f;
            }
    }
}

/* dst[t][r] (rows of dst ldd apart) = src[r][t] (rows of src lds apart),
 * for r, t < 8. */
__attribute__((target("avx2"))) static void transpose_8x8(float *dst, size_t ldd,
                                                          const float *src, size_t lds)
{
    __m256 r0 = _mm256_loadu_ps(src), r1 = _mm256_loadu_ps(src + lds),
           r2 = _mm256_loadu_ps(src + 2 * lds), r3 = _mm256_loadu_ps(src + 3 * lds),
           r4 = _mm256_loadu_ps(src + 4 * lds), r5 = _mm256_loadu_ps(src + 5 * lds),
           r6 = _mm256_loadu_ps(src + 6 * lds), r7 = _mm256_loadu_ps(src + 7 * lds);
    /* pairs of rows interleaved, then pairs of pairs, then the halves */
    const __m256 a0 = _mm256_unpacklo_ps(r0, r1), a1 = _mm256_unpackhi_ps(r0, r1),
                 a2 = _mm256_unpacklo_ps(r2, r3), a3 = _mm256_unpackhi_ps(r2, r3),
                 a4 = _mm256_unpacklo_ps(r4, r5), a5 = _mm256_unpackhi_ps(r4, r5),
                 a6 = _mm256_unpacklo_ps(r6, r7), a7 = _mm256_unpackhi_ps(r6, r7);
    const __m256 b0 = _mm256_shuffle_ps(a0, a2, 0x44), b1 = _mm256_shuffle_ps(a0, a2, 0xEE),
                 b2 = _mm256_shuffle_ps(a1, a3, 0x44), b3 = _mm256_shuffle_ps(a1, a3, 0xEE),
                 b4 = _mm256_shuffle_ps(a4, a6, 0x44), b5 = _mm256_shuffle_ps(a4, a6, 0xEE),
                 b6 = _mm256_shuffle_ps(a5, a7, 0x44), b7 = _mm256_shuffle_ps(a5, a7, 0xEE);
    r0 = _mm256_permute2f128_ps(b0, b4, 0x20);
    r1 = _mm256_permute2f128_ps(b1, b5, 0x20);
    r2 = _mm256_permute2f128_ps(b2, b6, 0x20);
    r3 = _mm256_permute2f128_ps(b3, b7, 0x20);
    r4 = _mm256_permute2f128_ps(b0, b4, 0x31);
    r5 = _mm256_permute2f128_ps(b1, b5, 0x31);
    r6 = _mm256_permute2f128_ps(b2, b6, 0x31);
    r7 = _mm256_permute2f128_ps(b3, b7, 0x31);
    _mm256_storeu_ps(dst, r0);
    _mm256_storeu_ps(dst + ldd, r1);
    _mm256_storeu_ps(dst + 2 * ldd, r2);
    _mm256_storeu_ps(dst + 3 * ldd, r3);
    _mm256_storeu_ps(dst + 4 * ldd, r4);
    _mm256_storeu_ps(dst + 5 * ldd, r5);
    _mm256_storeu_ps(dst + 6 * ldd, r6);
    _mm256_storeu_ps(dst + 7 * ldd, r7);
}

/* dst [panels of kc x NR] (NR 16 or 32): rows k0 .. k0 + kc - 1 of op(B),
 * columns j0 .. j0 + n - 1, in panels of NR columns (dst[q][k][c] =
 * op(B)[k0 + k][j0 + q NR + c]), zeros past n. */
static void pack_b(float *dst, const gemm_args *g, int j0, int n, int k0, int kc, int NR)
{
    for (int q = 0; q < n; q += NR) {
        const int cols = n - q < NR ? n - q : NR;
        float *d = dst + (size_t)q * kc;
        if (!g->trans_b && cols == NR) {
            /* a whole panel: copies of a constant size, made inline */
            for (int k = 0; k < kc; k++) {
                const float *s = g->B + (size_t)(k0 + k) * g->ldb + j0 + q;
                if (NR == 32)
                    memcpy(d + (size_t)k * 32, s, 32 * sizeof *d);
                else
                    memcpy(d + (size_t)k * 16, s, 16 * sizeof *d);
            }
        } else if (!g->trans_b) {
            for (int k = 0; k < kc; k++) {
                const float *s = g->B + (size_t)(k0 + k) * g->ldb + j0 + q;
                float *dk = d + (size_t)k * NR;
                memcpy(dk, s, (size_t)cols * sizeof *dk);
                for (int c = cols; c < NR; c++) dk[c] = 0.0f;
            }
        } else {
            /* op(B)'s columns are B's rows: eight of them at a time,
             * eight values of k at a time, turned in registers */
            int c8 = 0;
            for (; c8 + 8 <= cols; c8 += 8) {
                const float *s = g->B + (size_t)(j0 + q + c8) * g->ldb + k0;
                int k = 0;
                for (; k + 8 <= kc; k += 8)
                    transpose_8x8(d + (size_t)k * NR + c8, NR, s + k, g->ldb);
                for (; k < kc; k++)
                    for (int c = 0; c < 8; c++)
                        d[(size_t)k * NR + c8 + c] = s[(size_t)c * g->ldb + k];
            }
            for (int c = c8; c < NR; c++) {
                if (c >= cols) {
                    for (int k = 0; k < kc; k++) d[(size_t)k * NR + c] = 0.0f;
                    continue;
                }
                const float *s = g->B + (size_t)(j0 + q + c) * g->ldb + k0;
                for (int k = 0; k < kc; k++) d[(size_t)k * NR + c] = s[k];
            }
        }
    }
}

/* dst [K x ldd] = op(B) = B^T, whole (dst[k][j] = B[j][k]; ldd at least
 * N rounded up to 8: the columns past N may be written), for a transposed
 * B that a few rows of A meet, so that the kernel reads it in place as it
 * reads a B not transposed (with NR columns packed, a product of a
 * sentence's 12 tokens by 64 spent most of its time writing the zeros of a
 * panel of 32). */
static void transpose_b(float *dst, size_t ldd, const gemm_args *g)
{
    int j = 0;
    for (; j + 8 <= g->N; j += 8) {
        const float *s = g->B + (size_t)j * g->ldb;
        int k = 0;
        for (; k + 8 <= g->K; k += 8)
            transpose_8x8(dst + (size_t)k * ldd + j, ldd, s + k, g->ldb);
        for (; k < g->K; k++)
            for (int c = 0; c < 8; c++) dst[(size_t)k * ldd + j + c] = s[(size_t)c * g->ldb + k];
    }
    if (j == g->N) return;
    /* the last rows of B, fewer than 8: turned through a block padded
     * with zeros (written into dst's columns past N, which ldd leaves) */
    const int left = g->N - j;
    float block[64] = {0};
    for (int k = 0; k < g->K; k += 8) {
        const int kk = g->K - k < 8 ? g->K - k : 8;
        for (int r = 0; r < left; r++)
            memcpy(block + r * 8, g->B + (size_t)(j + r) * g->ldb + k, (size_t)kk * sizeof *block);
        if (kk == 8) {
            transpose_8x8(dst + (size_t)k * ldd + j, ldd, block, 8);
        } else {
            for (int t = 0; t < kk; t++)
                for (int r = 0; r < left; r++)
                    dst[(size_t)(k + t) * ldd + j + r] = block[r * 8 + t];
        }
    }
}

/* A kernel: C [rows, cols] = beta Cin + alpha (op(A) [rows, kc] times B's
 * block [kc, cols]), rows <= MR, cols <= NR, where Cin's row r is at cin +
 * r ldcin (C itself, or a bias in every row: ldcin 0); op(A)[r][k] is
 * a[r rs + k ks] (A read in place: rs = lda and ks = 1, a small transposed
 * A in place: rs = 1 and ks = lda, or packed: rs = 1 and ks = MR);
 * B's row k is b + k bs: a packed panel (bs = NR, zeros past cols), or,
 * b_in_place, B itself (bs = ldb; the columns past cols are not read, and
 * may not be there: ldb may be NR with cols fewer, the last row the last of
 * the buffer). */
typedef void kernel_fn(float *C, int ldc, const float *cin, size_t ldcin, const float *a,
                       size_t rs, size_t ks, const float *b, bool b_in_place, size_t bs, int kc,
                       int rows, int cols, float alpha, float beta);

/* ---- AVX-512: 8 rows x 32 columns, sixteen sums ---- */

enum { AVX512_MR = 8, AVX512_NR = 32 };

/* The rows of A past `rows` (a last, partial block) read row 0 again: their
 * sums are made and never stored. */
#define ROW_POINTERS(MR)                                                                   \
    const float *a0 = a, *a1 = a + (rows > 1 ? rs : 0), *a2 = a + (rows > 2 ? 2 * rs : 0),  \
                *a3 = a + (rows > 3 ? 3 * rs : 0), *a4 = a + (rows > 4 ? 4 * rs : 0),       \
                *a5 = a + (rows > 5 ? 5 * rs : 0), *a6 = a + ((MR) > 6 && rows > 6 ? 6 * rs : 0), \
                *a7 = a + ((MR) > 7 && rows > 7 ? 7 * rs : 0);                              \
    (void)a6;                                                                              \
    (void)a7

/* Asks for C's block (rows of `bytes`, ldc floats apart) at a kernel's
 * start, to be in the cache when the kernel adds its sums to it: loaded
 * at the end instead, C (most often in memory: a product's C is megabytes)
 * held up a fifth of the AVX2 kernel's time.  Changes no result. */
#define PREFETCH_C(MR, bytes)                                                              \
    do {                                                                                   \
        for (int r_ = 0; r_ < (MR) && r_ < rows; r_++)                                     \
            for (int b_ = 0; b_ < (bytes) + 64; b_ += 64)                                  \
                _mm_prefetch((const char *)(C + (size_t)r_ * ldc) + b_, _MM_HINT_T0);      \
    } while (0)

/* Written out row by row: with the sums in an array indexed in a loop, GCC
 * kept them in memory (packed.c found the same).  Inlined into one loop
 * per way of reading A and B (KERNEL_CASES, below). */
__attribute__((target("avx2,fma,avx512f"))) static ALWAYS_INLINE void
avx512_sums(float *C, int ldc, const float *cin, size_t ldcin, const float *a, size_t rs,
            const size_t ks, const float *b, const size_t bs, const bool masked, const bool half,
            int kc, int rows, int cols, float alpha, float beta)
{
    ROW_POINTERS(8);
    /* the columns of a last block narrower than 32: the ones read (B in
     * place) and stored */
    const __mmask16 m0 = cols >= 16 ? 0xFFFF : (__mmask16)((1u << cols) - 1),
                    m1 = cols >= 32 ? 0xFFFF : cols > 16 ? (__mmask16)((1u << (cols - 16)) - 1) : 0;
    PREFETCH_C(AVX512_MR, AVX512_NR * 4);
    __m512 c00 = _mm512_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00,
           c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00, c60 = c00,
           c61 = c00, c70 = c00, c71 = c00;
#define AVX512_FMA(i)                                                                      \
    {                                                                                      \
        const __m512 x = _mm512_set1_ps(a##i[k * ks]);                                     \
        c##i##0 = _mm512_fmadd_ps(x, b0, c##i##0);                                         \
        if (!half) c##i##1 = _mm512_fmadd_ps(x, b1, c##i##1);                              \
    }
#pragma GCC unroll 4
    for (int k = 0; k < kc; k++) {
        const float *bk = b + (size_t)k * bs;
        const __m512 b0 = masked ? _mm512_maskz_loadu_ps(m0, bk) : _mm512_loadu_ps(bk);
        const __m512 b1 = half     ? b0
                          : masked ? _mm512_maskz_loadu_ps(m1, bk + 16)
                                   : _mm512_loadu_ps(bk + 16);
        AVX512_FMA(0) AVX512_FMA(1) AVX512_FMA(2) AVX512_FMA(3)
        AVX512_FMA(4) AVX512_FMA(5) AVX512_FMA(6) AVX512_FMA(7)
    }
#undef AVX512_FMA
    if (rows == AVX512_MR && cols == AVX512_NR && (beta == 0.0f || beta == 1.0f)) {
        /* the whole block, straight into C */
        const __m512 va = _mm512_set1_ps(alpha);
#define AVX512_STORE(i)                                                                    \
    {                                                                                      \
        float *ci = C + (size_t)(i) * ldc;                                                 \
        const float *cini = cin + (size_t)(i) * ldcin;                                    \
        __m512 s0 = _mm512_mul_ps(va, c##i##0), s1 = _mm512_mul_ps(va, c##i##1);           \
        if (beta == 1.0f) {                                                                \
            s0 = _mm512_add_ps(_mm512_loadu_ps(cini), s0);                                   \
            s1 = _mm512_add_ps(_mm512_loadu_ps(cini + 16), s1);                              \
        }                                                                                  \
        _mm512_storeu_ps(ci, s0);                                                          \
        _mm512_storeu_ps(ci + 16, s1);                                                     \
    }
        AVX512_STORE(0) AVX512_STORE(1) AVX512_STORE(2) AVX512_STORE(3)
        AVX512_STORE(4) AVX512_STORE(5) AVX512_STORE(6) AVX512_STORE(7)
#undef AVX512_STORE
        return;
    }
    /* a part of a block, or another beta: the rows there are, the columns
     * by masks; the operations are beta C + alpha sum, as the BLAS's */
    const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
#define AVX512_STORE_PART(i)                                                               \
    if ((i) < rows) {                                                                      \
        float *ci = C + (size_t)(i) * ldc;                                                 \
        const float *cini = cin + (size_t)(i) * ldcin;                                    \
        __m512 s0 = _mm512_mul_ps(va, c##i##0), s1 = _mm512_mul_ps(va, c##i##1);           \
        if (beta != 0.0f) {                                                                \
            __m512 o0 = _mm512_maskz_loadu_ps(m0, cini);                                     \
            __m512 o1 = _mm512_maskz_loadu_ps(m1, cini + 16);                                \
            if (beta != 1.0f) {                                                            \
                o0 = _mm512_mul_ps(vb, o0);                                                \
                o1 = _mm512_mul_ps(vb, o1);                                                \
            }                                                                              \
            s0 = _mm512_add_ps(o0, s0);                                                    \
            s1 = _mm512_add_ps(o1, s1);                                                    \
        }                                                                                  \
        _mm512_mask_storeu_ps(ci, m0, s0);                                                 \
        _mm512_mask_storeu_ps(ci + 16, m1, s1);                                            \
    }
    AVX512_STORE_PART(0) AVX512_STORE_PART(1) AVX512_STORE_PART(2) AVX512_STORE_PART(3)
    AVX512_STORE_PART(4) AVX512_STORE_PART(5) AVX512_STORE_PART(6) AVX512_STORE_PART(7)
#undef AVX512_STORE_PART
}

/* The loop compiled for each way of reading A and B: the packed ones with
 * their strides as constants; and for a block of half the columns or fewer
 * (a narrow product's, or its last), a loop of half the FMAs (the sums of
 * the columns there are made alike). */
#define KERNEL_CASES(sums, NR)                                                             \
    do {                                                                                   \
        const bool half_ = cols <= (NR) / 2;                                               \
        if (!b_in_place && ks == 1 && !half_)                                              \
            SUMS(sums, 1, NR, false, false);                                               \
        else if (!b_in_place && ks == 1)                                                   \
            SUMS(sums, 1, NR, false, true);                                                \
        else if (!b_in_place && !half_)                                                    \
            SUMS(sums, ks, NR, false, false);                                              \
        else if (!b_in_place)                                                              \
            SUMS(sums, ks, NR, false, true);                                               \
        else if (cols == (NR))                                                             \
            SUMS(sums, ks, bs, false, false);                                              \
        else if (!half_)                                                                   \
            SUMS(sums, ks, bs, true, false);                                               \
        else                                                                               \
            SUMS(sums, ks, bs, true, true);                                                \
    } while (0)
/* One of them: A's stride in k, B's in k, masked loads of B, half the sums. */
#define SUMS(sums, ks_, bs_, masked_, half_)                                               \
    sums(C, ldc, cin, ldcin, a, rs, ks_, b, bs_, masked_, half_, kc, rows, cols, alpha, beta)

__attribute__((target("avx2,fma,avx512f"))) static void
avx512_kernel(float *C, int ldc, const float *cin, size_t ldcin, const float *a, size_t rs,
              size_t ks, const float *b, bool b_in_place, size_t bs, int kc, int rows, int cols,
              float alpha, float beta)
{
    KERNEL_CASES(avx512_sums, AVX512_NR);
}

/* ---- AVX2: 6 rows x 16 columns, twelve sums ---- */

enum { AVX2_MR = 6, AVX2_NR = 16 };

__attribute__((target("avx2,fma"))) static ALWAYS_INLINE void
avx2_sums(float *C, int ldc, const float *cin, size_t ldcin, const float *a, size_t rs,
          const size_t ks, const float *b, const size_t bs, const bool masked, const bool half,
          int kc, int rows, int cols, float alpha, float beta)
{
    ROW_POINTERS(6);
    /* as avx512_sums, 16 columns */
    const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i m0 = _mm256_cmpgt_epi32(_mm256_set1_epi32(cols), lanes),
                  m1 = _mm256_cmpgt_epi32(_mm256_set1_epi32(cols - 8), lanes);
    PREFETCH_C(AVX2_MR, AVX2_NR * 4);
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00,
           c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
#define AVX2_FMA(i)                                                                        \
    {                                                                                      \
        const __m256 x = _mm256_broadcast_ss(a##i + k * ks);                               \
        c##i##0 = _mm256_fmadd_ps(x, b0, c##i##0);                                         \
        if (!half) c##i##1 = _mm256_fmadd_ps(x, b1, c##i##1);                              \
    }
#pragma GCC unroll 4
    for (int k = 0; k < kc; k++) {
        const float *bk = b + (size_t)k * bs;
        const __m256 b0 = masked ? _mm256_maskload_ps(bk, m0) : _mm256_loadu_ps(bk);
        const __m256 b1 = half     ? b0
                          : masked ? _mm256_maskload_ps(bk + 8, m1)
                                   : _mm256_loadu_ps(bk + 8);
        AVX2_FMA(0) AVX2_FMA(1) AVX2_FMA(2) AVX2_FMA(3) AVX2_FMA(4) AVX2_FMA(5)
    }
#undef AVX2_FMA
    if (rows == AVX2_MR && cols == AVX2_NR && (beta == 0.0f || beta == 1.0f)) {
        const __m256 va = _mm256_set1_ps(alpha);
#define AVX2_STORE(i)                                                                      \
    {                                                                                      \
        float *ci = C + (size_t)(i) * ldc;                                                 \
        const float *cini = cin + (size_t)(i) * ldcin;                                    \
        __m256 s0 = _mm256_mul_ps(va, c##i##0), s1 = _mm256_mul_ps(va, c##i##1);           \
        if (beta == 1.0f) {                                                                \
            s0 = _mm256_add_ps(_mm256_loadu_ps(cini), s0);                                   \
            s1 = _mm256_add_ps(_mm256_loadu_ps(cini + 8), s1);                               \
        }                                                                                  \
        _mm256_storeu_ps(ci, s0);                                                          \
        _mm256_storeu_ps(ci + 8, s1);                                                      \
    }
        AVX2_STORE(0) AVX2_STORE(1) AVX2_STORE(2) AVX2_STORE(3) AVX2_STORE(4) AVX2_STORE(5)
#undef AVX2_STORE
        return;
    }
    /* as avx512_sums */
    const __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta);
#define AVX2_STORE_PART(i)                                                                 \
    if ((i) < rows) {                                                                      \
        float *ci = C + (size_t)(i) * ldc;                                                 \
        const float *cini = cin + (size_t)(i) * ldcin;                                    \
        __m256 s0 = _mm256_mul_ps(va, c##i##0), s1 = _mm256_mul_ps(va, c##i##1);           \
        if (beta != 0.0f) {                                                                \
            __m256 o0 = _mm256_maskload_ps(cini, m0), o1 = _mm256_maskload_ps(cini + 8, m1);   \
            if (beta != 1.0f) {                                                            \
                o0 = _mm256_mul_ps(vb, o0);                                                \
                o1 = _mm256_mul_ps(vb, o1);                                                \
            }                                                                              \
            s0 = _mm256_add_ps(o0, s0);                                                    \
            s1 = _mm256_add_ps(o1, s1);                                                    \
        }                                                                                  \
        _mm256_maskstore_ps(ci, m0, s0);                                                   \
        _mm256_maskstore_ps(ci + 8, m1, s1);                                               \
    }
    AVX2_STORE_PART(0) AVX2_STORE_PART(1) AVX2_STORE_PART(2) AVX2_STORE_PART(3)
    AVX2_STORE_PART(4) AVX2_STORE_PART(5)
#undef AVX2_STORE_PART
}

__attribute__((target("avx2,fma"))) static void
avx2_kernel(float *C, int ldc, const float *cin, size_t ldcin, const float *a, size_t rs,
            size_t ks, const float *b, bool b_in_place, size_t bs, int kc, int rows, int cols,
            float alpha, float beta)
{
    KERNEL_CASES(avx2_sums, AVX2_NR);
}
#undef KERNEL_CASES
#undef SUMS
#undef ROW_POINTERS
#undef PREFETCH_C

/* The kernel of an instruction set and its block's shape. */
typedef struct {
    kernel_fn *kernel;
    int MR, NR;
} gemm_kernel;

static bool kernel_for(nn_isa isa, gemm_kernel *k)
{
    switch (isa) {
    case NN_ISA_AVX512: *k = (gemm_kernel){avx512_kernel, AVX512_MR, AVX512_NR}; return true;
    case NN_ISA_AVX2: *k = (gemm_kernel){avx2_kernel, AVX2_MR, AVX2_NR}; return true;
    default: return false;
    }
}

static size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

/* How a product is cut among threads.  op(B) is packed once, whole, into
 * one buffer that every thread reads: block after block of KC values of k,
 * each block its panels of NR columns (the panel of column j, a multiple
 * of NR, of the block at k0 is at pb + k0 n_pad + j kc).  C is cut into
 * tiles of rows (and of columns, when there are too few rows to go round),
 * which the threads take one after another as they finish: a CPU slowed by
 * a neighbour on the machine takes fewer tiles instead of holding the
 * others up at the end (with C cut in one part per thread, 2 threads sat
 * idle 12% of a product's time on a shared machine).  A tile runs every
 * block of k in turn, so its part of C stays in the cache between them; a
 * transposed A is packed by the thread that takes the tile.  The weight
 * gradients are cut otherwise (b_per_tile, cut_tiles). */
typedef struct {
    const gemm_args *g;
    const gemm_kernel *kn;
    bool b_in_place;        /* B read where it is, not packed */
    bool a_in_place;        /* a transposed A read where it is, not packed */
    float *pb;              /* the packed op(B) (NULL when b_in_place) */
    size_t n_pad;           /* its columns: N rounded up to NR */
    int tile_rows, tile_cols, col_tiles, tiles;
    int pack_groups, pack_units; /* packing: per block of k, groups of panels */
    bool b_per_tile;        /* each tile packs the block of B it meets, block by block */
    float *pa;              /* per worker, a_floats for a transposed A's rows, and */
    size_t a_floats;
    size_t w_b_floats;      /* for its tile's block of B (b_per_tile) */
    atomic_int next_unit, next_tile;
} gemm_job;

enum { PANELS_PER_PACK_UNIT = 8 };

/* Packs units of op(B) (a block of k, a group of panels) until none is
 * left; `worker` is unused (any thread packs any unit). */
static void pack_units(void *ctx, size_t worker)
{
    gemm_job *job = ctx;
    const gemm_args *g = job->g;
    const int NR = job->kn->NR;
    (void)worker;
    for (;;) {
        const int u = atomic_fetch_add(&job->next_unit, 1);
        if (u >= job->pack_units) return;
        const int k0 = u / job->pack_groups * KC, kc = g->K - k0 < KC ? g->K - k0 : KC;
        const int j0 = u % job->pack_groups * PANELS_PER_PACK_UNIT * NR;
        const int n = g->N - j0 < PANELS_PER_PACK_UNIT * NR ? g->N - j0
                                                             : PANELS_PER_PACK_UNIT * NR;
        pack_b(job->pb + (size_t)k0 * job->n_pad + (size_t)j0 * kc, g, j0, n, k0, kc, NR);
    }
}

/* C's rows i0 .. i0 + m - 1 and columns j0 .. j0 + n - 1 (j0 a multiple
 * of NR), MC rows at a time within each block of k; pa is space for a
 * transposed A's MC rows (a_floats), pb for the tile's own B (b_per_tile). */
static void multiply_tile(const gemm_job *job, int i0, int m, int j0, int n, float *pa,
                          float *pb)
{
    const gemm_args *g = job->g;
    const gemm_kernel *kn = job->kn;
    const int MR = kn->MR, NR = kn->NR;
    /* op(A)[i][k] is A[i rs + k ks]; a transposed A is packed (its MR
     * values of a k are adjacent, but lda apart from the next k's: read in
     * place, the kernel's loads of a block of k all fall in a few sets of
     * the cache and evict one another), unless it is small (a_in_place) */
    const bool pack_a = g->trans_a && !job->a_in_place;
    const size_t rs = g->trans_a ? 1 : (size_t)g->lda,
                 ks = pack_a ? (size_t)MR : g->trans_a ? (size_t)g->lda : 1;
    for (int k0 = 0; k0 < g->K; k0 += KC) {
        const int kc = g->K - k0 < KC ? g->K - k0 : KC;
        /* the first block of k scales C by beta (or adds to the bias);
         * the later ones add */
        const float beta = k0 == 0 ? g->beta : 1.0f;
        const bool onto_bias = k0 == 0 && g->bias;
        if (job->b_per_tile) pack_b(pb, g, j0, n, k0, kc, NR);
        for (int ib = i0; ib < i0 + m; ib += MC) {
            const int mc = i0 + m - ib < MC ? i0 + m - ib : MC;
            if (pack_a) pack_a_transposed(pa, g, ib, mc, k0, kc, MR);
            for (int q = j0; q < j0 + n; q += NR) {
                const float *b =
                    job->b_in_place   ? g->B + (size_t)k0 * g->ldb + q
                    : job->b_per_tile ? pb + (size_t)(q - j0) * kc
                                      : job->pb + (size_t)k0 * job->n_pad + (size_t)q * kc;
                const size_t bs = job->b_in_place ? (size_t)g->ldb : (size_t)NR;
                const int cols = j0 + n - q < NR ? j0 + n - q : NR;
                for (int p = 0; p < mc; p += MR) {
                    const int rows = mc - p < MR ? mc - p : MR;
                    float *c = g->C + (size_t)(ib + p) * g->ldc + q;
                    const float *a = pack_a       ? pa + (size_t)p * kc
                                     : g->trans_a ? g->A + (size_t)k0 * g->lda + ib + p
                                                  : g->A + (size_t)(ib + p) * g->lda + k0;
                    kn->kernel(c, g->ldc, onto_bias ? g->bias + q : c,
                               onto_bias ? 0 : (size_t)g->ldc, a, rs, ks, b, job->b_in_place,
                               bs, kc, rows, cols, g->alpha, beta);
                }
            }
        }
    }
}

/* Multiplies tiles until none is left, with worker's space for A. */
static void multiply_tiles(void *ctx, size_t worker)
{
    gemm_job *job = ctx;
    const gemm_args *g = job->g;
    float *pa = job->pa + worker * (job->a_floats + job->w_b_floats);
    float *pb = pa + job->a_floats;
    for (;;) {
        const int t = atomic_fetch_add(&job->next_tile, 1);
        if (t >= job->tiles) return;
        const int i0 = t / job->col_tiles * job->tile_rows;
        const int j0 = t % job->col_tiles * job->tile_cols;
        multiply_tile(job, i0, g->M - i0 < job->tile_rows ? g->M - i0 : job->tile_rows, j0,
                      g->N - j0 < job->tile_cols ? g->N - j0 : job->tile_cols, pa, pb);
    }
}

/* The tiles of C for `threads` threads: rows MC at a time, fewer (down to
 * MIN_TILE_ROWS) or columns cut too when that makes fewer than
 * TILES_PER_THREAD per thread.  But a transposed A with several blocks of k
 * (the weight gradients, k the batch's tokens): one tile of rows per
 * thread, each packing a block of B and walking all its rows over it in
 * turn, so that the block stays in the thread's second-level cache while
 * it meets them (b_per_tile: B packed whole first, or tiles of MC rows
 * each walking every block of B, were a tenth slower); or, when C has more
 * columns than rows, one tile of columns per thread, each packing its part
 * of B and all of A (the feed-forward's first weight gradient, 256 x 1024
 * over 4,075 tokens: 1.2x on 2 threads, Zen 5). */
enum { TILES_PER_THREAD = 4, MIN_TILE_ROWS = 64 };

static void cut_tiles(gemm_job *job, int threads)
{
    const gemm_args *g = job->g;
    const int MR = job->kn->MR, NR = job->kn->NR;
    if (job->b_per_tile && g->N > g->M && threads > 1) {
        /* more columns than rows (the weight gradient of a layer that
         * widens): a tile of columns per thread, each packing its part of
         * B and all of A, less than all of B and its part of A */
        job->tile_rows = (int)round_up((size_t)g->M, (size_t)MR);
        job->tile_cols = (int)round_up((size_t)((g->N + threads - 1) / threads), (size_t)NR);
        job->col_tiles = (g->N + job->tile_cols - 1) / job->tile_cols;
        job->tiles = job->col_tiles;
        return;
    }
    if (job->b_per_tile) {
        job->tile_rows = (int)round_up((size_t)((g->M + threads - 1) / threads), (size_t)MR);
        job->tile_cols = (int)round_up((size_t)g->N, (size_t)NR);
        job->col_tiles = 1;
        job->tiles = (g->M + job->tile_rows - 1) / job->tile_rows;
        return;
    }
    const int want = threads > 1 ? TILES_PER_THREAD * threads : 1;
    int rows = MC;
    while (rows / 2 >= MIN_TILE_ROWS && (g->M + rows - 1) / rows < want)
        rows = (int)round_up((size_t)rows / 2, (size_t)MR);
    const int row_tiles = (g->M + rows - 1) / rows;
    const int panels = (g->N + NR - 1) / NR;
    int col_tiles = row_tiles >= want ? 1 : (want + row_tiles - 1) / row_tiles;
    if (col_tiles > panels) col_tiles = panels;
    const int cols = (panels + col_tiles - 1) / col_tiles * NR;
    job->tile_rows = rows;
    job->tile_cols = cols;
    job->col_tiles = (g->N + cols - 1) / cols;
    job->tiles = row_tiles * job->col_tiles;
}

/* The packing space of big products, kept from one call to the next: a
 * fresh one each time came from the kernel as new pages, zeroed at their
 * first touch.  One call at a time holds it (a try-lock); a call that
 * finds it taken allocates its own. */
static struct {
    pthread_mutex_t lock;
    float *floats;
    size_t size;
} kept_space = {PTHREAD_MUTEX_INITIALIZER, NULL, 0};

/* n floats of packing space: the kept space (*held set), else fresh
 * memory; NULL when there is no memory. */
static float *take_space(size_t n, bool *held)
{
    *held = false;
    if (pthread_mutex_trylock(&kept_space.lock) == 0) {
        if (kept_space.size < n) {
            float *grown = aligned_alloc(64, round_up(n * sizeof(float), 64));
            if (grown) {
                free(kept_space.floats);
                kept_space.floats = grown;
                kept_space.size = n;
            }
        }
        if (kept_space.size >= n) {
            *held = true;
            return kept_space.floats;
        }
        pthread_mutex_unlock(&kept_space.lock);
    }
    return aligned_alloc(64, round_up(n * sizeof(float), 64));
}

static void give_back_space(float *space, bool held)
{
    if (held)
        pthread_mutex_unlock(&kept_space.lock);
    else
        free(space);
}

/* The product on the kernel kn, on up to `threads` threads; false if there
 * was no memory for the packing (nothing done). */
static bool gemm_on_kernel(const gemm_args *g, const gemm_kernel *kn, int threads)
{
    if ((double)g->M * g->N * g->K < PARALLEL_MIN_MACS) threads = 1;
    /* Packing B pays when many rows of A meet each panel; for a few (the
     * products of attention, a sentence's tokens by 64) it cost as much as
     * the product, and B is read where it is (the same sums: the kernel
     * reads the same values in the same order): a B not transposed as it
     * is, a transposed one once turned (transpose_b).  A big transposed B
     * (a weight matrix that a decoding step's 64 rows meet: the output
     * projection's 8,000 x 256 floats, 8 MB) is packed in panels all the
     * same: turned whole, it went through memory twice, and bench/forward's
     * unpacked decoding steps ran at 0.76 of OpenBLAS Haswell's rate on the
     * AVX2 kernels (0.92 packed). */
    const bool b_in_place =
        g->M <= IN_PLACE_MAX_ROWS && (!g->trans_b || (size_t)g->N * g->K <= TURNED_MAX_FLOATS);
    gemm_args turned = *g;
    const size_t ld_turned = round_up((size_t)g->N, 16);
    const size_t t_floats = b_in_place && g->trans_b ? (size_t)g->K * ld_turned : 0;
    gemm_job job = {.g = t_floats ? &turned : g, .kn = kn, .b_in_place = b_in_place};
    /* a transposed A of a few rows and columns (attention's gradients) is
     * read in place: its 64 rows at most all stay in the first-level cache,
     * and packing took up to half of such a product's time */
    job.a_in_place = g->trans_a && g->M <= IN_PLACE_MAX_ROWS && g->K <= IN_PLACE_MAX_ROWS;
    job.b_per_tile = g->trans_a && g->K > KC && !job.a_in_place && !job.b_in_place;
    cut_tiles(&job, threads);
    if (threads > job.tiles) threads = job.tiles;
    job.n_pad = round_up((size_t)g->N, (size_t)kn->NR);
    const size_t b_floats = job.b_in_place || job.b_per_tile ? 0 : (size_t)g->K * job.n_pad;
    const bool pack_a = g->trans_a && !job.a_in_place;
    const size_t a_rows = (size_t)(job.tile_rows < MC ? job.tile_rows : MC);
    job.a_floats =
        pack_a ? round_up(a_rows, (size_t)kn->MR) * (size_t)(g->K < KC ? g->K : KC) : 0;
    job.pack_groups = (int)((job.n_pad / (size_t)kn->NR + PANELS_PER_PACK_UNIT - 1) /
                            PANELS_PER_PACK_UNIT);
    job.pack_units = b_floats ? (g->K + KC - 1) / KC * job.pack_groups : 0;
    job.w_b_floats =
        job.b_per_tile ? (size_t)KC * round_up((size_t)job.tile_cols, (size_t)kn->NR) : 0;
    atomic_init(&job.next_unit, 0);
    atomic_init(&job.next_tile, 0);
    const size_t floats =
        t_floats + b_floats + (size_t)threads * (job.a_floats + job.w_b_floats);
    /* a small product packs on the stack */
    enum { STACK_FLOATS = 16384 };
    float stack_space[STACK_FLOATS] __attribute__((aligned(64)));
    bool held = false;
    float *space = floats <= STACK_FLOATS ? stack_space : take_space(floats, &held);
    if (!space) return false;
    if (t_floats) {
        transpose_b(space + b_floats, ld_turned, g);
        turned.trans_b = false;
        turned.B = space + b_floats;
        turned.ldb = (int)ld_turned;
    }
    job.pb = b_floats ? space : NULL;
    job.pa = space + b_floats + t_floats;
    if (threads == 1 || job.pack_units < 2)
        pack_units(&job, 0);
    else
        tfm_parallel_for(threads, (size_t)threads, pack_units, &job);
    if (threads == 1)
        multiply_tiles(&job, 0);
    else
        tfm_parallel_for(threads, (size_t)threads, multiply_tiles, &job);
    if (space != stack_space) give_back_space(space, held);
    return true;
}
#endif

/* C = beta C when K is 0 or alpha 0 (the BLAS's rule: beta 0 clears C). */
static void scale_only(const gemm_args *g)
{
    for (int i = 0; i < g->M; i++) {
        float *c = g->C + (size_t)i * g->ldc;
        if (g->beta == 0.0f)
            memset(c, 0, (size_t)g->N * sizeof *c);
        else if (g->beta != 1.0f)
            for (int j = 0; j < g->N; j++) c[j] *= g->beta;
    }
}

/* C = bias in every row (g->bias), for the BLAS's product onto it. */
static void copy_bias(const gemm_args *g)
{
    for (int i = 0; i < g->M; i++)
        memcpy(g->C + (size_t)i * g->ldc, g->bias, (size_t)g->N * sizeof *g->C);
}

static void gemm(const gemm_args *g)
{
    if (g->M <= 0 || g->N <= 0) return;
    if (g->K <= 0 || g->alpha == 0.0f) {
        if (g->bias)
            copy_bias(g);
        else
            scale_only(g);
        return;
    }
#ifdef HAVE_GEMM_KERNELS
    gemm_kernel kn;
    if (kernel_for(nn_isa_level(), &kn) && gemm_on_kernel(g, &kn, tfm_blas_thread_count()))
        return;
    /* no kernel for this CPU, or no memory for the packing: the BLAS */
#endif
    if (g->bias) copy_bias(g);
    cblas_sgemm(CblasRowMajor, g->trans_a ? CblasTrans : CblasNoTrans,
                g->trans_b ? CblasTrans : CblasNoTrans, g->M, g->N, g->K, g->alpha, g->A, g->lda,
                g->B, g->ldb, g->bias ? 1.0f : g->beta, g->C, g->ldc);
}

void nn_sgemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float *A,
              int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
    const gemm_args g = {trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, NULL};
    gemm(&g);
}

void nn_sgemm_bias(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float *A,
                   int lda, const float *B, int ldb, const float *bias, float *C, int ldc)
{
    const gemm_args g = {trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, 1.0f, C, ldc, bias};
    gemm(&g);
}

/* OpenBLAS's cores whose single-precision kernels use AVX2 and FMA, or wider. */
static const char *const wide_cores[] = {"Haswell",    "Zen",           "SkylakeX",
                                         "Cooperlake", "SapphireRapids", "Excavator"};

char *openblas_get_corename(void);

/* Training's products go to OpenBLAS only where nn_sgemm has no kernel:
 * on a CPU with AVX2 and FMA, that is TFM_ISA=none alone. */
bool tfm_blas_kernels_behind(char *msg, size_t size)
{
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return false;
    if (nn_isa_level() != NN_ISA_PLAIN) return false;
    const char *core = openblas_get_corename();
    if (!core) return false;
    for (size_t i = 0; i < sizeof wide_cores / sizeof *wide_cores; i++)
        if (strcasecmp(core, wide_cores[i]) == 0) return false;
    snprintf(msg, size,
             "OpenBLAS runs its %s kernels on this CPU, which has AVX2 and FMA, and TFM_ISA=none "
             "sends training's matrix products to it (this OpenBLAS does not know the CPU, or "
             "OPENBLAS_CORETYPE says so): training runs several times slower than it can; unset "
             "TFM_ISA, or set OPENBLAS_CORETYPE=Haswell (SkylakeX on a CPU with AVX-512)",
             core);
    return true;
#else
    (void)msg;
    (void)size;
    return false;
#endif
}
