/* testview.h - a tiny random model for the tests of attention inspection
 * (test_attention.c and test_view.c) and of the aligner (test_aligner.c). */
#ifndef TFM_TEST_VIEW_H
#define TFM_TEST_VIEW_H

#include <stdint.h>

#include "check.h"
#include "tfm/pass.h"

enum { V = 40 };

/* A model of configuration C (its vocabulary size VOCAB's, or V tokens
 * without one) with every parameter nudged so that no weight sits at a
 * symmetric initial value. */
static inline tfm_model *nudged_model(tfm_config c, uint64_t seed, const tfm_vocab *vocab)
{
    tfm_error err;
    c.src_vocab_size = c.tgt_vocab_size = vocab ? tfm_vocab_size(vocab) : V;
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

/* A tiny random model: the "tiny" preset, nudged. */
static inline tfm_model *random_model(uint64_t seed, int window, int relative,
                                      const tfm_vocab *vocab)
{
    tfm_config c;
    tfm_config_preset("tiny", &c, NULL);
    c.attention_window = window;
    c.relative_positions = relative;
    return nudged_model(c, seed, vocab);
}

#endif
