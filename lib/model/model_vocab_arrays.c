/* model_vocab_arrays.c - the vocabularies of a packed model file as arrays
 * (tfm-formats(5)): beside the text of vocabulary KEY ("vocab", or
 * "src_vocab" and "tgt_vocab") in the metadata, the file holds
 *   metadata KEY.header   the text's first line
 *   tensor KEY.texts      I8 [bytes]: every piece's text and a NUL, in id order
 *   tensor KEY.scores     F32 [pieces]
 *   tensor KEY.types      I8 [pieces]: 0 normal, 1 control, 2 user, 3 byte
 *   tensor KEY.spm        I8 [bytes]: an imported model's SentencePiece model
 *   tensor KEY.spm_trie   I32 [units, 3]: its piece trie (tfm_spm_trie)
 * so that tokenize maps the file and reads the pieces in place instead of
 * unescaping and parsing the text (tfm_model_load_vocab).  The text stays
 * the vocabulary of record: every reader of the whole model checks that
 * the arrays say the same. */
#include <stdio.h>
#include <string.h>

#include "model/model_internal.h"
#include "tfm/spm.h"

/* The names of the arrays of key. */
static void arrays_name(char *buf, size_t size, const char *key, const char *what)
{
    snprintf(buf, size, "%s.%s", key, what);
}

tfm_status tfm_vocab_arrays_add(tfm_safetensors_writer *w, int n, const char *const *keys,
                                const tfm_vocab *const *vocabs, tfm_vocab_arrays_made *made,
                                tfm_error *err)
{
    tfm_status st = TFM_OK;
    char name[64];
    /* every vocabulary's 4-byte values first: the data of tensors follow
     * each other in the order added, and bytes after them leave nothing
     * unaligned */
    for (int k = 0; k < n && st == TFM_OK; k++) {
        st = tfm_vocab_to_arrays(vocabs[k], &made[k], err);
        const int64_t pieces = tfm_vocab_size(vocabs[k]);
        arrays_name(name, sizeof name, keys[k], "scores");
        if (st == TFM_OK)
            st = tfm_safetensors_writer_add_tensor(w, name, TFM_F32, 1, &pieces,
                                                   made[k].scores.data, err);
        const int64_t trie_shape[2] = {(int64_t)(made[k].spm_trie.len / (3 * sizeof(int32_t))), 3};
        arrays_name(name, sizeof name, keys[k], "spm_trie");
        if (st == TFM_OK && trie_shape[0] > 0)
            st = tfm_safetensors_writer_add_tensor(w, name, TFM_I32, 2, trie_shape,
                                                   made[k].spm_trie.data, err);
    }
    for (int k = 0; k < n && st == TFM_OK; k++) {
        const int64_t bytes = (int64_t)made[k].texts.len, pieces = tfm_vocab_size(vocabs[k]);
        const int64_t spm_bytes = (int64_t)made[k].spm.len;
        arrays_name(name, sizeof name, keys[k], "texts");
        st = tfm_safetensors_writer_add_tensor(w, name, TFM_I8, 1, &bytes, made[k].texts.data,
                                               err);
        arrays_name(name, sizeof name, keys[k], "types");
        if (st == TFM_OK)
            st = tfm_safetensors_writer_add_tensor(w, name, TFM_I8, 1, &pieces,
                                                   made[k].types.data, err);
        arrays_name(name, sizeof name, keys[k], "spm");
        if (st == TFM_OK && spm_bytes > 0)
            st = tfm_safetensors_writer_add_tensor(w, name, TFM_I8, 1, &spm_bytes,
                                                   made[k].spm.data, err);
        arrays_name(name, sizeof name, keys[k], "header");
        if (st == TFM_OK) st = tfm_safetensors_writer_add_metadata(w, name, made[k].header, err);
    }
    return st;
}

/* The length of one-dimensional tensor name, which must be there. */
static tfm_status length_of(const tfm_safetensors *f, const char *name, int64_t *n,
                            tfm_error *err)
{
    size_t i;
    if (!tfm_safetensors_find(f, name, &i))
        return tfm_error_set(err, TFM_ERR_FORMAT, "missing tensor '%s'", name);
    tfm_safetensors_info info;
    tfm_safetensors_info_at(f, i, &info);
    if (info.ndim != 1)
        return tfm_error_set(err, TFM_ERR_FORMAT, "tensor '%s' has %d dimensions, expected 1",
                             name, info.ndim);
    *n = info.shape[0];
    return TFM_OK;
}

tfm_status tfm_vocab_arrays_find(tfm_safetensors *f, const char *key, tfm_vocab_arrays *a,
                                 bool *found, tfm_error *err)
{
    char name[64];
    memset(a, 0, sizeof *a);
    arrays_name(name, sizeof name, key, "header");
    a->header = tfm_safetensors_metadata(f, name);
    *found = a->header != NULL;
    if (!*found) return TFM_OK;
    int64_t bytes, pieces;
    const void *texts, *scores, *types;
    arrays_name(name, sizeof name, key, "texts");
    tfm_status st = length_of(f, name, &bytes, err);
    if (st == TFM_OK) st = tfm_safetensors_get(f, name, TFM_I8, 1, &bytes, &texts, err);
    arrays_name(name, sizeof name, key, "types");
    if (st == TFM_OK) st = length_of(f, name, &pieces, err);
    if (st == TFM_OK) st = tfm_safetensors_get(f, name, TFM_I8, 1, &pieces, &types, err);
    arrays_name(name, sizeof name, key, "scores");
    if (st == TFM_OK) st = tfm_safetensors_get(f, name, TFM_F32, 1, &pieces, &scores, err);
    int64_t spm_bytes = 0, trie_shape[2] = {0, 3};
    const void *spm = NULL, *trie = NULL;
    arrays_name(name, sizeof name, key, "spm");
    size_t i;
    if (st == TFM_OK && tfm_safetensors_find(f, name, &i) &&
        (st = length_of(f, name, &spm_bytes, err)) == TFM_OK)
        st = tfm_safetensors_get(f, name, TFM_I8, 1, &spm_bytes, &spm, err);
    arrays_name(name, sizeof name, key, "spm_trie");
    if (st == TFM_OK && tfm_safetensors_find(f, name, &i)) {
        tfm_safetensors_info info;
        tfm_safetensors_info_at(f, i, &info);
        trie_shape[0] = info.ndim == 2 ? info.shape[0] : 0;
        st = tfm_safetensors_get(f, name, TFM_I32, 2, trie_shape, &trie, err);
    }
    if (st != TFM_OK) {
        tfm_error_prefix(err, "metadata '%s.header' says the file holds the vocabulary's arrays",
                         key);
        return st;
    }
    a->texts = texts;
    a->texts_size = (size_t)bytes;
    a->scores = scores;
    a->types = types;
    a->size = (size_t)pieces;
    a->spm = spm;
    a->spm_size = (size_t)spm_bytes;
    a->spm_trie = trie;
    a->spm_trie_units = (size_t)trie_shape[0];
    return TFM_OK;
}

tfm_status tfm_vocab_arrays_check(tfm_safetensors *f, const char *key, const tfm_vocab *v,
                                  tfm_error *err)
{
    tfm_vocab_arrays a;
    bool found;
    tfm_status st = tfm_vocab_arrays_find(f, key, &a, &found, err);
    if (st != TFM_OK || !found || !v) return st;
    char header[TFM_VOCAB_HEADER_MAX];
    tfm_vocab_header(v, header, sizeof header);
    if (strcmp(header, a.header) != 0)
        return tfm_error_set(err, TFM_ERR_FORMAT,
                             "metadata '%s.header' is '%.80s', but the vocabulary's text starts "
                             "'%s'",
                             key, a.header, header);
    if (a.size != (size_t)tfm_vocab_size(v))
        return tfm_error_set(err, TFM_ERR_FORMAT, "the arrays of '%s' hold %zu pieces, its text %d",
                             key, a.size, (int)tfm_vocab_size(v));
    size_t pos = 0;
    for (int32_t id = 0; id < tfm_vocab_size(v); id++) {
        size_t len;
        const char *text = tfm_vocab_piece(v, id, &len);
        const bool same_text = pos + len < a.texts_size && memcmp(a.texts + pos, text, len) == 0 &&
                               a.texts[pos + len] == 0;
        if (!same_text || a.scores[id] != tfm_vocab_score(v, id) ||
            a.types[id] != (uint8_t)tfm_vocab_type(v, id))
            return tfm_error_set(err, TFM_ERR_FORMAT,
                                 "piece %d of the arrays of '%s' differs from the vocabulary's "
                                 "text",
                                 (int)id, key);
        pos += len + 1;
    }
    if (pos != a.texts_size)
        return tfm_error_set(err, TFM_ERR_FORMAT,
                             "tensor '%s.texts' holds %zu bytes after the last piece", key,
                             a.texts_size - pos);
    size_t spm_size = 0, units = 0;
    const void *spm = tfm_vocab_spm(v) ? tfm_spm_bytes(tfm_vocab_spm(v), &spm_size) : NULL;
    const int32_t *trie = tfm_vocab_spm(v) ? tfm_spm_trie(tfm_vocab_spm(v), &units) : NULL;
    if (spm_size != a.spm_size || (spm_size > 0 && memcmp(spm, a.spm, spm_size) != 0))
        return tfm_error_set(err, TFM_ERR_FORMAT,
                             "tensor '%s.spm' is not the SentencePiece model of the vocabulary's "
                             "text",
                             key);
    /* the trie read in place is trusted by tokenize: here it is built again */
    if (a.spm_trie && (units != a.spm_trie_units ||
                       memcmp(trie, a.spm_trie, units * 3 * sizeof *trie) != 0))
        return tfm_error_set(err, TFM_ERR_FORMAT,
                             "tensor '%s.spm_trie' is not the piece trie of its SentencePiece "
                             "model",
                             key);
    return TFM_OK;
}
