/* attention.c - multi-head scaled dot-product attention (section 3.2 of the
 * paper): softmax(Q K^T / sqrt(Dh)) V for each head, with the causal mask, the
 * restricted (windowed) self-attention of Table 1, and keys limited to a
 * sentence's own length (the padding mask, by construction: a caller passes
 * only the real keys of a sentence).
 *
 * The projections that make Q, K and V, and the output projection, are linear
 * layers run by the caller over a whole batch; this file is the part between
 * them, one sequence at a time. */
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

/* out, q: [H*Dh]; k: [n_k, H*Dh] (ldk); v: [n_k, H*Dh] (ldv); scratch: [n_k] */
void attention_row_forward(float *out, const float *q, const float *k, int ldk, const float *v,
                           int ldv, int n_k, int H, int Dh, float *scratch)
{
    if (n_k <= 0) {
        memset(out, 0, sizeof(float) * H * Dh);
        return;
    }
    const float scale = 1.0f / sqrtf((float)Dh);
    for (int h = 0; h < H; h++) {
        /* scores [n_k] = scale * K_h q_h */
        cblas_sgemv(CblasRowMajor, CblasNoTrans, n_k, Dh, scale, k + (size_t)h * Dh, ldk,
                    q + (size_t)h * Dh, 1, 0.0f, scratch, 1);
        softmax_forward(scratch, n_k);
        /* out_h [Dh] = V_h^T weights */
        cblas_sgemv(CblasRowMajor, CblasTrans, n_k, Dh, 1.0f, v + (size_t)h * Dh, ldv, scratch, 1,
                    0.0f, out + (size_t)h * Dh, 1);
    }
}
