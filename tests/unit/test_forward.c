/* test_forward.c - the forward pass used for inference: the layer kernels
 * against values worked out by hand (with NumPy), the softmax and the masks,
 * the incremental decoder against the full recomputation (every kind of
 * positions, relative ones included), batching and padding invariance of
 * the encoder and decoder, restricted attention and its band, empty
 * sentences, argument checks, and (when /usr/bin/python3 has NumPy) the
 * whole model against the independent reimplementation in forward_ref.py.
 *
 * Tolerances: the incremental decoder and the full recomputation sum the
 * same products in different orders (GEMV over a cache against GEMM over
 * the prefix), and the BLAS blocks a product of N rows differently from one
 * of M rows, so results are not bit-identical: here they differ by about
 * 1e-6 (a few float roundings of values of order 1-10).  We allow 1e-5.
 * Against NumPy in float64 they differ by about 1e-6 too; we allow 3e-5.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "testmodel.h"
#include "nn/layers.h"
#include "tfm/pass.h"

/* ---- helpers ------------------------------------------------------------------- */

static double max_abs_diff(const float *a, const float *b, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (!(d <= m)) m = d; /* NaN propagates as a failure */
    }
    return m;
}

/* A small model: D 16, 2 heads, F 32, 2 + 2 layers, 40 positions. */
static tfm_config small_config(bool pre_norm, tfm_pos_kind pos, int window, bool shared)
{
    tfm_config c;
    tfm_config_preset("tiny", &c, NULL);
    c.d_model = 16;
    c.d_ff = 32;
    c.n_heads = 2;
    c.n_encoder_layers = 2;
    c.n_decoder_layers = 2;
    c.max_positions = 40;
    c.positions = pos;
    c.pre_norm = pre_norm;
    c.attention_window = window;
    c.shared_embeddings = shared;
    c.src_vocab_size = shared ? 23 : 19;
    c.tgt_vocab_size = 23;
    return c;
}

static void fill_ids(int32_t *ids, int n, int32_t V, uint64_t seed)
{
    tfm_rng rng;
    tfm_rng_seed(&rng, seed);
    for (int i = 0; i < n; i++) ids[i] = (int32_t)tfm_rng_below(&rng, (uint64_t)V);
}

/* Encodes one sentence alone. */
/* A source [S] and a target [T] starting with <s>, ids of seed and seed + 1. */
static void fill_pair(const tfm_config *c, int32_t *src, int S, int32_t *tgt, int T,
                      uint64_t seed)
{
    fill_ids(src, S, c->src_vocab_size, seed);
    fill_ids(tgt, T, c->tgt_vocab_size, seed + 1);
    tgt[0] = c->bos_id;
}

static tfm_status encode_one(tfm_encoder *e, const int32_t *ids, int len, float *states)
{
    tfm_error err;
    const int32_t *p[1] = {ids};
    tfm_status st = tfm_encoder_forward(e, 1, p, &len, states, &err);
    if (st) printf("encode: %s\n", err.msg);
    return st;
}

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
 * rounding and int8 dequantization.  Where the build has one version (the
 * sanitizer build, Clang), the three runs are the same code. */
static void test_isa_versions_agree(void)
{
    if (!nn_packed_kernel_runs(NN_KERNEL_AVX2)) {
        SKIP(test_isa_versions_agree, "this CPU has no AVX2 and FMA: no packed kernel");
        return;
    }
    enum { R = 9, N = 70, K = 33, V = 1000 };
    static const char *const isas[3] = {NULL, "avx2", "none"};
    tfm_rng rng;
    tfm_rng_seed(&rng, 17);
    static float w[N * K], x[R * K], out[3][R * N], relu[3][V], values[V], deq[3][2 * V];
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
    const char *was = getenv("TFM_ISA");
    char *saved = was ? strdup(was) : NULL;
    for (int v = 0; v < 3; v++) {
        if (isas[v]) setenv("TFM_ISA", isas[v], 1);
        else unsetenv("TFM_ISA");
        nn_packed_forward_stats(out[v], x, &p, R, NULL, st[v], sums[v]);
        memcpy(relu[v], values, sizeof values);
        relu_forward(relu[v], V);
        nn_round_bf16(bf[v], values, V);
        nn_dequantize_int8(deq[v], q, scale, 2, V);
    }
    if (saved) setenv("TFM_ISA", saved, 1);
    else unsetenv("TFM_ISA");
    free(saved);
    for (int v = 1; v < 3; v++) {
        CHECK_MSG(memcmp(out[v], out[0], sizeof out[0]) == 0, "TFM_ISA=%s: other logits", isas[v]);
        CHECK_MSG(memcmp(st[v], st[0], sizeof st[0]) == 0, "TFM_ISA=%s: other statistics", isas[v]);
        CHECK_MSG(memcmp(sums[v], sums[0], sizeof sums[0]) == 0, "TFM_ISA=%s: other sums", isas[v]);
        CHECK_MSG(memcmp(relu[v], relu[0], sizeof relu[0]) == 0, "TFM_ISA=%s: other ReLU", isas[v]);
        CHECK_MSG(memcmp(bf[v], bf[0], sizeof bf[0]) == 0, "TFM_ISA=%s: other bf16", isas[v]);
        CHECK_MSG(memcmp(deq[v], deq[0], sizeof deq[0]) == 0, "TFM_ISA=%s: other int8", isas[v]);
    }
    /* and the statistics are those of the logits */
    tfm_logit_stats plain[R];
    logit_stats(out[0], R, N, plain);
    for (int r = 0; r < R; r++) {
        CHECK(st[0][r].max == plain[r].max && st[0][r].argmax == plain[r].argmax);
        CHECK_NEAR(st[0][r].log_sum, plain[r].log_sum, 1e-5);
    }
    nn_packed_linear_free(&p);
}

/* The packed kernels' slicing of many rows (more than a slice keeps in the
 * cache) changes nothing: 700 rows at once equal 700 rows one by one. */
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
    static const char *const isas[3] = {NULL, "avx2", "none"};
    const char *was = getenv("TFM_ISA");
    char *saved = was ? strdup(was) : NULL;
    for (int a = 0; a < 2; a++) {
        for (int v = 0; v < 3; v++) {
            if (isas[v]) setenv("TFM_ISA", isas[v], 1);
            else unsetenv("TFM_ISA");
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
                      "activation %d, TFM_ISA=%s: other bits", (int)acts[a], isas[v]);
    }
    /* the backward: the derivative against a central difference of the
     * formula in double, and the same bits from every instruction set */
    static float d[3][N];
    for (int a = 0; a < 2; a++) {
        for (int v = 0; v < 3; v++) {
            if (isas[v]) setenv("TFM_ISA", isas[v], 1);
            else unsetenv("TFM_ISA");
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
                      "activation %d backward, TFM_ISA=%s: other bits", (int)acts[a], isas[v]);
    }
    if (saved) setenv("TFM_ISA", saved, 1);
    else unsetenv("TFM_ISA");
    free(saved);
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

/* ---- the model ------------------------------------------------------------------ */

/* Over every combination of norm placement, positions, attention window and
 * embedding sharing: the log-probs of each incremental step equal the row of
 * the full recomputation at that position. */
static void test_incremental_equals_full(void)
{
    enum { S = 6, T = 9 };
    for (int combo = 0; combo < 128; combo++) {
        bool pre = combo & 1, shared = combo & 8, packed = combo & 16, relative = combo & 32;
        bool marian = combo & 64; /* the variants of imported models */
        /* relative positions (clipped at 3 of 9 target positions) alone or
         * with sinusoids */
        tfm_pos_kind pos = relative ? ((combo & 2) ? TFM_POS_SINUSOIDAL : TFM_POS_NONE)
                           : (combo & 2) ? TFM_POS_LEARNED : TFM_POS_SINUSOIDAL;
        int window = (combo & 4) ? 2 : 0;
        if (marian && pos == TFM_POS_SINUSOIDAL) pos = TFM_POS_SINUSOIDAL_CONCAT;
        tfm_config c = small_config(pre, pos, window, shared);
        c.relative_positions = relative ? 3 : 0;
        if (marian) {
            c.activation = combo & 2 ? TFM_ACT_GELU_SIGMOID : TFM_ACT_SWISH;
            c.output_bias = c.decoder_start_zero = true;
            c.embedding_layer_norm = combo & 4;
        }
        tfm_model *m = test_nudged_model(&c, 100 + combo % 16);
        if (!m) return;
        tfm_error err;
        /* the packed decoder's kernel against the full recomputation's sgemm */
        if (packed) CHECK(tfm_model_pack_for_decoding(m, &err) == TFM_OK);
        const int V = c.tgt_vocab_size, D = c.d_model;
        int32_t src[S], tgt[T];
        fill_ids(src, S, c.src_vocab_size, combo);
        fill_ids(tgt, T, V, 50 + combo);
        tgt[0] = c.bos_id;

        float states[S * D], full[T * 23], step[23];
        tfm_encoder *e;
        tfm_decoder *d;
        CHECK(tfm_encoder_create(m, &e, &err) == TFM_OK);
        CHECK(tfm_decoder_create(m, &d, &err) == TFM_OK);
        CHECK(encode_one(e, src, S, states) == TFM_OK);
        CHECK(tfm_decoder_forward_full(m, states, S, tgt, T, full, &err) == TFM_OK);
        const float *sp[1] = {states};
        int src_len = S, row = 0;
        CHECK(tfm_decoder_start(d, 1, sp, &src_len, 1, &row, T, &err) == TFM_OK);
        double worst = 0;
        for (int t = 0; t < T; t++) {
            CHECK(tfm_decoder_position(d) == t);
            CHECK(tfm_decoder_step(d, &tgt[t], step, &err) == TFM_OK);
            worst = fmax(worst, max_abs_diff(step, full + (size_t)t * V, (size_t)V));
        }
        CHECK_MSG(worst <= 1e-5,
                  "pre %d positions %d relative %d window %d shared %d packed %d marian %d: "
                  "differ by %g",
                  pre, (int)pos, c.relative_positions, window, shared, packed, marian, worst);
        /* and the log-probs are a distribution */
        double sum = 0;
        for (int i = 0; i < V; i++) sum += exp(step[i]);
        CHECK_NEAR(sum, 1, 1e-5);
        tfm_decoder_free(d);
        tfm_encoder_free(e);
        tfm_model_free(m);
    }
}

/* A sentence encoded alone equals the same sentence inside batches with
 * longer, shorter and empty companions; the ids after a sentence's length
 * (padding, as far as this API has any) are never read.  With the packed
 * kernel (variants 2 and 3) the equality is exact, and the packed encoder
 * agrees with sgemm's. */
static void test_encoder_batch_invariance(void)
{
    for (int variant = 0; variant < 4; variant++) {
        const int pre = variant & 1;
        const bool packed = variant & 2;
        tfm_config c = small_config(pre, TFM_POS_SINUSOIDAL, pre ? 3 : 0, true);
        tfm_model *m = test_nudged_model(&c, 7 + pre);
        if (!m) return;
        double tolerance = 1e-5;
        enum { B = 5, MAXLEN = 12, D = 16 };
        const int lens[B] = {7, 12, 0, 2, 9};
        int32_t ids[B][MAXLEN + 4];
        for (int b = 0; b < B; b++) fill_ids(ids[b], MAXLEN + 4, c.src_vocab_size, 31 * b);
        const int32_t *ptrs[B];
        for (int b = 0; b < B; b++) ptrs[b] = ids[b];

        tfm_encoder *e;
        tfm_error err;
        CHECK(tfm_encoder_create(m, &e, &err) == TFM_OK);
        static float batch[(7 + 12 + 2 + 9) * D + 1], alone[MAXLEN * D], unpacked[30 * D];
        if (packed) { /* the same model with sgemm, then packed */
            CHECK(tfm_encoder_forward(e, B, ptrs, lens, unpacked, &err) == TFM_OK);
            CHECK(tfm_model_pack_for_encoding(m, &err) == TFM_OK);
            if (m->packed) tolerance = 0; /* every row alike, whatever its companions */
            else if (variant == 2) SKIP(test_encoder_batch_invariance, "no packed kernel");
        }
        batch[30 * D] = -123; /* sentinel: the encoder writes only sum(lens) rows */
        CHECK(tfm_encoder_forward(e, B, ptrs, lens, batch, &err) == TFM_OK);
        CHECK(batch[30 * D] == -123);
        if (packed) {
            double diff = max_abs_diff(batch, unpacked, 30 * D);
            CHECK_MSG(diff <= 1e-5, "variant %d: packed and sgemm encoders differ by %g", variant,
                      diff);
        }
        int off = 0;
        for (int b = 0; b < B; b++) {
            if (lens[b] > 0) {
                CHECK(encode_one(e, ids[b], lens[b], alone) == TFM_OK);
                double diff = max_abs_diff(alone, batch + (size_t)off * D, (size_t)lens[b] * D);
                CHECK_MSG(diff <= tolerance, "variant %d sentence %d: %g", variant, b, diff);
            }
            off += lens[b];
        }

        /* Different companions and different "padding" after each length:
         * sentence 0 (7 tokens) next to others, with garbage after its end. */
        int32_t noisy[MAXLEN + 4];
        memcpy(noisy, ids[0], sizeof noisy);
        for (int i = lens[0]; i < MAXLEN + 4; i++) noisy[i] = (int32_t)(i % 5);
        const int32_t *p2[3] = {ids[4], noisy, ids[1]};
        const int l2[3] = {3, lens[0], 11};
        static float batch2[(3 + 7 + 11) * D];
        CHECK(tfm_encoder_forward(e, 3, p2, l2, batch2, &err) == TFM_OK);
        double diff = max_abs_diff(batch2 + 3 * D, batch, (size_t)lens[0] * D);
        CHECK_MSG(diff <= tolerance, "variant %d, other companions: %g", variant, diff);
        /* the first 3 rows of sentence 4 are not its 9-token result: a
         * sentence sees its own length, and the check above can fail */
        CHECK(max_abs_diff(batch2, batch + (size_t)(7 + 12 + 0 + 2) * D, 3 * D) > 1e-3);
        tfm_encoder_free(e);
        tfm_model_free(m);
    }
}

/* Several sentences (one with an empty source) decoded as rows of one
 * batch, with a beam-like reorder that drops, duplicates and then grows the
 * rows: every row's log-probs equal the full recomputation of its own
 * history alone, and a row decoded alone by another decoder agrees. */
static void test_decoder_rows_and_reorder(void)
{
    /* variants 2 and 3 compute in int8 and in bf16, whose decoders keep
     * their keys and values in bf16: against the float32 recomputation
     * they differ by the quantization's error (measured on these weights:
     * 0.110 int8, whose activations have seven bits, 0.012 bf16), and
     * each row alone still equals the row in its batch, exactly (every
     * row's products and rounding are its own) */
    static const tfm_compute_type compute[4] = {TFM_COMPUTE_FLOAT32, TFM_COMPUTE_FLOAT32,
                                                TFM_COMPUTE_INT8, TFM_COMPUTE_BF16};
    for (int variant = 0; variant < 4; variant++) {
        tfm_config c = variant % 2 ? small_config(true, TFM_POS_LEARNED, 2, false)
                                   : small_config(false, TFM_POS_SINUSOIDAL, 0, true);
        tfm_model *m = test_nudged_model(&c, 300 + variant % 2);
        if (!m) return;
        tfm_error err;
        if (compute[variant] != TFM_COMPUTE_FLOAT32) {
            CHECK(tfm_model_set_compute_type(m, compute[variant], &err) == TFM_OK);
            CHECK(tfm_model_pack_for_decoding(m, &err) == TFM_OK);
        }
        const double bound = compute[variant] == TFM_COMPUTE_FLOAT32 ? 1e-5
                             : compute[variant] == TFM_COMPUTE_INT8 ? 0.2 : 0.03;
        enum { NS = 3, STEPS = 7, MAXR = 8, D = 16, V = 23 };
        const int src_lens[NS] = {4, 0, 6};
        int32_t src[NS][6];
        const int32_t *sp[NS];
        for (int s = 0; s < NS; s++) {
            fill_ids(src[s], 6, c.src_vocab_size, 90 + s);
            sp[s] = src[s];
        }
        tfm_encoder *e;
        tfm_decoder *d, *alone;
        CHECK(tfm_encoder_create(m, &e, &err) == TFM_OK);
        CHECK(tfm_decoder_create(m, &d, &err) == TFM_OK);
        CHECK(tfm_decoder_create(m, &alone, &err) == TFM_OK);
        float packed[10 * D];
        CHECK(tfm_encoder_forward(e, NS, sp, src_lens, packed, &err) == TFM_OK);
        /* variant 0 passes the encoder's packed output (no copy); variant 1
         * separate arrays in reverse order in memory (copied) */
        float separate[10 * D];
        const float *states[NS] = {packed, packed + 4 * D, packed + 4 * D};
        if (variant) {
            memcpy(separate, packed + 4 * D, 6 * D * sizeof(float));
            memcpy(separate + 6 * D, packed, 4 * D * sizeof(float));
            states[0] = separate + 6 * D;
            states[1] = separate; /* empty: never read */
            states[2] = separate;
        }

        int R = 5;
        int row_sentence[MAXR] = {0, 0, 1, 2, 2};
        int32_t hist[MAXR][STEPS], newhist[MAXR][STEPS];
        CHECK(tfm_decoder_start(d, NS, states, src_lens, R, row_sentence, STEPS, &err) == TFM_OK);
        static float lp[MAXR * V], full[STEPS * V];
        double worst = 0;
        for (int t = 0; t < STEPS; t++) {
            if (t == 2 || t == 4 || t == 5) {
                /* step 2: drop rows 1 and 3, duplicate row 0; step 4: grow to
                 * 8; step 5: shrink to 6, row 5 continued three times, the
                 * others in a new order (rows hand their cache slots on) */
                static const int par2[4] = {4, 0, 0, 2};
                static const int par4[8] = {3, 3, 1, 0, 2, 2, 1, 0};
                static const int par5[6] = {5, 7, 5, 0, 5, 3};
                const int *par = t == 2 ? par2 : t == 4 ? par4 : par5;
                int new_R = t == 2 ? 4 : t == 4 ? 8 : 6;
                CHECK(tfm_decoder_reorder(d, new_R, par, &err) == TFM_OK);
                int new_rs[MAXR];
                for (int i = 0; i < new_R; i++) {
                    memcpy(newhist[i], hist[par[i]], sizeof hist[0]);
                    new_rs[i] = row_sentence[par[i]];
                }
                memcpy(hist, newhist, sizeof hist);
                memcpy(row_sentence, new_rs, sizeof new_rs);
                R = new_R;
                CHECK(tfm_decoder_rows(d) == R);
            }
            int32_t tok[MAXR];
            for (int r = 0; r < R; r++) {
                tok[r] = t == 0 ? c.bos_id : (int32_t)((3 + 7 * r + 5 * t) % V);
                hist[r][t] = tok[r];
            }
            if (t % 2) { /* the logits and their stats give the same log-probs */
                static tfm_logit_stats stats[MAXR];
                CHECK(tfm_decoder_step_logits(d, tok, lp, stats, &err) == TFM_OK);
                log_softmax_apply(lp, R, V, stats);
            } else {
                CHECK(tfm_decoder_step(d, tok, lp, &err) == TFM_OK);
            }
            for (int r = 0; r < R; r++) {
                int s = row_sentence[r];
                CHECK(tfm_decoder_forward_full(m, states[s], src_lens[s], hist[r], t + 1, full,
                                               &err) == TFM_OK);
                worst = fmax(worst, max_abs_diff(lp + (size_t)r * V, full + (size_t)t * V, V));
            }
        }
        CHECK_MSG(worst <= bound, "variant %d: rows differ from their full recomputation by %g",
                  variant, worst);

        /* each row decoded alone, incrementally, from its history: the
         * rows handed their cache slots on and copied them correctly */
        for (int r = 0; r < R; r++) {
            int s = row_sentence[r];
            CHECK(tfm_decoder_start(alone, 1, &states[s], &src_lens[s], 1, (int[]){0}, STEPS,
                                    &err) == TFM_OK);
            float one[V];
            for (int t = 0; t < STEPS; t++)
                CHECK(tfm_decoder_step(alone, &hist[r][t], one, &err) == TFM_OK);
            double diff = max_abs_diff(one, lp + (size_t)r * V, V);
            CHECK_MSG(diff <= (variant >= 2 ? 0 : 1e-5), "variant %d: row %d alone vs in the "
                      "batch: %g", variant, r, diff);
        }

        /* a step past max_steps is refused, and the decoder stays usable */
        CHECK(tfm_decoder_step(d, (int32_t[MAXR]){0}, lp, &err) == TFM_ERR_RANGE);
        /* all rows finished: zero rows, and a step over them does nothing */
        CHECK(tfm_decoder_start(d, NS, states, src_lens, 2, (int[]){2, 1}, 3, &err) == TFM_OK);
        CHECK(tfm_decoder_step(d, (int32_t[]){2, 2}, lp, &err) == TFM_OK);
        CHECK(tfm_decoder_reorder(d, 0, NULL, &err) == TFM_OK);
        CHECK(tfm_decoder_rows(d) == 0);
        CHECK(tfm_decoder_step(d, NULL, lp, &err) == TFM_OK);

        tfm_decoder_free(alone);
        tfm_decoder_free(d);
        tfm_encoder_free(e);
        tfm_model_free(m);
    }
}

/* Restricted attention with a window no shorter than the sentences is full
 * attention; a short window is not. */
static void test_window_covering_equals_full(void)
{
    enum { S = 10, T = 8, D = 16, V = 23 };
    for (int pre = 0; pre < 2; pre++) {
        tfm_config c = small_config(pre, TFM_POS_SINUSOIDAL, 0, true);
        tfm_model *m = test_nudged_model(&c, 400 + pre);
        if (!m) return;
        int32_t src[S], tgt[T];
        fill_ids(src, S, V, 5);
        fill_ids(tgt, T, V, 6);
        float st[3][S * D], lp[3][T * V], step[V];
        const int windows[3] = {0, S, 2};
        tfm_error err;
        for (int w = 0; w < 3; w++) {
            m->config.attention_window = windows[w];
            tfm_encoder *e;
            tfm_decoder *d;
            CHECK(tfm_encoder_create(m, &e, &err) == TFM_OK);
            CHECK(tfm_decoder_create(m, &d, &err) == TFM_OK);
            CHECK(encode_one(e, src, S, st[w]) == TFM_OK);
            const float *sp[1] = {st[w]};
            int sl = S, row = 0;
            CHECK(tfm_decoder_start(d, 1, sp, &sl, 1, &row, T, &err) == TFM_OK);
            for (int t = 0; t < T; t++) {
                CHECK(tfm_decoder_step(d, &tgt[t], step, &err) == TFM_OK);
                memcpy(lp[w] + t * V, step, sizeof step);
            }
            tfm_decoder_free(d);
            tfm_encoder_free(e);
        }
        CHECK(max_abs_diff(st[0], st[1], S * D) <= 1e-6);
        CHECK(max_abs_diff(lp[0], lp[1], T * V) <= 1e-6);
        CHECK(max_abs_diff(st[0], st[2], S * D) > 1e-3);
        CHECK(max_abs_diff(lp[0] + 4 * V, lp[2] + 4 * V, V) > 1e-4);
        tfm_model_free(m);
    }
}

static void test_empty_sentences(void)
{
    tfm_config c = small_config(false, TFM_POS_SINUSOIDAL, 0, true);
    tfm_model *m = test_nudged_model(&c, 500);
    if (!m) return;
    tfm_encoder *e;
    tfm_error err;
    CHECK(tfm_encoder_create(m, &e, &err) == TFM_OK);
    float out[4] = {9, 9, 9, 9};
    const int32_t *none[2] = {NULL, NULL};
    const int zero[2] = {0, 0};
    CHECK(tfm_encoder_forward(e, 2, none, zero, out, &err) == TFM_OK);
    CHECK(tfm_encoder_forward(e, 0, NULL, NULL, out, &err) == TFM_OK);
    CHECK(out[0] == 9 && out[3] == 9); /* nothing written */

    /* an empty source decodes (encoder attention contributes zero), and the
     * incremental and full paths agree on it */
    float lp[23], full[2 * 23];
    tfm_decoder *d;
    CHECK(tfm_decoder_create(m, &d, &err) == TFM_OK);
    const float *sp[1] = {NULL};
    int sl = 0;
    CHECK(tfm_decoder_start(d, 1, sp, &sl, 1, (int[]){0}, 2, &err) == TFM_OK);
    int32_t tgt[2] = {2, 7};
    CHECK(tfm_decoder_step(d, &tgt[0], lp, &err) == TFM_OK);
    CHECK(tfm_decoder_step(d, &tgt[1], lp, &err) == TFM_OK);
    CHECK(tfm_decoder_forward_full(m, NULL, 0, tgt, 2, full, &err) == TFM_OK);
    CHECK(max_abs_diff(lp, full + 23, 23) <= 1e-5);
    CHECK(tfm_decoder_forward_full(m, NULL, 0, tgt, 0, full, &err) == TFM_OK);
    tfm_decoder_free(d);
    tfm_encoder_free(e);
    tfm_model_free(m);
}

static void test_bad_arguments(void)
{
    tfm_config c = small_config(false, TFM_POS_SINUSOIDAL, 0, false);
    tfm_model *m = test_nudged_model(&c, 600);
    if (!m) return;
    tfm_encoder *e;
    tfm_decoder *d;
    tfm_error err;
    CHECK(tfm_encoder_create(m, &e, &err) == TFM_OK);
    CHECK(tfm_decoder_create(m, &d, &err) == TFM_OK);
    static float out[64 * 16];
    int32_t ids[41] = {0};
    const int32_t *p[1] = {ids};
    int len = 3;
    ids[1] = 19; /* src vocabulary is 19 */
    CHECK(tfm_encoder_forward(e, 1, p, &len, out, &err) == TFM_ERR_RANGE);
    CHECK(strstr(err.msg, "19") != NULL);
    ids[1] = -1;
    CHECK(tfm_encoder_forward(e, 1, p, &len, out, &err) == TFM_ERR_RANGE);
    ids[1] = 0;
    len = 41; /* max_positions is 40 */
    CHECK(tfm_encoder_forward(e, 1, p, &len, out, &err) == TFM_ERR_RANGE);
    len = -1;
    CHECK(tfm_encoder_forward(e, 1, p, &len, out, &err) == TFM_ERR_RANGE);
    len = 3;
    CHECK(tfm_encoder_forward(e, 1, p, &len, out, &err) == TFM_OK);

    const float *sp[1] = {out};
    CHECK(tfm_decoder_start(d, 1, sp, &len, 1, (int[]){1}, 5, &err) == TFM_ERR_ARG);
    CHECK(tfm_decoder_start(d, 1, sp, &len, 1, (int[]){0}, 41, &err) == TFM_ERR_RANGE);
    CHECK(tfm_decoder_start(d, 1, sp, &len, 1, (int[]){0}, 0, &err) == TFM_ERR_RANGE);
    CHECK(tfm_decoder_start(d, 1, sp, &len, 2, (int[]){0, 0}, 2, &err) == TFM_OK);
    float lp[2 * 23];
    CHECK(tfm_decoder_step(d, (int32_t[]){2, 23}, lp, &err) == TFM_ERR_RANGE);
    CHECK(tfm_decoder_position(d) == 0);
    CHECK(tfm_decoder_step(d, (int32_t[]){2, 22}, lp, &err) == TFM_OK);
    CHECK(tfm_decoder_reorder(d, 2, (int[]){0, 2}, &err) == TFM_ERR_ARG);
    CHECK(tfm_decoder_reorder(d, -1, NULL, &err) == TFM_ERR_ARG);
    CHECK(tfm_decoder_reorder(d, 1, (int[]){1}, &err) == TFM_OK);
    CHECK(tfm_decoder_step(d, (int32_t[]){5}, lp, &err) == TFM_OK);
    CHECK(tfm_decoder_step(d, (int32_t[]){5}, lp, &err) == TFM_ERR_RANGE); /* max_steps 2 */
    CHECK(tfm_decoder_forward_full(m, out, 3, (int32_t[]){2, 99}, 2, lp, &err) == TFM_ERR_RANGE);
    tfm_decoder_free(d);
    tfm_encoder_free(e);
    tfm_model_free(m);
    tfm_encoder_free(NULL);
    tfm_decoder_free(NULL);
}

/* The whole model against forward_ref.py (NumPy, float64). */
static void test_numpy_reference(void)
{
    const char *root = getenv("ROOT") ? getenv("ROOT") : ".";
    char script[4096], dir[4096], model_path[4200], out_path[4200], cmd[16384];
    snprintf(script, sizeof script, "%s/tests/unit/forward_ref.py", root);
    if (access("/usr/bin/python3", X_OK) != 0 || access(script, R_OK) != 0 ||
        system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") != 0) {
        SKIP(test_numpy_reference, "no /usr/bin/python3 with numpy, or no forward_ref.py");
        return;
    }
    snprintf(dir, sizeof dir, "%s/fwdXXXXXX", getenv("TEST_TMP") ? getenv("TEST_TMP") : "/tmp");
    if (!mkdtemp(dir)) {
        CHECK_MSG(0, "mkdtemp %s", dir);
        return;
    }
    snprintf(model_path, sizeof model_path, "%s/m.safetensors", dir);
    snprintf(out_path, sizeof out_path, "%s/out.f32", dir);
    enum { S = 7, T = 6, D = 16, V = 23 };
    for (int variant = 0; variant < 4; variant++) {
        /* 0, 1: absolute positions; 2: relative alone (clipped at 3, so
         * the 7-token source clips); 3: learned + relative 2, window 2 */
        tfm_config c = variant == 0   ? small_config(false, TFM_POS_SINUSOIDAL, 0, true)
                       : variant == 1 ? small_config(true, TFM_POS_LEARNED, 2, false)
                       : variant == 2 ? small_config(false, TFM_POS_NONE, 0, true)
                                      : small_config(true, TFM_POS_LEARNED, 2, false);
        c.relative_positions = variant == 2 ? 3 : variant == 3 ? 2 : 0;
        tfm_model *m = test_nudged_model(&c, 700 + variant);
        if (!m) return;
        tfm_error err;
        CHECK(tfm_model_save(m, model_path, NULL, &err) == TFM_OK);
        int32_t src[S], tgt[T];
        fill_pair(&c, src, S, tgt, T, 11);
        char src_s[256] = "", tgt_s[256] = "";
        for (int i = 0; i < S; i++)
            snprintf(src_s + strlen(src_s), sizeof src_s - strlen(src_s), "%d,", (int)src[i]);
        for (int i = 0; i < T; i++)
            snprintf(tgt_s + strlen(tgt_s), sizeof tgt_s - strlen(tgt_s), "%d,", (int)tgt[i]);
        snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s' '%s' %s %s '%s'", script, model_path,
                 src_s, tgt_s, out_path);
        CHECK_MSG(system(cmd) == 0, "%s", cmd);
        static float ref[S * D + T * V], states[S * D], lp[V];
        FILE *fp = fopen(out_path, "rb");
        size_t got = fp ? fread(ref, sizeof(float), S * D + T * V, fp) : 0;
        if (fp) fclose(fp);
        CHECK_MSG(got == S * D + T * V, "read %zu floats from %s", got, out_path);

        tfm_encoder *e;
        tfm_decoder *d;
        CHECK(tfm_encoder_create(m, &e, &err) == TFM_OK);
        CHECK(tfm_decoder_create(m, &d, &err) == TFM_OK);
        CHECK(encode_one(e, src, S, states) == TFM_OK);
        double ds = max_abs_diff(states, ref, S * D);
        CHECK_MSG(ds <= 3e-5, "variant %d: encoder states differ from NumPy by %g", variant, ds);
        const float *sp[1] = {states};
        int sl = S;
        CHECK(tfm_decoder_start(d, 1, sp, &sl, 1, (int[]){0}, T, &err) == TFM_OK);
        double dl = 0;
        for (int t = 0; t < T; t++) {
            CHECK(tfm_decoder_step(d, &tgt[t], lp, &err) == TFM_OK);
            dl = fmax(dl, max_abs_diff(lp, ref + S * D + t * V, V));
        }
        CHECK_MSG(dl <= 3e-5, "variant %d: log-probs differ from NumPy by %g", variant, dl);
        tfm_decoder_free(d);
        tfm_encoder_free(e);
        tfm_model_free(m);
    }
    remove(model_path);
    remove(out_path);
    rmdir(dir);
}

/* The log-probs of T steps of one sentence (states [S, D]) with d. */
static void decode_steps(const tfm_model *m, const float *states, int S, const int32_t *tgt,
                         int T, float *out)
{
    tfm_decoder *d;
    tfm_error err;
    int row = 0;
    CHECK(tfm_decoder_create(m, &d, &err) == TFM_OK);
    CHECK(tfm_decoder_start(d, 1, &states, &S, 1, &row, T, &err) == TFM_OK);
    for (int t = 0; t < T; t++)
        CHECK(tfm_decoder_step(d, &tgt[t], out + (size_t)t * m->config.tgt_vocab_size, &err) ==
              TFM_OK);
    tfm_decoder_free(d);
}

/* tfm_decoder_step_best writes the logits and the maximum and argmax that
 * tfm_decoder_step_logits writes, bit for bit, without the log-sum (NaN)
 * when the decoder is packed. */
static void test_step_best(void)
{
    enum { S = 5, T = 6 };
    tfm_config c = small_config(true, TFM_POS_SINUSOIDAL, 0, true);
    tfm_model *m = test_nudged_model(&c, 91);
    if (!m) return;
    tfm_error err;
    CHECK(tfm_model_pack_for_decoding(m, &err) == TFM_OK);
    const bool packed = m->packed && m->packed->decoder;
    const int V = c.tgt_vocab_size;
    int32_t src[S], tgt[T];
    fill_pair(&c, src, S, tgt, T, 17);
    float states[S * 16];
    tfm_encoder *e;
    tfm_decoder *d[2];
    CHECK(tfm_encoder_create(m, &e, &err) == TFM_OK);
    CHECK(encode_one(e, src, S, states) == TFM_OK);
    const float *sp = states;
    int src_len = S, row = 0, differ = 0;
    for (int k = 0; k < 2; k++) {
        CHECK(tfm_decoder_create(m, &d[k], &err) == TFM_OK);
        CHECK(tfm_decoder_start(d[k], 1, &sp, &src_len, 1, &row, T, &err) == TFM_OK);
    }
    for (int t = 0; t < T; t++) {
        float logits[2][23];
        tfm_logit_stats st[2];
        CHECK(tfm_decoder_step_logits(d[0], &tgt[t], logits[0], &st[0], &err) == TFM_OK);
        CHECK(tfm_decoder_step_best(d[1], &tgt[t], logits[1], &st[1], &err) == TFM_OK);
        differ += memcmp(logits[0], logits[1], sizeof(float) * V) != 0 ||
                  st[0].max != st[1].max || st[0].argmax != st[1].argmax;
        if (packed) CHECK(isnan(st[1].log_sum) && !isnan(st[0].log_sum));
    }
    CHECK_MSG(differ == 0, "%d steps differ", differ);
    for (int k = 0; k < 2; k++) tfm_decoder_free(d[k]);
    tfm_encoder_free(e);
    tfm_model_free(m);
}

/* A model file in int8 (bf16) loaded for inference holds its matrices in
 * that type only; packed for decoding and then released
 * (tfm_model_release_quantized), it decodes as before, bit for bit, and
 * refuses to pack its encoder.  A float32 model computing in int8 keeps
 * its float weights: the release leaves it whole. */
static void test_release_quantized(void)
{
    enum { S = 5, T = 6 };
    tfm_config c = small_config(false, TFM_POS_SINUSOIDAL, 0, true);
    tfm_model *m = test_nudged_model(&c, 77);
    if (!m) return;
    const int V = c.tgt_vocab_size;
    char f32[256], qpath[256];
    const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(f32, sizeof f32, "%s/tfm-test-forward-%d.st", dir, (int)getpid());
    snprintf(qpath, sizeof qpath, "%s/tfm-test-forward-%d.q.st", dir, (int)getpid());
    tfm_error err;
    CHECK(tfm_model_save(m, f32, NULL, &err) == TFM_OK);
    int32_t src[S], tgt[T];
    fill_pair(&c, src, S, tgt, T, 5);
    float states[S * 16];
    tfm_encoder *e;
    CHECK(tfm_encoder_create(m, &e, &err) == TFM_OK);
    CHECK(encode_one(e, src, S, states) == TFM_OK);
    tfm_encoder_free(e);

    static const tfm_compute_type types[2] = {TFM_COMPUTE_INT8, TFM_COMPUTE_BF16};
    static float before[T * 23], after[T * 23];
    for (int i = 0; i < 2; i++) {
        tfm_model *q = NULL;
        CHECK(tfm_model_quantize_file(f32, qpath, types[i], &err) == TFM_OK);
        CHECK_MSG(tfm_model_load_for_inference(qpath, TFM_COMPUTE_DEFAULT, &q, &err) == TFM_OK,
                  "%s", err.msg);
        if (!q) continue;
        CHECK(!q->float_weights && q->compute == types[i]);
        CHECK(tfm_model_pack_for_decoding(q, &err) == TFM_OK);
        decode_steps(q, states, S, tgt, T, before);
        tfm_model_release_quantized(q);
        memset(after, 0, sizeof after);
        decode_steps(q, states, S, tgt, T, after);
        CHECK_MSG(memcmp(before, after, sizeof(float) * T * V) == 0, "%s: differs after release",
                  tfm_compute_type_name(types[i]));
        CHECK(tfm_model_pack_for_encoding(q, &err) == TFM_ERR_ARG);
        CHECK_MSG(strstr(err.msg, "packing the encoder: the model holds no") &&
                      strstr(err.msg, tfm_compute_type_name(types[i])),
                  "%s", err.msg);
        tfm_model_free(q);
    }
    CHECK(tfm_model_set_compute_type(m, TFM_COMPUTE_INT8, &err) == TFM_OK);
    CHECK(tfm_model_pack_for_decoding(m, &err) == TFM_OK);
    tfm_model_release_quantized(m);
    CHECK(m->float_weights && tfm_model_pack_for_encoding(m, &err) == TFM_OK);
    remove(f32);
    remove(qpath);
    tfm_model_free(m);
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
    RUN(test_incremental_equals_full);
    RUN(test_encoder_batch_invariance);
    RUN(test_decoder_rows_and_reorder);
    RUN(test_release_quantized);
    RUN(test_step_best);
    RUN(test_window_covering_equals_full);
    RUN(test_empty_sentences);
    RUN(test_bad_arguments);
    RUN(test_numpy_reference);
    CHECK_DONE();
}
