/* text_filter.c - a line filter, as tokenize(1) runs one: each line of a
 * stream encoded into ids or pieces, decoded back into text, or normalised,
 * one output line per input line, in order (tfm/text.h).
 *
 * The lines are read in batches of those that are ready and worked on over
 * tfm_batch_loop; a line that fails is reported after the lines before it
 * are written.  Encoding is spread over threads, an encoder each; each line
 * draws its dropout from a generator of its own, seeded by the seed and the
 * line's number, so the output does not depend on the thread count.
 * With placeholders, a line is scanned for them and encoded with their
 * tokens; decoding reads the source text in step with the input, a line
 * each, and puts the source line's placeholders back.  With a glossary, the
 * terms found in each encoded line give its constraints line, handed to the
 * caller just before the line itself, so the two outputs stay in step. */
#include <stdlib.h>
#include <string.h>

#include "text/line_batch_internal.h"

/* A batch of fewer lines than this per thread is encoded on fewer threads:
 * a handful of lines is not worth starting a thread. */
#define MIN_LINES_PER_THREAD 32

struct tfm_text_filter {
    tfm_filter_params p;
    const tfm_vocab *vocab;  /* NULL: normalize with p.norm */
    int32_t first_id;        /* p.first_piece's id, or -1 */
    int workers;
    tfm_bpe **encoders;      /* [workers], encode */
    tfm_ids *ids;            /* [workers], encode and decode */
    tfm_placeholders *ph;    /* [workers], with placeholders */
    size_t *dropped_by;      /* [workers]: placeholder tokens dropped from the last line */
    tfm_term_matches *matches; /* [workers], with a glossary */
    tfm_buf *cons_by;        /* [workers]: the constraints line of the last line */
    size_t *cons_dropped_by; /* [workers]: the terms it left out */
    bool source_ended;       /* the placeholder source ended before the input */
    uint64_t lines_before;   /* lines of earlier runs */
    /* The results of the batch being worked on, a slot per line. */
    tfm_buf *out;            /* [LINE_BATCH_LINES] */
    size_t *repaired;
    size_t *dropped;
    tfm_buf *cons;           /* with a glossary: constraints lines */
    size_t *cons_dropped;
    tfm_status *status;
    tfm_error *errors;
    size_t slots_used;       /* the slots any batch has read a line into */
};

/* What a run keeps; the line batch comes first, for its callbacks. */
typedef struct filter_run {
    line_batch b;
    tfm_text_filter *f;
    tfm_filter_write_fn write;
    void (*flush)(void *ctx);
    void *ctx;
} filter_run;

tfm_filter_params tfm_filter_default_params(void)
{
    return (tfm_filter_params){.op = TFM_FILTER_ENCODE, .output = TFM_LINE_IDS,
                               .input = TFM_LINE_AUTO, .seed = 1,
                               .norm = tfm_norm_default_params(), .threads = tfm_cpu_count(),
                               .placeholder_classes = TFM_PH_ALL};
}

tfm_status tfm_text_filter_create(const tfm_vocab *v, const tfm_filter_params *p,
                                  tfm_text_filter **out, tfm_error *err)
{
    *out = NULL;
    if ((int)p->op < TFM_FILTER_ENCODE || (int)p->op > TFM_FILTER_NORMALIZE)
        return tfm_error_set(err, TFM_ERR_ARG, "filter: no such operation");
    if (!v && p->op != TFM_FILTER_NORMALIZE)
        return tfm_error_set(err, TFM_ERR_ARG, "filter: encoding and decoding need a vocabulary");
    if (p->glossary && p->op != TFM_FILTER_ENCODE)
        return tfm_error_set(err, TFM_ERR_ARG, "filter: a glossary is for encoding");
    int32_t first_id = -1;
    if (p->first_piece && p->op == TFM_FILTER_ENCODE) {
        first_id = tfm_vocab_find(v, p->first_piece, strlen(p->first_piece));
        if (first_id < 0)
            return tfm_error_set(err, TFM_ERR_ARG, "the vocabulary has no piece '%.60s'%s",
                                 p->first_piece,
                                 strncmp(p->first_piece, ">>", 2) == 0
                                     ? " (a target-language token of a multilingual model)"
                                     : "");
    }
    if (p->glossary && tfm_glossary_vocab(p->glossary) != v)
        return tfm_error_set(err, TFM_ERR_ARG, "filter: the glossary is of another vocabulary");
    if (p->glossary && p->dropout > 0)
        return tfm_error_set(err, TFM_ERR_ARG,
                             "filter: a glossary's terms are found without BPE-dropout");
    if (p->placeholders && p->op != TFM_FILTER_NORMALIZE) {
        if (tfm_vocab_placeholder_id(v, 1) < 0)
            return tfm_error_set(err, TFM_ERR_FORMAT,
                                 "the vocabulary has no placeholder tokens: learn it with "
                                 "'tokenize learn --placeholders'");
        if (p->op == TFM_FILTER_DECODE && !p->placeholder_source)
            return tfm_error_set(err, TFM_ERR_ARG,
                                 "filter: decoding placeholders needs the source text");
    }
    tfm_text_filter *f = calloc(1, sizeof *f);
    if (!f) return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    f->p = *p;
    f->vocab = v;
    f->first_id = first_id;
    if (v && p->op == TFM_FILTER_NORMALIZE) f->p.norm = *tfm_vocab_norm(v); /* as it does */
    f->p.norm.strict = p->strict;
    f->workers = p->op == TFM_FILTER_ENCODE && p->threads > 1 ? p->threads : 1;
    f->encoders = calloc((size_t)f->workers, sizeof *f->encoders);
    f->ids = calloc((size_t)f->workers, sizeof *f->ids);
    f->ph = calloc((size_t)f->workers, sizeof *f->ph);
    f->dropped_by = calloc((size_t)f->workers, sizeof *f->dropped_by);
    f->matches = calloc((size_t)f->workers, sizeof *f->matches);
    f->cons_by = calloc((size_t)f->workers, sizeof *f->cons_by);
    f->cons_dropped_by = calloc((size_t)f->workers, sizeof *f->cons_dropped_by);
    f->cons = calloc(LINE_BATCH_LINES, sizeof *f->cons);
    f->cons_dropped = calloc(LINE_BATCH_LINES, sizeof *f->cons_dropped);
    f->dropped = calloc(LINE_BATCH_LINES, sizeof *f->dropped);
    f->out = calloc(LINE_BATCH_LINES, sizeof *f->out);
    f->repaired = calloc(LINE_BATCH_LINES, sizeof *f->repaired);
    f->status = calloc(LINE_BATCH_LINES, sizeof *f->status);
    f->errors = calloc(LINE_BATCH_LINES, sizeof *f->errors);
    if (!f->encoders || !f->ids || !f->ph || !f->dropped_by || !f->dropped || !f->out ||
        !f->repaired || !f->status || !f->errors || !f->matches || !f->cons_by ||
        !f->cons_dropped_by || !f->cons || !f->cons_dropped) {
        tfm_text_filter_free(f);
        return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    }
    /* the first worker's encoder now, which says what is wrong with the
     * vocabulary; the others' when they get lines (one line needs one) */
    tfm_status s = p->op == TFM_FILTER_ENCODE ? tfm_bpe_create(v, &f->encoders[0], err) : TFM_OK;
    if (s != TFM_OK) {
        tfm_text_filter_free(f);
        return s;
    }
    *out = f;
    return TFM_OK;
}

void tfm_text_filter_free(tfm_text_filter *f)
{
    if (!f) return;
    for (int w = 0; w < f->workers; w++) {
        if (f->encoders) tfm_bpe_free(f->encoders[w]);
        if (f->ids) tfm_ids_free(&f->ids[w]);
        if (f->ph) tfm_placeholders_free(&f->ph[w]);
        if (f->matches) tfm_term_matches_free(&f->matches[w]);
        if (f->cons_by) tfm_buf_free(&f->cons_by[w]);
    }
    /* (only the slots used: a pass over all would bring in every page of
     * the arrays, a tenth of the CPU time of a one-line tokenize) */
    for (size_t i = 0; f->out && i < f->slots_used; i++) tfm_buf_free(&f->out[i]);
    for (size_t i = 0; f->cons && i < f->slots_used; i++) tfm_buf_free(&f->cons[i]);
    free(f->matches);
    free(f->cons_by);
    free(f->cons_dropped_by);
    free(f->cons);
    free(f->cons_dropped);
    free(f->encoders);
    free(f->ids);
    free(f->ph);
    free(f->dropped_by);
    free(f->dropped);
    free(f->out);
    free(f->repaired);
    free(f->status);
    free(f->errors);
    free(f);
}

/* True when every space-separated token of the line is a decimal number. */
static bool looks_like_ids(const char *line, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (!(line[i] >= '0' && line[i] <= '9') && line[i] != ' ' && line[i] != '\t') return false;
    return true;
}

/* Encodes a line into out and, with a glossary, its constraints line into
 * cons (the terms left out in *cons_dropped). */
static tfm_status encode_line(tfm_text_filter *f, int worker, uint64_t index, const char *line,
                              size_t len, tfm_buf *out, tfm_buf *cons, size_t *cons_dropped,
                              size_t *repaired, tfm_error *err)
{
    tfm_rng rng;
    tfm_rng_seed(&rng, f->p.seed * 0x9e3779b97f4a7c15ULL + index);
    tfm_bpe_encode_params ep = {.dropout = f->p.dropout, .rng = &rng, .strict = f->p.strict};
    tfm_ids *ids = &f->ids[worker];
    tfm_buf_clear(out);
    tfm_status s;
    if (!f->encoders[worker] && (s = tfm_bpe_create(f->vocab, &f->encoders[worker], err)) != TFM_OK)
        return s;
    if (f->p.placeholders) {
        tfm_placeholders *ph = &f->ph[worker];
        s = tfm_placeholders_scan(line, len, f->p.placeholder_classes, ph, err);
        if (s == TFM_OK)
            s = tfm_bpe_encode_placeholders(f->encoders[worker], &ep, line, len, ph, ids,
                                            repaired, err);
    } else {
        s = tfm_bpe_encode(f->encoders[worker], &ep, line, len, ids, repaired, err);
    }
    if (s != TFM_OK) return s;
    if (f->first_id >= 0 && ids->len > 0) {
        if (tfm_ids_push(ids, 0) != TFM_OK)
            return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory encoding a line");
        memmove(ids->data + 1, ids->data, (ids->len - 1) * sizeof *ids->data);
        ids->data[0] = f->first_id;
    }
    if (f->p.glossary) {
        tfm_term_matches *m = &f->matches[worker];
        s = tfm_glossary_match(f->p.glossary, ids->data, ids->len, m, err);
        if (s == TFM_OK) s = tfm_glossary_constraints(f->p.glossary, m, cons, err);
        if (s != TFM_OK) return s;
        *cons_dropped = m->n_dropped;
    }
    if (f->p.output == TFM_LINE_PIECES)
        return tfm_bpe_ids_to_pieces(f->vocab, ids->data, ids->len, out, err);
    return tfm_ids_format(ids->data, ids->len, out);
}

static tfm_status decode_line(tfm_text_filter *f, int worker, const char *line, size_t len,
                              tfm_buf *out, tfm_error *err)
{
    tfm_ids *ids = &f->ids[worker];
    f->dropped_by[worker] = 0;
    /* The source line first, so that the two stay in step. */
    const char *src = NULL;
    size_t src_len = 0;
    if (f->p.placeholders) {
        tfm_status s = tfm_lines_next(f->p.placeholder_source, &src, &src_len, err);
        if (s == TFM_EOF) {
            f->source_ended = true;
            return tfm_error_set(err, TFM_ERR_FORMAT,
                                 "the source text of the placeholders has only %zu lines",
                                 tfm_lines_number(f->p.placeholder_source));
        }
        if (s != TFM_OK) return s;
        s = tfm_placeholders_scan(src, src_len, f->p.placeholder_classes, &f->ph[worker], err);
        if (s != TFM_OK) return s;
    }
    const bool id_line =
        f->p.input == TFM_LINE_IDS || (f->p.input == TFM_LINE_AUTO && looks_like_ids(line, len));
    tfm_status s = id_line ? tfm_ids_parse(line, len, tfm_vocab_size(f->vocab), ids, err)
                           : tfm_bpe_pieces_to_ids(f->vocab, line, len, ids, err);
    if (s != TFM_OK) return s;
    if (!f->p.placeholders) return tfm_bpe_decode(f->vocab, ids->data, ids->len, out, err);
    return tfm_bpe_decode_placeholders(f->vocab, ids->data, ids->len, src, src_len,
                                       &f->ph[worker], out, &f->dropped_by[worker], err);
}

bool tfm_text_filter_source_ended(const tfm_text_filter *f)
{
    return f->source_ended;
}

size_t tfm_text_filter_dropped(const tfm_text_filter *f, int worker)
{
    return worker >= 0 && worker < f->workers ? f->dropped_by[worker] : 0;
}

const char *tfm_text_filter_constraints(const tfm_text_filter *f, int worker, size_t *len,
                                        size_t *n_dropped)
{
    bool ok = worker >= 0 && worker < f->workers && f->cons_by[worker].data;
    if (len) *len = ok ? f->cons_by[worker].len : 0;
    if (n_dropped) *n_dropped = ok ? f->cons_dropped_by[worker] : 0;
    return ok ? f->cons_by[worker].data : "";
}

tfm_status tfm_text_filter_finish(tfm_text_filter *f, tfm_error *err)
{
    if (!f->p.placeholders || f->p.op != TFM_FILTER_DECODE || f->source_ended) return TFM_OK;
    const char *line;
    size_t len;
    tfm_status s = tfm_lines_next(f->p.placeholder_source, &line, &len, err);
    if (s == TFM_EOF) {
        f->source_ended = true;
        return TFM_OK;
    }
    if (s != TFM_OK) return s;
    return tfm_error_set(err, TFM_ERR_FORMAT,
                         "line %zu: the source text of the placeholders has more lines than "
                         "the input (%zu)",
                         tfm_lines_number(f->p.placeholder_source),
                         tfm_lines_number(f->p.placeholder_source) - 1);
}

/* tfm_text_filter_line with the constraints line into cons (a glossary's). */
static tfm_status filter_line(tfm_text_filter *f, int worker, uint64_t index, const char *line,
                              size_t len, tfm_buf *out, tfm_buf *cons, size_t *cons_dropped,
                              size_t *repaired, tfm_error *err)
{
    if (repaired) *repaired = 0;
    tfm_buf_clear(cons);
    *cons_dropped = 0;
    if (err) err->msg[0] = 0;
    tfm_status s;
    switch (f->p.op) {
    case TFM_FILTER_ENCODE:
        s = encode_line(f, worker, index, line, len, out, cons, cons_dropped, repaired, err);
        break;
    case TFM_FILTER_DECODE: s = decode_line(f, worker, line, len, out, err); break;
    default: s = tfm_normalize(&f->p.norm, line, len, out, repaired, err);
    }
    if (s != TFM_OK && err && err->msg[0] == 0) tfm_error_set(err, s, "%s", tfm_strerror(s));
    return s;
}

tfm_status tfm_text_filter_line(tfm_text_filter *f, int worker, uint64_t index, const char *line,
                                size_t len, tfm_buf *out, size_t *repaired, tfm_error *err)
{
    if (worker < 0 || worker >= f->workers) {
        if (repaired) *repaired = 0;
        return tfm_error_set(err, TFM_ERR_ARG, "filter: no worker %d", worker);
    }
    return filter_line(f, worker, index, line, len, out, &f->cons_by[worker],
                       &f->cons_dropped_by[worker], repaired, err);
}

/* Filters lines [lo, hi) of the batch as worker w, each into its slot. */
static tfm_status filter_lines(void *ctx, int worker, size_t lo, size_t hi, tfm_error *err)
{
    filter_run *r = ctx;
    tfm_text_filter *f = r->f;
    const uint64_t first = f->lines_before + r->b.first_line - 1;
    for (size_t i = lo; i < hi; i++) {
        f->status[i] = filter_line(f, worker, first + i, line_batch_line(&r->b, i), r->b.len[i],
                                   &f->out[i], &f->cons[i], &f->cons_dropped[i],
                                   &f->repaired[i], &f->errors[i]);
        f->dropped[i] = f->dropped_by[worker];
    }
    return TFM_OK;
}

/* Gives slot `slot`'s result to the caller's write, or returns its error. */
static tfm_status write_slot(void *ctx, size_t slot, tfm_error *err)
{
    filter_run *r = ctx;
    tfm_text_filter *f = r->f;
    if (f->status[slot] != TFM_OK) {
        *err = f->errors[slot];
        return f->status[slot];
    }
    if (f->dropped[slot] > 0 && f->p.placeholders_dropped)
        f->p.placeholders_dropped(r->ctx, r->b.first_line + slot, f->dropped[slot]);
    if (f->p.glossary && f->p.constraints) {
        const tfm_buf *c = &f->cons[slot];
        tfm_status s = f->p.constraints(r->ctx, r->b.first_line + slot, c->data ? c->data : "",
                                        c->len, f->cons_dropped[slot], err);
        if (s != TFM_OK) return s;
    }
    const tfm_buf *out = &f->out[slot];
    return r->write(r->ctx, r->b.first_line + slot, out->data ? out->data : "", out->len,
                    f->repaired[slot], err);
}

/* line_batch_read, noting the slots used. */
static tfm_status read_line(void *ctx, size_t slot, size_t *cost, tfm_error *err)
{
    filter_run *r = ctx;
    if (slot >= r->f->slots_used) r->f->slots_used = slot + 1;
    return line_batch_read(ctx, slot, cost, err);
}

static void flush_run(void *ctx)
{
    filter_run *r = ctx;
    if (r->flush) r->flush(r->ctx);
}

tfm_status tfm_text_filter_run(tfm_text_filter *f, tfm_line_reader *reader,
                               tfm_filter_write_fn write, void (*flush)(void *ctx), void *ctx,
                               tfm_batch_failure *failure)
{
    filter_run r = {.f = f, .write = write, .flush = flush, .ctx = ctx};
    tfm_error err;
    if (line_batch_init(&r.b, &err) != TFM_OK) {
        if (failure) *failure = (tfm_batch_failure){.stage = TFM_BATCH_READ, .err = err};
        return err.status;
    }
    r.b.reader = reader;
    tfm_batch_loop loop = {
        .ctx = &r, .max_items = LINE_BATCH_LINES, .max_cost = LINE_BATCH_BYTES,
        .threads = f->workers, .min_items_per_slice = MIN_LINES_PER_THREAD,
        .read = read_line, .ready = line_batch_ready, .work = filter_lines,
        .write = write_slot, .flush = flush_run,
    };
    tfm_status s = tfm_batch_loop_run(&loop, failure);
    f->lines_before += tfm_lines_number(reader);
    line_batch_free(&r.b);
    return s;
}
