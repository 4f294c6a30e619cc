/* pass/batch.h - the whole model over a packed batch of sentence pairs, for
 * training, scoring and attention inspection (tfm_model_loss,
 * tfm_model_forward_backward, tfm_model_attention): the workspace, its
 * saved activations and their gradients, and the layers as the batch runs
 * them on the workspace's threads.  Internal to lib/pass.
 *
 * The batch is packed as the inference encoder packs it: the sentences' rows
 * lie one after another with no padding, Ns source rows and Nt decoder rows
 * (each target plus one, for <s>).  So every linear layer, norm and FFN is
 * one GEMM over all rows (q, k and v fused into one [3D, D] product), the
 * output projection and the loss are one [Nt, V] GEMM, and attention runs
 * per sentence and head over that sentence's own rows: padding never exists,
 * so it needs no mask and costs nothing.
 *
 * The files, one job each:
 *   batch_workspace.c   the workspace's life, its threads, and the arena
 *                       that carves its buffers (activations, gradients)
 *   batch_pack.c        checking and packing a batch; which rows each
 *                       sentence's attention reads (attention_geometry)
 *   batch_embedding.c   embeddings + positions, forward and backward
 *   batch_layer_norm.c  a LayerNorm over rows, forward and backward
 *   batch_residual.c    a residual sublayer's two ends (dropout, the add,
 *                       the norm), forward and backward
 *   batch_attention.c   self- and encoder-decoder attention, forward and backward
 *   batch_ffn.c         the position-wise FFN, forward and backward
 *   batch_loss.c        log-softmax and label-smoothed loss, forward and backward
 *   batch_model.c       the layers in order: the whole forward and backward
 *                       pass, and the public functions
 * The kernels they call (layers.h) know nothing of batches or threads.
 *
 * Memory lives in three buffers, each carved into named pieces by one layout
 * function that first counts and then places (as params.c does):
 *   index  the packing: row offsets and lengths, attention offsets, the ids
 *   act    the saved activations (struct acts), dropout masks included
 *   grad   the activation gradients of the backward pass (struct grad_acts)
 * The buffers only grow, so once the batch shapes settle a step allocates
 * nothing.
 *
 * Backward follows the llm.c convention: parameter gradients accumulate;
 * activation gradients live in scratch that is zeroed where a kernel
 * accumulates into it.  Shapes: B pairs, Ns and Nt rows, N = max(Ns, Nt),
 * D, H, Dh = D / H, F, V = target vocabulary.
 *
 * Threads (tfm_pass_workspace_set_threads): the GEMMs over all rows use
 * the BLAS's threads; everything between them runs on the workspace's
 * threads, one level at a time.  Attention goes sentence by sentence, each
 * thread with scratch of its own; the norms, dropout, residual adds, the
 * ReLU and the loss go in chunks of rows (batch_row_chunk) fixed by the
 * widths alone.  (Passes that only stream memory, as the bias gradients'
 * sums, the ReLU's backward and zeroing, stay in one thread: a second one
 * was measured not to speed them up.)  Every dropout site draws one number
 * from the step's generator and each chunk of rows, or each sentence, draws
 * its mask from a generator of its own seeded from it (dropout_stream); a
 * LayerNorm's weight and bias gradients are summed per chunk and the chunks
 * added in order.  So the results are the same bit for bit on any number of
 * threads.
 */
#ifndef TFM_PASS_BATCH_H
#define TFM_PASS_BATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "nn/layers.h"
#include "tfm/pass.h"

/* ---- saved activations --------------------------------------------------------------- */

/* One residual sublayer f (self-attention, encoder-decoder attention or the
 * FFN) around the stream x [N, D]:
 *   pre-norm:  out = x + Dropout(f(LN(x)))   (LN's input is x itself)
 *   post-norm: out = LN(x + Dropout(f(x)))   (LN's input is sum) */
typedef struct residual_acts {
    float *norm;        /* [N, D] pre-norm: LN(x), f's input; else NULL */
    float *sum;         /* [N, D] post-norm: x + Dropout(f(x)); else NULL */
    float *mean, *rstd; /* [N] the LayerNorm's statistics */
    uint8_t *keep;      /* [N, D] the dropout mask on f's output; NULL without dropout */
    float *out;         /* [N, D] the stream after the sublayer */
} residual_acts;

/* One multi-head attention, inside its sublayer. */
typedef struct attention_acts {
    float *q;      /* self: [N, 3D] each row's q, k, v; cross: [Nt, D] the queries */
    float *kv;     /* cross only: [Ns, 2D] keys and values of the encoder's output */
    float *att;    /* the weights: sentence b's [H, n_q, width] at the packing's offset
                      (attention_band_width: n_k, or a window's band) */
    uint8_t *keep; /* like att: the attention-dropout mask; NULL without it */
    float *ctx;    /* [N, D] the heads' outputs side by side: out_proj's input */
} attention_acts;

typedef struct encoder_layer_acts {
    attention_acts attn;
    residual_acts r_attn;
    float *hidden;     /* [Ns, F] the FFN's activations after the ReLU; with a gated
                          activation, fc1's output, before it */
    uint8_t *act_keep; /* [Ns, F] a gated activation's activation-dropout mask, for
                          the backward; NULL for relu (whose backward needs none:
                          its mask goes to the scratch acts.act_keep) or without */
    residual_acts r_ffn;
} encoder_layer_acts;

typedef struct decoder_layer_acts {
    attention_acts self;
    residual_acts r_self;
    attention_acts cross;
    residual_acts r_cross;
    float *hidden;     /* [Nt, F] */
    uint8_t *act_keep; /* [Nt, F] as the encoder layer's */
    residual_acts r_ffn;
} decoder_layer_acts;

/* A stack's final LayerNorm (pre-norm only). */
typedef struct norm_acts {
    float *out;         /* [N, D] */
    float *mean, *rstd; /* [N] */
} norm_acts;

/* Marian's LayerNorm of the embeddings (embedding_layer_norm, its
 * --transformer-postprocess-emb nd): between the positions and the dropout.
 * All NULL without it. */
typedef struct embed_norm_acts {
    float *in;          /* [N, D] embeddings * sqrt(D) + positions: the LayerNorm's input */
    float *mean, *rstd; /* [N] its statistics */
} embed_norm_acts;

typedef struct acts {
    embed_norm_acts src_emb_norm; /* [Ns, D] */
    float *src_x;             /* [Ns, D] embeddings * sqrt(D) + positions (then their
                                 LayerNorm, src_emb_norm), after dropout */
    uint8_t *src_keep;        /* [Ns, D] */
    encoder_layer_acts *enc;  /* [n_encoder_layers] (the array is the workspace's) */
    norm_acts enc_norm;       /* [Ns, D] */
    const float *enc_out;     /* [Ns, D] the encoder's output: enc_norm.out or the last stream */
    embed_norm_acts tgt_emb_norm; /* [Nt, D] */
    float *tgt_x;             /* [Nt, D] */
    uint8_t *tgt_keep;        /* [Nt, D] */
    decoder_layer_acts *dec;  /* [n_decoder_layers] */
    norm_acts dec_norm;       /* [Nt, D] */
    const float *dec_out;     /* [Nt, D] */
    float *logits;            /* [Nt, V] logits, then log-probabilities; after the
                                 backward, the gradient of the logits */
    double *row_loss;         /* [Nt] each prediction's label-smoothed loss */
    double *row_nll;          /* [Nt] each prediction's -log p(label) */
    float *sub;               /* [N, D] scratch: a sublayer's output before dropout */
    uint8_t *act_keep;        /* [N, F] scratch: a relu FFN's activation-dropout mask (the
                                 backward needs none: see ffn_backward); NULL without, or
                                 with a gated activation (each layer keeps its own) */
    float *act;               /* [N, F] scratch of a gated activation (swish, gelu-sigmoid):
                                 its output, fc2's input, as layer's hidden keeps fc1's
                                 output; NULL for relu */
    float *scratch;           /* attention's scratch, fwd_stride floats per thread */
} acts;

/* Activation gradients (dLoss/d...) of the backward pass. */
typedef struct grad_acts {
    float *enc_x;   /* [Ns, D] the encoder's stream (pre-norm; post-norm uses enc_out) */
    float *enc_out; /* [Ns, D] the encoder's output, gathered from every decoder layer */
    float *dec_x;   /* [Nt, D] the decoder's stream */
    float *sum;     /* [N, D] LN's input (post-norm); the decoder's output (pre-norm) */
    float *sub;     /* [N, D] a sublayer's output, before dropout */
    float *norm;    /* [N, D] a sublayer's input LN(x) (pre-norm) */
    float *ctx;     /* [N, D] attention's output */
    float *qkv;     /* [N, 3D] q, k, v (self); q (cross) */
    float *kv;      /* [Ns, 2D] k, v (cross) */
    float *hidden;  /* [N, F] */
    float *scratch; /* attention_backward's scratch, bwd_stride floats per thread */
    float *rel_partials; /* relative positions only: [B, 2, 2K+1, Dh] each sentence's
                            part of a layer's relative tables' gradients (keys, then
                            values), added up in sentence order after (so the same on any
                            number of threads); else NULL */
    float *ln_partials; /* [chunks of N rows, 2, D] a LayerNorm's weight and bias
                           gradients per chunk of rows, before they are added up */
} grad_acts;

/* How the batch is packed. */
typedef struct packing {
    int B, Ns, Nt;
    int max_src, max_tgt;          /* the longest source, the most decoder rows of a pair */
    int *src_off, *src_len;        /* [B] each source's first row and rows */
    int *tgt_off, *tgt_len;        /* [B] each pair's first decoder row and rows (target + 1) */
    size_t *enc_att, *dec_att, *cross_att; /* [B] offsets of each sentence's weights */
    size_t n_enc_att, n_dec_att, n_cross_att; /* weights of one layer, all sentences */
    int32_t *src_ids;              /* [Ns] */
    int32_t *dec_in;               /* [Nt] <s> + target */
    int32_t *labels;               /* [Nt] target + </s> */
    size_t fwd_stride, bwd_stride; /* floats of attention scratch per thread */
} packing;

struct tfm_pass_workspace {
    const tfm_model *m;
    int n_threads;            /* for the work between the GEMMs; 1 to BATCH_MAX_THREADS */
    encoder_layer_acts *enc;
    decoder_layer_acts *dec;
    packing pk;
    acts a;
    grad_acts g;
    float p_drop, p_att, p_act; /* the dropout rates of the last forward pass */
    bool have_forward;        /* the last forward pass succeeded: acts hold its values
                                 (tfm_model_attention reads them) */
    const float *src_pos, *tgt_pos; /* position tables covering the batch */
    tfm_buf index, act, grad; /* the three buffers */
    tfm_buf sinusoids;        /* see positions_table */
    int n_sinusoids;
    float *grads_base;        /* the gradient buffer gp points into, or NULL */
    tfm_params gp;            /* the gradients' named pointers */
};

/* ---- batch_workspace.c: threads ------------------------------------------------------ */

/* The most threads a workspace uses (tfm_parallel_for's limit). */
enum { BATCH_MAX_THREADS = 64 };

/* Rows per chunk of a pass over rows width floats wide. */
size_t batch_row_chunk(size_t width);

/* Runs fn(ctx, c, lo, hi) over the chunks of rows [0, N) of a pass width
 * floats wide, on the workspace's threads when there are a few chunks at
 * least (a smaller pass takes less time than starting a thread). */
void batch_for_rows(const tfm_pass_workspace *ws, int N, size_t width,
                    void (*fn)(void *ctx, size_t c, size_t lo, size_t hi), void *ctx);

/* Runs fn(ctx, slot, b) for every sentence b of the batch, slot naming the
 * thread (for its scratch).  On more than one thread the BLAS is held at
 * one meanwhile (core/blas.h). */
void batch_for_sentences(const tfm_pass_workspace *ws,
                         void (*fn)(void *ctx, int slot, size_t b), void *ctx);

/* x: [N, width] = 0.  One memset in the calling thread: it streams at the
 * memory's full speed, which a second thread does not raise (measured). */
static inline void batch_zero_rows(float *x, int N, size_t width)
{
    memset(x, 0, (size_t)N * width * sizeof(float));
}

/* The seed of one dropout site: one draw of the step's generator, none
 * without dropout (p == 0 leaves the generator alone, as dropout_forward
 * does). */
static inline uint64_t batch_site_seed(tfm_rng *rng, float p)
{
    return p > 0 ? tfm_rng_u64(rng) : 0;
}

/* ---- batch_workspace.c: carving a buffer into pieces --------------------------------- */

/* Hands out consecutive 64-byte-aligned pieces.  Without a base it only
 * counts (and every piece is NULL). */
typedef struct batch_arena {
    char *base;
    size_t used;
} batch_arena;

void *batch_carve(batch_arena *k, size_t n, size_t size);

#define BATCH_CARVE(k, n, type) ((type *)batch_carve((k), (n), sizeof(type)))

/* Runs layout twice: to count, then, with b grown to the count, to place.
 * false when memory runs out. */
bool batch_arena_build(tfm_buf *b, void (*layout)(tfm_pass_workspace *, batch_arena *),
                       tfm_pass_workspace *ws);

/* Layouts for batch_arena_build: the activations of the packed batch at the
 * dropout rates in ws (into ws->act), and their gradients (into ws->grad). */
void batch_layout_acts(tfm_pass_workspace *ws, batch_arena *k);
void batch_layout_grads(tfm_pass_workspace *ws, batch_arena *k);

/* ---- batch_pack.c -------------------------------------------------------------------- */

/* Checks the batch, packs its ids into ws->pk and lays out the activations
 * for the dropout rates in ws.  TFM_ERR_ARG, TFM_ERR_RANGE (a length or an
 * id out of range, naming the pair), TFM_ERR_NOMEM. */
tfm_status batch_pack(tfm_pass_workspace *ws, const tfm_pair_batch *batch, tfm_error *err);

/* Which rows each sentence's queries and keys are, for one kind of attention. */
typedef struct attention_geometry {
    const int *q_off, *q_len, *k_off, *k_len; /* [B] */
    const size_t *att_off;                    /* [B] */
    attention_mask mask;
} attention_geometry;

attention_geometry batch_encoder_geometry(const tfm_pass_workspace *ws);
attention_geometry batch_decoder_geometry(const tfm_pass_workspace *ws);
attention_geometry batch_cross_geometry(const tfm_pass_workspace *ws);

/* ---- batch_embedding.c --------------------------------------------------------------- */

/* embeddings * sqrt(D) + positions, sentence by sentence, then, when en->in
 * is set (embedding_layer_norm), their LayerNorm ln with its input and
 * statistics saved in en, then dropout (Marian's "nd").  x: [rows, D];
 * keep: [rows, D] (NULL without dropout); ids: [rows]; off, len: [B] each
 * sentence's rows; zero_id as embedding_forward's. */
void batch_embed_forward(const tfm_pass_workspace *ws, float *x, uint8_t *keep,
                         const embed_norm_acts *en, const tfm_layer_norm *ln,
                         const int32_t *ids, const float *embed, const float *positions,
                         const int *off, const int *len, int rows, int32_t zero_id,
                         tfm_rng *rng);

/* Through dropout and, when en->in is set, the LayerNorm ln (its weight and
 * bias gradients into gln; ws->g.norm holds its input's gradient) into the
 * embedding and position tables.  dx: [rows, D], the gradient of x. */
void batch_embed_backward(const tfm_pass_workspace *ws, const float *dx, const uint8_t *keep,
                          const embed_norm_acts *en, const tfm_layer_norm *ln,
                          tfm_layer_norm *gln, const int32_t *ids, float *dembed,
                          float *dpositions, const int *off, const int *len, int rows,
                          int32_t zero_id);

/* ---- batch_layer_norm.c -------------------------------------------------------------- */

/* out = LN(inp) with the statistics saved, on the workspace's threads.
 * out, inp: [N, D]; mean, rstd: [N] */
void batch_layer_norm_forward(const tfm_pass_workspace *ws, float *out, float *mean,
                              float *rstd, const float *inp, const tfm_layer_norm *ln, int N);

/* dinp [N, D] accumulates dLoss/d(inp), gln the weight and bias gradients;
 * dout: [N, D]; inp, mean, rstd as the forward had and saved them. */
void batch_layer_norm_backward(const tfm_pass_workspace *ws, float *dinp, tfm_layer_norm *gln,
                               const float *dout, const float *inp, const float *mean,
                               const float *rstd, const tfm_layer_norm *ln, int N);

/* layer_norm_backward on the chunk c of rows [lo, hi), its weight and bias
 * gradients into chunk c's partial sums (for batch_add_ln_partials).  All
 * [N, D] but mean, rstd [N]. */
void batch_ln_backward_rows(const tfm_pass_workspace *ws, size_t c, size_t lo, size_t hi,
                            float *dinp, const float *dout, const float *inp, const float *mean,
                            const float *rstd, const float *weight);

/* Adds the chunks' parts of a LayerNorm's weight and bias gradients over N
 * rows into gln, in chunk order (so in the same order for any thread count). */
void batch_add_ln_partials(const tfm_pass_workspace *ws, tfm_layer_norm *gln, int N);

/* ---- batch_residual.c ---------------------------------------------------------------- */

/* The sublayer's input: LN(x) under pre-norm (statistics saved), x itself
 * under post-norm.  x: [N, D] */
const float *batch_residual_forward_begin(const tfm_pass_workspace *ws, residual_acts *r,
                                          const float *x, const tfm_layer_norm *ln, int N);

/* Dropout on the sublayer's output sub (in place), the residual add, and
 * under post-norm the LayerNorm.  x, sub: [N, D] */
void batch_residual_forward_end(const tfm_pass_workspace *ws, residual_acts *r, const float *x,
                                float *sub, const tfm_layer_norm *ln, int N, tfm_rng *rng);

/* The first half of a residual sublayer's backward.  On entry dx [N, D]
 * holds dLoss/d(r->out).  Returns dLoss/d(f's output), and sets *din to the
 * buffer into which f's backward must accumulate dLoss/d(f's input):
 *   post-norm (out = LN(x + Dropout(f(x)))): through the LayerNorm into
 *     g->sum; dx becomes that (the residual path), and f adds its part to dx;
 *   pre-norm (out = x + Dropout(f(LN(x)))): dx is already the residual
 *     path; f's input gradient goes to g->norm, for batch_residual_backward_end. */
const float *batch_residual_backward_begin(const tfm_pass_workspace *ws,
                                           const residual_acts *r, float *dx, float **din,
                                           const tfm_layer_norm *ln, tfm_layer_norm *gln, int N);

/* The second half: under pre-norm, from g->norm through LN(x) into dx.
 * x: the sublayer's input stream [N, D]. */
void batch_residual_backward_end(const tfm_pass_workspace *ws, const residual_acts *r,
                                 float *dx, const float *x, const tfm_layer_norm *ln,
                                 tfm_layer_norm *gln, int N);

/* f's input: LN(x) under pre-norm, else x. */
static inline const float *batch_sublayer_in(const residual_acts *r, const float *x)
{
    return r->norm ? r->norm : x;
}

/* Dropout alone at the rate ws->p_drop (the embeddings'): x [rows, D] in
 * place, keep [rows, D] its mask.  Nothing, no draw, without dropout. */
void batch_dropout_forward(const tfm_pass_workspace *ws, float *x, uint8_t *keep, int rows,
                           tfm_rng *rng);

/* Its backward: returns dLoss/d(x before dropout) [rows, D], written to
 * g->sub, from dx [rows, D]; dx itself without dropout. */
const float *batch_dropout_backward(const tfm_pass_workspace *ws, const float *dx,
                                    const uint8_t *keep, int rows);

/* ---- batch_attention.c --------------------------------------------------------------- */

/* Self-attention of the rows in (the sublayer's input) into out [N, D]. */
void batch_self_attention_forward(const tfm_pass_workspace *ws, attention_acts *A,
                                  const tfm_attention *w, const float *in, int N,
                                  const attention_geometry *geo, float *out, tfm_rng *rng);

/* dsub: dLoss/d(out) [N, D]; din accumulates dLoss/d(in). */
void batch_self_attention_backward(const tfm_pass_workspace *ws, const attention_acts *A,
                                   const tfm_attention *w, tfm_attention *gw, const float *in,
                                   float *din, const float *dsub, int N,
                                   const attention_geometry *geo);

/* Encoder-decoder attention of the decoder rows in [Nt, D] over the
 * encoder's output, into out [Nt, D]. */
void batch_cross_attention_forward(const tfm_pass_workspace *ws, attention_acts *A,
                                   const tfm_attention *w, const float *in, float *out,
                                   tfm_rng *rng);

/* As batch_self_attention_backward; the keys' and values' part goes into
 * g->enc_out, the gradient of the encoder's output. */
void batch_cross_attention_backward(const tfm_pass_workspace *ws, const attention_acts *A,
                                    const tfm_attention *w, tfm_attention *gw, const float *in,
                                    float *din, const float *dsub);

/* ---- batch_ffn.c --------------------------------------------------------------------- */

/* ffn_forward with its activation (and activation dropout) on the
 * workspace's threads.  out, in: [N, D]; hidden: [N, F]; keep: [N, F] the
 * layer's activation-dropout mask, kept for the backward (a gated
 * activation's: the layer's act_keep), or NULL (relu's goes to scratch). */
void batch_ffn_forward(const tfm_pass_workspace *ws, float *out, float *hidden, uint8_t *keep,
                       const float *in, const tfm_linear *fc1, const tfm_linear *fc2, int N,
                       tfm_rng *rng);

/* Its backward: din [N, D] (or NULL) and gfc1, gfc2 accumulate; dout: [N, D];
 * in, hidden, keep as the forward had and left them; ws->g.hidden is scratch. */
void batch_ffn_backward(const tfm_pass_workspace *ws, float *din, tfm_linear *gfc1,
                        tfm_linear *gfc2, const float *dout, const float *in,
                        const float *hidden, const uint8_t *keep, const tfm_linear *fc1,
                        const tfm_linear *fc2, int N);

/* ---- batch_loss.c -------------------------------------------------------------------- */

/* The log-softmax of ws->a.logits [Nt, V] in place, and each prediction's
 * label-smoothed loss and -log p(label) into ws->a.row_loss, row_nll [Nt]. */
void batch_loss_forward(const tfm_pass_workspace *ws);

/* In place: the log-probabilities [Nt, V] become the gradient of
 * scale * sum(loss) with respect to the logits. */
void batch_loss_backward(const tfm_pass_workspace *ws, float scale);

#endif
