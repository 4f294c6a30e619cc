/* batch_embedding.c - the embeddings of a packed batch, forward and
 * backward: embedding * sqrt(D) + position for every row, sentence by
 * sentence (each from position 0), then dropout; and the gradients of the
 * embedding and position tables.  The kernels are embedding.c's; see
 * nn/batch.h. */
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

/* embeddings * sqrt(D) + positions, sentence by sentence, then dropout.
 * x: [rows, D]; ids: [rows] */
void batch_embed_forward(const tfm_pass_workspace *ws, float *x, uint8_t *keep,
                         const int32_t *ids, const float *embed, const float *positions,
                         const int *off, const int *len, int rows, int32_t zero_id,
                         tfm_rng *rng)
{
    const int D = ws->m->config.d_model;
    embed_job ej = {ws, x, ids, embed, positions, off, len, zero_id};
    /* sentences as the "rows" of the pass, each about rows / B rows of D */
    size_t per = ws->pk.B > 0 ? (size_t)rows / (size_t)ws->pk.B + 1 : 1;
    batch_for_rows(ws, ws->pk.B, per * (size_t)D, embed_chunk, &ej);
    batch_dropout_forward(ws, x, keep, rows, rng);
}

/* Through dropout into the embedding and position tables. dx: [rows, D],
 * used as scratch when there is no dropout. */
void batch_embed_backward(const tfm_pass_workspace *ws, const float *dx, const uint8_t *keep,
                          const int32_t *ids, float *dembed, float *dpositions, const int *off,
                          const int *len, int rows, int32_t zero_id)
{
    const int D = ws->m->config.d_model;
    dx = batch_dropout_backward(ws, dx, keep, rows);
    /* serial: sentences sharing a token add into the same row of dembed */
    for (int b = 0; b < ws->pk.B; b++)
        embedding_backward(dembed, dpositions, ids + off[b], dx + (size_t)off[b] * D, 0, 1,
                           len[b], D, zero_id);
}
