/* decode_batch.c - decoding a stream of encoder states in batches, as
 * 'decode' does: each record (one sentence's states) checked against the
 * model and cropped, its forced prefix read and checked, the records of a
 * batch decoded in slices by workers of their own (a decoder and a searcher
 * each), and each record's output lines formatted: ids, a score, or
 * Marian's n-best form (tfm_nbest_format). */
#include <stdlib.h>
#include <string.h>

#include "tfm/io.h"
#include "tfm/metrics.h"
#include "tfm/search.h"

/* One worker: a decoder and a searcher of its own. */
typedef struct decode_worker {
    tfm_decoder *decoder;
    tfm_search *search;
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
};

tfm_decode_params tfm_decode_default_params(void)
{
    tfm_decode_params p = {.search = tfm_search_default_params(), .capacity = 64, .workers = 1};
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
    b->workers = calloc((size_t)p->workers, sizeof *b->workers);
    if (!b->workers) goto nomem;
    for (int w = 0; w < p->workers; w++)
        if (tfm_decoder_create(m, &b->workers[w].decoder, err) != TFM_OK ||
            tfm_search_create(m, &b->workers[w].search, err) != TFM_OK)
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
    free(b);
}

tfm_npy_stream tfm_decode_batch_stream(const tfm_decode_batch *b, FILE *fp)
{
    /* Memory stays bounded by what a record may hold: max_input rows of
     * d_model floats (a wrong width is named by the read when it fits). */
    return (tfm_npy_stream){.fp = fp, .max_rows = b->max_input,
                            .max_bytes = (size_t)b->max_input * (size_t)b->D * sizeof(float)};
}

/* A failure in the prefix file at line (0: it ended). */
static tfm_status prefix_failed(tfm_decode_record *rec, size_t line, tfm_status status)
{
    rec->in_prefixes = true;
    rec->line = line;
    return status;
}

/* Reads the prefix line of a record into slot. */
static tfm_status read_prefix(tfm_decode_batch *b, size_t slot, tfm_line_reader *prefixes,
                              tfm_decode_record *rec, tfm_error *err)
{
    const char *line;
    size_t len;
    tfm_status s = tfm_lines_next(prefixes, &line, &len, err);
    size_t number = tfm_lines_number(prefixes);
    if (s == TFM_EOF) {
        tfm_error_set(err, TFM_ERR_FORMAT, "has %zu lines, but the input has more records: every "
                      "record needs a prefix line (an empty line forces nothing)", number);
        return prefix_failed(rec, 0, TFM_ERR_FORMAT);
    }
    if (s != TFM_OK) return prefix_failed(rec, number + 1, s);
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

/* Formats the hypotheses of sentence k of the worker's search into slot i. */
static tfm_status format_sentence(tfm_decode_batch *b, const tfm_search *search, size_t i, int k)
{
    tfm_buf *out = &b->out[i];
    tfm_buf_clear(out);
    tfm_nbest nb = tfm_search_result(search, k);
    b->best_len[i] = nb.n > 0 ? nb.hyps[0].len : 0;
    bool ok = true;
    if (b->p.search.nbest > 1) {
        for (int h = 0; h < nb.n && ok; h++) {
            const tfm_hypothesis *hyp = &nb.hyps[h];
            ok = tfm_nbest_format(b->index[i], hyp->ids, (size_t)hyp->len, (double)hyp->log_prob,
                                  (double)hyp->score, out) == TFM_OK;
        }
    } else if (nb.n > 0) {
        const tfm_hypothesis *hyp = &nb.hyps[0];
        ok = tfm_ids_format(hyp->ids, (size_t)hyp->len, out) == TFM_OK &&
             (!b->p.scores || tfm_buf_printf(out, "\t%.6f", (double)hyp->score) == TFM_OK) &&
             tfm_buf_putc(out, '\n') == TFM_OK;
    } else {
        ok = tfm_buf_putc(out, '\n') == TFM_OK;
    }
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
