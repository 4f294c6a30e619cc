/* test_bpe_learn.c - learning BPE: a merge order worked out by hand, a plain
 * reference implementation that must agree with the fast one, determinism
 * (threads, batches, sampling), the piece constraints, vocabulary sizes and
 * user symbols. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "tfm/text.h"

#define MARKER "\xE2\x96\x81"

/* ---- helpers ---------------------------------------------------------------------- */

/* Learns from lines (NUL-terminated), added one by one or in batches of
 * batch lines; returns the status and fills *out. */
static tfm_status learn(const tfm_bpe_learn_params *p, const char *const *lines, size_t n,
                        size_t batch, tfm_vocab **out, tfm_error *err)
{
    *out = NULL;
    tfm_bpe_learner *l;
    tfm_status st = tfm_bpe_learner_create(p, &l, err);
    if (st != TFM_OK) return st;
    size_t *lens = malloc((n + 1) * sizeof *lens);
    for (size_t i = 0; i < n; i++) lens[i] = strlen(lines[i]);
    for (size_t i = 0; i < n && st == TFM_OK; i += batch ? batch : 1) {
        if (batch == 0) {
            st = tfm_bpe_learner_add(l, lines[i], lens[i], NULL, err);
        } else {
            size_t m = n - i < batch ? n - i : batch;
            st = tfm_bpe_learner_add_batch(l, lines + i, lens + i, m, NULL, err);
        }
    }
    if (st == TFM_OK) st = tfm_bpe_learner_finish(l, out, err);
    tfm_bpe_learner_free(l);
    free(lens);
    return st;
}

static bool same_vocab(const tfm_vocab *a, const tfm_vocab *b)
{
    if (!a || !b || tfm_vocab_size(a) != tfm_vocab_size(b)) return false;
    for (int32_t i = 0; i < tfm_vocab_size(a); i++) {
        size_t la, lb;
        const char *pa = tfm_vocab_piece(a, i, &la), *pb = tfm_vocab_piece(b, i, &lb);
        if (la != lb || memcmp(pa, pb, la) != 0) return false;
        if (tfm_vocab_score(a, i) != tfm_vocab_score(b, i)) return false;
        if (tfm_vocab_type(a, i) != tfm_vocab_type(b, i)) return false;
    }
    return true;
}

static bool piece_is(const tfm_vocab *v, int32_t id, const char *text)
{
    size_t len;
    const char *p = tfm_vocab_piece(v, id, &len);
    return p && len == strlen(text) && memcmp(p, text, len) == 0;
}

/* A corpus from a seeded generator: words from a small alphabet of letters,
 * digits and punctuation, with some Greek and Chinese, Zipf-ish. */
typedef struct corpus {
    char **lines;
    size_t n;
} corpus;

static corpus make_corpus(uint64_t seed, size_t n_lines, bool ascii_only)
{
    static const char *const syll[] = {"th", "e", "a", "in", "er", "lo", "w", "n", "s", "t",
                                       "re", "on", "1", "23", "7", ",", ".", "-", "x", "q"};
    static const char *const uni[] = {"\xCE\xB1", "\xCE\xB2", "\xE4\xB8\xAD", "\xE6\x96\x87",
                                      "\xC3\xA9"};
    tfm_rng r;
    tfm_rng_seed(&r, seed);
    corpus c = {calloc(n_lines, sizeof(char *)), n_lines};
    tfm_buf b;
    tfm_buf_init(&b);
    for (size_t i = 0; i < n_lines; i++) {
        tfm_buf_clear(&b);
        int n_words = 1 + (int)tfm_rng_below(&r, 8);
        for (int w = 0; w < n_words; w++) {
            if (w) tfm_buf_putc(&b, ' ');
            /* Zipf-ish: a few words very often. */
            uint64_t kind = tfm_rng_below(&r, 4);
            tfm_rng wr;
            tfm_rng_seed(&wr, kind == 0 ? tfm_rng_below(&r, 5) : tfm_rng_below(&r, 200));
            int n_syll = 1 + (int)tfm_rng_below(&wr, 4);
            for (int s = 0; s < n_syll; s++) {
                if (!ascii_only && tfm_rng_below(&wr, 10) == 0)
                    tfm_buf_printf(&b, "%s", uni[tfm_rng_below(&wr, 5)]);
                else
                    tfm_buf_printf(&b, "%s", syll[tfm_rng_below(&wr, 20)]);
            }
        }
        c.lines[i] = strdup(b.data ? b.data : "");
    }
    tfm_buf_free(&b);
    return c;
}

static void corpus_free(corpus *c)
{
    for (size_t i = 0; i < c->n; i++) free(c->lines[i]);
    free(c->lines);
}

static tfm_bpe_learn_params small_params(int32_t vocab_size)
{
    tfm_bpe_learn_params p = tfm_bpe_learn_default_params();
    p.vocab_size = vocab_size;
    p.n_threads = 1;
    p.character_coverage = 1.0;
    return p;
}

/* ---- a merge order worked out by hand --------------------------------------------- */

/* Sennrich et al.'s example in SentencePiece's form: the words ▁low x5,
 * ▁lower x2, ▁newest x6, ▁widest x3.  Characters by count (ties by code
 * point): e17 w16 ▁16 s9 t9 l7 o7 n6 d3 i3 r2, ids 0..10.  Pairs:
 *   e+s 9 and s+t 9 tie: (e,s) has the smaller ids      -> es
 *   es+t 9                                              -> est
 *   ▁+l, l+o, o+w 7: smallest left id is ▁ (2)          -> ▁l
 *   ▁l+o (13,6) and o+w (6,1) 7: o+w                    -> ow
 *   ▁l+ow 7                                             -> ▁low
 *   ▁+n, n+e, e+w, w+est 6: e+w (0,1)                   -> ew
 *   ▁+n (2,7), n+ew (7,16), ew+est (16,12): ▁+n         -> ▁n
 *   ▁n+ew (17,16) vs ew+est (16,12): ew+est             -> ewest
 *   ▁n+ewest 6                                          -> ▁newest */
static void test_hand_computed_order(void)
{
    const char *lines[] = {"low low low low low", "lower lower", "newest newest newest",
                           "newest", "newest newest", "widest widest widest"};
    const char *want_chars[] = {"e", "w", MARKER, "s", "t", "l", "o", "n", "d", "i", "r"};
    const char *want_merges[] = {"es", "est", MARKER "l", "ow", MARKER "low", "ew",
                                 MARKER "n", "ewest", MARKER "newest"};
    tfm_bpe_learn_params p = small_params(260 + 11 + 9);
    tfm_vocab *v;
    tfm_error err = {0};
    CHECK_MSG(learn(&p, lines, 6, 0, &v, &err) == TFM_OK, "%s", err.msg);
    if (!v) return;
    CHECK(tfm_vocab_size(v) == 280);
    for (int i = 0; i < 11; i++) {
        CHECK_MSG(piece_is(v, 260 + i, want_chars[i]), "char %d is '%s', want '%s'", i,
                  tfm_vocab_piece(v, 260 + i, NULL), want_chars[i]);
        CHECK(tfm_vocab_score(v, 260 + i) == 0.0f);
    }
    for (int i = 0; i < 9; i++) {
        CHECK_MSG(piece_is(v, 271 + i, want_merges[i]), "merge %d is '%s', want '%s'", i + 1,
                  tfm_vocab_piece(v, 271 + i, NULL), want_merges[i]);
        CHECK(tfm_vocab_score(v, 271 + i) == -(float)(i + 1));
        CHECK(tfm_vocab_type(v, 271 + i) == TFM_PIECE_NORMAL);
    }
    tfm_vocab_free(v);
}

/* ---- a plain reference: recount every pair for every merge ------------------------ */

typedef struct ref_sym {
    char text[128];
    int n_chars;
    bool marker;
    uint32_t key; /* UINT32_MAX: joins anything */
} ref_sym;

static uint32_t ref_key(int32_t cp)
{
    return tfm_char_class_of(cp) == TFM_CLASS_ANY ? UINT32_MAX : tfm_char_script_key(cp);
}

/* Learns merges the slow, obvious way over the words of ASCII lines, with
 * the characters taken from v (its score-0 normal pieces), and checks that
 * v's merges are the same, in the same order. */
static void check_against_reference(const tfm_vocab *v, const corpus *c, int max_len)
{
    enum { MAX_SYMS = 4096, MAX_WORDS = 20000, MAX_WLEN = 64 };
    static ref_sym syms[MAX_SYMS];
    static int words[MAX_WORDS][MAX_WLEN];
    static int wlen[MAX_WORDS];
    static long wcount[MAX_WORDS];
    int n_syms = 0, n_words = 0;
    int32_t first = 260;
    while (first < tfm_vocab_size(v) && tfm_vocab_score(v, first) == 0.0f) {
        const char *t = tfm_vocab_piece(v, first, NULL);
        int32_t cp;
        tfm_utf8_decode((const unsigned char *)t, strlen(t), &cp);
        snprintf(syms[n_syms].text, sizeof syms[n_syms].text, "%s", t);
        syms[n_syms].n_chars = 1;
        syms[n_syms].marker = cp == 0x2581;
        syms[n_syms].key = ref_key(cp);
        n_syms++;
        first++;
    }
    /* Words: "▁" + each space-separated token; identical words merged. */
    for (size_t i = 0; i < c->n; i++) {
        const char *s = c->lines[i];
        while (*s) {
            int tmp[MAX_WLEN], n = 0;
            tmp[n++] = 0; /* placeholder for the marker */
            for (int k = 0; k < n_syms; k++)
                if (syms[k].marker) tmp[0] = k;
            while (*s && *s != ' ') {
                int id = -1;
                for (int k = 0; k < n_syms; k++)
                    if (syms[k].text[0] == *s && syms[k].text[1] == 0) id = k;
                CHECK(id >= 0);
                if (n < MAX_WLEN) tmp[n++] = id;
                s++;
            }
            if (*s == ' ') s++;
            int w;
            for (w = 0; w < n_words; w++)
                if (wlen[w] == n && memcmp(words[w], tmp, (size_t)n * sizeof(int)) == 0) break;
            if (w == n_words) {
                CHECK(n_words < MAX_WORDS);
                memcpy(words[w], tmp, (size_t)n * sizeof(int));
                wlen[w] = n;
                wcount[w] = 0;
                n_words++;
            }
            wcount[w]++;
        }
    }
    int32_t vid = first;
    while (vid < tfm_vocab_size(v)) {
        /* Count all allowed pairs, pick the best: highest count, then the
         * smallest (left, right). */
        long best = 0;
        int bl = -1, br = -1;
        for (int w = 0; w < n_words; w++) {
            for (int i = 0; i + 1 < wlen[w]; i++) {
                int l = words[w][i], r = words[w][i + 1];
                const ref_sym *a = &syms[l], *b = &syms[r];
                if (a->n_chars + b->n_chars > max_len || b->marker) continue;
                if (!(a->key == UINT32_MAX || b->key == UINT32_MAX || a->key == b->key)) continue;
                /* Count (l, r) over all words (slow on purpose). */
                long n = 0;
                for (int w2 = 0; w2 < n_words; w2++)
                    for (int j = 0; j + 1 < wlen[w2]; j++)
                        if (words[w2][j] == l && words[w2][j + 1] == r) n += wcount[w2];
                if (n > best || (n == best && (l < bl || (l == bl && r < br)))) {
                    best = n;
                    bl = l;
                    br = r;
                }
            }
        }
        if (bl < 0) break;
        char text[sizeof syms[0].text];
        size_t la = strlen(syms[bl].text), lb = strlen(syms[br].text);
        CHECK(la + lb < sizeof text);
        if (la + lb >= sizeof text) return;
        memcpy(text, syms[bl].text, la);
        memcpy(text + la, syms[br].text, lb + 1);
        int m;
        for (m = 0; m < n_syms; m++)
            if (strcmp(syms[m].text, text) == 0) break;
        if (m == n_syms) {
            CHECK(n_syms < MAX_SYMS);
            memcpy(syms[m].text, text, sizeof text);
            syms[m].n_chars = syms[bl].n_chars + syms[br].n_chars;
            syms[m].marker = syms[bl].marker;
            syms[m].key = syms[bl].key == UINT32_MAX ? syms[br].key : syms[bl].key;
            n_syms++;
            CHECK_MSG(piece_is(v, vid, text), "piece %d: learnt '%s', reference '%s'", (int)vid,
                      tfm_vocab_piece(v, vid, NULL), text);
            if (!piece_is(v, vid, text)) return;
            vid++;
        }
        for (int w = 0; w < n_words; w++) {
            int out = 0;
            for (int i = 0; i < wlen[w];) {
                if (i + 1 < wlen[w] && words[w][i] == bl && words[w][i + 1] == br) {
                    words[w][out++] = m;
                    i += 2;
                } else {
                    words[w][out++] = words[w][i++];
                }
            }
            wlen[w] = out;
        }
    }
    CHECK(vid == tfm_vocab_size(v));
}

static void test_matches_reference(void)
{
    corpus c = make_corpus(42, 300, true);
    tfm_bpe_learn_params p = small_params(260 + 30 + 120);
    p.max_piece_length = 6;
    p.soft_vocab_limit = true;
    tfm_vocab *v;
    tfm_error err = {0};
    CHECK_MSG(learn(&p, (const char *const *)c.lines, c.n, 0, &v, &err) == TFM_OK, "%s",
              err.msg);
    if (v) check_against_reference(v, &c, 6);
    tfm_vocab_free(v);
    corpus_free(&c);
}

/* ---- determinism ------------------------------------------------------------------ */

static void test_deterministic(void)
{
    corpus c = make_corpus(7, 2000, false);
    tfm_bpe_learn_params p = small_params(400);
    p.character_coverage = 0.9995;
    tfm_vocab *a, *b, *d, *e;
    tfm_error err = {0};
    const char *const *lines = (const char *const *)c.lines;
    CHECK_MSG(learn(&p, lines, c.n, 0, &a, &err) == TFM_OK, "%s", err.msg);
    CHECK_MSG(learn(&p, lines, c.n, 0, &b, &err) == TFM_OK, "%s", err.msg);
    CHECK(same_vocab(a, b)); /* twice the same */
    p.n_threads = 2;
    CHECK_MSG(learn(&p, lines, c.n, 333, &d, &err) == TFM_OK, "%s", err.msg);
    CHECK(same_vocab(a, d)); /* add vs add_batch, 1 vs 2 threads */
    p.n_threads = 3;
    CHECK_MSG(learn(&p, lines, c.n, 1000, &e, &err) == TFM_OK, "%s", err.msg);
    CHECK(same_vocab(a, e)); /* other batch size, 3 threads */
    tfm_vocab_free(a);
    tfm_vocab_free(b);
    tfm_vocab_free(d);
    tfm_vocab_free(e);
    corpus_free(&c);
}

static void test_sampling(void)
{
    corpus c = make_corpus(11, 1500, false);
    const char *const *lines = (const char *const *)c.lines;
    tfm_bpe_learn_params p = small_params(330);
    p.soft_vocab_limit = true;
    p.input_sentence_size = 200;
    p.seed = 5;
    tfm_vocab *a, *b, *d, *all, *sampled_all;
    tfm_error err = {0};
    CHECK_MSG(learn(&p, lines, c.n, 0, &a, &err) == TFM_OK, "%s", err.msg);
    p.n_threads = 2;
    CHECK_MSG(learn(&p, lines, c.n, 128, &b, &err) == TFM_OK, "%s", err.msg);
    CHECK(same_vocab(a, b)); /* same seed: same sample, whatever the batching */
    p.seed = 6;
    CHECK_MSG(learn(&p, lines, c.n, 0, &d, &err) == TFM_OK, "%s", err.msg);
    CHECK(!same_vocab(a, d)); /* another seed, another sample */
    /* A sample at least as large as the corpus is the corpus. */
    p.input_sentence_size = 5000;
    CHECK_MSG(learn(&p, lines, c.n, 0, &sampled_all, &err) == TFM_OK, "%s", err.msg);
    p.input_sentence_size = 0;
    CHECK_MSG(learn(&p, lines, c.n, 0, &all, &err) == TFM_OK, "%s", err.msg);
    CHECK(same_vocab(all, sampled_all));
    CHECK(!same_vocab(all, a));
    tfm_vocab_free(a);
    tfm_vocab_free(b);
    tfm_vocab_free(d);
    tfm_vocab_free(all);
    tfm_vocab_free(sampled_all);
    corpus_free(&c);
}

/* ---- constraints ------------------------------------------------------------------ */

static void test_constraints(void)
{
    const char *lines[] = {
        "abc123 abc123 abc123 x9y x9y x9y x9y",
        "<0x41> <0x41> <0x41> <0x41> <s> <s> <s> </s> </s> <pad> <pad>",
        "superlongwordthatgoesonandon superlongwordthatgoesonandon",
        "a\xE2\x96\x81" "b a\xE2\x96\x81" "b a\xE2\x96\x81" "b", /* literal U+2581 */
        "tab\there tab\there tab\there",
        "\xCE\xB1\xCE\xB2\xCE\xB3 \xCE\xB1\xCE\xB2 abc\xCE\xB1\xCE\xB2",
    };
    tfm_bpe_learn_params p = small_params(1000);
    p.max_piece_length = 5;
    p.soft_vocab_limit = true;
    tfm_vocab *v;
    tfm_error err = {0};
    CHECK_MSG(learn(&p, lines, 6, 0, &v, &err) == TFM_OK, "%s", err.msg);
    if (!v) return;
    int n_normal = 0;
    for (int32_t id = 260; id < tfm_vocab_size(v); id++) {
        size_t len;
        const char *t = tfm_vocab_piece(v, id, &len);
        CHECK(tfm_vocab_type(v, id) == TFM_PIECE_NORMAL);
        n_normal++;
        int n_chars = 0;
        uint32_t key = UINT32_MAX;
        for (size_t i = 0; i < len;) {
            int32_t cp;
            int n = tfm_utf8_decode((const unsigned char *)t + i, len - i, &cp);
            CHECK(n > 0);
            if (n <= 0) break;
            if (cp == 0x2581) CHECK_MSG(i == 0, "'%s' has U+2581 inside", t);
            CHECK_MSG(cp != '\t' && cp != ' ', "'%s' holds whitespace", t);
            uint32_t k = ref_key(cp);
            if (k != UINT32_MAX) {
                CHECK_MSG(key == UINT32_MAX || key == k, "'%s' mixes scripts", t);
                key = k;
            }
            n_chars++;
            i += (size_t)n;
        }
        CHECK_MSG(n_chars <= 5, "'%s' is longer than 5 characters", t);
    }
    CHECK(n_normal > 20);
    /* No learnt piece is a special or byte piece's text (those ids keep
     * their types), and letters never joined digits. */
    CHECK(tfm_vocab_find(v, "<0x41>", 6) == 4 + 0x41);
    CHECK(tfm_vocab_find(v, "<s>", 3) == TFM_ID_BOS);
    CHECK(tfm_vocab_find(v, MARKER "abc", strlen(MARKER "abc")) >= 0);
    CHECK(tfm_vocab_find(v, "123", 3) >= 0);
    CHECK(tfm_vocab_find(v, MARKER "abc1", strlen(MARKER "abc1")) < 0);
    CHECK(tfm_vocab_find(v, "c1", 2) < 0);
    /* The literal U+2581 split "a▁b" into "▁a" and "b" and is not a piece. */
    CHECK(tfm_vocab_find(v, MARKER "a" MARKER, strlen(MARKER "a" MARKER)) < 0);
    CHECK(tfm_vocab_find(v, "here", 4) >= 0); /* after the tab: no marker */
    tfm_vocab_free(v);
}

/* Random bytes (invalid UTF-8, NULs, controls, any script): learning works
 * and every piece is one the file format can hold. */
static void test_garbage_input(void)
{
    enum { N = 400 };
    tfm_rng r;
    tfm_rng_seed(&r, 99);
    char *lines[N];
    size_t lens[N];
    for (int i = 0; i < N; i++) {
        lens[i] = (size_t)tfm_rng_below(&r, 40);
        lines[i] = malloc(lens[i] + 1);
        for (size_t k = 0; k < lens[i]; k++) {
            uint64_t kind = tfm_rng_below(&r, 4);
            lines[i][k] = kind == 0   ? (char)tfm_rng_below(&r, 256)
                          : kind == 1 ? ' '
                                      : (char)('a' + tfm_rng_below(&r, 3));
        }
        lines[i][lens[i]] = 0;
    }
    tfm_bpe_learn_params p = small_params(2000);
    p.soft_vocab_limit = true;
    p.n_threads = 2;
    tfm_bpe_learner *l;
    tfm_error err = {0};
    CHECK(tfm_bpe_learner_create(&p, &l, &err) == TFM_OK);
    size_t rep = 0;
    CHECK_MSG(tfm_bpe_learner_add_batch(l, (const char *const *)lines, lens, N, &rep, &err) ==
                  TFM_OK,
              "%s", err.msg);
    CHECK(rep > 0);
    tfm_vocab *v = NULL;
    CHECK_MSG(tfm_bpe_learner_finish(l, &v, &err) == TFM_OK, "%s", err.msg);
    CHECK(tfm_bpe_learner_add(l, "x", 1, NULL, &err) == TFM_ERR_ARG); /* after finish */
    tfm_bpe_learner_free(l);
    if (v) {
        CHECK(tfm_vocab_size(v) > 270);
        char path[64];
        snprintf(path, sizeof path, "/tmp/test_bpe_garbage.%d.vocab", (int)getpid());
        tfm_vocab *w = NULL;
        CHECK_MSG(tfm_vocab_save(v, path, &err) == TFM_OK, "%s", err.msg);
        CHECK_MSG(tfm_vocab_load(path, &w, &err) == TFM_OK, "%s", err.msg);
        CHECK(same_vocab(v, w));
        remove(path);
        tfm_vocab_free(w);
    }
    tfm_vocab_free(v);
    for (int i = 0; i < N; i++) free(lines[i]);
}

/* ---- sizes ------------------------------------------------------------------------ */

static void test_vocab_smaller_than_alphabet(void)
{
    /* 1000 distinct Han characters; character k occurs 1000-k times, so
     * the most frequent are the first ones. */
    enum { N = 1000 };
    char **lines = malloc(N * sizeof *lines);
    for (int k = 0; k < N; k++) {
        char ch[4];
        int n = tfm_utf8_encode(0x4E00 + k, ch);
        int reps = (N - k) / 10 + 1;
        lines[k] = malloc((size_t)reps * (size_t)(n + 1) + 1);
        char *s = lines[k];
        for (int r = 0; r < reps; r++) {
            memcpy(s, ch, (size_t)n);
            s += n;
            *s++ = ' ';
        }
        s[-1] = 0;
    }
    tfm_bpe_learn_params p = small_params(300);
    tfm_vocab *v;
    tfm_error err = {0};
    CHECK_MSG(learn(&p, (const char *const *)lines, N, 0, &v, &err) == TFM_OK, "%s", err.msg);
    if (v) {
        CHECK(tfm_vocab_size(v) == 300);
        /* ▁ is the most frequent character, then Han characters 0.. */
        CHECK(piece_is(v, 260, MARKER));
        for (int k = 0; k < 39; k++) {
            char ch[5] = {0};
            tfm_utf8_encode(0x4E00 + k, ch);
            CHECK_MSG(piece_is(v, 261 + k, ch), "piece %d", 261 + k);
        }
        for (int32_t id = 260; id < 300; id++) CHECK(tfm_vocab_score(v, id) == 0.0f);
    }
    tfm_vocab_free(v);
    for (int k = 0; k < N; k++) free(lines[k]);
    free(lines);
}

static void test_character_coverage(void)
{
    /* 'a' x 9990, 'b' x 9, 'c' x 1, one per word: coverage 0.9995 keeps a
     * and b (a covers 0.999 < 0.9995, so b is added; then 0.9999 >= 0.9995). */
    enum { N = 10000 };
    char **lines = malloc(N * sizeof *lines);
    for (int i = 0; i < N; i++) lines[i] = strdup(i < 9990 ? "a" : i < 9999 ? "b" : "c");
    tfm_bpe_learn_params p = small_params(1000);
    p.character_coverage = 0.9995;
    p.soft_vocab_limit = true;
    tfm_vocab *v;
    tfm_error err = {0};
    CHECK_MSG(learn(&p, (const char *const *)lines, N, 0, &v, &err) == TFM_OK, "%s", err.msg);
    if (v) {
        /* ▁ (10000) and a (9990) are 19990 of 20000 = 0.9995: enough. */
        CHECK(tfm_vocab_find(v, "a", 1) >= 0);
        CHECK(tfm_vocab_find(v, "b", 1) < 0);
        CHECK(tfm_vocab_find(v, "c", 1) < 0);
        CHECK(tfm_vocab_find(v, MARKER "a", strlen(MARKER "a")) >= 0);
        CHECK(tfm_vocab_find(v, MARKER "b", strlen(MARKER "b")) < 0);
    }
    tfm_vocab_free(v);
    for (int i = 0; i < N; i++) free(lines[i]);
    free(lines);
}

static void test_too_small_size(void)
{
    tfm_bpe_learn_params p = small_params(260);
    tfm_bpe_learner *l = (tfm_bpe_learner *)1;
    tfm_error err = {0};
    CHECK(tfm_bpe_learner_create(&p, &l, &err) == TFM_ERR_RANGE);
    CHECK(l == NULL);
    CHECK_MSG(strstr(err.msg, "the minimum is 261") != NULL, "%s", err.msg);
    const char *syms[] = {"<sep>", "<cls>"};
    p.user_symbols = syms;
    p.n_user_symbols = 2;
    p.vocab_size = 262;
    CHECK(tfm_bpe_learner_create(&p, &l, &err) == TFM_ERR_RANGE);
    CHECK_MSG(strstr(err.msg, "the minimum is 263") != NULL, "%s", err.msg);
    p.vocab_size = 263;
    CHECK_MSG(tfm_bpe_learner_create(&p, &l, &err) == TFM_OK, "%s", err.msg);
    tfm_bpe_learner_free(l);
}

static void test_corpus_too_small(void)
{
    /* "ab": characters a b ▁ (each once, so ordered by code point: a b ▁);
     * merges a+b (0,1) then ▁+ab: at most 260 + 3 + 2 = 265 pieces. */
    const char *lines[] = {"ab"};
    tfm_bpe_learn_params p = small_params(1000);
    tfm_vocab *v;
    tfm_error err = {0};
    CHECK(learn(&p, lines, 1, 0, &v, &err) == TFM_ERR_RANGE);
    CHECK(v == NULL);
    CHECK_MSG(strstr(err.msg, "the corpus supports at most 265 pieces") != NULL, "%s", err.msg);
    p.soft_vocab_limit = true;
    CHECK_MSG(learn(&p, lines, 1, 0, &v, &err) == TFM_OK, "%s", err.msg);
    if (v) {
        CHECK(tfm_vocab_size(v) == 265);
        CHECK(piece_is(v, 263, "ab"));
        CHECK(piece_is(v, 264, MARKER "ab"));
    }
    tfm_vocab_free(v);
    /* Exactly the supported size works without the soft limit. */
    p.soft_vocab_limit = false;
    p.vocab_size = 265;
    CHECK_MSG(learn(&p, lines, 1, 0, &v, &err) == TFM_OK, "%s", err.msg);
    tfm_vocab_free(v);
    /* An empty corpus supports only the fixed pieces. */
    p.vocab_size = 300;
    CHECK(learn(&p, lines, 0, 0, &v, &err) == TFM_ERR_RANGE);
    CHECK_MSG(strstr(err.msg, "at most 260 pieces") != NULL, "%s", err.msg);
}

/* ---- user symbols, bad input, progress -------------------------------------------- */

static void test_user_symbols(void)
{
    const char *syms[] = {"<sep>", "xyz"};
    const char *lines[] = {"xyzxyz abxyz ab", "ab<sep>ab ab <sep>", "xyz ab xyz"};
    tfm_bpe_learn_params p = small_params(500);
    p.user_symbols = syms;
    p.n_user_symbols = 2;
    p.soft_vocab_limit = true;
    tfm_vocab *v;
    tfm_error err = {0};
    CHECK_MSG(learn(&p, lines, 3, 0, &v, &err) == TFM_OK, "%s", err.msg);
    if (!v) return;
    CHECK(piece_is(v, 4, "<sep>") && tfm_vocab_type(v, 4) == TFM_PIECE_USER);
    CHECK(piece_is(v, 5, "xyz") && tfm_vocab_type(v, 5) == TFM_PIECE_USER);
    CHECK(tfm_vocab_byte_id(v, 0) == 6);
    CHECK(piece_is(v, 6, "<0x00>") && tfm_vocab_type(v, 6) == TFM_PIECE_BYTE);
    /* Cut out whole: their characters never reached the counts. */
    CHECK(tfm_vocab_find(v, "x", 1) < 0);
    CHECK(tfm_vocab_find(v, "<", 1) < 0);
    CHECK(tfm_vocab_find(v, MARKER "ab", strlen(MARKER "ab")) >= 0);
    for (int32_t id = 262; id < tfm_vocab_size(v); id++)
        CHECK(strstr(tfm_vocab_piece(v, id, NULL), "xyz") == NULL);
    /* The saved file has the same layout and loads back. */
    char path[64];
    snprintf(path, sizeof path, "/tmp/test_bpe_learn.%d.vocab", (int)getpid());
    tfm_vocab *w = NULL;
    CHECK_MSG(tfm_vocab_save(v, path, &err) == TFM_OK, "%s", err.msg);
    CHECK_MSG(tfm_vocab_load(path, &w, &err) == TFM_OK, "%s", err.msg);
    CHECK(same_vocab(v, w));
    remove(path);
    tfm_vocab_free(w);
    tfm_vocab_free(v);

    /* A '▁' in a user symbol matches a space, the dummy prefix included, as
     * the encoder has it: "a <x>b" is "▁a" "▁<x>" "b", "<x>" is "▁<x>" and
     * nothing else.  So the words are ▁a once and b three times: characters
     * b ▁ a and one merge, ▁a. */
    const char *marked[] = {MARKER "<x>"};
    const char *marked_lines[] = {"a <x>b <x>b", "<x>", "<x>b"};
    p.user_symbols = marked;
    p.n_user_symbols = 1;
    p.soft_vocab_limit = false;
    CHECK(learn(&p, marked_lines, 3, 0, &v, &err) == TFM_ERR_RANGE);
    CHECK_MSG(strstr(err.msg, "at most 265 pieces") != NULL, "%s", err.msg);
    p.vocab_size = 265;
    CHECK_MSG(learn(&p, marked_lines, 3, 0, &v, &err) == TFM_OK, "%s", err.msg);
    if (v) {
        CHECK(piece_is(v, 4, MARKER "<x>") && tfm_vocab_type(v, 4) == TFM_PIECE_USER);
        CHECK(piece_is(v, 261, "b"));
        CHECK(piece_is(v, 264, MARKER "a"));
    }
    tfm_vocab_free(v);

    /* Bad user symbols are refused up front. */
    tfm_bpe_learner *l;
    const char *bad[][2] = {{"a b", "space"},      {"<s>", "special"}, {"<0x41>", "byte"},
                            {"q\xC2\xA0", "U+00A0"}, {"", "empty"},       {"dup", "twice"}};
    for (int i = 0; i < 6; i++) {
        const char *one[2] = {bad[i][0], "dup"};
        p.user_symbols = one;
        p.n_user_symbols = strcmp(bad[i][0], "dup") == 0 ? 2 : 1;
        CHECK_MSG(tfm_bpe_learner_create(&p, &l, &err) == TFM_ERR_ARG, "symbol '%s'", bad[i][0]);
        CHECK_MSG(strstr(err.msg, bad[i][1]) != NULL, "'%s' lacks '%s'", err.msg, bad[i][1]);
    }
}

static void test_repair_and_strict(void)
{
    tfm_bpe_learn_params p = small_params(300);
    p.soft_vocab_limit = true;
    tfm_bpe_learner *l;
    tfm_error err = {0};
    CHECK(tfm_bpe_learner_create(&p, &l, &err) == TFM_OK);
    size_t rep = 99;
    CHECK(tfm_bpe_learner_add(l, "ok\xFF ok\xC3", 7, &rep, &err) == TFM_OK);
    CHECK(rep == 2);
    const char *batch[] = {"fine", "bad\xFF", "also\xFE\xFF"};
    size_t lens[] = {4, 4, 6};
    CHECK(tfm_bpe_learner_add_batch(l, batch, lens, 3, &rep, &err) == TFM_OK);
    CHECK_MSG(rep == 3, "%zu", rep);
    tfm_bpe_learner_free(l);

    p.norm.strict = true;
    p.n_threads = 2;
    CHECK(tfm_bpe_learner_create(&p, &l, &err) == TFM_OK);
    CHECK(tfm_bpe_learner_add_batch(l, batch, lens, 3, &rep, &err) == TFM_ERR_UTF8);
    CHECK_MSG(strncmp(err.msg, "line 2: ", 8) == 0, "%s", err.msg);
    CHECK(tfm_bpe_learner_add(l, "x\xFF", 2, &rep, &err) == TFM_ERR_UTF8);
    tfm_bpe_learner_free(l);
}

typedef struct progress_log {
    int reading, counting, merging;
    int64_t last_merge_done;
} progress_log;

static void on_progress(void *ctx, const char *stage, int64_t done, int64_t total)
{
    progress_log *log = ctx;
    if (strcmp(stage, "reading") == 0) log->reading++;
    if (strcmp(stage, "counting") == 0) log->counting++;
    if (strcmp(stage, "merging") == 0) {
        log->merging++;
        log->last_merge_done = done;
    }
}

static void test_progress(void)
{
    corpus c = make_corpus(3, 1000, false);
    tfm_bpe_learn_params p = small_params(350);
    progress_log log = {0};
    p.progress = on_progress;
    p.progress_ctx = &log;
    p.input_sentence_size = 500;
    tfm_vocab *v;
    tfm_error err = {0};
    CHECK_MSG(learn(&p, (const char *const *)c.lines, c.n, 100, &v, &err) == TFM_OK, "%s",
              err.msg);
    CHECK(log.counting >= 1);
    CHECK(log.merging >= 1);
    int32_t n_merged = 0;
    for (int32_t id = 260; v && id < tfm_vocab_size(v); id++)
        n_merged += tfm_vocab_score(v, id) < 0;
    CHECK(n_merged > 0);
    CHECK_MSG(log.last_merge_done == n_merged, "%lld vs %d", (long long)log.last_merge_done,
              (int)n_merged);
    tfm_vocab_free(v);
    corpus_free(&c);
}

int main(void)
{
    RUN(test_hand_computed_order);
    RUN(test_matches_reference);
    RUN(test_deterministic);
    RUN(test_sampling);
    RUN(test_constraints);
    RUN(test_garbage_input);
    RUN(test_vocab_smaller_than_alphabet);
    RUN(test_character_coverage);
    RUN(test_too_small_size);
    RUN(test_corpus_too_small);
    RUN(test_user_symbols);
    RUN(test_repair_and_strict);
    RUN(test_progress);
    CHECK_DONE();
}
