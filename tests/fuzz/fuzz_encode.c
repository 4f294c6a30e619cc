/* fuzz_encode.c - libFuzzer target for the BPE round trip: for any bytes x,
 * decode(encode(x)) == normalize(x), and normalize is idempotent.  Three
 * small vocabularies built in code (NFKC; NFC with case folding; no
 * normalisation) are tried on every input, deterministically and with
 * BPE-dropout; any difference aborts. */
#include <stdlib.h>
#include <string.h>

#include "tfm/text.h"

#define M "\xE2\x96\x81"

static const char *const merges[] = {
    M "t", "th", M "th", "he", M "the", "in", "er", "an", M "a", "on", "re", "at",
    M "an", M "and", "ing", M "in", "\xC3\xA9t", "\xCE\xB1\xCE\xB9", M "\xCE\xB1",
    "\xD0\xBF\xD1\x80", "\xE4\xB8\xAD\xE6\x96\x87", "12", "123", "<0", "x4", NULL,
};

/* A vocabulary: specials, bytes, a user symbol, '▁', printable ASCII, some
 * accented Latin, Greek, Cyrillic and Han characters, then merges. */
static tfm_vocab *make_vocab(tfm_norm_form form, bool fold)
{
    tfm_norm_params norm = tfm_norm_default_params();
    norm.form = form;
    norm.case_fold = fold;
    tfm_vocab *v = tfm_vocab_create(&norm);
    if (!v) abort();
    tfm_vocab_add(v, "<sep>", 5, 0, TFM_PIECE_USER);
    tfm_vocab_add(v, M, 3, 0, TFM_PIECE_NORMAL);
    for (int c = 0x21; c < 0x7F; c++) {
        char ch = (char)c;
        tfm_vocab_add(v, &ch, 1, 0, TFM_PIECE_NORMAL);
    }
    static const int32_t extra[] = {0xE9, 0xE8, 0xFC, 0xDF, 0x301, 0x3B1, 0x3B9, 0x3C3, 0x3C2,
                                    0x43F, 0x440, 0x4E2D, 0x6587, 0x200D, 0x1F600};
    for (size_t i = 0; i < sizeof extra / sizeof extra[0]; i++) {
        char buf[4];
        int n = tfm_utf8_encode(extra[i], buf);
        tfm_vocab_add(v, buf, (size_t)n, 0, TFM_PIECE_NORMAL);
    }
    float score = -1;
    for (int i = 0; merges[i]; i++)
        if (tfm_vocab_add(v, merges[i], strlen(merges[i]), score, TFM_PIECE_NORMAL) >= 0)
            score -= 1;
    return v;
}

static bool same(const tfm_buf *a, const tfm_buf *b)
{
    return a->len == b->len && (a->len == 0 || memcmp(a->data, b->data, a->len) == 0);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    static tfm_vocab *vocabs[3];
    static tfm_bpe *encoders[3];
    if (!vocabs[0]) {
        vocabs[0] = make_vocab(TFM_NORM_NFKC, false);
        vocabs[1] = make_vocab(TFM_NORM_NFC, true);
        vocabs[2] = make_vocab(TFM_NORM_NONE, false);
        for (int k = 0; k < 3; k++)
            if (tfm_bpe_create(vocabs[k], &encoders[k], NULL) != TFM_OK) abort();
    }
    const char *line = (const char *)data;
    tfm_ids ids;
    tfm_buf text, norm, again;
    tfm_ids_init(&ids);
    tfm_buf_init(&text);
    tfm_buf_init(&norm);
    tfm_buf_init(&again);
    tfm_rng rng;
    tfm_rng_seed(&rng, size);
    for (int k = 0; k < 3; k++) {
        const tfm_norm_params *np = tfm_vocab_norm(vocabs[k]);
        if (tfm_normalize(np, line, size, &norm, NULL, NULL) != TFM_OK) abort();
        if (tfm_normalize(np, norm.data, norm.len, &again, NULL, NULL) != TFM_OK) abort();
        if (!same(&norm, &again)) abort(); /* not idempotent */
        for (int drop = 0; drop < 2; drop++) {
            tfm_bpe_encode_params p = {.dropout = drop ? 0.3f : 0.0f, .rng = &rng};
            if (tfm_bpe_encode(encoders[k], &p, line, size, &ids, NULL, NULL) != TFM_OK)
                abort();
            if (tfm_bpe_decode(vocabs[k], ids.data, ids.len, &text, NULL) != TFM_OK) abort();
            if (!same(&text, &norm)) abort(); /* the round trip broke */
            for (size_t i = 0; i < ids.len; i++)
                if (ids.data[i] == TFM_ID_UNK) abort();
        }
    }
    tfm_ids_free(&ids);
    tfm_buf_free(&text);
    tfm_buf_free(&norm);
    tfm_buf_free(&again);
    return 0;
}
