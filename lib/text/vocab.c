/* vocab.c - the vocabulary: pieces with scores and types, looked up by id
 * and by text, and its text file (tfm-formats(5)):
 *
 *     #tfm-vocab 1 normalize=nfkc case-fold=no pieces=N
 *     <pad>	0	control
 *     ...                                  N lines PIECE<TAB>SCORE<TAB>TYPE
 *
 * The file is meant to be read with less and grep, and to be edited by hand
 * now and then, so the parser checks every line and says which one is wrong.
 * Ids are file order.  The layout: the 4 specials, user symbols, the 256
 * byte pieces in byte order, then characters and merges.  User symbols
 * may also come after the byte pieces (a vocabulary made with
 * tfm_vocab_create gets them there); nothing else may move. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tfm/io.h"
#include "tfm/spm.h"
#include "tfm/text.h"
#include "core/base64.h"
#include "text/encode_internal.h"
#include "text/learn_internal.h"
#include "text/vocab_internal.h"

typedef struct vocab_piece {
    char *text; /* NUL-terminated copy, len bytes */
    size_t len;
    uint64_t hash; /* tfm_hash_bytes of the text */
    float score;
    tfm_piece_type type;
} vocab_piece;

struct tfm_vocab {
    tfm_norm_params norm;
    vocab_piece *pieces;
    int32_t size, cap;
    /* text -> id: open addressing over the ids, -1 for an empty slot; the
     * texts compared are the pieces' own (a map keeping copies of its keys
     * made reading a vocabulary twice as slow) */
    int32_t *slots;
    size_t n_slots;         /* a power of two, at least twice the pieces */
    int32_t byte_ids[256];  /* -1 until the byte pieces are added */
    int n_bytes;            /* byte pieces so far; they come in byte order */
    /* The vocabulary of a model from elsewhere (tfm_vocab_create_foreign): its
     * pieces in its own order, no layout rules, and the SentencePiece model
     * that segments its text (attached, and kept whole in the file). */
    bool foreign;
    tfm_spm *spm;           /* owned, or NULL */
    int32_t *from_spm;      /* [spm size]: the id of each SentencePiece piece (unk when
                               the vocabulary lacks it) */
    int32_t *to_spm;        /* [size]: the SentencePiece id of each piece, or -1 */
    /* Read in place (tfm_vocab_from_arrays): the pieces whose text lies in
     * [borrowed, borrowed_end) are not copies, and release(release_ctx)
     * gives their memory back when the vocabulary is freed. */
    const char *borrowed, *borrowed_end;
    void (*release)(void *ctx);
    void *release_ctx;
};

static const char *const special_text[4] = {"<pad>", "<unk>", "<s>", "</s>"};

/* The line after the header of a foreign vocabulary that holds its
 * SentencePiece model, base64. */
static const char spm_line[] = "#sentencepiece ";

static const char *const type_name[4] = {
    [TFM_PIECE_NORMAL] = "normal",
    [TFM_PIECE_CONTROL] = "control",
    [TFM_PIECE_USER] = "user",
    [TFM_PIECE_BYTE] = "byte",
};

/* ---- the index -------------------------------------------------------------- */

/* The slot of text: the one holding its id, or the empty one where it
 * would go. */
static size_t index_slot(const tfm_vocab *v, const char *text, size_t len, uint64_t hash)
{
    const size_t mask = v->n_slots - 1;
    for (size_t i = (size_t)hash & mask;; i = (i + 1) & mask) {
        const int32_t id = v->slots[i];
        if (id < 0) return i;
        const vocab_piece *p = &v->pieces[id];
        if (p->hash == hash && p->len == len && memcmp(p->text, text, len) == 0) return i;
    }
}

/* Makes room for n_slots slots (a power of two) and puts every piece back. */
static bool index_resize(tfm_vocab *v, size_t n_slots)
{
    int32_t *slots = malloc(n_slots * sizeof *slots);
    if (!slots) return false;
    memset(slots, 0xff, n_slots * sizeof *slots); /* -1 */
    free(v->slots);
    v->slots = slots;
    v->n_slots = n_slots;
    for (int32_t id = 0; id < v->size; id++) {
        const vocab_piece *p = &v->pieces[id];
        v->slots[index_slot(v, p->text, p->len, p->hash)] = id;
    }
    return true;
}

/* ---- building --------------------------------------------------------------- */

/* The vocabulary with nothing in it, its pieces and index sized for
 * `expected` pieces; callers add the specials. */
static tfm_vocab *vocab_new(const tfm_norm_params *norm, size_t expected)
{
    tfm_vocab *v = calloc(1, sizeof *v);
    if (!v) return NULL;
    v->norm = norm ? *norm : tfm_norm_default_params();
    size_t n_slots = 1024;
    while (n_slots < 2 * expected) n_slots *= 2;
    /* (growing the pieces one doubling at a time copied them all over again) */
    v->cap = expected > 512 && expected < INT32_MAX ? (int32_t)expected : 512;
    v->pieces = malloc((size_t)v->cap * sizeof *v->pieces);
    if (!v->pieces || !index_resize(v, n_slots)) {
        free(v->pieces);
        free(v);
        return NULL;
    }
    for (int b = 0; b < 256; b++) v->byte_ids[b] = -1;
    return v;
}

/* Whether text is read in place, not owned. */
static bool is_borrowed(const tfm_vocab *v, const char *text)
{
    return v->borrowed && text >= v->borrowed && text < v->borrowed_end;
}

/* Appends a piece whose text is already known to be valid and new. */
static int32_t vocab_push(tfm_vocab *v, const char *text, size_t len, float score,
                          tfm_piece_type type)
{
    if (v->size == INT32_MAX) return -1;
    if (v->size == v->cap) {
        int32_t cap = v->cap ? (v->cap < INT32_MAX / 2 ? v->cap * 2 : INT32_MAX) : 512;
        vocab_piece *p = realloc(v->pieces, (size_t)cap * sizeof *p);
        if (!p) return -1;
        v->pieces = p;
        v->cap = cap;
    }
    if (2 * ((size_t)v->size + 1) > v->n_slots && !index_resize(v, 2 * v->n_slots)) return -1;
    const uint64_t hash = tfm_hash_bytes(text, len);
    const size_t slot = index_slot(v, text, len, hash);
    if (v->slots[slot] >= 0) return -1; /* already there */
    char *copy;
    if (is_borrowed(v, text)) {
        copy = (char *)text; /* NUL-terminated in place: tfm_vocab_from_arrays checked */
    } else {
        if (!(copy = malloc(len + 1))) return -1;
        memcpy(copy, text, len);
        copy[len] = 0;
    }
    int32_t id = v->size++;
    v->pieces[id] = (vocab_piece){.text = copy, .len = len, .hash = hash, .score = score,
                                  .type = type};
    v->slots[slot] = id;
    return id;
}

/* "<0xNN>" with upper-case hex, as SentencePiece spells byte pieces. */
static void byte_piece_text(unsigned char b, char out[7])
{
    static const char hex[] = "0123456789ABCDEF";
    memcpy(out, "<0x", 3);
    out[3] = hex[b >> 4];
    out[4] = hex[b & 15];
    out[5] = '>';
    out[6] = 0;
}

int tfm_vocab_byte_value(const tfm_vocab *v, int32_t id)
{
    if (id < 0 || id >= v->size || v->pieces[id].type != TFM_PIECE_BYTE) return -1;
    return tfm_byte_of_piece(v->pieces[id].text, v->pieces[id].len);
}

tfm_vocab *tfm_vocab_create_specials(const tfm_norm_params *norm)
{
    tfm_vocab *v = vocab_new(norm, 0);
    if (!v) return NULL;
    for (int i = 0; i < 4; i++) {
        if (vocab_push(v, special_text[i], strlen(special_text[i]), 0.0f,
                       TFM_PIECE_CONTROL) != i) {
            tfm_vocab_free(v);
            return NULL;
        }
    }
    return v;
}

tfm_status tfm_vocab_add_bytes(tfm_vocab *v, tfm_error *err)
{
    if (v->n_bytes > 0)
        return tfm_error_set(err, TFM_ERR_ARG, "the vocabulary has its byte pieces already");
    for (int b = 0; b < 256; b++) {
        char text[7];
        byte_piece_text((unsigned char)b, text);
        if (tfm_vocab_add(v, text, 6, 0.0f, TFM_PIECE_BYTE) < 0)
            return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory adding byte pieces");
    }
    return TFM_OK;
}

tfm_vocab *tfm_vocab_create(const tfm_norm_params *norm)
{
    tfm_vocab *v = tfm_vocab_create_specials(norm);
    if (v && tfm_vocab_add_bytes(v, NULL) != TFM_OK) {
        tfm_vocab_free(v);
        return NULL;
    }
    return v;
}

tfm_vocab *tfm_vocab_create_foreign(void)
{
    tfm_norm_params norm = tfm_norm_default_params();
    norm.form = TFM_NORM_NONE; /* SentencePiece normalizes, as its model says */
    tfm_vocab *v = vocab_new(&norm, 0);
    if (v) v->foreign = true;
    return v;
}

bool tfm_vocab_is_foreign(const tfm_vocab *v)
{
    return v->foreign;
}

void tfm_vocab_free(tfm_vocab *v)
{
    if (!v) return;
    tfm_spm_free(v->spm);
    free(v->from_spm);
    free(v->to_spm);
    for (int32_t i = 0; i < v->size; i++)
        if (!is_borrowed(v, v->pieces[i].text)) free(v->pieces[i].text);
    free(v->pieces);
    free(v->slots);
    if (v->release) v->release(v->release_ctx);
    free(v);
}

const char *tfm_piece_text_problem(const char *text, size_t len, char *buf, size_t bufsize)
{
    if (len == 0) return "is empty";
    const unsigned char *s = (const unsigned char *)text;
    for (size_t i = 0; i < len;) {
        if (s[i] > ' ' && s[i] < 0x7f) { /* printable ASCII other than the space */
            i++;
            continue;
        }
        int32_t cp;
        int n = tfm_utf8_decode(s + i, len - i, &cp);
        if (n == 0) {
            snprintf(buf, bufsize, "has invalid UTF-8 at byte %zu", i);
            return buf;
        }
        if (cp == ' ') return "contains a space (pieces spell spaces as U+2581)";
        /* C0 controls (tab, newline ...), DEL and the C1 controls would
         * break the line format or be invisible in it. */
        if (cp < 0x20 || (cp >= 0x7f && cp < 0xa0)) {
            snprintf(buf, bufsize, "contains the control character U+%04X", (unsigned)cp);
            return buf;
        }
        i += (size_t)n;
    }
    return NULL;
}

/* Whether a piece of this type may come next.  The layout rules are the
 * parser's, so every vocabulary built here can be saved and loaded back:
 * control pieces are only the 4 specials (made by create), the 256 byte
 * pieces come together in byte order, normal pieces after them, and user
 * symbols before or after them (the learner puts them before). */
static bool fits_layout(const tfm_vocab *v, const char *text, size_t len, tfm_piece_type type)
{
    if (v->foreign) return v->spm == NULL; /* any order, until the tokenizer is attached */
    switch (type) {
    case TFM_PIECE_CONTROL: return false;
    case TFM_PIECE_USER: return v->n_bytes == 0 || v->n_bytes == 256;
    case TFM_PIECE_BYTE: return v->n_bytes < 256 && tfm_byte_of_piece(text, len) == v->n_bytes;
    case TFM_PIECE_NORMAL: return v->n_bytes == 256;
    }
    return false;
}

/* Whether the text form can hold a score: finite, and zero or normal
 * (strtof refuses the subnormal numbers, which %.9g writes). */
static bool score_fits(float score)
{
    return isfinite(score) && (score == 0.0f || isnormal(score));
}

/* tfm_vocab_add for a text known to be fit for a piece. */
static int32_t add_checked_text(tfm_vocab *v, const char *text, size_t len, float score,
                                tfm_piece_type type)
{
    if ((unsigned)type > TFM_PIECE_BYTE || !score_fits(score)) return -1;
    if (!fits_layout(v, text, len, type)) return -1;
    int32_t id = vocab_push(v, text, len, score, type);
    if (id >= 0 && type == TFM_PIECE_BYTE) v->byte_ids[v->n_bytes++] = id;
    return id;
}

int32_t tfm_vocab_add(tfm_vocab *v, const char *text, size_t len, float score,
                      tfm_piece_type type)
{
    char why[64];
    if (tfm_piece_text_problem(text, len, why, sizeof why)) return -1;
    return add_checked_text(v, text, len, score, type);
}

/* ---- looking up --------------------------------------------------------------- */

int32_t tfm_vocab_size(const tfm_vocab *v)
{
    return v->size;
}

const char *tfm_vocab_piece(const tfm_vocab *v, int32_t id, size_t *len)
{
    if (id < 0 || id >= v->size) {
        if (len) *len = 0;
        return NULL;
    }
    if (len) *len = v->pieces[id].len;
    return v->pieces[id].text;
}

float tfm_vocab_score(const tfm_vocab *v, int32_t id)
{
    return (id >= 0 && id < v->size) ? v->pieces[id].score : 0.0f;
}

tfm_piece_type tfm_vocab_type(const tfm_vocab *v, int32_t id)
{
    return (id >= 0 && id < v->size) ? v->pieces[id].type : TFM_PIECE_NORMAL;
}

int32_t tfm_vocab_find(const tfm_vocab *v, const char *text, size_t len)
{
    return v->slots[index_slot(v, text, len, tfm_hash_bytes(text, len))];
}

int32_t tfm_vocab_byte_id(const tfm_vocab *v, unsigned char byte)
{
    return v->byte_ids[byte];
}

const tfm_norm_params *tfm_vocab_norm(const tfm_vocab *v)
{
    return &v->norm;
}

/* ---- the file -------------------------------------------------------------------- */

void tfm_vocab_header(const tfm_vocab *v, char *buf, size_t size)
{
    snprintf(buf, size, "#tfm-vocab 1 normalize=%s case-fold=%s pieces=%d%s",
             tfm_norm_form_name(v->norm.form), v->norm.case_fold ? "yes" : "no", (int)v->size,
             v->foreign ? " layout=sentencepiece" : "");
}

tfm_status tfm_vocab_write(const tfm_vocab *v, FILE *fp, tfm_error *err)
{
    char header[TFM_VOCAB_HEADER_MAX];
    tfm_vocab_header(v, header, sizeof header);
    fprintf(fp, "%s\n", header);
    if (v->spm) {
        size_t n;
        const void *bytes = tfm_spm_bytes(v->spm, &n);
        fputs(spm_line, fp);
        tfm_base64_write(fp, bytes, n);
        fputc('\n', fp);
    }
    for (int32_t i = 0; i < v->size; i++) {
        const vocab_piece *p = &v->pieces[i];
        /* %.9g prints every float exactly (merge ranks as plain integers). */
        fwrite(p->text, 1, p->len, fp);
        fprintf(fp, "\t%.9g\t%s\n", (double)p->score, type_name[p->type]);
    }
    if (fflush(fp) != 0 || ferror(fp))
        return tfm_error_set(err, TFM_ERR_IO, "writing the vocabulary failed: %s",
                             strerror(errno));
    return TFM_OK;
}

tfm_status tfm_vocab_save(const tfm_vocab *v, const char *path, tfm_error *err)
{
    tfm_atomic_file f;
    tfm_status st = tfm_atomic_open(&f, path, err);
    if (st != TFM_OK) return st;
    st = tfm_vocab_write(v, f.fp, err);
    if (st != TFM_OK) {
        tfm_atomic_abort(&f);
        return st;
    }
    return tfm_atomic_commit(&f, err);
}

tfm_status tfm_vocab_read_fd(int fd, const void *start, size_t have, tfm_vocab **out,
                             tfm_error *err)
{
    *out = NULL;
    tfm_buf data;
    tfm_buf_init(&data);
    tfm_status st = TFM_OK;
    if (have > TFM_VOCAB_MAX_BYTES || tfm_buf_append(&data, start, have) != TFM_OK)
        st = tfm_error_set(err, TFM_ERR_NOMEM, "out of memory reading the vocabulary");
    char chunk[65536];
    for (;;) {
        if (st != TFM_OK) break;
        ssize_t n = read(fd, chunk, sizeof chunk);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            st = tfm_error_set(err, TFM_ERR_IO, "read failed: %s", strerror(errno));
            break;
        }
        if (n == 0) break;
        if (data.len + (size_t)n > TFM_VOCAB_MAX_BYTES) {
            st = tfm_error_set(err, TFM_ERR_FORMAT,
                               "more than %u bytes: too large for a vocabulary (a model "
                               "stores its vocabulary in its header, which holds at most that)",
                               TFM_VOCAB_MAX_BYTES);
            break;
        }
        if (tfm_buf_append(&data, chunk, (size_t)n) != TFM_OK)
            st = tfm_error_set(err, TFM_ERR_NOMEM, "out of memory reading the vocabulary");
    }
    if (st == TFM_OK) st = tfm_vocab_parse(data.data ? data.data : "", data.len, out, err);
    tfm_buf_free(&data);
    return st;
}

tfm_status tfm_vocab_load(const char *path, tfm_vocab **out, tfm_error *err)
{
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return tfm_error_set(err, TFM_ERR_IO, "cannot open: %s", strerror(errno));
    tfm_status st = tfm_vocab_read_fd(fd, NULL, 0, out, err);
    close(fd);
    return st;
}

/* One line of the file: its bytes without the '\n', and its number. */
typedef struct line_cursor {
    const char *data;
    size_t size, pos;
    long number;
} line_cursor;

static bool next_line(line_cursor *c, const char **line, size_t *len)
{
    if (c->pos >= c->size) return false;
    const char *start = c->data + c->pos;
    const char *nl = memchr(start, '\n', c->size - c->pos);
    *line = start;
    *len = nl ? (size_t)(nl - start) : c->size - c->pos;
    c->pos += *len + (nl ? 1 : 0);
    c->number++;
    return true;
}

/* Prints at most 40 bytes of a piece for a message, cut on a character
 * boundary; the piece has been checked to be valid UTF-8 by then or is
 * printed only up to its first invalid byte. */
static void quote_piece(const char *text, size_t len, char *buf, size_t bufsize)
{
    size_t keep = len < 40 ? len : 40;
    while (keep > 0 && keep < len && ((unsigned char)text[keep] & 0xC0) == 0x80) keep--;
    snprintf(buf, bufsize, "%.*s%s", (int)keep, text, keep < len ? "..." : "");
}

/* Parses "key=value" fields of the header line; every key is required once. */
static tfm_status parse_header(const char *line, size_t len, tfm_norm_params *norm,
                               int32_t *n_pieces, bool *foreign, tfm_error *err)
{
    *foreign = false;
    bool seen_layout = false;
    static const char magic[] = "#tfm-vocab ";
    size_t mlen = sizeof magic - 1;
    if (len < mlen || memcmp(line, magic, mlen) != 0)
        return tfm_error_set(err, TFM_ERR_FORMAT,
                             "line 1: not a vocabulary file: expected '#tfm-vocab 1 "
                             "normalize=... case-fold=... pieces=N'");
    bool seen_norm = false, seen_fold = false, seen_pieces = false, seen_version = false;
    *norm = tfm_norm_default_params();
    size_t pos = mlen;
    while (pos < len) {
        const char *sp = memchr(line + pos, ' ', len - pos);
        size_t flen = sp ? (size_t)(sp - (line + pos)) : len - pos;
        char field[64];
        if (flen == 0)
            return tfm_error_set(err, TFM_ERR_FORMAT,
                                 "line 1: header fields must be separated by single spaces");
        if (flen >= sizeof field)
            return tfm_error_set(err, TFM_ERR_FORMAT, "line 1: header field too long: '%.40s...'",
                                 line + pos);
        memcpy(field, line + pos, flen);
        field[flen] = 0;
        pos += flen + (sp ? 1 : 0);
        if (sp && pos == len)
            return tfm_error_set(err, TFM_ERR_FORMAT, "line 1: trailing space in the header");
        if (memchr(field, 0, flen))
            return tfm_error_set(err, TFM_ERR_FORMAT, "line 1: NUL byte in the header");
        if (!seen_version) {
            if (strcmp(field, "1") != 0)
                return tfm_error_set(err, TFM_ERR_FORMAT,
                                     "line 1: unsupported vocabulary version '%s' (expected 1)",
                                     field);
            seen_version = true;
            continue;
        }
        char *eq = strchr(field, '=');
        if (!eq)
            return tfm_error_set(err, TFM_ERR_FORMAT,
                                 "line 1: expected key=value in the header, found '%s'", field);
        *eq = 0;
        const char *key = field, *value = eq + 1;
        bool *seen;
        if (strcmp(key, "normalize") == 0) {
            seen = &seen_norm;
            if (!tfm_norm_form_parse(value, &norm->form))
                return tfm_error_set(err, TFM_ERR_FORMAT,
                                     "line 1: unknown normalize=%s (expected none, nfc or nfkc)",
                                     value);
        } else if (strcmp(key, "case-fold") == 0) {
            seen = &seen_fold;
            if (strcmp(value, "yes") == 0)
                norm->case_fold = true;
            else if (strcmp(value, "no") == 0)
                norm->case_fold = false;
            else
                return tfm_error_set(err, TFM_ERR_FORMAT,
                                     "line 1: case-fold=%s: expected yes or no", value);
        } else if (strcmp(key, "pieces") == 0) {
            seen = &seen_pieces;
            char *end;
            errno = 0;
            long n = (value[0] >= '0' && value[0] <= '9') ? strtol(value, &end, 10) : -1;
            if (n < 0 || *end || errno)
                return tfm_error_set(err, TFM_ERR_FORMAT,
                                     "line 1: pieces=%s: expected a decimal count", value);
            if (n < 4 || n > INT32_MAX / 2) /* (at least 260 unless foreign: below) */
                return tfm_error_set(err, TFM_ERR_FORMAT,
                                     "line 1: pieces=%ld is out of range (at least 4: the "
                                     "specials)",
                                     n);
            *n_pieces = (int32_t)n;
        } else if (strcmp(key, "layout") == 0) {
            seen = &seen_layout;
            if (strcmp(value, "sentencepiece") != 0)
                return tfm_error_set(err, TFM_ERR_FORMAT,
                                     "line 1: layout=%s: expected sentencepiece", value);
            *foreign = true;
        } else {
            return tfm_error_set(err, TFM_ERR_FORMAT,
                                 "line 1: unknown header key '%s' (expected normalize, "
                                 "case-fold and pieces)",
                                 key);
        }
        if (*seen)
            return tfm_error_set(err, TFM_ERR_FORMAT, "line 1: header key '%s' given twice", key);
        *seen = true;
    }
    if (!*foreign && seen_pieces && *n_pieces < 4 + 256)
        return tfm_error_set(err, TFM_ERR_FORMAT,
                             "line 1: pieces=%d is out of range (at least 260: the 4 specials "
                             "and the 256 byte pieces)",
                             (int)*n_pieces);
    if (!seen_version || !seen_norm || !seen_fold || !seen_pieces)
        return tfm_error_set(err, TFM_ERR_FORMAT, "line 1: the header lacks %s",
                             !seen_version ? "the version"
                             : !seen_norm  ? "normalize="
                             : !seen_fold  ? "case-fold="
                                           : "pieces=");
    return TFM_OK;
}

static bool parse_type(const char *s, size_t len, tfm_piece_type *type)
{
    for (int t = 0; t < 4; t++) {
        if (strlen(type_name[t]) == len && memcmp(type_name[t], s, len) == 0) {
            *type = (tfm_piece_type)t;
            return true;
        }
    }
    return false;
}

/* A score of up to 7 digits with no point, as learnt vocabularies write
 * them ("0", "-1234"): exact in a float, so the value strtof gives,
 * without its cost (a tenth of reading an 8k vocabulary). */
static bool parse_small_integer(const char *s, size_t len, float *score)
{
    size_t i = (len > 0 && (s[0] == '-' || s[0] == '+')) ? 1 : 0;
    if (len == i || len - i > 7) return false;
    int32_t v = 0;
    for (size_t k = i; k < len; k++) {
        if (s[k] < '0' || s[k] > '9') return false;
        v = v * 10 + (s[k] - '0');
    }
    *score = s[0] == '-' ? -(float)v : (float)v; /* "-0" is -0.0f, as strtof */
    return true;
}

/* A score is a finite decimal number, nothing before or after it. */
static bool parse_score(const char *s, size_t len, float *score)
{
    if (parse_small_integer(s, len, score)) return true;
    char tmp[48];
    if (len == 0 || len >= sizeof tmp) return false;
    memcpy(tmp, s, len);
    tmp[len] = 0;
    char c = tmp[0];
    if (!(c == '-' || c == '+' || c == '.' || (c >= '0' && c <= '9'))) return false;
    for (size_t i = 0; i < len; i++) {
        c = tmp[i];
        /* Rules out inf, nan, hex floats and embedded NULs that strtof takes. */
        if (!((c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' ||
              c == 'E'))
            return false;
    }
    char *end;
    errno = 0;
    float f = strtof(tmp, &end);
    if (*end || !isfinite(f) || errno == ERANGE) return false;
    *score = f;
    return true;
}

/* Where a piece comes from, for messages: line `number` of the text form
 * (id + 2 is a piece's line), or piece `number` of the arrays (its id). */
typedef struct piece_origin {
    const char *unit; /* "line" or "piece" */
    long number;
    long id_to_number; /* added to an id to give its number */
} piece_origin;

/* Checks the text of a piece read from a file (its message names o). */
static tfm_status check_read_text(const char *text, size_t tlen, piece_origin o, tfm_error *err)
{
    char why[80];
    const char *problem = tfm_piece_text_problem(text, tlen, why, sizeof why);
    if (problem)
        return tfm_error_set(err, TFM_ERR_FORMAT, "%s %ld: the piece %s", o.unit, o.number,
                             problem);
    return TFM_OK;
}

/* Adds a piece read from a file, its text checked (check_read_text), after
 * checking it against what the layout expects at this point; messages
 * name o. */
static tfm_status add_read_piece(tfm_vocab *v, const char *text, size_t tlen, float score,
                                 tfm_piece_type type, piece_origin o, tfm_error *err)
{
    char q[64]; /* the piece quoted, for a message (made only then) */
    int32_t id = v->size;
    if (v->foreign) {
        /* a model from elsewhere: its pieces in its order, any types */
    } else if (id < 4) {
        const char *want = special_text[id];
        if (type != TFM_PIECE_CONTROL || tlen != strlen(want) || memcmp(text, want, tlen) != 0)
            return tfm_error_set(err, TFM_ERR_FORMAT,
                                 "%s %ld: the special pieces must come first: expected '%s' "
                                 "with type control",
                                 o.unit, o.number, want);
    } else if (type == TFM_PIECE_CONTROL) {
        quote_piece(text, tlen, q, sizeof q);
        return tfm_error_set(err, TFM_ERR_FORMAT,
                             "%s %ld: control piece '%s': only the 4 special pieces <pad> "
                             "<unk> <s> </s> have type control",
                             o.unit, o.number, q);
    } else if (v->n_bytes == 0 && type == TFM_PIECE_USER) {
        /* user symbols before the byte pieces: the learner's layout */
    } else if (v->n_bytes < 256) {
        char want[7];
        byte_piece_text((unsigned char)v->n_bytes, want);
        if (type != TFM_PIECE_BYTE || tlen != 6 || memcmp(text, want, 6) != 0) {
            quote_piece(text, tlen, q, sizeof q);
            return tfm_error_set(err, TFM_ERR_FORMAT,
                                 "%s %ld: byte piece out of place: expected '%s' with type "
                                 "byte (the byte pieces <0x00>..<0xFF> follow the specials and "
                                 "user symbols, in order), found '%s' with type %s",
                                 o.unit, o.number, want, q, type_name[type]);
        }
    } else if (type == TFM_PIECE_BYTE) {
        quote_piece(text, tlen, q, sizeof q);
        return tfm_error_set(err, TFM_ERR_FORMAT,
                             "%s %ld: byte piece out of place: '%s' after all 256 byte pieces",
                             o.unit, o.number, q);
    }

    int32_t existing = tfm_vocab_find(v, text, tlen);
    if (existing >= 0) {
        quote_piece(text, tlen, q, sizeof q);
        return tfm_error_set(err, TFM_ERR_FORMAT, "%s %ld: duplicate piece '%s' (first on %s %ld)",
                             o.unit, o.number, q, o.unit, (long)existing + o.id_to_number);
    }
    /* The specials were checked above; tfm_vocab_add takes no control pieces. */
    id = type == TFM_PIECE_CONTROL || v->foreign ? vocab_push(v, text, tlen, score, type)
                                                 : add_checked_text(v, text, tlen, score, type);
    if (id < 0) return tfm_error_set(err, TFM_ERR_NOMEM, "%s %ld: out of memory", o.unit, o.number);
    return TFM_OK;
}

/* Reads one piece line and adds its piece. */
static tfm_status parse_piece_line(tfm_vocab *v, const char *line, size_t len, long lineno,
                                   tfm_error *err)
{
    const char *tab1 = memchr(line, '\t', len);
    const char *tab2 = tab1 ? memchr(tab1 + 1, '\t', len - (size_t)(tab1 + 1 - line)) : NULL;
    const char *tab3 = tab2 ? memchr(tab2 + 1, '\t', len - (size_t)(tab2 + 1 - line)) : NULL;
    if (!tab1 || !tab2 || tab3)
        return tfm_error_set(err, TFM_ERR_FORMAT, "line %ld: expected PIECE<TAB>SCORE<TAB>TYPE",
                             lineno);
    const char *score_s = tab1 + 1;
    size_t slen = (size_t)(tab2 - score_s);
    const char *type_s = tab2 + 1;
    size_t ylen = len - (size_t)(type_s - line);

    const piece_origin o = {"line", lineno, 2};
    tfm_status st = check_read_text(line, (size_t)(tab1 - line), o, err);
    if (st != TFM_OK) return st;
    char q[64];
    float score;
    if (!parse_score(score_s, slen, &score)) {
        quote_piece(score_s, slen, q, sizeof q);
        return tfm_error_set(err, TFM_ERR_FORMAT,
                             "line %ld: bad score '%s' (expected a finite decimal number)", lineno,
                             q);
    }
    tfm_piece_type type;
    if (!parse_type(type_s, ylen, &type)) {
        quote_piece(type_s, ylen, q, sizeof q);
        return tfm_error_set(err, TFM_ERR_FORMAT,
                             "line %ld: unknown type '%s' (expected normal, control, user or "
                             "byte)",
                             lineno, q);
    }
    return add_read_piece(v, line, (size_t)(tab1 - line), score, type, o, err);
}

tfm_status tfm_vocab_parse(const char *data, size_t size, tfm_vocab **out, tfm_error *err)
{
    *out = NULL;
    line_cursor c = {.data = data, .size = size};
    const char *line;
    size_t len;
    if (!next_line(&c, &line, &len))
        return tfm_error_set(err, TFM_ERR_FORMAT,
                             "line 1: empty file: expected a '#tfm-vocab' header");
    if (len > 0 && line[len - 1] == '\r')
        return tfm_error_set(err, TFM_ERR_FORMAT,
                             "line 1: the line ends with CR LF (a Windows line ending); the "
                             "file must use LF only");
    tfm_norm_params norm;
    int32_t n_pieces = 0;
    bool foreign;
    tfm_status st = parse_header(line, len, &norm, &n_pieces, &foreign, err);
    if (st != TFM_OK) return st;

    /* sized for the header's count, but no more than the text can hold (a
     * piece line takes 8 bytes at the least): a header cannot make it huge */
    const size_t most = size / 8 + 1;
    tfm_vocab *v = vocab_new(&norm, (size_t)n_pieces < most ? (size_t)n_pieces : most);
    if (!v) return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    v->foreign = foreign;
    tfm_buf spm;
    tfm_buf_init(&spm);
    const size_t spm_len = sizeof spm_line - 1;
    const line_cursor before = c;
    if (foreign && next_line(&c, &line, &len)) {
        if (len >= spm_len && memcmp(line, spm_line, spm_len) == 0) {
            if (!tfm_base64_read(line + spm_len, len - spm_len, &spm) || spm.len == 0) {
                st = tfm_error_set(err, TFM_ERR_FORMAT, "line 2: the SentencePiece model is "
                                                        "not base64 text");
                goto fail;
            }
        } else {
            c = before; /* no model: line 2 is a piece */
        }
    }
    while (next_line(&c, &line, &len)) {
        if (v->size == n_pieces) {
            st = tfm_error_set(err, TFM_ERR_FORMAT,
                               "line %ld: the header says pieces=%d but the file has more lines",
                               c.number, (int)n_pieces);
            goto fail;
        }
        if (len > 0 && line[len - 1] == '\r') {
            st = tfm_error_set(err, TFM_ERR_FORMAT,
                               "line %ld: the line ends with CR LF (a Windows line ending); the "
                               "file must use LF only",
                               c.number);
            goto fail;
        }
        st = parse_piece_line(v, line, len, c.number, err);
        if (st != TFM_OK) goto fail;
    }
    if (v->size < n_pieces) {
        st = tfm_error_set(err, TFM_ERR_FORMAT,
                           "line %ld: the file ends after %d pieces but the header says "
                           "pieces=%d",
                           c.number, (int)v->size, (int)n_pieces);
        goto fail;
    }
    if (spm.len > 0 && (st = tfm_vocab_attach_spm(v, spm.data, spm.len, err)) != TFM_OK) {
        tfm_error_prefix(err, "line 2: the SentencePiece model");
        goto fail;
    }
    if (v->n_bytes < 256 && !v->foreign) {
        /* E.g. the specials and many user symbols, then the end. */
        st = tfm_error_set(err, TFM_ERR_FORMAT, "line %ld: the file has %d of the 256 byte pieces",
                           c.number, v->n_bytes);
        goto fail;
    }
    tfm_buf_free(&spm);
    *out = v;
    return TFM_OK;
fail:
    tfm_buf_free(&spm);
    tfm_vocab_free(v);
    return st;
}

/* ---- reading the arrays (vocab_arrays.c) --------------------------------------------- */

tfm_status vocab_read_begin(const char *header, size_t len, size_t pieces, tfm_vocab **out,
                            tfm_error *err)
{
    *out = NULL;
    tfm_norm_params norm;
    bool foreign;
    int32_t n_pieces;
    tfm_status st = parse_header(header, len, &norm, &n_pieces, &foreign, err);
    if (st != TFM_OK) return st;
    if ((size_t)n_pieces != pieces)
        return tfm_error_set(err, TFM_ERR_FORMAT,
                             "the header says pieces=%d but the arrays hold %zu scores and types",
                             (int)n_pieces, pieces);
    if (!(*out = vocab_new(&norm, pieces)))
        return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    (*out)->foreign = foreign;
    return TFM_OK;
}

void vocab_borrow(tfm_vocab *v, const char *begin, const char *end)
{
    v->borrowed = begin;
    v->borrowed_end = end;
}

void vocab_set_release(tfm_vocab *v, void (*release)(void *ctx), void *ctx)
{
    v->release = release;
    v->release_ctx = ctx;
}

tfm_status vocab_add_read(tfm_vocab *v, const char *text, size_t len, float score,
                          tfm_piece_type type, tfm_error *err)
{
    const piece_origin o = {"piece", v->size, 0};
    if (!score_fits(score))
        return tfm_error_set(err, TFM_ERR_FORMAT,
                             "piece %ld: the score %g is not a finite normal number (or 0)",
                             o.number, (double)score);
    if ((unsigned)type > TFM_PIECE_BYTE)
        return tfm_error_set(err, TFM_ERR_FORMAT, "piece %ld: unknown type %u (0 to 3)", o.number,
                             (unsigned)type);
    tfm_status st = check_read_text(text, len, o, err);
    return st == TFM_OK ? add_read_piece(v, text, len, score, type, o, err) : st;
}

tfm_status vocab_read_end(const tfm_vocab *v, tfm_error *err)
{
    if (v->n_bytes < 256 && !v->foreign)
        return tfm_error_set(err, TFM_ERR_FORMAT, "the vocabulary has %d of the 256 byte pieces",
                             v->n_bytes);
    return TFM_OK;
}

int32_t tfm_vocab_merges(const tfm_vocab *v)
{
    int32_t merges = 0;
    for (int32_t id = 0; id < tfm_vocab_size(v); id++) merges += tfm_vocab_score(v, id) < 0;
    return merges;
}

/* ---- the vocabulary of a model from elsewhere: its SentencePiece model -------------- */

tfm_status tfm_vocab_attach_spm(tfm_vocab *v, const void *data, size_t size, tfm_error *err)
{
    return vocab_attach_spm(v, data, size, NULL, 0, err);
}

tfm_status vocab_attach_spm(tfm_vocab *v, const void *data, size_t size, const int32_t *trie,
                            size_t trie_units, tfm_error *err)
{
    if (!v->foreign || v->spm)
        return tfm_error_set(err, TFM_ERR_ARG, "a SentencePiece model attaches once, to a "
                                               "vocabulary made by tfm_vocab_create_foreign");
    tfm_spm *spm;
    tfm_status st = trie ? tfm_spm_parse_with_trie(data, size, trie, trie_units, &spm, err)
                         : tfm_spm_parse(data, size, &spm, err);
    if (st != TFM_OK) return st;
    const int32_t n_spm = tfm_spm_size(spm);
    int32_t *from = malloc(((size_t)n_spm + 1) * sizeof *from);
    int32_t *to = malloc(((size_t)v->size + 1) * sizeof *to);
    if (!from || !to) {
        free(from);
        free(to);
        tfm_spm_free(spm);
        return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    }
    /* A SentencePiece piece the vocabulary lacks is the vocabulary's <unk>, as
     * Marian's vocabularies map it; the vocabulary's own control pieces
     * (</s>, <s>, <pad>) and pieces SentencePiece does not make (a
     * multilingual model's >>fra<<) have none. */
    const int32_t unk = tfm_vocab_find(v, "<unk>", 5);
    for (int32_t i = 0; i < n_spm; i++) {
        size_t len;
        const char *text = tfm_spm_piece(spm, i, &len);
        int32_t id = tfm_vocab_find(v, text, len);
        from[i] = id >= 0 ? id : unk;
    }
    for (int32_t id = 0; id < v->size; id++) {
        const vocab_piece *p = &v->pieces[id];
        to[id] = p->type == TFM_PIECE_CONTROL ? -1 : tfm_spm_find(spm, p->text, p->len);
    }
    if (unk >= 0) to[unk] = tfm_spm_unk_id(spm);
    v->spm = spm;
    v->from_spm = from;
    v->to_spm = to;
    return TFM_OK;
}

const tfm_spm *tfm_vocab_spm(const tfm_vocab *v)
{
    return v->spm;
}

int32_t tfm_vocab_from_spm(const tfm_vocab *v, int32_t spm_id)
{
    if (!v->spm || spm_id < 0 || spm_id >= tfm_spm_size(v->spm)) return -1;
    return v->from_spm[spm_id];
}

int32_t tfm_vocab_to_spm(const tfm_vocab *v, int32_t id)
{
    if (!v->spm || id < 0 || id >= v->size) return -1;
    return v->to_spm[id];
}
