/* test_pass.c - the training pass (tfm_model_forward_backward and
 * tfm_model_loss) besides its gradient, which test_model_gradients.c checks:
 * the training forward against the inference path; a batch against its
 * pairs one at a time, with empty sources and targets among them; a window
 * covering the sentences against full attention; accumulation, scaling,
 * dropout repeated from a seed, padding; the argument checks of the API.
 *
 * Threads: a whole batch on 1, 2 and 3 threads gives the same results bit
 * for bit (test_threads_bit_for_bit).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "testbatch.h"
#include "testgrad.h"
#include "testmodel.h"
#include "tfm/pass.h"
#include "core/chunks.h"
#include "pass/batch.h"

/* The sanitizer build (make check's build/asan) runs the passes some five
 * to ten times slower; there test_threads_bit_for_bit takes a smaller batch
 * (THREADS_PAIRS says what it still covers). */

/* tfm_model_loss's per-token log-probabilities (dropout off) equal those of
 * the encoder + tfm_decoder_forward_full, pair by pair. */
static void check_against_inference(const char *name, const tfm_config *c, uint64_t seed)
{
    tfm_model *m = test_nudged_model(c, seed);
    if (!m) return;
    const int V = c->tgt_vocab_size, D = c->d_model;
    const int src_lens[4] = {5, 0, 7, 2}, tgt_lens[4] = {4, 3, 6, 0};
    test_batch t;
    make_batch(&t, c, 4, src_lens, tgt_lens, seed + 1);
    tfm_pass_workspace *ws;
    tfm_encoder *enc;
    tfm_error err;
    CHECK(tfm_pass_workspace_create(m, &ws, &err) == TFM_OK);
    CHECK(tfm_encoder_create(m, &enc, &err) == TFM_OK);
    float token_lp[32];
    double sentence_lp[4];
    tfm_loss_sums sums;
    CHECK(tfm_model_loss(ws, &t.b, false, NULL, &sums, sentence_lp, token_lp, &err) == TFM_OK);
    int off = 0;
    double worst = 0, nll = 0;
    for (int b = 0; b < 4; b++) {
        const int S = src_lens[b], T = tgt_lens[b] + 1;
        float states[MAX_LEN * 8 + 1], logp[MAX_LEN * 12];
        int32_t dec_in[MAX_LEN];
        CHECK(D <= 8 && V <= 12);
        const int32_t *ids[1] = {t.src[b]};
        CHECK(tfm_encoder_forward(enc, 1, ids, &S, states, &err) == TFM_OK);
        dec_in[0] = c->bos_id;
        for (int i = 1; i < T; i++) dec_in[i] = t.tgt[b][i - 1];
        CHECK(tfm_decoder_forward_full(m, S ? states : NULL, S, dec_in, T, logp, &err) == TFM_OK);
        double sum = 0;
        for (int i = 0; i < T; i++) {
            int32_t label = i < T - 1 ? t.tgt[b][i] : c->eos_id;
            worst = fmax(worst, fabs(token_lp[off + i] - logp[i * V + label]));
            sum += logp[i * V + label];
        }
        CHECK_NEAR(sentence_lp[b], sum, 1e-4);
        nll -= sum;
        off += T;
    }
    CHECK_MSG(worst <= 1e-5, "%s: token log-probs differ by %g", name, worst);
    CHECK_NEAR(sums.nll, nll, 1e-4);
    CHECK(sums.n_tokens == off);
    tfm_encoder_free(enc);
    tfm_pass_workspace_free(ws);
    tfm_model_free(m);
}

static void test_loss_matches_inference(void)
{
    /* dropout set in the model: tfm_model_loss(dropout false) must ignore it */
    tfm_config c = tiny_config(false, true, TFM_POS_SINUSOIDAL, 0, 2);
    c.dropout = 0.3f;
    c.attention_dropout = 0.1f;
    check_against_inference("post-norm", &c, 41);
    c = tiny_config(true, false, TFM_POS_LEARNED, 2, 2);
    check_against_inference("pre-norm, learned, window 2", &c, 42);
    c = tiny_config(false, true, TFM_POS_NONE, 0, 2);
    c.relative_positions = 2;
    check_against_inference("post-norm, relative 2 alone", &c, 43);
    c = tiny_config(true, true, TFM_POS_LEARNED, 2, 2);
    c.relative_positions = 1;
    check_against_inference("pre-norm, learned + relative 1, window 2", &c, 44);
    /* every variant of imported models, forward */
    for (int v = 0; v < 2; v++) {
        c = tiny_config(v == 1, v == 0, TFM_POS_SINUSOIDAL_CONCAT, 0, 2);
        c.activation = v ? TFM_ACT_GELU_SIGMOID : TFM_ACT_SWISH;
        c.output_bias = c.decoder_start_zero = c.embedding_layer_norm = true;
        check_against_inference(v ? "Marian pre-norm, gelu" : "Marian post-norm, swish", &c,
                                45 + v);
    }
}

/* The loss and the gradient of a batch equal the sums over its pairs taken
 * one at a time, with empty sources and targets among them. */
static void check_batched_equals_single(const tfm_config *cp)
{
    tfm_config c = *cp;
    tfm_model *m = test_nudged_model(&c, 51);
    if (!m) return;
    const int src_lens[5] = {5, 0, 7, 2, 3}, tgt_lens[5] = {4, 3, 6, 0, 2};
    test_batch t;
    make_batch(&t, &c, 5, src_lens, tgt_lens, 52);
    tfm_pass_workspace *ws;
    tfm_error err;
    CHECK(tfm_pass_workspace_create(m, &ws, &err) == TFM_OK);
    const size_t n = tfm_params_count(&c);
    float *batched = calloc(n, sizeof *batched), *singles = calloc(n, sizeof *singles);
    tfm_loss_sums all, one, sum = {0, 0, 0};
    CHECK(tfm_model_forward_backward(ws, &t.b, NULL, 1.0f, batched, &all, &err) == TFM_OK);
    for (int b = 0; b < 5; b++) {
        tfm_pair_batch s = single(&t, b);
        /* the singles' gradients accumulate into one buffer */
        CHECK(tfm_model_forward_backward(ws, &s, NULL, 1.0f, singles, &one, &err) == TFM_OK);
        sum.loss += one.loss;
        sum.nll += one.nll;
        sum.n_tokens += one.n_tokens;
    }
    CHECK_NEAR(all.loss, sum.loss, 1e-5 * sum.loss);
    CHECK_NEAR(all.nll, sum.nll, 1e-5 * sum.nll);
    CHECK(all.n_tokens == sum.n_tokens && all.n_tokens == 4 + 3 + 6 + 0 + 2 + 5);
    double diff = 0, gmax = max_abs(batched, n);
    for (size_t i = 0; i < n; i++) diff = fmax(diff, fabs(batched[i] - singles[i]));
    CHECK_MSG(diff <= 1e-5 * gmax, "gradients differ by %g (largest %g)", diff, gmax);

    /* forward-only gives the same loss as the training forward without dropout */
    tfm_loss_sums fwd;
    CHECK(tfm_model_loss(ws, &t.b, false, NULL, &fwd, NULL, NULL, &err) == TFM_OK);
    CHECK(fwd.loss == all.loss && fwd.nll == all.nll);
    free(batched);
    free(singles);
    tfm_pass_workspace_free(ws);
    tfm_model_free(m);
}

static void test_batched_equals_single(void)
{
    tfm_config c = tiny_config(true, true, TFM_POS_LEARNED, 0, 2);
    check_batched_equals_single(&c);
    c = tiny_config(false, true, TFM_POS_NONE, 2, 2);
    c.relative_positions = 3;
    check_batched_equals_single(&c);
}

/* Training with a window no shorter than the sentences is training with
 * full attention (the same loss and gradients, to rounding), and with a
 * short window it is not. */
static void test_window_covering_equals_full(void)
{
    tfm_config c = tiny_config(true, true, TFM_POS_SINUSOIDAL, 0, 2);
    c.relative_positions = 3;
    tfm_model *m = test_nudged_model(&c, 81);
    if (!m) return;
    const int src_lens[3] = {5, 7, 3}, tgt_lens[3] = {4, 6, 2};
    test_batch t;
    make_batch(&t, &c, 3, src_lens, tgt_lens, 82);
    tfm_pass_workspace *ws;
    tfm_error err;
    CHECK(tfm_pass_workspace_create(m, &ws, &err) == TFM_OK);
    const size_t n = tfm_params_count(&c);
    const int windows[3] = {0, 8, 2};
    float *g[3];
    tfm_loss_sums sums[3];
    for (int w = 0; w < 3; w++) {
        m->config.attention_window = windows[w];
        g[w] = calloc(n, sizeof(float));
        CHECK(tfm_model_forward_backward(ws, &t.b, NULL, 1.0f, g[w], &sums[w], &err) == TFM_OK);
    }
    double same = 0, other = 0, gmax = max_abs(g[0], n);
    for (size_t i = 0; i < n; i++) {
        same = fmax(same, fabs(g[1][i] - g[0][i]));
        other = fmax(other, fabs(g[2][i] - g[0][i]));
    }
    CHECK_NEAR(sums[1].loss, sums[0].loss, 1e-6 * sums[0].loss);
    CHECK_MSG(same <= 1e-6 * gmax, "a covering window: gradients differ by %g (largest %g)", same,
              gmax);
    CHECK(fabs(sums[2].loss - sums[0].loss) > 1e-4 && other > 1e-3 * gmax);
    for (int w = 0; w < 3; w++) free(g[w]);
    tfm_pass_workspace_free(ws);
    tfm_model_free(m);
}

/* Gradients accumulate and scale; dropout steps repeat exactly from the same
 * seed; a <pad> label counts nowhere. */
static void test_accumulate_scale_repeat(void)
{
    tfm_config c = tiny_config(false, true, TFM_POS_SINUSOIDAL, 0, 1);
    c.dropout = 0.2f;
    c.attention_dropout = 0.1f;
    tfm_model *m = test_nudged_model(&c, 61);
    if (!m) return;
    const int src_lens[3] = {3, 4, 5}, tgt_lens[3] = {4, 2, 5};
    test_batch t;
    make_batch(&t, &c, 3, src_lens, tgt_lens, 62);
    tfm_pass_workspace *ws;
    tfm_error err;
    CHECK(tfm_pass_workspace_create(m, &ws, &err) == TFM_OK);
    const size_t n = tfm_params_count(&c);
    float *g1 = calloc(n, sizeof *g1), *g2 = calloc(n, sizeof *g2), *g3 = calloc(n, sizeof *g3);
    tfm_rng rng;
    tfm_loss_sums s1, s2, s3;
    tfm_rng_seed(&rng, 5);
    CHECK(tfm_model_forward_backward(ws, &t.b, &rng, 1.0f, g1, &s1, &err) == TFM_OK);
    tfm_rng after = rng;
    tfm_rng_seed(&rng, 5);
    CHECK(tfm_model_forward_backward(ws, &t.b, &rng, 1.0f, g2, &s2, &err) == TFM_OK);
    CHECK(memcmp(&after, &rng, sizeof rng) == 0);
    CHECK(s1.loss == s2.loss && memcmp(g1, g2, n * sizeof *g1) == 0); /* bit for bit */
    tfm_rng_seed(&rng, 5);
    CHECK(tfm_model_forward_backward(ws, &t.b, &rng, 1.0f, g2, &s2, &err) == TFM_OK);
    tfm_rng_seed(&rng, 5);
    CHECK(tfm_model_forward_backward(ws, &t.b, &rng, 0.25f, g3, &s3, &err) == TFM_OK);
    double d2 = 0, d3 = 0, gmax = max_abs(g1, n);
    for (size_t i = 0; i < n; i++) {
        d2 = fmax(d2, fabs(g2[i] - 2.0 * g1[i]));
        d3 = fmax(d3, fabs(g3[i] - 0.25 * g1[i]));
    }
    CHECK_MSG(d2 <= 1e-6 * gmax && d3 <= 1e-6 * gmax, "accumulate %g, scale %g", d2, d3);
    /* another seed, other masks */
    tfm_rng_seed(&rng, 6);
    CHECK(tfm_model_forward_backward(ws, &t.b, &rng, 1.0f, g3, &s3, &err) == TFM_OK);
    CHECK(s3.loss != s1.loss);

    /* a <pad> label: not counted, log-prob 0, and the other tokens unchanged */
    float lp_before[16], lp_after[16];
    tfm_loss_sums before, pad;
    CHECK(tfm_model_loss(ws, &t.b, false, NULL, &before, NULL, lp_before, &err) == TFM_OK);
    t.tgt[1][1] = c.pad_id; /* pair 1's second token: last before </s> */
    CHECK(tfm_model_loss(ws, &t.b, false, NULL, &pad, NULL, lp_after, &err) == TFM_OK);
    CHECK(pad.n_tokens == before.n_tokens - 1);
    CHECK(lp_after[5 + 1] == 0.0f);
    /* pair 0's tokens come before pair 1's and do not see it */
    for (int i = 0; i < 5; i++) CHECK_NEAR(lp_after[i], lp_before[i], 1e-6);
    free(g1);
    free(g2);
    free(g3);
    tfm_pass_workspace_free(ws);
    tfm_model_free(m);
}

/* A batch of B pairs of random lengths in [lo, hi], allocated. */
typedef struct big_batch {
    int32_t *ids;
    const int32_t **srcp, **tgtp;
    int *src_lens, *tgt_lens;
    tfm_pair_batch b;
} big_batch;

static void make_big_batch(big_batch *t, const tfm_config *c, int B, int lo, int hi,
                           uint64_t seed)
{
    tfm_rng rng;
    tfm_rng_seed(&rng, seed);
    t->ids = malloc((size_t)B * 2 * hi * sizeof *t->ids);
    t->srcp = malloc((size_t)B * sizeof *t->srcp);
    t->tgtp = malloc((size_t)B * sizeof *t->tgtp);
    t->src_lens = malloc((size_t)B * sizeof *t->src_lens);
    t->tgt_lens = malloc((size_t)B * sizeof *t->tgt_lens);
    for (int b = 0; b < B; b++) {
        int32_t *s = t->ids + (size_t)b * 2 * hi, *g = s + hi;
        for (int i = 0; i < hi; i++) {
            s[i] = 4 + (int32_t)tfm_rng_below(&rng, (uint64_t)c->src_vocab_size - 4);
            g[i] = 4 + (int32_t)tfm_rng_below(&rng, (uint64_t)c->tgt_vocab_size - 4);
        }
        t->srcp[b] = s;
        t->tgtp[b] = g;
        t->src_lens[b] = lo + (int)tfm_rng_below(&rng, (uint64_t)(hi - lo + 1));
        t->tgt_lens[b] = lo + (int)tfm_rng_below(&rng, (uint64_t)(hi - lo + 1));
    }
    t->src_lens[B / 2] = 0; /* an empty source among them */
    t->b = (tfm_pair_batch){B, t->srcp, t->src_lens, t->tgtp, t->tgt_lens};
}

static void free_big_batch(big_batch *t)
{
    free(t->ids);
    free(t->srcp);
    free(t->tgtp);
    free(t->src_lens);
    free(t->tgt_lens);
}

int openblas_get_num_threads(void);

/* check_threads' model width (d_model; d_ff twice it; the vocabulary V),
 * its batch's pairs and the thread counts it compares with one thread.  A
 * pass over rows goes on the threads when it has 4 chunks or more
 * (batch_for_rows; 16384 / width rows each): at D = 32 and V = 40, 180
 * pairs of 6 to 20 tokens make about 2300 source rows and 2500 target
 * rows, 4 chunks of 512 and more.  Under the sanitizers, where these passes
 * took a third of the gradient tests' time, a model twice as wide and 65 pairs
 * (about 830 source and 900 target rows: each pass still in 4 chunks, of
 * 256 rows at D = V = 64 and 128 at d_ff = 128, checked below; a quarter
 * fewer floats per pass, a third of the pairs and their attention), on 1
 * and 3 threads: 3 threads use every thread slot 2 do and split the chunks
 * unevenly, and 2 threads still run the batch without dropout, against its
 * pairs one by one. */
#if SANITIZED
enum { THREADS_D = 64, THREADS_V = 64, THREADS_PAIRS = 65 };
static const int THREAD_COUNTS[] = {1, 3};
#else
enum { THREADS_D = 32, THREADS_V = 40, THREADS_PAIRS = 180 };
static const int THREAD_COUNTS[] = {1, 2, 3};
#endif
enum { N_THREAD_COUNTS = sizeof THREAD_COUNTS / sizeof THREAD_COUNTS[0] };

/* The workspace's threads change nothing: a batch big enough that every
 * pass splits into several chunks gives the same loss, gradients, token
 * log-probabilities and generator state on 1, 2 and 3 threads
 * (THREAD_COUNTS), bit for bit, with dropout on the sublayers and the
 * attention; OpenBLAS's thread count is given back.  And the threaded
 * result is right: it equals the sum over the pairs taken one at a time
 * (which the tiny tests check against finite differences).  marian: a
 * gated activation with activation dropout and the embeddings' LayerNorm
 * too. */
static void check_threads(const char *name, bool pre_norm, int relative, bool marian,
                          uint64_t seed)
{
    tfm_config c = tiny_config(pre_norm, !pre_norm, pre_norm ? TFM_POS_LEARNED : TFM_POS_SINUSOIDAL,
                               pre_norm ? 3 : 0, 2);
    c.relative_positions = relative;
    if (marian) {
        c.activation = TFM_ACT_GELU_SIGMOID;
        c.activation_dropout = 0.1f;
        c.embedding_layer_norm = true;
    }
    c.d_model = THREADS_D;
    c.d_ff = 2 * THREADS_D;
    c.n_heads = 4;
    c.max_positions = 24;
    c.src_vocab_size = c.tgt_vocab_size = THREADS_V;
    c.dropout = 0.1f;
    c.attention_dropout = 0.1f;
    tfm_model *m = test_nudged_model(&c, seed);
    if (!m) return;
    big_batch t;
    make_big_batch(&t, &c, THREADS_PAIRS, 6, 20, seed + 1);
    int rows = 0, src_rows = 0;
    for (int b = 0; b < THREADS_PAIRS; b++) rows += t.tgt_lens[b] + 1, src_rows += t.src_lens[b];
    /* every pass over rows (D, d_ff or V wide) in 4 chunks at least, so on
     * the threads (batch_for_rows), on both sides */
    const int widths[3] = {c.d_model, c.d_ff, c.tgt_vocab_size};
    for (int i = 0; i < 3; i++) {
        const size_t chunk = batch_row_chunk((size_t)widths[i]);
        CHECK_MSG(tfm_chunk_count((size_t)rows, chunk) >= 4 &&
                      (i == 2 || tfm_chunk_count((size_t)src_rows, chunk) >= 4),
                  "%s: %d target rows, %d source rows: not 4 chunks of %zu", name, rows,
                  src_rows, chunk);
    }
    tfm_pass_workspace *ws;
    tfm_error err;
    CHECK(tfm_pass_workspace_create(m, &ws, &err) == TFM_OK);
    const size_t n = tfm_params_count(&c);
    float *g[N_THREAD_COUNTS], *lp[N_THREAD_COUNTS];
    tfm_loss_sums sums[N_THREAD_COUNTS], fsums[N_THREAD_COUNTS];
    tfm_rng after[N_THREAD_COUNTS];
    int blas = openblas_get_num_threads();
    for (int k = 0; k < N_THREAD_COUNTS; k++) {
        g[k] = calloc(n, sizeof(float));
        lp[k] = malloc((size_t)rows * sizeof(float));
        tfm_pass_workspace_set_threads(ws, THREAD_COUNTS[k]);
        tfm_rng rng;
        tfm_rng_seed(&rng, seed + 2);
        CHECK(tfm_model_forward_backward(ws, &t.b, &rng, 1.0f, g[k], &sums[k], &err) == TFM_OK);
        after[k] = rng;
        tfm_rng_seed(&rng, seed + 2);
        CHECK(tfm_model_loss(ws, &t.b, true, &rng, &fsums[k], NULL, lp[k], &err) == TFM_OK);
        CHECK(openblas_get_num_threads() == blas);
    }
    CHECK(THREAD_COUNTS[0] == 1);
    CHECK(sums[0].loss == fsums[0].loss); /* the forward alone draws the same masks */
    for (int k = 1; k < N_THREAD_COUNTS; k++) {
        CHECK_MSG(sums[k].loss == sums[0].loss && sums[k].nll == sums[0].nll,
                  "%s, %d threads: loss %.17g, one thread %.17g", name, THREAD_COUNTS[k],
                  sums[k].loss, sums[0].loss);
        CHECK_MSG(memcmp(g[k], g[0], n * sizeof(float)) == 0, "%s, %d threads: gradients differ",
                  name, THREAD_COUNTS[k]);
        CHECK(memcmp(lp[k], lp[0], (size_t)rows * sizeof(float)) == 0);
        CHECK(memcmp(&after[k], &after[0], sizeof after[0]) == 0);
    }

    /* without dropout, the threaded batch equals the sum of its pairs */
    m->config.dropout = m->config.attention_dropout = m->config.activation_dropout = 0;
    float *batched = calloc(n, sizeof(float)), *singles = calloc(n, sizeof(float));
    tfm_loss_sums all, one, sum = {0, 0, 0};
    tfm_pass_workspace_set_threads(ws, 2);
    CHECK(tfm_model_forward_backward(ws, &t.b, NULL, 1.0f, batched, &all, &err) == TFM_OK);
    tfm_pass_workspace_set_threads(ws, 1);
    for (int b = 0; b < THREADS_PAIRS; b++) {
        tfm_pair_batch s = {1, &t.srcp[b], &t.src_lens[b], &t.tgtp[b], &t.tgt_lens[b]};
        CHECK(tfm_model_forward_backward(ws, &s, NULL, 1.0f, singles, &one, &err) == TFM_OK);
        sum.loss += one.loss;
        sum.n_tokens += one.n_tokens;
    }
    CHECK(all.n_tokens == sum.n_tokens && all.n_tokens == rows);
    CHECK_NEAR(all.loss, sum.loss, 1e-5 * sum.loss);
    double diff = 0, gmax = max_abs(batched, n);
    for (size_t i = 0; i < n; i++) diff = fmax(diff, fabs(batched[i] - singles[i]));
    /* ~2e-4 of the largest here, as before threads: float sums over ~2700
     * rows of a nudged model's large gradients; a chunk lost or counted
     * twice would be O(1) */
    CHECK_MSG(diff <= 1e-3 * gmax, "%s: batched and single gradients differ by %g (largest %g)",
              name, diff, gmax);
    free(batched);
    free(singles);
    for (int k = 0; k < N_THREAD_COUNTS; k++) {
        free(g[k]);
        free(lp[k]);
    }
    free_big_batch(&t);
    tfm_pass_workspace_free(ws);
    tfm_model_free(m);
}

static void test_threads_bit_for_bit(void)
{
    check_threads("post-norm, shared, sinusoidal", false, 0, false, 91);
    check_threads("pre-norm, unshared, learned, window 3", true, 0, false, 92);
    /* each sentence's part of the relative tables' gradients added in order */
    check_threads("pre-norm, unshared, learned + relative 4, window 3", true, 4, false, 93);
    /* the embeddings' LayerNorm's weight and bias gradients, chunk by chunk */
    check_threads("post-norm, gelu-sigmoid, activation dropout, embedding LayerNorm", false, 0,
                  true, 94);
}

static void test_arguments(void)
{
    tfm_config c = tiny_config(false, true, TFM_POS_SINUSOIDAL, 0, 1);
    c.dropout = 0.1f;
    tfm_model *m = test_nudged_model(&c, 71);
    if (!m) return;
    const int src_lens[2] = {3, 4}, tgt_lens[2] = {2, 3};
    test_batch t;
    make_batch(&t, &c, 2, src_lens, tgt_lens, 72);
    tfm_pass_workspace *ws;
    tfm_error err;
    CHECK(tfm_pass_workspace_create(m, &ws, &err) == TFM_OK);
    const size_t n = tfm_params_count(&c);
    float *g = calloc(n, sizeof *g);
    tfm_rng rng;
    tfm_rng_seed(&rng, 1);
    tfm_loss_sums s;

    /* dropout without a generator */
    CHECK(tfm_model_forward_backward(ws, &t.b, NULL, 1.0f, g, &s, &err) == TFM_ERR_ARG);
    CHECK(tfm_model_loss(ws, &t.b, true, NULL, &s, NULL, NULL, &err) == TFM_ERR_ARG);
    /* an id outside the vocabulary, named in the message; grads untouched */
    t.tgt[1][2] = 12;
    CHECK(tfm_model_forward_backward(ws, &t.b, &rng, 1.0f, g, &s, &err) == TFM_ERR_RANGE);
    CHECK(strstr(err.msg, "pair 1") != NULL);
    t.tgt[1][2] = 5;
    t.src[0][0] = -1;
    CHECK(tfm_model_loss(ws, &t.b, false, NULL, &s, NULL, NULL, &err) == TFM_ERR_RANGE);
    t.src[0][0] = 5;
    /* too long: a target takes max_positions - 1 tokens, a source max_positions */
    t.tgt_lens[0] = 8;
    CHECK(tfm_model_loss(ws, &t.b, false, NULL, &s, NULL, NULL, &err) == TFM_ERR_RANGE);
    t.tgt_lens[0] = 7;
    t.src_lens[0] = 8;
    CHECK(tfm_model_loss(ws, &t.b, false, NULL, &s, NULL, NULL, &err) == TFM_OK);
    CHECK(s.n_tokens == 8 + 4);
    t.src_lens[0] = 9;
    CHECK(tfm_model_loss(ws, &t.b, false, NULL, &s, NULL, NULL, &err) == TFM_ERR_RANGE);
    t.src_lens[0] = -1;
    CHECK(tfm_model_loss(ws, &t.b, false, NULL, &s, NULL, NULL, &err) == TFM_ERR_RANGE);
    t.src_lens[0] = 3;
    t.b.B = -1;
    CHECK(tfm_model_loss(ws, &t.b, false, NULL, &s, NULL, NULL, &err) == TFM_ERR_ARG);
    CHECK(tfm_model_forward_backward(ws, &t.b, &rng, 1.0f, NULL, &s, &err) == TFM_ERR_ARG);
    for (size_t i = 0; i < n; i++) CHECK(g[i] == 0.0f);
    /* an empty batch is no work */
    t.b.B = 0;
    CHECK(tfm_model_forward_backward(ws, &t.b, &rng, 1.0f, g, &s, &err) == TFM_OK);
    CHECK(s.loss == 0 && s.nll == 0 && s.n_tokens == 0);
    for (size_t i = 0; i < n; i++) CHECK(g[i] == 0.0f);
    tfm_pass_workspace_free(NULL);
    free(g);
    tfm_pass_workspace_free(ws);
    tfm_model_free(m);
}

int main(void)
{
    RUN(test_loss_matches_inference);
    RUN(test_batched_equals_single);
    RUN(test_window_covering_equals_full);
    RUN(test_accumulate_scale_repeat);
    RUN(test_threads_bit_for_bit);
    RUN(test_arguments);
    CHECK_DONE();
}
