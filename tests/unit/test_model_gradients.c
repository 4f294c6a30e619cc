/* test_model_gradients.c - the whole model's gradient
 * (tfm_model_forward_backward) against central finite differences in double
 * precision of a reference of the model written from the paper and the layer
 * definitions, sharing no code with lib/nn and lib/pass (its layers and the
 * check: testgrad.h), every tensor, for models of every kind: post- and
 * pre-norm, shared and separate embeddings, sinusoidal, learned, relative
 * and no positions, restricted attention, and the variants of imported
 * models.  Each layer's backward is test_layer_gradients.c's; the rest of
 * the training pass, test_pass.c's.
 *
 * Dropout: the whole model is checked in double with dropout off; with
 * dropout on it is checked against float finite differences of
 * tfm_model_loss with the generator reseeded at every evaluation (so every
 * evaluation draws the same masks), with a step and tolerance sized for
 * float (see test_model_gradient_with_dropout).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "testbatch.h"
#include "testgrad.h"
#include "testmodel.h"
#include "nn/layers.h"
#include "tfm/pass.h"

/* The sanitizer build (make check's build/asan) runs the double reference
 * and the passes some five to ten times slower; there the check of each
 * tensor does fewer points (MODEL_FD_POINTS says what it still covers). */

/* ---- a double-precision reference of the whole model ------------------------------------- */

/* The parameters as doubles, in the layout of m->data: the tensor at float
 * pointer ptr of m->params is at TH(r, ptr). */
typedef struct ref_model {
    const tfm_model *m;
    double *theta;
    const tfm_pair_batch *batch;
} ref_model;

#define TH(r, ptr) ((r)->theta + ((ptr) - (r)->m->data))

/* x [n, D] = embeddings * sqrt(D) + positions (from the paper's formula,
 * or the learned table when there is one, or none for relative positions
 * alone) */
static void ref_embed(const ref_model *r, double *x, const int32_t *ids, int n,
                      const float *table, const float *learned)
{
    const tfm_config *c = &r->m->config;
    const int D = c->d_model;
    /* the decoder's <s> is a zero vector when it starts from zeros */
    const int32_t zero_id = table == r->m->params.tgt_embed && c->decoder_start_zero ? c->bos_id
                                                                                     : -1;
    for (int i = 0; i < n; i++)
        for (int d = 0; d < D; d++) {
            /* Marian's layout: sines of the D/2 frequencies, then their cosines */
            const bool concat = c->positions == TFM_POS_SINUSOIDAL_CONCAT;
            const int k = concat ? d % (D / 2) : d / 2;
            const bool sine = concat ? d < D / 2 : d % 2 == 0;
            const double angle = i / pow(10000.0, 2.0 * k / D);
            double pe = c->positions == TFM_POS_NONE ? 0
                        : learned ? TH(r, learned)[i * D + d]
                        : sine ? sin(angle) : cos(angle);
            const double e = ids[i] == zero_id ? 0 : TH(r, table)[ids[i] * D + d];
            x[i * D + d] = e * sqrt((double)D) + pe;
        }
}

/* Marian's LayerNorm of the embeddings x [n, D] in place, when the model has
 * one (--transformer-postprocess-emb nd; the dropout after it is off here). */
static void ref_embed_norm(const ref_model *r, double *x, int n, const tfm_layer_norm *ln)
{
    const tfm_config *c = &r->m->config;
    if (c->embedding_layer_norm)
        ref_layer_norm(x, x, n, c->d_model, TH(r, ln->weight), TH(r, ln->bias),
                       c->layer_norm_eps);
}

/* The sublayer's input: LN(x) into y (pre-norm) or x. */
static const double *ref_sub_in(const ref_model *r, double *y, const double *x, int n,
                                const tfm_layer_norm *ln)
{
    const tfm_config *c = &r->m->config;
    if (!c->pre_norm) return x;
    ref_layer_norm(y, x, n, c->d_model, TH(r, ln->weight), TH(r, ln->bias), c->layer_norm_eps);
    return y;
}

/* x = x + sub (pre-norm) or LN(x + sub) (post-norm) */
static void ref_sub_out(const ref_model *r, double *x, const double *sub, int n,
                        const tfm_layer_norm *ln)
{
    const tfm_config *c = &r->m->config;
    for (int i = 0; i < n * c->d_model; i++) x[i] += sub[i];
    if (!c->pre_norm)
        ref_layer_norm(x, x, n, c->d_model, TH(r, ln->weight), TH(r, ln->bias),
                       c->layer_norm_eps);
}

/* out [nq, D]: multi-head attention of queries from qin [nq, D] over keys
 * and values from kvin [nk, D], with separate q, k, v projections. */
static void ref_mha(const ref_model *r, double *out, const double *qin, int nq,
                    const double *kvin, int nk, const tfm_attention *a, attention_mask mask)
{
    const int D = r->m->config.d_model, H = r->m->config.n_heads;
    const size_t rows = (size_t)(nq > nk ? nq : nk) + 1;
    double *q = malloc(rows * D * sizeof *q), *k = malloc(rows * D * sizeof *k);
    double *v = malloc(rows * D * sizeof *v), *ctx = malloc(rows * D * sizeof *ctx);
    ref_linear(q, qin, nq, D, D, TH(r, a->q_proj.weight), TH(r, a->q_proj.bias));
    ref_linear(k, kvin, nk, D, D, TH(r, a->k_proj.weight), TH(r, a->k_proj.bias));
    ref_linear(v, kvin, nk, D, D, TH(r, a->v_proj.weight), TH(r, a->v_proj.bias));
    ref_relative rel = {NULL, NULL, 0};
    if (a->relative_keys)
        rel = (ref_relative){TH(r, a->relative_keys), TH(r, a->relative_values),
                             r->m->config.relative_positions};
    ref_attention(ctx, q, D, k, v, D, nq, nk, H, D / H, mask, rel, NULL, 0);
    ref_linear(out, ctx, nq, D, D, TH(r, a->out_proj.weight), TH(r, a->out_proj.bias));
    free(q);
    free(k);
    free(v);
    free(ctx);
}

static void ref_ffn_layer(const ref_model *r, double *out, const double *in, int n,
                          const tfm_linear *fc1, const tfm_linear *fc2)
{
    const tfm_config *c = &r->m->config;
    ref_ffn_act(out, in, n, c->d_model, c->d_ff, TH(r, fc1->weight), TH(r, fc1->bias),
                TH(r, fc2->weight), TH(r, fc2->bias), c->activation);
}

/* The label-smoothed loss of one pair (dropout off); token_logp: [T + 1]
 * receives log p(label) (0 for a <pad> label), or NULL. */
static double ref_pair_loss(const ref_model *r, const int32_t *src, int S, const int32_t *tgt,
                            int Tn, double *token_logp)
{
    const tfm_config *c = &r->m->config;
    const tfm_params *p = &r->m->params;
    const int D = c->d_model, V = c->tgt_vocab_size, T = Tn + 1;
    const size_t rows = (size_t)(S > T ? S : T) + 1;
    double *x = malloc(rows * D * sizeof *x), *y = malloc(rows * D * sizeof *y);
    double *sub = malloc(rows * D * sizeof *sub), *enc = malloc(rows * D * sizeof *enc);
    double *logp = malloc((size_t)V * sizeof *logp);
    int32_t *in_ids = malloc((size_t)T * sizeof *in_ids);

    ref_embed(r, x, src, S, p->src_embed, p->src_positions);
    ref_embed_norm(r, x, S, &p->encoder_embedding_norm);
    for (int l = 0; l < c->n_encoder_layers; l++) {
        const tfm_encoder_layer *L = &p->encoder_layers[l];
        const double *in = ref_sub_in(r, y, x, S, &L->self_attn_layer_norm);
        ref_mha(r, sub, in, S, in, S, &L->self_attn,
                (attention_mask){0, false, c->attention_window});
        ref_sub_out(r, x, sub, S, &L->self_attn_layer_norm);
        in = ref_sub_in(r, y, x, S, &L->final_layer_norm);
        ref_ffn_layer(r, sub, in, S, &L->fc1, &L->fc2);
        ref_sub_out(r, x, sub, S, &L->final_layer_norm);
    }
    if (c->pre_norm)
        ref_layer_norm(x, x, S, D, TH(r, p->encoder_layer_norm.weight),
                       TH(r, p->encoder_layer_norm.bias), c->layer_norm_eps);
    memcpy(enc, x, (size_t)S * D * sizeof *enc);

    in_ids[0] = c->bos_id;
    for (int t = 1; t < T; t++) in_ids[t] = tgt[t - 1];
    ref_embed(r, x, in_ids, T, p->tgt_embed, p->tgt_positions);
    ref_embed_norm(r, x, T, &p->decoder_embedding_norm);
    for (int l = 0; l < c->n_decoder_layers; l++) {
        const tfm_decoder_layer *L = &p->decoder_layers[l];
        const double *in = ref_sub_in(r, y, x, T, &L->self_attn_layer_norm);
        ref_mha(r, sub, in, T, in, T, &L->self_attn,
                (attention_mask){0, true, c->attention_window});
        ref_sub_out(r, x, sub, T, &L->self_attn_layer_norm);
        in = ref_sub_in(r, y, x, T, &L->encoder_attn_layer_norm);
        ref_mha(r, sub, in, T, enc, S, &L->encoder_attn, (attention_mask){0, false, 0});
        ref_sub_out(r, x, sub, T, &L->encoder_attn_layer_norm);
        in = ref_sub_in(r, y, x, T, &L->final_layer_norm);
        ref_ffn_layer(r, sub, in, T, &L->fc1, &L->fc2);
        ref_sub_out(r, x, sub, T, &L->final_layer_norm);
    }
    if (c->pre_norm)
        ref_layer_norm(x, x, T, D, TH(r, p->decoder_layer_norm.weight),
                       TH(r, p->decoder_layer_norm.bias), c->layer_norm_eps);

    double loss = 0, eps = c->label_smoothing;
    for (int t = 0; t < T; t++) {
        int32_t label = t < Tn ? tgt[t] : c->eos_id;
        ref_linear(logp, x + t * D, 1, D, V, TH(r, p->output_proj),
                   p->output_bias ? TH(r, p->output_bias) : NULL);
        double mx = -INFINITY, sum = 0, smooth = 0;
        for (int v = 0; v < V; v++) mx = fmax(mx, logp[v]);
        for (int v = 0; v < V; v++) sum += exp(logp[v] - mx);
        const double lse = mx + log(sum);
        for (int v = 0; v < V; v++) {
            logp[v] -= lse;
            smooth -= logp[v];
        }
        if (token_logp) token_logp[t] = label == c->pad_id ? 0 : logp[label];
        if (label == c->pad_id) continue;
        loss += (1 - eps) * -logp[label] + eps / V * smooth;
    }
    free(x);
    free(y);
    free(sub);
    free(enc);
    free(logp);
    free(in_ids);
    return loss;
}

static double ref_batch_loss(void *p)
{
    const ref_model *r = p;
    const tfm_pair_batch *b = r->batch;
    double loss = 0;
    for (int i = 0; i < b->B; i++)
        loss += ref_pair_loss(r, b->src[i], b->src_lens[i], b->tgt[i], b->tgt_lens[i], NULL);
    return loss;
}

/* ---- the whole model's gradient ---------------------------------------------------------- */

/* The tensors of a model, for walking gradients tensor by tensor. */
typedef struct tensor_list {
    const float *base;
    int n;
    char names[128][96];
    size_t off[128], size[128];
} tensor_list;

static void collect_tensor(void *ctx, const char *name, int ndim, const int64_t *shape,
                           float *data)
{
    tensor_list *l = ctx;
    if (l->n >= 128) return;
    size_t n = 1;
    for (int i = 0; i < ndim; i++) n *= (size_t)shape[i];
    snprintf(l->names[l->n], sizeof l->names[0], "%s", name);
    l->off[l->n] = (size_t)(data - l->base);
    l->size[l->n] = n;
    l->n++;
}

/* The whole model's gradient against double finite differences of the
 * reference, every tensor: all its points when it has up to MODEL_FD_POINTS,
 * else its largest, first and last and MODEL_FD_POINTS - 2 drawn.  Under
 * the sanitizers 3 rather than 24 (these points, two evaluations of the
 * reference each, were half of the gradient tests' time there): every tensor
 * of every model still checked at four points, its largest gradient, both
 * ends and one drawn (all of a tensor of 3). */
#define MODEL_FD_POINTS (SANITIZED ? 3 : 24)
static void check_model_gradient(const char *name, const tfm_config *c, uint64_t seed)
{
    tfm_model *m = test_nudged_model(c, seed);
    if (!m) return;
    const int src_lens[3] = {4, 3, 5}, tgt_lens[3] = {3, 5, 0};
    test_batch t;
    make_batch(&t, c, 3, src_lens, tgt_lens, seed + 1);

    tfm_pass_workspace *ws;
    tfm_error err;
    CHECK(tfm_pass_workspace_create(m, &ws, &err) == TFM_OK);
    size_t n = tfm_params_count(c);
    float *grads = calloc(n, sizeof *grads);
    tfm_loss_sums sums;
    tfm_status st = tfm_model_forward_backward(ws, &t.b, NULL, 1.0f, grads, &sums, &err);
    CHECK_MSG(st == TFM_OK, "%s: %s", name, err.msg);

    double *theta = malloc(n * sizeof *theta);
    for (size_t i = 0; i < n; i++) theta[i] = m->data[i];
    ref_model r = {m, theta, &t.b};
    double want = ref_batch_loss(&r);
    CHECK_MSG(fabs(sums.loss - want) <= 1e-5 * want, "%s: loss %.9g, reference %.9g", name,
              sums.loss, want);
    CHECK(sums.n_tokens == 4 + 6 + 1);

    tensor_list *tl = calloc(1, sizeof *tl);
    tl->base = m->data;
    tfm_params_visit(c, &m->params, collect_tensor, tl);
    double gmax = max_abs(grads, n);
    CHECK(gmax > 0);
    double worst = 0;
    for (int i = 0; i < tl->n; i++) {
        fd_result res = fd_compare(grads + tl->off[i], theta + tl->off[i], tl->size[i],
                                   ref_batch_loss, &r, 1e-3, 1e-5 * gmax, MODEL_FD_POINTS,
                                   seed + (uint64_t)i);
        worst = fmax(worst, res.ratio);
        CHECK_MSG(res.ratio <= 1, "%s: %s[%zu]: backward %.9g, finite difference %.9g", name,
                  tl->names[i], res.at, res.analytic, res.fd);
    }
    if (getenv("TFM_TEST_VERBOSE")) printf("%s: worst ratio %.3g\n", name, worst);
    free(tl);
    free(theta);
    free(grads);
    tfm_pass_workspace_free(ws);
    tfm_model_free(m);
}

static void test_model_gradient(void)
{
    tfm_config c = tiny_config(false, true, TFM_POS_SINUSOIDAL, 0, 1);
    check_model_gradient("post-norm, shared, sinusoidal", &c, 21);
    c = tiny_config(true, false, TFM_POS_LEARNED, 0, 1);
    check_model_gradient("pre-norm, unshared, learned", &c, 22);
    c = tiny_config(false, false, TFM_POS_LEARNED, 1, 2);
    check_model_gradient("post-norm, unshared, learned, window 1, 2 layers", &c, 23);
    c = tiny_config(true, true, TFM_POS_SINUSOIDAL, 2, 2);
    check_model_gradient("pre-norm, shared, sinusoidal, window 2, 2 layers", &c, 24);
    /* relative positions clipped at 2 (pairs up to 5 apart), alone and with
     * absolute ones and a window */
    c = tiny_config(false, true, TFM_POS_NONE, 0, 1);
    c.relative_positions = 2;
    check_model_gradient("post-norm, shared, relative 2 alone", &c, 25);
    c = tiny_config(true, false, TFM_POS_SINUSOIDAL, 1, 2);
    c.relative_positions = 3;
    check_model_gradient("pre-norm, unshared, sinusoidal + relative 3, window 1, 2 layers", &c,
                         26);
    /* A vocabulary per side: the decoder's input embedding is the output
     * projection, whose gradient is the sum of both uses. */
    c = tiny_config(false, false, TFM_POS_NONE, 0, 1);
    c.shared_decoder_embeddings = true;
    c.relative_positions = 2;
    check_model_gradient("post-norm, decoder embeddings shared, relative 2", &c, 27);
    /* the variants of imported models that train: an output bias, a decoder
     * starting from zeros (the <s> row learns nothing), Marian's sinusoids */
    c = tiny_config(false, false, TFM_POS_SINUSOIDAL_CONCAT, 0, 2);
    c.shared_decoder_embeddings = true;
    c.output_bias = c.decoder_start_zero = true;
    check_model_gradient("post-norm, output bias, zero start, concatenated sinusoids", &c, 28);
    /* and the gated activations of OPUS-MT models, post- and pre-norm */
    c.activation = TFM_ACT_SWISH;
    check_model_gradient("post-norm, swish, output bias, zero start", &c, 29);
    c = tiny_config(true, true, TFM_POS_SINUSOIDAL_CONCAT, 0, 2);
    c.activation = TFM_ACT_GELU_SIGMOID;
    c.output_bias = c.decoder_start_zero = true;
    check_model_gradient("pre-norm, gelu-sigmoid, shared, output bias, zero start", &c, 30);
    /* Marian's LayerNorm of the embeddings (the postnorm-gelu-untied fixture's
     * shape: nothing tied), and pre-norm with swish and shared embeddings */
    c = tiny_config(false, false, TFM_POS_SINUSOIDAL_CONCAT, 0, 2);
    c.activation = TFM_ACT_GELU_SIGMOID;
    c.output_bias = c.decoder_start_zero = c.embedding_layer_norm = true;
    check_model_gradient("post-norm, gelu-sigmoid, embedding LayerNorm, untied", &c, 35);
    c = tiny_config(true, true, TFM_POS_SINUSOIDAL_CONCAT, 0, 2);
    c.activation = TFM_ACT_SWISH;
    c.output_bias = c.decoder_start_zero = c.embedding_layer_norm = true;
    check_model_gradient("pre-norm, swish, embedding LayerNorm, shared", &c, 36);
    c = tiny_config(false, false, TFM_POS_LEARNED, 0, 1);
    c.shared_decoder_embeddings = true;
    c.embedding_layer_norm = true;
    check_model_gradient("post-norm, relu, embedding LayerNorm, decoder embeddings shared, "
                         "learned", &c, 37);
}

/* With dropout on, the gradient of the loss under fixed masks, against
 * float finite differences of tfm_model_loss (the generator reseeded for
 * each evaluation, so each draws the same masks).  Float forward noise is
 * ~1e-6 of the loss, so the step is 3e-3 and the tolerance 3% plus 1% of
 * the largest gradient: loose, but a mask missing from one backward path
 * changes gradients by O(1). */
static void check_model_gradient_with_dropout(const char *name, const tfm_config *cp)
{
    tfm_config c = *cp;
    c.dropout = 0.3f;
    c.attention_dropout = 0.2f;
    c.activation_dropout = 0.25f;
    tfm_model *m = test_nudged_model(&c, 31);
    if (!m) return;
    const int src_lens[3] = {4, 3, 5}, tgt_lens[3] = {3, 4, 2};
    test_batch t;
    make_batch(&t, &c, 3, src_lens, tgt_lens, 32);
    tfm_pass_workspace *ws;
    tfm_error err;
    CHECK(tfm_pass_workspace_create(m, &ws, &err) == TFM_OK);
    size_t n = tfm_params_count(&c);
    float *grads = calloc(n, sizeof *grads);
    tfm_rng rng;
    tfm_rng_seed(&rng, 33);
    tfm_loss_sums with, without;
    CHECK(tfm_model_forward_backward(ws, &t.b, &rng, 1.0f, grads, &with, &err) == TFM_OK);
    CHECK(tfm_model_loss(ws, &t.b, false, NULL, &without, NULL, NULL, &err) == TFM_OK);
    CHECK(fabs(with.loss - without.loss) > 1e-3); /* dropout did something */

    tensor_list *tl = calloc(1, sizeof *tl);
    tl->base = m->data;
    tfm_params_visit(&c, &m->params, collect_tensor, tl);
    const double gmax = max_abs(grads, n), h = 3e-3;
    tfm_rng pick;
    tfm_rng_seed(&pick, 34);
    int bad = 0, points = 0;
    for (int i = 0; i < tl->n; i++) {
        const float *g = grads + tl->off[i];
        size_t argmax = 0;
        for (size_t j = 1; j < tl->size[i]; j++)
            if (fabs(g[j]) > fabs(g[argmax])) argmax = j;
        for (int k = 0; k < 4; k++) {
            size_t j = k == 0 ? argmax : (size_t)tfm_rng_below(&pick, tl->size[i]);
            float *x = m->data + tl->off[i] + j, keep = *x;
            double f[2], at[2];
            for (int s = 0; s < 2; s++) {
                *x = keep + (s ? -1 : 1) * (float)h;
                at[s] = *x; /* the point float can represent */
                tfm_rng_seed(&rng, 33);
                tfm_loss_sums sm;
                tfm_model_loss(ws, &t.b, true, &rng, &sm, NULL, NULL, &err);
                f[s] = sm.loss;
            }
            *x = keep;
            double fd = (f[0] - f[1]) / (at[0] - at[1]);
            points++;
            if (fabs(g[j] - fd) > 0.03 * fabs(fd) + 0.01 * gmax) {
                if (bad++ < 5)
                    printf("  %s: %s[%zu]: backward %.6g, finite difference %.6g\n", name,
                           tl->names[i], j, g[j], fd);
            }
        }
    }
    CHECK_MSG(bad == 0, "%s: %d of %d points off", name, bad, points);
    free(tl);
    free(grads);
    tfm_pass_workspace_free(ws);
    tfm_model_free(m);
}

static void test_model_gradient_with_dropout(void)
{
    tfm_config c = tiny_config(false, true, TFM_POS_LEARNED, 0, 1);
    check_model_gradient_with_dropout("learned positions", &c);
    c = tiny_config(false, true, TFM_POS_NONE, 2, 1);
    c.relative_positions = 2;
    check_model_gradient_with_dropout("relative 2 alone, window 2", &c);
    /* activation dropout after a gated activation: its mask kept per layer */
    c = tiny_config(false, true, TFM_POS_LEARNED, 0, 2);
    c.activation = TFM_ACT_SWISH;
    check_model_gradient_with_dropout("swish, 2 layers", &c);
    c = tiny_config(true, false, TFM_POS_SINUSOIDAL_CONCAT, 0, 1);
    c.activation = TFM_ACT_GELU_SIGMOID;
    c.output_bias = c.decoder_start_zero = true;
    check_model_gradient_with_dropout("pre-norm, gelu-sigmoid", &c);
    /* and Marian's LayerNorm of the embeddings before their dropout */
    c = tiny_config(false, false, TFM_POS_SINUSOIDAL_CONCAT, 0, 2);
    c.activation = TFM_ACT_GELU_SIGMOID;
    c.output_bias = c.decoder_start_zero = c.embedding_layer_norm = true;
    check_model_gradient_with_dropout("gelu-sigmoid, embedding LayerNorm, untied", &c);
    c = tiny_config(true, true, TFM_POS_LEARNED, 0, 1);
    c.activation = TFM_ACT_SWISH;
    c.embedding_layer_norm = true;
    check_model_gradient_with_dropout("pre-norm, swish, embedding LayerNorm", &c);
}

int main(void)
{
    RUN(test_model_gradient);
    RUN(test_model_gradient_with_dropout);
    CHECK_DONE();
}
