/* bpe_encode.c - text to token ids with a learnt BPE vocabulary, as
 * SentencePiece's BPE model does it, plus pieces <-> ids.
 *
 * A line is normalised, a space is put in front of it (the "dummy prefix"),
 * and it is cut into words: a word starts at each space, which becomes the
 * '▁' marker, and runs over the characters that have a piece of their own.
 * Everything else is spelled with byte pieces <0xNN> and ends the word:
 * characters that may never be in a piece (controls, tabs, other spaces,
 * U+FFFD, a literal U+2581, ...) and characters the vocabulary never saw.
 * User-defined symbols found in the text are emitted whole, longest first.
 * With placeholders (tfm_bpe_encode_placeholders), the text between them is
 * normalised on its own and each placeholder's token is put at its offset,
 * ending the word before it; the placeholder tokens are then not looked for
 * in the text, so only real placeholders give them.
 *
 * Inside a word the merges are applied as in SentencePiece: repeatedly the
 * adjacent pair whose merged piece scores highest (learnt earliest) is
 * merged, the leftmost first among equals.  Symbols are a linked list over
 * arrays and candidate pairs sit in a binary max-heap, stale entries being
 * recognised when popped, so a word of n characters costs O(n log n) - a
 * megabyte without a space included.  Encoded words are cached, since a
 * corpus repeats its words over and over. */
#include <stdlib.h>
#include <string.h>

#include "text/encode_internal.h"
#include "tfm/spm.h"
#include "tfm/text.h"

/* The cache is cleared when it grows past these, which bounds its memory
 * whatever the input. */
enum {
    CACHE_MAX_WORDS = 1 << 20,
    CACHE_MAX_IDS = 1 << 24,
    CACHE_MAX_WORD_BYTES = 256, /* longer words are rare: not worth keeping */
    PAIRS_MAX = 1 << 22,        /* symbol pairs remembered, at most */
    SCRATCH_KEEP = 1 << 16,     /* symbols of scratch space kept between lines */
    ASCII_LIMIT = 128,
};

/* A candidate merge of the adjacent symbols left and right, valid while
 * they still hold the ids lid and rid and are still neighbours. */
typedef struct bpe_pair {
    float score;
    int32_t left, right;
    int32_t lid, rid, merged;
} bpe_pair;

typedef struct user_symbol {
    char *text; /* with each '▁' turned back into a space, as in the text */
    size_t len;
    int32_t id;
    bool placeholder; /* a placeholder token <phN> */
} user_symbol;

struct tfm_bpe {
    const tfm_vocab *vocab;
    tfm_spm_encoder *spm;      /* a vocabulary with a SentencePiece model: it segments, and
                                  nothing below is used but spm_unk */
    int32_t spm_unk;           /* with spm: the vocabulary's <unk>, for pieces it lacks */
    float *score;              /* score of each id */
    tfm_map64 *pairs;          /* left id << 32 | right id -> merged id, or -1: the
                                  pairs met so far (merged_piece) */
    tfm_buf joined;            /* scratch: two pieces' text joined */
    int32_t ascii_id[ASCII_LIMIT]; /* the piece of each ASCII character, or -1 */
    tfm_map64 *char_id;        /* code point -> piece, other characters */
    int32_t marker_id;         /* the piece "▁" */
    int32_t byte_id[256];

    user_symbol *users;        /* longest first */
    int n_users;
    bool user_first[256];      /* bytes a user symbol can start with */

    tfm_strmap *cache;         /* word bytes (marker as a space) -> offset in cache_ids */
    tfm_ids cache_ids;         /* per word: count, then the ids */

    /* Scratch space, reused from line to line. */
    tfm_buf text;              /* " " + the normalised line */
    int32_t *sym_id, *sym_next, *sym_prev; /* the symbols of the current word */
    size_t sym_len, sym_cap;
    bpe_pair *heap, *skipped;
    size_t heap_len, heap_cap, skipped_len, skipped_cap;
};

/* ---- creating ---------------------------------------------------------------- */

static uint64_t pair_key(int32_t left, int32_t right)
{
    return (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
}

static int cmp_user_longest_first(const void *a, const void *b)
{
    const user_symbol *x = a, *y = b;
    if (x->len != y->len) return x->len < y->len ? 1 : -1;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* The piece that merges normal pieces lid and rid: the normal piece whose
 * text is theirs joined, or -1 (SentencePiece merges only normal pieces).
 * Each pair is looked up the first time a word has it, and remembered:
 * working out every split of every piece when the encoder was made took
 * most of the start of a one-line tokenize (5 of 19 ms, 8k pieces).
 * False when memory runs out. */
static bool merged_piece(tfm_bpe *b, int32_t lid, int32_t rid, int32_t *merged)
{
    const tfm_vocab *v = b->vocab;
    if (tfm_map64_count(b->pairs) >= PAIRS_MAX) { /* bounds the memory, whatever the input */
        tfm_map64_free(b->pairs);
        if (!(b->pairs = tfm_map64_create(1024))) return false;
    }
    bool inserted;
    int64_t *slot = tfm_map64_upsert(b->pairs, pair_key(lid, rid), -1, &inserted);
    if (!slot) return false;
    if (inserted && tfm_vocab_type(v, lid) == TFM_PIECE_NORMAL &&
        tfm_vocab_type(v, rid) == TFM_PIECE_NORMAL) {
        size_t llen, rlen;
        const char *left = tfm_vocab_piece(v, lid, &llen), *right = tfm_vocab_piece(v, rid, &rlen);
        b->joined.len = 0;
        if (tfm_buf_append(&b->joined, left, llen) != TFM_OK ||
            tfm_buf_append(&b->joined, right, rlen) != TFM_OK)
            return false;
        const int32_t id = tfm_vocab_find(v, b->joined.data, b->joined.len);
        if (id >= 0 && tfm_vocab_type(v, id) == TFM_PIECE_NORMAL) *slot = id;
    }
    *merged = (int32_t)*slot;
    return true;
}

/* Notes piece id as the piece of its single character, if it is one. */
static tfm_status add_char(tfm_bpe *b, int32_t id, const char *text, size_t len)
{
    int32_t cp;
    int n = tfm_utf8_decode((const unsigned char *)text, len, &cp);
    if (n == 0 || (size_t)n != len || !tfm_char_pieceable(cp)) return TFM_OK;
    if (cp < ASCII_LIMIT) {
        b->ascii_id[cp] = id;
        return TFM_OK;
    }
    return tfm_map64_upsert(b->char_id, (uint64_t)cp, id, NULL) ? TFM_OK : TFM_ERR_NOMEM;
}

static tfm_status add_user(tfm_bpe *b, int32_t id, const char *text, size_t len)
{
    user_symbol *u = &b->users[b->n_users];
    u->text = malloc(len + 1);
    if (!u->text) return TFM_ERR_NOMEM;
    /* The text the encoder matches against holds spaces where the piece
     * holds markers. */
    size_t n = 0;
    for (size_t i = 0; i < len;) {
        if (len - i >= TFM_MARKER_LEN && memcmp(text + i, TFM_MARKER, TFM_MARKER_LEN) == 0) {
            u->text[n++] = ' ';
            i += TFM_MARKER_LEN;
        } else {
            u->text[n++] = text[i++];
        }
    }
    u->len = n;
    u->id = id;
    u->placeholder = tfm_placeholder_piece_index(text, len) > 0;
    b->user_first[(unsigned char)u->text[0]] = true;
    b->n_users++;
    return TFM_OK;
}

tfm_status tfm_bpe_create(const tfm_vocab *v, tfm_bpe **out, tfm_error *err)
{
    *out = NULL;
    tfm_bpe *b = calloc(1, sizeof *b);
    if (!b) return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory creating an encoder");
    b->vocab = v;
    if (tfm_vocab_spm(v)) {
        b->spm_unk = tfm_vocab_find(v, "<unk>", 5);
        tfm_status st = tfm_spm_encoder_create(tfm_vocab_spm(v), &b->spm, err);
        if (st != TFM_OK) {
            free(b);
            return st;
        }
        *out = b;
        return TFM_OK;
    }
    if (tfm_vocab_is_foreign(v)) {
        free(b);
        return tfm_error_set(err, TFM_ERR_ARG, "the vocabulary of a model from elsewhere has no "
                                               "SentencePiece model to encode text with");
    }
    int32_t size = tfm_vocab_size(v);
    tfm_status st = TFM_OK;
    b->score = malloc(((size_t)size + 1) * sizeof *b->score);
    b->pairs = tfm_map64_create(1024);
    b->char_id = tfm_map64_create(1024);
    b->cache = tfm_strmap_create(1024);
    b->users = calloc((size_t)size + 1, sizeof *b->users);
    tfm_buf_init(&b->text);
    tfm_buf_init(&b->joined);
    tfm_ids_init(&b->cache_ids);
    if (!b->score || !b->pairs || !b->char_id || !b->cache || !b->users) st = TFM_ERR_NOMEM;
    for (int i = 0; i < ASCII_LIMIT; i++) b->ascii_id[i] = -1;
    b->marker_id = tfm_vocab_find(v, TFM_MARKER, TFM_MARKER_LEN);

    for (int32_t id = 0; id < size && st == TFM_OK; id++) {
        size_t len;
        const char *text = tfm_vocab_piece(v, id, &len);
        b->score[id] = tfm_vocab_score(v, id);
        switch (tfm_vocab_type(v, id)) {
        case TFM_PIECE_NORMAL: st = add_char(b, id, text, len); break;
        case TFM_PIECE_USER:
            if (len > 0) st = add_user(b, id, text, len);
            break;
        default:
            break;
        }
    }
    if (st != TFM_OK) {
        tfm_bpe_free(b);
        return tfm_error_set(err, st, "out of memory creating an encoder");
    }
    qsort(b->users, (size_t)b->n_users, sizeof *b->users, cmp_user_longest_first);

    /* Every line needs the marker and may need any byte piece. */
    if (b->marker_id < 0 || tfm_vocab_type(v, b->marker_id) != TFM_PIECE_NORMAL) {
        tfm_bpe_free(b);
        return tfm_error_set(err, TFM_ERR_FORMAT,
                             "the vocabulary has no normal piece \"\xE2\x96\x81\" (U+2581), "
                             "which stands for a space");
    }
    for (int byte = 0; byte < 256; byte++) {
        b->byte_id[byte] = tfm_vocab_byte_id(v, (unsigned char)byte);
        if (b->byte_id[byte] < 0) {
            tfm_bpe_free(b);
            return tfm_error_set(err, TFM_ERR_FORMAT,
                                 "the vocabulary has no byte piece <0x%02X>", (unsigned)byte);
        }
    }
    *out = b;
    return TFM_OK;
}

void tfm_bpe_free(tfm_bpe *b)
{
    if (!b) return;
    tfm_spm_encoder_free(b->spm);
    free(b->score);
    tfm_map64_free(b->pairs);
    tfm_map64_free(b->char_id);
    for (int i = 0; i < b->n_users; i++) free(b->users[i].text);
    free(b->users);
    tfm_strmap_free(b->cache);
    tfm_ids_free(&b->cache_ids);
    tfm_buf_free(&b->text);
    tfm_buf_free(&b->joined);
    free(b->sym_id);
    free(b->sym_next);
    free(b->sym_prev);
    free(b->heap);
    free(b->skipped);
    free(b);
}

/* ---- the symbols of a word and the heap of candidate merges ------------------ */

static bool sym_push(tfm_bpe *b, int32_t id)
{
    if (b->sym_len == b->sym_cap) {
        size_t cap = b->sym_cap ? b->sym_cap * 2 : 256;
        int32_t *a = realloc(b->sym_id, cap * sizeof *a);
        if (!a) return false;
        b->sym_id = a;
        int32_t *n = realloc(b->sym_next, cap * sizeof *n);
        if (!n) return false;
        b->sym_next = n;
        int32_t *p = realloc(b->sym_prev, cap * sizeof *p);
        if (!p) return false;
        b->sym_prev = p;
        b->sym_cap = cap;
    }
    b->sym_id[b->sym_len++] = id;
    return true;
}

/* True when x should be merged before y: higher score, then further left. */
static inline bool pair_before(const bpe_pair *x, const bpe_pair *y)
{
    if (x->score != y->score) return x->score > y->score;
    return x->left < y->left;
}

static bool pairs_reserve(bpe_pair **a, size_t *cap, size_t need)
{
    if (need <= *cap) return true;
    size_t c = *cap ? *cap : 256;
    while (c < need) c *= 2;
    bpe_pair *p = realloc(*a, c * sizeof *p);
    if (!p) return false;
    *a = p;
    *cap = c;
    return true;
}

static bool heap_push(tfm_bpe *b, bpe_pair pair)
{
    if (!pairs_reserve(&b->heap, &b->heap_cap, b->heap_len + 1)) return false;
    bpe_pair *h = b->heap;
    size_t i = b->heap_len++;
    while (i > 0) { /* sift up */
        size_t parent = (i - 1) / 2;
        if (!pair_before(&pair, &h[parent])) break;
        h[i] = h[parent];
        i = parent;
    }
    h[i] = pair;
    return true;
}

static bpe_pair heap_pop(tfm_bpe *b)
{
    bpe_pair *h = b->heap;
    bpe_pair top = h[0];
    bpe_pair last = h[--b->heap_len];
    size_t n = b->heap_len, i = 0;
    for (;;) { /* sift down */
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

/* Puts the merge of symbols left and right on the heap, if there is one. */
static bool consider(tfm_bpe *b, int32_t left, int32_t right)
{
    if (left < 0 || right < 0) return true;
    int32_t lid = b->sym_id[left], rid = b->sym_id[right], merged;
    if (!merged_piece(b, lid, rid, &merged)) return false;
    if (merged < 0) return true;
    bpe_pair p = {b->score[merged], left, right, lid, rid, merged};
    return heap_push(b, p);
}

/* Merges the symbols sym_id[0..sym_len) and appends the resulting ids to out. */
static tfm_status merge_word(tfm_bpe *b, float dropout, tfm_rng *rng, tfm_ids *out)
{
    int32_t n = (int32_t)b->sym_len;
    int32_t *id = b->sym_id, *next = b->sym_next, *prev = b->sym_prev;
    for (int32_t i = 0; i < n; i++) {
        next[i] = i + 1 < n ? i + 1 : -1;
        prev[i] = i - 1;
    }
    b->heap_len = b->skipped_len = 0;
    for (int32_t i = 0; i + 1 < n; i++)
        if (!consider(b, i, i + 1)) return TFM_ERR_NOMEM;

    while (b->heap_len > 0) {
        bpe_pair p = heap_pop(b);
        /* Stale: one side was merged away or changed since. */
        if (id[p.left] != p.lid || next[p.left] != p.right || id[p.right] != p.rid) continue;
        if (dropout > 0 && tfm_rng_float(rng) < dropout) {
            /* BPE-dropout: this merge is skipped for this step only. */
            if (!pairs_reserve(&b->skipped, &b->skipped_cap, b->skipped_len + 1))
                return TFM_ERR_NOMEM;
            b->skipped[b->skipped_len++] = p;
            continue;
        }
        id[p.left] = p.merged;
        id[p.right] = -1;
        next[p.left] = next[p.right];
        if (next[p.left] >= 0) prev[next[p.left]] = p.left;
        if (!consider(b, prev[p.left], p.left) || !consider(b, p.left, next[p.left]))
            return TFM_ERR_NOMEM;
        for (size_t k = 0; k < b->skipped_len; k++)
            if (!heap_push(b, b->skipped[k])) return TFM_ERR_NOMEM;
        b->skipped_len = 0;
    }
    for (int32_t i = 0; i >= 0; i = next[i])
        if (tfm_ids_push(out, id[i]) != TFM_OK) return TFM_ERR_NOMEM;
    return TFM_OK;
}

/* ---- words ------------------------------------------------------------------- */

static void cache_clear(tfm_bpe *b)
{
    tfm_strmap *fresh = tfm_strmap_create(1024);
    if (!fresh) return; /* keep the old one; it still works */
    tfm_strmap_free(b->cache);
    b->cache = fresh;
    tfm_ids_clear(&b->cache_ids);
}

/* Encodes the word text[0..len) whose symbols are in sym_id, and clears them.
 * The word's text (a leading space standing for the marker) keys the cache. */
static tfm_status flush_word(tfm_bpe *b, const char *text, size_t len, float dropout,
                             tfm_rng *rng, tfm_ids *out)
{
    if (b->sym_len == 0) return TFM_OK;
    tfm_status st;
    if (b->sym_len == 1) {
        st = tfm_ids_push(out, b->sym_id[0]);
    } else if (dropout > 0 || len > CACHE_MAX_WORD_BYTES) {
        st = merge_word(b, dropout, rng, out);
    } else {
        const int64_t *hit = tfm_strmap_find(b->cache, text, len);
        if (hit) {
            const int32_t *ids = b->cache_ids.data + *hit;
            st = TFM_OK;
            for (int32_t k = 1; k <= ids[0] && st == TFM_OK; k++) st = tfm_ids_push(out, ids[k]);
        } else {
            size_t first = out->len;
            st = merge_word(b, 0, NULL, out);
            size_t n = out->len - first;
            if (st == TFM_OK) {
                if (tfm_strmap_count(b->cache) >= CACHE_MAX_WORDS ||
                    b->cache_ids.len + n + 1 > CACHE_MAX_IDS)
                    cache_clear(b);
                /* A failed insertion only costs speed later, never correctness. */
                size_t at = b->cache_ids.len;
                bool ok = tfm_ids_push(&b->cache_ids, (int32_t)n) == TFM_OK;
                for (size_t k = 0; k < n && ok; k++)
                    ok = tfm_ids_push(&b->cache_ids, out->data[first + k]) == TFM_OK;
                if (ok && !tfm_strmap_upsert(b->cache, text, len, (int64_t)at, NULL)) ok = false;
                if (!ok) b->cache_ids.len = at;
            }
        }
    }
    b->sym_len = 0;
    return st;
}

/* After a huge line, gives back its scratch space, so that one long line
 * does not hold memory for the rest of the stream. */
static void trim_scratch(tfm_bpe *b)
{
    if (b->sym_cap > SCRATCH_KEEP) {
        free(b->sym_id);
        free(b->sym_next);
        free(b->sym_prev);
        b->sym_id = b->sym_next = b->sym_prev = NULL;
        b->sym_len = b->sym_cap = 0;
    }
    if (b->heap_cap > SCRATCH_KEEP) {
        free(b->heap);
        b->heap = NULL;
        b->heap_len = b->heap_cap = 0;
    }
    if (b->skipped_cap > SCRATCH_KEEP) {
        free(b->skipped);
        b->skipped = NULL;
        b->skipped_len = b->skipped_cap = 0;
    }
    if (b->text.cap > (size_t)SCRATCH_KEEP * 16) tfm_buf_free(&b->text);
}

/* The length of the longest user symbol at text[i..len), or 0; with
 * skip_placeholders, the placeholder tokens <phN> are not looked for. */
static size_t match_user(const tfm_bpe *b, const char *text, size_t len, size_t i,
                         bool skip_placeholders, int32_t *id)
{
    for (int k = 0; k < b->n_users; k++) {
        const user_symbol *u = &b->users[k];
        if (skip_placeholders && u->placeholder) continue;
        if (u->len > len - i || memcmp(text + i, u->text, u->len) != 0) continue;
        /* Only whole characters: a symbol may not end inside one. */
        if (i + u->len < len && ((unsigned char)text[i + u->len] & 0xC0) == 0x80) continue;
        *id = u->id;
        return u->len;
    }
    return 0;
}

/* The piece of the single character cp, or -1 when it has none. */
static inline int32_t char_piece(const tfm_bpe *b, int32_t cp)
{
    if (cp < ASCII_LIMIT) return b->ascii_id[cp];
    const int64_t *id = tfm_map64_find(b->char_id, (uint64_t)cp);
    return id ? (int32_t)*id : -1;
}

/* Checks the dropout settings of p (may be NULL) and gives them. */
static tfm_status encode_settings(const tfm_bpe_encode_params *p, float *dropout, tfm_rng **rng,
                                  tfm_error *err)
{
    *dropout = p ? p->dropout : 0.0f;
    *rng = p ? p->rng : NULL;
    if (!(*dropout >= 0.0f && *dropout <= 1.0f))
        return tfm_error_set(err, TFM_ERR_ARG, "dropout %g is not in [0, 1]", (double)*dropout);
    if (*dropout > 0 && !*rng)
        return tfm_error_set(err, TFM_ERR_ARG, "dropout %g needs a random generator",
                             (double)*dropout);
    return TFM_OK;
}

/* Tokens that go at given offsets of the text whatever it holds there: the
 * placeholders (at[0..n), ascending, with their ids). */
typedef struct forced_tokens {
    const size_t *at;
    const int32_t *id;
    size_t n;
} forced_tokens;

/* Encodes b->text (" " + the normalised line) into out.  With forced
 * tokens, each ends the word before it, and user symbols that are
 * placeholder tokens are not matched in the text. */
static tfm_status encode_text(tfm_bpe *b, float dropout, tfm_rng *rng, const forced_tokens *ft,
                              tfm_ids *out)
{
    const char *s = b->text.data;
    const unsigned char *u = (const unsigned char *)s;
    size_t n = b->text.len;
    size_t word = 0; /* where the open word starts (when sym_len > 0) */
    size_t next = 0; /* the next forced token */
    tfm_status st = TFM_OK;
    b->sym_len = 0;
    for (size_t i = 0; i < n && st == TFM_OK;) {
        int32_t id;
        size_t m;
        size_t limit = n; /* a user symbol may not reach over a forced token */
        if (ft) {
            while (next < ft->n && ft->at[next] == i && st == TFM_OK) {
                st = flush_word(b, s + word, i - word, dropout, rng, out);
                if (st == TFM_OK) st = tfm_ids_push(out, ft->id[next]);
                next++;
            }
            if (st != TFM_OK) break;
            if (next < ft->n) limit = ft->at[next];
        }
        if (b->user_first[u[i]] && (m = match_user(b, s, limit, i, ft != NULL, &id)) > 0) {
            st = flush_word(b, s + word, i - word, dropout, rng, out);
            if (st == TFM_OK) st = tfm_ids_push(out, id);
            i += m;
            continue;
        }
        if (u[i] == ' ') { /* a space: the marker, and a new word */
            st = flush_word(b, s + word, i - word, dropout, rng, out);
            word = i;
            if (st == TFM_OK && !sym_push(b, b->marker_id)) st = TFM_ERR_NOMEM;
            i++;
            continue;
        }
        int32_t cp = u[i];
        int k = 1;
        if (cp >= 0x80) {
            k = tfm_utf8_scan(u + i, n - i, &cp);
            if (k < 0) { /* cannot happen after normalisation; bytes regardless */
                k = -k;
                cp = -1;
            }
        }
        id = cp >= 0 ? char_piece(b, cp) : -1;
        if (id >= 0) {
            if (b->sym_len == 0) word = i;
            if (!sym_push(b, id)) st = TFM_ERR_NOMEM;
        } else {
            /* Spelled with bytes; the word ends here. */
            st = flush_word(b, s + word, i - word, dropout, rng, out);
            for (int j = 0; j < k && st == TFM_OK; j++)
                st = tfm_ids_push(out, b->byte_id[u[i + j]]);
        }
        i += (size_t)k;
    }
    if (st == TFM_OK) st = flush_word(b, s + word, n - word, dropout, rng, out);
    for (; ft && next < ft->n && st == TFM_OK; next++) /* tokens at the very end */
        st = tfm_ids_push(out, ft->id[next]);
    trim_scratch(b);
    return st;
}

/* The SentencePiece model's segmentation, its pieces looked up in the
 * vocabulary by their text, as OPUS-MT's pipeline does (spm_encode's pieces
 * read by Marian through vocab.yml): a piece the vocabulary lacks is its
 * <unk>, and a run of characters SentencePiece does not know is looked up
 * as the text spm_encode prints for it (a character the source model lacks
 * may be a piece of the joint vocabulary).  No dropout; strict: invalid
 * UTF-8 is an error. */
static tfm_status encode_spm(tfm_bpe *b, const tfm_bpe_encode_params *p, const char *line,
                             size_t len, tfm_ids *out, size_t *n_repaired, tfm_error *err)
{
    if (p && p->dropout > 0)
        return tfm_error_set(err, TFM_ERR_ARG, "BPE-dropout does not apply to a SentencePiece "
                                               "model");
    size_t repaired = 0;
    tfm_status st = tfm_spm_encode_pieces(b->spm, line, len, &b->text, &repaired, err);
    if (st != TFM_OK) return st;
    if (n_repaired) *n_repaired = repaired;
    if (p && p->strict && repaired > 0)
        return tfm_error_set(err, TFM_ERR_UTF8, "invalid UTF-8 (%zu sequences)", repaired);
    const int32_t unk = b->spm_unk;
    const char *t = b->text.data ? b->text.data : "";
    const char *end = t + b->text.len;
    while (t < end) {
        const char *sp = memchr(t, ' ', (size_t)(end - t));
        const size_t n = sp ? (size_t)(sp - t) : (size_t)(end - t);
        if (n > 0) {
            const int32_t id = tfm_vocab_find(b->vocab, t, n);
            if (tfm_ids_push(out, id >= 0 ? id : unk) != TFM_OK)
                return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory encoding a line");
        }
        t += n + 1;
    }
    return TFM_OK;
}

tfm_status tfm_bpe_encode(tfm_bpe *b, const tfm_bpe_encode_params *p, const char *line,
                          size_t len, tfm_ids *out, size_t *n_repaired, tfm_error *err)
{
    tfm_ids_clear(out);
    float dropout;
    tfm_rng *rng;
    tfm_status st = encode_settings(p, &dropout, &rng, err);
    if (st != TFM_OK) return st;
    if (b->spm) return encode_spm(b, p, line, len, out, n_repaired, err);

    tfm_norm_params norm = *tfm_vocab_norm(b->vocab);
    norm.strict = p ? p->strict : false;
    tfm_buf *t = &b->text;
    tfm_buf_clear(t);
    if (tfm_buf_putc(t, ' ') != TFM_OK)
        return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory encoding a line");
    st = tfm_normalize_append(&norm, line, len, t, n_repaired, err);
    if (st != TFM_OK) return st;
    if (t->len == 1) return TFM_OK; /* an empty line has no ids */
    st = encode_text(b, dropout, rng, NULL, out);
    if (st != TFM_OK) return tfm_error_set(err, st, "out of memory encoding a line");
    return TFM_OK;
}

tfm_status tfm_bpe_encode_placeholders(tfm_bpe *b, const tfm_bpe_encode_params *p,
                                       const char *line, size_t len, const tfm_placeholders *ph,
                                       tfm_ids *out, size_t *n_repaired, tfm_error *err)
{
    tfm_ids_clear(out);
    if (n_repaired) *n_repaired = 0;
    float dropout;
    tfm_rng *rng;
    tfm_status st = encode_settings(p, &dropout, &rng, err);
    if (st != TFM_OK) return st;
    /* The ids of the numbered placeholders, in line order. */
    size_t *at = NULL;
    int32_t *ids = NULL;
    size_t n_forced = 0;
    if (ph->n > 0) {
        at = malloc(ph->n * sizeof *at);
        ids = malloc(ph->n * sizeof *ids);
        if (!at || !ids) {
            free(at);
            free(ids);
            return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory encoding a line");
        }
    }
    for (size_t k = 0; k < ph->n && st == TFM_OK; k++) {
        int index = ph->items[k].index;
        if (index == 0) continue;
        int32_t id = tfm_vocab_placeholder_id(b->vocab, index);
        if (id < 0)
            st = tfm_error_set(err, TFM_ERR_FORMAT,
                               "the vocabulary has no placeholder token <ph%d>: learn it with "
                               "'tokenize learn --placeholders'",
                               index);
        ids[n_forced++] = id;
    }
    tfm_norm_params norm = *tfm_vocab_norm(b->vocab);
    norm.strict = p ? p->strict : false;
    tfm_buf *t = &b->text;
    tfm_buf_clear(t);
    if (st == TFM_OK && tfm_buf_putc(t, ' ') != TFM_OK)
        st = tfm_error_set(err, TFM_ERR_NOMEM, "out of memory encoding a line");
    size_t *all_at = ph->n > 0 ? malloc(ph->n * sizeof *all_at) : NULL;
    if (st == TFM_OK && ph->n > 0 && !all_at)
        st = tfm_error_set(err, TFM_ERR_NOMEM, "out of memory encoding a line");
    if (st == TFM_OK)
        st = tfm_normalize_placeholders(&norm, line, len, ph, t, all_at, n_repaired, err);
    if (st == TFM_OK) {
        /* The offsets of the numbered ones, in the order of ids. */
        size_t f = 0;
        for (size_t k = 0; k < ph->n; k++)
            if (ph->items[k].index != 0) at[f++] = all_at[k];
        if (t->len > 1 || n_forced > 0) {
            forced_tokens ft = {at, ids, n_forced};
            st = encode_text(b, dropout, rng, &ft, out);
            if (st != TFM_OK) tfm_error_set(err, st, "out of memory encoding a line");
        }
    }
    free(all_at);
    free(at);
    free(ids);
    return st;
}

/* ---- pieces and ids ------------------------------------------------------------ */

tfm_status tfm_bpe_ids_to_pieces(const tfm_vocab *v, const int32_t *ids, size_t n,
                                 tfm_buf *out, tfm_error *err)
{
    tfm_buf_clear(out);
    int32_t size = tfm_vocab_size(v);
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= size)
            return tfm_error_set(err, TFM_ERR_RANGE,
                                 "id %ld is outside the vocabulary of %ld pieces",
                                 (long)ids[i], (long)size);
        size_t len;
        const char *text = tfm_vocab_piece(v, ids[i], &len);
        if ((i > 0 && tfm_buf_putc(out, ' ') != TFM_OK) ||
            tfm_buf_append(out, text, len) != TFM_OK)
            return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    }
    return TFM_OK;
}

tfm_status tfm_bpe_pieces_to_ids(const tfm_vocab *v, const char *line, size_t len,
                                 tfm_ids *out, tfm_error *err)
{
    tfm_ids_clear(out);
    size_t i = 0;
    while (i < len) {
        if (line[i] == ' ') {
            i++;
            continue;
        }
        size_t j = i;
        while (j < len && line[j] != ' ') j++;
        int32_t id = tfm_vocab_find(v, line + i, j - i);
        if (id < 0) {
            int shown = j - i > 64 ? 64 : (int)(j - i);
            return tfm_error_set(err, TFM_ERR_FORMAT, "unknown piece '%.*s%s' at byte %zu",
                                 shown, line + i, j - i > 64 ? "..." : "", i + 1);
        }
        if (tfm_ids_push(out, id) != TFM_OK)
            return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
        i = j;
    }
    return TFM_OK;
}
