/* base64.c - base64 (RFC 4648, with padding): how a vocabulary file holds
 * the SentencePiece model of an imported model on one line. */
#include "core/base64.h"

static const char b64_alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

void tfm_base64_write(FILE *fp, const unsigned char *s, size_t n)
{
    char q[4];
    for (size_t i = 0; i < n; i += 3) {
        uint32_t w = (uint32_t)s[i] << 16;
        if (i + 1 < n) w |= (uint32_t)s[i + 1] << 8;
        if (i + 2 < n) w |= s[i + 2];
        q[0] = b64_alphabet[w >> 18 & 63];
        q[1] = b64_alphabet[w >> 12 & 63];
        q[2] = i + 1 < n ? b64_alphabet[w >> 6 & 63] : '=';
        q[3] = i + 2 < n ? b64_alphabet[w & 63] : '=';
        fwrite(q, 1, 4, fp);
    }
}

static int base64_value(char c)
{
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

bool tfm_base64_read(const char *s, size_t len, tfm_buf *out)
{
    if (len % 4 != 0 || tfm_buf_reserve(out, len / 4 * 3) != TFM_OK) return false;
    for (size_t i = 0; i < len; i += 4) {
        int v[4], pad = 0;
        for (int k = 0; k < 4; k++) {
            if (s[i + k] == '=' && i + 4 == len && k >= 2) {
                v[k] = 0;
                pad++;
                continue;
            }
            if (pad || (v[k] = base64_value(s[i + k])) < 0) return false;
        }
        const uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 |
                           (uint32_t)v[3];
        const unsigned char b[3] = {(unsigned char)(w >> 16), (unsigned char)(w >> 8),
                                    (unsigned char)w};
        if (tfm_buf_append(out, b, (size_t)(3 - pad)) != TFM_OK) return false;
    }
    return true;
}
