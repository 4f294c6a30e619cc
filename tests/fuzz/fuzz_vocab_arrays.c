/* fuzz_vocab_arrays.c - libFuzzer target for a vocabulary read from the
 * arrays of a packed model file (tfm_vocab_from_arrays), which tokenize
 * reads in place.  The input is cut into the arrays:
 *
 *     HEADER '\n'  N (2 bytes, little-endian)  TYPES (N bytes)
 *     SCORES (4N bytes, little-endian floats)  TEXTS (the rest)
 *
 * Any input must either fail with a message, leaving no vocabulary and the
 * arrays not released, or give a vocabulary of N pieces whose texts lie in
 * TEXTS, NUL-terminated there, that makes the same arrays again and whose
 * text form parses back to the same pieces; freeing it releases the arrays
 * once. */
#include <stdlib.h>
#include <string.h>

#include "tfm/text.h"

#define FUZZ_TARGET "fuzz_vocab_arrays"
#include "require.h"

static int releases;
static void count_release(void *ctx)
{
    (void)ctx;
    releases++;
}

/* The same pieces, scores and types. */
static void require_same(const tfm_vocab *a, const tfm_vocab *b)
{
    require(tfm_vocab_size(a) == tfm_vocab_size(b), "another count of pieces");
    for (int32_t id = 0; id < tfm_vocab_size(a); id++) {
        size_t la, lb;
        const char *pa = tfm_vocab_piece(a, id, &la), *pb = tfm_vocab_piece(b, id, &lb);
        require(la == lb && memcmp(pa, pb, la) == 0, "another piece");
        require(tfm_vocab_score(a, id) == tfm_vocab_score(b, id), "another score");
        require(tfm_vocab_type(a, id) == tfm_vocab_type(b, id), "another type");
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nl = memchr(data, '\n', size);
    if (!nl || size - (size_t)(nl + 1 - data) < 2) return 0;
    char *header = strndup((const char *)data, (size_t)(nl - data));
    const uint8_t *p = nl + 1;
    size_t left = size - (size_t)(p - data);
    const size_t n = (size_t)p[0] | (size_t)p[1] << 8;
    p += 2;
    left -= 2;
    if (!header || left < 5 * n) {
        free(header);
        return 0;
    }
    float *scores = malloc(n * sizeof *scores + 1); /* aligned, as the file's mapping is */
    uint8_t *types = malloc(n + 1);
    char *texts = malloc(left - 5 * n + 1);
    require(scores && types && texts, "out of memory");
    memcpy(types, p, n);
    memcpy(scores, p + n, 4 * n);
    memcpy(texts, p + 5 * n, left - 5 * n);
    const tfm_vocab_arrays a = {.header = header, .texts = texts, .texts_size = left - 5 * n,
                                .scores = scores, .types = types, .size = n};

    tfm_vocab *v = (tfm_vocab *)&a; /* must be reset */
    tfm_error err = {0};
    releases = 0;
    tfm_status st = tfm_vocab_from_arrays(&a, count_release, NULL, &v, &err);
    if (st != TFM_OK) {
        require(v == NULL && err.status == st && err.msg[0] != 0, "a failure without its message");
        require(releases == 0, "a failure released the arrays");
    } else {
        require(tfm_vocab_size(v) == (int32_t)n, "another count of pieces than the arrays'");
        for (int32_t id = 0; id < tfm_vocab_size(v); id++) {
            size_t len;
            const char *t = tfm_vocab_piece(v, id, &len);
            require(t >= texts && t + len < texts + a.texts_size && t[len] == 0,
                    "a piece not read in place");
        }
        /* the arrays again */
        tfm_vocab_arrays_made again;
        require(tfm_vocab_to_arrays(v, &again, &err) == TFM_OK,
                "an accepted vocabulary makes no arrays");
        /* (an accepted vocabulary has its 4 specials at least: no buffer is empty) */
        require(again.texts.len == a.texts_size &&
                    memcmp(again.texts.data, texts, a.texts_size) == 0 &&
                    again.scores.len == 4 * n && memcmp(again.scores.data, scores, 4 * n) == 0 &&
                    again.types.len == n && memcmp(again.types.data, types, n) == 0 &&
                    again.spm.len == 0 && again.spm_trie.len == 0,
                "other arrays made again");
        tfm_vocab_arrays_made_free(&again);
        /* the text form, parsed again */
        char *text = NULL;
        size_t len = 0;
        FILE *fp = open_memstream(&text, &len);
        require(fp != NULL, "out of memory");
        require(tfm_vocab_write(v, fp, &err) == TFM_OK, "an accepted vocabulary does not write");
        fclose(fp);
        tfm_vocab *back = NULL;
        require(tfm_vocab_parse(text, len, &back, &err) == TFM_OK,
                "the text of an accepted vocabulary does not parse");
        require_same(v, back);
        tfm_vocab_free(back);
        free(text);
        tfm_vocab_free(v);
        require(releases == 1, "freeing the vocabulary did not release the arrays once");
    }
    free(header);
    free(scores);
    free(types);
    free(texts);
    return 0;
}
