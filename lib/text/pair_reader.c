/* pair_reader.c - sentence pairs from two line readers in step, as 'score -m'
 * and 'inspect-attn' read them: id lines or text encoded with the model's
 * vocabulary, ids checked against the vocabulary size, the source cropped to
 * what the model takes and ended with </s>, the target checked or cropped.
 *
 * Both lines of a pair are read before either is parsed: files of different
 * lengths are the first thing to say, whatever their last lines hold. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tfm/io.h"
#include "tfm/text.h"

struct tfm_pair_reader {
    tfm_line_reader *lines[2]; /* by tfm_side; lines[TFM_TARGET] NULL: sources alone */
    tfm_pair_params p;
    tfm_pair_format format[2];
    bool noted[2];             /* tfm_pair_reader_note has looked at the side's guess */
    tfm_pair_failure failure;
};

tfm_pair_params tfm_pair_default_params(void)
{
    return (tfm_pair_params){.crop_target = true, .source_eos = true, .eos_id = TFM_ID_EOS};
}

static void side_reset(tfm_pair_side *s)
{
    tfm_ids_clear(&s->ids);
    s->done = s->cropped = s->too_long = false;
    s->length = s->repaired = 0;
}

void tfm_pair_init(tfm_pair *p)
{
    *p = (tfm_pair){0};
    tfm_ids_init(&p->src.ids);
    tfm_ids_init(&p->tgt.ids);
}

void tfm_pair_free(tfm_pair *p)
{
    if (!p) return;
    tfm_ids_free(&p->src.ids);
    tfm_ids_free(&p->tgt.ids);
}

tfm_status tfm_pair_reader_create(tfm_line_reader *src, tfm_line_reader *tgt,
                                  const tfm_pair_params *p, tfm_pair_reader **out,
                                  tfm_error *err)
{
    *out = NULL;
    if (!src) return tfm_error_set(err, TFM_ERR_ARG, "a pair reader needs the sources");
    tfm_pair_reader *pr = calloc(1, sizeof *pr);
    if (!pr) return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    pr->lines[TFM_SOURCE] = src;
    pr->lines[TFM_TARGET] = tgt;
    pr->p = *p;
    for (int k = 0; k < 2; k++) {
        const bool text = (k == TFM_SOURCE && p->src_bpe) || p->bpe;
        const bool guess = text && p->guess_format; /* undecided: read as ids (empty lines) */
        pr->format[k] = (tfm_pair_format){.decided = !guess, .text = text && !guess};
    }
    *out = pr;
    return TFM_OK;
}

bool tfm_pair_reader_note(tfm_pair_reader *pr, tfm_side side, const char *hint, char *out,
                          size_t size)
{
    if (pr->noted[side] || !pr->format[side].decided) return false;
    pr->noted[side] = true;
    return tfm_format_guess_note(&pr->format[side].guess, hint, out, size);
}

/* Guesses the format of side k from the lines ready to be read (at least
 * the next one; tfm_format_guess); nothing when they are all empty (an
 * empty line reads the same either way). */
static tfm_status guess_format(tfm_pair_reader *pr, int k, tfm_error *err)
{
    tfm_pair_format *f = &pr->format[k];
    if (f->decided || !pr->lines[k]) return TFM_OK;
    const char *block;
    size_t len;
    tfm_status s = tfm_lines_peek(pr->lines[k], TFM_GUESS_LINES, (size_t)1 << 20, &block, &len, err);
    if (s != TFM_OK) return s;
    tfm_format_guess g = {0};
    for (size_t at = 0; at < len;) {
        const char *nl = memchr(block + at, '\n', len - at);
        const size_t n = nl ? (size_t)(nl - (block + at)) : len - at;
        tfm_format_guess_add(&g, block + at, n);
        at += n + 1;
    }
    if (g.lines == 0) return TFM_OK;
    *f = (tfm_pair_format){.decided = true, .text = !tfm_format_guess_ids(&g), .guess = g};
    return TFM_OK;
}

void tfm_pair_reader_free(tfm_pair_reader *pr)
{
    free(pr);
}

const tfm_pair_failure *tfm_pair_reader_failure(const tfm_pair_reader *pr)
{
    return &pr->failure;
}

/* Records where the reader stopped and returns status. */
static tfm_status fail_at(tfm_pair_reader *pr, tfm_side side, size_t line, bool mismatch,
                          tfm_status status)
{
    pr->failure = (tfm_pair_failure){.side = side, .line = line, .mismatch = mismatch};
    return status;
}

/* The ids a side may hold before a source's </s> (SIZE_MAX: no limit). */
static size_t side_room(const tfm_pair_params *p, tfm_side side)
{
    if (side == TFM_TARGET) return p->max_target ? p->max_target : SIZE_MAX;
    if (!p->max_source) return SIZE_MAX;
    return p->max_source - (p->source_eos ? 1 : 0);
}

tfm_status tfm_pair_reader_parse(tfm_pair_reader *pr, tfm_side side, const char *line,
                                 size_t len, tfm_pair_side *out, tfm_error *err)
{
    const tfm_pair_params *p = &pr->p;
    const int32_t vocab = side == TFM_SOURCE ? p->src_vocab_size : p->tgt_vocab_size;
    side_reset(out);
    tfm_status s;
    tfm_bpe *bpe = side == TFM_SOURCE && p->src_bpe ? p->src_bpe : p->bpe;
    if (!pr->format[side].text) bpe = NULL; /* guessed ids, or nothing guessed yet */
    if (!bpe) {
        s = tfm_ids_parse(line, len, vocab, &out->ids, err);
        const tfm_format_guess *g = &pr->format[side].guess;
        if (s == TFM_ERR_FORMAT && g->lines > 0)
            tfm_error_append(err, " (the file was read as id lines: %zu of its first %zu "
                             "non-empty lines are)", g->id_lines, g->lines);
        if (s != TFM_OK) return s;
    } else {
        tfm_bpe_encode_params ep = {.strict = p->strict};
        s = tfm_bpe_encode(bpe, &ep, line, len, &out->ids, &out->repaired, err);
        if (s != TFM_OK) return s;
        for (size_t i = 0; vocab > 0 && i < out->ids.len; i++) /* a vocabulary larger than the model's */
            if (out->ids.data[i] >= vocab)
                return tfm_error_set(err, TFM_ERR_RANGE, "token %zu: id %d is outside the model's "
                                     "vocabulary (0..%d)", i + 1, (int)out->ids.data[i],
                                     (int)vocab - 1);
    }
    out->length = out->ids.len;
    const size_t room = side_room(p, side);
    if (out->ids.len > room) {
        if (side == TFM_SOURCE || p->crop_target) {
            out->cropped = true;
            out->ids.len = room;
        } else {
            out->too_long = true;
        }
    }
    /* an empty source stays empty, as 'encode' gives it */
    if (side == TFM_SOURCE && p->source_eos && out->length > 0 &&
        tfm_ids_push(&out->ids, p->eos_id) != TFM_OK)
        return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    out->done = true;
    return TFM_OK;
}

/* Reads the next line of each file: TFM_OK (both have one, or the sources
 * have one and there are no targets), TFM_EOF (all have ended), or a
 * failure. */
static tfm_status read_lines(tfm_pair_reader *pr, const char *line[2], size_t len[2],
                             tfm_error *err)
{
    tfm_status got[2] = {TFM_EOF, TFM_EOF};
    for (int k = 0; k < 2; k++) {
        if (!pr->lines[k]) continue;
        got[k] = tfm_lines_next(pr->lines[k], &line[k], &len[k], err);
        if (got[k] != TFM_OK && got[k] != TFM_EOF)
            return fail_at(pr, (tfm_side)k, tfm_lines_number(pr->lines[k]) + 1, false, got[k]);
    }
    if (!pr->lines[TFM_TARGET] || got[TFM_SOURCE] == got[TFM_TARGET]) return got[TFM_SOURCE];
    const tfm_side ended = got[TFM_SOURCE] == TFM_EOF ? TFM_SOURCE : TFM_TARGET;
    tfm_error_set(err, TFM_ERR_FORMAT, "the %s end after %zu lines, the %s go on",
                  ended == TFM_SOURCE ? "sources" : "targets",
                  tfm_lines_number(pr->lines[ended]), ended == TFM_SOURCE ? "targets" : "sources");
    return fail_at(pr, ended, 0, true, TFM_ERR_FORMAT);
}

tfm_status tfm_pair_reader_next(tfm_pair_reader *pr, tfm_pair *pair, tfm_error *err)
{
    if (pair) {
        side_reset(&pair->src);
        side_reset(&pair->tgt);
    }
    const char *line[2] = {NULL, NULL};
    size_t len[2] = {0, 0};
    for (int k = 0; k < 2; k++) {
        tfm_status g = guess_format(pr, k, err);
        if (g != TFM_OK)
            return fail_at(pr, (tfm_side)k, tfm_lines_number(pr->lines[k]) + 1, false, g);
    }
    tfm_status s = read_lines(pr, line, len, err);
    if (s != TFM_OK || !pair) return s;
    pair->line = tfm_lines_number(pr->lines[TFM_SOURCE]);
    for (int k = 0; k < 2; k++) {
        if (!pr->lines[k]) continue;
        s = tfm_pair_reader_parse(pr, (tfm_side)k, line[k], len[k], k ? &pair->tgt : &pair->src,
                                  err);
        if (s != TFM_OK) return fail_at(pr, (tfm_side)k, pair->line, false, s);
    }
    return TFM_OK;
}

tfm_status tfm_pair_reader_count(tfm_pair_reader *pr, size_t *n_src, size_t *n_tgt,
                                 tfm_error *err)
{
    size_t *n[2] = {n_src, n_tgt};
    for (int k = 0; k < 2; k++) {
        *n[k] = 0;
        if (!pr->lines[k]) continue;
        const char *line;
        size_t len;
        tfm_status s;
        while ((s = tfm_lines_next(pr->lines[k], &line, &len, err)) == TFM_OK) {}
        if (s != TFM_EOF)
            return fail_at(pr, (tfm_side)k, tfm_lines_number(pr->lines[k]) + 1, false, s);
        *n[k] = tfm_lines_number(pr->lines[k]);
    }
    return TFM_OK;
}

bool tfm_pair_reader_ready(tfm_pair_reader *pr)
{
    for (int k = 0; k < 2; k++)
        if (pr->lines[k] && !tfm_lines_ready(pr->lines[k])) return false;
    return true;
}
