/* nn/layers.h - the layer kernels of the Transformer (lib/nn), internal to the
 * library: lib/model packs weights for them, lib/pass runs them.
 *
 * One file per layer kind (linear.c, layer_norm.c, softmax.c, attention.c,
 * relative.c, embedding.c, dropout.c, loss.c), each with its forward function and the
 * backward function beside it.  Kernels take raw float pointers and sizes,
 * allocate nothing and keep no state, so the encoder, the incremental
 * decoder, the full reference decoder and training all share them.
 *
 * Backward functions ACCUMULATE (+=) into the gradients they produce, of
 * inputs and of parameters alike (llm.c's convention): the caller zeroes a
 * gradient buffer as its own step, and a tensor used twice (a shared
 * embedding) simply gathers both contributions.  The few that work in place
 * instead say so.  tests/unit/test_layer_gradients.c checks every backward against
 * central finite differences in double precision.
 *
 * Shapes use: N rows (tokens of a batch, packed), D = d_model, H heads,
 * Dh = D / H, F = d_ff, V vocabulary, n_in and n_out a linear layer's
 * input and output widths.  Matrices are row-major; "rows ld apart" means
 * row i starts at p + i*ld, which lets a kernel read one head (a column
 * slice) of a wider matrix without copying it.
 */
#ifndef TFM_NN_LAYERS_H
#define TFM_NN_LAYERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "tfm/core.h"
#include "tfm/model.h" /* tfm_logit_stats */

/* ---- gemm.c: training's matrix products on the project's own kernels ---- */

/* C [M, N] = alpha op(A) op(B) + beta C, all row-major, as
 * cblas_sgemm(CblasRowMajor, ...): op(A) [M, K] is A (lda apart) or, with
 * trans_a, A^T (A [K, M]); op(B) [K, N] likewise.  Beta 0 does not read C.
 * AVX-512 or AVX2 kernels by nn_isa_level (the same bits on either), else
 * cblas_sgemm.  Each C[i][j] depends on row i of op(A), column j of op(B)
 * and K only: not on the other rows, the thread count or the alignment.
 * Runs on tfm_blas_thread_count() threads when the product is big. */
void nn_sgemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float *A,
              int lda, const float *B, int ldb, float beta, float *C, int ldc);

/* C [M, N] = bias (each row, [N]) + alpha op(A) op(B): the same bits as C
 * filled with the bias and nn_sgemm with beta 1, without writing C twice
 * (the kernels add the bias where they store). */
void nn_sgemm_bias(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float *A,
                   int lda, const float *B, int ldb, const float *bias, float *C, int ldc);

/* ---- linear.c: y = x W^T + b, and the elementwise pieces of a sublayer ---- */

/* out: [N, n_out], inp: [N, n_in], weight: [n_out, n_in] (PyTorch's layout),
 * bias: [n_out] or NULL.  One cblas_sgemm over all N rows.  out must not
 * overlap inp. */
void linear_forward(float *out, const float *inp, const float *weight, const float *bias, int N,
                    int n_in, int n_out);

/* The position-wise feed-forward network, max(0, x W1^T + b1) W2^T + b2:
 * out: [N, D], inp: [N, D], hidden: [N, F] (scratch; holds the activations
 * after the ReLU on return), w1: [F, D], b1: [F], w2: [D, F], b2: [D]. */
void ffn_forward(float *out, float *hidden, const float *inp, const float *w1, const float *b1,
                 const float *w2, const float *b2, int N, int D, int F);

/* The gradients of linear_forward: dinp [N, n_in] (NULL: not wanted),
 * dweight [n_out, n_in], dbias [n_out] (NULL when the layer has no bias)
 * all accumulate; dout: [N, n_out]; inp and weight as the forward got them.
 * Two cblas_sgemm over all N rows. */
void linear_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                     const float *inp, const float *weight, int N, int n_in, int n_out);

/* The FFN's gradients: dinp [N, D] (or NULL), dw1, db1, dw2, db2 accumulate;
 * dhidden: [N, F] scratch (overwritten); dout: [N, D]; inp, hidden, w1, w2
 * as ffn_forward had and left them (hidden after the ReLU and, in training,
 * after dropout at rate p_act: 0 for none). */
void ffn_backward(float *dinp, float *dw1, float *db1, float *dw2, float *db2, float *dhidden,
                  const float *dout, const float *inp, const float *hidden, const float *w1,
                  const float *w2, int N, int D, int F, float p_act);

/* x: [n], in place: x = max(0, x), the FFN's activation. */
void relu_forward(float *x, size_t n);
/* x: [n], in place: the activation of a feed-forward sublayer (relu_forward
 * for TFM_ACT_RELU; x * sigmoid(x) for swish; x * sigmoid(1.702 x) for
 * gelu-sigmoid), the same bits on every instruction set. */
void activation_forward(tfm_activation act, float *x, size_t n);
/* d, z: [n]; d, IN PLACE, becomes the gradient of the activation's input z
 * from that of its output (relu: relu_backward, z or its output alike). */
void activation_backward(tfm_activation act, float *d, const float *z, size_t n);

/* d: [n], IN PLACE: the gradient of relu_forward's output becomes that of its
 * input (zero where the output y [n] is 0). */
void relu_backward(float *d, const float *y, size_t n);

/* x: [n], in place: x += y, a sublayer's residual connection. */
void residual_forward(float *x, const float *y, size_t n);

/* ---- layer_norm.c --------------------------------------------------------- */

/* out, inp: [N, D]; weight, bias: [D].  out = (inp - mean) / sqrt(var + eps)
 * * weight + bias per row, with the biased variance (as PyTorch).  out may
 * equal inp.  mean, rstd: [N] or NULL; when given they receive each row's
 * mean and 1/sqrt(var + eps), which the backward pass needs. */
void layer_norm_forward(float *out, float *mean, float *rstd, const float *inp,
                        const float *weight, const float *bias, int N, int D, float eps);

/* The gradients of layer_norm_forward: dinp [N, D], dweight and dbias [D]
 * accumulate; dout: [N, D]; inp: the forward's input [N, D]; mean, rstd:
 * [N], as the forward saved them.  dinp must not overlap dout. */
void layer_norm_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                         const float *inp, const float *mean, const float *rstd,
                         const float *weight, int N, int D);

/* The two ends of a sublayer, for both norm placements, so the encoder and
 * decoder say "sublayer" once:
 *   pre-norm  (x + Sublayer(LayerNorm(x))): sublayer_input returns LN(x),
 *             written to y; sublayer_output does x += sub.
 *   post-norm (LayerNorm(x + Sublayer(x))): sublayer_input returns x itself;
 *             sublayer_output does x = LN(x + sub).
 * x, y, sub: [N, D]; weight, bias: the sublayer's LayerNorm [D]. */
const float *sublayer_input(float *y, const float *x, const float *weight, const float *bias,
                            int N, int D, float eps, bool pre_norm);
void sublayer_output(float *x, const float *sub, const float *weight, const float *bias, int N,
                     int D, float eps, bool pre_norm);

/* ---- softmax.c ------------------------------------------------------------ */

/* x: [n], in place.  Subtracts the row maximum first, so logits of any
 * finite size give weights that sum to 1.  n >= 1. */
void softmax_forward(float *x, int n);

/* dx, dy, y: [n]; y = softmax_forward's output.  dx accumulates the
 * gradient of its input: y * (dy - <dy, y>).  dx must not overlap dy. */
void softmax_backward(float *dx, const float *dy, const float *y, int n);

/* x: [N, n], in place: log-softmax of each row (x - max - log sum exp(x - max)). */
void log_softmax_forward(float *x, int N, int n);

/* x: [N, n], n >= 1; stats: [N].  Each row's maximum, the first index
 * holding it, and log sum exp(x - max): the log-softmax without writing it
 * (log_prob[v] = (x[v] - max) - log_sum, bit for bit as log_softmax_forward). */
void logit_stats(const float *x, int N, int n, tfm_logit_stats *stats);

/* x: [N, n], in place: the log-softmax of each row from its logit_stats. */
void log_softmax_apply(float *x, int N, int n, const tfm_logit_stats *stats);

/* x: [n], in place: x = exp(x) for x <= 0, four lanes at a time (the
 * log-softmax's exp; below -87 it gives ~1.6e-38 rather than a subnormal).
 * Turns log-probabilities back into probabilities. */
void exp_nonpositive(float *x, size_t n);

/* ---- attention.c: scaled dot-product attention, all heads ------------------ */

/* Which keys a query sees.  Query i sits at position q_pos + i; keys are
 * numbered 0 .. n_k-1.  Query i sees keys j in [lo(i), hi(i)]:
 *   lo(i) = window > 0 ? max(0, q_pos + i - window) : 0
 *   hi(i) = causal ? q_pos + i
 *         : window > 0 ? min(n_k - 1, q_pos + i + window) : n_k - 1
 * so the encoder's restricted attention is |i - j| <= window and the
 * decoder's is j in [i - window, i]. */
typedef struct attention_mask {
    int q_pos;
    bool causal;
    int window;
} attention_mask;

/* Relative position representations (Shaw, Uszkoreit and Vaswani, 2018,
 * equations 3 and 4): the key at position j, seen from the query at
 * position i, has the row K + clip(j - i, -K, K) of two learned tables
 * added, a^K to the key inside the logit and a^V to the value inside the
 * weighted sum:
 *   e_ij = q_i (k_j + a^K_ij)^T / sqrt(Dh),  z_i = sum_j alpha_ij (v_j + a^V_ij).
 * One pair of tables per layer, shared by its heads (each head reads the
 * whole row of Dh floats).  The kernels take NULL for no relative positions. */
typedef struct attention_relative {
    const float *keys;   /* [2K+1, Dh] a^K */
    const float *values; /* [2K+1, Dh] a^V */
    int clip;            /* K >= 1 */
} attention_relative;

/* The gradients of the two tables, [2K+1, Dh] each; they accumulate. */
typedef struct attention_relative_grad {
    float *keys, *values;
} attention_relative_grad;

/* The rows of a relative table: 2K + 1 (0 without relative positions). */
static inline int attention_relative_rows(int clip) { return clip > 0 ? 2 * clip + 1 : 0; }

/* The relative tables of attention a (K = clip), in *rel; NULL when it has
 * none (encoder-decoder attention, or a model without relative positions). */
static inline const attention_relative *attention_relative_of(attention_relative *rel,
                                                              const tfm_attention *a, int clip)
{
    if (!a->relative_keys) return NULL;
    *rel = (attention_relative){a->relative_keys, a->relative_values, clip};
    return rel;
}

/* How the weights of one head are kept (for inspection and the backward
 * pass): row i holds the keys [first(i), first(i) + width), 0 where
 * masked or outside [0, n_k).  Full attention, or a window that reaches
 * as far as n_k keys, keeps the whole [n_q, n_k] matrix (width n_k, first
 * 0); a narrower window keeps its band only (width 2 window + 1, or
 * window + 1 when causal; first(i) = q_pos + i - window), so restricted
 * attention holds O(window * n) weights, never n x n. */
int attention_band_width(int n_k, attention_mask mask);
int attention_band_first(attention_mask mask, int i, int n_k);

/* Floats of the weights of H heads: H * n_q * attention_band_width. */
size_t attention_weights_size(int n_q, int n_k, int H, attention_mask mask);

/* dense: [H, n_q, n_k] receives the weights att ([H, n_q, width], as
 * attention_forward keeps them), 0 outside each row's band: the matrix
 * inspect-attn shows. */
void attention_weights_expand(float *dense, const float *att, int n_q, int n_k, int H,
                              attention_mask mask);

/* Floats of scratch attention_forward needs for n_q queries and n_k keys
 * (rel_clip: the relative tables' K, 0 for none). */
size_t attention_scratch_size(int n_q, int n_k, attention_mask mask, int rel_clip);

/* Multi-head attention of one sequence: out_h = softmax(q_h k_h^T / sqrt(Dh)) v_h
 * for each head h, the column slice [h*Dh, (h+1)*Dh) of q, k, v and out,
 * with relative positions when rel is not NULL.
 *   out: [n_q, H*Dh] rows ldo apart      q: [n_q, H*Dh] rows ldq apart
 *   k:   [n_k, H*Dh] rows ldk apart      v: [n_k, H*Dh] rows ldv apart
 *   rel: NULL, or the tables [2K+1, Dh] (keys q_pos + i and j are i and j's positions)
 *   scratch: attention_scratch_size(n_q, n_k, mask, K) floats
 *   att: [H, n_q, width] (attention_band_width) or NULL; receives the
 *        attention weights, exactly 0 where masked (for inspect-attn and
 *        the backward pass).
 * The queries go in blocks, and each block multiplies only the keys its
 * mask lets it see (sgemm calls with leading dimensions): with a window
 * the work is O(window * n * D), not O(n^2 * D), and causal attention
 * skips the keys after a block.  A query that sees no key at all
 * (n_k == 0) gets a zero output. */
void attention_forward(float *out, int ldo, const float *q, int ldq, const float *k, int ldk,
                       const float *v, int ldv, int n_q, int n_k, int H, int Dh,
                       attention_mask mask, const attention_relative *rel, float *scratch,
                       float *att);

/* Floats of scratch attention_dropout_forward needs. */
size_t attention_dropout_scratch_size(int n_q, int n_k, attention_mask mask, int rel_clip);

/* Dropout on the attention weights (training): att [H, n_q, width] as
 * attention_forward left it; draws keep (laid out as att) from rng, head
 * by head and row by row, and recomputes out [n_q, H*Dh] (rows ldo apart)
 * = Dropout(att_h) (v_h + a^V) per head, att itself unchanged.
 * v: [n_k, H*Dh] rows ldv apart; rel: as attention_forward's; scratch:
 * attention_dropout_scratch_size floats.  p in (0, 1). */
void attention_dropout_forward(float *out, int ldo, const float *v, int ldv, const float *att,
                               uint8_t *keep, int n_q, int n_k, int H, int Dh,
                               attention_mask mask, const attention_relative *rel, float p,
                               tfm_rng *rng, float *scratch);

/* Floats of scratch attention_backward needs. */
size_t attention_backward_scratch_size(int n_q, int n_k, attention_mask mask, int rel_clip);

/* The gradients of attention_forward (and attention_dropout_forward) for one
 * sequence.  dq, dk, dv accumulate and are laid out as q, k, v (rows ldq,
 * ldk, ldv apart), so one [n, 3D] buffer takes the gradients of a fused
 * q,k,v matrix; drel: the relative tables' gradients (accumulate; NULL
 * when rel is NULL); dout: [n_q, H*Dh] rows ldo apart; q, k, v, mask and
 * rel as the forward got them; att: [H, n_q, width] the weights the
 * forward kept; keep: the dropout mask, or NULL without attention dropout
 * (p is then ignored); scratch: attention_backward_scratch_size floats.
 * It goes block by block as the forward does, so a window costs
 * O(window * n * D) here too.  Keys past n_k (a longer buffer's padding)
 * are never read or written. */
void attention_backward(float *dq, float *dk, float *dv, const attention_relative_grad *drel,
                        const float *dout, int ldo, const float *q, int ldq, const float *k,
                        int ldk, const float *v, int ldv, const float *att, const uint8_t *keep,
                        float p, int n_q, int n_k, int H, int Dh, attention_mask mask,
                        const attention_relative *rel, float *scratch);

/* One query against n_k keys, all visible (the incremental decoder: the
 * caller slices the window).  out, q: [H*Dh]; k, v: [n_k, H*Dh] rows ldk,
 * ldv apart; rel: NULL, or the tables with d0 the distance of key 0 from
 * the query (key j is at distance d0 + j); scratch: H n_k + 2K + 1 floats. */
void attention_row_forward(float *out, const float *q, const float *k, int ldk, const float *v,
                           int ldv, int n_k, int H, int Dh, const attention_relative *rel,
                           int d0, float *scratch);
/* The same with k and v in bfloat16 (the cache of a decoder computing in
 * int8 or bf16): each value widened exactly, float32 sums, in another order
 * than attention_row_forward's (attention.c says why), so the two agree to
 * float rounding, not bit for bit.  scratch: H n_k + 2 H Dh + 2K + 1
 * floats. */
void attention_row_forward_bf16(float *out, const float *q, const uint16_t *k, int ldk,
                                const uint16_t *v, int ldv, int n_k, int H, int Dh,
                                const attention_relative *rel, int d0, float *scratch);

/* ---- relative.c: relative position representations --------------------------- */

/* The parts of attention_forward and attention_backward that relative
 * positions add, for a block of m queries (one head's column slice, rows
 * ld apart) against a band of nk keys: query r against key c is at
 * distance d0 + c - r.  Each needs u: [m, 2K+1] scratch.  Shaw et al.'s
 * efficient form: the logits' part is one product q a^K^T [m, 2K+1]
 * gathered into the [m, nk] scores by bucket, the values' part one product
 * of the weights summed per bucket [m, 2K+1] with a^V.
 *   relative_logits:  scores [m, nk] (rows nk apart) += scale q_r a^K_bucket
 *   relative_values:  out [m, Dh] (rows ldo apart) += sum_c w_rc a^V_bucket,
 *                     w: [m, nk] the weights (rows nk apart)
 *   relative_values_backward: dvalues += the bucket sums of w (rows ldw
 *                     apart), transposed, times dout; dw [m, nk] += dout a^V_bucket
 *   relative_logits_backward: dq [m, Dh] (rows ldq apart) and dkeys
 *                     accumulate the gradients through ds [m, nk], the
 *                     gradient of the (scaled) logits */
void relative_logits(float *scores, int m, int nk, const float *q, int ldq,
                     const attention_relative *rel, int Dh, float scale, int d0, float *u);
void relative_values(float *out, int ldo, const float *w, int m, int nk,
                     const attention_relative *rel, int Dh, int d0, float *u);
void relative_values_backward(float *dw, float *dvalues, const float *w, int ldw,
                              const float *dout, int ldo, int m, int nk,
                              const attention_relative *rel, int Dh, int d0, float *u);
void relative_logits_backward(float *dq, int ldq, float *dkeys, const float *ds, const float *q,
                              int m, int nk, const attention_relative *rel, int Dh, float scale,
                              int d0, float *u);

/* The same for one query and all its heads, without the BLAS (decoding's
 * products are too small for it): scores [H, n] += scale q_h a^K_bucket(d0 + j);
 * out [H*Dh] += per head, sum_j w[h n + j] a^V_bucket(d0 + j).  u: 2K+1 floats. */
void relative_row_logits(float *scores, const float *q, int n, int H, int Dh,
                         const attention_relative *rel, float scale, int d0, float *u);
void relative_row_values(float *out, const float *w, int n, int H, int Dh,
                         const attention_relative *rel, int d0, float *u);

/* ---- embedding.c ------------------------------------------------------------ */

/* table: [n_pos, D]; rows [from, n_pos) receive the paper's sinusoidal
 * encoding: PE(pos, 2i) = sin(pos / 10000^(2i/D)), PE(pos, 2i+1) = cos(...);
 * concat: the same sines in dimensions [0, D/2) and cosines in [D/2, D)
 * (TFM_POS_SINUSOIDAL_CONCAT, Marian's layout). */
void positions_sinusoidal(float *table, int from, int n_pos, int D, bool concat);

/* *table: the position table of kind covering positions [0, n): learned
 * ([max_positions, D]) for TFM_POS_LEARNED, NULL for TFM_POS_NONE, else
 * sinusoids kept in cache, of which the first *cached rows are computed
 * already; the table grows (and *cached with it) as longer sentences come,
 * so a model allowing a million positions costs only the positions used.
 * false when memory runs out. */
bool positions_table(tfm_pos_kind kind, const float *learned, tfm_buf *cache, int *cached, int n,
                     int D, const float **table);

/* out: [N, D]; ids: [N] (checked by the caller to be < V); embed: [V, D];
 * positions: [n_pos, D] (sinusoidal or learned), or NULL: none.  Row i is
 * at position pos0 + i * pos_step (pos_step 1: a sentence; 0: decoder rows
 * at one step): out[i] = embed[ids[i]] * sqrt(D) + positions[pos0 + i * pos_step],
 * but for ids[i] == zero_id, whose embedding is taken as zeros (a decoder
 * that starts from a zero vector: config.decoder_start_zero; -1: none). */
void embedding_forward(float *out, const int32_t *ids, const float *embed,
                       const float *positions, int pos0, int pos_step, int N, int D,
                       int32_t zero_id);

/* The id whose embedding the decoder takes as zeros (embedding_forward's
 * zero_id): c->bos_id when c->decoder_start_zero, else -1. */
int32_t embedding_zero_id(const tfm_config *c);

/* The gradients of embedding_forward: dembed [V, D] gathers sqrt(D) * dout
 * into the rows of the ids, dpositions [n_pos, D] (NULL for sinusoids,
 * which learn nothing) gathers dout into the rows of the positions; both
 * accumulate.  dout: [N, D]. */
void embedding_backward(float *dembed, float *dpositions, const int32_t *ids, const float *dout,
                        int pos0, int pos_step, int N, int D, int32_t zero_id);

/* ---- dropout.c ---------------------------------------------------------------- */

/* x: [n], in place: each value zeroed with probability p, survivors scaled
 * by 1 / (1 - p); keep: [n] receives the mask (1 kept, 0 dropped), drawn
 * from rng in order.  p in [0, 1); p == 0 is the identity and touches
 * neither keep (may be NULL) nor rng. */
void dropout_forward(float *x, uint8_t *keep, size_t n, float p, tfm_rng *rng);

/* dx, dy, keep: [n].  dx += dy * keep / (1 - p): the same linear map as the
 * forward, so it also applies a saved mask to any values.  p == 0: dx += dy. */
void dropout_backward(float *dx, const float *dy, const uint8_t *keep, size_t n, float p);

/* x: [n], in place: x *= keep / (1 - p), keep [n] a saved mask: the
 * multiplication of dropout_forward, so the same bits as it gave; and, the
 * map being linear and diagonal, dropout's backward too.  p == 0: nothing. */
void dropout_apply(float *x, const uint8_t *keep, size_t n, float p);

/* r: seeded as the generator number index of a dropout site whose seed is
 * seed (one draw of the step's generator), for masks drawn piece by piece
 * on threads: each piece (a chunk of rows, a sentence) draws from its own
 * generator, so the masks depend on seed and the pieces, not on the threads. */
void dropout_stream(tfm_rng *r, uint64_t seed, uint64_t index);

/* ---- loss.c: label-smoothed cross-entropy ----------------------------------------- */

/* Per row of log-probabilities logp [N, V] (log_softmax_forward's output)
 * and its label: nll = -logp[label] and
 *     loss = (1 - eps) nll - eps / V * sum_v logp[v]
 * (fairseq's label_smoothed_nll_loss; see loss.c).  loss, nll: [N],
 * written; 0 for rows whose label is ignore (the padding id). */
void label_smoothed_loss_forward(double *loss, double *nll, const float *logp,
                                 const int32_t *labels, int N, int V, float eps, int32_t ignore);

/* IN PLACE: logp [N, V] becomes the gradient of scale * sum(loss) with
 * respect to the LOGITS the log-softmax read (the log-softmax's backward is
 * fused in): scale * (p - q) with p = exp(logp) and q the smoothed target;
 * zero rows for ignored labels.  In place because the [N, V] logits are the
 * largest activation of a training step. */
void label_smoothed_loss_backward(float *logp, const int32_t *labels, int N, int V, float eps,
                                  int32_t ignore, float scale);

/* ---- packed.c: inference's linear layers with weights packed once ---------------- */

/* The kernels of packed.c (float32) and quant.c (int8, bf16). */
typedef enum nn_kernel {
    NN_KERNEL_SGEMM,         /* float32, nothing packed: cblas_sgemm */
    NN_KERNEL_AVX2,          /* float32: AVX2 and FMA, panels of 16 outputs */
    NN_KERNEL_AVX512,        /* float32: AVX-512, panels of 32 outputs */
    NN_KERNEL_INT8_C,        /* int8: plain C (any CPU) */
    NN_KERNEL_INT8_AVX2,     /* int8: AVX2 (vpmaddubsw) */
    NN_KERNEL_INT8_AVX512BW, /* int8: AVX-512BW without VNNI (vpmaddubsw) */
    NN_KERNEL_INT8_VNNI,     /* int8: AVX-512 VNNI (vpdpbusd) */
    NN_KERNEL_BF16_C,        /* bf16: plain C (any CPU) */
    NN_KERNEL_BF16_AVX2,     /* bf16: AVX2, weights widened to float32 */
    NN_KERNEL_BF16_AVX512BW, /* bf16: AVX-512BW without BF16, weights widened */
    NN_KERNEL_BF16_AVX512,   /* bf16: AVX-512 BF16 (vdpbf16ps) */
} nn_kernel;

/* A linear layer W [N, K], bias [N] (may be NULL) for few rows at a time:
 * panels is the packed copy for kernel: floats (NN_KERNEL_AVX2, _AVX512),
 * int8 with scale [N] and col_sums [N] (each output's sum of its q, for
 * VNNI; both padded to whole panels), or bf16 (quant.c says how they lie);
 * NULL for NN_KERNEL_SGEMM: then the original weight goes to sgemm.
 * weight and bias are not owned; weight is NULL for int8 and bf16. */
typedef struct nn_packed_linear {
    const float *weight;
    const float *bias;
    void *panels;
    float *scale;
    int32_t *col_sums;
    int N, K;
    nn_kernel kernel;
    bool borrowed; /* panels, scale and col_sums are not owned (nn_borrow_panels) */
    bool wide;     /* float32 panels 32 wide under the AVX2 kernel (borrowed) */
} nn_packed_linear;

/* panel.c: a matrix W [N, K] row by row (floats, int8 with its row scales
 * [N], or bf16 as type says) and its panels of NN_PANEL_WIDTH outputs: the
 * layout of AVX-512's float kernel and of every int8 and bf16 kernel
 * (packed.c and quant.c say how they lie), which a packed model file holds.
 * nn_panel_make makes panel pi ([nn_panel_words] words) and, for int8, its
 * [NN_PANEL_WIDTH] scales and column sums (zeros past N). */
enum { NN_PANEL_WIDTH = 32 };
typedef struct nn_panel_rows {
    const void *rows;
    const float *scale;
    int N, K;
    tfm_compute_type type;
} nn_panel_rows;
size_t nn_panel_count(const nn_panel_rows *p);
size_t nn_panel_words(const nn_panel_rows *p);
void nn_panel_make(const nn_panel_rows *p, size_t pi, uint32_t *panel, float *scale,
                   int32_t *sums);
/* Every panel of p, one after another: panels [nn_panel_count x
 * nn_panel_words] words, and for int8 scale and sums [nn_panel_count x
 * NN_PANEL_WIDTH] (else NULL). */
void nn_panels_make(const nn_panel_rows *p, uint32_t *panels, float *scale, int32_t *sums);

/* Points p at panels made by nn_panel_make (not owned: they must outlive p,
 * and nn_packed_linear_free leaves them), with int8's scales and column sums
 * [whole panels], for kernel: a float32 kernel (AVX2 reads the 32-wide
 * panels as two of 16) or one of type's.  A float32 kernel this CPU cannot
 * run is TFM_ERR_ARG. */
tfm_status nn_borrow_panels(nn_packed_linear *p, const void *panels, const float *scale,
                            const int32_t *sums, const float *bias, int N, int K,
                            nn_kernel kernel);

/* The fastest kernel this CPU runs, or a slower one when the environment
 * says TFM_ISA=avx2 or TFM_ISA=none. */
nn_kernel nn_packed_best_kernel(void);

/* Whether this CPU can run kernel. */
bool nn_packed_kernel_runs(nn_kernel kernel);

/* The fastest int8 or bf16 kernel this CPU runs (for int8, less when the
 * environment says TFM_ISA=avx512bw, avx2 or none; none: the C kernel). */
nn_kernel nn_quant_best_kernel(tfm_compute_type type);

/* Packs weight for nn_packed_forward with the best float32 kernel, or with
 * the one given (NN_KERNEL_SGEMM if this CPU cannot run it).  TFM_ERR_NOMEM. */
tfm_status nn_pack_linear(nn_packed_linear *p, const float *weight, const float *bias, int N,
                          int K);
tfm_status nn_pack_linear_for(nn_packed_linear *p, const float *weight, const float *bias, int N,
                              int K, nn_kernel kernel);
void nn_packed_linear_free(nn_packed_linear *p);

/* dst: the columns cols[0..n) of src (outputs of W; each in [0, src->N)), in
 * that order, packed for src's kernel, with their int8 scales and biases: each output
 * then computes bit for bit what it computes in src (a lexical shortlist's
 * output layer, tfm_decoder_restrict).  dst's arrays live in memory (grown
 * as needed, reused by the next gather): dst is not for
 * nn_packed_linear_free, and lasts until memory changes.  TFM_ERR_ARG when
 * src has no panels (sgemm), or n <= 0; TFM_ERR_NOMEM. */
tfm_status nn_packed_gather(nn_packed_linear *dst, const nn_packed_linear *src,
                            const int32_t *cols, int n, tfm_buf *memory);

/* The bytes of scratch nn_packed_forward needs for p, whatever R (0 for
 * the float32 kernels). */
size_t nn_packed_scratch_bytes(const nn_packed_linear *p);

/* out [R, N] = x [R, K] W^T + bias, as linear_forward (rounded differently:
 * FMA, another order of the sums; for int8 and bf16 from the quantized
 * values); scratch: nn_packed_scratch_bytes(p) bytes (NULL when 0). */
void nn_packed_forward(float *out, const float *x, const nn_packed_linear *p, int R,
                       void *scratch);

/* The helper (tfm_helper) the packed products may halve their panels
 * with, for the whole process, or NULL (the default): the same results
 * either way. */
void nn_packed_set_helper(tfm_helper *helper);

/* nn_packed_forward and each row's logit statistics (as logit_stats gives
 * them, rounded differently: the sum is gathered panel by panel, rescaled as
 * the maximum grows), taken while the logits are in the cache.
 * stats: [R]; sums: [R, NN_STATS_SUMS] scratch, or NULL for the maximum and
 * its argmax alone (no exponential taken; log_sum NaN, or computed when p
 * is not packed). */
enum { NN_STATS_SUMS = 4 };
void nn_packed_forward_stats(float *out, const float *x, const nn_packed_linear *p, int R,
                             void *scratch, tfm_logit_stats *stats, double *sums);

/* out [R, n_out] = in [R, n_in] W^T + bias (W [n_out, n_in]) with packed
 * when it is not NULL, else linear_forward. */
void packed_or_linear_forward(float *out, const float *in, const nn_packed_linear *packed,
                              void *scratch, const float *weight, const float *bias, int R,
                              int n_in, int n_out);

/* ---- quant.c: int8 and bf16 weights and their kernels ------------------------------ */

/* Outputs per panel of the int8 and bf16 layouts. */
enum { QUANT_WIDTH = 32 };

/* Symmetric int8 per row: scale[n] = max_k |w[n][k]| / 127 and q[n][k] =
 * w[n][k] * 127 / max_k |w[n][k]| rounded to nearest (ties to even) in
 * [-127, 127], so w ~ q * scale (a row of zeros: scale 0, q 0).
 * w, q: [N, K]; scale: [N]. */
void nn_quantize_int8(int8_t *q, float *scale, const float *w, size_t N, size_t K);
/* w [N, K] = q * scale, row by row. */
void nn_dequantize_int8(float *w, const int8_t *q, const float *scale, size_t N, size_t K);

/* bf16: the upper half of a float32, rounded to nearest (ties to even); a
 * NaN stays a NaN. */
uint16_t nn_bf16_round(float x);
static inline float nn_bf16_to_float(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
void nn_round_bf16(uint16_t *out, const float *x, size_t n);
void nn_bf16_to_floats(float *out, const uint16_t *in, size_t n);

/* Packs int8 weights q [N, K] with their row scales [N] (or bf16 weights w
 * [N, K]) for kernel, an int8 (bf16) one.  TFM_ERR_NOMEM. */
tfm_status nn_pack_int8(nn_packed_linear *p, const int8_t *q, const float *scale,
                        const float *bias, int N, int K, nn_kernel kernel);
tfm_status nn_pack_bf16(nn_packed_linear *p, const uint16_t *w, const float *bias, int N, int K,
                        nn_kernel kernel);

bool nn_kernel_is_int8(nn_kernel k);
bool nn_kernel_is_bf16(nn_kernel k);

/* The bytes of one row of x as an int8 or bf16 kernel reads it. */
size_t nn_quant_row_bytes(const nn_packed_linear *p);
/* x [rows, K] (rows ldx apart) as p's kernel reads it: xq gets rows of
 * nn_quant_row_bytes (int8: quantized as nn_quantize_int8 does, each row's
 * scale in xs [rows]; bf16: rounded, xs unused). */
void nn_quant_prepare(const nn_packed_linear *p, const float *x, size_t ldx, int rows, void *xq,
                      float *xs);

/* A kernel's block: out [rows, cols] (rows ldo apart) = the prepared rows
 * xq (row_bytes apart; scales xs) times panel pi of p, plus bias; rows at
 * most what nn_quant_block says, cols at most QUANT_WIDTH. */
typedef void nn_quant_block_fn(float *out, size_t ldo, const void *xq, size_t row_bytes,
                               const float *xs, int rows, const nn_packed_linear *p, int pi,
                               int cols);
/* The block function of an int8 or bf16 kernel and its rows at most. */
nn_quant_block_fn *nn_quant_block(nn_kernel k, int *rows);

/* A layer's linear maps packed: an encoder layer uses self_qkv, self_out,
 * fc1 and fc2; a decoder layer all of them (cross_kv: the encoder-decoder
 * attention's k and v together, [2D, D], applied to the sources). */
typedef struct nn_packed_layer {
    nn_packed_linear self_qkv, self_out, cross_q, cross_kv, cross_out, fc1, fc2;
} nn_packed_layer;

/* A model's packed weights (tfm_model_pack_for_encoding, _for_decoding, and
 * tfm_packed_model_free: lib/model/model_packed.c). */
struct tfm_packed_model {
    int n_encoder_layers, n_decoder_layers;
    nn_packed_layer *encoder; /* [n_encoder_layers], or NULL: not packed */
    nn_packed_layer *decoder; /* [n_decoder_layers], or NULL: not packed */
    nn_packed_linear output;  /* the output projection, no bias; with decoder */
    size_t scratch_bytes;     /* the scratch its products need at most */
};
typedef struct tfm_packed_model tfm_packed_model;

void tfm_packed_model_free(tfm_packed_model *pm);

/* out [N, D] = FFN(inp [N, D]) = act(inp fc1^T + b1) fc2^T + b2, with P's
 * packed fc1 and fc2 when P is not NULL (scratch: tfm_packed_model's
 * scratch_bytes), else linear_forward; hidden: [N, F] scratch.  The
 * feed-forward of inference's encoder and decoder layers. */
void packed_ffn_forward(float *out, float *hidden, const float *inp, const nn_packed_layer *P,
                        void *scratch, const tfm_linear *fc1, const tfm_linear *fc2, int N, int D,
                        int F, tfm_activation act);

/* ---- four float lanes ------------------------------------------------------------ */

/* GCC/Clang vector extensions: SSE (or NEON) code from plain C, without
 * intrinsics or special flags, for the few elementwise loops the compiler
 * would not vectorise at -O2 (softmax.c's exp, linear.c's ReLU mask). */
typedef float nn_f32x4 __attribute__((vector_size(16)));
typedef int32_t nn_i32x4 __attribute__((vector_size(16)));

static inline nn_f32x4 nn_load4(const float *p)
{
    nn_f32x4 v;
    memcpy(&v, p, sizeof v); /* unaligned load */
    return v;
}

static inline void nn_store4(float *p, nn_f32x4 v) { memcpy(p, &v, sizeof v); }

/* Eight float lanes, for the loops of inference's hot path (softmax.c,
 * attention.c).  Plain x86-64 lowers them to two SSE operations;
 * NN_MULTIVERSION compiles a function a second time for AVX2, picked at load
 * time when the CPU has it.  Both versions do the same IEEE operations in
 * the same order (C11 mode never fuses a multiply and an add), so their
 * results are identical.  -DNN_NO_MULTIVERSION builds the plain version only
 * (make check's sanitizer build does, so the tests cover both). */
typedef float nn_f32x8 __attribute__((vector_size(32)));
typedef int32_t nn_i32x8 __attribute__((vector_size(32)));
/* Sixteen, for the few loops that gain from AVX-512's width (packed.c's
 * logit statistics); other instruction sets split them, lane by lane alike. */
typedef float nn_f32x16 __attribute__((vector_size(64)));
typedef int32_t nn_i32x16 __attribute__((vector_size(64)));

/* GCC only: Clang 14 does not resolve calls from other files to a cloned
 * function, so a Clang build (make fuzz) runs the plain version. */
#if defined(__x86_64__) && defined(__has_attribute) && !defined(__clang__)
#if __has_attribute(target_clones) && !defined(NN_NO_MULTIVERSION)
#define NN_MULTIVERSION __attribute__((target_clones("avx2", "default")))
#endif
#endif
#ifndef NN_MULTIVERSION
#define NN_MULTIVERSION
#endif
/* The instruction set of the sixteen-lane functions (NN_VERSIONS_512):
 * AVX-512 or AVX2 where the CPU has it, less when TFM_ISA in the environment
 * asks for less (avx2; none: plain), as it does for the matrix kernels, so
 * that TFM_ISA=avx2 on an AVX-512 CPU runs what an AVX2 CPU runs. */
typedef enum nn_isa { NN_ISA_PLAIN, NN_ISA_AVX2, NN_ISA_AVX512 } nn_isa;
nn_isa nn_isa_level(void);

/* What TFM_ISA in the environment asks for: no more than AVX-512BW
 * (avx512bw: the int8 and bf16 kernels without VNNI or BF16), than AVX2
 * (avx2) or than plain C (none); any other value, or none set, asks for
 * nothing (NN_ASKED_ANY).  The one reader of TFM_ISA.  It is read once,
 * at the first call of this or nn_isa_level, and kept; a test that changes
 * TFM_ISA calls nn_isa_forget after it. */
typedef enum nn_isa_asked {
    NN_ASKED_ANY,
    NN_ASKED_AVX512BW,
    NN_ASKED_AVX2,
    NN_ASKED_PLAIN
} nn_isa_asked;
nn_isa_asked nn_isa_asked_for(void);
void nn_isa_forget(void);

/* NN_VERSIONS_512(qualifiers, name, (parameters), (arguments)) defines the
 * void function name(parameters) as name##_body(isa, arguments) (an
 * NN_INLINE function of an nn_isa and the same parameters) compiled three
 * times, for AVX-512, for AVX2 and plain, each with its isa as a constant
 * (a body may choose its vector width by it), and calls the one
 * nn_isa_level picks.  The versions make the same IEEE operations in the
 * same order, so they give the same bits.  Built without GCC's target
 * attribute on x86-64 (Clang, -DNN_NO_MULTIVERSION, other CPUs): the plain
 * one alone. */
#define NN_UNPACK(...) __VA_ARGS__
#if defined(__x86_64__) && defined(__has_attribute) && !defined(__clang__) &&                   \
    !defined(NN_NO_MULTIVERSION)
#define NN_VERSIONS_512(qual, name, params, args)                                                 \
    __attribute__((target("avx512f"))) static void name##_avx512 params                        \
    {                                                                                          \
        name##_body(NN_ISA_AVX512, NN_UNPACK args);                                            \
    }                                                                                          \
    __attribute__((target("avx2"))) static void name##_avx2 params                             \
    {                                                                                          \
        name##_body(NN_ISA_AVX2, NN_UNPACK args);                                              \
    }                                                                                          \
    static void name##_plain params { name##_body(NN_ISA_PLAIN, NN_UNPACK args); }             \
    qual void name params                                                                      \
    {                                                                                          \
        switch (nn_isa_level()) {                                                              \
        case NN_ISA_AVX512: name##_avx512 args; break;                                         \
        case NN_ISA_AVX2: name##_avx2 args; break;                                             \
        default: name##_plain args; break;                                                     \
        }                                                                                      \
    }
#else
#define NN_VERSIONS_512(qual, name, params, args)                                                 \
    qual void name params { name##_body(NN_ISA_PLAIN, NN_UNPACK args); }
#endif

/* For helpers of NN_MULTIVERSION functions: inlined into each version, so
 * they are compiled for its instruction set. */
#define NN_INLINE static inline __attribute__((always_inline))

/* Unaligned loads and stores of eight floats.  Macros rather than functions:
 * Clang refuses to pass eight-lane vectors by value to or from a function
 * compiled without AVX, even one always inlined, so no helper here takes or
 * returns one (they take pointers). */
typedef float nn_f32x8u __attribute__((vector_size(32), aligned(4), may_alias));
#define nn_load8(p) (*(const nn_f32x8u *)(const void *)(p))
typedef float nn_f32x16u __attribute__((vector_size(64), aligned(4), may_alias));
#define nn_load16(p) (*(const nn_f32x16u *)(const void *)(p))
#define nn_store8(p, v) (*(nn_f32x8u *)(void *)(p) = (v))

/* The sum of the eight lanes of *v, in a fixed order. */
NN_INLINE float nn_sum8(const nn_f32x8 *v)
{
    const nn_f32x8 a = *v;
    return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
}

/* exp(x) for x <= 0, eight lanes: Cephes' expf.  x = n ln2 + r with n an
 * integer and |r| <= ln2/2 (ln2 split in two constants so n ln2 is exact),
 * exp(r) by a degree-6 polynomial, 2^n built in the exponent bits.  Relative
 * error below 1e-7 on [-87, 0] (measured against double exp).  Inputs below
 * -87 (and -inf, a masked score) give exactly 0: no subnormals, and a masked
 * attention weight is exactly 0. */
#define NN_DEFINE_EXP_NONPOSITIVE(name, F, I)                                           \
    NN_INLINE void name(F *xp)                                                          \
    {                                                                                   \
        F x = *xp;                                                                      \
        const F floor_value = x - x - 87.0f;                                            \
        I low = x < floor_value;                                                        \
        x = (F)(((I)x & ~low) | ((I)floor_value & low));                                \
        /* round x / ln2 to the nearest integer: adding 1.5 * 2^23 pushes the          \
         * fraction bits out of the float, subtracting it brings the integer back */   \
        F n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;                   \
        F r = x - n * 0.693359375f + n * 2.12194440e-4f;                                \
        F p = r * 1.9875691500e-4f + 1.3981999507e-3f;                                  \
        p = p * r + 8.3334519073e-3f;                                                   \
        p = p * r + 4.1665795894e-2f;                                                   \
        p = p * r + 1.6666665459e-1f;                                                   \
        p = p * r + 5.0000001201e-1f;                                                   \
        p = p * r * r + r + 1.0f;                                                       \
        I two_n = (__builtin_convertvector(n, I) + 127) << 23; /* the bits of 2^n */    \
        *xp = (F)((I)(p * (F)two_n) & ~low); /* 0 below -87 */                          \
    }
NN_DEFINE_EXP_NONPOSITIVE(nn_exp8_nonpositive, nn_f32x8, nn_i32x8)
/* The same, sixteen lanes (each lane as nn_exp8_nonpositive computes it). */
NN_DEFINE_EXP_NONPOSITIVE(nn_exp16_nonpositive, nn_f32x16, nn_i32x16)

/* exp(x) of one value x <= 0, as a lane of nn_exp8_nonpositive computes it, so
 * a row's tail gives what its body would. */
NN_INLINE float nn_exp1_nonpositive(float x)
{
    nn_f32x8 v = {x, x, x, x, x, x, x, x};
    nn_exp8_nonpositive(&v);
    return v[0];
}

#endif
