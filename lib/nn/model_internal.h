/* nn/model_internal.h - what the model's life (model.c) and the model file
 * (model_file.c) share, internal to lib/nn. */
#ifndef TFM_NN_MODEL_INTERNAL_H
#define TFM_NN_MODEL_INTERNAL_H

#include "tfm/model.h"

/* A model of a valid configuration with every parameter zero, no vocabulary,
 * step 0 and source_eos true. */
tfm_status tfm_model_alloc(const tfm_config *c, tfm_model **out, tfm_error *err);

/* A model's vocabulary must index its embeddings exactly, and its fixed
 * special ids must be the ones the configuration names: TFM_ERR_RANGE
 * saying which does not. */
tfm_status tfm_model_check_vocab(const tfm_config *c, const tfm_vocab *v, tfm_error *err);

/* The vocabulary file's text, as tfm_vocab_write makes it: the one
 * serialisation of a vocabulary, used both to copy one and to store it in a
 * model file.  *text is malloc'd and NUL-terminated. */
tfm_status tfm_model_vocab_text(const tfm_vocab *v, char **text, size_t *len, tfm_error *err);

#endif
