/* npy.c - dense tensors, NumPy .npy records, and tensor streams (records back
 * to back, one per sentence, as DESIGN.md "File formats" describes).
 *
 * A record, as numpy/lib/format.py defines it:
 *
 *   "\x93NUMPY"  major  minor  HLEN  HEADER  DATA
 *
 * HLEN is 2 bytes little-endian in version 1.0 and 4 bytes in 2.0 and 3.0.
 * HEADER is a Python dict literal padded with spaces and ended by '\n':
 *
 *   {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
 *
 * DATA is the C-order elements.  We write exactly the bytes numpy.save
 * writes, so a stream of our records reads with numpy.load(f) called again
 * and again on one open file, and numpy's files read here.  Reading never
 * seeks, so records can come through a pipe. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <poll.h>
#include <string.h>

#include "tfm/io.h"

/* Elements are copied straight between memory and the file, which is right
 * only when the machine's byte order is the file's ('<', little-endian). */
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "npy.c copies data as it is in memory and so needs a little-endian machine"
#endif

static const char npy_magic[6] = {'\x93', 'N', 'U', 'M', 'P', 'Y'};
#define NPY_MAGIC_LEN 6
/* numpy pads the header so that the data starts on a 64-byte boundary
 * (numpy.lib.format.ARRAY_ALIGN) ... */
#define NPY_ALIGN 64
/* ... after leaving room to rewrite the first dimension in place with up to
 * 21 digits (numpy.lib.format.GROWTH_AXIS_MAX_DIGITS). */
#define NPY_GROWTH_DIGITS 21
/* The longest header we read.  numpy itself refuses headers over 10000
 * bytes; ours are under 200.  A larger length is a corrupt record, and
 * trusting it would let one bad byte ask for gigabytes. */
#define NPY_MAX_HEADER 65536u
/* The largest payload (and dimension) we accept: 2^40 bytes, a terabyte.
 * Anything bigger is far more likely a corrupt header than a real tensor. */
#define NPY_MAX_BYTES ((uint64_t)1 << 40)
/* The data of a record is read in pieces that double from this size, so a
 * header that claims more data than the stream holds costs little memory. */
#define NPY_READ_CHUNK ((size_t)1 << 20)
/* Every supported dtype is 4 bytes wide. */
#define NPY_ELEM_SIZE 4

/* Room for a shape written out: 8 dimensions of up to 20 characters, ", "
 * between them, the parentheses and a comma. */
#define NPY_SHAPE_TEXT (TFM_MAX_DIMS * 22 + 4)
/* The largest string a header may hold in quotes (keys and the dtype). */
#define NPY_MAX_STRING 32

static const char *dtype_descr(tfm_dtype d) { return d == TFM_I32 ? "<i4" : "<f4"; }
static const char *dtype_name(tfm_dtype d) { return d == TFM_I32 ? "int32" : "float32"; }
static bool dtype_valid(tfm_dtype d) { return d == TFM_F32 || d == TFM_I32; }

size_t tfm_dtype_size(tfm_dtype d) { return d == TFM_I8 ? 1 : d == TFM_BF16 ? 2 : 4; }

/* ---- tensors ------------------------------------------------------------------- */

void tfm_tensor_init(tfm_tensor *t)
{
    memset(t, 0, sizeof *t);
    t->dtype = TFM_F32;
}

void tfm_tensor_free(tfm_tensor *t)
{
    if (!t) return;
    free(t->data);
    tfm_tensor_init(t);
}

/* Makes t->data hold at least bytes bytes.  data is never left NULL, even for
 * an empty tensor, so callers may pass it to memcpy and fwrite freely. */
static tfm_status tensor_reserve(tfm_tensor *t, size_t bytes)
{
    if (bytes == 0) bytes = NPY_ELEM_SIZE;
    if (t->data && bytes <= t->cap) return TFM_OK;
    void *p = realloc(t->data, bytes);
    if (!p) return TFM_ERR_NOMEM;
    t->data = p;
    t->cap = bytes;
    return TFM_OK;
}

/* Appends printf-style text at out + *pos, never past size bytes. */
static void appendf(char *out, size_t size, size_t *pos, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void appendf(char *out, size_t size, size_t *pos, const char *fmt, ...)
{
    if (*pos >= size) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(out + *pos, size - *pos, fmt, ap);
    va_end(ap);
    if (n > 0) *pos += (size_t)n;
}

/* Writes a shape as Python writes a tuple: "()", "(3,)", "(3, 4)". */
static void format_shape(int ndim, const int64_t *shape, char *out, size_t size)
{
    size_t pos = 0;
    if (size == 0) return;
    out[0] = 0;
    appendf(out, size, &pos, "(");
    for (int i = 0; i < ndim; i++)
        appendf(out, size, &pos, "%s%" PRId64, i ? ", " : "", shape[i]);
    appendf(out, size, &pos, ndim == 1 ? ",)" : ")");
}

/* Checks a shape and computes the size of its data in bytes.  A bad number
 * of dimensions, a negative dimension or a size beyond NPY_MAX_BYTES fails
 * with status bad (a caller's mistake and a corrupt file differ) and a
 * message in err (which may be NULL). */
static tfm_status shape_bytes(tfm_dtype dtype, int ndim, const int64_t *shape, tfm_status bad,
                              size_t *bytes, tfm_error *err)
{
    if (ndim < 0 || ndim > TFM_MAX_DIMS)
        return tfm_error_set(err, bad, "a tensor has 0 to %d dimensions, not %d", TFM_MAX_DIMS,
                             ndim);
    char text[NPY_SHAPE_TEXT];
    format_shape(ndim, shape, text, sizeof text);
    bool empty = false;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0)
            return tfm_error_set(err, bad, "shape %s has a negative dimension", text);
        /* Checked even when another dimension is 0, so that code using the
         * dimensions of an empty tensor never overflows either. */
        if ((uint64_t)shape[i] > NPY_MAX_BYTES)
            return tfm_error_set(err, bad, "shape %s has a dimension larger than 2^40", text);
        if (shape[i] == 0) empty = true;
    }
    uint64_t numel = empty ? 0 : 1;
    for (int i = 0; i < ndim && !empty; i++) {
        uint64_t d = (uint64_t)shape[i];
        if (numel > NPY_MAX_BYTES / NPY_ELEM_SIZE / d)
            return tfm_error_set(err, bad, "shape %s %s needs more than 2^40 bytes of data", text,
                                 dtype_name(dtype));
        numel *= d;
    }
    uint64_t total = numel * NPY_ELEM_SIZE;
    if (total > SIZE_MAX)
        return tfm_error_set(err, bad,
                             "shape %s %s needs %" PRIu64 " bytes, more than memory can address",
                             text, dtype_name(dtype), total);
    *bytes = (size_t)total;
    return TFM_OK;
}

tfm_status tfm_tensor_reshape(tfm_tensor *t, tfm_dtype dtype, int ndim, const int64_t *shape)
{
    if (!dtype_valid(dtype)) return TFM_ERR_ARG;
    size_t bytes;
    tfm_status st = shape_bytes(dtype, ndim, shape, TFM_ERR_RANGE, &bytes, NULL);
    if (st != TFM_OK) return st;
    if (tensor_reserve(t, bytes) != TFM_OK) return TFM_ERR_NOMEM;
    t->dtype = dtype;
    t->ndim = ndim;
    for (int i = 0; i < TFM_MAX_DIMS; i++) t->shape[i] = i < ndim ? shape[i] : 0;
    return TFM_OK;
}

int64_t tfm_tensor_numel(const tfm_tensor *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
    return n;
}

void tfm_tensor_shape_str(const tfm_tensor *t, char *out, size_t size)
{
    int ndim = t->ndim < 0 ? 0 : t->ndim > TFM_MAX_DIMS ? TFM_MAX_DIMS : t->ndim;
    format_shape(ndim, t->shape, out, size);
}

/* ---- writing ------------------------------------------------------------------- */

tfm_status tfm_npy_write(FILE *fp, const tfm_tensor *t, tfm_error *err)
{
    if (!dtype_valid(t->dtype))
        return tfm_error_set(err, TFM_ERR_ARG, "tensor has an unknown dtype %d", (int)t->dtype);
    size_t bytes;
    tfm_status st = shape_bytes(t->dtype, t->ndim, t->shape, TFM_ERR_RANGE, &bytes, err);
    if (st != TFM_OK) return st;
    if (bytes > 0 && !t->data) return tfm_error_set(err, TFM_ERR_ARG, "tensor has no data");

    /* The header as numpy's _write_array_header builds it: keys sorted, each
     * "'key': repr(value), ", then spaces so the first dimension can grow,
     * then spaces and '\n' up to a multiple of NPY_ALIGN (a whole extra
     * NPY_ALIGN when already aligned, as numpy does). */
    char head[512];
    size_t len = NPY_MAGIC_LEN + 4; /* magic, version, 2-byte length */
    char shape[NPY_SHAPE_TEXT];
    format_shape(t->ndim, t->shape, shape, sizeof shape);
    appendf(head, sizeof head, &len, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }",
            dtype_descr(t->dtype), shape);
    /* Cannot happen: the longest header (8 dimensions of 13 digits) is
     * about 300 bytes with its padding. */
    if (len + NPY_GROWTH_DIGITS + NPY_ALIGN + 1 > sizeof head)
        return tfm_error_set(err, TFM_ERR_ARG, "npy header for shape %s is too long", shape);
    if (t->ndim > 0) {
        char first[24];
        int digits = snprintf(first, sizeof first, "%" PRId64, t->shape[0]);
        for (int i = digits; i < NPY_GROWTH_DIGITS; i++) head[len++] = ' ';
    }
    size_t pad = NPY_ALIGN - (len + 1) % NPY_ALIGN;
    memset(head + len, ' ', pad);
    len += pad;
    head[len++] = '\n';
    size_t hlen = len - (NPY_MAGIC_LEN + 4);
    memcpy(head, npy_magic, NPY_MAGIC_LEN);
    head[6] = 1; /* version 1.0 */
    head[7] = 0;
    head[8] = (char)(hlen & 0xff);
    head[9] = (char)(hlen >> 8);

    if (fwrite(head, 1, len, fp) != len || (bytes > 0 && fwrite(t->data, 1, bytes, fp) != bytes))
        return tfm_error_set(err, TFM_ERR_IO, "write failed: %s", strerror(errno));
    return TFM_OK;
}

/* ---- parsing the header dict --------------------------------------------------- */

/* The fields of a header as written, before they are checked. */
typedef struct npy_header {
    char descr[NPY_MAX_STRING];
    bool fortran_order;
    int ndim;
    int64_t shape[TFM_MAX_DIMS];
    bool have_descr, have_fortran, have_shape;
} npy_header;

/* A position in the header text; p never passes end. */
typedef struct cursor {
    const char *start, *p, *end;
    tfm_error *err;
} cursor;

static bool at(const cursor *c, char ch) { return c->p < c->end && *c->p == ch; }

/* Python's whitespace between tokens. */
static void skip_space(cursor *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r' ||
                             *c->p == '\f' || *c->p == '\v'))
        c->p++;
}

/* Fails with "expected WHAT at byte N of the header, found X". */
static tfm_status syntax(cursor *c, const char *what)
{
    char found[32];
    if (c->p >= c->end) snprintf(found, sizeof found, "the end of the header");
    else if (*c->p > ' ' && *c->p < 127) snprintf(found, sizeof found, "'%c'", *c->p);
    else snprintf(found, sizeof found, "byte 0x%02x", (unsigned char)*c->p);
    return tfm_error_set(c->err, TFM_ERR_FORMAT,
                         "header does not parse: expected %s at byte %zu of the header, found %s",
                         what, (size_t)(c->p - c->start), found);
}

/* A string in single or double quotes, without escapes (no key or dtype we
 * read has any), of printable ASCII, into out. */
static tfm_status parse_string(cursor *c, char *out, size_t size, const char *what)
{
    if (!at(c, '\'') && !at(c, '"')) return syntax(c, what);
    char quote = *c->p++;
    size_t n = 0;
    while (!at(c, quote)) {
        if (c->p >= c->end || *c->p == '\\' || *c->p < ' ' || *c->p >= 127)
            return syntax(c, "a printable character or a closing quote");
        if (n + 1 >= size)
            return tfm_error_set(c->err, TFM_ERR_FORMAT,
                                 "header does not parse: string at byte %zu is longer than %zu characters",
                                 (size_t)(c->p - c->start) - n, size - 1);
        out[n++] = *c->p++;
    }
    c->p++;
    out[n] = 0;
    return TFM_OK;
}

/* Python's True or False, not followed by more of a name. */
static tfm_status parse_bool(cursor *c, bool *out)
{
    static const char *const words[2] = {"False", "True"};
    for (int v = 0; v < 2; v++) {
        size_t n = strlen(words[v]);
        if ((size_t)(c->end - c->p) >= n && memcmp(c->p, words[v], n) == 0) {
            const char *after = c->p + n;
            if (after < c->end && (*after == '_' || (*after >= '0' && *after <= '9') ||
                                   (*after >= 'a' && *after <= 'z') ||
                                   (*after >= 'A' && *after <= 'Z')))
                break;
            c->p = after;
            *out = v;
            return TFM_OK;
        }
    }
    return syntax(c, "True or False");
}

/* A decimal integer with an optional '-' (rejected later, with the shape). */
static tfm_status parse_int(cursor *c, int64_t *out)
{
    bool negative = at(c, '-');
    if (negative) c->p++;
    if (c->p >= c->end || *c->p < '0' || *c->p > '9') return syntax(c, "a dimension");
    const char *first = c->p;
    uint64_t v = 0;
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
        unsigned digit = (unsigned)(*c->p - '0');
        if (v > ((uint64_t)INT64_MAX - digit) / 10)
            return tfm_error_set(c->err, TFM_ERR_FORMAT,
                                 "shape has a dimension at byte %zu of the header too large for 64 bits",
                                 (size_t)(first - c->start));
        v = v * 10 + digit;
        c->p++;
    }
    *out = negative ? -(int64_t)v : (int64_t)v;
    return TFM_OK;
}

/* A Python tuple of integers: "()", "(3,)", "(3, 4)", "(3, 4,)".  "(3)" is
 * not a tuple in Python, so numpy would not read it either. */
static tfm_status parse_shape(cursor *c, npy_header *h)
{
    if (!at(c, '(')) return syntax(c, "a shape tuple such as (3, 4)");
    c->p++;
    skip_space(c);
    int n = 0;
    bool comma = false;
    while (!at(c, ')')) {
        if (n == TFM_MAX_DIMS)
            return tfm_error_set(c->err, TFM_ERR_UNSUPPORTED,
                                 "shape has more than %d dimensions", TFM_MAX_DIMS);
        tfm_status st = parse_int(c, &h->shape[n]);
        if (st != TFM_OK) return st;
        n++;
        skip_space(c);
        comma = at(c, ',');
        if (comma) {
            c->p++;
            skip_space(c);
        } else if (!at(c, ')')) {
            return syntax(c, "',' or ')' in the shape");
        }
    }
    if (n == 1 && !comma)
        return tfm_error_set(c->err, TFM_ERR_FORMAT,
                             "header does not parse: shape (%" PRId64 ") is not a tuple; "
                             "a 1-d shape is written (%" PRId64 ",)",
                             h->shape[0], h->shape[0]);
    c->p++;
    h->ndim = n;
    return TFM_OK;
}

/* Parses the dict of a header: keys 'descr', 'fortran_order' and 'shape',
 * each once, in any order, quoted either way, with whitespace anywhere and
 * an optional trailing comma; only whitespace may follow the '}'. */
static tfm_status parse_dict(const char *text, size_t len, npy_header *h, tfm_error *err)
{
    cursor c = {text, text, text + len, err};
    memset(h, 0, sizeof *h);
    skip_space(&c);
    if (!at(&c, '{')) return syntax(&c, "'{'");
    c.p++;
    skip_space(&c);
    while (!at(&c, '}')) {
        char key[NPY_MAX_STRING];
        tfm_status st = parse_string(&c, key, sizeof key, "a quoted key or '}'");
        if (st != TFM_OK) return st;
        skip_space(&c);
        if (!at(&c, ':')) return syntax(&c, "':'");
        c.p++;
        skip_space(&c);
        bool *have;
        if (strcmp(key, "descr") == 0) {
            have = &h->have_descr;
            if (at(&c, '[') || at(&c, '{'))
                return tfm_error_set(err, TFM_ERR_UNSUPPORTED,
                                     "structured dtypes are not supported: expected '<f4' or '<i4'");
            st = parse_string(&c, h->descr, sizeof h->descr, "a quoted dtype such as '<f4'");
        } else if (strcmp(key, "fortran_order") == 0) {
            have = &h->have_fortran;
            st = parse_bool(&c, &h->fortran_order);
        } else if (strcmp(key, "shape") == 0) {
            have = &h->have_shape;
            st = parse_shape(&c, h);
        } else {
            return tfm_error_set(err, TFM_ERR_FORMAT,
                                 "header has an unknown key '%s': expected 'descr', "
                                 "'fortran_order' and 'shape'", key);
        }
        if (st != TFM_OK) return st;
        if (*have)
            return tfm_error_set(err, TFM_ERR_FORMAT, "header has the key '%s' twice", key);
        *have = true;
        skip_space(&c);
        if (at(&c, ',')) {
            c.p++;
            skip_space(&c);
        } else if (!at(&c, '}')) {
            return syntax(&c, "',' or '}'");
        }
    }
    c.p++;
    skip_space(&c);
    if (c.p != c.end) return syntax(&c, "only spaces after the '}'");
    const char *missing = !h->have_descr ? "descr" : !h->have_fortran ? "fortran_order"
                          : !h->have_shape ? "shape" : NULL;
    if (missing) return tfm_error_set(err, TFM_ERR_FORMAT, "header lacks the key '%s'", missing);
    return TFM_OK;
}

/* ---- reading ------------------------------------------------------------------- */

/* Where a record comes from: an open stream (a pipe will do: we never seek)
 * or a block of memory. */
typedef struct npy_source {
    FILE *fp;
    const unsigned char *mem;
    size_t size, pos;
} npy_source;

/* Reads up to n bytes; fewer means the end of the input or a read error. */
static size_t source_read(npy_source *s, void *dst, size_t n)
{
    if (s->fp) return fread(dst, 1, n, s->fp);
    size_t left = s->size - s->pos;
    if (n > left) n = left;
    if (n > 0) memcpy(dst, s->mem + s->pos, n);
    s->pos += n;
    return n;
}

/* After a short read: was it a read error (rather than the end)? */
static tfm_status source_error(npy_source *s, tfm_error *err)
{
    if (s->fp && ferror(s->fp))
        return tfm_error_set(err, TFM_ERR_IO, "read failed: %s", strerror(errno));
    return TFM_OK;
}

/* Reads the data of a record, growing t's buffer only as the data arrives. */
static tfm_status read_payload(npy_source *src, tfm_tensor *t, size_t bytes, size_t *got)
{
    size_t have = 0;
    while (have < bytes) {
        size_t room = t->cap < bytes ? t->cap : bytes;
        if (room <= have) {
            room = have < NPY_READ_CHUNK ? NPY_READ_CHUNK : have * 2;
            if (room > bytes) room = bytes;
            if (tensor_reserve(t, room) != TFM_OK) return TFM_ERR_NOMEM;
        }
        size_t want = room - have;
        size_t n = source_read(src, (char *)t->data + have, want);
        have += n;
        if (n < want) break;
    }
    *got = have;
    return TFM_OK;
}

/* Reads past n bytes of src without holding them; the number read. */
static size_t source_skip(npy_source *src, size_t n)
{
    char scratch[NPY_READ_CHUNK];
    size_t done = 0;
    while (done < n) {
        size_t want = n - done < sizeof scratch ? n - done : sizeof scratch;
        size_t got = source_read(src, scratch, want);
        done += got;
        if (got < want) break;
    }
    return done;
}

/* How a record is read: at most max_rows rows along its first dimension
 * (0: all), at most max_bytes bytes of data kept (0: no limit). */
typedef struct read_limits {
    int64_t max_rows;
    size_t max_bytes;
} read_limits;

/* Reads the magic string, version and header dict of a record from src
 * into h (the dict's text held in t's buffer, or read in place from
 * memory): TFM_EOF when src is empty. */
static tfm_status read_header(npy_source *src, tfm_tensor *t, npy_header *h, tfm_error *err)
{
    /* magic (6), version (2), header length (2 or 4) */
    unsigned char pre[NPY_MAGIC_LEN + 6];
    size_t got = source_read(src, pre, NPY_MAGIC_LEN + 4);
    if (source_error(src, err) != TFM_OK) return TFM_ERR_IO;
    if (got == 0) return TFM_EOF;
    size_t cmp = got < NPY_MAGIC_LEN ? got : NPY_MAGIC_LEN;
    if (memcmp(pre, npy_magic, cmp) != 0) {
        char hex[3 * NPY_MAGIC_LEN + 1];
        size_t pos = 0;
        for (size_t i = 0; i < cmp; i++)
            appendf(hex, sizeof hex, &pos, "%s%02x", i ? " " : "", pre[i]);
        return tfm_error_set(err, TFM_ERR_FORMAT,
                             "not a .npy record: expected the magic string \\x93NUMPY "
                             "(93 4e 55 4d 50 59), found %s", hex);
    }
    if (got < NPY_MAGIC_LEN + 4)
        return tfm_error_set(err, TFM_ERR_FORMAT, "truncated header: expected %d bytes, got %zu",
                             NPY_MAGIC_LEN + 4, got);
    unsigned major = pre[6], minor = pre[7];
    if (major < 1 || major > 3 || minor != 0)
        return tfm_error_set(err, TFM_ERR_UNSUPPORTED,
                             "unsupported .npy version %u.%u: expected 1.0, 2.0 or 3.0", major,
                             minor);
    size_t prelen = major == 1 ? NPY_MAGIC_LEN + 4 : NPY_MAGIC_LEN + 6;
    if (prelen > got) {
        got += source_read(src, pre + got, prelen - got);
        if (source_error(src, err) != TFM_OK) return TFM_ERR_IO;
        if (got < prelen)
            return tfm_error_set(err, TFM_ERR_FORMAT,
                                 "truncated header: expected %zu bytes, got %zu", prelen, got);
    }
    uint32_t hlen = (uint32_t)pre[8] | (uint32_t)pre[9] << 8;
    if (major > 1) hlen |= (uint32_t)pre[10] << 16 | (uint32_t)pre[11] << 24;
    if (hlen > NPY_MAX_HEADER)
        return tfm_error_set(err, TFM_ERR_FORMAT,
                             "header length %" PRIu32 " is absurd: at most %u bytes are allowed",
                             hlen, NPY_MAX_HEADER);

    /* The header is read into the tensor's own buffer, so a stream of
     * records allocates nothing once the buffer is big enough; in memory
     * it is parsed where it lies. */
    const char *text;
    size_t n;
    if (!t) {
        text = (const char *)src->mem + src->pos;
        n = hlen < src->size - src->pos ? hlen : src->size - src->pos;
        src->pos += n;
    } else {
        if (tensor_reserve(t, hlen) != TFM_OK)
            return tfm_error_set(err, TFM_ERR_NOMEM,
                                 "out of memory for a %" PRIu32 "-byte header", hlen);
        text = t->data;
        n = source_read(src, t->data, hlen);
        if (source_error(src, err) != TFM_OK) return TFM_ERR_IO;
    }
    if (n < hlen)
        return tfm_error_set(err, TFM_ERR_FORMAT, "truncated header: expected %zu bytes, got %zu",
                             prelen + hlen, prelen + n);
    return parse_dict(text, hlen, h, err);
}

/* Reads one record from src into t (see tfm_npy_read) within lim;
 * *rows_in_file is its first dimension as the record has it. */
static tfm_status read_record(npy_source *src, tfm_tensor *t, read_limits lim,
                              int64_t *rows_in_file, tfm_error *err)
{
    npy_header h;
    tfm_status st = read_header(src, t, &h, err);
    if (st != TFM_OK) return st;

    tfm_dtype dtype;
    if (strcmp(h.descr, "<f4") == 0) dtype = TFM_F32;
    else if (strcmp(h.descr, "<i4") == 0) dtype = TFM_I32;
    else
        return tfm_error_set(err, TFM_ERR_UNSUPPORTED,
                             "dtype '%s' is not supported: expected '<f4' or '<i4'", h.descr);
    if (h.fortran_order)
        return tfm_error_set(err, TFM_ERR_UNSUPPORTED,
                             "fortran_order True (column-major data) is not supported: "
                             "save a C-order array (numpy.ascontiguousarray)");
    size_t bytes;
    st = shape_bytes(dtype, h.ndim, h.shape, TFM_ERR_FORMAT, &bytes, err);
    if (st != TFM_OK) return st;

    /* A crop keeps the first rows, and reads past the others unheld. */
    *rows_in_file = h.ndim > 0 ? h.shape[0] : 1;
    size_t keep = bytes;
    if (lim.max_rows > 0 && h.ndim > 0 && h.shape[0] > lim.max_rows) {
        keep = bytes / (size_t)h.shape[0] * (size_t)lim.max_rows;
        h.shape[0] = lim.max_rows;
    }
    if (lim.max_bytes > 0 && keep > lim.max_bytes) {
        char shape[NPY_SHAPE_TEXT];
        format_shape(h.ndim, h.shape, shape, sizeof shape);
        return tfm_error_set(err, TFM_ERR_RANGE,
                             "shape %s %s is %zu bytes, more than the %zu a record may have here",
                             shape, dtype_name(dtype), keep, lim.max_bytes);
    }
    size_t have;
    if (read_payload(src, t, keep, &have) != TFM_OK)
        return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory for %zu bytes of data", keep);
    if (have == keep && keep < bytes) have += source_skip(src, bytes - keep);
    if (source_error(src, err) != TFM_OK) return TFM_ERR_IO;
    if (have < bytes) {
        if (keep < bytes) h.shape[0] = *rows_in_file;
        char shape[NPY_SHAPE_TEXT];
        format_shape(h.ndim, h.shape, shape, sizeof shape);
        return tfm_error_set(err, TFM_ERR_FORMAT,
                             "truncated data: shape %s %s needs %zu bytes, got %zu", shape,
                             dtype_name(dtype), bytes, have);
    }
    t->dtype = dtype;
    t->ndim = h.ndim;
    for (int i = 0; i < TFM_MAX_DIMS; i++) t->shape[i] = i < h.ndim ? h.shape[i] : 0;
    return TFM_OK;
}

tfm_status tfm_npy_read(FILE *fp, tfm_tensor *t, tfm_error *err)
{
    npy_source src = {.fp = fp};
    int64_t rows;
    return read_record(&src, t, (read_limits){0, 0}, &rows, err);
}

tfm_status tfm_npy_header_parse(const void *data, size_t size, tfm_npy_header *out,
                                tfm_error *err)
{
    npy_source src = {.mem = data, .size = data ? size : 0};
    npy_header h;
    tfm_status st = read_header(&src, NULL, &h, err);
    if (st == TFM_EOF)
        return tfm_error_set(err, TFM_ERR_FORMAT, "not a .npy record: it is empty");
    if (st != TFM_OK) return st;
    memset(out, 0, sizeof *out);
    memcpy(out->descr, h.descr, sizeof out->descr);
    out->fortran_order = h.fortran_order;
    out->ndim = h.ndim;
    memcpy(out->shape, h.shape, sizeof out->shape);
    out->data_offset = src.pos;
    return TFM_OK;
}

tfm_status tfm_npy_parse(const void *data, size_t size, tfm_tensor *t, size_t *used,
                         tfm_error *err)
{
    npy_source src = {.mem = data, .size = data ? size : 0};
    int64_t rows;
    tfm_status st = read_record(&src, t, (read_limits){0, 0}, &rows, err);
    if (st == TFM_OK && used) *used = src.pos;
    return st;
}

/* ---- streams ------------------------------------------------------------------- */

/* stdio has no call that tells how much input it holds buffered, so this
 * looks inside glibc's FILE (_IO_read_ptr .. _IO_read_end is the unread part
 * of its buffer).  Without glibc only the descriptor is asked: a reader may
 * then cut its batches smaller than it could, but never holds a record back. */
bool tfm_npy_stream_ready(const tfm_npy_stream *s)
{
    FILE *fp = s->fp;
#ifdef __GLIBC__
    if (fp->_IO_read_ptr < fp->_IO_read_end) return true;
#endif
    if (feof(fp) || ferror(fp)) return true;
    struct pollfd p = {.fd = fileno(fp), .events = POLLIN};
    return poll(&p, 1, 0) > 0;
}

tfm_status tfm_npy_stream_read(tfm_npy_stream *s, tfm_tensor *t, tfm_error *err)
{
    npy_source src = {.fp = s->fp};
    read_limits lim = {s->max_rows, s->max_bytes};
    tfm_status st = read_record(&src, t, lim, &s->rows_in_file, err);
    if (st == TFM_OK) s->record++;
    else if (st != TFM_EOF) tfm_error_prefix(err, "record %zu", s->record + 1);
    return st;
}

tfm_status tfm_npy_stream_write(tfm_npy_stream *s, const tfm_tensor *t, tfm_error *err)
{
    tfm_status st = tfm_npy_write(s->fp, t, err);
    if (st == TFM_OK) s->record++;
    else tfm_error_prefix(err, "record %zu", s->record + 1);
    return st;
}
