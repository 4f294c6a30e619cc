/* test_kernels.c - the layer kernels of the forward pass used for
 * inference against values worked out by hand (with NumPy) and against
 * plain loops: linear, ReLU, swish and gelu, LayerNorm, attention, the
 * softmax of large logits, the logits' statistics, the packed linear
 * kernels of decoding (each kernel this CPU runs, and the versions for each
 * instruction set giving the same bits), attention over bf16 keys and
 * values, the masks of causal and restricted attention, and the sinusoids.
 * The model's forward pass: test_forward.c. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "testdiff.h"
#include "testisa.h"
#include "nn/layers.h"
#include "tfm/pass.h"

/* ---- the kernels, by hand ---------------------------------------------------------- */

static void test_linear_by_hand(void)
{
    /* x [2, 3], W [2, 3] (out, in), b [2]: y = x W^T + b */
    const float x[6] = {1, 2, 3, -1, 0, 2};
    const float W[6] = {1, 0, -1, 0.5f, 2, 1};
    const float b[2] = {0.5f, -1};
    float y[4];
    linear_forward(y, x, W, b, 2, 3, 2);
    CHECK_NEAR(y[0], 1 - 3 + 0.5, 1e-6);       /* -1.5 */
    CHECK_NEAR(y[1], 0.5 + 4 + 3 - 1, 1e-6);   /* 6.5 */
    CHECK_NEAR(y[2], -1 - 2 + 0.5, 1e-6);      /* -2.5 */
    CHECK_NEAR(y[3], -0.5 + 0 + 2 - 1, 1e-6);  /* 0.5 */
    linear_forward(y, x, W, NULL, 2, 3, 2);
    CHECK_NEAR(y[0], -2, 1e-6);
    CHECK_NEAR(y[3], 1.5, 1e-6);

    /* the FFN: max(0, x W1^T + b1) W2^T + b2 with D 3, F 2 */
    const float W2[6] = {1, 1, 2, 0, -1, 1}; /* [3, 2] */
    const float b2[3] = {0, 1, 0};
    float hidden[4], out[6];
    ffn_forward(out, hidden, x, W, b, W2, b2, 2, 3, 2);
    /* row 0: hidden = relu(-1.5, 6.5) = (0, 6.5) -> (6.5, 1 + 0, 6.5) */
    CHECK_NEAR(out[0], 6.5, 1e-6);
    CHECK_NEAR(out[1], 1, 1e-6);
    CHECK_NEAR(out[2], 6.5, 1e-6);
    /* row 1: hidden = relu(-2.5, 0.5) = (0, 0.5) -> (0.5, 1, 0.5) */
    CHECK_NEAR(out[3], 0.5, 1e-6);
    CHECK_NEAR(out[4], 1, 1e-6);
    CHECK_NEAR(out[5], 0.5, 1e-6);
}

/* relu_forward (sixteen lanes at a time, then one by one) is x > 0 ? x : 0
 * for every value: NaNs, signed zeros and infinities too, at every length. */
static void test_relu(void)
{
    enum { N = 45 };
    const float special[] = {NAN, -NAN, -0.0f, 0.0f, INFINITY, -INFINITY, 1e-45f, -1e-45f, 3.0f};
    float x[N], y[N];
    tfm_rng rng;
    tfm_rng_seed(&rng, 3);
    for (int n = 0; n <= N; n += 4) {
        for (int i = 0; i < N; i++)
            x[i] = i % 5 == 0 ? special[(i / 5) % 9] : 2 * tfm_rng_float(&rng) - 1;
        memcpy(y, x, sizeof x);
        relu_forward(y, (size_t)n);
        int bad = 0;
        for (int i = 0; i < N; i++) {
            const float want = i < n ? (x[i] > 0.0f ? x[i] : 0.0f) : x[i];
            bad += memcmp(&y[i], &want, sizeof want) != 0 && !(isnan(y[i]) && isnan(want));
        }
        CHECK_MSG(bad == 0, "%d of %d values differ", bad, n);
    }
}

static void test_layer_norm_by_hand(void)
{
    /* mean 2.5, biased variance 1.25; NumPy: (x - m) / sqrt(v + 1e-5) * w + b */
    float x[8] = {1, 2, 3, 4, 7, 7, 7, 7};
    const float w[4] = {1, 1, 2, 0.5f}, b[4] = {0, 0.5f, 0, 0};
    float y[8], mean[2], rstd[2];
    layer_norm_forward(y, mean, rstd, x, w, b, 2, 4, 1e-5f);
    CHECK_NEAR(y[0], -1.34163542, 1e-6);
    CHECK_NEAR(y[1], 0.052788193, 1e-6);
    CHECK_NEAR(y[2], 0.894423613, 1e-6);
    CHECK_NEAR(y[3], 0.67081771, 1e-6);
    CHECK_NEAR(mean[0], 2.5, 1e-6);
    CHECK_NEAR(rstd[0], 1 / sqrt(1.25 + 1e-5), 1e-6);
    /* a constant row normalises to the bias (variance 0, eps keeps it finite) */
    for (int i = 0; i < 4; i++) CHECK_NEAR(y[4 + i], b[i], 1e-6);
    /* in place gives the same */
    layer_norm_forward(x, NULL, NULL, x, w, b, 2, 4, 1e-5f);
    CHECK(max_abs_diff(x, y, 8) == 0);
    /* a large offset does not cancel the variance away (two-pass) */
    float big[4] = {1e4f + 1, 1e4f + 2, 1e4f + 3, 1e4f + 4};
    layer_norm_forward(big, NULL, NULL, big, w, b, 1, 4, 1e-5f);
    CHECK_NEAR(big[0], -1.34163542, 1e-4);
}

/* q [2, 4], k, v [3, 4]; 2 heads of 2.  Expected values from NumPy
 * (softmax(q_h k_h^T / sqrt(2)) v_h); e.g. query 0, head 0: scores
 * (1, 0, 1)/sqrt(2), weights (0.401, 0.198, 0.401), output (3, 4). */
static const float hq[8] = {1, 0, 0, 1, 0, 1, 1, 1};
static const float hk[12] = {1, 0, 1, 0, 0, 1, 0, 1, 1, 1, 2, 0};
static const float hv[12] = {1, 2, 0, 1, 3, 4, 1, 0, 5, 6, 2, 2};

static void test_attention_by_hand(void)
{
    const double full[8] = {3, 4, 1, 0.744765235, 3.406672556, 4.406672556, 1.255234765,
                            1.255234765};
    /* causal, the first query at position 1: query 0 sees keys 0..1 */
    const double causal[8] = {1.660476901, 2.660476901, 0.669761549, 0.330238451,
                              3.406672556, 4.406672556, 1.255234765, 1.255234765};
    float out[8], scratch[64], att[12];
    attention_mask m = {0, false, 0};
    attention_forward(out, 4, hq, 4, hk, 4, hv, 4, 2, 3, 2, 2, m, NULL, scratch, att);
    for (int i = 0; i < 8; i++) CHECK_NEAR(out[i], full[i], 1e-6);
    CHECK_NEAR(att[0], 0.401112093, 1e-6);
    CHECK_NEAR(att[1], 0.197775815, 1e-6);
    CHECK_NEAR(att[6 + 1], 0.503489843, 1e-6); /* head 1, query 0, key 1 */

    attention_mask mc = {1, true, 0};
    CHECK(attention_scratch_size(2, 3, mc, 0) <= 64);
    attention_forward(out, 4, hq, 4, hk, 4, hv, 4, 2, 3, 2, 2, mc, NULL, scratch, att);
    for (int i = 0; i < 8; i++) CHECK_NEAR(out[i], causal[i], 1e-6);
    CHECK(att[2] == 0.0f && att[6 + 2] == 0.0f); /* query 0 never sees key 2 */
    CHECK_NEAR(att[0], 0.669761549, 1e-6);

    /* The same through leading dimensions: q, k, v as column blocks of one
     * [3, 12] "qkv" matrix, the output into columns 4..8 of a [2, 9] matrix. */
    float qkv[36] = {0}, wide[18];
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++) {
            if (i < 2) qkv[i * 12 + j] = hq[i * 4 + j];
            qkv[i * 12 + 4 + j] = hk[i * 4 + j];
            qkv[i * 12 + 8 + j] = hv[i * 4 + j];
        }
    for (int i = 0; i < 18; i++) wide[i] = -7;
    attention_forward(wide + 4, 9, qkv, 12, qkv + 4, 12, qkv + 8, 12, 2, 3, 2, 2, m, NULL, scratch,
                      NULL);
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 4; j++) CHECK_NEAR(wide[i * 9 + 4 + j], full[i * 4 + j], 1e-6);
    CHECK(wide[0] == -7 && wide[8] == -7 && wide[9 + 3] == -7 && wide[17] == -7);

    /* one query against its keys, as the incremental decoder does it */
    float row[4], scores[2 * 3]; /* [H, n_k] */
    attention_row_forward(row, hq + 4, hk, 4, hv, 4, 3, 2, 2, NULL, 0, scores);
    for (int j = 0; j < 4; j++) CHECK_NEAR(row[j], full[4 + j], 1e-6);
    attention_row_forward(row, hq, hk, 4, hv, 4, 2, 2, 2, NULL, 0, scores); /* keys 0..1 only */
    for (int j = 0; j < 4; j++) CHECK_NEAR(row[j], causal[j], 1e-6);
    /* no keys: zero output (a sentence with an empty source) */
    attention_row_forward(row, hq, hk, 4, hv, 4, 0, 2, 2, NULL, 0, scores);
    for (int j = 0; j < 4; j++) CHECK(row[j] == 0.0f);
}

static void test_softmax_large_logits(void)
{
    float x[5] = {1e30f, -1e30f, 3e29f, 1e30f, -3e38f};
    softmax_forward(x, 5);
    CHECK_NEAR(x[0] + x[1] + x[2] + x[3] + x[4], 1, 1e-6);
    CHECK_NEAR(x[0], 0.5, 1e-7);
    CHECK_NEAR(x[3], 0.5, 1e-7);
    CHECK(x[1] == 0.0f && x[2] == 0.0f && x[4] == 0.0f);

    float y[3] = {1, 2, 3};
    softmax_forward(y, 3);
    double e = exp(1) + exp(2) + exp(3);
    CHECK_NEAR(y[0], exp(1) / e, 1e-7);
    CHECK_NEAR(y[2], exp(3) / e, 1e-7);

    float one[1] = {-5e37f};
    softmax_forward(one, 1);
    CHECK(one[0] == 1.0f);

    /* log-softmax: rows exponentiate to 1, also with huge logits */
    float l[8] = {1, 2, 3, 4, 2e30f, 2e30f, -2e30f, 0};
    log_softmax_forward(l, 2, 4);
    double s0 = 0, s1 = 0;
    for (int i = 0; i < 4; i++) {
        s0 += exp(l[i]);
        s1 += exp(l[4 + i]);
    }
    CHECK_NEAR(s0, 1, 1e-6);
    CHECK_NEAR(s1, 1, 1e-6);
    CHECK_NEAR(l[3], 4 - log(exp(1) + exp(2) + exp(3) + exp(4)), 1e-6);
    CHECK_NEAR(l[4], -log(2.0), 1e-6);

    /* rows of several lengths (the vectorised body and the scalar tail),
     * one logit far below the rest, against double arithmetic */
    tfm_rng rng;
    tfm_rng_seed(&rng, 3);
    const int ns[] = {1, 3, 7, 64, 1003};
    for (int k = 0; k < 5; k++) {
        enum { MAXN = 1003 };
        int n = ns[k];
        float z[2 * MAXN];
        double zd[MAXN], max = -INFINITY, sum = 0;
        for (int i = 0; i < n; i++) z[i] = z[n + i] = 100 * tfm_rng_float(&rng) - 50;
        z[n / 2] = z[n + n / 2] = -1e30f;
        for (int i = 0; i < n; i++) max = fmax(max, zd[i] = z[i]);
        for (int i = 0; i < n; i++) sum += exp(zd[i] - max);
        log_softmax_forward(z, 2, n);
        double worst = 0, total = 0;
        for (int i = 0; i < n; i++) {
            worst = fmax(worst, fabs(z[i] - (zd[i] - max - log(sum))));
            worst = fmax(worst, fabs(z[n + i] - z[i])); /* rows are independent */
            total += exp(z[i]);
        }
        CHECK_MSG(worst < 1e-5 && fabs(total - 1) < 1e-5, "n %d: off by %g, sum %.9g", n, worst,
                  total);
    }
}

/* The packed kernels of decoding's linear layers against linear_forward
 * (sgemm): every row count of a block and its remainders, output counts
 * around the 16- and 32-wide panels, odd input sizes, with and without a
 * bias; each kernel this CPU runs, and AVX2 and AVX-512 giving the same
 * bits (outputs and statistics) when it runs both. */
static void test_packed_linear(void)
{
    if (!nn_packed_kernel_runs(NN_KERNEL_AVX2)) {
        SKIP(test_packed_linear, "this CPU has no AVX2 and FMA: the packed kernels are not used");
        return;
    }
    const bool both = nn_packed_kernel_runs(NN_KERNEL_AVX512);
    if (!both) SKIP(test_packed_linear_avx512, "this CPU has no AVX-512: one kernel tested");
    enum { MAXR = 27, MAXN = 70, MAXK = 33 };
    const int Ns[] = {1, 15, 16, 17, 31, 32, 33, 70}, Ks[] = {1, 7, 32, 33};
    tfm_rng rng;
    tfm_rng_seed(&rng, 9);
    static float w[MAXN * MAXK], b[MAXN], x[MAXR * MAXK], want[MAXR * MAXN],
        got[2][MAXR * MAXN];
    double worst = 0, worst_sum = 0;
    int cases = 0, stats_wrong = 0, kernels_differ = 0;
    for (size_t ni = 0; ni < sizeof Ns / sizeof Ns[0]; ni++)
        for (size_t ki = 0; ki < sizeof Ks / sizeof Ks[0]; ki++)
            for (int with_bias = 0; with_bias < 2; with_bias++) {
                const int N = Ns[ni], K = Ks[ki];
                for (int i = 0; i < N * K; i++) w[i] = 2 * tfm_rng_float(&rng) - 1;
                for (int i = 0; i < N; i++) b[i] = 2 * tfm_rng_float(&rng) - 1;
                nn_packed_linear p[2];
                CHECK(nn_pack_linear_for(&p[0], w, with_bias ? b : NULL, N, K,
                                         NN_KERNEL_AVX2) == TFM_OK);
                CHECK(nn_pack_linear_for(&p[1], w, with_bias ? b : NULL, N, K,
                                         both ? NN_KERNEL_AVX512 : NN_KERNEL_AVX2) == TFM_OK);
                CHECK(p[0].panels != NULL && p[1].panels != NULL);
                for (int R = 1; R <= MAXR; R++) {
                    for (int i = 0; i < R * K; i++) x[i] = 2 * tfm_rng_float(&rng) - 1;
                    linear_forward(want, x, w, with_bias ? b : NULL, R, K, N);
                    tfm_logit_stats fused[2][MAXR], plain[MAXR];
                    double sums[MAXR * NN_STATS_SUMS];
                    for (int k = 0; k < 2; k++) {
                        /* NaN: nothing past R x N is written */
                        for (int i = 0; i < MAXR * MAXN; i++) got[k][i] = NAN;
                        nn_packed_forward(got[k], x, &p[k], R, NULL);
                        worst = fmax(worst, max_abs_diff(got[k], want, (size_t)R * N));
                        for (int i = R * N; i < MAXR * MAXN; i++) CHECK(isnan(got[k][i]));
                    }
                    kernels_differ += memcmp(got[0], got[1], (size_t)R * N * sizeof(float)) != 0;
                    /* the statistics gathered on the way equal logit_stats' of the result */
                    if (R % 2) x[0] = x[1] = 0; /* ties of whole rows' values are rare: make some */
                    for (int k = 0; k < 2; k++)
                        nn_packed_forward_stats(got[k], x, &p[k], R, NULL, fused[k], sums);
                    logit_stats(got[0], R, N, plain);
                    for (int r = 0; r < R; r++) {
                        stats_wrong += fused[0][r].argmax != plain[r].argmax ||
                                       fused[0][r].max != plain[r].max;
                        worst_sum = fmax(worst_sum, fabs(fused[0][r].log_sum - plain[r].log_sum));
                    }
                    kernels_differ +=
                        memcmp(fused[0], fused[1], (size_t)R * sizeof fused[0][0]) != 0;
                    cases++;
                }
                nn_packed_linear_free(&p[0]);
                nn_packed_linear_free(&p[1]);
            }
    CHECK_MSG(worst <= 1e-5, "packed and sgemm differ by %g over %d products", worst, cases);
    CHECK_MSG(stats_wrong == 0, "%d rows with another maximum or first argmax", stats_wrong);
    CHECK_MSG(worst_sum <= 1e-6, "log-sums differ by %g", worst_sum);
    CHECK_MSG(kernels_differ == 0, "the AVX2 and AVX-512 kernels differ in %d of %d products",
              kernels_differ, cases);
}

/* The sixteen-lane functions' versions (NN_VERSIONS_512: AVX-512, AVX2,
 * plain, chosen by nn_isa_level, which TFM_ISA lowers) give the same bits:
 * the packed walk's logits and logit statistics (maximum, argmax, the four
 * partial sums, the log-sum) over groups of 16 and a tail, ReLU, bf16
 * rounding, int8 dequantization and dropout (forward, backward, a saved
 * mask applied).  Where the build has one version (the
 * sanitizer build, Clang), the three runs are the same code. */
static void test_isa_versions_agree(void)
{
    if (!nn_packed_kernel_runs(NN_KERNEL_AVX2)) {
        SKIP(test_isa_versions_agree, "this CPU has no AVX2 and FMA: no packed kernel");
        return;
    }
    enum { R = 9, N = 70, K = 33, V = 1000 };
    tfm_rng rng;
    tfm_rng_seed(&rng, 17);
    static float w[N * K], x[R * K], out[3][R * N], relu[3][V], values[V], deq[3][2 * V];
    static float dropped[3][V - 1], ddrop[3][V - 1];
    static uint8_t keep[3][V - 1];
    static uint16_t bf[3][V];
    static int8_t q[2 * V];
    float scale[2];
    for (int i = 0; i < N * K; i++) w[i] = 2 * tfm_rng_float(&rng) - 1;
    for (int i = 0; i < R * K; i++) x[i] = 4 * tfm_rng_float(&rng) - 2;
    for (int i = 0; i < V; i++) values[i] = 8 * tfm_rng_float(&rng) - 4;
    values[3] = NAN, values[20] = -0.0f, values[21] = INFINITY;
    for (int i = 0; i < 2 * V; i++) q[i] = (int8_t)(255 * tfm_rng_float(&rng) - 127);
    scale[0] = 0.01f, scale[1] = 3.5e-3f;
    nn_packed_linear p;
    CHECK(nn_pack_linear_for(&p, w, NULL, N, K, nn_packed_best_kernel()) == TFM_OK);
    tfm_logit_stats st[3][R];
    double sums[3][R * NN_STATS_SUMS];
    char *saved = test_isa_save();
    for (int v = 0; v < 3; v++) {
        test_isa_ask(test_isas[v]);
        nn_packed_forward_stats(out[v], x, &p, R, NULL, st[v], sums[v]);
        memcpy(relu[v], values, sizeof values);
        relu_forward(relu[v], V);
        nn_round_bf16(bf[v], values, V);
        nn_dequantize_int8(deq[v], q, scale, 2, V);
        /* dropout of an odd count: groups of 16, a tail, a last draw for one */
        tfm_rng drng;
        tfm_rng_seed(&drng, 3);
        memcpy(dropped[v], values + 1, sizeof dropped[v]);
        dropout_forward(dropped[v], keep[v], V - 1, 0.3f, &drng);
        memcpy(ddrop[v], values, sizeof ddrop[v]);
        dropout_backward(ddrop[v], values + 1, keep[v], V - 1, 0.3f);
        dropout_apply(ddrop[v], keep[v], V - 1, 0.1f);
    }
    test_isa_restore(saved);
    for (int v = 1; v < 3; v++) {
        const char *isa = test_isas[v];
        CHECK_MSG(memcmp(out[v], out[0], sizeof out[0]) == 0, "TFM_ISA=%s: other logits", isa);
        CHECK_MSG(memcmp(st[v], st[0], sizeof st[0]) == 0, "TFM_ISA=%s: other statistics", isa);
        CHECK_MSG(memcmp(sums[v], sums[0], sizeof sums[0]) == 0, "TFM_ISA=%s: other sums", isa);
        CHECK_MSG(memcmp(relu[v], relu[0], sizeof relu[0]) == 0, "TFM_ISA=%s: other ReLU", isa);
        CHECK_MSG(memcmp(bf[v], bf[0], sizeof bf[0]) == 0, "TFM_ISA=%s: other bf16", isa);
        CHECK_MSG(memcmp(deq[v], deq[0], sizeof deq[0]) == 0, "TFM_ISA=%s: other int8", isa);
        CHECK_MSG(memcmp(keep[v], keep[0], sizeof keep[0]) == 0, "TFM_ISA=%s: other mask", isa);
        CHECK_MSG(memcmp(dropped[v], dropped[0], sizeof dropped[0]) == 0 &&
                      memcmp(ddrop[v], ddrop[0], sizeof ddrop[0]) == 0,
                  "TFM_ISA=%s: other dropout", isa);
    }
    /* and dropout is what it says, value by value: kept ones scaled by
     * 1 / 0.7 (NaN and infinity aside), dropped ones 0, the gradient the
     * same map (then scaled by 1 / 0.9 in place) */
    int kept = 0, wrong = 0;
    for (int i = 0; i < V - 1; i++) {
        const float in = values[i + 1], s = 1.0f / (1.0f - 0.3f);
        kept += keep[0][i];
        if (!isfinite(in)) continue;
        const float want = keep[0][i] ? in * s : 0.0f * in;
        const float want_d = (values[i] + in * ((float)keep[0][i] * s)) *
                             ((float)keep[0][i] * (1.0f / (1.0f - 0.1f)));
        wrong += memcmp(&dropped[0][i], &want, sizeof want) != 0 ||
                 (isfinite(values[i]) && memcmp(&ddrop[0][i], &want_d, sizeof want_d) != 0);
    }
    CHECK_MSG(wrong == 0, "%d values not as dropout makes them", wrong);
    CHECK_MSG(kept > 600 && kept < 800, "%d of 999 kept at p 0.3", kept);
    /* and the statistics are those of the logits */
    tfm_logit_stats plain[R];
    logit_stats(out[0], R, N, plain);
    for (int r = 0; r < R; r++) {
        CHECK(st[0][r].max == plain[r].max && st[0][r].argmax == plain[r].argmax);
        CHECK_NEAR(st[0][r].log_sum, plain[r].log_sum, 1e-5);
    }
    nn_packed_linear_free(&p);
}

/* One query against bf16 keys and values (attention_row_forward_bf16)
 * equals the float32 row attention of the same values widened, to float
 * rounding: heads of 8 values (a tail alone), 16, 32 and 48 (split blocks
 * alone) and 24 (a block and a tail), 1 to 13 keys, with and without
 * relative positions. */
static void test_row_attention_bf16(void)
{
    enum { MAXK = 13, MAXD = 96, CLIP = 3 };
    static const int shapes[][2] = {{2, 8}, {1, 16}, {2, 24}, {2, 32}, {2, 48}, {3, 32}};
    tfm_rng rng;
    tfm_rng_seed(&rng, 41);
    float q[MAXD], kf[MAXK * 2 * MAXD], want[MAXD], got[MAXD];
    float scratch[3 * MAXK + 2 * MAXD + 2 * CLIP + 1], rk[(2 * CLIP + 1) * 48],
        rv[(2 * CLIP + 1) * 48];
    uint16_t kb[MAXK * 2 * MAXD];
    double worst = 0;
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const int H = shapes[si][0], Dh = shapes[si][1], D = H * Dh;
        for (int n = 1; n <= MAXK; n++)
            for (int with_rel = 0; with_rel < 2; with_rel++) {
                for (int i = 0; i < D; i++) q[i] = 2 * tfm_rng_float(&rng) - 1;
                for (int i = 0; i < n * 2 * D; i++) {
                    kb[i] = nn_bf16_round(2 * tfm_rng_float(&rng) - 1);
                    kf[i] = nn_bf16_to_float(kb[i]);
                }
                for (int i = 0; i < (2 * CLIP + 1) * Dh; i++)
                    rk[i] = tfm_rng_float(&rng) - 0.5f, rv[i] = tfm_rng_float(&rng) - 0.5f;
                const attention_relative rel = {rk, rv, CLIP};
                const attention_relative *r = with_rel ? &rel : NULL;
                attention_row_forward(want, q, kf, 2 * D, kf + D, 2 * D, n, H, Dh, r, 1 - n,
                                      scratch);
                attention_row_forward_bf16(got, q, kb, 2 * D, kb + D, 2 * D, n, H, Dh, r, 1 - n,
                                           scratch);
                worst = fmax(worst, max_abs_diff(got, want, (size_t)D));
            }
    }
    CHECK_MSG(worst <= 1e-6, "bf16 and float32 row attention differ by %g", worst);
}

/* The statistics the packed kernels gather, against the rule written out
 * here: the columns in groups of 16, a group's largest found by the loop
 * m = v[0]; m = v[j] > m ? v[j] : m (so a NaN first in its group hides the
 * group, a NaN elsewhere is passed over), taken when above the maximum so
 * far, its first column the argmax.  Tied columns and NaN columns
 * (weight rows of NaN) at the start, the middle and the end of groups. */
static void test_stats_ties_and_nans(void)
{
    if (!nn_packed_kernel_runs(NN_KERNEL_AVX2)) {
        SKIP(test_stats_ties_and_nans, "this CPU has no AVX2 and FMA: no packed kernel");
        return;
    }
    enum { N = 53, K = 3, R = 4 };
    static const int nan_cols[][3] = {{0, 17, 52}, {5, 16, 31}, {-1, -1, -1}, {1, 32, 47}};
    const nn_kernel kernels[2] = {NN_KERNEL_AVX2, NN_KERNEL_AVX512};
    tfm_rng rng;
    tfm_rng_seed(&rng, 13);
    int wrong = 0;
    for (int variant = 0; variant < 4; variant++)
        for (int k = 0; k < 2; k++) {
            if (!nn_packed_kernel_runs(kernels[k])) continue;
            float w[N * K], x[R * K], out[R * N];
            /* few distinct weights, so outputs tie */
            for (int i = 0; i < N * K; i++) w[i] = (float)(int)(3 * tfm_rng_float(&rng));
            for (int j = 0; j < 3; j++)
                if (nan_cols[variant][j] >= 0)
                    for (int i = 0; i < K; i++) w[nan_cols[variant][j] * K + i] = NAN;
            for (int i = 0; i < R * K; i++) x[i] = (float)(int)(3 * tfm_rng_float(&rng));
            nn_packed_linear p;
            CHECK(nn_pack_linear_for(&p, w, NULL, N, K, kernels[k]) == TFM_OK);
            tfm_logit_stats st[R];
            double sums[R * NN_STATS_SUMS];
            nn_packed_forward_stats(out, x, &p, R, NULL, st, sums);
            for (int r = 0; r < R; r++) {
                const float *v = out + (size_t)r * N;
                float max = -INFINITY;
                int argmax = 0;
                for (int g = 0; g < N; g += 16) {
                    const int cols = N - g < 16 ? N - g : 16;
                    float m = v[g];
                    for (int j = 1; j < cols; j++) m = v[g + j] > m ? v[g + j] : m;
                    if (m > max) {
                        int j = 0;
                        while (j < cols - 1 && v[g + j] != m) j++;
                        max = m;
                        argmax = g + j;
                    }
                }
                wrong += st[r].max != max || st[r].argmax != argmax;
            }
            nn_packed_linear_free(&p);
        }
    CHECK_MSG(wrong == 0, "%d rows' maximum or argmax break the rule", wrong);
}

/* The packed kernels' slicing of many rows (more than a slice keeps in the
 * cache) changes nothing: 700 rows at once equal 700 rows one by one. */
static void test_packed_linear_many_rows(void)
{
    const nn_kernel kernel = nn_packed_best_kernel();
    if (kernel == NN_KERNEL_SGEMM) {
        SKIP(test_packed_linear_many_rows, "no packed kernel on this CPU");
        return;
    }
    enum { R = 700, N = 40, K = 1100 };
    tfm_rng rng;
    tfm_rng_seed(&rng, 10);
    float *w = malloc(sizeof(float) * N * K), *x = malloc(sizeof(float) * R * K),
          *all = malloc(sizeof(float) * R * N), *one = malloc(sizeof(float) * R * N);
    CHECK(w && x && all && one);
    for (int i = 0; i < N * K; i++) w[i] = 2 * tfm_rng_float(&rng) - 1;
    for (int i = 0; i < R * K; i++) x[i] = 2 * tfm_rng_float(&rng) - 1;
    nn_packed_linear p;
    CHECK(nn_pack_linear_for(&p, w, NULL, N, K, kernel) == TFM_OK);
    nn_packed_forward(all, x, &p, R, NULL);
    for (int r = 0; r < R; r++) nn_packed_forward(one + (size_t)r * N, x + (size_t)r * K, &p, 1, NULL);
    CHECK_MSG(memcmp(all, one, sizeof(float) * R * N) == 0,
              "%d rows at once differ from one by one", R);
    nn_packed_linear_free(&p);
    free(w), free(x), free(all), free(one);
}

/* logit_stats: the first index of the maximum whatever lane and tail it is
 * in, and log-probs from the stats equal log_softmax_forward's bit for bit. */
static void test_logit_stats(void)
{
    enum { MAXN = 37 };
    tfm_rng rng;
    tfm_rng_seed(&rng, 5);
    int wrong_argmax = 0, wrong_bits = 0;
    for (int n = 1; n <= MAXN; n++) {
        for (int trial = 0; trial < 40; trial++) {
            float x[MAXN], y[MAXN];
            /* few distinct values, so the maximum is often tied */
            for (int i = 0; i < n; i++) x[i] = (float)(int)(4 * tfm_rng_float(&rng)) - 1e3f * (trial % 2);
            int32_t first = 0;
            for (int i = 1; i < n; i++)
                if (x[i] > x[first]) first = i;
            tfm_logit_stats st;
            logit_stats(x, 1, n, &st);
            wrong_argmax += st.argmax != first || st.max != x[first];
            memcpy(y, x, sizeof x);
            log_softmax_forward(y, 1, n);
            log_softmax_apply(x, 1, n, &st);
            wrong_bits += memcmp(x, y, (size_t)n * sizeof *x) != 0;
        }
    }
    CHECK_MSG(wrong_argmax == 0, "%d rows with the wrong first maximum", wrong_argmax);
    CHECK_MSG(wrong_bits == 0, "%d rows whose log-probs differ from log_softmax_forward's",
              wrong_bits);
}

/* attention_forward against a plain triple loop in double with an explicit
 * mask, over lengths that make several query blocks, with and without
 * causality and windows; masked weights must be exactly 0 and rows sum to 1. */
static void test_masks_against_naive(void)
{
    enum { N = 150, H = 2, Dh = 3, D = H * Dh };
    static float q[N * D], k[N * D], v[N * D], out[N * D], att[H * N * N], band[H * N * N];
    static double ref[N * D];
    tfm_rng rng;
    tfm_rng_seed(&rng, 7);
    for (int i = 0; i < N * D; i++) {
        q[i] = 2 * tfm_rng_float(&rng) - 1;
        k[i] = 2 * tfm_rng_float(&rng) - 1;
        v[i] = 2 * tfm_rng_float(&rng) - 1;
    }
    const int windows[] = {0, 1, 5, 70, 200};
    const int lens[][2] = {{N, N}, {37, 37}, {1, 1}, {20, 90}};
    for (int wi = 0; wi < 5; wi++)
        for (int causal = 0; causal < 2; causal++)
            for (int li = 0; li < 4; li++) {
                int n_q = lens[li][0], n_k = lens[li][1];
                /* causal queries sit at the end of the keys, as a decoder chunk would */
                int q_pos = causal ? n_k - n_q : 0;
                attention_mask m = {q_pos, causal, windows[wi]};
                size_t ns = attention_scratch_size(n_q, n_k, m, 0);
                float *scratch = malloc(ns * sizeof *scratch);
                /* the weights as kept (a window's band), then as a whole matrix */
                attention_forward(out, D, q, D, k, D, v, D, n_q, n_k, H, Dh, m, NULL, scratch,
                                  band);
                attention_weights_expand(att, band, n_q, n_k, H, m);
                free(scratch);
                /* a band narrower than the keys is kept as a band */
                int span = causal ? windows[wi] + 1 : 2 * windows[wi] + 1;
                bool banded = windows[wi] > 0 && span < n_k;
                CHECK(attention_band_width(n_k, m) == (banded ? span : n_k));
                int bad_mask = 0, bad_sum = 0;
                for (int h = 0; h < H; h++)
                    for (int i = 0; i < n_q; i++) {
                        int pos = q_pos + i, w = windows[wi];
                        double s[N], mx = -INFINITY, sum = 0, rowsum = 0;
                        for (int j = 0; j < n_k; j++) {
                            bool ok = (!causal || j <= pos) &&
                                      (w == 0 || (causal ? j >= pos - w : abs(pos - j) <= w));
                            float a = att[((size_t)h * n_q + i) * n_k + j];
                            if (!ok && a != 0.0f) bad_mask++;
                            rowsum += a;
                            s[j] = -INFINITY;
                            if (!ok) continue;
                            double d = 0;
                            for (int c = 0; c < Dh; c++)
                                d += (double)q[i * D + h * Dh + c] * k[j * D + h * Dh + c];
                            s[j] = d / sqrt((double)Dh);
                            if (s[j] > mx) mx = s[j];
                        }
                        if (fabs(rowsum - 1) > 1e-5) bad_sum++;
                        for (int j = 0; j < n_k; j++) {
                            s[j] = exp(s[j] - mx);
                            sum += s[j];
                        }
                        for (int c = 0; c < Dh; c++) {
                            double o = 0;
                            for (int j = 0; j < n_k; j++) o += s[j] / sum * v[j * D + h * Dh + c];
                            ref[i * D + h * Dh + c] = o;
                        }
                    }
                double diff = 0;
                for (int i = 0; i < n_q * D; i++) diff = fmax(diff, fabs(out[i] - ref[i]));
                CHECK_MSG(diff < 1e-5 && bad_mask == 0 && bad_sum == 0,
                          "window %d causal %d n_q %d n_k %d: diff %g, %d unmasked, %d bad sums",
                          windows[wi], causal, n_q, n_k, diff, bad_mask, bad_sum);
            }
}

/* swish and Marian's gelu: x * sigmoid(k x) against the formula in double,
 * over the range where values live and the extremes (no overflow, no NaN
 * made from a finite value), and the same bits from every instruction set. */
static void test_activations(void)
{
    enum { N = 1000 };
    static float x[N], y[3][N];
    tfm_rng rng;
    tfm_rng_seed(&rng, 9);
    for (int i = 0; i < N; i++) x[i] = 24 * tfm_rng_float(&rng) - 12;
    x[0] = 0.0f, x[1] = -0.0f, x[2] = 100.0f, x[3] = -100.0f, x[4] = 88.0f, x[5] = -1e30f;
    x[6] = 1e30f, x[7] = 1e-30f;
    const tfm_activation acts[2] = {TFM_ACT_SWISH, TFM_ACT_GELU_SIGMOID};
    const double ks[2] = {1.0, (double)1.702f}; /* the constant as the kernel holds it */
    char *saved = test_isa_save();
    for (int a = 0; a < 2; a++) {
        for (int v = 0; v < 3; v++) {
            test_isa_ask(test_isas[v]);
            memcpy(y[v], x, sizeof x);
            activation_forward(acts[a], y[v], N - v); /* tails of 8, 7 and 6 */
        }
        double worst = 0;
        for (int i = 0; i < N - 2; i++) {
            const double want = x[i] / (1.0 + exp(-ks[a] * x[i]));
            /* relative, but for values below 1e-30 (exp is 0 under e^-87) */
            const double err = fabs(y[0][i] - want) / fmax(1e-24, fabs(want));
            if (!(err <= worst)) worst = err;
        }
        CHECK_MSG(worst < 1e-6, "activation %d: relative error %g", (int)acts[a], worst);
        for (int v = 1; v < 3; v++)
            CHECK_MSG(memcmp(y[v], y[0], (N - 2) * sizeof(float)) == 0,
                      "activation %d, TFM_ISA=%s: other bits", (int)acts[a], test_isas[v]);
    }
    /* the backward: the derivative against a central difference of the
     * formula in double, and the same bits from every instruction set */
    static float d[3][N];
    for (int a = 0; a < 2; a++) {
        for (int v = 0; v < 3; v++) {
            test_isa_ask(test_isas[v]);
            for (int i = 0; i < N; i++) d[v][i] = 1.0f;
            activation_backward(acts[a], d[v], x, N - v);
        }
        double worst = 0;
        for (int i = 8; i < N - 2; i++) {
            const double h = 1e-4, z = x[i], k = ks[a];
            const double want = ((z + h) / (1 + exp(-k * (z + h))) -
                                 (z - h) / (1 + exp(-k * (z - h)))) / (2 * h);
            const double e = fabs(d[0][i] - want);
            if (!(e <= worst)) worst = e;
        }
        CHECK_MSG(worst < 1e-5, "activation %d backward: error %g", (int)acts[a], worst);
        for (int v = 1; v < 3; v++)
            CHECK_MSG(memcmp(d[v], d[0], (N - 2) * sizeof(float)) == 0,
                      "activation %d backward, TFM_ISA=%s: other bits", (int)acts[a], test_isas[v]);
    }
    test_isa_restore(saved);
    /* relu through the same door */
    float r[3] = {-1.0f, 2.0f, -0.5f};
    activation_forward(TFM_ACT_RELU, r, 3);
    CHECK(r[0] == 0.0f && r[1] == 2.0f && r[2] == 0.0f);
}

static void test_sinusoid_values(void)
{
    enum { P = 50, D = 8 };
    float t[P * D];
    positions_sinusoidal(t, 0, P, D, false);
    CHECK(t[0] == 0.0f && t[1] == 1.0f); /* position 0: sin 0, cos 0 */
    CHECK_NEAR(t[1 * D + 0], sin(1.0), 1e-7);
    CHECK_NEAR(t[1 * D + 1], cos(1.0), 1e-7);
    CHECK_NEAR(t[3 * D + 2], sin(3 / pow(10000, 2.0 / 8)), 1e-7);
    CHECK_NEAR(t[3 * D + 3], cos(3 / pow(10000, 2.0 / 8)), 1e-7);
    CHECK_NEAR(t[49 * D + 6], sin(49 / pow(10000, 6.0 / 8)), 1e-7);
    CHECK_NEAR(t[49 * D + 7], cos(49 / pow(10000, 6.0 / 8)), 1e-7);

    /* the table grown in pieces, as the encoder and decoder grow it, is the
     * table computed at once; a learned table is passed through */
    tfm_buf cache;
    tfm_buf_init(&cache);
    int cached = 0;
    const float *grown = NULL, *table = NULL;
    CHECK(positions_table(TFM_POS_SINUSOIDAL, NULL, &cache, &cached, 3, D, &grown) && grown &&
          cached == 3);
    CHECK(positions_table(TFM_POS_SINUSOIDAL, NULL, &cache, &cached, 2, D, &grown) && grown &&
          cached == 3);
    CHECK(positions_table(TFM_POS_SINUSOIDAL, NULL, &cache, &cached, P, D, &grown));
    CHECK(grown && cached == P && max_abs_diff(grown, t, P * D) == 0);
    CHECK(positions_table(TFM_POS_LEARNED, t, &cache, &cached, 7, D, &table) && table == t);
    /* relative positions only: no table, nothing added */
    CHECK(positions_table(TFM_POS_NONE, NULL, &cache, &cached, 7, D, &table) && table == NULL);
    tfm_buf_free(&cache);

    /* Marian's layout: the same sines, then the same cosines */
    float h[P * D];
    positions_sinusoidal(h, 0, P, D, true);
    for (int pos = 0; pos < P; pos++)
        for (int k = 0; k < D / 2; k++) {
            CHECK(h[pos * D + k] == t[pos * D + 2 * k]);
            CHECK(h[pos * D + D / 2 + k] == t[pos * D + 2 * k + 1]);
        }
    cached = 0;
    CHECK(positions_table(TFM_POS_SINUSOIDAL_CONCAT, NULL, &cache, &cached, P, D, &table));
    CHECK(table && max_abs_diff(table, h, P * D) == 0);
    tfm_buf_free(&cache);

    /* the embedding: embed[id] * sqrt(D) + PE(pos) */
    float E[3 * D], out[2 * D];
    for (int i = 0; i < 3 * D; i++) E[i] = (float)i / 10;
    const int32_t ids[2] = {2, 1};
    embedding_forward(out, ids, E, t, 5, 1, 2, D, -1);
    CHECK_NEAR(out[3], E[2 * D + 3] * sqrt(8.0) + t[5 * D + 3], 1e-6);
    CHECK_NEAR(out[D + 4], E[1 * D + 4] * sqrt(8.0) + t[6 * D + 4], 1e-6);
    embedding_forward(out, ids, E, t, 5, 0, 2, D, -1); /* both rows at position 5 */
    CHECK_NEAR(out[D + 4], E[1 * D + 4] * sqrt(8.0) + t[5 * D + 4], 1e-6);
    embedding_forward(out, ids, E, NULL, 5, 1, 2, D, -1); /* no absolute positions */
    CHECK_NEAR(out[D + 4], E[1 * D + 4] * sqrt(8.0), 1e-6);
    /* a zero id: the position alone */
    embedding_forward(out, ids, E, t, 0, 1, 2, D, 2);
    CHECK(memcmp(out, t, D * sizeof(float)) == 0);
    CHECK_NEAR(out[D + 4], E[1 * D + 4] * sqrt(8.0) + t[1 * D + 4], 1e-6);
}

int main(void)
{
    RUN(test_linear_by_hand);
    RUN(test_relu);
    RUN(test_activations);
    RUN(test_layer_norm_by_hand);
    RUN(test_attention_by_hand);
    RUN(test_softmax_large_logits);
    RUN(test_logit_stats);
    RUN(test_packed_linear);
    RUN(test_packed_linear_many_rows);
    RUN(test_stats_ties_and_nans);
    RUN(test_isa_versions_agree);
    RUN(test_row_attention_bf16);
    RUN(test_masks_against_naive);
    RUN(test_sinusoid_values);
    CHECK_DONE();
}
