/* utf8.c - decoding, encoding and repairing UTF-8, strictly by the Unicode
 * standard: overlong forms, surrogates and code points above U+10FFFF are
 * invalid, and each maximal invalid subpart becomes one U+FFFD; and
 * stripping trailing whitespace as Python does (sacreBLEU strips its lines
 * so; the metrics hold the rest of Python's string semantics). */
#include <string.h>

#include "tfm/core.h"

/* Well-formed sequences, from Table 3-7 of the Unicode standard: the lead
 * byte decides the length and the allowed range of the second byte (which
 * rules out overlong forms, surrogates and code points above U+10FFFF); the
 * other continuation bytes are 80..BF. */
int tfm_utf8_scan(const unsigned char *s, size_t len, int32_t *cp)
{
    unsigned char b = s[0];
    if (b < 0x80) {
        *cp = b;
        return 1;
    }
    int need;
    unsigned char lo = 0x80, hi = 0xBF;
    int32_t c;
    if (b >= 0xC2 && b <= 0xDF) {
        need = 1;
        c = b & 0x1F;
    } else if (b >= 0xE0 && b <= 0xEF) {
        need = 2;
        c = b & 0x0F;
        if (b == 0xE0) lo = 0xA0;
        if (b == 0xED) hi = 0x9F;
    } else if (b >= 0xF0 && b <= 0xF4) {
        need = 3;
        c = b & 0x07;
        if (b == 0xF0) lo = 0x90;
        if (b == 0xF4) hi = 0x8F;
    } else {
        return -1; /* a continuation byte, C0, C1 or F5..FF: never valid */
    }
    for (int k = 1; k <= need; k++) {
        /* The maximal subpart is the lead byte and the continuation bytes
         * that were still acceptable before the sequence broke off. */
        if ((size_t)k >= len || s[k] < lo || s[k] > hi) return -k;
        c = (c << 6) | (s[k] & 0x3F);
        lo = 0x80;
        hi = 0xBF;
    }
    *cp = c;
    return need + 1;
}

int tfm_utf8_decode(const unsigned char *s, size_t len, int32_t *cp)
{
    if (len == 0) return 0;
    int n = tfm_utf8_scan(s, len, cp);
    return n > 0 ? n : 0;
}

int tfm_utf8_encode(int32_t cp, char *out)
{
    unsigned char *o = (unsigned char *)out;
    if (cp < 0x80) {
        o[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (unsigned char)(0xC0 | (cp >> 6));
        o[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | (cp >> 12));
        o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | (cp >> 18));
    o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

static const char replacement[3] = {(char)0xEF, (char)0xBF, (char)0xBD}; /* U+FFFD */

tfm_status tfm_utf8_repair_append(tfm_buf *out, const char *s, size_t len, size_t *n_bad,
                                  size_t *first_bad)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t bad = 0, start = 0; /* start: first byte not yet copied */
    if (tfm_buf_reserve(out, len) != TFM_OK) return TFM_ERR_NOMEM;
    for (size_t i = 0; i < len;) {
        if (u[i] < 0x80) {
            i++;
            continue;
        }
        int32_t cp;
        int n = tfm_utf8_scan(u + i, len - i, &cp);
        if (n > 0) {
            i += (size_t)n;
            continue;
        }
        if (bad == 0 && first_bad) *first_bad = i;
        bad++;
        if (tfm_buf_append(out, s + start, i - start) != TFM_OK ||
            tfm_buf_append(out, replacement, 3) != TFM_OK)
            return TFM_ERR_NOMEM;
        i += (size_t)-n;
        start = i;
    }
    if (tfm_buf_append(out, s + start, len - start) != TFM_OK) return TFM_ERR_NOMEM;
    *n_bad = bad;
    return TFM_OK;
}

size_t tfm_utf8_rstrip(const char *s, size_t len)
{
    const unsigned char *u = (const unsigned char *)s;
    while (len > 0) {
        unsigned char last = u[len - 1];
        if (last < 0x80) { /* ASCII: the common case */
            if (!tfm_py_isspace(last)) return len;
            len--;
            continue;
        }
        /* Find the start of the last character (at most 3 continuation bytes). */
        size_t start = len - 1;
        while (start > 0 && len - start < 4 && (u[start] & 0xC0) == 0x80) start--;
        int32_t cp;
        if (tfm_utf8_decode(u + start, len - start, &cp) != (int)(len - start) ||
            !tfm_py_isspace(cp))
            return len;
        len = start;
    }
    return 0;
}
