/* data.c - the training data: sentence pairs held in memory as token ids,
 * read from two parallel files of id lines (as 'tokenize' writes them) or of
 * text (encoded here with the vocabulary's BPE).
 *
 * The files are read in lockstep, a chunk of line pairs at a time; the lines
 * of a chunk are parsed or encoded on several threads (each line into its
 * own slot, so the result does not depend on the thread count), then kept
 * or skipped in order.  Each kept source gets a </s> at its end, as encode
 * gives its input one (append_eos).  A pair is skipped only for a reason that is counted
 * (an empty side, a side over max_length), so pair i of the corpus always
 * comes from one line pair of the files and never from two different lines. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tfm/io.h"
#include "tfm/train.h"

/* Line pairs read and converted together. */
#define CHUNK_LINES 4096

typedef struct pair_ref {
    size_t src, tgt;       /* offsets into ids */
    int32_t src_len, tgt_len;
} pair_ref;

struct tfm_corpus {
    tfm_ids ids;           /* every pair's source ids, then its target ids */
    pair_ref *pairs;
    size_t n, cap;
};

tfm_corpus *tfm_corpus_create(void)
{
    tfm_corpus *c = calloc(1, sizeof *c);
    if (c) tfm_ids_init(&c->ids);
    return c;
}

void tfm_corpus_free(tfm_corpus *c)
{
    if (!c) return;
    tfm_ids_free(&c->ids);
    free(c->pairs);
    free(c);
}

static tfm_status push_ids(tfm_ids *v, const int32_t *ids, int n)
{
    for (int i = 0; i < n; i++)
        if (tfm_ids_push(v, ids[i]) != TFM_OK) return TFM_ERR_NOMEM;
    return TFM_OK;
}

tfm_status tfm_corpus_add(tfm_corpus *c, const int32_t *src, int src_len, const int32_t *tgt,
                          int tgt_len, tfm_error *err)
{
    if (src_len < 0 || tgt_len < 0)
        return tfm_error_set(err, TFM_ERR_ARG, "a sentence cannot have %d ids",
                             src_len < 0 ? src_len : tgt_len);
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 1024;
        pair_ref *p = realloc(c->pairs, cap * sizeof *p);
        if (!p) return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory for %zu pairs", cap);
        c->pairs = p;
        c->cap = cap;
    }
    size_t before = c->ids.len;
    pair_ref *r = &c->pairs[c->n];
    r->src = c->ids.len;
    r->src_len = src_len;
    r->tgt = c->ids.len + (size_t)src_len;
    r->tgt_len = tgt_len;
    if (push_ids(&c->ids, src, src_len) != TFM_OK || push_ids(&c->ids, tgt, tgt_len) != TFM_OK) {
        c->ids.len = before;
        return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory for the training data");
    }
    c->n++;
    return TFM_OK;
}

size_t tfm_corpus_size(const tfm_corpus *c)
{
    return c->n;
}

void tfm_corpus_pair(const tfm_corpus *c, size_t i, const int32_t **src, int *src_len,
                     const int32_t **tgt, int *tgt_len)
{
    const pair_ref *r = &c->pairs[i];
    *src = c->ids.data + r->src;
    *src_len = r->src_len;
    *tgt = c->ids.data + r->tgt;
    *tgt_len = r->tgt_len;
}

tfm_corpus *tfm_corpus_head(const tfm_corpus *c, size_t n)
{
    tfm_corpus *head = tfm_corpus_create();
    for (size_t i = 0; head && i < n && i < c->n; i++) {
        const int32_t *src, *tgt;
        int src_len, tgt_len;
        tfm_corpus_pair(c, i, &src, &src_len, &tgt, &tgt_len);
        if (tfm_corpus_add(head, src, src_len, tgt, tgt_len, NULL) != TFM_OK) {
            tfm_corpus_free(head);
            head = NULL;
        }
    }
    return head;
}

uint64_t tfm_corpus_hash(const tfm_corpus *c)
{
    /* The ids alone would not tell "1 2 | 3" from "1 | 2 3": mix in the
     * lengths of every pair too. */
    uint64_t h = tfm_hash_bytes(c->ids.data, c->ids.len * sizeof(int32_t));
    for (size_t i = 0; i < c->n; i++) {
        uint64_t lens = (uint64_t)(uint32_t)c->pairs[i].src_len << 32 |
                        (uint32_t)c->pairs[i].tgt_len;
        h = (h ^ lens) * 0x100000001b3ULL;
        h ^= h >> 29;
    }
    return h ^ c->n;
}

tfm_corpus_params tfm_corpus_default_params(void)
{
    return (tfm_corpus_params){
        .format = TFM_CORPUS_AUTO, .max_length = 256, .append_eos = true, .n_threads = 1,
        .pad_id = TFM_ID_PAD, .bos_id = TFM_ID_BOS, .eos_id = TFM_ID_EOS};
}

/* ---- loading ---------------------------------------------------------------------- */

/* One side of a chunk: the lines' text, and what each became. */
typedef struct side {
    tfm_line_reader *reader;
    tfm_corpus_format format;   /* AUTO until a chunk with a non-empty line decides */
    tfm_format_guess guess;     /* what AUTO decided on (lines 0: the format was given) */
    tfm_buf text;               /* the chunk's lines, NUL-separated */
    bool huge[CHUNK_LINES];     /* the line was over the reader's limit (held empty) */
    bool bom;                   /* the file started with a byte order mark, dropped */
    size_t crlf;                /* lines that ended in CR LF, the CR dropped */
    size_t offset[CHUNK_LINES], len[CHUNK_LINES];
    tfm_ids ids[CHUNK_LINES];
    size_t repaired[CHUNK_LINES];
    tfm_status status[CHUNK_LINES];
    tfm_error errors[CHUNK_LINES];
    const tfm_vocab *vocab;     /* the side's, or NULL */
    int32_t limit;              /* ids must be below this (0: no limit) */
    tfm_bpe **bpe;              /* one per worker, text only */
} side;

typedef struct loader {
    const tfm_corpus_params *p;
    side sides[2];
    size_t n;                   /* line pairs in the chunk */
    int n_workers;
} loader;

/* Decides an AUTO side on the lines of the chunk just read
 * (tfm_format_guess: ids when most non-empty ones are id lines, else text);
 * a chunk of empty lines leaves it AUTO for the next one. */
static void decide_format(side *s, size_t n)
{
    tfm_format_guess g = {0};
    for (size_t i = 0; i < n; i++) tfm_format_guess_add(&g, s->text.data + s->offset[i], s->len[i]);
    if (g.lines == 0) return;
    s->format = tfm_format_guess_ids(&g) ? TFM_CORPUS_IDS : TFM_CORPUS_TEXT;
    s->guess = g;
}

/* Turns line i of side s into ids. */
static tfm_status convert_line(loader *L, side *s, size_t i, tfm_bpe *bpe)
{
    const char *line = s->text.data + s->offset[i];
    size_t len = s->len[i];
    tfm_error *err = &s->errors[i];
    s->repaired[i] = 0;
    if (s->format == TFM_CORPUS_TEXT) {
        tfm_bpe_encode_params ep = {0};
        return tfm_bpe_encode(bpe, &ep, line, len, &s->ids[i], &s->repaired[i], err);
    }
    tfm_status st = tfm_ids_parse(line, len, s->limit, &s->ids[i], err);
    if (st == TFM_ERR_FORMAT && s->guess.lines > 0)
        tfm_error_append(err, " (the file was read as id lines: %zu of its first %zu non-empty "
                         "lines are)", s->guess.id_lines, s->guess.lines);
    if (st != TFM_OK) return st;
    for (size_t k = 0; k < s->ids[i].len; k++) {
        int32_t id = s->ids[i].data[k];
        const tfm_corpus_params *cp = L->p;
        if (id == cp->pad_id || id == cp->bos_id || id == cp->eos_id)
            return tfm_error_set(err, TFM_ERR_RANGE,
                                 "id %d is %s, which training adds itself: the data hold "
                                 "only the sentences' own ids",
                                 (int)id, id == cp->pad_id ? "<pad>" : id == cp->bos_id ? "<s>"
                                                                                       : "</s>");
    }
    return TFM_OK;
}

typedef struct convert_job {
    loader *L;
    int workers;
} convert_job;

/* Worker w converts every workers-th line pair of the chunk. */
static void convert_share(void *ctx, size_t w)
{
    convert_job *job = ctx;
    loader *L = job->L;
    for (size_t i = w; i < L->n; i += (size_t)job->workers)
        for (int k = 0; k < 2; k++) {
            side *s = &L->sides[k];
            s->status[i] = convert_line(L, s, i, s->bpe ? s->bpe[w] : NULL);
        }
}

/* Reads up to CHUNK_LINES line pairs.  Returns TFM_EOF when both files have
 * ended; a file that ends before the other is an error counting both. */
static tfm_status read_chunk(loader *L, tfm_corpus_stats *stats, tfm_error *err)
{
    L->n = 0;
    for (int k = 0; k < 2; k++) tfm_buf_clear(&L->sides[k].text);
    while (L->n < CHUNK_LINES) {
        tfm_status st[2];
        for (int k = 0; k < 2; k++) {
            side *s = &L->sides[k];
            const char *line;
            size_t len;
            st[k] = tfm_lines_next(s->reader, &line, &len, err);
            s->huge[L->n] = false;
            if (st[k] == TFM_ERR_RANGE && L->p->max_length > 0) {
                /* a line over the reader's limit (16 MiB) holds far more
                 * than max_length tokens: its pair is skipped as too long,
                 * like any other, and the reader reads past its rest */
                s->huge[L->n] = true;
                line = "";
                len = 0;
                st[k] = TFM_OK;
            }
            if (st[k] != TFM_OK && st[k] != TFM_EOF) {
                stats->error_file = k;
                stats->error_line = tfm_lines_number(s->reader) + 1;
                return st[k];
            }
            if (st[k] == TFM_OK) {
                /* a byte order mark and a CR before the LF are not data */
                if (tfm_lines_number(s->reader) == 1 && len >= 3 &&
                    memcmp(line, "\xef\xbb\xbf", 3) == 0) {
                    line += 3;
                    len -= 3;
                    s->bom = true;
                }
                if (len > 0 && line[len - 1] == '\r') {
                    len--;
                    s->crlf++;
                }
                s->offset[L->n] = s->text.len;
                s->len[L->n] = len;
                if (tfm_buf_append(&s->text, line, len) != TFM_OK ||
                    tfm_buf_putc(&s->text, 0) != TFM_OK)
                    return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory reading lines");
            }
        }
        if (st[0] == TFM_EOF && st[1] == TFM_EOF) break;
        if (st[0] != st[1]) {
            /* Count the rest of the longer file, so the message gives both. */
            int longer = st[0] == TFM_OK ? 0 : 1;
            tfm_line_reader *r = L->sides[longer].reader;
            const char *line;
            size_t len;
            tfm_status s;
            while ((s = tfm_lines_next(r, &line, &len, err)) == TFM_OK) {}
            if (s != TFM_EOF) return s;
            size_t counts[2];
            counts[longer] = tfm_lines_number(r);
            counts[1 - longer] = tfm_lines_number(L->sides[1 - longer].reader);
            stats->error_file = -1;
            return tfm_error_set(err, TFM_ERR_FORMAT,
                                 "the source file has %zu lines but the target file has %zu: "
                                 "line i of one must be the translation of line i of the other",
                                 counts[0], counts[1]);
        }
        L->n++;
    }
    for (int k = 0; k < 2; k++)
        if (L->sides[k].format == TFM_CORPUS_AUTO) decide_format(&L->sides[k], L->n);
    return L->n ? TFM_OK : TFM_EOF;
}

/* Keeps or skips the converted pairs of the chunk, in order. */
static tfm_status keep_chunk(loader *L, tfm_corpus *c, size_t first_line,
                             tfm_corpus_stats *stats, tfm_error *err)
{
    side *src = &L->sides[0], *tgt = &L->sides[1];
    for (size_t i = 0; i < L->n; i++) {
        for (int k = 0; k < 2; k++) {
            side *s = &L->sides[k];
            if (s->status[i] != TFM_OK) {
                stats->error_file = k;
                stats->error_line = first_line + i;
                *err = s->errors[i];
                return s->status[i];
            }
            if (s->repaired[i]) stats->repaired++;
        }
        stats->lines++;
        if (src->huge[i] || tgt->huge[i]) {
            stats->too_long++;
            continue;
        }
        size_t ns = src->ids[i].len, nt = tgt->ids[i].len;
        if (ns == 0 || nt == 0) {
            stats->empty++;
            continue;
        }
        if (L->p->max_length > 0 && (ns > (size_t)L->p->max_length || nt > (size_t)L->p->max_length)) {
            stats->too_long++;
            continue;
        }
        if (ns > INT32_MAX / 2 || nt > INT32_MAX / 2) {
            stats->error_file = ns > nt ? 0 : 1;
            stats->error_line = first_line + i;
            return tfm_error_set(err, TFM_ERR_RANGE, "a line of %zu ids is too long",
                                 ns > nt ? ns : nt);
        }
        if (L->p->append_eos && tfm_ids_push(&src->ids[i], L->p->eos_id) != TFM_OK)
            return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
        tfm_status st = tfm_corpus_add(c, src->ids[i].data, (int)src->ids[i].len, tgt->ids[i].data,
                                       (int)nt, err);
        if (st != TFM_OK) return st;
        stats->pairs++;
        stats->src_tokens += (int64_t)src->ids[i].len;
        stats->tgt_tokens += (int64_t)nt;
    }
    return TFM_OK;
}

static void loader_free(loader *L)
{
    for (int k = 0; k < 2; k++) {
        side *s = &L->sides[k];
        tfm_lines_free(s->reader);
        tfm_buf_free(&s->text);
        for (size_t i = 0; i < CHUNK_LINES; i++) tfm_ids_free(&s->ids[i]);
        if (s->bpe)
            for (int w = 0; w < L->n_workers; w++) tfm_bpe_free(s->bpe[w]);
        free(s->bpe);
    }
}

/* The side's encoders for text, made when it turns out to be text. */
static tfm_status make_encoders(loader *L, side *s, tfm_error *err)
{
    if (s->bpe) return TFM_OK;
    if (!s->vocab)
        return tfm_error_set(err, TFM_ERR_ARG,
                             "the file holds text, which needs a vocabulary to be encoded");
    s->bpe = calloc((size_t)L->n_workers, sizeof *s->bpe);
    if (!s->bpe) return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    for (int w = 0; w < L->n_workers; w++) {
        tfm_status st = tfm_bpe_create(s->vocab, &s->bpe[w], err);
        if (st != TFM_OK) return st;
    }
    return TFM_OK;
}

static tfm_status load_files(loader *L, tfm_corpus *c, tfm_corpus_stats *stats, tfm_error *err)
{
    size_t first_line = 1;
    tfm_status st;
    while ((st = read_chunk(L, stats, err)) == TFM_OK) {
        for (int k = 0; k < 2; k++)
            if (L->sides[k].format == TFM_CORPUS_TEXT &&
                (st = make_encoders(L, &L->sides[k], err)) != TFM_OK) {
                stats->error_file = k;
                return st;
            }
        /* A chunk of a few lines is not worth a thread. */
        convert_job job = {.L = L, .workers = L->n < 64 ? 1 : L->n_workers};
        if (job.workers == 1) convert_share(&job, 0);
        else if ((st = tfm_parallel_for(job.workers, (size_t)job.workers, convert_share, &job)))
            return tfm_error_set(err, st, "could not start threads");
        if ((st = keep_chunk(L, c, first_line, stats, err)) != TFM_OK) return st;
        first_line += L->n;
    }
    return st == TFM_EOF ? TFM_OK : st;
}

tfm_status tfm_corpus_load(const char *src_path, const char *tgt_path,
                           const tfm_corpus_params *p, tfm_corpus **out,
                           tfm_corpus_stats *stats, tfm_error *err)
{
    *out = NULL;
    memset(stats, 0, sizeof *stats);
    stats->error_file = -1;
    if (p->max_length < 0)
        return tfm_error_set(err, TFM_ERR_ARG, "max_length is %d, expected 0 or more",
                             p->max_length);
    if (p->format == TFM_CORPUS_TEXT && !p->vocab)
        return tfm_error_set(err, TFM_ERR_ARG, "reading text needs a vocabulary");

    /* The loader is large (a chunk of lines per side): keep it off the stack. */
    loader *L = calloc(1, sizeof *L);
    tfm_corpus *c = tfm_corpus_create();
    if (!L || !c) {
        free(L);
        tfm_corpus_free(c);
        return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    }
    L->p = p;
    L->n_workers = p->n_threads > 0 ? p->n_threads : 1;
    L->sides[0].vocab = p->src_vocab ? p->src_vocab : p->vocab;
    L->sides[1].vocab = p->vocab;
    L->sides[0].limit = p->src_vocab_size > 0 ? p->src_vocab_size : p->vocab_size;
    L->sides[1].limit = p->vocab_size;
    for (int k = 0; k < 2; k++)
        if (L->sides[k].vocab) L->sides[k].limit = tfm_vocab_size(L->sides[k].vocab);
    const char *paths[2] = {src_path, tgt_path};
    int fds[2] = {-1, -1};
    tfm_status st = TFM_OK;
    for (int k = 0; k < 2 && st == TFM_OK; k++) {
        side *s = &L->sides[k];
        tfm_buf_init(&s->text);
        for (size_t i = 0; i < CHUNK_LINES; i++) tfm_ids_init(&s->ids[i]);
        s->format = p->format;
        fds[k] = open(paths[k], O_RDONLY | O_CLOEXEC);
        if (fds[k] < 0) {
            stats->error_file = k;
            st = tfm_error_set(err, TFM_ERR_IO, "%s", strerror(errno));
        } else if (!(s->reader = tfm_lines_create(fds[k]))) {
            st = tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
        }
    }
    if (st == TFM_OK) st = load_files(L, c, stats, err);
    for (int k = 0; k < 2; k++) {
        /* A file with no non-empty line is read as ids (it gives no pairs). */
        tfm_corpus_format f = L->sides[k].format;
        if (k == 0) stats->src_format = f == TFM_CORPUS_AUTO ? TFM_CORPUS_IDS : f;
        else stats->tgt_format = f == TFM_CORPUS_AUTO ? TFM_CORPUS_IDS : f;
        stats->format_guess[k] = L->sides[k].guess;
        stats->bom[k] = L->sides[k].bom;
        stats->crlf[k] = L->sides[k].crlf;
    }
    loader_free(L);
    free(L);
    for (int k = 0; k < 2; k++)
        if (fds[k] >= 0) close(fds[k]);
    if (st != TFM_OK) {
        tfm_corpus_free(c);
        return st;
    }
    *out = c;
    return TFM_OK;
}
