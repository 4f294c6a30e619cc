/* json_string.c - the text of a JSON string with its escapes undone.
 *
 * A safetensors header's long metadata values (a model's vocabulary, most
 * of the header) are read when a program first asks for one.  The header
 * check has already found their bytes to be UTF-8 with no control byte
 * and no \u0000, and where each ends; what is left is to undo the escapes,
 * which cJSON did at several times the cost: the text between escapes is
 * copied whole. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "safetensors_internal.h"
#include "tfm/core.h"

/* The value of the 4 hex digits at s, or -1. */
static int32_t hex4(const unsigned char *s)
{
    int32_t v = 0;
    for (int i = 0; i < 4; i++) {
        int d = tfm_hex_digit(s[i]);
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

/* The code point of the \uXXXX escape at s[i] (with the low half of a
 * surrogate pair after it), its length in *used; -1 when it is not one a
 * JSON text may hold (bad digits, a surrogate half alone, U+0000). */
static int32_t unicode_escape(const unsigned char *s, size_t n, size_t i, size_t *used)
{
    if (n - i < 6) return -1;
    int32_t cp = hex4(s + i + 2);
    *used = 6;
    if (cp >= 0xDC00 && cp <= 0xDFFF) return -1; /* a low half first */
    if (cp >= 0xD800 && cp <= 0xDBFF) {
        if (n - i < 12 || s[i + 6] != '\\' || s[i + 7] != 'u') return -1;
        int32_t low = hex4(s + i + 8);
        if (low < 0xDC00 || low > 0xDFFF) return -1;
        cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
        *used = 12;
    }
    return cp > 0 ? cp : -1;
}

tfm_status st_json_unescape(const unsigned char *s, size_t n, char **out, size_t *bad)
{
    *out = NULL;
    /* escapes only ever shorten the text: \uXXXX gives at most 3 bytes,
     * a surrogate pair's 12 give 4 */
    char *text = malloc(n + 1);
    if (!text) return TFM_ERR_NOMEM;
    size_t from = 0, to = 0;
    while (from < n) {
        const unsigned char *slash = memchr(s + from, '\\', n - from);
        size_t plain = (slash ? (size_t)(slash - s) : n) - from;
        memcpy(text + to, s + from, plain);
        to += plain;
        from += plain;
        if (!slash) break;
        if (from + 1 >= n) {
            *bad = from;
            free(text);
            return TFM_ERR_FORMAT;
        }
        size_t used = 2;
        char c = 0;
        switch (s[from + 1]) {
        case '"': c = '"'; break;
        case '\\': c = '\\'; break;
        case '/': c = '/'; break;
        case 'b': c = '\b'; break;
        case 'f': c = '\f'; break;
        case 'n': c = '\n'; break;
        case 'r': c = '\r'; break;
        case 't': c = '\t'; break;
        case 'u': {
            int32_t cp = unicode_escape(s, n, from, &used);
            if (cp < 0) break;
            to += (size_t)tfm_utf8_encode(cp, text + to);
            from += used;
            continue;
        }
        default: break;
        }
        if (!c) {
            *bad = from;
            free(text);
            return TFM_ERR_FORMAT;
        }
        text[to++] = c;
        from += used;
    }
    text[to] = 0;
    *out = text;
    return TFM_OK;
}
