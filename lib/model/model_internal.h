/* model/model_internal.h - what the model's life (model.c), its file (model_file.c),
 * its quantized form (model_quant.c) and its packed form (model_packed.c) share,
 * internal to lib/model. */
#ifndef TFM_MODEL_MODEL_INTERNAL_H
#define TFM_MODEL_MODEL_INTERNAL_H

#include "tfm/model.h"

/* A model of a valid configuration with every parameter zero, no vocabulary,
 * step 0, source_eos true, float32.  untouched: the buffer's pages are left
 * for the first write to bring in (an inference-only quantized model never
 * writes most of them), else touched and aligned to cache lines. */
tfm_status tfm_model_alloc(const tfm_config *c, bool untouched, tfm_model **out, tfm_error *err);

/* A model's vocabulary must index its embeddings exactly, and its fixed
 * special ids must be the ones the configuration names: TFM_ERR_RANGE
 * saying which does not. */
tfm_status tfm_model_check_vocab(const tfm_config *c, const tfm_vocab *v, tfm_error *err);
/* The same for the vocabulary of one side only. */
tfm_status tfm_model_check_side_vocab(const tfm_config *c, tfm_side side, const tfm_vocab *v,
                                      tfm_error *err);

/* The vocabulary file's text, as tfm_vocab_write makes it: the one
 * serialisation of a vocabulary, used both to copy one and to store it in a
 * model file.  *text is malloc'd and NUL-terminated. */
tfm_status tfm_model_vocab_text(const tfm_vocab *v, char **text, size_t *len, tfm_error *err);

/* ---- a packed file's vocabularies as arrays (model_vocab_arrays.c) ---- */

/* Adds to w the arrays of the n vocabularies stored under metadata keys;
 * made[n] holds them until the file is written, then each is given to
 * tfm_vocab_arrays_made_free (all n, failure or not). */
tfm_status tfm_vocab_arrays_add(tfm_safetensors_writer *w, int n, const char *const *keys,
                                const tfm_vocab *const *vocabs, tfm_vocab_arrays_made *made,
                                tfm_error *err);
/* The arrays of the vocabulary under key, read in place (valid as long as
 * f), their tensors counted as used; *found false when the file has none
 * (no metadata KEY.header). */
tfm_status tfm_vocab_arrays_find(tfm_safetensors *f, const char *key, tfm_vocab_arrays *a,
                                 bool *found, tfm_error *err);
/* tfm_vocab_arrays_find, and with v (the vocabulary read from key's text)
 * a check that the arrays hold the same pieces, scores and types. */
tfm_status tfm_vocab_arrays_check(tfm_safetensors *f, const char *key, const tfm_vocab *v,
                                  tfm_error *err);

/* ---- quantized matrices (model_quant.c) ---- */

/* Whether a tensor of the model file is one of the matrices a quantized
 * model holds in int8 or bf16: two-dimensional, not a position table. */
bool tfm_model_is_quantized_tensor(const char *name, int ndim);

/* An empty store of type for m's matrices; its type; freeing it. */
tfm_status tfm_quantized_alloc(const tfm_model *m, tfm_compute_type type, tfm_quantized **out,
                               tfm_error *err);
tfm_compute_type tfm_quantized_type(const tfm_quantized *qz);
void tfm_quantized_free(tfm_quantized *qz);

/* Where the quantized values of the rows starting at float offset lie: q
 * and scale (int8) or bf16 (the other NULL).  False when no matrix row
 * starts there. */
typedef struct tfm_quantized_view {
    int8_t *q;
    float *scale;
    uint16_t *bf16;
} tfm_quantized_view;
bool tfm_quantized_find(const tfm_quantized *qz, size_t offset, tfm_quantized_view *v);

/* The matrices' float values from their quantized ones, into m->data: all,
 * or only the embeddings' (what a lookup reads). */
void tfm_quantized_dequantize(tfm_model *m, bool embeddings_only);

/* ---- the matrices the kernels multiply by (model_matrices.c) ---- */

/* The linear layers of one layer as the kernels take them: self-attention
 * (q, k and v lie in a row: one [3D, D] layer), encoder-decoder attention
 * when cross is not NULL (q alone, k and v as one [2D, D] layer for the
 * sources), the FFN; each with where its pack goes in L.  Returns how many
 * (at most 7). */
struct nn_packed_layer;
typedef struct tfm_layer_matrix {
    struct nn_packed_linear *dst;
    const float *weight, *bias;
    int N, K;
} tfm_layer_matrix;
int tfm_layer_matrices(struct nn_packed_layer *L, const tfm_attention *self,
                       const tfm_attention *cross, const tfm_linear *fc1, const tfm_linear *fc2,
                       int D, int F, tfm_layer_matrix out[7]);

/* Calls fn for every matrix W [N, K] the inference kernels multiply by, as
 * tfm_model_pack_for_* packs them (weight at its place in m's buffer; q, k
 * and v of self-attention as one [3D, D] matrix at q's weight, k and v of
 * encoder-decoder attention as one [2D, D] at k's), in a fixed order. */
typedef void (*tfm_packed_visit_fn)(void *ctx, const float *weight, int N, int K);
void tfm_model_visit_packed(const tfm_model *m, tfm_packed_visit_fn fn, void *ctx);

/* Every tensor's name and place, to name a matrix by its place: false when
 * memory runs out; the name of the first tensor at weight, or NULL. */
typedef struct tfm_tensor_names {
    const float **data;
    char **name;
    size_t n;
    bool out_of_memory;
} tfm_tensor_names;
bool tfm_tensor_names_of(const tfm_model *m, tfm_tensor_names *t);
const char *tfm_tensor_name_at(const tfm_tensor_names *t, const float *weight);
void tfm_tensor_names_free(tfm_tensor_names *t);

/* The embedding matrices of m: 1 or 2 (shared: the source's alone), with
 * their rows. */
int tfm_model_embeddings(const tfm_model *m, const float *at[2], int rows[2]);

/* ---- a packed model file's panels (model_panels.c) ---- */

/* The panels of one matrix in a packed model file (nn_panel_make's layout),
 * in place in the mapped file: words, and for int8 the scales and column
 * sums of whole panels (else NULL). */
typedef struct tfm_file_panel {
    const float *weight; /* the matrix's place in the model's buffer */
    size_t count;        /* its floats there: N x K */
    const void *panels;
    const float *scale;
    const int32_t *sums;
} tfm_file_panel;

/* Reads the panels of every matrix of m from f, a model file whose
 * metadata 'panels' is set, of compute type type (the file's), checking
 * their dtype and size (TFM_ERR_FORMAT naming the tensor that is missing or
 * of the wrong shape).  They lie in f's mapping: f must outlive *out, or be
 * given to it (tfm_file_panels_keep_file: freed with it). */
tfm_status tfm_file_panels_read(tfm_safetensors *f, const tfm_model *m, tfm_compute_type type,
                                tfm_file_panels **out, tfm_error *err);
void tfm_file_panels_keep_file(tfm_file_panels *fp, tfm_safetensors *f);
/* Whether the floats at data lie in a matrix whose panels fp holds, or are
 * an embedding whose floats it holds. */
bool tfm_file_panels_holds(const tfm_file_panels *fp, const float *data);
/* Points the embeddings of p (each side's; a shared matrix is both) at
 * their floats in the file instead of the model's buffer.  (A shared output
 * projection keeps its place in the buffer, which names its panels.) */
void tfm_file_panels_embeddings(const tfm_file_panels *fp, tfm_params *p);
/* The panels of the matrix at weight, when fp holds them in type; else NULL. */
const tfm_file_panel *tfm_file_panels_find(const tfm_file_panels *fp, tfm_compute_type type,
                                           const float *weight);
void tfm_file_panels_free(tfm_file_panels *fp);

/* The metadata key of a packed model file, and its value: the width of the
 * panels. */
#define TFM_PANELS_KEY "panels"
#define TFM_PANELS_VALUE "32"

/* ---- models from elsewhere (import_marian.c, import_hf.c) ---- */

/* "dir/name", malloc'd (NULL when memory runs out). */
char *import_path(const char *dir, const char *name);

/* The vocabulary of a side of an imported model: pieces[0..count) (lens
 * their sizes) in their ids, named yml_path in messages; unused control
 * pieces up to fill_to (the larger side's size: the specials added next
 * have one id on both sides); <s> and <pad> (Marian has neither); the
 * SentencePiece model at spm_path attached.  *eos and *unk: the ids of </s>
 * and <unk>, which must be there. */
tfm_status import_side_vocab(const char *const *pieces, const size_t *lens, size_t count,
                             const char *yml_path, const char *spm_path, int fill_to,
                             tfm_vocab **out, int32_t *eos, int32_t *unk, tfm_error *err);

/* The sizes and special ids of an imported model whose larger side has
 * n_real pieces (import_side_vocab's vocabularies: <s> and <pad> after
 * them), and positions up to 1024. */
void import_specials(tfm_config *c, int n_real, int32_t eos, int32_t unk);

/* The output bias of the rows Marian does not have (<s>, <pad>, the unused
 * ones): far below any logit, finite (fine-tuning's label-smoothed loss sums
 * the log-probabilities of every row). */
#define IMPORT_ABSENT_BIAS (-1e4f)

#endif
