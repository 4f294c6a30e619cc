/* vocab_arrays.c - a vocabulary as arrays (tfm-formats(5)): the pieces'
 * texts, each ended by a NUL, their scores, their types, and an imported
 * model's SentencePiece model.  A packed model file keeps them beside the
 * vocabulary's text, so that tokenize reads the pieces where the file is
 * mapped instead of parsing and copying tens of thousands of lines (and,
 * for an imported model, decoding its SentencePiece model from base64).
 * Every check of the text form still runs (vocab.c's, through
 * vocab_internal.h): arrays are read as carefully as the text, only
 * faster. */
#include <string.h>

#include "tfm/spm.h"
#include "tfm/text.h"
#include "text/vocab_internal.h"

tfm_status tfm_vocab_to_arrays(const tfm_vocab *v, char *header, tfm_buf *texts,
                               tfm_buf *scores, tfm_buf *types, tfm_buf *spm, tfm_error *err)
{
    tfm_vocab_header(v, header, TFM_VOCAB_HEADER_MAX);
    if (tfm_vocab_spm(v)) {
        size_t n;
        const void *bytes = tfm_spm_bytes(tfm_vocab_spm(v), &n);
        if (tfm_buf_append(spm, bytes, n) != TFM_OK)
            return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory writing the vocabulary");
    }
    for (int32_t id = 0; id < tfm_vocab_size(v); id++) {
        size_t len;
        const char *text = tfm_vocab_piece(v, id, &len);
        const float score = tfm_vocab_score(v, id);
        const uint8_t type = (uint8_t)tfm_vocab_type(v, id);
        if (tfm_buf_append(texts, text, len + 1) != TFM_OK || /* with its NUL */
            tfm_buf_append(scores, &score, sizeof score) != TFM_OK ||
            tfm_buf_append(types, &type, 1) != TFM_OK)
            return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory writing the vocabulary");
    }
    return TFM_OK;
}

tfm_status tfm_vocab_from_arrays(const tfm_vocab_arrays *a, void (*release)(void *ctx),
                                 void *ctx, tfm_vocab **out, tfm_error *err)
{
    *out = NULL;
    tfm_vocab *v;
    tfm_status st = vocab_read_begin(a->header, strlen(a->header), a->size, &v, err);
    if (st != TFM_OK) return st;
    vocab_borrow(v, a->texts, a->texts + a->texts_size);
    size_t pos = 0;
    for (size_t id = 0; id < a->size && st == TFM_OK; id++) {
        const char *text = a->texts + pos;
        const char *nul = memchr(text, 0, a->texts_size - pos);
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
        else if ((st = tfm_vocab_attach_spm(v, a->spm, a->spm_size, err)) != TFM_OK)
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
