/* test_shortlist.c - lexical shortlists (lib/search/shortlist.c) and the
 * restricted output layer they drive (nn_packed_gather,
 * tfm_decoder_restrict, tfm_search_input.vocab).
 *
 * Properties: learning keeps the most frequent targets and, per source
 * piece, the others by p(t | s), ties to the smaller id; a file loads as it
 * was saved, and a file with a wrong entry, a wrong format or another
 * model's sizes is refused; gathered columns of every packed kernel this
 * CPU runs compute bit for bit what the whole layer computes; a restricted
 * decoder writes the same logits at its ids and -infinity elsewhere, with
 * the statistics of the restricted row; a search over every id equals the
 * unrestricted one exactly, and one over a subset chooses only from it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "nn/layers.h"
#include "testmodel.h"
#include "tfm/safetensors.h"
#include "tfm/search.h"

/* ---- learning ----------------------------------------------------------------------- */

/* Source pieces 0..3, target pieces 0..9.  Target 9 is the most frequent
 * (in every pair), so it is the frequent one and no piece's candidate. */
static tfm_shortlist *learn_toy(const tfm_shortlist_params *p)
{
    static const int32_t src[][3] = {{0, 1, -1}, {0, 2, -1}, {0, 1, 1}, {3, -1, -1}};
    static const int32_t tgt[][4] = {{5, 6, 9, 9}, {5, 7, 9, -1}, {6, 5, 9, 8}, {9, 4, -1, -1}};
    tfm_shortlist_counter *c;
    tfm_error err;
    if (tfm_shortlist_counter_create(4, 10, &c, &err) != TFM_OK) return NULL;
    for (int i = 0; i < 4; i++) {
        size_t n = 0, m = 0;
        while (n < 3 && src[i][n] >= 0) n++;
        while (m < 4 && tgt[i][m] >= 0) m++;
        CHECK(tfm_shortlist_count(c, src[i], n, tgt[i], m, &err) == TFM_OK);
    }
    const int32_t bad = 10, ok = 0;
    CHECK(tfm_shortlist_count(c, &ok, 1, &bad, 1, &err) == TFM_ERR_RANGE);
    CHECK(strstr(err.msg, "target id 10") != NULL);
    tfm_shortlist *sl = NULL;
    CHECK(tfm_shortlist_finish(c, p, &sl, &err) == TFM_OK);
    tfm_shortlist_counter_free(c);
    return sl;
}

static void test_learn(void)
{
    tfm_shortlist_params p = {.per_source = 3, .frequent = 1};
    tfm_shortlist *sl = learn_toy(&p);
    if (!sl) return;
    CHECK(tfm_shortlist_frequent(sl) == 1 && tfm_shortlist_per_source(sl) == 3);
    const float *prob;
    /* piece 0 is in pairs 1-3: 5 in all three (1), 6 in two (2/3), 7 and 8
     * in one each (1/3; 7 first, the smaller id) */
    const int32_t *cand = tfm_shortlist_candidates(sl, 0, &prob);
    CHECK(cand[0] == 5 && cand[1] == 6 && cand[2] == 7);
    CHECK_NEAR(prob[0], 1.0, 1e-6);
    CHECK_NEAR(prob[1], 2.0 / 3, 1e-6);
    CHECK_NEAR(prob[2], 1.0 / 3, 1e-6);
    /* piece 1 is in pairs 1 and 3 (twice in 3: counted once) */
    cand = tfm_shortlist_candidates(sl, 1, &prob);
    CHECK(cand[0] == 5 && cand[1] == 6 && cand[2] == 8);
    CHECK_NEAR(prob[0], 1.0, 1e-6);
    /* piece 3: target 4 alone, then nothing */
    cand = tfm_shortlist_candidates(sl, 3, &prob);
    CHECK(cand[0] == 4 && cand[1] == -1 && cand[2] == -1 && prob[1] == 0.0f);

    tfm_vocab_set set;
    tfm_error err;
    CHECK(tfm_vocab_set_init(&set, 10, &err) == TFM_OK);
    for (int round = 0; round < 2; round++) { /* the second after a clear */
        tfm_vocab_set_clear(&set);
        tfm_shortlist_add_frequent(sl, &set);
        const int32_t src[] = {3, 1, 3, 99};
        tfm_shortlist_add_source(sl, src, 4, 2, &set); /* the 2 best of 3 and 1; 99 ignored */
        tfm_vocab_set_sort(&set);
        const int32_t want[] = {4, 5, 6, 9};
        CHECK_MSG(set.n == 4 && memcmp(set.ids, want, sizeof want) == 0, "%d ids", set.n);
    }
    tfm_vocab_set_free(&set);
    tfm_shortlist_free(sl);
}

/* ---- the file ------------------------------------------------------------------------ */

static void temp_path(char *out, size_t size, const char *name)
{
    const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(out, size, "%s/tfm-test-shortlist-%d-%s", dir, (int)getpid(), name);
}

/* Writes a shortlist file by hand: 2 source pieces, 6 targets. */
static void write_by_hand(const char *path, const char *format, const int32_t *cand,
                          const float *probs)
{
    tfm_safetensors_writer *w = tfm_safetensors_writer_create();
    tfm_error err;
    const int32_t frequent[1] = {0};
    const int64_t fs[1] = {1}, cs[2] = {2, 2};
    CHECK(tfm_safetensors_writer_add_metadata(w, "format", format, &err) == TFM_OK);
    CHECK(tfm_safetensors_writer_add_metadata(w, "version", "1", &err) == TFM_OK);
    CHECK(tfm_safetensors_writer_add_metadata(w, "src_vocab_size", "2", &err) == TFM_OK);
    CHECK(tfm_safetensors_writer_add_metadata(w, "tgt_vocab_size", "6", &err) == TFM_OK);
    CHECK(tfm_safetensors_writer_add_tensor(w, "frequent", TFM_I32, 1, fs, frequent, &err) ==
          TFM_OK);
    CHECK(tfm_safetensors_writer_add_tensor(w, "candidates", TFM_I32, 2, cs, cand, &err) ==
          TFM_OK);
    CHECK(tfm_safetensors_writer_add_tensor(w, "probs", TFM_F32, 2, cs, probs, &err) == TFM_OK);
    CHECK(tfm_safetensors_write(w, path, &err) == TFM_OK);
    tfm_safetensors_writer_free(w);
}

static void test_file(void)
{
    tfm_shortlist_params p = {.per_source = 3, .frequent = 2};
    tfm_shortlist *sl = learn_toy(&p), *back = NULL;
    if (!sl) return;
    char path[512];
    temp_path(path, sizeof path, "a.st");
    tfm_error err;
    CHECK(tfm_shortlist_save(sl, path, &err) == TFM_OK);
    CHECK_MSG(tfm_shortlist_load(path, &back, &err) == TFM_OK, "%s", err.msg);
    if (back) {
        CHECK(tfm_shortlist_frequent(back) == 2 && tfm_shortlist_per_source(back) == 3);
        CHECK(tfm_shortlist_src_vocab_size(back) == 4 && tfm_shortlist_tgt_vocab_size(back) == 10);
        for (int s = 0; s < 4; s++) {
            const float *pa, *pb;
            const int32_t *a = tfm_shortlist_candidates(sl, s, &pa);
            const int32_t *b = tfm_shortlist_candidates(back, s, &pb);
            CHECK(memcmp(a, b, 3 * sizeof *a) == 0 && memcmp(pa, pb, 3 * sizeof *pa) == 0);
        }
    }
    tfm_shortlist_free(back);
    tfm_shortlist_free(sl);

    /* by hand: a good file, then one wrong thing at a time */
    const int32_t good[4] = {3, 2, 5, -1};
    const float good_p[4] = {0.5f, 0.25f, 1.0f, 0.0f};
    write_by_hand(path, "tfm-shortlist", good, good_p);
    back = NULL;
    CHECK_MSG(tfm_shortlist_load(path, &back, &err) == TFM_OK, "%s", err.msg);
    tfm_shortlist_free(back);
    struct {
        int32_t cand[4];
        float probs[4];
        const char *format, *says;
    } bad[] = {
        {{3, 3, 5, -1}, {0.5f, 0.25f, 1, 0}, "tfm-shortlist", "candidate 2 is 3"},
        {{3, 0, 5, -1}, {0.5f, 0.25f, 1, 0}, "tfm-shortlist", "candidate 2 is 0"}, /* frequent */
        {{3, 6, 5, -1}, {0.5f, 0.25f, 1, 0}, "tfm-shortlist", "candidate 2 is 6"},
        {{-1, 2, 5, -1}, {0, 0.25f, 1, 0}, "tfm-shortlist", "candidate 2 is 2"}, /* after the end */
        {{3, 2, 5, -1}, {0.5f, 1.5f, 1, 0}, "tfm-shortlist", "(p 1.5)"},
        {{3, 2, 5, -1}, {0.5f, 0.25f, 1, 0}, "tfm-model", "not a shortlist"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_by_hand(path, bad[i].format, bad[i].cand, bad[i].probs);
        back = NULL;
        CHECK_MSG(tfm_shortlist_load(path, &back, &err) == TFM_ERR_FORMAT && !back, "case %zu",
                  i);
        CHECK_MSG(strstr(err.msg, bad[i].says) && strstr(err.msg, path), "case %zu: %s", i,
                  err.msg);
        tfm_shortlist_free(back);
    }
    unlink(path);
}

/* ---- gathered columns ------------------------------------------------------------------ */

/* Every packed kernel this CPU runs: out of the gathered layer equals the
 * same columns of the whole layer's, bit for bit. */
static void test_gather_bits(void)
{
    enum { N = 75, K = 21, R = 5, n = 9 };
    const int32_t cols[n] = {0, 3, 15, 16, 31, 32, 50, 63, 74};
    float w[N * K], x[R * K], full[R * N], part[R * n];
    int8_t q[N * K];
    float scale[N];
    uint16_t wb[N * K];
    tfm_rng rng;
    tfm_rng_seed(&rng, 5);
    for (int i = 0; i < N * K; i++) w[i] = tfm_rng_float(&rng) - 0.5f;
    for (int i = 0; i < R * K; i++) x[i] = 2 * tfm_rng_float(&rng) - 1;
    nn_quantize_int8(q, scale, w, N, K);
    nn_round_bf16(wb, w, N * K);
    /* the gathers' memory, reused by every kernel and starting as garbage:
     * each gather must zero its own padding */
    tfm_buf memory;
    tfm_buf_init(&memory);
    void *garbage = tfm_buf_array(&memory, 1 << 16, 1);
    CHECK(garbage != NULL);
    if (garbage) memset(garbage, 0xff, 1 << 16);
    int tried = 0;
    for (int k = NN_KERNEL_AVX2; k <= NN_KERNEL_BF16_AVX512; k++) {
        if (!nn_packed_kernel_runs((nn_kernel)k)) continue;
        nn_packed_linear whole, some;
        tfm_status st = nn_kernel_is_int8((nn_kernel)k)
                            ? nn_pack_int8(&whole, q, scale, NULL, N, K, (nn_kernel)k)
                        : nn_kernel_is_bf16((nn_kernel)k)
                            ? nn_pack_bf16(&whole, wb, NULL, N, K, (nn_kernel)k)
                            : nn_pack_linear_for(&whole, w, NULL, N, K, (nn_kernel)k);
        CHECK(st == TFM_OK);
        CHECK(nn_packed_gather(&some, &whole, cols, n, &memory) == TFM_OK);
        size_t bytes = nn_packed_scratch_bytes(&whole);
        void *scratch = bytes ? malloc(bytes) : NULL;
        nn_packed_forward(full, x, &whole, R, scratch);
        nn_packed_forward(part, x, &some, R, scratch);
        int differ = 0;
        for (int r = 0; r < R; r++)
            for (int j = 0; j < n; j++)
                differ += memcmp(&part[r * n + j], &full[r * N + cols[j]], sizeof(float)) != 0;
        CHECK_MSG(differ == 0, "kernel %d: %d values differ", k, differ);
        free(scratch);
        nn_packed_linear_free(&whole);
        tried++;
    }
    tfm_buf_free(&memory);
    CHECK(tried >= 2); /* the plain C int8 and bf16 kernels run anywhere */
}

/* ---- the restricted decoder and search ---------------------------------------------------- */

static tfm_config test_config(void)
{
    tfm_config c;
    tfm_config_preset("tiny", &c, NULL);
    c.d_model = 16;
    c.d_ff = 32;
    c.n_heads = 2;
    c.n_encoder_layers = 2;
    c.n_decoder_layers = 2;
    c.max_positions = 40;
    c.src_vocab_size = c.tgt_vocab_size = 70;
    return c;
}

/* Restricted to ids, each step's logits at ids are the whole row's, the
 * rest -infinity; max, argmax and log_sum are the restricted row's; in
 * float32, int8 and bf16. */
static void test_restricted_decoder(void)
{
    enum { S = 6, T = 5, n = 12 };
    const int32_t ids[n] = {0, 1, 2, 3, 7, 16, 31, 32, 40, 55, 68, 69};
    const tfm_compute_type types[] = {TFM_COMPUTE_FLOAT32, TFM_COMPUTE_INT8, TFM_COMPUTE_BF16};
    for (int ti = 0; ti < 3; ti++) {
        tfm_config c = test_config();
        tfm_model *m = test_nudged_model(&c, 40 + ti);
        if (!m) return;
        const int V = c.tgt_vocab_size;
        tfm_error err;
        CHECK(tfm_model_set_compute_type(m, types[ti], &err) == TFM_OK);
        CHECK(tfm_model_pack_for_decoding(m, &err) == TFM_OK);
        CHECK(tfm_model_pack_for_encoding(m, &err) == TFM_OK);
        int32_t src[S] = {4, 9, 13, 22, 5, 2}, tgt[T] = {1, 7, 40, 55, 3};
        float states[S * 16];
        tfm_encoder *e;
        CHECK(tfm_encoder_create(m, &e, &err) == TFM_OK);
        const int32_t *sp_ids = src;
        int src_len = S, row = 0;
        CHECK(tfm_encoder_forward(e, 1, &sp_ids, &src_len, states, &err) == TFM_OK);
        tfm_decoder *d[2];
        const float *sp = states;
        for (int k = 0; k < 2; k++) {
            CHECK(tfm_decoder_create(m, &d[k], &err) == TFM_OK);
            CHECK(tfm_decoder_start(d[k], 1, &sp, &src_len, 1, &row, T, &err) == TFM_OK);
        }
        CHECK(tfm_decoder_restrict(d[1], ids, n, &err) == TFM_OK);
        const int32_t unsorted[2] = {5, 3}, outside[1] = {70};
        CHECK(tfm_decoder_restrict(d[0], unsorted, 2, &err) == TFM_ERR_ARG);
        CHECK(tfm_decoder_restrict(d[0], outside, 1, &err) == TFM_ERR_ARG);
        CHECK(tfm_decoder_restrict(d[0], NULL, 0, &err) == TFM_OK); /* the whole row again */
        int differ = 0;
        /* the caller's buffers: one kept from step to step (the step writes
         * the ids alone in it after the first, and the caller forbidding an
         * id in between changes nothing), one new at step 3 (filled whole) */
        float kept[70], fresh[70];
        for (int v = 0; v < 70; v++) kept[v] = fresh[v] = 7.0f;
        for (int t = 0; t < T; t++) {
            float whole[70], *part = t == 3 ? fresh : kept;
            tfm_logit_stats a, b;
            CHECK(tfm_decoder_step_logits(d[0], &tgt[t], whole, &a, &err) == TFM_OK);
            CHECK(tfm_decoder_step_logits(d[1], &tgt[t], part, &b, &err) == TFM_OK);
            float max = -INFINITY;
            int32_t arg = -1;
            int j = 0;
            for (int v = 0; v < V; v++) {
                if (j < n && ids[j] == v) {
                    differ += memcmp(&part[v], &whole[v], sizeof(float)) != 0;
                    if (whole[v] > max) max = whole[v], arg = v;
                    j++;
                } else {
                    differ += part[v] != -INFINITY;
                }
            }
            double sum = 0;
            for (int i = 0; i < n; i++) sum += exp((double)whole[ids[i]] - max);
            CHECK(b.max == max && b.argmax == arg);
            CHECK_NEAR(b.log_sum, log(sum), 1e-5);
            part[ids[t]] = -INFINITY; /* as search_constrain forbids an id */
        }
        CHECK_MSG(differ == 0, "compute type %d: %d logits differ", ti, differ);
        for (int k = 0; k < 2; k++) tfm_decoder_free(d[k]);
        tfm_encoder_free(e);
        tfm_model_free(m);
    }
}

/* A search over every id is the unrestricted search, bit for bit; over a
 * subset it picks from the subset only; </s> or a prefix id left out is
 * refused. */
static void test_search_vocab(void)
{
    enum { B = 4, S = 7 };
    tfm_config c = test_config();
    tfm_model *m = test_nudged_model(&c, 61);
    if (!m) return;
    const int V = c.tgt_vocab_size;
    tfm_error err;
    CHECK(tfm_model_pack_for_decoding(m, &err) == TFM_OK);
    int32_t src[B][S];
    const int32_t *sp[B];
    int lens[B];
    tfm_rng rng;
    tfm_rng_seed(&rng, 3);
    for (int i = 0; i < B; i++) {
        lens[i] = 2 + i;
        for (int j = 0; j < lens[i]; j++) src[i][j] = 4 + (int32_t)tfm_rng_below(&rng, 60);
        sp[i] = src[i];
    }
    float *states = malloc(sizeof(float) * B * S * 16);
    const float *st[B];
    tfm_encoder *e;
    CHECK(tfm_encoder_create(m, &e, &err) == TFM_OK);
    CHECK(tfm_encoder_forward(e, B, sp, lens, states, &err) == TFM_OK);
    for (int i = 0, off = 0; i < B; off += lens[i], i++) st[i] = states + (size_t)off * 16;
    int32_t all[70], some[20];
    for (int v = 0; v < V; v++) all[v] = v;
    int n_some = 0;
    for (int v = 0; v < V; v += 4) some[n_some++] = v; /* 0 (pad) .. 68, </s> (2) not among them */
    tfm_decoder *d;
    tfm_search *s[2];
    CHECK(tfm_decoder_create(m, &d, &err) == TFM_OK);
    for (int k = 0; k < 2; k++) CHECK(tfm_search_create(m, &s[k], &err) == TFM_OK);
    for (int beam = 1; beam <= 4; beam += 3) {
        tfm_search_params p = tfm_search_default_params();
        p.beam = beam;
        p.nbest = beam;
        p.max_length_offset = 6;
        tfm_search_input in = {.n_sentences = B, .states = st, .src_lens = lens};
        CHECK(tfm_search_run(s[0], d, &p, &in, &err) == TFM_OK);
        in.vocab = all;
        in.vocab_size = V;
        CHECK(tfm_search_run(s[1], d, &p, &in, &err) == TFM_OK);
        for (int i = 0; i < B; i++) {
            tfm_nbest a = tfm_search_result(s[0], i), b = tfm_search_result(s[1], i);
            CHECK(a.n == b.n);
            for (int h = 0; h < a.n && h < b.n; h++)
                CHECK(a.hyps[h].len == b.hyps[h].len &&
                      memcmp(a.hyps[h].ids, b.hyps[h].ids, sizeof(int32_t) * a.hyps[h].len) ==
                          0 &&
                      a.hyps[h].score == b.hyps[h].score);
        }
        /* a subset without </s> is refused; with it, only its ids come out */
        in.vocab = some;
        in.vocab_size = n_some;
        CHECK(tfm_search_run(s[1], d, &p, &in, &err) == TFM_ERR_ARG);
        CHECK(strstr(err.msg, "</s>") != NULL);
        some[0] = c.eos_id; /* 2 < 4: still sorted */
        CHECK(tfm_search_run(s[1], d, &p, &in, &err) == TFM_OK);
        for (int i = 0; i < B; i++) {
            tfm_nbest b = tfm_search_result(s[1], i);
            for (int h = 0; h < b.n; h++)
                for (int j = 0; j < b.hyps[h].len; j++)
                    CHECK(b.hyps[h].ids[j] % 4 == 0);
        }
        some[0] = 0;
    }
    for (int k = 0; k < 2; k++) tfm_search_free(s[k]);
    tfm_decoder_free(d);
    tfm_encoder_free(e);
    free(states);
    tfm_model_free(m);
}

int main(void)
{
    RUN(test_learn);
    RUN(test_file);
    RUN(test_gather_bits);
    RUN(test_restricted_decoder);
    RUN(test_search_vocab);
    CHECK_DONE();
}
