/* batch_residual.c - the two ends of a residual sublayer over a packed
 * batch, for both norm placements, forward and backward: the LayerNorm
 * before f (pre-norm), and after f dropout, the residual add and the
 * LayerNorm (post-norm); and the same dropout alone, for the embeddings.
 * In chunks of rows on the workspace's threads, each chunk's dropout mask
 * from a generator of its own.  See nn/batch.h. */
#include <string.h>

#include "pass/batch.h"

/* ---- forward ------------------------------------------------------------------------- */

/* The sublayer's input: LN(x) under pre-norm (statistics saved), x itself
 * under post-norm.  x: [N, D] */
const float *batch_residual_forward_begin(const tfm_pass_workspace *ws, residual_acts *r,
                                          const float *x, const tfm_layer_norm *ln, int N)
{
    if (!ws->m->config.pre_norm) return x;
    batch_layer_norm_forward(ws, r->norm, r->mean, r->rstd, x, ln, N);
    return r->norm;
}

/* The end of a residual sublayer on a chunk of rows: dropout on sub in
 * place (chunk c's mask from generator c of seed), then s = x + sub, then
 * under post-norm out = LN(s).  All [N, D] but mean, rstd [N]. */
typedef struct residual_job {
    const float *x;     /* the stream; NULL: dropout only (the embeddings) */
    float *sub;         /* f's output */
    uint8_t *keep;      /* sub's dropout mask; NULL when p == 0 */
    float *s;           /* x + Dropout(sub) */
    float *out, *mean, *rstd; /* post-norm: LN(s) and its statistics; out NULL: pre-norm */
    const tfm_layer_norm *ln;
    int D;
    float eps, p;
    uint64_t seed;
} residual_job;

static void residual_chunk(void *ctx, size_t c, size_t lo, size_t hi)
{
    const residual_job *j = ctx;
    const size_t o = lo * (size_t)j->D, n = (hi - lo) * (size_t)j->D;
    if (j->p > 0) {
        tfm_rng rng;
        dropout_stream(&rng, j->seed, c);
        dropout_forward(j->sub + o, j->keep + o, n, j->p, &rng);
    }
    if (!j->x) return;
    const float *x = j->x + o, *sub = j->sub + o;
    float *s = j->s + o;
    size_t i = 0;
    for (; i + 4 <= n; i += 4) nn_store4(s + i, nn_load4(x + i) + nn_load4(sub + i));
    for (; i < n; i++) s[i] = x[i] + sub[i];
    if (j->out)
        layer_norm_forward(j->out + o, j->mean + lo, j->rstd + lo, s, j->ln->weight, j->ln->bias,
                           (int)(hi - lo), j->D, j->eps);
}

/* Dropout on the sublayer's output sub (in place), the residual add, and
 * under post-norm the LayerNorm.  x, sub: [N, D] */
void batch_residual_forward_end(const tfm_pass_workspace *ws, residual_acts *r, const float *x,
                                float *sub, const tfm_layer_norm *ln, int N, tfm_rng *rng)
{
    const tfm_config *c = &ws->m->config;
    const bool pre = c->pre_norm;
    residual_job job = {x, sub, r->keep, pre ? r->out : r->sum, pre ? NULL : r->out, r->mean,
                        r->rstd, ln, c->d_model, c->layer_norm_eps, ws->p_drop,
                        batch_site_seed(rng, ws->p_drop)};
    batch_for_rows(ws, N, (size_t)c->d_model, residual_chunk, &job);
}

/* Dropout alone on x [rows, D], in place: the residual pass without x. */
void batch_dropout_forward(const tfm_pass_workspace *ws, float *x, uint8_t *keep, int rows,
                           tfm_rng *rng)
{
    if (ws->p_drop <= 0) return;
    const int D = ws->m->config.d_model;
    residual_job rj = {.sub = x, .keep = keep, .D = D, .p = ws->p_drop,
                       .seed = batch_site_seed(rng, ws->p_drop)};
    batch_for_rows(ws, rows, (size_t)D, residual_chunk, &rj);
}

/* ---- backward ------------------------------------------------------------------------ */

/* batch_residual_backward_begin on a chunk of rows (see there); with r
 * NULL, only the dropout: g->sub = Dropout'(dx) (the embeddings). */
typedef struct begin_job {
    const tfm_pass_workspace *ws;
    const residual_acts *r;
    const uint8_t *keep;
    const float *ln_weight;
    float *dx; /* written only under post-norm, with r */
} begin_job;

static void begin_chunk(void *ctx, size_t c, size_t lo, size_t hi)
{
    const begin_job *j = ctx;
    const tfm_pass_workspace *ws = j->ws;
    const grad_acts *g = &ws->g;
    const size_t o = lo * (size_t)ws->m->config.d_model;
    const size_t n = (hi - lo) * (size_t)ws->m->config.d_model;
    const float *dsum = j->dx + o;
    if (j->r && !ws->m->config.pre_norm) {
        memset(g->sum + o, 0, n * sizeof(float));
        batch_ln_backward_rows(ws, c, lo, hi, g->sum, j->dx, j->r->sum, j->r->mean, j->r->rstd,
                               j->ln_weight);
        memcpy(j->dx + o, g->sum + o, n * sizeof(float));
        dsum = g->sum + o; /* not dx, which f's backward adds to */
    } else if (j->r) {
        memset(g->norm + o, 0, n * sizeof(float));
    }
    if (ws->p_drop <= 0) return;
    memset(g->sub + o, 0, n * sizeof(float));
    dropout_backward(g->sub + o, dsum, j->keep + o, n, ws->p_drop);
}

/* The first half of a residual sublayer's backward.  On entry dx [N, D]
 * holds dLoss/d(r->out).  Returns dLoss/d(f's output), and sets *din to the
 * buffer into which f's backward must accumulate dLoss/d(f's input):
 *   post-norm (out = LN(x + Dropout(f(x)))): through the LayerNorm into
 *     g->sum; dx becomes that (the residual path), and f adds its part to dx;
 *   pre-norm (out = x + Dropout(f(LN(x)))): dx is already the residual
 *     path; f's input gradient goes to g->norm, for batch_residual_backward_end. */
const float *batch_residual_backward_begin(const tfm_pass_workspace *ws,
                                           const residual_acts *r, float *dx, float **din,
                                           const tfm_layer_norm *ln, tfm_layer_norm *gln, int N)
{
    const grad_acts *g = &ws->g;
    const bool pre = ws->m->config.pre_norm;
    begin_job job = {ws, r, r->keep, ln->weight, dx};
    batch_for_rows(ws, N, (size_t)ws->m->config.d_model, begin_chunk, &job);
    if (!pre) batch_add_ln_partials(ws, gln, N);
    *din = pre ? g->norm : dx;
    if (ws->p_drop <= 0) return pre ? dx : g->sum;
    return g->sub;
}

/* The second half: under pre-norm, from g->norm through LN(x) into dx.
 * x: the sublayer's input stream [N, D]. */
void batch_residual_backward_end(const tfm_pass_workspace *ws, const residual_acts *r,
                                 float *dx, const float *x, const tfm_layer_norm *ln,
                                 tfm_layer_norm *gln, int N)
{
    if (!ws->m->config.pre_norm) return;
    batch_layer_norm_backward(ws, dx, gln, ws->g.norm, x, r->mean, r->rstd, ln, N);
}

/* The backward of batch_dropout_forward: g->sub = Dropout'(dx), dx [rows, D]. */
const float *batch_dropout_backward(const tfm_pass_workspace *ws, const float *dx,
                                    const uint8_t *keep, int rows)
{
    if (ws->p_drop <= 0) return dx;
    begin_job job = {.ws = ws, .keep = keep, .dx = (float *)dx};
    batch_for_rows(ws, rows, (size_t)ws->m->config.d_model, begin_chunk, &job);
    return ws->g.sub;
}
