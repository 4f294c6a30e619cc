/* batch_ffn.c - the position-wise feed-forward network over a packed batch,
 * max(0, x W1^T + b1) W2^T + b2, forward and backward: the two linear maps
 * as GEMMs over all rows, the ReLU and activation dropout in chunks of rows
 * on the workspace's threads.  The kernels are linear.c's; see nn/batch.h. */
#include "pass/batch.h"

/* hidden [N, F], in place: the ReLU of rows [lo, hi), then activation
 * dropout (fairseq's --activation-dropout; nn.Transformer's dropout after
 * its FFN's ReLU) when p > 0, each chunk from its own stream. */
typedef struct relu_job {
    float *hidden;
    uint8_t *keep;
    size_t F;
    float p;
    uint64_t seed;
    tfm_activation act;
} relu_job;

static void relu_chunk(void *ctx, size_t c, size_t lo, size_t hi)
{
    const relu_job *j = ctx;
    activation_forward(j->act, j->hidden + lo * j->F, (hi - lo) * j->F);
    if (j->p > 0) {
        tfm_rng rng;
        dropout_stream(&rng, j->seed, c);
        dropout_forward(j->hidden + lo * j->F, j->keep + lo * j->F, (hi - lo) * j->F, j->p, &rng);
    }
}

/* ffn_forward with its ReLU (and activation dropout) on the workspace's
 * threads.  out, in: [N, D]; hidden: [N, F] */
void batch_ffn_forward(const tfm_pass_workspace *ws, float *out, float *hidden, const float *in,
                       const tfm_linear *fc1, const tfm_linear *fc2, int N, tfm_rng *rng)
{
    const int D = ws->m->config.d_model, F = ws->m->config.d_ff;
    linear_forward(hidden, in, fc1->weight, fc1->bias, N, D, F);
    relu_job job = {hidden, ws->a.act_keep, (size_t)F, ws->p_act,
                    batch_site_seed(rng, ws->p_act), ws->m->config.activation};
    batch_for_rows(ws, N, (size_t)F, relu_chunk, &job);
    linear_forward(out, hidden, fc2->weight, fc2->bias, N, F, D);
}

/* din [N, D] and gfc1, gfc2 accumulate; dout: [N, D]; in [N, D], hidden
 * [N, F] as the forward had and left them.  ffn_backward in one thread: its
 * ReLU backward only streams memory (see nn/batch.h); it needs no dropout
 * mask, as hidden is 0 wherever one dropped. */
void batch_ffn_backward(const tfm_pass_workspace *ws, float *din, tfm_linear *gfc1,
                        tfm_linear *gfc2, const float *dout, const float *in,
                        const float *hidden, const tfm_linear *fc1, const tfm_linear *fc2, int N)
{
    const tfm_config *c = &ws->m->config;
    ffn_backward(din, gfc1->weight, gfc1->bias, gfc2->weight, gfc2->bias, ws->g.hidden, dout, in,
                 hidden, fc1->weight, fc2->weight, N, c->d_model, c->d_ff, ws->p_act);
}
