/* model.c - a whole model: a configuration, one parameter buffer and the
 * vocabulary.  Creating one with the reference initialisation, and saving
 * and loading model files: safetensors holding every tensor under its
 * PyTorch-style name, with the configuration, the training step and the
 * vocabulary's text in __metadata__ (tfm-formats(5)), so that one file is
 * the whole model and opens in Python unchanged. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nn/layers.h" /* tfm_packed_decoder_free */
#include "tfm/model.h"
#include "tfm/safetensors.h"

/* Tensors start on cache lines (see params.c). */
#define PARAM_ALIGN 64

/* ---- the vocabulary as text ------------------------------------------------------ */

/* The vocabulary file's text, as tfm_vocab_write makes it: the one
 * serialisation of a vocabulary, used both to copy one and to store it in a
 * model file.  *text is malloc'd and NUL-terminated. */
static tfm_status vocab_to_text(const tfm_vocab *v, char **text, size_t *len, tfm_error *err)
{
    *text = NULL;
    *len = 0;
    FILE *fp = open_memstream(text, len);
    if (!fp) return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory writing the vocabulary");
    tfm_status st = tfm_vocab_write(v, fp, err);
    if (fclose(fp) != 0 && st == TFM_OK)
        st = tfm_error_set(err, TFM_ERR_NOMEM, "out of memory writing the vocabulary");
    if (st != TFM_OK) {
        free(*text);
        *text = NULL;
    }
    return st;
}

static tfm_status vocab_copy(const tfm_vocab *v, tfm_vocab **out, tfm_error *err)
{
    char *text;
    size_t len;
    tfm_status st = vocab_to_text(v, &text, &len, err);
    if (st != TFM_OK) return st;
    st = tfm_vocab_parse(text, len, out, err);
    free(text);
    return st;
}

/* A model's vocabulary must index its embeddings exactly, and its fixed
 * special ids must be the ones the configuration names. */
static tfm_status check_vocab(const tfm_config *c, const tfm_vocab *v, tfm_error *err)
{
    int32_t n = tfm_vocab_size(v);
    if (n != c->src_vocab_size || n != c->tgt_vocab_size)
        return tfm_error_set(err, TFM_ERR_RANGE,
                             "the vocabulary holds %d pieces, but src_vocab_size is %d and "
                             "tgt_vocab_size is %d",
                             (int)n, (int)c->src_vocab_size, (int)c->tgt_vocab_size);
    const char *names[4] = {"pad_id", "unk_id", "bos_id", "eos_id"};
    const int32_t ids[4] = {c->pad_id, c->unk_id, c->bos_id, c->eos_id};
    const int32_t fixed[4] = {TFM_ID_PAD, TFM_ID_UNK, TFM_ID_BOS, TFM_ID_EOS};
    for (int i = 0; i < 4; i++)
        if (ids[i] != fixed[i])
            return tfm_error_set(err, TFM_ERR_RANGE,
                                 "%s is %d, but the vocabulary's %s is id %d", names[i],
                                 (int)ids[i], tfm_vocab_piece(v, fixed[i], NULL), (int)fixed[i]);
    return TFM_OK;
}

/* ---- creating and freeing ----------------------------------------------------------- */

void tfm_model_free(tfm_model *m)
{
    if (!m) return;
    tfm_packed_model_free(m->packed);
    tfm_params_free_layout(&m->params);
    free(m->data);
    tfm_vocab_free(m->vocab);
    free(m);
}

/* A model of a valid configuration with every parameter zero and no
 * vocabulary. */
static tfm_status model_alloc(const tfm_config *c, tfm_model **out, tfm_error *err)
{
    *out = NULL;
    tfm_model *m = calloc(1, sizeof *m);
    if (!m) return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory creating a model");
    m->config = *c;
    size_t n = tfm_params_count(c);
    /* aligned_alloc wants a size that is a multiple of the alignment. */
    size_t bytes = (n * sizeof(float) + PARAM_ALIGN - 1) / PARAM_ALIGN * PARAM_ALIGN;
    m->data = aligned_alloc(PARAM_ALIGN, bytes);
    if (!m->data || tfm_params_layout(c, m->data, &m->params) != TFM_OK) {
        tfm_model_free(m);
        return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory for %zu parameters", n);
    }
    tfm_advise_huge_pages(m->data, bytes);
    memset(m->data, 0, bytes);
    *out = m;
    return TFM_OK;
}

/* A draw from N(0, 1) by Box-Muller (one value per pair of uniforms: the
 * simplest way to keep the stream of draws easy to reason about). */
static double normal(tfm_rng *r)
{
    double u1 = 1.0 - tfm_rng_double(r); /* in (0, 1], so the log is finite */
    double u2 = tfm_rng_double(r);
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

/* Xavier/Glorot uniform (Glorot & Bengio 2010; PyTorch's xavier_uniform_
 * with gain 1): U(-a, a), a = sqrt(6 / (fan_in + fan_out)). */
static void init_xavier(tfm_rng *r, float *w, size_t out, size_t in)
{
    double a = sqrt(6.0 / (double)(in + out));
    for (size_t i = 0; i < out * in; i++) w[i] = (float)((2.0 * tfm_rng_double(r) - 1.0) * a);
}

/* N(0, D^-0.5) for every row but the pad row, which stays zero (fairseq's
 * Embedding), so that <pad> adds nothing whatever it is multiplied by. */
static void init_embedding(tfm_rng *r, float *w, size_t rows, size_t D, int32_t pad_row)
{
    double std = 1.0 / sqrt((double)D);
    for (size_t i = 0; i < rows; i++)
        for (size_t j = 0; j < D; j++)
            w[i * D + j] = (int32_t)i == pad_row ? 0.0f : (float)(normal(r) * std);
}

/* Biases are already zero (model_alloc). */
static void init_linear(tfm_rng *r, const tfm_linear *l, size_t out, size_t in)
{
    init_xavier(r, l->weight, out, in);
}

static void init_norm(const tfm_layer_norm *n, size_t D)
{
    for (size_t i = 0; i < D; i++) n->weight[i] = 1.0f; /* bias stays 0 */
}

/* q, k and v are drawn as one fused [3D, D] Xavier matrix (they are
 * contiguous, tfm/model.h), U(+-sqrt(6 / 4D)): PyTorch's nn.MultiheadAttention
 * initialises its in_proj_weight so, and fairseq's separate D x D blocks get
 * the same bound through gain 1/sqrt(2).  tensor2tensor, and tfm before,
 * used plain Xavier per D x D block, sqrt(2) larger: the attention logits
 * then start with a random part twice the variance, which the learned part
 * takes longer to outgrow.  Measured on English-French with the small preset
 * (tests/bench/quality.sh): the larger start lags the reference's valid
 * perplexity from about update 200 on; the fused bound matches it. */
static void init_attention(tfm_rng *r, const tfm_attention *a, size_t D)
{
    init_xavier(r, a->q_proj.weight, 3 * D, D); /* q, k and v */
    init_linear(r, &a->out_proj, D, D);
}

/* The initialisation of the reference implementations: Xavier uniform for
 * every linear weight (PyTorch's nn.Transformer and fairseq), with q, k and
 * v as one [3D, D] matrix (init_attention), zero biases, LayerNorm 1 and 0, token
 * embeddings and the unshared output projection N(0, D^-0.5) as fairseq
 * (the projection's pad row is not zeroed: it is an output, not an input),
 * learned positions N(0, D^-0.5).  Draws follow the layout order. */
static void init_params(tfm_model *m, uint64_t seed)
{
    const tfm_config *c = &m->config;
    const tfm_params *p = &m->params;
    const size_t D = (size_t)c->d_model, F = (size_t)c->d_ff;
    tfm_rng rng;
    tfm_rng_seed(&rng, seed);

    init_embedding(&rng, p->src_embed, (size_t)c->src_vocab_size, D, c->pad_id);
    if (!c->shared_embeddings) {
        init_embedding(&rng, p->tgt_embed, (size_t)c->tgt_vocab_size, D, c->pad_id);
        init_embedding(&rng, p->output_proj, (size_t)c->tgt_vocab_size, D, -1);
    }
    if (c->positions == TFM_POS_LEARNED) {
        init_embedding(&rng, p->src_positions, (size_t)c->max_positions, D, -1);
        init_embedding(&rng, p->tgt_positions, (size_t)c->max_positions, D, -1);
    }
    for (int i = 0; i < c->n_encoder_layers; i++) {
        const tfm_encoder_layer *L = &p->encoder_layers[i];
        init_attention(&rng, &L->self_attn, D);
        init_norm(&L->self_attn_layer_norm, D);
        init_linear(&rng, &L->fc1, F, D);
        init_linear(&rng, &L->fc2, D, F);
        init_norm(&L->final_layer_norm, D);
    }
    for (int i = 0; i < c->n_decoder_layers; i++) {
        const tfm_decoder_layer *L = &p->decoder_layers[i];
        init_attention(&rng, &L->self_attn, D);
        init_norm(&L->self_attn_layer_norm, D);
        init_attention(&rng, &L->encoder_attn, D);
        init_norm(&L->encoder_attn_layer_norm, D);
        init_linear(&rng, &L->fc1, F, D);
        init_linear(&rng, &L->fc2, D, F);
        init_norm(&L->final_layer_norm, D);
    }
    if (c->pre_norm) {
        init_norm(&p->encoder_layer_norm, D);
        init_norm(&p->decoder_layer_norm, D);
    }
}

tfm_status tfm_model_create(const tfm_config *c, const tfm_vocab *vocab, uint64_t seed,
                            tfm_model **out, tfm_error *err)
{
    *out = NULL;
    tfm_status st = tfm_config_validate(c, err);
    if (st == TFM_OK && vocab) st = check_vocab(c, vocab, err);
    tfm_model *m = NULL;
    if (st == TFM_OK) st = model_alloc(c, &m, err);
    if (st == TFM_OK && vocab) st = vocab_copy(vocab, &m->vocab, err);
    if (st != TFM_OK) {
        tfm_model_free(m);
        return st;
    }
    init_params(m, seed);
    *out = m;
    return TFM_OK;
}

/* ---- the configuration as metadata ------------------------------------------------- */

typedef enum field_kind {
    FIELD_INT,       /* int */
    FIELD_I32,       /* int32_t */
    FIELD_FLOAT,     /* float, written with %.9g so that it reads back exactly */
    FIELD_BOOL,      /* "true" or "false" */
    FIELD_POSITIONS, /* tfm_pos_kind: "sinusoidal" or "learned" */
    FIELD_NORM,      /* bool pre_norm: "pre" or "post" */
} field_kind;

/* One configuration field: its metadata key, where it lives, and what a
 * reader should find (for messages; tfm_config_validate checks ranges). */
typedef struct field {
    const char *key;
    field_kind kind;
    size_t offset;
    const char *expect;
    const char *absent; /* the value of a file written before the field existed, or NULL:
                           the field is required */
} field;

#define FIELD(member, kind, expect) {#member, kind, offsetof(tfm_config, member), expect, NULL}

/* Writing and reading both walk this table, so the two cannot drift. */
static const field fields[] = {
    FIELD(src_vocab_size, FIELD_I32, "a positive integer"),
    FIELD(tgt_vocab_size, FIELD_I32, "a positive integer"),
    FIELD(d_model, FIELD_INT, "a positive integer"),
    FIELD(d_ff, FIELD_INT, "a positive integer"),
    FIELD(n_heads, FIELD_INT, "a positive integer"),
    FIELD(n_encoder_layers, FIELD_INT, "a positive integer"),
    FIELD(n_decoder_layers, FIELD_INT, "a positive integer"),
    FIELD(max_positions, FIELD_INT, "a positive integer"),
    {"positions", FIELD_POSITIONS, offsetof(tfm_config, positions), "'sinusoidal' or 'learned'",
     NULL},
    {"norm", FIELD_NORM, offsetof(tfm_config, pre_norm), "'post' or 'pre'", NULL},
    FIELD(shared_embeddings, FIELD_BOOL, "'true' or 'false'"),
    FIELD(attention_window, FIELD_INT, "a non-negative integer"),
    FIELD(dropout, FIELD_FLOAT, "a number"),
    FIELD(attention_dropout, FIELD_FLOAT, "a number"),
    {"activation_dropout", FIELD_FLOAT, offsetof(tfm_config, activation_dropout), "a number", "0"},
    FIELD(label_smoothing, FIELD_FLOAT, "a number"),
    FIELD(layer_norm_eps, FIELD_FLOAT, "a number"),
    FIELD(pad_id, FIELD_I32, "a non-negative integer"),
    FIELD(unk_id, FIELD_I32, "a non-negative integer"),
    FIELD(bos_id, FIELD_I32, "a non-negative integer"),
    FIELD(eos_id, FIELD_I32, "a non-negative integer"),
};
#define N_FIELDS (sizeof fields / sizeof fields[0])

#define MODEL_FORMAT "tfm-model"
#define MODEL_FORMAT_VERSION "1"

/* The text of field f of c. */
static void field_format(const field *f, const tfm_config *c, char *out, size_t size)
{
    const char *at = (const char *)c + f->offset;
    switch (f->kind) {
    case FIELD_INT: snprintf(out, size, "%d", *(const int *)at); break;
    case FIELD_I32: snprintf(out, size, "%" PRId32, *(const int32_t *)at); break;
    case FIELD_FLOAT: snprintf(out, size, "%.9g", (double)*(const float *)at); break;
    case FIELD_BOOL: snprintf(out, size, "%s", *(const bool *)at ? "true" : "false"); break;
    case FIELD_POSITIONS:
        snprintf(out, size, "%s",
                 *(const tfm_pos_kind *)at == TFM_POS_LEARNED ? "learned" : "sinusoidal");
        break;
    case FIELD_NORM: snprintf(out, size, "%s", *(const bool *)at ? "pre" : "post"); break;
    }
}

/* A whole decimal integer in [lo, hi]: digits with an optional '-', nothing
 * around them. */
static bool parse_int(const char *s, long long lo, long long hi, long long *out)
{
    const char *d = s[0] == '-' ? s + 1 : s;
    if (!isdigit((unsigned char)d[0])) return false;
    errno = 0;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || v < lo || v > hi) return false;
    *out = v;
    return true;
}

/* A whole finite number (no leading space, nothing after it). */
static bool parse_float(const char *s, float *out)
{
    if (!s[0] || isspace((unsigned char)s[0])) return false;
    errno = 0;
    char *end;
    float v = strtof(s, &end);
    if (*end || errno == ERANGE || !isfinite(v)) return false;
    *out = v;
    return true;
}

/* Sets field f of c from its text s, or says what was expected. */
static tfm_status field_parse(const field *f, const char *s, tfm_config *c, tfm_error *err)
{
    char *at = (char *)c + f->offset;
    long long i;
    bool ok = false;
    switch (f->kind) {
    case FIELD_INT:
    case FIELD_I32:
        ok = parse_int(s, INT32_MIN, INT32_MAX, &i);
        if (ok && f->kind == FIELD_INT) *(int *)at = (int)i;
        if (ok && f->kind == FIELD_I32) *(int32_t *)at = (int32_t)i;
        break;
    case FIELD_FLOAT: ok = parse_float(s, (float *)at); break;
    case FIELD_BOOL:
    case FIELD_NORM: {
        const char *yes = f->kind == FIELD_BOOL ? "true" : "pre";
        const char *no = f->kind == FIELD_BOOL ? "false" : "post";
        ok = strcmp(s, yes) == 0 || strcmp(s, no) == 0;
        if (ok) *(bool *)at = strcmp(s, yes) == 0;
        break;
    }
    case FIELD_POSITIONS:
        ok = strcmp(s, "sinusoidal") == 0 || strcmp(s, "learned") == 0;
        if (ok) *(tfm_pos_kind *)at = s[0] == 'l' ? TFM_POS_LEARNED : TFM_POS_SINUSOIDAL;
        break;
    }
    if (ok) return TFM_OK;
    return tfm_error_set(err, TFM_ERR_FORMAT, "metadata '%s' is '%.40s%s', expected %s", f->key, s,
                         strlen(s) > 40 ? "..." : "", f->expect);
}

/* The value of a metadata key that must be there. */
static tfm_status need_metadata(const tfm_safetensors *f, const char *key, const char **value,
                                tfm_error *err)
{
    *value = tfm_safetensors_metadata(f, key);
    if (*value) return TFM_OK;
    return tfm_error_set(err, TFM_ERR_FORMAT, "metadata '%s' is missing", key);
}

/* Reads and checks the configuration, the step and the vocabulary (*vocab
 * stays NULL when the file has none). */
static tfm_status read_metadata(const tfm_safetensors *f, tfm_config *c, int64_t *step,
                                tfm_vocab **vocab, tfm_error *err)
{
    const char *s;
    tfm_status st;
    if ((st = need_metadata(f, "format", &s, err))) {
        tfm_error_prefix(err, "not a tfm model");
        return st;
    }
    if (strcmp(s, MODEL_FORMAT) != 0)
        return tfm_error_set(err, TFM_ERR_FORMAT, "metadata 'format' is '%.40s', expected '%s'",
                             s, MODEL_FORMAT);
    if ((st = need_metadata(f, "format_version", &s, err))) return st;
    if (strcmp(s, MODEL_FORMAT_VERSION) != 0)
        return tfm_error_set(err, TFM_ERR_UNSUPPORTED,
                             "metadata 'format_version' is '%.40s', but this program reads "
                             "version %s",
                             s, MODEL_FORMAT_VERSION);

    memset(c, 0, sizeof *c);
    for (size_t i = 0; i < N_FIELDS; i++) {
        s = tfm_safetensors_metadata(f, fields[i].key);
        if (!s && !(s = fields[i].absent)) return need_metadata(f, fields[i].key, &s, err);
        if ((st = field_parse(&fields[i], s, c, err))) return st;
    }
    if ((st = tfm_config_validate(c, err))) return st;

    long long n;
    if ((st = need_metadata(f, "step", &s, err))) return st;
    if (!parse_int(s, 0, INT64_MAX, &n))
        return tfm_error_set(err, TFM_ERR_FORMAT,
                             "metadata 'step' is '%.40s', expected a non-negative integer", s);
    *step = n;

    *vocab = NULL;
    s = tfm_safetensors_metadata(f, "vocab");
    if (!s) return TFM_OK;
    if ((st = tfm_vocab_parse(s, strlen(s), vocab, err))) {
        tfm_error_prefix(err, "metadata 'vocab'");
        return st;
    }
    if ((st = check_vocab(c, *vocab, err))) {
        tfm_vocab_free(*vocab);
        *vocab = NULL;
    }
    return st;
}

/* ---- saving ------------------------------------------------------------------------- */

/* tfm_params_visit's callbacks return nothing, so the first failure is kept
 * here and the remaining tensors are skipped. */
typedef struct tensor_pass {
    tfm_safetensors_writer *w; /* saving */
    tfm_safetensors *f;        /* loading */
    tfm_status st;
    tfm_error *err;
} tensor_pass;

static void add_tensor(void *ctx, const char *name, int ndim, const int64_t *shape, float *data)
{
    tensor_pass *t = ctx;
    if (t->st == TFM_OK)
        t->st = tfm_safetensors_writer_add_tensor(t->w, name, TFM_F32, ndim, shape, data, t->err);
}

/* Fills w with the model's metadata and tensors. */
static tfm_status fill_writer(const tfm_model *m, const char *const *extra,
                              tfm_safetensors_writer *w, tfm_error *err)
{
    tfm_status st;
    char value[64];
    if ((st = tfm_safetensors_writer_add_metadata(w, "format", MODEL_FORMAT, err))) return st;
    if ((st = tfm_safetensors_writer_add_metadata(w, "format_version", MODEL_FORMAT_VERSION, err)))
        return st;
    for (size_t i = 0; i < N_FIELDS; i++) {
        field_format(&fields[i], &m->config, value, sizeof value);
        if ((st = tfm_safetensors_writer_add_metadata(w, fields[i].key, value, err))) return st;
    }
    snprintf(value, sizeof value, "%" PRId64, m->step);
    if ((st = tfm_safetensors_writer_add_metadata(w, "step", value, err))) return st;
    if (m->vocab) {
        char *text;
        size_t len;
        if ((st = vocab_to_text(m->vocab, &text, &len, err))) return st;
        st = tfm_safetensors_writer_add_metadata(w, "vocab", text, err);
        free(text);
        if (st) return st;
    }
    for (size_t i = 0; extra && extra[i]; i += 2) {
        if (!extra[i + 1])
            return tfm_error_set(err, TFM_ERR_ARG, "extra metadata '%s' has no value", extra[i]);
        if ((st = tfm_safetensors_writer_add_metadata(w, extra[i], extra[i + 1], err))) {
            tfm_error_prefix(err, "extra metadata");
            return st;
        }
    }
    tensor_pass t = {.w = w, .st = TFM_OK, .err = err};
    tfm_params_visit(&m->config, &m->params, add_tensor, &t);
    return t.st;
}

tfm_status tfm_model_save(const tfm_model *m, const char *path, const char *const *extra_metadata,
                          tfm_error *err)
{
    tfm_safetensors_writer *w = tfm_safetensors_writer_create();
    if (!w) return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory saving a model");
    tfm_status st = fill_writer(m, extra_metadata, w, err);
    if (st == TFM_OK) st = tfm_safetensors_write(w, path, err);
    tfm_safetensors_writer_free(w);
    return st;
}

/* ---- loading ------------------------------------------------------------------------ */

/* First pass: the tensor exists with this dtype and shape (data is NULL:
 * nothing is allocated yet). */
static void check_tensor(void *ctx, const char *name, int ndim, const int64_t *shape, float *data)
{
    tensor_pass *t = ctx;
    const void *found;
    if (t->st == TFM_OK)
        t->st = tfm_safetensors_get(t->f, name, TFM_F32, ndim, shape, &found, t->err);
}

/* Second pass: copy it into the model's buffer. */
static void copy_tensor(void *ctx, const char *name, int ndim, const int64_t *shape, float *data)
{
    tensor_pass *t = ctx;
    if (t->st != TFM_OK) return;
    const void *found;
    t->st = tfm_safetensors_get(t->f, name, TFM_F32, ndim, shape, &found, t->err);
    if (t->st != TFM_OK) return;
    size_t n = 1;
    for (int i = 0; i < ndim; i++) n *= (size_t)shape[i];
    memcpy(data, found, n * sizeof(float));
}

/* Checks every tensor against the configuration before allocating, so a
 * file whose metadata claim a huge model is refused without allocating
 * it; then copies the tensors into a new model. */
static tfm_status read_tensors(tfm_safetensors *f, const tfm_config *c, tfm_model **out,
                               tfm_error *err)
{
    tfm_params names_only;
    if (tfm_params_layout(c, NULL, &names_only) != TFM_OK)
        return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory loading a model");
    tensor_pass t = {.f = f, .st = TFM_OK, .err = err};
    tfm_params_visit(c, &names_only, check_tensor, &t);
    tfm_params_free_layout(&names_only);
    if (t.st == TFM_OK) t.st = tfm_safetensors_check_all_used(f, err);
    if (t.st != TFM_OK) return t.st;

    tfm_model *m;
    tfm_status st = model_alloc(c, &m, err);
    if (st != TFM_OK) return st;
    tfm_params_visit(c, &m->params, copy_tensor, &t);
    if (t.st != TFM_OK) {
        tfm_model_free(m);
        return t.st;
    }
    *out = m;
    return TFM_OK;
}

tfm_status tfm_model_load(const char *path, tfm_model **out, tfm_error *err)
{
    *out = NULL;
    tfm_safetensors *f;
    tfm_status st = tfm_safetensors_open(path, &f, err);
    if (st != TFM_OK) return st;
    tfm_config c;
    int64_t step = 0;
    tfm_vocab *vocab = NULL;
    tfm_model *m = NULL;
    st = read_metadata(f, &c, &step, &vocab, err);
    if (st == TFM_OK) st = read_tensors(f, &c, &m, err);
    tfm_safetensors_free(f);
    if (st != TFM_OK) {
        tfm_vocab_free(vocab);
        return st;
    }
    m->vocab = vocab;
    m->step = step;
    *out = m;
    return TFM_OK;
}

/* The vocabulary in the metadata of an opened model file. */
static tfm_status vocab_of_model_file(tfm_safetensors *f, tfm_vocab **out, tfm_error *err)
{
    const char *text = tfm_safetensors_metadata(f, "vocab");
    if (!text) return tfm_error_set(err, TFM_ERR_FORMAT, "the model file holds no vocabulary");
    tfm_status st = tfm_vocab_parse(text, strlen(text), out, err);
    if (st != TFM_OK) tfm_error_prefix(err, "the vocabulary in its metadata");
    return st;
}

tfm_status tfm_model_load_vocab(const char *path, tfm_vocab **out, tfm_error *err)
{
    *out = NULL;
    /* A safetensors file starts with an 8-byte header length and then the
     * JSON header's '{'; anything else is read as a vocabulary file, whose
     * loader says what is wrong with it.  The file is opened once, so that a
     * pipe (tokenize -m <(...)) works: its first bytes are read once. */
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return tfm_error_set(err, TFM_ERR_IO, "%s", strerror(errno));
    tfm_buf start;
    tfm_buf_init(&start);
    tfm_status st = tfm_read_upto(fd, &start, 9, err);
    if (st == TFM_OK && (start.len < 9 || start.data[8] != '{')) {
        st = tfm_vocab_read_fd(fd, start.data, start.len, out, err);
    } else if (st == TFM_OK) {
        tfm_safetensors *f = NULL;
        struct stat sb;
        /* a regular file is mapped from its start; anything else read on */
        if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode))
            st = tfm_safetensors_open(path, &f, err);
        else
            st = tfm_safetensors_read_fd(fd, start.data, start.len, &f, err);
        if (st == TFM_OK) st = vocab_of_model_file(f, out, err);
        tfm_safetensors_free(f);
    }
    tfm_buf_free(&start);
    close(fd);
    return st;
}
