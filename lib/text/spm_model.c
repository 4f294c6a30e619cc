/* spm_model.c - SentencePiece model files (tfm/spm.h): the protobuf
 * ModelProto that spm_train writes, read field by field, checked, and made
 * into the lookups that encoding and decoding need.
 *
 * The reader is a small protobuf wire-format parser written here rather than
 * protobuf-c: we read a handful of fields of one message type, and
 * protobuf-c would need C code generated at build time from a copy of
 * sentencepiece_model.proto.  The wire format (protobuf's encoding guide):
 * a message is a sequence of fields, each a varint tag (field number << 3 |
 * wire type) and a value: a varint (type 0), 8 bytes (1), a varint length
 * and that many bytes (2: strings, bytes, sub-messages), or 4 bytes (5:
 * float).  Every length is checked against the bytes left; fields we do not
 * know are skipped, as protobuf readers do; a known field with the wrong
 * wire type is an error (protobuf would skip it; a file that has one is not
 * what spm_train wrote).
 *
 * The fields read (numbers from sentencepiece_model.proto):
 *   ModelProto      1 pieces (repeated), 2 trainer_spec, 3 normalizer_spec,
 *                   5 denormalizer_spec (4, self_test_data, is skipped)
 *   SentencePiece   1 piece, 2 score (float), 3 type (enum)
 *   TrainerSpec     3 model_type, 24 treat_whitespace_as_suffix,
 *                   35 byte_fallback, 40-43 unk/bos/eos/pad ids,
 *                   44 unk_surface, 45-48 unk/bos/eos/pad piece texts
 *   NormalizerSpec  2 precompiled_charsmap, 3 add_dummy_prefix,
 *                   4 remove_extra_whitespaces, 5 escape_whitespaces
 * A sub-message that comes twice is merged (later fields win), as protobuf
 * does.  The checks after parsing are those of SentencePiece's loader
 * (model_interface.cc InitializePieces): no empty or repeated piece, one
 * unknown piece, 256 byte pieces exactly when byte_fallback; and ours: texts
 * valid UTF-8 without NUL, scores finite. */
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "text/encode_internal.h"
#include "text/spm_internal.h"
#include "tfm/io.h"

#define SPM_MAX_FILE ((uint64_t)1 << 30)

/* ---- the wire format ------------------------------------------------------------ */

/* A message being read: the bytes left, and where the message began in the
 * file (for messages). */
typedef struct pb_reader {
    const unsigned char *p, *end;
    const unsigned char *file;
} pb_reader;

enum { WIRE_VARINT = 0, WIRE_I64 = 1, WIRE_LEN = 2, WIRE_I32 = 5 };

static const char *const wire_name[8] = {"a varint", "8 bytes", "a length-delimited field",
                                         "a group start", "a group end", "4 bytes",
                                         "wire type 6", "wire type 7"};

/* A varint of at most 10 bytes; false when truncated or too long. */
static bool pb_varint(pb_reader *r, uint64_t *out)
{
    uint64_t v = 0;
    for (int shift = 0; shift < 70; shift += 7) {
        if (r->p == r->end) return false;
        unsigned char b = *r->p++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = v;
            return true;
        }
    }
    return false;
}

/* One field: its number, wire type, and its value (varint in *v, fixed32
 * in *v, or the bytes of a length-delimited field in *data / *len). */
typedef struct pb_field {
    uint32_t number;
    int wire;
    uint64_t v;
    const unsigned char *data;
    size_t len;
    size_t offset; /* of the tag in the file */
} pb_field;

/* Reads the next field of r: TFM_OK, TFM_EOF at the end of the message, or
 * TFM_ERR_FORMAT saying what is wrong (what: the message, for messages). */
static tfm_status pb_next(pb_reader *r, pb_field *f, const char *what, tfm_error *err)
{
    if (r->p == r->end) return TFM_EOF;
    f->offset = (size_t)(r->p - r->file);
    f->data = r->p; /* a field of another wire type holds no bytes here */
    f->len = 0;
    uint64_t tag;
    if (!pb_varint(r, &tag))
        return tfm_error_set(err, TFM_ERR_FORMAT, "%s: a field tag at byte %zu runs past the end",
                             what, f->offset);
    f->number = (uint32_t)(tag >> 3);
    f->wire = (int)(tag & 7);
    if (tag >> 3 == 0 || tag >> 32)
        return tfm_error_set(err, TFM_ERR_FORMAT, "%s: bad field number %llu at byte %zu",
                             what, (unsigned long long)(tag >> 3), f->offset);
    switch (f->wire) {
    case WIRE_VARINT:
        if (!pb_varint(r, &f->v))
            return tfm_error_set(err, TFM_ERR_FORMAT,
                                 "%s: field %u at byte %zu: the varint runs past the end", what,
                                 f->number, f->offset);
        return TFM_OK;
    case WIRE_I64:
    case WIRE_I32: {
        size_t n = f->wire == WIRE_I64 ? 8 : 4;
        if ((size_t)(r->end - r->p) < n)
            return tfm_error_set(err, TFM_ERR_FORMAT,
                                 "%s: field %u at byte %zu: %zu bytes past the end", what,
                                 f->number, f->offset, n - (size_t)(r->end - r->p));
        f->v = 0;
        for (size_t i = 0; i < n; i++) f->v |= (uint64_t)r->p[i] << (8 * i);
        r->p += n;
        return TFM_OK;
    }
    case WIRE_LEN: {
        uint64_t len;
        if (!pb_varint(r, &len))
            return tfm_error_set(err, TFM_ERR_FORMAT,
                                 "%s: field %u at byte %zu: its length runs past the end", what,
                                 f->number, f->offset);
        if (len > (uint64_t)(r->end - r->p))
            return tfm_error_set(err, TFM_ERR_FORMAT,
                                 "%s: field %u at byte %zu: its length %llu runs past the end "
                                 "(%zu bytes left)",
                                 what, f->number, f->offset, (unsigned long long)len,
                                 (size_t)(r->end - r->p));
        f->data = r->p;
        f->len = (size_t)len;
        r->p += len;
        return TFM_OK;
    }
    default:
        return tfm_error_set(err, TFM_ERR_FORMAT,
                             "%s: field %u at byte %zu has %s, which this reader does not take",
                             what, f->number, f->offset, wire_name[f->wire]);
    }
}

static tfm_status wrong_wire(const pb_field *f, const char *what, const char *name,
                             const char *expected, tfm_error *err)
{
    return tfm_error_set(err, TFM_ERR_FORMAT, "%s: %s (field %u at byte %zu) is %s, not %s",
                         what, name, f->number, f->offset, wire_name[f->wire], expected);
}

#define EXPECT(f, w, what, name, expected)                                                   \
    do {                                                                                     \
        if ((f)->wire != (w)) return wrong_wire(f, what, name, expected, err);              \
    } while (0)

/* A copy of a string field, NUL-terminated. */
static tfm_status dup_field(const pb_field *f, char **out, tfm_error *err)
{
    char *s = malloc(f->len + 1);
    if (!s) return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    memcpy(s, f->data, f->len);
    s[f->len] = 0;
    free(*out);
    *out = s;
    return TFM_OK;
}

/* ---- the messages ------------------------------------------------------------------ */

/* What parsing collects before the model is built. */
typedef struct spm_parse {
    tfm_spm *m;
    size_t text_len, text_cap;
    int32_t cap;
    int64_t model_type;
    bool has_unk_surface;
} spm_parse;

static tfm_status parse_piece(spm_parse *ps, pb_reader *r, tfm_error *err)
{
    tfm_spm *m = ps->m;
    char what[48];
    snprintf(what, sizeof what, "piece %d", m->n);
    if (m->n == INT32_MAX) return tfm_error_set(err, TFM_ERR_FORMAT, "too many pieces");
    if (m->n == ps->cap) {
        int32_t cap = ps->cap < 1024 ? 1024 : ps->cap < INT32_MAX / 2 ? ps->cap * 2 : INT32_MAX;
        spm_piece *p = realloc(m->pieces, (size_t)cap * sizeof *p);
        if (!p) return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
        m->pieces = p;
        ps->cap = cap;
    }
    const unsigned char *text = NULL;
    size_t len = 0;
    bool has_text = false;
    float score = 0;
    int64_t type = TFM_SPM_NORMAL;
    pb_field f;
    tfm_status s;
    while ((s = pb_next(r, &f, what, err)) == TFM_OK) {
        switch (f.number) {
        case 1:
            EXPECT(&f, WIRE_LEN, what, "its text", "a string");
            text = f.data;
            len = f.len;
            has_text = true;
            break;
        case 2: {
            EXPECT(&f, WIRE_I32, what, "score", "a float");
            uint32_t bits = (uint32_t)f.v;
            memcpy(&score, &bits, sizeof score);
            break;
        }
        case 3:
            EXPECT(&f, WIRE_VARINT, what, "type", "a varint");
            type = (int32_t)f.v;
            break;
        default: break;
        }
    }
    if (s != TFM_EOF) return s;
    if (!has_text || len == 0)
        return tfm_error_set(err, TFM_ERR_FORMAT, "%s: the piece is empty", what);
    if (memchr(text, 0, len))
        return tfm_error_set(err, TFM_ERR_FORMAT, "%s: the piece holds a NUL byte", what);
    for (size_t i = 0; i < len;) {
        int32_t cp;
        int k = tfm_utf8_decode(text + i, len - i, &cp);
        if (k == 0)
            return tfm_error_set(err, TFM_ERR_FORMAT,
                                 "%s: the piece is not valid UTF-8 (byte %zu of it, 0x%02X)",
                                 what, i, text[i]);
        i += (size_t)k;
    }
    if (!isfinite(score))
        return tfm_error_set(err, TFM_ERR_FORMAT, "%s: its score is %s, not a finite float",
                             what, isnan(score) ? "NaN" : "infinite");
    if (type < TFM_SPM_NORMAL || type > TFM_SPM_BYTE)
        return tfm_error_set(err, TFM_ERR_FORMAT, "%s: unknown piece type %lld", what,
                             (long long)type);
    if (len > UINT32_MAX - ps->text_len - 1)
        return tfm_error_set(err, TFM_ERR_FORMAT, "%s: the pieces' texts are too long", what);
    if (ps->text_len + len + 1 > ps->text_cap) {
        size_t cap = ps->text_cap ? ps->text_cap : 1 << 16;
        while (cap < ps->text_len + len + 1) cap *= 2;
        char *t = realloc(m->text, cap);
        if (!t) return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
        m->text = t;
        ps->text_cap = cap;
    }
    memcpy(m->text + ps->text_len, text, len);
    m->text[ps->text_len + len] = 0;
    m->pieces[m->n++] = (spm_piece){.off = (uint32_t)ps->text_len, .len = (uint32_t)len,
                                    .score = score, .type = (uint8_t)type};
    ps->text_len += len + 1;
    return TFM_OK;
}

static tfm_status parse_trainer(spm_parse *ps, pb_reader *r, tfm_error *err)
{
    tfm_spm *m = ps->m;
    const char *what = "trainer_spec";
    pb_field f;
    tfm_status s;
    while ((s = pb_next(r, &f, what, err)) == TFM_OK) {
        switch (f.number) {
        case 3:
            EXPECT(&f, WIRE_VARINT, what, "model_type", "a varint");
            ps->model_type = (int32_t)f.v;
            break;
        case 24:
            EXPECT(&f, WIRE_VARINT, what, "treat_whitespace_as_suffix", "a varint");
            m->ws_suffix = f.v != 0;
            break;
        case 35:
            EXPECT(&f, WIRE_VARINT, what, "byte_fallback", "a varint");
            m->byte_fallback = f.v != 0;
            break;
        case 40: case 41: case 42: case 43: {
            static const char *const names[] = {"unk_id", "bos_id", "eos_id", "pad_id"};
            EXPECT(&f, WIRE_VARINT, what, names[f.number - 40], "a varint");
            int32_t *ids[] = {&m->spec_unk_id, &m->spec_bos_id, &m->spec_eos_id, &m->spec_pad_id};
            *ids[f.number - 40] = (int32_t)f.v;
            break;
        }
        case 44:
            EXPECT(&f, WIRE_LEN, what, "unk_surface", "a string");
            if ((s = dup_field(&f, &m->unk_surface, err)) != TFM_OK) return s;
            m->unk_surface_len = f.len;
            ps->has_unk_surface = true;
            break;
        case 45: case 46: case 47: case 48: {
            static const char *const names[] = {"unk_piece", "bos_piece", "eos_piece", "pad_piece"};
            EXPECT(&f, WIRE_LEN, what, names[f.number - 45], "a string");
            if ((s = dup_field(&f, &m->special_text[f.number - 45], err)) != TFM_OK) return s;
            break;
        }
        default: break;
        }
    }
    return s == TFM_EOF ? TFM_OK : s;
}

static tfm_status parse_normalizer(pb_reader *r, spm_norm *spec, const char *what,
                                   tfm_error *err)
{
    pb_field f;
    tfm_status s;
    while ((s = pb_next(r, &f, what, err)) == TFM_OK) {
        switch (f.number) {
        case 2:
            EXPECT(&f, WIRE_LEN, what, "precompiled_charsmap", "bytes");
            spec->has_map = false;
            if (f.len > 0 && (s = spm_norm_set_map(spec, f.data, f.len, err)) != TFM_OK) {
                tfm_error_prefix(err, "%s", what);
                return s;
            }
            break;
        case 3: case 4: case 5: {
            static const char *const names[] = {"add_dummy_prefix", "remove_extra_whitespaces",
                                                "escape_whitespaces"};
            EXPECT(&f, WIRE_VARINT, what, names[f.number - 3], "a varint");
            bool *flags[] = {&spec->add_dummy_prefix, &spec->remove_extra_whitespaces,
                             &spec->escape_whitespaces};
            *flags[f.number - 3] = f.v != 0;
            break;
        }
        default: break;
        }
    }
    return s == TFM_EOF ? TFM_OK : s;
}

static tfm_status parse_model(spm_parse *ps, tfm_error *err)
{
    tfm_spm *m = ps->m;
    pb_reader r = {m->bytes, m->bytes + m->size, m->bytes};
    const char *what = "not a SentencePiece model";
    pb_field f;
    tfm_status s;
    while ((s = pb_next(&r, &f, what, err)) == TFM_OK) {
        pb_reader sub = {f.data, f.data + f.len, m->bytes};
        switch (f.number) {
        case 1:
            EXPECT(&f, WIRE_LEN, "model", "a piece", "a message");
            s = parse_piece(ps, &sub, err);
            break;
        case 2:
            EXPECT(&f, WIRE_LEN, "model", "trainer_spec", "a message");
            s = parse_trainer(ps, &sub, err);
            break;
        case 3:
            EXPECT(&f, WIRE_LEN, "model", "normalizer_spec", "a message");
            s = parse_normalizer(&sub, &m->norm, "normalizer_spec", err);
            break;
        case 5:
            EXPECT(&f, WIRE_LEN, "model", "denormalizer_spec", "a message");
            s = parse_normalizer(&sub, &m->denorm, "denormalizer_spec", err);
            m->has_denorm = true;
            break;
        default: break;
        }
        if (s != TFM_OK) return s;
        what = "model";
    }
    if (s != TFM_EOF) return s;
    if (m->n == 0)
        return tfm_error_set(err, TFM_ERR_FORMAT,
                             m->size == 0 ? "not a SentencePiece model: the file is empty"
                                          : "not a SentencePiece model: it has no pieces");
    return TFM_OK;
}

/* ---- the piece trie ---------------------------------------------------------------- */

/* The trie is first built as nodes with hashed children (key: parent << 8 |
 * byte), then laid out as a double array, breadth first: for each node, the
 * first base at which every child's slot is free.  A free-slot cursor keeps
 * the search short; the array ends up a little larger than the node count. */
typedef struct trie_build {
    tfm_map64 *child;     /* node << 8 | byte -> child node */
    int32_t *value;       /* per node */
    int32_t *first, *next;  /* children lists: first child, next sibling */
    unsigned char *label;
    int32_t n, cap;
} trie_build;

static int32_t build_node(trie_build *b, int32_t value)
{
    if (b->n == b->cap) {
        int32_t cap = b->cap ? b->cap * 2 : 1024;
        int32_t *v = realloc(b->value, (size_t)cap * sizeof *v);
        if (v) b->value = v;
        int32_t *fi = realloc(b->first, (size_t)cap * sizeof *fi);
        if (fi) b->first = fi;
        int32_t *ne = realloc(b->next, (size_t)cap * sizeof *ne);
        if (ne) b->next = ne;
        unsigned char *la = realloc(b->label, (size_t)cap);
        if (la) b->label = la;
        if (!v || !fi || !ne || !la) return -1;
        b->cap = cap;
    }
    b->value[b->n] = value;
    b->first[b->n] = b->next[b->n] = -1;
    b->label[b->n] = 0;
    return b->n++;
}

/* The first free slot at or after i: skip[j] == j for a free j, else a
 * slot further on; the path is compressed as it is walked.  skip holds one
 * more entry than the trie, free, so the walk always ends. */
static int64_t next_free(int64_t *skip, int64_t i)
{
    int64_t r = i;
    while (skip[r] != r) r = skip[r];
    while (skip[i] != r) {
        int64_t n = skip[i];
        skip[i] = r;
        i = n;
    }
    return r;
}

static tfm_status build_trie(tfm_spm *m, tfm_error *err)
{
    trie_build b = {0};
    tfm_status s = TFM_ERR_NOMEM;
    int32_t *queue = NULL, *pos = NULL;
    int64_t *skip = NULL; /* [cap + 1]: slot i free when skip[i] == i (next_free) */
    b.child = tfm_map64_create(1024);
    if (!b.child || build_node(&b, -1) != 0) goto done;
    for (int32_t id = 0; id < m->n; id++) {
        uint8_t t = m->pieces[id].type;
        if (t != TFM_SPM_NORMAL && t != TFM_SPM_USER_DEFINED && t != TFM_SPM_UNUSED) continue;
        const unsigned char *p = (const unsigned char *)m->text + m->pieces[id].off;
        int32_t node = 0;
        for (uint32_t i = 0; i < m->pieces[id].len; i++) {
            uint64_t key = (uint64_t)node << 8 | p[i];
            int64_t *c = tfm_map64_find(b.child, key);
            if (c) {
                node = (int32_t)*c;
                continue;
            }
            int32_t k = build_node(&b, -1);
            if (k < 0 || !tfm_map64_upsert(b.child, key, k, NULL)) goto done;
            b.label[k] = p[i];
            b.next[k] = b.first[node];
            b.first[node] = k;
            node = k;
        }
        if (b.value[node] < 0) b.value[node] = id; /* a repeat is refused before this */
    }
    /* Lay out breadth first.  A node's children go at base + label for the
     * first base whose slots are all free.  Candidate bases come from the
     * free slots (found through skip[], each occupied slot pointing past
     * itself, path-compressed), not from every base in turn: on a 32k-piece
     * model the plain walk over a fragmented array took some 20 s.  After
     * MAX_TRIES candidates the children go past everything used, where all
     * slots are free. */
    enum { MAX_TRIES = 64 };
    queue = malloc((size_t)b.n * sizeof *queue);
    pos = malloc((size_t)b.n * sizeof *pos);
    int64_t cap = (int64_t)b.n + 512;
    m->trie = malloc((size_t)cap * sizeof *m->trie);
    skip = malloc((size_t)(cap + 1) * sizeof *skip);
    if (!queue || !pos || !m->trie || !skip) goto done;
    for (int64_t i = 0; i < cap; i++) m->trie[i] = (spm_unit){0, -1, -1};
    for (int64_t i = 0; i <= cap; i++) skip[i] = i;
    m->trie[0].check = 0; /* the root's slot is taken */
    skip[0] = 1;
    pos[0] = 0;
    int32_t head = 0, tail = 0, used_end = 1;
    queue[tail++] = 0;
    while (head < tail) {
        int32_t node = queue[head++];
        int32_t at = pos[node];
        m->trie[at].value = b.value[node];
        if (b.first[node] < 0) continue;
        int lo = 256;
        for (int32_t c = b.first[node]; c >= 0; c = b.next[c]) lo = b.label[c] < lo ? b.label[c] : lo;
        int64_t f = next_free(skip, 1), base;
        for (int tries = 0;; tries++) {
            base = tries < MAX_TRIES ? f - lo : (int64_t)used_end;
            if (base < 1) {
                f = next_free(skip, f + 1);
                continue;
            }
            if (base + 256 >= cap) {
                int64_t ncap = (base + 256) * 2 + 256;
                spm_unit *t = realloc(m->trie, (size_t)ncap * sizeof *t);
                int64_t *k = t ? realloc(skip, (size_t)(ncap + 1) * sizeof *k) : NULL;
                if (t) m->trie = t;
                if (!k) goto done;
                skip = k;
                for (int64_t i = cap; i < ncap; i++) t[i] = (spm_unit){0, -1, -1};
                for (int64_t i = cap + 1; i <= ncap; i++) skip[i] = i;
                skip[cap] = cap; /* free, as every slot past the old end */
                cap = ncap;
            }
            bool fits = true;
            for (int32_t c = b.first[node]; c >= 0 && fits; c = b.next[c])
                fits = m->trie[base + b.label[c]].check < 0;
            if (fits) break;
            f = next_free(skip, f + 1);
        }
        if (base > INT32_MAX - 256) {
            s = tfm_error_set(err, TFM_ERR_FORMAT, "the pieces are too many for the trie");
            goto done;
        }
        m->trie[at].base = (int32_t)base;
        for (int32_t c = b.first[node]; c >= 0; c = b.next[c]) {
            int64_t slot = base + b.label[c];
            m->trie[slot].check = at;
            skip[slot] = slot + 1;
            pos[c] = (int32_t)slot;
            if (slot + 1 > used_end) used_end = (int32_t)slot + 1;
            queue[tail++] = c;
        }
    }
    m->trie_size = used_end;
    s = TFM_OK;
done:
    if (s == TFM_ERR_NOMEM) tfm_error_set(err, s, "out of memory building the piece trie");
    free(queue);
    free(pos);
    free(skip);
    free(b.value);
    free(b.first);
    free(b.next);
    free(b.label);
    tfm_map64_free(b.child);
    return s;
}

/* Takes the n_units units (base, check, value) of a trie that build_trie
 * made for these pieces, which a file kept: copied, and checked to be safe
 * to walk (every base leaves room for any byte, every check and value is a
 * unit or a piece), not to be the trie of these pieces. */
static tfm_status adopt_trie(tfm_spm *m, const int32_t *units, size_t n_units, tfm_error *err)
{
    if (n_units == 0 || n_units > (size_t)INT32_MAX - 256)
        return tfm_error_set(err, TFM_ERR_FORMAT, "the piece trie holds %zu units", n_units);
    m->trie = malloc(n_units * sizeof *m->trie);
    if (!m->trie) return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n_units; i++) {
        const int32_t base = units[3 * i], check = units[3 * i + 1], value = units[3 * i + 2];
        if (base < 0 || base > INT32_MAX - 256 || check < -1 ||
            (int64_t)check >= (int64_t)n_units || value < -1 || value >= m->n)
            return tfm_error_set(err, TFM_ERR_FORMAT,
                                 "the piece trie: unit %zu (%d, %d, %d) is out of range", i,
                                 (int)base, (int)check, (int)value);
        m->trie[i] = (spm_unit){base, check, value};
    }
    m->trie_size = (int32_t)n_units;
    return TFM_OK;
}

/* ---- building the model -------------------------------------------------------------- */

static tfm_status build_lookups(tfm_spm *m, tfm_error *err)
{
    /* The maps point into m->text, which lives as long as m. */
    m->normal = tfm_strmap_create_borrowing((size_t)m->n);
    m->reserved = tfm_strmap_create_borrowing(512);
    m->canon = malloc((size_t)m->n * sizeof *m->canon);
    if (!m->normal || !m->reserved || !m->canon)
        return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    m->unk = -1;
    for (int b = 0; b < 256; b++) m->byte_id[b] = -1;
    m->min_score = FLT_MAX;
    m->max_score = FLT_MIN; /* as SentencePiece starts them: a model without normal pieces */
    for (int32_t id = 0; id < m->n; id++) {
        const spm_piece *p = &m->pieces[id];
        const char *text = m->text + p->off;
        bool normal = p->type == TFM_SPM_NORMAL || p->type == TFM_SPM_USER_DEFINED ||
                      p->type == TFM_SPM_UNUSED;
        bool inserted;
        if (!tfm_strmap_upsert(normal ? m->normal : m->reserved, text, p->len, id, &inserted))
            return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
        if (!inserted)
            return tfm_error_set(err, TFM_ERR_FORMAT, "piece %d: '%s' is already defined", id,
                                 text);
        if (p->type == TFM_SPM_UNKNOWN) {
            if (m->unk >= 0)
                return tfm_error_set(err, TFM_ERR_FORMAT,
                                     "piece %d: a second unknown piece (the first is %d)", id,
                                     m->unk);
            m->unk = id;
        }
        if (p->type == TFM_SPM_BYTE) {
            if (!m->byte_fallback)
                return tfm_error_set(err, TFM_ERR_FORMAT,
                                     "piece %d: byte piece '%s' although byte_fallback is off",
                                     id, text);
            int b = tfm_byte_of_piece(text, p->len);
            if (b < 0)
                return tfm_error_set(err, TFM_ERR_FORMAT,
                                     "piece %d: '%s' is not a byte piece <0xNN>", id, text);
            m->byte_id[b] = id;
        }
        if (p->type == TFM_SPM_USER_DEFINED) m->has_user = true;
        if (p->type == TFM_SPM_UNUSED) m->has_unused = true;
        if (p->type == TFM_SPM_NORMAL) {
            m->min_score = p->score < m->min_score ? p->score : m->min_score;
            m->max_score = p->score > m->max_score ? p->score : m->max_score;
        }
    }
    if (m->unk < 0) return tfm_error_set(err, TFM_ERR_FORMAT, "the model has no unknown piece");
    if (m->byte_fallback)
        for (int b = 0; b < 256; b++)
            if (m->byte_id[b] < 0)
                return tfm_error_set(err, TFM_ERR_FORMAT,
                                     "byte_fallback is on but the piece <0x%02X> is missing", b);
    bool by_word = !m->has_unused;
    for (int32_t id = 0; id < m->n; id++) {
        const spm_piece *p = &m->pieces[id];
        const char *text = m->text + p->off;
        /* spm_piece_to_id of its text: the reserved piece of that text if
         * there is one, else the piece itself (texts are unique within
         * each map), with no lookup in the big map of normal pieces. */
        const int64_t *reserved = tfm_strmap_find(m->reserved, text, p->len);
        m->canon[id] = reserved ? (int32_t)*reserved : id;
        bool normal = p->type == TFM_SPM_NORMAL || p->type == TFM_SPM_USER_DEFINED ||
                      p->type == TFM_SPM_UNUSED;
        if (!normal || !by_word) continue;
        /* Where U+2581 may sit in a piece for words to be merged alone. */
        for (const char *q = text; (q = memmem(q, p->len - (size_t)(q - text), SPM_SPACE,
                                               SPM_SPACE_LEN)) != NULL; q++) {
            size_t at = (size_t)(q - text);
            if (m->ws_suffix ? at + SPM_SPACE_LEN != p->len : at != 0) by_word = false;
        }
    }
    m->bpe_by_word = by_word;
    return TFM_OK;
}

static tfm_status set_defaults_text(char **slot, const char *def, tfm_error *err)
{
    if (*slot && **slot) return TFM_OK; /* SentencePiece takes an empty one as absent */
    free(*slot);
    *slot = strdup(def);
    return *slot ? TFM_OK : tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
}

/* tfm_spm_parse, with the piece trie read from units (n_units of them) when
 * they are given, else built. */
static tfm_status parse_file(const void *data, size_t size, const int32_t *units,
                             size_t n_units, tfm_spm **out, tfm_error *err)
{
    *out = NULL;
    tfm_spm *m = calloc(1, sizeof *m);
    if (!m) return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    m->bytes = malloc(size ? size : 1);
    if (!m->bytes) {
        free(m);
        return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    }
    if (size) memcpy(m->bytes, data, size);
    m->size = size;
    m->spec_unk_id = 0;
    m->spec_bos_id = 1;
    m->spec_eos_id = 2;
    m->spec_pad_id = -1;
    spm_norm def = {.add_dummy_prefix = true, .remove_extra_whitespaces = true,
                    .escape_whitespaces = true};
    m->norm = m->denorm = def;
    spm_parse ps = {.m = m, .model_type = TFM_SPM_UNIGRAM};
    tfm_status s = parse_model(&ps, err);
    if (s == TFM_OK) {
        if (ps.model_type == 3 || ps.model_type == 4)
            s = tfm_error_set(err, TFM_ERR_UNSUPPORTED,
                              "a SentencePiece %s model: only unigram and BPE models are read",
                              ps.model_type == 3 ? "word" : "char");
        else if (ps.model_type != TFM_SPM_UNIGRAM && ps.model_type != TFM_SPM_BPE)
            s = tfm_error_set(err, TFM_ERR_FORMAT, "trainer_spec: unknown model_type %lld",
                              (long long)ps.model_type);
        m->type = (tfm_spm_model_type)ps.model_type;
    }
    if (s == TFM_OK && !ps.has_unk_surface) {
        free(m->unk_surface);
        m->unk_surface = strdup(" \xE2\x81\x87 ");
        m->unk_surface_len = m->unk_surface ? strlen(m->unk_surface) : 0;
        if (!m->unk_surface) s = tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    }
    static const char *const special_default[4] = {"<unk>", "<s>", "</s>", "<pad>"};
    for (int i = 0; i < 4 && s == TFM_OK; i++)
        s = set_defaults_text(&m->special_text[i], special_default[i], err);
    if (s == TFM_OK) s = build_lookups(m, err);
    if (s == TFM_OK) s = units ? adopt_trie(m, units, n_units, err) : build_trie(m, err);
    if (s == TFM_OK) {
        m->norm.ws_suffix = m->ws_suffix;
        m->norm.user_symbols = m->has_user;
        spm_norm_prepare(m, &m->norm);
        /* SentencePiece uses the denormalizer only when it has a map. */
        m->has_denorm = m->has_denorm && m->denorm.has_map;
        if (m->has_denorm) spm_norm_prepare(m, &m->denorm);
    }
    if (s != TFM_OK) {
        tfm_spm_free(m);
        return s;
    }
    *out = m;
    return TFM_OK;
}

tfm_status tfm_spm_parse(const void *data, size_t size, tfm_spm **out, tfm_error *err)
{
    return parse_file(data, size, NULL, 0, out, err);
}

tfm_status tfm_spm_parse_with_trie(const void *data, size_t size, const int32_t *units,
                                   size_t n_units, tfm_spm **out, tfm_error *err)
{
    if (!units) {
        *out = NULL;
        return tfm_error_set(err, TFM_ERR_ARG, "no piece trie");
    }
    return parse_file(data, size, units, n_units, out, err);
}

const int32_t *tfm_spm_trie(const tfm_spm *m, size_t *n_units)
{
    _Static_assert(sizeof(spm_unit) == 3 * sizeof(int32_t), "a unit is three int32");
    *n_units = (size_t)m->trie_size;
    return (const int32_t *)(const void *)m->trie;
}

tfm_status tfm_spm_load(const char *path, tfm_spm **out, tfm_error *err)
{
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return tfm_error_set(err, TFM_ERR_IO, "cannot open: %s", strerror(errno));
    tfm_buf b;
    tfm_buf_init(&b);
    tfm_status s = tfm_read_upto(fd, &b, SPM_MAX_FILE + 1, err);
    close(fd);
    if (s == TFM_OK && b.len > SPM_MAX_FILE)
        s = tfm_error_set(err, TFM_ERR_FORMAT,
                          "not a SentencePiece model: larger than 1 GiB, read no further");
    if (s == TFM_OK) s = tfm_spm_parse(b.data, b.len, out, err);
    tfm_buf_free(&b);
    return s;
}

void tfm_spm_free(tfm_spm *m)
{
    if (!m) return;
    free(m->bytes);
    free(m->text);
    free(m->pieces);
    free(m->unk_surface);
    for (int i = 0; i < 4; i++) free(m->special_text[i]);
    tfm_strmap_free(m->normal);
    tfm_strmap_free(m->reserved);
    free(m->canon);
    free(m->trie);
    free(m);
}

bool tfm_spm_sniff(const void *data, size_t size)
{
    pb_reader r = {data, (const unsigned char *)data + size, data};
    pb_field f;
    if (pb_next(&r, &f, "", NULL) != TFM_OK || f.number != 1 || f.wire != WIRE_LEN) return false;
    pb_reader sub = {f.data, f.data + f.len, data};
    pb_field g;
    return pb_next(&sub, &g, "", NULL) == TFM_OK && g.number == 1 && g.wire == WIRE_LEN &&
           g.len > 0;
}

/* ---- lookups ----------------------------------------------------------------------- */

int32_t spm_piece_to_id(const tfm_spm *m, const char *s, size_t len)
{
    int64_t *v = tfm_strmap_find(m->reserved, s, len);
    if (v) return (int32_t)*v;
    v = tfm_strmap_find(m->normal, s, len);
    return v ? (int32_t)*v : m->unk;
}

const void *tfm_spm_bytes(const tfm_spm *m, size_t *size)
{
    *size = m->size;
    return m->bytes;
}

tfm_spm_model_type tfm_spm_type(const tfm_spm *m) { return m->type; }
int32_t tfm_spm_size(const tfm_spm *m) { return m->n; }

const char *tfm_spm_piece(const tfm_spm *m, int32_t id, size_t *len)
{
    if (id < 0 || id >= m->n) return NULL;
    if (len) *len = m->pieces[id].len;
    return m->text + m->pieces[id].off;
}

float tfm_spm_score(const tfm_spm *m, int32_t id)
{
    return id >= 0 && id < m->n ? m->pieces[id].score : 0.0f;
}

tfm_spm_piece_type tfm_spm_piece_type_of(const tfm_spm *m, int32_t id)
{
    return id >= 0 && id < m->n ? (tfm_spm_piece_type)m->pieces[id].type : TFM_SPM_NORMAL;
}

int32_t tfm_spm_find(const tfm_spm *m, const char *text, size_t len)
{
    int64_t *v = tfm_strmap_find(m->reserved, text, len);
    if (!v) v = tfm_strmap_find(m->normal, text, len);
    return v ? (int32_t)*v : -1;
}

/* As SentencePieceProcessor's unk_id() and the like: the id of the piece
 * the trainer spec names (or its default), when it has the right type. */
static int32_t special_id(const tfm_spm *m, int which, tfm_spm_piece_type want)
{
    const char *t = m->special_text[which];
    int32_t id = spm_piece_to_id(m, t, strlen(t));
    return m->pieces[id].type == want ? id : -1;
}

int32_t tfm_spm_unk_id(const tfm_spm *m) { return special_id(m, 0, TFM_SPM_UNKNOWN); }
int32_t tfm_spm_bos_id(const tfm_spm *m) { return special_id(m, 1, TFM_SPM_CONTROL); }
int32_t tfm_spm_eos_id(const tfm_spm *m) { return special_id(m, 2, TFM_SPM_CONTROL); }
int32_t tfm_spm_pad_id(const tfm_spm *m) { return special_id(m, 3, TFM_SPM_CONTROL); }
