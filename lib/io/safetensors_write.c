/* safetensors_write.c - writing safetensors files (tfm/safetensors.h
 * describes the format).  The header is built with cJSON, with integers
 * written by us (cJSON would print 1e15 as "1e+15", which the reference
 * reads as a float and refuses), and padded with spaces to a multiple of 8
 * bytes as the reference writer does. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "tfm/io.h"
#include "safetensors_internal.h"

typedef struct st_entry {
    char *name;
    tfm_dtype dtype;
    int ndim;
    int64_t shape[TFM_MAX_DIMS];
    const void *data; /* the caller's */
    size_t nbytes;
} st_entry;

struct tfm_safetensors_writer {
    tfm_buf tensors;     /* st_entry records, in the order added */
    tfm_buf meta;        /* st_meta records */
    tfm_strmap *names;   /* tensor names, to refuse one twice */
    tfm_strmap *keys;    /* metadata keys, likewise */
    uint64_t data_size;  /* the sum of the tensors' sizes */
    unsigned align;      /* the data section starts on a multiple of it */
};

/* The records held in a tfm_buf used as an array. */
#define RECORDS(buf, type) ((type *)(void *)(buf).data)
#define N_RECORDS(buf, type) ((buf).len / sizeof(type))

tfm_safetensors_writer *tfm_safetensors_writer_create(void)
{
    tfm_safetensors_writer *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    tfm_buf_init(&w->tensors);
    tfm_buf_init(&w->meta);
    w->names = tfm_strmap_create(0);
    w->keys = tfm_strmap_create(0);
    w->align = ST_HEADER_ALIGN;
    if (!w->names || !w->keys) {
        tfm_safetensors_writer_free(w);
        return NULL;
    }
    return w;
}

void tfm_safetensors_writer_align_data(tfm_safetensors_writer *w)
{
    w->align = ST_HEADER_ALIGN_MAX;
}

void tfm_safetensors_writer_free(tfm_safetensors_writer *w)
{
    if (!w) return;
    for (size_t i = 0; i < N_RECORDS(w->tensors, st_entry); i++)
        free(RECORDS(w->tensors, st_entry)[i].name);
    for (size_t i = 0; i < N_RECORDS(w->meta, st_meta); i++) {
        free(RECORDS(w->meta, st_meta)[i].key);
        free(RECORDS(w->meta, st_meta)[i].value);
    }
    tfm_buf_free(&w->tensors);
    tfm_buf_free(&w->meta);
    tfm_strmap_free(w->names);
    tfm_strmap_free(w->keys);
    free(w);
}

/* Fails with TFM_ERR_UTF8 when s is not valid UTF-8; what names it. */
static tfm_status check_utf8(const char *s, const char *what, tfm_error *err)
{
    size_t len = strlen(s);
    size_t bad = st_utf8_invalid_at((const unsigned char *)s, len);
    if (bad < len)
        return tfm_error_set(err, TFM_ERR_UTF8,
                             "%s is not valid UTF-8 (bad byte 0x%02x at byte %zu)", what,
                             (unsigned char)s[bad], bad);
    return TFM_OK;
}

tfm_status tfm_safetensors_writer_add_metadata(tfm_safetensors_writer *w, const char *key,
                                               const char *value, tfm_error *err)
{
    if (!key || !value) return tfm_error_set(err, TFM_ERR_ARG, "metadata key or value is NULL");
    tfm_status st = check_utf8(key, "metadata key", err);
    if (st == TFM_OK) st = check_utf8(value, "metadata value", err);
    if (st != TFM_OK) {
        tfm_error_prefix(err, "metadata '%s'", key);
        return st;
    }
    bool inserted;
    if (!tfm_strmap_upsert(w->keys, key, strlen(key), 0, &inserted))
        return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    if (!inserted)
        return tfm_error_set(err, TFM_ERR_ARG, "metadata key '%s' was added twice", key);
    st_meta m = {.key = strdup(key), .value = strdup(value)};
    if (!m.key || !m.value || tfm_buf_append(&w->meta, &m, sizeof m) != TFM_OK) {
        free(m.key);
        free(m.value);
        return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    }
    return TFM_OK;
}

tfm_status tfm_safetensors_writer_add_tensor(tfm_safetensors_writer *w, const char *name,
                                             tfm_dtype dtype, int ndim, const int64_t *shape,
                                             const void *data, tfm_error *err)
{
    if (!name) return tfm_error_set(err, TFM_ERR_ARG, "tensor name is NULL");
    if (!st_dtype_name(dtype))
        return tfm_error_set(err, TFM_ERR_ARG, "tensor '%s' has an unknown dtype %d", name,
                             (int)dtype);
    if (ndim < 0 || ndim > TFM_MAX_DIMS)
        return tfm_error_set(err, TFM_ERR_RANGE, "tensor '%s' has %d dimensions, expected 0 to %d",
                             name, ndim, TFM_MAX_DIMS);
    if (ndim > 0 && !shape)
        return tfm_error_set(err, TFM_ERR_ARG, "tensor '%s' has no shape", name);
    tfm_status st = check_utf8(name, "tensor name", err);
    if (st != TFM_OK) return st;
    if (strcmp(name, ST_METADATA_KEY) == 0)
        return tfm_error_set(err, TFM_ERR_ARG, "a tensor cannot be called \"__metadata__\"");

    /* The size, checked so that every number the header holds stays an
     * integer below 2^53, which the reader (and JSON doubles) hold exactly.
     * Each dimension is checked even when another is 0. */
    char text[ST_SHAPE_TEXT];
    bool empty = false;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0 || (uint64_t)shape[i] >= ST_MAX_INT) {
            st_format_shape(ndim, shape, text, sizeof text);
            return tfm_error_set(err, TFM_ERR_RANGE,
                                 "tensor '%s' has a bad shape %s: dimensions must be 0 or more and "
                                 "below 2^53",
                                 name, text);
        }
        if (shape[i] == 0) empty = true;
    }
    uint64_t nbytes = empty ? 0 : tfm_dtype_size(dtype);
    for (int i = 0; i < ndim && !empty; i++) {
        if (__builtin_mul_overflow(nbytes, (uint64_t)shape[i], &nbytes) || nbytes >= ST_MAX_INT) {
            st_format_shape(ndim, shape, text, sizeof text);
            return tfm_error_set(err, TFM_ERR_RANGE,
                                 "tensor '%s' of shape %s needs 2^53 bytes or more", name, text);
        }
    }
    if (nbytes > SIZE_MAX || w->data_size + nbytes >= ST_MAX_INT)
        return tfm_error_set(err, TFM_ERR_RANGE,
                             "tensor '%s' takes the data over 2^53 bytes, more than the header "
                             "can count",
                             name);
    if (nbytes > 0 && !data)
        return tfm_error_set(err, TFM_ERR_ARG, "tensor '%s' has no data", name);

    bool inserted;
    if (!tfm_strmap_upsert(w->names, name, strlen(name), 0, &inserted))
        return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    if (!inserted) return tfm_error_set(err, TFM_ERR_ARG, "tensor '%s' was added twice", name);
    st_entry e = {.name = strdup(name), .dtype = dtype, .ndim = ndim, .data = data,
                  .nbytes = (size_t)nbytes};
    for (int i = 0; i < ndim; i++) e.shape[i] = shape[i];
    if (!e.name || tfm_buf_append(&w->tensors, &e, sizeof e) != TFM_OK) {
        free(e.name);
        return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    }
    w->data_size += nbytes;
    return TFM_OK;
}

/* Appends v to a JSON array as an integer written out in full. */
static bool add_uint(cJSON *array, uint64_t v)
{
    char text[24];
    snprintf(text, sizeof text, "%" PRIu64, v);
    return cJSON_AddItemToArray(array, cJSON_CreateRaw(text));
}

/* The header entry of tensor e whose data start at begin, or NULL when
 * memory runs out. */
static cJSON *tensor_json(const st_entry *e, uint64_t begin)
{
    cJSON *t = cJSON_CreateObject();
    if (!t) return NULL;
    cJSON *shape = NULL, *offsets = NULL;
    bool ok = cJSON_AddStringToObject(t, "dtype", st_dtype_name(e->dtype)) &&
              (shape = cJSON_AddArrayToObject(t, "shape")) &&
              (offsets = cJSON_AddArrayToObject(t, "data_offsets"));
    for (int d = 0; ok && d < e->ndim; d++) ok = add_uint(shape, (uint64_t)e->shape[d]);
    ok = ok && add_uint(offsets, begin) && add_uint(offsets, begin + e->nbytes);
    if (!ok) {
        cJSON_Delete(t);
        return NULL;
    }
    return t;
}

/* Builds the header text (without its length or padding): the metadata,
 * then the tensors in the order added, their data back to back. */
static tfm_status build_header(const tfm_safetensors_writer *w, char **out, tfm_error *err)
{
    *out = NULL;
    cJSON *root = cJSON_CreateObject();
    bool ok = root != NULL;
    size_t n_meta = N_RECORDS(w->meta, st_meta);
    if (ok && n_meta > 0) {
        cJSON *meta = cJSON_AddObjectToObject(root, ST_METADATA_KEY);
        ok = meta != NULL;
        for (size_t i = 0; ok && i < n_meta; i++) {
            const st_meta *m = &RECORDS(w->meta, st_meta)[i];
            ok = cJSON_AddStringToObject(meta, m->key, m->value) != NULL;
        }
    }
    uint64_t offset = 0;
    for (size_t i = 0; ok && i < N_RECORDS(w->tensors, st_entry); i++) {
        const st_entry *e = &RECORDS(w->tensors, st_entry)[i];
        cJSON *t = tensor_json(e, offset);
        ok = t && cJSON_AddItemToObject(root, e->name, t);
        if (t && !ok) cJSON_Delete(t);
        offset += e->nbytes;
    }
    if (ok) *out = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (!*out) return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory building the header");
    return TFM_OK;
}

tfm_status tfm_safetensors_write_stream(const tfm_safetensors_writer *w, FILE *fp,
                                        tfm_error *err)
{
    char *json;
    tfm_status st = build_header(w, &json, err);
    if (st != TFM_OK) return st;
    size_t len = strlen(json);
    /* the data section starts after the length field and the header */
    size_t pad = (w->align - (ST_LEN_BYTES + len) % w->align) % w->align;
    if (len + pad > TFM_SAFETENSORS_MAX_HEADER) {
        free(json);
        return tfm_error_set(err, TFM_ERR_RANGE,
                             "the header would be %zu bytes, over the format's limit of %u",
                             len + pad, TFM_SAFETENSORS_MAX_HEADER);
    }
    unsigned char head[ST_LEN_BYTES];
    uint64_t n = len + pad;
    for (int i = 0; i < ST_LEN_BYTES; i++) head[i] = (unsigned char)(n >> (8 * i));
    char spaces[ST_HEADER_ALIGN_MAX];
    memset(spaces, ' ', sizeof spaces);
    bool ok = fwrite(head, 1, sizeof head, fp) == sizeof head && fwrite(json, 1, len, fp) == len &&
              fwrite(spaces, 1, pad, fp) == pad;
    free(json);
    for (size_t i = 0; ok && i < N_RECORDS(w->tensors, st_entry); i++) {
        const st_entry *e = &RECORDS(w->tensors, st_entry)[i];
        if (e->nbytes > 0) ok = fwrite(e->data, 1, e->nbytes, fp) == e->nbytes;
    }
    if (!ok) return tfm_error_set(err, TFM_ERR_IO, "write failed: %s", strerror(errno));
    return TFM_OK;
}

tfm_status tfm_safetensors_write(const tfm_safetensors_writer *w, const char *path,
                                 tfm_error *err)
{
    tfm_atomic_file f;
    tfm_status st = tfm_atomic_open(&f, path, err);
    if (st != TFM_OK) return st;
    st = tfm_safetensors_write_stream(w, f.fp, err);
    if (st != TFM_OK) { /* the caller names the file, as for every error here */
        tfm_atomic_abort(&f);
        return st;
    }
    return tfm_atomic_commit(&f, err);
}
