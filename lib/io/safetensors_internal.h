/* safetensors_internal.h - what the reader (safetensors.c), its pass over
 * the header's text (safetensors_text.c) and the writer
 * (safetensors_write.c) of safetensors files share: the format's limits,
 * the metadata's key and entries, and a few helpers. */
#ifndef TFM_SAFETENSORS_INTERNAL_H
#define TFM_SAFETENSORS_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "tfm/io.h"
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

/* ---- the header as text (safetensors_text.c) ---- */

/* A string of the header this long or longer that is the value of an
 * object's member (a model's vocabulary, hundreds of kilobytes) is left out
 * of the text cJSON parses, and checked and read only when the program asks
 * for it (meta_value): encode and decode never do, and their start no
 * longer pays for it (4 ms of a base model's 4.6 ms open on an Intel Xeon).
 * cJSON sees a mark in its place: DEFERRED_MARK and the span's number.
 * The mark is a byte that never starts valid UTF-8, which the check
 * refuses in the header's text and cJSON never makes of an escape (\u
 * gives valid UTF-8 alone), so no string of the file can start with it. */
enum { DEFERRED_BYTES = 1 << 16 };
#define DEFERRED_MARK '\xff'

/* A long string left out: its text (between its quotes) in the header, and
 * where its mark ends in the text cJSON parses. */
typedef struct st_span {
    size_t begin, end;
    size_t text_end;
} st_span;

/* Rejects, before cJSON sees the header, what cJSON would accept but JSON
 * (and the reference) does not, or what it would turn into a silent loss,
 * and counts the header's values (safetensors_text.c says which); with
 * long_values (not NULL), a long string that is a member's value is not
 * checked but appended to it as a st_span.  s is the header's text from
 * byte origin on: messages name bytes of the header. */
tfm_status st_check_header_text(const unsigned char *s, size_t len, size_t origin,
                                tfm_buf *long_values, tfm_error *err);
/* The text cJSON parses: header[0..n) with each long string of spans
 * replaced by its mark, NUL-terminated, its length in *len; NULL when
 * memory runs out. */
char *st_text_for_cjson(const unsigned char *header, size_t n, st_span *spans, size_t n_spans,
                        size_t *len);

/* Where a text cJSON parses comes from: the header_len-byte header from
 * byte origin on, less the long strings left out (each one's mark ends at
 * its text_end). */
typedef struct st_text_source {
    const st_span *spans;
    size_t n_spans;
    size_t origin, header_len;
} st_text_source;

/* The byte of the header that byte pos of the text is. */
size_t st_header_byte(const st_text_source *from, size_t pos);
/* A parse failure of text[0..len) at where as a message naming the byte of
 * the header and showing the text there. */
tfm_status st_json_error(const char *text, size_t len, const char *where,
                         const st_text_source *from, tfm_error *err);

#endif
