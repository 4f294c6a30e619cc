/* spm_encode.c - segmenting a normalized line into pieces as SentencePiece
 * 0.1.97 does (unigram_model.cc EncodeOptimized, bpe_model.cc, and the
 * processor's PopulateSentencePieceText), so that the ids and pieces are
 * those of spm_encode, byte for byte.
 *
 * Unigram: Viterbi over byte positions of the normalized text.  From each
 * character start, the piece trie gives every piece that starts there; the
 * best path ending at each position keeps (score, start, id).  A character
 * with no piece of its own (one character long, not unused) gets the
 * unknown piece with score min_score - 10; a user-defined piece of n bytes
 * scores n * max_score - 0.1.  The arithmetic is SentencePiece's to the
 * bit: a piece's candidate is added and compared in double and stored in
 * float, the unknown piece's in float, ties keep the first candidate.  So
 * the whole line is one search: the sums run from the line's start and a
 * word's best cut can depend on what came before it (rarely, at the last
 * bit), which rules out a cache of words.
 *
 * BPE: the line is cut into symbols (a user-defined piece, else one
 * character); adjacent pairs whose concatenation is a piece go on a heap by
 * (score descending, left position ascending); the best is merged and its
 * new neighbours' pairs pushed, stale entries being recognized when popped
 * by their size.  A merge into an unused piece is undone at the end along
 * the split last recorded for that piece.  When no piece holds U+2581 but
 * at its start (at its end with treat_whitespace_as_suffix) and none is
 * unused, no merge crosses a word's boundary and words are independent: they
 * are merged alone and cached, since a corpus repeats its words.
 *
 * Then, as the processor does: a run of unknown pieces becomes one (its
 * text the run's), or, with byte_fallback, each byte of an unknown piece
 * becomes its <0xNN> piece. */
#include <stdlib.h>
#include <string.h>

#include "text/spm_internal.h"

enum {
    CACHE_MAX_WORDS = 1 << 20,
    CACHE_MAX_INTS = 1 << 24,
    CACHE_MAX_WORD_BYTES = 256,
    UNK_PENALTY = 10,
};

/* A piece of the segmentation: bytes [off, off+len) of the normalized text,
 * or, for a byte piece from byte fallback, off == SPAN_BYTE (its text is the
 * piece's). */
typedef struct spm_span {
    uint32_t off, len;
    int32_t id;
} spm_span;

#define SPAN_BYTE UINT32_MAX

/* The best path ending at a byte position (unigram). */
typedef struct best_node {
    float score;
    int32_t start; /* -1: not reached yet */
    int32_t id;
} best_node;

/* A candidate merge of symbols left and right into `size` bytes (BPE). */
typedef struct bpe_pair {
    float score;
    int32_t left, right;
    uint32_t size;
} bpe_pair;

struct tfm_spm_encoder {
    const tfm_spm *m;
    spm_norm spec;       /* the model's normalizer spec, the dummy prefix as set */
    tfm_buf norm;        /* the normalized line */
    tfm_buf raw;         /* spm_span[]: the model's segmentation */
    size_t n_raw;
    tfm_buf spans;       /* spm_span[]: after unknown runs and byte fallback */
    size_t n_spans;
    tfm_buf best;        /* best_node[len + 1] (unigram) */
    /* BPE: the symbols of the word being merged, and the heap. */
    tfm_buf sym_off, sym_len, sym_prev, sym_next, sym_freeze;
    tfm_buf heap;
    size_t heap_len;
    int32_t *rev;        /* [n]: unused piece -> the length of its left part, or -1 */
    tfm_ids rev_touched;
    tfm_strmap *cache;   /* word bytes -> offset in cache_data */
    tfm_ids cache_data;  /* per word: count, then (len, id) per piece */
};

void tfm_spm_encoder_set_dummy_prefix(tfm_spm_encoder *e, bool on)
{
    e->spec.add_dummy_prefix = on && e->m->norm.add_dummy_prefix;
}

tfm_status tfm_spm_encoder_create(const tfm_spm *m, tfm_spm_encoder **out, tfm_error *err)
{
    *out = NULL;
    tfm_spm_encoder *e = calloc(1, sizeof *e);
    if (!e) return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    e->m = m;
    e->spec = m->norm;
    tfm_buf_init(&e->norm);
    tfm_buf_init(&e->raw);
    tfm_buf_init(&e->spans);
    tfm_buf_init(&e->best);
    tfm_buf *bufs[] = {&e->sym_off, &e->sym_len, &e->sym_prev, &e->sym_next, &e->sym_freeze,
                       &e->heap};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) tfm_buf_init(bufs[i]);
    tfm_ids_init(&e->rev_touched);
    tfm_ids_init(&e->cache_data);
    if (m->type == TFM_SPM_BPE) {
        if (m->has_unused) {
            e->rev = malloc((size_t)m->n * sizeof *e->rev);
            if (e->rev)
                for (int32_t i = 0; i < m->n; i++) e->rev[i] = -1;
        }
        if (m->bpe_by_word) e->cache = tfm_strmap_create(1 << 14);
        if ((m->has_unused && !e->rev) || (m->bpe_by_word && !e->cache)) {
            tfm_spm_encoder_free(e);
            return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
        }
    }
    *out = e;
    return TFM_OK;
}

void tfm_spm_encoder_free(tfm_spm_encoder *e)
{
    if (!e) return;
    tfm_buf *bufs[] = {&e->norm, &e->raw, &e->spans, &e->best, &e->sym_off, &e->sym_len,
                       &e->sym_prev, &e->sym_next, &e->sym_freeze, &e->heap};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) tfm_buf_free(bufs[i]);
    free(e->rev);
    tfm_ids_free(&e->rev_touched);
    tfm_ids_free(&e->cache_data);
    tfm_strmap_free(e->cache);
    free(e);
}

static tfm_status nomem(tfm_error *err)
{
    return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory encoding a line");
}

static inline tfm_status push_raw(tfm_spm_encoder *e, uint32_t off, uint32_t len, int32_t id)
{
    spm_span *s = tfm_buf_array(&e->raw, e->n_raw + 1, sizeof *s);
    if (!s) return TFM_ERR_NOMEM;
    s[e->n_raw++] = (spm_span){off, len, id};
    return TFM_OK;
}

/* ---- unigram -------------------------------------------------------------------------- */

static tfm_status unigram_encode(tfm_spm_encoder *e, const unsigned char *s, size_t size,
                                 tfm_error *err)
{
    const tfm_spm *m = e->m;
    if (size > INT32_MAX - 1)
        return tfm_error_set(err, TFM_ERR_RANGE, "the line is too long (%zu bytes)", size);
    best_node *best = tfm_buf_array(&e->best, size + 1, sizeof *best);
    if (!best) return nomem(err);
    for (size_t i = 0; i <= size; i++) best[i] = (best_node){0.0f, -1, -1};
    const float unk_score = m->min_score - (float)UNK_PENALTY;
    const spm_unit *trie = m->trie;
    const spm_piece *pieces = m->pieces;
    size_t mblen;
    for (size_t start = 0; start < size; start += mblen) {
        const float till = best[start].score;
        mblen = (size_t)spm_one_char_len(s[start]);
        if (mblen > size - start) mblen = size - start;
        bool single = false;
        int32_t node = 0;
        for (size_t key = start; key < size;) {
            int64_t p = (int64_t)trie[node].base + s[key++];
            if (p >= m->trie_size || trie[p].check != node) break;
            node = (int32_t)p;
            int32_t id = trie[node].value;
            if (id < 0) continue;
            uint8_t type = pieces[id].type;
            if (type == TFM_SPM_UNUSED) continue;
            size_t length = key - start;
            /* unigram_model.cc: `IsUserDefined ? length * max_score_ - 0.1 : score` is a
             * double; so is its sum with the float path score. */
            double score = type == TFM_SPM_USER_DEFINED
                               ? (double)((float)length * m->max_score) - 0.1
                               : (double)pieces[id].score;
            double cand = score + (double)till;
            best_node *t = &best[key];
            if (t->start == -1 || cand > (double)t->score) {
                t->score = (float)cand;
                t->start = (int32_t)start;
                t->id = id;
            }
            if (length == mblen) single = true;
        }
        if (!single) {
            best_node *t = &best[start + mblen];
            float cand = unk_score + till;
            if (t->start == -1 || cand > t->score) {
                t->score = cand;
                t->start = (int32_t)start;
                t->id = m->unk;
            }
        }
    }
    /* Back from the end, then reversed. */
    size_t first = e->n_raw;
    for (size_t end = size; end > 0;) {
        const best_node *b = &best[end];
        if (push_raw(e, (uint32_t)b->start, (uint32_t)(end - (size_t)b->start), b->id) != TFM_OK)
            return nomem(err);
        end = (size_t)b->start;
    }
    spm_span *r = (spm_span *)e->raw.data;
    for (size_t i = first, j = e->n_raw; i + 1 < j; i++, j--) {
        spm_span t = r[i];
        r[i] = r[j - 1];
        r[j - 1] = t;
    }
    return TFM_OK;
}

/* ---- BPE -------------------------------------------------------------------------------- */

/* The symbol at s[0..len): a user-defined piece, else one character. */
static inline size_t bpe_symbol(const tfm_spm *m, const unsigned char *s, size_t len, bool *freeze)
{
    if (m->has_user) {
        size_t k = spm_user_prefix(m, s, len);
        if (k > 0) {
            *freeze = true;
            return k;
        }
    }
    *freeze = false;
    size_t k = (size_t)spm_one_char_len(s[0]);
    return k < len ? k : len;
}

/* Heap order: higher score first, then the leftmost. */
static inline bool pair_before(const bpe_pair *a, const bpe_pair *b)
{
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

static tfm_status heap_push(tfm_spm_encoder *e, bpe_pair p)
{
    bpe_pair *h = tfm_buf_array(&e->heap, e->heap_len + 1, sizeof *h);
    if (!h) return TFM_ERR_NOMEM;
    size_t i = e->heap_len++;
    while (i > 0) {
        size_t up = (i - 1) / 2;
        if (!pair_before(&p, &h[up])) break;
        h[i] = h[up];
        i = up;
    }
    h[i] = p;
    return TFM_OK;
}

static bpe_pair heap_pop(tfm_spm_encoder *e)
{
    bpe_pair *h = (bpe_pair *)e->heap.data;
    bpe_pair top = h[0], last = h[--e->heap_len];
    size_t n = e->heap_len, i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && pair_before(&h[c + 1], &h[c])) c++;
        if (!pair_before(&h[c], &last)) break;
        h[i] = h[c];
        i = c;
    }
    if (n > 0) h[i] = last;
    return top;
}

typedef struct bpe_word {
    const unsigned char *s; /* the word's bytes */
    uint32_t *off, *len;
    int32_t *prev, *next;
    bool *freeze;
} bpe_word;

static tfm_status bpe_add_pair(tfm_spm_encoder *e, const bpe_word *w, int32_t l, int32_t r)
{
    if (l < 0 || r < 0 || w->freeze[l] || w->freeze[r]) return TFM_OK;
    const tfm_spm *m = e->m;
    uint32_t size = w->len[l] + w->len[r];
    int64_t *v = tfm_strmap_find(m->normal, (const char *)w->s + w->off[l], size);
    if (!v) return TFM_OK;
    int32_t id = (int32_t)*v;
    if (m->pieces[id].type == TFM_SPM_UNUSED) {
        if (e->rev[id] < 0 && tfm_ids_push(&e->rev_touched, id) != TFM_OK) return TFM_ERR_NOMEM;
        e->rev[id] = (int32_t)w->len[l];
    }
    return heap_push(e, (bpe_pair){m->pieces[id].score, l, r, size});
}

/* Emits the piece s[0..len) at offset off, undoing merges into unused
 * pieces along their recorded splits. */
static tfm_status bpe_resegment(tfm_spm_encoder *e, const unsigned char *s, uint32_t off,
                                uint32_t len)
{
    const tfm_spm *m = e->m;
    int32_t id = spm_piece_to_id(m, (const char *)s + off, len);
    if (m->pieces[id].type != TFM_SPM_UNUSED || e->rev[id] < 0) return push_raw(e, off, len, id);
    uint32_t left = (uint32_t)e->rev[id];
    tfm_status st = bpe_resegment(e, s, off, left);
    return st == TFM_OK ? bpe_resegment(e, s, off + left, len - left) : st;
}

/* Merges the symbols of s[0..size) and appends the pieces to e->raw, their
 * offsets from s. */
static tfm_status bpe_merge(tfm_spm_encoder *e, const unsigned char *s, size_t size)
{
    const tfm_spm *m = e->m;
    size_t n = 0;
    for (size_t pos = 0; pos < size; n++) {
        bool fr;
        pos += bpe_symbol(m, s + pos, size - pos, &fr);
    }
    if (n == 0) return TFM_OK;
    bpe_word w = {.s = s};
    w.off = tfm_buf_array(&e->sym_off, n, sizeof *w.off);
    w.len = tfm_buf_array(&e->sym_len, n, sizeof *w.len);
    w.prev = tfm_buf_array(&e->sym_prev, n, sizeof *w.prev);
    w.next = tfm_buf_array(&e->sym_next, n, sizeof *w.next);
    w.freeze = tfm_buf_array(&e->sym_freeze, n, sizeof *w.freeze);
    if (!w.off || !w.len || !w.prev || !w.next || !w.freeze) return TFM_ERR_NOMEM;
    size_t pos = 0;
    for (size_t i = 0; i < n; i++) {
        size_t k = bpe_symbol(m, s + pos, size - pos, &w.freeze[i]);
        w.off[i] = (uint32_t)pos;
        w.len[i] = (uint32_t)k;
        w.prev[i] = (int32_t)i - 1;
        w.next[i] = i + 1 < n ? (int32_t)i + 1 : -1;
        pos += k;
    }
    e->heap_len = 0;
    for (size_t i = 1; i < n; i++)
        if (bpe_add_pair(e, &w, (int32_t)i - 1, (int32_t)i) != TFM_OK) return TFM_ERR_NOMEM;
    while (e->heap_len > 0) {
        bpe_pair top = heap_pop(e);
        int32_t l = top.left, r = top.right;
        if (w.len[l] == 0 || w.len[r] == 0 || w.len[l] + w.len[r] != top.size) continue;
        w.len[l] += w.len[r];
        w.next[l] = w.next[r];
        if (w.next[r] >= 0) w.prev[w.next[r]] = l;
        w.len[r] = 0;
        if (bpe_add_pair(e, &w, w.prev[l], l) != TFM_OK ||
            bpe_add_pair(e, &w, l, w.next[l]) != TFM_OK)
            return TFM_ERR_NOMEM;
    }
    for (int32_t i = 0; i >= 0; i = w.next[i]) {
        if (m->has_unused) {
            if (bpe_resegment(e, s, w.off[i], w.len[i]) != TFM_OK) return TFM_ERR_NOMEM;
        } else if (push_raw(e, w.off[i], w.len[i],
                            spm_piece_to_id(m, (const char *)s + w.off[i], w.len[i])) != TFM_OK) {
            return TFM_ERR_NOMEM;
        }
    }
    return TFM_OK;
}

/* One word (s[0..size) at offset base of the line), through the cache. */
static tfm_status bpe_cached_word(tfm_spm_encoder *e, const unsigned char *s, size_t size,
                                  uint32_t base)
{
    int64_t *hit = size <= CACHE_MAX_WORD_BYTES ? tfm_strmap_find(e->cache, (const char *)s, size)
                                                : NULL;
    if (hit) {
        const int32_t *c = e->cache_data.data + *hit;
        uint32_t off = base;
        for (int32_t k = 0; k < c[0]; k++) {
            uint32_t len = (uint32_t)c[1 + 2 * k];
            if (push_raw(e, off, len, c[2 + 2 * k]) != TFM_OK) return TFM_ERR_NOMEM;
            off += len;
        }
        return TFM_OK;
    }
    size_t first = e->n_raw;
    if (bpe_merge(e, s, size) != TFM_OK) return TFM_ERR_NOMEM;
    spm_span *r = (spm_span *)e->raw.data;
    for (size_t i = first; i < e->n_raw; i++) r[i].off += base;
    if (size > CACHE_MAX_WORD_BYTES) return TFM_OK;
    size_t count = e->n_raw - first;
    if (tfm_strmap_count(e->cache) >= CACHE_MAX_WORDS ||
        e->cache_data.len + 1 + 2 * count > CACHE_MAX_INTS) {
        tfm_strmap_free(e->cache);
        e->cache = tfm_strmap_create(1 << 14);
        e->cache_data.len = 0;
        if (!e->cache) return TFM_ERR_NOMEM;
    }
    int64_t at = (int64_t)e->cache_data.len;
    if (tfm_ids_push(&e->cache_data, (int32_t)count) != TFM_OK) return TFM_ERR_NOMEM;
    for (size_t i = first; i < e->n_raw; i++)
        if (tfm_ids_push(&e->cache_data, (int32_t)r[i].len) != TFM_OK ||
            tfm_ids_push(&e->cache_data, r[i].id) != TFM_OK)
            return TFM_ERR_NOMEM;
    if (!tfm_strmap_upsert(e->cache, (const char *)s, size, at, NULL)) return TFM_ERR_NOMEM;
    return TFM_OK;
}

static tfm_status bpe_encode(tfm_spm_encoder *e, const unsigned char *s, size_t size,
                             tfm_error *err)
{
    const tfm_spm *m = e->m;
    if (size > UINT32_MAX / 2 || size > INT32_MAX - 1)
        return tfm_error_set(err, TFM_ERR_RANGE, "the line is too long (%zu bytes)", size);
    tfm_status st = TFM_OK;
    if (!m->bpe_by_word) {
        st = bpe_merge(e, s, size);
        for (size_t i = 0; i < e->rev_touched.len; i++) e->rev[e->rev_touched.data[i]] = -1;
        e->rev_touched.len = 0;
        return st == TFM_OK ? TFM_OK : nomem(err);
    }
    /* Words: cut before each symbol that starts with U+2581 (after each
     * that ends with it, with treat_whitespace_as_suffix). */
    size_t word = 0;
    for (size_t pos = 0; pos < size && st == TFM_OK;) {
        bool fr;
        size_t k = bpe_symbol(m, s + pos, size - pos, &fr);
        if (!m->ws_suffix && pos > word && k >= SPM_SPACE_LEN &&
            memcmp(s + pos, SPM_SPACE, SPM_SPACE_LEN) == 0) {
            st = bpe_cached_word(e, s + word, pos - word, (uint32_t)word);
            word = pos;
        }
        pos += k;
        if (m->ws_suffix && k >= SPM_SPACE_LEN &&
            memcmp(s + pos - SPM_SPACE_LEN, SPM_SPACE, SPM_SPACE_LEN) == 0 && st == TFM_OK) {
            st = bpe_cached_word(e, s + word, pos - word, (uint32_t)word);
            word = pos;
        }
    }
    if (st == TFM_OK && word < size) st = bpe_cached_word(e, s + word, size - word, (uint32_t)word);
    return st == TFM_OK ? TFM_OK : nomem(err);
}

/* ---- the line ----------------------------------------------------------------------- */

/* Normalizes and segments a line into e->spans (PopulateSentencePieceText's
 * unknown runs and byte fallback applied). */
static tfm_status encode_spans(tfm_spm_encoder *e, const char *line, size_t len,
                               size_t *n_repaired, tfm_error *err)
{
    const tfm_spm *m = e->m;
    e->n_raw = e->n_spans = 0;
    tfm_status st = spm_normalize(m, &e->spec, line, len, &e->norm, n_repaired, err);
    if (st != TFM_OK || e->norm.len == 0) return st;
    const unsigned char *s = (const unsigned char *)e->norm.data;
    st = m->type == TFM_SPM_BPE ? bpe_encode(e, s, e->norm.len, err)
                                : unigram_encode(e, s, e->norm.len, err);
    if (st != TFM_OK) return st;
    bool prev_unk = false;
    for (size_t i = 0; i < e->n_raw; i++) {
        spm_span r = ((spm_span *)e->raw.data)[i];
        uint8_t type = m->pieces[r.id].type;
        bool unk = type == TFM_SPM_UNKNOWN;
        if (type == TFM_SPM_CONTROL) /* SentencePiece fails too ("all normalized characters
                                        are not consumed") */
            return tfm_error_set(err, TFM_ERR_UNSUPPORTED,
                                 "the text holds '%.*s', the text of control piece %d, which "
                                 "SentencePiece cannot encode",
                                 (int)r.len, e->norm.data + r.off, r.id);
        size_t need = e->n_spans + (unk && m->byte_fallback ? r.len : 1);
        spm_span *out = tfm_buf_array(&e->spans, need, sizeof *out);
        if (!out) return nomem(err);
        if (unk && m->byte_fallback) {
            for (uint32_t k = 0; k < r.len; k++)
                out[e->n_spans++] = (spm_span){SPAN_BYTE, 0, m->byte_id[s[r.off + k]]};
        } else if (unk && prev_unk) {
            out[e->n_spans - 1].len += r.len;
        } else {
            out[e->n_spans++] = r;
        }
        prev_unk = unk;
    }
    return TFM_OK;
}

tfm_status tfm_spm_encode(tfm_spm_encoder *e, const char *line, size_t len, tfm_ids *out,
                          size_t *n_repaired, tfm_error *err)
{
    tfm_ids_clear(out);
    tfm_status st = encode_spans(e, line, len, n_repaired, err);
    if (st != TFM_OK) return st;
    const spm_span *sp = (const spm_span *)e->spans.data;
    for (size_t i = 0; i < e->n_spans; i++)
        if (tfm_ids_push(out, sp[i].id) != TFM_OK) return nomem(err);
    return TFM_OK;
}

tfm_status tfm_spm_encode_pieces(tfm_spm_encoder *e, const char *line, size_t len, tfm_buf *out,
                                 size_t *n_repaired, tfm_error *err)
{
    tfm_buf_clear(out);
    tfm_status st = encode_spans(e, line, len, n_repaired, err);
    if (st != TFM_OK) return st;
    const spm_span *sp = (const spm_span *)e->spans.data;
    st = tfm_buf_append(out, "", 0);
    for (size_t i = 0; i < e->n_spans && st == TFM_OK; i++) {
        if (i > 0) st = tfm_buf_putc(out, ' ');
        if (st != TFM_OK) break;
        if (sp[i].off == SPAN_BYTE) {
            const spm_piece *p = &e->m->pieces[sp[i].id];
            st = tfm_buf_append(out, e->m->text + p->off, p->len);
        } else {
            st = tfm_buf_append(out, e->norm.data + sp[i].off, sp[i].len);
        }
    }
    return st == TFM_OK ? TFM_OK : nomem(err);
}

tfm_status tfm_spm_normalize(tfm_spm_encoder *e, const char *line, size_t len, tfm_buf *out,
                             tfm_error *err)
{
    return spm_normalize(e->m, &e->spec, line, len, out, NULL, err);
}
