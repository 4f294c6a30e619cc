/* batch_layer_norm.c - a LayerNorm over the rows of a packed batch, forward
 * and backward, in chunks of rows on the workspace's threads.  The weight
 * and bias gradients are summed per chunk and the chunks added in order, so
 * they are the same bit for bit on any number of threads.  The kernels are
 * layer_norm.c's; see nn/batch.h. */
#include <string.h>

#include "core/chunks.h"
#include "pass/batch.h"

/* A LayerNorm over rows: out, inp [N, D]; mean, rstd [N]. */
typedef struct norm_job {
    float *out, *mean, *rstd;
    const float *inp;
    const tfm_layer_norm *ln;
    int D;
    float eps;
} norm_job;

static void norm_chunk(void *ctx, size_t c, size_t lo, size_t hi)
{
    const norm_job *j = ctx;
    const size_t o = lo * (size_t)j->D;
    layer_norm_forward(j->out + o, j->mean + lo, j->rstd + lo, j->inp + o, j->ln->weight,
                       j->ln->bias, (int)(hi - lo), j->D, j->eps);
}

/* out = LN(inp) with the statistics saved, on the workspace's threads.
 * out, inp: [N, D]; mean, rstd: [N] */
void batch_layer_norm_forward(const tfm_pass_workspace *ws, float *out, float *mean,
                              float *rstd, const float *inp, const tfm_layer_norm *ln, int N)
{
    const tfm_config *c = &ws->m->config;
    norm_job job = {out, mean, rstd, inp, ln, c->d_model, c->layer_norm_eps};
    batch_for_rows(ws, N, (size_t)c->d_model, norm_chunk, &job);
}

/* Chunk c's part of a LayerNorm's weight and bias gradients: [2, D]. */
static float *ln_partial(const tfm_pass_workspace *ws, size_t c)
{
    return ws->g.ln_partials + c * 2 * (size_t)ws->m->config.d_model;
}

/* Adds the chunks' parts of a LayerNorm's weight and bias gradients into
 * gln, in chunk order (so in the same order for any thread count). */
void batch_add_ln_partials(const tfm_pass_workspace *ws, tfm_layer_norm *gln, int N)
{
    const int D = ws->m->config.d_model;
    const size_t chunks = tfm_chunk_count((size_t)N, batch_row_chunk((size_t)D));
    for (size_t c = 0; c < chunks; c++) {
        const float *pw = ln_partial(ws, c), *pb = pw + D;
        for (int i = 0; i < D; i++) gln->weight[i] += pw[i];
        for (int i = 0; i < D; i++) gln->bias[i] += pb[i];
    }
}

/* layer_norm_backward on a chunk of rows, its weight and bias gradients
 * into chunk c's partial sums.  All [N, D] but mean, rstd [N]. */
void batch_ln_backward_rows(const tfm_pass_workspace *ws, size_t c, size_t lo, size_t hi,
                            float *dinp, const float *dout, const float *inp, const float *mean,
                            const float *rstd, const float *weight)
{
    const int D = ws->m->config.d_model;
    const size_t o = lo * (size_t)D;
    float *pw = ln_partial(ws, c);
    memset(pw, 0, 2 * (size_t)D * sizeof *pw);
    layer_norm_backward(dinp + o, pw, pw + D, dout + o, inp + o, mean + lo, rstd + lo, weight,
                        (int)(hi - lo), D);
}

/* The LayerNorm out = LN(inp) backward, on the workspace's threads. */
typedef struct norm_backward_job {
    const tfm_pass_workspace *ws;
    float *dinp;
    const float *dout, *inp, *mean, *rstd, *weight;
} norm_backward_job;

static void norm_backward_chunk(void *ctx, size_t c, size_t lo, size_t hi)
{
    const norm_backward_job *j = ctx;
    batch_ln_backward_rows(j->ws, c, lo, hi, j->dinp, j->dout, j->inp, j->mean, j->rstd,
                           j->weight);
}

/* dinp [N, D] accumulates dLoss/d(inp), gln the weight and bias gradients;
 * dout: [N, D]; inp, mean, rstd as the forward had and saved them. */
void batch_layer_norm_backward(const tfm_pass_workspace *ws, float *dinp, tfm_layer_norm *gln,
                               const float *dout, const float *inp, const float *mean,
                               const float *rstd, const tfm_layer_norm *ln, int N)
{
    norm_backward_job job = {ws, dinp, dout, inp, mean, rstd, ln->weight};
    batch_for_rows(ws, N, (size_t)ws->m->config.d_model, norm_backward_chunk, &job);
    batch_add_ln_partials(ws, gln, N);
}
