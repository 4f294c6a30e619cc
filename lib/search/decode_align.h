/* decode_align.h - the word alignments of decode --alignment, internal to
 * lib/search (decode_batch.c): a search's output hypotheses aligned to
 * their sources by one teacher-forced pass (tfm_aligner) over many
 * sentences at once, and the text of each alignment kept until it is
 * written. */
#ifndef TFM_SEARCH_DECODE_ALIGN_H
#define TFM_SEARCH_DECODE_ALIGN_H

#include "tfm/search.h"

/* One worker's aligner and the alignments of the sentences it aligned
 * last.  The model must outlive it; one per thread. */
typedef struct decode_aligner decode_aligner;

/* For runs of at most max_sentences sentences of at most max_hyps
 * hypotheses each, written as kind says (hard or soft).  layer: the decoder
 * layer whose cross-attention is read; source_eos: a source's last state
 * is its </s>, which is no word (hard alignments leave tokens that attend
 * to it most unaligned).  TFM_ERR_NOMEM. */
tfm_status decode_aligner_create(const tfm_model *m, tfm_alignment kind, int layer,
                                 bool source_eos, int max_sentences, int max_hyps,
                                 decode_aligner **out, tfm_error *err);
void decode_aligner_free(decode_aligner *a);

/* Aligns the hypotheses of sentences k0 .. k0 + n - 1 of search's last run
 * (n <= max_sentences), sentence k0 + j decoded from states[j] (src_lens[j]
 * states; none: no alignment) of record records[j], and keeps their text
 * until the next run.  Errors of tfm_aligner_run; TFM_ERR_ARG for more
 * sentences or hypotheses than the aligner was made for. */
tfm_status decode_aligner_run(decode_aligner *a, const tfm_search *search, int k0, int n,
                              const float *const *states, const int *src_lens,
                              const size_t *records, tfm_error *err);

/* Whether the last run aligned sentence k of record `record` with exactly
 * the hypotheses nb (the same ids): then hypothesis h's alignment is
 * decode_aligner_text(a, k, h).  False otherwise (another record, another
 * search since, a sentence the run did not hold): run it again. */
bool decode_aligner_has(const decode_aligner *a, int k, size_t record, tfm_nbest nb);

/* Hypothesis h of sentence k's alignment as text (*len bytes, no newline),
 * after decode_aligner_has said true. */
const char *decode_aligner_text(const decode_aligner *a, int k, int h, size_t *len);

#endif
