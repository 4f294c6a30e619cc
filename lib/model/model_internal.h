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
