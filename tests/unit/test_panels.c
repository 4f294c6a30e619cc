/* test_panels.c - a packed model file (train pack): the panels nn_panel_make
 * makes, read in place (nn_borrow_panels), give every kernel the bits of
 * the weights packed at load (float32 with AVX-512 and with AVX2 reading
 * 32-wide panels as two halves, every int8 and bf16 kernel this CPU runs,
 * the shortlist's gather too); and a whole model saved packed and loaded for
 * inference encodes and decodes as the unpacked file, bit for bit, in
 * float32, int8 and bf16, with shared and separate embeddings, while its
 * matrices are read from the file alone. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "testmodel.h"
#include "model/model_internal.h"
#include "nn/layers.h"
#include "tfm/pass.h"

enum { MAXR = 20, MAXN = 70, MAXK = 37 };

static void fill(float *v, size_t n, tfm_rng *rng)
{
    for (size_t i = 0; i < n; i++) v[i] = 2 * tfm_rng_float(rng) - 1;
}

/* The panels of rows r (a whole matrix), made panel by panel, in fresh
 * memory: words, and int8's scales and sums (NULL otherwise). */
typedef struct made {
    uint32_t *words;
    float *scale;
    int32_t *sums;
} made;

static made make_all(const nn_panel_rows *r)
{
    const size_t n = nn_panel_count(r), words = nn_panel_words(r);
    made m = {calloc(n * words + 32, sizeof(uint32_t)), NULL, NULL};
    if (r->type == TFM_COMPUTE_INT8) {
        m.scale = calloc(n * NN_PANEL_WIDTH, sizeof *m.scale);
        m.sums = calloc(n * NN_PANEL_WIDTH, sizeof *m.sums);
    }
    nn_panels_make(r, m.words, m.scale, m.sums);
    return m;
}

static void made_free(made *m)
{
    free(m->words);
    free(m->scale);
    free(m->sums);
}

/* out [R, N] of p and of q for every R, statistics too: how many differ. */
static int compare_products(const nn_packed_linear *p, const nn_packed_linear *q, int N, int K,
                            tfm_rng *rng)
{
    static float x[MAXR * MAXK], a[MAXR * MAXN], b[MAXR * MAXN];
    static double sums[MAXR * NN_STATS_SUMS];
    tfm_logit_stats sa[MAXR], sb[MAXR];
    const size_t scratch_bytes = nn_packed_scratch_bytes(p) > nn_packed_scratch_bytes(q)
                                     ? nn_packed_scratch_bytes(p)
                                     : nn_packed_scratch_bytes(q);
    void *scratch = scratch_bytes ? malloc(scratch_bytes) : NULL;
    int differ = 0;
    for (int R = 1; R <= MAXR; R++) {
        fill(x, (size_t)R * K, rng);
        nn_packed_forward(a, x, p, R, scratch);
        nn_packed_forward(b, x, q, R, scratch);
        differ += memcmp(a, b, (size_t)R * N * sizeof *a) != 0;
        nn_packed_forward_stats(a, x, p, R, scratch, sa, sums);
        nn_packed_forward_stats(b, x, q, R, scratch, sb, sums);
        differ += memcmp(sa, sb, (size_t)R * sizeof sa[0]) != 0;
    }
    free(scratch);
    return differ;
}

/* Float32: panels made here and borrowed against the weights packed for the
 * same kernel: AVX-512 reads them as it packs them, AVX2 as two 16-wide
 * halves of each (its own packing is 16 wide). */
static void test_float_panels(void)
{
    if (!nn_packed_kernel_runs(NN_KERNEL_AVX2)) {
        SKIP(test_float_panels, "this CPU has no AVX2 and FMA: no float32 kernel reads panels");
        return;
    }
    const int Ns[] = {1, 15, 16, 17, 31, 32, 33, 70}, Ks[] = {1, 7, 32, 33};
    const nn_kernel kernels[] = {NN_KERNEL_AVX2, NN_KERNEL_AVX512};
    static float w[MAXN * MAXK], bias[MAXN];
    tfm_rng rng;
    tfm_rng_seed(&rng, 3);
    int cases = 0, differ = 0, refused = 0;
    for (size_t ki = 0; ki < 2; ki++) {
        if (!nn_packed_kernel_runs(kernels[ki])) continue;
        for (size_t n = 0; n < sizeof Ns / sizeof Ns[0]; n++)
            for (size_t k = 0; k < sizeof Ks / sizeof Ks[0]; k++) {
                const int N = Ns[n], K = Ks[k];
                fill(w, (size_t)N * K, &rng);
                fill(bias, (size_t)N, &rng);
                const nn_panel_rows r = {.rows = w, .N = N, .K = K, .type = TFM_COMPUTE_FLOAT32};
                made m = make_all(&r);
                nn_packed_linear packed, borrowed;
                CHECK(nn_pack_linear_for(&packed, w, bias, N, K, kernels[ki]) == TFM_OK);
                refused += nn_borrow_panels(&borrowed, m.words, NULL, NULL, bias, N, K,
                                            kernels[ki]) != TFM_OK;
                differ += compare_products(&packed, &borrowed, N, K, &rng);
                /* the shortlist's gather: columns out of order, some twice */
                int32_t cols[5] = {N - 1, 0, N / 2, N - 1, N / 3};
                tfm_buf ma, mb;
                tfm_buf_init(&ma);
                tfm_buf_init(&mb);
                nn_packed_linear ga, gb;
                CHECK(nn_packed_gather(&ga, &packed, cols, 5, &ma) == TFM_OK);
                CHECK(nn_packed_gather(&gb, &borrowed, cols, 5, &mb) == TFM_OK);
                differ += compare_products(&ga, &gb, 5, K, &rng);
                tfm_buf_free(&ma);
                tfm_buf_free(&mb);
                nn_packed_linear_free(&packed);
                nn_packed_linear_free(&borrowed); /* leaves the borrowed panels */
                made_free(&m);
                cases++;
            }
    }
    CHECK_MSG(refused == 0 && differ == 0, "%d of %d shapes differ, %d refused", differ, cases,
              refused);
    if (!nn_packed_kernel_runs(NN_KERNEL_AVX512))
        SKIP(test_float_panels_avx512, "this CPU has no AVX-512: the AVX2 reading alone tested");
}

/* The shortlist's gather from the wide panels under AVX2: its columns give
 * what the whole product gives them. */
static void test_wide_gather(void)
{
    if (!nn_packed_kernel_runs(NN_KERNEL_AVX2)) return;
    enum { N = 70, K = 33, R = 7 };
    static float w[N * K], x[R * K], all[R * N], some[R * 5];
    tfm_rng rng;
    tfm_rng_seed(&rng, 4);
    fill(w, (size_t)N * K, &rng);
    fill(x, (size_t)R * K, &rng);
    const nn_panel_rows r = {.rows = w, .N = N, .K = K, .type = TFM_COMPUTE_FLOAT32};
    made m = make_all(&r);
    nn_packed_linear borrowed, gathered;
    CHECK(nn_borrow_panels(&borrowed, m.words, NULL, NULL, NULL, N, K, NN_KERNEL_AVX2) == TFM_OK);
    const int32_t cols[5] = {69, 0, 35, 69, 16};
    tfm_buf mem;
    tfm_buf_init(&mem);
    CHECK(nn_packed_gather(&gathered, &borrowed, cols, 5, &mem) == TFM_OK);
    nn_packed_forward(all, x, &borrowed, R, NULL);
    nn_packed_forward(some, x, &gathered, R, NULL);
    int wrong = 0;
    for (int i = 0; i < R; i++)
        for (int j = 0; j < 5; j++) wrong += some[i * 5 + j] != all[i * N + cols[j]];
    CHECK_MSG(wrong == 0, "%d gathered outputs differ from the whole product's", wrong);
    tfm_buf_free(&mem);
    made_free(&m);
}

/* int8 and bf16: the panels made here and those nn_pack_int8 and
 * nn_pack_bf16 make, under every kernel of the type this CPU runs. */
static void test_quantized_panels(void)
{
    const nn_kernel kernels[] = {NN_KERNEL_INT8_VNNI, NN_KERNEL_INT8_AVX512BW,
                                 NN_KERNEL_INT8_AVX2, NN_KERNEL_INT8_C,
                                 NN_KERNEL_BF16_AVX512, NN_KERNEL_BF16_AVX512BW,
                                 NN_KERNEL_BF16_AVX2, NN_KERNEL_BF16_C};
    const int Ns[] = {1, 31, 32, 33, 70}, Ks[] = {1, 3, 7, 32, 37};
    static float w[MAXN * MAXK], bias[MAXN], scale[MAXN];
    static int8_t q[MAXN * MAXK];
    static uint16_t h[MAXN * MAXK];
    tfm_rng rng;
    tfm_rng_seed(&rng, 5);
    int cases = 0, differ = 0, refused = 0;
    for (size_t ki = 0; ki < sizeof kernels / sizeof kernels[0]; ki++) {
        if (!nn_packed_kernel_runs(kernels[ki])) continue;
        const bool int8 = nn_kernel_is_int8(kernels[ki]);
        for (size_t n = 0; n < sizeof Ns / sizeof Ns[0]; n++)
            for (size_t k = 0; k < sizeof Ks / sizeof Ks[0]; k++) {
                const int N = Ns[n], K = Ks[k];
                fill(w, (size_t)N * K, &rng);
                fill(bias, (size_t)N, &rng);
                nn_packed_linear packed, borrowed;
                nn_panel_rows r = {.N = N, .K = K};
                if (int8) {
                    nn_quantize_int8(q, scale, w, (size_t)N, (size_t)K);
                    CHECK(nn_pack_int8(&packed, q, scale, bias, N, K, kernels[ki]) == TFM_OK);
                    r = (nn_panel_rows){q, scale, N, K, TFM_COMPUTE_INT8};
                } else {
                    nn_round_bf16(h, w, (size_t)N * K);
                    CHECK(nn_pack_bf16(&packed, h, bias, N, K, kernels[ki]) == TFM_OK);
                    r = (nn_panel_rows){h, NULL, N, K, TFM_COMPUTE_BF16};
                }
                made m = make_all(&r);
                refused += nn_borrow_panels(&borrowed, m.words, m.scale, m.sums, bias, N, K,
                                            kernels[ki]) != TFM_OK;
                differ += compare_products(&packed, &borrowed, N, K, &rng);
                nn_packed_linear_free(&packed);
                nn_packed_linear_free(&borrowed);
                made_free(&m);
                cases++;
            }
    }
    CHECK_MSG(cases > 0 && refused == 0 && differ == 0, "%d of %d shapes differ, %d refused",
              differ, cases, refused);
}

/* ---- a whole model ------------------------------------------------------------------ */

/* A small model of odd sizes: D 16, F 36, vocabularies of 37 and 41. */
static tfm_config odd_config(bool shared)
{
    tfm_config c;
    tfm_config_preset("tiny", &c, NULL);
    c.d_model = 16;
    c.d_ff = 36;
    c.n_heads = 2;
    c.n_encoder_layers = 2;
    c.n_decoder_layers = 2;
    c.max_positions = 40;
    c.shared_embeddings = shared;
    c.src_vocab_size = shared ? 41 : 37;
    c.tgt_vocab_size = 41;
    return c;
}

enum { S = 6, T = 5 };

/* The encoder's states of src and T decoder steps' log-probabilities of m
 * after packing it as encode and decode do. */
static void run_model(tfm_model *m, const int32_t *src, const int32_t *tgt, float *states,
                      float *logp)
{
    tfm_error err;
    CHECK_MSG(tfm_model_pack_for_encoding(m, &err) == TFM_OK, "%s", err.msg);
    CHECK_MSG(tfm_model_pack_for_decoding(m, &err) == TFM_OK, "%s", err.msg);
    tfm_encoder *e;
    CHECK(tfm_encoder_create(m, &e, &err) == TFM_OK);
    const int32_t *ids[1] = {src};
    int len = S;
    CHECK(tfm_encoder_forward(e, 1, ids, &len, states, &err) == TFM_OK);
    tfm_encoder_free(e);
    tfm_decoder *d;
    int row = 0;
    const float *sp = states;
    CHECK(tfm_decoder_create(m, &d, &err) == TFM_OK);
    CHECK(tfm_decoder_start(d, 1, &sp, &len, 1, &row, T, &err) == TFM_OK);
    for (int t = 0; t < T; t++)
        CHECK(tfm_decoder_step(d, &tgt[t], logp + (size_t)t * m->config.tgt_vocab_size, &err) ==
              TFM_OK);
    tfm_decoder_free(d);
}

static void test_packed_model(void)
{
    char plain[256], packed[256];
    const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(plain, sizeof plain, "%s/tfm-test-panels-%d.st", dir, (int)getpid());
    snprintf(packed, sizeof packed, "%s/tfm-test-panels-%d.p.st", dir, (int)getpid());
    static const tfm_compute_type types[3] = {TFM_COMPUTE_FLOAT32, TFM_COMPUTE_INT8,
                                              TFM_COMPUTE_BF16};
    for (int shared = 0; shared < 2; shared++)
        for (int ti = 0; ti < 3; ti++) {
            const char *name = tfm_compute_type_name(types[ti]);
            tfm_config c = odd_config(shared);
            tfm_model *m = test_nudged_model(&c, 40 + (uint64_t)shared);
            if (!m) return;
            tfm_error err;
            if (types[ti] != TFM_COMPUTE_FLOAT32)
                CHECK(tfm_model_quantize(m, types[ti], &err) == TFM_OK);
            CHECK(tfm_model_save(m, plain, NULL, &err) == TFM_OK);
            CHECK_MSG(tfm_model_save_packed(m, packed, &err) == TFM_OK, "%s", err.msg);
            tfm_model_free(m);
            int32_t src[S], tgt[T];
            tfm_rng rng;
            tfm_rng_seed(&rng, 8);
            for (int i = 0; i < S; i++) src[i] = 4 + (int32_t)tfm_rng_below(&rng, 30);
            for (int i = 0; i < T; i++) tgt[i] = 4 + (int32_t)tfm_rng_below(&rng, 30);
            tgt[0] = c.bos_id;
            static float st_a[S * 16], st_b[S * 16], lp_a[T * 41], lp_b[T * 41];
            tfm_model *a = NULL, *b = NULL;
            CHECK(tfm_model_load_for_inference(plain, TFM_COMPUTE_DEFAULT, &a, &err) == TFM_OK);
            CHECK_MSG(tfm_model_load_for_inference(packed, TFM_COMPUTE_DEFAULT, &b, &err) ==
                          TFM_OK,
                      "%s", err.msg);
            if (!a || !b) {
                tfm_model_free(a);
                tfm_model_free(b);
                continue;
            }
            const bool in_place = types[ti] != TFM_COMPUTE_FLOAT32 ||
                                  nn_packed_best_kernel() != NN_KERNEL_SGEMM;
            CHECK_MSG((b->file_panels != NULL) == in_place && b->float_weights == !in_place,
                      "%s: the packed file's matrices are read in place", name);
            run_model(a, src, tgt, st_a, lp_a);
            run_model(b, src, tgt, st_b, lp_b);
            CHECK_MSG(memcmp(st_a, st_b, sizeof st_a) == 0 && memcmp(lp_a, lp_b, sizeof lp_a) == 0,
                      "%s, %s embeddings: the packed file computes as the plain one", name,
                      shared ? "shared" : "separate");
            /* the panels are the file's, not copies */
            const nn_packed_linear *out = &b->packed->output;
            CHECK(!in_place || (out->borrowed && b->packed->decoder[1].fc2.borrowed));
            tfm_model_free(a);
            tfm_model_free(b);
            /* every other reader reads the file as the model it also is */
            tfm_model *whole = NULL, *orig = NULL;
            CHECK(tfm_model_load(packed, &whole, &err) == TFM_OK);
            CHECK(tfm_model_load(plain, &orig, &err) == TFM_OK);
            if (whole && orig)
                CHECK_MSG(memcmp(whole->data, orig->data,
                                 tfm_params_count(&c) * sizeof(float)) == 0 &&
                              whole->compute == orig->compute,
                          "%s: tfm_model_load reads the packed file as the plain one", name);
            tfm_model_free(whole);
            tfm_model_free(orig);
        }
    remove(plain);
    remove(packed);
}

static void write_bytes(const char *path, const void *bytes, size_t n)
{
    FILE *out = fopen(path, "wb");
    CHECK(out != NULL);
    if (!out) return;
    CHECK(fwrite(bytes, 1, n, out) == n);
    CHECK(fclose(out) == 0);
}

/* A packed file cut short, or whose panels' metadata says another width:
 * a clear error, no model. */
static void test_bad_packed_files(void)
{
    char path[256], cut[256];
    const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(path, sizeof path, "%s/tfm-test-panels-bad-%d.st", dir, (int)getpid());
    snprintf(cut, sizeof cut, "%s/tfm-test-panels-cut-%d.st", dir, (int)getpid());
    tfm_config c = odd_config(true);
    tfm_model *m = test_nudged_model(&c, 50);
    if (!m) return;
    tfm_error err;
    CHECK(tfm_model_save_packed(m, path, &err) == TFM_OK);
    tfm_model_free(m);
    FILE *in = fopen(path, "rb");
    static unsigned char bytes[1 << 20];
    size_t n = in ? fread(bytes, 1, sizeof bytes, in) : 0;
    if (in) fclose(in);
    CHECK(n > 1000 && n < sizeof bytes);
    write_bytes(cut, bytes, n - 100);
    tfm_model *got = (tfm_model *)&n;
    CHECK(tfm_model_load_for_inference(cut, TFM_COMPUTE_DEFAULT, &got, &err) != TFM_OK &&
          got == NULL && err.msg[0]);
    /* the width 32 written as 16 (same length: the header stays whole) */
    unsigned char *at = memmem(bytes, n, "\"panels\":\"32\"", 13);
    CHECK(at != NULL);
    if (at) memcpy(at, "\"panels\":\"16\"", 13);
    write_bytes(cut, bytes, n);
    got = (tfm_model *)&n;
    CHECK(tfm_model_load_for_inference(cut, TFM_COMPUTE_DEFAULT, &got, &err) ==
              TFM_ERR_UNSUPPORTED &&
          got == NULL);
    CHECK_MSG(strstr(err.msg, "'panels' is '16'"), "%s", err.msg);
    /* a panel tensor renamed: the one missing is named */
    if (at) memcpy(at, "\"panels\":\"32\"", 13);
    at = memmem(bytes, n, "fc1.weight.panels", 17);
    CHECK(at != NULL);
    if (at) memcpy(at, "fc1.weight.panelz", 17);
    write_bytes(cut, bytes, n);
    got = (tfm_model *)&n;
    CHECK(tfm_model_load_for_inference(cut, TFM_COMPUTE_DEFAULT, &got, &err) == TFM_ERR_FORMAT &&
          got == NULL);
    CHECK_MSG(strstr(err.msg, "fc1.weight.panels"), "%s", err.msg);
    remove(path);
    remove(cut);
}

int main(void)
{
    RUN(test_float_panels);
    RUN(test_wide_gather);
    RUN(test_quantized_panels);
    RUN(test_packed_model);
    RUN(test_bad_packed_files);
    CHECK_DONE();
}
