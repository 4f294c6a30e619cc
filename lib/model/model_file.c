/* model_file.c - model files: safetensors holding every tensor under its
 * PyTorch-style name, with the configuration, the training step and the
 * vocabulary's text in __metadata__ (tfm-formats(5)), so that one file is
 * the whole model and opens in Python unchanged.  The model goes into a
 * safetensors writer and comes out of an opened safetensors file, so a file
 * that holds more (a checkpoint) adds to the one and takes the rest of the
 * other; paths, streams, descriptors and bytes in memory are thin wrappers
 * over those two. */
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

#include "model/model_internal.h"
#include "nn/layers.h" /* nn_packed_best_kernel */

/* ---- the configuration as metadata ------------------------------------------------- */

typedef enum field_kind {
    FIELD_INT,       /* int */
    FIELD_I32,       /* int32_t */
    FIELD_FLOAT,     /* float, written with %.9g so that it reads back exactly */
    FIELD_BOOL,      /* "true" or "false" */
    FIELD_ENUM,      /* an enum (int-sized) written as the name of its value: names[value] */
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
    const char *const *names; /* FIELD_ENUM: the names of the values 0, 1, ... */
    int n_names;
} field;

#define FIELD(member, kind, expect) {#member, kind, offsetof(tfm_config, member), expect, NULL, NULL, 0}

/* The names of the tfm_pos_kind and tfm_activation values, in their order. */
static const char *const position_names[] = {"sinusoidal", "learned", "none", "sinusoidal-concat"};
static const char *const activation_names[] = {"relu", "swish", "gelu-sigmoid"};

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
    {"positions", FIELD_ENUM, offsetof(tfm_config, positions),
     "'sinusoidal', 'learned', 'none' or 'sinusoidal-concat'", NULL, position_names, 4},
    {"relative_positions", FIELD_INT, offsetof(tfm_config, relative_positions),
     "a non-negative integer", "0", NULL, 0},
    {"norm", FIELD_NORM, offsetof(tfm_config, pre_norm), "'post' or 'pre'", NULL, NULL, 0},
    FIELD(shared_embeddings, FIELD_BOOL, "'true' or 'false'"),
    {"shared_decoder_embeddings", FIELD_BOOL, offsetof(tfm_config, shared_decoder_embeddings),
     "'true' or 'false'", "false", NULL, 0},
    FIELD(attention_window, FIELD_INT, "a non-negative integer"),
    FIELD(dropout, FIELD_FLOAT, "a number"),
    FIELD(attention_dropout, FIELD_FLOAT, "a number"),
    {"activation_dropout", FIELD_FLOAT, offsetof(tfm_config, activation_dropout), "a number", "0",
     NULL, 0},
    FIELD(label_smoothing, FIELD_FLOAT, "a number"),
    FIELD(layer_norm_eps, FIELD_FLOAT, "a number"),
    FIELD(pad_id, FIELD_I32, "a non-negative integer"),
    FIELD(unk_id, FIELD_I32, "a non-negative integer"),
    FIELD(bos_id, FIELD_I32, "a non-negative integer"),
    FIELD(eos_id, FIELD_I32, "a non-negative integer"),
    /* the variants of models from elsewhere; a file without them is the paper's model */
    {"activation", FIELD_ENUM, offsetof(tfm_config, activation),
     "'relu', 'swish' or 'gelu-sigmoid'", "relu", activation_names, 3},
    {"output_bias", FIELD_BOOL, offsetof(tfm_config, output_bias), "'true' or 'false'", "false",
     NULL, 0},
    {"decoder_start_zero", FIELD_BOOL, offsetof(tfm_config, decoder_start_zero),
     "'true' or 'false'", "false", NULL, 0},
    {"embedding_layer_norm", FIELD_BOOL, offsetof(tfm_config, embedding_layer_norm),
     "'true' or 'false'", "false", NULL, 0},
    {"alignment_layer", FIELD_INT, offsetof(tfm_config, alignment_layer),
     "an integer from -1", "-1", NULL, 0},
};
#define N_FIELDS (sizeof fields / sizeof fields[0])
_Static_assert(sizeof(tfm_pos_kind) == sizeof(int) && sizeof(tfm_activation) == sizeof(int),
               "FIELD_ENUM reads and writes enums as int");

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
    case FIELD_ENUM: snprintf(out, size, "%s", f->names[*(const int *)at]); break;
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
    case FIELD_ENUM:
        for (int k = 0; k < f->n_names && !ok; k++)
            if (strcmp(s, f->names[k]) == 0) {
                *(int *)at = k;
                ok = true;
            }
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

/* The metadata key that says a model was trained without </s> at the end of
 * its sources: the one 'train' stores its --no-eos option under. */
#define NO_EOS_KEY "train.opt.no-eos"

/* The metadata key that says a model's matrices are int8 or bf16. */
#define QUANTIZATION_KEY "quantization"

/* What the metadata of a model file hold besides the tensors. */
typedef struct model_header {
    tfm_config config;
    int64_t step;
    bool source_eos;
    tfm_compute_type quantization; /* float32: none */
    bool panels; /* a packed model file: the matrices' panels beside them (model_panels.c) */
    tfm_vocab *vocab; /* owned; NULL when the file has none: the joint vocabulary
                         ("vocab"), or the target side's ("tgt_vocab") */
    tfm_vocab *src_vocab; /* owned; the source side's ("src_vocab"), or NULL */
} model_header;

static void header_free_vocabs(model_header *h)
{
    tfm_vocab_free(h->vocab);
    tfm_vocab_free(h->src_vocab);
    h->vocab = h->src_vocab = NULL;
}

/* The vocabulary in metadata key, checked against side's size (joint: both). */
static tfm_status read_vocab(const tfm_safetensors *f, const char *key, const tfm_config *c,
                             int side, tfm_vocab **out, tfm_error *err)
{
    const char *s;
    tfm_status st = tfm_safetensors_metadata_get(f, key, &s, err);
    if (st == TFM_OK) st = tfm_vocab_parse(s, strlen(s), out, err);
    if (st == TFM_OK)
        st = side < 0 ? tfm_model_check_vocab(c, *out, err)
                      : tfm_model_check_side_vocab(c, (tfm_side)side, *out, err);
    if (st != TFM_OK) {
        tfm_error_prefix(err, "metadata '%s'", key);
        tfm_vocab_free(*out);
        *out = NULL;
    }
    return st;
}

/* Reads and checks the format, the configuration, the step, the source
 * convention and (vocabularies) the vocabularies.  On failure they are
 * NULL. */
static tfm_status read_metadata(const tfm_safetensors *f, model_header *h, bool vocabularies,
                                tfm_error *err)
{
    const char *s;
    tfm_status st;
    memset(h, 0, sizeof *h);
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

    tfm_config *c = &h->config;
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
    h->step = n;

    s = tfm_safetensors_metadata(f, NO_EOS_KEY);
    if (s && strcmp(s, "yes") != 0 && strcmp(s, "no") != 0)
        return tfm_error_set(err, TFM_ERR_FORMAT,
                             "metadata '" NO_EOS_KEY "' is '%.40s%s', expected 'yes' or 'no'", s,
                             strlen(s) > 40 ? "..." : "");
    h->source_eos = !s || strcmp(s, "no") == 0;

    s = tfm_safetensors_metadata(f, QUANTIZATION_KEY);
    h->quantization = TFM_COMPUTE_FLOAT32;
    if (s && (!tfm_compute_type_parse(s, &h->quantization) ||
              h->quantization == TFM_COMPUTE_FLOAT32 || strcmp(s, tfm_compute_type_name(h->quantization)) != 0))
        return tfm_error_set(err, TFM_ERR_FORMAT,
                             "metadata '" QUANTIZATION_KEY "' is '%.40s%s', expected 'int8' or 'bf16'",
                             s, strlen(s) > 40 ? "..." : "");

    s = tfm_safetensors_metadata(f, TFM_PANELS_KEY);
    if (s && strcmp(s, TFM_PANELS_VALUE) != 0)
        return tfm_error_set(err, TFM_ERR_UNSUPPORTED,
                             "metadata '" TFM_PANELS_KEY "' is '%.40s%s', but this program reads "
                             "panels of " TFM_PANELS_VALUE,
                             s, strlen(s) > 40 ? "..." : "");
    h->panels = s != NULL;

    /* One vocabulary for both sides ("vocab"), or one per side: which the
     * file holds, without reading them (a long value is read when asked
     * for, below or never). */
    const bool joint = tfm_safetensors_has_metadata(f, "vocab");
    const bool src = tfm_safetensors_has_metadata(f, "src_vocab");
    const bool tgt = tfm_safetensors_has_metadata(f, "tgt_vocab");
    if (joint && (src || tgt))
        return tfm_error_set(err, TFM_ERR_FORMAT,
                             "metadata 'vocab' (one vocabulary) and '%s' (one per side) "
                             "contradict each other",
                             src ? "src_vocab" : "tgt_vocab");
    if (src != tgt)
        return tfm_error_set(err, TFM_ERR_FORMAT, "metadata '%s' is missing beside '%s'",
                             src ? "tgt_vocab" : "src_vocab", src ? "src_vocab" : "tgt_vocab");
    if (!vocabularies) return TFM_OK;
    if (joint) return read_vocab(f, "vocab", c, -1, &h->vocab, err);
    if (!src) return TFM_OK;
    st = read_vocab(f, "src_vocab", c, TFM_SOURCE, &h->src_vocab, err);
    if (st == TFM_OK) st = read_vocab(f, "tgt_vocab", c, TFM_TARGET, &h->vocab, err);
    /* One matrix for both sides needs one set of pieces: an imported model's
     * two vocabularies may differ only in their SentencePiece models (an
     * OPUS-MT model's source.spm and target.spm over one vocab.yml). */
    if (st == TFM_OK && c->shared_embeddings &&
        !(tfm_vocab_is_foreign(h->src_vocab) && tfm_vocab_is_foreign(h->vocab)))
        st = tfm_error_set(err, TFM_ERR_FORMAT,
                           "metadata 'shared_embeddings' is 'true', but the model has a "
                           "vocabulary per side");
    if (st != TFM_OK) header_free_vocabs(h);
    return st;
}

/* Adds vocabulary v to w under key. */
static tfm_status add_vocab(tfm_safetensors_writer *w, const char *key, const tfm_vocab *v,
                            tfm_error *err)
{
    char *text;
    size_t len;
    tfm_status st = tfm_model_vocab_text(v, &text, &len, err);
    if (st == TFM_OK) st = tfm_safetensors_writer_add_metadata(w, key, text, err);
    free(text);
    return st;
}

/* ---- writing ------------------------------------------------------------------------ */

/* tfm_params_visit's callbacks return nothing, so the first failure is kept
 * here and the remaining tensors are skipped. */
typedef struct tensor_pass {
    tfm_safetensors_writer *w; /* writing */
    tfm_safetensors *f;        /* reading */
    tfm_compute_type quantization; /* of the matrices (float32: none) */
    tfm_quantized *qz;         /* their int8 or bf16 values, when quantized */
    const float *base;         /* the model's float buffer, which qz parallels */
    const tfm_file_panels *in_place; /* reading: the matrices these panels hold, and
                                        the embeddings whose floats they hold, are left
                                        out of the model's buffer (inference alone) */
    tfm_status st;
    tfm_error *err;
} tensor_pass;

/* The name of an int8 matrix's row scales: "NAME_scale" (CTranslate2's
 * "weight_scale"). */
static void scale_name(const char *name, char *out, size_t size)
{
    snprintf(out, size, "%s_scale", name);
}

/* How the file holds a tensor: its dtype, and for an int8 matrix the scales'
 * name too (else ""). */
static tfm_dtype file_dtype(const tensor_pass *t, const char *name, int ndim, char *scale,
                            size_t size)
{
    scale[0] = 0;
    if (t->quantization == TFM_COMPUTE_FLOAT32 || !tfm_model_is_quantized_tensor(name, ndim))
        return TFM_F32;
    if (t->quantization == TFM_COMPUTE_BF16) return TFM_BF16;
    scale_name(name, scale, size);
    return TFM_I8;
}

/* Where a matrix's quantized values lie in t->qz. */
static tfm_quantized_view quantized_of(const tensor_pass *t, const float *data)
{
    tfm_quantized_view v = {0};
    tfm_quantized_find(t->qz, (size_t)(data - t->base), &v);
    return v;
}

static void add_tensor(void *ctx, const char *name, int ndim, const int64_t *shape, float *data)
{
    tensor_pass *t = ctx;
    if (t->st != TFM_OK) return;
    char scale[192];
    const tfm_dtype dtype = file_dtype(t, name, ndim, scale, sizeof scale);
    const tfm_quantized_view v = dtype == TFM_F32 ? (tfm_quantized_view){0} : quantized_of(t, data);
    const void *values = dtype == TFM_I8 ? (const void *)v.q : dtype == TFM_BF16 ? (const void *)v.bf16
                                                                                 : (const void *)data;
    t->st = tfm_safetensors_writer_add_tensor(t->w, name, dtype, ndim, shape, values, t->err);
    if (t->st == TFM_OK && scale[0])
        t->st = tfm_safetensors_writer_add_tensor(t->w, scale, TFM_F32, 1, shape, v.scale, t->err);
}

/* True when the NULL-terminated key, value pairs kv name key. */
static bool has_key(const char *const *kv, const char *key)
{
    for (size_t i = 0; kv && kv[i]; i += 2)
        if (strcmp(kv[i], key) == 0) return true;
    return false;
}

tfm_status tfm_model_to_safetensors(const tfm_model *m, const char *const *extra,
                                    tfm_safetensors_writer *w, tfm_error *err)
{
    tfm_status st;
    char value[64];
    if ((st = tfm_safetensors_writer_add_metadata(w, "format", MODEL_FORMAT, err))) return st;
    if ((st = tfm_safetensors_writer_add_metadata(w, "format_version", MODEL_FORMAT_VERSION, err)))
        return st;
    for (size_t i = 0; i < N_FIELDS; i++) {
        field_format(&fields[i], &m->config, value, sizeof value);
        /* A variant at its default is left out: the paper's model is written
         * as it was before the variants existed, and older programs read it. */
        if (fields[i].offset >= offsetof(tfm_config, activation) &&
            strcmp(value, fields[i].absent) == 0)
            continue;
        if ((st = tfm_safetensors_writer_add_metadata(w, fields[i].key, value, err))) return st;
    }
    snprintf(value, sizeof value, "%" PRId64, m->step);
    if ((st = tfm_safetensors_writer_add_metadata(w, "step", value, err))) return st;
    /* The caller's value of the key, when it gives one, stands. */
    if (!m->source_eos && !has_key(extra, NO_EOS_KEY) &&
        (st = tfm_safetensors_writer_add_metadata(w, NO_EOS_KEY, "yes", err)))
        return st;
    if (m->src_vocab) {
        if ((st = add_vocab(w, "src_vocab", m->src_vocab, err))) return st;
        if ((st = add_vocab(w, "tgt_vocab", m->vocab, err))) return st;
    } else if (m->vocab && (st = add_vocab(w, "vocab", m->vocab, err))) {
        return st;
    }
    for (size_t i = 0; extra && extra[i]; i += 2) {
        if (!extra[i + 1])
            return tfm_error_set(err, TFM_ERR_ARG, "extra metadata '%s' has no value", extra[i]);
        if ((st = tfm_safetensors_writer_add_metadata(w, extra[i], extra[i + 1], err))) {
            tfm_error_prefix(err, "extra metadata");
            return st;
        }
    }
    const tfm_compute_type quantization = tfm_quantized_type(m->quantized);
    if (quantization != TFM_COMPUTE_FLOAT32 &&
        (st = tfm_safetensors_writer_add_metadata(w, QUANTIZATION_KEY,
                                                  tfm_compute_type_name(quantization), err)))
        return st;
    tensor_pass t = {.w = w, .quantization = quantization, .qz = m->quantized, .base = m->data,
                     .st = TFM_OK, .err = err};
    tfm_params_visit(&m->config, &m->params, add_tensor, &t);
    return t.st;
}

/* Writes m to path atomically, or (path NULL) to fp. */
static tfm_status write_model(const tfm_model *m, const char *const *extra, const char *path,
                              FILE *fp, tfm_error *err)
{
    tfm_safetensors_writer *w = tfm_safetensors_writer_create();
    if (!w) return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory saving a model");
    tfm_status st = tfm_model_to_safetensors(m, extra, w, err);
    if (st == TFM_OK)
        st = path ? tfm_safetensors_write(w, path, err) : tfm_safetensors_write_stream(w, fp, err);
    tfm_safetensors_writer_free(w);
    return st;
}

tfm_status tfm_model_save(const tfm_model *m, const char *path, const char *const *extra_metadata,
                          tfm_error *err)
{
    return write_model(m, extra_metadata, path, NULL, err);
}

tfm_status tfm_model_write_stream(const tfm_model *m, FILE *fp,
                                  const char *const *extra_metadata, tfm_error *err)
{
    return write_model(m, extra_metadata, NULL, fp, err);
}

/* ---- reading ------------------------------------------------------------------------ */

/* A tensor's data as the file holds it (dtype and shape checked), and an
 * int8 matrix's row scales (else *scales is NULL). */
static tfm_status get_tensor(tensor_pass *t, const char *name, int ndim, const int64_t *shape,
                             tfm_dtype *dtype, const void **found, const float **scales)
{
    char scale[192];
    *dtype = file_dtype(t, name, ndim, scale, sizeof scale);
    *scales = NULL;
    tfm_status st = tfm_safetensors_get(t->f, name, *dtype, ndim, shape, found, t->err);
    if (st == TFM_OK && scale[0])
        st = tfm_safetensors_get(t->f, scale, TFM_F32, 1, shape, (const void **)scales, t->err);
    return st;
}

/* First pass: the tensor exists with this dtype and shape (data is NULL:
 * nothing is allocated yet). */
static void check_tensor(void *ctx, const char *name, int ndim, const int64_t *shape, float *data)
{
    tensor_pass *t = ctx;
    tfm_dtype dtype;
    const void *found;
    const float *scales;
    if (t->st == TFM_OK) t->st = get_tensor(t, name, ndim, shape, &dtype, &found, &scales);
}

/* Second pass: copy it into the model's buffer, or a quantized matrix into
 * the model's quantized store. */
static void copy_tensor(void *ctx, const char *name, int ndim, const int64_t *shape, float *data)
{
    tensor_pass *t = ctx;
    if (t->st != TFM_OK) return;
    tfm_dtype dtype;
    const void *found;
    const float *scales;
    t->st = get_tensor(t, name, ndim, shape, &dtype, &found, &scales);
    if (t->st != TFM_OK) return;
    size_t n = 1;
    for (int i = 0; i < ndim; i++) n *= (size_t)shape[i];
    if (t->in_place && tfm_file_panels_holds(t->in_place, data)) return;
    if (dtype == TFM_F32) {
        memcpy(data, found, n * sizeof(float));
        return;
    }
    const tfm_quantized_view v = quantized_of(t, data);
    if (dtype == TFM_I8) {
        memcpy(v.q, found, n);
        memcpy(v.scale, scales, (size_t)shape[0] * sizeof *scales);
    } else {
        memcpy(v.bf16, found, n * sizeof *v.bf16);
    }
}

/* Checks every tensor against the configuration before allocating, so a
 * file whose metadata claim a huge model is refused without allocating
 * it, and (whole) that the file holds no other tensor but, in a checkpoint,
 * the training's state (model.h); then copies the
 * tensors into a new model.  A quantized file's matrices go into the
 * model's quantized store, and into its float buffer dequantized: all of
 * them with float_weights, else only the embeddings.  A packed file's
 * panels are checked too; without float_weights, the model reads them and
 * its float embeddings in place, and takes *f (set to NULL). */
static tfm_status read_tensors(tfm_safetensors **fref, const model_header *h, bool whole,
                               bool float_weights, tfm_model **out, tfm_error *err)
{
    tfm_safetensors *f = *fref;
    const tfm_config *c = &h->config;
    tfm_params names_only;
    if (tfm_params_layout(c, NULL, &names_only) != TFM_OK)
        return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory loading a model");
    tensor_pass t = {.f = f, .quantization = h->quantization, .st = TFM_OK, .err = err};
    tfm_params_visit(c, &names_only, check_tensor, &t);
    tfm_params_free_layout(&names_only);
    if (t.st != TFM_OK) return t.st;

    const bool quantized = h->quantization != TFM_COMPUTE_FLOAT32;
    if (!quantized && !h->panels) float_weights = true;
    tfm_model *m;
    tfm_status st = tfm_model_alloc(c, !float_weights, &m, err);
    if (st == TFM_OK && quantized) st = tfm_quantized_alloc(m, h->quantization, &m->quantized, err);
    tfm_file_panels *fp = NULL;
    if (st == TFM_OK && h->panels) st = tfm_file_panels_read(f, m, h->quantization, &fp, err);
    if (st == TFM_OK && whole) {
        if (tfm_safetensors_metadata(f, TFM_CHECKPOINT_KEY)) { /* its training state */
            tfm_safetensors_skip_prefixed(f, TFM_CHECKPOINT_EXP_AVG);
            tfm_safetensors_skip_prefixed(f, TFM_CHECKPOINT_EXP_AVG_SQ);
            tfm_safetensors_skip_prefixed(f, TFM_CHECKPOINT_EMA);
        }
        st = tfm_safetensors_check_all_used(f, err);
    }
    if (st != TFM_OK) {
        tfm_file_panels_free(fp);
        tfm_model_free(m);
        return st;
    }
    t.qz = m->quantized;
    t.base = m->data;
    t.in_place = float_weights ? NULL : fp;
    /* read in place, the buffer gets the biases and norms alone: scattered
     * pieces, a 4 KB page each rather than a huge page */
    if (t.in_place) tfm_advise_small_pages(m->data, tfm_params_count(c) * sizeof(float));
    tfm_params_visit(c, &m->params, copy_tensor, &t);
    if (t.st != TFM_OK) {
        tfm_file_panels_free(fp);
        tfm_model_free(m);
        return t.st;
    }
    if (t.in_place) { /* the model reads the file from now on */
        tfm_file_panels_embeddings(fp, &m->params);
        tfm_file_panels_keep_file(fp, f);
        m->file_panels = fp;
        *fref = NULL;
    } else {
        tfm_file_panels_free(fp);
    }
    tfm_quantized_dequantize(m, !float_weights);
    m->float_weights = float_weights;
    m->compute = h->quantization;
    *out = m;
    return TFM_OK;
}

/* The model in *f; whole: *f must hold nothing else; float_weights as for
 * read_tensors (which may take *f). */
static tfm_status read_model(tfm_safetensors **f, bool whole, bool float_weights,
                             bool vocabularies, tfm_model **out, tfm_error *err)
{
    *out = NULL;
    model_header h;
    tfm_model *m = NULL;
    tfm_status st = read_metadata(*f, &h, vocabularies, err);
    /* a packed file's vocabularies as arrays say what their text says (when
     * the text was read: else they are only found) */
    if (st == TFM_OK && tfm_safetensors_has_metadata(*f, "vocab")) {
        st = tfm_vocab_arrays_check(*f, "vocab", h.vocab, err);
    } else if (st == TFM_OK) {
        st = tfm_vocab_arrays_check(*f, "src_vocab", h.src_vocab, err);
        if (st == TFM_OK) st = tfm_vocab_arrays_check(*f, "tgt_vocab", h.vocab, err);
    }
    if (st == TFM_OK) st = read_tensors(f, &h, whole, float_weights, &m, err);
    if (st != TFM_OK) {
        header_free_vocabs(&h);
        return st;
    }
    m->vocab = h.vocab;
    m->src_vocab = h.src_vocab;
    m->step = h.step;
    m->source_eos = h.source_eos;
    *out = m;
    return TFM_OK;
}

tfm_status tfm_model_from_safetensors(tfm_safetensors *f, tfm_model **out, tfm_error *err)
{
    return read_model(&f, false, true, true, out, err);
}

/* The model of a whole file that opening gave (st, *f), which it frees. */
static tfm_status load_whole(tfm_status st, tfm_safetensors **f, tfm_model **out, tfm_error *err)
{
    if (st == TFM_OK) st = read_model(f, true, true, true, out, err);
    tfm_safetensors_free(*f);
    return st;
}

tfm_status tfm_model_load(const char *path, tfm_model **out, tfm_error *err)
{
    *out = NULL;
    tfm_safetensors *f = NULL;
    return load_whole(tfm_safetensors_open(path, &f, err), &f, out, err);
}

tfm_status tfm_model_load_for_inference(const char *path, tfm_compute_type compute,
                                        tfm_model **out, tfm_error *err)
{
    *out = NULL;
    tfm_safetensors *f = NULL;
    tfm_status st = tfm_safetensors_open(path, &f, err);
    /* the file's type and whether it is packed, as read_metadata reads them
     * (which says what is wrong with a bad value) */
    tfm_compute_type type = TFM_COMPUTE_FLOAT32;
    const char *s = st == TFM_OK ? tfm_safetensors_metadata(f, QUANTIZATION_KEY) : NULL;
    if (s && !tfm_compute_type_parse(s, &type)) type = TFM_COMPUTE_FLOAT32;
    const bool packed = st == TFM_OK && tfm_safetensors_metadata(f, TFM_PANELS_KEY);
    if (compute == TFM_COMPUTE_DEFAULT) compute = type;
    /* its matrices in their own type only when it computes in that type;
     * a packed file's float32 ones as panels alone, when this CPU runs the
     * float32 kernels that read them */
    bool float_weights = type == TFM_COMPUTE_FLOAT32 || compute != type;
    if (packed && compute == type &&
        (compute != TFM_COMPUTE_FLOAT32 || nn_packed_best_kernel() != NN_KERNEL_SGEMM))
        float_weights = false;
    /* encode and decode take ids: the vocabularies are not read */
    if (st == TFM_OK) st = read_model(&f, true, float_weights, false, out, err);
    tfm_safetensors_free(f);
    if (st == TFM_OK && (st = tfm_model_set_compute_type(*out, compute, err)) != TFM_OK) {
        tfm_model_free(*out);
        *out = NULL;
    }
    return st;
}

tfm_status tfm_model_load_fd(int fd, tfm_model **out, tfm_error *err)
{
    *out = NULL;
    tfm_safetensors *f = NULL;
    return load_whole(tfm_safetensors_read_fd(fd, NULL, 0, &f, err), &f, out, err);
}

tfm_status tfm_model_parse(const void *data, size_t size, tfm_model **out, tfm_error *err)
{
    *out = NULL;
    tfm_safetensors *f = NULL;
    return load_whole(tfm_safetensors_parse(data, size, &f, err), &f, out, err);
}

/* ---- the vocabulary alone ----------------------------------------------------------- */

static void free_file(void *f)
{
    tfm_safetensors_free(f);
}

/* The vocabulary of side in the metadata of an opened model file: the
 * joint one, or the side's own.  From a packed file's arrays, its pieces
 * are read in place: it takes the file (*f is NULL then). */
static tfm_status vocab_of_model_file(tfm_safetensors **f, tfm_side side, tfm_vocab **out,
                                      tfm_error *err)
{
    const char *key = tfm_safetensors_has_metadata(*f, "vocab") ? "vocab"
                      : side == TFM_SOURCE                      ? "src_vocab"
                                                                : "tgt_vocab";
    tfm_vocab_arrays a;
    bool found;
    tfm_status st = tfm_vocab_arrays_find(*f, key, &a, &found, err);
    if (st == TFM_OK && found) {
        if ((st = tfm_vocab_from_arrays(&a, free_file, *f, out, err)) == TFM_OK) *f = NULL;
        else tfm_error_prefix(err, "the arrays of its vocabulary ('%s.texts' ...)", key);
        return st;
    }
    if (st != TFM_OK) return st;
    const char *text;
    st = tfm_safetensors_metadata_get(*f, key, &text, err);
    if (st == TFM_OK && !text)
        return tfm_error_set(err, TFM_ERR_FORMAT, "the model file holds no vocabulary");
    if (st == TFM_OK) st = tfm_vocab_parse(text, strlen(text), out, err);
    if (st != TFM_OK) tfm_error_prefix(err, "the vocabulary in its metadata");
    return st;
}

tfm_status tfm_model_load_vocab(const char *path, tfm_side side, tfm_vocab **out, tfm_error *err)
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
        if (st == TFM_OK) st = vocab_of_model_file(&f, side, out, err);
        tfm_safetensors_free(f);
    }
    tfm_buf_free(&start);
    close(fd);
    return st;
}

/* Loads, quantizes (model_quant.c) and saves: the file form of
 * tfm_model_quantize, here beside the loading and saving it needs. */
tfm_status tfm_model_quantize_file(const char *in, const char *out, tfm_compute_type type,
                                   tfm_error *err)
{
    tfm_model *m;
    tfm_status st = tfm_model_load(in, &m, err);
    if (st != TFM_OK) {
        tfm_error_prefix(err, "%s", in);
        return st;
    }
    if ((st = tfm_model_quantize(m, type, err)) != TFM_OK) tfm_error_prefix(err, "%s", in);
    else if ((st = tfm_model_save(m, out, NULL, err)) != TFM_OK) tfm_error_prefix(err, "%s", out);
    tfm_model_free(m);
    return st;
}
