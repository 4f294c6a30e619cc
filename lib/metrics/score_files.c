/* score_files.c - scoring hypothesis files against reference files read in
 * step, as 'score METRIC' does: row n is line n of every file.  Rows are
 * gathered into bounded batches of the rows that are ready (tfm_batch_loop),
 * their statistics computed over threads (one tfm_metric per worker), and
 * added to each system's corpus in input order, so only a few numbers per
 * line are kept and the files may be of any size.  A line that cannot be
 * taken is reported after the rows before it are counted and written, so
 * the output is a clean prefix of the full answer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tfm/metrics.h"

/* Rows are gathered into batches of at most this many rows or bytes, and a
 * batch is cut short whenever no further input is ready. */
#define BATCH_ROWS 4096
#define BATCH_BYTES (8u << 20)
/* Fewer rows than this per thread are scored on fewer threads. */
#define MIN_ROWS_PER_THREAD 32

/* One input and the lines read of it so far. */
typedef struct input {
    const char *name, *label;
    tfm_line_reader *reader;
    size_t lines;
} input;

struct tfm_file_scorer {
    tfm_file_scorer_params p;
    input *inputs;                /* the systems, then the references */
    int n_sys, n_inputs;
    const tfm_score_output *out;  /* during a run */
    /* The batch: line k of row j is text[offset[j*n+k] .. + len[j*n+k]). */
    tfm_buf text;
    size_t *offset, *len;
    size_t first_line;            /* 1-based number of row 0 */
    tfm_buf repaired;
    /* Statistics of the batch, computed in parallel: for row j and system s,
     * stats + (j * n_sys + s) * n_stats. */
    int n_workers;
    tfm_metric **workers;         /* one per thread */
    size_t n_stats;
    double *stats;
    int *n_used;
    tfm_status *status;
    tfm_error *errors;
    tfm_metric **corpus;          /* one per system: the rows so far */
    size_t *tokenized_period;     /* per system: lines ending in " ." */
    tfm_buf line;                 /* a line to write */
    tfm_score_failure fail;       /* where the run stopped */
};

tfm_file_scorer_params tfm_file_scorer_default_params(void)
{
    tfm_file_scorer_params p;
    memset(&p, 0, sizeof p);
    p.metric = tfm_metric_default_params(TFM_METRIC_BLEU);
    p.threads = 1;
    p.format = tfm_score_format_default();
    p.bootstrap = tfm_bootstrap_default_params();
    return p;
}

/* The messages name the command-line options of 'score', which these
 * parameters are. */
tfm_status tfm_file_scorer_params_validate(const tfm_file_scorer_params *p, int n_systems,
                                           tfm_error *err)
{
    const tfm_metric_params *m = &p->metric;
    if (m->smooth_value >= 0 && m->smooth != TFM_BLEU_SMOOTH_FLOOR &&
        m->smooth != TFM_BLEU_SMOOTH_ADD_K)
        return tfm_error_set(err, TFM_ERR_ARG,
                             "--smooth-value is the value of --smooth floor or --smooth add-k");
    if (m->kind == TFM_METRIC_CHRF && m->char_order + m->word_order == 0)
        return tfm_error_set(err, TFM_ERR_ARG, "--char-order and --word-order cannot both be 0");
    if (p->sentence && (p->confidence || p->paired))
        return tfm_error_set(err, TFM_ERR_ARG, "--sentence gives one score per line: --confidence "
                             "and --paired-bs need the corpus");
    if (p->confidence && p->paired)
        return tfm_error_set(err, TFM_ERR_ARG, "--paired-bs shows confidence intervals already; "
                             "leave out --confidence");
    if (p->paired && n_systems < 2)
        return tfm_error_set(err, TFM_ERR_ARG, "--paired-bs needs a baseline and at least one "
                             "system: --paired-bs BASELINE SYSTEM...");
    if (!p->paired && n_systems > 1)
        return tfm_error_set(err, TFM_ERR_ARG, "one hypothesis file at most (to compare systems, "
                             "use --paired-bs BASELINE SYSTEM...)");
    return TFM_OK;
}

tfm_status tfm_paired_systems(const char **names, int *n, int *baseline_repeats, tfm_error *err)
{
    int kept = *n > 0 ? 1 : 0;
    *baseline_repeats = 0;
    for (int i = 1; i < *n; i++) {
        if (strcmp(names[i], names[0]) == 0) {
            ++*baseline_repeats;
            continue;
        }
        for (int k = 1; k < kept; k++)
            if (strcmp(names[k], names[i]) == 0)
                return tfm_error_set(err, TFM_ERR_ARG, "%s is given twice", names[i]);
        names[kept++] = names[i];
    }
    *n = kept;
    if (kept < 2)
        return tfm_error_set(err, TFM_ERR_ARG, "--paired-bs needs a system besides the baseline");
    return TFM_OK;
}

/* ---- reading rows ---------------------------------------------------------------------------- */

/* Records where a line could not be taken, for the message. */
static void fail_at(tfm_file_scorer *s, const input *in, size_t line)
{
    s->fail.file = in ? in->label : NULL;
    s->fail.line = line;
}

/* Reads the next line of an input (counted in in->lines), noting where a
 * line could not be read. */
static tfm_status next_line(tfm_file_scorer *s, input *in, const char **line, size_t *len,
                            tfm_error *err)
{
    tfm_status st = tfm_lines_next(in->reader, line, len, err);
    if (st == TFM_OK) in->lines++;
    else if (st != TFM_EOF) fail_at(s, in, in->lines + 1);
    return st;
}

/* Some input ended before the others: counts what is left of each and
 * says which two lengths differ. */
static tfm_status length_mismatch(tfm_file_scorer *s, tfm_error *err)
{
    const char *line;
    size_t len;
    for (int k = 0; k < s->n_inputs; k++) {
        tfm_status st;
        while ((st = next_line(s, &s->inputs[k], &line, &len, err)) == TFM_OK) {}
        if (st != TFM_EOF) return st;
    }
    fail_at(s, NULL, 0);
    const input *first = &s->inputs[0];
    for (int k = 1; k < s->n_inputs; k++) {
        const input *in = &s->inputs[k];
        if (in->lines == first->lines) continue;
        return tfm_error_set(err, TFM_ERR_FORMAT, "hypotheses in %s have %zu line%s but %s has "
                             "%zu line%s", first->label, first->lines,
                             first->lines == 1 ? "" : "s", in->label, in->lines,
                             in->lines == 1 ? "" : "s");
    }
    return tfm_error_set(err, TFM_ERR_FORMAT, "the inputs differ in length"); /* not reached */
}

static bool all_ready(void *ctx)
{
    tfm_file_scorer *s = ctx;
    for (int k = 0; k < s->n_inputs; k++)
        if (!tfm_lines_ready(s->inputs[k].reader)) return false;
    return true;
}

/* Reads row `slot` of the batch: the next line of every input, repaired and
 * right-stripped as sacreBLEU's command line strips them. */
static tfm_status read_row(void *ctx, size_t slot, size_t *cost, tfm_error *err)
{
    tfm_file_scorer *s = ctx;
    size_t n = (size_t)s->n_inputs;
    if (slot == 0) {
        tfm_buf_clear(&s->text);
        s->first_line = s->inputs[0].lines + 1;
    }
    size_t before = s->text.len;
    size_t ended = 0;
    for (size_t k = 0; k < n; k++) {
        input *in = &s->inputs[k];
        const char *line;
        size_t len;
        tfm_status st = next_line(s, in, &line, &len, err);
        if (st == TFM_EOF) {
            ended++;
            continue;
        }
        if (st != TFM_OK) return st;
        size_t repaired = 0, first_bad = 0;
        tfm_buf_clear(&s->repaired);
        if (tfm_utf8_repair_append(&s->repaired, line, len, &repaired, &first_bad) != TFM_OK)
            return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
        if (repaired && s->p.strict) {
            fail_at(s, in, in->lines);
            return tfm_error_set(err, TFM_ERR_UTF8, "invalid UTF-8 at byte %zu", first_bad + 1);
        }
        if (repaired)
            tfm_score_warn(s->out, in->label, in->lines, "invalid UTF-8 replaced by U+FFFD (%zu "
                           "sequence%s)", repaired, repaired == 1 ? "" : "s");
        const char *text = s->repaired.data ? s->repaired.data : "";
        size_t kept = tfm_utf8_rstrip(text, s->repaired.len);
        s->offset[slot * n + k] = s->text.len;
        s->len[slot * n + k] = kept;
        if (tfm_buf_append(&s->text, text, kept) != TFM_OK)
            return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    }
    if (ended == n) return TFM_EOF;
    if (ended > 0) return length_mismatch(s, err);
    *cost = s->text.len - before + 1;
    return TFM_OK;
}

/* Line k (an input) of row j of the batch. */
static const char *row_text(const tfm_file_scorer *s, size_t j, int k, size_t *len)
{
    size_t at = j * (size_t)s->n_inputs + (size_t)k;
    *len = s->len[at];
    return s->text.data ? s->text.data + s->offset[at] : "";
}

/* ---- statistics and the rows in order --------------------------------------------------------- */

/* Computes the statistics of rows [lo, hi) of the batch as worker w; a row
 * that cannot be scored keeps its status for add_row. */
static tfm_status row_stats(void *ctx, int w, size_t lo, size_t hi, tfm_error *err)
{
    tfm_file_scorer *s = ctx;
    int n_refs = s->n_inputs - s->n_sys;
    const char *refs[TFM_METRIC_MAX_REFS];
    size_t lens[TFM_METRIC_MAX_REFS];
    for (size_t j = lo; j < hi; j++) {
        for (int r = 0; r < n_refs; r++) refs[r] = row_text(s, j, s->n_sys + r, &lens[r]);
        for (int y = 0; y < s->n_sys; y++) {
            size_t at = j * (size_t)s->n_sys + (size_t)y, hyp_len;
            const char *hyp = row_text(s, j, y, &hyp_len);
            s->status[at] = tfm_metric_segment(s->workers[w], hyp, hyp_len, refs, lens, n_refs,
                                               s->stats + at * s->n_stats, &s->n_used[at],
                                               &s->errors[at]);
        }
    }
    return TFM_OK;
}

/* Writes one row's score (sentence). */
static tfm_status write_sentence(tfm_file_scorer *s, const double *stats, int n_used,
                                 tfm_error *err)
{
    tfm_score score;
    tfm_metric_compute(s->corpus[0], stats, &score);
    tfm_score_format f = s->p.format;
    f.compact = true;
    f.nrefs = n_used; /* sacreBLEU re-counts the references of each sentence */
    f.has_ci = false;
    f.n_bootstrap = 0;
    tfm_buf_clear(&s->line);
    if (tfm_metric_format(s->corpus[0], &score, &f, &s->line) != TFM_OK)
        return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    tfm_score_write(s->out, s->line.data, s->line.len);
    return TFM_OK;
}

/* Adds row j's statistics to each system's corpus (and writes its score
 * with sentence), or returns the error of a line that cannot be scored. */
static tfm_status add_row(void *ctx, size_t j, tfm_error *err)
{
    tfm_file_scorer *s = ctx;
    size_t line = s->first_line + j;
    const input *ref = &s->inputs[s->n_sys];
    for (int y = 0; y < s->n_sys; y++) {
        size_t at = j * (size_t)s->n_sys + (size_t)y;
        if (s->status[at] == TFM_ERR_ARG && s->p.sentence) {
            /* One output line per input line: an empty one for this. */
            tfm_score_warn(s->out, ref->label, line, "%s: no score for this line",
                           s->errors[at].msg);
            tfm_score_write(s->out, "", 0);
            continue;
        }
        if (s->status[at] == TFM_ERR_ARG) {
            fail_at(s, ref, line);
            return tfm_error_set(err, TFM_ERR_ARG, "%s", s->errors[at].msg);
        }
        if (s->status[at] != TFM_OK) {
            fail_at(s, &s->inputs[y], line);
            *err = s->errors[at];
            return s->status[at];
        }
        const double *stats = s->stats + at * s->n_stats;
        tfm_status st = tfm_metric_add_stats(s->corpus[y], stats, s->n_used[at], err);
        if (st != TFM_OK) {
            fail_at(s, NULL, 0);
            return st;
        }
        size_t hyp_len;
        const char *hyp = row_text(s, j, y, &hyp_len);
        if (hyp_len >= 2 && hyp[hyp_len - 2] == ' ' && hyp[hyp_len - 1] == '.')
            s->tokenized_period[y]++;
        if (s->p.sentence && (st = write_sentence(s, stats, s->n_used[at], err)) != TFM_OK)
            return st;
    }
    return TFM_OK;
}

static void flush_lines(void *ctx)
{
    tfm_file_scorer *s = ctx;
    tfm_score_flush(s->out);
}

/* ---- the scorer ------------------------------------------------------------------------------- */

tfm_status tfm_file_scorer_create(const tfm_file_scorer_params *p, const tfm_score_input *inputs,
                                  int n_systems, int n_refs, tfm_file_scorer **out,
                                  tfm_error *err)
{
    *out = NULL;
    if (n_systems < 1 || n_refs < 1 || n_refs > TFM_METRIC_MAX_REFS || p->threads < 1 ||
        (p->paired && n_systems < 2))
        return tfm_error_set(err, TFM_ERR_ARG, "a file scorer needs a system (two for a paired "
                             "test), 1 to %d references and a thread", TFM_METRIC_MAX_REFS);
    tfm_file_scorer *s = calloc(1, sizeof *s);
    if (!s) return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    s->p = *p;
    s->n_sys = n_systems;
    s->n_inputs = n_systems + n_refs;
    tfm_buf_init(&s->text);
    tfm_buf_init(&s->repaired);
    tfm_buf_init(&s->line);
    size_t n = (size_t)s->n_inputs, sys = (size_t)n_systems, cells = (size_t)BATCH_ROWS * sys;
    s->inputs = calloc(n, sizeof *s->inputs);
    s->workers = calloc((size_t)p->threads, sizeof *s->workers);
    s->corpus = calloc(sys, sizeof *s->corpus);
    s->tokenized_period = calloc(sys, sizeof *s->tokenized_period);
    s->offset = calloc((size_t)BATCH_ROWS * n, sizeof *s->offset);
    s->len = calloc((size_t)BATCH_ROWS * n, sizeof *s->len);
    s->n_used = calloc(cells, sizeof *s->n_used);
    s->status = calloc(cells, sizeof *s->status);
    s->errors = calloc(cells, sizeof *s->errors);
    if (!s->inputs || !s->workers || !s->corpus || !s->tokenized_period || !s->offset || !s->len ||
        !s->n_used || !s->status || !s->errors) {
        tfm_file_scorer_free(s);
        return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    }
    for (size_t k = 0; k < n; k++) {
        s->inputs[k].name = inputs[k].name;
        s->inputs[k].label = inputs[k].label ? inputs[k].label : inputs[k].name;
        s->inputs[k].reader = inputs[k].lines;
    }
    /* The workers keep no segments; the corpora do when a bootstrap needs them. */
    tfm_metric_params wp = p->metric, cp = p->metric;
    wp.keep_segments = false;
    cp.keep_segments = p->confidence || p->paired;
    tfm_status st = TFM_OK;
    for (int w = 0; w < p->threads && st == TFM_OK; w++, s->n_workers++)
        st = tfm_metric_create(&wp, &s->workers[w], err);
    for (int y = 0; y < n_systems && st == TFM_OK; y++)
        st = tfm_metric_create(&cp, &s->corpus[y], err);
    if (st == TFM_OK) {
        s->n_stats = tfm_metric_n_stats(s->corpus[0]);
        s->stats = calloc(cells * s->n_stats, sizeof *s->stats);
        if (!s->stats) st = tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    }
    if (st != TFM_OK) {
        tfm_file_scorer_free(s);
        return st;
    }
    *out = s;
    return TFM_OK;
}

void tfm_file_scorer_free(tfm_file_scorer *s)
{
    if (!s) return;
    for (int w = 0; w < s->n_workers; w++) tfm_metric_free(s->workers[w]);
    for (int y = 0; s->corpus && y < s->n_sys; y++) tfm_metric_free(s->corpus[y]);
    free(s->workers);
    free(s->corpus);
    free(s->tokenized_period);
    free(s->inputs);
    free(s->offset);
    free(s->len);
    free(s->stats);
    free(s->n_used);
    free(s->status);
    free(s->errors);
    tfm_buf_free(&s->text);
    tfm_buf_free(&s->repaired);
    tfm_buf_free(&s->line);
    free(s);
}

tfm_status tfm_file_scorer_run(tfm_file_scorer *s, const tfm_score_output *out,
                               tfm_score_failure *at, tfm_error *err)
{
    s->out = out;
    s->fail = (tfm_score_failure){NULL, 0};
    tfm_batch_loop loop = {
        .ctx = s, .max_items = BATCH_ROWS, .max_cost = BATCH_BYTES, .threads = s->n_workers,
        .min_items_per_slice = MIN_ROWS_PER_THREAD,
        .read = read_row, .ready = all_ready, .work = row_stats, .write = add_row,
        .flush = flush_lines,
    };
    tfm_batch_failure f;
    tfm_status st = tfm_batch_loop_run(&loop, &f);
    if (st != TFM_OK) {
        if (err) *err = f.err;
    } else if (s->inputs[0].lines == 0) {
        st = tfm_error_set(err, TFM_ERR_FORMAT, "no lines to score: the hypotheses and "
                           "references are empty");
    }
    if (at) *at = st == TFM_OK ? (tfm_score_failure){NULL, 0} : s->fail;
    for (int y = 0; st == TFM_OK && y < s->n_sys; y++)
        if (s->p.metric.kind == TFM_METRIC_BLEU && !s->p.force && s->tokenized_period[y] >= 100)
            tfm_score_warn(out, s->inputs[y].label, 0,
                           "%zu lines end in a tokenized period (' .'): the hypotheses look "
                           "tokenized, which lowers BLEU; detokenize them (or pass --force)",
                           s->tokenized_period[y]);
    s->out = NULL;
    return st;
}

size_t tfm_file_scorer_lines(const tfm_file_scorer *s)
{
    return s->inputs[0].lines;
}

size_t tfm_file_scorer_tokenized_periods(const tfm_file_scorer *s, int system)
{
    return s->tokenized_period[system];
}

const tfm_metric *tfm_file_scorer_metric(const tfm_file_scorer *s, int system)
{
    return s->corpus[system];
}

/* ---- the result ------------------------------------------------------------------------------- */

/* The corpus score of system 0, with its interval with confidence. */
static tfm_status format_corpus(tfm_file_scorer *s, tfm_buf *out, tfm_error *err)
{
    const tfm_metric *m = s->corpus[0];
    tfm_score score;
    tfm_metric_corpus_score(m, &score);
    tfm_score_format f = s->p.format;
    f.nrefs = tfm_metric_nrefs(m);
    if (s->p.confidence) {
        tfm_status st = tfm_metric_bootstrap(m, tfm_metric_segments(m), tfm_metric_count(m),
                                             &s->p.bootstrap, &f.mean, &f.ci, err);
        if (st != TFM_OK) return st;
        f.has_ci = true;
        f.n_bootstrap = s->p.bootstrap.n_samples;
        f.seed = s->p.bootstrap.seed;
    }
    if (tfm_metric_format(m, &score, &f, out) != TFM_OK)
        return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    return TFM_OK;
}

/* The paired test: each system against system 0, with the same resamples. */
static tfm_status format_paired(tfm_file_scorer *s, tfm_buf *out, tfm_error *err)
{
    const tfm_metric *base = s->corpus[0];
    tfm_paired_row *rows = calloc((size_t)s->n_sys, sizeof *rows);
    if (!rows) return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    tfm_status st = TFM_OK;
    for (int y = 0; y < s->n_sys && st == TFM_OK; y++) {
        rows[y].file = s->inputs[y].name;
        rows[y].label = s->inputs[y].label;
        if (y)
            st = tfm_metric_paired_bootstrap(base, tfm_metric_segments(base),
                                             tfm_metric_segments(s->corpus[y]),
                                             tfm_metric_count(base), &s->p.bootstrap, &rows[y].r,
                                             err);
    }
    tfm_score_format f = s->p.format;
    f.nrefs = tfm_metric_nrefs(base);
    f.n_bootstrap = s->p.bootstrap.n_samples;
    f.seed = s->p.bootstrap.seed;
    if (st == TFM_OK && tfm_paired_format(base, rows, s->n_sys, &f, out) != TFM_OK)
        st = tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    free(rows);
    return st;
}

tfm_status tfm_file_scorer_format(tfm_file_scorer *s, tfm_buf *out, tfm_error *err)
{
    if (tfm_metric_count(s->corpus[0]) == 0)
        return tfm_error_set(err, TFM_ERR_FORMAT, "no line could be scored");
    return s->p.paired ? format_paired(s, out, err) : format_corpus(s, out, err);
}
