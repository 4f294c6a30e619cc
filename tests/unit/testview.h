/* testview.h - a tiny random model for the tests of attention inspection
 * (test_attention.c and test_view.c). */
#ifndef TFM_TEST_VIEW_H
#define TFM_TEST_VIEW_H

#include <stdint.h>

#include "check.h"
#include "tfm/pass.h"

enum { V = 40 };

/* A tiny random model (the "tiny" preset, V tokens), every parameter
 * nudged so that no weight sits at a symmetric initial value. */
static inline tfm_model *random_model(uint64_t seed, int window, int relative,
                                      const tfm_vocab *vocab)
{
    tfm_config c;
    tfm_error err;
    tfm_config_preset("tiny", &c, NULL);
    c.src_vocab_size = c.tgt_vocab_size = vocab ? tfm_vocab_size(vocab) : V;
    c.attention_window = window;
    c.relative_positions = relative;
    tfm_model *m = NULL;
    if (tfm_model_create(&c, vocab, seed, &m, &err) != TFM_OK) {
        CHECK_MSG(false, "model: %s", err.msg);
        return NULL;
    }
    tfm_rng rng;
    tfm_rng_seed(&rng, seed + 77);
    size_t n = tfm_params_count(&c);
    for (size_t i = 0; i < n; i++) m->data[i] += 0.3f * (tfm_rng_float(&rng) - 0.5f);
    return m;
}

#endif
