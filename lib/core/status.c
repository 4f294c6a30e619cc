/* status.c - status codes and the error detail that travels with them. */
#include <stdio.h>
#include <string.h>

#include "tfm/core.h"

static const char *const status_text[TFM_STATUS_COUNT] = {
    [TFM_OK] = "success",
    [TFM_EOF] = "end of input",
    [TFM_ERR_NOMEM] = "out of memory",
    [TFM_ERR_IO] = "input/output error",
    [TFM_ERR_FORMAT] = "malformed input",
    [TFM_ERR_UTF8] = "invalid UTF-8",
    [TFM_ERR_RANGE] = "value out of range",
    [TFM_ERR_ARG] = "invalid argument",
    [TFM_ERR_UNSUPPORTED] = "unsupported",
};

const char *tfm_strerror(tfm_status status)
{
    if ((unsigned)status >= TFM_STATUS_COUNT) return "unknown status";
    return status_text[status];
}

tfm_status tfm_error_set(tfm_error *err, tfm_status status, const char *fmt, ...)
{
    if (err) {
        err->status = status;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return status;
}

void tfm_error_append(tfm_error *err, const char *fmt, ...)
{
    if (!err) return;
    size_t used = strnlen(err->msg, sizeof err->msg - 1);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg + used, sizeof err->msg - used, fmt, ap);
    va_end(ap);
}

void tfm_error_prefix(tfm_error *err, const char *fmt, ...)
{
    if (!err) return;
    char joined[sizeof err->msg];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(joined, sizeof joined, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    size_t used = (size_t)n < sizeof joined ? (size_t)n : sizeof joined - 1;
    /* The message is cut, not the prefix, when the two do not fit. */
    size_t room = sizeof joined - used;
    if (room > 2) {
        memcpy(joined + used, ": ", 2);
        size_t rest = strnlen(err->msg, sizeof err->msg);
        if (rest > room - 3) rest = room - 3;
        memcpy(joined + used + 2, err->msg, rest);
        joined[used + 2 + rest] = 0;
    }
    memcpy(err->msg, joined, sizeof joined);
}
