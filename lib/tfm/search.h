/* tfm/search.h - turning the incremental decoder's next-token
 * log-probabilities into output sentences: greedy search, beam search (the
 * paper: beam 4, max length = source length + 50; a length penalty, by
 * default m^1 rather than the paper's GNMT alpha 0.6, see Scores)
 * and sampling (top-k, nucleus, temperature) for data augmentation.
 *
 * Many sentences are decoded together: every live hypothesis of every
 * sentence is one row of the decoder, and a sentence that is done leaves the
 * batch (its rows are dropped), so the late steps of a batch cost only what
 * is still running.  The result of a sentence does not depend on the other
 * sentences of the batch (up to the last float rounding of the BLAS).
 *
 * A worked example: translate a batch with the default settings.
 *
 *     tfm_search *search;
 *     tfm_decoder *dec;
 *     tfm_search_create(model, &search, &err);     // model outlives both
 *     tfm_decoder_create(model, &dec, &err);
 *     tfm_search_params sp = tfm_search_default_params();
 *     tfm_search_input in = {.n_sentences = B, .states = states, .src_lens = lens};
 *     if (tfm_search_run(search, dec, &sp, &in, &err) != TFM_OK) ...
 *     for (int s = 0; s < B; s++) {
 *         tfm_nbest nb = tfm_search_result(search, s);
 *         // nb.hyps[0].ids, nb.hyps[0].len: the best translation
 *     }
 *
 * Scores.  A hypothesis Y of n ids is scored with the n + 1 log-probs of its
 * ids and of the final </s> (both count: a hypothesis ended early by </s> pays
 * for the </s>).  log_prob is their sum; score = log_prob / lp(n + 1), m = n + 1
 * counting the </s> (fairseq's step + 1), with one of two length rules:
 *   - TFM_LENGTH_POWER, lp(m) = m^alpha: fairseq's and Marian's normalisation;
 *     alpha 1 ranks by the average log-prob per token.  The default, alpha 1;
 *   - TFM_LENGTH_GNMT, lp(m) = ((5 + m) / 6)^alpha (Wu et al., 2016), with
 *     the paper's alpha 0.6.
 * alpha 0 ranks by log_prob under either rule.  Hypotheses are ranked by
 * score.  Both lp are >= 1 and grow with m for alpha >= 0, which the greedy
 * path's bound in beam search relies on.
 *
 * Why POWER 1 by default: GNMT's rule with alpha 0.6 barely penalises
 * brevity on short sentences (lp(3) / lp(1) = 1.19, against 3 for m^1), so
 * beam 4 preferred translations that stop too early.  On validation data
 * (English->French, 2000 lines), BLEU / chrF:
 *
 *     model           greedy       GNMT 0.6     GNMT 1.2     POWER 1.0
 *     1000 updates    16.8 / 36.0  18.7 / 35.8  19.7 / 37.1  20.1 / 37.9
 *     2000 updates    30.9 / 52.5  31.8 / 52.9  32.5 / 53.6  32.5 / 53.8
 *
 * (GNMT 0.6 even fell below greedy search in chrF on the younger model.)
 *
 * What every search obeys, in this order of precedence:
 *   - a forced prefix (per sentence) is produced first, whatever the model
 *     prefers; its log-probs count in the score like any other token's;
 *   - <pad> and <s> are never produced;
 *   - a hypothesis holds at most max_len ids: after max_len ids only </s> is
 *     allowed, where max_len = min(source length + max_length_offset,
 *     max_length if > 0, the model's max_positions - 1), raised to the
 *     prefix length if the prefix is longer;
 *   - </s> is forbidden before min_length ids (unless no other token is
 *     allowed at all: then the rule yields rather than leave no choice);
 *   - with no_repeat_ngram_size N > 0, a token that would complete an N-gram
 *     already present in the hypothesis's ids is forbidden (as in fairseq and
 *     Hugging Face; the <s> is not part of the ids).
 *
 * Beam search (beam k > 1).  Each step, for each live sentence, the scores of
 * its live hypotheses plus their next-token log-probs are ranked and the best
 * 2k candidates taken (a partial selection, never a sort of k x V).  Walking
 * them best first: a </s> candidate among the first k becomes a finished
 * hypothesis; other candidates continue, up to k of them.  A sentence is done
 * when it has k finished hypotheses, or no live one (fairseq's rule).
 *
 * Beam search also follows the greedy path of each sentence: when the k
 * best candidates leave the greedy hypothesis out, it takes the k-th place
 * in the beam, and when the beam is done it is decoded on alone, to its end
 * (or until it cannot beat the best finished hypothesis any more), and
 * competes for the n-best list.  So the best hypothesis of beam search never
 * scores below greedy search's under the same settings, which plain beam
 * search does not promise (pruning can lose the greedy path), at no cost in
 * rows: a sentence never has more than k.  plain_beam leaves the greedy path
 * out: the search is then fairseq's and CTranslate2's, hypothesis for
 * hypothesis (what tests/cli/test_import.sh compares with CTranslate2).
 *
 * Greedy search (beam 1, no sampling) picks the most probable allowed token
 * (the lowest id on ties), and equals beam search with k = 1.
 *
 * Sampling (sampling = true; beam ignored) draws nbest independent samples
 * per sentence.  The next token is drawn from the allowed tokens with
 * probability proportional to exp(log_prob / temperature), restricted to the
 * top_k most probable (top_k > 0) and then to the smallest most-probable set
 * whose probability reaches top_p (nucleus sampling, Holtzman et al., 2020).
 * temperature 0 or top_k 1 pick the most probable token (greedy).  Sample j
 * of sentence s uses its own tfm_rng seeded from (seeds[s], j), so samples do
 * not depend on the batch they were decoded in.  Scores of samples are the
 * model's log-probs (not tempered); samples are returned in the order drawn,
 * not sorted, and may repeat.
 */
#ifndef TFM_SEARCH_H
#define TFM_SEARCH_H

#include "tfm/core.h"
#include "tfm/io.h"
#include "tfm/model.h"
#include "tfm/pass.h"
#include "tfm/text.h"

/* How a hypothesis's log-prob is normalised by its length m (counting </s>).
 * The values never change. */
typedef enum tfm_length_rule {
    TFM_LENGTH_POWER = 0,      /* lp(m) = m^alpha (fairseq, Marian) */
    TFM_LENGTH_GNMT = 1,       /* lp(m) = ((5 + m) / 6)^alpha (Wu et al., 2016) */
} tfm_length_rule;

typedef struct tfm_search_params {
    int beam;                  /* hypotheses kept per sentence; 1 = greedy.  Default 4 */
    int nbest;                 /* hypotheses returned per sentence, 1 .. beam (samples per
                                  sentence when sampling).  Default 1 */
    tfm_length_rule length_rule; /* lp(m).  Default TFM_LENGTH_POWER */
    float length_penalty;      /* alpha of lp(m), 0 .. 100; 0 ranks by log_prob.  Default
                                  1.0 (GNMT's usual alpha is 0.6) */
    int max_length_offset;     /* max_len = source length + this (>= 0).  Default 50 */
    int max_length;            /* an absolute cap on max_len; 0: only the model's.  Default 0 */
    int min_length;            /* no </s> before this many ids.  Default 0 */
    int no_repeat_ngram_size;  /* N > 0: no N-gram twice in a hypothesis.  Default 0 (off) */
    bool plain_beam;           /* beam search without the greedy path (below): fairseq's and
                                  CTranslate2's, which may end below greedy.  Default false */
    bool sampling;             /* sample instead of search.  Default false */
    int top_k;                 /* sampling: only the k most probable tokens; 0: all */
    float top_p;               /* sampling: nucleus mass in (0, 1]; 1: all */
    float temperature;         /* sampling: >= 0; 0 = most probable.  Default 1 */
    uint64_t seed;             /* sampling: the seed of sentences without their own */
    bool log_probs;            /* the hypotheses' log-probs and scores are wanted.  Default
                                  true; greedy search without them (false) takes the best
                                  token alone (tfm_decoder_step_best) and gives 0 for them */
} tfm_search_params;

/* The paper's settings but for the length rule: beam 4, max_len = source
 * length + 50, and lp(m) = m^1 (the paper: GNMT's with alpha 0.6; see
 * Scores above), nbest 1, no minimum, no n-gram blocking, no sampling
 * (top_k 0, top_p 1, temperature 1, seed 0). */
tfm_search_params tfm_search_default_params(void);

/* TFM_ERR_RANGE naming the first field out of range (beam 1 .. 1024, nbest
 * 1 .. beam, or 1 .. 1024 samples, a length rule not of tfm_length_rule, ...). */
tfm_status tfm_search_params_validate(const tfm_search_params *p, tfm_error *err);

/* The length penalty lp(m) of rule with alpha, m tokens counting </s> (m >= 1):
 * m^alpha or ((5 + m) / 6)^alpha; 1 for alpha 0. */
double tfm_length_penalty(tfm_length_rule rule, int m, float alpha);

/* The rule's name ("power", "gnmt"), as decode --length-rule spells it;
 * NULL for a value not of tfm_length_rule. */
const char *tfm_length_rule_name(tfm_length_rule rule);

/* ---- lexical constraints ---------------------------------------------------------------- */

/* What a sentence's output must contain (constraints) and what it may hold
 * at most (limits, order).  A constraint is met when one of its
 * alternatives, a sequence of ids, appears in the output; every constraint
 * must be met, in any order.  A limit caps how often a token may appear; an
 * order makes the tokens of a sequence appear in that order (a token of the
 * sequence is allowed only where it is the next one due).  Placeholders use
 * all three: each placeholder token is a one-token constraint per
 * occurrence in the source, limited to that count, and printf conversions
 * keep the source's order (tfm_constraints_add_placeholders).
 *
 * The search is dynamic beam allocation (Post & Vilar, 2018), in the
 * vectorised form of Hu et al. (2019) that fairseq implements: each
 * hypothesis tracks which constraints it has met and how far it is into the
 * one it has started; its bank is the number of constraint tokens it has
 * produced.  Each step every live hypothesis offers its best token and the
 * tokens that would advance a constraint, beside the best 2k candidates of
 * the sentence; the candidates are ranked within their bank and the beam
 * is filled round-robin over the banks, the most advanced bank first, so
 * hypotheses that have started a constraint are not crowded out.  </s> is
 * allowed only when every constraint is met, except at max_len, where a
 * hypothesis ends whatever it has met; finished hypotheses that meet every
 * constraint rank above those that do not.  tfm_search_met tells whether a
 * sentence's best hypothesis meets them all.  Greedy search (beam 1) gives
 * a sentence with constraints four rows (a single one would put each
 * constraint at the first step it fits) and one without a single row. */
enum { TFM_MAX_CONSTRAINTS = 64 }; /* constraints per sentence */

typedef struct tfm_constraints tfm_constraints;

tfm_constraints *tfm_constraints_create(void); /* NULL when memory runs out */
/* The ids of <pad>, <s> and </s>, which no constraint may ask for: the
 * vocabulary's fixed ones (TFM_ID_PAD ...) until set, a model's own (an
 * imported model's) once set; tfm_constraints_clear keeps them. */
void tfm_constraints_set_specials(tfm_constraints *c, int32_t pad, int32_t bos, int32_t eos);
void tfm_constraints_free(tfm_constraints *c);
/* Forgets everything (memory kept for the next sentence). */
void tfm_constraints_clear(tfm_constraints *c);
/* Whether c asks nothing of a search. */
bool tfm_constraints_empty(const tfm_constraints *c);
/* Constraints met so far (counted by tfm_constraints_add). */
int tfm_constraints_count(const tfm_constraints *c);

/* Adds one constraint of n_alts alternatives (alts[a]: lens[a] ids, at
 * least one).  TFM_ERR_RANGE beyond TFM_MAX_CONSTRAINTS. */
tfm_status tfm_constraints_add(tfm_constraints *c, const int32_t *const *alts, const int *lens,
                               int n_alts, tfm_error *err);
/* Token tok may appear at most max times. */
tfm_status tfm_constraints_limit(tfm_constraints *c, int32_t tok, int max, tfm_error *err);
/* Token tok never appears: a limit of 0 (which tfm_constraints_limit turns
 * into this), for good. */
tfm_status tfm_constraints_ban(tfm_constraints *c, int32_t tok, tfm_error *err);
/* The tokens of seq[0..n) appear in this order (each as often as it stands
 * in seq: give it a limit too). */
tfm_status tfm_constraints_order(tfm_constraints *c, const int32_t *seq, int n, tfm_error *err);
/* Constraints idx[0..n) (numbers in the order tfm_constraints_add added
 * them) are met in this order: none of them may start before those ahead of
 * it in idx are met. */
tfm_status tfm_constraints_order_constraints(tfm_constraints *c, const int *idx, int n,
                                             tfm_error *err);
/* Token tok appears only inside a constraint's alternative, at a place
 * where that alternative has it: a hypothesis may produce it only to go on
 * with (or start) an alternative of a constraint it may still meet, and once
 * it has produced it within an alternative, it finishes that alternative
 * (or one that shares the ids matched so far) before anything else.  Placeholders
 * spelled in a model's own pieces are enclosed so: the pieces that hold
 * '%' or '{' never stand alone. */
tfm_status tfm_constraints_enclose(tfm_constraints *c, int32_t tok, tfm_error *err);
/* Token tok may not come right after constraint con (its number) is met:
 * a placeholder spelled in pieces ("%1") must not be lengthened by the
 * token after it ("s" would make "%1s"). */
tfm_status tfm_constraints_ban_after(tfm_constraints *c, int con, int32_t tok, tfm_error *err);
/* second never comes right after the token first (decode --placeholders:
 * a piece ending in '%' never right before the token of "%s", which would
 * then read "%%s"). */
tfm_status tfm_constraints_ban_pair(tfm_constraints *c, int32_t first, int32_t second,
                                    tfm_error *err);

/* Adds a line of a constraints file (decode --constraints): constraints
 * separated by TABs, each a sequence of ids separated by spaces, and
 * alternatives of one constraint separated by '|' ("5 17 | 9\t42": 5 17
 * or 9, and 42); an empty line adds nothing.  Ids must be below
 * vocab_size and not <pad>, <s> or </s> (special ids as tfm_config's
 * defaults).  TFM_ERR_FORMAT or TFM_ERR_RANGE saying which constraint. */
tfm_status tfm_constraints_parse(tfm_constraints *c, const char *line, size_t len,
                                 int32_t vocab_size, tfm_error *err);

/* One batch of sentences to decode.  Only n_sentences, states and src_lens
 * are required; the rest may be NULL. */
typedef struct tfm_search_input {
    int n_sentences;
    const float *const *states;     /* states[s]: src_lens[s] x D floats, the encoder's
                                       output (tfm_encoder_forward); read during the call */
    const int *src_lens;            /* [n_sentences]; 0 is allowed: an empty source
                                       gives the empty sentence (length 0, its log-prob
                                       that of </s>), in every search, prefix or not */
    const int32_t *const *prefixes; /* NULL, or [n_sentences] forced target prefixes
                                       (without <s>; NULL where prefix_lens[s] is 0) */
    const int *prefix_lens;         /* [n_sentences] when prefixes is given */
    const uint64_t *seeds;          /* sampling: [n_sentences] seeds.  NULL: params.seed for
                                       all, so all draw the same random numbers; give
                                       distinct seeds (a line number mixed with the
                                       user's seed) for independent samples */
    const tfm_constraints *const *constraints; /* NULL, or [n_sentences] (NULL entries:
                                       none): the search is then constrained beam
                                       search (beam 1 too; not sampling) for every
                                       sentence of the batch.  Read during the call */
    const int32_t *vocab;           /* NULL: every target id; else the vocab_size ids
                                       (sorted, distinct, </s> among them) that the output
                                       layer computes and the search may choose, as a
                                       lexical shortlist gives them (tfm_vocab_set): the
                                       log-probs are then those of the softmax over them */
    int vocab_size;
} tfm_search_input;

/* One output hypothesis.  Its memory belongs to the tfm_search. */
typedef struct tfm_hypothesis {
    const int32_t *ids;             /* len ids, without <s> and </s> */
    int len;
    const float *token_log_probs;   /* len + 1: each id's log-prob, then the </s>'s */
    float log_prob;                 /* their sum */
    float score;                    /* log_prob / tfm_length_penalty(rule, len + 1,
                                       alpha) (samples too) */
} tfm_hypothesis;

/* A sentence's hypotheses: n of them (1 <= n <= nbest), best score first for
 * greedy and beam search, in the order drawn for sampling.  Beam search's
 * hypotheses are distinct. */
typedef struct tfm_nbest {
    const tfm_hypothesis *hyps;
    int n;
} tfm_nbest;

/* A searcher: the buffers of a search and the results of the last run.  It
 * holds memory sized for the largest batch seen, so steady-state runs
 * allocate nothing.  The model must outlive it; one per thread (with its own
 * decoder). */
typedef struct tfm_search tfm_search;

tfm_status tfm_search_create(const tfm_model *m, tfm_search **out, tfm_error *err);
void tfm_search_free(tfm_search *s);

/* Decodes the sentences of in with d (a decoder of the same model, owned by
 * the caller; its previous batch is discarded).  Fails with TFM_ERR_RANGE or
 * TFM_ERR_ARG for bad parameters or input (a prefix id outside the target
 * vocabulary or equal to </s>, a prefix longer than the model allows, a
 * source too long, ...), TFM_ERR_NOMEM when memory runs out; the results
 * of a failed run are empty. */
tfm_status tfm_search_run(tfm_search *s, tfm_decoder *d, const tfm_search_params *p,
                          const tfm_search_input *in, tfm_error *err);

/* The hypotheses of sentence i (0 <= i < in->n_sentences) of the last
 * successful run.  Valid until the next run or tfm_search_free. */
tfm_nbest tfm_search_result(const tfm_search *s, int i);

/* Whether the best hypothesis of sentence i of the last run meets every
 * constraint of its sentence (true for a sentence without constraints). */
bool tfm_search_met(const tfm_search *s, int i);

/* ---- decoding a stream of encoder states -------------------------------------------------- */

/* What 'decode' does with a stream of .npy records of encoder states (one
 * record of shape (n, d_model), float32, per sentence, as 'encode' writes
 * them), in the steps of a tfm_batch_loop:
 *
 *     tfm_decode_params p = tfm_decode_default_params();
 *     p.capacity = 64 * threads; p.workers = threads;
 *     tfm_decode_batch_create(model, &p, &b, &err);   // model outlives b
 *     tfm_npy_stream in = tfm_decode_batch_stream(b, fp);
 *     read:  tfm_decode_batch_read(b, slot, &in, prefixes, &rec, &err)
 *            tfm_decode_batch_read_sides(b, slot, &rec, &err)  // with sides
 *     work:  tfm_decode_batch_run(b, worker, lo, hi, &err)
 *     write: tfm_decode_batch_output(b, slot, NULL)   // the record's lines
 *     end:   tfm_decode_batch_finish(b, prefixes, &line, &err)
 *
 * A record is checked against the model (float32, two dimensions, d_model
 * wide) and kept to its first max_input states.  With a prefix file, each
 * record takes its next line: ids below the target vocabulary size, no
 * </s>, at most max_positions - 1 of them; an empty line forces nothing.
 * Sentence k (0-based over everything read) samples with the seed
 * hash(search.seed, k), whatever batch it is in.  A record's output is one
 * line of ids without <s> and </s> (and a TAB and the score with scores),
 * or with search.nbest > 1 its hypotheses in Marian's n-best form
 * (tfm_nbest_format); an empty source gives an empty line (empty
 * hypotheses). */

/* Word alignments of the output (decode --alignment), read off the
 * cross-attention as inspect-attn -f align and -f soft read them: its
 * defaults, the last decoder layer's weights, the mean of its heads,
 * computed by a teacher-forced pass over each output hypothesis
 * (tfm_aligner) after the search. */
typedef enum tfm_alignment {
    TFM_ALIGNMENT_NONE = 0,
    TFM_ALIGNMENT_HARD = 1, /* tfm_align_hard: "i-j" pairs, source-target, 0-based; the
                               final </s> and target tokens that attend mostly to the
                               source's last state (its </s>, unless the model was
                               trained with --no-eos) left out */
    TFM_ALIGNMENT_SOFT = 2, /* tfm_align_soft: each target token's distribution over the
                               source states, and the final </s>'s */
} tfm_alignment;

typedef struct tfm_decode_params {
    tfm_search_params search;  /* seed 1 */
    bool scores;               /* a 1-best line ends with a TAB and its score (%.6f) */
    int max_input;             /* states a record may hold, longer ones cropped;
                                  0: the model's max_positions */
    size_t capacity;           /* records a batch holds.  Default TFM_DECODE_BATCH_SIZE */
    int workers;               /* slices decoded at once, each by a decoder and a
                                  searcher of its own.  Default 1 */
    tfm_alignment alignment;   /* each hypothesis's alignment as one more field: a 1-best
                                  line "IDS ||| ALIGNMENT" (then the TAB and score with
                                  scores; an empty source's line stays empty), an n-best
                                  line "INDEX ||| IDS ||| ALIGNMENT ||| F0= ... ||| SCORE"
                                  (where Marian puts it).  Default none */
} tfm_decode_params;

tfm_decode_params tfm_decode_default_params(void);

/* decode(1)'s batches per thread, at most (its --batch-size and
 * --batch-tokens defaults): records, and source states. */
enum { TFM_DECODE_BATCH_SIZE = 64, TFM_DECODE_BATCH_TOKENS = 4096 };

/* The search parameters as decode(1)'s options set them: TFM_ERR_ARG, in
 * the options' words, when sampling is asked for with a beam given
 * (beam_given) above 1, or beam search for more n-best than its beam; then
 * tfm_search_params_validate. */
tfm_status tfm_decode_params_validate(const tfm_decode_params *p, bool beam_given, tfm_error *err);

typedef struct tfm_decode_batch tfm_decode_batch;

tfm_status tfm_decode_batch_create(const tfm_model *m, const tfm_decode_params *p,
                                   tfm_decode_batch **out, tfm_error *err);
void tfm_decode_batch_free(tfm_decode_batch *b);

/* A stream over fp that keeps at most max_input states of a record and
 * refuses a record of more bytes than that many states hold. */
tfm_npy_stream tfm_decode_batch_stream(const tfm_decode_batch *b, FILE *fp);

/* A lexical shortlist (below, with its functions). */
typedef struct tfm_shortlist tfm_shortlist;

/* The files read in step with the records, one line per record. */
typedef enum tfm_decode_side {
    TFM_SIDE_STREAM = 0,       /* the records themselves */
    TFM_SIDE_PREFIX,           /* --prefix: forced target prefixes */
    TFM_SIDE_CONSTRAINTS,      /* --constraints: tfm_constraints_parse lines */
    TFM_SIDE_PLACEHOLDERS,     /* --placeholders: the source text lines */
    TFM_SIDE_SOURCE,           /* --source: the source text lines, for a shortlist */
} tfm_decode_side;

/* What reading a record found; rows and rows_in_file are set as soon as
 * the states are read, also when a side file then fails. */
typedef struct tfm_decode_record {
    size_t number;             /* the record's 1-based number in its stream */
    int64_t rows;              /* states kept */
    int64_t rows_in_file;      /* states in the stream: more than rows when cropped */
    bool in_prefixes;          /* a failure: in the prefix file (side == TFM_SIDE_PREFIX) */
    tfm_decode_side side;      /* a failure: where (at line; 0: that file ended too soon) */
    size_t line;
} tfm_decode_record;

/* What steers the search beside prefixes: a constraints file (one line per
 * record, tfm_constraints_parse), the source text whose placeholders
 * the output must keep (tfm_constraints_add_placeholders, with the model's
 * vocabulary and the placeholder classes), and a lexical shortlist with
 * the source text it reads.  Any reader may be NULL.  A
 * record with constraints is decoded by constrained beam search (the
 * beam of search.beam; 1 is greedy with banks); the others of its batch by
 * the search asked for, as without this.  When the constraints of a record
 * cannot all be met within max_len, its output is the unconstrained
 * search's and tfm_decode_batch_unmet says so. */
typedef struct tfm_decode_sides {
    tfm_line_reader *constraints;
    tfm_line_reader *placeholders;
    const tfm_shortlist *shortlist; /* with source: each batch is decoded over the union of
                                   its records' candidates (tfm_search_input.vocab), those
                                   of their source pieces, the frequent ones, </s>, and
                                   the ids of their prefixes and constraints */
    int shortlist_best;            /* the best candidates per source piece kept (0: all) */
    tfm_line_reader *source;       /* the source text lines, for the shortlist ... */
    tfm_bpe *source_bpe;           /* ... encoded with the model's source vocabulary */
    const tfm_vocab *vocab;        /* with placeholders: outlives the batch */
    unsigned placeholder_classes;  /* TFM_PH_* bits */
} tfm_decode_sides;

/* Sets the side files read with each record from now on (copied), before
 * tfm_decode_batch_read_sides is first called (it may be after the first
 * record was read: a constraints file written earlier in the same pipeline
 * exists once a record has come).  TFM_ERR_NOMEM, or TFM_ERR_ARG for
 * placeholders without a vocabulary, a shortlist without its source and
 * encoder, or one that is not for the model (tfm_shortlist_check_model). */
tfm_status tfm_decode_batch_sides(tfm_decode_batch *b, const tfm_decode_sides *sides,
                                  tfm_error *err);

/* Reads the side files' lines of the record just read into slot
 * (tfm_decode_batch_read): its constraints and its placeholders.  Nothing
 * without tfm_decode_batch_sides.  A failure says where in rec. */
tfm_status tfm_decode_batch_read_sides(tfm_decode_batch *b, size_t slot, tfm_decode_record *rec,
                                       tfm_error *err);

/* With a shortlist: the mean number of target ids the batches were decoded
 * over so far (0 without one, or before any). */
double tfm_decode_batch_shortlist_mean(const tfm_decode_batch *b);

/* Whether the record in slot had constraints that could not all be met
 * (valid with its output). */
bool tfm_decode_batch_unmet(const tfm_decode_batch *b, size_t slot);

/* Reads the next record of in (and its line of prefixes, which may be
 * NULL) into slot: TFM_OK, TFM_EOF at the end of in, or a failure (err says
 * why: a stream's messages start with "record N: "; rec says where). */
tfm_status tfm_decode_batch_read(tfm_decode_batch *b, size_t slot, tfm_npy_stream *in,
                                 tfm_line_reader *prefixes, tfm_decode_record *rec,
                                 tfm_error *err);

/* Decodes slots [lo, hi) as worker `worker` (0 .. workers - 1; concurrent
 * calls take different workers) and formats their output.  A failure's
 * message starts with "records A to B: ". */
tfm_status tfm_decode_batch_run(tfm_decode_batch *b, int worker, size_t lo, size_t hi,
                                tfm_error *err);

/* The output lines of a decoded slot (newlines included), and the length of
 * its best hypothesis in *best_len (may be NULL).  Valid until the slot is
 * read again. */
const tfm_buf *tfm_decode_batch_output(const tfm_decode_batch *b, size_t slot, int *best_len);

/* The 0-based number, over all streams, of the record in slot. */
size_t tfm_decode_batch_index(const tfm_decode_batch *b, size_t slot);

/* Records read so far, over all streams. */
size_t tfm_decode_batch_records(const tfm_decode_batch *b);

/* After the last stream: TFM_ERR_FORMAT, with the line in *line, when the
 * prefix file (NULL: none) has a line left over. */
tfm_status tfm_decode_batch_finish(const tfm_decode_batch *b, tfm_line_reader *prefixes,
                                   size_t *line, tfm_error *err);
/* The same for the side files of tfm_decode_batch_sides; *side names the
 * one with a line left over. */
tfm_status tfm_decode_batch_finish_sides(const tfm_decode_batch *b, tfm_decode_side *side,
                                         size_t *line, tfm_error *err);

/* Adds the constraints that keep the placeholders of a source line
 * (tfm_placeholders_scan with classes) in the output, for a model whose
 * vocabulary v has the placeholder tokens <ph1> ... (tokenize learn
 * --placeholders): each numbered placeholder's token is a one-token
 * constraint per occurrence and is limited to that count, every other
 * placeholder token is banned, and the tokens of printf conversions
 * that take their arguments in order keep the source's order.  So that no
 * placeholder can be spelled out of ordinary pieces either, every piece
 * holding a character that starts or ends a placeholder of the classes
 * ('%', '{', '}', '$', '<', '>', '&') is banned when the source line has
 * that character nowhere outside its placeholders, and no piece that would
 * lengthen a placeholder comes right after its token ("%1" then "8" would
 * read "%18").  TFM_ERR_ARG when v has no placeholder tokens. */
tfm_status tfm_constraints_add_placeholders(tfm_constraints *c, const tfm_vocab *v,
                                            const char *line, size_t len, unsigned classes,
                                            tfm_error *err);

/* ---- lexical shortlists (shortlist.c) ------------------------------------------------- */

/* A lexical shortlist, as Marian and Bergamot decode with (tfm-formats(5)):
 * for each source piece the target pieces most often in the translations
 * of sentences that hold it (by p(t | s) from co-occurrence over the
 * training pairs), and the most frequent target pieces.  A batch decoded
 * with one computes its output layer and searches over the union of its
 * sentences' candidates only (tfm_search_input.vocab).  (The type is
 * declared above, with the decode batch's side files.) */

typedef struct tfm_shortlist_params {
    int per_source; /* candidates kept per source piece (default 50, Marian's) */
    int frequent;   /* most frequent target pieces, candidates of every sentence (100) */
} tfm_shortlist_params;

tfm_shortlist_params tfm_shortlist_default_params(void);

/* Learning: count every training pair, then finish. */
typedef struct tfm_shortlist_counter tfm_shortlist_counter;

tfm_status tfm_shortlist_counter_create(int src_vocab_size, int tgt_vocab_size,
                                        tfm_shortlist_counter **out, tfm_error *err);
void tfm_shortlist_counter_free(tfm_shortlist_counter *c);
/* Counts one pair.  TFM_ERR_RANGE for an id outside its vocabulary (the
 * message says which side and where), TFM_ERR_NOMEM. */
tfm_status tfm_shortlist_count(tfm_shortlist_counter *c, const int32_t *src, size_t n,
                               const int32_t *tgt, size_t m, tfm_error *err);
tfm_status tfm_shortlist_finish(const tfm_shortlist_counter *c, const tfm_shortlist_params *p,
                                tfm_shortlist **out, tfm_error *err);

/* The file: written atomically; a load checks every entry (TFM_ERR_FORMAT
 * naming the first wrong one, the message prefixed with path). */
tfm_status tfm_shortlist_save(const tfm_shortlist *sl, const char *path, tfm_error *err);
tfm_status tfm_shortlist_load(const char *path, tfm_shortlist **out, tfm_error *err);
void tfm_shortlist_free(tfm_shortlist *sl);
/* TFM_ERR_ARG when the shortlist's vocabulary sizes are not the model's. */
tfm_status tfm_shortlist_check_model(const tfm_shortlist *sl, const tfm_model *m,
                                     tfm_error *err);

int tfm_shortlist_src_vocab_size(const tfm_shortlist *sl);
int tfm_shortlist_tgt_vocab_size(const tfm_shortlist *sl);
int tfm_shortlist_per_source(const tfm_shortlist *sl);
int tfm_shortlist_frequent(const tfm_shortlist *sl);
/* The per_source candidates of source piece src (< src vocabulary size),
 * best first, -1 after the last; *probs (may be NULL) their p(t | s). */
const int32_t *tfm_shortlist_candidates(const tfm_shortlist *sl, int32_t src,
                                        const float **probs);

/* A set of target ids, cleared in O(1): a batch's candidates. */
typedef struct tfm_vocab_set {
    int V;
    uint32_t *stamp;  /* [V] gen where the id is in the set */
    uint32_t gen;
    int32_t *ids;     /* [n] the ids in the set, in the order added (or sorted) */
    int n;
} tfm_vocab_set;

tfm_status tfm_vocab_set_init(tfm_vocab_set *set, int V, tfm_error *err);
void tfm_vocab_set_free(tfm_vocab_set *set);
void tfm_vocab_set_clear(tfm_vocab_set *set);
/* Adds id (ids outside [0, V) are ignored). */
void tfm_vocab_set_add(tfm_vocab_set *set, int32_t id);
void tfm_vocab_set_sort(tfm_vocab_set *set);
/* Adds the frequent targets; the candidates of each source piece of
 * src[0..n) (its first `best` only when 0 < best < per_source). */
void tfm_shortlist_add_frequent(const tfm_shortlist *sl, tfm_vocab_set *set);
void tfm_shortlist_add_source(const tfm_shortlist *sl, const int32_t *src, size_t n, int best,
                              tfm_vocab_set *set);

#endif
