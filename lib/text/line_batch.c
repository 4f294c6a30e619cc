/* line_batch.c - a batch of lines copied out of a line reader (line_batch_internal.h). */
#include <stdlib.h>

#include "text/line_batch_internal.h"

tfm_status line_batch_init(line_batch *b, tfm_error *err)
{
    *b = (line_batch){0};
    tfm_buf_init(&b->text);
    b->offset = malloc(LINE_BATCH_LINES * sizeof *b->offset);
    b->len = malloc(LINE_BATCH_LINES * sizeof *b->len);
    if (b->offset && b->len) return TFM_OK;
    line_batch_free(b);
    return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
}

void line_batch_free(line_batch *b)
{
    tfm_buf_free(&b->text);
    free(b->offset);
    free(b->len);
    b->offset = b->len = NULL;
}

tfm_status line_batch_read(void *ctx, size_t slot, size_t *cost, tfm_error *err)
{
    line_batch *b = ctx;
    if (slot == 0) {
        tfm_buf_clear(&b->text);
        b->first_line = tfm_lines_number(b->reader) + 1;
    }
    const char *line;
    size_t len;
    tfm_status s = tfm_lines_next(b->reader, &line, &len, err);
    if (s != TFM_OK) return s;
    b->offset[slot] = b->text.len;
    b->len[slot] = len;
    if (tfm_buf_append(&b->text, line, len) != TFM_OK || tfm_buf_putc(&b->text, 0) != TFM_OK)
        return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    *cost = len + 1;
    return TFM_OK;
}

bool line_batch_ready(void *ctx)
{
    line_batch *b = ctx;
    return tfm_lines_ready(b->reader);
}
