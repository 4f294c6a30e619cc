/* search/search_internal.h - what greedy search, sampling and beam search
 * share, internal to lib/search: the searcher's state, the rules every
 * search obeys (search_constrain), candidate ranking and selection, and the
 * slots that hold finished hypotheses.
 *
 * Shapes: n sentences, V target vocabulary, S = the longest max_len + 1
 * (decoder positions), spp hypothesis slots per sentence, R decoder rows.
 */
#ifndef TFM_SEARCH_INTERNAL_H
#define TFM_SEARCH_INTERNAL_H

#include <math.h>

#include "tfm/search.h"

enum { SEARCH_WORK = 10 }; /* scratch buffers of a searcher */

struct tfm_search {
    const tfm_model *m;
    int V;                /* target vocabulary size */
    int max_positions;
    int32_t pad, bos, eos;

    /* the current (or last) run, set by search_setup */
    const tfm_search_params *p;   /* valid during the run only */
    const tfm_search_input *in;   /* valid during the run only */
    int n;                /* sentences; 0 after a failed run */
    int spp;              /* hypothesis slots per sentence */
    int S;                /* decoder positions: max over sentences of max_len + 1 */
    int *max_len;         /* [n] */
    int *count;           /* [n] hypotheses in each sentence's results */
    tfm_hypothesis *hyps; /* [n * spp]; slot i's ids and token_log_probs point to
                             ids + i*S and lps + i*S (the pointers move with the
                             struct when a sorted list is rearranged) */
    int32_t *ids;         /* [n * spp, S] */
    float *lps;           /* [n * spp, S] */
    float *logits;        /* [R, V] the decoder's output of a step ... */
    tfm_logit_stats *stats; /* [R] ... and what turns it into log-probs (search_lp) */

    bool *met;            /* [n] the best hypothesis meets its sentence's constraints */

    tfm_buf b_max_len, b_count, b_hyps, b_ids, b_lps, b_logits, b_stats, b_met;
    tfm_buf work[SEARCH_WORK];  /* the algorithms' own scratch, see search_work */
};

/* What one sentence's constrained search obeys (tfm/search.h). */
struct tfm_constraints {
    int n;                   /* constraints */
    int n_alts, alt_cap;     /* their alternatives */
    tfm_ids ids;             /* the alternatives' ids back to back */
    int *alt_start;          /* [n_alts] where each starts in ids */
    int *alt_len;            /* [n_alts] its length */
    int *alt_of;             /* [n_alts] the constraint it meets */
    int32_t *limited;        /* [n_limited] tokens with a limit ... */
    int *limit;              /* ... and how often each may appear */
    int n_limited, limited_cap;
    tfm_ids banned;          /* tokens that never appear */
    tfm_ids ordered;         /* tokens that appear in this order */
    uint64_t needs[TFM_MAX_CONSTRAINTS]; /* constraint i starts only once those of
                                            needs[i] are met (order_constraints) */
    tfm_ids enclosed;        /* tokens that appear only inside an alternative */
    tfm_ids after_con, after_tok; /* after_tok[i] never comes right after constraint
                                     after_con[i] is met (ban_after) */
    tfm_ids pair_first, pair_second; /* pair_second[i] never comes right after the
                                        token pair_first[i] (ban_pair) */
    int32_t pad, bos, eos;   /* the ids no constraint may ask for (the model's) */
};

/* Which implementation search_run uses; tests compare them. */
typedef enum search_algo {
    SEARCH_AUTO = 0, /* greedy for beam 1, sampling when asked, else beam */
    SEARCH_ROWS,     /* greedy or sampling: one token chosen per row */
    SEARCH_BEAM,     /* beam search, even for beam 1 */
} search_algo;

/* tfm_search_run with a chosen implementation. */
tfm_status search_run(tfm_search *s, tfm_decoder *d, const tfm_search_params *p,
                      const tfm_search_input *in, search_algo algo, tfm_error *err);

/* The two algorithms (greedy.c, beam.c).  search_setup has run. */
tfm_status search_rows(tfm_search *s, tfm_decoder *d, tfm_error *err);
tfm_status search_beam(tfm_search *s, tfm_decoder *d, tfm_error *err);
/* The rows (and finished slots) of a sentence's constrained search: the
 * beam; under greedy search (beam 1) a sentence with constraints to meet
 * gets SEARCH_GREEDY_CONSTRAINED_ROWS, so that its constraints go where the
 * model would put them rather than at the first step they fit (one row
 * always takes the token that advances a constraint), and one without
 * keeps one row, as greedy: bans and limits alone (decode --placeholders
 * on a line without placeholders bans them all) make greedy search among
 * the tokens allowed.  most_rows: the largest over in's sentences. */
enum { SEARCH_GREEDY_CONSTRAINED_ROWS = 4 };
int search_constrained_rows(const tfm_search_params *p, const tfm_constraints *c);
int search_constrained_most_rows(const tfm_search_params *p, const tfm_search_input *in);

/* Constrained beam search (constrained.c), for in->constraints. */
tfm_status search_constrained(tfm_search *s, tfm_decoder *d, tfm_error *err);

/* Adds to set every id that c asks for (its alternatives, the tokens it
 * limits to one or more, the ordered ones): what a shortlist must keep. */
void search_constraints_vocab(const tfm_constraints *c, tfm_vocab_set *set);

/* Checks the input against the model, computes each sentence's max_len and
 * S, and sizes the result slots (spp per sentence, all empty) and the
 * log-prob buffer (rows_per_sentence * n rows). */
tfm_status search_setup(tfm_search *s, const tfm_search_params *p, const tfm_search_input *in,
                        int spp, int rows_per_sentence, tfm_error *err);

/* ---- rules.c: below every search ---- */

/* Scratch buffer i (0 <= i < SEARCH_WORK) holding at least n elements of size bytes,
 * or NULL when memory runs out.  Contents are not kept across runs. */
void *search_work(tfm_search *s, int i, size_t n, size_t size);

/* Whether sentence sent's source is empty: it is translated into the empty
 * sentence (only </s>), in every search and whatever its prefix. */
bool search_source_empty(const tfm_search_input *in, int sent);

/* The forced prefix length of sentence sent (0 for an empty source). */
int search_prefix_len(const tfm_search *s, int sent);

/* Applies the rules of tfm/search.h (forced prefix, no <pad> or <s>, max_len,
 * min_length, n-gram blocking) to lp [V], the log-probs (or the logits) of
 * the token that follows hist[0..t) in sentence sent: forbidden tokens become
 * -inf, the others keep their values.  At least one token stays finite. */
void search_constrain(const tfm_search *s, int sent, const int32_t *hist, int t, float *lp);

/* After search_constrain on a row of logits [V] with stats st: while
 * min_length forbids </s> (t < min_length, past the forced prefix), the
 * stats are taken again over the tokens left, so that the log-probs of the
 * step are those of the distribution without </s> (CTranslate2 masks the
 * logits before its softmax so; fairseq leaves the mass of </s> out, which
 * ranks hypotheses of different lengths otherwise).  Other steps: nothing. */
void search_min_length_restat(const tfm_search *s, int sent, int t, const float *logits,
                              tfm_logit_stats *st);

/* Whether some entry of lp [V] is above -inf (usually one of the first). */
bool search_any_allowed(const float *lp, int V);

/* The most probable token of lp [V] (the lowest id on ties), ignoring -inf;
 * -1 if every entry is -inf. */
int32_t search_argmax(const float *lp, int V);

/* The log-prob of a logit of a row with stats st. */
static inline float search_lp(const tfm_logit_stats *st, float logit)
{
    return (logit - st->max) - st->log_sum;
}

/* Turns a row of logits [V] with stats st into its log-probs, in place. */
static inline void search_log_softmax(float *row, int V, const tfm_logit_stats *st)
{
    for (int v = 0; v < V; v++) row[v] = search_lp(st, row[v]);
}

/* search_argmax of a row of logits [V] after search_constrain, whose stats st
 * were taken before: constraints only lower entries (to -inf), so when the
 * row's first maximum is still there it is still the answer, and no pass
 * over the row is needed. */
static inline int32_t search_best(const float *row, int V, const tfm_logit_stats *st)
{
    if (row[st->argmax] == st->max) return st->argmax;
    return search_argmax(row, V);
}

/* The ranking score of a finished hypothesis of len ids (and </s>). */
float search_score(const tfm_search *s, int len, double log_prob);

/* Writes a finished hypothesis into h (whose ids and token_log_probs point at
 * slot storage): len ids and their log-probs from ids and lps (either may be
 * the slot's own storage), then </s>'s log-prob, its total log-prob and its
 * score. */
void search_hyp_write(const tfm_search *s, tfm_hypothesis *h, const int32_t *ids,
                      const float *lps, int len, float eos_lp, double log_prob);

/* ---- candidates -------------------------------------------------------------- */

/* A candidate continuation: row (local to its sentence) followed by tok. */
typedef struct search_cand {
    double score;
    int row;
    int32_t tok;
} search_cand;

/* The ranking of candidates, a strict total order: higher score first, then
 * the lower row, then the lower token id, so ties never depend on memory
 * layout or on the other sentences of a batch. */
static inline bool search_cand_better(const search_cand *a, const search_cand *b)
{
    if (a->score != b->score) return a->score > b->score;
    if (a->row != b->row) return a->row < b->row;
    return a->tok < b->tok;
}

/* The best cap candidates of a stream, in a min-heap (its root is the worst
 * kept), so a stream of V entries costs O(V) comparisons against the root
 * and O(log cap) only for entries that get in. */
typedef struct search_heap {
    search_cand *c; /* [cap] */
    int n, cap;
} search_heap;

static inline void search_heap_init(search_heap *h, search_cand *storage, int cap)
{
    h->c = storage;
    h->n = 0;
    h->cap = cap;
}

void search_heap_push_slow(search_heap *h, search_cand c);

/* Offers a candidate; -inf (and NaN) scores are never kept. */
static inline void search_heap_offer(search_heap *h, double score, int row, int32_t tok)
{
    if (!(score > -INFINITY)) return;
    if (h->n == h->cap && score < h->c[0].score) return; /* the common case: not good enough */
    search_heap_push_slow(h, (search_cand){score, row, tok});
}

/* Sorts the kept candidates best first (the heap is used up). */
void search_heap_sort(search_heap *h);

/* The lowest logit of a row (base: its hypothesis's log-prob; st: its
 * stats) whose candidate could still enter the full heap h, lowered by a
 * margin far above the rounding of search_lp, so the exact test
 * (search_heap_offer) decides every case near the edge. */
float search_logit_cut(const search_heap *h, double base, const tfm_logit_stats *st);

/* The first v in [from, V) whose value is not below cut (a NaN is not),
 * sixteen values at a time. */
int search_next_not_below(const float *row, int from, int V, float cut);

/* ---- the rows of a beam-like search (beam_rows.c) ---------------------------------------- */

/* Each row's history (ids and their log-probs, [rows, S] each) and total
 * log-prob, in two buffers: a step reads the current one (cur) and writes
 * the other, since a row may be continued by several new rows or by none.
 * parent[r] is the row of this step that new row r continues. */
typedef struct beam_rows {
    int S;
    int cur;
    int32_t *hist[2];    /* [rows, S] */
    float *hlp[2];       /* [rows, S] */
    double *logp[2];     /* [rows] */
    int *parent;         /* [rows] */
    int32_t *tokens;     /* [rows] the tokens fed to the decoder */
    int new_R;           /* new rows written so far in this step */
} beam_rows;

/* Room for `rows` rows in scratch buffers 1 to 5 of s (after search_setup);
 * false when memory runs out. */
bool beam_rows_init(beam_rows *r, tfm_search *s, size_t rows);

/* Writes the next step's row new_R: row `from` of this step followed by tok
 * (of log-prob tok_lp), of total log-prob logp; returns its number. */
int beam_rows_emit(beam_rows *r, int from, int32_t tok, float tok_lp, double logp, int t);

/* The ids and log-probs of row `row` of this step. */
static inline const int32_t *beam_rows_ids(const beam_rows *r, int row)
{
    return r->hist[r->cur] + (size_t)row * r->S;
}
static inline const float *beam_rows_lps(const beam_rows *r, int row)
{
    return r->hlp[r->cur] + (size_t)row * r->S;
}

/* The step loop over n sentences, each starting with one row (<s>, log-prob
 * 0, row i for sentence i): each step feeds every row its last token to d,
 * whose logits land in s->logits and s->stats, then calls step(ctx,
 * sentence, t) for each live sentence in order (act: n elements of size
 * bytes), which writes the sentence's new rows with beam_rows_emit and
 * returns whether it goes on; the sentences that go on are kept in order,
 * and d follows the new rows. */
tfm_status beam_rows_run(tfm_search *s, tfm_decoder *d, beam_rows *r, void *act, size_t size,
                           int n, bool (*step)(void *ctx, void *sentence, int t), void *ctx,
                           tfm_error *err);

/* ---- sampling (sample.c) ------------------------------------------------------- */

/* Draws the next token from lp [V] (constrained, at least one finite) by the
 * sampling parameters of p.  scratch: V candidates. */
int32_t search_sample(const tfm_search_params *p, const float *lp, int V, tfm_rng *rng,
                      search_cand *scratch);

#endif
