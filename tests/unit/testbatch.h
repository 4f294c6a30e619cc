/* testbatch.h - tiny models' configurations and batches of pairs that own
 * their ids, for the whole-model tests of the training pass
 * (test_model_gradients.c and test_pass.c). */
#ifndef TFM_TEST_BATCH_H
#define TFM_TEST_BATCH_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "tfm/pass.h"

/* D 8, 2 heads, F 16, vocabulary 12 (11 on the source side when not
 * shared), 8 positions; dropout off unless a test turns it on. */
static inline tfm_config tiny_config(bool pre_norm, bool shared, tfm_pos_kind pos, int window,
                                     int layers)
{
    tfm_config c;
    tfm_config_preset("tiny", &c, NULL);
    c.d_model = 8;
    c.d_ff = 16;
    c.n_heads = 2;
    c.n_encoder_layers = layers;
    c.n_decoder_layers = layers;
    c.max_positions = 8;
    c.positions = pos;
    c.pre_norm = pre_norm;
    c.shared_embeddings = shared;
    c.attention_window = window;
    c.src_vocab_size = shared ? 12 : 11;
    c.tgt_vocab_size = 12;
    c.dropout = 0;
    c.attention_dropout = 0;
    return c;
}

enum { MAX_PAIRS = 6, MAX_LEN = 8 };

/* A batch that owns its ids. */
typedef struct test_batch {
    int32_t src[MAX_PAIRS][MAX_LEN], tgt[MAX_PAIRS][MAX_LEN];
    const int32_t *srcp[MAX_PAIRS], *tgtp[MAX_PAIRS];
    int src_lens[MAX_PAIRS], tgt_lens[MAX_PAIRS];
    tfm_pair_batch b;
} test_batch;

/* Pairs of the given lengths with ids drawn from the non-special ones. */
static inline void make_batch(test_batch *t, const tfm_config *c, int B, const int *src_lens,
                              const int *tgt_lens, uint64_t seed)
{
    tfm_rng rng;
    tfm_rng_seed(&rng, seed);
    memset(t, 0, sizeof *t);
    for (int b = 0; b < B; b++) {
        t->src_lens[b] = src_lens[b];
        t->tgt_lens[b] = tgt_lens[b];
        for (int i = 0; i < MAX_LEN; i++) {
            t->src[b][i] = 4 + (int32_t)tfm_rng_below(&rng, (uint64_t)c->src_vocab_size - 4);
            t->tgt[b][i] = 4 + (int32_t)tfm_rng_below(&rng, (uint64_t)c->tgt_vocab_size - 4);
        }
        t->srcp[b] = t->src[b];
        t->tgtp[b] = t->tgt[b];
    }
    t->b = (tfm_pair_batch){B, t->srcp, t->src_lens, t->tgtp, t->tgt_lens};
}

/* One pair of t as a batch of its own. */
static inline tfm_pair_batch single(const test_batch *t, int b)
{
    return (tfm_pair_batch){1, &t->srcp[b], &t->src_lens[b], &t->tgtp[b], &t->tgt_lens[b]};
}

#endif
