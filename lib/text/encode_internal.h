/* encode_internal.h - helpers shared by the normaliser, the encoders, the
 * decoders and the vocabularies of lib/text that are not part of the
 * public text.h.  Not installed; lib/text only. */
#ifndef TFM_TEXT_ENCODE_INTERNAL_H
#define TFM_TEXT_ENCODE_INTERNAL_H

#include "tfm/text.h"

/* The UTF-8 bytes of U+2581 '▁', the marker that stands for a space. */
#define TFM_MARKER "\xE2\x96\x81"
#define TFM_MARKER_LEN 3

/* tfm_normalize without clearing out first: the result is appended. */
tfm_status tfm_normalize_append(const tfm_norm_params *p, const char *in, size_t len,
                                tfm_buf *out, size_t *n_repaired, tfm_error *err);

/* The byte a byte piece "<0xNN>" stands for (upper-case hex only, as
 * SentencePiece spells them), or -1; text need not be NUL-terminated. */
int tfm_byte_of_piece(const char *text, size_t len);

/* N when text[0..len) is the placeholder token "<phN>" (1 <= N <= 32), else 0. */
int tfm_placeholder_piece_index(const char *text, size_t len);

/* Normalises line[0..len) around its numbered placeholders (p: its scan) and
 * appends the result to out: the text between placeholders is normalised
 * piece by piece, so normalisation never reaches into a placeholder.  With
 * at (p->n entries), at[k] is set, for each numbered placeholder k, to the
 * offset in out where its token goes, and nothing stands for it in out;
 * without (NULL), its token's text "<phN>" is written in its place.  A
 * strict failure names the byte of the whole line. */
tfm_status tfm_normalize_placeholders(const tfm_norm_params *norm, const char *line, size_t len,
                                      const tfm_placeholders *p, tfm_buf *out, size_t *at,
                                      size_t *n_repaired, tfm_error *err);

#endif
