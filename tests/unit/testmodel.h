/* testmodel.h - a random model for the tests of the forward pass, the
 * gradients and the search: Xavier-initialised, then every parameter nudged
 * off its initial value, so that biases and LayerNorm gains are not the 0s
 * and 1s that hide mistakes. */
#ifndef TFM_TEST_MODEL_H
#define TFM_TEST_MODEL_H

#include <stdio.h>

#include "check.h"
#include "tfm/pass.h"

/* NULL (and a failed check) when the model cannot be made. */
static inline tfm_model *test_nudged_model(const tfm_config *c, uint64_t seed)
{
    tfm_model *m = NULL;
    tfm_error err;
    if (tfm_model_create(c, NULL, seed, &m, &err) != TFM_OK) {
        CHECK_MSG(false, "model: %s", err.msg);
        return NULL;
    }
    tfm_rng rng;
    tfm_rng_seed(&rng, seed + 1000);
    size_t n = tfm_params_count(c);
    for (size_t i = 0; i < n; i++) m->data[i] += 0.2f * (tfm_rng_float(&rng) - 0.5f);
    return m;
}

#endif
