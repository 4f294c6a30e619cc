/* test_quant.c - int8 and bf16 weights and kernels (lib/nn/quant.c): the
 * rounding of the quantizers, every kernel against a reference written
 * here from the formulas (bit for bit) and against float32 (an error
 * bound), the kernels against each other, rows in a batch against rows
 * alone, and the logit statistics gathered on the way. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "nn/layers.h"
#include "testisa.h"

/* The sanitizer build (make check's build/asan: -O1, no multiversioning)
 * runs the plain C kernels some twenty times slower than the release build
 * (fmaf is a library call there, and every load is checked): there the
 * loops that repeat a check over many random cases do fewer, and the
 * largest shapes run on the vector kernels, the C ones on smaller shapes
 * that reach the same edges (each place says which). */

/* ---- the quantizers ------------------------------------------------------------------- */

static void test_quantize_int8(void)
{
    const float w[2][5] = {{0.0f, 1.0f, -2.0f, 0.5f, 1.0f / 127.0f}, {0, 0, 0, 0, 0}};
    int8_t q[10];
    float scale[2];
    nn_quantize_int8(q, scale, &w[0][0], 2, 5);
    CHECK(scale[0] == 2.0f / 127.0f && scale[1] == 0.0f);
    /* 1 * 63.5 = 63.5 rounds to the even 64; 0.5 * 63.5 = 31.75 to 32 */
    const int8_t want[10] = {0, 64, -127, 32, 0, 0, 0, 0, 0, 0};
    CHECK(memcmp(q, want, sizeof want) == 0);
    float back[10];
    nn_dequantize_int8(back, q, scale, 2, 5);
    for (int i = 0; i < 10; i++) CHECK(fabsf(back[i] - (&w[0][0])[i]) <= scale[i / 5] / 2 + 1e-7f);

    /* rows longer than a vector: each value (float)q * scale, as above */
    enum { N = 3, K = 21 };
    int8_t q2[N * K];
    float s2[N] = {0.5f, -3.0f, 1e-3f}, w2[N * K];
    for (int i = 0; i < N * K; i++) q2[i] = (int8_t)(i * 37 % 255 - 127);
    nn_dequantize_int8(w2, q2, s2, N, K);
    int bad = 0;
    for (int i = 0; i < N * K; i++) bad += w2[i] != (float)q2[i] * s2[i / K];
    CHECK_MSG(bad == 0, "%d values differ from (float)q * scale", bad);
}

static void test_bf16_round(void)
{
    CHECK(nn_bf16_round(1.0f) == 0x3f80);
    CHECK(nn_bf16_round(-2.0f) == 0xc000);
    /* halfway between 1 and the next bf16 (1 + 2^-7): ties to the even 1 */
    CHECK(nn_bf16_round(1.0f + 1.0f / 256.0f) == 0x3f80);
    /* halfway between 1 + 2^-7 and 1 + 2^-6: ties to the even 1 + 2^-6 */
    CHECK(nn_bf16_round(1.0f + 3.0f / 256.0f) == 0x3f82);
    CHECK(nn_bf16_round(1.0f + 1.0f / 256.0f + 1.0f / 65536.0f) == 0x3f81);
    CHECK(nn_bf16_round(INFINITY) == 0x7f80);
    CHECK(isnan(nn_bf16_to_float(nn_bf16_round(NAN))));
    CHECK(nn_bf16_round(3.4e38f) == 0x7f80); /* rounds up past the largest bf16 */
    CHECK(nn_bf16_to_float(0x3f81) == 1.0f + 1.0f / 128.0f);

    /* nn_round_bf16 (sixteen at a time, then one by one) rounds each value
     * as nn_bf16_round does: ties, NaNs, infinities, subnormals, random
     * values, at every offset and length of a 16-lane body and its tail. */
    enum { N = 53 };
    float x[N];
    uint32_t u = 12345;
    for (int i = 0; i < N; i++) {
        u = u * 1664525u + 1013904223u;
        float f;
        memcpy(&f, &u, sizeof f);
        x[i] = f;
    }
    const float special[] = {1.0f + 1.0f / 256.0f, 1.0f + 3.0f / 256.0f, INFINITY, -INFINITY, NAN,
                             -NAN, 1e-40f, -1e-45f, 0.0f, -0.0f, 3.4e38f, -1.5f};
    memcpy(x + 3, special, sizeof special);
    uint16_t got[N];
    for (int lo = 0; lo < 4; lo++)
        for (int n = 0; lo + n <= N; n += 7) {
            memset(got, 0, sizeof got);
            nn_round_bf16(got, x + lo, (size_t)n);
            int bad = 0;
            for (int i = 0; i < n; i++) bad += got[i] != nn_bf16_round(x[lo + i]);
            CHECK_MSG(bad == 0, "offset %d, %d values: %d differ", lo, n, bad);
        }
}

/* ---- the kernels ------------------------------------------------------------------------ */

enum { MAXN = 70, MAXK = 67, MAXR = 19 };

/* Every int8 kernel, the reference first. */
static const nn_kernel INT8_KERNELS[] = {NN_KERNEL_INT8_C, NN_KERNEL_INT8_AVX2,
                                         NN_KERNEL_INT8_AVX512BW, NN_KERNEL_INT8_VNNI};
enum { N_INT8_KERNELS = sizeof INT8_KERNELS / sizeof *INT8_KERNELS };

/* The int8 product from the formulas: the weights quantized by
 * nn_quantize_int8 (tested above), each row of x to seven bits, s_x =
 * max|x| / 63 and q_x = round(x / s_x) (ties to even), exact integer sums,
 * fma(sum, s_x s_w, bias). */
static void int8_reference(float *out, const float *x, const float *w, const float *bias, int R,
                           int N, int K)
{
    static int8_t qw[MAXN * MAXK];
    static int qx[MAXK];
    static float sw[MAXN];
    nn_quantize_int8(qw, sw, w, (size_t)N, (size_t)K);
    for (int r = 0; r < R; r++) {
        float amax = 0;
        for (int k = 0; k < K; k++) amax = fmaxf(amax, fabsf(x[r * K + k]));
        const float sx = amax / 63.0f, inv = amax > 0 ? 63.0f / amax : 0.0f;
        for (int k = 0; k < K; k++) qx[k] = (int)nearbyintf(x[r * K + k] * inv);
        for (int n = 0; n < N; n++) {
            int32_t sum = 0;
            for (int k = 0; k < K; k++) sum += qx[k] * qw[n * K + k];
            out[r * N + n] = fmaf((float)sum, sx * sw[n], bias ? bias[n] : 0.0f);
        }
    }
}

/* The bf16 product from the formulas: both rounded, each pair of k added
 * as vdpbf16ps does (the odd one first), float32 sums. */
static void bf16_reference(float *out, const float *x, const float *w, const float *bias, int R,
                           int N, int K)
{
    for (int r = 0; r < R; r++)
        for (int n = 0; n < N; n++) {
            float acc = 0.0f;
            for (int k = 0; k < K; k += 2) {
                float x1 = 0, w1 = 0;
                if (k + 1 < K) {
                    x1 = nn_bf16_to_float(nn_bf16_round(x[r * K + k + 1]));
                    w1 = nn_bf16_to_float(nn_bf16_round(w[n * K + k + 1]));
                }
                acc = fmaf(x1, w1, acc);
                acc = fmaf(nn_bf16_to_float(nn_bf16_round(x[r * K + k])),
                           nn_bf16_to_float(nn_bf16_round(w[n * K + k])), acc);
            }
            out[r * N + n] = acc + (bias ? bias[n] : 0.0f);
        }
}

/* Packs w for kernel (from its int8 or bf16 form). */
static tfm_status pack_for(nn_packed_linear *p, const float *w, const float *b, int N, int K,
                           nn_kernel kernel)
{
    static int8_t q[MAXN * MAXK];
    static uint16_t h[MAXN * MAXK];
    static float s[MAXN];
    if (nn_kernel_is_int8(kernel)) {
        nn_quantize_int8(q, s, w, (size_t)N, (size_t)K);
        return nn_pack_int8(p, q, s, b, N, K, kernel);
    }
    nn_round_bf16(h, w, (size_t)N * K);
    return nn_pack_bf16(p, h, b, N, K, kernel);
}

/* The worst ratio of |got - exact| to what rounding the factors can cost
 * each output: for int8, half a step of each factor (a step is its row's
 * largest |value| / 127 for the weights, / 63 for x),
 * sum_k |x_k| s_w / 2 + |w_k| s_x / 2 + s_x s_w / 4;
 * for bf16 (8 significant bits: each factor off by at most 2^-8 of
 * itself), 2^-7 + 2^-16 of sum_k |x_k w_k|; both plus the float32
 * sums' rounding, K 2^-23 sum_k |x_k w_k|. */
static double error_ratio(const float *got, const float *exact, const float *x, const float *w,
                          int R, int N, int K, bool int8)
{
    double worst = 0;
    for (int r = 0; r < R; r++) {
        const float *xr = x + (size_t)r * K;
        double sx = 0;
        for (int k = 0; k < K; k++) sx = fmax(sx, fabs(xr[k]) / 63.0);
        for (int n = 0; n < N; n++) {
            const float *wn = w + (size_t)n * K;
            double sw = 0, terms = 0, bound = 0;
            for (int k = 0; k < K; k++) sw = fmax(sw, fabs(wn[k]) / 127.0);
            for (int k = 0; k < K; k++) {
                terms += fabs((double)xr[k] * wn[k]);
                bound += int8 ? fabs(xr[k]) * sw / 2 + fabs(wn[k]) * sx / 2 + sx * sw / 4 : 0;
            }
            bound += (int8 ? 0 : (0x1p-7 + 0x1p-16) * terms) + K * 0x1p-23 * terms + 1e-30;
            worst = fmax(worst, fabs((double)got[r * N + n] - exact[r * N + n]) / bound);
        }
    }
    return worst;
}

/* The error of the products relative to their size: the root mean square of
 * got - exact over that of exact. */
static double rms_error(const float *got, const float *exact, size_t n)
{
    double e = 0, v = 0;
    for (size_t i = 0; i < n; i++) {
        e += ((double)got[i] - exact[i]) * ((double)got[i] - exact[i]);
        v += (double)exact[i] * exact[i];
    }
    return v > 0 ? sqrt(e / v) : sqrt(e);
}

/* Every kernel of a type this CPU runs, on shapes that leave partial panels
 * and groups: the reference's bits, nothing written past R x N, and the
 * float32 product within what rounding the factors can cost (error_ratio
 * at most 1).  Every N and K, each with and without a bias, for R rows of
 * Rs: blocks of 8 (AVX-512), 6 (AVX2 bf16), 4 (C, AVX2 int8) rows, full and
 * partial.  Under the sanitizers four R instead of seven, which still
 * cover one row, the zero row (R = 4), one full block and a partial one of
 * each size (R = 11: 8 + 3, 6 + 5, 4 + 4 + 3) and the most (R = 19: 8 + 8
 * + 3, 6 + 6 + 6 + 1, 4 x 4 + 3). */
static void check_kernels(const nn_kernel *kernels, int n_kernels, bool int8)
{
    const int Ns[] = {1, 16, 31, 32, 33, 70}, Ks[] = {1, 3, 4, 5, 33, 64, 67};
#if SANITIZED
    const int Rs[] = {1, 4, 11, MAXR};
#else
    const int Rs[] = {1, 4, 7, 10, 13, 16, MAXR};
#endif
    tfm_rng rng;
    tfm_rng_seed(&rng, 21);
    static float w[MAXN * MAXK], b[MAXN], x[MAXR * MAXK], want[MAXR * MAXN],
        exact[MAXR * MAXN], got[MAXR * MAXN];
    static unsigned char scratch[1 << 20];
    int cases = 0, wrong = 0, spilled = 0, ran = 0;
    double worst = 0, rms = 0;
    for (int ki = 0; ki < n_kernels; ki++) {
        if (!nn_packed_kernel_runs(kernels[ki])) continue;
        ran++;
        for (size_t ni = 0; ni < sizeof Ns / sizeof Ns[0]; ni++)
            for (size_t kk = 0; kk < sizeof Ks / sizeof Ks[0]; kk++)
                for (int with_bias = 0; with_bias < 2; with_bias++) {
                    const int N = Ns[ni], K = Ks[kk];
                    for (int i = 0; i < N * K; i++) w[i] = 2 * tfm_rng_float(&rng) - 1;
                    for (int i = 0; i < N; i++) b[i] = 2 * tfm_rng_float(&rng) - 1;
                    const float *bias = with_bias ? b : NULL;
                    nn_packed_linear p;
                    CHECK(pack_for(&p, w, bias, N, K, kernels[ki]) == TFM_OK);
                    CHECK(nn_packed_scratch_bytes(&p) <= sizeof scratch);
                    for (size_t ri = 0; ri < sizeof Rs / sizeof Rs[0]; ri++) {
                        const int R = Rs[ri];
                        for (int i = 0; i < R * K; i++) x[i] = 4 * tfm_rng_float(&rng) - 2;
                        if (R == 4) memset(x + K, 0, (size_t)K * sizeof *x); /* a zero row */
                        if (int8) int8_reference(want, x, w, bias, R, N, K);
                        else bf16_reference(want, x, w, bias, R, N, K);
                        linear_forward(exact, x, w, bias, R, K, N);
                        for (int i = 0; i < MAXR * MAXN; i++) got[i] = NAN;
                        nn_packed_forward(got, x, &p, R, scratch);
                        wrong += memcmp(got, want, (size_t)R * N * sizeof *got) != 0;
                        for (int i = R * N; i < MAXR * MAXN; i++) spilled += !isnan(got[i]);
                        worst = fmax(worst, error_ratio(got, exact, x, w, R, N, K, int8));
                        if (K >= 64 && N >= 32) rms = fmax(rms, rms_error(got, exact, (size_t)R * N));
                        cases++;
                    }
                    nn_packed_linear_free(&p);
                }
    }
    CHECK_MSG(ran > 0, "no kernel of this type runs here");
    CHECK_MSG(wrong == 0, "%d of %d products differ from the reference's bits", wrong, cases);
    CHECK_MSG(spilled == 0, "%d values written past the product", spilled);
    CHECK_MSG(worst <= 1.0, "an error against float32 %.3g times the rounding's bound", worst);
    printf("    %d products on %d kernels; against float32: at most %.2f of the rounding's bound, "
           "relative RMS error %.2e (K >= 64)\n", cases, ran, worst, rms);
}

static void test_int8_kernels(void)
{
    check_kernels(INT8_KERNELS, N_INT8_KERNELS, true);
}

/* The largest products, where vpmaddubsw's int16 pair sums would saturate
 * with eight-bit activations (x + 128 up to 255): rows of +-max|x| against
 * weights of +-max|w|, every product 63 * 127 in size and of one sign.
 * Each kernel gives the exact sum, K * 63 * 127 times the scales. */
static void test_int8_extremes(void)
{
    enum { N = 40, K = MAXK }; /* two panels, the second partial; a partial group of 4 */
    static float w[N * K], x[2 * K], got[2 * N];
    static unsigned char scratch[1 << 20];
    for (int n = 0; n < N; n++)
        for (int k = 0; k < K; k++) w[n * K + k] = n % 2 ? -0.5f : 0.5f;
    for (int k = 0; k < K; k++) x[k] = 2.0f, x[K + k] = -2.0f;
    /* the sum K * 63 * 127, the scales 2 / 63 and 0.5 / 127 */
    const float scale = (2.0f / 63.0f) * (0.5f / 127.0f);
    for (int ki = 0; ki < N_INT8_KERNELS; ki++) {
        if (!nn_packed_kernel_runs(INT8_KERNELS[ki])) continue;
        nn_packed_linear p;
        CHECK(pack_for(&p, w, NULL, N, K, INT8_KERNELS[ki]) == TFM_OK);
        CHECK(nn_packed_scratch_bytes(&p) <= sizeof scratch);
        nn_packed_forward(got, x, &p, 2, scratch);
        int wrong = 0;
        for (int r = 0; r < 2; r++)
            for (int n = 0; n < N; n++) {
                const float sign = (r == 0) == (n % 2 == 0) ? 1.0f : -1.0f;
                const float want = fmaf((float)(K * 63 * 127) * sign, scale, 0.0f);
                wrong += got[r * N + n] != want;
            }
        CHECK_MSG(wrong == 0, "kernel %d: %d of %d extreme products wrong",
                  (int)INT8_KERNELS[ki], wrong, 2 * N);
        nn_packed_linear_free(&p);
    }
}

static void test_bf16_kernels(void)
{
    const nn_kernel all[] = {NN_KERNEL_BF16_C, NN_KERNEL_BF16_AVX2, NN_KERNEL_BF16_AVX512BW,
                             NN_KERNEL_BF16_AVX512};
    check_kernels(all, 4, false);
}

/* Slicing many rows changes nothing: R rows at once equal one by one, and
 * the logit statistics gathered on the way are the same for every kernel
 * of a type and equal logit_stats' of the product.  N = 40 is a full panel
 * of 32 outputs and a partial one, and two groups of 16 logits and a
 * partial one.  Every kernel of kernels but skip (NN_KERNEL_SGEMM: none). */
static void rows_and_stats(int R, int K, nn_kernel skip)
{
    enum { N = 40 };
    const nn_kernel kernels[] = {NN_KERNEL_INT8_C, NN_KERNEL_INT8_AVX2, NN_KERNEL_INT8_AVX512BW,
                                 NN_KERNEL_INT8_VNNI, NN_KERNEL_BF16_C, NN_KERNEL_BF16_AVX2,
                                 NN_KERNEL_BF16_AVX512BW, NN_KERNEL_BF16_AVX512};
    tfm_rng rng;
    tfm_rng_seed(&rng, 22);
    float *w = malloc(sizeof(float) * N * K), *x = malloc(sizeof(float) * R * K),
          *all = malloc(sizeof(float) * R * N), *one = malloc(sizeof(float) * R * N);
    int8_t *q = malloc((size_t)N * K);
    uint16_t *h = malloc(sizeof(uint16_t) * N * K);
    float *s = malloc(sizeof(float) * N);
    tfm_logit_stats *stats = malloc(sizeof *stats * R), *plain = malloc(sizeof *plain * R),
                    *first[2] = {malloc(sizeof(tfm_logit_stats) * R), malloc(sizeof(tfm_logit_stats) * R)};
    double *sums = malloc(sizeof(double) * R * NN_STATS_SUMS);
    CHECK(w && x && all && one && q && h && s && stats && plain && first[0] && first[1] && sums);
    for (int i = 0; i < N * K; i++) w[i] = 2 * tfm_rng_float(&rng) - 1;
    for (int i = 0; i < R * K; i++) x[i] = 2 * tfm_rng_float(&rng) - 1;
    nn_quantize_int8(q, s, w, N, K);
    nn_round_bf16(h, w, (size_t)N * K);
    bool seen[2] = {false, false};
    for (size_t i = 0; i < sizeof kernels / sizeof kernels[0]; i++) {
        if (kernels[i] == skip || !nn_packed_kernel_runs(kernels[i])) continue;
        const int type = nn_kernel_is_int8(kernels[i]) ? 0 : 1;
        nn_packed_linear p;
        CHECK((type == 0 ? nn_pack_int8(&p, q, s, NULL, N, K, kernels[i])
                         : nn_pack_bf16(&p, h, NULL, N, K, kernels[i])) == TFM_OK);
        void *scratch = malloc(nn_packed_scratch_bytes(&p));
        CHECK(scratch != NULL);
        /* the scratch holds a slice's prepared rows and their scales: the
         * rows take more than one slice */
        const size_t slice =
            (nn_packed_scratch_bytes(&p) - 64) / (nn_quant_row_bytes(&p) + sizeof(float));
        CHECK_MSG(slice < (size_t)R, "kernel %d: %d rows of K = %d in one slice of %zu",
                  (int)kernels[i], R, K, slice);
        nn_packed_forward(all, x, &p, R, scratch);
        for (int r = 0; r < R; r++)
            nn_packed_forward(one + (size_t)r * N, x + (size_t)r * K, &p, 1, scratch);
        CHECK_MSG(memcmp(all, one, sizeof(float) * R * N) == 0,
                  "kernel %d: %d rows of K = %d at once differ from one by one", (int)kernels[i],
                  R, K);
        nn_packed_forward_stats(all, x, &p, R, scratch, stats, sums);
        logit_stats(all, R, N, plain);
        int off = 0;
        for (int r = 0; r < R; r++)
            off += stats[r].max != plain[r].max || stats[r].argmax != plain[r].argmax ||
                   fabsf(stats[r].log_sum - plain[r].log_sum) > 1e-6f;
        CHECK_MSG(off == 0, "kernel %d: %d rows' statistics differ from logit_stats' (K = %d)",
                  (int)kernels[i], off, K);
        if (seen[type])
            CHECK_MSG(memcmp(first[type], stats, sizeof *stats * R) == 0,
                      "kernel %d: statistics differ from the other kernels' (K = %d)",
                      (int)kernels[i], K);
        else
            memcpy(first[type], stats, sizeof *stats * R);
        seen[type] = true;
        free(scratch);
        nn_packed_linear_free(&p);
    }
    free(w), free(x), free(all), free(one), free(q), free(h), free(s);
    free(stats), free(plain), free(first[0]), free(first[1]), free(sums);
}

/* The two limits of a slice (packed.c's walk_slice_rows), each crossed by
 * every kernel:
 * - 700 rows of K = 1100, slices of ROW_BYTES = 512 KiB: about 470 int8
 *   rows (230 bf16 ones, 115 widened), so 700 rows are two slices or more,
 *   the last partial;
 * - 1100 rows of K = 67 (odd: a bf16 row padded to 68, an int8 one to a
 *   partial group of 4), slices of MAX_PREPARED_ROWS = 1024 rows: a full
 *   slice and a partial one, 1024 not a whole number of the AVX2 bf16
 *   kernel's blocks of 6 rows.
 * Under the sanitizers the plain C bf16 kernel takes the second only: on
 * the first it took 17 of test_quant's 22 s there (N was 90 before that, at
 * 2.25 times the work).  Its rows cross slices in the second all the same,
 * and the other bf16 kernels take the first, checked against each other. */
static void test_rows_and_stats(void)
{
    rows_and_stats(700, 1100, SANITIZED ? NN_KERNEL_BF16_C : NN_KERNEL_SGEMM);
    rows_and_stats(1100, 67, NN_KERNEL_SGEMM);
}

/* The kernel choice: the best of its type that runs, less when TFM_ISA asks. */
static void test_best_kernel(void)
{
    nn_kernel k = nn_quant_best_kernel(TFM_COMPUTE_INT8);
    CHECK(nn_kernel_is_int8(k) && nn_packed_kernel_runs(k));
    if (nn_packed_kernel_runs(NN_KERNEL_INT8_VNNI)) CHECK(k == NN_KERNEL_INT8_VNNI);
    k = nn_quant_best_kernel(TFM_COMPUTE_BF16);
    CHECK(nn_kernel_is_bf16(k) && nn_packed_kernel_runs(k));
    if (nn_packed_kernel_runs(NN_KERNEL_BF16_AVX512)) CHECK(k == NN_KERNEL_BF16_AVX512);
    else if (nn_packed_kernel_runs(NN_KERNEL_BF16_AVX512BW)) CHECK(k == NN_KERNEL_BF16_AVX512BW);
    else if (nn_packed_kernel_runs(NN_KERNEL_BF16_AVX2)) CHECK(k == NN_KERNEL_BF16_AVX2);
    test_isa_ask("none");
    CHECK(nn_quant_best_kernel(TFM_COMPUTE_INT8) == NN_KERNEL_INT8_C);
    CHECK(nn_quant_best_kernel(TFM_COMPUTE_BF16) == NN_KERNEL_BF16_C);
    test_isa_ask("avx2");
    k = nn_quant_best_kernel(TFM_COMPUTE_INT8);
    CHECK(k == NN_KERNEL_INT8_AVX2 || k == NN_KERNEL_INT8_C);
    k = nn_quant_best_kernel(TFM_COMPUTE_BF16);
    CHECK(k == NN_KERNEL_BF16_AVX2 || !nn_packed_kernel_runs(NN_KERNEL_BF16_AVX2));
    test_isa_ask("avx512bw");
    k = nn_quant_best_kernel(TFM_COMPUTE_BF16);
    CHECK(k == NN_KERNEL_BF16_AVX512BW || !nn_packed_kernel_runs(NN_KERNEL_BF16_AVX512BW));
    test_isa_ask(NULL);
}

/* A product halved with the helper (nn_packed_set_helper) gives the bits of
 * the whole walk, outputs and logit statistics, for every kernel this CPU
 * runs: float32, int8 and bf16, at 1 and 3 rows (a decoding step's), N not
 * a whole number of panels, the weights above the size that is halved. */
static void test_halved_products(void)
{
    enum { N = 2056, K = 520 };
    const nn_kernel kernels[] = {NN_KERNEL_AVX2, NN_KERNEL_AVX512, NN_KERNEL_INT8_C,
                                 NN_KERNEL_INT8_AVX2, NN_KERNEL_INT8_AVX512BW,
                                 NN_KERNEL_INT8_VNNI, NN_KERNEL_BF16_C, NN_KERNEL_BF16_AVX2,
                                 NN_KERNEL_BF16_AVX512BW, NN_KERNEL_BF16_AVX512};
    tfm_rng rng;
    tfm_rng_seed(&rng, 23);
    float *w = malloc(sizeof(float) * N * K), *bias = malloc(sizeof(float) * N),
          *x = malloc(sizeof(float) * 3 * K), *whole = malloc(sizeof(float) * 3 * N),
          *halved = malloc(sizeof(float) * 3 * N), *s = malloc(sizeof(float) * N);
    int8_t *q = malloc((size_t)N * K);
    uint16_t *h = malloc(sizeof(uint16_t) * N * K);
    tfm_logit_stats st_whole[3], st_halved[3];
    double sums[3 * NN_STATS_SUMS];
    CHECK(w && bias && x && whole && halved && s && q && h);
    for (int i = 0; i < N * K; i++) w[i] = 2 * tfm_rng_float(&rng) - 1;
    for (int i = 0; i < N; i++) bias[i] = tfm_rng_float(&rng);
    for (int i = 0; i < 3 * K; i++) x[i] = 2 * tfm_rng_float(&rng) - 1;
    nn_quantize_int8(q, s, w, N, K);
    nn_round_bf16(h, w, (size_t)N * K);
    tfm_helper *helper;
    tfm_error err;
    CHECK(tfm_helper_create(&helper, &err) == TFM_OK);
    int tried = 0;
    for (size_t i = 0; i < sizeof kernels / sizeof kernels[0]; i++) {
        const nn_kernel k = kernels[i];
        const bool plain_c = k == NN_KERNEL_BF16_C || k == NN_KERNEL_INT8_C;
        if (!nn_packed_kernel_runs(k) || (SANITIZED && plain_c)) continue;
        nn_packed_linear p;
        tfm_status packed = nn_kernel_is_int8(k)   ? nn_pack_int8(&p, q, s, bias, N, K, k)
                            : nn_kernel_is_bf16(k) ? nn_pack_bf16(&p, h, bias, N, K, k)
                                                   : nn_pack_linear_for(&p, w, bias, N, K, k);
        CHECK(packed == TFM_OK);
        const size_t bytes = nn_packed_scratch_bytes(&p);
        void *scratch = bytes ? malloc(bytes) : NULL;
        for (int R = 1; R <= 3; R += 2) {
            nn_packed_set_helper(NULL);
            nn_packed_forward(whole, x, &p, R, scratch);
            nn_packed_forward_stats(whole, x, &p, R, scratch, st_whole, sums);
            tfm_helper_enter(helper); /* this thread, the one worker in */
            nn_packed_set_helper(helper);
            const unsigned long calls = tfm_helper_calls(helper);
            memset(halved, 0, sizeof(float) * 3 * N);
            nn_packed_forward(halved, x, &p, R, scratch);
            CHECK_MSG(memcmp(whole, halved, sizeof(float) * R * N) == 0,
                      "kernel %d, %d rows: the halved product differs", (int)k, R);
            memset(halved, 0, sizeof(float) * 3 * N);
            nn_packed_forward_stats(halved, x, &p, R, scratch, st_halved, sums);
            CHECK_MSG(memcmp(whole, halved, sizeof(float) * R * N) == 0 &&
                          memcmp(st_whole, st_halved, sizeof st_whole[0] * R) == 0,
                      "kernel %d, %d rows: the halved product's statistics differ", (int)k, R);
            CHECK_MSG(tfm_helper_calls(helper) == calls + 2, "kernel %d, %d rows: not halved",
                      (int)k, R);
            tfm_helper_leave(helper);
            nn_packed_set_helper(NULL);
        }
        tried++;
        free(scratch);
        nn_packed_linear_free(&p);
    }
    CHECK(tried >= 3); /* float32 AVX2 (or sgemm), int8 and bf16 at the least */
    tfm_helper_free(helper);
    free(w), free(bias), free(x), free(whole), free(halved), free(s), free(q), free(h);
}

int main(void)
{
    RUN(test_quantize_int8);
    RUN(test_bf16_round);
    RUN(test_int8_kernels);
    RUN(test_int8_extremes);
    RUN(test_bf16_kernels);
    RUN(test_rows_and_stats);
    RUN(test_best_kernel);
    RUN(test_halved_products);
    CHECK_DONE();
}
