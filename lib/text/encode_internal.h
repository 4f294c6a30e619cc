/* encode_internal.h - helpers shared by the normaliser, the encoder and the
 * decoder of lib/text that are not part of the public text.h.  Not
 * installed; lib/text only. */
#ifndef TFM_TEXT_ENCODE_INTERNAL_H
#define TFM_TEXT_ENCODE_INTERNAL_H

#include "tfm/text.h"

/* The UTF-8 bytes of U+2581 '▁', the marker that stands for a space. */
#define TFM_MARKER "\xE2\x96\x81"
#define TFM_MARKER_LEN 3

/* tfm_normalize without clearing out first: the result is appended. */
tfm_status tfm_normalize_append(const tfm_norm_params *p, const char *in, size_t len,
                                tfm_buf *out, size_t *n_repaired, tfm_error *err);

#endif
