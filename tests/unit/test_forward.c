/* test_forward.c - the model's forward pass used for inference: the
 * incremental decoder against the full recomputation (every kind of
 * positions, relative ones included), batching and padding invariance of
 * the encoder and decoder, restricted attention and its band, empty
 * sentences, argument checks, the decoder's best step, models in int8 and
 * bf16 packed and released, and (when /usr/bin/python3 has NumPy) the whole
 * model against the independent reimplementation in forward_ref.py.  The
 * layer kernels: test_kernels.c.
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
#include "testdiff.h"
#include "testmodel.h"
#include "nn/layers.h"
#include "tfm/pass.h"

/* ---- helpers ------------------------------------------------------------------- */

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

/* A source [S] and a target [T] starting with <s>, ids of seed and seed + 1. */
static void fill_pair(const tfm_config *c, int32_t *src, int S, int32_t *tgt, int T,
                      uint64_t seed)
{
    fill_ids(src, S, c->src_vocab_size, seed);
    fill_ids(tgt, T, c->tgt_vocab_size, seed + 1);
    tgt[0] = c->bos_id;
}

/* Encodes one sentence alone. */
static tfm_status encode_one(tfm_encoder *e, const int32_t *ids, int len, float *states)
{
    tfm_error err;
    const int32_t *p[1] = {ids};
    tfm_status st = tfm_encoder_forward(e, 1, p, &len, states, &err);
    if (st) printf("encode: %s\n", err.msg);
    return st;
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
