/* line_batch_internal.h - a batch of lines copied out of a line reader: what the
 * batch loops of lib/text (text_filter.c, learn_lines.c) read into, so that
 * the lines of a batch stay valid while the reader moves on. */
#ifndef TFM_LINE_BATCH_INTERNAL_H
#define TFM_LINE_BATCH_INTERNAL_H

#include "tfm/text.h"

/* At most this many lines, or about this many bytes, in a batch. */
#define LINE_BATCH_LINES 8192
#define LINE_BATCH_BYTES ((size_t)8 << 20)

/* Line i of a batch is text.data[offset[i] .. offset[i] + len[i]), then a NUL. */
typedef struct line_batch {
    tfm_line_reader *reader; /* the input: not owned */
    tfm_buf text;
    size_t *offset;          /* [LINE_BATCH_LINES] */
    size_t *len;             /* [LINE_BATCH_LINES] */
    size_t first_line;       /* the reader's 1-based number of line 0 */
} line_batch;

tfm_status line_batch_init(line_batch *b, tfm_error *err);
void line_batch_free(line_batch *b);

static inline const char *line_batch_line(const line_batch *b, size_t i)
{
    return b->text.data + b->offset[i];
}

/* The read and ready callbacks of a tfm_batch_loop whose ctx starts with a
 * line_batch: read copies the next line into slot `slot` (its cost: its
 * bytes and one for its end). */
tfm_status line_batch_read(void *ctx, size_t slot, size_t *cost, tfm_error *err);
bool line_batch_ready(void *ctx);

#endif
