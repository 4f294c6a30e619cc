/* encode_internal.h - helpers shared by the normaliser, the encoder and the
 * decoder of lib/text that are not part of the public text.h.  Not
 * installed; lib/text only. */
#ifndef TFM_TEXT_ENCODE_INTERNAL_H
#define TFM_TEXT_ENCODE_INTERNAL_H

#include "tfm/text.h"

/* The UTF-8 bytes of U+2581 '▁', the marker that stands for a space. */
#define TFM_MARKER "\xE2\x96\x81"
#define TFM_MARKER_LEN 3

/* Looks at the start of s[0..len) (len > 0): returns the length (1..4) of a
 * well-formed UTF-8 sequence and sets *cp, or returns minus the length of
 * the maximal invalid subpart to replace by one U+FFFD (Unicode 15, section
 * 3.9, "U+FFFD Substitution of Maximal Subparts"). */
int tfm_utf8_scan(const unsigned char *s, size_t len, int32_t *cp);

/* Appends s[0..len) to out with each maximal invalid UTF-8 subpart replaced
 * by U+FFFD.  Returns the number replaced in *n_bad, and the offset of the
 * first one in *first_bad (when not NULL and n_bad > 0). */
tfm_status tfm_utf8_repair_append(tfm_buf *out, const char *s, size_t len, size_t *n_bad,
                                  size_t *first_bad);

/* tfm_normalize without clearing out first: the result is appended. */
tfm_status tfm_normalize_append(const tfm_norm_params *p, const char *in, size_t len,
                                tfm_buf *out, size_t *n_repaired, tfm_error *err);

#endif
