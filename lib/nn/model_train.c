/* model_train.c - the whole model for training: the forward pass of a batch
 * of sentence pairs with teacher forcing, keeping every activation the
 * backward pass needs; the label-smoothed loss; and the backward pass into a
 * gradient buffer laid out as the parameters (see tfm/model.h).
 *
 * The batch is packed as the inference encoder packs it: the sentences' rows
 * lie one after another with no padding, Ns source rows and Nt decoder rows
 * (each target plus one, for <s>).  So every linear layer, norm and FFN is
 * one GEMM over all rows (q, k and v fused into one [3D, D] product), the
 * output projection and the loss are one [Nt, V] GEMM, and attention runs
 * per sentence and head over that sentence's own rows: padding never exists,
 * so it needs no mask and costs nothing.
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
 * Threads (tfm_train_workspace_set_threads): the GEMMs over all rows use
 * the BLAS's threads; everything between them runs on the workspace's
 * threads, one level at a time.  Attention goes sentence by sentence, each
 * thread with scratch of its own; the norms, dropout, residual adds, the
 * ReLU and the loss go in chunks of rows (row_chunk) fixed by the widths
 * alone.  (Passes that only stream memory, as the bias gradients' sums,
 * the ReLU's backward and zeroing, stay in one thread: a second one was
 * measured not to speed them up.)  Every dropout site draws one number from
 * the step's generator and each chunk of rows, or each sentence, draws its
 * mask from a generator of its own seeded from it (dropout_stream); a
 * LayerNorm's weight and bias gradients are summed per chunk and the chunks
 * added in order.  So the results are the same bit for bit on any number of
 * threads.
 */
#include <stdlib.h>
#include <string.h>

#include "core/chunks.h"
#include "nn/layers.h"
#include "tfm/model.h"

/* OpenBLAS's own calls, declared here to keep cblas.h out (as cmd/train.c
 * does): the attention's small products run with one BLAS thread while the
 * workspace's threads run sentences (DESIGN.md: one level of threads). */
int openblas_get_num_threads(void);
void openblas_set_num_threads(int num_threads);

/* Floats per chunk of a pass over rows: ~10 us of elementwise work, worth
 * a thread start, and small enough to stay in the cache between the steps
 * of a fused pass. */
enum { ROW_FLOATS = 1 << 14 };

/* The most threads a workspace uses (tfm_parallel_for's limit). */
enum { MAX_THREADS = 64 };

/* ---- saved activations ------------------------------------------------------------ */

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
    float *att;    /* the weights: sentence b's [H, n_q, n_k] at the packing's offset */
    uint8_t *keep; /* like att: the attention-dropout mask; NULL without it */
    float *ctx;    /* [N, D] the heads' outputs side by side: out_proj's input */
} attention_acts;

typedef struct encoder_layer_acts {
    attention_acts attn;
    residual_acts r_attn;
    float *hidden; /* [Ns, F] the FFN's activations after the ReLU */
    residual_acts r_ffn;
} encoder_layer_acts;

typedef struct decoder_layer_acts {
    attention_acts self;
    residual_acts r_self;
    attention_acts cross;
    residual_acts r_cross;
    float *hidden; /* [Nt, F] */
    residual_acts r_ffn;
} decoder_layer_acts;

/* A stack's final LayerNorm (pre-norm only). */
typedef struct norm_acts {
    float *out;         /* [N, D] */
    float *mean, *rstd; /* [N] */
} norm_acts;

typedef struct acts {
    float *src_x;             /* [Ns, D] embeddings * sqrt(D) + positions, after dropout */
    uint8_t *src_keep;        /* [Ns, D] */
    encoder_layer_acts *enc;  /* [n_encoder_layers] (the array is the workspace's) */
    norm_acts enc_norm;       /* [Ns, D] */
    const float *enc_out;     /* [Ns, D] the encoder's output: enc_norm.out or the last stream */
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
    uint8_t *act_keep;        /* [N, F] scratch: an FFN's activation-dropout mask (the
                                 backward needs none: see ffn_backward); NULL without */
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

struct tfm_train_workspace {
    const tfm_model *m;
    int n_threads;            /* for the work between the GEMMs; 1 to MAX_THREADS */
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

/* ---- threads ----------------------------------------------------------------------------- */

/* Rows per chunk of a pass over rows width floats wide. */
static size_t row_chunk(size_t width)
{
    return width >= ROW_FLOATS ? 1 : (ROW_FLOATS + width - 1) / width;
}

/* Runs fn(ctx, c, lo, hi) over the chunks of rows [0, N) of a pass width
 * floats wide, on the workspace's threads when there are a few chunks at
 * least (a smaller pass takes less time than starting a thread). */
static void for_rows(const tfm_train_workspace *ws, int N, size_t width,
                     void (*fn)(void *ctx, size_t c, size_t lo, size_t hi), void *ctx)
{
    const size_t rows = row_chunk(width);
    int nt = tfm_chunk_count((size_t)N, rows) >= 4 ? ws->n_threads : 1;
    tfm_parallel_chunks(nt, (size_t)N, rows, fn, ctx);
}

/* Runs fn(ctx, slot, b) for every sentence b of the batch, slot naming the
 * thread (for its scratch).  OpenBLAS is held to one thread meanwhile and
 * given its count back after. */
static void for_sentences(const tfm_train_workspace *ws, void (*fn)(void *ctx, int slot, size_t b),
                          void *ctx)
{
    const size_t B = (size_t)ws->pk.B;
    if (ws->n_threads < 2 || B < 2) {
        tfm_parallel_slots(1, B, fn, ctx);
        return;
    }
    int blas = openblas_get_num_threads();
    if (blas != 1) openblas_set_num_threads(1);
    tfm_parallel_slots(ws->n_threads, B, fn, ctx);
    if (blas != 1) openblas_set_num_threads(blas);
}

/* x: [N, width] = 0.  One memset in the calling thread: it streams at the
 * memory's full speed, which a second thread does not raise (measured). */
static void zero_rows(float *x, int N, size_t width)
{
    memset(x, 0, (size_t)N * width * sizeof(float));
}

/* The seed of one dropout site: one draw of the step's generator, none
 * without dropout (p == 0 leaves the generator alone, as dropout_forward
 * does). */
static uint64_t site_seed(tfm_rng *rng, float p)
{
    return p > 0 ? tfm_rng_u64(rng) : 0;
}

/* ---- carving a buffer into pieces ----------------------------------------------------- */

/* Hands out consecutive 64-byte-aligned pieces.  Without a base it only
 * counts (and every piece is NULL). */
typedef struct arena {
    char *base;
    size_t used;
} arena;

static void *carve(arena *k, size_t n, size_t size)
{
    k->used = (k->used + 63) & ~(size_t)63;
    void *at = k->base ? k->base + k->used : NULL;
    k->used += n * size;
    return at;
}

#define CARVE(k, n, type) ((type *)carve((k), (n), sizeof(type)))

/* Runs layout twice: to count, then, with b grown to the count, to place. */
static bool arena_build(tfm_buf *b, void (*layout)(tfm_train_workspace *, arena *),
                        tfm_train_workspace *ws)
{
    arena k = {NULL, 0};
    layout(ws, &k);
    char *base = nn_reserve(b, k.used, 1);
    if (!base) return false;
    k = (arena){base, 0};
    layout(ws, &k);
    return true;
}

static void layout_index(tfm_train_workspace *ws, arena *k)
{
    packing *pk = &ws->pk;
    const size_t B = (size_t)pk->B;
    pk->src_off = CARVE(k, B, int);
    pk->src_len = CARVE(k, B, int);
    pk->tgt_off = CARVE(k, B, int);
    pk->tgt_len = CARVE(k, B, int);
    pk->enc_att = CARVE(k, B, size_t);
    pk->dec_att = CARVE(k, B, size_t);
    pk->cross_att = CARVE(k, B, size_t);
    pk->src_ids = CARVE(k, (size_t)pk->Ns, int32_t);
    pk->dec_in = CARVE(k, (size_t)pk->Nt, int32_t);
    pk->labels = CARVE(k, (size_t)pk->Nt, int32_t);
}

static void place_residual(arena *k, residual_acts *r, size_t N, size_t D, bool pre, bool drop)
{
    r->norm = pre ? CARVE(k, N * D, float) : NULL;
    r->sum = pre ? NULL : CARVE(k, N * D, float);
    r->mean = CARVE(k, N, float);
    r->rstd = CARVE(k, N, float);
    r->keep = drop ? CARVE(k, N * D, uint8_t) : NULL;
    r->out = CARVE(k, N * D, float);
}

/* n_q query rows; n_kv > 0 rows of a separate key/value source (cross) */
static void place_attention(arena *k, attention_acts *a, size_t n_q, size_t n_kv, size_t n_att,
                            size_t D, bool drop)
{
    a->q = CARVE(k, n_q * (n_kv ? D : 3 * D), float);
    a->kv = n_kv ? CARVE(k, n_kv * 2 * D, float) : NULL;
    a->att = CARVE(k, n_att, float);
    a->keep = drop ? CARVE(k, n_att, uint8_t) : NULL;
    a->ctx = CARVE(k, n_q * D, float);
}

static void place_norm(arena *k, norm_acts *n, size_t N, size_t D, bool pre)
{
    n->out = pre ? CARVE(k, N * D, float) : NULL;
    n->mean = pre ? CARVE(k, N, float) : NULL;
    n->rstd = pre ? CARVE(k, N, float) : NULL;
}

static void layout_acts(tfm_train_workspace *ws, arena *k)
{
    const tfm_config *c = &ws->m->config;
    const packing *pk = &ws->pk;
    acts *a = &ws->a;
    const size_t D = (size_t)c->d_model, F = (size_t)c->d_ff, V = (size_t)c->tgt_vocab_size;
    const size_t Ns = (size_t)pk->Ns, Nt = (size_t)pk->Nt, N = Ns > Nt ? Ns : Nt;
    const bool pre = c->pre_norm, drop = ws->p_drop > 0, att_drop = ws->p_att > 0;

    a->src_x = CARVE(k, Ns * D, float);
    a->src_keep = drop ? CARVE(k, Ns * D, uint8_t) : NULL;
    a->enc = ws->enc;
    for (int l = 0; l < c->n_encoder_layers; l++) {
        encoder_layer_acts *L = &a->enc[l];
        place_attention(k, &L->attn, Ns, 0, pk->n_enc_att, D, att_drop);
        place_residual(k, &L->r_attn, Ns, D, pre, drop);
        L->hidden = CARVE(k, Ns * F, float);
        place_residual(k, &L->r_ffn, Ns, D, pre, drop);
    }
    place_norm(k, &a->enc_norm, Ns, D, pre);
    a->tgt_x = CARVE(k, Nt * D, float);
    a->tgt_keep = drop ? CARVE(k, Nt * D, uint8_t) : NULL;
    a->dec = ws->dec;
    for (int l = 0; l < c->n_decoder_layers; l++) {
        decoder_layer_acts *L = &a->dec[l];
        place_attention(k, &L->self, Nt, 0, pk->n_dec_att, D, att_drop);
        place_residual(k, &L->r_self, Nt, D, pre, drop);
        place_attention(k, &L->cross, Nt, Ns, pk->n_cross_att, D, att_drop);
        place_residual(k, &L->r_cross, Nt, D, pre, drop);
        L->hidden = CARVE(k, Nt * F, float);
        place_residual(k, &L->r_ffn, Nt, D, pre, drop);
    }
    place_norm(k, &a->dec_norm, Nt, D, pre);
    a->logits = CARVE(k, Nt * V, float);
    a->row_loss = CARVE(k, Nt, double);
    a->row_nll = CARVE(k, Nt, double);
    a->sub = CARVE(k, N * D, float);
    a->act_keep = ws->p_act > 0 ? CARVE(k, N * F, uint8_t) : NULL;
    a->scratch = CARVE(k, pk->fwd_stride * (size_t)ws->n_threads, float);
}

static void layout_grads(tfm_train_workspace *ws, arena *k)
{
    const tfm_config *c = &ws->m->config;
    const packing *pk = &ws->pk;
    grad_acts *g = &ws->g;
    const size_t D = (size_t)c->d_model, F = (size_t)c->d_ff;
    const size_t Ns = (size_t)pk->Ns, Nt = (size_t)pk->Nt, N = Ns > Nt ? Ns : Nt;

    g->enc_x = c->pre_norm ? CARVE(k, Ns * D, float) : NULL;
    g->enc_out = CARVE(k, Ns * D, float);
    g->dec_x = CARVE(k, Nt * D, float);
    g->sum = CARVE(k, N * D, float);
    g->sub = CARVE(k, N * D, float);
    g->norm = CARVE(k, N * D, float);
    g->ctx = CARVE(k, N * D, float);
    g->qkv = CARVE(k, N * 3 * D, float);
    g->kv = CARVE(k, Ns * 2 * D, float);
    g->hidden = CARVE(k, N * F, float);
    g->scratch = CARVE(k, pk->bwd_stride * (size_t)ws->n_threads, float);
    g->ln_partials = CARVE(k, tfm_chunk_count(N, row_chunk(D)) * 2 * D, float);
}

/* ---- packing a batch ---------------------------------------------------------------- */

static size_t zmax(size_t a, size_t b) { return a > b ? a : b; }

/* Checks the batch, packs its ids and lays out the activations for the
 * dropout rates in ws. */
static tfm_status prepare(tfm_train_workspace *ws, const tfm_train_batch *batch, tfm_error *err)
{
    const tfm_config *c = &ws->m->config;
    const tfm_params *p = &ws->m->params;
    packing *pk = &ws->pk;
    const int P = c->max_positions, H = c->n_heads, D = c->d_model;

    if (!batch || batch->B < 0)
        return tfm_error_set(err, TFM_ERR_ARG, "training batch: %d pairs",
                             batch ? batch->B : -1);
    const int B = batch->B;
    if (B > 0 && (!batch->src || !batch->src_lens || !batch->tgt || !batch->tgt_lens))
        return tfm_error_set(err, TFM_ERR_ARG, "training batch: missing ids or lengths");
    size_t Ns = 0, Nt = 0;
    int max_src = 0, max_tgt = 0;
    for (int b = 0; b < B; b++) {
        int sl = batch->src_lens[b], tl = batch->tgt_lens[b];
        if (sl < 0 || sl > P)
            return tfm_error_set(err, TFM_ERR_RANGE,
                                 "pair %d: the source has %d tokens; the model takes 0 to %d", b,
                                 sl, P);
        if (tl < 0 || tl > P - 1)
            return tfm_error_set(err, TFM_ERR_RANGE,
                                 "pair %d: the target has %d tokens; the model takes 0 to %d "
                                 "(and <s>)",
                                 b, tl, P - 1);
        if ((sl > 0 && !batch->src[b]) || (tl > 0 && !batch->tgt[b]))
            return tfm_error_set(err, TFM_ERR_ARG, "pair %d: ids missing", b);
        for (int i = 0; i < sl; i++)
            if (batch->src[b][i] < 0 || batch->src[b][i] >= c->src_vocab_size)
                return tfm_error_set(err, TFM_ERR_RANGE,
                                     "pair %d, source token %d: id %d is outside the source "
                                     "vocabulary [0, %d)",
                                     b, i, (int)batch->src[b][i], (int)c->src_vocab_size);
        for (int i = 0; i < tl; i++)
            if (batch->tgt[b][i] < 0 || batch->tgt[b][i] >= c->tgt_vocab_size)
                return tfm_error_set(err, TFM_ERR_RANGE,
                                     "pair %d, target token %d: id %d is outside the target "
                                     "vocabulary [0, %d)",
                                     b, i, (int)batch->tgt[b][i], (int)c->tgt_vocab_size);
        Ns += (size_t)sl;
        Nt += (size_t)tl + 1;
        if (sl > max_src) max_src = sl;
        if (tl + 1 > max_tgt) max_tgt = tl + 1;
    }
    /* every row count times any width must stay an int for the BLAS */
    size_t widest = zmax(zmax(3 * (size_t)D, (size_t)c->d_ff), (size_t)c->tgt_vocab_size);
    if (zmax(Ns, Nt) > INT32_MAX / widest)
        return tfm_error_set(err, TFM_ERR_RANGE, "training batch of %zu + %zu rows is too large",
                             Ns, Nt);

    pk->B = B;
    pk->Ns = (int)Ns;
    pk->Nt = (int)Nt;
    pk->max_src = max_src;
    pk->max_tgt = max_tgt;
    if (!arena_build(&ws->index, layout_index, ws))
        return tfm_error_set(err, TFM_ERR_NOMEM, "training: out of memory for %d pairs", B);

    const attention_mask enc_mask = {0, false, c->attention_window};
    const attention_mask dec_mask = {0, true, c->attention_window};
    const attention_mask cross_mask = {0, false, 0};
    size_t so = 0, to = 0, ea = 0, da = 0, ca = 0, fwd = 1, bwd = 1;
    for (int b = 0; b < B; b++) {
        const int s = batch->src_lens[b], t = batch->tgt_lens[b] + 1;
        pk->src_off[b] = (int)so;
        pk->src_len[b] = s;
        pk->tgt_off[b] = (int)to;
        pk->tgt_len[b] = t;
        pk->enc_att[b] = ea;
        pk->dec_att[b] = da;
        pk->cross_att[b] = ca;
        if (s > 0) memcpy(pk->src_ids + so, batch->src[b], (size_t)s * sizeof(int32_t));
        pk->dec_in[to] = c->bos_id;
        if (t > 1) {
            memcpy(pk->dec_in + to + 1, batch->tgt[b], (size_t)(t - 1) * sizeof(int32_t));
            memcpy(pk->labels + to, batch->tgt[b], (size_t)(t - 1) * sizeof(int32_t));
        }
        pk->labels[to + t - 1] = c->eos_id;
        so += (size_t)s;
        to += (size_t)t;
        ea += (size_t)H * s * s;
        da += (size_t)H * t * t;
        ca += (size_t)H * t * s;
        /* attention_dropout_forward needs n_q * n_k */
        fwd = zmax(fwd, zmax(attention_scratch_size(s, s, enc_mask), (size_t)s * s));
        fwd = zmax(fwd, zmax(attention_scratch_size(t, t, dec_mask), (size_t)t * t));
        fwd = zmax(fwd, zmax(attention_scratch_size(t, s, cross_mask), (size_t)t * s));
        bwd = zmax(bwd, attention_backward_scratch_size(s, s));
        bwd = zmax(bwd, attention_backward_scratch_size(t, t));
        bwd = zmax(bwd, attention_backward_scratch_size(t, s));
    }
    pk->n_enc_att = ea;
    pk->n_dec_att = da;
    pk->n_cross_att = ca;
    /* whole cache lines per thread */
    pk->fwd_stride = (fwd + 15) & ~(size_t)15;
    pk->bwd_stride = (bwd + 15) & ~(size_t)15;

    /* Both tables at once: sinusoids share one cache, which may move when
     * it grows, so it grows to cover both before either pointer is taken. */
    int n_pos = max_src > max_tgt ? max_src : max_tgt;
    ws->src_pos = positions_table(p->src_positions, &ws->sinusoids, &ws->n_sinusoids, n_pos, D);
    ws->tgt_pos = positions_table(p->tgt_positions, &ws->sinusoids, &ws->n_sinusoids, n_pos, D);
    if (!ws->src_pos || !ws->tgt_pos || !arena_build(&ws->act, layout_acts, ws))
        return tfm_error_set(err, TFM_ERR_NOMEM,
                             "training: out of memory for the activations of %zu + %zu rows", Ns,
                             Nt);
    return TFM_OK;
}

/* ---- the forward pass ------------------------------------------------------------------ */

/* Which rows each sentence's queries and keys are, for one kind of attention. */
typedef struct attention_geometry {
    const int *q_off, *q_len, *k_off, *k_len; /* [B] */
    const size_t *att_off;                    /* [B] */
    attention_mask mask;
} attention_geometry;

static attention_geometry encoder_geometry(const tfm_train_workspace *ws)
{
    const packing *pk = &ws->pk;
    return (attention_geometry){pk->src_off, pk->src_len, pk->src_off, pk->src_len, pk->enc_att,
                                {0, false, ws->m->config.attention_window}};
}

static attention_geometry decoder_geometry(const tfm_train_workspace *ws)
{
    const packing *pk = &ws->pk;
    return (attention_geometry){pk->tgt_off, pk->tgt_len, pk->tgt_off, pk->tgt_len, pk->dec_att,
                                {0, true, ws->m->config.attention_window}};
}

static attention_geometry cross_geometry(const tfm_train_workspace *ws)
{
    const packing *pk = &ws->pk;
    return (attention_geometry){pk->tgt_off, pk->tgt_len, pk->src_off, pk->src_len,
                                pk->cross_att, {0, false, 0}};
}

/* A LayerNorm over rows: out, inp [N, D]; mean, rstd [N]. */
typedef struct norm_job {
    float *out, *mean, *rstd;
    const float *inp;
    const tfm_layer_norm *ln;
    int D;
    float eps;
} norm_job;

static void norm_chunk(void *ctx, size_t c, size_t lo, size_t hi)
{
    const norm_job *j = ctx;
    const size_t o = lo * (size_t)j->D;
    layer_norm_forward(j->out + o, j->mean + lo, j->rstd + lo, j->inp + o, j->ln->weight,
                       j->ln->bias, (int)(hi - lo), j->D, j->eps);
}

/* out = LN(inp) with the statistics saved, on the workspace's threads.
 * out, inp: [N, D]; mean, rstd: [N] */
static void norm_forward(const tfm_train_workspace *ws, float *out, float *mean, float *rstd,
                         const float *inp, const tfm_layer_norm *ln, int N)
{
    const tfm_config *c = &ws->m->config;
    norm_job job = {out, mean, rstd, inp, ln, c->d_model, c->layer_norm_eps};
    for_rows(ws, N, (size_t)c->d_model, norm_chunk, &job);
}

/* The sublayer's input: LN(x) under pre-norm (statistics saved), x itself
 * under post-norm.  x: [N, D] */
static const float *residual_forward_begin(const tfm_train_workspace *ws, residual_acts *r,
                                           const float *x, const tfm_layer_norm *ln, int N)
{
    if (!ws->m->config.pre_norm) return x;
    norm_forward(ws, r->norm, r->mean, r->rstd, x, ln, N);
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
static void residual_forward_end(const tfm_train_workspace *ws, residual_acts *r, const float *x,
                                 float *sub, const tfm_layer_norm *ln, int N, tfm_rng *rng)
{
    const tfm_config *c = &ws->m->config;
    const bool pre = c->pre_norm;
    residual_job job = {x, sub, r->keep, pre ? r->out : r->sum, pre ? NULL : r->out, r->mean,
                        r->rstd, ln, c->d_model, c->layer_norm_eps, ws->p_drop,
                        site_seed(rng, ws->p_drop)};
    for_rows(ws, N, (size_t)c->d_model, residual_chunk, &job);
}

/* One kind of attention over the batch, sentence by sentence: the forward
 * pass reads q, k, v and writes A's ctx, att and keep; the backward pass
 * reads them and ws->g.ctx and accumulates into dq, dk, dv (laid out as q,
 * k, v).  q rows ldq apart, k and v rows ldk apart.  Sentence b touches
 * only its own rows, weights and mask, so sentences run on any thread. */
typedef struct attend_job {
    const tfm_train_workspace *ws;
    const attention_geometry *geo;
    const attention_acts *A;
    const float *q, *k, *v;
    int ldq, ldk;
    float *dq, *dk, *dv;
    uint64_t seed; /* of the attention-dropout masks: sentence b's from generator b */
} attend_job;

static void attend_forward_sentence(void *ctx, int slot, size_t i)
{
    const attend_job *j = ctx;
    const tfm_train_workspace *ws = j->ws;
    const attention_geometry *geo = j->geo;
    const attention_acts *A = j->A;
    const int D = ws->m->config.d_model, H = ws->m->config.n_heads, Dh = D / H, b = (int)i;
    const int nq = geo->q_len[b], nk = geo->k_len[b];
    float *ctx_b = A->ctx + (size_t)geo->q_off[b] * D;
    const float *qb = j->q + (size_t)geo->q_off[b] * j->ldq;
    const float *kb = j->k + (size_t)geo->k_off[b] * j->ldk;
    const float *vb = j->v + (size_t)geo->k_off[b] * j->ldk;
    float *att = A->att + geo->att_off[b];
    float *scratch = ws->a.scratch + (size_t)slot * ws->pk.fwd_stride;
    attention_forward(ctx_b, D, qb, j->ldq, kb, j->ldk, vb, j->ldk, nq, nk, H, Dh, geo->mask,
                      scratch, att);
    if (A->keep) {
        tfm_rng rng;
        dropout_stream(&rng, j->seed, (uint64_t)b);
        attention_dropout_forward(ctx_b, D, vb, j->ldk, att, A->keep + geo->att_off[b], nq, nk, H,
                                  Dh, ws->p_att, &rng, scratch);
    }
}

/* Every sentence's attention: q rows ldq apart, k and v rows ldk apart. */
static void attend_forward(const tfm_train_workspace *ws, const attention_geometry *geo,
                           attention_acts *A, const float *q, int ldq, const float *k,
                           const float *v, int ldk, tfm_rng *rng)
{
    attend_job job = {.ws = ws, .geo = geo, .A = A, .q = q, .k = k, .v = v, .ldq = ldq,
                      .ldk = ldk, .seed = A->keep ? site_seed(rng, ws->p_att) : 0};
    for_sentences(ws, attend_forward_sentence, &job);
}

/* Self-attention of the rows in (the sublayer's input) into out [N, D]. */
static void self_attention_forward(const tfm_train_workspace *ws, attention_acts *A,
                                   const tfm_attention *w, const float *in, int N,
                                   const attention_geometry *geo, float *out, tfm_rng *rng)
{
    const int D = ws->m->config.d_model;
    linear_forward(A->q, in, w->q_proj.weight, w->q_proj.bias, N, D, 3 * D);
    attend_forward(ws, geo, A, A->q, 3 * D, A->q + D, A->q + 2 * D, 3 * D, rng);
    linear_forward(out, A->ctx, w->out_proj.weight, w->out_proj.bias, N, D, D);
}

/* Encoder-decoder attention of the decoder rows in [Nt, D] over the
 * encoder's output, into out [Nt, D]. */
static void cross_attention_forward(const tfm_train_workspace *ws, attention_acts *A,
                                    const tfm_attention *w, const float *in, float *out,
                                    tfm_rng *rng)
{
    const int D = ws->m->config.d_model;
    const attention_geometry geo = cross_geometry(ws);
    linear_forward(A->q, in, w->q_proj.weight, w->q_proj.bias, ws->pk.Nt, D, D);
    /* k and v: one GEMM with the [2D, D] weight (k_proj then v_proj) */
    linear_forward(A->kv, ws->a.enc_out, w->k_proj.weight, w->k_proj.bias, ws->pk.Ns, D, 2 * D);
    attend_forward(ws, &geo, A, A->q, D, A->kv, A->kv + D, 2 * D, rng);
    linear_forward(out, A->ctx, w->out_proj.weight, w->out_proj.bias, ws->pk.Nt, D, D);
}

/* hidden [N, F], in place: the ReLU of rows [lo, hi), then activation
 * dropout (fairseq's --activation-dropout; nn.Transformer's dropout after
 * its FFN's ReLU) when p > 0, each chunk from its own stream. */
typedef struct relu_job {
    float *hidden;
    uint8_t *keep;
    size_t F;
    float p;
    uint64_t seed;
} relu_job;

static void relu_chunk(void *ctx, size_t c, size_t lo, size_t hi)
{
    const relu_job *j = ctx;
    relu_forward(j->hidden + lo * j->F, (hi - lo) * j->F);
    if (j->p > 0) {
        tfm_rng rng;
        dropout_stream(&rng, j->seed, c);
        dropout_forward(j->hidden + lo * j->F, j->keep + lo * j->F, (hi - lo) * j->F, j->p, &rng);
    }
}

/* ffn_forward with its ReLU (and activation dropout) on the workspace's
 * threads.  out, in: [N, D]; hidden: [N, F] */
static void ffn_forward_threads(const tfm_train_workspace *ws, float *out, float *hidden,
                                const float *in, const tfm_linear *fc1, const tfm_linear *fc2,
                                int N, tfm_rng *rng)
{
    const int D = ws->m->config.d_model, F = ws->m->config.d_ff;
    linear_forward(hidden, in, fc1->weight, fc1->bias, N, D, F);
    relu_job job = {hidden, ws->a.act_keep, (size_t)F, ws->p_act, site_seed(rng, ws->p_act)};
    for_rows(ws, N, (size_t)F, relu_chunk, &job);
    linear_forward(out, hidden, fc2->weight, fc2->bias, N, F, D);
}

/* Embeddings * sqrt(D) + positions of the sentences [lo, hi). */
typedef struct embed_job {
    const tfm_train_workspace *ws;
    float *x;
    const int32_t *ids;
    const float *embed, *positions;
    const int *off, *len;
} embed_job;

static void embed_chunk(void *ctx, size_t c, size_t lo, size_t hi)
{
    const embed_job *j = ctx;
    const int D = j->ws->m->config.d_model;
    for (size_t b = lo; b < hi; b++)
        embedding_forward(j->x + (size_t)j->off[b] * D, j->ids + j->off[b], j->embed,
                          j->positions, 0, 1, j->len[b], D);
}

/* embeddings * sqrt(D) + positions, sentence by sentence, then dropout.
 * x: [rows, D]; ids: [rows] */
static void embed_forward(const tfm_train_workspace *ws, float *x, uint8_t *keep,
                          const int32_t *ids, const float *embed, const float *positions,
                          const int *off, const int *len, int rows, tfm_rng *rng)
{
    const int D = ws->m->config.d_model;
    embed_job ej = {ws, x, ids, embed, positions, off, len};
    /* sentences as the "rows" of the pass, each about rows / B rows of D */
    size_t per = ws->pk.B > 0 ? (size_t)rows / (size_t)ws->pk.B + 1 : 1;
    for_rows(ws, ws->pk.B, per * (size_t)D, embed_chunk, &ej);
    if (ws->p_drop <= 0) return;
    residual_job rj = {.sub = x, .keep = keep, .D = D, .p = ws->p_drop,
                       .seed = site_seed(rng, ws->p_drop)};
    for_rows(ws, rows, (size_t)D, residual_chunk, &rj);
}

/* The log-softmax and the loss of a chunk of rows of the logits. */
typedef struct loss_job {
    const tfm_train_workspace *ws;
    float scale; /* backward: the gradient's scale */
} loss_job;

static void loss_chunk(void *ctx, size_t c, size_t lo, size_t hi)
{
    const loss_job *j = ctx;
    const tfm_config *cf = &j->ws->m->config;
    const acts *a = &j->ws->a;
    const int V = cf->tgt_vocab_size, n = (int)(hi - lo);
    float *logits = a->logits + lo * (size_t)V;
    log_softmax_forward(logits, n, V);
    label_smoothed_loss_forward(a->row_loss + lo, a->row_nll + lo, logits, j->ws->pk.labels + lo,
                                n, V, cf->label_smoothing, cf->pad_id);
}

static void loss_backward_chunk(void *ctx, size_t c, size_t lo, size_t hi)
{
    const loss_job *j = ctx;
    const tfm_config *cf = &j->ws->m->config;
    const int V = cf->tgt_vocab_size;
    label_smoothed_loss_backward(j->ws->a.logits + lo * (size_t)V, j->ws->pk.labels + lo,
                                 (int)(hi - lo), V, cf->label_smoothing, cf->pad_id, j->scale);
}

/* The whole forward pass, the loss per prediction included, for the batch
 * prepare() packed.  Dropout sites draw their seeds in a fixed order:
 * source embeddings, then each encoder layer's sublayers, then the target
 * side. */
static void forward(tfm_train_workspace *ws, tfm_rng *rng)
{
    const tfm_config *c = &ws->m->config;
    const tfm_params *p = &ws->m->params;
    const packing *pk = &ws->pk;
    acts *a = &ws->a;
    const int D = c->d_model, V = c->tgt_vocab_size, Ns = pk->Ns, Nt = pk->Nt;
    const bool pre = c->pre_norm;

    /* the encoder */
    embed_forward(ws, a->src_x, a->src_keep, pk->src_ids, p->src_embed, ws->src_pos, pk->src_off,
                  pk->src_len, Ns, rng);
    const attention_geometry enc_geo = encoder_geometry(ws);
    const float *x = a->src_x;
    for (int l = 0; l < c->n_encoder_layers; l++) {
        const tfm_encoder_layer *W = &p->encoder_layers[l];
        encoder_layer_acts *A = &a->enc[l];
        const tfm_layer_norm *ln = &W->self_attn_layer_norm;
        const float *in = residual_forward_begin(ws, &A->r_attn, x, ln, Ns);
        self_attention_forward(ws, &A->attn, &W->self_attn, in, Ns, &enc_geo, a->sub, rng);
        residual_forward_end(ws, &A->r_attn, x, a->sub, ln, Ns, rng);
        x = A->r_attn.out;

        ln = &W->final_layer_norm;
        in = residual_forward_begin(ws, &A->r_ffn, x, ln, Ns);
        ffn_forward_threads(ws, a->sub, A->hidden, in, &W->fc1, &W->fc2, Ns, rng);
        residual_forward_end(ws, &A->r_ffn, x, a->sub, ln, Ns, rng);
        x = A->r_ffn.out;
    }
    if (pre) {
        norm_forward(ws, a->enc_norm.out, a->enc_norm.mean, a->enc_norm.rstd, x,
                     &p->encoder_layer_norm, Ns);
        x = a->enc_norm.out;
    }
    a->enc_out = x;

    /* the decoder, reading <s> + target */
    embed_forward(ws, a->tgt_x, a->tgt_keep, pk->dec_in, p->tgt_embed, ws->tgt_pos, pk->tgt_off,
                  pk->tgt_len, Nt, rng);
    const attention_geometry dec_geo = decoder_geometry(ws);
    x = a->tgt_x;
    for (int l = 0; l < c->n_decoder_layers; l++) {
        const tfm_decoder_layer *W = &p->decoder_layers[l];
        decoder_layer_acts *A = &a->dec[l];
        const tfm_layer_norm *ln = &W->self_attn_layer_norm;
        const float *in = residual_forward_begin(ws, &A->r_self, x, ln, Nt);
        self_attention_forward(ws, &A->self, &W->self_attn, in, Nt, &dec_geo, a->sub, rng);
        residual_forward_end(ws, &A->r_self, x, a->sub, ln, Nt, rng);
        x = A->r_self.out;

        ln = &W->encoder_attn_layer_norm;
        in = residual_forward_begin(ws, &A->r_cross, x, ln, Nt);
        cross_attention_forward(ws, &A->cross, &W->encoder_attn, in, a->sub, rng);
        residual_forward_end(ws, &A->r_cross, x, a->sub, ln, Nt, rng);
        x = A->r_cross.out;

        ln = &W->final_layer_norm;
        in = residual_forward_begin(ws, &A->r_ffn, x, ln, Nt);
        ffn_forward_threads(ws, a->sub, A->hidden, in, &W->fc1, &W->fc2, Nt, rng);
        residual_forward_end(ws, &A->r_ffn, x, a->sub, ln, Nt, rng);
        x = A->r_ffn.out;
    }
    if (pre) {
        norm_forward(ws, a->dec_norm.out, a->dec_norm.mean, a->dec_norm.rstd, x,
                     &p->decoder_layer_norm, Nt);
        x = a->dec_norm.out;
    }
    a->dec_out = x;

    /* the output projection over all rows in one GEMM, then the loss */
    linear_forward(a->logits, a->dec_out, p->output_proj, NULL, Nt, D, V);
    loss_job lj = {ws, 1.0f};
    for_rows(ws, Nt, (size_t)V, loss_chunk, &lj);
}

/* ---- the backward pass ------------------------------------------------------------------- */

/* Chunk c's part of a LayerNorm's weight and bias gradients: [2, D]. */
static float *ln_partial(const tfm_train_workspace *ws, size_t c)
{
    return ws->g.ln_partials + c * 2 * (size_t)ws->m->config.d_model;
}

/* Adds the chunks' parts of a LayerNorm's weight and bias gradients into
 * gln, in chunk order (so in the same order for any thread count). */
static void add_ln_partials(const tfm_train_workspace *ws, tfm_layer_norm *gln, int N)
{
    const int D = ws->m->config.d_model;
    const size_t chunks = tfm_chunk_count((size_t)N, row_chunk((size_t)D));
    for (size_t c = 0; c < chunks; c++) {
        const float *pw = ln_partial(ws, c), *pb = pw + D;
        for (int i = 0; i < D; i++) gln->weight[i] += pw[i];
        for (int i = 0; i < D; i++) gln->bias[i] += pb[i];
    }
}

/* layer_norm_backward on a chunk of rows, its weight and bias gradients
 * into chunk c's partial sums.  All [N, D] but mean, rstd [N]. */
static void ln_backward_rows(const tfm_train_workspace *ws, size_t c, size_t lo, size_t hi,
                             float *dinp, const float *dout, const float *inp, const float *mean,
                             const float *rstd, const float *weight)
{
    const int D = ws->m->config.d_model;
    const size_t o = lo * (size_t)D;
    float *pw = ln_partial(ws, c);
    memset(pw, 0, 2 * (size_t)D * sizeof *pw);
    layer_norm_backward(dinp + o, pw, pw + D, dout + o, inp + o, mean + lo, rstd + lo, weight,
                        (int)(hi - lo), D);
}

/* The LayerNorm out = LN(inp) backward, on the workspace's threads. */
typedef struct norm_backward_job {
    const tfm_train_workspace *ws;
    float *dinp;
    const float *dout, *inp, *mean, *rstd, *weight;
} norm_backward_job;

static void norm_backward_chunk(void *ctx, size_t c, size_t lo, size_t hi)
{
    const norm_backward_job *j = ctx;
    ln_backward_rows(j->ws, c, lo, hi, j->dinp, j->dout, j->inp, j->mean, j->rstd, j->weight);
}

/* dinp [N, D] accumulates dLoss/d(inp), gln the weight and bias gradients;
 * dout: [N, D]; inp, mean, rstd as the forward had and saved them. */
static void norm_backward(const tfm_train_workspace *ws, float *dinp, tfm_layer_norm *gln,
                          const float *dout, const float *inp, const float *mean,
                          const float *rstd, const tfm_layer_norm *ln, int N)
{
    norm_backward_job job = {ws, dinp, dout, inp, mean, rstd, ln->weight};
    for_rows(ws, N, (size_t)ws->m->config.d_model, norm_backward_chunk, &job);
    add_ln_partials(ws, gln, N);
}

/* residual_backward_begin on a chunk of rows (see there); with r NULL,
 * only the dropout: g->sub = Dropout'(dx) (the embeddings). */
typedef struct begin_job {
    const tfm_train_workspace *ws;
    const residual_acts *r;
    const uint8_t *keep;
    const float *ln_weight;
    float *dx; /* written only under post-norm, with r */
} begin_job;

static void begin_chunk(void *ctx, size_t c, size_t lo, size_t hi)
{
    const begin_job *j = ctx;
    const tfm_train_workspace *ws = j->ws;
    const grad_acts *g = &ws->g;
    const size_t o = lo * (size_t)ws->m->config.d_model;
    const size_t n = (hi - lo) * (size_t)ws->m->config.d_model;
    const float *dsum = j->dx + o;
    if (j->r && !ws->m->config.pre_norm) {
        memset(g->sum + o, 0, n * sizeof(float));
        ln_backward_rows(ws, c, lo, hi, g->sum, j->dx, j->r->sum, j->r->mean, j->r->rstd,
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
 *     path; f's input gradient goes to g->norm, for residual_backward_end. */
static const float *residual_backward_begin(const tfm_train_workspace *ws,
                                            const residual_acts *r, float *dx, float **din,
                                            const tfm_layer_norm *ln, tfm_layer_norm *gln, int N)
{
    const grad_acts *g = &ws->g;
    const bool pre = ws->m->config.pre_norm;
    begin_job job = {ws, r, r->keep, ln->weight, dx};
    for_rows(ws, N, (size_t)ws->m->config.d_model, begin_chunk, &job);
    if (!pre) add_ln_partials(ws, gln, N);
    *din = pre ? g->norm : dx;
    if (ws->p_drop <= 0) return pre ? dx : g->sum;
    return g->sub;
}

/* The second half: under pre-norm, from g->norm through LN(x) into dx.
 * x: the sublayer's input stream [N, D]. */
static void residual_backward_end(const tfm_train_workspace *ws, const residual_acts *r,
                                  float *dx, const float *x, const tfm_layer_norm *ln,
                                  tfm_layer_norm *gln, int N)
{
    if (!ws->m->config.pre_norm) return;
    norm_backward(ws, dx, gln, ws->g.norm, x, r->mean, r->rstd, ln, N);
}

/* f's input: LN(x) under pre-norm, else x. */
static const float *sublayer_in(const residual_acts *r, const float *x)
{
    return r->norm ? r->norm : x;
}

static void attend_backward_sentence(void *ctx, int slot, size_t i)
{
    const attend_job *j = ctx;
    const tfm_train_workspace *ws = j->ws;
    const attention_geometry *geo = j->geo;
    const attention_acts *A = j->A;
    const int D = ws->m->config.d_model, H = ws->m->config.n_heads, Dh = D / H, b = (int)i;
    const size_t qo = (size_t)geo->q_off[b] * j->ldq, ko = (size_t)geo->k_off[b] * j->ldk;
    attention_backward(j->dq + qo, j->dk + ko, j->dv + ko, ws->g.ctx + (size_t)geo->q_off[b] * D,
                       D, j->q + qo, j->ldq, j->k + ko, j->ldk, j->v + ko, j->ldk,
                       A->att + geo->att_off[b], A->keep ? A->keep + geo->att_off[b] : NULL,
                       ws->p_att, geo->q_len[b], geo->k_len[b], H, Dh,
                       ws->g.scratch + (size_t)slot * ws->pk.bwd_stride);
}

/* The backward of attend_forward: dq, dk, dv laid out as q, k, v. */
static void attend_backward(const tfm_train_workspace *ws, const attention_geometry *geo,
                            const attention_acts *A, float *dq, float *dk, float *dv,
                            const float *q, int ldq, const float *k, const float *v, int ldk)
{
    attend_job job = {.ws = ws, .geo = geo, .A = A, .q = q, .k = k, .v = v, .ldq = ldq,
                      .ldk = ldk, .dq = dq, .dk = dk, .dv = dv};
    for_sentences(ws, attend_backward_sentence, &job);
}

/* dsub: dLoss/d(out) [N, D]; din accumulates dLoss/d(in). */
static void self_attention_backward(const tfm_train_workspace *ws, const attention_acts *A,
                                    const tfm_attention *w, tfm_attention *gw, const float *in,
                                    float *din, const float *dsub, int N,
                                    const attention_geometry *geo)
{
    const grad_acts *g = &ws->g;
    const int D = ws->m->config.d_model;
    zero_rows(g->ctx, N, (size_t)D);
    linear_backward(g->ctx, gw->out_proj.weight, gw->out_proj.bias, dsub, A->ctx,
                    w->out_proj.weight, N, D, D);
    zero_rows(g->qkv, N, 3 * (size_t)D);
    attend_backward(ws, geo, A, g->qkv, g->qkv + D, g->qkv + 2 * D, A->q, 3 * D, A->q + D,
                    A->q + 2 * D, 3 * D);
    /* the fused [3D, D] gradient: q_proj's, k_proj's and v_proj's lie in a row */
    linear_backward(din, gw->q_proj.weight, gw->q_proj.bias, g->qkv, in, w->q_proj.weight, N, D,
                    3 * D);
}

/* As self_attention_backward; the keys' and values' part goes into
 * g->enc_out, the gradient of the encoder's output. */
static void cross_attention_backward(const tfm_train_workspace *ws, const attention_acts *A,
                                     const tfm_attention *w, tfm_attention *gw, const float *in,
                                     float *din, const float *dsub)
{
    const grad_acts *g = &ws->g;
    const int D = ws->m->config.d_model, Ns = ws->pk.Ns, Nt = ws->pk.Nt;
    const attention_geometry geo = cross_geometry(ws);
    zero_rows(g->ctx, Nt, (size_t)D);
    linear_backward(g->ctx, gw->out_proj.weight, gw->out_proj.bias, dsub, A->ctx,
                    w->out_proj.weight, Nt, D, D);
    zero_rows(g->qkv, Nt, (size_t)D);
    zero_rows(g->kv, Ns, 2 * (size_t)D);
    attend_backward(ws, &geo, A, g->qkv, g->kv, g->kv + D, A->q, D, A->kv, A->kv + D, 2 * D);
    linear_backward(din, gw->q_proj.weight, gw->q_proj.bias, g->qkv, in, w->q_proj.weight, Nt, D,
                    D);
    linear_backward(g->enc_out, gw->k_proj.weight, gw->k_proj.bias, g->kv, ws->a.enc_out,
                    w->k_proj.weight, Ns, D, 2 * D);
}

/* Through dropout into the embedding and position tables. dx: [rows, D],
 * used as scratch when there is no dropout. */
static void embed_backward(const tfm_train_workspace *ws, const float *dx, const uint8_t *keep,
                           const int32_t *ids, float *dembed, float *dpositions, const int *off,
                           const int *len, int rows)
{
    const int D = ws->m->config.d_model;
    if (ws->p_drop > 0) {
        begin_job job = {.ws = ws, .keep = keep, .dx = (float *)dx};
        for_rows(ws, rows, (size_t)D, begin_chunk, &job);
        dx = ws->g.sub;
    }
    /* serial: sentences sharing a token add into the same row of dembed */
    for (int b = 0; b < ws->pk.B; b++)
        embedding_backward(dembed, dpositions, ids + off[b], dx + (size_t)off[b] * D, 0, 1,
                           len[b], D);
}

/* The whole backward pass of the forward just run, accumulating
 * grad_scale * dLoss/d(params) into gp.  Destroys the log-probabilities. */
static void backward(tfm_train_workspace *ws, tfm_params *gp, float grad_scale)
{
    const tfm_config *c = &ws->m->config;
    const tfm_params *p = &ws->m->params;
    const packing *pk = &ws->pk;
    const acts *a = &ws->a;
    const grad_acts *g = &ws->g;
    const int D = c->d_model, F = c->d_ff, V = c->tgt_vocab_size, Ns = pk->Ns, Nt = pk->Nt;
    const bool pre = c->pre_norm;
    float *din;

    /* the loss and the output projection (a shared matrix gathers this too) */
    loss_job lj = {ws, grad_scale};
    for_rows(ws, Nt, (size_t)V, loss_backward_chunk, &lj);
    float *dx = g->dec_x;
    zero_rows(dx, Nt, (size_t)D);
    if (pre) {
        zero_rows(g->sum, Nt, (size_t)D);
        linear_backward(g->sum, gp->output_proj, NULL, a->logits, a->dec_out, p->output_proj, Nt,
                        D, V);
        const float *x_last = c->n_decoder_layers ? a->dec[c->n_decoder_layers - 1].r_ffn.out
                                                  : a->tgt_x;
        norm_backward(ws, dx, &gp->decoder_layer_norm, g->sum, x_last, a->dec_norm.mean,
                      a->dec_norm.rstd, &p->decoder_layer_norm, Nt);
    } else {
        linear_backward(dx, gp->output_proj, NULL, a->logits, a->dec_out, p->output_proj, Nt, D,
                        V);
    }

    /* the decoder, last layer first; encoder-attention gathers into g->enc_out */
    zero_rows(g->enc_out, Ns, (size_t)D);
    const attention_geometry dec_geo = decoder_geometry(ws);
    for (int l = c->n_decoder_layers - 1; l >= 0; l--) {
        const tfm_decoder_layer *W = &p->decoder_layers[l];
        tfm_decoder_layer *G = &gp->decoder_layers[l];
        const decoder_layer_acts *A = &a->dec[l];
        const float *x0 = l > 0 ? a->dec[l - 1].r_ffn.out : a->tgt_x; /* the layer's input */

        const float *x = A->r_cross.out;
        const float *dsub = residual_backward_begin(ws, &A->r_ffn, dx, &din, &W->final_layer_norm,
                                                    &G->final_layer_norm, Nt);
        ffn_backward(din, G->fc1.weight, G->fc1.bias, G->fc2.weight, G->fc2.bias, g->hidden, dsub,
                     sublayer_in(&A->r_ffn, x), A->hidden, W->fc1.weight, W->fc2.weight, Nt, D,
                     F, ws->p_act);
        residual_backward_end(ws, &A->r_ffn, dx, x, &W->final_layer_norm, &G->final_layer_norm,
                              Nt);

        x = A->r_self.out;
        dsub = residual_backward_begin(ws, &A->r_cross, dx, &din, &W->encoder_attn_layer_norm,
                                       &G->encoder_attn_layer_norm, Nt);
        cross_attention_backward(ws, &A->cross, &W->encoder_attn, &G->encoder_attn,
                                 sublayer_in(&A->r_cross, x), din, dsub);
        residual_backward_end(ws, &A->r_cross, dx, x, &W->encoder_attn_layer_norm,
                              &G->encoder_attn_layer_norm, Nt);

        x = x0;
        dsub = residual_backward_begin(ws, &A->r_self, dx, &din, &W->self_attn_layer_norm,
                                       &G->self_attn_layer_norm, Nt);
        self_attention_backward(ws, &A->self, &W->self_attn, &G->self_attn,
                                sublayer_in(&A->r_self, x), din, dsub, Nt, &dec_geo);
        residual_backward_end(ws, &A->r_self, dx, x, &W->self_attn_layer_norm,
                              &G->self_attn_layer_norm, Nt);
    }
    embed_backward(ws, dx, a->tgt_keep, pk->dec_in, gp->tgt_embed, gp->tgt_positions, pk->tgt_off,
                   pk->tgt_len, Nt);

    /* the encoder, from the gradient of its output */
    if (pre) {
        dx = g->enc_x;
        zero_rows(dx, Ns, (size_t)D);
        const float *x_last = c->n_encoder_layers ? a->enc[c->n_encoder_layers - 1].r_ffn.out
                                                  : a->src_x;
        norm_backward(ws, dx, &gp->encoder_layer_norm, g->enc_out, x_last, a->enc_norm.mean,
                      a->enc_norm.rstd, &p->encoder_layer_norm, Ns);
    } else {
        dx = g->enc_out;
    }
    const attention_geometry enc_geo = encoder_geometry(ws);
    for (int l = c->n_encoder_layers - 1; l >= 0; l--) {
        const tfm_encoder_layer *W = &p->encoder_layers[l];
        tfm_encoder_layer *G = &gp->encoder_layers[l];
        const encoder_layer_acts *A = &a->enc[l];
        const float *x0 = l > 0 ? a->enc[l - 1].r_ffn.out : a->src_x;

        const float *x = A->r_attn.out;
        const float *dsub = residual_backward_begin(ws, &A->r_ffn, dx, &din, &W->final_layer_norm,
                                                    &G->final_layer_norm, Ns);
        ffn_backward(din, G->fc1.weight, G->fc1.bias, G->fc2.weight, G->fc2.bias, g->hidden, dsub,
                     sublayer_in(&A->r_ffn, x), A->hidden, W->fc1.weight, W->fc2.weight, Ns, D,
                     F, ws->p_act);
        residual_backward_end(ws, &A->r_ffn, dx, x, &W->final_layer_norm, &G->final_layer_norm,
                              Ns);

        x = x0;
        dsub = residual_backward_begin(ws, &A->r_attn, dx, &din, &W->self_attn_layer_norm,
                                       &G->self_attn_layer_norm, Ns);
        self_attention_backward(ws, &A->attn, &W->self_attn, &G->self_attn,
                                sublayer_in(&A->r_attn, x), din, dsub, Ns, &enc_geo);
        residual_backward_end(ws, &A->r_attn, dx, x, &W->self_attn_layer_norm,
                              &G->self_attn_layer_norm, Ns);
    }
    embed_backward(ws, dx, a->src_keep, pk->src_ids, gp->src_embed, gp->src_positions,
                   pk->src_off, pk->src_len, Ns);
}

/* ---- the public functions ------------------------------------------------------------ */

tfm_status tfm_train_workspace_create(const tfm_model *m, tfm_train_workspace **out,
                                      tfm_error *err)
{
    *out = NULL;
    tfm_train_workspace *ws = calloc(1, sizeof *ws);
    if (!ws) return tfm_error_set(err, TFM_ERR_NOMEM, "training: out of memory");
    ws->m = m;
    ws->n_threads = 1;
    ws->enc = calloc((size_t)m->config.n_encoder_layers, sizeof *ws->enc);
    ws->dec = calloc((size_t)m->config.n_decoder_layers, sizeof *ws->dec);
    tfm_buf_init(&ws->index);
    tfm_buf_init(&ws->act);
    tfm_buf_init(&ws->grad);
    tfm_buf_init(&ws->sinusoids);
    if (!ws->enc || !ws->dec) {
        tfm_train_workspace_free(ws);
        return tfm_error_set(err, TFM_ERR_NOMEM, "training: out of memory");
    }
    *out = ws;
    return TFM_OK;
}

void tfm_train_workspace_free(tfm_train_workspace *ws)
{
    if (!ws) return;
    free(ws->enc);
    free(ws->dec);
    tfm_buf_free(&ws->index);
    tfm_buf_free(&ws->act);
    tfm_buf_free(&ws->grad);
    tfm_buf_free(&ws->sinusoids);
    tfm_params_free_layout(&ws->gp);
    free(ws);
}

void tfm_train_workspace_set_threads(tfm_train_workspace *ws, int n_threads)
{
    ws->n_threads = n_threads < 1 ? 1 : n_threads > MAX_THREADS ? MAX_THREADS : n_threads;
}

/* Sets the dropout rates, checks rng, packs the batch and runs the forward
 * pass; fills sums. */
static tfm_status run_forward(tfm_train_workspace *ws, const tfm_train_batch *batch,
                              bool dropout, tfm_rng *rng, tfm_loss_sums *sums, tfm_error *err)
{
    const tfm_config *c = &ws->m->config;
    ws->have_forward = false;
    ws->p_drop = dropout ? c->dropout : 0.0f;
    ws->p_att = dropout ? c->attention_dropout : 0.0f;
    ws->p_act = dropout ? c->activation_dropout : 0.0f;
    if ((ws->p_drop > 0 || ws->p_att > 0 || ws->p_act > 0) && !rng)
        return tfm_error_set(err, TFM_ERR_ARG, "training: dropout needs a random generator");
    tfm_status st = prepare(ws, batch, err);
    if (st != TFM_OK) return st;
    forward(ws, rng);
    ws->have_forward = true;
    tfm_loss_sums s = {0, 0, 0};
    for (int r = 0; r < ws->pk.Nt; r++) {
        if (ws->pk.labels[r] == c->pad_id) continue;
        s.loss += ws->a.row_loss[r];
        s.nll += ws->a.row_nll[r];
        s.n_tokens++;
    }
    if (sums) *sums = s;
    return TFM_OK;
}

tfm_status tfm_model_loss(tfm_train_workspace *ws, const tfm_train_batch *batch, bool dropout,
                          tfm_rng *rng, tfm_loss_sums *sums, double *sentence_logprob,
                          float *token_logprob, tfm_error *err)
{
    tfm_status st = run_forward(ws, batch, dropout, rng, sums, err);
    if (st != TFM_OK) return st;
    const packing *pk = &ws->pk;
    for (int b = 0; b < pk->B; b++) {
        double sum = 0.0;
        for (int t = 0; t < pk->tgt_len[b]; t++) {
            double lp = -ws->a.row_nll[pk->tgt_off[b] + t]; /* 0 for a <pad> label */
            sum += lp;
            if (token_logprob) token_logprob[pk->tgt_off[b] + t] = (float)lp;
        }
        if (sentence_logprob) sentence_logprob[b] = sum;
    }
    return TFM_OK;
}

tfm_status tfm_model_forward_backward(tfm_train_workspace *ws, const tfm_train_batch *batch,
                                      tfm_rng *rng, float grad_scale, float *grads,
                                      tfm_loss_sums *sums, tfm_error *err)
{
    if (!grads) return tfm_error_set(err, TFM_ERR_ARG, "training: no gradient buffer");
    if (grads != ws->grads_base) {
        tfm_params_free_layout(&ws->gp);
        ws->grads_base = NULL;
        if (tfm_params_layout(&ws->m->config, grads, &ws->gp) != TFM_OK)
            return tfm_error_set(err, TFM_ERR_NOMEM, "training: out of memory");
        ws->grads_base = grads;
    }
    tfm_status st = run_forward(ws, batch, true, rng, sums, err);
    if (st != TFM_OK) return st;
    if (!arena_build(&ws->grad, layout_grads, ws))
        return tfm_error_set(err, TFM_ERR_NOMEM,
                             "training: out of memory for the gradients of %d + %d rows",
                             ws->pk.Ns, ws->pk.Nt);
    backward(ws, &ws->gp, grad_scale);
    return TFM_OK;
}

/* The weights are read where the forward pass saved them for the backward
 * pass (attention_acts.att), so inspection sees exactly what training and
 * scoring compute, with no second code path to keep in step. */
tfm_status tfm_model_attention(const tfm_train_workspace *ws, int b, tfm_attention_kind kind,
                               int layer, const float **weights, int *n_q, int *n_k,
                               tfm_error *err)
{
    const tfm_config *c = &ws->m->config;
    const packing *pk = &ws->pk;
    if (!ws->have_forward)
        return tfm_error_set(err, TFM_ERR_ARG, "attention: no forward pass has run");
    if (b < 0 || b >= pk->B)
        return tfm_error_set(err, TFM_ERR_RANGE, "attention: pair %d of a batch of %d", b, pk->B);
    if (kind < TFM_ATTENTION_ENCODER || kind > TFM_ATTENTION_CROSS)
        return tfm_error_set(err, TFM_ERR_RANGE, "attention: unknown kind %d", (int)kind);
    int layers = kind == TFM_ATTENTION_ENCODER ? c->n_encoder_layers : c->n_decoder_layers;
    if (layer < 0 || layer >= layers)
        return tfm_error_set(err, TFM_ERR_RANGE, "attention: layer %d; the stack has 0 to %d",
                             layer, layers - 1);
    switch (kind) {
    case TFM_ATTENTION_ENCODER:
        *weights = ws->a.enc[layer].attn.att + pk->enc_att[b];
        *n_q = *n_k = pk->src_len[b];
        break;
    case TFM_ATTENTION_DECODER:
        *weights = ws->a.dec[layer].self.att + pk->dec_att[b];
        *n_q = *n_k = pk->tgt_len[b];
        break;
    case TFM_ATTENTION_CROSS:
        *weights = ws->a.dec[layer].cross.att + pk->cross_att[b];
        *n_q = pk->tgt_len[b];
        *n_k = pk->src_len[b];
        break;
    }
    return TFM_OK;
}
