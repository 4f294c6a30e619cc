/* score - scores translations against references with BLEU, chrF, chrF++
 * or TER, computed as sacreBLEU 2.3.1 computes them, with sacreBLEU's
 * signature so the numbers compare with published ones.
 *
 *   score bleu -r REF [-r REF]... [OPTION]... [HYP]           corpus score
 *   score chrf -r REF --sentence < hyp.txt                     one per line
 *   score ter -r REF --confidence hyp.txt                      with a 95% interval
 *   score bleu -r REF --paired-bs BASELINE SYSTEM...           significance
 *   score -m MODEL --src SRC --tgt TGT                         log p(tgt | src)
 *   score -m MODEL --src SRC --nbest NBEST                     rescore an n-best list
 *
 * The program reads the hypotheses and references in step, line by line,
 * and keeps only each line's sufficient statistics (a few numbers), so the
 * files may be of any size.  The work is in lib/metrics (tfm_metric_*),
 * and so is the printing (tfm_metric_format, tfm_paired_format).
 *
 * With -m it scores sentence pairs with a model instead, as marian-scorer
 * does: the log-probability of each target given its source, from the
 * training forward pass with dropout off (tfm_model_loss), a batch of pairs
 * at a time, in input order; the pairs are read by tfm_pair_reader (lib/text),
 * n-best lines are read and written back with the score by tfm_nbest_parse
 * and tfm_nbest_add_feature. */
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"

/* Lines are gathered into batches of at most this many lines or bytes (the
 * statistics of a batch are computed in parallel), and a batch is cut
 * short whenever no further input is ready. */
#define BATCH_LINES 4096
#define BATCH_BYTES (8u << 20)
/* Fewer rows than this per thread are scored on fewer threads. */
#define MIN_LINES_PER_THREAD 32

static const char usage_text[] =
    "Usage: score METRIC -r REF [-r REF]... [OPTION]... [HYP]\n"
    "       score METRIC -r REF [-r REF]... --paired-bs [OPTION]... BASELINE SYSTEM...\n"
    "       score -m MODEL --src=SRC --tgt=TGT [OPTION]...\n"
    "       score -m MODEL --src=SRC --nbest=NBEST [OPTION]...\n"
    "Scores the hypotheses in HYP (or standard input; '-' is standard input) against\n"
    "the references, line by line in step, with METRIC: bleu, chrf, chrf++ or ter.\n"
    "The numbers are those sacreBLEU 2.3.1 computes, and the output is its text (or\n"
    "JSON) with its signature, so they compare with scores published with sacreBLEU.\n"
    "\n"
    "Input and output:\n"
    "  -r, --ref=FILE             a reference file; repeat for several references\n"
    "      --sentence             one score per hypothesis line instead of the corpus\n"
    "  -f, --format=FORMAT        'text' (default) or 'json', as sacreBLEU prints them\n"
    "  -b, --score-only           print the score alone\n"
    "  -w, --width=N              decimals of the score (default 1, as sacreBLEU)\n"
    "      --strict               invalid UTF-8 is an error, not replaced by U+FFFD\n"
    "\n"
    "BLEU ('score bleu'):\n"
    "      --tokenize=TOK         13a (default), intl, zh, char or none\n"
    "      --lowercase, -lc       lowercase everything first (also for chrF)\n"
    "      --smooth=METHOD        exp (default), floor, add-k or none\n"
    "      --smooth-value=V       the value of floor (0.1) or add-k (1)\n"
    "      --force                no warning about hypotheses that look tokenized\n"
    "\n"
    "chrF ('score chrf', 'score chrf++'):\n"
    "      --char-order=N         character n-gram order (default 6)\n"
    "      --word-order=N         word n-gram order (default 0; 2 for chrf++)\n"
    "      --beta=N               weight of recall over precision (default 2)\n"
    "      --whitespace           keep whitespace in character n-grams\n"
    "      --eps-smoothing        chrF++.py's epsilon smoothing instead of sacreBLEU's\n"
    "                             effective order\n"
    "\n"
    "TER ('score ter'):\n"
    "      --case-sensitive       do not lowercase\n"
    "      --normalized           Tercom's punctuation tokenization\n"
    "      --no-punct             remove . , ? : ; ! \" ( ) first\n"
    "\n"
    "Statistics:\n"
    "      --confidence           add a 95% confidence interval by bootstrap resampling\n"
    "      --confidence-n=N       resamples for --confidence (default 1000)\n"
    "      --paired-bs            paired bootstrap test of each SYSTEM against BASELINE\n"
    "      --paired-bs-n=N        resamples for --paired-bs (default 1000)\n"
    "      --seed=N               seed of the resampling (default 12345)\n"
    "      --threads=N            threads to use (default: the number of CPUs, at most\n"
    "                             8); with -m, the BLAS threads of the forward pass\n"
    "\n"
    "Scoring with a model ('score -m MODEL'), as marian-scorer does:\n"
    "  -m, --model=MODEL          the model file (safetensors) to score with\n"
    "      --src=FILE             the sources, one line per sentence\n"
    "      --tgt=FILE             the targets, one line per source line; prints for\n"
    "                             each pair TOTAL<TAB>AVERAGE: log p(target + </s> |\n"
    "                             source) in nats, and that divided by the target's\n"
    "                             ids + 1 (the </s>)\n"
    "      --nbest=FILE           an n-best list in Marian's form 'I ||| IDS |||\n"
    "                             FEATURES ||| SCORE' (I: the 0-based source line),\n"
    "                             printed back with 'NAME= TOTAL' added to FEATURES\n"
    "      --nbest-feature=NAME   the feature's name (default Score, as Marian's)\n"
    "  -n, --normalize            print the average alone (with --nbest, add it as\n"
    "                             the feature instead of the total)\n"
    "      --per-token            add a TAB and each target token's log-prob,\n"
    "                             space-separated, the </s>'s last\n"
    "      --text                 the files hold text, tokenized with the model's\n"
    "                             vocabulary as 'tokenize' does, not id lines\n"
    "      --no-eos               do not end each source with </s> (the default for a\n"
    "                             model trained with 'train --no-eos', which says so)\n"
    "      --batch-size=N         pairs scored together, at most (default 64)\n"
    "      --batch-tokens=N       source and target ids scored together, at most\n"
    "                             (default 2048)\n"
    "\n"
    "Common options:\n"
    "  -q, --quiet                print errors only\n"
    "  -v, --verbose              print more about what is done\n"
    "  -h, --help                 display this help and exit\n"
    "  -V, --version              output version information and exit\n"
    "\n"
    "With -m, the corpus perplexity, exp of minus the mean log-prob per target token\n"
    "(</s> included), goes to standard error.  Each source gets a </s> at its end,\n"
    "as 'encode' and 'train' give it one (an empty source stays empty).\n"
    "An empty reference line is left out when there are several references; a line\n"
    "whose references are all empty cannot be scored (sacreBLEU refuses it too).\n"
    "Resamples are drawn with tfm's generator, not numpy's: intervals and p-values\n"
    "agree with sacreBLEU's up to resampling noise.\n"
    "Exit status: 0 on success, 1 on failure (also when the files differ in length),\n"
    "2 on a usage error.\n"
    "Examples:\n"
    "  score bleu -r newstest.de < output.de\n"
    "  score chrf++ -r ref.de -f json output.de\n"
    "  score bleu -r ref.de --paired-bs baseline.de new.de\n"
    "  score -m m.safetensors --src test.en.ids --tgt test.de.ids\n";

enum {
    OPT_SENTENCE = 256,
    OPT_STRICT,
    OPT_TOKENIZE,
    OPT_LOWERCASE,
    OPT_SMOOTH,
    OPT_SMOOTH_VALUE,
    OPT_FORCE,
    OPT_CHAR_ORDER,
    OPT_WORD_ORDER,
    OPT_BETA,
    OPT_WHITESPACE,
    OPT_EPS,
    OPT_CASE_SENSITIVE,
    OPT_NORMALIZED,
    OPT_NO_PUNCT,
    OPT_CONFIDENCE,
    OPT_CONFIDENCE_N,
    OPT_PAIRED,
    OPT_PAIRED_N,
    OPT_SEED,
    OPT_THREADS,
    OPT_SRC,
    OPT_TGT,
    OPT_NBEST,
    OPT_NBEST_FEATURE,
    OPT_PER_TOKEN,
    OPT_TEXT,
    OPT_NO_EOS,
    OPT_BATCH_SIZE,
    OPT_BATCH_TOKENS,
};

static const struct option long_options[] = {
    {"ref", required_argument, NULL, 'r'},
    {"sentence", no_argument, NULL, OPT_SENTENCE},
    {"format", required_argument, NULL, 'f'},
    {"score-only", no_argument, NULL, 'b'},
    {"width", required_argument, NULL, 'w'},
    {"strict", no_argument, NULL, OPT_STRICT},
    {"tokenize", required_argument, NULL, OPT_TOKENIZE},
    {"lowercase", no_argument, NULL, OPT_LOWERCASE},
    {"smooth", required_argument, NULL, OPT_SMOOTH},
    {"smooth-value", required_argument, NULL, OPT_SMOOTH_VALUE},
    {"force", no_argument, NULL, OPT_FORCE},
    {"char-order", required_argument, NULL, OPT_CHAR_ORDER},
    {"word-order", required_argument, NULL, OPT_WORD_ORDER},
    {"beta", required_argument, NULL, OPT_BETA},
    {"whitespace", no_argument, NULL, OPT_WHITESPACE},
    {"eps-smoothing", no_argument, NULL, OPT_EPS},
    {"case-sensitive", no_argument, NULL, OPT_CASE_SENSITIVE},
    {"normalized", no_argument, NULL, OPT_NORMALIZED},
    {"no-punct", no_argument, NULL, OPT_NO_PUNCT},
    {"confidence", no_argument, NULL, OPT_CONFIDENCE},
    {"confidence-n", required_argument, NULL, OPT_CONFIDENCE_N},
    {"paired-bs", no_argument, NULL, OPT_PAIRED},
    {"paired-bs-n", required_argument, NULL, OPT_PAIRED_N},
    {"seed", required_argument, NULL, OPT_SEED},
    {"threads", required_argument, NULL, OPT_THREADS},
    {"model", required_argument, NULL, 'm'},
    {"src", required_argument, NULL, OPT_SRC},
    {"tgt", required_argument, NULL, OPT_TGT},
    {"nbest", required_argument, NULL, OPT_NBEST},
    {"nbest-feature", required_argument, NULL, OPT_NBEST_FEATURE},
    {"normalize", no_argument, NULL, 'n'},
    {"per-token", no_argument, NULL, OPT_PER_TOKEN},
    {"text", no_argument, NULL, OPT_TEXT},
    {"no-eos", no_argument, NULL, OPT_NO_EOS},
    {"batch-size", required_argument, NULL, OPT_BATCH_SIZE},
    {"batch-tokens", required_argument, NULL, OPT_BATCH_TOKENS},
    CLI_COMMON_LONG_OPTIONS,
    {NULL, 0, NULL, 0},
};

/* Which metrics an option belongs to (a bit per tfm_metric_kind). */
#define FOR_BLEU (1 << TFM_METRIC_BLEU)
#define FOR_CHRF (1 << TFM_METRIC_CHRF)
#define FOR_TER (1 << TFM_METRIC_TER)

typedef struct options {
    tfm_metric_params p;
    const char *metric_name;      /* as given: "bleu", "chrf", "chrf++", "ter" */
    const char **refs;
    int n_refs;
    bool sentence, json, score_only, strict, force, confidence, paired;
    bool smooth_value_given;
    int width, threads, n_confidence, n_paired;
    uint64_t seed;
    const char *misplaced;        /* an option of another metric, as given */
    int misplaced_for;
    /* Scoring with a model (-m). */
    const char *model, *src, *tgt, *nbest, *feature;
    bool normalize, per_token, text, eos;
    int batch_size, batch_tokens;
    char metric_option[64];       /* the first option only the metrics take, as given */
    char model_option[64];        /* the first option only -m takes, as given */
} options;

/* ---- reading the inputs in step ------------------------------------------------------ */

/* One input file: a system's hypotheses or a reference. */
typedef struct input {
    const char *name;             /* as given; "-" is standard input */
    int fd;
    tfm_line_reader *reader;
    size_t lines;                 /* lines read so far */
} input;

static const char *display_name(const char *name)
{
    return strcmp(name, "-") == 0 ? "standard input" : name;
}

/* A batch of lines of every input, copied out of the readers:
 * line j of input k is text[offset[j*n+k] .. + len[j*n+k]). */
typedef struct batch {
    tfm_buf text;
    size_t *offset, *len;
    size_t n;                     /* lines in the batch */
    size_t first_line;            /* 1-based number of line 0 */
} batch;

typedef struct job {
    const options *opt;
    input *inputs;                /* the systems, then the references */
    int n_sys, n_inputs;
    batch b;
    tfm_buf repaired;
    /* Statistics of the batch, computed in parallel: for line j and system s,
     * stats + (j * n_sys + s) * n_stats. */
    int n_workers;
    tfm_metric **workers;         /* one per thread, for the statistics */
    double *stats;
    int *n_used;
    tfm_status *status;
    tfm_error *errors;
    size_t n_stats;
    tfm_metric **acc;             /* one per system: the corpus so far */
    size_t *tokenized_period;     /* per system: lines ending in " ." */
    tfm_buf out;
    const char *failed_file;      /* where the loop stopped: input name and line */
    size_t failed_line;
} job;

/* Records where a line could not be taken, for the message. */
static void fail_at(job *jb, const char *name, size_t line)
{
    jb->failed_file = name;
    jb->failed_line = line;
}

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    if (!p) cli_fail(NULL, 0, "out of memory");
    return p;
}

static void open_inputs(job *jb)
{
    int stdin_users = 0;
    for (int k = 0; k < jb->n_inputs; k++) {
        input *in = &jb->inputs[k];
        stdin_users += strcmp(in->name, "-") == 0;
        if (stdin_users > 1) cli_usage_error("standard input ('-') can be only one of the inputs");
    }
    for (int k = 0; k < jb->n_inputs; k++) {
        input *in = &jb->inputs[k];
        in->fd = cli_open_input(in->name);
        in->reader = tfm_lines_create(in->fd);
        if (!in->reader) cli_fail(NULL, 0, "out of memory");
    }
}

static void close_inputs(job *jb)
{
    for (int k = 0; k < jb->n_inputs; k++) {
        tfm_lines_free(jb->inputs[k].reader);
        cli_close_input(jb->inputs[k].fd);
    }
}

/* Reads the next line of an input: TFM_OK (counted in in->lines), TFM_EOF,
 * or an error in reading line in->lines + 1. */
static tfm_status input_next(input *in, const char **line, size_t *len, tfm_error *err)
{
    tfm_status s = tfm_lines_next(in->reader, line, len, err);
    if (s == TFM_OK) in->lines++;
    return s;
}

/* input_next, noting where a line could not be read. */
static tfm_status next_line(job *jb, input *in, const char **line, size_t *len, tfm_error *err)
{
    tfm_status s = input_next(in, line, len, err);
    if (s != TFM_OK && s != TFM_EOF) fail_at(jb, in->name, in->lines + 1);
    return s;
}

/* Some input ended before the others: counts what is left of each and
 * says which two lengths differ. */
static tfm_status length_mismatch(job *jb, tfm_error *err)
{
    const char *line;
    size_t len;
    for (int k = 0; k < jb->n_inputs; k++) {
        tfm_status s;
        while ((s = next_line(jb, &jb->inputs[k], &line, &len, err)) == TFM_OK) {}
        if (s != TFM_EOF) return s;
    }
    fail_at(jb, NULL, 0);
    const input *first = &jb->inputs[0];
    for (int k = 1; k < jb->n_inputs; k++) {
        const input *in = &jb->inputs[k];
        if (in->lines == first->lines) continue;
        return tfm_error_set(err, TFM_ERR_FORMAT, "hypotheses in %s have %zu line%s but %s has "
                             "%zu line%s", display_name(first->name), first->lines,
                             first->lines == 1 ? "" : "s", display_name(in->name), in->lines,
                             in->lines == 1 ? "" : "s");
    }
    return tfm_error_set(err, TFM_ERR_FORMAT, "the inputs differ in length"); /* not reached */
}

static bool all_ready(void *ctx)
{
    job *jb = ctx;
    for (int k = 0; k < jb->n_inputs; k++)
        if (!tfm_lines_ready(jb->inputs[k].reader)) return false;
    return true;
}

/* Reads row `slot` of the batch: the next line of every input, repaired
 * (invalid UTF-8 becomes U+FFFD, with a warning) and right-stripped as
 * sacreBLEU's command line strips them. */
static tfm_status read_row(void *ctx, size_t slot, size_t *cost, tfm_error *err)
{
    job *jb = ctx;
    batch *b = &jb->b;
    int n = jb->n_inputs;
    if (slot == 0) {
        tfm_buf_clear(&b->text);
        b->first_line = jb->inputs[0].lines + 1;
    }
    size_t before = b->text.len;
    int ended = 0;
    for (int k = 0; k < n; k++) {
        input *in = &jb->inputs[k];
        const char *line;
        size_t len;
        tfm_status s = next_line(jb, in, &line, &len, err);
        if (s == TFM_EOF) {
            ended++;
            continue;
        }
        if (s != TFM_OK) return s;
        size_t repaired = 0, first_bad = 0;
        tfm_buf_clear(&jb->repaired);
        if (tfm_utf8_repair_append(&jb->repaired, line, len, &repaired, &first_bad) != TFM_OK)
            return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
        if (repaired && jb->opt->strict) {
            fail_at(jb, in->name, in->lines);
            return tfm_error_set(err, TFM_ERR_UTF8, "invalid UTF-8 at byte %zu", first_bad + 1);
        }
        if (repaired)
            cli_warn(display_name(in->name), in->lines,
                     "invalid UTF-8 replaced by U+FFFD (%zu sequence%s)", repaired,
                     repaired == 1 ? "" : "s");
        const char *text = jb->repaired.data ? jb->repaired.data : "";
        size_t kept = tfm_utf8_rstrip(text, jb->repaired.len);
        b->offset[slot * (size_t)n + (size_t)k] = b->text.len;
        b->len[slot * (size_t)n + (size_t)k] = kept;
        if (tfm_buf_append(&b->text, text, kept) != TFM_OK)
            return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    }
    if (ended == n) return TFM_EOF;
    if (ended > 0) return length_mismatch(jb, err);
    *cost = b->text.len - before + 1;
    return TFM_OK;
}


static const char *batch_text(const batch *b, size_t j, int n_inputs, int k, size_t *len)
{
    size_t at = j * (size_t)n_inputs + (size_t)k;
    *len = b->len[at];
    return b->text.data ? b->text.data + b->offset[at] : "";
}

/* ---- statistics ---------------------------------------------------------------------------- */

/* Computes the statistics of rows [lo, hi) of the batch as worker w. */
static tfm_status row_stats(void *ctx, int w, size_t lo, size_t hi, tfm_error *err)
{
    job *jb = ctx;
    int n_refs = jb->n_inputs - jb->n_sys;
    const char *refs[TFM_METRIC_MAX_REFS];
    size_t lens[TFM_METRIC_MAX_REFS];
    for (size_t j = lo; j < hi; j++) {
        for (int r = 0; r < n_refs; r++) refs[r] = batch_text(&jb->b, j, jb->n_inputs, jb->n_sys + r, &lens[r]);
        for (int s = 0; s < jb->n_sys; s++) {
            size_t at = j * (size_t)jb->n_sys + (size_t)s, hyp_len;
            const char *hyp = batch_text(&jb->b, j, jb->n_inputs, s, &hyp_len);
            jb->status[at] = tfm_metric_segment(jb->workers[w], hyp, hyp_len, refs, lens, n_refs,
                                                jb->stats + at * jb->n_stats, &jb->n_used[at],
                                                &jb->errors[at]);
        }
    }
    return TFM_OK;
}


/* Prints one line's score (--sentence). */
static void print_sentence(job *jb, const double *stats, int n_used)
{
    const options *opt = jb->opt;
    tfm_score s;
    tfm_metric_compute(jb->acc[0], stats, &s);
    tfm_score_format f = tfm_score_format_default();
    f.width = opt->width;
    f.score_only = opt->score_only;
    f.json = opt->json;
    f.compact = true;
    f.nrefs = n_used; /* sacreBLEU re-counts the references of each sentence */
    tfm_buf_clear(&jb->out);
    if (tfm_metric_format(jb->acc[0], &s, &f, &jb->out) != TFM_OK) cli_fail(NULL, 0, "out of memory");
    cli_write_line(jb->out.data, jb->out.len);
}

/* Adds row `slot`'s statistics to each system's corpus (and prints its
 * score with --sentence), or returns the error of a line that cannot be
 * scored. */
static tfm_status add_row(void *ctx, size_t j, tfm_error *err)
{
    job *jb = ctx;
    const options *opt = jb->opt;
    batch *b = &jb->b;
    size_t line = b->first_line + j;
    for (int s = 0; s < jb->n_sys; s++) {
        size_t at = j * (size_t)jb->n_sys + (size_t)s;
        const input *ref = &jb->inputs[jb->n_sys];
        if (jb->status[at] != TFM_OK) {
            if (jb->status[at] == TFM_ERR_ARG && opt->sentence) {
                /* One output line per input line: an empty one for this. */
                cli_warn(display_name(ref->name), line, "%s: no score for this line",
                         jb->errors[at].msg);
                cli_write_line("", 0);
                continue;
            }
            if (jb->status[at] == TFM_ERR_ARG) {
                fail_at(jb, ref->name, line);
                return tfm_error_set(err, TFM_ERR_ARG, "%s; sacreBLEU cannot score such a line "
                                     "either", jb->errors[at].msg);
            }
            fail_at(jb, jb->inputs[s].name, line);
            *err = jb->errors[at];
            return jb->status[at];
        }
        tfm_status st = tfm_metric_add_stats(jb->acc[s], jb->stats + at * jb->n_stats,
                                             jb->n_used[at], err);
        if (st != TFM_OK) {
            fail_at(jb, NULL, 0);
            return st;
        }
        size_t hyp_len;
        const char *hyp = batch_text(b, j, jb->n_inputs, s, &hyp_len);
        if (hyp_len >= 2 && hyp[hyp_len - 2] == ' ' && hyp[hyp_len - 1] == '.')
            jb->tokenized_period[s]++;
        if (opt->sentence) print_sentence(jb, jb->stats + at * jb->n_stats, jb->n_used[at]);
    }
    return TFM_OK;
}

static void flush_sentences(void *ctx)
{
    job *jb = ctx;
    if (jb->opt->sentence) cli_flush();
}


/* ---- output of the corpus scores ----------------------------------------------------------- */

static tfm_score_format corpus_format(const options *opt, const tfm_metric *m)
{
    tfm_score_format f = tfm_score_format_default();
    f.width = opt->width;
    f.score_only = opt->score_only;
    f.json = opt->json;
    f.nrefs = tfm_metric_nrefs(m);
    return f;
}

static tfm_bootstrap_params bootstrap_params(const options *opt, int n_samples)
{
    tfm_bootstrap_params bp = tfm_bootstrap_default_params();
    bp.n_samples = n_samples;
    bp.seed = opt->seed;
    bp.n_threads = opt->threads;
    return bp;
}

static void print_corpus(job *jb)
{
    const options *opt = jb->opt;
    tfm_metric *m = jb->acc[0];
    tfm_score s;
    tfm_metric_corpus_score(m, &s);
    tfm_score_format f = corpus_format(opt, m);
    if (opt->confidence) {
        tfm_bootstrap_params bp = bootstrap_params(opt, opt->n_confidence);
        tfm_error err;
        if (tfm_metric_bootstrap(m, tfm_metric_segments(m), tfm_metric_count(m), &bp, &f.mean, &f.ci,
                                 &err) != TFM_OK)
            cli_fail(NULL, 0, "%s", err.msg);
        f.has_ci = true;
        f.n_bootstrap = bp.n_samples;
        f.seed = bp.seed;
    }
    tfm_buf_clear(&jb->out);
    if (tfm_metric_format(m, &s, &f, &jb->out) != TFM_OK) cli_fail(NULL, 0, "out of memory");
    cli_write_line(jb->out.data, jb->out.len);
}

/* --paired-bs: each system against the baseline, with the same resamples. */
static void print_paired(job *jb)
{
    const options *opt = jb->opt;
    tfm_metric *base = jb->acc[0];
    tfm_bootstrap_params bp = bootstrap_params(opt, opt->n_paired);
    tfm_paired_row *rows = xcalloc((size_t)jb->n_sys, sizeof *rows);
    for (int s = 0; s < jb->n_sys; s++) {
        rows[s].file = jb->inputs[s].name;
        rows[s].label = display_name(jb->inputs[s].name);
        tfm_error err;
        if (s && tfm_metric_paired_bootstrap(base, tfm_metric_segments(base),
                                             tfm_metric_segments(jb->acc[s]), tfm_metric_count(base),
                                             &bp, &rows[s].r, &err) != TFM_OK)
            cli_fail(NULL, 0, "%s", err.msg);
    }
    tfm_score_format f = corpus_format(opt, base);
    f.n_bootstrap = bp.n_samples;
    f.seed = bp.seed;
    tfm_buf_clear(&jb->out);
    if (tfm_paired_format(base, rows, jb->n_sys, &f, &jb->out) != TFM_OK)
        cli_fail(NULL, 0, "out of memory");
    cli_write_line(jb->out.data, jb->out.len);
    free(rows);
}

/* ---- the run ------------------------------------------------------------------------------ */

static double seconds_since(const struct timespec *start)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - start->tv_sec) + 1e-9 * (double)(now.tv_nsec - start->tv_nsec);
}

static int run(const options *opt, char **files, int n_files)
{
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    static char *const stdin_only[] = {"-"};
    if (n_files == 0) {
        files = (char **)stdin_only;
        n_files = 1;
    }
    job jb = {.opt = opt, .n_sys = n_files, .n_inputs = n_files + opt->n_refs};
    jb.inputs = xcalloc((size_t)jb.n_inputs, sizeof *jb.inputs);
    for (int s = 0; s < n_files; s++) jb.inputs[s].name = files[s];
    for (int r = 0; r < opt->n_refs; r++) jb.inputs[n_files + r].name = opt->refs[r];
    open_inputs(&jb);

    tfm_metric_params p = opt->p;
    p.keep_segments = opt->confidence || opt->paired;
    tfm_error err;
    jb.n_workers = opt->threads;
    jb.workers = xcalloc((size_t)jb.n_workers, sizeof *jb.workers);
    for (int w = 0; w < jb.n_workers; w++)
        if (tfm_metric_create(&opt->p, &jb.workers[w], &err) != TFM_OK) cli_usage_error("%s", err.msg);
    jb.acc = xcalloc((size_t)jb.n_sys, sizeof *jb.acc);
    for (int s = 0; s < jb.n_sys; s++)
        if (tfm_metric_create(&p, &jb.acc[s], &err) != TFM_OK) cli_fail(NULL, 0, "%s", err.msg);
    jb.tokenized_period = xcalloc((size_t)jb.n_sys, sizeof *jb.tokenized_period);
    jb.n_stats = tfm_metric_n_stats(jb.acc[0]);
    size_t cells = (size_t)BATCH_LINES * (size_t)jb.n_sys;
    jb.stats = xcalloc(cells * jb.n_stats, sizeof *jb.stats);
    jb.n_used = xcalloc(cells, sizeof *jb.n_used);
    jb.status = xcalloc(cells, sizeof *jb.status);
    jb.errors = xcalloc(cells, sizeof *jb.errors);
    tfm_buf_init(&jb.b.text);
    tfm_buf_init(&jb.repaired);
    tfm_buf_init(&jb.out);
    jb.b.offset = xcalloc((size_t)BATCH_LINES * (size_t)jb.n_inputs, sizeof *jb.b.offset);
    jb.b.len = xcalloc((size_t)BATCH_LINES * (size_t)jb.n_inputs, sizeof *jb.b.len);

    /* Batches of the rows that are ready; a bad line is reported after the
     * rows before it are counted (and printed, with --sentence). */
    tfm_batch_loop loop = {
        .ctx = &jb, .max_items = BATCH_LINES, .max_cost = BATCH_BYTES, .threads = opt->threads,
        .min_items_per_slice = MIN_LINES_PER_THREAD,
        .read = read_row, .ready = all_ready, .work = row_stats, .write = add_row,
        .flush = flush_sentences,
    };
    tfm_batch_failure f;
    if (tfm_batch_loop_run(&loop, &f) != TFM_OK) {
        cli_flush();
        cli_fail(jb.failed_file ? display_name(jb.failed_file) : NULL, jb.failed_line, "%s",
                 f.err.msg);
    }
    close_inputs(&jb);

    size_t lines = tfm_metric_count(jb.acc[0]);
    if (jb.inputs[0].lines == 0) cli_fail(NULL, 0, "no lines to score: the hypotheses and references are empty");
    for (int s = 0; s < jb.n_sys; s++)
        if (opt->p.kind == TFM_METRIC_BLEU && !opt->force && jb.tokenized_period[s] >= 100)
            cli_warn(display_name(jb.inputs[s].name), 0,
                     "%zu lines end in a tokenized period (' .'): the hypotheses look tokenized, "
                     "which lowers BLEU; detokenize them (or pass --force)",
                     jb.tokenized_period[s]);
    if (!opt->sentence) {
        if (lines == 0) cli_fail(NULL, 0, "no line could be scored");
        if (opt->paired) print_paired(&jb);
        else print_corpus(&jb);
    }
    cli_flush();
    cli_info("scored %zu lines in %.2f s (BLEU, chrF and TER as sacreBLEU %s computes them)",
             (size_t)jb.inputs[0].lines, seconds_since(&start), TFM_SACREBLEU_VERSION);

    for (int w = 0; w < jb.n_workers; w++) tfm_metric_free(jb.workers[w]);
    for (int s = 0; s < jb.n_sys; s++) tfm_metric_free(jb.acc[s]);
    free(jb.workers);
    free(jb.acc);
    free(jb.tokenized_period);
    free(jb.stats);
    free(jb.n_used);
    free(jb.status);
    free(jb.errors);
    free(jb.inputs);
    free(jb.b.offset);
    free(jb.b.len);
    tfm_buf_free(&jb.b.text);
    tfm_buf_free(&jb.repaired);
    tfm_buf_free(&jb.out);
    return CLI_EXIT_OK;
}

/* ---- scoring with a model (score -m) ------------------------------------------------------- */

/* What 'score -m' computes for a pair (source x, target y of n ids): the
 * log-probability the model gives y followed by </s>, reading <s> y
 * (teacher forcing) and the source with a </s> at its end (as 'encode' and
 * 'train' give it one; an empty source stays empty, as in 'encode').  It is
 * the training forward pass with dropout off (tfm_model_loss), so it is the
 * number the model was trained to raise; decode's log-probs are the same
 * computation done incrementally, and agree with it up to float rounding. */

/* One sentence pair of a batch. */
typedef struct pair_slot {
    tfm_pair pair;                /* its ids: the source with its </s>, the target */
    tfm_buf line;                 /* --nbest: the n-best line, printed back with the feature */
    tfm_nbest_entry entry;        /* --nbest: its fields (pointing into line) */
    bool unusable;                /* a target too long for the model: no score */
    int row;                      /* its row of the forward pass (when usable) */
    size_t first_label;           /* its first label in token_lp */
} pair_slot;

/* An error met while gathering a batch: reported after the pairs before it
 * are printed, so the output is a clean prefix of the full answer. */
typedef struct pending_error {
    bool set;
    bool mismatch;                /* the sources and targets differ in length */
    const char *file;             /* display name */
    size_t line;
    tfm_error err;
} pending_error;

typedef struct model_run {
    const options *opt;
    tfm_model *model;
    tfm_train_workspace *ws;
    tfm_bpe *bpe;                 /* --text only */
    input src, tgt;               /* tgt: the targets, or the n-best list */
    tfm_pair_reader *pairs;       /* reads src and tgt in step (--nbest: src alone) */
    int max_src, max_tgt;         /* ids a source (</s> included) and a target may hold */
    pair_slot *slots;             /* [batch_size] */
    bool eos;                     /* sources end with </s>: not --no-eos, nor trained so */
    /* The batch as tfm_model_loss takes it, and what it gives back. */
    const int32_t **src_ptr, **tgt_ptr;
    int *src_len, *tgt_len;
    double *sentence_lp;
    float *token_lp;
    size_t token_cap;
    /* --nbest: the source the list is at (line nbest_index + 1 of the sources). */
    tfm_pair nbest;
    size_t nbest_index;
    pending_error pe;
    /* Totals, for the perplexity. */
    double sum_lp;
    int64_t n_tokens;
    size_t n_pairs, n_unusable;
    tfm_buf out;
} model_run;

/* Notes an error at FILE:LINE to report once the pairs before it are out;
 * returns false, so that a caller can "return later_error(...)". */
static bool later_error(model_run *run, const input *in, size_t line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static bool later_error(model_run *run, const input *in, size_t line, const char *fmt, ...)
{
    pending_error *pe = &run->pe;
    pe->set = true;
    pe->file = display_name(in->name);
    pe->line = line;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pe->err.msg, sizeof pe->err.msg, fmt, ap);
    va_end(ap);
    return false;
}

/* Warns about what reading a side did to it: invalid UTF-8 repaired
 * (--text), a source cropped to what the model takes (as 'encode' crops). */
static void warn_side(model_run *run, const input *in, size_t line, const tfm_pair_side *side,
                      bool source)
{
    if (!side->done) return;
    if (side->repaired)
        cli_warn(display_name(in->name), line, "invalid UTF-8 replaced by U+FFFD (%zu sequence%s)",
                 side->repaired, side->repaired == 1 ? "" : "s");
    if (source && side->cropped)
        cli_warn(display_name(in->name), line, "%zu ids are more than the %d tokens the model "
                 "takes%s; cropped to the first %zu", side->length, run->max_src,
                 run->eos ? " (</s> included)" : "", (size_t)run->max_src - (run->eos ? 1 : 0));
}

/* Checks a target: <pad> is never a label, so it cannot be scored; a target
 * longer than the model's positions (less one for <s>) gets no score: an
 * empty output line and a warning, or with --nbest an error (a feature
 * cannot be left out of one hypothesis of a list). */
static bool check_target(model_run *run, const input *in, size_t line, pair_slot *slot)
{
    const tfm_config *c = &run->model->config;
    const tfm_ids *tgt = &slot->pair.tgt.ids;
    for (size_t i = 0; i < tgt->len; i++)
        if (tgt->data[i] == c->pad_id)
            return later_error(run, in, line, "token %zu: id %d is <pad>, which the model "
                               "never predicts: it cannot be scored", i + 1, (int)c->pad_id);
    if (slot->pair.tgt.too_long) {
        if (run->opt->nbest)
            return later_error(run, in, line, "the hypothesis has %zu ids; the model scores "
                               "at most %d (max_positions %d, less 1 for <s>)", tgt->len,
                               run->max_tgt, c->max_positions);
        cli_warn(display_name(in->name), line, "the target has %zu ids; the model scores at "
                 "most %d (max_positions %d, less 1 for <s>): no score for this line",
                 tgt->len, run->max_tgt, c->max_positions);
        slot->unusable = true;
    }
    return true;
}

/* Notes the pair reader's failure as the error to report. */
static bool pairs_failed(model_run *run, const tfm_error *err)
{
    const tfm_pair_failure *f = tfm_pair_reader_failure(run->pairs);
    return later_error(run, f->side == TFM_SOURCE ? &run->src : &run->tgt, f->line, "%s", err->msg);
}

/* Reads what is left of the sources (and targets), to count their lines. */
static void count_lines(model_run *run, size_t *n_src, size_t *n_tgt)
{
    tfm_error err;
    if (tfm_pair_reader_count(run->pairs, n_src, n_tgt, &err) != TFM_OK) {
        const tfm_pair_failure *f = tfm_pair_reader_failure(run->pairs);
        cli_fail(display_name(f->side == TFM_SOURCE ? run->src.name : run->tgt.name), f->line,
                 "%s", err.msg);
    }
}

/* The sources and targets differ in length: counts what is left of both. */
static _Noreturn void pairs_mismatch(model_run *run)
{
    size_t n_src, n_tgt;
    count_lines(run, &n_src, &n_tgt);
    cli_fail(NULL, 0, "sources in %s have %zu line%s but targets in %s have %zu line%s",
             display_name(run->src.name), n_src, n_src == 1 ? "" : "s",
             display_name(run->tgt.name), n_tgt, n_tgt == 1 ? "" : "s");
}

static bool pairs_ready(void *ctx)
{
    model_run *run = ctx;
    return run->opt->nbest ? tfm_lines_ready(run->tgt.reader) : tfm_pair_reader_ready(run->pairs);
}

/* Reads the next pair of --src and --tgt into the batch; false at the end
 * of both or on an error (then run->pe says which). */
static bool gather_pair(model_run *run, pair_slot *slot)
{
    tfm_error err;
    tfm_status s = tfm_pair_reader_next(run->pairs, &slot->pair, &err);
    if (s == TFM_EOF) return false;
    if (s != TFM_OK && tfm_pair_reader_failure(run->pairs)->mismatch) {
        run->pe.set = run->pe.mismatch = true;
        return false;
    }
    warn_side(run, &run->src, slot->pair.line, &slot->pair.src, true);
    warn_side(run, &run->tgt, slot->pair.line, &slot->pair.tgt, false);
    if (s != TFM_OK) return pairs_failed(run, &err);
    return check_target(run, &run->tgt, slot->pair.line, slot);
}

/* Moves the sources on to line index + 1 (0-based index, as Marian's). */
static bool nbest_source(model_run *run, size_t index)
{
    const size_t n_read = tfm_lines_number(run->src.reader);
    if (n_read > 0 && index == run->nbest_index) return true;
    if (n_read > 0 && index < run->nbest_index)
        return later_error(run, &run->tgt, run->tgt.lines, "sentence %zu comes after sentence %zu: "
                           "the n-best list must follow the order of the sources", index,
                           run->nbest_index);
    tfm_error err;
    tfm_status s = TFM_OK;
    while (s == TFM_OK && tfm_lines_number(run->src.reader) < index) /* lines before it: unparsed */
        s = tfm_pair_reader_next(run->pairs, NULL, &err);
    if (s == TFM_OK) s = tfm_pair_reader_next(run->pairs, &run->nbest, &err);
    if (s == TFM_EOF) {
        const size_t n = tfm_lines_number(run->src.reader);
        return later_error(run, &run->tgt, run->tgt.lines, "sentence %zu, but the sources in %s "
                           "have %zu line%s (sentences 0 to %zu)", index,
                           display_name(run->src.name), n, n == 1 ? "" : "s", n - 1);
    }
    warn_side(run, &run->src, run->nbest.line, &run->nbest.src, true);
    if (s != TFM_OK) return pairs_failed(run, &err);
    run->nbest_index = index;
    return true;
}

/* Reads the next line of the n-best list, 'INDEX ||| IDS ||| FEATURES |||
 * SCORE', with its source; false at its end or on an error. */
static bool gather_hypothesis(model_run *run, pair_slot *slot)
{
    const char *line;
    size_t len;
    tfm_error err;
    tfm_status s = input_next(&run->tgt, &line, &len, &err);
    if (s != TFM_OK && s != TFM_EOF)
        return later_error(run, &run->tgt, run->tgt.lines + 1, "%s", err.msg);
    if (s == TFM_EOF) return false;
    /* The slot keeps the line, to print it back with the feature added. */
    tfm_buf_clear(&slot->line);
    if (tfm_buf_append(&slot->line, line, len) != TFM_OK) cli_fail(NULL, 0, "out of memory");
    const tfm_nbest_entry *e = &slot->entry;
    if (tfm_nbest_parse(slot->line.data, len, &slot->entry, &err) != TFM_OK ||
        tfm_pair_reader_parse(run->pairs, TFM_TARGET, e->hyp, e->hyp_len, &slot->pair.tgt,
                              &err) != TFM_OK)
        return later_error(run, &run->tgt, run->tgt.lines, "%s", err.msg);
    warn_side(run, &run->tgt, run->tgt.lines, &slot->pair.tgt, false);
    if (!check_target(run, &run->tgt, run->tgt.lines, slot) || !nbest_source(run, e->index))
        return false;
    tfm_ids *src = &slot->pair.src.ids;
    tfm_ids_clear(src);
    for (size_t i = 0; i < run->nbest.src.ids.len; i++)
        if (tfm_ids_push(src, run->nbest.src.ids.data[i]) != TFM_OK) cli_fail(NULL, 0, "out of memory");
    return true;
}

/* Reads pair `slot` of the batch: a line of each of --src and --tgt, or a
 * line of the n-best list and its source. */
static tfm_status read_pair(void *ctx, size_t slot, size_t *cost, tfm_error *err)
{
    model_run *run = ctx;
    pair_slot *ps = &run->slots[slot];
    ps->unusable = false;
    bool got = run->opt->nbest ? gather_hypothesis(run, ps) : gather_pair(run, ps);
    if (!got) {
        if (!run->pe.set) return TFM_EOF;
        *err = run->pe.err;
        return TFM_ERR_FORMAT;
    }
    *cost = ps->pair.src.ids.len + ps->pair.tgt.ids.len + 1;
    return TFM_OK;
}

/* Scores the pairs of the batch (one worker: [lo, hi) is the whole batch)
 * with one forward pass. */
static tfm_status score_pairs(void *ctx, int worker, size_t lo, size_t hi, tfm_error *err)
{
    model_run *run = ctx;
    int B = 0;
    size_t labels = 0;
    for (size_t i = lo; i < hi; i++) {
        pair_slot *slot = &run->slots[i];
        slot->row = B;
        if (slot->unusable) continue;
        run->src_ptr[B] = slot->pair.src.ids.data;
        run->src_len[B] = (int)slot->pair.src.ids.len;
        run->tgt_ptr[B] = slot->pair.tgt.ids.data;
        run->tgt_len[B] = (int)slot->pair.tgt.ids.len;
        slot->first_label = labels;
        labels += slot->pair.tgt.ids.len + 1;
        B++;
    }
    if (labels > run->token_cap) {
        free(run->token_lp);
        run->token_lp = malloc(labels * sizeof *run->token_lp);
        if (!run->token_lp) return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
        run->token_cap = labels;
    }
    tfm_train_batch tb = {.B = B, .src = run->src_ptr, .src_lens = run->src_len,
                          .tgt = run->tgt_ptr, .tgt_lens = run->tgt_len};
    if (B == 0) return TFM_OK;
    return tfm_model_loss(run->ws, &tb, false, NULL, NULL, run->sentence_lp, run->token_lp, err);
}

/* Prints pair `i`'s line: its scores, or its n-best line with the feature. */
static tfm_status write_pair(void *ctx, size_t i, tfm_error *err)
{
    model_run *run = ctx;
    const options *opt = run->opt;
    pair_slot *slot = &run->slots[i];
    if (slot->unusable) { /* one output line per input line: an empty one */
        cli_write_line("", 0);
        run->n_unusable++;
        return TFM_OK;
    }
    int b = slot->row;
    int m = run->tgt_len[b] + 1; /* the target's ids and </s> */
    double total = run->sentence_lp[b], average = total / m;
    run->sum_lp += total;
    run->n_tokens += m;
    run->n_pairs++;
    tfm_buf *out = &run->out;
    tfm_buf_clear(out);
    if (opt->nbest) { /* as marian-scorer --n-best adds its feature */
        const char *name = opt->feature ? opt->feature : TFM_NBEST_FEATURE;
        tfm_status st = tfm_nbest_add_feature(&slot->entry, name, opt->normalize ? average : total,
                                              out, err);
        if (st != TFM_OK) return st;
    } else {
        const float *lp = run->token_lp + slot->first_label;
        tfm_status st = opt->normalize ? tfm_buf_printf(out, "%.6f", average)
                                       : tfm_buf_printf(out, "%.6f\t%.6f", total, average);
        for (int t = 0; t < m && opt->per_token && st == TFM_OK; t++)
            st = tfm_buf_printf(out, "%s%.6f", t ? " " : "\t", (double)lp[t]);
        if (st != TFM_OK) return tfm_error_set(err, st, "out of memory");
    }
    cli_write_line(out->data, out->len);
    return TFM_OK;
}

static void flush_output(void *ctx)
{
    cli_flush();
}


static void report_pending(model_run *run)
{
    if (run->pe.mismatch) pairs_mismatch(run);
    cli_fail(run->pe.file, run->pe.line, "%s", run->pe.err.msg);
}

/* --nbest: the list must cover every source line, as decode --nbest writes it. */
static void check_nbest_covers_sources(model_run *run)
{
    /* the sources read so far: up to the list's last sentence */
    const size_t covered = tfm_lines_number(run->src.reader);
    size_t n_src, n_tgt;
    count_lines(run, &n_src, &n_tgt);
    if (n_src != covered)
        cli_fail(NULL, 0, "the n-best list in %s covers %zu sentence%s but the sources in %s have "
                 "%zu line%s", display_name(run->tgt.name), covered, covered == 1 ? "" : "s",
                 display_name(run->src.name), n_src, n_src == 1 ? "" : "s");
}

/* Loads the model or exits with the library's reason (its messages name the
 * file already, so the name is put in front only when they do not). */
static tfm_model *load_model(const char *path)
{
    tfm_model *model;
    tfm_error err;
    if (tfm_model_load(path, &model, &err) != TFM_OK)
        cli_fail(strstr(err.msg, path) ? NULL : path, 0, "%s", err.msg);
    return model;
}

static void check_model_options(options *opt, int n_files)
{
    if (!opt->model) cli_usage_error("%s is an option of 'score -m MODEL': give a model", opt->model_option);
    if (opt->metric_option[0])
        cli_usage_error("%s is an option of the metrics, not of 'score -m MODEL'", opt->metric_option);
    if (n_files > 0)
        cli_usage_error("'score -m' reads --src and --tgt (or --nbest), not FILE operands");
    if (!opt->src) cli_usage_error("the sources are required: --src SRC");
    if (opt->tgt && opt->nbest) cli_usage_error("give --tgt or --nbest, not both");
    if (!opt->tgt && !opt->nbest)
        cli_usage_error("the targets are required: --tgt TGT (or an n-best list: --nbest NBEST)");
    const char *other = opt->tgt ? opt->tgt : opt->nbest;
    if (strcmp(opt->src, "-") == 0 && strcmp(other, "-") == 0)
        cli_usage_error("standard input ('-') can be only one of the inputs");
    if (opt->per_token && opt->nbest)
        cli_usage_error("--per-token prints a line per pair; it does not go with --nbest");
    if (opt->feature && !opt->nbest) cli_usage_error("--nbest-feature names the feature of --nbest");
    if (opt->feature && !tfm_nbest_feature_name_ok(opt->feature))
        cli_usage_error("--nbest-feature '%s': a name without spaces, '|' or '='", opt->feature);
}

static int run_model(const options *opt)
{
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    /* Model scoring runs one forward pass at a time; its GEMMs are large (all
     * the batch's rows), so the threads are the BLAS's own (one level). */
    tfm_blas_threads(opt->threads);
    static model_run run; /* zeroed */
    run.opt = opt;
    run.model = load_model(opt->model);
    run.eos = opt->eos && tfm_model_source_eos(run.model); /* train --no-eos says so */
    const tfm_config *c = &run.model->config;
    run.max_src = c->max_positions;
    run.max_tgt = c->max_positions - 1;
    tfm_error err;
    if (opt->text) {
        if (!run.model->vocab)
            cli_fail(opt->model, 0, "the model holds no vocabulary to tokenize --text with: give id lines");
        if (tfm_bpe_create(run.model->vocab, &run.bpe, &err) != TFM_OK) cli_fail(NULL, 0, "%s", err.msg);
    }
    if (tfm_train_workspace_create(run.model, &run.ws, &err) != TFM_OK) cli_fail(NULL, 0, "%s", err.msg);
    cli_info("model %s: d_model %d, %d+%d layers, vocabulary %d/%d; %d BLAS thread%s", opt->model,
             c->d_model, c->n_encoder_layers, c->n_decoder_layers, (int)c->src_vocab_size,
             (int)c->tgt_vocab_size, opt->threads, opt->threads == 1 ? "" : "s");

    size_t bs = (size_t)opt->batch_size;
    run.slots = xcalloc(bs, sizeof *run.slots);
    for (size_t i = 0; i < bs; i++) {
        tfm_pair_init(&run.slots[i].pair);
        tfm_buf_init(&run.slots[i].line);
    }
    run.src_ptr = xcalloc(bs, sizeof *run.src_ptr);
    run.tgt_ptr = xcalloc(bs, sizeof *run.tgt_ptr);
    run.src_len = xcalloc(bs, sizeof *run.src_len);
    run.tgt_len = xcalloc(bs, sizeof *run.tgt_len);
    run.sentence_lp = xcalloc(bs, sizeof *run.sentence_lp);
    tfm_pair_init(&run.nbest);
    tfm_buf_init(&run.out);

    run.src.name = opt->src;
    run.tgt.name = opt->tgt ? opt->tgt : opt->nbest;
    input *inputs[2] = {&run.src, &run.tgt};
    for (int k = 0; k < 2; k++) {
        inputs[k]->fd = cli_open_input(inputs[k]->name);
        inputs[k]->reader = tfm_lines_create(inputs[k]->fd);
        if (!inputs[k]->reader) cli_fail(NULL, 0, "out of memory");
    }
    /* Ids below the vocabulary sizes; a source cropped to the model's
     * positions with its </s>; a target longer than they take (less one for
     * <s>) kept whole, to be left without a score. */
    tfm_pair_params pp = tfm_pair_default_params();
    pp.src_vocab_size = c->src_vocab_size;
    pp.tgt_vocab_size = c->tgt_vocab_size;
    pp.max_source = (size_t)run.max_src;
    pp.max_target = (size_t)run.max_tgt;
    pp.crop_target = false;
    pp.source_eos = run.eos;
    pp.eos_id = c->eos_id;
    pp.bpe = run.bpe;
    pp.strict = opt->strict;
    if (tfm_pair_reader_create(run.src.reader, opt->nbest ? NULL : run.tgt.reader, &pp, &run.pairs,
                               &err) != TFM_OK)
        cli_fail(NULL, 0, "%s", err.msg);

    /* Batches of the pairs that are ready, up to --batch-size pairs and
     * --batch-tokens ids; a bad line is reported after the lines before it. */
    tfm_batch_loop loop = {
        .ctx = &run, .max_items = bs, .max_cost = (size_t)opt->batch_tokens, .threads = 1,
        .read = read_pair, .ready = pairs_ready, .work = score_pairs, .write = write_pair,
        .flush = flush_output,
    };
    tfm_batch_failure f;
    if (tfm_batch_loop_run(&loop, &f) != TFM_OK) {
        cli_flush();
        if (f.stage == TFM_BATCH_READ) report_pending(&run);
        cli_fail(f.stage == TFM_BATCH_WORK ? display_name(run.tgt.name) : NULL, 0, "%s", f.err.msg);
    }
    if (opt->nbest) check_nbest_covers_sources(&run);
    cli_flush();
    tfm_pair_reader_free(run.pairs);
    for (int k = 0; k < 2; k++) {
        tfm_lines_free(inputs[k]->reader);
        cli_close_input(inputs[k]->fd);
    }

    /* The corpus perplexity, as the paper reports it: exp(nll / tokens). */
    if (cli_verbosity >= 1) {
        if (run.n_tokens > 0)
            fprintf(stderr, "%s: perplexity %.4f over %lld target tokens (</s> included) of %zu "
                    "pair%s; mean log-prob %.6f per token\n", cli_program(),
                    exp(-run.sum_lp / (double)run.n_tokens), (long long)run.n_tokens, run.n_pairs,
                    run.n_pairs == 1 ? "" : "s", run.sum_lp / (double)run.n_tokens);
        else
            fprintf(stderr, "%s: no pairs scored: no perplexity\n", cli_program());
        if (run.n_unusable)
            fprintf(stderr, "%s: %zu target%s too long for the model had no score\n", cli_program(),
                    run.n_unusable, run.n_unusable == 1 ? "" : "s");
    }
    double t = seconds_since(&start);
    cli_info("scored %zu pairs, %lld target tokens in %.2f s (%.0f target tokens/s)", run.n_pairs,
             (long long)run.n_tokens, t, t > 0 ? (double)run.n_tokens / t : 0.0);

    for (size_t i = 0; i < bs; i++) {
        tfm_pair_free(&run.slots[i].pair);
        tfm_buf_free(&run.slots[i].line);
    }
    free(run.slots);
    free(run.src_ptr);
    free(run.tgt_ptr);
    free(run.src_len);
    free(run.tgt_len);
    free(run.sentence_lp);
    free(run.token_lp);
    tfm_pair_free(&run.nbest);
    tfm_buf_free(&run.out);
    tfm_bpe_free(run.bpe);
    tfm_train_workspace_free(run.ws);
    tfm_model_free(run.model);
    return CLI_EXIT_OK;
}

/* ---- options ------------------------------------------------------------------------------ */

/* Notes the first option that belongs to other metrics than `kinds`. */
static void only_for(options *opt, int kinds, const char *option)
{
    if (!opt->misplaced && !(kinds & (1 << opt->p.kind))) {
        opt->misplaced = option;
        opt->misplaced_for = kinds;
    }
}

/* Which mode an option belongs to: the metrics, -m, or both. */
enum { FOR_METRICS, FOR_MODEL, FOR_BOTH };

static int mode_of_option(int c)
{
    switch (c) {
    case 'm': case OPT_SRC: case OPT_TGT: case OPT_NBEST: case OPT_NBEST_FEATURE: case 'n':
    case OPT_PER_TOKEN: case OPT_TEXT: case OPT_NO_EOS: case OPT_BATCH_SIZE: case OPT_BATCH_TOKENS:
        return FOR_MODEL;
    case OPT_THREADS: case OPT_STRICT: case 'q': case 'v': case 'h': case 'V': case '?':
        return FOR_BOTH;
    default: return FOR_METRICS;
    }
}

/* Notes the first option of each mode as the user spelled it ("--name"
 * when given long, else "-c"), for the checks in main. */
static void note_mode(options *opt, int c, int long_index)
{
    int mode = mode_of_option(c);
    char *first = mode == FOR_MODEL ? opt->model_option
                  : mode == FOR_METRICS ? opt->metric_option : NULL;
    if (!first || first[0]) return;
    if (long_index >= 0) snprintf(first, sizeof opt->model_option, "--%s", long_options[long_index].name);
    else snprintf(first, sizeof opt->model_option, "-%c", c);
}

static void parse_options(int argc, char **argv, options *opt)
{
    static const char *const formats[] = {"text", "json", NULL};
    static const char *const tokenizers[] = {"13a", "intl", "zh", "char", "none", NULL};
    static const char *const smooths[] = {"exp", "floor", "add-k", "none", NULL};
    int c, long_index = -1;
    while ((c = getopt_long(argc, argv, "r:f:bw:m:nqvhV", long_options, &long_index)) != -1) {
        note_mode(opt, c, long_index);
        long_index = -1;
        switch (c) {
        case 'm': opt->model = optarg; break;
        case OPT_SRC: opt->src = optarg; break;
        case OPT_TGT: opt->tgt = optarg; break;
        case OPT_NBEST: opt->nbest = optarg; break;
        case OPT_NBEST_FEATURE: opt->feature = optarg; break;
        case 'n': opt->normalize = true; break;
        case OPT_PER_TOKEN: opt->per_token = true; break;
        case OPT_TEXT: opt->text = true; break;
        case OPT_NO_EOS: opt->eos = false; break;
        case OPT_BATCH_SIZE: opt->batch_size = (int)cli_parse_int("--batch-size", optarg, 1, 1 << 20); break;
        case OPT_BATCH_TOKENS:
            opt->batch_tokens = (int)cli_parse_int("--batch-tokens", optarg, 1, 1 << 26);
            break;
        case 'r':
            opt->refs = realloc(opt->refs, (size_t)(opt->n_refs + 1) * sizeof *opt->refs);
            if (!opt->refs) cli_fail(NULL, 0, "out of memory");
            opt->refs[opt->n_refs++] = optarg;
            if (opt->n_refs > TFM_METRIC_MAX_REFS)
                cli_usage_error("-r: at most %d references", TFM_METRIC_MAX_REFS);
            break;
        case OPT_SENTENCE: opt->sentence = true; break;
        case 'f': opt->json = cli_parse_choice("--format", optarg, formats) == 1; break;
        case 'b': opt->score_only = true; break;
        case 'w': opt->width = (int)cli_parse_int("--width", optarg, 0, 10); break;
        case OPT_STRICT: opt->strict = true; break;
        case OPT_TOKENIZE:
            opt->p.tokenize = (tfm_bleu_tok)cli_parse_choice("--tokenize", optarg, tokenizers);
            only_for(opt, FOR_BLEU, "--tokenize");
            break;
        case OPT_LOWERCASE:
            opt->p.lowercase = true;
            only_for(opt, FOR_BLEU | FOR_CHRF, "--lowercase");
            break;
        case OPT_SMOOTH:
            opt->p.smooth = (tfm_bleu_smooth)cli_parse_choice("--smooth", optarg, smooths);
            only_for(opt, FOR_BLEU, "--smooth");
            break;
        case OPT_SMOOTH_VALUE:
            opt->p.smooth_value = cli_parse_double("--smooth-value", optarg, 0, 1e9);
            opt->smooth_value_given = true;
            only_for(opt, FOR_BLEU, "--smooth-value");
            break;
        case OPT_FORCE: opt->force = true; only_for(opt, FOR_BLEU, "--force"); break;
        case OPT_CHAR_ORDER:
            opt->p.char_order = (int)cli_parse_int("--char-order", optarg, 0, 10);
            only_for(opt, FOR_CHRF, "--char-order");
            break;
        case OPT_WORD_ORDER:
            opt->p.word_order = (int)cli_parse_int("--word-order", optarg, 0, 6);
            only_for(opt, FOR_CHRF, "--word-order");
            break;
        case OPT_BETA:
            opt->p.beta = (int)cli_parse_int("--beta", optarg, 1, 100);
            only_for(opt, FOR_CHRF, "--beta");
            break;
        case OPT_WHITESPACE: opt->p.whitespace = true; only_for(opt, FOR_CHRF, "--whitespace"); break;
        case OPT_EPS: opt->p.eps_smoothing = true; only_for(opt, FOR_CHRF, "--eps-smoothing"); break;
        case OPT_CASE_SENSITIVE: opt->p.case_sensitive = true; only_for(opt, FOR_TER, "--case-sensitive"); break;
        case OPT_NORMALIZED: opt->p.normalized = true; only_for(opt, FOR_TER, "--normalized"); break;
        case OPT_NO_PUNCT: opt->p.no_punct = true; only_for(opt, FOR_TER, "--no-punct"); break;
        case OPT_CONFIDENCE: opt->confidence = true; break;
        case OPT_CONFIDENCE_N:
            opt->n_confidence = (int)cli_parse_int("--confidence-n", optarg, 1, 1000000);
            break;
        case OPT_PAIRED: opt->paired = true; break;
        case OPT_PAIRED_N: opt->n_paired = (int)cli_parse_int("--paired-bs-n", optarg, 1, 1000000); break;
        case OPT_SEED: opt->seed = (uint64_t)cli_parse_int("--seed", optarg, 0, INT64_MAX); break;
        case OPT_THREADS: opt->threads = (int)cli_parse_int("--threads", optarg, 1, 64); break;
        case 'V':
            cli_print_version();
            printf("computes BLEU, chrF and TER as sacreBLEU %s does\n", TFM_SACREBLEU_VERSION);
            cli_flush();
            exit(CLI_EXIT_OK);
        default: cli_common_option(c, usage_text);
        }
    }
}

/* The metric named by the first argument, or -1. */
static int metric_of(const char *name, tfm_metric_params *p)
{
    if (strcmp(name, "bleu") == 0) *p = tfm_metric_default_params(TFM_METRIC_BLEU);
    else if (strcmp(name, "chrf") == 0) *p = tfm_metric_default_params(TFM_METRIC_CHRF);
    else if (strcmp(name, "chrf++") == 0) {
        *p = tfm_metric_default_params(TFM_METRIC_CHRF);
        p->word_order = 2;
    } else if (strcmp(name, "ter") == 0) *p = tfm_metric_default_params(TFM_METRIC_TER);
    else return -1;
    return (int)p->kind;
}

static const char *metrics_of(int kinds)
{
    switch (kinds) {
    case FOR_BLEU: return "'score bleu'";
    case FOR_CHRF: return "'score chrf'";
    case FOR_TER: return "'score ter'";
    default: return "'score bleu' and 'score chrf'";
    }
}

int main(int argc, char **argv)
{
    cli_init("score", argv);
    options opt = {.width = 1, .n_confidence = 1000, .n_paired = 1000, .seed = 12345,
                   .eos = true, .batch_size = 64, .batch_tokens = 2048};
    opt.threads = tfm_cpu_count();
    if (opt.threads > 8) opt.threads = 8;
    bool have_metric = argc > 1 && metric_of(argv[1], &opt.p) >= 0;
    if (have_metric) {
        opt.metric_name = argv[1];
        argv++;
        argc--;
    } else {
        opt.p = tfm_metric_default_params(TFM_METRIC_BLEU);
    }
    /* sacreBLEU spells --lowercase "-lc"; getopt would read it as -l -c. */
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0) break;
        if (strcmp(argv[i], "-lc") == 0) argv[i] = (char *)"--lowercase";
    }
    parse_options(argc, argv, &opt);
    char **files = argv + optind;
    int n_files = argc - optind;

    if (opt.model || opt.model_option[0]) {
        if (have_metric)
            cli_usage_error("%s is for scoring with a model (score -m MODEL), not with a metric: "
                            "leave out '%s'", opt.model_option, opt.metric_name);
        check_model_options(&opt, n_files);
        return run_model(&opt);
    }
    if (!have_metric)
        cli_usage_error("a metric is required first: score bleu|chrf|chrf++|ter -r REF [HYP], "
                        "or a model: score -m MODEL --src SRC --tgt TGT");
    if (opt.misplaced)
        cli_usage_error("%s is an option of %s, not of 'score %s'", opt.misplaced,
                        metrics_of(opt.misplaced_for), opt.metric_name);
    if (opt.n_refs == 0) cli_usage_error("a reference is required: -r REF");
    if (opt.smooth_value_given && opt.p.smooth != TFM_BLEU_SMOOTH_FLOOR && opt.p.smooth != TFM_BLEU_SMOOTH_ADD_K)
        cli_usage_error("--smooth-value is the value of --smooth floor or --smooth add-k");
    if (opt.p.kind == TFM_METRIC_CHRF && opt.p.char_order + opt.p.word_order == 0)
        cli_usage_error("--char-order and --word-order cannot both be 0");
    if (opt.sentence && (opt.confidence || opt.paired))
        cli_usage_error("--sentence gives one score per line: --confidence and --paired-bs need the corpus");
    if (opt.confidence && opt.paired)
        cli_usage_error("--paired-bs shows confidence intervals already; leave out --confidence");
    if (opt.paired && n_files < 2)
        cli_usage_error("--paired-bs needs a baseline and at least one system: --paired-bs BASELINE SYSTEM...");
    if (!opt.paired && n_files > 1)
        cli_usage_error("one hypothesis file at most (to compare systems, use --paired-bs BASELINE SYSTEM...)");
    if (opt.paired) {
        /* As sacreBLEU: the baseline given again among the systems is left
         * out (so "--paired-bs base.txt *.txt" works); other repeats are an
         * error. */
        int kept = 1;
        for (int i = 1; i < n_files; i++) {
            if (strcmp(files[i], files[0]) == 0) {
                cli_info("%s is the baseline: not compared with itself", files[i]);
                continue;
            }
            for (int k = 1; k < kept; k++)
                if (strcmp(files[k], files[i]) == 0) cli_usage_error("%s is given twice", files[i]);
            files[kept++] = files[i];
        }
        n_files = kept;
        if (n_files < 2) cli_usage_error("--paired-bs needs a system besides the baseline");
    }
    /* sacreBLEU's --sentence-level turns on BLEU's effective order. */
    if (opt.sentence && opt.p.kind == TFM_METRIC_BLEU) opt.p.effective_order = true;

    int status = run(&opt, files, n_files);
    free(opt.refs);
    return status;
}
