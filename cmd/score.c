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
 * The program parses the options, opens the files and prints; the work is
 * in the library.  Metrics: tfm_file_scorer (lib/metrics) reads the
 * hypotheses and references in step, line by line, keeping only each
 * line's sufficient statistics, so the files may be of any size.  With -m:
 * tfm_score_pairs (lib/view) scores sentence pairs or an n-best list under
 * a model, as marian-scorer does: the log-probability of each target given
 * its source, from the training forward pass with dropout off. */
#include <getopt.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "files.h"
#include "filter.h"

/* The help; the %-conversions are the library's defaults (format_usage). */
static const char usage_format[] =
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
    "  -w, --width=N              decimals of the score (default %d, as sacreBLEU)\n"
    "      --strict               invalid UTF-8 is an error, not replaced by U+FFFD\n"
    "\n"
    "BLEU ('score bleu'):\n"
    "      --tokenize=TOK         %s (default), intl, zh, char or none\n"
    "      --lowercase, -lc       lowercase everything first (also for chrF)\n"
    "      --smooth=METHOD        %s (default), floor, add-k or none\n"
    "      --smooth-value=V       the value of floor (%g) or add-k (%g)\n"
    "      --force                no warning about hypotheses that look tokenized\n"
    "\n"
    "chrF ('score chrf', 'score chrf++'):\n"
    "      --char-order=N         character n-gram order (default %d)\n"
    "      --word-order=N         word n-gram order (default %d; %d for chrf++)\n"
    "      --beta=N               weight of recall over precision (default %d)\n"
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
    "      --confidence           add a 95%% confidence interval by bootstrap resampling\n"
    "      --confidence-n=N       resamples for --confidence (default %d)\n"
    "      --paired-bs            paired bootstrap test of each SYSTEM against BASELINE\n"
    "      --paired-bs-n=N        resamples for --paired-bs (default %d)\n"
    "      --seed=N               seed of the resampling (default %llu)\n"
    "      --threads=N            threads to use (default: the number of CPUs, at most\n"
    "                             %d); with -m, the BLAS threads of the forward pass\n"
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
    "                             vocabulary as 'tokenize' does (without it: ids or\n"
    "                             text, as most of each file's first lines are)\n"
    "      --no-eos               do not end each source with </s> (the default for a\n"
    "                             model trained with 'train --no-eos', which says so)\n"
    "      --batch-size=N         pairs scored together, at most (default %d)\n"
    "      --batch-tokens=N       source and target ids scored together, at most\n"
    "                             (default %d)\n"
    "\n"
    "Common options:\n"
    CLI_COMMON_HELP
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

/* The metrics' own options (--tokenize ... --no-punct) are numbered from
 * OPT_METRIC up and set by name (tfm_metric_params_set). */
enum {
    OPT_SENTENCE = 256, OPT_STRICT, OPT_FORCE, OPT_CONFIDENCE, OPT_CONFIDENCE_N, OPT_PAIRED,
    OPT_PAIRED_N, OPT_SEED, OPT_SRC, OPT_TGT, OPT_NBEST, OPT_NBEST_FEATURE, OPT_PER_TOKEN, OPT_TEXT,
    OPT_NO_EOS, OPT_METRIC,
};

/* Who takes an option: a bit per metric (tfm_metric_kind), MODEL for -m. */
enum { BLEU = 1 << TFM_METRIC_BLEU, CHRF = 1 << TFM_METRIC_CHRF, TER = 1 << TFM_METRIC_TER,
       METRICS = BLEU | CHRF | TER, MODEL = 8, BOTH = METRICS | MODEL };

/* The options, each with who takes it (arg 1: it takes a value); the
 * getopt_long table is made of it. */
#define OPTION(name, arg, val, takers) {{name, arg, NULL, val}, takers}
static const struct score_option {
    struct option o;
    int takers;
} options_table[] = {
    OPTION("ref", 1, 'r', METRICS), OPTION("sentence", 0, OPT_SENTENCE, METRICS),
    OPTION("format", 1, 'f', METRICS), OPTION("score-only", 0, 'b', METRICS),
    OPTION("width", 1, 'w', METRICS), OPTION("strict", 0, OPT_STRICT, BOTH),
    OPTION("force", 0, OPT_FORCE, BLEU), OPTION("tokenize", 1, OPT_METRIC, BLEU),
    OPTION("lowercase", 0, OPT_METRIC + 1, BLEU | CHRF), OPTION("smooth", 1, OPT_METRIC + 2, BLEU),
    OPTION("smooth-value", 1, OPT_METRIC + 3, BLEU), OPTION("char-order", 1, OPT_METRIC + 4, CHRF),
    OPTION("word-order", 1, OPT_METRIC + 5, CHRF), OPTION("beta", 1, OPT_METRIC + 6, CHRF),
    OPTION("whitespace", 0, OPT_METRIC + 7, CHRF), OPTION("eps-smoothing", 0, OPT_METRIC + 8, CHRF),
    OPTION("case-sensitive", 0, OPT_METRIC + 9, TER), OPTION("normalized", 0, OPT_METRIC + 10, TER),
    OPTION("no-punct", 0, OPT_METRIC + 11, TER),
    OPTION("confidence", 0, OPT_CONFIDENCE, METRICS),
    OPTION("confidence-n", 1, OPT_CONFIDENCE_N, METRICS),
    OPTION("paired-bs", 0, OPT_PAIRED, METRICS), OPTION("paired-bs-n", 1, OPT_PAIRED_N, METRICS),
    OPTION("seed", 1, OPT_SEED, METRICS), {CLI_OPTION_THREADS, BOTH},
    OPTION("model", 1, 'm', MODEL), OPTION("src", 1, OPT_SRC, MODEL),
    OPTION("tgt", 1, OPT_TGT, MODEL), OPTION("nbest", 1, OPT_NBEST, MODEL),
    OPTION("nbest-feature", 1, OPT_NBEST_FEATURE, MODEL), OPTION("normalize", 0, 'n', MODEL),
    OPTION("per-token", 0, OPT_PER_TOKEN, MODEL), OPTION("text", 0, OPT_TEXT, MODEL),
    OPTION("no-eos", 0, OPT_NO_EOS, MODEL), {CLI_OPTION_BATCH_SIZE, MODEL},
    {CLI_OPTION_BATCH_TOKENS, MODEL},
};
#define N_OPTIONS (sizeof options_table / sizeof options_table[0])

typedef struct options {
    tfm_file_scorer_params files; /* the metrics */
    tfm_pair_scorer_params pairs; /* -m */
    const char *metric_name;      /* as given: "bleu", "chrf", "chrf++", "ter" */
    const char **refs;
    int n_refs, n_confidence, n_paired;
    cli_batch_options batch;      /* --threads; with -m, --batch-size and --batch-tokens */
    bool strict;
    const char *model, *src, *tgt, *nbest;
    const char *misplaced;        /* an option of another metric, as given ... */
    int misplaced_for;            /* ... and who takes it */
    char metric_option[64];       /* the first option only the metrics take, as given */
    char model_option[64];        /* the first option only -m takes, as given */
} options;

/* ---- the output and the inputs ------------------------------------------------------------ */

static void put_line(void *ctx, const char *text, size_t len) { cli_write_line(text, len); }
static void put_warning(void *ctx, const char *file, size_t line, const char *msg)
{
    cli_warn(file, line, "%s", msg);
}
static void put_flush(void *ctx) { cli_flush(); }
static const tfm_score_output output = {NULL, put_line, put_warning, put_flush};

/* Opens the inputs (at most one of them standard input) as line readers. */
static void open_inputs(tfm_score_input *in, cli_input *files, int n)
{
    for (int k = 0, stdin_users = 0; k < n; k++)
        if ((stdin_users += strcmp(in[k].name, "-") == 0) > 1)
            cli_usage_error("standard input ('-') can be only one of the inputs");
    for (int k = 0; k < n; k++) {
        cli_input_open(&files[k], in[k].name);
        in[k].lines = files[k].lines;
        in[k].label = strcmp(in[k].name, "-") == 0 ? "standard input" : in[k].name;
    }
}

/* A run stopped: the lines before the failure are out, then the message. */
static _Noreturn void run_failed(const tfm_score_failure *at, const tfm_error *err)
{
    cli_flush();
    cli_fail(at->file, at->line, "%s", err->msg);
}

/* ---- the runs ----------------------------------------------------------------------------- */

static int score_files(const options *opt, char **files, int n_files)
{
    double start = tfm_clock_seconds();
    static char *const stdin_only[] = {"-"};
    if (n_files == 0) {
        files = (char **)stdin_only;
        n_files = 1;
    }
    int n = n_files + opt->n_refs;
    tfm_score_input *in = calloc((size_t)n, sizeof *in);
    cli_input *fin = calloc((size_t)n, sizeof *fin);
    if (!in || !fin) cli_fail(NULL, 0, "out of memory");
    for (int k = 0; k < n; k++) in[k].name = k < n_files ? files[k] : opt->refs[k - n_files];
    open_inputs(in, fin, n);

    tfm_file_scorer *s;
    tfm_error err;
    tfm_status st = tfm_file_scorer_create(&opt->files, in, n_files, opt->n_refs, &s, &err);
    if (st == TFM_ERR_ARG) cli_usage_error("%s", err.msg);
    if (st != TFM_OK) cli_fail(NULL, 0, "%s", err.msg);
    tfm_score_failure at;
    if (tfm_file_scorer_run(s, &output, &at, &err) != TFM_OK) run_failed(&at, &err);
    for (int k = 0; k < n; k++) cli_input_close(&fin[k]);
    if (!opt->files.sentence) {
        tfm_buf text;
        tfm_buf_init(&text);
        if (tfm_file_scorer_format(s, &text, &err) != TFM_OK) cli_fail(NULL, 0, "%s", err.msg);
        cli_write_line(text.data, text.len);
        tfm_buf_free(&text);
    }
    cli_flush();
    cli_info("scored %zu lines in %.2f s (BLEU, chrF and TER as sacreBLEU %s computes them)",
             tfm_file_scorer_lines(s), tfm_clock_seconds() - start, TFM_SACREBLEU_VERSION);
    tfm_file_scorer_free(s);
    free(fin);
    free(in);
    return CLI_EXIT_OK;
}

static int score_pairs(const options *opt)
{
    double start = tfm_clock_seconds();
    /* One forward pass at a time, with large GEMMs (all the batch's rows):
     * the threads are the BLAS's own (one level). */
    tfm_blas_threads(opt->batch.threads);
    tfm_model *model = cli_load_model(opt->model);
    if (opt->pairs.text && !model->vocab)
        cli_fail(opt->model, 0, "the model holds no vocabulary to tokenize --text with: give id lines");
    cli_info_model(opt->model, model, opt->batch.threads, "BLAS thread");
    tfm_score_input in[2] = {{.name = opt->src}, {.name = opt->tgt}};
    cli_input fin[2];
    open_inputs(in, fin, 2);
    tfm_pair_scores t;
    tfm_score_failure at;
    tfm_error err;
    if (tfm_score_pairs(model, &opt->pairs, &in[0], &in[1], &output, &t, &at, &err) != TFM_OK)
        run_failed(&at, &err);
    cli_flush();
    cli_input_close(&fin[0]);
    cli_input_close(&fin[1]);
    /* The corpus perplexity, as the paper reports it: exp(nll / tokens). */
    tfm_buf summary;
    tfm_buf_init(&summary);
    if (cli_verbosity >= 1 && tfm_pair_scores_format(&t, &summary) == TFM_OK)
        fprintf(stderr, "%s: %s\n", cli_program(), summary.data);
    tfm_buf_free(&summary);
    double secs = tfm_clock_seconds() - start;
    cli_info("scored %zu pairs, %lld target tokens in %.2f s (%.0f target tokens/s)", t.n_pairs,
             (long long)t.n_tokens, secs, secs > 0 ? (double)t.n_tokens / secs : 0.0);
    tfm_model_free(model);
    return CLI_EXIT_OK;
}

/* ---- options ------------------------------------------------------------------------------ */

/* The entry of options_table of option value c (there is one). */
static size_t option_index(int c)
{
    size_t i = 0;
    while (i < N_OPTIONS - 1 && options_table[i].o.val != c) i++;
    return i;
}

/* Notes who takes option c: the first option of each mode as the user
 * spelled it ("--name" when given long, else "-c"), and the first that
 * belongs to other metrics than the one given. */
static void note_takers(options *opt, int c, int long_index)
{
    const struct score_option *so = &options_table[option_index(c)];
    if (so->o.val != c || so->takers == BOTH) return;
    char *first = so->takers == MODEL ? opt->model_option : opt->metric_option;
    if (!first[0] && long_index >= 0) snprintf(first, 64, "--%s", so->o.name);
    else if (!first[0]) snprintf(first, 64, "-%c", c);
    if (so->takers != MODEL && !opt->misplaced && !(so->takers & (1 << opt->files.metric.kind))) {
        opt->misplaced = so->o.name;
        opt->misplaced_for = so->takers;
    }
}

/* The help text with the library's defaults in it, so the two cannot differ. */
static void format_usage(char *out, size_t size)
{
    const tfm_metric_params bleu = tfm_metric_default_params(TFM_METRIC_BLEU);
    const tfm_metric_params chrf = tfm_metric_default_params(TFM_METRIC_CHRF);
    tfm_metric_params chrf_pp = chrf;
    tfm_metric_parse_name("chrf++", &chrf_pp);
    const tfm_file_scorer_params files = tfm_file_scorer_default_params();
    const tfm_bootstrap_params boot = tfm_bootstrap_default_params();
    const tfm_pair_scorer_params pairs = tfm_pair_scorer_default_params();
    snprintf(out, size, usage_format, files.format.width, tfm_bleu_tok_name(bleu.tokenize),
             tfm_bleu_smooth_name(bleu.smooth),
             tfm_bleu_smooth_default_value(TFM_BLEU_SMOOTH_FLOOR),
             tfm_bleu_smooth_default_value(TFM_BLEU_SMOOTH_ADD_K), chrf.char_order,
             chrf.word_order, chrf_pp.word_order, chrf.beta, boot.n_samples, boot.n_samples,
             (unsigned long long)boot.seed, TFM_SCORE_MAX_THREADS, pairs.batch_size,
             pairs.batch_tokens);
}

static void parse_options(int argc, char **argv, options *opt)
{
    static const char *const formats[] = {"text", "json", NULL};
    static char usage_text[sizeof usage_format + 128];
    format_usage(usage_text, sizeof usage_text);
    static const struct option common[] = {CLI_COMMON_LONG_OPTIONS, {NULL, 0, NULL, 0}};
    struct option long_options[N_OPTIONS + sizeof common / sizeof common[0]];
    for (size_t i = 0; i < N_OPTIONS; i++) long_options[i] = options_table[i].o;
    memcpy(long_options + N_OPTIONS, common, sizeof common);
    tfm_metric_params *p = &opt->files.metric;
    tfm_pair_scorer_params *pairs = &opt->pairs;
    int c, long_index = -1;
    tfm_error err;
    while ((c = getopt_long(argc, argv, "r:f:bw:m:nqvhV", long_options, &long_index)) != -1) {
        note_takers(opt, c, long_index);
        long_index = -1;
        if (c >= OPT_METRIC && c < OPT_METRIC + 12) {
            if (tfm_metric_params_set(p, options_table[option_index(c)].o.name, optarg, &err))
                cli_usage_error("%s", err.msg);
            continue;
        }
        switch (c) {
        case 'm': opt->model = optarg; break;
        case OPT_SRC: opt->src = optarg; break;
        case OPT_TGT: opt->tgt = optarg; break;
        case OPT_NBEST: opt->nbest = optarg; break;
        case OPT_NBEST_FEATURE: pairs->feature = optarg; break;
        case 'n': pairs->normalize = true; break;
        case OPT_PER_TOKEN: pairs->per_token = true; break;
        case OPT_TEXT: pairs->text = true; break;
        case OPT_NO_EOS: pairs->source_eos = false; break;
        case 'r':
            opt->refs = realloc(opt->refs, (size_t)(opt->n_refs + 1) * sizeof *opt->refs);
            if (!opt->refs) cli_fail(NULL, 0, "out of memory");
            opt->refs[opt->n_refs++] = optarg;
            if (opt->n_refs > TFM_METRIC_MAX_REFS)
                cli_usage_error("-r: at most %d references", TFM_METRIC_MAX_REFS);
            break;
        case OPT_SENTENCE: opt->files.sentence = true; break;
        case 'f': opt->files.format.json = cli_parse_choice("--format", optarg, formats) == 1; break;
        case 'b': opt->files.format.score_only = true; break;
        case 'w': opt->files.format.width = (int)cli_parse_int("--width", optarg, 0, 10); break;
        case OPT_STRICT: opt->strict = true; break;
        case OPT_FORCE: opt->files.force = true; break;
        case OPT_CONFIDENCE: opt->files.confidence = true; break;
        case OPT_CONFIDENCE_N:
            opt->n_confidence = (int)cli_parse_int("--confidence-n", optarg, 1, 1000000);
            break;
        case OPT_PAIRED: opt->files.paired = true; break;
        case OPT_PAIRED_N: opt->n_paired = (int)cli_parse_int("--paired-bs-n", optarg, 1, 1000000); break;
        case OPT_SEED: opt->files.bootstrap.seed = (uint64_t)cli_parse_int("--seed", optarg, 0, INT64_MAX); break;
        case 'V':
            cli_print_version();
            printf("computes BLEU, chrF and TER as sacreBLEU %s does\n", TFM_SACREBLEU_VERSION);
            cli_flush();
            exit(CLI_EXIT_OK);
        default:
            if (!cli_batch_option(c, optarg, &opt->batch)) cli_common_option(c, usage_text);
        }
    }
}

static void check_model_options(options *opt, int n_files)
{
    tfm_pair_scorer_params *p = &opt->pairs;
    if (!opt->model) cli_usage_error("%s is an option of 'score -m MODEL': give a model", opt->model_option);
    if (opt->metric_option[0])
        cli_usage_error("%s is an option of the metrics, not of 'score -m MODEL'", opt->metric_option);
    if (n_files > 0)
        cli_usage_error("'score -m' reads --src and --tgt (or --nbest), not FILE operands");
    if (!opt->src) cli_usage_error("the sources are required: --src SRC");
    if (opt->tgt && opt->nbest) cli_usage_error("give --tgt or --nbest, not both");
    if (!opt->tgt && !opt->nbest)
        cli_usage_error("the targets are required: --tgt TGT (or an n-best list: --nbest NBEST)");
    p->nbest = opt->nbest != NULL;
    p->batch_size = opt->batch.batch_size;
    p->batch_tokens = opt->batch.batch_tokens;
    if (p->nbest) opt->tgt = opt->nbest;
    tfm_error err;
    if (tfm_pair_scorer_params_validate(p, &err) != TFM_OK) cli_usage_error("%s", err.msg);
    p->strict = opt->strict;
}

static void check_metric_options(options *opt, char **files, int *n_files)
{
    tfm_file_scorer_params *p = &opt->files;
    static const char *const takers[] = {[BLEU] = "'score bleu'", [CHRF] = "'score chrf'",
                                         [TER] = "'score ter'", [BLEU | CHRF] = "'score bleu' and 'score chrf'"};
    if (opt->misplaced)
        cli_usage_error("--%s is an option of %s, not of 'score %s'", opt->misplaced,
                        takers[opt->misplaced_for], opt->metric_name);
    if (opt->n_refs == 0) cli_usage_error("a reference is required: -r REF");
    tfm_error err;
    if (tfm_file_scorer_params_validate(p, *n_files, &err) != TFM_OK) cli_usage_error("%s", err.msg);
    int repeats;
    if (p->paired && tfm_paired_systems((const char **)files, n_files, &repeats, &err) != TFM_OK)
        cli_usage_error("%s", err.msg);
    if (p->paired && repeats) cli_info("%s is the baseline: not compared with itself", files[0]);
    /* sacreBLEU's --sentence-level turns on BLEU's effective order. */
    if (p->sentence && p->metric.kind == TFM_METRIC_BLEU) p->metric.effective_order = true;
    p->strict = opt->strict;
    p->threads = opt->batch.threads;
    p->bootstrap.n_samples = p->paired ? opt->n_paired : opt->n_confidence;
    p->bootstrap.n_threads = opt->batch.threads;
}

int main(int argc, char **argv)
{
    cli_init("score", argv);
    options opt = {.files = tfm_file_scorer_default_params(),
                   .pairs = tfm_pair_scorer_default_params()};
    opt.n_confidence = opt.n_paired = opt.files.bootstrap.n_samples;
    opt.batch = cli_batch_defaults(opt.pairs.batch_size, opt.pairs.batch_tokens);
    if (opt.batch.threads > TFM_SCORE_MAX_THREADS) opt.batch.threads = TFM_SCORE_MAX_THREADS;
    bool have_metric = argc > 1 && tfm_metric_parse_name(argv[1], &opt.files.metric);
    if (have_metric) {
        opt.metric_name = argv[1];
        argv++;
        argc--;
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
        return score_pairs(&opt);
    }
    if (!have_metric)
        cli_usage_error("a metric is required first: score bleu|chrf|chrf++|ter -r REF [HYP], "
                        "or a model: score -m MODEL --src SRC --tgt TGT");
    check_metric_options(&opt, files, &n_files);
    int status = score_files(&opt, files, n_files);
    free(opt.refs);
    return status;
}
