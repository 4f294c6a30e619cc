/* model_quant.c - a model's matrices in int8 or bf16 (tfm_model_quantize,
 * the quantized model files of 'train quantize'), and which type the
 * linear layers of inference multiply in (tfm_model_set_compute_type).
 *
 * The matrices are every two-dimensional weight but the position tables
 * (learned absolute, relative): the embeddings (the output projection,
 * when shared) and every linear layer's weight.  Their int8 (or bf16) values lie in a buffer
 * parallel to the model's float buffer, at the same element offsets, so
 * that matrices contiguous in the one (q, k and v of an attention) are
 * contiguous in the other; the int8 row scales lie in the order of the
 * matrices, so those rows' scales are contiguous too.  The biases, the
 * layer norms and the position tables stay float32. */
#include <stdlib.h>
#include <string.h>

#include "nn/layers.h"
#include "model/model_internal.h"

/* ---- compute types ----------------------------------------------------------------------- */

bool tfm_compute_type_parse(const char *name, tfm_compute_type *out)
{
    static const struct { const char *name; tfm_compute_type type; } names[] = {
        {"default", TFM_COMPUTE_DEFAULT}, {"float32", TFM_COMPUTE_FLOAT32},
        {"float", TFM_COMPUTE_FLOAT32},
        {"int8", TFM_COMPUTE_INT8},       {"bf16", TFM_COMPUTE_BF16},
        {"bfloat16", TFM_COMPUTE_BF16},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(name, names[i].name) == 0) {
            *out = names[i].type;
            return true;
        }
    return false;
}

const char *tfm_compute_type_name(tfm_compute_type t)
{
    switch (t) {
    case TFM_COMPUTE_DEFAULT: return "default";
    case TFM_COMPUTE_FLOAT32: return "float32";
    case TFM_COMPUTE_INT8: return "int8";
    case TFM_COMPUTE_BF16: return "bf16";
    }
    return "?";
}

/* ---- the matrices ------------------------------------------------------------------------ */

/* One quantized matrix: where its floats start in the model's buffer, its
 * shape, and where its row scales start (int8). */
typedef struct quant_matrix {
    size_t offset;
    size_t rows, cols;
    size_t scale_offset;
} quant_matrix;

struct tfm_quantized {
    tfm_compute_type type;  /* TFM_COMPUTE_INT8 or TFM_COMPUTE_BF16 */
    int8_t *q;              /* int8: [tfm_params_count], parallel to the model's data */
    uint16_t *bf16;         /* bf16: the same */
    float *scale;           /* int8: one per row of every matrix, in their order */
    quant_matrix *mats;
    size_t n_mats, n_rows;
};

/* The position tables, absolute and relative, are read as floats by the
 * attention (they are added, not multiplied by the linear layers'
 * kernels): quantized, their floats would be missing from a quantized
 * file. */
bool tfm_model_is_quantized_tensor(const char *name, int ndim)
{
    return ndim == 2 && !strstr(name, "embed_positions") && !strstr(name, "relative_keys") &&
           !strstr(name, "relative_values");
}

/* Collects the matrices of a configuration (the visit passes their data
 * pointers into base). */
typedef struct matrix_list {
    const float *base;
    quant_matrix *mats;
    size_t n, n_rows;
    bool out_of_memory;
} matrix_list;

static void list_matrix(void *ctx, const char *name, int ndim, const int64_t *shape, float *data)
{
    matrix_list *l = ctx;
    if (!tfm_model_is_quantized_tensor(name, ndim) || l->out_of_memory) return;
    quant_matrix *grown = realloc(l->mats, (l->n + 1) * sizeof *grown);
    if (!grown) {
        l->out_of_memory = true;
        return;
    }
    l->mats = grown;
    l->mats[l->n++] = (quant_matrix){.offset = (size_t)(data - l->base), .rows = (size_t)shape[0],
                                     .cols = (size_t)shape[1], .scale_offset = l->n_rows};
    l->n_rows += (size_t)shape[0];
}

void tfm_quantized_free(tfm_quantized *qz)
{
    if (!qz) return;
    free(qz->q);
    free(qz->bf16);
    free(qz->scale);
    free(qz->mats);
    free(qz);
}

/* An empty store of type for m's matrices (their values not set).  The
 * parallel buffer comes from calloc, so the pages of what no matrix uses
 * are never touched. */
tfm_status tfm_quantized_alloc(const tfm_model *m, tfm_compute_type type, tfm_quantized **out,
                               tfm_error *err)
{
    *out = NULL;
    tfm_quantized *qz = calloc(1, sizeof *qz);
    matrix_list l = {.base = m->data};
    if (qz) tfm_params_visit(&m->config, &m->params, list_matrix, &l);
    const size_t n = tfm_params_count(&m->config);
    bool ok = qz && !l.out_of_memory;
    if (ok) {
        qz->type = type;
        qz->mats = l.mats;
        qz->n_mats = l.n;
        qz->n_rows = l.n_rows;
        l.mats = NULL;
        /* every matrix is written, so the gaps' pages are few: huge pages
         * take a fault per 2 MB instead of per 4 KB */
        if (type == TFM_COMPUTE_INT8) {
            qz->q = calloc(n, 1);
            qz->scale = calloc(l.n_rows, sizeof *qz->scale);
            ok = qz->q && qz->scale;
            if (ok) tfm_advise_huge_pages(qz->q, n);
        } else {
            qz->bf16 = calloc(n, sizeof *qz->bf16);
            ok = qz->bf16 != NULL;
            if (ok) tfm_advise_huge_pages(qz->bf16, n * sizeof *qz->bf16);
        }
    }
    free(l.mats);
    if (!ok) {
        tfm_quantized_free(qz);
        return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory for the %s weights",
                             tfm_compute_type_name(type));
    }
    *out = qz;
    return TFM_OK;
}

tfm_compute_type tfm_quantized_type(const tfm_quantized *qz)
{
    return qz ? qz->type : TFM_COMPUTE_FLOAT32;
}

/* The matrix whose floats hold offset, or NULL. */
static const quant_matrix *matrix_at(const tfm_quantized *qz, size_t offset)
{
    for (size_t i = 0; i < qz->n_mats; i++)
        if (offset >= qz->mats[i].offset &&
            offset < qz->mats[i].offset + qz->mats[i].rows * qz->mats[i].cols)
            return &qz->mats[i];
    return NULL;
}

bool tfm_quantized_find(const tfm_quantized *qz, size_t offset, tfm_quantized_view *v)
{
    const quant_matrix *mt = qz ? matrix_at(qz, offset) : NULL;
    if (!mt || (offset - mt->offset) % mt->cols != 0) return false;
    const size_t row = (offset - mt->offset) / mt->cols;
    *v = (tfm_quantized_view){
        .q = qz->q ? qz->q + offset : NULL,
        .scale = qz->scale ? qz->scale + mt->scale_offset + row : NULL,
        .bf16 = qz->bf16 ? qz->bf16 + offset : NULL,
    };
    return true;
}

/* ---- quantizing a float model --------------------------------------------------------------- */

tfm_status tfm_model_quantize(tfm_model *m, tfm_compute_type type, tfm_error *err)
{
    if (type != TFM_COMPUTE_INT8 && type != TFM_COMPUTE_BF16)
        return tfm_error_set(err, TFM_ERR_ARG, "a model is quantized to int8 or bf16, not %s",
                             tfm_compute_type_name(type));
    if (m->quantized)
        return tfm_error_set(err, TFM_ERR_ARG, "a model is quantized from float32: it is %s already",
                             tfm_compute_type_name(m->quantized->type));
    if (!m->float_weights)
        return tfm_error_set(err, TFM_ERR_ARG, "the model holds no float32 weights to quantize");
    tfm_quantized *qz;
    tfm_status st = tfm_quantized_alloc(m, type, &qz, err);
    if (st != TFM_OK) return st;
    for (size_t i = 0; i < qz->n_mats; i++) {
        const quant_matrix *mt = &qz->mats[i];
        float *w = m->data + mt->offset;
        if (type == TFM_COMPUTE_INT8) {
            nn_quantize_int8(qz->q + mt->offset, qz->scale + mt->scale_offset, w, mt->rows, mt->cols);
            /* the floats become what the file will hold, so that the model
             * in memory computes as the one read back */
            nn_dequantize_int8(w, qz->q + mt->offset, qz->scale + mt->scale_offset, mt->rows,
                               mt->cols);
        } else {
            nn_round_bf16(qz->bf16 + mt->offset, w, mt->rows * mt->cols);
            nn_bf16_to_floats(w, qz->bf16 + mt->offset, mt->rows * mt->cols);
        }
    }
    m->quantized = qz;
    m->compute = type;
    return TFM_OK;
}

/* Puts each matrix's float values into the model's buffer: all of them,
 * or (embeddings_only) only those an embedding lookup reads. */
void tfm_quantized_dequantize(tfm_model *m, bool embeddings_only)
{
    const tfm_quantized *qz = m->quantized;
    for (size_t i = 0; qz && i < qz->n_mats; i++) {
        const quant_matrix *mt = &qz->mats[i];
        float *w = m->data + mt->offset;
        if (embeddings_only && w != m->params.src_embed && w != m->params.tgt_embed) continue;
        if (qz->type == TFM_COMPUTE_INT8)
            nn_dequantize_int8(w, qz->q + mt->offset, qz->scale + mt->scale_offset, mt->rows,
                               mt->cols);
        else
            nn_bf16_to_floats(w, qz->bf16 + mt->offset, mt->rows * mt->cols);
    }
}

void tfm_model_release_quantized(tfm_model *m)
{
    tfm_quantized *qz = m->quantized;
    if (m->float_weights || !qz) return;
    free(qz->q);
    free(qz->bf16);
    qz->q = NULL;
    qz->bf16 = NULL;
}

/* ---- the compute type ---------------------------------------------------------------------- */

tfm_status tfm_model_set_compute_type(tfm_model *m, tfm_compute_type type, tfm_error *err)
{
    if (type == TFM_COMPUTE_DEFAULT) type = tfm_quantized_type(m->quantized);
    if (m->packed && (m->packed->encoder || m->packed->decoder) && type != m->compute)
        return tfm_error_set(err, TFM_ERR_ARG, "the model is packed for %s already",
                             tfm_compute_type_name(m->compute));
    const tfm_compute_type held = tfm_quantized_type(m->quantized);
    if (held != TFM_COMPUTE_FLOAT32 && type != held && type != TFM_COMPUTE_FLOAT32)
        return tfm_error_set(err, TFM_ERR_ARG,
                             "the model's weights are %s: it computes in %s or float32, not %s",
                             tfm_compute_type_name(held), tfm_compute_type_name(held),
                             tfm_compute_type_name(type));
    /* (a float32 packed file read for inference holds its matrices as
     * panels alone: float32 is what it computes in) */
    if (type == TFM_COMPUTE_FLOAT32 && !m->float_weights && held != TFM_COMPUTE_FLOAT32)
        return tfm_error_set(err, TFM_ERR_ARG,
                             "the model was loaded with its %s weights only: it computes in %s",
                             tfm_compute_type_name(held), tfm_compute_type_name(held));
    /* a float32 model computing in int8 or bf16 is quantized here, as
     * 'train quantize' would: the same values as its quantized file's */
    if (held == TFM_COMPUTE_FLOAT32 && type != TFM_COMPUTE_FLOAT32)
        return tfm_model_quantize(m, type, err);
    m->compute = type;
    return TFM_OK;
}
