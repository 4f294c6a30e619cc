/* score_pairs.c - scoring sentence pairs under a model, as 'score -m' and
 * marian-scorer do: each target's log-probability given its source, from
 * the training forward pass with dropout off (tfm_model_loss), a batch of
 * pairs at a time (tfm_batch_loop), a line per pair in input order.  The
 * pairs are read by tfm_pair_reader; n-best lines are read and written back
 * with the score by tfm_nbest_parse and tfm_nbest_add_feature.  A line that
 * cannot be taken is reported after the pairs before it are written, so the
 * output is a clean prefix of the full answer. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tfm/view.h"

tfm_pair_scorer_params tfm_pair_scorer_default_params(void)
{
    return (tfm_pair_scorer_params){.source_eos = true, .batch_size = 64, .batch_tokens = 2048};
}

tfm_status tfm_pair_scorer_params_validate(const tfm_pair_scorer_params *p, tfm_error *err)
{
    if (p->per_token && p->nbest)
        return tfm_error_set(err, TFM_ERR_ARG, "--per-token prints a line per pair; it does not "
                             "go with --nbest");
    if (p->feature && !p->nbest)
        return tfm_error_set(err, TFM_ERR_ARG, "--nbest-feature names the feature of --nbest");
    if (p->feature && !tfm_nbest_feature_name_ok(p->feature))
        return tfm_error_set(err, TFM_ERR_ARG, "--nbest-feature '%s': a name without spaces, '|' "
                             "or '='", p->feature);
    return TFM_OK;
}

/* One input and the lines read of it so far. */
typedef struct input {
    const char *label;
    tfm_line_reader *reader;
    size_t lines;
} input;

/* One sentence pair of a batch. */
typedef struct pair_slot {
    tfm_pair pair;                /* its ids: the source with its </s>, the target */
    tfm_buf line;                 /* nbest: the n-best line, written back with the feature */
    tfm_nbest_entry entry;        /* nbest: its fields (pointing into line) */
    bool unusable;                /* a target too long for the model: no score */
    int row;                      /* its row of the forward pass (when usable) */
    size_t first_label;           /* its first label in token_lp */
} pair_slot;

/* A line that could not be taken while a batch was gathered: reported once
 * the pairs before it are written. */
typedef struct read_failure {
    bool set;
    bool mismatch;                /* the sources and targets differ in length */
    const char *file;             /* the input's label */
    size_t line;
    tfm_error err;
} read_failure;

typedef struct scoring {
    const tfm_pair_scorer_params *p;
    const tfm_model *model;
    const tfm_score_output *out;
    tfm_pass_workspace *ws;
    tfm_bpe *bpe, *src_bpe;       /* text only: tfm_model_text_encoders */
    input src, tgt;               /* tgt: the targets, or the n-best list */
    tfm_pair_reader *pairs;       /* reads src and tgt in step (nbest: src alone) */
    int max_src, max_tgt;         /* ids a source (</s> included) and a target may hold */
    bool eos;                     /* sources end with </s> */
    pair_slot *slots;             /* [batch_size] */
    /* The batch as tfm_model_loss takes it, and what it gives back. */
    const int32_t **src_ptr, **tgt_ptr;
    int *src_len, *tgt_len;
    double *sentence_lp;
    float *token_lp;
    size_t token_cap;
    /* nbest: the source the list is at (line nbest_index + 1 of the sources). */
    tfm_pair nbest;
    size_t nbest_index;
    read_failure failure;
    tfm_pair_scores totals;
    tfm_buf line;
} scoring;

/* Notes a line that cannot be taken, FILE:LINE, to report once the pairs
 * before it are written; returns false, so that a reader can "return
 * fail_at(...)". */
static bool fail_at(scoring *sc, const input *in, size_t line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static bool fail_at(scoring *sc, const input *in, size_t line, const char *fmt, ...)
{
    read_failure *f = &sc->failure;
    f->set = true;
    f->file = in->label;
    f->line = line;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->err.msg, sizeof f->err.msg, fmt, ap);
    va_end(ap);
    f->err.status = TFM_ERR_FORMAT;
    return false;
}

static void flush_lines(void *ctx)
{
    scoring *sc = ctx;
    tfm_score_flush(sc->out);
}

/* ---- reading pairs ----------------------------------------------------------------------------- */

/* Warns about what reading a side did to it: invalid UTF-8 repaired (text),
 * a source cropped to what the model takes (as 'encode' crops). */
static void warn_side(scoring *sc, const input *in, size_t line, const tfm_pair_side *side,
                      bool source)
{
    if (!side->done) return;
    if (side->repaired)
        tfm_score_warn(sc->out, in->label, line, "invalid UTF-8 replaced by U+FFFD (%zu "
                       "sequence%s)", side->repaired, side->repaired == 1 ? "" : "s");
    if (source && side->cropped)
        tfm_score_warn(sc->out, in->label, line, "%zu ids are more than the %d tokens the model "
                       "takes%s; cropped to the first %zu", side->length, sc->max_src,
                       sc->eos ? " (</s> included)" : "", (size_t)sc->max_src - (sc->eos ? 1 : 0));
}

/* Checks a target: <pad> is never a label, so it cannot be scored; a target
 * longer than the model's positions (less one for <s>) gets no score: an
 * empty output line and a warning, or in an n-best list an error. */
static bool check_target(scoring *sc, const input *in, size_t line, pair_slot *slot)
{
    const tfm_config *c = &sc->model->config;
    const tfm_ids *tgt = &slot->pair.tgt.ids;
    for (size_t i = 0; i < tgt->len; i++)
        if (tgt->data[i] == c->pad_id)
            return fail_at(sc, in, line, "token %zu: id %d is <pad>, which the model never "
                           "predicts: it cannot be scored", i + 1, (int)c->pad_id);
    if (slot->pair.tgt.too_long) {
        if (sc->p->nbest)
            return fail_at(sc, in, line, "the hypothesis has %zu ids; the model scores at most "
                           "%d (max_positions %d, less 1 for <s>)", tgt->len, sc->max_tgt,
                           c->max_positions);
        tfm_score_warn(sc->out, in->label, line, "the target has %zu ids; the model scores at "
                       "most %d (max_positions %d, less 1 for <s>): no score for this line",
                       tgt->len, sc->max_tgt, c->max_positions);
        slot->unusable = true;
    }
    return true;
}

/* Notes the pair reader's failure as the line that cannot be taken. */
static bool pairs_failed(scoring *sc, const tfm_error *err)
{
    const tfm_pair_failure *f = tfm_pair_reader_failure(sc->pairs);
    return fail_at(sc, f->side == TFM_SOURCE ? &sc->src : &sc->tgt, f->line, "%s", err->msg);
}

/* Reads what is left of the sources (and targets) to count their lines;
 * on a failure *at says where. */
static tfm_status count_lines(scoring *sc, size_t *n_src, size_t *n_tgt, tfm_score_failure *at,
                              tfm_error *err)
{
    tfm_status st = tfm_pair_reader_count(sc->pairs, n_src, n_tgt, err);
    if (st != TFM_OK) {
        const tfm_pair_failure *f = tfm_pair_reader_failure(sc->pairs);
        *at = (tfm_score_failure){f->side == TFM_SOURCE ? sc->src.label : sc->tgt.label, f->line};
    }
    return st;
}

static bool pairs_ready(void *ctx)
{
    scoring *sc = ctx;
    return sc->p->nbest ? tfm_lines_ready(sc->tgt.reader) : tfm_pair_reader_ready(sc->pairs);
}

/* Says once per side what a guess of its format assumed on thin evidence. */
static void note_formats(scoring *sc)
{
    for (int k = 0; k < 2; k++) {
        char note[200];
        if (tfm_pair_reader_note(sc->pairs, (tfm_side)k, "--text", note, sizeof note))
            tfm_score_warn(sc->out, k == 0 ? sc->src.label : sc->tgt.label, 0, "%s", note);
    }
}

/* Reads the next pair of the sources and targets into the slot; false at
 * the end of both or on a failure (then sc->failure says which). */
static bool gather_pair(scoring *sc, pair_slot *slot)
{
    tfm_error err;
    tfm_status st = tfm_pair_reader_next(sc->pairs, &slot->pair, &err);
    if (st == TFM_EOF) return false;
    if (st != TFM_OK && tfm_pair_reader_failure(sc->pairs)->mismatch) {
        sc->failure.set = sc->failure.mismatch = true;
        return false;
    }
    warn_side(sc, &sc->src, slot->pair.line, &slot->pair.src, true);
    warn_side(sc, &sc->tgt, slot->pair.line, &slot->pair.tgt, false);
    note_formats(sc);
    if (st != TFM_OK) return pairs_failed(sc, &err);
    return check_target(sc, &sc->tgt, slot->pair.line, slot);
}

/* Moves the sources on to line index + 1 (0-based index, as Marian's). */
static bool nbest_source(scoring *sc, size_t index)
{
    const size_t n_read = tfm_lines_number(sc->src.reader);
    if (n_read > 0 && index == sc->nbest_index) return true;
    if (n_read > 0 && index < sc->nbest_index)
        return fail_at(sc, &sc->tgt, sc->tgt.lines, "sentence %zu comes after sentence %zu: the "
                       "n-best list must follow the order of the sources", index,
                       sc->nbest_index);
    tfm_error err;
    tfm_status st = TFM_OK;
    while (st == TFM_OK && tfm_lines_number(sc->src.reader) < index) /* lines before it: unparsed */
        st = tfm_pair_reader_next(sc->pairs, NULL, &err);
    if (st == TFM_OK) st = tfm_pair_reader_next(sc->pairs, &sc->nbest, &err);
    if (st == TFM_EOF) {
        const size_t n = tfm_lines_number(sc->src.reader);
        return fail_at(sc, &sc->tgt, sc->tgt.lines, "sentence %zu, but the sources in %s have "
                       "%zu line%s (sentences 0 to %zu)", index, sc->src.label, n,
                       n == 1 ? "" : "s", n - 1);
    }
    warn_side(sc, &sc->src, sc->nbest.line, &sc->nbest.src, true);
    if (st != TFM_OK) return pairs_failed(sc, &err);
    sc->nbest_index = index;
    return true;
}

/* Reads the next line of the n-best list, 'INDEX ||| IDS ||| FEATURES |||
 * SCORE', with its source; false at its end or on a failure. */
static bool gather_hypothesis(scoring *sc, pair_slot *slot)
{
    const char *line;
    size_t len;
    tfm_error err;
    tfm_status st = tfm_lines_next(sc->tgt.reader, &line, &len, &err);
    if (st == TFM_EOF) return false;
    if (st != TFM_OK) return fail_at(sc, &sc->tgt, sc->tgt.lines + 1, "%s", err.msg);
    sc->tgt.lines++;
    /* The slot keeps the line, to write it back with the feature added. */
    tfm_buf_clear(&slot->line);
    if (tfm_buf_append(&slot->line, line, len) != TFM_OK)
        return fail_at(sc, &sc->tgt, sc->tgt.lines, "out of memory");
    const tfm_nbest_entry *e = &slot->entry;
    if (tfm_nbest_parse(slot->line.data, len, &slot->entry, &err) != TFM_OK ||
        tfm_pair_reader_parse(sc->pairs, TFM_TARGET, e->hyp, e->hyp_len, &slot->pair.tgt,
                              &err) != TFM_OK)
        return fail_at(sc, &sc->tgt, sc->tgt.lines, "%s", err.msg);
    warn_side(sc, &sc->tgt, sc->tgt.lines, &slot->pair.tgt, false);
    if (!check_target(sc, &sc->tgt, sc->tgt.lines, slot) || !nbest_source(sc, e->index))
        return false;
    tfm_ids *src = &slot->pair.src.ids;
    tfm_ids_clear(src);
    for (size_t i = 0; i < sc->nbest.src.ids.len; i++)
        if (tfm_ids_push(src, sc->nbest.src.ids.data[i]) != TFM_OK)
            return fail_at(sc, &sc->tgt, sc->tgt.lines, "out of memory");
    return true;
}

/* Reads pair `slot` of the batch: a line of each of the sources and
 * targets, or a line of the n-best list and its source. */
static tfm_status read_pair(void *ctx, size_t slot, size_t *cost, tfm_error *err)
{
    scoring *sc = ctx;
    pair_slot *ps = &sc->slots[slot];
    ps->unusable = false;
    bool got = sc->p->nbest ? gather_hypothesis(sc, ps) : gather_pair(sc, ps);
    if (!got) {
        if (!sc->failure.set) return TFM_EOF;
        *err = sc->failure.err;
        return TFM_ERR_FORMAT;
    }
    *cost = ps->pair.src.ids.len + ps->pair.tgt.ids.len + 1;
    return TFM_OK;
}

/* ---- scoring and writing ------------------------------------------------------------------------- */

/* Scores the pairs of the batch (one worker: [lo, hi) is the whole batch)
 * with one forward pass. */
static tfm_status score_batch(void *ctx, int worker, size_t lo, size_t hi, tfm_error *err)
{
    scoring *sc = ctx;
    int B = 0;
    size_t labels = 0;
    for (size_t i = lo; i < hi; i++) {
        pair_slot *slot = &sc->slots[i];
        slot->row = B;
        if (slot->unusable) continue;
        sc->src_ptr[B] = slot->pair.src.ids.data;
        sc->src_len[B] = (int)slot->pair.src.ids.len;
        sc->tgt_ptr[B] = slot->pair.tgt.ids.data;
        sc->tgt_len[B] = (int)slot->pair.tgt.ids.len;
        slot->first_label = labels;
        labels += slot->pair.tgt.ids.len + 1;
        B++;
    }
    if (labels > sc->token_cap) {
        free(sc->token_lp);
        sc->token_lp = malloc(labels * sizeof *sc->token_lp);
        if (!sc->token_lp) return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
        sc->token_cap = labels;
    }
    tfm_pair_batch tb = {.B = B, .src = sc->src_ptr, .src_lens = sc->src_len,
                          .tgt = sc->tgt_ptr, .tgt_lens = sc->tgt_len};
    if (B == 0) return TFM_OK;
    return tfm_model_loss(sc->ws, &tb, false, NULL, NULL, sc->sentence_lp, sc->token_lp, err);
}

/* Writes pair `i`'s line: its scores, or its n-best line with the feature. */
static tfm_status write_pair(void *ctx, size_t i, tfm_error *err)
{
    scoring *sc = ctx;
    const tfm_pair_scorer_params *p = sc->p;
    pair_slot *slot = &sc->slots[i];
    if (slot->unusable) { /* one output line per input line: an empty one */
        tfm_score_write(sc->out, "", 0);
        sc->totals.n_unusable++;
        return TFM_OK;
    }
    int b = slot->row;
    int m = sc->tgt_len[b] + 1; /* the target's ids and </s> */
    double total = sc->sentence_lp[b], average = total / m;
    sc->totals.sum_logprob += total;
    sc->totals.n_tokens += m;
    sc->totals.n_pairs++;
    tfm_buf *out = &sc->line;
    tfm_buf_clear(out);
    if (p->nbest) { /* as marian-scorer --n-best adds its feature */
        const char *name = p->feature ? p->feature : TFM_NBEST_FEATURE;
        tfm_status st = tfm_nbest_add_feature(&slot->entry, name, p->normalize ? average : total,
                                              out, err);
        if (st != TFM_OK) return st;
    } else {
        const float *lp = sc->token_lp + slot->first_label;
        tfm_status st = p->normalize ? tfm_buf_printf(out, "%.6f", average)
                                     : tfm_buf_printf(out, "%.6f\t%.6f", total, average);
        for (int t = 0; t < m && p->per_token && st == TFM_OK; t++)
            st = tfm_buf_printf(out, "%s%.6f", t ? " " : "\t", (double)lp[t]);
        if (st != TFM_OK) return tfm_error_set(err, st, "out of memory");
    }
    tfm_score_write(sc->out, out->data, out->len);
    return TFM_OK;
}

/* ---- the run ------------------------------------------------------------------------------------ */

/* The error of a run that stopped while reading: the line noted, or for
 * files of different lengths both counts. */
static tfm_status read_failed(scoring *sc, tfm_score_failure *at, tfm_error *err)
{
    if (!sc->failure.mismatch) {
        *at = (tfm_score_failure){sc->failure.file, sc->failure.line};
        if (err) *err = sc->failure.err;
        return TFM_ERR_FORMAT;
    }
    flush_lines(sc); /* counting may wait for the rest of the input */
    size_t n_src, n_tgt;
    tfm_status st = count_lines(sc, &n_src, &n_tgt, at, err);
    if (st != TFM_OK) return st;
    return tfm_error_set(err, TFM_ERR_FORMAT, "sources in %s have %zu line%s but targets in %s "
                         "have %zu line%s", sc->src.label, n_src, n_src == 1 ? "" : "s",
                         sc->tgt.label, n_tgt, n_tgt == 1 ? "" : "s");
}

/* nbest: the list must cover every source line, as decode --nbest writes it. */
static tfm_status check_nbest_covers_sources(scoring *sc, tfm_score_failure *at, tfm_error *err)
{
    const size_t covered = tfm_lines_number(sc->src.reader); /* up to the list's last sentence */
    size_t n_src, n_tgt;
    tfm_status st = count_lines(sc, &n_src, &n_tgt, at, err);
    if (st != TFM_OK || n_src == covered) return st;
    return tfm_error_set(err, TFM_ERR_FORMAT, "the n-best list in %s covers %zu sentence%s but "
                         "the sources in %s have %zu line%s", sc->tgt.label, covered,
                         covered == 1 ? "" : "s", sc->src.label, n_src, n_src == 1 ? "" : "s");
}

/* The buffers of a batch of up to batch_size pairs. */
static tfm_status allocate(scoring *sc, size_t bs, tfm_error *err)
{
    sc->slots = calloc(bs, sizeof *sc->slots);
    sc->src_ptr = calloc(bs, sizeof *sc->src_ptr);
    sc->tgt_ptr = calloc(bs, sizeof *sc->tgt_ptr);
    sc->src_len = calloc(bs, sizeof *sc->src_len);
    sc->tgt_len = calloc(bs, sizeof *sc->tgt_len);
    sc->sentence_lp = calloc(bs, sizeof *sc->sentence_lp);
    if (!sc->slots || !sc->src_ptr || !sc->tgt_ptr || !sc->src_len || !sc->tgt_len ||
        !sc->sentence_lp)
        return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < bs; i++) {
        tfm_pair_init(&sc->slots[i].pair);
        tfm_buf_init(&sc->slots[i].line);
    }
    return TFM_OK;
}

static void release(scoring *sc, size_t bs)
{
    for (size_t i = 0; sc->slots && i < bs; i++) {
        tfm_pair_free(&sc->slots[i].pair);
        tfm_buf_free(&sc->slots[i].line);
    }
    free(sc->slots);
    free(sc->src_ptr);
    free(sc->tgt_ptr);
    free(sc->src_len);
    free(sc->tgt_len);
    free(sc->sentence_lp);
    free(sc->token_lp);
    tfm_pair_free(&sc->nbest);
    tfm_buf_free(&sc->line);
    tfm_pair_reader_free(sc->pairs);
    tfm_bpe_free(sc->bpe);
    tfm_bpe_free(sc->src_bpe);
    tfm_pass_workspace_free(sc->ws);
}

tfm_status tfm_score_pairs(const tfm_model *model, const tfm_pair_scorer_params *p,
                           const tfm_score_input *src, const tfm_score_input *tgt,
                           const tfm_score_output *out, tfm_pair_scores *totals,
                           tfm_score_failure *at, tfm_error *err)
{
    tfm_score_failure where = {NULL, 0};
    scoring sc = {.p = p, .model = model, .out = out};
    const tfm_config *c = &model->config;
    sc.src = (input){src->label ? src->label : src->name, src->lines, 0};
    sc.tgt = (input){tgt->label ? tgt->label : tgt->name, tgt->lines, 0};
    sc.eos = p->source_eos && tfm_model_source_eos(model); /* train --no-eos says so */
    sc.max_src = c->max_positions;
    sc.max_tgt = c->max_positions - 1;
    tfm_pair_init(&sc.nbest);
    tfm_buf_init(&sc.line);
    size_t bs = p->batch_size > 0 ? (size_t)p->batch_size : 1;
    tfm_status st = TFM_OK;
    /* without --text, each side is ids or text as its first lines show
     * (when the model holds a vocabulary; n-best lists are ids or --text) */
    const bool guess = !p->text && !p->nbest && tfm_model_vocab(model, TFM_TARGET);
    if (p->text || guess) st = tfm_model_text_encoders(model, &sc.bpe, &sc.src_bpe, err);
    if (st == TFM_OK) st = tfm_pass_workspace_create(model, &sc.ws, err);
    if (st == TFM_OK) st = allocate(&sc, bs, err);
    if (st == TFM_OK) {
        /* Sentences as the model reads them (ids below its vocabulary sizes,
         * a source cropped to its positions with its </s>), but a target
         * longer than they take (less one for <s>) kept whole, to be left
         * without a score. */
        tfm_pair_params pp = tfm_pair_params_from_model(model);
        pp.crop_target = false;
        pp.source_eos = sc.eos;
        pp.bpe = sc.bpe;
        pp.src_bpe = sc.src_bpe;
        pp.strict = p->strict;
        pp.guess_format = guess;
        st = tfm_pair_reader_create(sc.src.reader, p->nbest ? NULL : sc.tgt.reader, &pp, &sc.pairs,
                                    err);
    }
    if (st == TFM_OK) {
        /* Batches of the pairs that are ready, up to batch_size pairs and
         * batch_tokens ids; a bad line is reported after the lines before it. */
        tfm_batch_loop loop = {
            .ctx = &sc, .max_items = bs, .max_cost = (size_t)p->batch_tokens, .threads = 1,
            .read = read_pair, .ready = pairs_ready, .work = score_batch, .write = write_pair,
            .flush = flush_lines,
        };
        tfm_batch_failure f;
        st = tfm_batch_loop_run(&loop, &f);
        if (st != TFM_OK && f.stage == TFM_BATCH_READ) {
            st = read_failed(&sc, &where, err);
        } else if (st != TFM_OK) {
            if (err) *err = f.err;
            if (f.stage == TFM_BATCH_WORK) where.file = sc.tgt.label;
        } else if (p->nbest) {
            st = check_nbest_covers_sources(&sc, &where, err);
        }
    }
    if (totals) *totals = sc.totals;
    if (at) *at = where;
    release(&sc, bs);
    return st;
}

tfm_status tfm_pair_scores_format(const tfm_pair_scores *t, tfm_buf *out)
{
    tfm_status st;
    if (t->n_tokens > 0)
        st = tfm_buf_printf(out, "perplexity %.4f over %lld target tokens (</s> included) of %zu "
                            "pair%s; mean log-prob %.6f per token",
                            exp(-t->sum_logprob / (double)t->n_tokens), (long long)t->n_tokens,
                            t->n_pairs, t->n_pairs == 1 ? "" : "s",
                            t->sum_logprob / (double)t->n_tokens);
    else
        st = tfm_buf_printf(out, "no pairs scored: no perplexity");
    if (st == TFM_OK && t->n_unusable)
        st = tfm_buf_printf(out, "; %zu target%s too long for the model had no score",
                            t->n_unusable, t->n_unusable == 1 ? "" : "s");
    return st;
}
