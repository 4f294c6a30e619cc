/* attention.c - multi-head scaled dot-product attention (section 3.2 of the
 * paper): softmax(Q K^T / sqrt(Dh)) V for each head, with the causal mask, the
 * restricted (windowed) self-attention of Table 1, relative position
 * representations (Shaw et al., 2018; their part is relative.c), and keys
 * limited to a sentence's own length (the padding mask, by construction: a
 * caller passes only the real keys of a sentence).
 *
 * The projections that make Q, K and V, and the output projection, are linear
 * layers run by the caller over a whole batch; this file is the part between
 * them, one sequence at a time: the forward pass, dropout on the attention
 * weights for training, the backward pass, and one query against a cache
 * for the incremental decoder.
 *
 * Every pass goes through the queries in blocks, and a block multiplies only
 * the band of keys its mask lets it see: a window of r keys costs O(r n D)
 * work in the forward and the backward pass alike, and the weights kept
 * between them are the band alone (attention_band_width), O(r n) floats. */
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

/* A block of queries [i0, i0 + m) and the band of keys [klo, klo + nk) it
 * sees; nk <= 0 when it sees none.  Query i0 + r against key klo + c is at
 * distance d0 + c - r (for relative positions). */
typedef struct block {
    int i0, m, klo, nk, d0;
} block;

static block block_at(attention_mask mask, int i0, int blk, int n_q, int n_k)
{
    block b;
    b.i0 = i0;
    b.m = imin(blk, n_q - i0);
    b.klo = key_lo(mask, i0);
    b.nk = key_hi(mask, i0 + b.m - 1, n_k) - b.klo + 1;
    b.d0 = b.klo - (mask.q_pos + i0);
    return b;
}

/* The keys row r of block b sees, as columns [*a, *b] of the block's band
 * (*b < *a: none). */
static void row_range(attention_mask mask, const block *bk, int r, int n_k, int *a, int *b)
{
    *a = key_lo(mask, bk->i0 + r) - bk->klo;
    *b = key_hi(mask, bk->i0 + r, n_k) - bk->klo;
}

/* ---- how the weights are kept ------------------------------------------------ */

int attention_band_width(int n_k, attention_mask mask)
{
    if (mask.window <= 0) return n_k;
    int span = mask.causal ? mask.window + 1 : 2 * mask.window + 1;
    return span < n_k ? span : n_k;
}

int attention_band_first(attention_mask mask, int i, int n_k)
{
    return attention_band_width(n_k, mask) < n_k ? mask.q_pos + i - mask.window : 0;
}

size_t attention_weights_size(int n_q, int n_k, int H, attention_mask mask)
{
    if (n_q <= 0 || n_k <= 0) return 0;
    return (size_t)H * (size_t)n_q * (size_t)attention_band_width(n_k, mask);
}

/* Block row s (the band [klo, klo + nk), visible columns [a, b]) into the
 * kept row of query i: width floats from key `first`, 0 where not visible. */
static void band_store(float *row, int width, int first, const float *s, int klo, int a, int b)
{
    memset(row, 0, sizeof(float) * width);
    if (b >= a) memcpy(row + klo + a - first, s + a, sizeof(float) * (b - a + 1));
}

/* The inverse: the kept row back into a block row of nk floats. */
static void band_load(float *s, int nk, int klo, const float *row, int first, int a, int b)
{
    memset(s, 0, sizeof(float) * nk);
    if (b >= a) memcpy(s + a, row + klo + a - first, sizeof(float) * (b - a + 1));
}

/* dense: [H, n_q, n_k]; att: [H, n_q, width] */
void attention_weights_expand(float *dense, const float *att, int n_q, int n_k, int H,
                              attention_mask mask)
{
    const int width = attention_band_width(n_k, mask);
    for (int h = 0; h < H; h++)
        for (int i = 0; i < n_q; i++) {
            const size_t row = (size_t)h * n_q + i;
            int first = attention_band_first(mask, i, n_k);
            int a = key_lo(mask, i), b = key_hi(mask, i, n_k);
            band_load(dense + row * n_k, n_k, 0, att + row * width, first, a, b);
        }
}

/* ---- the forward pass ------------------------------------------------------------ */

/* Floats of [blk, 2K+1] for the relative positions' products. */
static size_t relative_scratch(int n_q, attention_mask mask, int rel_clip)
{
    return (size_t)query_block(n_q, mask) * (size_t)attention_relative_rows(rel_clip);
}

/* Floats of one block's [blk, band] matrix. */
static size_t block_scratch(int n_q, int n_k, attention_mask mask)
{
    return (size_t)query_block(n_q, mask) * (size_t)block_keys(n_q, n_k, mask);
}

size_t attention_scratch_size(int n_q, int n_k, attention_mask mask, int rel_clip)
{
    if (n_q <= 0 || n_k <= 0) return 1;
    return block_scratch(n_q, n_k, mask) + relative_scratch(n_q, mask, rel_clip);
}

/* out: [n_q, H*Dh] (ldo), q: [n_q, H*Dh] (ldq), k: [n_k, H*Dh] (ldk),
 * v: [n_k, H*Dh] (ldv), rel: [2K+1, Dh] tables or NULL,
 * scratch: attention_scratch_size(...), att: [H, n_q, width] or NULL */
void attention_forward(float *out, int ldo, const float *q, int ldq, const float *k, int ldk,
                       const float *v, int ldv, int n_q, int n_k, int H, int Dh,
                       attention_mask mask, const attention_relative *rel, float *scratch,
                       float *att)
{
    if (n_q <= 0) return;
    if (n_k <= 0) {
        for (int i = 0; i < n_q; i++) memset(out + (size_t)i * ldo, 0, sizeof(float) * H * Dh);
        return;
    }
    const float scale = 1.0f / sqrtf((float)Dh);
    const int blk = query_block(n_q, mask), width = attention_band_width(n_k, mask);
    float *u = scratch + block_scratch(n_q, n_k, mask); /* [blk, 2K+1] */
    for (int h = 0; h < H; h++) {
        for (int i0 = 0; i0 < n_q; i0 += blk) {
            const block bk = block_at(mask, i0, blk, n_q, n_k);
            const int m = bk.m, nk = bk.nk;
            float *o = out + (size_t)i0 * ldo + (size_t)h * Dh;
            const float *qb = q + (size_t)i0 * ldq + (size_t)h * Dh;
            float *att_h = att ? att + ((size_t)h * n_q + i0) * width : NULL;
            if (nk <= 0) { /* no query of the block sees a key */
                for (int r = 0; r < m; r++) memset(o + (size_t)r * ldo, 0, sizeof(float) * Dh);
                if (att_h) memset(att_h, 0, sizeof(float) * m * width);
                continue;
            }
            /* scores [m, nk] = scale Q_block (K_band + a^K)^T */
            nn_sgemm(false, true, m, nk, Dh, scale, qb, ldq,
                     k + (size_t)bk.klo * ldk + (size_t)h * Dh, ldk, 0.0f, scratch, nk);
            if (rel) relative_logits(scratch, m, nk, qb, ldq, rel, Dh, scale, bk.d0, u);
            for (int r = 0; r < m; r++) {
                float *s = scratch + (size_t)r * nk;
                int a, b;
                row_range(mask, &bk, r, n_k, &a, &b);
                if (b < a) { /* this query sees nothing: weight 0 everywhere */
                    memset(s, 0, sizeof(float) * nk);
                    continue;
                }
                memset(s, 0, sizeof(float) * a);
                memset(s + b + 1, 0, sizeof(float) * (nk - b - 1));
                softmax_forward(s + a, b - a + 1);
                if (att_h)
                    band_store(att_h + (size_t)r * width, width,
                               attention_band_first(mask, i0 + r, n_k), s, bk.klo, a, b);
            }
            /* out_block [m, Dh] = weights [m, nk] (V_band [nk, Dh] + a^V) */
            nn_sgemm(false, false, m, Dh, nk, 1.0f, scratch, nk,
                     v + (size_t)bk.klo * ldv + (size_t)h * Dh, ldv, 0.0f, o, ldo);
            if (rel) relative_values(o, ldo, scratch, m, nk, rel, Dh, bk.d0, u);
        }
    }
}

/* The kept rows of block bk (weights or a dropout mask's survivors, [m,
 * width] from the block's first row) as the block's [m, nk] matrix in w. */
static void block_load(float *w, const float *kept, int width, const block *bk,
                       attention_mask mask, int n_k)
{
    for (int r = 0; r < bk->m; r++) {
        int a, b;
        row_range(mask, bk, r, n_k, &a, &b);
        band_load(w + (size_t)r * bk->nk, bk->nk, bk->klo, kept + (size_t)r * width,
                  attention_band_first(mask, bk->i0 + r, n_k), a, b);
    }
}

size_t attention_dropout_scratch_size(int n_q, int n_k, attention_mask mask, int rel_clip)
{
    if (n_q <= 0 || n_k <= 0) return 1;
    return (size_t)n_q * (size_t)attention_band_width(n_k, mask) +
           attention_scratch_size(n_q, n_k, mask, rel_clip);
}

/* out: [n_q, H*Dh] (ldo); v: [n_k, H*Dh] (ldv); att, keep: [H, n_q, width]
 * (keep drawn here); scratch: attention_dropout_scratch_size.  The weights
 * stay as they were (the backward pass needs them before dropout); the
 * dropped copy lives in scratch only for the products. */
void attention_dropout_forward(float *out, int ldo, const float *v, int ldv, const float *att,
                               uint8_t *keep, int n_q, int n_k, int H, int Dh,
                               attention_mask mask, const attention_relative *rel, float p,
                               tfm_rng *rng, float *scratch)
{
    if (n_q <= 0 || n_k <= 0) return;
    const int blk = query_block(n_q, mask), width = attention_band_width(n_k, mask);
    const size_t n = (size_t)n_q * width;
    float *dropped = scratch;                             /* [n_q, width] */
    float *w = dropped + n;                               /* [blk, band] */
    float *u = w + block_scratch(n_q, n_k, mask);         /* [blk, 2K+1] */
    for (int h = 0; h < H; h++) {
        memcpy(dropped, att + h * n, n * sizeof *dropped);
        dropout_forward(dropped, keep + h * n, n, p, rng);
        for (int i0 = 0; i0 < n_q; i0 += blk) {
            const block bk = block_at(mask, i0, blk, n_q, n_k);
            float *o = out + (size_t)i0 * ldo + (size_t)h * Dh;
            if (bk.nk <= 0) continue; /* attention_forward left zeros */
            block_load(w, dropped + (size_t)i0 * width, width, &bk, mask, n_k);
            nn_sgemm(false, false, bk.m, Dh, bk.nk, 1.0f, w, bk.nk,
                     v + (size_t)bk.klo * ldv + (size_t)h * Dh, ldv, 0.0f, o, ldo);
            if (rel) relative_values(o, ldo, w, bk.m, bk.nk, rel, Dh, bk.d0, u);
        }
    }
}

/* ---- the backward pass ------------------------------------------------------------ */

/* Whether the weights are kept as a band (not whole rows of n_k keys). */
static bool kept_as_band(int n_k, attention_mask mask)
{
    return attention_band_width(n_k, mask) < n_k;
}

size_t attention_backward_scratch_size(int n_q, int n_k, attention_mask mask, int rel_clip)
{
    if (n_q <= 0 || n_k <= 0) return 1;
    /* two [blk, band] matrices, a third for the weights of a band */
    const size_t blocks = kept_as_band(n_k, mask) ? 3 : 2;
    return blocks * block_scratch(n_q, n_k, mask) + relative_scratch(n_q, mask, rel_clip);
}

/* The weights of block bk as an [m, nk] matrix, rows *ld apart: read in
 * place from the kept rows (kept: the block's first, [m, width]) when they
 * are whole rows of keys, else expanded from the band into w. */
static const float *block_weights(float *w, const float *kept, int width, const block *bk,
                                  attention_mask mask, int n_k, int *ld)
{
    if (!kept_as_band(n_k, mask)) {
        *ld = width;
        return kept + bk->klo;
    }
    block_load(w, kept, width, bk, mask, n_k);
    *ld = bk->nk;
    return w;
}

/* x [m, nk] = y [m, nk] (rows ldy apart) through the dropout mask of block
 * bk (keep: its kept rows, [m, width]), 0 where not visible: the same
 * linear map as the forward's dropout, applied to the weights or to their
 * gradient. */
static void block_dropout(float *x, const float *y, int ldy, const uint8_t *keep, int width,
                          const block *bk, attention_mask mask, int n_k, float p)
{
    for (int r = 0; r < bk->m; r++) {
        int a, b;
        row_range(mask, bk, r, n_k, &a, &b);
        float *xr = x + (size_t)r * bk->nk;
        memset(xr, 0, sizeof(float) * bk->nk);
        if (b < a) continue;
        int c0 = bk->klo + a - attention_band_first(mask, bk->i0 + r, n_k);
        dropout_backward(xr + a, y + (size_t)r * ldy + a, keep + (size_t)r * width + c0,
                         (size_t)(b - a + 1), p);
    }
}

/* dq, q: [n_q, H*Dh] (ldq); dk, k: [n_k, H*Dh] (ldk); dv, v: [n_k, H*Dh] (ldv);
 * dout: [n_q, H*Dh] (ldo); att, keep: [H, n_q, width]; rel, drel: [2K+1, Dh]
 * tables or NULL; scratch: attention_backward_scratch_size.  Per head and
 * block of queries, over the band of keys the block sees, with P the
 * weights, P' = Dropout(P) (P itself without dropout), S the scaled scores
 * (P = softmax(S), S = Q (K + A^K)^T / sqrt(Dh)) and O = P' (V + A^V):
 *   dV += P'^T dO          dP' = dO (V + A^V)^T     dP = Dropout'(dP')
 *   dS  = softmax'(P, dP)  dQ += dS (K + A^K) / sqrt(Dh)  dK += dS^T Q / sqrt(Dh)
 * and the tables' gradients by bucket (relative.c).  Masked pairs have
 * P = 0 and dS = 0, so they contribute nothing. */
void attention_backward(float *dq, float *dk, float *dv, const attention_relative_grad *drel,
                        const float *dout, int ldo, const float *q, int ldq, const float *k,
                        int ldk, const float *v, int ldv, const float *att, const uint8_t *keep,
                        float p, int n_q, int n_k, int H, int Dh, attention_mask mask,
                        const attention_relative *rel, float *scratch)
{
    if (n_q <= 0 || n_k <= 0) return;
    const float scale = 1.0f / sqrtf((float)Dh);
    const int blk = query_block(n_q, mask), width = attention_band_width(n_k, mask);
    const size_t nb = block_scratch(n_q, n_k, mask);
    /* two [blk, band] matrices, a third for a band's weights, and [blk, 2K+1]
     * for the relative tables (attention_backward_scratch_size) */
    float *X = scratch, *G = X + nb, *band = G + nb;
    float *u = kept_as_band(n_k, mask) ? band + nb : band;
    for (int h = 0; h < H; h++) {
        for (int i0 = 0; i0 < n_q; i0 += blk) {
            const block bk = block_at(mask, i0, blk, n_q, n_k);
            const int m = bk.m, nk = bk.nk;
            if (nk <= 0) continue;
            const size_t kept = ((size_t)h * n_q + i0) * width; /* the block's first kept row */
            const float *dO = dout + (size_t)i0 * ldo + (size_t)h * Dh;
            const float *qb = q + (size_t)i0 * ldq + (size_t)h * Dh;
            const float *kb = k + (size_t)bk.klo * ldk + (size_t)h * Dh;
            const float *vb = v + (size_t)bk.klo * ldv + (size_t)h * Dh;
            float *dqb = dq + (size_t)i0 * ldq + (size_t)h * Dh;
            float *dkb = dk + (size_t)bk.klo * ldk + (size_t)h * Dh;
            float *dvb = dv + (size_t)bk.klo * ldv + (size_t)h * Dh;

            /* P (rows ldp apart), and P' into X when there is dropout (the
             * same mask and scale) */
            int ldp;
            const float *P = block_weights(band, att + kept, width, &bk, mask, n_k, &ldp);
            const float *Pd = P;
            int ldpd = ldp;
            if (keep) {
                block_dropout(X, P, ldp, keep + kept, width, &bk, mask, n_k, p);
                Pd = X;
                ldpd = nk;
            }
            /* dV_band += P'^T dO_block;  G = dP' = dO_block (V_band + a^V)^T */
            nn_sgemm(true, false, nk, Dh, m, 1.0f, Pd, ldpd, dO, ldo, 1.0f, dvb, ldv);
            nn_sgemm(false, true, m, nk, Dh, 1.0f, dO, ldo, vb, ldv, 0.0f, G, nk);
            if (rel)
                relative_values_backward(G, drel->values, Pd, ldpd, dO, ldo, m, nk, rel, Dh,
                                         bk.d0, u);
            /* dP = Dropout'(dP') into X (P' is no longer needed); dS (unscaled)
             * into whichever of X and G dP is not */
            const float *dP = G;
            float *dS = X;
            if (keep) {
                block_dropout(X, G, nk, keep + kept, width, &bk, mask, n_k, p);
                dP = X;
                dS = G;
            }
            memset(dS, 0, sizeof(float) * m * nk);
            for (int r = 0; r < m; r++) {
                int a, b;
                row_range(mask, &bk, r, n_k, &a, &b);
                const size_t at = (size_t)r * nk + (size_t)a;
                if (b >= a)
                    softmax_backward(dS + at, dP + at, P + (size_t)r * ldp + a, b - a + 1);
            }
            /* dQ_block += scale dS (K_band + a^K);  dK_band += scale dS^T Q_block */
            nn_sgemm(false, false, m, Dh, nk, scale, dS, nk, kb, ldk, 1.0f, dqb, ldq);
            nn_sgemm(true, false, nk, Dh, m, scale, dS, nk, qb, ldq, 1.0f, dkb, ldk);
            if (rel)
                relative_logits_backward(dqb, ldq, drel->keys, dS, qb, m, nk, rel, Dh, scale,
                                         bk.d0, u);
        }
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

/* name(scores, q, k, ldk, n, H, Dh, scale): scores [H, n] = scale <k_j, q>
 * per head (head h's Dh values at h Dh of q and of each key k_j = k + j ldk,
 * keys of type key_t), by dot4 (four keys at once) and dot1.  Key by key,
 * all heads of a key at once, so each key's row is read front to back
 * once: decoding's keys come from caches larger than the caches, and whole
 * rows stream faster than one head's slice of every row, head after head.
 * One loop for float keys (scores_heads) and bf16 keys (scores_heads_bf16). */
#define DEFINE_SCORES_HEADS(name, key_t, dot4, dot1)                                          \
    NN_INLINE void name(float *scores, const float *q, const key_t *k, int ldk, int n, int H,  \
                        int Dh, float scale)                                                  \
    {                                                                                         \
        int j = 0;                                                                            \
        for (; j + 4 <= n; j += 4) {                                                          \
            const key_t *k0 = k + (size_t)j * ldk, *k1 = k0 + ldk, *k2 = k1 + ldk,            \
                        *k3 = k2 + ldk;                                                       \
            for (int h = 0; h < H; h++) {                                                     \
                const size_t off = (size_t)h * Dh;                                            \
                float s[4];                                                                   \
                dot4(s, q + off, k0 + off, k1 + off, k2 + off, k3 + off, Dh);                 \
                float *o = scores + (size_t)h * n + j;                                        \
                o[0] = scale * s[0], o[1] = scale * s[1], o[2] = scale * s[2],                \
                o[3] = scale * s[3];                                                          \
            }                                                                                 \
        }                                                                                     \
        for (; j < n; j++)                                                                    \
            for (int h = 0; h < H; h++)                                                       \
                scores[(size_t)h * n + j] =                                                   \
                    scale * dot1(q + (size_t)h * Dh, k + (size_t)j * ldk + (size_t)h * Dh, Dh); \
    }

DEFINE_SCORES_HEADS(scores_heads, float, dot4, dot1)

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

/* out, q: [H*Dh]; k: [n_k, H*Dh] (ldk); v: [n_k, H*Dh] (ldv); rel: [2K+1, Dh]
 * tables or NULL, key j at distance d0 + j; scratch: [H, n_k] and [2K+1]
 *
 * One query against its keys, all heads: decoding calls this for every row
 * and layer with a few dozen keys of Dh (64) floats per head, products too
 * small for a BLAS call to pay for its own dispatch, so the loops are
 * written out (eight lanes; AVX2 where the CPU has it). */
NN_MULTIVERSION
void attention_row_forward(float *out, const float *q, const float *k, int ldk, const float *v,
                           int ldv, int n_k, int H, int Dh, const attention_relative *rel,
                           int d0, float *scratch)
{
    if (n_k <= 0) {
        memset(out, 0, sizeof(float) * H * Dh);
        return;
    }
    const float scale = 1.0f / sqrtf((float)Dh);
    float *u = scratch + (size_t)H * n_k; /* [2K+1] */
    scores_heads(scratch, q, k, ldk, n_k, H, Dh, scale); /* [H, n_k] = scale K_h q_h */
    if (rel) relative_row_logits(scratch, q, n_k, H, Dh, rel, scale, d0, u);
    for (int h = 0; h < H; h++) softmax_forward(scratch + (size_t)h * n_k, n_k);
    weighted_sum_heads(out, scratch, v, ldv, n_k, H, Dh); /* [H Dh] = V_h^T weights */
    if (rel) relative_row_values(out, scratch, n_k, H, Dh, rel, d0, u);
}

/* ---- bf16 keys and values ----
 *
 * Sixteen bf16 values (32 bytes) read as eight 32-bit words hold the even
 * values in their low halves and the odd ones in their high halves: a
 * shift and a mask widen them into two float vectors, with no lane
 * crossing.  So the query is split the same way once (each 16 values of a
 * head: the 8 even, then the 8 odd), the products run on split vectors,
 * and the weighted sum stays split until it is joined at the end.  A head's
 * last Dh % 16 values stay in order and go one at a time. */
typedef uint32_t nn_u32x8 __attribute__((vector_size(32)));
typedef uint32_t nn_u32x8u __attribute__((vector_size(32), aligned(2), may_alias));
#define BF16_WORDS(p) ((nn_u32x8) * (const nn_u32x8u *)(const void *)(p))
#define BF16_EVEN(w) ((nn_f32x8)((w) << 16))
#define BF16_ODD(w) ((nn_f32x8)((w) & 0xffff0000u))

/* out [H Dh] = x [H Dh] with each head's 16-value blocks split (their 8
 * even values first), its tail as it is; join undoes it. */
NN_INLINE void split_even_odd(float *out, const float *x, int H, int Dh)
{
    const int body = Dh / 16 * 16;
    for (int h = 0; h < H; h++, out += Dh, x += Dh) {
        for (int i = 0; i < body; i += 16)
            for (int j = 0; j < 8; j++) out[i + j] = x[i + 2 * j], out[i + 8 + j] = x[i + 2 * j + 1];
        for (int i = body; i < Dh; i++) out[i] = x[i];
    }
}

NN_INLINE void join_even_odd(float *out, const float *x, int H, int Dh)
{
    const int body = Dh / 16 * 16;
    for (int h = 0; h < H; h++, out += Dh, x += Dh) {
        for (int i = 0; i < body; i += 16)
            for (int j = 0; j < 8; j++) out[i + 2 * j] = x[i + j], out[i + 2 * j + 1] = x[i + 8 + j];
        for (int i = body; i < Dh; i++) out[i] = x[i];
    }
}

/* s[i] = <k_i, q> for four bf16 keys of Dh values; qs split. */
NN_INLINE void dot4_bf16(float s[4], const float *qs, const uint16_t *k0, const uint16_t *k1,
                         const uint16_t *k2, const uint16_t *k3, int Dh)
{
    const int body = Dh / 16 * 16;
    nn_f32x8 a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
    for (int i = 0; i < body; i += 16) {
        const nn_f32x8 qe = nn_load8(qs + i), qo = nn_load8(qs + i + 8);
        nn_u32x8 w = BF16_WORDS(k0 + i);
        a0 += BF16_EVEN(w) * qe + BF16_ODD(w) * qo;
        w = BF16_WORDS(k1 + i);
        a1 += BF16_EVEN(w) * qe + BF16_ODD(w) * qo;
        w = BF16_WORDS(k2 + i);
        a2 += BF16_EVEN(w) * qe + BF16_ODD(w) * qo;
        w = BF16_WORDS(k3 + i);
        a3 += BF16_EVEN(w) * qe + BF16_ODD(w) * qo;
    }
    s[0] = nn_sum8(&a0), s[1] = nn_sum8(&a1), s[2] = nn_sum8(&a2), s[3] = nn_sum8(&a3);
    for (int i = body; i < Dh; i++) {
        s[0] += nn_bf16_to_float(k0[i]) * qs[i];
        s[1] += nn_bf16_to_float(k1[i]) * qs[i];
        s[2] += nn_bf16_to_float(k2[i]) * qs[i];
        s[3] += nn_bf16_to_float(k3[i]) * qs[i];
    }
}

NN_INLINE float dot1_bf16(const float *qs, const uint16_t *k, int Dh)
{
    const int body = Dh / 16 * 16;
    nn_f32x8 a = {0};
    for (int i = 0; i < body; i += 16) {
        const nn_u32x8 w = BF16_WORDS(k + i);
        a += BF16_EVEN(w) * nn_load8(qs + i) + BF16_ODD(w) * nn_load8(qs + i + 8);
    }
    float s = nn_sum8(&a);
    for (int i = body; i < Dh; i++) s += nn_bf16_to_float(k[i]) * qs[i];
    return s;
}

/* scores [H, n] = scale <k_j, q> per head for bf16 keys, q split. */
DEFINE_SCORES_HEADS(scores_heads_bf16, uint16_t, dot4_bf16, dot1_bf16)

/* os [H Dh] (split) = per head, sum over j of w[h n + j] v_j. */
NN_INLINE void weighted_sum_bf16(float *os, const float *w, const uint16_t *v, int ldv, int n,
                                 int H, int Dh)
{
    const int body = Dh / 16 * 16;
    memset(os, 0, (size_t)H * Dh * sizeof *os);
    int j = 0;
    for (; j + 4 <= n; j += 4)
        for (int h = 0; h < H; h++) {
            const uint16_t *v0 = v + (size_t)j * ldv + (size_t)h * Dh, *v1 = v0 + ldv,
                           *v2 = v1 + ldv, *v3 = v2 + ldv;
            const float *wh = w + (size_t)h * n + j;
            const float w0 = wh[0], w1 = wh[1], w2 = wh[2], w3 = wh[3];
            float *o = os + (size_t)h * Dh;
            for (int i = 0; i < body; i += 16) {
                const nn_u32x8 x0 = BF16_WORDS(v0 + i), x1 = BF16_WORDS(v1 + i),
                               x2 = BF16_WORDS(v2 + i), x3 = BF16_WORDS(v3 + i);
                nn_store8(o + i, nn_load8(o + i) + ((w0 * BF16_EVEN(x0) + w1 * BF16_EVEN(x1)) +
                                                    (w2 * BF16_EVEN(x2) + w3 * BF16_EVEN(x3))));
                nn_store8(o + i + 8,
                          nn_load8(o + i + 8) + ((w0 * BF16_ODD(x0) + w1 * BF16_ODD(x1)) +
                                                 (w2 * BF16_ODD(x2) + w3 * BF16_ODD(x3))));
            }
            for (int i = body; i < Dh; i++)
                o[i] += (w0 * nn_bf16_to_float(v0[i]) + w1 * nn_bf16_to_float(v1[i])) +
                        (w2 * nn_bf16_to_float(v2[i]) + w3 * nn_bf16_to_float(v3[i]));
        }
    for (; j < n; j++)
        for (int h = 0; h < H; h++) {
            const uint16_t *vj = v + (size_t)j * ldv + (size_t)h * Dh;
            const float wj = w[(size_t)h * n + j];
            float *o = os + (size_t)h * Dh;
            for (int i = 0; i < body; i += 16) {
                const nn_u32x8 x = BF16_WORDS(vj + i);
                nn_store8(o + i, nn_load8(o + i) + wj * BF16_EVEN(x));
                nn_store8(o + i + 8, nn_load8(o + i + 8) + wj * BF16_ODD(x));
            }
            for (int i = body; i < Dh; i++) o[i] += wj * nn_bf16_to_float(vj[i]);
        }
}

/* As attention_row_forward, with k and v in bf16; scratch: [H, n_k], the
 * split query and output [2, H Dh], and [2K+1]. */
NN_MULTIVERSION
void attention_row_forward_bf16(float *out, const float *q, const uint16_t *k, int ldk,
                                const uint16_t *v, int ldv, int n_k, int H, int Dh,
                                const attention_relative *rel, int d0, float *scratch)
{
    if (n_k <= 0) {
        memset(out, 0, sizeof(float) * H * Dh);
        return;
    }
    const float scale = 1.0f / sqrtf((float)Dh);
    float *qs = scratch + (size_t)H * n_k, *os = qs + (size_t)H * Dh; /* [H Dh] each */
    float *u = os + (size_t)H * Dh;                                    /* [2K+1] */
    split_even_odd(qs, q, H, Dh);
    scores_heads_bf16(scratch, qs, k, ldk, n_k, H, Dh, scale); /* [H, n_k] = scale K_h q_h */
    if (rel) relative_row_logits(scratch, q, n_k, H, Dh, rel, scale, d0, u);
    for (int h = 0; h < H; h++) softmax_forward(scratch + (size_t)h * n_k, n_k);
    weighted_sum_bf16(os, scratch, v, ldv, n_k, H, Dh);
    join_even_odd(out, os, H, Dh);
    if (rel) relative_row_values(out, scratch, n_k, H, Dh, rel, d0, u);
}
