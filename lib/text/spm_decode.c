/* spm_decode.c - pieces back to text as spm_decode does it
 * (sentencepiece_processor.cc Decode, 0.1.97), and ids <-> pieces.
 *
 * Each piece is looked up by its text (as SentencePiece's decoder does:
 * the reserved pieces first, a text it does not know is the unknown
 * piece).  Then, in order:
 *   - a control piece writes nothing;
 *   - the unknown piece writes unk_surface (" \u2047 " by default), another
 *     text that looked up to it (a piece the model lacks) is written as it is;
 *   - a run of byte pieces is gathered into bytes, written character by
 *     character, each byte that does not start a valid UTF-8 character
 *     (SentencePiece's decoder) as U+FFFD;
 *   - any other piece has U+2581 replaced by spaces; while nothing has been
 *     written yet, one leading U+2581 is dropped first (the dummy prefix),
 *     when the normalizer adds a dummy prefix or removes extra whitespace.
 *     With remove_extra_whitespaces that goes on for each piece until the
 *     text is not empty; without it, only up to the first piece that had
 *     one.
 * Last, the denormalizer, when the model has one with a character map,
 * normalizes the whole text. */
#include <stdlib.h>
#include <string.h>

#include "text/spm_internal.h"

typedef struct decoder {
    const tfm_spm *m;
    tfm_buf *out;
    tfm_buf bytes;     /* the pending run of byte pieces */
    bool is_bos_ws;    /* a leading U+2581 may still be dropped */
    bool bos_ws_seen;
} decoder;

static int piece_byte(const tfm_spm *m, int32_t id)
{
    const char *t = m->text + m->pieces[id].off; /* "<0xNN>", checked when loaded */
    int hi = t[3] <= '9' ? t[3] - '0' : t[3] - 'A' + 10;
    int lo = t[4] <= '9' ? t[4] - '0' : t[4] - 'A' + 10;
    return hi * 16 + lo;
}

static tfm_status flush_bytes(decoder *d)
{
    const unsigned char *b = (const unsigned char *)d->bytes.data;
    tfm_status st = TFM_OK;
    for (size_t off = 0; off < d->bytes.len && st == TFM_OK;) {
        int k = spm_utf8_len(b + off, d->bytes.len - off);
        if (k == 0) {
            st = tfm_buf_append(d->out, "\xEF\xBF\xBD", 3);
            off++;
        } else {
            st = tfm_buf_append(d->out, b + off, (size_t)k);
            off += (size_t)k;
        }
    }
    tfm_buf_clear(&d->bytes);
    return st;
}

/* One piece: text[0..len), looked up to id. */
static tfm_status decode_piece(decoder *d, const char *text, size_t len, int32_t id)
{
    const tfm_spm *m = d->m;
    uint8_t type = m->pieces[id].type;
    if (type == TFM_SPM_BYTE) return tfm_buf_putc(&d->bytes, (char)piece_byte(m, id));
    tfm_status st = flush_bytes(d);
    if (st != TFM_OK) return st;
    if (d->bos_ws_seen || d->out->len > 0) d->is_bos_ws = false;
    d->bos_ws_seen = false;
    if (type == TFM_SPM_CONTROL) return TFM_OK;
    if (type == TFM_SPM_UNKNOWN) {
        const spm_piece *p = &m->pieces[id];
        if (p->len == len && memcmp(m->text + p->off, text, len) == 0)
            return tfm_buf_append(d->out, m->unk_surface, m->unk_surface_len);
        return tfm_buf_append(d->out, text, len);
    }
    if (d->is_bos_ws && (m->norm.add_dummy_prefix || m->norm.remove_extra_whitespaces) &&
        len >= SPM_SPACE_LEN && memcmp(text, SPM_SPACE, SPM_SPACE_LEN) == 0) {
        text += SPM_SPACE_LEN;
        len -= SPM_SPACE_LEN;
        d->bos_ws_seen = !m->norm.remove_extra_whitespaces;
    }
    st = tfm_buf_append(d->out, "", 0);
    for (const char *end = text + len; text < end && st == TFM_OK;) {
        const char *sp = memmem(text, (size_t)(end - text), SPM_SPACE, SPM_SPACE_LEN);
        size_t k = sp ? (size_t)(sp - text) : (size_t)(end - text);
        st = tfm_buf_append(d->out, text, k);
        if (sp && st == TFM_OK) st = tfm_buf_putc(d->out, ' ');
        text += k + (sp ? SPM_SPACE_LEN : 0);
    }
    return st;
}

/* After the last piece: the bytes left, then the denormalizer. */
static tfm_status decode_finish(decoder *d, tfm_error *err)
{
    tfm_status st = flush_bytes(d);
    tfm_buf_free(&d->bytes);
    if (st != TFM_OK) return tfm_error_set(err, st, "out of memory decoding");
    if (!d->m->has_denorm) return tfm_buf_append(d->out, "", 0);
    tfm_buf text = *d->out;
    tfm_buf_init(d->out);
    st = spm_normalize(d->m, &d->m->denorm, text.data, text.len, d->out, NULL, err);
    tfm_buf_free(&text);
    return st;
}

static void decoder_init(decoder *d, const tfm_spm *m, tfm_buf *out)
{
    *d = (decoder){.m = m, .out = out, .is_bos_ws = true};
    tfm_buf_init(&d->bytes);
    tfm_buf_clear(out);
}

tfm_status tfm_spm_decode(const tfm_spm *m, const int32_t *ids, size_t n, tfm_buf *out,
                          tfm_error *err)
{
    decoder d;
    decoder_init(&d, m, out);
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= m->n) {
            tfm_buf_free(&d.bytes);
            return tfm_error_set(err, TFM_ERR_RANGE,
                                 "id %d (token %zu) is outside the model's 0..%d", ids[i],
                                 i + 1, m->n - 1);
        }
        const spm_piece *p = &m->pieces[ids[i]];
        if (decode_piece(&d, m->text + p->off, p->len, m->canon[ids[i]]) != TFM_OK) {
            tfm_buf_free(&d.bytes);
            return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory decoding");
        }
    }
    return decode_finish(&d, err);
}

tfm_status tfm_spm_decode_pieces(const tfm_spm *m, const char *line, size_t len, tfm_buf *out,
                                 tfm_error *err)
{
    decoder d;
    decoder_init(&d, m, out);
    for (const char *p = line, *end = line + len; p <= end;) {
        const char *sp = memchr(p, ' ', (size_t)(end - p));
        size_t k = sp ? (size_t)(sp - p) : (size_t)(end - p);
        if (decode_piece(&d, p, k, spm_piece_to_id(m, p, k)) != TFM_OK) {
            tfm_buf_free(&d.bytes);
            return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory decoding");
        }
        p += k + 1;
    }
    return decode_finish(&d, err);
}

tfm_status tfm_spm_ids_to_pieces(const tfm_spm *m, const int32_t *ids, size_t n, tfm_buf *out,
                                 tfm_error *err)
{
    tfm_buf_clear(out);
    tfm_status st = tfm_buf_append(out, "", 0);
    for (size_t i = 0; i < n && st == TFM_OK; i++) {
        if (ids[i] < 0 || ids[i] >= m->n)
            return tfm_error_set(err, TFM_ERR_RANGE,
                                 "id %d (token %zu) is outside the model's 0..%d", ids[i],
                                 i + 1, m->n - 1);
        if (i > 0) st = tfm_buf_putc(out, ' ');
        if (st == TFM_OK)
            st = tfm_buf_append(out, m->text + m->pieces[ids[i]].off, m->pieces[ids[i]].len);
    }
    return st == TFM_OK ? TFM_OK : tfm_error_set(err, st, "out of memory");
}

tfm_status tfm_spm_pieces_to_ids(const tfm_spm *m, const char *line, size_t len, tfm_ids *out,
                                 tfm_error *err)
{
    tfm_ids_clear(out);
    size_t col = 0;
    for (size_t i = 0; i < len;) {
        if (line[i] == ' ' || line[i] == '\t') {
            i++;
            continue;
        }
        size_t j = i;
        while (j < len && line[j] != ' ' && line[j] != '\t') j++;
        col++;
        int32_t id = tfm_spm_find(m, line + i, j - i);
        if (id < 0)
            return tfm_error_set(err, TFM_ERR_FORMAT, "piece %zu, '%.*s', is not in the model",
                                 col, (int)(j - i > 64 ? 64 : j - i), line + i);
        if (tfm_ids_push(out, id) != TFM_OK) return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
        i = j;
    }
    return TFM_OK;
}
