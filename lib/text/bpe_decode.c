/* bpe_decode.c - token ids back to text: the inverse of tfm_bpe_encode on
 * everything it produces, so decode(encode(x)) == normalize(x).
 *
 * Pieces are joined with each '▁' turned back into a space, and the space
 * the encoder put in front of the line is dropped.  Byte pieces are gathered
 * into a run and written as bytes, because one character may be spelled
 * with several of them; a run that is not valid UTF-8 (a model can emit any
 * sequence of ids) is repaired to U+FFFD so the output is always valid.
 * <s>, </s> and <pad> are dropped; <unk> shows as U+2047 '⁇', as in
 * SentencePiece.  tfm_bpe_decode_placeholders, the same loop, writes each
 * placeholder token <phN> as the text of placeholder N of the source line. */
#include <stdlib.h>
#include <string.h>

#include "text/encode_internal.h"
#include "tfm/spm.h"
#include "tfm/text.h"

/* Appends a normal or user piece with its markers as spaces.  The first
 * text of the line loses its leading marker: that is the dummy prefix. */
static tfm_status append_piece(tfm_buf *out, const char *text, size_t len, bool first)
{
    size_t i = 0;
    if (first && len >= TFM_MARKER_LEN && memcmp(text, TFM_MARKER, TFM_MARKER_LEN) == 0)
        i = TFM_MARKER_LEN;
    size_t start = i;
    while (i < len) {
        if (len - i >= TFM_MARKER_LEN && memcmp(text + i, TFM_MARKER, TFM_MARKER_LEN) == 0) {
            if (tfm_buf_append(out, text + start, i - start) != TFM_OK ||
                tfm_buf_putc(out, ' ') != TFM_OK)
                return TFM_ERR_NOMEM;
            i += TFM_MARKER_LEN;
            start = i;
        } else {
            i++;
        }
    }
    return tfm_buf_append(out, text + start, len - start);
}

/* Writes the run of byte pieces gathered so far, repaired, and empties it. */
static tfm_status flush_bytes(tfm_buf *bytes, tfm_buf *out)
{
    if (bytes->len == 0) return TFM_OK;
    size_t n_bad;
    tfm_status st = tfm_utf8_repair_append(out, bytes->data, bytes->len, &n_bad, NULL);
    tfm_buf_clear(bytes);
    return st;
}

/* Where placeholder tokens take their text from (tfm_bpe_decode_placeholders). */
typedef struct placeholder_source {
    const char *line;
    const tfm_placeholders *ph;
    size_t dropped; /* tokens the line has no placeholder for */
} placeholder_source;

/* The loop of both decoders: src NULL decodes placeholder tokens as the
 * user pieces they are. */
/* A vocabulary with a SentencePiece model: the ids' pieces (control pieces
 * left out, <unk> as the model's unknown piece) detokenized as spm_decode
 * --input_format=piece does, so that a piece SentencePiece does not have
 * (a multilingual model's >>fra<<) is written as it is, as spm_decode
 * writes it. */
static tfm_status decode_spm(const tfm_vocab *v, const int32_t *ids, size_t n, tfm_buf *out,
                             tfm_error *err)
{
    const int32_t size = tfm_vocab_size(v);
    const struct tfm_spm *spm = tfm_vocab_spm(v);
    tfm_buf pieces;
    tfm_buf_init(&pieces);
    tfm_status st = TFM_OK;
    for (size_t i = 0; i < n && st == TFM_OK; i++) {
        if (ids[i] < 0 || ids[i] >= size) {
            tfm_buf_free(&pieces);
            return tfm_error_set(err, TFM_ERR_RANGE,
                                 "id %ld is outside the vocabulary of %ld pieces", (long)ids[i],
                                 (long)size);
        }
        const int32_t s = tfm_vocab_to_spm(v, ids[i]);
        size_t len;
        const char *text = s >= 0 ? tfm_spm_piece(spm, s, &len) : tfm_vocab_piece(v, ids[i], &len);
        if (s < 0 && tfm_vocab_type(v, ids[i]) == TFM_PIECE_CONTROL) continue;
        if (pieces.len > 0) st = tfm_buf_putc(&pieces, ' ');
        if (st == TFM_OK) st = tfm_buf_append(&pieces, text, len);
    }
    if (st == TFM_OK)
        st = tfm_spm_decode_pieces(spm, pieces.data ? pieces.data : "", pieces.len, out, err);
    else
        tfm_error_set(err, st, "out of memory decoding a line");
    tfm_buf_free(&pieces);
    return st;
}

static tfm_status decode_ids(const tfm_vocab *v, const int32_t *ids, size_t n,
                             placeholder_source *src, tfm_buf *out, tfm_error *err)
{
    tfm_buf_clear(out);
    if (tfm_vocab_spm(v) && !src) return decode_spm(v, ids, n, out, err);
    int32_t size = tfm_vocab_size(v);
    bool first = true; /* nothing written yet: a leading marker is the dummy prefix */
    tfm_buf bytes;     /* the current run of byte pieces */
    tfm_buf_init(&bytes);
    tfm_status st = TFM_OK;
    for (size_t i = 0; i < n && st == TFM_OK; i++) {
        int32_t id = ids[i];
        if (id < 0 || id >= size) {
            tfm_buf_free(&bytes);
            return tfm_error_set(err, TFM_ERR_RANGE,
                                 "id %ld is outside the vocabulary of %ld pieces", (long)id,
                                 (long)size);
        }
        size_t len;
        const char *text = tfm_vocab_piece(v, id, &len);
        tfm_piece_type type = tfm_vocab_type(v, id);
        int byte = tfm_vocab_byte_value(v, id);
        if (byte >= 0) {
            st = tfm_buf_putc(&bytes, (char)byte);
            continue;
        }
        if (bytes.len > 0) {
            st = flush_bytes(&bytes, out);
            first = false;
            if (st != TFM_OK) break;
        }
        if (type == TFM_PIECE_CONTROL) {
            if (id == TFM_ID_UNK) {
                st = tfm_buf_append(out, "\xE2\x81\x87", 3); /* U+2047 */
                first = false;
            }
            continue;
        }
        int index = src && type == TFM_PIECE_USER ? tfm_placeholder_piece_index(text, len) : 0;
        if (index > 0) {
            /* The source's text, raw: it is valid UTF-8 without controls. */
            size_t ph_len;
            const char *ph_text = tfm_placeholders_text(src->line, src->ph, index, &ph_len);
            if (!ph_text) {
                src->dropped++;
                continue;
            }
            st = tfm_buf_append(out, ph_text, ph_len);
            first = false;
            continue;
        }
        st = append_piece(out, text, len, first);
        first = false;
    }
    if (st == TFM_OK) st = flush_bytes(&bytes, out);
    tfm_buf_free(&bytes);
    if (st != TFM_OK) return tfm_error_set(err, st, "out of memory decoding %zu ids", n);
    return TFM_OK;
}

tfm_status tfm_bpe_decode(const tfm_vocab *v, const int32_t *ids, size_t n, tfm_buf *out,
                          tfm_error *err)
{
    return decode_ids(v, ids, n, NULL, out, err);
}

tfm_status tfm_bpe_decode_placeholders(const tfm_vocab *v, const int32_t *ids, size_t n,
                                       const char *src_line, size_t src_len,
                                       const tfm_placeholders *ph, tfm_buf *out,
                                       size_t *n_dropped, tfm_error *err)
{
    for (size_t k = 0; k < ph->n; k++)
        if (ph->items[k].start > src_len || ph->items[k].len > src_len - ph->items[k].start)
            return tfm_error_set(err, TFM_ERR_ARG,
                                 "placeholder %zu lies outside the source line of %zu bytes",
                                 k + 1, src_len);
    placeholder_source src = {.line = src_line, .ph = ph, .dropped = 0};
    tfm_status st = decode_ids(v, ids, n, &src, out, err);
    if (n_dropped) *n_dropped = src.dropped;
    return st;
}
