/* vocab_internal.h - what vocab.c lends vocab_arrays.c: reading a
 * vocabulary piece by piece with the checks of its text form, its texts
 * read in place.  Not installed. */
#ifndef TFM_TEXT_VOCAB_INTERNAL_H
#define TFM_TEXT_VOCAB_INTERNAL_H

#include "tfm/text.h"

/* An empty vocabulary as the header line (len bytes, no newline) of the
 * text form says, which must announce `pieces` pieces (checked before
 * anything is allocated for them). */
tfm_status vocab_read_begin(const char *header, size_t len, size_t pieces, tfm_vocab **out,
                            tfm_error *err);
/* Pieces added from now on whose text lies in [begin, end), NUL-terminated
 * there, point into it instead of being copied. */
void vocab_borrow(tfm_vocab *v, const char *begin, const char *end);
/* release(ctx) runs when v is freed (after its pieces). */
void vocab_set_release(tfm_vocab *v, void (*release)(void *ctx), void *ctx);
/* Adds the next piece with every check of a piece line of the text form;
 * messages name "piece N", N its id. */
tfm_status vocab_add_read(tfm_vocab *v, const char *text, size_t len, float score,
                          tfm_piece_type type, tfm_error *err);
/* tfm_vocab_attach_spm, with the model's piece trie read from trie
 * (tfm_spm_parse_with_trie) when it is not NULL. */
tfm_status vocab_attach_spm(tfm_vocab *v, const void *data, size_t size, const int32_t *trie,
                            size_t trie_units, tfm_error *err);
/* Checks what only the whole vocabulary shows (all 256 byte pieces, but
 * in the vocabulary of a model from elsewhere). */
tfm_status vocab_read_end(const tfm_vocab *v, tfm_error *err);

#endif
