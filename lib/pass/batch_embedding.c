/* batch_embedding.c - the embeddings of a packed batch, forward and
 * backward: embedding * sqrt(D) + position for every row, sentence by
 * sentence (each from position 0), then Marian's LayerNorm of them when the
 * model has one (embedding_layer_norm), then dropout; and the gradients of
 * the embedding and position tables (and of that LayerNorm).  The kernels
 * are embedding.c's; see nn/batch.h. */
#include "pass/batch.h"

/* Embeddings * sqrt(D) + positions of the sentences [lo, hi). */
typedef struct embed_job {
    const tfm_pass_workspace *ws;
    float *x;
    const int32_t *ids;
    const float *embed, *positions;
    const int *off, *len;
    int32_t zero_id;
} embed_job;

static void embed_chunk(void *ctx, size_t c, size_t lo, size_t hi)
{
    const embed_job *j = ctx;
    const int D = j->ws->m->config.d_model;
    for (size_t b = lo; b < hi; b++)
        embedding_forward(j->x + (size_t)j->off[b] * D, j->ids + j->off[b], j->embed,
                          j->positions, 0, 1, j->len[b], D, j->zero_id);
}

/* embeddings * sqrt(D) + positions, sentence by sentence, then (en->in
 * set) their LayerNorm, then dropout: Marian's --transformer-postprocess-emb
 * "nd" normalizes before it drops.  x: [rows, D]; keep: [rows, D] or NULL;
 * en->in: [rows, D], en->mean, en->rstd: [rows]; ids: [rows] */
void batch_embed_forward(const tfm_pass_workspace *ws, float *x, uint8_t *keep,
                         const embed_norm_acts *en, const tfm_layer_norm *ln,
                         const int32_t *ids, const float *embed, const float *positions,
                         const int *off, const int *len, int rows, int32_t zero_id,
                         tfm_rng *rng)
{
    const int D = ws->m->config.d_model;
    embed_job ej = {ws, en->in ? en->in : x, ids, embed, positions, off, len, zero_id};
    /* sentences as the "rows" of the pass, each about rows / B rows of D */
    size_t per = ws->pk.B > 0 ? (size_t)rows / (size_t)ws->pk.B + 1 : 1;
    batch_for_rows(ws, ws->pk.B, per * (size_t)D, embed_chunk, &ej);
    if (en->in) batch_layer_norm_forward(ws, x, en->mean, en->rstd, en->in, ln, rows);
    batch_dropout_forward(ws, x, keep, rows, rng);
}

/* Through dropout, then (en->in set) the LayerNorm, into the embedding and
 * position tables.  dx: [rows, D]; the LayerNorm's input gradient goes to
 * ws->g.norm [rows, D], free between the layers' backward passes. */
void batch_embed_backward(const tfm_pass_workspace *ws, const float *dx, const uint8_t *keep,
                          const embed_norm_acts *en, const tfm_layer_norm *ln,
                          tfm_layer_norm *gln, const int32_t *ids, float *dembed,
                          float *dpositions, const int *off, const int *len, int rows,
                          int32_t zero_id)
{
    const int D = ws->m->config.d_model;
    dx = batch_dropout_backward(ws, dx, keep, rows);
    if (en->in) {
        float *din = ws->g.norm; /* apart from dx, the LayerNorm's dout */
        batch_zero_rows(din, rows, (size_t)D);
        batch_layer_norm_backward(ws, din, gln, dx, en->in, en->mean, en->rstd, ln, rows);
        dx = din;
    }
    /* serial: sentences sharing a token add into the same row of dembed */
    for (int b = 0; b < ws->pk.B; b++)
        embedding_backward(dembed, dpositions, ids + off[b], dx + (size_t)off[b] * D, 0, 1,
                           len[b], D, zero_id);
}
