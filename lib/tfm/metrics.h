/* tfm/metrics.h - BLEU, chrF / chrF++ and TER as sacreBLEU 2.3.1 computes
 * them, so that a number printed by tfm can be put beside a number from a
 * paper that used sacreBLEU.
 *
 * sacreBLEU is the reference: its tokenizers (13a, intl, zh, char, none),
 * its n-gram matching, smoothing, brevity penalty and effective order, its
 * chrF statistics and best-reference choice, its TER shift search with
 * Tercom's limits, its bootstrap confidence intervals and paired bootstrap
 * test.  Python string semantics are reproduced where they matter: what
 * str.split() and str.rstrip() call whitespace, what str.lower() does, and
 * how re.sub() scans.  The one deliberate difference: bootstrap resamples
 * come from tfm_rng, not numpy's generator, so a confidence interval or a
 * p-value agrees with sacreBLEU's only up to resampling noise.
 *
 * How to use it: create a tfm_metric, add each hypothesis with its
 * references, and ask for the corpus score:
 *
 *     tfm_metric_params p = tfm_metric_default_params(TFM_METRIC_BLEU);
 *     tfm_metric *bleu;
 *     tfm_metric_create(&p, &bleu, &err);
 *     for each line:
 *         const char *refs[1] = {ref};  size_t lens[1] = {ref_len};
 *         tfm_metric_add(bleu, hyp, hyp_len, refs, lens, 1, &err);
 *     tfm_score s;
 *     tfm_metric_corpus_score(bleu, &s);          // s.score == 34.12...
 *     tfm_score_format f = tfm_score_format_default();
 *     f.nrefs = tfm_metric_nrefs(bleu);
 *     tfm_metric_format(bleu, &s, &f, &text);     // "BLEU|nrefs:1|...= 34.1 ..."
 *     tfm_metric_free(bleu);
 *
 * Printing (tfm_metric_format, tfm_paired_format) gives sacreBLEU's text and
 * JSON; the JSON is built with cJSON.  The n-best lines of the Moses and
 * Marian tools are read here too (tfm_nbest_parse), for rescoring.  What
 * 'score' does with files (hypotheses and references read in step, line by
 * line, in bounded batches) is tfm_file_scorer.
 *
 * A metric keeps the sum of its segments' sufficient statistics (a few
 * numbers per segment, not the text), so memory does not grow with the
 * corpus unless keep_segments asks to keep each segment's statistics for
 * bootstrap resampling.  A tfm_metric is not thread-safe: use one per thread
 * and tfm_metric_add_stats to gather their results.
 */
#ifndef TFM_METRICS_H
#define TFM_METRICS_H

#include "tfm/core.h"
#include "tfm/io.h"

/* The sacreBLEU release whose numbers and signature strings these are. */
#define TFM_SACREBLEU_VERSION "2.3.1"

/* The longest BLEU n-gram order the library accepts (sacreBLEU's is 4). */
#define TFM_BLEU_MAX_ORDER 8
/* chrF character plus word orders at most. */
#define TFM_CHRF_MAX_ORDER 16
/* References of one segment at most (tfm_metric_segment refuses more), so
 * that a caller can hold a line's references in fixed arrays. */
#define TFM_METRIC_MAX_REFS 64

typedef enum tfm_metric_kind {
    TFM_METRIC_BLEU = 0,
    TFM_METRIC_CHRF = 1,
    TFM_METRIC_TER = 2,
} tfm_metric_kind;

/* BLEU's tokenizers: "13a" (mteval-v13a, the default), "intl" (mteval-v14
 * international: Unicode punctuation and symbols), "zh" (every CJK character a
 * word, then 13a), "char" (every character a word), "none". */
typedef enum tfm_bleu_tok {
    TFM_BLEU_TOK_13A = 0,
    TFM_BLEU_TOK_INTL,
    TFM_BLEU_TOK_ZH,
    TFM_BLEU_TOK_CHAR,
    TFM_BLEU_TOK_NONE,
} tfm_bleu_tok;

/* BLEU smoothing (Chen and Cherry, 2014): "exp" (mteval's, the default),
 * "floor" (zero counts get smooth_value, 0.1), "add-k" (add smooth_value, 1,
 * to matches and totals of orders above 1), "none". */
typedef enum tfm_bleu_smooth {
    TFM_BLEU_SMOOTH_EXP = 0,
    TFM_BLEU_SMOOTH_FLOOR,
    TFM_BLEU_SMOOTH_ADD_K,
    TFM_BLEU_SMOOTH_NONE,
} tfm_bleu_smooth;

typedef struct tfm_metric_params {
    tfm_metric_kind kind;
    bool lowercase;          /* BLEU and chrF: Python's str.lower() first */
    bool keep_segments;      /* keep each segment's statistics (bootstrap) */

    /* BLEU */
    tfm_bleu_tok tokenize;
    tfm_bleu_smooth smooth;
    double smooth_value;     /* < 0: the method's default (floor 0.1, add-k 1) */
    int max_order;           /* 1..TFM_BLEU_MAX_ORDER, default 4 */
    bool effective_order;    /* sentence BLEU: only orders that have n-grams */

    /* chrF */
    int char_order;          /* default 6 */
    int word_order;          /* default 0; 2 is chrF++ */
    int beta;                /* default 2 */
    bool whitespace;         /* keep whitespace in character n-grams */
    bool eps_smoothing;      /* chrF++.py's epsilon smoothing instead of
                                sacreBLEU's effective order */

    /* TER (Tercom's defaults: case-insensitive, no normalisation) */
    bool case_sensitive;
    bool normalized;         /* Tercom's western tokenization */
    bool no_punct;           /* remove . , ? : ; ! " ( ) */
} tfm_metric_params;

/* sacreBLEU's defaults for that metric. */
tfm_metric_params tfm_metric_default_params(tfm_metric_kind kind);

/* The defaults of a metric as sacreBLEU's command line names it: "bleu",
 * "chrf", "chrf++" (chrF with word_order 2) or "ter"; false when unknown. */
bool tfm_metric_parse_name(const char *name, tfm_metric_params *p);

/* Sets one parameter from an option of sacreBLEU's command line, by its
 * long name without the dashes, and its value (NULL for the flags):
 * "tokenize" (13a, intl, zh, char, none), "lowercase", "smooth" (exp,
 * floor, add-k, none), "smooth-value" (0 to 1e9); "char-order" (0 to 10),
 * "word-order" (0 to 6), "beta" (1 to 100), "whitespace", "eps-smoothing";
 * "case-sensitive", "normalized", "no-punct".  It sets the field whatever
 * the metric (which metric takes which option is the caller's rule).
 * TFM_ERR_ARG for an unknown name, a missing value, or a value that is not
 * what the option takes, saying as "--NAME: ..." what was expected. */
tfm_status tfm_metric_params_set(tfm_metric_params *p, const char *option, const char *value,
                                 tfm_error *err);

/* Names as sacreBLEU spells them on its command line; false when unknown. */
bool tfm_bleu_tok_parse(const char *name, tfm_bleu_tok *tok);
const char *tfm_bleu_tok_name(tfm_bleu_tok tok);
bool tfm_bleu_smooth_parse(const char *name, tfm_bleu_smooth *smooth);
const char *tfm_bleu_smooth_name(tfm_bleu_smooth smooth);
/* The value a smoothing method takes when smooth_value < 0: sacreBLEU's
 * 0.1 for floor, 1 for add-k (and 0 for the others, which take none). */
double tfm_bleu_smooth_default_value(tfm_bleu_smooth smooth);

/* ---- the metric ---------------------------------------------------------------- */

typedef struct tfm_metric tfm_metric;

/* Checks the parameters (orders in range, ...): TFM_ERR_ARG says which. */
tfm_status tfm_metric_create(const tfm_metric_params *p, tfm_metric **out, tfm_error *err);
void tfm_metric_free(tfm_metric *m);
const tfm_metric_params *tfm_metric_get_params(const tfm_metric *m);

/* The number of sufficient statistics of one segment:
 *   BLEU: hyp_len, ref_len, matches[max_order], totals[max_order]
 *   chrF: (hyp n-grams, ref n-grams, matches) for each character order, then
 *         each word order
 *   TER:  edits, average reference length */
size_t tfm_metric_n_stats(const tfm_metric *m);

/* Computes the statistics of one segment into stats[tfm_metric_n_stats].
 * The text is UTF-8 (an invalid byte counts as U+FFFD); 1 <= n_refs <=
 * TFM_METRIC_MAX_REFS, else TFM_ERR_ARG.  An empty reference (or one of
 * spaces) is a reference of no words and is scored, as sacreBLEU 2.3.1's
 * metrics score it (only its command line refuses an empty reference line).
 * *n_used (may be NULL) is set to the number of references used: n_refs. */
tfm_status tfm_metric_segment(tfm_metric *m, const char *hyp, size_t hyp_len,
                              const char *const *refs, const size_t *ref_lens, int n_refs,
                              double *stats, int *n_used, tfm_error *err);

/* Adds a segment: tfm_metric_segment, then tfm_metric_add_stats. */
tfm_status tfm_metric_add(tfm_metric *m, const char *hyp, size_t hyp_len,
                          const char *const *refs, const size_t *ref_lens, int n_refs,
                          tfm_error *err);

/* Adds statistics computed elsewhere (by another tfm_metric with the same
 * parameters) as the next segment; n_used is its number of references. */
tfm_status tfm_metric_add_stats(tfm_metric *m, const double *stats, int n_used, tfm_error *err);

/* Segments added so far. */
size_t tfm_metric_count(const tfm_metric *m);
/* The summed statistics (tfm_metric_n_stats numbers). */
const double *tfm_metric_totals(const tfm_metric *m);
/* With keep_segments: every segment's statistics, count x n_stats, in order
 * (NULL otherwise).  Valid until the next add. */
const double *tfm_metric_segments(const tfm_metric *m);
/* The references per segment for the signature: the count when every segment
 * had the same number of non-empty references, -1 ("var") when they differ,
 * 0 before any segment. */
int tfm_metric_nrefs(const tfm_metric *m);

/* ---- scores ---------------------------------------------------------------------- */

typedef struct tfm_score {
    double score;            /* 0..100 (TER can pass 100) */
    /* BLEU */
    int order;                               /* max_order */
    double precisions[TFM_BLEU_MAX_ORDER];   /* percent */
    double bp, ratio;
    int64_t hyp_len, ref_len;
    /* TER */
    double num_edits, ref_length;
} tfm_score;

/* The score of summed statistics (of a corpus, one segment or a resample). */
void tfm_metric_compute(const tfm_metric *m, const double *stats, tfm_score *out);
/* tfm_metric_compute of tfm_metric_totals. */
void tfm_metric_corpus_score(const tfm_metric *m, tfm_score *out);

/* "BLEU", "chrF2", "chrF2++" (beta and one '+' per word order), "TER". */
void tfm_metric_name(const tfm_metric *m, char *out, size_t size);

/* What a formatted score shows. */
typedef struct tfm_score_format {
    int width;           /* decimals of the score (sacreBLEU's --width; 1) */
    bool score_only;     /* the number alone (with the interval, if any),
                            even when json is set, as sacreBLEU does */
    bool json;           /* sacreBLEU's JSON object instead of a text line */
    bool compact;        /* JSON on one line (for one object per segment) */
    int nrefs;           /* for the signature: tfm_metric_nrefs(), -1 = var */
    int n_bootstrap;     /* > 0: the signature names resamples and seed */
    uint64_t seed;
    bool has_ci;         /* show "(μ = mean ± ci)" when mean > 0 */
    double mean, ci;
} tfm_score_format;

tfm_score_format tfm_score_format_default(void);

/* The signature, as sacreBLEU prints it, e.g.
 * "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.3.1" (appended). */
tfm_status tfm_metric_signature(const tfm_metric *m, const tfm_score_format *f, tfm_buf *out);

/* The score as sacreBLEU's Score.format prints it (appended, no newline):
 *   text:  "BLEU|<signature> = 34.1 65.3/40.1/27.9/19.9 (BP = 0.981 ratio = ...)"
 *   json:  {"name": "BLEU", "score": 34.1, "signature": ..., "verbose_score": ...,
 *           "nrefs": "1", ...} with sacreBLEU's key order and indentation. */
tfm_status tfm_metric_format(const tfm_metric *m, const tfm_score *s,
                             const tfm_score_format *f, tfm_buf *out);

/* Appends x as sacreBLEU's JSON shows a number it rounded to width decimals:
 * Python's repr of float(f"{x:.{width}f}") ("34.1", "0.0", "100.0"). */
tfm_status tfm_json_number(double x, int width, tfm_buf *out);

/* ---- bootstrap resampling ---------------------------------------------------------- */

typedef struct tfm_bootstrap_params {
    int n_samples;       /* sacreBLEU's default: 1000 */
    uint64_t seed;       /* sacreBLEU's default: 12345 */
    int n_threads;       /* results do not depend on it */
} tfm_bootstrap_params;

tfm_bootstrap_params tfm_bootstrap_default_params(void);

/* score(1) uses at most this many threads by default: the metrics and a
 * small model's forward pass gain nothing from more. */
enum { TFM_SCORE_MAX_THREADS = 8 };

/* A 95% confidence interval from n_samples resamples (with replacement) of
 * the n_segments rows of seg_stats: *mean is the mean resampled score and
 * *ci half the distance between the 2.5% and 97.5% resampled scores, as in
 * sacreBLEU's estimate_ci.  n_segments >= 1. */
tfm_status tfm_metric_bootstrap(const tfm_metric *m, const double *seg_stats, size_t n_segments,
                                const tfm_bootstrap_params *bp, double *mean, double *ci,
                                tfm_error *err);

/* Paired bootstrap resampling (Koehn, 2004) as sacreBLEU's --paired-bs: both
 * systems are resampled with the same segment indices; p_value is the
 * share of resamples whose centred absolute difference exceeds the real
 * absolute difference, (count + 1) / (n_samples + 1). */
typedef struct tfm_paired_result {
    double base_score, base_mean, base_ci;
    double sys_score, sys_mean, sys_ci;
    double p_value;
} tfm_paired_result;

tfm_status tfm_metric_paired_bootstrap(const tfm_metric *m, const double *base_stats,
                                       const double *sys_stats, size_t n_segments,
                                       const tfm_bootstrap_params *bp, tfm_paired_result *out,
                                       tfm_error *err);

/* One row of the table of a paired test: a system and its result. */
typedef struct tfm_paired_row {
    const char *file;        /* the system's file as given: JSON's "file" */
    const char *label;       /* how the text table names it (NULL: file) */
    tfm_paired_result r;     /* rows 1..n-1: tfm_metric_paired_bootstrap of the
                                system against row 0, the baseline; row 0's
                                own r is not read (its numbers are in row 1's) */
} tfm_paired_row;

/* The paired test of rows[1..n) against the baseline rows[0] (n >= 2), as
 * 'score --paired-bs' prints it (appended, no final newline).  f gives the
 * width, score_only, json and, for the signature, nrefs, n_bootstrap and
 * seed.
 *   text:       "BLEU|<signature>", then a row per system separated by tabs:
 *               "baseline"/"system", "33.1 (μ = 33.0 ± 1.0)", "(p = 0.0010)*"
 *               (starred below 0.05; empty for the baseline), the label
 *   json:       {"name", "signature", "test": "paired-bs", "n_samples",
 *               "seed", "systems": [{"file", "baseline", "score",
 *               "confidence_mean", "confidence_var", "p_value"}, ...]}, laid
 *               out as tfm_metric_format lays out its JSON, one system a line
 *   score_only: a line per system: the score, and a tab and the p-value */
tfm_status tfm_paired_format(const tfm_metric *m, const tfm_paired_row *rows, int n,
                             const tfm_score_format *f, tfm_buf *out);

/* ---- n-best lists ----------------------------------------------------------------- */

/* A line of an n-best list in the Moses / Marian form
 *
 *     INDEX ||| HYPOTHESIS ||| FEATURES ||| SCORE
 *
 * e.g. "3 ||| 17 9 4 ||| F0= -2.5 LM= -7.25 ||| -2.5": INDEX is the 0-based
 * number of the source sentence; the hypothesis holds ids or text; the
 * features are "NAME= VALUE" pairs; the score field may be missing ("3 |||
 * 17 9 4 ||| F0= -2.5" and "3 ||| 17 |||" are lines too, as marian-scorer
 * reads them).  The fields point into the line parsed, which must outlive
 * the entry. */
typedef struct tfm_nbest_entry {
    const char *line;            /* the line parsed, len bytes */
    size_t len;
    size_t index;                /* the source sentence, 0-based */
    const char *hyp;             /* the hypothesis without the spaces and tabs */
    size_t hyp_len;              /*   around it; may be empty */
    const char *features;        /* the features, trimmed likewise; may be empty */
    size_t features_len;
    size_t features_at;          /* line offset just after the second "|||" */
    size_t score_at;             /* line offset of the "|||" before the score,
                                    or len when there is none */
} tfm_nbest_entry;

/* The name of the feature marian-scorer adds to an n-best list. */
#define TFM_NBEST_FEATURE "Score"

/* Parses one line (no newline; it may hold any bytes).  TFM_ERR_FORMAT when
 * it has fewer than two "|||" or its first field is not a decimal number
 * that fits a size_t; the message says which. */
tfm_status tfm_nbest_parse(const char *line, size_t len, tfm_nbest_entry *out, tfm_error *err);

/* Whether name can name a feature: not empty, no space, tab, '|' or '='. */
bool tfm_nbest_feature_name_ok(const char *name);

/* Appends e's line to out with "NAME= VALUE" (VALUE with 6 decimals) added
 * at the end of its features, the rest unchanged, as marian-scorer --n-best
 * adds its feature: "3 ||| 17 9 4 ||| F0= -2.5 Score= -2.484000 ||| -2.5".
 * TFM_ERR_ARG when the name is not tfm_nbest_feature_name_ok. */
tfm_status tfm_nbest_add_feature(const tfm_nbest_entry *e, const char *name, double value,
                                 tfm_buf *out, tfm_error *err);

/* Appends the line 'decode --nbest' writes for a hypothesis of source
 * sentence `index` (0-based), newline included, with its log-probability as
 * the feature F0 and its score (6 decimals each):
 * "3 ||| 17 9 4 ||| F0= -2.500000 ||| -2.484000\n".  TFM_ERR_NOMEM only. */
tfm_status tfm_nbest_format(size_t index, const int32_t *ids, size_t n, double log_prob,
                            double score, tfm_buf *out);

/* ---- the text side, for tests and other programs ----------------------------------- */

/* Tokenizes one line as sacreBLEU's BLEU tokenizer of that name does (no
 * lowercasing, no stripping) and writes the result to out (cleared first). */
tfm_status tfm_bleu_tokenize(tfm_bleu_tok tok, const char *in, size_t len, tfm_buf *out,
                             tfm_error *err);

/* Tokenizes one line as sacreBLEU's TER (TercomTokenizer) does with the
 * case_sensitive, normalized and no_punct settings of p. */
tfm_status tfm_ter_tokenize(const tfm_metric_params *p, const char *in, size_t len,
                            tfm_buf *out, tfm_error *err);

/* ---- scoring files in step ------------------------------------------------------- */

/* Where a scorer's output goes; the library prints nothing itself.  Lines come
 * in input order; a warning may come before the lines of earlier input (it is
 * given when its line is read). */
typedef struct tfm_score_output {
    void *ctx;
    /* An output line, without its newline. */
    void (*line)(void *ctx, const char *text, size_t len);
    /* A warning about line `line` (0: the whole file) of the input labelled
     * `file`; the run goes on. */
    void (*warning)(void *ctx, const char *file, size_t line, const char *msg);
    /* The input is about to be waited for: make the lines written visible
     * (NULL: nothing to do). */
    void (*flush)(void *ctx);
} tfm_score_output;

/* For scorers: a warning formatted as printf formats (up to a tfm_error's
 * message), a line, a flush, each given to out's callback when out and it
 * are set. */
void tfm_score_warn(const tfm_score_output *out, const char *file, size_t line, const char *fmt,
                    ...) __attribute__((format(printf, 4, 5)));
void tfm_score_write(const tfm_score_output *out, const char *text, size_t len);
void tfm_score_flush(const tfm_score_output *out);

/* Where a run stopped, for a message "FILE:LINE: err.msg": the label of the
 * input at fault (NULL: none, e.g. two files of different lengths, whose
 * names are in the message) and its 1-based line (0: none). */
typedef struct tfm_score_failure {
    const char *file;
    size_t line;
} tfm_score_failure;

/* An input read line by line: a system's hypotheses or a reference. */
typedef struct tfm_score_input {
    const char *name;            /* as given (the "file" of a paired test's JSON) */
    const char *label;           /* how messages and tables name it (NULL: name) */
    tfm_line_reader *lines;      /* not owned */
} tfm_score_input;

/* Scores the hypotheses of one or more systems against references, the
 * files read in step, line by line: row n is line n of every file.  Each
 * line is repaired (invalid UTF-8 becomes U+FFFD, with a warning, or is an
 * error with strict) and right-stripped as sacreBLEU's command line strips
 * it.  Rows are gathered into bounded batches of the rows that are ready
 * (tfm_batch_loop), their statistics computed over threads, and added to
 * each system's corpus in order, so the files may be of any size and an
 * interactive pipe is answered line by line.  With sentence, each row's
 * score is written as a line as soon as its batch is done; a row whose
 * references are all empty then gets an empty line and a warning (without
 * sentence it is an error: sacreBLEU cannot score it either). */
typedef struct tfm_file_scorer_params {
    tfm_metric_params metric;    /* keep_segments is set where the bootstrap needs it */
    bool sentence;               /* a line per row (one system) instead of the corpus */
    bool strict;                 /* invalid UTF-8 is an error */
    int threads;                 /* for the statistics; results do not depend on it */
    tfm_score_format format;     /* width, score_only and json of what is written */
    bool confidence;             /* the corpus score with a 95% interval (bootstrap) */
    bool paired;                 /* a paired bootstrap test of systems 1.. against 0 */
    tfm_bootstrap_params bootstrap; /* of confidence or paired */
    bool force;                  /* BLEU: no warning about hypotheses that look tokenized
                                    (100 lines or more ending in " .") */
} tfm_file_scorer_params;

/* BLEU's defaults, one thread, tfm_score_format_default, no bootstrap
 * (tfm_bootstrap_default_params when one is asked for). */
tfm_file_scorer_params tfm_file_scorer_default_params(void);

/* The rules between the parameters, for n_systems hypothesis files (0 is
 * one, standard input): chrF needs an order, the sentence lines exclude
 * the bootstrap, confidence excludes paired, paired needs two systems and
 * only paired takes more than one.  TFM_ERR_ARG saying which, in the terms
 * of score's options. */
tfm_status tfm_file_scorer_params_validate(const tfm_file_scorer_params *p, int n_systems,
                                           tfm_error *err);

/* The systems of a paired test as sacreBLEU's command line takes them:
 * names[0] is the baseline, and a later name equal to it is left out (so
 * that "--paired-bs base.txt *.txt" works), counted in *baseline_repeats;
 * the names kept move up and *n becomes their count.  Another name given
 * twice, or no system left besides the baseline, is TFM_ERR_ARG. */
tfm_status tfm_paired_systems(const char **names, int *n, int *baseline_repeats, tfm_error *err);

typedef struct tfm_file_scorer tfm_file_scorer;

/* inputs: n_systems hypothesis files, then n_refs references (n_systems >=
 * 1, at least 2 with paired; 1 <= n_refs <= TFM_METRIC_MAX_REFS).  The
 * inputs' strings and readers must outlive the scorer.  TFM_ERR_ARG for
 * parameters the metric refuses (the message says which) or counts out of
 * range. */
tfm_status tfm_file_scorer_create(const tfm_file_scorer_params *p, const tfm_score_input *inputs,
                                  int n_systems, int n_refs, tfm_file_scorer **out,
                                  tfm_error *err);
void tfm_file_scorer_free(tfm_file_scorer *s);

/* Reads the inputs to their end, then (BLEU, unless force) warns through
 * out about each system that looks tokenized.  On a line that cannot be read or scored,
 * the rows before it are scored (and written, with sentence) first, then
 * the run stops: its status, err, and *at (may be NULL) saying where.
 * Files of different lengths are TFM_ERR_FORMAT ("hypotheses in A have 3
 * lines but B has 2 lines", each read to its end to count it); inputs with
 * no line at all are TFM_ERR_FORMAT too. */
tfm_status tfm_file_scorer_run(tfm_file_scorer *s, const tfm_score_output *out,
                               tfm_score_failure *at, tfm_error *err);

/* Lines read of the hypotheses. */
size_t tfm_file_scorer_lines(const tfm_file_scorer *s);
/* Of system `system`: the lines that end in a tokenized period (" ."), a
 * sign of tokenized hypotheses, which lower BLEU. */
size_t tfm_file_scorer_tokenized_periods(const tfm_file_scorer *s, int system);
/* System `system`'s corpus: every row scored so far. */
const tfm_metric *tfm_file_scorer_metric(const tfm_file_scorer *s, int system);

/* Appends the result of a run as sacreBLEU prints it, without a final
 * newline: the corpus score of system 0 (with its interval with
 * confidence), or the paired test's table (tfm_paired_format).
 * TFM_ERR_FORMAT when no row could be scored. */
tfm_status tfm_file_scorer_format(tfm_file_scorer *s, tfm_buf *out, tfm_error *err);

#endif
