/* decode_batch.c - decoding a stream of encoder states in batches, as
 * 'decode' does: each record (one sentence's states) checked against the
 * model and cropped, its forced prefix read and checked, the records of a
 * batch decoded in slices by workers of their own (a decoder and a searcher
 * each), and each record's output lines formatted: ids, a score, or
 * Marian's n-best form (tfm_nbest_format), and with alignment each
 * hypothesis's word alignment (decode_align.c). */
#include <stdlib.h>
#include <string.h>

#include "tfm/io.h"
#include "tfm/metrics.h"
#include "tfm/search.h"

#include "decode_align.h"
#include "search/search_internal.h"

/* One worker: a decoder and a searcher of its own (and with alignment, an
 * aligner). */
typedef struct decode_worker {
    tfm_decoder *decoder;
    tfm_search *search;
    decode_aligner *aligner;
} decode_worker;

/* Arrays hold p.capacity slots. */
struct tfm_decode_batch {
    const tfm_model *model;
    tfm_decode_params p;
    int D;
    int max_input;
    decode_worker *workers;     /* [p.workers] */
    tfm_tensor *tensors;        /* the records, reused from batch to batch */
    const float **states;       /* tensors[i].data */
    int *src_len;               /* rows of states used (after cropping) */
    tfm_ids *prefix;
    const int32_t **prefix_ids;
    int *prefix_len;
    uint64_t *seeds;
    size_t *index;              /* 0-based record number over all inputs */
    tfm_buf *out;               /* the output lines of each record */
    int *best_len;              /* ids of the best hypothesis */
    bool with_prefixes;         /* the records were read with prefixes */
    size_t records;             /* records read over all inputs */
    int align_layer;            /* with alignment: the decoder layer read (the last) */
    bool align_source_eos;      /* a source's last state is its </s>, not a word */
    struct decode_steer *steer; /* constraints and placeholders, when set (below) */
};

static void steer_free(struct decode_steer *st, size_t capacity, int workers);
static tfm_status run_steered(tfm_decode_batch *b, int worker, size_t lo, size_t hi,
                              tfm_error *err);

tfm_decode_params tfm_decode_default_params(void)
{
    tfm_decode_params p = {.search = tfm_search_default_params(), .capacity = TFM_DECODE_BATCH_SIZE,
                           .workers = 1};
    p.search.seed = 1;
    return p;
}

tfm_status tfm_decode_params_validate(const tfm_decode_params *p, bool beam_given, tfm_error *err)
{
    const tfm_search_params *sp = &p->search;
    if (sp->sampling && beam_given && sp->beam > 1)
        return tfm_error_set(err, TFM_ERR_ARG, "--beam %d and sampling exclude each other: "
                             "sampling draws --nbest samples per sentence", sp->beam);
    if (!sp->sampling && sp->nbest > sp->beam)
        return tfm_error_set(err, TFM_ERR_ARG, "--nbest %d is more than the beam (%d): beam "
                             "search keeps only beam hypotheses; give --beam %d", sp->nbest,
                             sp->beam, sp->nbest);
    return tfm_search_params_validate(sp, err);
}

tfm_status tfm_decode_batch_create(const tfm_model *m, const tfm_decode_params *p,
                                   tfm_decode_batch **out, tfm_error *err)
{
    *out = NULL;
    if (p->capacity == 0 || p->workers < 1)
        return tfm_error_set(err, TFM_ERR_ARG, "a decode batch needs a slot and a worker");
    if (p->alignment < TFM_ALIGNMENT_NONE || p->alignment > TFM_ALIGNMENT_SOFT)
        return tfm_error_set(err, TFM_ERR_ARG, "no alignment %d: none, hard or soft",
                             (int)p->alignment);
    tfm_decode_batch *b = calloc(1, sizeof *b);
    if (!b) return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    b->model = m;
    b->p = *p;
    /* a score is printed with --scores and in n-best lists only: a greedy
     * search without them needs no log-probs (tfm_search_params) */
    b->p.search.log_probs = p->search.log_probs && (p->scores || p->search.nbest > 1);
    b->D = m->config.d_model;
    b->max_input = p->max_input > 0 ? p->max_input : m->config.max_positions;
    *out = b;
    /* inspect-attn's defaults (tfm_view_default_params): the last decoder
     * layer, the mean of its heads (which tfm_aligner takes); for a model
     * trained with guided alignment, its alignment layer's first head */
    b->align_layer = m->config.alignment_layer >= 0 ? m->config.alignment_layer
                                                    : m->config.n_decoder_layers - 1;
    b->align_source_eos = tfm_model_source_eos(m);
    b->workers = calloc((size_t)p->workers, sizeof *b->workers);
    if (!b->workers) goto nomem;
    for (int w = 0; w < p->workers; w++)
        if (tfm_decoder_create(m, &b->workers[w].decoder, err) != TFM_OK ||
            tfm_search_create(m, &b->workers[w].search, err) != TFM_OK ||
            (p->alignment &&
             decode_aligner_create(m, p->alignment, b->align_layer, b->align_source_eos,
                                   (int)p->capacity, p->search.nbest,
                                   &b->workers[w].aligner, err) != TFM_OK))
            goto fail;
    size_t n = p->capacity;
    b->tensors = calloc(n, sizeof *b->tensors);
    b->states = calloc(n, sizeof *b->states);
    b->src_len = calloc(n, sizeof *b->src_len);
    b->prefix = calloc(n, sizeof *b->prefix);
    b->prefix_ids = calloc(n, sizeof *b->prefix_ids);
    b->prefix_len = calloc(n, sizeof *b->prefix_len);
    b->seeds = calloc(n, sizeof *b->seeds);
    b->index = calloc(n, sizeof *b->index);
    b->out = calloc(n, sizeof *b->out);
    b->best_len = calloc(n, sizeof *b->best_len);
    if (!b->tensors || !b->states || !b->src_len || !b->prefix || !b->prefix_ids ||
        !b->prefix_len || !b->seeds || !b->index || !b->out || !b->best_len)
        goto nomem;
    for (size_t i = 0; i < n; i++) {
        tfm_tensor_init(&b->tensors[i]);
        tfm_ids_init(&b->prefix[i]);
        tfm_buf_init(&b->out[i]);
    }
    return TFM_OK;
nomem:
    tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
fail:
    tfm_decode_batch_free(b);
    *out = NULL;
    return err->status;
}

void tfm_decode_batch_free(tfm_decode_batch *b)
{
    if (!b) return;
    for (size_t i = 0; i < b->p.capacity; i++) {
        if (b->tensors) tfm_tensor_free(&b->tensors[i]);
        if (b->prefix) tfm_ids_free(&b->prefix[i]);
        if (b->out) tfm_buf_free(&b->out[i]);
    }
    for (int w = 0; b->workers && w < b->p.workers; w++) {
        tfm_decoder_free(b->workers[w].decoder);
        tfm_search_free(b->workers[w].search);
        decode_aligner_free(b->workers[w].aligner);
    }
    free(b->workers);
    free(b->tensors);
    free(b->states);
    free(b->src_len);
    free(b->prefix);
    free(b->prefix_ids);
    free(b->prefix_len);
    free(b->seeds);
    free(b->index);
    free(b->out);
    free(b->best_len);
    steer_free(b->steer, b->p.capacity, b->p.workers);
    free(b);
}

tfm_npy_stream tfm_decode_batch_stream(const tfm_decode_batch *b, FILE *fp)
{
    /* Memory stays bounded by what a record may hold: max_input rows of
     * d_model floats (a wrong width is named by the read when it fits). */
    return (tfm_npy_stream){.fp = fp, .max_rows = b->max_input,
                            .max_bytes = (size_t)b->max_input * (size_t)b->D * sizeof(float)};
}

/* A failure in a side file at line (0: it ended). */
static tfm_status side_failed(tfm_decode_record *rec, tfm_decode_side side, size_t line,
                              tfm_status status)
{
    rec->in_prefixes = side == TFM_SIDE_PREFIX;
    rec->side = side;
    rec->line = line;
    return status;
}

static tfm_status prefix_failed(tfm_decode_record *rec, size_t line, tfm_status status)
{
    return side_failed(rec, TFM_SIDE_PREFIX, line, status);
}

/* Reads the next line of side file r for a record; `what` says what an
 * empty line means in the message of a file that ends too soon. */
static tfm_status read_side_line(tfm_line_reader *r, tfm_decode_side side, const char *what,
                                 const char **line, size_t *len, tfm_decode_record *rec,
                                 tfm_error *err)
{
    tfm_status s = tfm_lines_next(r, line, len, err);
    size_t number = tfm_lines_number(r);
    if (s == TFM_EOF) {
        tfm_error_set(err, TFM_ERR_FORMAT, "has %zu lines, but the input has more records: every "
                      "record needs a line (%s)", number, what);
        return side_failed(rec, side, 0, TFM_ERR_FORMAT);
    }
    if (s != TFM_OK) return side_failed(rec, side, number + 1, s);
    return TFM_OK;
}

/* Reads the prefix line of a record into slot. */
static tfm_status read_prefix(tfm_decode_batch *b, size_t slot, tfm_line_reader *prefixes,
                              tfm_decode_record *rec, tfm_error *err)
{
    const char *line;
    size_t len;
    tfm_status s = read_side_line(prefixes, TFM_SIDE_PREFIX, "an empty line forces nothing",
                                  &line, &len, rec, err);
    if (s != TFM_OK) return s;
    size_t number = tfm_lines_number(prefixes);
    const tfm_config *c = &b->model->config;
    tfm_ids *ids = &b->prefix[slot];
    s = tfm_ids_parse(line, len, c->tgt_vocab_size, ids, err);
    if (s != TFM_OK) return prefix_failed(rec, number, s);
    for (size_t j = 0; j < ids->len; j++)
        if (ids->data[j] == c->eos_id) {
            tfm_error_set(err, TFM_ERR_FORMAT, "id %d at position %zu is </s>: a prefix cannot end "
                          "the sentence", (int)c->eos_id, j + 1);
            return prefix_failed(rec, number, TFM_ERR_FORMAT);
        }
    if (ids->len > (size_t)c->max_positions - 1) {
        tfm_error_set(err, TFM_ERR_RANGE, "a prefix of %zu ids is longer than the model takes (%d)",
                      ids->len, c->max_positions - 1);
        return prefix_failed(rec, number, TFM_ERR_RANGE);
    }
    b->prefix_len[slot] = (int)ids->len;
    b->prefix_ids[slot] = ids->len ? ids->data : NULL;
    return TFM_OK;
}

tfm_status tfm_decode_batch_read(tfm_decode_batch *b, size_t slot, tfm_npy_stream *in,
                                 tfm_line_reader *prefixes, tfm_decode_record *rec,
                                 tfm_error *err)
{
    *rec = (tfm_decode_record){0};
    tfm_tensor *t = &b->tensors[slot];
    tfm_status s = tfm_npy_stream_read(in, t, err);
    if (s != TFM_OK) return s;
    rec->number = in->record;
    char shape[96];
    tfm_tensor_shape_str(t, shape, sizeof shape);
    if (t->dtype != TFM_F32)
        return tfm_error_set(err, TFM_ERR_FORMAT, "record %zu: states must be float32 ('<f4'), "
                             "not int32", rec->number);
    if (t->ndim != 2)
        return tfm_error_set(err, TFM_ERR_FORMAT, "record %zu: states must have shape (n, "
                             "d_model), not %s", rec->number, shape);
    if (t->shape[1] != b->D)
        return tfm_error_set(err, TFM_ERR_FORMAT, "record %zu: states have width %lld, but the "
                             "model's d_model is %d", rec->number, (long long)t->shape[1], b->D);
    rec->rows = t->shape[0]; /* the stream keeps at most max_input */
    rec->rows_in_file = in->rows_in_file;
    b->states[slot] = t->data;
    b->src_len[slot] = (int)rec->rows;
    b->prefix_len[slot] = 0;
    b->prefix_ids[slot] = NULL;
    b->with_prefixes = prefixes != NULL;
    if (prefixes && (s = read_prefix(b, slot, prefixes, rec, err)) != TFM_OK) return s;
    b->index[slot] = b->records;
    /* Sentence k's samples come from (seed, k): independent of the batch. */
    uint64_t key[2] = {b->p.search.seed, (uint64_t)b->records};
    b->seeds[slot] = tfm_hash_bytes(key, sizeof key);
    b->records++;
    return TFM_OK;
}

/* The aligner of the worker whose searcher is search, or NULL. */
static decode_aligner *worker_aligner(tfm_decode_batch *b, const tfm_search *search)
{
    for (int w = 0; w < b->p.workers; w++)
        if (b->workers[w].search == search) return b->workers[w].aligner;
    return NULL;
}

/* The aligner holding the alignments of slot i's hypotheses nb, sentence k
 * of search, or NULL when memory runs out; *own: one made for the call,
 * for the caller to free.  The first sentence of a worker's slice (k 0)
 * aligns the sentences of the search's run after it too, taking sentence j
 * to be slot i + j as tfm_decode_batch_run has it, all in one pass (not
 * with steering, whose groups of a slice are not consecutive slots); a
 * sentence not aligned so (decode_aligner_has checks the record and the
 * ids) is aligned alone. */
static decode_aligner *aligned(tfm_decode_batch *b, const tfm_search *search, size_t i, int k,
                               tfm_nbest nb, decode_aligner **own)
{
    *own = NULL;
    tfm_error err;
    decode_aligner *a = worker_aligner(b, search);
    if (a && k == 0 && !b->steer) {
        int n = 0;
        while ((size_t)n < b->p.capacity - i && tfm_search_result(search, n).n > 0) n++;
        if (decode_aligner_run(a, search, 0, n, b->states + i, b->src_len + i, b->index + i,
                               &err) != TFM_OK && err.status == TFM_ERR_NOMEM)
            return NULL;
    }
    if (a && decode_aligner_has(a, k, b->index[i], nb)) return a;
    if (!a && decode_aligner_create(b->model, b->p.alignment, b->align_layer,
                                    b->align_source_eos, 1, nb.n, own, &err) != TFM_OK)
        return NULL;
    if (!a) a = *own;
    return decode_aligner_run(a, search, k, 1, &b->states[i], &b->src_len[i], &b->index[i],
                              &err) == TFM_OK ? a : NULL;
}

/* " ||| " and hypothesis h's alignment from a (none: a sentence without a
 * source, whose alignment is empty), appended to out. */
static bool append_alignment(tfm_buf *out, const decode_aligner *a, int k, int h)
{
    size_t len = 0;
    const char *text = a ? decode_aligner_text(a, k, h, &len) : "";
    return tfm_buf_append(out, " ||| ", 5) == TFM_OK && tfm_buf_append(out, text, len) == TFM_OK;
}

/* Formats the hypotheses of sentence k of the worker's search into slot i. */
static tfm_status format_sentence(tfm_decode_batch *b, const tfm_search *search, size_t i, int k)
{
    tfm_buf *out = &b->out[i];
    tfm_buf_clear(out);
    tfm_nbest nb = tfm_search_result(search, k);
    b->best_len[i] = nb.n > 0 ? nb.hyps[0].len : 0;
    const bool align = b->p.alignment != TFM_ALIGNMENT_NONE;
    /* The alignments come from one more decoder pass, over the
     * hypotheses; a sentence with no source has none. */
    decode_aligner *a = NULL, *own = NULL;
    if (align && nb.n > 0 && b->src_len[i] > 0 && !(a = aligned(b, search, i, k, nb, &own))) {
        decode_aligner_free(own);
        return TFM_ERR_NOMEM;
    }
    bool ok = true;
    if (b->p.search.nbest > 1) {
        for (int h = 0; h < nb.n && ok; h++) {
            const tfm_hypothesis *hyp = &nb.hyps[h];
            if (!align) {
                ok = tfm_nbest_format(b->index[i], hyp->ids, (size_t)hyp->len,
                                      (double)hyp->log_prob, (double)hyp->score, out) == TFM_OK;
                continue;
            }
            /* tfm_nbest_format's line with the alignment after the ids, where
             * Marian puts it */
            ok = tfm_buf_printf(out, "%zu ||| ", b->index[i]) == TFM_OK &&
                 tfm_ids_format(hyp->ids, (size_t)hyp->len, out) == TFM_OK &&
                 append_alignment(out, a, k, h) &&
                 tfm_buf_printf(out, " ||| F0= %.6f ||| %.6f\n", (double)hyp->log_prob,
                                (double)hyp->score) == TFM_OK;
        }
    } else if (nb.n > 0) {
        const tfm_hypothesis *hyp = &nb.hyps[0];
        ok = tfm_ids_format(hyp->ids, (size_t)hyp->len, out) == TFM_OK &&
             (!a || append_alignment(out, a, k, 0)) &&
             (!b->p.scores || tfm_buf_printf(out, "\t%.6f", (double)hyp->score) == TFM_OK) &&
             tfm_buf_putc(out, '\n') == TFM_OK;
    } else {
        ok = tfm_buf_putc(out, '\n') == TFM_OK;
    }
    decode_aligner_free(own);
    return ok ? TFM_OK : TFM_ERR_NOMEM;
}

tfm_status tfm_decode_batch_run(tfm_decode_batch *b, int worker, size_t lo, size_t hi,
                                tfm_error *err)
{
    tfm_search_input in = {
        .n_sentences = (int)(hi - lo),
        .states = b->states + lo,
        .src_lens = b->src_len + lo,
        .prefixes = b->with_prefixes ? b->prefix_ids + lo : NULL,
        .prefix_lens = b->with_prefixes ? b->prefix_len + lo : NULL,
        .seeds = b->seeds + lo,
    };
    if (b->steer) return run_steered(b, worker, lo, hi, err);
    decode_worker *wk = &b->workers[worker];
    tfm_status s = tfm_search_run(wk->search, wk->decoder, &b->p.search, &in, err);
    for (size_t i = lo; i < hi && s == TFM_OK; i++)
        if (format_sentence(b, wk->search, i, (int)(i - lo)) != TFM_OK)
            s = tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    if (s != TFM_OK)
        tfm_error_prefix(err, "records %zu to %zu", b->index[lo] + 1, b->index[hi - 1] + 1);
    return s;
}

const tfm_buf *tfm_decode_batch_output(const tfm_decode_batch *b, size_t slot, int *best_len)
{
    if (best_len) *best_len = b->best_len[slot];
    return &b->out[slot];
}

size_t tfm_decode_batch_index(const tfm_decode_batch *b, size_t slot)
{
    return b->index[slot];
}

size_t tfm_decode_batch_records(const tfm_decode_batch *b)
{
    return b->records;
}

tfm_status tfm_decode_batch_finish(const tfm_decode_batch *b, tfm_line_reader *prefixes,
                                   size_t *line, tfm_error *err)
{
    *line = 0;
    const char *text;
    size_t len;
    tfm_error ignored;
    if (!prefixes || tfm_lines_next(prefixes, &text, &len, &ignored) != TFM_OK) return TFM_OK;
    *line = tfm_lines_number(prefixes);
    return tfm_error_set(err, TFM_ERR_FORMAT, "the prefix file has more lines than the input "
                         "has records (%zu)", b->records);
}

/* ---- constraints and placeholders ------------------------------------------------------- */

/* A worker's gathered view of some of its slots: the search input of a
 * group of records (arrays of p.capacity). */
typedef struct steer_group {
    size_t *slot;
    const float **states;
    int *src_len;
    const int32_t **prefix;
    int *prefix_len;
    uint64_t *seeds;
    const tfm_constraints **cons;
} steer_group;

struct decode_steer {
    tfm_decode_sides sides;
    tfm_ids *source;           /* [capacity] each record's source ids (with a shortlist) */
    tfm_vocab_set *vocab;      /* [workers] the candidates of a group (with a shortlist) */
    size_t *vocab_sum;         /* [workers] their sizes, summed over the groups decoded */
    size_t *vocab_groups;      /* [workers] the groups decoded */
    tfm_constraints **cons;    /* [capacity] each record's constraints */
    bool *constrained;         /* [capacity] it has some (and a source) */
    bool *unmet;               /* [capacity] they could not all be met */
    steer_group *groups;       /* [workers] */
};

static void steer_free(struct decode_steer *st, size_t capacity, int workers)
{
    if (!st) return;
    for (size_t i = 0; st->cons && i < capacity; i++) tfm_constraints_free(st->cons[i]);
    for (size_t i = 0; st->source && i < capacity; i++) tfm_ids_free(&st->source[i]);
    for (int w = 0; st->vocab && w < workers; w++) tfm_vocab_set_free(&st->vocab[w]);
    free(st->source);
    free(st->vocab);
    free(st->vocab_sum);
    free(st->vocab_groups);
    for (int w = 0; st->groups && w < workers; w++) {
        steer_group *g = &st->groups[w];
        free(g->slot);
        free(g->states);
        free(g->src_len);
        free(g->prefix);
        free(g->prefix_len);
        free(g->seeds);
        free(g->cons);
    }
    free(st->cons);
    free(st->constrained);
    free(st->unmet);
    free(st->groups);
    free(st);
}

tfm_status tfm_decode_batch_sides(tfm_decode_batch *b, const tfm_decode_sides *sides,
                                  tfm_error *err)
{
    if (sides->placeholders && !sides->vocab)
        return tfm_error_set(err, TFM_ERR_ARG, "placeholders need the model's vocabulary");
    if (sides->shortlist && (!sides->source || !sides->source_bpe))
        return tfm_error_set(err, TFM_ERR_ARG, "a shortlist needs the source text and an "
                             "encoder for it");
    if (sides->shortlist && tfm_shortlist_check_model(sides->shortlist, b->model, err) != TFM_OK)
        return err->status;
    const size_t n = b->p.capacity;
    struct decode_steer *st = calloc(1, sizeof *st);
    if (!st) return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    st->sides = *sides;
    if (sides->shortlist) {
        st->source = calloc(n, sizeof *st->source);
        st->vocab = calloc((size_t)b->p.workers, sizeof *st->vocab);
        st->vocab_sum = calloc((size_t)b->p.workers, sizeof *st->vocab_sum);
        st->vocab_groups = calloc((size_t)b->p.workers, sizeof *st->vocab_groups);
        if (!st->source || !st->vocab || !st->vocab_sum || !st->vocab_groups) {
            steer_free(st, n, b->p.workers);
            return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
        }
        for (size_t i = 0; i < n; i++) tfm_ids_init(&st->source[i]);
        for (int w = 0; w < b->p.workers; w++)
            if (tfm_vocab_set_init(&st->vocab[w], b->model->config.tgt_vocab_size, err) !=
                TFM_OK) {
                steer_free(st, n, b->p.workers);
                return err->status;
            }
    }
    st->cons = calloc(n, sizeof *st->cons);
    st->constrained = calloc(n, sizeof *st->constrained);
    st->unmet = calloc(n, sizeof *st->unmet);
    st->groups = calloc((size_t)b->p.workers, sizeof *st->groups);
    bool ok = st->cons && st->constrained && st->unmet && st->groups;
    const tfm_config *mc = &b->model->config;
    for (size_t i = 0; ok && i < n; i++) {
        ok = (st->cons[i] = tfm_constraints_create()) != NULL;
        if (ok) tfm_constraints_set_specials(st->cons[i], mc->pad_id, mc->bos_id, mc->eos_id);
    }
    for (int w = 0; ok && w < b->p.workers; w++) {
        steer_group *g = &st->groups[w];
        g->slot = calloc(n, sizeof *g->slot);
        g->states = calloc(n, sizeof *g->states);
        g->src_len = calloc(n, sizeof *g->src_len);
        g->prefix = calloc(n, sizeof *g->prefix);
        g->prefix_len = calloc(n, sizeof *g->prefix_len);
        g->seeds = calloc(n, sizeof *g->seeds);
        g->cons = calloc(n, sizeof *g->cons);
        ok = g->slot && g->states && g->src_len && g->prefix && g->prefix_len && g->seeds &&
             g->cons;
    }
    if (!ok) {
        steer_free(st, n, b->p.workers);
        return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    }
    steer_free(b->steer, n, b->p.workers);
    b->steer = st;
    return TFM_OK;
}

double tfm_decode_batch_shortlist_mean(const tfm_decode_batch *b)
{
    const struct decode_steer *st = b->steer;
    if (!st || !st->vocab_sum) return 0.0;
    size_t sum = 0, groups = 0;
    for (int w = 0; w < b->p.workers; w++) {
        sum += st->vocab_sum[w];
        groups += st->vocab_groups[w];
    }
    return groups ? (double)sum / (double)groups : 0.0;
}

bool tfm_decode_batch_unmet(const tfm_decode_batch *b, size_t slot)
{
    return b->steer && b->steer->unmet[slot];
}

tfm_status tfm_decode_batch_read_sides(tfm_decode_batch *b, size_t slot, tfm_decode_record *rec,
                                       tfm_error *err)
{
    struct decode_steer *st = b->steer;
    if (!st) return TFM_OK;
    tfm_constraints *c = st->cons[slot];
    tfm_constraints_clear(c);
    const char *line;
    size_t len;
    tfm_status s;
    tfm_line_reader *r = st->sides.constraints;
    if (r) {
        s = read_side_line(r, TFM_SIDE_CONSTRAINTS, "an empty line constrains nothing", &line,
                           &len, rec, err);
        if (s != TFM_OK) return s;
        s = tfm_constraints_parse(c, line, len, b->model->config.tgt_vocab_size, err);
        if (s != TFM_OK) return side_failed(rec, TFM_SIDE_CONSTRAINTS, tfm_lines_number(r), s);
    }
    r = st->sides.placeholders;
    if (r) {
        s = read_side_line(r, TFM_SIDE_PLACEHOLDERS, "the record's source text", &line, &len,
                           rec, err);
        if (s != TFM_OK) return s;
        s = tfm_constraints_add_placeholders(c, st->sides.vocab, line, len,
                                             st->sides.placeholder_classes, err);
        if (s != TFM_OK) return side_failed(rec, TFM_SIDE_PLACEHOLDERS, tfm_lines_number(r), s);
    }
    r = st->sides.shortlist ? st->sides.source : NULL;
    if (r) {
        s = read_side_line(r, TFM_SIDE_SOURCE, "the record's source text", &line, &len, rec,
                           err);
        if (s != TFM_OK) return s;
        s = tfm_bpe_encode(st->sides.source_bpe, NULL, line, len, &st->source[slot], NULL, err);
        if (s != TFM_OK) return side_failed(rec, TFM_SIDE_SOURCE, tfm_lines_number(r), s);
    }
    st->constrained[slot] = b->src_len[slot] > 0 && !tfm_constraints_empty(c);
    st->unmet[slot] = false;
    return TFM_OK;
}

/* The candidates of the n records in slots[0..n): the shortlist's for
 * their source pieces and its frequent ones, </s>, and every id their
 * prefixes and constraints ask for, sorted. */
static void shortlist_union(const tfm_decode_batch *b, const size_t *slots, size_t n,
                            tfm_vocab_set *v)
{
    const struct decode_steer *st = b->steer;
    const tfm_shortlist *sl = st->sides.shortlist;
    tfm_vocab_set_clear(v);
    tfm_vocab_set_add(v, b->model->config.eos_id);
    tfm_shortlist_add_frequent(sl, v);
    for (size_t j = 0; j < n; j++) {
        const size_t i = slots[j];
        tfm_shortlist_add_source(sl, st->source[i].data, st->source[i].len,
                                 st->sides.shortlist_best, v);
        for (int k = 0; k < b->prefix_len[i]; k++) tfm_vocab_set_add(v, b->prefix_ids[i][k]);
        search_constraints_vocab(st->cons[i], v);
    }
    tfm_vocab_set_sort(v);
}

/* Decodes the n records g->slot[off .. off + n) as one batch of worker w,
 * constrained or not, and formats their outputs; with constraints, the
 * records whose constraints were not all met are moved to the front of
 * that range and counted in *n_unmet. */
static tfm_status run_group(tfm_decode_batch *b, int w, size_t off, size_t n, bool constrained,
                            size_t *n_unmet, tfm_error *err)
{
    struct decode_steer *st = b->steer;
    steer_group *g = &st->groups[w];
    if (n == 0) return TFM_OK;
    for (size_t j = off; j < off + n; j++) {
        size_t i = g->slot[j];
        g->states[j] = b->states[i];
        g->src_len[j] = b->src_len[i];
        g->prefix[j] = b->prefix_ids[i];
        g->prefix_len[j] = b->prefix_len[i];
        g->seeds[j] = b->seeds[i];
        g->cons[j] = st->cons[i];
    }
    tfm_search_input in = {
        .n_sentences = (int)n,
        .states = g->states + off,
        .src_lens = g->src_len + off,
        .prefixes = b->with_prefixes ? g->prefix + off : NULL,
        .prefix_lens = b->with_prefixes ? g->prefix_len + off : NULL,
        .seeds = g->seeds + off,
        .constraints = constrained ? g->cons + off : NULL,
    };
    if (st->sides.shortlist) {
        tfm_vocab_set *v = &st->vocab[w];
        shortlist_union(b, g->slot + off, n, v);
        in.vocab = v->ids;
        in.vocab_size = v->n;
        st->vocab_sum[w] += (size_t)v->n;
        st->vocab_groups[w]++;
    }
    decode_worker *wk = &b->workers[w];
    tfm_status s = tfm_search_run(wk->search, wk->decoder, &b->p.search, &in, err);
    size_t unmet = 0;
    for (size_t j = 0; j < n && s == TFM_OK; j++) {
        size_t i = g->slot[off + j];
        if (format_sentence(b, wk->search, i, (int)j) != TFM_OK)
            s = tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
        if (constrained && !tfm_search_met(wk->search, (int)j)) g->slot[off + unmet++] = i;
    }
    if (n_unmet) *n_unmet = unmet;
    return s;
}

/* Decodes slots [lo, hi) with their constraints: the records without any
 * by the search asked for, those with by constrained beam search, and those
 * whose constraints could not be met again without them. */
static tfm_status run_steered(tfm_decode_batch *b, int worker, size_t lo, size_t hi,
                              tfm_error *err)
{
    struct decode_steer *st = b->steer;
    steer_group *g = &st->groups[worker];
    size_t n_free = 0, n_cons = 0;
    for (size_t i = lo; i < hi; i++)
        if (!st->constrained[i]) g->slot[lo + n_free++] = i;
    for (size_t i = lo; i < hi; i++)
        if (st->constrained[i]) g->slot[lo + n_free + n_cons++] = i;
    size_t n_unmet = 0;
    tfm_status s = run_group(b, worker, lo, n_free, false, NULL, err);
    if (s == TFM_OK) s = run_group(b, worker, lo + n_free, n_cons, true, &n_unmet, err);
    for (size_t j = lo + n_free; j < lo + n_free + n_unmet; j++) st->unmet[g->slot[j]] = true;
    if (s == TFM_OK) s = run_group(b, worker, lo + n_free, n_unmet, false, NULL, err);
    if (s != TFM_OK)
        tfm_error_prefix(err, "records %zu to %zu", b->index[lo] + 1, b->index[hi - 1] + 1);
    return s;
}

tfm_status tfm_decode_batch_finish_sides(const tfm_decode_batch *b, tfm_decode_side *side,
                                         size_t *line, tfm_error *err)
{
    *line = 0;
    *side = TFM_SIDE_STREAM;
    if (!b->steer) return TFM_OK;
    tfm_line_reader *readers[] = {b->steer->sides.constraints, b->steer->sides.placeholders,
                                  b->steer->sides.shortlist ? b->steer->sides.source : NULL};
    tfm_decode_side sides[] = {TFM_SIDE_CONSTRAINTS, TFM_SIDE_PLACEHOLDERS, TFM_SIDE_SOURCE};
    for (int k = 0; k < 3; k++) {
        const char *text;
        size_t len;
        tfm_error ignored;
        if (!readers[k] || tfm_lines_next(readers[k], &text, &len, &ignored) != TFM_OK) continue;
        *line = tfm_lines_number(readers[k]);
        *side = sides[k];
        return tfm_error_set(err, TFM_ERR_FORMAT, "has more lines than the input has records "
                             "(%zu)", b->records);
    }
    return TFM_OK;
}
