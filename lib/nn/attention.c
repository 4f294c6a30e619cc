/* attention.c - multi-head scaled dot-product attention (section 3.2 of the
 * paper): softmax(Q K^T / sqrt(Dh)) V for each head, with the causal mask, the
 * restricted (windowed) self-attention of Table 1, and keys limited to a
 * sentence's own length (the padding mask, by construction: a caller passes
 * only the real keys of a sentence).
 *
 * The projections that make Q, K and V, and the output projection, are linear
 * layers run by the caller over a whole batch; this file is the part between
 * them, one sequence at a time: the forward pass, dropout on the attention
 * weights for training, and the backward pass. */
#include <cblas.h>
#include <math.h>
#include <string.h>

#include "nn/layers.h"

/* Queries per block when the mask lets a block skip keys: causal attention
 * skips the keys after a block's last query (about half the work), windowed
 * attention the keys outside the block's band.  Big enough that each block
 * is a worthwhile sgemm. */
enum { QUERY_BLOCK = 64 };

static int imin(int a, int b) { return a < b ? a : b; }
static int imax(int a, int b) { return a > b ? a : b; }

/* The first and last key query i sees (see attention_mask in layers.h).
 * Both are non-decreasing in i, so a block of queries [i0, i1) sees keys in
 * [key_lo(i0), key_hi(i1 - 1)]. */
static int key_lo(attention_mask m, int i)
{
    return m.window > 0 ? imax(0, m.q_pos + i - m.window) : 0;
}

static int key_hi(attention_mask m, int i, int n_k)
{
    int hi = m.causal ? m.q_pos + i : m.window > 0 ? m.q_pos + i + m.window : n_k - 1;
    return imin(hi, n_k - 1);
}

static int query_block(int n_q, attention_mask m)
{
    if (m.window > 0) return imin(n_q, imax(m.window, QUERY_BLOCK));
    if (m.causal) return imin(n_q, QUERY_BLOCK);
    return n_q;
}

/* The most keys one block of queries can see. */
static int block_keys(int n_q, int n_k, attention_mask m)
{
    int blk = query_block(n_q, m);
    if (m.window > 0) return imin(n_k, blk + 2 * m.window);
    return n_k;
}

size_t attention_scratch_size(int n_q, int n_k, attention_mask mask)
{
    if (n_q <= 0 || n_k <= 0) return 1;
    return (size_t)query_block(n_q, mask) * (size_t)block_keys(n_q, n_k, mask);
}

/* out: [n_q, H*Dh] (ldo), q: [n_q, H*Dh] (ldq), k: [n_k, H*Dh] (ldk),
 * v: [n_k, H*Dh] (ldv), scratch: attention_scratch_size(...), att: [H, n_q, n_k] or NULL */
void attention_forward(float *out, int ldo, const float *q, int ldq, const float *k, int ldk,
                       const float *v, int ldv, int n_q, int n_k, int H, int Dh,
                       attention_mask mask, float *scratch, float *att)
{
    if (n_q <= 0) return;
    if (n_k <= 0) {
        for (int i = 0; i < n_q; i++) memset(out + (size_t)i * ldo, 0, sizeof(float) * H * Dh);
        return;
    }
    const float scale = 1.0f / sqrtf((float)Dh);
    const int blk = query_block(n_q, mask);
    for (int h = 0; h < H; h++) {
        for (int i0 = 0; i0 < n_q; i0 += blk) {
            int m = imin(blk, n_q - i0);
            int klo = key_lo(mask, i0), khi = key_hi(mask, i0 + m - 1, n_k);
            int nk = khi - klo + 1;
            float *o = out + (size_t)i0 * ldo + (size_t)h * Dh;
            if (nk <= 0) { /* no query of the block sees a key */
                for (int r = 0; r < m; r++) memset(o + (size_t)r * ldo, 0, sizeof(float) * Dh);
                if (att)
                    for (int r = 0; r < m; r++)
                        memset(att + ((size_t)h * n_q + i0 + r) * n_k, 0, sizeof(float) * n_k);
                continue;
            }
            /* scores [m, nk] = scale * Q_block K_band^T */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, nk, Dh, scale,
                        q + (size_t)i0 * ldq + (size_t)h * Dh, ldq,
                        k + (size_t)klo * ldk + (size_t)h * Dh, ldk, 0.0f, scratch, nk);
            for (int r = 0; r < m; r++) {
                float *s = scratch + (size_t)r * nk;
                int a = key_lo(mask, i0 + r) - klo, b = key_hi(mask, i0 + r, n_k) - klo;
                if (b < a) { /* this query sees nothing: weight 0 everywhere */
                    memset(s, 0, sizeof(float) * nk);
                    continue;
                }
                memset(s, 0, sizeof(float) * a);
                memset(s + b + 1, 0, sizeof(float) * (nk - b - 1));
                softmax_forward(s + a, b - a + 1);
            }
            /* out_block [m, Dh] = weights [m, nk] V_band [nk, Dh] */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, Dh, nk, 1.0f, scratch, nk,
                        v + (size_t)klo * ldv + (size_t)h * Dh, ldv, 0.0f, o, ldo);
            if (att) {
                for (int r = 0; r < m; r++) {
                    float *a = att + ((size_t)h * n_q + i0 + r) * n_k;
                    memset(a, 0, sizeof(float) * n_k);
                    memcpy(a + klo, scratch + (size_t)r * nk, sizeof(float) * nk);
                }
            }
        }
    }
}

/* out: [n_q, H*Dh] (ldo); v: [n_k, H*Dh] (ldv); att: [H, n_q, n_k];
 * keep: [H, n_q, n_k] (drawn here); scratch: [n_q * n_k].  The weights stay
 * as they were (the backward pass needs them before dropout); the dropped
 * copy lives in scratch only for the product. */
void attention_dropout_forward(float *out, int ldo, const float *v, int ldv, const float *att,
                               uint8_t *keep, int n_q, int n_k, int H, int Dh, float p,
                               tfm_rng *rng, float *scratch)
{
    if (n_q <= 0 || n_k <= 0) return;
    const size_t n = (size_t)n_q * n_k;
    for (int h = 0; h < H; h++) {
        memcpy(scratch, att + h * n, n * sizeof *scratch);
        dropout_forward(scratch, keep + h * n, n, p, rng);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n_q, Dh, n_k, 1.0f, scratch, n_k,
                    v + (size_t)h * Dh, ldv, 0.0f, out + (size_t)h * Dh, ldo);
    }
}

size_t attention_backward_scratch_size(int n_q, int n_k)
{
    if (n_q <= 0 || n_k <= 0) return 1;
    return 2 * (size_t)n_q * (size_t)n_k;
}

/* dq, q: [n_q, H*Dh] (ldq); dk, k: [n_k, H*Dh] (ldk); dv, v: [n_k, H*Dh] (ldv);
 * dout: [n_q, H*Dh] (ldo); att, keep: [H, n_q, n_k]; scratch:
 * attention_backward_scratch_size(n_q, n_k).  Per head, with P the weights,
 * P' = Dropout(P) (P itself without dropout), S the scaled scores
 * (P = softmax(S), S = Q K^T / sqrt(Dh)) and O = P' V:
 *   dV += P'^T dO          dP' = dO V^T         dP = Dropout'(dP')
 *   dS  = softmax'(P, dP)  dQ += dS K / sqrt(Dh)  dK += dS^T Q / sqrt(Dh)
 * The products run over the full [n_q, n_k] block of the head (weights are
 * stored whole, 0 where masked, so masked pairs contribute nothing); with a
 * window that is O(n^2) work, unlike the banded forward, which is the price
 * of keeping the backward one sgemm per product. */
void attention_backward(float *dq, float *dk, float *dv, const float *dout, int ldo,
                        const float *q, int ldq, const float *k, int ldk, const float *v, int ldv,
                        const float *att, const uint8_t *keep, float p, int n_q, int n_k, int H,
                        int Dh, float *scratch)
{
    if (n_q <= 0 || n_k <= 0) return;
    const float scale = 1.0f / sqrtf((float)Dh);
    const size_t n = (size_t)n_q * n_k;
    float *a = scratch, *b = scratch + n; /* two [n_q, n_k] blocks */
    for (int h = 0; h < H; h++) {
        const float *P = att + h * n;
        const float *dO = dout + (size_t)h * Dh;
        const float *dP = b;
        /* dV_h += P'^T dO_h (P' into b when there is dropout) */
        const float *Pd = P;
        if (keep) {
            memset(b, 0, n * sizeof *b);
            dropout_backward(b, P, keep + h * n, n, p); /* the same mask and scale as forward */
            Pd = b;
        }
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n_k, Dh, n_q, 1.0f, Pd, n_k, dO, ldo,
                    1.0f, dv + (size_t)h * Dh, ldv);
        /* dP'_h = dO_h V_h^T into a; through the dropout mask into b */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n_q, n_k, Dh, 1.0f, dO, ldo,
                    v + (size_t)h * Dh, ldv, 0.0f, keep ? a : b, n_k);
        if (keep) {
            memset(b, 0, n * sizeof *b);
            dropout_backward(b, a, keep + h * n, n, p);
        }
        /* dS_h (unscaled) into a, row by row */
        memset(a, 0, n * sizeof *a);
        for (int i = 0; i < n_q; i++)
            softmax_backward(a + (size_t)i * n_k, dP + (size_t)i * n_k, P + (size_t)i * n_k, n_k);
        /* dQ_h += scale dS K_h;  dK_h += scale dS^T Q_h */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n_q, Dh, n_k, scale, a, n_k,
                    k + (size_t)h * Dh, ldk, 1.0f, dq + (size_t)h * Dh, ldq);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n_k, Dh, n_q, scale, a, n_k,
                    q + (size_t)h * Dh, ldq, 1.0f, dk + (size_t)h * Dh, ldk);
    }
}

/* s[i] = <k_i, q> for four keys of Dh floats: four independent sums hide
 * the adds' latency. */
NN_INLINE void dot4(float s[4], const float *q, const float *k0, const float *k1,
                    const float *k2, const float *k3, int Dh)
{
    const int body = Dh / 8 * 8;
    nn_f32x8 a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
    for (int i = 0; i < body; i += 8) {
        nn_f32x8 qv = nn_load8(q + i);
        a0 += nn_load8(k0 + i) * qv;
        a1 += nn_load8(k1 + i) * qv;
        a2 += nn_load8(k2 + i) * qv;
        a3 += nn_load8(k3 + i) * qv;
    }
    s[0] = nn_sum8(&a0), s[1] = nn_sum8(&a1), s[2] = nn_sum8(&a2), s[3] = nn_sum8(&a3);
    for (int i = body; i < Dh; i++) {
        s[0] += k0[i] * q[i];
        s[1] += k1[i] * q[i];
        s[2] += k2[i] * q[i];
        s[3] += k3[i] * q[i];
    }
}

/* <k, q> for one key of Dh floats. */
NN_INLINE float dot1(const float *q, const float *k, int Dh)
{
    const int body = Dh / 8 * 8;
    nn_f32x8 a = {0};
    for (int i = 0; i < body; i += 8) a += nn_load8(k + i) * nn_load8(q + i);
    float s = nn_sum8(&a);
    for (int i = body; i < Dh; i++) s += k[i] * q[i];
    return s;
}

/* scores [H, n] = scale <k_j, q> per head (head h's Dh floats at h Dh of
 * q and of each key k_j = k + j ldk).  Key by key, all heads of a key at
 * once, so each key's row is read front to back once: decoding's keys come
 * from caches larger than the caches, and whole rows stream faster than
 * one head's slice of every row, head after head. */
NN_INLINE void scores_heads(float *scores, const float *q, const float *k, int ldk, int n,
                            int H, int Dh, float scale)
{
    int j = 0;
    for (; j + 4 <= n; j += 4) {
        const float *k0 = k + (size_t)j * ldk, *k1 = k0 + ldk, *k2 = k1 + ldk, *k3 = k2 + ldk;
        for (int h = 0; h < H; h++) {
            const size_t off = (size_t)h * Dh;
            float s[4];
            dot4(s, q + off, k0 + off, k1 + off, k2 + off, k3 + off, Dh);
            float *o = scores + (size_t)h * n + j;
            o[0] = scale * s[0], o[1] = scale * s[1], o[2] = scale * s[2], o[3] = scale * s[3];
        }
    }
    for (; j < n; j++)
        for (int h = 0; h < H; h++)
            scores[(size_t)h * n + j] =
                scale * dot1(q + (size_t)h * Dh, k + (size_t)j * ldk + (size_t)h * Dh, Dh);
}

/* out [H Dh] = per head, sum over j of w[h n + j] v_j (head h's slice of
 * v_j = v + j ldv): four values at a time, so out is loaded and stored once
 * per four; all heads of a value at once, as in scores_heads. */
NN_INLINE void weighted_sum_heads(float *out, const float *w, const float *v, int ldv, int n,
                                  int H, int Dh)
{
    const int body = Dh / 8 * 8;
    memset(out, 0, (size_t)H * Dh * sizeof *out);
    int j = 0;
    for (; j + 4 <= n; j += 4) {
        for (int h = 0; h < H; h++) {
            const float *v0 = v + (size_t)j * ldv + (size_t)h * Dh, *v1 = v0 + ldv,
                        *v2 = v1 + ldv, *v3 = v2 + ldv;
            const float *wh = w + (size_t)h * n + j;
            const float w0 = wh[0], w1 = wh[1], w2 = wh[2], w3 = wh[3];
            float *o = out + (size_t)h * Dh;
            for (int i = 0; i < body; i += 8) {
                const nn_f32x8 sum = (w0 * nn_load8(v0 + i) + w1 * nn_load8(v1 + i)) +
                                     (w2 * nn_load8(v2 + i) + w3 * nn_load8(v3 + i));
                nn_store8(o + i, nn_load8(o + i) + sum);
            }
            for (int i = body; i < Dh; i++)
                o[i] += (w0 * v0[i] + w1 * v1[i]) + (w2 * v2[i] + w3 * v3[i]);
        }
    }
    for (; j < n; j++)
        for (int h = 0; h < H; h++) {
            const float *vj = v + (size_t)j * ldv + (size_t)h * Dh;
            const float wj = w[(size_t)h * n + j];
            float *o = out + (size_t)h * Dh;
            for (int i = 0; i < body; i += 8)
                nn_store8(o + i, nn_load8(o + i) + wj * nn_load8(vj + i));
            for (int i = body; i < Dh; i++) o[i] += wj * vj[i];
        }
}

/* out, q: [H*Dh]; k: [n_k, H*Dh] (ldk); v: [n_k, H*Dh] (ldv); scratch: [H, n_k]
 *
 * One query against its keys, all heads: decoding calls this for every row
 * and layer with a few dozen keys of Dh (64) floats per head, products too
 * small for a BLAS call to pay for its own dispatch, so the loops are
 * written out (eight lanes; AVX2 where the CPU has it). */
NN_MULTIVERSION
void attention_row_forward(float *out, const float *q, const float *k, int ldk, const float *v,
                           int ldv, int n_k, int H, int Dh, float *scratch)
{
    if (n_k <= 0) {
        memset(out, 0, sizeof(float) * H * Dh);
        return;
    }
    const float scale = 1.0f / sqrtf((float)Dh);
    scores_heads(scratch, q, k, ldk, n_k, H, Dh, scale); /* [H, n_k] = scale K_h q_h */
    for (int h = 0; h < H; h++) softmax_forward(scratch + (size_t)h * n_k, n_k);
    weighted_sum_heads(out, scratch, v, ldv, n_k, H, Dh); /* [H Dh] = V_h^T weights */
}
