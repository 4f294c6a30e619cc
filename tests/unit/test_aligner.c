/* test_aligner.c - the teacher-forced pass over chosen targets that
 * decode --alignment reads its alignments from (tfm_aligner, lib/pass).
 *
 * What it checks:
 *   - its weights are inspect-attn's: for every decoder layer, the mean over
 *     the heads of the cross-attention that tfm_model_loss computes for the
 *     same (source ids, target) pairs and tfm_attention_gather gathers,
 *     within float rounding, from encoder states that tfm_encoder_forward
 *     made of those ids; post-norm and pre-norm, sinusoidal and learned
 *     positions, a restricted window with relative positions; several
 *     targets of one sentence (an n-best list), empty targets, an empty
 *     source;
 *   - the same with the model packed for decoding (the packed linear layers
 *     decode uses), and rows that are distributions in int8;
 *   - a batch of targets gives each target what it gets alone;
 *   - errors: a layer, a sentence, an id or a length out of range; no
 *     weights after a failed run or for a target out of range.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tfm/pass.h"
#include "tfm/view.h"
#include "testview.h"

enum { B = 4, MAXS = 10, MAXT = 9, N_TGT = 7 };

/* A tiny random model (the "tiny" preset, V tokens) of the given shape,
 * every parameter nudged off its initial value. */
static tfm_model *random_tiny_model(uint64_t seed, bool pre_norm, tfm_pos_kind pos, int window,
                                    int relative)
{
    tfm_config c;
    tfm_config_preset("tiny", &c, NULL);
    c.pre_norm = pre_norm;
    c.positions = pos;
    c.attention_window = window;
    c.relative_positions = relative;
    return nudged_model(c, seed, NULL);
}

/* Random ids in [4, V): no specials. */
static void random_ids(tfm_rng *rng, int32_t *ids, int n)
{
    for (int i = 0; i < n; i++) ids[i] = 4 + (int32_t)tfm_rng_below(rng, V - 4);
}

/* B sources (ids ended by </s>; sentence 1 empty) with their encoder
 * states, and N_TGT targets over them: two of sentence 0, two of the empty
 * sentence 1, the others one each, two targets empty. */
typedef struct fixture {
    int32_t src[B][MAXS];
    int src_lens[B];
    const int32_t *src_ptr[B];
    float *states;
    const float *state_of[B];
    int32_t tgt[N_TGT][MAXT];
    int tgt_lens[N_TGT];
    const int32_t *tgt_ptr[N_TGT];
    int sentence[N_TGT];
} fixture;

static bool fixture_make(fixture *f, tfm_model *m, uint64_t seed)
{
    memset(f, 0, sizeof *f);
    tfm_rng rng;
    tfm_rng_seed(&rng, seed);
    int total = 0;
    for (int s = 0; s < B; s++) {
        f->src_lens[s] = s == 1 ? 0 : 3 + (int)tfm_rng_below(&rng, MAXS - 3);
        if (f->src_lens[s] > 0) {
            random_ids(&rng, f->src[s], f->src_lens[s] - 1);
            f->src[s][f->src_lens[s] - 1] = TFM_ID_EOS;
        }
        f->src_ptr[s] = f->src[s];
        total += f->src_lens[s];
    }
    static const int sentence[N_TGT] = {0, 0, 1, 1, 2, 3, 2};
    static const int empty[N_TGT] = {0, 1, 0, 1, 0, 0, 0};
    for (int i = 0; i < N_TGT; i++) {
        f->sentence[i] = sentence[i];
        f->tgt_lens[i] = empty[i] ? 0 : 1 + (int)tfm_rng_below(&rng, MAXT - 1);
        random_ids(&rng, f->tgt[i], f->tgt_lens[i]);
        f->tgt_ptr[i] = f->tgt[i];
    }
    const int D = m->config.d_model;
    f->states = malloc((size_t)total * D * sizeof(float) + 1);
    tfm_encoder *enc = NULL;
    tfm_error err;
    bool ok = f->states && tfm_encoder_create(m, &enc, &err) == TFM_OK &&
              tfm_encoder_forward(enc, B, f->src_ptr, f->src_lens, f->states, &err) == TFM_OK;
    CHECK_MSG(ok, "encoder: %s", err.msg);
    for (int s = 0, off = 0; s < B; off += f->src_lens[s], s++)
        f->state_of[s] = f->states + (size_t)off * D;
    tfm_encoder_free(enc);
    return ok;
}

/* The aligner's weights of every layer against the training pass's mean
 * of the heads (what inspect-attn -f align reads), within tol. */
static void check_against_training(tfm_model *m, const fixture *f, double tol)
{
    tfm_error err;
    tfm_aligner *al = NULL;
    tfm_pass_workspace *ws = NULL;
    CHECK(tfm_aligner_create(m, &al, &err) == TFM_OK);
    CHECK(tfm_pass_workspace_create(m, &ws, &err) == TFM_OK);
    if (!al || !ws) goto done;
    /* the pairs as inspect-attn gives them: each target with its source's ids */
    const int32_t *pair_src[N_TGT];
    int pair_src_lens[N_TGT];
    for (int i = 0; i < N_TGT; i++) {
        pair_src[i] = f->src[f->sentence[i]];
        pair_src_lens[i] = f->src_lens[f->sentence[i]];
    }
    tfm_pair_batch batch = {N_TGT, pair_src, pair_src_lens, f->tgt_ptr, f->tgt_lens};
    CHECK(tfm_model_loss(ws, &batch, false, NULL, NULL, NULL, NULL, &err) == TFM_OK);
    tfm_tensor t;
    tfm_tensor_init(&t);
    double worst = 0.0;
    for (int l = 0; l < m->config.n_decoder_layers; l++) {
        tfm_status s = tfm_aligner_run(al, B, f->state_of, f->src_lens, N_TGT, f->sentence,
                                       f->tgt_ptr, f->tgt_lens, l, &err);
        CHECK_MSG(s == TFM_OK, "layer %d: %s", l, err.msg);
        if (s != TFM_OK) continue;
        for (int i = 0; i < N_TGT; i++) {
            const int T = f->tgt_lens[i] + 1, S = f->src_lens[f->sentence[i]];
            CHECK(tfm_attention_gather(m, ws, i, TFM_ATTENTION_CROSS, l, TFM_VIEW_MEAN, &t,
                                       &err) == TFM_OK);
            CHECK(t.shape[2] == T && t.shape[3] == S);
            const float *w = tfm_aligner_weights(al, i), *ref = t.data;
            CHECK(w != NULL);
            if (!w || t.shape[2] != T || t.shape[3] != S) continue;
            for (int q = 0; q < T; q++) {
                double sum = 0.0;
                for (int k = 0; k < S; k++) {
                    double d = fabs((double)w[q * S + k] - (double)ref[q * S + k]);
                    if (d > worst) worst = d;
                    sum += w[q * S + k];
                }
                if (S > 0) CHECK_NEAR(sum, 1.0, 1e-5);
            }
        }
    }
    CHECK_MSG(worst <= tol, "the weights differ from the training pass's by %.3g", worst);
    tfm_tensor_free(&t);
done:
    tfm_pass_workspace_free(ws);
    tfm_aligner_free(al);
}

static void run_model(bool pre_norm, tfm_pos_kind pos, int window, int relative, uint64_t seed)
{
    tfm_model *m = random_tiny_model(seed, pre_norm, pos, window, relative);
    fixture f;
    if (m && fixture_make(&f, m, seed + 1)) check_against_training(m, &f, 2e-5);
    if (m) free(f.states);
    tfm_model_free(m);
}

static void test_post_norm(void) { run_model(false, TFM_POS_SINUSOIDAL, 0, 0, 3); }
static void test_pre_norm_learned_positions(void) { run_model(true, TFM_POS_LEARNED, 0, 0, 4); }
static void test_window_relative(void) { run_model(false, TFM_POS_SINUSOIDAL, 2, 3, 5); }

/* decode's model: packed for decoding (the states of a packed encoder, as
 * encode writes them), and int8. */
static void test_packed(void)
{
    tfm_model *m = random_tiny_model(6, false, TFM_POS_SINUSOIDAL, 0, 0);
    if (!m) return;
    tfm_error err;
    CHECK(tfm_model_pack_for_encoding(m, &err) == TFM_OK);
    CHECK(tfm_model_pack_for_decoding(m, &err) == TFM_OK);
    fixture f;
    if (fixture_make(&f, m, 7)) check_against_training(m, &f, 1e-4);
    free(f.states);
    tfm_model_free(m);

    /* int8: other weights than the training pass's, but distributions still */
    m = random_tiny_model(6, false, TFM_POS_SINUSOIDAL, 0, 0);
    if (!m) return;
    CHECK(tfm_model_set_compute_type(m, TFM_COMPUTE_INT8, &err) == TFM_OK);
    CHECK(tfm_model_pack_for_encoding(m, &err) == TFM_OK);
    CHECK(tfm_model_pack_for_decoding(m, &err) == TFM_OK);
    tfm_aligner *al = NULL;
    if (fixture_make(&f, m, 8) && tfm_aligner_create(m, &al, &err) == TFM_OK) {
        const int last = m->config.n_decoder_layers - 1;
        CHECK(tfm_aligner_run(al, B, f.state_of, f.src_lens, N_TGT, f.sentence, f.tgt_ptr,
                              f.tgt_lens, last, &err) == TFM_OK);
        for (int i = 0; i < N_TGT; i++) {
            const int T = f.tgt_lens[i] + 1, S = f.src_lens[f.sentence[i]];
            const float *w = tfm_aligner_weights(al, i);
            CHECK(w != NULL);
            for (int q = 0; w && S > 0 && q < T; q++) {
                double sum = 0.0;
                for (int k = 0; k < S; k++) sum += w[q * S + k];
                CHECK_NEAR(sum, 1.0, 1e-5);
            }
        }
    }
    tfm_aligner_free(al);
    free(f.states);
    tfm_model_free(m);
}

/* Each target alone gives what it gets in the batch. */
static void test_batched_equals_alone(void)
{
    tfm_model *m = random_tiny_model(9, false, TFM_POS_SINUSOIDAL, 0, 0);
    fixture f;
    tfm_error err;
    tfm_aligner *all = NULL, *one = NULL;
    if (!m || !fixture_make(&f, m, 10) || tfm_aligner_create(m, &all, &err) != TFM_OK ||
        tfm_aligner_create(m, &one, &err) != TFM_OK) {
        CHECK(false);
        goto done;
    }
    const int last = m->config.n_decoder_layers - 1;
    CHECK(tfm_aligner_run(all, B, f.state_of, f.src_lens, N_TGT, f.sentence, f.tgt_ptr,
                          f.tgt_lens, last, &err) == TFM_OK);
    double worst = 0.0;
    for (int i = 0; i < N_TGT; i++) {
        const int s = f.sentence[i];
        /* alone: its own sentence only, as sentence 0 */
        CHECK(tfm_aligner_run(one, 1, &f.state_of[s], &f.src_lens[s], 1, (int[]){0},
                              &f.tgt_ptr[i], &f.tgt_lens[i], last, &err) == TFM_OK);
        const float *a = tfm_aligner_weights(all, i), *b = tfm_aligner_weights(one, 0);
        CHECK(a && b);
        for (int k = 0; a && b && k < (f.tgt_lens[i] + 1) * f.src_lens[s]; k++) {
            double d = fabs((double)a[k] - (double)b[k]);
            if (d > worst) worst = d;
        }
    }
    CHECK_MSG(worst <= 1e-6, "batched and alone differ by %.3g", worst);
done:
    tfm_aligner_free(all);
    tfm_aligner_free(one);
    if (m) free(f.states);
    tfm_model_free(m);
}

static void test_errors(void)
{
    tfm_model *m = random_tiny_model(12, false, TFM_POS_SINUSOIDAL, 0, 0);
    fixture f;
    tfm_error err;
    tfm_aligner *al = NULL;
    if (!m || !fixture_make(&f, m, 13) || tfm_aligner_create(m, &al, &err) != TFM_OK) {
        CHECK(false);
        goto done;
    }
    const int L = m->config.n_decoder_layers;
    CHECK(tfm_aligner_run(al, B, f.state_of, f.src_lens, N_TGT, f.sentence, f.tgt_ptr,
                          f.tgt_lens, 0, &err) == TFM_OK);
    CHECK(tfm_aligner_weights(al, 0) != NULL);
    CHECK(tfm_aligner_weights(al, N_TGT) == NULL);
    CHECK(tfm_aligner_weights(al, -1) == NULL);
    CHECK(tfm_aligner_run(al, B, f.state_of, f.src_lens, N_TGT, f.sentence, f.tgt_ptr,
                          f.tgt_lens, L, &err) == TFM_ERR_RANGE);
    CHECK(strstr(err.msg, "layer") != NULL);
    CHECK(tfm_aligner_weights(al, 0) == NULL); /* a failed run leaves none */
    CHECK(tfm_aligner_run(al, B, f.state_of, f.src_lens, N_TGT, f.sentence, f.tgt_ptr,
                          f.tgt_lens, -1, &err) == TFM_ERR_RANGE);
    int bad_sentence[N_TGT];
    memcpy(bad_sentence, f.sentence, sizeof bad_sentence);
    bad_sentence[3] = B;
    CHECK(tfm_aligner_run(al, B, f.state_of, f.src_lens, N_TGT, bad_sentence, f.tgt_ptr,
                          f.tgt_lens, 0, &err) == TFM_ERR_ARG);
    const int32_t bad_ids[2] = {5, V};
    const int32_t *bad_tgt = bad_ids;
    const int two = 2;
    CHECK(tfm_aligner_run(al, B, f.state_of, f.src_lens, 1, f.sentence, &bad_tgt, &two, 0,
                          &err) == TFM_ERR_RANGE);
    const int too_long = m->config.max_positions;
    CHECK(tfm_aligner_run(al, B, f.state_of, f.src_lens, 1, f.sentence, f.tgt_ptr, &too_long,
                          0, &err) == TFM_ERR_RANGE);
    /* no targets at all is a run that gives none */
    CHECK(tfm_aligner_run(al, B, f.state_of, f.src_lens, 0, NULL, NULL, NULL, 0, &err) ==
          TFM_OK);
    CHECK(tfm_aligner_weights(al, 0) == NULL);
done:
    tfm_aligner_free(al);
    if (m) free(f.states);
    tfm_model_free(m);
}

int main(void)
{
    RUN(test_post_norm);
    RUN(test_pre_norm_learned_positions);
    RUN(test_window_relative);
    RUN(test_packed);
    RUN(test_batched_equals_alone);
    RUN(test_errors);
    tfm_aligner_free(NULL);
    CHECK_DONE();
}
