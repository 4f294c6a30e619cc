/* test_model_files.c - the model's files: models survive a save and load
 * bit for bit; bad model files (cut short, wrong shapes, missing or extra
 * tensors, bad metadata, a vocabulary of the wrong size) fail with messages
 * that say what is wrong; models go to a stream and come back from memory,
 * a pipe and an opened file equal; whether sources end with </s> survives a
 * save; vocabularies, one or one per side, travel in the file; and a small
 * python reader finds our tensors by name.  The configuration, the layout
 * and the initialisation: test_model.c. */
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "testconfig.h"
#include "testutil.h"
#include "tfm/pass.h"
#include "tfm/safetensors.h"

/* ---- model files ----------------------------------------------------------------- */

static bool config_equal(const tfm_config *a, const tfm_config *b)
{
    return a->src_vocab_size == b->src_vocab_size && a->tgt_vocab_size == b->tgt_vocab_size &&
           a->d_model == b->d_model && a->d_ff == b->d_ff && a->n_heads == b->n_heads &&
           a->n_encoder_layers == b->n_encoder_layers &&
           a->n_decoder_layers == b->n_decoder_layers && a->max_positions == b->max_positions &&
           a->positions == b->positions && a->relative_positions == b->relative_positions &&
           a->pre_norm == b->pre_norm && a->shared_embeddings == b->shared_embeddings &&
           a->attention_window == b->attention_window && a->dropout == b->dropout &&
           a->attention_dropout == b->attention_dropout &&
           a->activation_dropout == b->activation_dropout &&
           a->label_smoothing == b->label_smoothing && a->layer_norm_eps == b->layer_norm_eps &&
           a->pad_id == b->pad_id && a->unk_id == b->unk_id && a->bos_id == b->bos_id &&
           a->eos_id == b->eos_id;
}

/* The vocabulary file's text (malloc'd). */
static char *vocab_text(const tfm_vocab *v)
{
    char *text = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&text, &len);
    tfm_error err;
    if (!fp || tfm_vocab_write(v, fp, &err) != TFM_OK) abort();
    fclose(fp);
    return text;
}

static void check_round_trip(const tfm_config *c, bool with_vocab, int64_t step)
{
    tfm_vocab *v = with_vocab ? make_vocab(c->src_vocab_size - 260) : NULL;
    tfm_model *m, *back;
    tfm_error err;
    CHECK_MSG(tfm_model_create(c, v, 99, &m, &err) == TFM_OK, "%s", err.msg);
    tfm_vocab_free(v);
    m->step = step;
    /* Every float survives, not only the initial ones. */
    m->data[1] = 1.0f / 3.0f;
    m->data[2] = -0.0f;
    m->data[3] = 1e-30f;
    const char *extra[] = {"note", "h\xc3\xa9llo", "source", "wmt14", NULL};
    const char *path = tmp_path("round_trip.safetensors");
    CHECK_MSG(tfm_model_save(m, path, extra, &err) == TFM_OK, "%s", err.msg);
    CHECK_MSG(tfm_model_load(path, &back, &err) == TFM_OK, "%s", err.msg);
    if (!back) {
        tfm_model_free(m);
        return;
    }
    CHECK(config_equal(&m->config, &back->config));
    CHECK(back->step == step);
    size_t count = tfm_params_count(c);
    CHECK(memcmp(m->data, back->data, count * sizeof(float)) == 0);
    CHECK(back->params.output_proj ==
          (c->shared_embeddings ? back->params.src_embed : back->params.tgt_embed + c->tgt_vocab_size * c->d_model));
    if (with_vocab) {
        CHECK(back->vocab != NULL);
        if (back->vocab) {
            char *a = vocab_text(m->vocab), *b = vocab_text(back->vocab);
            CHECK(strcmp(a, b) == 0);
            free(a);
            free(b);
        }
    } else {
        CHECK(back->vocab == NULL);
    }

    /* The metadata, as another program sees them. */
    tfm_safetensors *f;
    CHECK(tfm_safetensors_open(path, &f, &err) == TFM_OK);
    if (f) {
        CHECK(strcmp(tfm_safetensors_metadata(f, "format"), "tfm-model") == 0);
        CHECK(strcmp(tfm_safetensors_metadata(f, "format_version"), "1") == 0);
        CHECK(strcmp(tfm_safetensors_metadata(f, "note"), "h\xc3\xa9llo") == 0);
        CHECK(strcmp(tfm_safetensors_metadata(f, "source"), "wmt14") == 0);
        CHECK(strcmp(tfm_safetensors_metadata(f, "norm"), c->pre_norm ? "pre" : "post") == 0);
        CHECK(strcmp(tfm_safetensors_metadata(f, "shared_embeddings"),
                     c->shared_embeddings ? "true" : "false") == 0);
        CHECK((tfm_safetensors_metadata(f, "vocab") != NULL) == with_vocab);
        CHECK(strcmp(tfm_safetensors_name(f, 0), "encoder.embed_tokens.weight") == 0);
        tfm_safetensors_free(f);
    }

    /* A second save of the loaded model gives the same bytes. */
    const char *path2 = tmp_path("round_trip2.safetensors");
    char p1[8192];
    snprintf(p1, sizeof p1, "%s", tmp_path("round_trip.safetensors"));
    CHECK(tfm_model_save(back, path2, extra, &err) == TFM_OK);
    char cmd[20000];
    snprintf(cmd, sizeof cmd, "cmp -s '%s' '%s'", p1, path2);
    CHECK(system(cmd) == 0);
    tfm_model_free(back);
    tfm_model_free(m);
}

static void test_round_trip(void)
{
    tfm_config c = small_config(270);
    check_round_trip(&c, true, 0);
    c.dropout = 0.123456789f;
    c.label_smoothing = 1.0f / 3.0f;
    c.attention_dropout = 1e-7f;
    c.activation_dropout = 0.25f;
    c.layer_norm_eps = 1e-6f;
    c.attention_window = 5;
    check_round_trip(&c, false, 1234567890123LL);
    c.shared_embeddings = false;
    c.tgt_vocab_size = 300;
    c.positions = TFM_POS_LEARNED;
    c.pre_norm = true;
    c.n_encoder_layers = 1;
    check_round_trip(&c, false, 7);
    c.tgt_vocab_size = 270;
    c.d_model = 12;
    c.n_heads = 3;
    check_round_trip(&c, true, 1);
    /* relative positions, alone and with learned absolute ones */
    c.relative_positions = 4;
    check_round_trip(&c, false, 2);
    c.positions = TFM_POS_NONE;
    c.relative_positions = 19;
    check_round_trip(&c, true, 3);

    /* Saving never leaves a half-written file behind a failure: a bad
     * extra key fails before anything is written. */
    tfm_model *m;
    tfm_error err;
    c = small_config(270);
    CHECK(tfm_model_create(&c, NULL, 1, &m, &err) == TFM_OK);
    const char *dup[] = {"d_model", "7", NULL};
    const char *path = tmp_path("never.safetensors");
    CHECK(tfm_model_save(m, path, dup, &err) == TFM_ERR_ARG);
    CHECK_MSG(contains(err.msg, "d_model"), "%s", err.msg);
    CHECK(access(path, F_OK) != 0);
    const char *odd[] = {"lonely", NULL};
    CHECK(tfm_model_save(m, path, odd, &err) == TFM_ERR_ARG);
    CHECK(tfm_model_save(m, "/nonexistent-dir/x.safetensors", NULL, &err) == TFM_ERR_IO);
    tfm_model_free(m);
}

/* ---- bad model files ------------------------------------------------------------- */

/* How write_variant changes a good model's file. */
typedef struct variant {
    const char *meta_key;   /* this metadata key ... */
    const char *meta_value; /* ... gets this value (NULL: is left out) */
    const char *skip;       /* this tensor is left out */
    const char *reshape;    /* this 2-D tensor gets twice its rows */
    const char *as_i32;     /* this tensor is written as I32 */
    bool extra;             /* an unexpected tensor is added */
} variant;

typedef struct variant_ctx {
    tfm_safetensors_writer *w;
    const variant *v;
    float *big; /* data for a reshaped tensor */
} variant_ctx;

static void add_variant_tensor(void *ctx, const char *name, int ndim, const int64_t *shape,
                               float *data)
{
    variant_ctx *x = ctx;
    tfm_error err;
    int64_t s[2] = {shape[0], ndim > 1 ? shape[1] : 1};
    if (x->v->skip && strcmp(name, x->v->skip) == 0) return;
    if (x->v->reshape && strcmp(name, x->v->reshape) == 0) {
        s[0] *= 2;
        x->big = calloc((size_t)(s[0] * s[1]), sizeof(float));
        data = x->big;
    }
    tfm_dtype dt = x->v->as_i32 && strcmp(name, x->v->as_i32) == 0 ? TFM_I32 : TFM_F32;
    if (tfm_safetensors_writer_add_tensor(x->w, name, dt, ndim, s, data, &err) != TFM_OK) abort();
}

/* Writes m to path as tfm_model_save would, changed as v says. */
static void write_variant(const tfm_model *m, const variant *v, const char *path)
{
    tfm_error err;
    const char *good = tmp_path("good.safetensors");
    char good_path[8192];
    snprintf(good_path, sizeof good_path, "%s", good);
    if (tfm_model_save(m, good_path, NULL, &err) != TFM_OK) abort();
    tfm_safetensors *f;
    if (tfm_safetensors_open(good_path, &f, &err) != TFM_OK) abort();
    variant_ctx x = {tfm_safetensors_writer_create(), v, NULL};
    bool done = false;
    for (size_t i = 0; i < tfm_safetensors_metadata_count(f); i++) {
        const char *key = tfm_safetensors_metadata_key(f, i);
        const char *value = tfm_safetensors_metadata_value(f, i);
        if (v->meta_key && strcmp(key, v->meta_key) == 0) {
            value = v->meta_value;
            done = true;
        }
        if (value && tfm_safetensors_writer_add_metadata(x.w, key, value, &err) != TFM_OK) abort();
    }
    if (v->meta_key && !done && v->meta_value &&
        tfm_safetensors_writer_add_metadata(x.w, v->meta_key, v->meta_value, &err) != TFM_OK)
        abort();
    tfm_params_visit(&m->config, &m->params, add_variant_tensor, &x);
    static const float one[3] = {1, 2, 3};
    int64_t three = 3;
    if (v->extra &&
        tfm_safetensors_writer_add_tensor(x.w, "decoder.layers.9.fc1.weight", TFM_F32, 1, &three,
                                          one, &err) != TFM_OK)
        abort();
    if (tfm_safetensors_write(x.w, path, &err) != TFM_OK) abort();
    tfm_safetensors_writer_free(x.w);
    free(x.big);
    tfm_safetensors_free(f);
}

/* A variant that changes one metadata entry (value NULL: leaves it out). */
static variant meta(const char *key, const char *value)
{
    return (variant){.meta_key = key, .meta_value = value};
}

/* Loading the variant fails with status st and a message holding want. */
static void expect_load_fails(const tfm_model *m, variant v, tfm_status st, const char *want)
{
    const char *path = tmp_path("bad.safetensors");
    char p[8192];
    snprintf(p, sizeof p, "%s", path);
    write_variant(m, &v, p);
    tfm_model *back = (tfm_model *)1;
    tfm_error err = {0};
    tfm_status got = tfm_model_load(p, &back, &err);
    CHECK_MSG(got == st, "got %d (%s), expected %d", (int)got, err.msg, (int)st);
    CHECK(back == NULL);
    CHECK_MSG(contains(err.msg, want), "'%s' lacks '%s'", err.msg, want);
    /* The caller names the file ("decode: m.safetensors: ..."), not the library. */
    CHECK_MSG(!contains(err.msg, p), "%s", err.msg);
    if (got == TFM_OK) tfm_model_free(back);
}

static void test_bad_files(void)
{
    tfm_config c = small_config(264);
    tfm_vocab *vocab = make_vocab(4);
    tfm_model *m;
    tfm_error err;
    CHECK(tfm_model_create(&c, vocab, 3, &m, &err) == TFM_OK);
    tfm_vocab_free(vocab);

    /* The unchanged variant loads (the harness itself works). */
    variant same = {0};
    write_variant(m, &same, tmp_path("same.safetensors"));
    tfm_model *back;
    CHECK(tfm_model_load(tmp_path("same.safetensors"), &back, &err) == TFM_OK);
    tfm_model_free(back);
    /* A file written before activation_dropout existed loads, with 0. */
    variant older = meta("activation_dropout", NULL);
    write_variant(m, &older, tmp_path("older.safetensors"));
    back = NULL;
    CHECK(tfm_model_load(tmp_path("older.safetensors"), &back, &err) == TFM_OK);
    CHECK(back && back->config.activation_dropout == 0.0f);
    tfm_model_free(back);
    /* ... and before relative positions existed: none */
    variant before_relative = meta("relative_positions", NULL);
    write_variant(m, &before_relative, tmp_path("older.safetensors"));
    back = NULL;
    CHECK(tfm_model_load(tmp_path("older.safetensors"), &back, &err) == TFM_OK);
    CHECK(back && back->config.relative_positions == 0 &&
          back->config.positions == TFM_POS_SINUSOIDAL);
    tfm_model_free(back);

    /* Tensors. */
    expect_load_fails(m, (variant){.reshape = "encoder.layers.0.fc1.weight"}, TFM_ERR_FORMAT,
                      "tensor 'encoder.layers.0.fc1.weight' has shape [48, 16], expected [24, 16]");
    expect_load_fails(m, (variant){.skip = "decoder.layers.2.fc2.bias"}, TFM_ERR_FORMAT,
                      "missing tensor 'decoder.layers.2.fc2.bias'");
    expect_load_fails(m, (variant){.extra = true}, TFM_ERR_FORMAT,
                      "unexpected tensor 'decoder.layers.9.fc1.weight'");
    expect_load_fails(m, (variant){.as_i32 = "encoder.layers.1.self_attn.k_proj.bias"},
                      TFM_ERR_FORMAT, "'encoder.layers.1.self_attn.k_proj.bias' has dtype I32");

    /* Metadata that disagree with the tensors. */
    expect_load_fails(m, meta("n_decoder_layers", "2"), TFM_ERR_FORMAT,
                      "unexpected tensor 'decoder.layers.2.");
    expect_load_fails(m, meta("n_decoder_layers", "4"), TFM_ERR_FORMAT,
                      "missing tensor 'decoder.layers.3.");
    expect_load_fails(m, meta("shared_embeddings", "false"), TFM_ERR_FORMAT,
                      "missing tensor 'decoder.embed_tokens.weight'");
    expect_load_fails(m, meta("positions", "learned"), TFM_ERR_FORMAT,
                      "missing tensor 'encoder.embed_positions.weight'");
    expect_load_fails(m, meta("norm", "pre"), TFM_ERR_FORMAT,
                      "missing tensor 'encoder.layer_norm.weight'");
    /* A claim of a 4 TB model is refused before anything is allocated
     * (ASan would abort on such an allocation). */
    expect_load_fails(m, meta("d_model", "65536"), TFM_ERR_FORMAT, "expected [264, 65536]");

    /* Bad metadata values, each named. */
    expect_load_fails(m, meta("d_model", "abc"), TFM_ERR_FORMAT,
                      "metadata 'd_model' is 'abc', expected a positive integer");
    expect_load_fails(m, meta("d_model", " 16"), TFM_ERR_FORMAT, "metadata 'd_model'");
    expect_load_fails(m, meta("d_model", "16x"), TFM_ERR_FORMAT, "metadata 'd_model'");
    expect_load_fails(m, meta("d_model", "99999999999"), TFM_ERR_FORMAT, "metadata 'd_model'");
    expect_load_fails(m, meta("d_model", ""), TFM_ERR_FORMAT, "metadata 'd_model'");
    expect_load_fails(m, meta("d_model", "0"), TFM_ERR_RANGE, "d_model is 0");
    expect_load_fails(m, meta("n_heads", "3"), TFM_ERR_RANGE, "divisible");
    expect_load_fails(m, meta("src_vocab_size", "2"), TFM_ERR_RANGE, "src_vocab_size");
    expect_load_fails(m, meta("dropout", "nan"), TFM_ERR_FORMAT, "metadata 'dropout'");
    expect_load_fails(m, meta("activation_dropout", "x"), TFM_ERR_FORMAT,
                      "metadata 'activation_dropout'");
    expect_load_fails(m, meta("dropout", NULL), TFM_ERR_FORMAT, "metadata 'dropout' is missing");
    expect_load_fails(m, meta("dropout", "1.5"), TFM_ERR_RANGE, "dropout is 1.5");
    expect_load_fails(m, meta("layer_norm_eps", "1e999"), TFM_ERR_FORMAT, "layer_norm_eps");
    expect_load_fails(m, meta("shared_embeddings", "yes"), TFM_ERR_FORMAT,
                      "metadata 'shared_embeddings' is 'yes', expected 'true' or 'false'");
    expect_load_fails(m, meta("positions", "rotary"), TFM_ERR_FORMAT, "metadata 'positions'");
    expect_load_fails(m, meta("positions", "none"), TFM_ERR_RANGE,
                      "positions is none and relative_positions is 0");
    expect_load_fails(m, meta("relative_positions", "-2"), TFM_ERR_RANGE,
                      "relative_positions is -2");
    expect_load_fails(m, meta("relative_positions", "2.5"), TFM_ERR_FORMAT,
                      "metadata 'relative_positions' is '2.5', expected a non-negative integer");
    /* the setting says relative positions, the tensors are not there */
    expect_load_fails(m, meta("relative_positions", "3"), TFM_ERR_FORMAT,
                      "missing tensor 'encoder.layers.0.self_attn.relative_keys.weight'");
    expect_load_fails(m, meta("norm", "sandwich"), TFM_ERR_FORMAT, "metadata 'norm'");
    expect_load_fails(m, meta("eos_id", NULL), TFM_ERR_FORMAT, "metadata 'eos_id' is missing");
    expect_load_fails(m, meta("eos_id", "1"), TFM_ERR_RANGE, "distinct");
    expect_load_fails(m, meta("step", "-1"), TFM_ERR_FORMAT, "metadata 'step'");
    expect_load_fails(m, meta("step", NULL), TFM_ERR_FORMAT, "'step' is missing");
    expect_load_fails(m, meta("format", NULL), TFM_ERR_FORMAT, "not a tfm model");
    expect_load_fails(m, meta("format", "pt"), TFM_ERR_FORMAT, "metadata 'format' is 'pt'");
    expect_load_fails(m, meta("format_version", "2"), TFM_ERR_UNSUPPORTED, "version 1");

    /* A vocabulary that is no vocabulary, or not this model's. */
    expect_load_fails(m, meta("vocab", "hello"), TFM_ERR_FORMAT, "metadata 'vocab'");
    tfm_vocab *other = make_vocab(10);
    char *text = vocab_text(other);
    tfm_vocab_free(other);
    expect_load_fails(m, meta("vocab", text), TFM_ERR_RANGE,
                      "the vocabulary holds 270 pieces");
    free(text);
    /* Without its vocabulary the model still loads. */
    variant novocab = meta("vocab", NULL);
    write_variant(m, &novocab, tmp_path("novocab.safetensors"));
    CHECK(tfm_model_load(tmp_path("novocab.safetensors"), &back, &err) == TFM_OK);
    CHECK(back && back->vocab == NULL);
    tfm_model_free(back);

    /* A model with relative positions whose file lacks a table, or holds
     * one of the wrong clipping distance, is refused naming it. */
    tfm_config rc = small_config(264);
    rc.relative_positions = 3;
    rc.positions = TFM_POS_NONE;
    tfm_model *rm;
    CHECK(tfm_model_create(&rc, NULL, 5, &rm, &err) == TFM_OK);
    expect_load_fails(rm, (variant){.skip = "decoder.layers.1.self_attn.relative_values.weight"},
                      TFM_ERR_FORMAT,
                      "missing tensor 'decoder.layers.1.self_attn.relative_values.weight'");
    expect_load_fails(rm, meta("relative_positions", "2"), TFM_ERR_FORMAT,
                      "tensor 'encoder.layers.0.self_attn.relative_keys.weight' has shape [7, 8], "
                      "expected [5, 8]");
    expect_load_fails(rm, meta("relative_positions", NULL), TFM_ERR_RANGE,
                      "positions is none and relative_positions is 0");
    tfm_model_free(rm);

    /* Files cut short anywhere fail cleanly. */
    const char *path = tmp_path("cut.safetensors");
    char cut_path[8192];
    snprintf(cut_path, sizeof cut_path, "%s", path);
    CHECK(tfm_model_save(m, cut_path, NULL, &err) == TFM_OK);
    FILE *fp = fopen(cut_path, "rb");
    fseek(fp, 0, SEEK_END);
    long size = ftell(fp);
    rewind(fp);
    char *bytes = malloc((size_t)size);
    CHECK(fread(bytes, 1, (size_t)size, fp) == (size_t)size);
    fclose(fp);
    const long cuts[] = {0, 4, 8, 100, size / 2, size - 4, size - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        fp = fopen(cut_path, "wb");
        fwrite(bytes, 1, (size_t)cuts[i], fp);
        fclose(fp);
        back = (tfm_model *)1;
        tfm_status st = tfm_model_load(cut_path, &back, &err);
        CHECK_MSG(st == TFM_ERR_FORMAT && back == NULL, "cut at %ld: %d", cuts[i], (int)st);
        CHECK_MSG(contains(err.msg, "truncated"), "%s", err.msg);
    }
    free(bytes);

    /* A file that is not there says why (the caller names the file). */
    CHECK(tfm_model_load(tmp_path("absent.safetensors"), &back, &err) == TFM_ERR_IO);
    CHECK_MSG(contains(err.msg, "No such file"), "%s", err.msg);
    tfm_model_free(m);
}

/* ---- writers and readers ------------------------------------------------------------- */

/* The whole file at path (malloc'd), its size in *size. */
static char *slurp(const char *path, size_t *size)
{
    FILE *fp = fopen(path, "rb");
    if (!fp) abort();
    char *bytes = NULL;
    size_t cap = 0;
    *size = 0;
    for (;;) {
        if (*size == cap && !(bytes = realloc(bytes, cap = cap ? 2 * cap : 4096))) abort();
        size_t got = fread(bytes + *size, 1, cap - *size, fp);
        if (got == 0) break;
        *size += got;
    }
    fclose(fp);
    return bytes;
}

/* The same model: configuration, step, convention, every float, vocabulary. */
static bool model_equal(const tfm_model *a, const tfm_model *b)
{
    if (!a || !b || !config_equal(&a->config, &b->config) || a->step != b->step ||
        a->source_eos != b->source_eos || (a->vocab == NULL) != (b->vocab == NULL))
        return false;
    if (memcmp(a->data, b->data, tfm_params_count(&a->config) * sizeof(float)) != 0) return false;
    if (!a->vocab) return true;
    char *x = vocab_text(a->vocab), *y = vocab_text(b->vocab);
    bool same = strcmp(x, y) == 0;
    free(x);
    free(y);
    return same;
}

/* A small model with a vocabulary of 10 pieces, its weights from seed 4. */
static tfm_model *small_model(void)
{
    tfm_config c = small_config(270);
    tfm_vocab *v = make_vocab(10);
    tfm_model *m = NULL;
    tfm_error err;
    CHECK_MSG(tfm_model_create(&c, v, 4, &m, &err) == TFM_OK, "%s", err.msg);
    tfm_vocab_free(v);
    return m;
}

/* Writes m to path with the metadata extra and, beside its tensors, the
 * tensors named in names (two floats each). */
static void write_with_tensors(const tfm_model *m, const char *const *extra,
                               const char *const *names, const char *path)
{
    static const float two_floats[2] = {1, 2};
    const int64_t two = 2;
    tfm_error err;
    tfm_safetensors_writer *w = tfm_safetensors_writer_create();
    CHECK_MSG(tfm_model_to_safetensors(m, extra, w, &err) == TFM_OK, "%s", err.msg);
    for (size_t i = 0; names[i]; i++)
        CHECK(tfm_safetensors_writer_add_tensor(w, names[i], TFM_F32, 1, &two, two_floats,
                                                &err) == TFM_OK);
    CHECK_MSG(tfm_safetensors_write(w, path, &err) == TFM_OK, "%s", err.msg);
    tfm_safetensors_writer_free(w);
}

/* A model written to a stream is the file tfm_model_save writes, byte for
 * byte; it reads back from memory, from a descriptor (a pipe, or a file
 * holding two models one after another) and from an opened safetensors
 * file, equal every time. */
static void test_streams(void)
{
    tfm_model *m = small_model(), *back;
    tfm_error err;
    if (!m) return;
    m->step = 42;
    const char *extra[] = {"note", "streamed", NULL};

    char *bytes = NULL;
    size_t size = 0;
    FILE *fp = open_memstream(&bytes, &size);
    CHECK_MSG(tfm_model_write_stream(m, fp, extra, &err) == TFM_OK, "%s", err.msg);
    fclose(fp);
    char path[8192];
    snprintf(path, sizeof path, "%s", tmp_path("stream.safetensors"));
    CHECK(tfm_model_save(m, path, extra, &err) == TFM_OK);
    size_t file_size;
    char *file = slurp(path, &file_size);
    CHECK(file_size == size && memcmp(file, bytes, size) == 0);
    free(file);

    /* From memory. */
    back = NULL;
    CHECK_MSG(tfm_model_parse(bytes, size, &back, &err) == TFM_OK, "%s", err.msg);
    CHECK(model_equal(m, back));
    tfm_model_free(back);

    /* From a pipe, as a program upstream would write it. */
    char cmd[8300];
    snprintf(cmd, sizeof cmd, "cat '%s'", path);
    FILE *pipe_in = popen(cmd, "r");
    CHECK(pipe_in != NULL);
    if (pipe_in) {
        back = NULL;
        CHECK_MSG(tfm_model_load_fd(fileno(pipe_in), &back, &err) == TFM_OK, "%s", err.msg);
        CHECK(model_equal(m, back));
        tfm_model_free(back);
        CHECK(pclose(pipe_in) == 0);
    }

    /* From a file's descriptor; and two models run together are refused,
     * since the input must end where the header says the model does. */
    tfm_model *m2;
    CHECK(tfm_model_create(&m->config, NULL, 5, &m2, &err) == TFM_OK);
    m2->source_eos = false;
    fp = fopen(path, "wb");
    CHECK(tfm_model_write_stream(m2, fp, NULL, &err) == TFM_OK);
    fclose(fp);
    int fd = open(path, O_RDONLY);
    back = NULL;
    CHECK_MSG(tfm_model_load_fd(fd, &back, &err) == TFM_OK, "%s", err.msg);
    CHECK(model_equal(m2, back));
    tfm_model_free(back);
    close(fd);
    fp = fopen(path, "ab");
    CHECK(tfm_model_write_stream(m, fp, NULL, &err) == TFM_OK);
    fclose(fp);
    fd = open(path, O_RDONLY);
    back = (tfm_model *)1;
    CHECK(tfm_model_load_fd(fd, &back, &err) == TFM_ERR_FORMAT && back == NULL);
    CHECK_MSG(contains(err.msg, "two run together"), "%s", err.msg);
    close(fd);

    /* From an opened file that holds more than the model (as a checkpoint
     * does): the model's tensors are taken, the rest left to the caller. */
    const char *more[] = {"optimizer.step", NULL};
    write_with_tensors(m2, extra, more, path);
    tfm_safetensors *f;
    CHECK(tfm_safetensors_open(path, &f, &err) == TFM_OK);
    back = NULL;
    CHECK_MSG(tfm_model_from_safetensors(f, &back, &err) == TFM_OK, "%s", err.msg);
    CHECK(model_equal(m2, back));
    CHECK(tfm_safetensors_check_all_used(f, &err) == TFM_ERR_FORMAT);
    CHECK_MSG(contains(err.msg, "unexpected tensor 'optimizer.step'"), "%s", err.msg);
    tfm_safetensors_free(f);
    tfm_model_free(back);
    /* The whole-file readers refuse it, naming the stranger. */
    back = (tfm_model *)1;
    CHECK(tfm_model_load(path, &back, &err) == TFM_ERR_FORMAT && back == NULL);
    CHECK_MSG(contains(err.msg, "unexpected tensor 'optimizer.step'"), "%s", err.msg);

    free(bytes);
    tfm_model_free(m2);
    tfm_model_free(m);
}

/* A training checkpoint (the metadata key "checkpoint") loads as the
 * model it holds, for the programs that translate: its optimizer state
 * and moving average are left unread.  Any other tensor is still refused,
 * and so is the state in a file that does not say it is a checkpoint. */
static void test_checkpoint_as_model(void)
{
    tfm_model *m = small_model(), *back;
    tfm_error err;
    if (!m) return;
    const char *checkpoint[] = {TFM_CHECKPOINT_KEY, "1", NULL};
    const char *state[] = {TFM_CHECKPOINT_EXP_AVG "encoder.layer_norm.weight",
                           TFM_CHECKPOINT_EXP_AVG_SQ "encoder.layer_norm.weight",
                           TFM_CHECKPOINT_EMA "encoder.layer_norm.weight", NULL};
    char path[8192];
    snprintf(path, sizeof path, "%s", tmp_path("checkpoint.safetensors"));

    write_with_tensors(m, checkpoint, state, path);
    back = NULL;
    CHECK_MSG(tfm_model_load(path, &back, &err) == TFM_OK, "%s", err.msg);
    CHECK(back && model_equal(m, back));
    tfm_model_free(back);
    back = NULL;
    CHECK_MSG(tfm_model_load_for_inference(path, TFM_COMPUTE_DEFAULT, &back, &err) == TFM_OK,
              "%s", err.msg);
    /* (without its vocabulary: encode and decode take ids) */
    CHECK(back && config_equal(&m->config, &back->config) &&
          memcmp(m->data, back->data, tfm_params_count(&m->config) * sizeof(float)) == 0);
    tfm_model_free(back);

    const char *stranger[] = {TFM_CHECKPOINT_EXP_AVG "x", "optimizer.step", NULL};
    write_with_tensors(m, checkpoint, stranger, path);
    back = (tfm_model *)1;
    CHECK(tfm_model_load(path, &back, &err) == TFM_ERR_FORMAT && back == NULL);
    CHECK_MSG(contains(err.msg, "unexpected tensor 'optimizer.step'"), "%s", err.msg);

    write_with_tensors(m, NULL, state, path);
    back = (tfm_model *)1;
    CHECK(tfm_model_load(path, &back, &err) == TFM_ERR_FORMAT && back == NULL);
    CHECK_MSG(contains(err.msg, "unexpected tensor '" TFM_CHECKPOINT_EXP_AVG), "%s", err.msg);
    tfm_model_free(m);
}

/* Bytes in memory cut short, or changed, fail with a message that says
 * what is wrong, and leave no model. */
static void test_parse_bad(void)
{
    tfm_config c = small_config(264);
    tfm_model *m;
    tfm_error err;
    CHECK(tfm_model_create(&c, NULL, 6, &m, &err) == TFM_OK);
    m->step = 7;
    char *bytes = NULL;
    size_t size = 0;
    FILE *fp = open_memstream(&bytes, &size);
    CHECK(tfm_model_write_stream(m, fp, NULL, &err) == TFM_OK);
    fclose(fp);

    const size_t cuts[] = {0, 7, 8, 64, size / 2, size - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        tfm_model *back = (tfm_model *)1;
        tfm_error e = {0};
        tfm_status st = tfm_model_parse(bytes, cuts[i], &back, &e);
        CHECK_MSG(st == TFM_ERR_FORMAT && back == NULL, "cut at %zu: %d", cuts[i], (int)st);
        CHECK_MSG(contains(e.msg, "truncated"), "cut at %zu: %s", cuts[i], e.msg);
    }

    /* A metadata value changed in place (same length, so the file stays a
     * valid container): the message names the key, the value and what was
     * expected. */
    char *step = memmem(bytes, size, "\"step\":\"7\"", 10);
    CHECK(step != NULL);
    if (step) {
        step[8] = 'x';
        tfm_model *back = (tfm_model *)1;
        CHECK(tfm_model_parse(bytes, size, &back, &err) == TFM_ERR_FORMAT && back == NULL);
        CHECK_MSG(contains(err.msg, "metadata 'step' is 'x', expected a non-negative integer"),
                  "%s", err.msg);
        step[8] = '7';
    }
    /* A byte of the header length changed: the container says so. */
    bytes[0] ^= 0x40;
    tfm_model *back = (tfm_model *)1;
    CHECK(tfm_model_parse(bytes, size, &back, &err) != TFM_OK && back == NULL);
    CHECK(err.msg[0] != 0);
    bytes[0] ^= 0x40;
    /* Unchanged, it loads. */
    CHECK(tfm_model_parse(bytes, size, &back, &err) == TFM_OK);
    CHECK(model_equal(m, back));
    tfm_model_free(back);
    /* A descriptor that cannot be read says why. */
    CHECK(tfm_model_load_fd(-1, &back, &err) == TFM_ERR_IO && back == NULL);
    free(bytes);
    tfm_model_free(m);
}

/* Whether sources end with </s>: true for a new model and for files without
 * train.opt.no-eos, false for 'train --no-eos' models, kept by a save. */
static void test_source_eos(void)
{
    tfm_config c = small_config(264);
    tfm_model *m, *back;
    tfm_error err;
    CHECK(tfm_model_create(&c, NULL, 7, &m, &err) == TFM_OK);
    CHECK(tfm_model_source_eos(m));
    char path[8192];
    snprintf(path, sizeof path, "%s", tmp_path("eos.safetensors"));
    CHECK(tfm_model_save(m, path, NULL, &err) == TFM_OK);
    CHECK(tfm_model_load(path, &back, &err) == TFM_OK);
    CHECK(back && tfm_model_source_eos(back));
    tfm_model_free(back);

    /* As 'train --no-eos' saves it: the key in the caller's metadata. */
    const char *no_eos[] = {"train.opt.no-eos", "yes", NULL};
    CHECK(tfm_model_save(m, path, no_eos, &err) == TFM_OK);
    back = NULL;
    CHECK_MSG(tfm_model_load(path, &back, &err) == TFM_OK, "%s", err.msg);
    CHECK(back && !tfm_model_source_eos(back));
    /* A loaded --no-eos model saved again keeps it, with or without the
     * caller's key (no duplicate). */
    tfm_model *again = NULL;
    CHECK_MSG(tfm_model_save(back, path, no_eos, &err) == TFM_OK, "%s", err.msg);
    CHECK(tfm_model_load(path, &again, &err) == TFM_OK);
    CHECK(again && !tfm_model_source_eos(again));
    tfm_model_free(again);
    again = NULL;
    CHECK(tfm_model_save(back, path, NULL, &err) == TFM_OK);
    tfm_safetensors *f;
    CHECK(tfm_safetensors_open(path, &f, &err) == TFM_OK);
    CHECK(f && strcmp(tfm_safetensors_metadata(f, "train.opt.no-eos"), "yes") == 0);
    tfm_safetensors_free(f);
    CHECK(tfm_model_load(path, &again, &err) == TFM_OK);
    CHECK(again && !tfm_model_source_eos(again));
    tfm_model_free(again);
    tfm_model_free(back);

    /* "no" is the default spelled out; anything else is named. */
    const char *eos[] = {"train.opt.no-eos", "no", NULL};
    CHECK(tfm_model_save(m, path, eos, &err) == TFM_OK);
    CHECK(tfm_model_load(path, &back, &err) == TFM_OK);
    CHECK(back && tfm_model_source_eos(back));
    tfm_model_free(back);
    expect_load_fails(m, meta("train.opt.no-eos", "maybe"), TFM_ERR_FORMAT,
                      "metadata 'train.opt.no-eos' is 'maybe', expected 'yes' or 'no'");
    tfm_model_free(m);
}

/* ---- python -------------------------------------------------------------------------- */

/* A reader written from the safetensors spec alone (struct, json, numpy)
 * finds our tensors by name, in the order we listed, with our values, and
 * the configuration in __metadata__. */
static const char python_script[] =
    "import json, struct, sys\n"
    "import numpy as np\n"
    "d = sys.argv[1]\n"
    "raw = open(d + '/py.safetensors', 'rb').read()\n"
    "(n,) = struct.unpack('<Q', raw[:8])\n"
    "h = json.loads(raw[8:8 + n].decode('utf-8'))\n"
    "meta = h.pop('__metadata__')\n"
    "data = raw[8 + n:]\n"
    "D = int(meta['d_model'])\n"
    "assert D == 16 and int(meta['n_heads']) == 2, meta\n"
    "assert meta['format'] == 'tfm-model' and meta['positions'] == 'learned'\n"
    "assert meta['vocab'].startswith('#tfm-vocab 1 ')\n"
    "assert int(meta['step']) == 321\n"
    "def tensor(name):\n"
    "    t = h[name]\n"
    "    assert t['dtype'] == 'F32'\n"
    "    b, e = t['data_offsets']\n"
    "    return np.frombuffer(data[b:e], dtype='<f4').reshape(t['shape'])\n"
    "q = tensor('encoder.layers.0.self_attn.q_proj.weight')\n"
    "assert q.shape == (D, D), q.shape\n"
    "want = np.fromfile(d + '/q.bin', dtype='<f4').reshape(D, D)\n"
    "assert np.array_equal(q, want)\n"
    "names = open(d + '/names.txt').read().split()\n"
    "assert sorted(h, key=lambda k: h[k]['data_offsets'][0]) == names\n"
    "e = tensor('encoder.embed_tokens.weight')\n"
    "assert e.shape == (int(meta['src_vocab_size']), D) and not e[0].any()\n"
    "assert np.float32(meta['dropout']) == np.float32(0.1)\n";

static void write_name(void *ctx, const char *name, int ndim, const int64_t *shape, float *data)
{
    fprintf(ctx, "%s\n", name);
}

static void test_python(void)
{
    tfm_config c = small_config(266);
    c.positions = TFM_POS_LEARNED;
    tfm_vocab *v = make_vocab(6);
    tfm_model *m;
    tfm_error err;
    CHECK(tfm_model_create(&c, v, 8, &m, &err) == TFM_OK);
    tfm_vocab_free(v);
    m->step = 321;
    char path[8192];
    snprintf(path, sizeof path, "%s", tmp_path("py.safetensors"));
    CHECK(tfm_model_save(m, path, NULL, &err) == TFM_OK);

    FILE *fp = fopen(tmp_path("q.bin"), "wb");
    const float *q = m->params.encoder_layers[0].self_attn.q_proj.weight;
    fwrite(q, sizeof(float), (size_t)(c.d_model * c.d_model), fp);
    fclose(fp);
    fp = fopen(tmp_path("names.txt"), "w");
    tfm_params_visit(&c, &m->params, write_name, fp);
    fclose(fp);
    CHECK(run_python(python_script, test_tmpdir) == 0);
    tfm_model_free(m);
}

/* A vocabulary per side: kept by the file as src_vocab and tgt_vocab, each
 * read back for its side (and by tfm_model_load_vocab); contradictions and
 * a size that does not fit are refused. */
static void test_side_vocabs(void)
{
    tfm_config c = small_config(284);
    c.shared_embeddings = false;
    c.shared_decoder_embeddings = true;
    c.src_vocab_size = 290;
    tfm_vocab *src = make_vocab(30), *tgt = make_vocab(24);
    tfm_error err;
    tfm_model *m = NULL;
    CHECK_MSG(tfm_model_create_sides(&c, src, tgt, 3, &m, &err) == TFM_OK, "%s", err.msg);
    if (!m) return;
    CHECK(tfm_vocab_size(tfm_model_vocab(m, TFM_SOURCE)) == 290);
    CHECK(tfm_vocab_size(tfm_model_vocab(m, TFM_TARGET)) == 284);
    char path[512];
    snprintf(path, sizeof path, "%s", tmp_path("sides.safetensors"));
    CHECK(tfm_model_save(m, path, NULL, &err) == TFM_OK);
    tfm_model *back = NULL;
    CHECK_MSG(tfm_model_load(path, &back, &err) == TFM_OK, "%s", err.msg);
    CHECK(back && back->src_vocab && tfm_vocab_size(back->src_vocab) == 290 &&
          tfm_vocab_size(back->vocab) == 284 && back->config.shared_decoder_embeddings);
    tfm_model_free(back);
    tfm_safetensors *f = NULL;
    CHECK(tfm_safetensors_open(path, &f, &err) == TFM_OK);
    CHECK(f && !tfm_safetensors_metadata(f, "vocab") && tfm_safetensors_metadata(f, "src_vocab") &&
          tfm_safetensors_metadata(f, "tgt_vocab"));
    tfm_safetensors_free(f);
    for (int side = TFM_SOURCE; side <= TFM_TARGET; side++) {
        tfm_vocab *got = NULL;
        CHECK_MSG(tfm_model_load_vocab(path, (tfm_side)side, &got, &err) == TFM_OK, "%s", err.msg);
        CHECK(got && tfm_vocab_size(got) == (side == TFM_SOURCE ? 290 : 284));
        tfm_vocab_free(got);
    }
    /* Both kinds of key, or one side alone: a corrupt file. */
    char *text = vocab_text(tgt);
    expect_load_fails(m, meta("vocab", text), TFM_ERR_FORMAT, "contradict");
    expect_load_fails(m, meta("tgt_vocab", NULL), TFM_ERR_FORMAT,
                      "metadata 'tgt_vocab' is missing beside 'src_vocab'");
    /* The target's vocabulary as the source's: its size does not fit. */
    expect_load_fails(m, meta("src_vocab", text), TFM_ERR_RANGE,
                      "the source vocabulary holds 284 pieces, but src_vocab_size is 290");
    free(text);
    tfm_model_free(m);
    /* All three shared with two vocabularies: refused. */
    c.src_vocab_size = 284;
    c.shared_embeddings = true;
    tfm_vocab_free(src);
    src = make_vocab(24);
    CHECK(tfm_model_create_sides(&c, src, tgt, 3, &m, &err) == TFM_ERR_ARG && !m);
    CHECK_MSG(contains(err.msg, "cannot go with shared_embeddings"), "%s", err.msg);
    tfm_vocab_free(src);
    tfm_vocab_free(tgt);
}

/* tfm_model_load_vocab reads the vocabulary from a vocabulary file and from a
 * model file alike, and says so when a model has none. */
static void test_load_vocab(void)
{
    tfm_config c = small_config(284);
    tfm_vocab *v = make_vocab(24);
    tfm_model *m;
    tfm_error err;
    CHECK_MSG(tfm_model_create(&c, v, 5, &m, &err) == TFM_OK, "%s", err.msg);
    char model_path[512], vocab_path[512];
    snprintf(model_path, sizeof model_path, "%s", tmp_path("with_vocab.safetensors"));
    snprintf(vocab_path, sizeof vocab_path, "%s", tmp_path("plain.vocab"));
    CHECK(tfm_model_save(m, model_path, NULL, &err) == TFM_OK);
    CHECK(tfm_vocab_save(v, vocab_path, &err) == TFM_OK);
    const char *paths[] = {model_path, vocab_path};
    for (int k = 0; k < 2; k++) {
        tfm_vocab *got = NULL;
        CHECK_MSG(tfm_model_load_vocab(paths[k], TFM_TARGET, &got, &err) == TFM_OK, "%s", err.msg);
        if (!got) continue;
        CHECK(tfm_vocab_size(got) == 284);
        CHECK(tfm_vocab_find(got, "\xe2\x96\x81w23", 6) == tfm_vocab_find(v, "\xe2\x96\x81w23", 6));
        tfm_vocab_free(got);
    }
    tfm_model_free(m);
    /* A model without a vocabulary, and a file that is neither. */
    CHECK(tfm_model_create(&c, NULL, 5, &m, &err) == TFM_OK);
    CHECK(tfm_model_save(m, model_path, NULL, &err) == TFM_OK);
    tfm_vocab *none = NULL;
    CHECK(tfm_model_load_vocab(model_path, TFM_TARGET, &none, &err) == TFM_ERR_FORMAT && none == NULL);
    CHECK_MSG(contains(err.msg, "holds no vocabulary"), "%s", err.msg);
    write_file(vocab_path, "hello world\n");
    CHECK(tfm_model_load_vocab(vocab_path, TFM_TARGET, &none, &err) != TFM_OK && none == NULL);
    CHECK_MSG(contains(err.msg, "line 1"), "%s", err.msg); /* read as a vocabulary file */
    CHECK(tfm_model_load_vocab("/nonexistent/x", TFM_TARGET, &none, &err) == TFM_ERR_IO);
    tfm_model_free(m);
    tfm_vocab_free(v);
}

int main(void)
{
    test_tmpdir_init("test_model_files");
    RUN(test_round_trip);
    RUN(test_bad_files);
    RUN(test_load_vocab);
    RUN(test_side_vocabs);
    RUN(test_streams);
    RUN(test_checkpoint_as_model);
    RUN(test_parse_bad);
    RUN(test_source_eos);
    if (have_numpy())
        RUN(test_python);
    else
        SKIP(test_python, TEST_PYTHON " cannot import numpy");
    test_tmpdir_cleanup();
    CHECK_DONE();
}
