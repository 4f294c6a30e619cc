/* decoder.c - the decoder stack for inference: incremental decoding of many
 * rows (hypotheses) at once, and the plain full recomputation it is tested
 * against.
 *
 * Incremental decoding (tfm_decoder_step) feeds one token per row per step.
 * Each layer's self-attention keys and values of the earlier positions are
 * cached per row, so a step costs one position's work: products over the R
 * rows for every projection and FFN (with the weights packed once when the
 * model was packed for decoding, packed.c; else sgemm), and per row and head
 * a query against that row's cache (attention_row_forward).  The
 * encoder-decoder keys and values depend only on the source, so
 * tfm_decoder_start computes them once per sentence and layer, and the rows
 * of a sentence (its beam) share them.
 *
 * The reference (tfm_decoder_forward_full) recomputes everything for a whole
 * prefix with T x T causal attention through attention_forward, the kernel
 * training uses; only the linear layers, norms and embeddings are common to
 * both paths, so comparing them tests the caches, the positions and the masks.
 */
#include <assert.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nn/layers.h"
#include "tfm/pass.h"

struct tfm_decoder {
    const tfm_model *m;
    const float *positions; /* [max_steps, D] at least: learned, or in sinusoids; NULL: none */
    tfm_buf sinusoids;      /* [n_sinusoids, D] (see positions_table) */
    int n_sinusoids;

    /* the batch set by tfm_decoder_start */
    int n_sentences;
    int total_src;          /* sum of the source lengths */
    int max_src;            /* the longest source */
    int max_steps;
    int R;                  /* rows */
    int t;                  /* the position the next step feeds */
    tfm_buf src;            /* int [2, n_sentences]: row offset of each source, then its length */
    tfm_buf packed;         /* [total_src, D]: the sources, when not already contiguous */
    tfm_buf cross;          /* [L, total_src, 2D]: each layer's encoder-attention k and v
                               (floats, or bf16 when kv_bf16) */
    tfm_buf cross_f32;      /* [total_src, 2D] floats: one layer's k and v before rounding */
    bool kv_bf16;           /* cross and cache hold bfloat16, not floats (kv_is_bf16) */

    /* Per row: the sentence it decodes and the cache slot holding its
     * self-attention keys and values.  A slot is [L, max_steps, 2D] (each
     * position's k then v, as the q,k,v GEMM lays them out).  Rows own their
     * slots, so a reorder moves no cache of a row continued once: the child
     * takes its parent's slot, and only a row's second and further
     * continuations copy it (into slots of rows that ended). */
    tfm_buf row_sentence;   /* int [R] */
    tfm_buf row_slot;       /* int [R] */
    tfm_buf cache;          /* [n_slots, L, max_steps, 2D] (floats, or bf16 when kv_bf16) */
    int n_slots;            /* slots allocated */
    tfm_buf scratch;        /* int: reorder's bookkeeping */

    tfm_buf act;            /* activations of one step, grown to the largest R */
    tfm_buf stats;          /* tfm_logit_stats [R], for tfm_decoder_step */
    tfm_buf sums;           /* double [R, NN_STATS_SUMS]: scratch of the output projection */
    tfm_buf quant;          /* the packed products' scratch (int8, bf16) */

    /* the output layer restricted to some target ids (tfm_decoder_restrict) */
    int n_short;            /* 0: the whole vocabulary */
    tfm_buf short_ids;      /* int32 [n_short], sorted */
    nn_packed_linear short_out; /* their rows of the packed output projection, or ... */
    tfm_buf short_panels;   /* (short_out's arrays) */
    tfm_buf short_weight;   /* ... [n_short, D] of the float one, when not packed */
    tfm_buf short_logits;   /* [R, n_short] */
    /* the logits buffer of the last restricted step, and how many of its
     * rows hold -infinity at every id outside short_ids (the next step
     * writes those ids alone in them: see tfm_decoder_restrict) */
    const float *short_filled;
    int short_filled_rows;
};

tfm_status tfm_decoder_create(const tfm_model *m, tfm_decoder **out, tfm_error *err)
{
    *out = NULL;
    tfm_decoder *d = calloc(1, sizeof *d);
    if (!d) return tfm_error_set(err, TFM_ERR_NOMEM, "decoder: out of memory");
    d->m = m;
    tfm_buf_init(&d->sinusoids);
    tfm_buf_init(&d->src);
    tfm_buf_init(&d->packed);
    tfm_buf_init(&d->cross);
    tfm_buf_init(&d->cross_f32);
    tfm_buf_init(&d->act);
    tfm_buf_init(&d->stats);
    tfm_buf_init(&d->sums);
    tfm_buf_init(&d->quant);
    tfm_buf_init(&d->row_sentence);
    tfm_buf_init(&d->row_slot);
    tfm_buf_init(&d->cache);
    tfm_buf_init(&d->scratch);
    tfm_buf_init(&d->short_ids);
    tfm_buf_init(&d->short_panels);
    tfm_buf_init(&d->short_weight);
    tfm_buf_init(&d->short_logits);
    *out = d;
    return TFM_OK;
}

void tfm_decoder_free(tfm_decoder *d)
{
    if (!d) return;
    tfm_buf_free(&d->sinusoids);
    tfm_buf_free(&d->src);
    tfm_buf_free(&d->packed);
    tfm_buf_free(&d->cross);
    tfm_buf_free(&d->cross_f32);
    tfm_buf_free(&d->act);
    tfm_buf_free(&d->stats);
    tfm_buf_free(&d->sums);
    tfm_buf_free(&d->quant);
    tfm_buf_free(&d->row_sentence);
    tfm_buf_free(&d->row_slot);
    tfm_buf_free(&d->cache);
    tfm_buf_free(&d->scratch);
    tfm_buf_free(&d->short_ids);
    tfm_buf_free(&d->short_panels);
    tfm_buf_free(&d->short_weight);
    tfm_buf_free(&d->short_logits);
    free(d);
}

int tfm_decoder_rows(const tfm_decoder *d) { return d->R; }
int tfm_decoder_position(const tfm_decoder *d) { return d->t; }

/* A decoder whose model computes in int8 or bf16 keeps the keys and values
 * of its attention (the cache and the sources') in bfloat16: half the
 * memory, and half the bytes the attention of every step reads.  The
 * attention's sums stay float32 (attention_row_forward_bf16). */
static bool kv_is_bf16(const tfm_model *m)
{
    return m->compute != TFM_COMPUTE_FLOAT32;
}

/* Bytes of one key or value element. */
static size_t kv_bytes(const tfm_decoder *d)
{
    return d->kv_bf16 ? sizeof(uint16_t) : sizeof(float);
}

/* Elements of one cache slot: [L, max_steps, 2D]. */
static size_t slot_size(const tfm_decoder *d)
{
    const tfm_config *c = &d->m->config;
    return (size_t)c->n_decoder_layers * d->max_steps * 2 * c->d_model;
}

/* Layer l of cache slot `slot`: [max_steps, 2D] elements. */
static void *cache_at(tfm_decoder *d, int slot, int l)
{
    const int D = d->m->config.d_model;
    size_t at = (size_t)slot * slot_size(d) + (size_t)l * d->max_steps * 2 * D;
    return d->cache.data + at * kv_bytes(d);
}

/* Element e of the keys and values kv (the cache or the sources'). */
static void *kv_at(const tfm_decoder *d, void *kv, size_t e)
{
    return (char *)kv + e * kv_bytes(d);
}

/* Stores n floats as keys and values at kv: copied, or rounded to bf16. */
static void kv_store(const tfm_decoder *d, void *kv, const float *x, size_t n)
{
    if (d->kv_bf16) nn_round_bf16(kv, x, n);
    else memcpy(kv, x, n * sizeof *x);
}

/* One query against n_k keys and values (ldkv elements apart, the values
 * D elements after the keys), as attention_row_forward. */
static void kv_attention(const tfm_decoder *d, float *out, const float *q, const void *kv,
                         int ldkv, int n_k, const attention_relative *rel, int d0, float *scratch)
{
    const int D = d->m->config.d_model, H = d->m->config.n_heads;
    if (d->kv_bf16)
        attention_row_forward_bf16(out, q, kv, ldkv, (const uint16_t *)kv + D, ldkv, n_k, H,
                                   D / H, rel, d0, scratch);
    else
        attention_row_forward(out, q, kv, ldkv, (const float *)kv + D, ldkv, n_k, H, D / H, rel,
                              d0, scratch);
}

/* Makes the cache hold n slots (contents kept); false when memory runs out. */
static bool reserve_slots(tfm_decoder *d, int n)
{
    if (n <= d->n_slots) return true;
    if (!tfm_buf_array(&d->cache, (size_t)n * slot_size(d), kv_bytes(d))) return false;
    /* A slot is laid out for max_steps positions and a search fills the
     * first few: on 2 MB pages every slot would be zeroed whole when first
     * touched.  On 4 KB pages only what is written is.  Measured on an Intel
     * Xeon, the imported base model, beam 4 at batch 64 (a slot of 1 MB per
     * layer, 20 positions used): zeroing the huge pages took 43% of
     * decoding. */
    tfm_advise_small_pages(d->cache.data, d->cache.cap);
    d->n_slots = n;
    return true;
}

/* The scratch of the packed products (NULL when they need none or memory
 * ran out; tfm_decoder_start tells which). */
static void *decoder_scratch(tfm_decoder *d)
{
    const tfm_packed_model *pm = d->m->packed;
    if (!pm || !pm->decoder || pm->scratch_bytes == 0) return NULL;
    return tfm_buf_array(&d->quant, pm->scratch_bytes, 1);
}

/* states[s]: [src_lens[s], D]; row_sentence: [R] */
tfm_status tfm_decoder_start(tfm_decoder *d, int n_sentences, const float *const *states,
                             const int *src_lens, int R, const int *row_sentence, int max_steps,
                             tfm_error *err)
{
    const tfm_config *c = &d->m->config;
    const tfm_params *p = &d->m->params;
    const int D = c->d_model, NL = c->n_decoder_layers;

    d->n_sentences = d->R = d->t = d->total_src = d->max_src = d->max_steps = 0;
    if (n_sentences < 0 || R < 0)
        return tfm_error_set(err, TFM_ERR_ARG, "decoder: %d sentences, %d rows", n_sentences, R);
    if (max_steps < 1 || max_steps > c->max_positions)
        return tfm_error_set(err, TFM_ERR_RANGE,
                             "decoder: max_steps %d; the model takes 1 to %d target positions",
                             max_steps, c->max_positions);
    size_t total = 0;
    int max_src = 0;
    for (int s = 0; s < n_sentences; s++) {
        if (src_lens[s] < 0 || src_lens[s] > c->max_positions)
            return tfm_error_set(err, TFM_ERR_RANGE,
                                 "decoder: source %d has %d states; the model takes 0 to %d", s,
                                 src_lens[s], c->max_positions);
        total += (size_t)src_lens[s];
        if (src_lens[s] > max_src) max_src = src_lens[s];
    }
    if (total > INT32_MAX / (size_t)(2 * D))
        return tfm_error_set(err, TFM_ERR_RANGE, "decoder: %zu source states are too many", total);
    for (int r = 0; r < R; r++)
        if (row_sentence[r] < 0 || row_sentence[r] >= n_sentences)
            return tfm_error_set(err, TFM_ERR_ARG, "decoder: row %d decodes sentence %d of %d", r,
                                 row_sentence[r], n_sentences);

    int *src = tfm_buf_array(&d->src, 2 * (size_t)n_sentences, sizeof(int));
    int *rows = tfm_buf_array(&d->row_sentence, (size_t)R, sizeof(int));
    int *slots = tfm_buf_array(&d->row_slot, (size_t)R, sizeof(int));
    d->kv_bf16 = kv_is_bf16(d->m);
    void *cross = tfm_buf_array(&d->cross, (size_t)NL * total * 2 * D, kv_bytes(d));
    float *cross_f32 =
        !d->kv_bf16 ? cross : tfm_buf_array(&d->cross_f32, total * 2 * D, sizeof(float));
    d->max_steps = max_steps; /* the cache layout depends on it */
    d->n_slots = 0;           /* and so does the number of slots the buffer holds */
    if (!src || !rows || !slots || !cross || !cross_f32 || !reserve_slots(d, R) ||
        !positions_table(c->positions, p->tgt_positions, &d->sinusoids, &d->n_sinusoids, max_steps,
                         D, &d->positions)) {
        d->max_steps = 0;
        return tfm_error_set(err, TFM_ERR_NOMEM, "decoder: out of memory for %d rows", R);
    }

    /* The sources as one [total, D] matrix, so each layer's k and v are one
     * GEMM over all sentences.  The encoder's output is usually that matrix
     * already (sentences packed one after another); otherwise copy. */
    int first = -1;
    for (int s = 0, off = 0; s < n_sentences; off += src_lens[s], s++) {
        src[s] = off;
        src[n_sentences + s] = src_lens[s];
        if (first < 0 && src_lens[s] > 0) first = s;
    }
    const float *sources = NULL;
    if (first >= 0) {
        bool contiguous = true;
        for (int s = first; s < n_sentences && contiguous; s++)
            if (src_lens[s] > 0 && (uintptr_t)states[s] !=
                                       (uintptr_t)states[first] + (size_t)src[s] * D * sizeof(float))
                contiguous = false;
        if (contiguous) {
            sources = states[first];
        } else {
            float *pk = tfm_buf_array(&d->packed, total * D, sizeof(float));
            if (!pk)
                return tfm_error_set(err, TFM_ERR_NOMEM, "decoder: out of memory for %zu states",
                                     total);
            for (int s = 0; s < n_sentences; s++)
                if (src_lens[s] > 0)
                    memcpy(pk + (size_t)src[s] * D, states[s], (size_t)src_lens[s] * D * sizeof *pk);
            sources = pk;
        }
    }
    const nn_packed_layer *pd = d->m->packed ? d->m->packed->decoder : NULL;
    void *qs = decoder_scratch(d);
    if (!pd && !d->m->float_weights)
        return tfm_error_set(err, TFM_ERR_ARG, "decoder: the model holds its weights in %s only: "
                             "pack it for decoding first", tfm_compute_type_name(d->m->compute));
    if (pd && d->m->packed->scratch_bytes && !qs)
        return tfm_error_set(err, TFM_ERR_NOMEM, "decoder: out of memory for %d rows", R);
    for (int l = 0; l < NL && total > 0; l++) {
        const tfm_attention *a = &p->decoder_layers[l].encoder_attn;
        assert(a->v_proj.weight == a->k_proj.weight + (size_t)D * D);
        assert(a->v_proj.bias == a->k_proj.bias + D);
        /* [total, 2D] = sources [total, D] x [k; v]^T ([2D, D]) */
        void *kv = kv_at(d, cross, (size_t)l * total * 2 * D);
        float *kv_f32 = d->kv_bf16 ? cross_f32 : kv;
        packed_or_linear_forward(kv_f32, sources, pd ? &pd[l].cross_kv : NULL, qs,
                                 a->k_proj.weight, a->k_proj.bias, (int)total, D, 2 * D);
        if (d->kv_bf16) kv_store(d, kv, kv_f32, total * 2 * D);
    }
    if (R > 0) memcpy(rows, row_sentence, (size_t)R * sizeof *rows);
    for (int r = 0; r < R; r++) slots[r] = r;
    d->n_sentences = n_sentences;
    d->total_src = (int)total;
    d->max_src = max_src;
    d->R = R;
    d->n_short = 0; /* the whole vocabulary, until tfm_decoder_restrict */
    return TFM_OK;
}

tfm_status tfm_decoder_restrict(tfm_decoder *d, const int32_t *ids, int n, tfm_error *err)
{
    const tfm_config *c = &d->m->config;
    const int V = c->tgt_vocab_size, D = c->d_model;
    d->n_short = 0;
    d->short_out = (nn_packed_linear){0};
    d->short_filled = NULL;
    d->short_filled_rows = 0;
    if (!ids || n == 0) return TFM_OK;
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= V || (i > 0 && ids[i] <= ids[i - 1]))
            return tfm_error_set(err, TFM_ERR_ARG, "decoder: restricted to id %d (entry %d): "
                                 "ids must be distinct, sorted and in [0, %d)", (int)ids[i],
                                 i + 1, V);
    int32_t *own = tfm_buf_array(&d->short_ids, (size_t)n, sizeof *own);
    if (!own) return tfm_error_set(err, TFM_ERR_NOMEM, "decoder: out of memory");
    memcpy(own, ids, (size_t)n * sizeof *own);
    const tfm_packed_model *pm = d->m->packed;
    tfm_status st = TFM_OK;
    if (pm && pm->decoder) {
        st = nn_packed_gather(&d->short_out, &pm->output, own, n, &d->short_panels);
    } else if (d->m->float_weights) {
        /* [n, D] rows, then [n] biases */
        float *w = tfm_buf_array(&d->short_weight, (size_t)n * D + (size_t)n, sizeof *w);
        if (!w) st = TFM_ERR_NOMEM;
        const float *bias = d->m->params.output_bias;
        for (int i = 0; i < n && w; i++) {
            memcpy(w + (size_t)i * D, d->m->params.output_proj + (size_t)own[i] * D,
                   (size_t)D * sizeof *w);
            w[(size_t)n * D + i] = bias ? bias[own[i]] : 0.0f;
        }
    } else {
        st = TFM_ERR_ARG;
    }
    if (st == TFM_ERR_NOMEM) return tfm_error_set(err, st, "decoder: out of memory");
    if (st != TFM_OK)
        return tfm_error_set(err, st, "decoder: the model holds its weights in %s only: pack it "
                             "for decoding first", tfm_compute_type_name(d->m->compute));
    d->n_short = n;
    return TFM_OK;
}

/* The output layer over the restricted ids: their logits [R, n_short] and
 * stats, then logits [R, V] of -infinity but at those ids; stats' argmax
 * is a target id.  The rows of the buffer the last step filled keep their
 * -infinity (tfm_decoder_restrict's promise on the caller): only the ids
 * are written in them, not the whole vocabulary again. */
static tfm_status restricted_output(tfm_decoder *d, const float *x, float *logits,
                                    tfm_logit_stats *stats, bool log_sums, void *qs)
{
    const tfm_config *c = &d->m->config;
    const int R = d->R, n = d->n_short, V = c->tgt_vocab_size, D = c->d_model;
    const int32_t *ids = (const int32_t *)(const void *)d->short_ids.data;
    float *part = tfm_buf_array(&d->short_logits, (size_t)R * n, sizeof *part);
    if (!part) return TFM_ERR_NOMEM;
    if (d->short_out.panels) {
        double *sums = tfm_buf_array(&d->sums, (size_t)R * NN_STATS_SUMS, sizeof *sums);
        if (!sums) return TFM_ERR_NOMEM;
        nn_packed_forward_stats(part, x, &d->short_out, R, qs, stats, log_sums ? sums : NULL);
    } else {
        const float *w = (const float *)(const void *)d->short_weight.data;
        linear_forward(part, x, w, w + (size_t)n * D, R, D, n);
        logit_stats(part, R, n, stats);
    }
    if (logits != d->short_filled) {
        d->short_filled = logits;
        d->short_filled_rows = 0;
    }
    for (int r = 0; r < R; r++) {
        float *row = logits + (size_t)r * V;
        const float *from = part + (size_t)r * n;
        if (r >= d->short_filled_rows)
            for (int v = 0; v < V; v++) row[v] = -INFINITY;
        for (int i = 0; i < n; i++) row[ids[i]] = from[i];
        stats[r].argmax = ids[stats[r].argmax];
    }
    if (R > d->short_filled_rows) d->short_filled_rows = R;
    return TFM_OK;
}

/* tokens: [R]; logits: [R, V_tgt]; stats: [R], their log_sum only when
 * log_sums (tfm_decoder_step_best's way leaves it out) */
static tfm_status step(tfm_decoder *d, const int32_t *tokens, float *logits,
                       tfm_logit_stats *stats, bool log_sums, tfm_error *err)
{
    const tfm_config *c = &d->m->config;
    const tfm_params *p = &d->m->params;
    const int D = c->d_model, F = c->d_ff, V = c->tgt_vocab_size;
    const int R = d->R, t = d->t, S = d->max_steps;
    const float eps = c->layer_norm_eps;

    if (t >= S)
        return tfm_error_set(err, TFM_ERR_RANGE,
                             "decoder: step at position %d, beyond max_steps %d given to start", t,
                             S);
    for (int r = 0; r < R; r++)
        if (tokens[r] < 0 || tokens[r] >= V)
            return tfm_error_set(err, TFM_ERR_RANGE,
                                 "decoder: row %d: token %d is outside the target vocabulary "
                                 "[0, %d)",
                                 r, (int)tokens[r], V);

    /* the row attention's scratch; with bf16 keys and values also its
     * split query and output (attention_row_forward_bf16) */
    size_t n_scores = (size_t)c->n_heads * (size_t)(S > d->max_src ? S : d->max_src) +
                      (d->kv_bf16 ? 2 * (size_t)D : 0) +
                      (size_t)attention_relative_rows(c->relative_positions);
    float *x = tfm_buf_array(&d->act, (size_t)R * (7 * (size_t)D + F) + n_scores, sizeof(float));
    if (!x) return tfm_error_set(err, TFM_ERR_NOMEM, "decoder: out of memory for %d rows", R);
    float *y = x + (size_t)R * D;        /* [R, D] */
    float *qkv = y + (size_t)R * D;      /* [R, 3D] */
    float *attn = qkv + (size_t)R * 3 * D; /* [R, D] */
    float *tmp = attn + (size_t)R * D;   /* [R, D] */
    float *hidden = tmp + (size_t)R * D; /* [R, F] */
    float *scores = hidden + (size_t)R * F;
    const int *row_sentence = (const int *)(const void *)d->row_sentence.data;
    const int *row_slot = (const int *)(const void *)d->row_slot.data;
    const int *src_off = (const int *)(const void *)d->src.data;
    const int *src_len = src_off + d->n_sentences;
    void *cross = d->cross.data;
    /* restricted self-attention: the position sees keys [t - window, t], and
     * only they are read of the cache */
    const int lo = c->attention_window > 0 && t > c->attention_window ? t - c->attention_window : 0;

    embedding_forward(x, tokens, p->tgt_embed, d->positions, t, 0, R, D, embedding_zero_id(c));
    if (c->embedding_layer_norm)
        layer_norm_forward(x, NULL, NULL, x, p->decoder_embedding_norm.weight,
                           p->decoder_embedding_norm.bias, R, D, eps);

    const tfm_packed_model *pm = d->m->packed;
    const nn_packed_layer *pd = pm ? pm->decoder : NULL;
    void *qs = decoder_scratch(d); /* reserved by tfm_decoder_start */
    for (int l = 0; l < c->n_decoder_layers; l++) {
        const tfm_decoder_layer *L = &p->decoder_layers[l];
        const nn_packed_layer *P = pd ? &pd[l] : NULL;

        /* self-attention over the row's cache, after appending this step's k, v */
        const tfm_layer_norm *ln = &L->self_attn_layer_norm;
        const float *in = sublayer_input(y, x, ln->weight, ln->bias, R, D, eps, c->pre_norm);
        packed_or_linear_forward(qkv, in, P ? &P->self_qkv : NULL, qs, L->self_attn.q_proj.weight,
                                 L->self_attn.q_proj.bias, R, D, 3 * D);
        attention_relative rel_tables; /* the cached key at lo is at distance lo - t */
        const attention_relative *rel =
            attention_relative_of(&rel_tables, &L->self_attn, c->relative_positions);
        for (int r = 0; r < R; r++) {
            void *kv = cache_at(d, row_slot[r], l); /* [S, 2D] */
            kv_store(d, kv_at(d, kv, (size_t)t * 2 * D), qkv + (size_t)r * 3 * D + D,
                     2 * (size_t)D);
            kv_attention(d, attn + (size_t)r * D, qkv + (size_t)r * 3 * D,
                         kv_at(d, kv, (size_t)lo * 2 * D), 2 * D, t - lo + 1, rel, lo - t, scores);
        }
        packed_or_linear_forward(tmp, attn, P ? &P->self_out : NULL, qs,
                                 L->self_attn.out_proj.weight, L->self_attn.out_proj.bias, R, D, D);
        sublayer_output(x, tmp, ln->weight, ln->bias, R, D, eps, c->pre_norm);

        /* encoder-decoder attention against the row's sentence */
        ln = &L->encoder_attn_layer_norm;
        in = sublayer_input(y, x, ln->weight, ln->bias, R, D, eps, c->pre_norm);
        float *q = qkv; /* [R, D] */
        packed_or_linear_forward(q, in, P ? &P->cross_q : NULL, qs, L->encoder_attn.q_proj.weight,
                                 L->encoder_attn.q_proj.bias, R, D, D);
        for (int r = 0; r < R; r++) {
            int s = row_sentence[r];
            const void *kv =
                kv_at(d, cross, ((size_t)l * d->total_src + (size_t)src_off[s]) * 2 * D);
            kv_attention(d, attn + (size_t)r * D, q + (size_t)r * D, kv, 2 * D, src_len[s], NULL, 0,
                         scores);
        }
        packed_or_linear_forward(tmp, attn, P ? &P->cross_out : NULL, qs,
                                 L->encoder_attn.out_proj.weight, L->encoder_attn.out_proj.bias, R,
                                 D, D);
        sublayer_output(x, tmp, ln->weight, ln->bias, R, D, eps, c->pre_norm);

        /* feed-forward */
        ln = &L->final_layer_norm;
        in = sublayer_input(y, x, ln->weight, ln->bias, R, D, eps, c->pre_norm);
        packed_ffn_forward(tmp, hidden, in, P, qs, &L->fc1, &L->fc2, R, D, F,
                           c->activation);
        sublayer_output(x, tmp, ln->weight, ln->bias, R, D, eps, c->pre_norm);
    }
    if (c->pre_norm)
        layer_norm_forward(x, NULL, NULL, x, p->decoder_layer_norm.weight,
                           p->decoder_layer_norm.bias, R, D, eps);

    /* [R, V] = x [R, D] x output_proj^T, and what the log-softmax needs:
     * the packed kernel gathers it while the logits are in the cache */
    if (d->n_short > 0) {
        tfm_status st = restricted_output(d, x, logits, stats, log_sums, qs);
        if (st != TFM_OK) return tfm_error_set(err, st, "decoder: out of memory for %d rows", R);
    } else if (pd) {
        double *sums = tfm_buf_array(&d->sums, (size_t)R * NN_STATS_SUMS, sizeof *sums);
        if (!sums) return tfm_error_set(err, TFM_ERR_NOMEM, "decoder: out of memory for %d rows", R);
        nn_packed_forward_stats(logits, x, &pm->output, R, qs, stats, log_sums ? sums : NULL);
    } else {
        linear_forward(logits, x, p->output_proj, p->output_bias, R, D, V);
        logit_stats(logits, R, V, stats);
    }
    d->t++;
    return TFM_OK;
}

tfm_status tfm_decoder_step_logits(tfm_decoder *d, const int32_t *tokens, float *logits,
                                   tfm_logit_stats *stats, tfm_error *err)
{
    return step(d, tokens, logits, stats, true, err);
}

tfm_status tfm_decoder_step_best(tfm_decoder *d, const int32_t *tokens, float *logits,
                                 tfm_logit_stats *stats, tfm_error *err)
{
    return step(d, tokens, logits, stats, false, err);
}

/* tokens: [R]; log_probs: [R, V_tgt] */
tfm_status tfm_decoder_step(tfm_decoder *d, const int32_t *tokens, float *log_probs,
                            tfm_error *err)
{
    tfm_logit_stats *stats = tfm_buf_array(&d->stats, (size_t)d->R, sizeof *stats);
    if (!stats && d->R > 0)
        return tfm_error_set(err, TFM_ERR_NOMEM, "decoder: out of memory for %d rows", d->R);
    tfm_status st = tfm_decoder_step_logits(d, tokens, log_probs, stats, err);
    if (st == TFM_OK) log_softmax_apply(log_probs, d->R, d->m->config.tgt_vocab_size, stats);
    return st;
}

/* parent: [new_R] */
tfm_status tfm_decoder_reorder(tfm_decoder *d, int new_R, const int *parent, tfm_error *err)
{
    const int D = d->m->config.d_model, NL = d->m->config.n_decoder_layers, R = d->R;
    if (new_R < 0) return tfm_error_set(err, TFM_ERR_ARG, "decoder: reorder to %d rows", new_R);
    for (int i = 0; i < new_R; i++)
        if (parent[i] < 0 || parent[i] >= R)
            return tfm_error_set(err, TFM_ERR_ARG,
                                 "decoder: new row %d continues row %d, but there are %d rows", i,
                                 parent[i], R);
    /* scratch: the old rows' sentences and slots [2R], whether an old row's
     * slot is taken [R], the free slots [most_slots], whether a slot is in
     * use [most_slots] */
    const int most_slots = d->n_slots > new_R ? d->n_slots : new_R;
    int *old = tfm_buf_array(&d->scratch, 3 * (size_t)R + 2 * (size_t)most_slots, sizeof(int));
    int *rows = tfm_buf_array(&d->row_sentence, (size_t)new_R, sizeof(int));
    int *slots = tfm_buf_array(&d->row_slot, (size_t)new_R, sizeof(int));
    if ((!old && R > 0) || (!rows && new_R > 0) || (!slots && new_R > 0) ||
        !reserve_slots(d, most_slots))
        return tfm_error_set(err, TFM_ERR_NOMEM, "decoder: out of memory for %d rows", new_R);
    rows = (int *)(void *)d->row_sentence.data;
    slots = (int *)(void *)d->row_slot.data;
    int *old_rows = old, *old_slots = old + R, *taken = old + 2 * R, *free_slots = old + 3 * R;
    if (R > 0) {
        memcpy(old_rows, rows, (size_t)R * sizeof *old_rows);
        memcpy(old_slots, slots, (size_t)R * sizeof *old_slots);
        memset(taken, 0, (size_t)R * sizeof *taken);
    }
    /* the first child of a row takes its slot */
    for (int i = 0; i < new_R; i++) {
        rows[i] = old_rows[parent[i]];
        slots[i] = -1;
        if (!taken[parent[i]]) {
            taken[parent[i]] = 1;
            slots[i] = old_slots[parent[i]];
        }
    }
    /* the free slots: those of rows not continued, and those no row held */
    int n_free = 0;
    bool *used = (bool *)(void *)(free_slots + most_slots);
    memset(used, 0, (size_t)d->n_slots);
    for (int r = 0; r < R; r++)
        if (taken[r]) used[old_slots[r]] = true;
    for (int k = d->n_slots - 1; k >= 0; k--)
        if (!used[k]) free_slots[n_free++] = k;
    /* the other children copy the positions fed so far into a free slot */
    for (int i = 0; i < new_R; i++) {
        if (slots[i] >= 0) continue;
        slots[i] = free_slots[--n_free];
        for (int l = 0; l < NL && d->t > 0; l++)
            memcpy(cache_at(d, slots[i], l), cache_at(d, old_slots[parent[i]], l),
                   (size_t)d->t * 2 * D * kv_bytes(d));
    }
    d->R = new_R;
    return TFM_OK;
}

/* states: [src_len, D]; tgt: [T]; log_probs: [T, V_tgt].  Allocates its
 * buffers per call: it is the reference, not the fast path. */
tfm_status tfm_decoder_forward_full(const tfm_model *m, const float *states, int src_len,
                                    const int32_t *tgt, int T, float *log_probs, tfm_error *err)
{
    const tfm_config *c = &m->config;
    const tfm_params *p = &m->params;
    const int D = c->d_model, F = c->d_ff, H = c->n_heads, Dh = D / H, V = c->tgt_vocab_size;
    const float eps = c->layer_norm_eps;
    if (!m->float_weights)
        return tfm_error_set(err, TFM_ERR_ARG, "decoder: the model holds its weights in %s only",
                             tfm_compute_type_name(m->compute));

    if (T < 0 || T > c->max_positions)
        return tfm_error_set(err, TFM_ERR_RANGE,
                             "decoder: target of %d tokens; the model takes 0 to %d", T,
                             c->max_positions);
    if (src_len < 0 || src_len > c->max_positions)
        return tfm_error_set(err, TFM_ERR_RANGE,
                             "decoder: source of %d states; the model takes 0 to %d", src_len,
                             c->max_positions);
    for (int i = 0; i < T; i++)
        if (tgt[i] < 0 || tgt[i] >= V)
            return tfm_error_set(err, TFM_ERR_RANGE,
                                 "decoder: target token %d: id %d is outside the target "
                                 "vocabulary [0, %d)",
                                 i, (int)tgt[i], V);
    if (T == 0) return TFM_OK;

    const attention_mask self_mask = {.q_pos = 0, .causal = true, .window = c->attention_window};
    const attention_mask cross_mask = {.q_pos = 0, .causal = false, .window = 0};
    size_t n_scratch = attention_scratch_size(T, T, self_mask, c->relative_positions);
    size_t n_cross = attention_scratch_size(T, src_len, cross_mask, 0);
    if (n_cross > n_scratch) n_scratch = n_cross;
    const size_t Tz = (size_t)T, Sz = (size_t)src_len;
    float *x = malloc((Tz * (7 * (size_t)D + F) + Sz * 2 * D + n_scratch) * sizeof(float));
    tfm_buf sinusoids;
    tfm_buf_init(&sinusoids);
    int n_sinusoids = 0;
    const float *positions;
    if (!x || !positions_table(c->positions, p->tgt_positions, &sinusoids, &n_sinusoids, T, D,
                               &positions)) {
        free(x);
        tfm_buf_free(&sinusoids);
        return tfm_error_set(err, TFM_ERR_NOMEM, "decoder: out of memory for %d tokens", T);
    }
    float *y = x + Tz * D;           /* [T, D] */
    float *qkv = y + Tz * D;         /* [T, 3D] */
    float *attn = qkv + Tz * 3 * D;  /* [T, D] */
    float *tmp = attn + Tz * D;      /* [T, D] */
    float *hidden = tmp + Tz * D;    /* [T, F] */
    float *cross = hidden + Tz * F;  /* [S, 2D] */
    float *scratch = cross + Sz * 2 * D;

    embedding_forward(x, tgt, p->tgt_embed, positions, 0, 1, T, D, embedding_zero_id(c));
    if (c->embedding_layer_norm)
        layer_norm_forward(x, NULL, NULL, x, p->decoder_embedding_norm.weight,
                           p->decoder_embedding_norm.bias, T, D, c->layer_norm_eps);

    for (int l = 0; l < c->n_decoder_layers; l++) {
        const tfm_decoder_layer *L = &p->decoder_layers[l];

        /* causal self-attention over the whole prefix */
        const tfm_layer_norm *ln = &L->self_attn_layer_norm;
        const float *in = sublayer_input(y, x, ln->weight, ln->bias, T, D, eps, c->pre_norm);
        linear_forward(qkv, in, L->self_attn.q_proj.weight, L->self_attn.q_proj.bias, T, D,
                       3 * D);
        attention_relative rel_tables;
        const attention_relative *rel =
            attention_relative_of(&rel_tables, &L->self_attn, c->relative_positions);
        attention_forward(attn, D, qkv, 3 * D, qkv + D, 3 * D, qkv + 2 * D, 3 * D, T, T, H, Dh,
                          self_mask, rel, scratch, NULL);
        linear_forward(tmp, attn, L->self_attn.out_proj.weight, L->self_attn.out_proj.bias, T, D,
                       D);
        sublayer_output(x, tmp, ln->weight, ln->bias, T, D, eps, c->pre_norm);

        /* encoder-decoder attention */
        ln = &L->encoder_attn_layer_norm;
        in = sublayer_input(y, x, ln->weight, ln->bias, T, D, eps, c->pre_norm);
        float *q = qkv; /* [T, D] */
        linear_forward(q, in, L->encoder_attn.q_proj.weight, L->encoder_attn.q_proj.bias, T, D, D);
        linear_forward(cross, states, L->encoder_attn.k_proj.weight, L->encoder_attn.k_proj.bias,
                       src_len, D, 2 * D);
        attention_forward(attn, D, q, D, cross, 2 * D, cross + D, 2 * D, T, src_len, H, Dh,
                          cross_mask, NULL, scratch, NULL);
        linear_forward(tmp, attn, L->encoder_attn.out_proj.weight, L->encoder_attn.out_proj.bias,
                       T, D, D);
        sublayer_output(x, tmp, ln->weight, ln->bias, T, D, eps, c->pre_norm);

        /* feed-forward */
        ln = &L->final_layer_norm;
        in = sublayer_input(y, x, ln->weight, ln->bias, T, D, eps, c->pre_norm);
        packed_ffn_forward(tmp, hidden, in, NULL, NULL, &L->fc1, &L->fc2, T, D, F, c->activation);
        sublayer_output(x, tmp, ln->weight, ln->bias, T, D, eps, c->pre_norm);
    }
    if (c->pre_norm)
        layer_norm_forward(x, NULL, NULL, x, p->decoder_layer_norm.weight,
                           p->decoder_layer_norm.bias, T, D, eps);
    linear_forward(log_probs, x, p->output_proj, p->output_bias, T, D, V);
    log_softmax_forward(log_probs, T, V);
    free(x);
    tfm_buf_free(&sinusoids);
    return TFM_OK;
}
