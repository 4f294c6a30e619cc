/* test_model.c - the model's configuration, parameter layout and
 * initialisation: presets validate and bad fields are named; the layout
 * packs every tensor exactly once, in visit order, for every combination of
 * options; initial weights have the reference statistics and depend only on
 * the seed; a model made with a vocabulary holds a copy of its own, and one
 * whose size or special ids do not fit the vocabulary is refused.  The
 * model's files: test_model_files.c. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "testconfig.h"
#include "tfm/pass.h"

/* ---- configuration ------------------------------------------------------------ */

static void test_presets(void)
{
    tfm_error err;
    int n = 0;
    for (const char *name; (name = tfm_config_preset_name(n)); n++) {
        tfm_config c;
        CHECK(tfm_config_preset(name, &c, &err) == TFM_OK);
        CHECK(c.src_vocab_size == 0 && c.tgt_vocab_size == 0);
        /* Without vocabulary sizes a preset is not yet a model. */
        CHECK(tfm_config_validate(&c, &err) == TFM_ERR_RANGE);
        CHECK(contains(err.msg, "src_vocab_size"));
        c.src_vocab_size = c.tgt_vocab_size = 8000;
        CHECK_MSG(tfm_config_validate(&c, &err) == TFM_OK, "%s: %s", name, err.msg);
        CHECK(c.pad_id == TFM_ID_PAD && c.unk_id == TFM_ID_UNK && c.bos_id == TFM_ID_BOS &&
              c.eos_id == TFM_ID_EOS);
        /* small-cpu alone is pre-norm: its one decoder layer learns far
         * faster so (README, "Models shaped for CPUs"). */
        CHECK(c.shared_embeddings && c.positions == TFM_POS_SINUSOIDAL);
        CHECK(c.pre_norm == (strcmp(name, "small-cpu") == 0));
        CHECK(c.layer_norm_eps == 1e-5f && c.label_smoothing == 0.1f);
    }
    CHECK(n == 5 && tfm_config_preset_name(-1) == NULL);

    tfm_config c;
    CHECK(tfm_config_preset("base", &c, &err) == TFM_OK);
    CHECK(c.n_encoder_layers == 6 && c.n_decoder_layers == 6 && c.d_model == 512 &&
          c.d_ff == 2048 && c.n_heads == 8 && c.dropout == 0.1f && c.max_positions == 1024);
    CHECK(tfm_config_preset("big", &c, &err) == TFM_OK);
    CHECK(c.n_encoder_layers == 6 && c.d_model == 1024 && c.d_ff == 4096 && c.n_heads == 16 &&
          c.dropout == 0.3f);
    CHECK(tfm_config_preset("small", &c, &err) == TFM_OK);
    CHECK(c.n_encoder_layers == 3 && c.n_decoder_layers == 3 && c.d_model == 256 &&
          c.d_ff == 1024 && c.n_heads == 4);
    CHECK(tfm_config_preset("small-cpu", &c, &err) == TFM_OK);
    CHECK(c.n_encoder_layers == 3 && c.n_decoder_layers == 1 && c.d_model == 256 &&
          c.d_ff == 1024 && c.n_heads == 4 && c.dropout == 0.1f);
    CHECK(tfm_config_preset("tiny", &c, &err) == TFM_OK);
    CHECK(c.n_encoder_layers == 2 && c.d_model == 64 && c.d_ff == 256 && c.n_heads == 4);

    /* The base model has the paper's 65M parameters (Table 3), with a 37000
     * shared vocabulary as for WMT English-German. */
    CHECK(tfm_config_preset("base", &c, &err) == TFM_OK);
    c.src_vocab_size = c.tgt_vocab_size = 37000;
    size_t count = tfm_params_count(&c);
    CHECK_MSG(count > 60000000 && count < 66000000, "%zu", count);

    CHECK(tfm_config_preset("huge", &c, &err) == TFM_ERR_ARG);
    CHECK(contains(err.msg, "huge") && contains(err.msg, "base") && contains(err.msg, "tiny"));
    CHECK_MSG(contains(err.msg, "(known presets: base, big, small, small-cpu, tiny)"), "%s", err.msg);
}

/* The description names every size, the norm, the positions, the
 * vocabulary (both sides when they differ) and the parameter count. */
static void test_describe(void)
{
    tfm_error err;
    tfm_config c;
    CHECK(tfm_config_preset("small", &c, &err) == TFM_OK);
    c.src_vocab_size = c.tgt_vocab_size = 8000;
    tfm_buf text;
    tfm_buf_init(&text);
    char want[256];
    snprintf(want, sizeof want,
             "d_model 256, d_ff 1024, 4 heads, 3+3 layers, post-norm, sinusoidal positions, "
             "vocabulary 8000, %zu parameters", tfm_params_count(&c));
    CHECK(tfm_config_describe(&c, &text) == TFM_OK);
    CHECK_MSG(strcmp(text.data, want) == 0, "%s", text.data);

    c.shared_embeddings = false;
    c.tgt_vocab_size = 8100;
    c.pre_norm = true;
    c.n_decoder_layers = 1;
    c.positions = TFM_POS_NONE;
    c.relative_positions = 16;
    CHECK(tfm_config_validate(&c, &err) == TFM_OK);
    tfm_buf_clear(&text);
    CHECK(tfm_config_describe(&c, &text) == TFM_OK);
    CHECK_MSG(contains(text.data, ", 3+1 layers, pre-norm, relative positions (clipped at 16), "
                                  "vocabulary 8000/8100, "), "%s", text.data);
    c.positions = TFM_POS_LEARNED;
    tfm_buf_clear(&text);
    CHECK(tfm_config_describe(&c, &text) == TFM_OK);
    CHECK_MSG(contains(text.data, ", learned and relative positions (clipped at 16), "), "%s",
              text.data);
    /* Appends, as the other formatters do. */
    size_t len = text.len;
    CHECK(tfm_config_describe(&c, &text) == TFM_OK && text.len == 2 * len);
    tfm_buf_free(&text);
}

/* Each case breaks one field of a valid configuration; the message must
 * name that field. */
static void test_validate(void)
{
    tfm_error err;
    tfm_config good = small_config(300);
    CHECK(tfm_config_validate(&good, &err) == TFM_OK);

    /* One mutation after another, each on a fresh copy. */
#define EXPECT_BAD(mutation, field)                                                        \
    do {                                                                                   \
        tfm_config c = good;                                                               \
        mutation;                                                                          \
        tfm_status st = tfm_config_validate(&c, &err);                                     \
        CHECK_MSG(st == TFM_ERR_RANGE, "%s accepted", #mutation);                          \
        CHECK_MSG(st == TFM_OK || contains(err.msg, field), "%s: %s", #mutation, err.msg); \
    } while (0)

    EXPECT_BAD(c.src_vocab_size = 3, "src_vocab_size");
    EXPECT_BAD(c.tgt_vocab_size = -1, "tgt_vocab_size");
    EXPECT_BAD(c.d_model = 0, "d_model");
    EXPECT_BAD(c.d_model = -16, "d_model");
    EXPECT_BAD(c.d_ff = 0, "d_ff");
    EXPECT_BAD(c.n_heads = 0, "n_heads");
    EXPECT_BAD(c.n_heads = 3, "n_heads");
    EXPECT_BAD(c.n_heads = 32, "n_heads");
    EXPECT_BAD(c.n_encoder_layers = 0, "n_encoder_layers");
    EXPECT_BAD(c.n_decoder_layers = 100000, "n_decoder_layers");
    EXPECT_BAD(c.max_positions = 0, "max_positions");
    EXPECT_BAD(c.positions = (tfm_pos_kind)7, "positions");
    EXPECT_BAD((c.d_model = 9, c.n_heads = 3), "d_model"); /* odd, sinusoidal */
    EXPECT_BAD(c.tgt_vocab_size = 301, "shared_embeddings");
    EXPECT_BAD(c.attention_window = -1, "attention_window");
    EXPECT_BAD(c.relative_positions = -1, "relative_positions");
    EXPECT_BAD(c.relative_positions = c.max_positions, "relative_positions");
    EXPECT_BAD(c.positions = TFM_POS_NONE, "positions is none and relative_positions is 0");
    EXPECT_BAD(c.dropout = 1.0f, "dropout");
    EXPECT_BAD(c.dropout = -0.1f, "dropout");
    EXPECT_BAD(c.dropout = NAN, "dropout");
    EXPECT_BAD(c.attention_dropout = 2.0f, "attention_dropout");
    EXPECT_BAD(c.activation_dropout = -0.1f, "activation_dropout");
    EXPECT_BAD(c.label_smoothing = -1e-3f, "label_smoothing");
    EXPECT_BAD(c.layer_norm_eps = 0.0f, "layer_norm_eps");
    EXPECT_BAD(c.layer_norm_eps = INFINITY, "layer_norm_eps");
    EXPECT_BAD(c.pad_id = 300, "pad_id");
    EXPECT_BAD(c.eos_id = -1, "eos_id");
    EXPECT_BAD(c.bos_id = c.unk_id, "bos_id");
#undef EXPECT_BAD

    /* What is allowed: separate vocabularies of different sizes, an odd
     * d_model with learned positions, a window, rates of zero. */
    tfm_config c = good;
    c.shared_embeddings = false;
    c.tgt_vocab_size = 500;
    c.attention_window = 3;
    c.dropout = c.attention_dropout = c.label_smoothing = 0.0f;
    CHECK_MSG(tfm_config_validate(&c, &err) == TFM_OK, "%s", err.msg);
    c = good;
    c.d_model = 9;
    c.n_heads = 3;
    c.positions = TFM_POS_LEARNED;
    CHECK_MSG(tfm_config_validate(&c, &err) == TFM_OK, "%s", err.msg);
    CHECK(tfm_config_validate(&c, NULL) == TFM_OK);
    /* relative positions alone, at the largest distance; odd d_model
     * without sinusoids; with a window */
    c = good;
    c.positions = TFM_POS_NONE;
    c.relative_positions = c.max_positions - 1;
    c.attention_window = 2;
    CHECK_MSG(tfm_config_validate(&c, &err) == TFM_OK, "%s", err.msg);
    c.d_model = 9;
    c.n_heads = 3;
    CHECK_MSG(tfm_config_validate(&c, &err) == TFM_OK, "%s", err.msg);
}

/* ---- parameter layout ---------------------------------------------------------- */

#define MAX_TENSORS 512

typedef struct seen {
    int n;
    char name[MAX_TENSORS][96];
    int ndim[MAX_TENSORS];
    int64_t shape[MAX_TENSORS][2];
    float *data[MAX_TENSORS];
} seen;

static void collect(void *ctx, const char *name, int ndim, const int64_t *shape, float *data)
{
    seen *s = ctx;
    if (s->n >= MAX_TENSORS) return;
    snprintf(s->name[s->n], sizeof s->name[0], "%s", name);
    s->ndim[s->n] = ndim;
    s->shape[s->n][0] = shape[0];
    s->shape[s->n][1] = ndim > 1 ? shape[1] : 1;
    s->data[s->n] = data;
    s->n++;
}

static int64_t seen_numel(const seen *s, int i) { return s->shape[i][0] * s->shape[i][1]; }

static int seen_find(const seen *s, const char *name)
{
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->name[i], name) == 0) return i;
    return -1;
}

/* The count written out from the paper's architecture, independently of
 * params.c's walk. */
static size_t expected_count(const tfm_config *c)
{
    size_t D = (size_t)c->d_model, F = (size_t)c->d_ff, P = (size_t)c->max_positions;
    size_t attention = 4 * D * D + 4 * D, norm = 2 * D, ffn = 2 * D * F + F + D;
    /* relative positions: two [2K+1, Dh] tables per self-attention */
    size_t relative = c->relative_positions
                          ? 2 * (2 * (size_t)c->relative_positions + 1) * (D / (size_t)c->n_heads)
                          : 0;
    size_t n = (size_t)c->src_vocab_size * D;
    if (!c->shared_embeddings)
        n += (c->shared_decoder_embeddings ? 1 : 2) * (size_t)c->tgt_vocab_size * D;
    if (c->positions == TFM_POS_LEARNED) n += 2 * P * D;
    n += (size_t)c->n_encoder_layers * (attention + relative + ffn + 2 * norm);
    n += (size_t)c->n_decoder_layers * (2 * attention + relative + ffn + 3 * norm);
    if (c->pre_norm) n += 2 * norm;
    return n;
}

static void check_layout(const tfm_config *c)
{
    const size_t D = (size_t)c->d_model;
    size_t count = tfm_params_count(c);
    CHECK_MSG(count == expected_count(c), "%zu vs %zu", count, expected_count(c));
    float *buf = malloc(count * sizeof *buf);
    tfm_params p;
    CHECK(tfm_params_layout(c, buf, &p) == TFM_OK);
    static seen s;
    s.n = 0;
    tfm_params_visit(c, &p, collect, &s);

    /* Tensors follow each other with neither gap nor overlap, in visit order,
     * and fill the buffer exactly: so each one is inside it and none is
     * visited twice. */
    size_t at = 0;
    for (int i = 0; i < s.n; i++) {
        CHECK_MSG(s.data[i] == buf + at, "%s at %td, expected %zu", s.name[i], s.data[i] - buf, at);
        at += (size_t)seen_numel(&s, i);
        for (int j = 0; j < i; j++) CHECK_MSG(strcmp(s.name[i], s.name[j]) != 0, "%s", s.name[i]);
    }
    CHECK_MSG(at == count, "%zu vs %zu", at, count);

    const size_t rel = c->relative_positions ? 2 : 0;
    size_t expected_n = 1 + (c->shared_embeddings ? 0 : c->shared_decoder_embeddings ? 1 : 2) +
                        (c->positions == TFM_POS_LEARNED ? 2 : 0) +
                        (size_t)c->n_encoder_layers * (16 + rel) +
                        (size_t)c->n_decoder_layers * (26 + rel) + (c->pre_norm ? 4 : 0);
    CHECK_MSG((size_t)s.n == expected_n, "%d tensors, expected %zu", s.n, expected_n);

    /* The names and shapes of the reference implementations. */
    int i = seen_find(&s, "encoder.embed_tokens.weight");
    CHECK(i == 0 && s.shape[i][0] == c->src_vocab_size && s.shape[i][1] == c->d_model);
    i = seen_find(&s, "encoder.layers.1.fc1.weight");
    CHECK(i >= 0 && s.ndim[i] == 2 && s.shape[i][0] == c->d_ff && s.shape[i][1] == c->d_model);
    i = seen_find(&s, "encoder.layers.1.fc2.bias");
    CHECK(i >= 0 && s.ndim[i] == 1 && s.shape[i][0] == c->d_model);
    i = seen_find(&s, "decoder.layers.2.encoder_attn.v_proj.weight");
    CHECK(i >= 0 && s.data[i] == p.decoder_layers[2].encoder_attn.v_proj.weight);
    i = seen_find(&s, "decoder.layers.0.encoder_attn_layer_norm.bias");
    CHECK(i >= 0 && s.data[i] == p.decoder_layers[0].encoder_attn_layer_norm.bias);
    i = seen_find(&s, "decoder.layers.2.final_layer_norm.weight");
    CHECK(i >= 0 && s.data[i] == p.decoder_layers[2].final_layer_norm.weight);

    /* Shared matrices are one. */
    if (c->shared_embeddings) {
        CHECK(p.tgt_embed == p.src_embed && p.output_proj == p.src_embed);
        CHECK(seen_find(&s, "decoder.embed_tokens.weight") < 0);
        CHECK(seen_find(&s, "decoder.output_projection.weight") < 0);
    } else if (c->shared_decoder_embeddings) {
        CHECK(p.tgt_embed != p.src_embed && p.output_proj == p.tgt_embed);
        CHECK(seen_find(&s, "decoder.output_projection.weight") < 0);
        i = seen_find(&s, "decoder.embed_tokens.weight");
        CHECK(i >= 0 && s.data[i] == p.tgt_embed && s.shape[i][0] == c->tgt_vocab_size);
    } else {
        CHECK(p.tgt_embed != p.src_embed && p.output_proj != p.tgt_embed);
        i = seen_find(&s, "decoder.output_projection.weight");
        CHECK(i >= 0 && s.data[i] == p.output_proj && s.shape[i][0] == c->tgt_vocab_size);
        i = seen_find(&s, "decoder.embed_tokens.weight");
        CHECK(i >= 0 && s.data[i] == p.tgt_embed && s.shape[i][0] == c->tgt_vocab_size);
    }
    if (c->positions == TFM_POS_LEARNED) {
        i = seen_find(&s, "decoder.embed_positions.weight");
        CHECK(i >= 0 && s.data[i] == p.tgt_positions && s.shape[i][0] == c->max_positions);
        CHECK(seen_find(&s, "encoder.embed_positions.weight") >= 0 && p.src_positions);
    } else {
        CHECK(!p.src_positions && !p.tgt_positions);
        CHECK(seen_find(&s, "encoder.embed_positions.weight") < 0);
    }
    if (c->pre_norm) {
        i = seen_find(&s, "encoder.layer_norm.weight");
        CHECK(i >= 0 && s.data[i] == p.encoder_layer_norm.weight);
        i = seen_find(&s, "decoder.layer_norm.bias");
        CHECK(i == s.n - 1 && s.data[i] == p.decoder_layer_norm.bias);
    } else {
        CHECK(!p.encoder_layer_norm.weight && !p.decoder_layer_norm.bias);
        CHECK(seen_find(&s, "encoder.layer_norm.weight") < 0);
    }

    /* q, k and v are one [3D, D] block, and their biases one [3D] block. */
    const tfm_attention *a = &p.encoder_layers[1].self_attn;
    CHECK(a->k_proj.weight == a->q_proj.weight + D * D);
    CHECK(a->v_proj.weight == a->k_proj.weight + D * D);
    CHECK(a->q_proj.bias == a->v_proj.weight + D * D);
    CHECK(a->k_proj.bias == a->q_proj.bias + D && a->v_proj.bias == a->k_proj.bias + D);
    a = &p.decoder_layers[0].encoder_attn;
    CHECK(a->k_proj.weight == a->q_proj.weight + D * D && a->v_proj.bias == a->k_proj.bias + D);
    i = seen_find(&s, "encoder.layers.0.self_attn.q_proj.weight");
    CHECK(i >= 0 && strcmp(s.name[i + 1], "encoder.layers.0.self_attn.k_proj.weight") == 0 &&
          strcmp(s.name[i + 3], "encoder.layers.0.self_attn.q_proj.bias") == 0 &&
          strcmp(s.name[i + 6], "encoder.layers.0.self_attn.out_proj.weight") == 0);

    /* Relative positions: a table of keys and one of values [2K+1, Dh] after
     * each self-attention's out_proj; none in encoder-decoder attention. */
    i = seen_find(&s, "decoder.layers.1.self_attn.relative_keys.weight");
    int j = seen_find(&s, "encoder.layers.0.self_attn.relative_values.weight");
    if (c->relative_positions) {
        const int64_t rows = 2 * c->relative_positions + 1, Dh = c->d_model / c->n_heads;
        CHECK(i >= 0 && s.data[i] == p.decoder_layers[1].self_attn.relative_keys &&
              s.shape[i][0] == rows && s.shape[i][1] == Dh);
        CHECK(strcmp(s.name[i - 1], "decoder.layers.1.self_attn.out_proj.bias") == 0);
        CHECK(j >= 0 && s.data[j] == p.encoder_layers[0].self_attn.relative_values &&
              s.shape[j][0] == rows && s.shape[j][1] == Dh);
        CHECK(!p.decoder_layers[0].encoder_attn.relative_keys);
        CHECK(seen_find(&s, "decoder.layers.0.encoder_attn.relative_keys.weight") < 0);
    } else {
        CHECK(i < 0 && j < 0 && !p.encoder_layers[0].self_attn.relative_keys);
    }

    /* Without a buffer: the same names and shapes, and no data. */
    tfm_params q;
    CHECK(tfm_params_layout(c, NULL, &q) == TFM_OK);
    static seen t;
    t.n = 0;
    tfm_params_visit(c, &q, collect, &t);
    CHECK(t.n == s.n);
    for (int k = 0; k < t.n && k < s.n; k++) {
        CHECK(strcmp(t.name[k], s.name[k]) == 0 && t.ndim[k] == s.ndim[k]);
        CHECK(t.shape[k][0] == s.shape[k][0] && t.shape[k][1] == s.shape[k][1]);
        CHECK(t.data[k] == NULL);
    }
    tfm_params_free_layout(&q);
    tfm_params_free_layout(&p);
    CHECK(p.encoder_layers == NULL);
    tfm_params_free_layout(&p); /* twice is harmless */
    free(buf);
}

static void test_layout(void)
{
    /* shared: 0 none, 1 all three, 2 the decoder's two */
    for (int shared = 0; shared < 3; shared++)
        for (int learned = 0; learned < 2; learned++)
            for (int pre = 0; pre < 2; pre++) {
                tfm_config c = small_config(300);
                c.shared_embeddings = shared == 1;
                c.shared_decoder_embeddings = shared == 2;
                if (shared != 1) c.tgt_vocab_size = 280;
                c.positions = learned ? TFM_POS_LEARNED : TFM_POS_SINUSOIDAL;
                c.pre_norm = pre;
                check_layout(&c);
                /* with relative positions, with the absolute ones or alone */
                c.relative_positions = 3;
                if (!learned) c.positions = TFM_POS_NONE;
                check_layout(&c);
            }
    tfm_config bad = small_config(300);
    bad.n_heads = 5;
    tfm_params p;
    CHECK(tfm_params_layout(&bad, NULL, &p) == TFM_ERR_ARG);
    CHECK(p.encoder_layers == NULL);
}

/* ---- initialisation -------------------------------------------------------------- */

typedef struct stats {
    double sum, sum2, max_abs;
    size_t n, zeros, ones;
} stats;

static stats stats_of(const float *x, size_t n)
{
    stats s = {0};
    for (size_t i = 0; i < n; i++) {
        s.sum += x[i];
        s.sum2 += (double)x[i] * x[i];
        if (fabs(x[i]) > s.max_abs) s.max_abs = fabs(x[i]);
        s.zeros += x[i] == 0.0f;
        s.ones += x[i] == 1.0f;
    }
    s.n = n;
    return s;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

static void test_init(void)
{
    tfm_config c = small_config(300);
    c.d_model = 32;
    c.d_ff = 64;
    c.shared_embeddings = false;
    c.tgt_vocab_size = 280;
    c.positions = TFM_POS_LEARNED;
    c.relative_positions = 8;
    c.pre_norm = true;
    tfm_model *m;
    tfm_error err;
    CHECK(tfm_model_create(&c, NULL, 42, &m, &err) == TFM_OK);
    CHECK(m->vocab == NULL && m->step == 0);
    CHECK(((uintptr_t)m->data & 63) == 0);
    static seen s;
    s.n = 0;
    tfm_params_visit(&c, &m->params, collect, &s);

    const double D = c.d_model;
    int n_xavier = 0;
    for (int i = 0; i < s.n; i++) {
        const char *name = s.name[i];
        size_t n = (size_t)seen_numel(&s, i);
        stats st = stats_of(s.data[i], n);
        double mean = st.sum / (double)n, var = st.sum2 / (double)n - mean * mean;
        if (strstr(name, "embed") || strstr(name, "output_projection")) {
            /* N(0, D^-0.5) */
            CHECK_MSG(fabs(mean) < 0.01, "%s mean %g", name, mean);
            /* The standard error of a sample std is about std / sqrt(2n). */
            double tol = fmax(0.03, 4.0 / sqrt(2.0 * (double)n));
            CHECK_MSG(fabs(sqrt(var) * sqrt(D) - 1.0) < tol, "%s std %g", name, sqrt(var));
        } else if (strstr(name, "norm")) {
            if (ends_with(name, ".weight")) CHECK_MSG(st.ones == n, "%s", name);
            else CHECK_MSG(st.zeros == n, "%s", name);
        } else if (ends_with(name, ".bias")) {
            CHECK_MSG(st.zeros == n, "%s", name);
        } else {
            /* Xavier uniform: inside the bound, using it, mean 0, variance a^2/3.
             * q, k and v as one [3D, D] matrix (PyTorch's in_proj_weight,
             * fairseq's gain 1/sqrt(2)): fan-out 3D, not D. */
            n_xavier++;
            bool qkv = strstr(name, "q_proj") || strstr(name, "k_proj") || strstr(name, "v_proj");
            double fan_out = (double)s.shape[i][0] * (qkv ? 3 : 1);
            double a = sqrt(6.0 / (fan_out + (double)s.shape[i][1]));
            CHECK_MSG(st.max_abs <= a && st.max_abs > 0.95 * a, "%s: max %g, bound %g", name,
                      st.max_abs, a);
            CHECK_MSG(fabs(mean) < 0.1 * a, "%s mean %g", name, mean);
            CHECK_MSG(fabs(var / (a * a / 3.0) - 1.0) < 0.15, "%s var %g", name, var);
        }
    }
    /* per encoder layer: q,k,v, out_proj, fc1, fc2 and the two relative
     * tables; per decoder layer two more (encoder_attn's) */
    CHECK(n_xavier == 2 * 6 + 3 * 10 + 5 * 2);

    /* The pad row of both embeddings is zero, and of no other table. */
    stats pad = stats_of(m->params.src_embed + c.pad_id * c.d_model, (size_t)c.d_model);
    CHECK(pad.zeros == (size_t)c.d_model);
    pad = stats_of(m->params.tgt_embed + c.pad_id * c.d_model, (size_t)c.d_model);
    CHECK(pad.zeros == (size_t)c.d_model);
    pad = stats_of(m->params.output_proj + c.pad_id * c.d_model, (size_t)c.d_model);
    CHECK(pad.zeros == 0);
    stats unk = stats_of(m->params.src_embed + c.unk_id * c.d_model, (size_t)c.d_model);
    CHECK(unk.zeros == 0);

    /* The same seed gives the same weights bit for bit; another seed others. */
    size_t count = tfm_params_count(&c);
    tfm_model *same, *other;
    CHECK(tfm_model_create(&c, NULL, 42, &same, &err) == TFM_OK);
    CHECK(tfm_model_create(&c, NULL, 43, &other, &err) == TFM_OK);
    CHECK(memcmp(m->data, same->data, count * sizeof(float)) == 0);
    size_t differ = 0;
    for (size_t i = 0; i < count; i++) differ += m->data[i] != other->data[i];
    /* Everything random differs; biases and norms are the same. */
    CHECK_MSG(differ > count * 9 / 10, "%zu of %zu", differ, count);
    tfm_model_free(same);
    tfm_model_free(other);
    tfm_model_free(m);
    tfm_model_free(NULL);

    /* Shared embeddings: one matrix with a zero pad row. */
    c = small_config(300);
    CHECK(tfm_model_create(&c, NULL, 1, &m, &err) == TFM_OK);
    CHECK(m->params.output_proj == m->params.src_embed);
    pad = stats_of(m->params.src_embed, (size_t)c.d_model);
    CHECK(pad.zeros == (size_t)c.d_model);
    tfm_model_free(m);

    /* A bad configuration is refused with validate's message. */
    c.d_ff = 0;
    CHECK(tfm_model_create(&c, NULL, 1, &m, &err) == TFM_ERR_RANGE && m == NULL);
    CHECK(contains(err.msg, "d_ff"));
}

static void test_create_vocab(void)
{
    tfm_vocab *v = make_vocab(24); /* 284 pieces */
    tfm_config c = small_config(284);
    tfm_model *m;
    tfm_error err;
    CHECK_MSG(tfm_model_create(&c, v, 5, &m, &err) == TFM_OK, "%s", err.msg);
    /* The model holds its own copy. */
    CHECK(m->vocab != NULL && m->vocab != v && tfm_vocab_size(m->vocab) == 284);
    tfm_vocab_free(v);
    size_t len;
    CHECK(strcmp(tfm_vocab_piece(m->vocab, 283, &len), "\xe2\x96\x81w23") == 0);
    tfm_model_free(m);

    v = make_vocab(24);
    c = small_config(300);
    CHECK(tfm_model_create(&c, v, 5, &m, &err) == TFM_ERR_RANGE && m == NULL);
    CHECK_MSG(contains(err.msg, "284") && contains(err.msg, "300"), "%s", err.msg);
    c = small_config(284);
    c.pad_id = 3;
    c.eos_id = 0;
    CHECK(tfm_model_create(&c, v, 5, &m, &err) == TFM_ERR_RANGE && m == NULL);
    CHECK_MSG(contains(err.msg, "pad_id"), "%s", err.msg);
    tfm_vocab_free(v);
}

int main(void)
{
    RUN(test_presets);
    RUN(test_describe);
    RUN(test_validate);
    RUN(test_layout);
    RUN(test_init);
    RUN(test_create_vocab);
    CHECK_DONE();
}
