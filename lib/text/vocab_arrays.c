/* vocab_arrays.c - a vocabulary as arrays (tfm-formats(5)): the pieces'
 * texts, each ended by a NUL, their scores, their types, and an imported
 * model's SentencePiece model with its piece trie.  A packed model file
 * keeps them beside the vocabulary's text, so that tokenize reads the
 * pieces where the file is mapped instead of parsing and copying tens of
 * thousands of lines (and, for an imported model, decoding its
 * SentencePiece model from base64 and building its trie).  Every check of
 * the text form still runs (vocab.c's, through vocab_internal.h): arrays
 * are read as carefully as the text, only faster. */
#include <string.h>

#include "tfm/spm.h"
#include "tfm/text.h"
#include "text/vocab_internal.h"

tfm_status tfm_vocab_to_arrays(const tfm_vocab *v, tfm_vocab_arrays_made *out, tfm_error *err)
{
    tfm_buf_init(&out->texts);
    tfm_buf_init(&out->scores);
    tfm_buf_init(&out->types);
    tfm_buf_init(&out->spm);
    tfm_buf_init(&out->spm_trie);
    tfm_vocab_header(v, out->header, sizeof out->header);
    bool ok = true;
    if (tfm_vocab_spm(v)) {
        size_t n, units;
        const void *bytes = tfm_spm_bytes(tfm_vocab_spm(v), &n);
        const int32_t *trie = tfm_spm_trie(tfm_vocab_spm(v), &units);
        ok = tfm_buf_append(&out->spm, bytes, n) == TFM_OK &&
             tfm_buf_append(&out->spm_trie, trie, units * 3 * sizeof *trie) == TFM_OK;
    }
    for (int32_t id = 0; ok && id < tfm_vocab_size(v); id++) {
        size_t len;
        const char *text = tfm_vocab_piece(v, id, &len);
        const float score = tfm_vocab_score(v, id);
        const uint8_t type = (uint8_t)tfm_vocab_type(v, id);
        ok = tfm_buf_append(&out->texts, text, len + 1) == TFM_OK && /* with its NUL */
             tfm_buf_append(&out->scores, &score, sizeof score) == TFM_OK &&
             tfm_buf_append(&out->types, &type, 1) == TFM_OK;
    }
    return ok ? TFM_OK
              : tfm_error_set(err, TFM_ERR_NOMEM, "out of memory writing the vocabulary");
}

void tfm_vocab_arrays_made_free(tfm_vocab_arrays_made *made)
{
    tfm_buf_free(&made->texts);
    tfm_buf_free(&made->scores);
    tfm_buf_free(&made->types);
    tfm_buf_free(&made->spm);
    tfm_buf_free(&made->spm_trie);
}

tfm_vocab_arrays tfm_vocab_arrays_of(const tfm_vocab_arrays_made *made)
{
    return (tfm_vocab_arrays){
        .header = made->header,
        .texts = made->texts.data,
        .texts_size = made->texts.len,
        .scores = (const float *)(const void *)made->scores.data,
        .types = (const uint8_t *)made->types.data,
        .size = made->types.len,
        .spm = made->spm.data,
        .spm_size = made->spm.len,
        .spm_trie = made->spm_trie.len ? (const int32_t *)(const void *)made->spm_trie.data : NULL,
        .spm_trie_units = made->spm_trie.len / (3 * sizeof(int32_t)),
    };
}

tfm_status tfm_vocab_from_arrays(const tfm_vocab_arrays *a, void (*release)(void *ctx),
                                 void *ctx, tfm_vocab **out, tfm_error *err)
{
    *out = NULL;
    tfm_vocab *v;
    tfm_status st = vocab_read_begin(a->header, strlen(a->header), a->size, &v, err);
    if (st != TFM_OK) return st;
    /* (an empty texts array may be NULL: nothing is read from it) */
    if (a->texts_size > 0) vocab_borrow(v, a->texts, a->texts + a->texts_size);
    size_t pos = 0;
    for (size_t id = 0; id < a->size && st == TFM_OK; id++) {
        const char *text = pos < a->texts_size ? a->texts + pos : NULL;
        const char *nul = text ? memchr(text, 0, a->texts_size - pos) : NULL;
        if (!nul) {
            st = tfm_error_set(err, TFM_ERR_FORMAT,
                               "piece %zu: the texts end before it (%zu bytes for %zu pieces)",
                               id, a->texts_size, a->size);
            break;
        }
        const size_t len = (size_t)(nul - text);
        st = vocab_add_read(v, text, len, a->scores[id], (tfm_piece_type)a->types[id], err);
        pos += len + 1;
    }
    if (st == TFM_OK && pos != a->texts_size)
        st = tfm_error_set(err, TFM_ERR_FORMAT,
                           "the texts hold %zu bytes after the last of the %zu pieces",
                           a->texts_size - pos, a->size);
    if (st == TFM_OK && a->spm_size > 0) {
        if (!tfm_vocab_is_foreign(v))
            st = tfm_error_set(err, TFM_ERR_FORMAT, "a SentencePiece model beside a vocabulary "
                                                    "that is not from elsewhere (no "
                                                    "layout=sentencepiece)");
        else if ((st = vocab_attach_spm(v, a->spm, a->spm_size, a->spm_trie, a->spm_trie_units,
                                        err)) != TFM_OK)
            tfm_error_prefix(err, "the SentencePiece model");
    }
    if (st == TFM_OK) st = vocab_read_end(v, err);
    if (st != TFM_OK) {
        tfm_vocab_free(v);
        return st;
    }
    vocab_set_release(v, release, ctx);
    *out = v;
    return TFM_OK;
}
