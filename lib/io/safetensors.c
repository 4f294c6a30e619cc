/* safetensors.c - reading safetensors files (tfm/safetensors.h describes
 * the format), the container of models and checkpoints; writing them is
 * safetensors_write.c's.
 *
 * Reading checks what the reference implementation checks
 * (huggingface/safetensors, safetensors/src/tensor.rs: read_metadata and
 * Metadata::validate), so the files we write open there and the files it
 * writes open here.  The JSON is parsed by cJSON; before that, one pass over
 * the raw text (safetensors_text.c) rejects what cJSON would let through
 * silently (invalid UTF-8, raw control bytes, a \u0000 that would cut a C
 * string short).  cJSON holds
 * numbers as doubles, which hold every integer below 2^53 exactly: larger
 * shapes and offsets (8 petabytes) are refused rather than rounded.  Two
 * differences from the reference follow from this: a name or metadata value
 * holding \u0000 is refused, and a number written "4.0" or "4e0" is read as
 * the integer 4 (a double cannot say how it was written). */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "tfm/io.h"
#include "tfm/safetensors.h"
#include "safetensors_internal.h"

/* Tensors are handed out as they lie in the file, which is right only when
 * the machine's byte order is the format's (little-endian). */
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors.c hands out data as it is in the file and so needs a little-endian machine"
#endif

/* Every dtype of the format, with its size in bits (the reference's
 * Dtype::bitsize; F4 and F6 pack several elements into a byte). */
typedef struct st_dtype {
    const char *name;
    unsigned bits;
} st_dtype;

static const st_dtype st_dtypes[] = {
    {"BOOL", 8},     {"U8", 8},       {"I8", 8},       {"F8_E5M2", 8}, {"F8_E4M3", 8},
    {"F8_E8M0", 8},  {"F4", 4},       {"F6_E2M3", 6},  {"F6_E3M2", 6}, {"I16", 16},
    {"U16", 16},     {"F16", 16},     {"BF16", 16},    {"I32", 32},    {"U32", 32},
    {"F32", 32},     {"C64", 64},     {"F64", 64},     {"I64", 64},    {"U64", 64},
};
#define ST_N_DTYPES (sizeof st_dtypes / sizeof st_dtypes[0])

static const st_dtype *dtype_find(const char *name)
{
    for (size_t i = 0; i < ST_N_DTYPES; i++)
        if (strcmp(st_dtypes[i].name, name) == 0) return &st_dtypes[i];
    return NULL;
}

/* The library's dtypes and their names in the file. */
static const char *const library_dtypes[] = {[TFM_F32] = "F32", [TFM_I32] = "I32",
                                             [TFM_I8] = "I8", [TFM_BF16] = "BF16"};
#define N_LIBRARY_DTYPES (sizeof library_dtypes / sizeof library_dtypes[0])

const char *st_dtype_name(tfm_dtype d)
{
    return (unsigned)d < N_LIBRARY_DTYPES ? library_dtypes[d] : NULL;
}

/* The library dtype of a file dtype, when the library reads it. */
static bool dtype_supported(const st_dtype *d, tfm_dtype *out)
{
    for (size_t i = 0; i < N_LIBRARY_DTYPES; i++)
        if (strcmp(d->name, library_dtypes[i]) == 0) {
            *out = (tfm_dtype)i;
            return true;
        }
    return false;
}

/* Writes a shape as the header does, "[5, 6]", cut with "..." to fit. */
void st_format_shape(int ndim, const int64_t *shape, char *out, size_t size)
{
    size_t pos = 0;
    out[pos++] = '[';
    for (int i = 0; i < ndim; i++) {
        char dim[32];
        int n = snprintf(dim, sizeof dim, "%s%" PRId64, i ? ", " : "", shape[i]);
        if (pos + (size_t)n + 5 > size) { /* room for "...]" and the NUL */
            memcpy(out + pos, "...", 3);
            pos += 3;
            break;
        }
        memcpy(out + pos, dim, (size_t)n);
        pos += (size_t)n;
    }
    out[pos++] = ']';
    out[pos] = 0;
}

/* The offset of the first invalid UTF-8 sequence in s[0..len), or len. */
size_t st_utf8_invalid_at(const unsigned char *s, size_t len)
{
    size_t i = 0;
    while (i < len) {
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        int32_t cp;
        int n = tfm_utf8_decode(s + i, len - i, &cp);
        if (n == 0) return i;
        i += (size_t)n;
    }
    return len;
}

/* ---- reading: the object ------------------------------------------------------ */

typedef struct st_tensor {
    char *name;
    const st_dtype *dtype;
    int ndim;
    int64_t *shape;
    uint64_t begin, end; /* data_offsets */
    void *copy;          /* an aligned copy of the data, made when first asked for */
    bool used;
} st_tensor;

struct tfm_safetensors {
    void *map;                  /* the mapped file, or NULL */
    size_t map_size;
    tfm_buf owned;              /* the file read into memory, when not mapped */
    const unsigned char *data;  /* the data section */
    uint64_t data_size;
    st_tensor *tensors;         /* ordered by offset */
    size_t n_tensors;
    tfm_strmap *by_name;        /* name -> index in tensors */
    const unsigned char *header; /* the header text (in map, owned or the caller's bytes) */
    tfm_buf long_values;        /* st_span: the long strings left out of cJSON's text */
    st_meta *meta;              /* in header order */
    size_t n_meta;
    tfm_strmap *meta_by_key;    /* key -> index in meta */
};

void tfm_safetensors_free(tfm_safetensors *f)
{
    if (!f) return;
    for (size_t i = 0; i < f->n_tensors; i++) {
        free(f->tensors[i].name);
        free(f->tensors[i].shape);
        free(f->tensors[i].copy);
    }
    free(f->tensors);
    tfm_buf_free(&f->long_values);
    for (size_t i = 0; i < f->n_meta; i++) {
        free(f->meta[i].key);
        free(f->meta[i].value);
    }
    free(f->meta);
    tfm_strmap_free(f->by_name);
    tfm_strmap_free(f->meta_by_key);
    if (f->map) munmap(f->map, f->map_size);
    tfm_buf_free(&f->owned);
    free(f);
}

/* ---- reading: the header -------------------------------------------------------- */

static const char *json_kind(const cJSON *j)
{
    if (cJSON_IsObject(j)) return "an object";
    if (cJSON_IsArray(j)) return "an array";
    if (cJSON_IsString(j)) return "a string";
    if (cJSON_IsNumber(j)) return "a number";
    if (cJSON_IsBool(j)) return "a boolean";
    if (cJSON_IsNull(j)) return "null";
    return "nothing";
}

/* Reads a non-negative integer below ST_MAX_INT; what describes the value
 * for the message ("tensor 'x': shape[1]"). */
static tfm_status read_uint(const cJSON *j, const char *name, const char *what, int index,
                            uint64_t *out, tfm_error *err)
{
    if (!cJSON_IsNumber(j))
        return tfm_error_set(err, TFM_ERR_FORMAT,
                             "tensor '%s': %s[%d] is %s, expected a non-negative integer", name,
                             what, index, json_kind(j));
    double d = j->valuedouble;
    /* The range is checked before the cast: converting an out-of-range
     * double to an integer is undefined. */
    if (!(d >= 0 && d < (double)ST_MAX_INT) || d != (double)(uint64_t)d)
        return tfm_error_set(err, TFM_ERR_FORMAT,
                             "tensor '%s': %s[%d] is %.17g, expected a non-negative integer below "
                             "2^53",
                             name, what, index, d);
    *out = (uint64_t)d;
    return TFM_OK;
}

/* Reads one "NAME": {"dtype", "shape", "data_offsets"} entry into t and
 * checks that its offsets span exactly the bytes its dtype and shape need. */
static tfm_status read_tensor(st_tensor *t, const char *name, const cJSON *obj, tfm_error *err)
{
    t->name = strdup(name);
    if (!t->name) return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    if (!cJSON_IsObject(obj))
        return tfm_error_set(err, TFM_ERR_FORMAT,
                             "tensor '%s': expected an object with \"dtype\", \"shape\" and "
                             "\"data_offsets\", found %s",
                             name, json_kind(obj));
    /* Other fields are ignored, as the reference does; a field twice is an
     * error, as it is there. */
    const cJSON *dtype = NULL, *shape = NULL, *offsets = NULL;
    for (const cJSON *c = obj->child; c; c = c->next) {
        const cJSON **slot = strcmp(c->string, "dtype") == 0          ? &dtype
                             : strcmp(c->string, "shape") == 0        ? &shape
                             : strcmp(c->string, "data_offsets") == 0 ? &offsets
                                                                      : NULL;
        if (!slot) continue;
        if (*slot)
            return tfm_error_set(err, TFM_ERR_FORMAT, "tensor '%s': \"%s\" appears twice", name,
                                 c->string);
        *slot = c;
    }
    if (!dtype || !shape || !offsets)
        return tfm_error_set(err, TFM_ERR_FORMAT, "tensor '%s' has no \"%s\"", name,
                             !dtype ? "dtype" : !shape ? "shape" : "data_offsets");

    if (!cJSON_IsString(dtype))
        return tfm_error_set(err, TFM_ERR_FORMAT,
                             "tensor '%s': dtype is %s, expected a string such as \"F32\"", name,
                             json_kind(dtype));
    if (dtype->valuestring[0] == DEFERRED_MARK)
        return tfm_error_set(err, TFM_ERR_FORMAT,
                             "tensor '%s' has a dtype of %u bytes or more (expected F32, I32, "
                             "F16, BF16, F64, I64, ... as safetensors names them)",
                             name, (unsigned)DEFERRED_BYTES);
    t->dtype = dtype_find(dtype->valuestring);
    if (!t->dtype)
        return tfm_error_set(err, TFM_ERR_FORMAT,
                             "tensor '%s' has the unknown dtype \"%.40s\" (expected F32, I32, "
                             "F16, BF16, F64, I64, ... as safetensors names them)",
                             name, dtype->valuestring);

    if (!cJSON_IsArray(shape))
        return tfm_error_set(err, TFM_ERR_FORMAT,
                             "tensor '%s': shape is %s, expected an array of non-negative integers",
                             name, json_kind(shape));
    int ndim = cJSON_GetArraySize(shape);
    if (ndim > TFM_SAFETENSORS_MAX_NDIM)
        return tfm_error_set(err, TFM_ERR_FORMAT, "tensor '%s': shape has %d dimensions, more "
                             "than the %d allowed", name, ndim, TFM_SAFETENSORS_MAX_NDIM);
    t->shape = malloc(((size_t)ndim + 1) * sizeof *t->shape);
    if (!t->shape) return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    const cJSON *dim = shape->child;
    for (int i = 0; i < ndim; i++, dim = dim->next) {
        uint64_t v = 0;
        tfm_status st = read_uint(dim, name, "shape", i, &v, err);
        if (st != TFM_OK) return st;
        t->shape[i] = (int64_t)v;
    }
    t->ndim = ndim;

    if (!cJSON_IsArray(offsets) || cJSON_GetArraySize(offsets) != 2)
        return tfm_error_set(err, TFM_ERR_FORMAT,
                             "tensor '%s': data_offsets is %s%s, expected [begin, end]", name,
                             json_kind(offsets),
                             cJSON_IsArray(offsets) && cJSON_GetArraySize(offsets) != 2
                                 ? " of other than 2 items"
                                 : "");
    tfm_status st = read_uint(offsets->child, name, "data_offsets", 0, &t->begin, err);
    if (st == TFM_OK) st = read_uint(offsets->child->next, name, "data_offsets", 1, &t->end, err);
    if (st != TFM_OK) return st;

    char text[ST_SHAPE_TEXT];
    st_format_shape(t->ndim, t->shape, text, sizeof text);
    /* The size in bits, with every product checked as the reference checks
     * it (ValidationOverflow, then MisalignedSlice for F4 and F6). */
    uint64_t bits = t->dtype->bits;
    for (int i = 0; i < t->ndim; i++)
        if (__builtin_mul_overflow(bits, (uint64_t)t->shape[i], &bits))
            return tfm_error_set(err, TFM_ERR_FORMAT,
                                 "tensor '%s': shape %s %s holds more than 2^64 bits", name, text,
                                 t->dtype->name);
    if (bits % 8 != 0)
        return tfm_error_set(err, TFM_ERR_FORMAT,
                             "tensor '%s': shape %s %s is %" PRIu64
                             " bits, not a whole number of bytes",
                             name, text, t->dtype->name, bits);
    if (t->end < t->begin || t->end - t->begin != bits / 8)
        return tfm_error_set(err, TFM_ERR_FORMAT,
                             "tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64
                             "] do not match shape %s %s (%" PRIu64 " bytes)",
                             name, t->begin, t->end, text, t->dtype->name, bits / 8);
    return TFM_OK;
}

/* The span of the long string whose mark is text (DEFERRED_MARK and its
 * number, as text_for_cjson wrote it: nothing else starts with the mark). */
static const st_span *long_value_of(const tfm_safetensors *f, const char *text)
{
    const size_t k = (size_t)strtoull(text + 1, NULL, 10);
    assert(text[0] == DEFERRED_MARK && k < f->long_values.len / sizeof(st_span));
    return (const st_span *)(void *)f->long_values.data + k;
}

/* Reads "__metadata__": an object whose values are all strings. */
static tfm_status read_metadata(tfm_safetensors *f, const cJSON *obj, tfm_error *err)
{
    if (!cJSON_IsObject(obj))
        return tfm_error_set(err, TFM_ERR_FORMAT,
                             "__metadata__ is %s, expected an object of strings", json_kind(obj));
    size_t n = (size_t)cJSON_GetArraySize(obj);
    f->meta = calloc(n ? n : 1, sizeof *f->meta);
    f->meta_by_key = tfm_strmap_create(n);
    if (!f->meta || !f->meta_by_key) return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    for (const cJSON *c = obj->child; c; c = c->next) {
        if (!cJSON_IsString(c))
            return tfm_error_set(err, TFM_ERR_FORMAT,
                                 "__metadata__ value for '%s' is not a string (it is %s)",
                                 c->string, json_kind(c));
        bool inserted;
        if (!tfm_strmap_upsert(f->meta_by_key, c->string, strlen(c->string), (int64_t)f->n_meta,
                               &inserted))
            return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
        if (!inserted)
            return tfm_error_set(err, TFM_ERR_FORMAT, "__metadata__ has the key '%s' twice",
                                 c->string);
        st_meta *m = &f->meta[f->n_meta++];
        m->key = strdup(c->string);
        if (!m->key) return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
        if (c->valuestring[0] == DEFERRED_MARK) { /* a long one, read when asked for */
            const st_span *span = long_value_of(f, c->valuestring);
            m->begin = span->begin;
            m->end = span->end;
            continue;
        }
        m->value = strdup(c->valuestring);
        if (!m->value) return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    }
    return TFM_OK;
}

/* Reads the tensors and the metadata of the parsed header. */
static tfm_status read_header(tfm_safetensors *f, const cJSON *root, tfm_error *err)
{
    if (!cJSON_IsObject(root))
        return tfm_error_set(err, TFM_ERR_FORMAT,
                             "header is %s, expected a JSON object mapping tensor names to "
                             "{dtype, shape, data_offsets}",
                             cJSON_IsArray(root) ? "a JSON array" : json_kind(root));
    size_t n = (size_t)cJSON_GetArraySize(root);
    f->tensors = calloc(n ? n : 1, sizeof *f->tensors);
    f->by_name = tfm_strmap_create(n);
    if (!f->tensors || !f->by_name) return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    bool have_metadata = false;
    for (const cJSON *c = root->child; c; c = c->next) {
        /* cJSON keeps every key of an object, so a name given twice (which
         * JSON parsers disagree on) is found here. */
        if (strcmp(c->string, ST_METADATA_KEY) == 0) {
            if (have_metadata)
                return tfm_error_set(err, TFM_ERR_FORMAT, "header has \"__metadata__\" twice");
            have_metadata = true;
            tfm_status st = read_metadata(f, c, err);
            if (st != TFM_OK) return st;
            continue;
        }
        bool inserted;
        if (!tfm_strmap_upsert(f->by_name, c->string, strlen(c->string), 0, &inserted))
            return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
        if (!inserted)
            return tfm_error_set(err, TFM_ERR_FORMAT, "header names tensor '%s' twice", c->string);
        /* Counted first, so that free releases what read_tensor allocated
         * even when it fails half-way. */
        st_tensor *t = &f->tensors[f->n_tensors++];
        tfm_status st = read_tensor(t, c->string, c, err);
        if (st != TFM_OK) return st;
    }
    return TFM_OK;
}

/* Orders tensors by their data; names break ties so that the order (and so
 * every message) does not depend on the order of the header. */
static int by_offset(const void *pa, const void *pb)
{
    const st_tensor *a = pa, *b = pb;
    if (a->begin != b->begin) return a->begin < b->begin ? -1 : 1;
    if (a->end != b->end) return a->end < b->end ? -1 : 1;
    return strcmp(a->name, b->name);
}

/* Checks that the tensors, by offset, tile the data section: no gap, no
 * overlap, nothing missing, nothing left over. */
static tfm_status check_layout(tfm_safetensors *f, tfm_error *err)
{
    qsort(f->tensors, f->n_tensors, sizeof *f->tensors, by_offset);
    uint64_t pos = 0;
    for (size_t i = 0; i < f->n_tensors; i++) {
        const st_tensor *t = &f->tensors[i];
        if (t->begin < pos) {
            const st_tensor *p = &f->tensors[i - 1]; /* pos > 0: there is one before */
            return tfm_error_set(err, TFM_ERR_FORMAT,
                                 "tensor '%s' overlaps tensor '%s' (data_offsets [%" PRIu64
                                 ", %" PRIu64 "] and [%" PRIu64 ", %" PRIu64 "])",
                                 t->name, p->name, t->begin, t->end, p->begin, p->end);
        }
        if (t->begin > pos)
            return tfm_error_set(err, TFM_ERR_FORMAT,
                                 "the data section has %" PRIu64 " bytes that belong to no tensor "
                                 "before tensor '%s' (bytes %" PRIu64 " to %" PRIu64 ")",
                                 t->begin - pos, t->name, pos, t->begin);
        pos = t->end;
    }
    if (pos > f->data_size)
        return tfm_error_set(err, TFM_ERR_FORMAT,
                             "file is truncated: the header says the data section is %" PRIu64
                             " bytes, the file holds %" PRIu64,
                             pos, f->data_size);
    if (pos < f->data_size)
        return tfm_error_set(err, TFM_ERR_FORMAT,
                             "the file has %" PRIu64 " bytes after the last tensor: the header "
                             "says the data section is %" PRIu64 " bytes, the file holds %" PRIu64,
                             f->data_size - pos, pos, f->data_size);
    /* The name index now points at the sorted places. */
    for (size_t i = 0; i < f->n_tensors; i++)
        *tfm_strmap_find(f->by_name, f->tensors[i].name, strlen(f->tensors[i].name)) =
            (int64_t)i;
    return TFM_OK;
}

/* The header length at the start of bytes (ST_LEN_BYTES of them). */
static uint64_t header_length(const unsigned char *bytes)
{
    uint64_t n = 0;
    for (int i = ST_LEN_BYTES - 1; i >= 0; i--) n = n << 8 | bytes[i];
    return n;
}

static tfm_status header_too_long(uint64_t n, tfm_error *err)
{
    return tfm_error_set(err, TFM_ERR_FORMAT,
                         "header length %" PRIu64 " exceeds the limit of %u bytes (a model's "
                         "header needs a few MB at most)",
                         n, TFM_SAFETENSORS_MAX_HEADER);
}

/* Parses and checks the n-byte header text into f's tensors and metadata. */
static tfm_status parse_header(tfm_safetensors *f, const unsigned char *header, uint64_t n,
                               tfm_error *err)
{
    f->header = header;
    tfm_status st = st_check_header_text(header, (size_t)n, 0, &f->long_values, err);
    if (st != TFM_OK) return st;
    st_text_source from = {(st_span *)(void *)f->long_values.data,
                           f->long_values.len / sizeof(st_span), 0, (size_t)n};
    size_t len;
    char *text = st_text_for_cjson(header, (size_t)n, (st_span *)(void *)f->long_values.data,
                                   from.n_spans, &len);
    if (!text)
        return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory for a %" PRIu64 "-byte header",
                             n);
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (!root) {
        st = st_json_error(text, len, end, &from, err);
    } else {
        /* Only whitespace (the writer's padding) may follow the object. */
        size_t pos = end && end >= text && end <= text + len ? (size_t)(end - text) : len;
        while (pos < len && (text[pos] == ' ' || text[pos] == '\t' || text[pos] == '\n' ||
                             text[pos] == '\r'))
            pos++;
        if (pos < len)
            st = tfm_error_set(err, TFM_ERR_FORMAT,
                               "header has text after its JSON value, at byte %zu of %" PRIu64,
                               st_header_byte(&from, pos), n);
        else
            st = read_header(f, root, err);
        cJSON_Delete(root);
    }
    free(text);
    return st;
}

/* Parses and checks a whole file held in bytes[0..size) into f. */
static tfm_status parse_into(tfm_safetensors *f, const unsigned char *bytes, size_t size,
                             tfm_error *err)
{
    if (size < ST_LEN_BYTES)
        return tfm_error_set(err, TFM_ERR_FORMAT,
                             "file is truncated: it holds %zu bytes, but a safetensors file starts "
                             "with an 8-byte header length",
                             size);
    uint64_t n = header_length(bytes);
    if (n > size - ST_LEN_BYTES)
        return tfm_error_set(err, TFM_ERR_FORMAT,
                             "header length %" PRIu64 " exceeds the file size %zu (the file is "
                             "truncated or not a safetensors file)",
                             n, size);
    if (n > TFM_SAFETENSORS_MAX_HEADER) return header_too_long(n, err);
    const unsigned char *header = bytes + ST_LEN_BYTES;
    tfm_status st = parse_header(f, header, n, err);
    if (st != TFM_OK) return st;
    f->data = header + n;
    f->data_size = size - ST_LEN_BYTES - n;
    return check_layout(f, err);
}

tfm_status tfm_safetensors_parse(const void *data, size_t size, tfm_safetensors **out,
                                 tfm_error *err)
{
    *out = NULL;
    if (!data && size > 0) return tfm_error_set(err, TFM_ERR_ARG, "no data to parse");
    tfm_safetensors *f = calloc(1, sizeof *f);
    if (!f) return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    tfm_buf_init(&f->owned);
    tfm_status st = parse_into(f, data ? data : "", size, err);
    if (st != TFM_OK) {
        tfm_safetensors_free(f);
        return st;
    }
    *out = f;
    return TFM_OK;
}

/* Reads from fd until b holds total bytes, or the input ends. */
static tfm_status read_to(int fd, tfm_buf *b, uint64_t total, tfm_error *err)
{
    return b->len >= total ? TFM_OK : tfm_read_upto(fd, b, total - b->len, err);
}

/* Reads a file that cannot be mapped (a pipe, a device, /proc) into b (which
 * may hold its first bytes already, read by the caller): the
 * header length, the header, then exactly the data section the header
 * describes, and refuses anything after it, so that /dev/zero or an endless
 * pipe is an error rather than a read without end.  Where the input is
 * short, what arrived is kept and parse_into reports the truncation. */
static tfm_status read_stream(int fd, tfm_buf *b, tfm_error *err)
{
    tfm_status st = read_to(fd, b, ST_LEN_BYTES, err);
    if (st != TFM_OK || b->len < ST_LEN_BYTES) return st;
    uint64_t n = header_length((const unsigned char *)b->data);
    if (n > TFM_SAFETENSORS_MAX_HEADER) return header_too_long(n, err);
    st = read_to(fd, b, ST_LEN_BYTES + n, err);
    if (st != TFM_OK || b->len < ST_LEN_BYTES + n) return st;
    /* The header alone tells how long the data section is. */
    tfm_safetensors *h = calloc(1, sizeof *h);
    if (!h) return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    tfm_buf_init(&h->owned);
    st = parse_header(h, (const unsigned char *)b->data + ST_LEN_BYTES, n, err);
    uint64_t data_size = 0;
    for (size_t i = 0; st == TFM_OK && i < h->n_tensors; i++)
        if (h->tensors[i].end > data_size) data_size = h->tensors[i].end;
    tfm_safetensors_free(h);
    if (st != TFM_OK) return st;
    st = read_to(fd, b, ST_LEN_BYTES + n + data_size, err);
    if (st != TFM_OK || b->len < ST_LEN_BYTES + n + data_size) return st;
    size_t before = b->len;
    st = tfm_read_upto(fd, b, 1, err);
    if (st != TFM_OK) return st;
    if (b->len > before)
        return tfm_error_set(err, TFM_ERR_FORMAT,
                             "the input goes on after the %" PRIu64 "-byte data section its "
                             "header describes (not a safetensors file, or two run together)",
                             data_size);
    return TFM_OK;
}

tfm_status tfm_safetensors_read_fd(int fd, const void *start, size_t have,
                                   tfm_safetensors **out, tfm_error *err)
{
    *out = NULL;
    tfm_safetensors *f = calloc(1, sizeof *f);
    if (!f) return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    tfm_buf_init(&f->owned);
    tfm_status st = tfm_buf_append(&f->owned, start, have) == TFM_OK
                        ? read_stream(fd, &f->owned, err)
                        : tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    if (st == TFM_OK)
        st = parse_into(f, (const unsigned char *)(f->owned.data ? f->owned.data : ""),
                        f->owned.len, err);
    if (st != TFM_OK) {
        tfm_safetensors_free(f);
        return st;
    }
    *out = f;
    return TFM_OK;
}

tfm_status tfm_safetensors_open(const char *path, tfm_safetensors **out, tfm_error *err)
{
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return tfm_error_set(err, TFM_ERR_IO, "%s", strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        tfm_status st = tfm_error_set(err, TFM_ERR_IO, "read error: %s", strerror(errno));
        close(fd);
        return st;
    }
    void *map = MAP_FAILED;
    if (S_ISREG(sb.st_mode) && sb.st_size > 0)
        map = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    /* Huge pages: a file not yet in the page cache is read in 2 MB folios,
     * which a fault then maps whole.  Measured on a base model's packed file
     * (484 MB) read cold: decode's later starts take 1,640 page faults
     * instead of 3,510, and the first step of a search 22 ms instead of 32.
     * A file already cached in small folios stays as it is. */
    if (map != MAP_FAILED) (void)madvise(map, (size_t)sb.st_size, MADV_HUGEPAGE);
    /* A file that cannot be mapped (a pipe, /proc, a file system without
     * mmap) is read instead. */
    if (map == MAP_FAILED) {
        tfm_status st = tfm_safetensors_read_fd(fd, NULL, 0, out, err);
        close(fd);
        return st;
    }
    close(fd);
    tfm_safetensors *f = calloc(1, sizeof *f);
    if (!f) {
        munmap(map, (size_t)sb.st_size);
        return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    }
    tfm_buf_init(&f->owned);
    f->map = map;
    f->map_size = (size_t)sb.st_size;
    tfm_status st = parse_into(f, f->map, f->map_size, err);
    if (st != TFM_OK) {
        tfm_safetensors_free(f);
        return st;
    }
    *out = f;
    return TFM_OK;
}

/* ---- reading: access -------------------------------------------------------- */

size_t tfm_safetensors_count(const tfm_safetensors *f) { return f->n_tensors; }

const char *tfm_safetensors_name(const tfm_safetensors *f, size_t i)
{
    return i < f->n_tensors ? f->tensors[i].name : NULL;
}

bool tfm_safetensors_find(const tfm_safetensors *f, const char *name, size_t *index)
{
    int64_t *v = tfm_strmap_find(f->by_name, name, strlen(name));
    if (!v) return false;
    if (index) *index = (size_t)*v;
    return true;
}

void tfm_safetensors_info_at(const tfm_safetensors *f, size_t i, tfm_safetensors_info *out)
{
    const st_tensor *t = &f->tensors[i];
    memset(out, 0, sizeof *out);
    out->name = t->name;
    out->dtype_name = t->dtype->name;
    out->supported = dtype_supported(t->dtype, &out->dtype);
    out->ndim = t->ndim;
    out->shape = t->shape;
    out->nbytes = t->end - t->begin;
}

/* Finds name, or fails (NULL) with "missing tensor 'x'". */
static st_tensor *find_tensor(tfm_safetensors *f, const char *name, tfm_error *err)
{
    size_t i;
    if (!tfm_safetensors_find(f, name, &i)) {
        tfm_error_set(err, TFM_ERR_FORMAT, "missing tensor '%s'", name);
        return NULL;
    }
    return &f->tensors[i];
}

/* The library dtype of t, failing when the library does not read it. */
static tfm_status tensor_dtype(const st_tensor *t, tfm_dtype *out, tfm_error *err)
{
    if (!dtype_supported(t->dtype, out))
        return tfm_error_set(err, TFM_ERR_UNSUPPORTED,
                             "tensor '%s' has dtype %s, which tfm does not read (only F32, I32, "
                             "I8 and BF16)",
                             t->name, t->dtype->name);
    return TFM_OK;
}

/* The data of t, in place when aligned for its dtype, else in a copy that
 * t keeps (the data section starts wherever the header ends, and a file may
 * place a tensor at any offset). */
static tfm_status tensor_data(st_tensor *t, const unsigned char *base, const void **out,
                              tfm_error *err)
{
    const unsigned char *p = base + t->begin;
    size_t align = t->dtype->bits >= 8 ? t->dtype->bits / 8 : 1;
    if ((uintptr_t)p % align == 0) {
        *out = p;
        return TFM_OK;
    }
    if (!t->copy) {
        size_t n = (size_t)(t->end - t->begin);
        t->copy = malloc(n ? n : 1); /* malloc aligns for every type */
        if (!t->copy)
            return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory copying tensor '%s'", t->name);
        memcpy(t->copy, p, n);
    }
    *out = t->copy;
    return TFM_OK;
}

tfm_status tfm_safetensors_get(tfm_safetensors *f, const char *name, tfm_dtype dtype, int ndim,
                               const int64_t *shape, const void **data, tfm_error *err)
{
    if (ndim < 0 || (ndim > 0 && !shape))
        return tfm_error_set(err, TFM_ERR_ARG, "tensor '%s': bad expected shape", name);
    st_tensor *t = find_tensor(f, name, err);
    if (!t) return TFM_ERR_FORMAT;
    tfm_dtype have = TFM_F32;
    tfm_status st = tensor_dtype(t, &have, err);
    if (st != TFM_OK) return st;
    if (have != dtype)
        return tfm_error_set(err, TFM_ERR_FORMAT, "tensor '%s' has dtype %s, expected %s", name,
                             t->dtype->name, st_dtype_name(dtype));
    bool same = t->ndim == ndim;
    for (int i = 0; same && i < ndim; i++) same = t->shape[i] == shape[i];
    if (!same) {
        char found[ST_SHAPE_TEXT], want[ST_SHAPE_TEXT];
        st_format_shape(t->ndim, t->shape, found, sizeof found);
        st_format_shape(ndim, shape, want, sizeof want);
        return tfm_error_set(err, TFM_ERR_FORMAT, "tensor '%s' has shape %s, expected %s", name,
                             found, want);
    }
    st = tensor_data(t, f->data, data, err);
    if (st != TFM_OK) return st;
    t->used = true;
    return TFM_OK;
}

tfm_status tfm_safetensors_read(tfm_safetensors *f, const char *name, tfm_tensor *out,
                                tfm_error *err)
{
    st_tensor *t = find_tensor(f, name, err);
    if (!t) return TFM_ERR_FORMAT;
    tfm_dtype dtype = TFM_F32;
    tfm_status st = tensor_dtype(t, &dtype, err);
    if (st != TFM_OK) return st;
    if (t->ndim > TFM_MAX_DIMS)
        return tfm_error_set(err, TFM_ERR_UNSUPPORTED,
                             "tensor '%s' has %d dimensions, more than the %d of a tfm_tensor",
                             name, t->ndim, TFM_MAX_DIMS);
    if (dtype != TFM_F32 && dtype != TFM_I32)
        return tfm_error_set(err, TFM_ERR_UNSUPPORTED,
                             "tensor '%s' has dtype %s: a tfm_tensor holds F32 or I32", name,
                             t->dtype->name);
    st = tfm_tensor_reshape(out, dtype, t->ndim, t->shape);
    if (st == TFM_ERR_NOMEM)
        return tfm_error_set(err, st, "out of memory for tensor '%s'", name);
    if (st != TFM_OK)
        return tfm_error_set(err, TFM_ERR_UNSUPPORTED, "tensor '%s' is too large for a tfm_tensor",
                             name);
    size_t n = (size_t)(t->end - t->begin);
    if (n > 0) memcpy(out->data, f->data + t->begin, n);
    t->used = true;
    return TFM_OK;
}

tfm_status tfm_safetensors_check_all_used(const tfm_safetensors *f, tfm_error *err)
{
    const char *first = NULL;
    size_t unused = 0;
    for (size_t i = 0; i < f->n_tensors; i++) {
        if (f->tensors[i].used) continue;
        if (!first) first = f->tensors[i].name;
        unused++;
    }
    if (unused == 0) return TFM_OK;
    if (unused == 1) return tfm_error_set(err, TFM_ERR_FORMAT, "unexpected tensor '%s'", first);
    return tfm_error_set(err, TFM_ERR_FORMAT, "unexpected tensor '%s' (and %zu more)", first,
                         unused - 1);
}

void tfm_safetensors_skip_prefixed(tfm_safetensors *f, const char *prefix)
{
    const size_t n = strlen(prefix);
    for (size_t i = 0; i < f->n_tensors; i++)
        if (strncmp(f->tensors[i].name, prefix, n) == 0) f->tensors[i].used = true;
}

/* Reads the value of metadata entry m of f from the header, the first time
 * a long one is asked for: checked as the header's other strings were. */
static tfm_status meta_value(const tfm_safetensors *f, st_meta *m, tfm_error *err)
{
    if (m->value) return TFM_OK;
    /* the string with its quotes, as a JSON text of its own */
    const unsigned char *s = f->header + m->begin - 1;
    const size_t len = m->end - m->begin + 2;
    tfm_status st = st_check_header_text(s, len, m->begin - 1, NULL, err);
    if (st != TFM_OK) return st;
    size_t bad = 0;
    st = st_json_unescape(s + 1, len - 2, &m->value, &bad);
    if (st == TFM_ERR_FORMAT) {
        /* a bad escape: the check let everything else through */
        const st_text_source from = {NULL, 0, m->begin - 1, (size_t)(f->data - f->header)};
        return st_json_error((const char *)s, len, (const char *)s + 1 + bad, &from, err);
    }
    if (st != TFM_OK) return tfm_error_set(err, st, "out of memory");
    return TFM_OK;
}

/* The entry of key, or NULL. */
static st_meta *meta_of(const tfm_safetensors *f, const char *key)
{
    if (!f->meta_by_key) return NULL;
    int64_t *v = tfm_strmap_find(f->meta_by_key, key, strlen(key));
    return v ? &f->meta[*v] : NULL;
}

bool tfm_safetensors_has_metadata(const tfm_safetensors *f, const char *key)
{
    return meta_of(f, key) != NULL;
}

tfm_status tfm_safetensors_metadata_get(const tfm_safetensors *f, const char *key,
                                        const char **value, tfm_error *err)
{
    *value = NULL;
    st_meta *m = meta_of(f, key);
    if (!m) return TFM_OK;
    tfm_status st = meta_value(f, m, err);
    if (st == TFM_OK) *value = m->value;
    return st;
}

const char *tfm_safetensors_metadata(const tfm_safetensors *f, const char *key)
{
    st_meta *m = meta_of(f, key);
    tfm_error err;
    return m && meta_value(f, m, &err) == TFM_OK ? m->value : NULL;
}

size_t tfm_safetensors_metadata_count(const tfm_safetensors *f) { return f->n_meta; }

const char *tfm_safetensors_metadata_key(const tfm_safetensors *f, size_t i)
{
    return i < f->n_meta ? f->meta[i].key : NULL;
}

const char *tfm_safetensors_metadata_value(const tfm_safetensors *f, size_t i)
{
    tfm_error err;
    return i < f->n_meta && meta_value(f, &f->meta[i], &err) == TFM_OK ? f->meta[i].value : NULL;
}
