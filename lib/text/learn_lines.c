/* learn_lines.c - feeding a BPE learner the lines of a stream: batches of
 * the lines that are ready, each normalised and counted on the learner's
 * threads (tfm_bpe_learner_add_batch), and what each batch held told to
 * the caller (for its warnings and progress). */
#include <stdlib.h>

#include "text/learn_internal.h"
#include "text/line_batch_internal.h"

/* What a read keeps; the line batch comes first, for its callbacks. */
typedef struct learn_run {
    line_batch b;
    tfm_bpe_learner *learner;
    const char **lines; /* [LINE_BATCH_LINES] */
    void (*added)(void *ctx, const tfm_learn_batch *batch);
    void *ctx;
} learn_run;

/* Adds the batch's lines to the learner (one worker: the learner uses its
 * own threads). */
static tfm_status add_lines(void *ctx, int worker, size_t lo, size_t hi, tfm_error *err)
{
    learn_run *r = ctx;
    for (size_t i = lo; i < hi; i++) r->lines[i - lo] = line_batch_line(&r->b, i);
    size_t repaired = 0;
    size_t first_line = r->b.first_line + lo;
    tfm_status s = tfm_bpe_learner_add_numbered(r->learner, r->lines, r->b.len + lo, hi - lo,
                                                first_line, &repaired, err);
    if (s != TFM_OK) return s;
    tfm_learn_batch batch = {.first_line = first_line,
                             .last_line = r->b.first_line + hi - 1,
                             .bytes = r->b.text.len, .repaired = repaired};
    if (r->added) r->added(r->ctx, &batch);
    return TFM_OK;
}

tfm_status tfm_bpe_learner_read(tfm_bpe_learner *l, tfm_line_reader *reader,
                                void (*added)(void *ctx, const tfm_learn_batch *batch),
                                void *ctx, tfm_batch_failure *failure)
{
    learn_run r = {.learner = l, .added = added, .ctx = ctx};
    tfm_error err;
    r.lines = malloc(LINE_BATCH_LINES * sizeof *r.lines);
    if (!r.lines || line_batch_init(&r.b, &err) != TFM_OK) {
        free(r.lines);
        tfm_error_set(&err, TFM_ERR_NOMEM, "out of memory");
        if (failure) *failure = (tfm_batch_failure){.stage = TFM_BATCH_READ, .err = err};
        return TFM_ERR_NOMEM;
    }
    r.b.reader = reader;
    tfm_batch_loop loop = {
        .ctx = &r, .max_items = LINE_BATCH_LINES, .max_cost = LINE_BATCH_BYTES, .threads = 1,
        .read = line_batch_read, .ready = line_batch_ready, .work = add_lines,
    };
    tfm_status s = tfm_batch_loop_run(&loop, failure);
    line_batch_free(&r.b);
    free(r.lines);
    return s;
}
