/* fuzz_placeholders.c - libFuzzer target for the placeholder scanner and the
 * placeholder round trip.  For any bytes x and each set of classes tried:
 * the placeholders are in order, do not overlap, lie inside x, hold valid
 * UTF-8 without control characters, and are numbered by the rank of their
 * text (equal texts alike, above 32 zero); and decoding the ids of
 * tfm_bpe_encode_placeholders(x) against x gives the normalised text
 * between the placeholders with each numbered placeholder as it is in x,
 * dropping nothing.  Any difference aborts. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tfm/text.h"

#include "ph_vocab.h"

#define M PH_VOCAB_MARKER

/* The vocabulary: ph_vocab.h's, with a few merges. */
static const char *const merges[] = {M "t", "th", M "th", "he", "<p", "ph", "%s", NULL};

static int cmp_text(const char *a, size_t la, const char *b, size_t lb)
{
    int c = memcmp(a, b, la < lb ? la : lb);
    return c != 0 ? c : (la < lb ? -1 : la > lb);
}

/* The scan's properties. */
static void check_scan(const char *x, size_t size, const tfm_placeholders *p)
{
    size_t end = 0;
    for (size_t k = 0; k < p->n; k++) {
        const tfm_placeholder *a = &p->items[k];
        if (a->len == 0 || a->start < end || a->start + a->len > size) abort();
        end = a->start + a->len;
        const unsigned char *u = (const unsigned char *)x + a->start;
        for (size_t i = 0; i < a->len;) {
            int32_t cp;
            int n = tfm_utf8_decode(u + i, a->len - i, &cp);
            if (n == 0 || cp < 0x20 || (cp >= 0x7F && cp < 0xA0)) abort();
            i += (size_t)n;
        }
        /* The number is the rank of the text among the distinct texts. */
        int below = 0;
        for (size_t j = 0; j < p->n && p->n < 200; j++) {
            const tfm_placeholder *b = &p->items[j];
            bool earlier = false;
            for (size_t i = 0; i < j; i++)
                earlier |= cmp_text(x + p->items[i].start, p->items[i].len, x + b->start,
                                    b->len) == 0;
            if (!earlier && cmp_text(x + b->start, b->len, x + a->start, a->len) < 0) below++;
        }
        if (p->n < 200 && a->index != (below + 1 <= TFM_PH_TOKENS ? below + 1 : 0)) abort();
    }
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    static tfm_vocab *v;
    static tfm_bpe *b;
    ph_tokenizer_once(merges, &v, &b);
    static const unsigned classes[] = {TFM_PH_ALL, TFM_PH_PRINTF | TFM_PH_QT, TFM_PH_TAGS,
                                       TFM_PH_BRACES};
    const char *x = (const char *)data;
    tfm_placeholders p;
    tfm_placeholders_init(&p);
    tfm_ids ids;
    tfm_ids_init(&ids);
    tfm_buf out, want, seg;
    tfm_buf_init(&out);
    tfm_buf_init(&want);
    tfm_buf_init(&seg);
    const tfm_norm_params *np = tfm_vocab_norm(v);
    for (size_t c = 0; c < sizeof classes / sizeof classes[0]; c++) {
        if (tfm_placeholders_scan(x, size, classes[c], &p, NULL) != TFM_OK) abort();
        check_scan(x, size, &p);
        if (tfm_bpe_encode_placeholders(b, NULL, x, size, &p, &ids, NULL, NULL) != TFM_OK) abort();
        size_t dropped = 1;
        if (tfm_bpe_decode_placeholders(v, ids.data, ids.len, x, size, &p, &out, &dropped, NULL) !=
            TFM_OK)
            abort();
        if (dropped != 0) abort();
        /* What it must be: the text between numbered placeholders normalised,
         * the placeholders raw. */
        tfm_buf_clear(&want);
        size_t from = 0;
        for (size_t k = 0; k <= p.n; k++) {
            if (k < p.n && p.items[k].index == 0) continue;
            size_t to = k < p.n ? p.items[k].start : size;
            if (tfm_normalize(np, x + from, to - from, &seg, NULL, NULL) != TFM_OK) abort();
            tfm_buf_append(&want, seg.data ? seg.data : "", seg.len);
            if (k == p.n) break;
            tfm_buf_append(&want, x + p.items[k].start, p.items[k].len);
            from = p.items[k].start + p.items[k].len;
        }
        if (out.len != want.len || (out.len && memcmp(out.data, want.data, out.len) != 0))
            abort();
    }
    tfm_placeholders_free(&p);
    tfm_ids_free(&ids);
    tfm_buf_free(&out);
    tfm_buf_free(&want);
    tfm_buf_free(&seg);
    return 0;
}
