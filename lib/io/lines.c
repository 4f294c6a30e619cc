/* lines.c - a line reader over a file descriptor that can tell whether the
 * next line is ready without blocking.
 *
 * stdio cannot say how much input it holds, so a filter reading with
 * getline() cannot know when to stop gathering a batch and answer; this
 * reader keeps its own buffer and asks poll() about the descriptor. */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tfm/io.h"

#define READ_CHUNK (1 << 16)

struct tfm_line_reader {
    int fd;
    char *buf;
    size_t start;     /* first unread byte */
    size_t end;       /* end of buffered bytes */
    size_t cap;
    bool at_eof;
    size_t line_number;
    size_t max_length; /* longest line returned; longer ones are errors */
    bool skipping;     /* a line found too long: its rest is still to be read past */
};

tfm_line_reader *tfm_lines_create(int fd)
{
    tfm_line_reader *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->fd = fd;
    r->max_length = TFM_LINES_MAX_LENGTH;
    r->cap = READ_CHUNK * 2;
    r->buf = malloc(r->cap);
    if (!r->buf) {
        free(r);
        return NULL;
    }
    return r;
}

void tfm_lines_free(tfm_line_reader *r)
{
    if (!r) return;
    free(r->buf);
    free(r);
}

size_t tfm_lines_number(const tfm_line_reader *r)
{
    return r->line_number;
}

void tfm_lines_set_max_length(tfm_line_reader *r, size_t max_length)
{
    r->max_length = max_length;
}

static bool has_buffered_line(const tfm_line_reader *r)
{
    return r->end > r->start && memchr(r->buf + r->start, '\n', r->end - r->start);
}

/* Whether a read of the descriptor would return at once. */
static bool input_ready(const tfm_line_reader *r)
{
    if (r->at_eof) return true;
    struct pollfd p = {.fd = r->fd, .events = POLLIN};
    int n = poll(&p, 1, 0);
    return n != 0; /* data, hang-up or an error: the next read returns at once */
}

bool tfm_lines_ready(tfm_line_reader *r)
{
    return has_buffered_line(r) || input_ready(r);
}

/* Reads more input after the buffered bytes, moving or growing the buffer
 * as needed.  Returns the number of bytes read (0 at end of input). */
static tfm_status fill(tfm_line_reader *r, tfm_error *err)
{
    if (r->start > 0 && (r->start == r->end || r->cap - r->end < READ_CHUNK)) {
        memmove(r->buf, r->buf + r->start, r->end - r->start);
        r->end -= r->start;
        r->start = 0;
    }
    if (r->cap - r->end < READ_CHUNK) {
        size_t cap = r->cap * 2;
        char *p = realloc(r->buf, cap);
        if (!p) return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory reading a line");
        r->buf = p;
        r->cap = cap;
    }
    for (;;) {
        /* Leave one byte free for the terminating NUL of a final line. */
        ssize_t n = read(r->fd, r->buf + r->end, r->cap - r->end - 1);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return tfm_error_set(err, TFM_ERR_IO, "read error: %s", strerror(errno));
        if (n == 0) r->at_eof = true;
        r->end += (size_t)n;
        return TFM_OK;
    }
}

/* Reads past the rest of a line found too long (up to and including its
 * '\n'), in chunks, so memory stays bounded; an input error is returned. */
static tfm_status skip_rest_of_line(tfm_line_reader *r, tfm_error *err)
{
    for (;;) {
        char *nl = memchr(r->buf + r->start, '\n', r->end - r->start);
        if (nl || r->at_eof) {
            r->start = nl ? (size_t)(nl - r->buf) + 1 : r->end;
            r->skipping = false;
            r->line_number++; /* the long line is behind us now */
            return TFM_OK;
        }
        r->start = r->end;
        tfm_status s = fill(r, err);
        if (s != TFM_OK) return s;
    }
}

tfm_status tfm_lines_peek(tfm_line_reader *r, size_t max_lines, size_t max_bytes,
                          const char **block, size_t *len, tfm_error *err)
{
    *block = "";
    *len = 0;
    if (r->skipping) return TFM_OK; /* a long line is being read past: nothing to show */
    size_t lines = 0, scanned = 0, whole = 0;
    for (;;) {
        /* count the whole lines buffered, up to the limits */
        const char *p = r->buf + r->start;
        const size_t have = r->end - r->start;
        while (lines < max_lines && scanned < have) {
            const char *nl = memchr(p + scanned, '\n', have - scanned);
            if (!nl) break;
            scanned = (size_t)(nl - p) + 1;
            whole = scanned;
            lines++;
        }
        if (lines < max_lines) scanned = have; /* the tail holds no '\n' */
        const bool enough = lines >= max_lines || (lines > 0 && have >= max_bytes);
        /* at least one line, then what is ready without waiting */
        if (enough || r->at_eof || have - whole > r->max_length ||
            (lines > 0 && !input_ready(r)))
            break;
        tfm_status s = fill(r, err);
        if (s != TFM_OK) return s;
    }
    *block = r->buf + r->start;
    *len = r->at_eof && lines < max_lines && r->end - r->start <= r->max_length
               ? r->end - r->start /* a final line without '\n' */
               : whole;
    return TFM_OK;
}

tfm_status tfm_lines_next(tfm_line_reader *r, const char **line, size_t *len, tfm_error *err)
{
    if (r->skipping) {
        tfm_status s = skip_rest_of_line(r, err);
        if (s != TFM_OK) return s;
    }
    size_t scanned = 0; /* bytes after start already known to hold no '\n' */
    for (;;) {
        char *nl = memchr(r->buf + r->start + scanned, '\n', r->end - r->start - scanned);
        const size_t line_len = nl ? (size_t)(nl - (r->buf + r->start)) : r->end - r->start;
        if ((nl || r->at_eof) && line_len > r->max_length) {
            /* a long line buffered whole (tfm_lines_peek read ahead): the
             * same error, and the next call reads past the rest of it */
            r->start += r->max_length + 1;
            r->skipping = true;
            return tfm_error_set(err, TFM_ERR_RANGE, "the line is longer than %zu bytes (the "
                                 "most a line may have)", r->max_length);
        }
        if (nl) {
            *line = r->buf + r->start;
            *len = (size_t)(nl - *line);
            *nl = 0;
            r->start += *len + 1;
            r->line_number++;
            return TFM_OK;
        }
        if (r->at_eof) {
            if (r->start == r->end) return TFM_EOF;
            *line = r->buf + r->start;
            *len = r->end - r->start;
            r->buf[r->end] = 0;
            r->start = r->end;
            r->line_number++;
            return TFM_OK;
        }
        scanned = r->end - r->start;
        if (scanned > r->max_length) {
            /* Reported at once (input without end, such as /dev/zero, must
             * not keep the caller waiting); the next call reads past the
             * rest of it. */
            r->start = r->end;
            r->skipping = true;
            return tfm_error_set(err, TFM_ERR_RANGE, "the line is longer than %zu bytes (the "
                                 "most a line may have)", r->max_length);
        }
        tfm_status s = fill(r, err);
        if (s != TFM_OK) return s;
    }
}
