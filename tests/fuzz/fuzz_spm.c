/* fuzz_spm.c - libFuzzer target for SentencePiece model files (tfm/spm.h).
 *
 * Any bytes either fail to parse with a message and no model, or give a
 * model with which a few lines (fixed ones, hostile ones, and the input's
 * own last bytes) encode to ids inside the model, to pieces, and decode back
 * without failing; the ids' pieces decode as the ids do; every piece's
 * text finds its id.  The corpus (tests/fuzz/corpus/fuzz_spm) holds small
 * models made by spm_train and truncations of them. */
#include <stdlib.h>
#include <string.h>

#define FUZZ_TARGET "fuzz_spm"
#include "require.h"
#include "tfm/spm.h"

static const char *const lines[] = {
    "Hello world", "  the   cat\tsat  ", "caf\xc3\xa9 \xe2\x96\x81 na\xc3\xafve", "",
    "\xff\xfe invalid \xe2\x96", "<s> </s> <unk> <0x41>", "\xf0\x9f\x98\x80 \xd7\xa9\xd7\x9c", "1234",
};

static void one_line(tfm_spm *m, tfm_spm_encoder *e, const char *line, size_t len, tfm_ids *ids,
                     tfm_buf *a, tfm_buf *b)
{
    tfm_error err;
    tfm_status s = tfm_spm_encode(e, line, len, ids, NULL, &err);
    if (s != TFM_OK) {
        /* the one refusal SentencePiece shares: a control piece's text met as a symbol */
        require(s == TFM_ERR_UNSUPPORTED && err.msg[0], "encode failed without a reason");
        return;
    }
    for (size_t i = 0; i < ids->len; i++)
        require(ids->data[i] >= 0 && ids->data[i] < tfm_spm_size(m), "an id outside the model");
    require(tfm_spm_encode_pieces(e, line, len, a, NULL, &err) == TFM_OK, "pieces failed");
    require(tfm_spm_decode(m, ids->data, ids->len, a, &err) == TFM_OK, "decode failed");
    require(tfm_spm_ids_to_pieces(m, ids->data, ids->len, b, &err) == TFM_OK, "ids_to_pieces");
    tfm_buf c;
    tfm_buf_init(&c);
    require(tfm_spm_decode_pieces(m, b->data ? b->data : "", b->len, &c, &err) == TFM_OK,
            "decode_pieces failed");
    /* The same text from pieces as from ids, unless a piece holds a space
     * (then the piece line splits differently). */
    bool spaced = false;
    for (size_t i = 0; i < ids->len; i++) {
        const char *t = tfm_spm_piece(m, ids->data[i], NULL);
        spaced |= strchr(t, ' ') != NULL;
    }
    require(spaced || (a->len == c.len && memcmp(a->data, c.data, a->len) == 0),
            "pieces decode unlike their ids");
    tfm_buf_free(&c);
    require(tfm_spm_normalize(e, line, len, a, &err) == TFM_OK, "normalize failed");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tfm_spm *m = (tfm_spm *)1;
    tfm_error err = {0};
    if (tfm_spm_parse(data, size, &m, &err) != TFM_OK) {
        require(m == NULL && err.msg[0] != 0, "a failure without a message, or with a model");
        return 0;
    }
    size_t n;
    require(tfm_spm_bytes(m, &n) != NULL && n == size, "the bytes are not kept");
    for (int32_t id = 0; id < tfm_spm_size(m); id++) {
        size_t len;
        const char *t = tfm_spm_piece(m, id, &len);
        int32_t found = tfm_spm_find(m, t, len);
        require(found >= 0 && found < tfm_spm_size(m), "a piece that is not found");
    }
    tfm_spm_encoder *e;
    require(tfm_spm_encoder_create(m, &e, &err) == TFM_OK, "encoder_create failed");
    tfm_ids ids;
    tfm_ids_init(&ids);
    tfm_buf a, b;
    tfm_buf_init(&a);
    tfm_buf_init(&b);
    for (size_t i = 0; i < sizeof lines / sizeof *lines; i++)
        one_line(m, e, lines[i], strlen(lines[i]), &ids, &a, &b);
    size_t tail = size < 64 ? size : 64;
    one_line(m, e, (const char *)data + size - tail, tail, &ids, &a, &b);
    /* The model read with its own piece trie (as a packed file keeps it)
     * segments the same; with units of the trie overwritten by bytes of the
     * input it is refused, or walks nothing out of bounds (the sanitizers
     * watch). */
    size_t n_units;
    const int32_t *trie = tfm_spm_trie(m, &n_units);
    int32_t *units = malloc(n_units * 3 * sizeof *units + 1);
    require(units != NULL, "out of memory");
    for (int damaged = 0; damaged < 2; damaged++) {
        memcpy(units, trie, n_units * 3 * sizeof *units);
        for (size_t i = 0; damaged && i + 8 <= size && i < 64; i += 8) {
            int32_t at, v;
            memcpy(&at, data + i, 4);
            memcpy(&v, data + i + 4, 4);
            units[(uint32_t)at % (n_units * 3)] = v;
        }
        tfm_spm *k = (tfm_spm *)1;
        if (tfm_spm_parse_with_trie(data, size, units, n_units, &k, &err) != TFM_OK) {
            require(damaged && k == NULL && err.msg[0] != 0, "its own trie refused");
            continue;
        }
        tfm_spm_encoder *ek;
        require(tfm_spm_encoder_create(k, &ek, &err) == TFM_OK, "encoder_create failed");
        for (size_t i = 0; i < sizeof lines / sizeof *lines; i++) {
            tfm_ids kept_ids;
            tfm_ids_init(&kept_ids);
            tfm_status s0 = tfm_spm_encode(e, lines[i], strlen(lines[i]), &ids, NULL, &err);
            tfm_status s1 = tfm_spm_encode(ek, lines[i], strlen(lines[i]), &kept_ids, NULL, &err);
            require(damaged || (s0 == s1 && ids.len == kept_ids.len &&
                                (ids.len == 0 || memcmp(ids.data, kept_ids.data,
                                                        ids.len * sizeof *ids.data) == 0)),
                    "its own trie segments otherwise");
            tfm_ids_free(&kept_ids);
        }
        tfm_spm_encoder_free(ek);
        tfm_spm_free(k);
    }
    free(units);
    tfm_buf_free(&a);
    tfm_buf_free(&b);
    tfm_ids_free(&ids);
    tfm_spm_encoder_free(e);
    tfm_spm_free(m);
    return 0;
}
