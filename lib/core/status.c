/* status.c - status codes and the error detail that travels with them. */
#include <stdio.h>

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

void tfm_error_prefix(tfm_error *err, const char *fmt, ...)
{
    if (!err) return;
    char prefix[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    char joined[sizeof err->msg];
    snprintf(joined, sizeof joined, "%s: %s", prefix, err->msg);
    snprintf(err->msg, sizeof err->msg, "%s", joined);
}
