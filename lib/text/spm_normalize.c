/* spm_normalize.c - SentencePiece's normalizer (normalizer.cc), byte for
 * byte: the precompiled character map, user-defined symbols passed through,
 * extra whitespace removed, the dummy prefix, spaces escaped to U+2581.
 *
 * The precompiled map (the normalizer spec's precompiled_charsmap) is
 *
 *     uint32 LE  trie_size
 *     trie_size bytes: a Darts-clone double array, 32-bit LE units
 *     the rest: replacement strings, each ending in NUL
 *
 * A unit is a node's transition: bits 0-7 its label, bit 8 "has a leaf"
 * (the node ends a key), bits 10-31 the XOR offset to its children (shifted
 * by 8 more when bit 9 is set); a leaf unit holds a value in bits 0-30 with
 * bit 31 set, so no byte label matches it.  From node position p, byte c
 * leads to q = p ^ offset(unit p) ^ c when unit q's label is c; the leaf
 * of q is at q ^ offset(unit q).  A value is the offset of a replacement
 * string.
 *
 * At each position the longest user-defined piece that starts there is
 * copied as it is; else the longest key of the map is replaced; else one
 * character is copied, or, when the bytes are not valid UTF-8 (as
 * SentencePiece's decoder sees it), one byte becomes U+FFFD.  Memory-safe
 * for any map: transitions outside the array end the match, a value past
 * the strings gives an empty replacement (SentencePiece would read past its
 * buffer), a string without its NUL ends at the map's end. */
#include <string.h>

#include "text/spm_internal.h"

static const char replacement_char[] = "\xEF\xBF\xBD";

static inline uint32_t unit_at(const spm_norm *n, size_t i)
{
    const unsigned char *u = n->units + 4 * i;
    return (uint32_t)u[0] | (uint32_t)u[1] << 8 | (uint32_t)u[2] << 16 | (uint32_t)u[3] << 24;
}

static inline uint32_t unit_offset(uint32_t u) { return (u >> 10) << ((u & (1u << 9)) >> 6); }
static inline bool unit_has_leaf(uint32_t u) { return (u >> 8) & 1; }
static inline uint32_t unit_label(uint32_t u) { return u & ((1u << 31) | 0xFF); }

/* (here, beside the normalizer that passes user symbols through, rather
 * than in spm_model.c, which calls spm_norm_set_map: no circle of files) */
size_t spm_user_prefix(const tfm_spm *m, const unsigned char *s, size_t len)
{
    size_t best = 0;
    int32_t node = 0;
    for (size_t i = 0; i < len; i++) {
        node = spm_trie_next(m, node, s[i]);
        if (node < 0) break;
        int32_t id = m->trie[node].value;
        if (id >= 0 && m->pieces[id].type == TFM_SPM_USER_DEFINED) best = i + 1;
    }
    return best;
}

tfm_status spm_norm_set_map(spm_norm *spec, const unsigned char *blob, size_t len,
                            tfm_error *err)
{
    if (len <= 4)
        return tfm_error_set(err, TFM_ERR_FORMAT,
                             ": precompiled_charsmap: %zu bytes, too short for its header", len);
    uint32_t trie = (uint32_t)blob[0] | (uint32_t)blob[1] << 8 | (uint32_t)blob[2] << 16 |
                    (uint32_t)blob[3] << 24;
    if (trie > len - 4)
        return tfm_error_set(err, TFM_ERR_FORMAT,
                             ": precompiled_charsmap: its trie of %u bytes runs past its end "
                             "(%zu bytes)",
                             trie, len - 4);
    if (trie < 4)
        return tfm_error_set(err, TFM_ERR_FORMAT,
                             ": precompiled_charsmap: its trie has no root (%u bytes)", trie);
    spec->has_map = true;
    spec->units = blob + 4;
    spec->n_units = trie / 4;
    spec->strings = (const char *)blob + 4 + trie;
    spec->strings_len = len - 4 - trie;
    return TFM_OK;
}

/* The replacement string at value v (see the file's comment). */
static const char *map_string(const spm_norm *n, uint32_t v, size_t *len)
{
    if (v >= n->strings_len) {
        *len = 0;
        return n->strings;
    }
    const char *s = n->strings + v;
    const char *nul = memchr(s, 0, n->strings_len - v);
    *len = nul ? (size_t)(nul - s) : n->strings_len - v;
    return s;
}

/* The longest key of the map that is a prefix of s[0..len): its length, 0
 * when none, and its value in *value. */
static size_t map_longest(const spm_norm *n, const unsigned char *s, size_t len, uint32_t *value)
{
    size_t best = 0;
    size_t pos = unit_offset(unit_at(n, 0));
    for (size_t i = 0; i < len; i++) {
        pos ^= s[i];
        if (pos >= n->n_units) break;
        uint32_t u = unit_at(n, pos);
        if (unit_label(u) != s[i]) break;
        pos ^= unit_offset(u);
        if (pos >= n->n_units) break;
        if (unit_has_leaf(u)) {
            *value = unit_at(n, pos) & 0x7FFFFFFFu;
            best = i + 1;
        }
    }
    return best;
}

int spm_utf8_len(const unsigned char *s, size_t len)
{
    unsigned char b0 = s[0];
    if (b0 < 0x80) return 1;
#define TRAIL(x) (((x) & 0xC0) == 0x80)
#define VALID(cp) ((cp) < 0xD800 || ((cp) >= 0xE000 && (cp) <= 0x10FFFF))
    if (len >= 2 && (b0 & 0xE0) == 0xC0) {
        uint32_t cp = (uint32_t)(b0 & 0x1F) << 6 | (s[1] & 0x3F);
        return TRAIL(s[1]) && cp >= 0x80 ? 2 : 0;
    }
    if (len >= 3 && (b0 & 0xF0) == 0xE0) {
        uint32_t cp = (uint32_t)(b0 & 0x0F) << 12 | (uint32_t)(s[1] & 0x3F) << 6 | (s[2] & 0x3F);
        return TRAIL(s[1]) && TRAIL(s[2]) && cp >= 0x800 && VALID(cp) ? 3 : 0;
    }
    if (len >= 4 && (b0 & 0xF8) == 0xF0) {
        uint32_t cp = (uint32_t)(b0 & 0x07) << 18 | (uint32_t)(s[1] & 0x3F) << 12 |
                      (uint32_t)(s[2] & 0x3F) << 6 | (s[3] & 0x3F);
        return TRAIL(s[1]) && TRAIL(s[2]) && TRAIL(s[3]) && cp >= 0x10000 && VALID(cp) ? 4 : 0;
    }
#undef TRAIL
#undef VALID
    return 0;
}

void spm_norm_prepare(const tfm_spm *m, spm_norm *n)
{
    for (int b = 0; b < 128; b++) {
        n->ascii[b] = -1;
        if (n->user_symbols && spm_trie_next(m, 0, (unsigned char)b) >= 0) {
            n->ascii[b] = -2; /* a user symbol may start here */
            continue;
        }
        if (!n->has_map) continue;
        size_t pos = unit_offset(unit_at(n, 0)) ^ (size_t)b;
        if (pos >= n->n_units) continue;
        uint32_t u = unit_at(n, pos);
        if (unit_label(u) != (uint32_t)b) continue; /* no rule starts with b */
        size_t kids = pos ^ unit_offset(u);
        if (kids >= n->n_units) continue;
        bool longer = false;
        for (unsigned c = 1; c < 256 && !longer; c++) {
            size_t q = kids ^ c;
            longer = q < n->n_units && unit_label(unit_at(n, q)) == c;
        }
        if (longer) n->ascii[b] = -2;
        else if (unit_has_leaf(u)) {
            uint32_t v = unit_at(n, kids) & 0x7FFFFFFFu;
            n->ascii[b] = v < n->strings_len ? (int32_t)v : -2;
        }
    }
}

/* SentencePiece's NormalizePrefix: how many bytes of s[0..len) (len > 0)
 * the next step takes, and what it gives (*r, *rlen).  Invalid UTF-8 bytes
 * are counted in *bad when bad is not NULL. */
static size_t norm_prefix(const tfm_spm *m, const spm_norm *n, const unsigned char *s, size_t len,
                          const char **r, size_t *rlen, size_t *bad)
{
    if (s[0] < 0x80 && n->ascii[s[0]] != -2) {
        int32_t a = n->ascii[s[0]];
        if (a == -1) {
            *r = (const char *)s;
            *rlen = 1;
        } else {
            *r = map_string(n, (uint32_t)a, rlen);
        }
        return 1;
    }
    if (n->user_symbols) {
        size_t k = spm_user_prefix(m, s, len);
        if (k > 0) {
            *r = (const char *)s;
            *rlen = k;
            return k;
        }
    }
    if (n->has_map) {
        uint32_t v;
        size_t k = map_longest(n, s, len, &v);
        if (k > 0) {
            *r = map_string(n, v, rlen);
            return k;
        }
    }
    int k = spm_utf8_len(s, len);
    if (k == 0) {
        if (bad) (*bad)++;
        *r = replacement_char;
        *rlen = 3;
        return 1;
    }
    *r = (const char *)s;
    *rlen = (size_t)k;
    return (size_t)k;
}

tfm_status spm_normalize(const tfm_spm *m, const spm_norm *n, const char *text, size_t len,
                         tfm_buf *out, size_t *n_bad, tfm_error *err)
{
    tfm_buf_clear(out);
    size_t bad = 0;
    if (n_bad) *n_bad = 0;
    const unsigned char *s = (const unsigned char *)text;
    const char *r;
    size_t rlen;
    if (n->remove_extra_whitespaces) { /* leading whitespace */
        while (len > 0) {
            size_t k = norm_prefix(m, n, s, len, &r, &rlen, NULL);
            if (rlen != 1 || r[0] != ' ') break;
            s += k;
            len -= k;
        }
    }
    if (len == 0) return tfm_buf_append(out, "", 0);
    const char *space = n->escape_whitespaces ? SPM_SPACE : " ";
    size_t space_len = n->escape_whitespaces ? SPM_SPACE_LEN : 1;
    /* Room for the common case; replacements longer than their input grow it. */
    if (tfm_buf_reserve(out, len * 3 + 2 * SPM_SPACE_LEN) != TFM_OK)
        return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory normalizing a line");
    char *o = out->data;
    size_t olen = 0;
    if (!n->ws_suffix && n->add_dummy_prefix) {
        memcpy(o, space, space_len);
        olen = space_len;
    }
    bool prev_space = n->remove_extra_whitespaces;
    while (len > 0) {
        size_t k = norm_prefix(m, n, s, len, &r, &rlen, &bad);
        s += k;
        len -= k;
        if (prev_space)
            while (rlen > 0 && r[0] == ' ') r++, rlen--;
        if (rlen > 0) {
            if (olen + rlen * 3 + len * 3 + 2 * SPM_SPACE_LEN > out->cap - 1) {
                out->len = olen;
                if (tfm_buf_reserve(out, rlen * 3 + len * 3 + 2 * SPM_SPACE_LEN) != TFM_OK)
                    return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory normalizing a line");
                o = out->data;
            }
            for (size_t i = 0; i < rlen; i++) {
                if (r[i] == ' ' && n->escape_whitespaces) {
                    memcpy(o + olen, SPM_SPACE, SPM_SPACE_LEN);
                    olen += SPM_SPACE_LEN;
                } else {
                    o[olen++] = r[i];
                }
            }
            prev_space = r[rlen - 1] == ' ';
        }
        if (!n->remove_extra_whitespaces) prev_space = false;
    }
    if (n->remove_extra_whitespaces)
        while (olen >= space_len && memcmp(o + olen - space_len, space, space_len) == 0)
            olen -= space_len;
    if (n->ws_suffix && n->add_dummy_prefix) {
        memcpy(o + olen, space, space_len);
        olen += space_len;
    }
    out->len = olen;
    out->data[olen] = 0;
    if (n_bad) *n_bad = bad;
    return TFM_OK;
}
