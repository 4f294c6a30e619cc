/* embedding.c - token embeddings scaled by sqrt(D) plus position encodings
 * (section 3.4 and 3.5 of the paper): sinusoidal, a learned table, or none
 * (a model with relative positions only, relative.c); forward and backward. */
#include <math.h>

#include "nn/layers.h"

/* table: [n_pos, D].  Computed in double, so the float table is exact to
 * rounding even at large positions. */
void positions_sinusoidal(float *table, int from, int n_pos, int D, bool concat)
{
    const int half = D / 2;
    for (int pos = from; pos < n_pos; pos++) {
        float *row = table + (size_t)pos * D;
        for (int i = 0; i < D; i += 2) {
            /* i is the even index 2k: the frequency is 1 / 10000^(2k/D) */
            double angle = pos / pow(10000.0, (double)i / D);
            if (concat) {
                row[i / 2] = (float)sin(angle);
                row[half + i / 2] = (float)cos(angle);
                continue;
            }
            row[i] = (float)sin(angle);
            if (i + 1 < D) row[i + 1] = (float)cos(angle);
        }
    }
}

int32_t embedding_zero_id(const tfm_config *c)
{
    return c->decoder_start_zero ? c->bos_id : -1;
}

/* out: [N, D]; ids: [N]; embed: [V, D]; positions: [n_pos, D] or NULL */
void embedding_forward(float *out, const int32_t *ids, const float *embed,
                       const float *positions, int pos0, int pos_step, int N, int D,
                       int32_t zero_id)
{
    float scale = sqrtf((float)D);
    for (int n = 0; n < N; n++) {
        const float *e = embed + (size_t)ids[n] * D;
        float *o = out + (size_t)n * D;
        if (ids[n] == zero_id) {
            const float *p = positions ? positions + (size_t)(pos0 + n * pos_step) * D : NULL;
            for (int i = 0; i < D; i++) o[i] = p ? p[i] : 0.0f;
            continue;
        }
        if (!positions) {
            for (int i = 0; i < D; i++) o[i] = e[i] * scale;
            continue;
        }
        const float *p = positions + (size_t)(pos0 + n * pos_step) * D;
        for (int i = 0; i < D; i++) o[i] = e[i] * scale + p[i];
    }
}

/* dembed: [V, D]; dpositions: [n_pos, D] or NULL (sinusoids learn nothing);
 * ids: [N]; dout: [N, D].  Rows run in order, so a token that occurs twice
 * (or a matrix shared by the source, the target and the output projection)
 * gathers every contribution, in the same order every time. */
void embedding_backward(float *dembed, float *dpositions, const int32_t *ids, const float *dout,
                        int pos0, int pos_step, int N, int D, int32_t zero_id)
{
    float scale = sqrtf((float)D);
    for (int n = 0; n < N; n++) {
        float *de = dembed + (size_t)ids[n] * D;
        const float *d = dout + (size_t)n * D;
        if (ids[n] != zero_id)
            for (int i = 0; i < D; i++) de[i] += d[i] * scale;
        if (dpositions) {
            float *dp = dpositions + (size_t)(pos0 + n * pos_step) * D;
            for (int i = 0; i < D; i++) dp[i] += d[i];
        }
    }
}

/* cache: sinusoids [*cached, D] so far */
bool positions_table(tfm_pos_kind kind, const float *learned, tfm_buf *cache, int *cached, int n,
                     int D, const float **table)
{
    *table = kind == TFM_POS_LEARNED ? learned : NULL;
    if (kind != TFM_POS_SINUSOIDAL && kind != TFM_POS_SINUSOIDAL_CONCAT) return true;
    float *t = tfm_buf_array(cache, (size_t)(n > *cached ? n : *cached) * D, sizeof(float));
    if (!t) return false;
    if (n > *cached) {
        positions_sinusoidal(t, *cached, n, D, kind == TFM_POS_SINUSOIDAL_CONCAT);
        *cached = n;
    }
    *table = t;
    return true;
}
