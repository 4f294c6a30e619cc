/* bpe_learn.c - learning BPE, part 1: from raw lines to word counts.
 *
 * BPE learning (Sennrich et al., 2016) only needs to know which words occur
 * and how often, so the learner keeps a map from each distinct word to its
 * count and forgets the lines.  bpe_learn_merge.c then learns the merges
 * from that map.
 *
 * A "word", as SentencePiece sees one: the normalised line gets a '▁' in
 * front (the dummy prefix) and every space becomes '▁'; a word starts at
 * each '▁' and runs to the next one, so "a  b" gives "▁a" "▁" "▁b".
 * Characters that can never be in a piece (controls, tabs, U+FFFD, a literal
 * U+2581 in the input; see tfm_char_pieceable) end the word and are not
 * counted: the encoder spells them with byte pieces.  The text after one
 * starts a new word without a '▁'.  User symbols found in the text are cut
 * out whole in the same way: they are pieces of their own (a '▁' in one
 * matches a space, the dummy prefix included).  This is the encoder's
 * segmentation (bpe_encode.c), so the counts are of the words it will see.
 * With placeholders, the 32 tokens <ph1> .. <ph32> are user symbols after
 * the given ones, and each line's placeholders are replaced by them before
 * it is split (the text between them normalised on its own, as
 * tfm_bpe_encode_placeholders does), so no merge is spent on "%s".
 *
 * Lines are normalised and split on the learner's threads (add_batch): each
 * thread counts its share of the lines into a map of its own, and the maps
 * are summed in the same order every time.  Counts are sums, so the result
 * does not depend on the number of threads.
 *
 * With input_sentence_size set, the learner keeps a uniform sample of the
 * raw lines instead (reservoir sampling, Vitter's algorithm R) and counts
 * their words only at the end. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/encode_internal.h"
#include "text/learn_internal.h"


tfm_bpe_learn_params tfm_bpe_learn_default_params(void)
{
    tfm_bpe_learn_params p = {
        .vocab_size = 8000,
        .norm = tfm_norm_default_params(),
        .character_coverage = 0.9995,
        .max_piece_length = 16,
        .soft_vocab_limit = false,
        .input_sentence_size = 0,
        .seed = 1,
        .n_threads = tfm_cpu_count(),
        .user_symbols = NULL,
        .n_user_symbols = 0,
        .placeholders = false,
        .placeholder_classes = TFM_PH_ALL,
        .progress = NULL,
        .progress_ctx = NULL,
    };
    return p;
}

/* What splitting a line into words needs to know; read-only once made, so
 * threads share it. */
typedef struct word_splitter {
    tfm_norm_params norm;
    const char *const *user_symbols; /* as matched: '▁' turned into a space */
    const size_t *user_lens;
    int n_user;
    bool user_first_byte[256]; /* could a user symbol start with this byte? */
    unsigned placeholders;     /* TFM_PH_* classes replaced by their tokens (0: none) */
} word_splitter;

struct tfm_bpe_learner {
    tfm_bpe_learn_params p;
    char **user_symbols;     /* the learner's copies */
    char **user_match;       /* the same with each '▁' as a space: what the text holds */
    size_t *user_lens;       /* of user_match */
    word_splitter split;
    tfm_strmap *words;       /* word (UTF-8, '▁' form) -> count */
    tfm_buf norm_buf, word_buf;
    tfm_placeholders ph;     /* scratch of tfm_bpe_learner_add */
    int64_t n_lines;         /* lines added so far */
    /* Sampling (input_sentence_size > 0): the reservoir of raw lines. */
    tfm_rng rng;
    char **sample;
    size_t *sample_lens;
    int64_t n_sample, sample_cap;
    bool finished;           /* finish was called: no more lines */
};

/* ---- words ---------------------------------------------------------------------- */

static bool count_word(tfm_strmap *words, const tfm_buf *word)
{
    if (word->len == 0) return true;
    int64_t *count = tfm_strmap_upsert(words, word->data, word->len, 0, NULL);
    if (!count) return false;
    (*count)++;
    return true;
}

/* The length of the longest user symbol at text[i..len), or 0.  As the
 * encoder does: a symbol matches whole characters only. */
static size_t user_symbol_at(const word_splitter *s, const char *text, size_t len, size_t i)
{
    size_t best = 0;
    for (int k = 0; k < s->n_user; k++) {
        size_t n = s->user_lens[k];
        if (n <= best || n > len - i || memcmp(text + i, s->user_symbols[k], n) != 0) continue;
        if (i + n < len && ((unsigned char)text[i + n] & 0xC0) == 0x80) continue;
        best = n;
    }
    return best;
}

/* Splits one normalised line, with the dummy-prefix space in front, into
 * words and counts them; word is scratch.  The loop is the encoder's
 * (bpe_encode.c), so that it learns from the words it will encode. */
static tfm_status count_line_words(const word_splitter *s, const char *text, size_t len,
                                   tfm_buf *word, tfm_strmap *words)
{
    if (len <= 1) return TFM_OK; /* an empty line has no words, not even "▁" */
    tfm_buf_clear(word);
    const unsigned char *u = (const unsigned char *)text;
    size_t i = 0;
    while (i < len) {
        size_t m;
        if (s->user_first_byte[u[i]] && (m = user_symbol_at(s, text, len, i)) > 0) {
            if (!count_word(words, word)) return TFM_ERR_NOMEM;
            tfm_buf_clear(word);
            i += m;
            continue;
        }
        int32_t cp;
        int n = u[i] < 0x80 ? (cp = u[i], 1) : tfm_utf8_decode(u + i, len - i, &cp);
        if (n == 0) { /* cannot happen after normalisation; treat as unpieceable */
            cp = 0xFFFD;
            n = 1;
        }
        if (cp == ' ') { /* the marker, and a new word */
            if (!count_word(words, word)) return TFM_ERR_NOMEM;
            tfm_buf_clear(word);
            if (tfm_buf_append(word, TFM_MARKER, TFM_MARKER_LEN) != TFM_OK)
                return TFM_ERR_NOMEM;
        } else if (!tfm_char_pieceable(cp)) { /* spelled with bytes: ends the word */
            if (!count_word(words, word)) return TFM_ERR_NOMEM;
            tfm_buf_clear(word);
        } else if (tfm_buf_append(word, text + i, (size_t)n) != TFM_OK) {
            return TFM_ERR_NOMEM;
        }
        i += (size_t)n;
    }
    return count_word(words, word) ? TFM_OK : TFM_ERR_NOMEM;
}

/* Normalises a raw line into norm, behind the dummy-prefix space, and
 * counts its words (words NULL: only normalises, to check the line and
 * count repairs).  With placeholders, each is replaced by its token first
 * (ph: scratch). */
static tfm_status count_raw_line(const word_splitter *s, const char *line, size_t len,
                                 tfm_buf *norm, tfm_buf *word, tfm_placeholders *ph,
                                 tfm_strmap *words, size_t *n_repaired, tfm_error *err)
{
    size_t repaired = 0;
    tfm_buf_clear(norm);
    if (tfm_buf_putc(norm, ' ') != TFM_OK)
        return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory counting words");
    tfm_status st;
    if (s->placeholders) {
        /* Each placeholder as its token, a user symbol: the encoder's text. */
        st = tfm_placeholders_scan(line, len, s->placeholders, ph, err);
        if (st == TFM_OK)
            st = tfm_normalize_placeholders(&s->norm, line, len, ph, norm, NULL, &repaired, err);
    } else {
        st = tfm_normalize_append(&s->norm, line, len, norm, &repaired, err);
    }
    if (st != TFM_OK) return st;
    if (n_repaired) *n_repaired += repaired;
    if (!words) return TFM_OK; /* only checking */
    st = count_line_words(s, norm->data, norm->len, word, words);
    if (st != TFM_OK) return tfm_error_set(err, st, "out of memory counting words");
    return TFM_OK;
}

/* Adds every count of from to into. */
static bool add_counts(tfm_strmap *into, const tfm_strmap *from)
{
    const char *key;
    size_t len;
    int64_t count;
    for (size_t it = 0; tfm_strmap_next(from, &it, &key, &len, &count);) {
        int64_t *c = tfm_strmap_upsert(into, key, len, 0, NULL);
        if (!c) return false;
        *c += count;
    }
    return true;
}

/* ---- counting many lines on threads ---------------------------------------------- */

/* One share of the lines, counted by whichever thread takes it. */
typedef struct count_chunk {
    size_t begin, end;     /* lines [begin, end) */
    tfm_strmap *words;
    size_t n_repaired;
    tfm_status status;
    size_t bad_line;       /* on failure: which line */
    tfm_error err;
} count_chunk;

typedef struct count_job {
    const word_splitter *split;
    bool check_only;       /* normalise only, count nothing */
    const char *const *lines;
    const size_t *lens;
    count_chunk *chunks;
} count_job;

static void count_chunk_run(void *ctx, size_t c)
{
    count_job *job = ctx;
    count_chunk *ch = &job->chunks[c];
    tfm_buf norm, word;
    tfm_buf_init(&norm);
    tfm_buf_init(&word);
    tfm_placeholders ph;
    tfm_placeholders_init(&ph);
    if (!job->check_only) ch->words = tfm_strmap_create((ch->end - ch->begin) * 4 + 16);
    if (!job->check_only && !ch->words) {
        ch->status = tfm_error_set(&ch->err, TFM_ERR_NOMEM, "out of memory counting words");
        ch->bad_line = ch->begin;
    }
    for (size_t i = ch->begin; i < ch->end && ch->status == TFM_OK; i++) {
        ch->status = count_raw_line(job->split, job->lines[i], job->lens[i], &norm, &word, &ph,
                                    ch->words, &ch->n_repaired, &ch->err);
        if (ch->status != TFM_OK) ch->bad_line = i;
    }
    tfm_buf_free(&norm);
    tfm_buf_free(&word);
    tfm_placeholders_free(&ph);
}

/* Counts the words of n lines into words, on n_threads threads (words
 * NULL: only normalises them, to check them and count repairs).  When a
 * line fails, nothing is added and the error names the line (from 1). */
/* A failure's message starts with "line N", N counted from first_number
 * for lines[0]. */
static tfm_status count_lines_parallel(const word_splitter *split, int n_threads,
                                       size_t first_number, const char *const *lines,
                                       const size_t *lens, size_t n,
                                       tfm_strmap *words, size_t *n_repaired, tfm_error *err)
{
    /* Two chunks per thread even out lines of unequal length. */
    size_t n_chunks = (size_t)n_threads * 2;
    if (n_chunks > n) n_chunks = n;
    if (n_chunks == 0) return TFM_OK;
    count_chunk *chunks = calloc(n_chunks, sizeof *chunks);
    if (!chunks) return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory counting words");
    for (size_t c = 0; c < n_chunks; c++) {
        chunks[c].begin = n * c / n_chunks;
        chunks[c].end = n * (c + 1) / n_chunks;
    }
    count_job job = {.split = split, .check_only = words == NULL, .lines = lines, .lens = lens,
                     .chunks = chunks};
    tfm_status st = tfm_parallel_for(n_threads, n_chunks, count_chunk_run, &job);
    if (st != TFM_OK) tfm_error_set(err, st, "could not start the counting threads");
    /* The first failing chunk holds the first failing line. */
    for (size_t c = 0; c < n_chunks && st == TFM_OK; c++) {
        if (chunks[c].status != TFM_OK) {
            st = chunks[c].status;
            if (err) *err = chunks[c].err;
            tfm_error_prefix(err, "line %zu", first_number + chunks[c].bad_line);
        }
    }
    size_t repaired = 0;
    for (size_t c = 0; c < n_chunks && st == TFM_OK; c++) {
        if (words && !add_counts(words, chunks[c].words))
            st = tfm_error_set(err, TFM_ERR_NOMEM, "out of memory counting words");
        repaired += chunks[c].n_repaired;
    }
    if (st == TFM_OK && n_repaired) *n_repaired += repaired;
    for (size_t c = 0; c < n_chunks; c++) tfm_strmap_free(chunks[c].words);
    free(chunks);
    return st;
}

/* ---- the learner ----------------------------------------------------------------- */

static tfm_status check_params(const tfm_bpe_learn_params *p, tfm_error *err)
{
    int32_t min_size = 4 + p->n_user_symbols + 256 + 1;
    if (p->n_user_symbols < 0 || (p->n_user_symbols > 0 && !p->user_symbols))
        return tfm_error_set(err, TFM_ERR_ARG, "n_user_symbols is %d without user_symbols",
                             p->n_user_symbols);
    if (p->n_user_symbols > 1000000)
        return tfm_error_set(err, TFM_ERR_RANGE, "too many user symbols (%d)",
                             p->n_user_symbols);
    if (p->vocab_size < min_size)
        return tfm_error_set(err, TFM_ERR_RANGE,
                             "vocabulary size %d is too small: the minimum is %d (4 special "
                             "pieces, %d user symbols, 256 byte pieces and 1 character)",
                             (int)p->vocab_size, (int)min_size, p->n_user_symbols);
    if (!(p->character_coverage > 0.0 && p->character_coverage <= 1.0))
        return tfm_error_set(err, TFM_ERR_RANGE,
                             "character coverage %g is outside (0, 1]", p->character_coverage);
    if (p->max_piece_length < 1 || p->max_piece_length > 1024)
        return tfm_error_set(err, TFM_ERR_RANGE, "maximum piece length %d is outside 1..1024",
                             p->max_piece_length);
    if (p->input_sentence_size < 0)
        return tfm_error_set(err, TFM_ERR_RANGE, "input sentence size %lld is negative",
                             (long long)p->input_sentence_size);
    if (p->n_threads < 1)
        return tfm_error_set(err, TFM_ERR_RANGE, "thread count %d is below 1", p->n_threads);
    if ((unsigned)p->norm.form > TFM_NORM_NFKC)
        return tfm_error_set(err, TFM_ERR_ARG, "unknown normalisation form %d", (int)p->norm.form);
    /* A user symbol must be a valid piece that the text can contain whole;
     * a '▁' in it matches a space, as in the encoder. */
    for (int i = 0; i < p->n_user_symbols; i++) {
        const char *sym = p->user_symbols[i];
        if (!sym) return tfm_error_set(err, TFM_ERR_ARG, "user symbol %d is NULL", i + 1);
        size_t len = strlen(sym);
        char why[80];
        const char *problem = tfm_piece_text_problem(sym, len, why, sizeof why);
        if (problem)
            return tfm_error_set(err, TFM_ERR_ARG, "user symbol %d '%s' %s", i + 1, sym, problem);
        for (const unsigned char *s = (const unsigned char *)sym; *s;) {
            int32_t cp;
            int n = tfm_utf8_decode(s, strlen((const char *)s), &cp);
            if (!tfm_char_pieceable(cp) && cp != 0x2581) /* '▁' stands for a space */
                return tfm_error_set(err, TFM_ERR_ARG,
                                     "user symbol '%s' contains U+%04X, which cannot be in a "
                                     "piece",
                                     sym, (unsigned)cp);
            s += n;
        }
        static const char *const specials[4] = {"<pad>", "<unk>", "<s>", "</s>"};
        for (int k = 0; k < 4; k++)
            if (strcmp(sym, specials[k]) == 0)
                return tfm_error_set(err, TFM_ERR_ARG, "user symbol '%s' is a special piece",
                                     sym);
        if (len == 6 && strncmp(sym, "<0x", 3) == 0 && sym[5] == '>')
            return tfm_error_set(err, TFM_ERR_ARG, "user symbol '%s' looks like a byte piece",
                                 sym);
        for (int k = 0; k < i; k++)
            if (strcmp(sym, p->user_symbols[k]) == 0)
                return tfm_error_set(err, TFM_ERR_ARG, "user symbol '%s' is given twice", sym);
    }
    return TFM_OK;
}

static tfm_status create_learner(const tfm_bpe_learn_params *p, tfm_bpe_learner **out,
                                 tfm_error *err);

/* The user symbols with <ph1> .. <ph32> after them: an array of n + 32
 * pointers, the new ones at its end in tokens[][16]. */
static const char **with_placeholder_symbols(const tfm_bpe_learn_params *p,
                                             char tokens[TFM_PH_TOKENS][16])
{
    int n = p->n_user_symbols > 0 ? p->n_user_symbols : 0;
    const char **all = calloc((size_t)n + TFM_PH_TOKENS, sizeof *all);
    if (!all) return NULL;
    for (int i = 0; i < n; i++) all[i] = p->user_symbols[i];
    for (int k = 0; k < TFM_PH_TOKENS; k++) {
        snprintf(tokens[k], sizeof tokens[k], "<ph%d>", k + 1);
        all[n + k] = tokens[k];
    }
    return all;
}

tfm_status tfm_bpe_learner_create(const tfm_bpe_learn_params *params, tfm_bpe_learner **out,
                                  tfm_error *err)
{
    *out = NULL;
    tfm_bpe_learn_params q = *params;
    const tfm_bpe_learn_params *p = &q;
    char tokens[TFM_PH_TOKENS][16];
    const char **symbols = NULL;
    if (params->placeholders && params->n_user_symbols >= 0 &&
        !(params->n_user_symbols > 0 && !params->user_symbols)) {
        symbols = with_placeholder_symbols(params, tokens);
        if (!symbols) return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
        q.user_symbols = symbols;
        q.n_user_symbols = params->n_user_symbols + TFM_PH_TOKENS;
    }
    tfm_status st = check_params(p, err);
    if (st == TFM_OK && p->placeholders && (p->placeholder_classes & ~(unsigned)TFM_PH_ALL))
        st = tfm_error_set(err, TFM_ERR_ARG, "unknown placeholder classes 0x%x",
                           p->placeholder_classes);
    if (st != TFM_OK) {
        free(symbols);
        return st;
    }
    st = create_learner(p, out, err);
    free(symbols); /* the learner has copies */
    return st;
}

static tfm_status create_learner(const tfm_bpe_learn_params *p, tfm_bpe_learner **out,
                                 tfm_error *err)
{
    tfm_bpe_learner *l = calloc(1, sizeof *l);
    if (!l) return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    l->p = *p;
    int nu = p->n_user_symbols;
    l->user_symbols = calloc((size_t)nu + 1, sizeof *l->user_symbols);
    l->user_match = calloc((size_t)nu + 1, sizeof *l->user_match);
    l->user_lens = calloc((size_t)nu + 1, sizeof *l->user_lens);
    l->words = tfm_strmap_create(1 << 16);
    bool ok = l->user_symbols && l->user_match && l->user_lens && l->words;
    for (int i = 0; ok && i < nu; i++) {
        const char *sym = p->user_symbols[i];
        size_t len = strlen(sym);
        l->user_symbols[i] = malloc(len + 1);
        l->user_match[i] = malloc(len + 1);
        ok = l->user_symbols[i] && l->user_match[i];
        if (!ok) break;
        memcpy(l->user_symbols[i], sym, len + 1);
        size_t n = 0;
        for (size_t k = 0; k < len;) {
            if (len - k >= TFM_MARKER_LEN && memcmp(sym + k, TFM_MARKER, TFM_MARKER_LEN) == 0) {
                l->user_match[i][n++] = ' ';
                k += TFM_MARKER_LEN;
            } else {
                l->user_match[i][n++] = sym[k++];
            }
        }
        l->user_match[i][n] = 0;
        l->user_lens[i] = n;
    }
    if (!ok) {
        tfm_bpe_learner_free(l);
        return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    }
    /* The params the learner keeps point at its own copies. */
    l->p.user_symbols = (const char *const *)l->user_symbols;
    l->split.norm = p->norm;
    l->split.user_symbols = (const char *const *)l->user_match;
    l->split.user_lens = l->user_lens;
    l->split.n_user = nu;
    l->split.placeholders = p->placeholders ? p->placeholder_classes : 0;
    for (int i = 0; i < nu; i++)
        l->split.user_first_byte[(unsigned char)l->user_match[i][0]] = true;
    tfm_buf_init(&l->norm_buf);
    tfm_buf_init(&l->word_buf);
    tfm_placeholders_init(&l->ph);
    tfm_rng_seed(&l->rng, p->seed);
    *out = l;
    return TFM_OK;
}

void tfm_bpe_learner_free(tfm_bpe_learner *l)
{
    if (!l) return;
    for (int i = 0; i < l->p.n_user_symbols; i++) {
        if (l->user_symbols) free(l->user_symbols[i]);
        if (l->user_match) free(l->user_match[i]);
    }
    free(l->user_symbols);
    free(l->user_match);
    free(l->user_lens);
    tfm_strmap_free(l->words);
    tfm_buf_free(&l->norm_buf);
    tfm_buf_free(&l->word_buf);
    tfm_placeholders_free(&l->ph);
    for (int64_t i = 0; i < l->n_sample; i++) free(l->sample[i]);
    free(l->sample);
    free(l->sample_lens);
    free(l);
}

static void report_reading(tfm_bpe_learner *l, int64_t before)
{
    /* Every 100,000 lines is often enough to show life, rarely enough to cost nothing. */
    if (l->p.progress && l->n_lines / 100000 != before / 100000)
        l->p.progress(l->p.progress_ctx, "reading", l->n_lines, 0);
}

/* Reservoir sampling (algorithm R): line number k (from 0) replaces a random
 * slot with probability size/(k+1), so every line is kept with the same
 * probability whatever the order and number of lines. */
static tfm_status sample_line(tfm_bpe_learner *l, const char *line, size_t len, tfm_error *err)
{
    int64_t size = l->p.input_sentence_size;
    int64_t slot;
    if (l->n_sample < size) {
        if (l->n_sample == l->sample_cap) {
            int64_t cap = l->sample_cap ? l->sample_cap * 2 : 1024;
            if (cap > size) cap = size;
            char **s = realloc(l->sample, (size_t)cap * sizeof *s);
            if (s) l->sample = s;
            size_t *ls = realloc(l->sample_lens, (size_t)cap * sizeof *ls);
            if (ls) l->sample_lens = ls;
            if (!s || !ls) return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory sampling lines");
            l->sample_cap = cap;
        }
        slot = l->n_sample++;
        l->sample[slot] = NULL;
    } else {
        slot = (int64_t)tfm_rng_below(&l->rng, (uint64_t)l->n_lines + 1);
        if (slot >= size) return TFM_OK;
    }
    char *copy = malloc(len + 1);
    if (!copy) return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory sampling lines");
    memcpy(copy, line, len);
    copy[len] = 0;
    free(l->sample[slot]);
    l->sample[slot] = copy;
    l->sample_lens[slot] = len;
    return TFM_OK;
}

tfm_status tfm_bpe_learner_add(tfm_bpe_learner *l, const char *line, size_t len,
                               size_t *n_repaired, tfm_error *err)
{
    if (n_repaired) *n_repaired = 0;
    if (l->finished) return tfm_error_set(err, TFM_ERR_ARG, "lines added after finish");
    /* With sampling the line is kept raw, but checked now as when counting. */
    bool sampling = l->p.input_sentence_size > 0;
    tfm_status st = count_raw_line(&l->split, line, len, &l->norm_buf, &l->word_buf, &l->ph,
                                   sampling ? NULL : l->words, n_repaired, err);
    if (st == TFM_OK && sampling) st = sample_line(l, line, len, err);
    if (st != TFM_OK) return st;
    report_reading(l, l->n_lines++);
    return TFM_OK;
}

tfm_status tfm_bpe_learner_add_batch(tfm_bpe_learner *l, const char *const *lines,
                                     const size_t *lens, size_t n, size_t *n_repaired,
                                     tfm_error *err)
{
    return tfm_bpe_learner_add_numbered(l, lines, lens, n, 1, n_repaired, err);
}

tfm_status tfm_bpe_learner_add_numbered(tfm_bpe_learner *l, const char *const *lines,
                                        const size_t *lens, size_t n, size_t first_number,
                                        size_t *n_repaired, tfm_error *err)
{
    if (n_repaired) *n_repaired = 0;
    if (l->finished) return tfm_error_set(err, TFM_ERR_ARG, "lines added after finish");
    /* With sampling the raw lines are kept, but they are checked first as
     * when counting (strict mode, repairs), on the threads. */
    bool sampling = l->p.input_sentence_size > 0;
    tfm_status st = count_lines_parallel(&l->split, l->p.n_threads, first_number, lines, lens, n,
                                         sampling ? NULL : l->words, n_repaired, err);
    if (st != TFM_OK) return st;
    int64_t before = l->n_lines;
    if (!sampling) {
        l->n_lines += (int64_t)n;
    } else {
        /* One random number per line in line order: serial, a copy per kept line. */
        for (size_t i = 0; i < n; i++) {
            st = sample_line(l, lines[i], lens[i], err);
            if (st != TFM_OK) return st;
            l->n_lines++;
        }
    }
    report_reading(l, before);
    return TFM_OK;
}

tfm_status tfm_bpe_learner_finish(tfm_bpe_learner *l, tfm_vocab **out, tfm_error *err)
{
    *out = NULL;
    l->finished = true;
    if (l->n_sample > 0) {
        if (l->p.progress) l->p.progress(l->p.progress_ctx, "counting", 0, l->n_sample);
        tfm_status st = count_lines_parallel(&l->split, l->p.n_threads, 1,
                                             (const char *const *)l->sample, l->sample_lens,
                                             (size_t)l->n_sample, l->words, NULL, err);
        if (st != TFM_OK) return st;
        if (l->p.progress) l->p.progress(l->p.progress_ctx, "counting", l->n_sample, l->n_sample);
        /* Counted: the lines are no longer needed (and must not count twice). */
        for (int64_t i = 0; i < l->n_sample; i++) free(l->sample[i]);
        l->n_sample = 0;
    }
    return tfm_bpe_learn_merges(&l->p, l->words, out, err);
}
