/* test_attention.c - the attention weights a forward pass keeps for
 * inspection (tfm_model_attention and tfm_attention_gather), which
 * test_view.c's writers and viewer draw.
 *
 * What it checks:
 *   - every captured matrix of every kind, layer and head is a distribution
 *     (rows sum to 1 within 1e-5, weights in [0, 1]); the decoder's
 *     self-attention is exactly 0 on future positions, and a restricted
 *     window is exactly 0 outside its band; gathering all heads, one head
 *     or their mean gives the right shapes and values;
 *   - a hand-built model whose cross-attention is known (target position t
 *     attends to source position t) gives that pattern, and its hard
 *     alignment is 0-0 1-1 2-2 ...;
 *   - the teacher-forced pass the weights come from computes what the
 *     incremental decoder computes: the log-probs of a greedy (and a beam)
 *     hypothesis recomputed by it equal those the search reported;
 *   - errors: no forward pass yet, a layer, head or pair out of range.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "testview.h"
#include "tfm/pass.h"
#include "tfm/search.h"
#include "tfm/view.h"

/* Random ids in [4, V): no specials. */
static void random_ids(tfm_rng *rng, int32_t *ids, int n)
{
    for (int i = 0; i < n; i++) ids[i] = 4 + (int32_t)tfm_rng_below(rng, V - 4);
}

/* Checks every row of the [H, n_q, n_k] weights w; mode 1: causal (the
 * decoder), window r > 0: zero outside the band. */
static void check_rows(const float *w, int H, int n_q, int n_k, bool causal, int window)
{
    for (int h = 0; h < H; h++)
        for (int i = 0; i < n_q; i++) {
            const float *row = w + ((size_t)h * n_q + i) * n_k;
            double sum = 0.0;
            bool in_range = true, masked_zero = true;
            for (int j = 0; j < n_k; j++) {
                sum += row[j];
                in_range &= row[j] >= 0.0f && row[j] <= 1.0f;
                bool masked = (causal && j > i) || (window > 0 && (j > i + window || j < i - window));
                if (masked && row[j] != 0.0f) masked_zero = false;
            }
            CHECK(in_range);
            CHECK_MSG(masked_zero, "head %d, query %d: a masked weight is not exactly 0", h, i);
            if (n_k > 0) CHECK_NEAR(sum, 1.0, 1e-5);
        }
}

/* ---- the weights are distributions, masks are exact ---------------------------------- */

static void run_distribution_checks(int window, int relative)
{
    tfm_model *m = random_model(5, window, relative, NULL);
    if (!m) return;
    tfm_pass_workspace *ws = NULL;
    tfm_error err;
    CHECK(tfm_pass_workspace_create(m, &ws, &err) == TFM_OK);
    tfm_rng rng;
    tfm_rng_seed(&rng, 9);
    enum { B = 4 };
    int32_t src[B][12], tgt[B][12];
    const int src_lens[B] = {7, 0, 11, 3}, tgt_lens[B] = {5, 4, 0, 9};
    const int32_t *sp[B], *tp[B];
    for (int b = 0; b < B; b++) {
        random_ids(&rng, src[b], src_lens[b]);
        random_ids(&rng, tgt[b], tgt_lens[b]);
        sp[b] = src[b];
        tp[b] = tgt[b];
    }
    tfm_pair_batch batch = {B, sp, src_lens, tp, tgt_lens};
    CHECK(tfm_model_loss(ws, &batch, false, NULL, NULL, NULL, NULL, &err) == TFM_OK);
    const int H = m->config.n_heads;
    static float w[4 * 12 * 12]; /* [H, n_q, n_k] of the longest pair */
    CHECK(H <= 4);
    for (int b = 0; b < B; b++) {
        for (int l = 0; l < m->config.n_encoder_layers; l++) {
            int n_q, n_k;
            CHECK(tfm_model_attention(ws, b, TFM_ATTENTION_ENCODER, l, w, &n_q, &n_k, &err) ==
                  TFM_OK);
            CHECK(n_q == src_lens[b] && n_k == src_lens[b]);
            check_rows(w, H, n_q, n_k, false, window);
        }
        for (int l = 0; l < m->config.n_decoder_layers; l++) {
            int n_q, n_k;
            CHECK(tfm_model_attention(ws, b, TFM_ATTENTION_DECODER, l, w, &n_q, &n_k, &err) ==
                  TFM_OK);
            CHECK(n_q == tgt_lens[b] + 1 && n_k == tgt_lens[b] + 1);
            check_rows(w, H, n_q, n_k, true, window);
            CHECK(tfm_model_attention(ws, b, TFM_ATTENTION_CROSS, l, w, &n_q, &n_k, &err) ==
                  TFM_OK);
            CHECK(n_q == tgt_lens[b] + 1 && n_k == src_lens[b]);
            check_rows(w, H, n_q, n_k, false, 0); /* cross-attention is never windowed */
        }
    }

    /* gathering: all layers and heads; one head; the mean of the heads */
    tfm_tensor all, one, mean;
    tfm_tensor_init(&all);
    tfm_tensor_init(&one);
    tfm_tensor_init(&mean);
    const int Ld = m->config.n_decoder_layers;
    CHECK(tfm_attention_gather(m, ws, 0, TFM_ATTENTION_CROSS, TFM_VIEW_ALL, TFM_VIEW_ALL, &all,
                               &err) == TFM_OK);
    CHECK(all.ndim == 4 && all.shape[0] == Ld && all.shape[1] == H && all.shape[2] == 6 &&
          all.shape[3] == 7);
    CHECK(tfm_attention_gather(m, ws, 0, TFM_ATTENTION_CROSS, 1, 2, &one, &err) == TFM_OK);
    CHECK(one.shape[0] == 1 && one.shape[1] == 1 && one.shape[2] == 6 && one.shape[3] == 7);
    const size_t per = 6 * 7;
    CHECK(memcmp(one.data, (float *)all.data + (1 * (size_t)H + 2) * per, per * sizeof(float)) ==
          0);
    CHECK(tfm_attention_gather(m, ws, 0, TFM_ATTENTION_CROSS, 1, TFM_VIEW_MEAN, &mean, &err) ==
          TFM_OK);
    CHECK(mean.shape[0] == 1 && mean.shape[1] == 1);
    check_rows(mean.data, 1, 6, 7, false, 0);
    for (size_t i = 0; i < per; i++) {
        double s = 0;
        for (int h = 0; h < H; h++) s += ((float *)all.data)[((size_t)H + h) * per + i];
        CHECK_NEAR(((float *)mean.data)[i], s / H, 1e-6);
    }
    CHECK(tfm_attention_gather(m, ws, 2, TFM_ATTENTION_DECODER, TFM_VIEW_ALL, TFM_VIEW_MEAN,
                               &all, &err) == TFM_OK);
    CHECK(all.shape[0] == Ld && all.shape[1] == 1 && all.shape[2] == 1 && all.shape[3] == 1);
    CHECK(((float *)all.data)[0] == 1.0f); /* <s> sees only itself */

    tfm_tensor_free(&all);
    tfm_tensor_free(&one);
    tfm_tensor_free(&mean);
    tfm_pass_workspace_free(ws);
    tfm_model_free(m);
}

static void test_rows_are_distributions(void) { run_distribution_checks(0, 0); }
/* a window's band, kept alone, shows as a whole matrix with exact zeros */
static void test_window_masks_are_exact(void) { run_distribution_checks(2, 0); }
static void test_relative_positions_rows(void) { run_distribution_checks(2, 3); }

static void test_errors(void)
{
    tfm_model *m = random_model(3, 0, 0, NULL);
    if (!m) return;
    tfm_pass_workspace *ws = NULL;
    tfm_error err;
    CHECK(tfm_pass_workspace_create(m, &ws, &err) == TFM_OK);
    float w[4 * 3 * 4];
    int n_q, n_k;
    tfm_tensor t;
    tfm_tensor_init(&t);
    /* nothing has run yet */
    CHECK(tfm_model_attention(ws, 0, TFM_ATTENTION_CROSS, 0, w, &n_q, &n_k, &err) == TFM_ERR_ARG);
    const int32_t ids[3] = {5, 6, 7};
    const int32_t *p = ids;
    const int len = 3;
    tfm_pair_batch batch = {1, &p, &len, &p, &len};
    CHECK(tfm_model_loss(ws, &batch, false, NULL, NULL, NULL, NULL, &err) == TFM_OK);
    CHECK(tfm_model_attention(ws, 1, TFM_ATTENTION_CROSS, 0, w, &n_q, &n_k, &err) ==
          TFM_ERR_RANGE);
    CHECK(tfm_model_attention(ws, 0, TFM_ATTENTION_CROSS, 2, w, &n_q, &n_k, &err) ==
          TFM_ERR_RANGE);
    CHECK(tfm_model_attention(ws, 0, (tfm_attention_kind)7, 0, w, &n_q, &n_k, &err) ==
          TFM_ERR_RANGE);
    CHECK(tfm_attention_gather(m, ws, 0, TFM_ATTENTION_ENCODER, 2, 0, &t, &err) == TFM_ERR_RANGE);
    CHECK_MSG(strstr(err.msg, "0 to 1") != NULL, "%s", err.msg);
    CHECK(tfm_attention_gather(m, ws, 0, TFM_ATTENTION_ENCODER, 0, 4, &t, &err) == TFM_ERR_RANGE);
    CHECK_MSG(strstr(err.msg, "0 to 3") != NULL, "%s", err.msg);
    /* a failed forward pass leaves nothing to read */
    const int32_t bad[1] = {V + 3};
    const int32_t *bp = bad;
    const int one = 1;
    tfm_pair_batch bad_batch = {1, &bp, &one, &p, &len};
    CHECK(tfm_model_loss(ws, &bad_batch, false, NULL, NULL, NULL, NULL, &err) == TFM_ERR_RANGE);
    CHECK(tfm_model_attention(ws, 0, TFM_ATTENTION_CROSS, 0, w, &n_q, &n_k, &err) == TFM_ERR_ARG);
    tfm_tensor_free(&t);
    tfm_pass_workspace_free(ws);
    tfm_model_free(m);
}

/* ---- a model whose attention is known ---------------------------------------------------- */

/* A model built by hand so that the cross-attention of target position t
 * looks at source position t:
 *   - every embedding is 0, so a token's input is its position encoding
 *     PE(pos) alone, whatever the token;
 *   - every sublayer's output is 0 (zero output projections and FFN), so the
 *     post-norm stream after each sublayer is u(pos) = LN(PE(pos)): the
 *     position encoding centred and scaled to norm sqrt(D), on the encoder
 *     side (its output) and on the decoder side (the cross-attention's input);
 *   - in the (single head of the) cross-attention, q_proj = c I and
 *     k_proj = I, so the score of query t and key s is c u(t).u(s) / sqrt(D).
 * Vectors of equal norm have the largest dot product with themselves (and
 * distinct positions give distinct u), so each row's maximum is at s = t;
 * the gain c = 20 makes the softmax nearly one-hot. */
static tfm_model *identity_model(void)
{
    tfm_config c;
    tfm_error err;
    tfm_config_preset("tiny", &c, NULL);
    c.src_vocab_size = c.tgt_vocab_size = V;
    c.d_model = 16;
    c.d_ff = 16;
    c.n_heads = 1;
    c.n_encoder_layers = c.n_decoder_layers = 1;
    c.max_positions = 64;
    tfm_model *m = NULL;
    if (tfm_model_create(&c, NULL, 1, &m, &err) != TFM_OK) {
        CHECK_MSG(false, "identity model: %s", err.msg);
        return NULL;
    }
    const int D = c.d_model;
    memset(m->data, 0, tfm_params_count(&c) * sizeof(float));
    tfm_layer_norm *norms[] = {&m->params.encoder_layers[0].self_attn_layer_norm,
                               &m->params.encoder_layers[0].final_layer_norm,
                               &m->params.decoder_layers[0].self_attn_layer_norm,
                               &m->params.decoder_layers[0].encoder_attn_layer_norm,
                               &m->params.decoder_layers[0].final_layer_norm};
    for (size_t k = 0; k < sizeof norms / sizeof *norms; k++)
        for (int i = 0; i < D; i++) norms[k]->weight[i] = 1.0f;
    tfm_attention *cross = &m->params.decoder_layers[0].encoder_attn;
    for (int i = 0; i < D; i++) {
        cross->q_proj.weight[i * D + i] = 20.0f;
        cross->k_proj.weight[i * D + i] = 1.0f;
    }
    return m;
}

static void test_identity_alignment(void)
{
    tfm_model *m = identity_model();
    if (!m) return;
    tfm_pass_workspace *ws = NULL;
    tfm_error err;
    CHECK(tfm_pass_workspace_create(m, &ws, &err) == TFM_OK);
    /* 6 source words and </s>; 6 target tokens: 7 queries */
    const int32_t src[7] = {9, 9, 12, 30, 5, 17, TFM_ID_EOS}, tgt[6] = {8, 21, 21, 4, 33, 6};
    const int32_t *sp = src, *tp = tgt;
    const int sl = 7, tl = 6;
    tfm_pair_batch batch = {1, &sp, &sl, &tp, &tl};
    CHECK(tfm_model_loss(ws, &batch, false, NULL, NULL, NULL, NULL, &err) == TFM_OK);
    tfm_tensor t;
    tfm_tensor_init(&t);
    CHECK(tfm_attention_gather(m, ws, 0, TFM_ATTENTION_CROSS, 0, TFM_VIEW_MEAN, &t, &err) ==
          TFM_OK);
    CHECK(t.shape[2] == 7 && t.shape[3] == 7);
    const float *w = t.data;
    for (int q = 0; q < 7; q++)
        CHECK_MSG(w[q * 7 + q] > 0.99f, "query %d attends %.4f to source %d", q, w[q * 7 + q], q);
    tfm_buf out;
    tfm_buf_init(&out);
    /* the target tokens' rows (not the </s> prediction), the source words */
    CHECK(tfm_align_hard(w, 6, 7, 6, &out) == TFM_OK);
    CHECK_MSG(out.data && strcmp(out.data, "0-0 1-1 2-2 3-3 4-4 5-5") == 0, "'%s'", out.data);
    /* with one source word fewer, the last target token looks at </s>: unaligned */
    tfm_buf_clear(&out);
    CHECK(tfm_align_hard(w, 6, 7, 5, &out) == TFM_OK);
    CHECK_MSG(out.data && strcmp(out.data, "0-0 1-1 2-2 3-3 4-4") == 0, "'%s'", out.data);
    tfm_buf_free(&out);
    tfm_tensor_free(&t);
    tfm_pass_workspace_free(ws);
    tfm_model_free(m);
}

/* ---- the teacher-forced pass is the decoder's computation ------------------------------- */

static void check_search_logprobs(int beam)
{
    tfm_model *m = random_model(11, 0, 0, NULL);
    if (!m) return;
    const int D = m->config.d_model;
    enum { B = 4, MAXS = 9 };
    tfm_rng rng;
    tfm_rng_seed(&rng, 21);
    int32_t src[B][MAXS];
    int lens[B];
    const int32_t *sp[B];
    int total = 0;
    for (int b = 0; b < B; b++) {
        lens[b] = 2 + (int)tfm_rng_below(&rng, MAXS - 2);
        random_ids(&rng, src[b], lens[b] - 1);
        src[b][lens[b] - 1] = TFM_ID_EOS;
        sp[b] = src[b];
        total += lens[b];
    }
    tfm_error err;
    float *states = malloc((size_t)total * D * sizeof(float));
    const float *st[B];
    tfm_encoder *enc = NULL;
    tfm_decoder *dec = NULL;
    tfm_search *search = NULL;
    tfm_pass_workspace *ws = NULL;
    bool ok = states && tfm_encoder_create(m, &enc, &err) == TFM_OK &&
              tfm_encoder_forward(enc, B, sp, lens, states, &err) == TFM_OK &&
              tfm_decoder_create(m, &dec, &err) == TFM_OK &&
              tfm_search_create(m, &search, &err) == TFM_OK &&
              tfm_pass_workspace_create(m, &ws, &err) == TFM_OK;
    CHECK_MSG(ok, "%s", err.msg);
    if (ok) {
        for (int b = 0, off = 0; b < B; off += lens[b], b++) st[b] = states + (size_t)off * D;
        tfm_search_params sp_ = tfm_search_default_params();
        sp_.beam = beam;
        sp_.max_length_offset = 8;
        tfm_search_input in = {.n_sentences = B, .states = st, .src_lens = lens};
        CHECK(tfm_search_run(search, dec, &sp_, &in, &err) == TFM_OK);
        const int32_t *tp[B];
        int tl[B], n_labels = 0;
        for (int b = 0; b < B; b++) {
            tfm_nbest nb = tfm_search_result(search, b);
            tp[b] = nb.hyps[0].ids;
            tl[b] = nb.hyps[0].len;
            n_labels += tl[b] + 1;
        }
        tfm_pair_batch batch = {B, sp, lens, tp, tl};
        float *lp = malloc((size_t)n_labels * sizeof(float));
        double sent[B];
        CHECK(lp && tfm_model_loss(ws, &batch, false, NULL, NULL, sent, lp, &err) == TFM_OK);
        for (int b = 0, off = 0; lp && b < B; off += tl[b] + 1, b++) {
            const tfm_hypothesis *h = &tfm_search_result(search, b).hyps[0];
            for (int t = 0; t <= tl[b]; t++) CHECK_NEAR(lp[off + t], h->token_log_probs[t], 1e-4);
            CHECK_NEAR(sent[b], h->log_prob, 1e-3);
        }
        free(lp);
    }
    tfm_pass_workspace_free(ws);
    tfm_search_free(search);
    tfm_decoder_free(dec);
    tfm_encoder_free(enc);
    free(states);
    tfm_model_free(m);
}

static void test_greedy_logprobs_match(void) { check_search_logprobs(1); }
static void test_beam_logprobs_match(void) { check_search_logprobs(4); }

int main(void)
{
    RUN(test_rows_are_distributions);
    RUN(test_window_masks_are_exact);
    RUN(test_relative_positions_rows);
    RUN(test_errors);
    RUN(test_identity_alignment);
    RUN(test_greedy_logprobs_match);
    RUN(test_beam_logprobs_match);
    CHECK_DONE();
}
