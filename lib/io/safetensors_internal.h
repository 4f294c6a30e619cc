/* safetensors_internal.h - what the reader (safetensors.c) and the writer
 * (safetensors_write.c) of safetensors files share: the format's limits,
 * the metadata's key and entries, and a few helpers. */
#ifndef TFM_SAFETENSORS_INTERNAL_H
#define TFM_SAFETENSORS_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "tfm/safetensors.h"

/* The header length field. */
#define ST_LEN_BYTES 8
/* The writer pads the header to this, so the data section starts aligned
 * (or to a cache line: tfm_safetensors_writer_align_data). */
#define ST_HEADER_ALIGN 8
#define ST_HEADER_ALIGN_MAX 64
/* Shapes and offsets are below this: cJSON's doubles hold every integer
 * below it exactly, so a number read is the number written (2^53 + 1 would
 * read as 2^53). */
#define ST_MAX_INT ((uint64_t)1 << 53)
/* Room for a shape in a message; longer shapes end in "...". */
#define ST_SHAPE_TEXT 160

/* The header's key of the metadata. */
#define ST_METADATA_KEY "__metadata__"

/* A metadata entry.  The reader leaves a long value NULL until it is asked
 * for, and knows it by its text in the header, [begin, end). */
typedef struct st_meta {
    char *key, *value;
    size_t begin, end;
} st_meta;

/* The file's name of a library dtype, or NULL when d is none. */
const char *st_dtype_name(tfm_dtype d);
/* Writes a shape as the header does, "[5, 6]", cut with "..." to fit. */
void st_format_shape(int ndim, const int64_t *shape, char *out, size_t size);
/* The offset of the first invalid UTF-8 sequence in s[0..len), or len. */
size_t st_utf8_invalid_at(const unsigned char *s, size_t len);
/* The n bytes between a JSON string's quotes (already checked: UTF-8, no
 * control byte) with the escapes undone, as a new NUL-terminated string in
 * *out (json_string.c).  TFM_ERR_FORMAT for an escape JSON does not have
 * (or \u0000, or half a surrogate pair), *bad the offset of its
 * backslash; TFM_ERR_NOMEM. */
tfm_status st_json_unescape(const unsigned char *s, size_t n, char **out, size_t *bad);

#endif
