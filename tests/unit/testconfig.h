/* testconfig.h - what the tests of the model's configuration and files
 * (test_model.c and test_model_files.c) share: a small configuration, a
 * vocabulary of a given size, and a test for a part of a message. */
#ifndef TFM_TEST_CONFIG_H
#define TFM_TEST_CONFIG_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tfm/model.h"
#include "tfm/text.h"

/* The tiny preset, made smaller still so every test runs fast under ASan. */
static inline tfm_config small_config(int32_t vocab)
{
    tfm_config c;
    tfm_error err;
    if (tfm_config_preset("tiny", &c, &err) != TFM_OK) abort();
    c.src_vocab_size = vocab;
    c.tgt_vocab_size = vocab;
    c.d_model = 16;
    c.d_ff = 24;
    c.n_heads = 2;
    c.n_encoder_layers = 2;
    c.n_decoder_layers = 3;
    c.max_positions = 20;
    return c;
}

/* A vocabulary of 260 + extra pieces. */
static inline tfm_vocab *make_vocab(int extra)
{
    tfm_norm_params norm = tfm_norm_default_params();
    tfm_vocab *v = tfm_vocab_create(&norm);
    for (int i = 0; i < extra; i++) {
        char piece[32];
        snprintf(piece, sizeof piece, "\xe2\x96\x81w%d", i);
        if (tfm_vocab_add(v, piece, strlen(piece), (float)-i, TFM_PIECE_NORMAL) < 0) abort();
    }
    return v;
}

static inline bool contains(const char *haystack, const char *needle)
{
    return strstr(haystack, needle) != NULL;
}

#endif
