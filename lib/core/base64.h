/* core/base64.h - base64 (RFC 4648, with padding).  Not installed. */
#ifndef TFM_CORE_BASE64_H
#define TFM_CORE_BASE64_H

#include <stdbool.h>
#include <stdio.h>

#include "tfm/core.h"

/* Writes the n bytes of s to fp as base64 text. */
void tfm_base64_write(FILE *fp, const unsigned char *s, size_t n);
/* Appends the bytes of base64 text s (len a multiple of 4, '=' only at the
 * end) to out; false when it is not such text or memory runs out. */
bool tfm_base64_read(const char *s, size_t len, tfm_buf *out);

#endif
