/* score_output.c - where a scorer's lines and warnings go (tfm_score_output):
 * the callbacks the caller set, each called only when set. */
#include <stdarg.h>
#include <stdio.h>

#include "tfm/metrics.h"

void tfm_score_warn(const tfm_score_output *out, const char *file, size_t line, const char *fmt,
                    ...)
{
    if (!out || !out->warning) return;
    char msg[sizeof ((tfm_error *)0)->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    out->warning(out->ctx, file, line, msg);
}

void tfm_score_write(const tfm_score_output *out, const char *text, size_t len)
{
    if (out && out->line) out->line(out->ctx, text, len);
}

void tfm_score_flush(const tfm_score_output *out)
{
    if (out && out->flush) out->flush(out->ctx);
}
