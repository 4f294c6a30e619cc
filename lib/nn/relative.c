/* relative.c - relative position representations (Shaw, Uszkoreit and
 * Vaswani, "Self-Attention with Relative Position Representations", 2018):
 * the parts of attention that the learned tables a^K and a^V add, forward
 * and backward, for attention.c's blocks of queries and for the
 * incremental decoder's single query.
 *
 * The key at position j seen from the query at position i falls in the
 * bucket K + clip(j - i, -K, K) of 2K + 1.  A block of m queries against a
 * band of nk keys has at most 2K + 1 buckets per query, so (section 3.3 of
 * the paper) the logits' part is one product q a^K^T of [m, 2K+1] whose
 * entries are then gathered into the [m, nk] scores by bucket, and the
 * values' part one product of [m, 2K+1] bucket sums of the weights with a^V:
 * O(m K Dh) work beside the O(m nk Dh) of the keys themselves, and never a
 * [m, nk, Dh] tensor of per-pair vectors. */
#include <cblas.h>
#include <string.h>

#include "nn/layers.h"

/* The bucket of distance d: K + clip(d, -K, K). */
static int bucket(int d, int K)
{
    return K + (d < -K ? -K : d > K ? K : d);
}

/* s [m, nk] += u [m, 2K+1] gathered by bucket: s[r][c] += u[r][bucket(d0 + c - r)]. */
static void gather_add(float *s, const float *u, int m, int nk, int d0, int K)
{
    const int rows = 2 * K + 1;
    for (int r = 0; r < m; r++)
        for (int c = 0; c < nk; c++)
            s[(size_t)r * nk + c] += u[(size_t)r * rows + bucket(d0 + c - r, K)];
}

/* u [m, 2K+1] = s [m, nk] (rows lds apart) summed by bucket: u[r][b] = sum
 * of s[r][c] over the c with bucket(d0 + c - r) == b. */
static void bucket_sums(float *u, const float *s, int lds, int m, int nk, int d0, int K)
{
    const int rows = 2 * K + 1;
    memset(u, 0, sizeof(float) * m * rows);
    for (int r = 0; r < m; r++)
        for (int c = 0; c < nk; c++)
            u[(size_t)r * rows + bucket(d0 + c - r, K)] += s[(size_t)r * lds + c];
}

/* scores: [m, nk]; q: [m, Dh] (ldq); u: [m, 2K+1] */
void relative_logits(float *scores, int m, int nk, const float *q, int ldq,
                     const attention_relative *rel, int Dh, float scale, int d0, float *u)
{
    const int rows = 2 * rel->clip + 1;
    /* u = scale q a^K^T: every query against every bucket */
    nn_sgemm(false, true, m, rows, Dh, scale, q, ldq, rel->keys, Dh, 0.0f, u, rows);
    gather_add(scores, u, m, nk, d0, rel->clip);
}

/* out: [m, Dh] (ldo); w: [m, nk]; u: [m, 2K+1] */
void relative_values(float *out, int ldo, const float *w, int m, int nk,
                     const attention_relative *rel, int Dh, int d0, float *u)
{
    const int rows = 2 * rel->clip + 1;
    bucket_sums(u, w, nk, m, nk, d0, rel->clip);
    nn_sgemm(false, false, m, Dh, rows, 1.0f, u, rows, rel->values, Dh, 1.0f, out, ldo);
}

/* dw: [m, nk]; w: [m, nk] (ldw); dvalues: [2K+1, Dh]; dout: [m, Dh] (ldo);
 * u: [m, 2K+1] */
void relative_values_backward(float *dw, float *dvalues, const float *w, int ldw,
                              const float *dout, int ldo, int m, int nk,
                              const attention_relative *rel, int Dh, int d0, float *u)
{
    const int rows = 2 * rel->clip + 1;
    /* dvalues += (bucket sums of w)^T dout */
    bucket_sums(u, w, ldw, m, nk, d0, rel->clip);
    nn_sgemm(true, false, rows, Dh, m, 1.0f, u, rows, dout, ldo, 1.0f, dvalues, Dh);
    /* dw[r][c] += dout_r a^V_bucket */
    nn_sgemm(false, true, m, rows, Dh, 1.0f, dout, ldo, rel->values, Dh, 0.0f, u, rows);
    gather_add(dw, u, m, nk, d0, rel->clip);
}

/* dq, q: [m, Dh] (ldq); dkeys: [2K+1, Dh]; ds: [m, nk]; u: [m, 2K+1] */
void relative_logits_backward(float *dq, int ldq, float *dkeys, const float *ds, const float *q,
                              int m, int nk, const attention_relative *rel, int Dh, float scale,
                              int d0, float *u)
{
    const int rows = 2 * rel->clip + 1;
    bucket_sums(u, ds, nk, m, nk, d0, rel->clip);
    /* dq += scale (bucket sums of ds) a^K;  dkeys += scale (bucket sums)^T q */
    nn_sgemm(false, false, m, Dh, rows, scale, u, rows, rel->keys, Dh, 1.0f, dq, ldq);
    nn_sgemm(true, false, rows, Dh, m, scale, u, rows, q, ldq, 1.0f, dkeys, Dh);
}

/* ---- one query, all heads: the incremental decoder ------------------------------- */

/* The buckets keys [0, n) fall in, seen from distance d0: [*lo, *hi]. */
static void row_buckets(int n, int d0, int K, int *lo, int *hi)
{
    *lo = bucket(d0, K);
    *hi = bucket(d0 + n - 1, K);
}

/* scores: [H, n]; q: [H*Dh]; u: [2K+1] */
void relative_row_logits(float *scores, const float *q, int n, int H, int Dh,
                         const attention_relative *rel, float scale, int d0, float *u)
{
    const int K = rel->clip;
    int lo, hi;
    row_buckets(n, d0, K, &lo, &hi);
    for (int h = 0; h < H; h++) {
        /* u[lo, hi] = scale a^K[lo, hi] q_h */
        cblas_sgemv(CblasRowMajor, CblasNoTrans, hi - lo + 1, Dh, scale,
                    rel->keys + (size_t)lo * Dh, Dh, q + (size_t)h * Dh, 1, 0.0f, u + lo, 1);
        float *s = scores + (size_t)h * n;
        for (int j = 0; j < n; j++) s[j] += u[bucket(d0 + j, K)];
    }
}

/* out: [H*Dh]; w: [H, n]; u: [2K+1] */
void relative_row_values(float *out, const float *w, int n, int H, int Dh,
                         const attention_relative *rel, int d0, float *u)
{
    const int K = rel->clip;
    int lo, hi;
    row_buckets(n, d0, K, &lo, &hi);
    for (int h = 0; h < H; h++) {
        const float *wh = w + (size_t)h * n;
        memset(u + lo, 0, sizeof(float) * (hi - lo + 1));
        for (int j = 0; j < n; j++) u[bucket(d0 + j, K)] += wh[j];
        /* out_h += a^V[lo, hi]^T u[lo, hi] */
        cblas_sgemv(CblasRowMajor, CblasTrans, hi - lo + 1, Dh, 1.0f,
                    rel->values + (size_t)lo * Dh, Dh, u + lo, 1, 1.0f, out + (size_t)h * Dh, 1);
    }
}
