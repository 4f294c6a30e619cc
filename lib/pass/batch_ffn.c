/* batch_ffn.c - the position-wise feed-forward network over a packed batch,
 * act(x W1^T + b1) W2^T + b2 (act: the paper's ReLU, or swish or Marian's
 * gelu), forward and backward: the two linear maps as GEMMs over all rows,
 * the activation and activation dropout in chunks of rows
 * on the workspace's threads.  The kernels are linear.c's; see nn/batch.h. */
#include <string.h>

#include "pass/batch.h"

/* rows [lo, hi) of [N, F]: out = act(hidden) (in place for relu, where out
 * is hidden), then activation dropout (fairseq's --activation-dropout;
 * nn.Transformer's dropout after its FFN's ReLU) on out when p > 0, each
 * chunk from its own stream. */
typedef struct act_job {
    float *hidden;
    float *out;
    uint8_t *keep;
    size_t F;
    float p;
    uint64_t seed;
    tfm_activation act;
} act_job;

static void act_chunk(void *ctx, size_t c, size_t lo, size_t hi)
{
    const act_job *j = ctx;
    float *out = j->out + lo * j->F;
    if (out != j->hidden + lo * j->F)
        memcpy(out, j->hidden + lo * j->F, (hi - lo) * j->F * sizeof *out);
    activation_forward(j->act, out, (hi - lo) * j->F);
    if (j->p > 0) {
        tfm_rng rng;
        dropout_stream(&rng, j->seed, c);
        dropout_forward(out, j->keep + lo * j->F, (hi - lo) * j->F, j->p, &rng);
    }
}

/* ffn_forward with its activation (and activation dropout) on the
 * workspace's threads.  out, in: [N, D]; hidden: [N, F], kept for the
 * backward: the activation's output for relu (its input can be told from
 * it), fc1's output for a gated activation (whose output goes through
 * ws->a.act).  keep: [N, F] the activation-dropout mask, kept for the
 * backward of a gated activation, which cannot tell it from its output;
 * NULL for relu, whose mask goes to the scratch ws->a.act_keep. */
void batch_ffn_forward(const tfm_pass_workspace *ws, float *out, float *hidden, uint8_t *keep,
                       const float *in, const tfm_linear *fc1, const tfm_linear *fc2, int N,
                       tfm_rng *rng)
{
    const tfm_config *c = &ws->m->config;
    const int D = c->d_model, F = c->d_ff;
    float *act = c->activation == TFM_ACT_RELU ? hidden : ws->a.act;
    linear_forward(hidden, in, fc1->weight, fc1->bias, N, D, F);
    act_job job = {hidden, act, keep ? keep : ws->a.act_keep, (size_t)F, ws->p_act,
                   batch_site_seed(rng, ws->p_act), c->activation};
    batch_for_rows(ws, N, (size_t)F, act_chunk, &job);
    linear_forward(out, act, fc2->weight, fc2->bias, N, F, D);
}

/* din [N, D] and gfc1, gfc2 accumulate; dout: [N, D]; in [N, D], hidden
 * [N, F] and keep [N, F] (a gated activation's mask, with activation
 * dropout) as the forward had and left them.  ffn_backward in one thread:
 * its ReLU backward only streams memory (see nn/batch.h); it needs no
 * dropout mask, as hidden is 0 wherever one dropped.  A gated activation's
 * output is computed again from fc1's output (into ws->a.act, free after
 * the forward) and dropped again with keep for fc2's weight gradient; the
 * gradient of that output goes back through keep, then the activation. */
void batch_ffn_backward(const tfm_pass_workspace *ws, float *din, tfm_linear *gfc1,
                        tfm_linear *gfc2, const float *dout, const float *in,
                        const float *hidden, const uint8_t *keep, const tfm_linear *fc1,
                        const tfm_linear *fc2, int N)
{
    const tfm_config *c = &ws->m->config;
    const int D = c->d_model, F = c->d_ff;
    if (c->activation == TFM_ACT_RELU) {
        ffn_backward(din, gfc1->weight, gfc1->bias, gfc2->weight, gfc2->bias, ws->g.hidden,
                     dout, in, hidden, fc1->weight, fc2->weight, N, D, F, ws->p_act);
        return;
    }
    if (N <= 0) return;
    float *act = ws->a.act, *dhidden = ws->g.hidden;
    const size_t n = (size_t)N * F;
    const float p = ws->p_act;
    memcpy(act, hidden, n * sizeof *act);
    activation_forward(c->activation, act, n);
    if (p > 0) dropout_apply(act, keep, n, p); /* fc2's input, as the forward had it */
    memset(dhidden, 0, n * sizeof *dhidden);
    linear_backward(dhidden, gfc2->weight, gfc2->bias, dout, act, fc2->weight, N, F, D);
    if (p > 0) dropout_apply(dhidden, keep, n, p); /* through the dropout */
    activation_backward(c->activation, dhidden, hidden, n);
    linear_backward(din, gfc1->weight, gfc1->bias, dhidden, in, fc1->weight, N, D, F);
}
