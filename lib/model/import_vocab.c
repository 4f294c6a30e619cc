/* import_vocab.c - what the importers of models from elsewhere
 * (import_marian.c, import_hf.c) share: a side's vocabulary with its
 * SentencePiece model, and paths in the model's directory. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model_internal.h"
#include "tfm/spm.h"

char *import_path(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", dir, name);
    return p;
}

tfm_status import_side_vocab(const char *const *pieces, const size_t *lens, size_t count,
                             const char *yml_path, const char *spm_path, int fill_to,
                             tfm_vocab **out, int32_t *eos, int32_t *unk, tfm_error *err)
{
    *out = NULL;
    tfm_status st = TFM_OK;
    tfm_vocab *v = tfm_vocab_create_foreign();
    if (!v) st = tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    *eos = *unk = -1;
    for (size_t id = 0; st == TFM_OK && id < count; id++) {
        const char *p = pieces[id];
        const size_t len = lens[id];
        const bool is_eos = strcmp(p, "</s>") == 0, is_unk = strcmp(p, "<unk>") == 0;
        if (is_eos) *eos = (int32_t)id;
        if (is_unk) *unk = (int32_t)id;
        const bool control = is_eos || is_unk || strcmp(p, "<s>") == 0 ||
                             strcmp(p, "<pad>") == 0;
        /* a multilingual model's target-language tokens (>>fra<<) are kept whole */
        const bool user = len > 4 && memcmp(p, ">>", 2) == 0 && memcmp(p + len - 2, "<<", 2) == 0;
        const tfm_piece_type type = control ? TFM_PIECE_CONTROL
                                    : user  ? TFM_PIECE_USER
                                            : TFM_PIECE_NORMAL;
        if (tfm_vocab_add(v, p, len, 0.0f, type) < 0)
            st = tfm_error_set(err, TFM_ERR_FORMAT,
                               "%s: piece %zu ('%.40s') cannot be held in a vocabulary (empty, "
                               "a space or a control character in it, or twice)",
                               yml_path, id, p);
    }
    for (int k = 0; st == TFM_OK && tfm_vocab_size(v) < fill_to; k++) {
        char filler[32];
        snprintf(filler, sizeof filler, "<unused%d>", k);
        if (tfm_vocab_add(v, filler, strlen(filler), 0.0f, TFM_PIECE_CONTROL) < 0)
            st = tfm_error_set(err, TFM_ERR_FORMAT, "%s: the vocabulary holds '%s'", yml_path,
                               filler);
    }
    if (st == TFM_OK && (*eos < 0 || *unk < 0))
        st = tfm_error_set(err, TFM_ERR_FORMAT, "%s: the vocabulary has no '%s'", yml_path,
                           *eos < 0 ? "</s>" : "<unk>");
    if (st == TFM_OK && (tfm_vocab_find(v, "<s>", 3) >= 0 || tfm_vocab_find(v, "<pad>", 5) >= 0))
        st = tfm_error_set(err, TFM_ERR_FORMAT, "%s: the vocabulary holds '<s>' or '<pad>', "
                                                "which Marian's vocabularies do not",
                           yml_path);
    if (st == TFM_OK && (tfm_vocab_add(v, "<s>", 3, 0.0f, TFM_PIECE_CONTROL) < 0 ||
                         tfm_vocab_add(v, "<pad>", 5, 0.0f, TFM_PIECE_CONTROL) < 0))
        st = tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    tfm_spm *spm = NULL;
    if (st == TFM_OK && (st = tfm_spm_load(spm_path, &spm, err)) != TFM_OK)
        tfm_error_prefix(err, "%s", spm_path);
    size_t n_bytes = 0;
    const void *bytes = spm ? tfm_spm_bytes(spm, &n_bytes) : NULL;
    if (st == TFM_OK && (st = tfm_vocab_attach_spm(v, bytes, n_bytes, err)) != TFM_OK)
        tfm_error_prefix(err, "%s", spm_path);
    tfm_spm_free(spm);
    if (st != TFM_OK) {
        tfm_vocab_free(v);
        return st;
    }
    *out = v;
    return TFM_OK;
}

void import_specials(tfm_config *c, int n_real, int32_t eos, int32_t unk)
{
    c->src_vocab_size = c->tgt_vocab_size = n_real + 2;
    c->eos_id = eos;
    c->unk_id = unk;
    c->bos_id = n_real;
    c->pad_id = n_real + 1;
    c->max_positions = 1024;
}
