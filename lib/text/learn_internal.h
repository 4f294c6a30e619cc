/* learn_internal.h - what lib/text shares between the vocabulary and the
 * BPE learner beyond the public text.h.  The learner builds a vocabulary in
 * its file order (specials, user symbols, the byte pieces, then characters
 * and merges), which needs the byte pieces to come after the user symbols:
 * the public tfm_vocab_create adds them at once.  Not installed. */
#ifndef TFM_TEXT_LEARN_INTERNAL_H
#define TFM_TEXT_LEARN_INTERNAL_H

#include "tfm/text.h"

/* A vocabulary holding only the 4 special pieces <pad> <unk> <s> </s>
 * (ids 0..3, type control, score 0).  NULL when memory runs out. */
tfm_vocab *tfm_vocab_create_specials(const tfm_norm_params *norm);

/* Appends the 256 byte pieces <0x00> ... <0xFF> (type byte, score 0),
 * after the user symbols added so far.  Fails with TFM_ERR_ARG when the
 * vocabulary has its byte pieces already. */
tfm_status tfm_vocab_add_bytes(tfm_vocab *v, tfm_error *err);

/* Why text cannot be a piece (empty, invalid UTF-8, a space, a tab, a
 * newline or another control character), or NULL when it can.  why is a
 * phrase such as "contains a control character U+0009"; buf holds it. */
const char *tfm_piece_text_problem(const char *text, size_t len, char *buf, size_t bufsize);

/* tfm_bpe_learner_add_batch, with lines[0] numbered first_number in a
 * failure's message ("line N: ..."), so that a reader of many batches names
 * the line of the file (tfm_bpe_learner_read). */
tfm_status tfm_bpe_learner_add_numbered(tfm_bpe_learner *l, const char *const *lines,
                                        const size_t *lens, size_t n, size_t first_number,
                                        size_t *n_repaired, tfm_error *err);

/* Learns the vocabulary from word counts (bpe_learn_merge.c): words maps
 * each distinct word, in '▁' form and holding only pieceable characters, to
 * its count.  The map is only read. */
tfm_status tfm_bpe_learn_merges(const tfm_bpe_learn_params *p, const tfm_strmap *words,
                                tfm_vocab **out, tfm_error *err);

#endif
