/* model_panels.c - a packed model file: the model file of tfm-formats(5)
 * that also holds, for every matrix the inference kernels multiply by, its
 * panels (lib/nn/panel.c), so that encode and decode read them in place
 * from the mapped file instead of packing the weights when they start.
 * Every process that runs the model then shares the pages of the page
 * cache, and a program touches only the panels it multiplies by.
 *
 * Beside each matrix NAME (kept, so that every other program and Python read
 * the file as before) the file holds "NAME.panels" (I32, [panels, units,
 * 32]: 4-byte words, floats, four int8 or two bf16 values each), and for
 * int8 "NAME.panel_scale" (F32) and "NAME.panel_sums" (I32), [panels x 32]
 * each.  NAME is q_proj's weight for self-attention's q, k and v together,
 * k_proj's for encoder-decoder attention's k and v.  An int8 or bf16
 * model's embeddings are there in float32 too, "NAME.float" (what their
 * lookups read, dequantized), so that nothing is computed at load.  The
 * metadata key "panels" says the width, 32.  The panels come first in the data section,
 * which starts on 64 bytes: each is a whole number of cache lines. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model_internal.h"
#include "nn/layers.h"

/* An embedding's floats in the file, and its place in the model's buffer. */
typedef struct file_embedding {
    const float *weight, *floats;
    size_t count;
} file_embedding;

struct tfm_file_panels {
    tfm_safetensors *file; /* owned: the panels lie in its mapping */
    tfm_compute_type type;
    tfm_file_panel *at;
    size_t n;
    file_embedding embeddings[2]; /* the source's, then the target's (if not shared) */
    int n_embeddings;
};



/* ---- reading ---------------------------------------------------------------------- */

typedef struct panel_reader {
    const tfm_model *m;
    tfm_compute_type type;
    tfm_tensor_names names;
    tfm_safetensors *f;
    tfm_file_panels *fp;
    tfm_status st;
    tfm_error *err;
} panel_reader;

static void read_matrix(void *ctx, const float *weight, int N, int K)
{
    panel_reader *pr = ctx;
    if (pr->st != TFM_OK) return;
    const char *name = tfm_tensor_name_at(&pr->names, weight);
    const nn_panel_rows r = {.N = N, .K = K, .type = pr->type};
    const size_t n_panels = nn_panel_count(&r), words = nn_panel_words(&r);
    tfm_file_panel *at = &pr->fp->at[pr->fp->n];
    *at = (tfm_file_panel){.weight = weight, .count = (size_t)N * (size_t)K};
    char key[224];
    const int64_t shape[3] = {(int64_t)n_panels, (int64_t)(words / NN_PANEL_WIDTH),
                              NN_PANEL_WIDTH};
    snprintf(key, sizeof key, "%s.panels", name ? name : "?");
    pr->st = tfm_safetensors_get(pr->f, key, TFM_I32, 3, shape, &at->panels, pr->err);
    const int64_t cols = (int64_t)(n_panels * NN_PANEL_WIDTH);
    if (pr->st == TFM_OK && pr->type == TFM_COMPUTE_INT8) {
        snprintf(key, sizeof key, "%s.panel_scale", name);
        pr->st = tfm_safetensors_get(pr->f, key, TFM_F32, 1, &cols, (const void **)&at->scale,
                                     pr->err);
    }
    if (pr->st == TFM_OK && pr->type == TFM_COMPUTE_INT8) {
        snprintf(key, sizeof key, "%s.panel_sums", name);
        pr->st = tfm_safetensors_get(pr->f, key, TFM_I32, 1, &cols, (const void **)&at->sums,
                                     pr->err);
    }
    if (pr->st == TFM_OK) pr->fp->n++;
}

static void count_matrix(void *ctx, const float *weight, int N, int K)
{
    (void)weight;
    (void)N;
    (void)K;
    (*(size_t *)ctx)++;
}

tfm_status tfm_file_panels_read(tfm_safetensors *f, const tfm_model *m, tfm_compute_type type,
                                tfm_file_panels **out, tfm_error *err)
{
    *out = NULL;
    size_t n = 0;
    tfm_model_visit_packed(m, count_matrix, &n);
    panel_reader pr = {.m = m, .type = type, .f = f, .st = TFM_OK, .err = err};
    pr.fp = calloc(1, sizeof *pr.fp);
    if (pr.fp) pr.fp->at = calloc(n ? n : 1, sizeof *pr.fp->at);
    if (!pr.fp || !pr.fp->at || !tfm_tensor_names_of(m, &pr.names))
        pr.st = tfm_error_set(err, TFM_ERR_NOMEM, "out of memory reading a packed model");
    if (pr.st == TFM_OK) tfm_model_visit_packed(m, read_matrix, &pr);
    /* the embeddings' floats: a float32 model's own, else NAME.float */
    const float *emb[2];
    int rows[2];
    const int n_emb = tfm_model_embeddings(m, emb, rows);
    for (int e = 0; e < n_emb && pr.st == TFM_OK; e++) {
        char key[224];
        const int64_t shape[2] = {rows[e], m->config.d_model};
        snprintf(key, sizeof key, "%s%s", tfm_tensor_name_at(&pr.names, emb[e]),
                 type == TFM_COMPUTE_FLOAT32 ? "" : ".float");
        file_embedding *fe = &pr.fp->embeddings[e];
        fe->weight = emb[e];
        fe->count = (size_t)rows[e] * (size_t)m->config.d_model;
        pr.st = tfm_safetensors_get(f, key, TFM_F32, 2, shape, (const void **)&fe->floats, err);
        if (pr.st == TFM_OK) pr.fp->n_embeddings = e + 1;
    }
    tfm_tensor_names_free(&pr.names);
    if (pr.st != TFM_OK) {
        tfm_error_prefix(err, "a packed model ('" TFM_PANELS_KEY "' is set)");
        if (pr.fp) free(pr.fp->at);
        free(pr.fp);
        return pr.st;
    }
    pr.fp->type = type;
    *out = pr.fp;
    return TFM_OK;
}

const tfm_file_panel *tfm_file_panels_find(const tfm_file_panels *fp, tfm_compute_type type,
                                           const float *weight)
{
    if (!fp || fp->type != type) return NULL;
    for (size_t i = 0; i < fp->n; i++)
        if (fp->at[i].weight == weight) return &fp->at[i];
    return NULL;
}

bool tfm_file_panels_holds(const tfm_file_panels *fp, const float *data)
{
    for (size_t i = 0; fp && i < fp->n; i++)
        if (data >= fp->at[i].weight && data < fp->at[i].weight + fp->at[i].count) return true;
    for (int e = 0; fp && e < fp->n_embeddings; e++)
        if (data == fp->embeddings[e].weight) return true;
    return false;
}

void tfm_file_panels_embeddings(const tfm_file_panels *fp, tfm_params *p)
{
    float **sides[2] = {&p->src_embed, &p->tgt_embed};
    for (int e = 0; e < fp->n_embeddings; e++)
        for (int i = 0; i < 2; i++)
            if (*sides[i] == fp->embeddings[e].weight)
                *sides[i] = (float *)(uintptr_t)fp->embeddings[e].floats;
}

void tfm_file_panels_keep_file(tfm_file_panels *fp, tfm_safetensors *f) { fp->file = f; }

void tfm_file_panels_free(tfm_file_panels *fp)
{
    if (!fp) return;
    tfm_safetensors_free(fp->file);
    free(fp->at);
    free(fp);
}
