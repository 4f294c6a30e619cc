/* batch_loss.c - the loss of a packed batch, forward and backward: the
 * log-softmax of the [Nt, V] logits and the label-smoothed cross-entropy of
 * each prediction, then the gradient of the logits in place of the
 * log-probabilities; in chunks of rows on the workspace's threads.  The
 * kernels are softmax.c's and loss.c's; see nn/batch.h. */
#include "pass/batch.h"

/* The log-softmax and the loss of a chunk of rows of the logits. */
typedef struct loss_job {
    const tfm_pass_workspace *ws;
    float scale; /* backward: the gradient's scale */
} loss_job;

static void loss_chunk(void *ctx, size_t c, size_t lo, size_t hi)
{
    const loss_job *j = ctx;
    const tfm_config *cf = &j->ws->m->config;
    const acts *a = &j->ws->a;
    const int V = cf->tgt_vocab_size, n = (int)(hi - lo);
    float *logits = a->logits + lo * (size_t)V;
    log_softmax_forward(logits, n, V);
    label_smoothed_loss_forward(a->row_loss + lo, a->row_nll + lo, logits, j->ws->pk.labels + lo,
                                n, V, cf->label_smoothing, cf->pad_id);
}

/* logits [Nt, V] become log-probabilities; row_loss, row_nll: [Nt] */
void batch_loss_forward(const tfm_pass_workspace *ws)
{
    loss_job lj = {ws, 1.0f};
    batch_for_rows(ws, ws->pk.Nt, (size_t)ws->m->config.tgt_vocab_size, loss_chunk, &lj);
}

static void loss_backward_chunk(void *ctx, size_t c, size_t lo, size_t hi)
{
    const loss_job *j = ctx;
    const tfm_config *cf = &j->ws->m->config;
    const int V = cf->tgt_vocab_size;
    label_smoothed_loss_backward(j->ws->a.logits + lo * (size_t)V, j->ws->pk.labels + lo,
                                 (int)(hi - lo), V, cf->label_smoothing, cf->pad_id, j->scale);
}

/* log-probabilities [Nt, V] become scale * dLoss/d(logits), in place */
void batch_loss_backward(const tfm_pass_workspace *ws, float scale)
{
    loss_job lj = {ws, scale};
    batch_for_rows(ws, ws->pk.Nt, (size_t)ws->m->config.tgt_vocab_size, loss_backward_chunk, &lj);
}
