/* quant.c - int8 and bf16 weights, and the kernels that multiply with them
 * (encode and decode --compute-type int8|bf16; CTranslate2's names).
 *
 * int8 (as CTranslate2 and fbgemm do it): each weight row W[n] is quantized
 * symmetrically with its own scale, s_w[n] = max_k |W[n][k]| / 127 and
 * q[n][k] = round(W[n][k] * 127 / max_k |W[n][k]|) in [-127, 127] (ties to
 * even: cvtps2dq's rounding, which the kernels use).  Each row x of the
 * activations is quantized when the product runs, to seven bits (fbgemm's
 * "reduced range"): s_x = max_k |x[k]| / 63, q_x[k] = round(x[k] / s_x) in
 * [-63, 63].  The products q_x . q_w are summed exactly in int32 and the
 * result is
 *
 *     out[r][n] = fma((float)sum, s_x[r] * s_w[n], bias[n])
 *
 * Every kernel computes the same int32 sums (integer arithmetic is exact,
 * in any order) and the same float operations after them, so the kernels
 * give the same bits as each other and as the plain C one.  The vector
 * kernels multiply unsigned by signed bytes, so x goes in as q_x + 64 (u8,
 * 1 to 127) and 64 * sum_k q[n][k] is taken off each sum at the end:
 *   - AVX-512 VNNI: vpdpbusd, four products into an int32 lane;
 *   - AVX-512BW and AVX2: vpmaddubsw adds two products into an int16: at
 *     most 2 * 127 * 127 = 32,258, below the int16 limit, so nothing
 *     saturates (with eight-bit activations, x + 128 would reach 255 and
 *     the sums 64,770; the old way out, |x| against q with x's sign moved
 *     onto it, took one more instruction per product); vpmaddwd by ones
 *     then adds the pairs into int32.  Three instructions per 32 products,
 *     where float32 takes four fused multiply-adds.
 * The lost bit costs little: on the enfr test, a trained small model's
 * beam 4 BLEU / chrF are +0.10 / 0.00 from float32's (eight-bit
 * activations: -0.06 / -0.04), greedy -0.18 / -0.15 (+0.01 / +0.05).
 *
 * bf16 (bfloat16, the upper half of a float32): weights rounded to bf16
 * once, activations rounded to bf16 when the product runs, float32 sums.
 * vdpbf16ps (AVX-512 BF16) adds two products at a time into a float32
 * lane: acc += x[2i+1] w[2i+1], then acc += x[2i] w[2i], each product exact
 * in float32 (8-bit significands) and each addition rounded to nearest.  The
 * plain C kernel does the same two fused multiply-adds in that order; the
 * hardware flushes subnormals to zero, which the C kernel does not, so the
 * two agree except where a value below 1.2e-38 takes part.  CPUs without
 * that instruction (AVX-512 before Cooper Lake, AVX2) widen the bf16
 * weights to float32 as they load them and make the same two fused
 * multiply-adds, with the rows prepared as floats (rounded to bf16, then
 * widened): the C kernel's bits exactly.
 *
 * Layout (one for all int8 kernels, one for all bf16 kernels): W [N, K]
 * becomes panels of QUANT_WIDTH (32) outputs; K is padded with zeros to a
 * multiple of 4 (int8) or 2 (bf16); panel p holds, for each group g of 4
 * (or 2) consecutive k, the 32 outputs' 4 (or 2) values side by side:
 *     int8: panel[g][j][0..3] = q[32p + j][4g .. 4g + 3]    (128 bytes a group)
 *     bf16: panel[g][j][0..1] = w[32p + j][2g .. 2g + 1]    (128 bytes a group)
 * so one 64-byte load brings 16 outputs' group, which vpdpbusd (or
 * vdpbf16ps) takes against the row's group broadcast to every lane. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/layers.h"

/* ---- quantizing -------------------------------------------------------------- */

/* round(v) to the nearest integer, ties to even, clamped to [-127, 127]: the
 * rounding of cvtps2dq in the default mode, which the kernels use. */
static inline int8_t round_int8(float v)
{
    float r = nearbyintf(v);
    return (int8_t)(r > 127.0f ? 127 : r < -127.0f ? -127 : r);
}

/* The largest |x[k]| of a row. */
static float row_absmax(const float *x, size_t K)
{
    float m = 0.0f;
    for (size_t k = 0; k < K; k++) {
        float a = fabsf(x[k]);
        m = a > m ? a : m;
    }
    return m;
}

void nn_quantize_int8(int8_t *q, float *scale, const float *w, size_t N, size_t K)
{
    for (size_t n = 0; n < N; n++) {
        const float *row = w + n * K;
        const float amax = row_absmax(row, K);
        scale[n] = amax / 127.0f;
        const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
        for (size_t k = 0; k < K; k++) q[n * K + k] = round_int8(row[k] * inv);
    }
}

/* Eight at a time (the same product for each value; AVX-512 or AVX2 where
 * the CPU has it): loading a model's int8 embeddings is this loop. */
typedef int8_t i8x8 __attribute__((vector_size(8)));
NN_INLINE void nn_dequantize_int8_body(nn_isa isa, float *w, const int8_t *q, const float *scale,
                                        size_t N, size_t K)
{
    (void)isa; /* eight lanes in every version */
    for (size_t n = 0; n < N; n++) {
        const float s = scale[n];
        float *row = w + n * K;
        const int8_t *qr = q + n * K;
        size_t k = 0;
        for (; k + 8 <= K; k += 8) {
            i8x8 v;
            memcpy(&v, qr + k, sizeof v);
            nn_store8(row + k, __builtin_convertvector(v, nn_f32x8) * s);
        }
        for (; k < K; k++) row[k] = (float)qr[k] * s;
    }
}
NN_VERSIONS_512(, nn_dequantize_int8,
                (float *w, const int8_t *q, const float *scale, size_t N, size_t K),
                (w, q, scale, N, K))

uint16_t nn_bf16_round(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u); /* to nearest, ties to even */
    return (uint16_t)(u >> 16);
}

/* nn_bf16_round of every value, sixteen at a time with the same integer
 * steps (vector extensions: AVX-512 or AVX2 where the CPU has it). */
typedef uint32_t u32x16 __attribute__((vector_size(64)));
typedef uint16_t u16x16 __attribute__((vector_size(32)));
NN_INLINE void nn_round_bf16_body(nn_isa isa, uint16_t *out, const float *x, size_t n)
{
    (void)isa; /* sixteen lanes in every version */
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        u32x16 u;
        memcpy(&u, x + i, sizeof u);
        const u32x16 nan = (u32x16)((u & 0x7fffffffu) > 0x7f800000u); /* all ones where NaN */
        const u32x16 rounded = u + (0x7fffu + ((u >> 16) & 1u));
        const u32x16 r = (rounded & ~nan) | ((u | 0x00400000u) & nan);
        const u16x16 b = __builtin_convertvector(r >> 16, u16x16);
        memcpy(out + i, &b, sizeof b);
    }
    for (; i < n; i++) out[i] = nn_bf16_round(x[i]);
}
NN_VERSIONS_512(, nn_round_bf16, (uint16_t *out, const float *x, size_t n), (out, x, n))

void nn_bf16_to_floats(float *out, const uint16_t *in, size_t n)
{
    for (size_t i = 0; i < n; i++) out[i] = nn_bf16_to_float(in[i]);
}

/* ---- packing ------------------------------------------------------------------- */

_Static_assert((int)QUANT_WIDTH == (int)NN_PANEL_WIDTH, "the int8 and bf16 panels are panel.c's");

/* K padded to whole groups. */
static int padded_k(int K, int group) { return (K + group - 1) / group * group; }

tfm_status nn_pack_int8(nn_packed_linear *p, const int8_t *q, const float *scale,
                        const float *bias, int N, int K, nn_kernel kernel)
{
    *p = (nn_packed_linear){.bias = bias, .N = N, .K = K, .kernel = kernel};
    const size_t K4 = (size_t)padded_k(K, 4);
    const size_t n_panels = ((size_t)N + QUANT_WIDTH - 1) / QUANT_WIDTH;
    const size_t n_out = n_panels * QUANT_WIDTH;
    int8_t *panels = calloc(n_panels * QUANT_WIDTH * K4 + 64, 1);
    float *s = calloc(n_out, sizeof *s);
    int32_t *sums = calloc(n_out, sizeof *sums);
    if (!panels || !s || !sums) {
        free(panels);
        free(s);
        free(sums);
        return TFM_ERR_NOMEM;
    }
    /* row n's groups of 4 go to column n % 32 of its panel, 128 bytes apart
     * (zeros past K), with its scale and the sum of its values (panel.c: the
     * layout of a packed model file) */
    const nn_panel_rows rows = {q, scale, N, K, TFM_COMPUTE_INT8};
    nn_panels_make(&rows, (uint32_t *)(void *)panels, s, sums);
    p->panels = panels;
    p->scale = s;
    p->col_sums = sums;
    return TFM_OK;
}

tfm_status nn_pack_bf16(nn_packed_linear *p, const uint16_t *w, const float *bias, int N, int K,
                        nn_kernel kernel)
{
    *p = (nn_packed_linear){.bias = bias, .N = N, .K = K, .kernel = kernel};
    const size_t K2 = (size_t)padded_k(K, 2);
    const size_t n_panels = ((size_t)N + QUANT_WIDTH - 1) / QUANT_WIDTH;
    uint16_t *panels = calloc(n_panels * QUANT_WIDTH * K2 + 32, sizeof *panels);
    if (!panels) return TFM_ERR_NOMEM;
    /* row n's pairs go to column n % 32 of its panel, 64 values apart (panel.c) */
    const nn_panel_rows rows = {w, NULL, N, K, TFM_COMPUTE_BF16};
    nn_panels_make(&rows, (uint32_t *)(void *)panels, NULL, NULL);
    p->panels = panels;
    return TFM_OK;
}

/* ---- preparing the rows ---------------------------------------------------------------- */

/* Whether a bf16 kernel reads its rows as floats (rounded to bf16 and
 * widened back): the kernels that widen the weights too. */
static bool reads_widened_rows(nn_kernel k)
{
    return k == NN_KERNEL_BF16_AVX2 || k == NN_KERNEL_BF16_AVX512BW;
}

/* The bytes a prepared row takes: K padded to its group, in int8, bf16 or
 * (the widening kernels) float32. */
size_t nn_quant_row_bytes(const nn_packed_linear *p)
{
    if (nn_kernel_is_int8(p->kernel)) return (size_t)padded_k(p->K, 4);
    return (size_t)padded_k(p->K, 2) * (reads_widened_rows(p->kernel) ? sizeof(float)
                                                                      : sizeof(uint16_t));
}

/* The activations' range: q_x in [-QUANT_X_MAX, QUANT_X_MAX], stored by
 * the vector kernels as q_x + QUANT_X_OFFSET (1 to 127 as u8); the kernels
 * take the offset off by a shift of QUANT_X_OFFSET_SHIFT bits. */
enum { QUANT_X_MAX = 63, QUANT_X_OFFSET_SHIFT = 6, QUANT_X_OFFSET = 1 << QUANT_X_OFFSET_SHIFT };

/* One row x [K] as an int8 kernel reads it: q [row_bytes] = round(x *
 * QUANT_X_MAX / max|x|) + offset (offset 0 for the C kernel, QUANT_X_OFFSET
 * for the vector ones), the padding past K a zero (offset); returns the
 * row's scale. */
static float prepare_int8_row(int8_t *q, const float *x, size_t K, size_t row_bytes, int8_t offset)
{
    const float amax = row_absmax(x, K);
    const float inv = amax > 0.0f ? QUANT_X_MAX / amax : 0.0f;
    size_t k = 0;
    for (; k < K; k++) q[k] = (int8_t)(round_int8(x[k] * inv) + offset);
    for (; k < row_bytes; k++) q[k] = offset;
    return amax / QUANT_X_MAX;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define HAVE_PREPARE_X86 1

/* prepare_int8_row with AVX-512, the same bytes: the maximum is exact in
 * any order, x * inv is the same product, cvtps2dq rounds to nearest even
 * as nearbyintf does, and |x * inv| <= 63 leaves the narrowing and the
 * offset nothing to saturate or wrap. */
__attribute__((target("avx2,fma,avx512f,avx512bw"))) static float
prepare_int8_row512(int8_t *q, const float *x, size_t K, size_t row_bytes, int8_t offset)
{
    __m512 m = _mm512_setzero_ps();
    size_t k = 0;
    for (; k + 16 <= K; k += 16) m = _mm512_max_ps(m, _mm512_abs_ps(_mm512_loadu_ps(x + k)));
    float amax = _mm512_reduce_max_ps(m);
    for (; k < K; k++) amax = fabsf(x[k]) > amax ? fabsf(x[k]) : amax;
    const float inv = amax > 0.0f ? QUANT_X_MAX / amax : 0.0f;
    const __m512 vinv = _mm512_set1_ps(inv);
    const __m128i voffset = _mm_set1_epi8(offset);
    for (k = 0; k + 16 <= K; k += 16) {
        const __m512i i32 = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + k), vinv));
        _mm_storeu_si128((__m128i *)(q + k), _mm_add_epi8(_mm512_cvtsepi32_epi8(i32), voffset));
    }
    for (; k < K; k++) q[k] = (int8_t)(round_int8(x[k] * inv) + offset);
    for (; k < row_bytes; k++) q[k] = offset;
    return amax / QUANT_X_MAX;
}

/* prepare_int8_row with AVX2, the same bytes by the same argument: eight
 * floats at a time; 32 at a time narrowed to bytes by vpackssdw and
 * vpacksswb (nothing to saturate), whose lane order vpermd restores. */
__attribute__((target("avx2,fma"))) static float
prepare_int8_row_avx2(int8_t *q, const float *x, size_t K, size_t row_bytes, int8_t offset)
{
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 m = _mm256_setzero_ps();
    size_t k = 0;
    for (; k + 8 <= K; k += 8) m = _mm256_max_ps(m, _mm256_and_ps(_mm256_loadu_ps(x + k), abs_mask));
    float lanes[8];
    _mm256_storeu_ps(lanes, m);
    float amax = 0.0f;
    for (int i = 0; i < 8; i++) amax = lanes[i] > amax ? lanes[i] : amax;
    for (; k < K; k++) amax = fabsf(x[k]) > amax ? fabsf(x[k]) : amax;
    const float inv = amax > 0.0f ? QUANT_X_MAX / amax : 0.0f;
    const __m256 vinv = _mm256_set1_ps(inv);
    const __m256i voffset = _mm256_set1_epi8(offset);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
#define AVX2_ROUNDED(j) _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + k + 8 * (j)), vinv))
    for (k = 0; k + 32 <= K; k += 32) {
        const __m256i w01 = _mm256_packs_epi32(AVX2_ROUNDED(0), AVX2_ROUNDED(1));
        const __m256i w23 = _mm256_packs_epi32(AVX2_ROUNDED(2), AVX2_ROUNDED(3));
        const __m256i b = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(w01, w23), order);
        _mm256_storeu_si256((__m256i *)(q + k), _mm256_add_epi8(b, voffset));
    }
#undef AVX2_ROUNDED
    for (; k < K; k++) q[k] = (int8_t)(round_int8(x[k] * inv) + offset);
    for (; k < row_bytes; k++) q[k] = offset;
    return amax / QUANT_X_MAX;
}
#endif

/* One row x [K] rounded to bf16 and widened back to float32, zero-padded
 * to padded values: the row as the widening bf16 kernels read it. */
static void prepare_widened_row(float *out, const float *x, size_t K, size_t padded)
{
    enum { CHUNK = 256 };
    uint16_t rounded[CHUNK];
    for (size_t k = 0; k < K; k += CHUNK) {
        const size_t n = K - k < CHUNK ? K - k : CHUNK;
        nn_round_bf16(rounded, x + k, n);
        nn_bf16_to_floats(out + k, rounded, n);
    }
    for (size_t k = K; k < padded; k++) out[k] = 0.0f;
}

/* Rows x [rows, K] (ldx apart) as the kernel reads them, into xq (rows of
 * nn_quant_row_bytes, zero-padded) and, for int8, each row's scale into
 * xs [rows]; bf16 rounded to nearest by nn_round_bf16 (and widened, for
 * the kernels that widen).  The AVX-512 int8 kernels prepare with AVX-512
 * too, the AVX2 one with AVX2 (the same bytes). */
void nn_quant_prepare(const nn_packed_linear *p, const float *x, size_t ldx, int rows, void *xq,
                      float *xs)
{
    const size_t K = (size_t)p->K, row_bytes = nn_quant_row_bytes(p);
#ifdef HAVE_PREPARE_X86
    const bool wide = p->kernel == NN_KERNEL_INT8_VNNI || p->kernel == NN_KERNEL_INT8_AVX512BW;
#else
    const bool wide = false;
#endif
    const int8_t offset = p->kernel == NN_KERNEL_INT8_C ? 0 : QUANT_X_OFFSET;
    for (int r = 0; r < rows; r++) {
        const float *row = x + (size_t)r * ldx;
        char *out = (char *)xq + (size_t)r * row_bytes;
        if (nn_kernel_is_int8(p->kernel)) {
#ifdef HAVE_PREPARE_X86
            if (wide) {
                xs[r] = prepare_int8_row512((int8_t *)out, row, K, row_bytes, offset);
                continue;
            }
            if (p->kernel == NN_KERNEL_INT8_AVX2) {
                xs[r] = prepare_int8_row_avx2((int8_t *)out, row, K, row_bytes, offset);
                continue;
            }
#endif
            xs[r] = prepare_int8_row((int8_t *)out, row, K, row_bytes, offset);
        } else if (reads_widened_rows(p->kernel)) {
            prepare_widened_row((float *)(void *)out, row, K, row_bytes / sizeof(float));
        } else {
            uint16_t *b = (uint16_t *)(void *)out;
            nn_round_bf16(b, row, K);
            if (K % 2) b[K] = 0;
        }
    }
}

/* ---- the plain C kernels: the reference the others must equal ------------------------ */

/* out [rows, cols] (ldo apart) = the prepared rows xq (row_bytes apart,
 * scales xs) times panel pi, plus bias; cols <= QUANT_WIDTH. */
static void int8_block_c(float *out, size_t ldo, const void *xq, size_t row_bytes,
                         const float *xs, int rows, const nn_packed_linear *p, int pi, int cols)
{
    const size_t K4 = row_bytes;
    const int8_t *panel = (const int8_t *)p->panels + (size_t)pi * QUANT_WIDTH * K4;
    const int n0 = pi * QUANT_WIDTH;
    for (int r = 0; r < rows; r++) {
        const int8_t *x = (const int8_t *)xq + (size_t)r * row_bytes;
        for (int j = 0; j < cols; j++) {
            int32_t sum = 0;
            for (size_t k = 0; k < K4; k++) sum += x[k] * panel[(k / 4) * QUANT_WIDTH * 4 + j * 4 + k % 4];
            out[(size_t)r * ldo + j] =
                fmaf((float)sum, xs[r] * p->scale[n0 + j], p->bias ? p->bias[n0 + j] : 0.0f);
        }
    }
}

static void bf16_block_c(float *out, size_t ldo, const void *xq, size_t row_bytes,
                         const float *xs, int rows, const nn_packed_linear *p, int pi, int cols)
{
    const size_t K2 = row_bytes / sizeof(uint16_t);
    const uint16_t *panel = (const uint16_t *)p->panels + (size_t)pi * QUANT_WIDTH * K2;
    const int n0 = pi * QUANT_WIDTH;
    for (int r = 0; r < rows; r++) {
        const uint16_t *x = (const uint16_t *)((const char *)xq + (size_t)r * row_bytes);
        for (int j = 0; j < cols; j++) {
            float acc = 0.0f;
            for (size_t g = 0; g < K2 / 2; g++) {
                const uint16_t *w = panel + g * QUANT_WIDTH * 2 + j * 2;
                acc = fmaf(nn_bf16_to_float(x[2 * g + 1]), nn_bf16_to_float(w[1]), acc);
                acc = fmaf(nn_bf16_to_float(x[2 * g]), nn_bf16_to_float(w[0]), acc);
            }
            out[(size_t)r * ldo + j] = acc + (p->bias ? p->bias[n0 + j] : 0.0f);
        }
    }
}

/* ---- x86-64 kernels ----------------------------------------------------------------------- */

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define HAVE_QUANT_KERNELS 1

#define AVX2_INT8_TARGET __attribute__((target("avx2,fma")))
#define AVX512BW_TARGET __attribute__((target("avx2,fma,avx512f,avx512bw")))
#define VNNI_TARGET __attribute__((target("avx2,fma,avx512f,avx512bw,avx512vnni")))
#define BF16_TARGET __attribute__((target("avx2,fma,avx512f,avx512bw,avx512bf16")))
#define AVX2_BF16_TARGET __attribute__((target("avx2,fma")))

/* The rows a kernel takes at a time: 8 rows x 32 outputs in 16 zmm sums;
 * AVX2, 2 rows in 8 ymm sums (int8), 3 in 12 (bf16 widened). */
enum { QUANT_ROWS_512 = 8, QUANT_ROWS_AVX2 = 2, QUANT_ROWS_AVX2_WIDENED = 3 };

/* Stores 16 int32 sums of outputs n0 + c .. as floats: fma(sum, s_x * s_w, bias). */
AVX512BW_TARGET static inline void store16_int8(float *out, __m512i sum, float xs,
                                                const nn_packed_linear *p, int n, int cols)
{
    if (cols <= 0) return;
    const __mmask16 m = cols >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << cols) - 1);
    const __m512 s = _mm512_mul_ps(_mm512_set1_ps(xs), _mm512_maskz_loadu_ps(m, p->scale + n));
    const __m512 b = p->bias ? _mm512_maskz_loadu_ps(m, p->bias + n) : _mm512_setzero_ps();
    _mm512_mask_storeu_ps(out, m, _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), s, b));
}

/* The kernels below keep their 16 sums in named registers, row by row
 * (with the sums in an array indexed in a loop, GCC keeps them in memory,
 * as packed.c found for float32).  MR is constant where inlined, so the
 * rows past it are compiled away. */
#define ROW_PTR(i) const int32_t *x##i = (const int32_t *)((const char *)xq + (MR > i ? i : 0) * row_bytes)
#define ROW_PTRS ROW_PTR(0); ROW_PTR(1); ROW_PTR(2); ROW_PTR(3); ROW_PTR(4); ROW_PTR(5); ROW_PTR(6); ROW_PTR(7)
#define FOR_ROWS(M) M(0) M(1) M(2) M(3) M(4) M(5) M(6) M(7)
/* The 16 sums of an AVX-512 kernel, of type T, all zero: row i's two in
 * ci0 (outputs 0-15 of the panel) and ci1 (16-31). */
#define ROW_SUMS_512(T, zero)                                                              \
    T c00 = zero, c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00,        \
      c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00, c60 = c00, c61 = c00,         \
      c70 = c00, c71 = c00

/* A kernel's block function (nn_quant_block_fn): its rows function with the
 * number of rows a constant, so that each case compiles to its own code. */
#define DEFINE_BLOCK(target, name, rows_fn)                                                   \
    target static void name(float *out, size_t ldo, const void *xq, size_t row_bytes,        \
                            const float *xs, int rows, const nn_packed_linear *p, int pi,    \
                            int cols)                                                        \
    {                                                                                        \
        switch (rows) {                                                                      \
        case 8: rows_fn(out, ldo, xq, row_bytes, xs, p, pi, cols, 8); break;                 \
        case 7: rows_fn(out, ldo, xq, row_bytes, xs, p, pi, cols, 7); break;                 \
        case 6: rows_fn(out, ldo, xq, row_bytes, xs, p, pi, cols, 6); break;                 \
        case 5: rows_fn(out, ldo, xq, row_bytes, xs, p, pi, cols, 5); break;                 \
        case 4: rows_fn(out, ldo, xq, row_bytes, xs, p, pi, cols, 4); break;                 \
        case 3: rows_fn(out, ldo, xq, row_bytes, xs, p, pi, cols, 3); break;                 \
        case 2: rows_fn(out, ldo, xq, row_bytes, xs, p, pi, cols, 2); break;                 \
        case 1: rows_fn(out, ldo, xq, row_bytes, xs, p, pi, cols, 1); break;                 \
        default: break;                                                                      \
        }                                                                                    \
    }

/* The offset of the rows' bytes (QUANT_X_OFFSET) times each of 16
 * outputs' sum_k q[n][k]: what the vector kernels take off their sums. */
AVX512BW_TARGET static inline __m512i offsets16(const nn_packed_linear *p, int n)
{
    return _mm512_slli_epi32(_mm512_loadu_si512(p->col_sums + n), QUANT_X_OFFSET_SHIFT);
}

/* Row i's 32 outputs, their offsets (off0, off1) taken off the sums. */
#define INT8_STORE_512(i)                                                                  \
    if (MR > i) {                                                                          \
        store16_int8(out + i * ldo, _mm512_sub_epi32(c##i##0, off0), xs[i], p, n0, cols);  \
        store16_int8(out + i * ldo + 16, _mm512_sub_epi32(c##i##1, off1), xs[i], p, n0 + 16, \
                     cols - 16);                                                           \
    }

/* VNNI: MR rows x 32 outputs; per group, two 64-byte loads and MR broadcasts
 * for 2 MR vpdpbusd. */
VNNI_TARGET static inline __attribute__((always_inline)) void
vnni_rows(float *out, size_t ldo, const void *xq, size_t row_bytes, const float *xs,
          const nn_packed_linear *p, int pi, int cols, const int MR)
{
    const int8_t *panel = (const int8_t *)p->panels + (size_t)pi * QUANT_WIDTH * row_bytes;
    const int G = (int)(row_bytes / 4);
    ROW_PTRS;
    ROW_SUMS_512(__m512i, _mm512_setzero_si512());
#define VNNI_ROW(i)                                                                        \
    if (MR > i) {                                                                          \
        const __m512i a = _mm512_set1_epi32(x##i[g]);                                      \
        c##i##0 = _mm512_dpbusd_epi32(c##i##0, a, w0);                                     \
        c##i##1 = _mm512_dpbusd_epi32(c##i##1, a, w1);                                     \
    }
#pragma GCC unroll 2
    for (int g = 0; g < G; g++) {
        const __m512i w0 = _mm512_loadu_si512(panel + (size_t)g * 128);
        const __m512i w1 = _mm512_loadu_si512(panel + (size_t)g * 128 + 64);
        FOR_ROWS(VNNI_ROW)
    }
    const int n0 = pi * QUANT_WIDTH;
    const __m512i off0 = offsets16(p, n0), off1 = offsets16(p, n0 + 16);
    FOR_ROWS(INT8_STORE_512)
#undef VNNI_ROW
}

DEFINE_BLOCK(VNNI_TARGET, int8_block_vnni, vnni_rows)


/* AVX-512BW without VNNI: x + 64 (u8) times q (s8) by vpmaddubsw into
 * int16 pairs (at most 2 x 127 x 127: no saturation), then vpmaddwd by
 * ones into int32. */
AVX512BW_TARGET static inline __attribute__((always_inline)) void
bw_rows(float *out, size_t ldo, const void *xq, size_t row_bytes, const float *xs,
        const nn_packed_linear *p, int pi, int cols, const int MR)
{
    const int8_t *panel = (const int8_t *)p->panels + (size_t)pi * QUANT_WIDTH * row_bytes;
    const int G = (int)(row_bytes / 4);
    const __m512i ones = _mm512_set1_epi16(1);
    ROW_PTRS;
    ROW_SUMS_512(__m512i, _mm512_setzero_si512());
#define BW_ROW(i)                                                                          \
    if (MR > i) {                                                                          \
        const __m512i a = _mm512_set1_epi32(x##i[g]);                                      \
        c##i##0 = _mm512_add_epi32(c##i##0, _mm512_madd_epi16(_mm512_maddubs_epi16(a, w0), ones)); \
        c##i##1 = _mm512_add_epi32(c##i##1, _mm512_madd_epi16(_mm512_maddubs_epi16(a, w1), ones)); \
    }
    for (int g = 0; g < G; g++) {
        const __m512i w0 = _mm512_loadu_si512(panel + (size_t)g * 128);
        const __m512i w1 = _mm512_loadu_si512(panel + (size_t)g * 128 + 64);
        FOR_ROWS(BW_ROW)
    }
    const int n0 = pi * QUANT_WIDTH;
    const __m512i off0 = offsets16(p, n0), off1 = offsets16(p, n0 + 16);
    FOR_ROWS(INT8_STORE_512)
#undef BW_ROW
}

DEFINE_BLOCK(AVX512BW_TARGET, int8_block_bw, bw_rows)


/* AVX2: as AVX-512BW, QUANT_ROWS_AVX2 (2) rows at a time, the panel's 32
 * outputs in four registers of 8 per row: eight sums, the two rows'
 * broadcasts, the weights, ones and a temporary within the 16 ymm
 * registers.  The sums are named, not an array (an array indexed in the
 * loop is kept in memory: a load and a store per product, which made this
 * kernel no faster than float32).  Per group of 4 k: four loads, two
 * broadcasts and, per row and register, vpmaddubsw, vpmaddwd and vpaddd. */
#define AVX2_INT8_SUMS(i) __m256i c##i##0 = zero, c##i##1 = zero, c##i##2 = zero, c##i##3 = zero
#define AVX2_INT8_PRODUCT(i, b)                                                            \
    if (MR > i)                                                                            \
        c##i##b = _mm256_add_epi32(c##i##b, _mm256_madd_epi16(_mm256_maddubs_epi16(a##i, w), ones));
#define AVX2_INT8_BLOCK(b)                                                                 \
    {                                                                                      \
        const __m256i w = _mm256_loadu_si256((const __m256i *)(panel + (size_t)g * 128 + 32 * b)); \
        AVX2_INT8_PRODUCT(0, b) AVX2_INT8_PRODUCT(1, b)                                    \
    }
#define AVX2_INT8_STORE(i)                                                                 \
    if (MR > i) {                                                                          \
        store8_int8(out + i * ldo, c##i##0, xs[i], p, n0, cols);                           \
        store8_int8(out + i * ldo + 8, c##i##1, xs[i], p, n0 + 8, cols - 8);               \
        store8_int8(out + i * ldo + 16, c##i##2, xs[i], p, n0 + 16, cols - 16);            \
        store8_int8(out + i * ldo + 24, c##i##3, xs[i], p, n0 + 24, cols - 24);            \
    }

/* Stores 8 int32 sums of outputs n .. as floats (cols of them), their
 * offsets taken off: fma(sum, s_x * s_w, bias), as int8_block_c. */
AVX2_INT8_TARGET static inline void store8_int8(float *out, __m256i sum, float xs,
                                                const nn_packed_linear *p, int n, int cols)
{
    if (cols <= 0) return;
    const __m256i col_sums = _mm256_loadu_si256((const __m256i *)(const void *)(p->col_sums + n));
    sum = _mm256_sub_epi32(sum, _mm256_slli_epi32(col_sums, QUANT_X_OFFSET_SHIFT));
    if (cols >= 8) {
        const __m256 s = _mm256_mul_ps(_mm256_set1_ps(xs), _mm256_loadu_ps(p->scale + n));
        const __m256 b = p->bias ? _mm256_loadu_ps(p->bias + n) : _mm256_setzero_ps();
        _mm256_storeu_ps(out, _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), s, b));
        return;
    }
    int32_t sums[8];
    _mm256_storeu_si256((__m256i *)sums, sum);
    for (int j = 0; j < cols; j++)
        out[j] = fmaf((float)sums[j], xs * p->scale[n + j], p->bias ? p->bias[n + j] : 0.0f);
}

AVX2_INT8_TARGET static inline __attribute__((always_inline)) void
int8_rows_avx2(float *out, size_t ldo, const void *xq, size_t row_bytes, const float *xs,
               const nn_packed_linear *p, int pi, int cols, const int MR)
{
    const int8_t *panel = (const int8_t *)p->panels + (size_t)pi * QUANT_WIDTH * row_bytes;
    const int G = (int)(row_bytes / 4), n0 = pi * QUANT_WIDTH;
    const __m256i ones = _mm256_set1_epi16(1), zero = _mm256_setzero_si256();
    const int32_t *x0 = (const int32_t *)xq;
    const int32_t *x1 = (const int32_t *)((const char *)xq + (MR > 1 ? row_bytes : 0));
    AVX2_INT8_SUMS(0);
    AVX2_INT8_SUMS(1);
    for (int g = 0; g < G; g++) {
        const __m256i a0 = _mm256_set1_epi32(x0[g]), a1 = _mm256_set1_epi32(x1[g]);
        AVX2_INT8_BLOCK(0)
        AVX2_INT8_BLOCK(1)
        AVX2_INT8_BLOCK(2)
        AVX2_INT8_BLOCK(3)
    }
    AVX2_INT8_STORE(0)
    AVX2_INT8_STORE(1)
}
#undef AVX2_INT8_SUMS
#undef AVX2_INT8_PRODUCT
#undef AVX2_INT8_BLOCK
#undef AVX2_INT8_STORE

AVX2_INT8_TARGET static void int8_block_avx2(float *out, size_t ldo, const void *xq,
                                             size_t row_bytes, const float *xs, int rows,
                                             const nn_packed_linear *p, int pi, int cols)
{
    int r0 = 0;
    for (; r0 + QUANT_ROWS_AVX2 <= rows; r0 += QUANT_ROWS_AVX2)
        int8_rows_avx2(out + (size_t)r0 * ldo, ldo, (const char *)xq + (size_t)r0 * row_bytes,
                       row_bytes, xs + r0, p, pi, cols, QUANT_ROWS_AVX2);
    if (r0 < rows)
        int8_rows_avx2(out + (size_t)r0 * ldo, ldo, (const char *)xq + (size_t)r0 * row_bytes,
                       row_bytes, xs + r0, p, pi, cols, 1);
}

/* Stores 16 float sums of outputs n .. plus their bias (cols of them). */
AVX512BW_TARGET static inline void store16_bf16(float *out, __m512 sum, const nn_packed_linear *p,
                                                int n, int cols)
{
    if (cols <= 0) return;
    const __mmask16 m = cols >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << cols) - 1);
    const __m512 b = p->bias ? _mm512_maskz_loadu_ps(m, p->bias + n) : _mm512_setzero_ps();
    _mm512_mask_storeu_ps(out, m, _mm512_add_ps(sum, b));
}

/* AVX-512 BF16: MR rows x 32 outputs; per pair of k, two loads, MR
 * broadcasts and 2 MR vdpbf16ps. */
BF16_TARGET static inline __attribute__((always_inline)) void
bf16_rows(float *out, size_t ldo, const void *xq, size_t row_bytes, const float *xs,
          const nn_packed_linear *p, int pi, int cols, const int MR)
{
    const uint16_t *panel = (const uint16_t *)p->panels + (size_t)pi * QUANT_WIDTH * (row_bytes / 2);
    const int G = (int)(row_bytes / 4);
    ROW_PTRS;
    ROW_SUMS_512(__m512, _mm512_setzero_ps());
#define BF16_ROW(i)                                                                        \
    if (MR > i) {                                                                          \
        const __m512bh a = (__m512bh)_mm512_set1_epi32(x##i[g]);                           \
        c##i##0 = _mm512_dpbf16_ps(c##i##0, a, w0);                                        \
        c##i##1 = _mm512_dpbf16_ps(c##i##1, a, w1);                                        \
    }
#pragma GCC unroll 2
    for (int g = 0; g < G; g++) {
        const __m512bh w0 = (__m512bh)_mm512_loadu_si512(panel + (size_t)g * 64);
        const __m512bh w1 = (__m512bh)_mm512_loadu_si512(panel + (size_t)g * 64 + 32);
        FOR_ROWS(BF16_ROW)
    }
    const int n0 = pi * QUANT_WIDTH;
#define BF16_STORE(i)                                                                      \
    if (MR > i) {                                                                          \
        store16_bf16(out + i * ldo, c##i##0, p, n0, cols);                                 \
        store16_bf16(out + i * ldo + 16, c##i##1, p, n0 + 16, cols - 16);                  \
    }
    FOR_ROWS(BF16_STORE)
#undef BF16_ROW
}

DEFINE_BLOCK(BF16_TARGET, bf16_block_avx512, bf16_rows)


/* The kernels that widen (AVX-512 without its BF16 instruction, and AVX2).
 * A group's 32-bit word holds an output's even weight in its low half and
 * its odd weight in its high half, so word << 16 is the even weight as a
 * float32 and word & 0xffff0000 the odd one.  The rows come as floats
 * (bf16 values widened), and each pair makes bf16_block_c's two fused
 * multiply-adds in its order: odd, then even. */
#define ROW_FLOATS(i)                                                                      \
    const float *f##i = (const float *)(const void *)((const char *)xq + (MR > i ? i : 0) * row_bytes)
#define ROWS_FLOATS                                                                        \
    ROW_FLOATS(0); ROW_FLOATS(1); ROW_FLOATS(2); ROW_FLOATS(3);                            \
    ROW_FLOATS(4); ROW_FLOATS(5); ROW_FLOATS(6); ROW_FLOATS(7)

/* AVX-512BW: MR rows x 32 outputs; per group, two loads, four widenings,
 * 2 MR broadcasts and 4 MR fused multiply-adds. */
AVX512BW_TARGET static inline __attribute__((always_inline)) void
bf16_widened_rows(float *out, size_t ldo, const void *xq, size_t row_bytes, const float *xs,
                  const nn_packed_linear *p, int pi, int cols, const int MR)
{
    const int G = (int)(row_bytes / (2 * sizeof(float)));
    const uint16_t *panel = (const uint16_t *)p->panels + (size_t)pi * QUANT_WIDTH * 2 * G;
    const __m512i high = _mm512_set1_epi32((int)0xffff0000u);
    ROWS_FLOATS;
    ROW_SUMS_512(__m512, _mm512_setzero_ps());
#define WIDENED_ROW(i)                                                                     \
    if (MR > i) {                                                                          \
        const __m512 odd = _mm512_set1_ps(f##i[2 * g + 1]), even = _mm512_set1_ps(f##i[2 * g]); \
        c##i##0 = _mm512_fmadd_ps(even, e0, _mm512_fmadd_ps(odd, o0, c##i##0));            \
        c##i##1 = _mm512_fmadd_ps(even, e1, _mm512_fmadd_ps(odd, o1, c##i##1));            \
    }
    for (int g = 0; g < G; g++) {
        const __m512i w0 = _mm512_loadu_si512(panel + (size_t)g * 64);
        const __m512i w1 = _mm512_loadu_si512(panel + (size_t)g * 64 + 32);
        const __m512 o0 = _mm512_castsi512_ps(_mm512_and_si512(w0, high));
        const __m512 e0 = _mm512_castsi512_ps(_mm512_slli_epi32(w0, 16));
        const __m512 o1 = _mm512_castsi512_ps(_mm512_and_si512(w1, high));
        const __m512 e1 = _mm512_castsi512_ps(_mm512_slli_epi32(w1, 16));
        FOR_ROWS(WIDENED_ROW)
    }
    const int n0 = pi * QUANT_WIDTH;
    FOR_ROWS(BF16_STORE)
#undef WIDENED_ROW
#undef BF16_STORE
}

DEFINE_BLOCK(AVX512BW_TARGET, bf16_block_widened512, bf16_widened_rows)

/* AVX2: the same, QUANT_ROWS_AVX2_WIDENED (3) rows at a time (the two
 * fused multiply-adds of a pair wait for each other, so twelve sums in
 * flight keep the units busy), the panel's 32 outputs in four registers of
 * 8 per row. */
#define AVX2_ROW_SUMS(i) __m256 c##i##0 = zero, c##i##1 = zero, c##i##2 = zero, c##i##3 = zero
#define AVX2_WIDENED(i, b)                                                                 \
    if (MR > i) {                                                                          \
        c##i##b = _mm256_fmadd_ps(_mm256_broadcast_ss(f##i + 2 * g + 1), o, c##i##b);      \
        c##i##b = _mm256_fmadd_ps(_mm256_broadcast_ss(f##i + 2 * g), e, c##i##b);          \
    }
#define AVX2_WIDENED_BLOCK(b)                                                              \
    {                                                                                      \
        const __m256i w =                                                                  \
            _mm256_loadu_si256((const __m256i *)(panel + (size_t)g * 64 + 16 * b));        \
        const __m256 o = _mm256_castsi256_ps(_mm256_and_si256(w, high));                  \
        const __m256 e = _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));                    \
        AVX2_WIDENED(0, b) AVX2_WIDENED(1, b) AVX2_WIDENED(2, b)                           \
    }
#define AVX2_WIDENED_STORE(i)                                                              \
    if (MR > i) {                                                                          \
        store8_bf16(out + i * ldo, c##i##0, p, n0, cols);                                  \
        store8_bf16(out + i * ldo + 8, c##i##1, p, n0 + 8, cols - 8);                      \
        store8_bf16(out + i * ldo + 16, c##i##2, p, n0 + 16, cols - 16);                   \
        store8_bf16(out + i * ldo + 24, c##i##3, p, n0 + 24, cols - 24);                   \
    }

/* Stores 8 float sums of outputs n .. plus their bias (cols of them). */
AVX2_BF16_TARGET static inline void store8_bf16(float *out, __m256 sum, const nn_packed_linear *p,
                                                int n, int cols)
{
    if (cols <= 0) return;
    float v[8];
    _mm256_storeu_ps(v, sum);
    for (int j = 0; j < cols && j < 8; j++) out[j] = v[j] + (p->bias ? p->bias[n + j] : 0.0f);
}

AVX2_BF16_TARGET static inline __attribute__((always_inline)) void
bf16_widened_rows_avx2(float *out, size_t ldo, const void *xq, size_t row_bytes,
                       const nn_packed_linear *p, int pi, int cols, const int MR)
{
    const int G = (int)(row_bytes / (2 * sizeof(float))), n0 = pi * QUANT_WIDTH;
    const uint16_t *panel = (const uint16_t *)p->panels + (size_t)pi * QUANT_WIDTH * 2 * G;
    const __m256i high = _mm256_set1_epi32((int)0xffff0000u);
    const __m256 zero = _mm256_setzero_ps();
    ROW_FLOATS(0);
    ROW_FLOATS(1);
    ROW_FLOATS(2);
    AVX2_ROW_SUMS(0);
    AVX2_ROW_SUMS(1);
    AVX2_ROW_SUMS(2);
    for (int g = 0; g < G; g++) {
        AVX2_WIDENED_BLOCK(0)
        AVX2_WIDENED_BLOCK(1)
        AVX2_WIDENED_BLOCK(2)
        AVX2_WIDENED_BLOCK(3)
    }
    AVX2_WIDENED_STORE(0)
    AVX2_WIDENED_STORE(1)
    AVX2_WIDENED_STORE(2)
}

AVX2_BF16_TARGET static void bf16_block_widened_avx2(float *out, size_t ldo, const void *xq,
                                                     size_t row_bytes, const float *xs, int rows,
                                                     const nn_packed_linear *p, int pi, int cols)
{
    for (int r0 = 0; r0 < rows; r0 += QUANT_ROWS_AVX2_WIDENED) {
        float *o = out + (size_t)r0 * ldo;
        const char *x = (const char *)xq + (size_t)r0 * row_bytes;
        switch (rows - r0) {
        case 1: bf16_widened_rows_avx2(o, ldo, x, row_bytes, p, pi, cols, 1); break;
        case 2: bf16_widened_rows_avx2(o, ldo, x, row_bytes, p, pi, cols, 2); break;
        default: bf16_widened_rows_avx2(o, ldo, x, row_bytes, p, pi, cols, 3); break;
        }
    }
}
#undef AVX2_ROW_SUMS
#undef AVX2_WIDENED
#undef AVX2_WIDENED_BLOCK
#undef AVX2_WIDENED_STORE

#endif

/* ---- choosing ------------------------------------------------------------------------------ */

bool nn_kernel_is_int8(nn_kernel k)
{
    return k == NN_KERNEL_INT8_C || k == NN_KERNEL_INT8_AVX2 || k == NN_KERNEL_INT8_AVX512BW ||
           k == NN_KERNEL_INT8_VNNI;
}

bool nn_kernel_is_bf16(nn_kernel k)
{
    return k == NN_KERNEL_BF16_C || k == NN_KERNEL_BF16_AVX2 || k == NN_KERNEL_BF16_AVX512BW ||
           k == NN_KERNEL_BF16_AVX512;
}

nn_quant_block_fn *nn_quant_block(nn_kernel k, int *rows)
{
    *rows = 4;
    switch (k) {
#ifdef HAVE_QUANT_KERNELS
    case NN_KERNEL_INT8_VNNI: *rows = QUANT_ROWS_512; return int8_block_vnni;
    case NN_KERNEL_INT8_AVX512BW: *rows = QUANT_ROWS_512; return int8_block_bw;
    case NN_KERNEL_INT8_AVX2: *rows = 2 * QUANT_ROWS_AVX2; return int8_block_avx2;
    case NN_KERNEL_BF16_AVX512: *rows = QUANT_ROWS_512; return bf16_block_avx512;
    case NN_KERNEL_BF16_AVX512BW: *rows = QUANT_ROWS_512; return bf16_block_widened512;
    case NN_KERNEL_BF16_AVX2: *rows = 2 * QUANT_ROWS_AVX2_WIDENED; return bf16_block_widened_avx2;
#endif
    case NN_KERNEL_BF16_C: return bf16_block_c;
    default: return int8_block_c;
    }
}
