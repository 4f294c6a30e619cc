/* model_pack_file.c - writing a packed model file (train pack): a model
 * file that holds, beside every matrix the inference kernels multiply by,
 * its panels, made once here so that encode and decode read them in place
 * (model_panels.c reads them; tfm-formats(5) has the layout). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model_internal.h"
#include "nn/layers.h"

/* The rows of the matrix at weight, in type (the model's float or quantized
 * values). */
static bool rows_of(const tfm_model *m, tfm_compute_type type, const float *weight, int N, int K,
                    nn_panel_rows *r)
{
    *r = (nn_panel_rows){.rows = weight, .N = N, .K = K, .type = type};
    if (type == TFM_COMPUTE_FLOAT32) return true;
    tfm_quantized_view v;
    if (!tfm_quantized_find(m->quantized, (size_t)(weight - m->data), &v)) return false;
    r->rows = type == TFM_COMPUTE_INT8 ? (const void *)v.q : (const void *)v.bf16;
    r->scale = v.scale;
    return r->rows != NULL;
}

typedef struct panel_writer {
    const tfm_model *m;
    tfm_compute_type type;
    tfm_tensor_names names;
    tfm_safetensors_writer *w;
    void **buffers; /* the panels made, alive until the file is written */
    size_t n_buffers;
    tfm_status st;
    tfm_error *err;
} panel_writer;

static void *keep(panel_writer *pw, size_t bytes)
{
    void **b = realloc(pw->buffers, (pw->n_buffers + 1) * sizeof *b);
    if (!b) return NULL;
    pw->buffers = b;
    void *p = malloc(bytes ? bytes : 1);
    if (p) pw->buffers[pw->n_buffers++] = p;
    return p;
}

static void write_matrix(void *ctx, const float *weight, int N, int K)
{
    panel_writer *pw = ctx;
    if (pw->st != TFM_OK) return;
    const char *name = tfm_tensor_name_at(&pw->names, weight);
    nn_panel_rows r;
    if (!name || !rows_of(pw->m, pw->type, weight, N, K, &r)) {
        pw->st = tfm_error_set(pw->err, TFM_ERR_ARG, "a matrix of the model has no %s values",
                               tfm_compute_type_name(pw->type));
        return;
    }
    const size_t n_panels = nn_panel_count(&r), words = nn_panel_words(&r);
    const bool int8 = pw->type == TFM_COMPUTE_INT8;
    uint32_t *panels = keep(pw, n_panels * words * sizeof *panels);
    float *scale = int8 ? keep(pw, n_panels * NN_PANEL_WIDTH * sizeof *scale) : NULL;
    int32_t *sums = int8 ? keep(pw, n_panels * NN_PANEL_WIDTH * sizeof *sums) : NULL;
    if (!panels || (int8 && (!scale || !sums))) {
        pw->st = tfm_error_set(pw->err, TFM_ERR_NOMEM, "out of memory packing '%s'", name);
        return;
    }
    nn_panels_make(&r, panels, scale, sums);
    char key[224];
    const int64_t shape[3] = {(int64_t)n_panels, (int64_t)(words / NN_PANEL_WIDTH),
                              NN_PANEL_WIDTH};
    snprintf(key, sizeof key, "%s.panels", name);
    pw->st = tfm_safetensors_writer_add_tensor(pw->w, key, TFM_I32, 3, shape, panels, pw->err);
    const int64_t cols = (int64_t)(n_panels * NN_PANEL_WIDTH);
    if (pw->st == TFM_OK && int8) {
        snprintf(key, sizeof key, "%s.panel_scale", name);
        pw->st = tfm_safetensors_writer_add_tensor(pw->w, key, TFM_F32, 1, &cols, scale, pw->err);
    }
    if (pw->st == TFM_OK && int8) {
        snprintf(key, sizeof key, "%s.panel_sums", name);
        pw->st = tfm_safetensors_writer_add_tensor(pw->w, key, TFM_I32, 1, &cols, sums, pw->err);
    }
}

tfm_status tfm_model_save_packed(const tfm_model *m, const char *path, tfm_error *err)
{
    if (!m->float_weights && m->compute == TFM_COMPUTE_FLOAT32)
        return tfm_error_set(err, TFM_ERR_ARG, "the model holds no float32 weights to pack");
    panel_writer pw = {.m = m, .type = tfm_quantized_type(m->quantized), .st = TFM_OK,
                       .err = err};
    pw.w = tfm_safetensors_writer_create();
    if (!pw.w) return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory saving a model");
    tfm_safetensors_writer_align_data(pw.w);
    if (!tfm_tensor_names_of(m, &pw.names))
        pw.st = tfm_error_set(err, TFM_ERR_NOMEM, "out of memory saving a model");
    /* the panels first: they start the data section, on whole cache lines */
    if (pw.st == TFM_OK) tfm_model_visit_packed(m, write_matrix, &pw);
    /* then a quantized model's embeddings in float32 (its buffer holds them
     * dequantized) */
    const float *emb[2];
    int rows[2];
    const int n_emb = tfm_model_embeddings(m, emb, rows);
    for (int e = 0; e < n_emb && pw.st == TFM_OK && pw.type != TFM_COMPUTE_FLOAT32; e++) {
        char key[224];
        const int64_t shape[2] = {rows[e], m->config.d_model};
        snprintf(key, sizeof key, "%s.float", tfm_tensor_name_at(&pw.names, emb[e]));
        pw.st = tfm_safetensors_writer_add_tensor(pw.w, key, TFM_F32, 2, shape, emb[e], err);
    }
    const char *extra[] = {TFM_PANELS_KEY, TFM_PANELS_VALUE, NULL};
    if (pw.st == TFM_OK) pw.st = tfm_model_to_safetensors(m, extra, pw.w, err);
    /* last (their bytes would leave the floats after them unaligned), the
     * vocabularies as arrays, which tokenize reads in place */
    tfm_vocab_arrays_made arrays[2] = {0};
    const char *const keys[2] = {m->src_vocab ? "src_vocab" : "vocab", "tgt_vocab"};
    const tfm_vocab *const vocabs[2] = {m->src_vocab ? m->src_vocab : m->vocab, m->vocab};
    const int n_vocabs = !m->vocab ? 0 : m->src_vocab ? 2 : 1;
    if (pw.st == TFM_OK) pw.st = tfm_vocab_arrays_add(pw.w, n_vocabs, keys, vocabs, arrays, err);
    if (pw.st == TFM_OK) pw.st = tfm_safetensors_write(pw.w, path, err);
    tfm_safetensors_writer_free(pw.w);
    for (int k = 0; k < 2; k++) tfm_vocab_arrays_made_free(&arrays[k]);
    for (size_t i = 0; i < pw.n_buffers; i++) free(pw.buffers[i]);
    free(pw.buffers);
    tfm_tensor_names_free(&pw.names);
    return pw.st;
}

tfm_status tfm_model_pack_file(const char *in, const char *out, tfm_error *err)
{
    tfm_model *m;
    tfm_status st = tfm_model_load(in, &m, err);
    if (st != TFM_OK) {
        tfm_error_prefix(err, "%s", in);
        return st;
    }
    if ((st = tfm_model_save_packed(m, out, err)) != TFM_OK) tfm_error_prefix(err, "%s", out);
    tfm_model_free(m);
    return st;
}
