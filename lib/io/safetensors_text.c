/* safetensors_text.c - the header of a safetensors file as text, before
 * cJSON parses it (safetensors.c): one pass that refuses what cJSON would
 * let through silently and sets the long strings aside, the text cJSON
 * then parses, and messages that name a byte of the header. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tfm/io.h"
#include "safetensors_internal.h"

/* The index of the quote that ends the string whose text starts at
 * s[from], or len when the header ends first. */
static size_t string_end(const unsigned char *s, size_t len, size_t from)
{
    for (size_t i = from; i < len;) {
        const unsigned char *quote = memchr(s + i, '"', len - i);
        if (!quote) return len;
        const size_t at = (size_t)(quote - s);
        size_t run = 0; /* the backslashes before it: an odd run escapes it */
        while (at - run > from && s[at - run - 1] == '\\') run++;
        if (run % 2 == 0) return at;
        i = at + 1;
    }
    return len;
}

/* Rejects, before cJSON sees the header, what cJSON would accept but JSON
 * (and the reference) does not, or what it would turn into a silent loss:
 * invalid UTF-8; a raw control byte (JSON allows only tab, newline and
 * carriage return, between tokens); and a \u0000 escape, which cJSON
 * decodes into a NUL that ends the C string early.  It also counts the
 * values of the JSON (one per comma or opening bracket outside strings,
 * and one more) before cJSON builds a node for each.  One pass over the
 * header (a model's vocabulary makes it hundreds of kilobytes, read by
 * every program at its start); a header with several faults gets the
 * message of the first kind in the order above, at its first place.
 * With long (not NULL), a long string that is a member's value is not
 * checked but appended to long as a st_span.  s is the header's text from
 * byte origin on: messages name bytes of the header. */
tfm_status st_check_header_text(const unsigned char *s, size_t len, size_t origin,
                                tfm_buf *long_values, tfm_error *err)
{
    size_t values = 1, too_many_at = SIZE_MAX, control_at = SIZE_MAX, nul_seen_at = SIZE_MAX;
    bool in_string = false, escaped = false; /* escaped: the character after a '\' in a string */
    size_t backslashes = 0; /* the run of them just before s[i] */
    unsigned char last = 0; /* the last byte outside strings other than whitespace */
    for (size_t i = 0; i < len;) {
        /* Most of a header is the text of strings (a vocabulary's pieces,
         * with a tab and a newline escaped on every line): a run of
         * printable ASCII other than '\\' and '"', of two-character
         * escapes other than \u, and of valid UTF-8 changes nothing but the
         * run of backslashes (even again after it), and is skipped in one
         * loop.  The rest, \u included, goes the way of one byte below. */
        if (in_string && !escaped) {
            size_t j = i;
            for (;;) {
                while (j < len && s[j] >= 0x20 && s[j] < 0x7f && s[j] != '\\' && s[j] != '"') j++;
                if (j + 1 < len && s[j] == '\\' && s[j + 1] >= 0x20 && s[j + 1] < 0x7f &&
                    s[j + 1] != 'u') {
                    j += 2;
                    continue;
                }
                int32_t cp;
                const size_t n =
                    j < len && s[j] >= 0x80 ? (size_t)tfm_utf8_decode(s + j, len - j, &cp) : 0;
                if (n == 0) break;
                j += n;
            }
            if (j > i) {
                backslashes = 0;
                i = j;
                continue;
            }
        }
        const unsigned char c = s[i];
        size_t n = 1;
        if (c >= 0x80) { /* never a character JSON's structure or escapes use */
            int32_t cp;
            n = (size_t)tfm_utf8_decode(s + i, len - i, &cp);
            if (n == 0)
                return tfm_error_set(err, TFM_ERR_FORMAT,
                                     "header is not valid UTF-8: bad byte 0x%02x at byte %zu of "
                                     "the header",
                                     c, origin + i);
        } else {
            if (c < 0x20 && c != '\t' && c != '\n' && c != '\r' && control_at == SIZE_MAX)
                control_at = i;
            /* backslashes escape each other in pairs; an odd run escapes
             * the character after it */
            if (c == 'u' && backslashes % 2 == 1 && nul_seen_at == SIZE_MAX && len - i >= 5 &&
                memcmp(s + i, "u0000", 5) == 0)
                nul_seen_at = i;
        }
        if (escaped) {
            escaped = false;
        } else if (in_string) {
            if (c == '\\') escaped = true;
            else if (c == '"') in_string = false;
        } else if (c == '"') {
            const size_t end = long_values && last == ':' ? string_end(s, len, i + 1) : len;
            if (end < len && end - (i + 1) >= DEFERRED_BYTES) {
                const st_span span = {i + 1, end, 0};
                if (tfm_buf_append(long_values, &span, sizeof span) != TFM_OK)
                    return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
                i = end + 1;
                backslashes = 0;
                last = '"';
                continue;
            }
            in_string = true;
        } else if ((c == ',' || c == '[' || c == '{') && ++values > TFM_SAFETENSORS_MAX_VALUES &&
                   too_many_at == SIZE_MAX) {
            too_many_at = i;
        }
        if (!in_string && c != ' ' && c != '\t' && c != '\n' && c != '\r') last = c;
        backslashes = c == '\\' ? backslashes + 1 : 0;
        i += n;
    }
    if (too_many_at != SIZE_MAX)
        return tfm_error_set(err, TFM_ERR_FORMAT,
                             "header holds more than %u JSON values (at byte %zu): more "
                             "than any model needs",
                             TFM_SAFETENSORS_MAX_VALUES, origin + too_many_at);
    if (control_at != SIZE_MAX && control_at < nul_seen_at)
        return tfm_error_set(err, TFM_ERR_FORMAT,
                             "header holds the control byte 0x%02x at byte %zu, which JSON "
                             "allows only escaped",
                             s[control_at], origin + control_at);
    if (nul_seen_at != SIZE_MAX)
        return tfm_error_set(err, TFM_ERR_FORMAT,
                             "header holds \\u0000 (a NUL character) at byte %zu: names and "
                             "metadata cannot hold NUL",
                             origin + nul_seen_at - 1);
    return TFM_OK;
}

/* The byte of the header that byte pos of the text is. */
size_t st_header_byte(const st_text_source *from, size_t pos)
{
    size_t shift = 0;
    for (size_t k = 0; k < from->n_spans && from->spans[k].text_end <= pos; k++)
        shift = from->spans[k].end - from->spans[k].text_end;
    return from->origin + pos + shift;
}

/* A parse failure of text[0..len) at where (cJSON's, or a bad escape in a
 * long value) as a message naming the byte of the header and showing the
 * text there. */
tfm_status st_json_error(const char *text, size_t len, const char *where,
                         const st_text_source *from, tfm_error *err)
{
    if (from->header_len == 0)
        return tfm_error_set(err, TFM_ERR_FORMAT, "header is empty: expected a JSON object");
    size_t pos = where && where >= text && where <= text + len ? (size_t)(where - text) : 0;
    char near[32];
    size_t n = 0;
    for (size_t i = pos; i < len && n < 24; i++)
        near[n++] = (unsigned char)text[i] >= 0x20 && (unsigned char)text[i] < 0x7f ? text[i] : '?';
    near[n] = 0;
    return tfm_error_set(err, TFM_ERR_FORMAT,
                         "header is not valid JSON: error near byte %zu of %zu (at \"%s\")",
                         st_header_byte(from, pos), from->header_len, near);
}

/* The text cJSON parses: the header, header[0..n), with each long string
 * of spans replaced by its mark, NUL-terminated (so that nothing cJSON
 * does can read past it), its length in *len; NULL when memory runs out. */
char *st_text_for_cjson(const unsigned char *header, size_t n, st_span *spans, size_t n_spans,
                        size_t *len)
{
    char *text = malloc(n + 1);
    if (!text) return NULL;
    size_t from = 0, to = 0; /* in header, in text */
    for (size_t k = 0; k < n_spans; k++) {
        memcpy(text + to, header + from, spans[k].begin - from);
        to += spans[k].begin - from;
        to += (size_t)sprintf(text + to, "%c%zu", DEFERRED_MARK, k); /* far shorter than a span */
        spans[k].text_end = to;
        from = spans[k].end;
    }
    memcpy(text + to, header + from, n - from);
    to += n - from;
    text[to] = 0;
    *len = to;
    return text;
}
