/* testtrain.h - what the unit tests of lib/train (test_train_parts.c and
 * test_trainer.c) share besides testutil.h's folder and files: a tiny
 * model's configuration. */
#ifndef TFM_TEST_TRAIN_H
#define TFM_TEST_TRAIN_H

#include <stdint.h>

#include "testutil.h"
#include "tfm.h"

/* d_model 16, 2 heads, d_ff 32, a layer on each side, 64 positions, one
 * vocabulary of the given size on both sides. */
static inline tfm_config tiny_config(int32_t vocab)
{
    tfm_config c;
    tfm_config_preset("tiny", &c, NULL);
    c.d_model = 16;
    c.d_ff = 32;
    c.n_heads = 2;
    c.n_encoder_layers = 1;
    c.n_decoder_layers = 1;
    c.max_positions = 64;
    c.src_vocab_size = c.tgt_vocab_size = vocab;
    return c;
}

#endif
