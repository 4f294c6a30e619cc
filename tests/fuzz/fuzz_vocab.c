/* fuzz_vocab.c - libFuzzer target for the vocabulary file parser.
 *
 * Any input must either fail with a message or give a vocabulary that
 * writes back out and parses again to the same pieces, scores and types
 * (and, for the vocabulary of a model from elsewhere, the same SentencePiece
 * model). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tfm/spm.h"
#include "tfm/text.h"

static void same_or_abort(const tfm_vocab *a, const tfm_vocab *b)
{
    if (tfm_vocab_size(a) != tfm_vocab_size(b)) abort();
    for (int32_t i = 0; i < tfm_vocab_size(a); i++) {
        size_t la, lb;
        const char *pa = tfm_vocab_piece(a, i, &la), *pb = tfm_vocab_piece(b, i, &lb);
        if (la != lb || memcmp(pa, pb, la) != 0) abort();
        if (tfm_vocab_score(a, i) != tfm_vocab_score(b, i)) abort();
        if (tfm_vocab_type(a, i) != tfm_vocab_type(b, i)) abort();
        if (tfm_vocab_find(b, pa, la) != i) abort();
    }
    /* a model from elsewhere has no byte pieces, and keeps its SentencePiece
     * model (the same bytes) through the file */
    if (tfm_vocab_is_foreign(a) != tfm_vocab_is_foreign(b)) abort();
    if ((tfm_vocab_spm(a) != NULL) != (tfm_vocab_spm(b) != NULL)) abort();
    if (tfm_vocab_spm(a)) {
        size_t na, nb;
        const void *ba = tfm_spm_bytes(tfm_vocab_spm(a), &na);
        const void *bb = tfm_spm_bytes(tfm_vocab_spm(b), &nb);
        if (na != nb || memcmp(ba, bb, na) != 0) abort();
    }
    for (int byte = 0; byte < 256 && !tfm_vocab_is_foreign(a); byte++)
        if (tfm_vocab_byte_id(a, (unsigned char)byte) < 0) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tfm_vocab *v = NULL;
    tfm_error err;
    tfm_status st = tfm_vocab_parse((const char *)data, size, &v, &err);
    if (st != TFM_OK) {
        if (v != NULL || err.msg[0] == 0) abort();
        return 0;
    }
    char *text = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&text, &len);
    if (!fp) abort();
    if (tfm_vocab_write(v, fp, &err) != TFM_OK) abort();
    fclose(fp);
    tfm_vocab *w = NULL;
    if (tfm_vocab_parse(text, len, &w, &err) != TFM_OK) abort();
    same_or_abort(v, w);
    tfm_vocab_free(w);
    tfm_vocab_free(v);
    free(text);
    return 0;
}
