/* metrics_internal.h - what the files of lib/metrics share but do not
 * publish: Python's string semantics on arrays of code points (sacreBLEU is
 * Python, and its numbers depend on what str.split() calls whitespace, what
 * str.lower() does and how re.sub() scans), the tokenizers working on such
 * arrays, n-gram interning, and the per-metric segment statistics.  Not
 * installed; lib/metrics only. */
#ifndef TFM_METRICS_INTERNAL_H
#define TFM_METRICS_INTERNAL_H

#include "tfm/metrics.h"

/* A line is held as an array of code points in a tfm_ids (int32). */

/* tfm_ids_push, with the common case (room left) inlined: the tokenizers
 * push every code point of a line several times. */
static inline tfm_status tfm_cp_push(tfm_ids *t, int32_t cp)
{
    if (t->len < t->cap) {
        t->data[t->len++] = cp;
        return TFM_OK;
    }
    return tfm_ids_push(t, cp);
}

/* ---- Python string semantics (pytext.c) ------------------------------------------ */

/* Python's str.isspace() is tfm_py_isspace (tfm/core.h). */

/* Decodes UTF-8 into out (cleared first); each invalid byte becomes U+FFFD. */
tfm_status tfm_py_decode(const char *s, size_t len, tfm_ids *out);
/* Appends the UTF-8 of cp[0..n) to out. */
tfm_status tfm_py_encode(const int32_t *cp, size_t n, tfm_buf *out);
/* out = in.lower() (cleared first): full lowercase mapping, so U+0130
 * becomes two code points, and Greek capital sigma is final where Python
 * says so. */
tfm_status tfm_py_lower(const tfm_ids *in, tfm_ids *out);
/* The length of cp[0..n) without trailing whitespace (str.rstrip()). */
size_t tfm_py_rstrip(const int32_t *cp, size_t n);
/* out = in.strip() (both ends; cleared first). */
tfm_status tfm_py_strip(const tfm_ids *in, tfm_ids *out);

/* Where the words of str.split() are: word i is cp[start[i] .. start[i]+len[i]). */
typedef struct tfm_py_words {
    size_t *start, *len;
    size_t n, cap;
} tfm_py_words;

void tfm_py_words_free(tfm_py_words *w);
tfm_status tfm_py_split(const int32_t *cp, size_t n, tfm_py_words *out);

/* ---- tokenizers (tokenize.c) ------------------------------------------------------- */

/* out = tokenizer(in) for BLEU's tokenizers, on code points; tmp is scratch. */
tfm_status tfm_bleu_tokenize_cps(tfm_bleu_tok tok, const tfm_ids *in, tfm_ids *out,
                                 tfm_ids *tmp);
/* out = TercomTokenizer(in) with p's settings (in is not lowercased yet). */
tfm_status tfm_ter_tokenize_cps(const tfm_metric_params *p, const tfm_ids *in, tfm_ids *out,
                                tfm_ids *tmp);

/* ---- n-gram interning (ngrams.c) ---------------------------------------------------- */

/* Gives every distinct n-gram of a hypothesis a small id (0, 1, 2, ...), so
 * that counts can live in plain arrays.  An n-gram of order n is named by its
 * tag (which order, and of characters or of words), the id of its first n-1
 * tokens, and its last token: the names are exact, never hashes that could
 * collide.  Only the hypothesis adds n-grams; references look them up, since
 * an n-gram the hypothesis lacks can match nothing. */
typedef struct tfm_ngrams {
    tfm_strmap *words;   /* a word (code points as bytes) -> word number */
    tfm_map64 *ids;      /* (tag, prefix id, token) -> n-gram id */
    int64_t n_words;
    int64_t n_ids;
} tfm_ngrams;

/* Empties the table (made anew, sized for about that many words and
 * n-grams; it grows when they are more). */
tfm_status tfm_ngrams_reset(tfm_ngrams *t, size_t expected_words, size_t expected_ids);
void tfm_ngrams_free(tfm_ngrams *t);
/* The number of a word, added when `add`; -1 when absent and not added;
 * -2 when memory runs out. */
int64_t tfm_ngrams_word(tfm_ngrams *t, const int32_t *cp, size_t n, bool add);
/* The id of the n-gram (tag, prefix, token); prefix is -1 for a first
 * token.  Added when `add`; -1 when absent (or when prefix or token is
 * negative); -2 when memory runs out. */
int64_t tfm_ngrams_id(tfm_ngrams *t, int tag, int64_t prefix, int64_t token, bool add);

/* A growable array of int64 counters indexed by n-gram id. */
typedef struct tfm_counts {
    int64_t *v;
    size_t cap;
} tfm_counts;

/* Makes v[0..n) valid, zeroing what is new. */
tfm_status tfm_counts_reserve(tfm_counts *c, size_t n);
void tfm_counts_free(tfm_counts *c);

/* ---- the metrics (bleu.c, chrf.c, ter.c) --------------------------------------------- */

/* Scratch space of one tfm_metric, reused from segment to segment. */
typedef struct tfm_metric_scratch {
    tfm_ids text, tmp, tmp2;        /* code points */
    tfm_ids hyp;                    /* the prepared hypothesis */
    tfm_ids *refs;                  /* the prepared references */
    int refs_cap;
    tfm_py_words hyp_words, ref_words;
    tfm_ngrams ngrams;
    tfm_ids tokens, pos_ids;        /* token numbers; n-gram ids per position */
    tfm_counts hyp_count, ref_count, ref_max, order_of;
    tfm_ids touched;                /* ids whose ref_count is not zero */
    tfm_ids hyp_num, ref_num;       /* TER: words as numbers */
} tfm_metric_scratch;

void tfm_metric_scratch_free(tfm_metric_scratch *s);

/* Counts the n-grams of tokens [n_tok], orders 1 to max_order, as the
 * n-grams of slots slot0 .. slot0 + max_order - 1 (an n-gram of order n is
 * of slot slot0 + n - 1; BLEU uses slots 0 .. 3, chrF++ its character
 * orders and then its word orders).  With add (the hypothesis) each n-gram
 * gets an id, counted in hyp_count, its slot in order_of; without (a
 * reference) only the n-grams the hypothesis has are counted, in
 * ref_count, and their ids listed in touched.  (ngrams.c) */
tfm_status tfm_ngrams_count(tfm_metric_scratch *s, const int32_t *tokens, size_t n_tok,
                            int max_order, int slot0, bool add);

/* Statistics of one segment whose empty references are already left out
 * (n_refs >= 1).  The texts are raw UTF-8, as given to tfm_metric_segment. */
tfm_status tfm_bleu_segment(const tfm_metric_params *p, tfm_metric_scratch *s, const char *hyp,
                            size_t hyp_len, const char *const *refs, const size_t *ref_lens,
                            int n_refs, double *stats, tfm_error *err);
void tfm_bleu_compute(const tfm_metric_params *p, const double *stats, tfm_score *out);

tfm_status tfm_chrf_segment(const tfm_metric_params *p, tfm_metric_scratch *s, const char *hyp,
                            size_t hyp_len, const char *const *refs, const size_t *ref_lens,
                            int n_refs, double *stats, tfm_error *err);
double tfm_chrf_f_score(const tfm_metric_params *p, const double *stats);

tfm_status tfm_ter_segment(const tfm_metric_params *p, tfm_metric_scratch *s, const char *hyp,
                           size_t hyp_len, const char *const *refs, const size_t *ref_lens,
                           int n_refs, double *stats, tfm_error *err);

/* Reserves room for n references in s->refs. */
tfm_status tfm_metric_scratch_refs(tfm_metric_scratch *s, int n);

#endif
