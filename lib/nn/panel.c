/* panel.c - the panels of a matrix, made from its rows: the layout the
 * kernels of packed.c and quant.c read, for a packed model file (written
 * once by 'train pack', mapped by every process that runs the model).
 *
 * A model holds every matrix W [N, K] row by row; the kernels read it in
 * panels of 32 outputs side by side, unit by unit along k.  Every layout
 * lies in 4-byte words (a float; four int8 values; two bf16 values), so
 * panel word [u][j] is word u of row 32 pi + j (zeros past N and past K),
 * and making a panel is a transposition of a [32, units] block of 32-bit
 * words: eight by eight with AVX2 where the CPU has it.  The same words as
 * nn_pack_linear_for (AVX-512's width), nn_pack_int8 and nn_pack_bf16 make,
 * with int8's scales and column sums, so a product gives the same bits
 * from either. */
#include <stdint.h>
#include <string.h>

#include "nn/layers.h"

/* The words per row of the panels (units) and the bytes of one row. */
typedef struct panel_shape {
    size_t width, units, row_bytes;
} panel_shape;

static panel_shape shape_of(const nn_panel_rows *p)
{
    const size_t K = (size_t)p->K;
    switch (p->type) {
    case TFM_COMPUTE_INT8: return (panel_shape){NN_PANEL_WIDTH, (K + 3) / 4, K};
    case TFM_COMPUTE_BF16: return (panel_shape){NN_PANEL_WIDTH, (K + 1) / 2, 2 * K};
    default: return (panel_shape){NN_PANEL_WIDTH, K, 4 * K};
    }
}

size_t nn_panel_count(const nn_panel_rows *p)
{
    return ((size_t)p->N + NN_PANEL_WIDTH - 1) / NN_PANEL_WIDTH;
}

size_t nn_panel_words(const nn_panel_rows *p) { return NN_PANEL_WIDTH * shape_of(p).units; }

/* Word u of row n (zeros past the row's end when K is not a whole number of
 * words). */
static uint32_t row_word(const nn_panel_rows *p, const panel_shape *s, size_t n, size_t u)
{
    const unsigned char *row = (const unsigned char *)p->rows + n * s->row_bytes;
    uint32_t w = 0;
    size_t at = u * 4, len = s->row_bytes - at < 4 ? s->row_bytes - at : 4;
    memcpy(&w, row + at, len); /* little-endian: the first value in the low bytes */
    return w;
}

/* The sum of row n's int8 values (what nn_pack_int8 gives its column). */
static int32_t row_sum(const nn_panel_rows *p, size_t n)
{
    const int8_t *row = (const int8_t *)p->rows + n * (size_t)p->K;
    int32_t sum = 0;
    for (int k = 0; k < p->K; k++) sum += row[k];
    return sum;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

/* dst [8 units][width] = the 8 x 8 block of words src [8 rows][stride]
 * transposed (rows j0 .. j0 + 7 of the panel's columns). */
__attribute__((target("avx2"))) static inline void transpose8(uint32_t *dst, size_t width,
                                                              const uint32_t *src, size_t stride)
{
    __m256 r[8], t[8];
    for (int i = 0; i < 8; i++)
        r[i] = _mm256_loadu_ps((const float *)(const void *)(src + i * stride));
    t[0] = _mm256_unpacklo_ps(r[0], r[1]);
    t[1] = _mm256_unpackhi_ps(r[0], r[1]);
    t[2] = _mm256_unpacklo_ps(r[2], r[3]);
    t[3] = _mm256_unpackhi_ps(r[2], r[3]);
    t[4] = _mm256_unpacklo_ps(r[4], r[5]);
    t[5] = _mm256_unpackhi_ps(r[4], r[5]);
    t[6] = _mm256_unpacklo_ps(r[6], r[7]);
    t[7] = _mm256_unpackhi_ps(r[6], r[7]);
    r[0] = _mm256_shuffle_ps(t[0], t[2], 0x44);
    r[1] = _mm256_shuffle_ps(t[0], t[2], 0xEE);
    r[2] = _mm256_shuffle_ps(t[1], t[3], 0x44);
    r[3] = _mm256_shuffle_ps(t[1], t[3], 0xEE);
    r[4] = _mm256_shuffle_ps(t[4], t[6], 0x44);
    r[5] = _mm256_shuffle_ps(t[4], t[6], 0xEE);
    r[6] = _mm256_shuffle_ps(t[5], t[7], 0x44);
    r[7] = _mm256_shuffle_ps(t[5], t[7], 0xEE);
    for (int i = 0; i < 4; i++) {
        _mm256_storeu_ps((float *)(void *)(dst + i * width),
                         _mm256_permute2f128_ps(r[i], r[i + 4], 0x20));
        _mm256_storeu_ps((float *)(void *)(dst + (i + 4) * width),
                         _mm256_permute2f128_ps(r[i], r[i + 4], 0x31));
    }
}

/* The whole words of a full panel (width rows from n0, every row's first
 * units8 words, a multiple of 8), eight by eight. */
__attribute__((target("avx2"))) static void transpose_panel_avx2(uint32_t *panel, size_t width,
                                                                 const uint32_t *rows,
                                                                 size_t stride, size_t units8)
{
    for (size_t u = 0; u < units8; u += 8)
        for (size_t j = 0; j < width; j += 8)
            transpose8(panel + u * width + j, width, rows + j * stride + u, stride);
}
#define HAVE_TRANSPOSE 1
#endif

void nn_panel_make(const nn_panel_rows *p, size_t pi, uint32_t *panel, float *scale,
                   int32_t *sums)
{
    const panel_shape s = shape_of(p);
    const size_t n0 = pi * s.width;
    const size_t cols = (size_t)p->N - n0 < s.width ? (size_t)p->N - n0 : s.width;
    size_t done = 0; /* the words of every column made by the fast path */
#ifdef HAVE_TRANSPOSE
    /* whole rows of words, 4-byte aligned, on a CPU with AVX2 */
    if (cols == s.width && s.row_bytes % 4 == 0 && (uintptr_t)p->rows % 4 == 0 &&
        __builtin_cpu_supports("avx2")) {
        done = s.units / 8 * 8;
        transpose_panel_avx2(panel, s.width, (const uint32_t *)p->rows + n0 * s.units, s.units,
                             done);
    }
#endif
    for (size_t j = 0; j < s.width; j++)
        for (size_t u = done; u < s.units; u++)
            panel[u * s.width + j] = j < cols ? row_word(p, &s, n0 + j, u) : 0;
    if (p->type != TFM_COMPUTE_INT8) return;
    for (size_t j = 0; j < s.width; j++) {
        scale[j] = j < cols ? p->scale[n0 + j] : 0.0f;
        sums[j] = j < cols ? row_sum(p, n0 + j) : 0;
    }
}

void nn_panels_make(const nn_panel_rows *p, uint32_t *panels, float *scale, int32_t *sums)
{
    const size_t words = nn_panel_words(p);
    const bool int8 = p->type == TFM_COMPUTE_INT8;
    for (size_t pi = 0; pi < nn_panel_count(p); pi++)
        nn_panel_make(p, pi, panels + pi * words, int8 ? scale + pi * NN_PANEL_WIDTH : NULL,
                      int8 ? sums + pi * NN_PANEL_WIDTH : NULL);
}
