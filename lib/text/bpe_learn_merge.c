/* bpe_learn_merge.c - learning BPE, part 2: from word counts to a vocabulary.
 *
 * The algorithm is Sennrich et al. (2016): start from characters, and
 * repeatedly merge the most frequent pair of adjacent symbols into a new
 * symbol, counting each pair once per occurrence of each word.  What makes
 * it fast is never counting all pairs again:
 *
 *   - each distinct word is an array of symbol ids with its count;
 *   - each pair (left, right) has a count and the list of words it occurs
 *     in (tfm_map64 from left<<32|right to the pair's slot);
 *   - a max-heap holds (count, pair) entries.  When a count changes, the
 *     pair is pushed again with its new count; an entry whose count is no
 *     longer the pair's count is stale and is dropped when it comes to the
 *     top ("lazy deletion");
 *   - a merge rewrites only the words on the pair's list, and changes only
 *     the counts of the pairs next to each occurrence.
 *
 * SentencePiece's conventions: the alphabet is the most frequent characters
 * covering character_coverage of all character occurrences (the rest are
 * spelled with byte pieces); a piece has at most max_piece_length
 * characters, '▁' only as its first character, and never mixes two script
 * classes (tfm_char_script_key; '▁' is TFM_CLASS_ANY and joins anything);
 * merged pieces score -1, -2, ... in the order learnt.
 *
 * Ties between pairs of equal count go to the smaller (left id, right id),
 * so the result depends on the word counts only: not on the order in which
 * words were added, nor on the number of threads that counted them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/learn_internal.h"

#define MARKER_CP 0x2581
#define KEY_ANY UINT32_MAX /* the script key of a symbol that joins anything */

typedef struct symbol {
    size_t text_off;   /* the text is e->text.data[text_off .. text_off+text_len) */
    uint32_t text_len;
    int32_t n_chars;
    uint32_t key;      /* script key of its characters, or KEY_ANY for '▁' */
    bool marker;       /* starts with '▁' */
} symbol;

typedef struct word {
    size_t off;        /* symbols are e->pool[off .. off+len) */
    int32_t len;
    int64_t count;
} word;

typedef struct pair_stat {
    int64_t count;     /* occurrences, weighted by word counts */
    int32_t left, right;
    int32_t *words;    /* words it occurred in (may list words it left since) */
    uint32_t n_words, cap_words;
    int32_t dirty;     /* the merge that last queued it for a heap push */
    bool dead;         /* its text is a special, byte or user piece */
} pair_stat;

typedef struct heap_entry {
    int64_t count;
    uint64_t key;      /* left << 32 | right: the tie-break */
    int32_t pair;
} heap_entry;

typedef struct engine {
    const tfm_bpe_learn_params *p;
    symbol *syms;
    int32_t n_syms, cap_syms, n_chars;
    tfm_buf text;              /* all symbol texts back to back */
    tfm_strmap *sym_index;     /* text -> symbol id */
    tfm_strmap *forbidden;     /* texts a merge must not make */

    word *words;
    size_t n_words, cap_words;
    int32_t *pool;
    size_t pool_len, pool_cap;
    int32_t *word_stamp;       /* the merge that last rewrote the word */

    tfm_map64 *pair_index;     /* left << 32 | right -> slot in pairs */
    pair_stat *pairs;
    size_t n_pairs, cap_pairs;
    int32_t *dirty;            /* pairs whose count changed in this merge */
    size_t n_dirty, cap_dirty;
    heap_entry *heap;
    size_t heap_len, heap_cap;

    int32_t merge_no;
    bool oom;                  /* set by helpers; checked after each step */
} engine;

/* Grows *data (of *cap elements of size elem) to hold at least need. */
static bool grow(void **data, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) return true;
    size_t c = *cap ? *cap : 16;
    while (c < need) c *= 2;
    void *p = realloc(*data, c * elem);
    if (!p) return false;
    *data = p;
    *cap = c;
    return true;
}

/* ---- symbols --------------------------------------------------------------------- */

static const char *sym_text(const engine *e, int32_t s)
{
    return e->text.data + e->syms[s].text_off;
}

static int32_t add_symbol(engine *e, const char *text, size_t len, int32_t n_chars,
                          uint32_t key, bool marker)
{
    size_t cap = (size_t)e->cap_syms;
    if (!grow((void **)&e->syms, &cap, (size_t)e->n_syms + 1, sizeof *e->syms)) return -1;
    e->cap_syms = (int32_t)cap;
    size_t off = e->text.len;
    if (tfm_buf_append(&e->text, text, len) != TFM_OK) return -1;
    int32_t id = e->n_syms;
    if (!tfm_strmap_upsert(e->sym_index, text, len, id, NULL)) return -1;
    e->syms[id] = (symbol){.text_off = off, .text_len = (uint32_t)len, .n_chars = n_chars,
                           .key = key, .marker = marker};
    e->n_syms++;
    return id;
}

/* May left and right form a piece?  Decided by their characters only, so a
 * pair that may not is never counted at all. */
static bool pair_allowed(const engine *e, int32_t left, int32_t right)
{
    const symbol *a = &e->syms[left], *b = &e->syms[right];
    if (a->n_chars + b->n_chars > e->p->max_piece_length) return false;
    if (b->marker) return false; /* '▁' only at the start of a piece */
    return a->key == KEY_ANY || b->key == KEY_ANY || a->key == b->key;
}

/* ---- the heap -------------------------------------------------------------------- */

static bool heap_before(const heap_entry *a, const heap_entry *b)
{
    return a->count > b->count || (a->count == b->count && a->key < b->key);
}

static void heap_sift_down(engine *e, size_t i)
{
    heap_entry *h = e->heap;
    for (;;) {
        size_t best = i, l = 2 * i + 1, r = l + 1;
        if (l < e->heap_len && heap_before(&h[l], &h[best])) best = l;
        if (r < e->heap_len && heap_before(&h[r], &h[best])) best = r;
        if (best == i) return;
        heap_entry t = h[i];
        h[i] = h[best];
        h[best] = t;
        i = best;
    }
}

static void heap_push(engine *e, int32_t pair)
{
    if (!grow((void **)&e->heap, &e->heap_cap, e->heap_len + 1, sizeof *e->heap)) {
        e->oom = true;
        return;
    }
    const pair_stat *ps = &e->pairs[pair];
    heap_entry x = {.count = ps->count,
                    .key = (uint64_t)(uint32_t)ps->left << 32 | (uint32_t)ps->right,
                    .pair = pair};
    size_t i = e->heap_len++;
    while (i > 0 && heap_before(&x, &e->heap[(i - 1) / 2])) {
        e->heap[i] = e->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    e->heap[i] = x;
}

static heap_entry heap_pop(engine *e)
{
    heap_entry top = e->heap[0];
    e->heap[0] = e->heap[--e->heap_len];
    heap_sift_down(e, 0);
    return top;
}

/* Pushes the pairs whose count changed.  When stale entries outnumber the
 * pairs, the heap is rebuilt from the live pairs first, so it stays within
 * a small multiple of their number. */
static void flush_dirty(engine *e)
{
    if (e->heap_len + e->n_dirty > 2 * e->n_pairs + 65536) {
        e->heap_len = 0;
        for (size_t i = 0; i < e->n_pairs; i++)
            if (e->pairs[i].count > 0 && !e->pairs[i].dead) heap_push(e, (int32_t)i);
    } else {
        for (size_t i = 0; i < e->n_dirty; i++) {
            const pair_stat *ps = &e->pairs[e->dirty[i]];
            if (ps->count > 0 && !ps->dead) heap_push(e, e->dirty[i]);
        }
    }
    e->n_dirty = 0;
}

/* ---- pair counts ----------------------------------------------------------------- */

/* Adds delta to the count of (left, right), which occurs in word w. */
static void pair_add(engine *e, int32_t left, int32_t right, int64_t delta, int32_t w)
{
    if (!pair_allowed(e, left, right)) return;
    uint64_t key = (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
    bool inserted;
    int64_t *slot = tfm_map64_upsert(e->pair_index, key, (int64_t)e->n_pairs, &inserted);
    if (!slot || (inserted && !grow((void **)&e->pairs, &e->cap_pairs, e->n_pairs + 1,
                                    sizeof *e->pairs))) {
        e->oom = true;
        return;
    }
    int32_t pi = (int32_t)*slot;
    if (inserted) {
        e->pairs[pi] = (pair_stat){.left = left, .right = right, .dirty = -1};
        e->n_pairs++;
    }
    pair_stat *ps = &e->pairs[pi];
    ps->count += delta;
    /* A word is listed once per run of additions (merges add it once). */
    if (delta > 0 && (ps->n_words == 0 || ps->words[ps->n_words - 1] != w)) {
        size_t cap = ps->cap_words;
        if (!grow((void **)&ps->words, &cap, (size_t)ps->n_words + 1, sizeof *ps->words)) {
            e->oom = true;
            return;
        }
        ps->cap_words = (uint32_t)cap;
        ps->words[ps->n_words++] = w;
    }
    if (ps->dirty != e->merge_no) {
        if (!grow((void **)&e->dirty, &e->cap_dirty, e->n_dirty + 1, sizeof *e->dirty)) {
            e->oom = true;
            return;
        }
        ps->dirty = e->merge_no;
        e->dirty[e->n_dirty++] = pi;
    }
}

/* Replaces each occurrence of (left, right) in word w by merged, left to
 * right, and moves the counts of the neighbouring pairs: for an occurrence
 * between prev and next, (prev,left) (left,right) (right,next) go and
 * (prev,merged) (merged,next) come.  prev is the rewritten word's last
 * symbol, so two occurrences in a row ("a a a a" merging a+a) come out right. */
static void merge_in_word(engine *e, int32_t w, int32_t left, int32_t right, int32_t merged)
{
    word *wd = &e->words[w];
    int32_t *s = e->pool + wd->off;
    int32_t n = wd->len, out = 0, i = 0;
    int64_t c = wd->count;
    while (i < n) {
        if (i + 1 < n && s[i] == left && s[i + 1] == right) {
            if (out > 0) {
                pair_add(e, s[out - 1], left, -c, w);
                pair_add(e, s[out - 1], merged, c, w);
            }
            pair_add(e, left, right, -c, w);
            if (i + 2 < n) {
                pair_add(e, right, s[i + 2], -c, w);
                pair_add(e, merged, s[i + 2], c, w);
            }
            s[out++] = merged;
            i += 2;
        } else {
            s[out++] = s[i++];
        }
    }
    wd->len = out;
}

/* Applies the merge of pair pi (into symbol merged) to every word it is in. */
static void apply_merge(engine *e, int32_t pi, int32_t merged)
{
    int32_t left = e->pairs[pi].left, right = e->pairs[pi].right;
    /* The list does not grow meanwhile: every pair added has merged on one
     * side, and merged is neither left nor right (its text is longer). */
    for (uint32_t k = 0; k < e->pairs[pi].n_words && !e->oom; k++) {
        int32_t w = e->pairs[pi].words[k];
        if (e->word_stamp[w] == e->merge_no) continue; /* listed twice: done already */
        e->word_stamp[w] = e->merge_no;
        merge_in_word(e, w, left, right, merged);
    }
    /* No word holds the pair now.  It may come back (a later merge can make
     * a symbol that already exists), and then it is listed afresh. */
    e->pairs[pi].n_words = 0;
}

/* ---- the alphabet ---------------------------------------------------------------- */

typedef struct char_count {
    int32_t cp;
    int64_t count;
} char_count;

static int by_count_then_cp(const void *pa, const void *pb)
{
    const char_count *a = pa, *b = pb;
    if (a->count != b->count) return a->count > b->count ? -1 : 1;
    return (a->cp > b->cp) - (a->cp < b->cp);
}

/* Code point -> count or id: a flat table for the Basic Multilingual Plane,
 * where nearly all text lives, and a hash map above it. */
typedef struct cp_table {
    int64_t *bmp;     /* 65536 values */
    tfm_map64 *high;
    int64_t absent;
} cp_table;

static bool cp_table_init(cp_table *t, int64_t absent)
{
    t->absent = absent;
    t->bmp = malloc(65536 * sizeof *t->bmp);
    t->high = tfm_map64_create(64);
    if (!t->bmp || !t->high) return false;
    for (int i = 0; i < 65536; i++) t->bmp[i] = absent;
    return true;
}

static void cp_table_free(cp_table *t)
{
    free(t->bmp);
    tfm_map64_free(t->high);
}

static int64_t *cp_table_slot(cp_table *t, int32_t cp)
{
    if (cp < 65536) return &t->bmp[cp];
    return tfm_map64_upsert(t->high, (uint64_t)cp, t->absent, NULL);
}

static int64_t cp_table_get(const cp_table *t, int32_t cp)
{
    if (cp < 65536) return t->bmp[cp];
    const int64_t *v = tfm_map64_find(t->high, (uint64_t)cp);
    return v ? *v : t->absent;
}

/* Picks the characters: the most frequent ones until they cover
 * character_coverage of all occurrences (SentencePiece's rule: add while
 * the coverage so far is below it), and no more than room.  Adds them as
 * symbols 0..n-1 and fills ids (code point -> symbol id, -1 if dropped). */
static tfm_status choose_alphabet(engine *e, const tfm_strmap *words, int32_t room, cp_table *ids,
                                  tfm_error *err)
{
    cp_table counts;
    char_count *chars = NULL;
    size_t n_distinct = 0, cap = 0;
    tfm_status st = TFM_OK;
    if (!cp_table_init(&counts, 0)) {
        st = TFM_ERR_NOMEM;
        goto done;
    }
    const char *key;
    size_t len;
    int64_t count;
    int64_t total = 0;
    for (size_t it = 0; tfm_strmap_next(words, &it, &key, &len, &count);) {
        const unsigned char *u = (const unsigned char *)key;
        for (size_t i = 0; i < len;) {
            int32_t cp;
            int n = tfm_utf8_decode(u + i, len - i, &cp);
            if (n == 0) {
                st = tfm_error_set(err, TFM_ERR_ARG, "invalid UTF-8 in a counted word");
                goto done;
            }
            int64_t *c = cp_table_slot(&counts, cp);
            if (!c) {
                st = TFM_ERR_NOMEM;
                goto done;
            }
            if (*c == 0) {
                if (!grow((void **)&chars, &cap, n_distinct + 1, sizeof *chars)) {
                    st = TFM_ERR_NOMEM;
                    goto done;
                }
                chars[n_distinct++].cp = cp;
            }
            *c += count;
            total += count;
            i += (size_t)n;
        }
    }
    for (size_t i = 0; i < n_distinct; i++) chars[i].count = cp_table_get(&counts, chars[i].cp);
    if (n_distinct > 0) qsort(chars, n_distinct, sizeof *chars, by_count_then_cp);

    int64_t covered = 0;
    for (size_t i = 0; i < n_distinct && (int32_t)i < room; i++) {
        if ((double)covered / (double)total >= e->p->character_coverage) break;
        covered += chars[i].count;
        char text[4];
        int32_t cp = chars[i].cp;
        int n = tfm_utf8_encode(cp, text);
        bool any = tfm_char_class_of(cp) == TFM_CLASS_ANY;
        int32_t id = add_symbol(e, text, (size_t)n, 1, any ? KEY_ANY : tfm_char_script_key(cp),
                                cp == MARKER_CP);
        int64_t *slot = id >= 0 ? cp_table_slot(ids, cp) : NULL;
        if (!slot) {
            st = TFM_ERR_NOMEM;
            goto done;
        }
        *slot = id;
    }
    e->n_chars = e->n_syms;
done:
    cp_table_free(&counts);
    free(chars);
    if (st == TFM_ERR_NOMEM) return tfm_error_set(err, st, "out of memory counting characters");
    return st;
}

/* ---- words ----------------------------------------------------------------------- */

/* Turns each counted word into arrays of character symbols.  A character
 * outside the alphabet splits the word (no piece can hold it); a part of a
 * single symbol has no pairs and is left out. */
static tfm_status build_words(engine *e, const tfm_strmap *words, const cp_table *ids,
                              tfm_error *err)
{
    const char *key;
    size_t len;
    int64_t count;
    for (size_t it = 0; tfm_strmap_next(words, &it, &key, &len, &count);) {
        if (!grow((void **)&e->pool, &e->pool_cap, e->pool_len + len, sizeof *e->pool))
            return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory for the words");
        const unsigned char *u = (const unsigned char *)key;
        size_t start = e->pool_len;
        for (size_t i = 0; i <= len;) {
            int32_t cp = 0, id = -1;
            int n = 1;
            if (i < len) {
                n = tfm_utf8_decode(u + i, len - i, &cp);
                if (n == 0) n = 1;
                id = (int32_t)cp_table_get(ids, cp);
            }
            if (id >= 0) {
                e->pool[e->pool_len++] = id;
            } else { /* end of the word or of a part of it */
                size_t part = e->pool_len - start;
                if (part >= 2) {
                    if (e->n_words >= INT32_MAX ||
                        !grow((void **)&e->words, &e->cap_words, e->n_words + 1, sizeof *e->words))
                        return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory for the words");
                    e->words[e->n_words++] = (word){.off = start, .len = (int32_t)part,
                                                    .count = count};
                } else {
                    e->pool_len = start;
                }
                start = e->pool_len;
            }
            i += (size_t)n;
        }
    }
    e->word_stamp = calloc(e->n_words + 1, sizeof *e->word_stamp);
    if (!e->word_stamp) return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory for the words");
    /* Count every pair once; merge 0 marks them all dirty, so one flush
     * fills the heap. */
    for (size_t w = 0; w < e->n_words && !e->oom; w++) {
        const int32_t *s = e->pool + e->words[w].off;
        for (int32_t i = 0; i + 1 < e->words[w].len; i++)
            pair_add(e, s[i], s[i + 1], e->words[w].count, (int32_t)w);
    }
    flush_dirty(e);
    if (e->oom) return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory counting pairs");
    return TFM_OK;
}

/* ---- the whole ------------------------------------------------------------------- */

static const char *const special_text[4] = {"<pad>", "<unk>", "<s>", "</s>"};

static void engine_free(engine *e)
{
    free(e->syms);
    tfm_buf_free(&e->text);
    tfm_strmap_free(e->sym_index);
    tfm_strmap_free(e->forbidden);
    free(e->words);
    free(e->pool);
    free(e->word_stamp);
    tfm_map64_free(e->pair_index);
    for (size_t i = 0; i < e->n_pairs; i++) free(e->pairs[i].words);
    free(e->pairs);
    free(e->dirty);
    free(e->heap);
}

static tfm_status engine_init(engine *e, const tfm_bpe_learn_params *p, tfm_error *err)
{
    memset(e, 0, sizeof *e);
    e->p = p;
    tfm_buf_init(&e->text);
    e->sym_index = tfm_strmap_create(4096);
    e->forbidden = tfm_strmap_create(512);
    e->pair_index = tfm_map64_create(1 << 16);
    if (!e->sym_index || !e->forbidden || !e->pair_index)
        return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    bool ok = true;
    for (int i = 0; i < 4; i++)
        ok = ok && tfm_strmap_upsert(e->forbidden, special_text[i], strlen(special_text[i]), 0,
                                     NULL);
    for (int b = 0; b < 256; b++) {
        char text[8];
        snprintf(text, sizeof text, "<0x%02X>", b);
        ok = ok && tfm_strmap_upsert(e->forbidden, text, 6, 0, NULL);
    }
    for (int i = 0; i < p->n_user_symbols; i++)
        ok = ok && tfm_strmap_upsert(e->forbidden, p->user_symbols[i], strlen(p->user_symbols[i]),
                                     0, NULL);
    return ok ? TFM_OK : tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
}

/* Merges until `wanted` new pieces exist or no pair is left; returns how
 * many were made. */
static tfm_status run_merges(engine *e, int32_t wanted, int32_t *made, tfm_error *err)
{
    tfm_buf text;
    tfm_buf_init(&text);
    *made = 0;
    tfm_status st = TFM_OK;
    while (*made < wanted && e->heap_len > 0) {
        heap_entry top = heap_pop(e);
        pair_stat *ps = &e->pairs[top.pair];
        if (ps->dead || ps->count != top.count) continue; /* stale */
        int32_t left = ps->left, right = ps->right;
        tfm_buf_clear(&text);
        if (tfm_buf_append(&text, sym_text(e, left), e->syms[left].text_len) != TFM_OK ||
            tfm_buf_append(&text, sym_text(e, right), e->syms[right].text_len) != TFM_OK) {
            st = TFM_ERR_NOMEM;
            break;
        }
        if (tfm_strmap_find(e->forbidden, text.data, text.len)) {
            ps->dead = true; /* e.g. "<0x41>" spelt out in the text */
            continue;
        }
        /* Should two merge paths ever spell the same text ("ab"+"c" and
         * "a"+"bc"), the piece is made once and both merges use it.  (Plain
         * BPE seems never to do this: when ab+c is learnt, every b+c was
         * merged long before or never; the check costs one lookup.) */
        const int64_t *have = tfm_strmap_find(e->sym_index, text.data, text.len);
        int32_t merged;
        if (have) {
            merged = (int32_t)*have;
        } else {
            const symbol *a = &e->syms[left], *b = &e->syms[right];
            merged = add_symbol(e, text.data, text.len, a->n_chars + b->n_chars,
                                a->key == KEY_ANY ? b->key : a->key, a->marker);
            if (merged < 0) {
                st = TFM_ERR_NOMEM;
                break;
            }
            (*made)++;
            if (e->p->progress && *made % 1000 == 0)
                e->p->progress(e->p->progress_ctx, "merging", *made, wanted);
        }
        e->merge_no++;
        apply_merge(e, top.pair, merged);
        flush_dirty(e);
        if (e->oom) {
            st = TFM_ERR_NOMEM;
            break;
        }
    }
    tfm_buf_free(&text);
    if (st != TFM_OK) return tfm_error_set(err, st, "out of memory learning merges");
    if (e->p->progress) e->p->progress(e->p->progress_ctx, "merging", *made, wanted);
    return TFM_OK;
}

/* Writes the vocabulary in its file order: specials, user symbols, bytes,
 * characters by frequency, merges in the order learnt. */
static tfm_status make_vocab(const engine *e, tfm_vocab **out, tfm_error *err)
{
    const tfm_bpe_learn_params *p = e->p;
    tfm_vocab *v = tfm_vocab_create_specials(&p->norm);
    if (!v) return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    for (int i = 0; i < p->n_user_symbols; i++) {
        if (tfm_vocab_add(v, p->user_symbols[i], strlen(p->user_symbols[i]), 0.0f,
                          TFM_PIECE_USER) < 0) {
            tfm_vocab_free(v);
            return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
        }
    }
    tfm_status st = tfm_vocab_add_bytes(v, err);
    for (int32_t s = 0; s < e->n_syms && st == TFM_OK; s++) {
        float score = s < e->n_chars ? 0.0f : -(float)(s - e->n_chars + 1);
        if (tfm_vocab_add(v, sym_text(e, s), e->syms[s].text_len, score, TFM_PIECE_NORMAL) < 0)
            st = tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    }
    if (st != TFM_OK) {
        tfm_vocab_free(v);
        return st;
    }
    *out = v;
    return TFM_OK;
}

tfm_status tfm_bpe_learn_merges(const tfm_bpe_learn_params *p, const tfm_strmap *words,
                                tfm_vocab **out, tfm_error *err)
{
    *out = NULL;
    engine e;
    cp_table ids = {0};
    tfm_status st = engine_init(&e, p, err);
    if (st == TFM_OK && !cp_table_init(&ids, -1))
        st = tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    int32_t fixed = 4 + p->n_user_symbols + 256;
    if (st == TFM_OK) st = choose_alphabet(&e, words, p->vocab_size - fixed, &ids, err);
    if (st == TFM_OK) st = build_words(&e, words, &ids, err);
    int32_t made = 0;
    if (st == TFM_OK) st = run_merges(&e, p->vocab_size - fixed - e.n_chars, &made, err);
    if (st == TFM_OK && e.n_syms + fixed < p->vocab_size && !p->soft_vocab_limit)
        st = tfm_error_set(err, TFM_ERR_RANGE,
                           "the corpus supports at most %d pieces; use a smaller --vocab-size "
                           "or --soft-vocab-limit",
                           (int)(e.n_syms + fixed));
    if (st == TFM_OK) st = make_vocab(&e, out, err);
    cp_table_free(&ids);
    engine_free(&e);
    return st;
}
