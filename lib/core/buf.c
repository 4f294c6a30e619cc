/* buf.c - growable byte strings and id arrays, and the id-line format. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "tfm/core.h"

void tfm_advise_huge_pages(void *p, size_t bytes)
{
#ifdef MADV_HUGEPAGE
    enum { HUGE = 2 << 20 };
    if (bytes < 2 * HUGE) return;
    uintptr_t start = ((uintptr_t)p + HUGE - 1) / HUGE * HUGE;
    uintptr_t end = ((uintptr_t)p + bytes) / HUGE * HUGE;
    if (end > start) (void)madvise((void *)start, end - start, MADV_HUGEPAGE);
#else
    (void)p;
    (void)bytes;
#endif
}

void tfm_advise_small_pages(void *p, size_t bytes)
{
#ifdef MADV_NOHUGEPAGE
    const uintptr_t page = 4096;
    uintptr_t start = ((uintptr_t)p + page - 1) / page * page;
    uintptr_t end = ((uintptr_t)p + bytes) / page * page;
    if (end > start) (void)madvise((void *)start, end - start, MADV_NOHUGEPAGE);
#else
    (void)p;
    (void)bytes;
#endif
}

void tfm_buf_init(tfm_buf *b)
{
    b->data = NULL;
    b->len = b->cap = 0;
}

void tfm_buf_free(tfm_buf *b)
{
    free(b->data);
    tfm_buf_init(b);
}

tfm_status tfm_buf_reserve(tfm_buf *b, size_t extra)
{
    if (extra > SIZE_MAX / 2 - b->len) return TFM_ERR_NOMEM;
    size_t need = b->len + extra + 1;
    if (need <= b->cap) return TFM_OK;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need) cap *= 2;
    char *p = realloc(b->data, cap);
    if (!p) return TFM_ERR_NOMEM;
    tfm_advise_huge_pages(p, cap);
    b->data = p;
    b->cap = cap;
    return TFM_OK;
}

void *tfm_buf_array(tfm_buf *b, size_t n, size_t size)
{
    if (size && n > (SIZE_MAX - 1) / size) return NULL;
    size_t bytes = n * size;
    if (bytes > b->len || !b->data) {
        if (tfm_buf_reserve(b, bytes - b->len) != TFM_OK) return NULL;
        b->len = bytes;
    }
    return b->data;
}

tfm_status tfm_buf_append(tfm_buf *b, const void *data, size_t len)
{
    if (tfm_buf_reserve(b, len) != TFM_OK) return TFM_ERR_NOMEM;
    if (len) memcpy(b->data + b->len, data, len);
    b->len += len;
    b->data[b->len] = 0;
    return TFM_OK;
}

tfm_status tfm_buf_putc(tfm_buf *b, char c)
{
    return tfm_buf_append(b, &c, 1);
}

tfm_status tfm_buf_printf(tfm_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) return TFM_ERR_ARG;
    if (tfm_buf_reserve(b, (size_t)n) != TFM_OK) return TFM_ERR_NOMEM;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return TFM_OK;
}

void tfm_ids_init(tfm_ids *v)
{
    v->data = NULL;
    v->len = v->cap = 0;
}

void tfm_ids_free(tfm_ids *v)
{
    free(v->data);
    tfm_ids_init(v);
}

tfm_status tfm_ids_push(tfm_ids *v, int32_t id)
{
    if (v->len == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 32;
        int32_t *p = realloc(v->data, cap * sizeof *p);
        if (!p) return TFM_ERR_NOMEM;
        v->data = p;
        v->cap = cap;
    }
    v->data[v->len++] = id;
    return TFM_OK;
}

/* One token of an id line, from *at on (tfm_ids_parse, tfm_id_line_count). */
typedef enum id_token { ID_VALUE, ID_END, ID_NOT_ID, ID_TOO_LARGE } id_token;

/* Reads the next token of line from *at: ID_VALUE (*value; *at moves past
 * it), ID_END, or ID_NOT_ID / ID_TOO_LARGE for a token that is not a
 * decimal id or is above INT32_MAX.  *start is where the token begins. */
static id_token next_id(const char *line, size_t len, size_t *at, size_t *start,
                        int64_t *value)
{
    size_t i = *at;
    while (i < len && (line[i] == ' ' || line[i] == '\t')) i++;
    *at = *start = i;
    if (i == len) return ID_END;
    int64_t v = 0;
    for (; i < len && line[i] >= '0' && line[i] <= '9'; i++)
        if ((v = v * 10 + (line[i] - '0')) > INT32_MAX) return ID_TOO_LARGE;
    if (i == *start || (i < len && line[i] != ' ' && line[i] != '\t')) return ID_NOT_ID;
    *at = i;
    *value = v;
    return ID_VALUE;
}

tfm_status tfm_ids_parse(const char *line, size_t len, int32_t limit, tfm_ids *out,
                         tfm_error *err)
{
    tfm_ids_clear(out);
    size_t at = 0, start;
    int64_t value;
    for (;;) {
        const id_token t = next_id(line, len, &at, &start, &value);
        if (t == ID_END) return TFM_OK;
        if (t == ID_TOO_LARGE)
            return tfm_error_set(err, TFM_ERR_RANGE, "column %zu: id is too large", start + 1);
        if (t == ID_NOT_ID) {
            size_t end = start;
            while (end < len && end - start < 20 && line[end] != ' ' && line[end] != '\t')
                end++;
            return tfm_error_set(err, TFM_ERR_FORMAT,
                                 "column %zu: expected a token id (a non-negative "
                                 "decimal integer), found '%.*s'",
                                 start + 1, (int)(end - start), line + start);
        }
        if (limit > 0 && value >= limit)
            return tfm_error_set(err, TFM_ERR_RANGE,
                                 "column %zu: id %lld is outside the vocabulary "
                                 "(0..%d)",
                                 start + 1, (long long)value, (int)limit - 1);
        if (tfm_ids_push(out, (int32_t)value) != TFM_OK)
            return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    }
}

tfm_status tfm_ids_format(const int32_t *ids, size_t n, tfm_buf *out)
{
    /* 11 characters hold any int32 and a separator. */
    if (tfm_buf_reserve(out, n * 12) != TFM_OK) return TFM_ERR_NOMEM;
    char *p = out->data + out->len;
    for (size_t i = 0; i < n; i++) {
        if (i) *p++ = ' ';
        char digits[12];
        int k = 0;
        uint32_t v = (uint32_t)ids[i];
        if (ids[i] < 0) {
            *p++ = '-';
            v = (uint32_t)(-(int64_t)ids[i]);
        }
        do {
            digits[k++] = (char)('0' + v % 10);
            v /= 10;
        } while (v);
        while (k) *p++ = digits[--k];
    }
    out->len = (size_t)(p - out->data);
    out->data[out->len] = 0;
    return TFM_OK;
}

/* How many ids the line holds when it is an id line (tokens as
 * tfm_ids_parse takes them, a CR at the end), or -1 when it is not. */
int tfm_id_line_count(const char *line, size_t len)
{
    if (len > 0 && line[len - 1] == '\r') len--;
    size_t at = 0, start;
    int64_t value;
    int n = 0;
    id_token t;
    while ((t = next_id(line, len, &at, &start, &value)) == ID_VALUE) n++;
    return t == ID_END ? n : -1;
}
