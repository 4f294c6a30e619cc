/* ph_vocab.h - for fuzz targets of placeholders and constraints: a small
 * vocabulary with the specials, the bytes, the 32 placeholder tokens, '▁',
 * printable ASCII and the given merges (NULL-terminated, in order), and
 * its tokenizer. */
#ifndef FUZZ_PH_VOCAB_H
#define FUZZ_PH_VOCAB_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tfm/text.h"

#define PH_VOCAB_MARKER "\xE2\x96\x81"

static tfm_vocab *ph_vocab_make(const char *const *merges)
{
    tfm_norm_params norm = tfm_norm_default_params();
    tfm_vocab *v = tfm_vocab_create(&norm);
    if (!v) abort();
    for (int i = 1; i <= TFM_PH_TOKENS; i++) {
        char text[16];
        int n = snprintf(text, sizeof text, "<ph%d>", i);
        if (tfm_vocab_add(v, text, (size_t)n, 0, TFM_PIECE_USER) < 0) abort();
    }
    tfm_vocab_add(v, PH_VOCAB_MARKER, 3, 0, TFM_PIECE_NORMAL);
    for (int c = 0x21; c < 0x7F; c++) {
        char ch = (char)c;
        tfm_vocab_add(v, &ch, 1, 0, TFM_PIECE_NORMAL);
    }
    float score = -1;
    for (int i = 0; merges[i]; i++)
        if (tfm_vocab_add(v, merges[i], strlen(merges[i]), score, TFM_PIECE_NORMAL) >= 0)
            score -= 1;
    return v;
}

/* A fuzz target's vocabulary and tokenizer, made on its first call: *v and
 * *b are static pointers of the caller's, NULL until then. */
static void ph_tokenizer_once(const char *const *merges, tfm_vocab **v, tfm_bpe **b)
{
    if (*v) return;
    *v = ph_vocab_make(merges);
    if (tfm_bpe_create(*v, b, NULL) != TFM_OK) abort();
}

#endif
