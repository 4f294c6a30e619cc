/* decode - the Transformer's decoder as a filter: beam search, greedy search
 * and sampling over encoder states.
 *
 *   encode -m MODEL < src.ids | decode -m MODEL [--beam 4] > out.ids
 *
 * Reads a stream of .npy records (one per sentence, as 'encode' writes them)
 * and writes one line of target token ids per record, in order (or N lines
 * in Marian's n-best form with --nbest N).
 *
 * The program parses options, opens the inputs and prints: reading and
 * checking records, the search and the output lines are lib/search's
 * (tfm_decode_batch, over tfm_search_run and lib/pass's incremental decoder). */
#include <unistd.h>

#include "filter.h"

/* The help; the %-conversions are the library's defaults (format_usage). */
static const char usage_format[] =
    "Usage: decode -m MODEL [OPTION]... [FILE]...\n"
    "Translates encoder states (the .npy stream 'encode' writes, one record per\n"
    "sentence) into lines of target token ids, one line per record, in order.\n"
    "Reads the FILEs, or standard input when none is given; '-' is standard input.\n"
    "\n"
    "Search:\n"
    "  -m, --model=MODEL          the model file (safetensors) the states came from\n"
    "  -b, --beam=K               beam size (default %d, as the paper); 1 is greedy\n"
    "      --greedy               greedy search: the same as --beam 1\n"
    "      --length-rule=RULE     how a hypothesis's log-probability is divided by its\n"
    "                             length m (its ids and </s>): '%s' (the default):\n"
    "                             by m^A, as fairseq and Marian; 'gnmt': by GNMT's\n"
    "                             ((5 + m) / 6)^A\n"
    "      --length-penalty=A     the alpha A of the length rule (default %.1f: the\n"
    "                             average log-probability per token); GNMT's usual\n"
    "                             alpha is 0.6; 0 disables either rule\n"
    "      --max-length-offset=N  at most source length + N ids (default %d)\n"
    "      --max-length=N         at most N ids, whatever the source (default: no cap\n"
    "                             but the model's max_positions - 1)\n"
    "      --min-length=N         no </s> before N ids (default %d)\n"
    "      --no-repeat-ngram=N    never repeat an N-gram within a hypothesis (0: off)\n"
    "      --plain-beam           beam search without following the greedy path: as\n"
    "                             fairseq and CTranslate2 search (may end below greedy)\n"
    "      --prefix=FILE          force a target prefix: one line of ids per record of\n"
    "                             the input; an empty line forces nothing\n"
    "      --constraints=FILE     lexically constrained beam search: line k holds the\n"
    "                             constraints of record k, separated by TABs, each a\n"
    "                             sequence of ids that the output must contain (in any\n"
    "                             order), alternatives separated by '|'; an empty line\n"
    "                             constrains nothing\n"
    "      --placeholders=SOURCE  keep the placeholders of each source line (line k of\n"
    "                             SOURCE, the source text): every placeholder token of\n"
    "                             the line exactly as often as there, no other, printf\n"
    "                             conversions in order (a model whose vocabulary was\n"
    "                             learnt with 'tokenize learn --placeholders'); a\n"
    "                             model imported by 'train import' spells each in its\n"
    "                             own pieces, as often as the source has it\n"
    "      --placeholder-classes=LIST  the classes tokenize used (default all)\n"
    "      --shortlist=FILE       a lexical shortlist ('train shortlist'): each batch\n"
    "                             computes and searches only the target pieces its\n"
    "                             sources' pieces list, the frequent ones, and the ids\n"
    "                             of its prefixes and constraints; needs --source\n"
    "      --shortlist-best=N     of each source piece's candidates, the N best only\n"
    "                             (default: all the file holds)\n"
    "      --source=FILE          the source text of the records, line k for record k\n"
    "                             (what --shortlist reads), encoded as 'tokenize -m'\n"
    "                             encodes it\n"
    "\n"
    "Sampling (any of these samples instead of searching):\n"
    "      --sample               sample from the model's distribution\n"
    "      --sample-topk=K        sample from the K most probable tokens only\n"
    "      --sample-topp=P        sample from the smallest set holding probability P\n"
    "      --temperature=T        divide the log-probabilities by T (default %g)\n"
    "      --seed=N               seed of the samples (default %llu); each sentence draws\n"
    "                             from its own generator, seeded by N and its number\n"
    "\n"
    "Output:\n"
    "      --nbest=N              N hypotheses per record (at most the beam; samples\n"
    "                             when sampling), in Marian's n-best form:\n"
    "                             'INDEX ||| IDS ||| F0= LOG-PROB ||| SCORE'\n"
    "      --scores               append a TAB and the score of each line's hypothesis:\n"
    "                             its log-probability divided by the length penalty\n"
    "      --alignment[=KIND]     after each hypothesis's ids, ' ||| ' and its word\n"
    "                             alignment to the source, read off the last decoder\n"
    "                             layer's cross-attention (the mean of its heads; of a\n"
    "                             model trained with guided alignment, its alignment\n"
    "                             head) as inspect-attn reads it: 'hard' (the default): 'i-j'\n"
    "                             pairs, source-target, 0-based, as 'inspect-attn -f\n"
    "                             align'; 'soft': each target token's distribution\n"
    "                             over the source, and the final </s>'s (Marian's\n"
    "                             form).  Costs one more decoder pass of the output\n"
    "\n"
    "Resources:\n"
    "      --batch-size=N         sentences each thread decodes together, at most\n"
    "                             (default %d)\n"
    "      --batch-tokens=N       source tokens each thread decodes together, at most\n"
    "                             (default %d)\n"
    "      --max-input-length=N   crop longer sources to N states, with a warning\n"
    "                             (default: the model's max_positions)\n"
    "      --threads=N            threads to use (default: the number of CPUs); each\n"
    "                             takes its own batch of the sentences read\n"
    CLI_COMPUTE_TYPE_HELP
    CLI_COMMON_HELP
    "\n"
    "Output lines hold ids without <s> and </s>.  An empty record (an empty source\n"
    "line) gives an empty line (in an n-best list, empty hypotheses), whatever its\n"
    "prefix.  A batch takes only the records that are ready, so each record of an\n"
    "interactive pipe is answered at once.\n"
    "Exit status: 0 on success, 1 on failure, 2 on a usage error.\n"
    "Example:\n"
    "  tokenize -m m.safetensors < in.txt | encode -m m.safetensors \\\n"
    "    | decode -m m.safetensors --beam 4 | tokenize -d -m m.safetensors\n";

enum {
    OPT_GREEDY = 256, OPT_LENGTH_RULE, OPT_LENGTH_PENALTY, OPT_MAX_LENGTH_OFFSET, OPT_MAX_LENGTH,
    OPT_MIN_LENGTH, OPT_NO_REPEAT, OPT_PLAIN_BEAM, OPT_PREFIX, OPT_SAMPLE, OPT_TOPK, OPT_TOPP, OPT_TEMPERATURE,
    OPT_SEED, OPT_NBEST, OPT_SCORES, OPT_CONSTRAINTS, OPT_PLACEHOLDERS, OPT_PLACEHOLDER_CLASSES,
    OPT_ALIGNMENT, OPT_SHORTLIST, OPT_SHORTLIST_BEST, OPT_SOURCE,
};

static const struct option long_options[] = {
    {"model", required_argument, NULL, 'm'},
    {"beam", required_argument, NULL, 'b'},
    {"greedy", no_argument, NULL, OPT_GREEDY},
    {"length-rule", required_argument, NULL, OPT_LENGTH_RULE},
    {"length-penalty", required_argument, NULL, OPT_LENGTH_PENALTY},
    {"max-length-offset", required_argument, NULL, OPT_MAX_LENGTH_OFFSET},
    {"max-length", required_argument, NULL, OPT_MAX_LENGTH},
    {"min-length", required_argument, NULL, OPT_MIN_LENGTH},
    {"no-repeat-ngram", required_argument, NULL, OPT_NO_REPEAT},
    {"plain-beam", no_argument, NULL, OPT_PLAIN_BEAM},
    {"prefix", required_argument, NULL, OPT_PREFIX},
    {"constraints", required_argument, NULL, OPT_CONSTRAINTS},
    {"placeholders", required_argument, NULL, OPT_PLACEHOLDERS},
    {"placeholder-classes", required_argument, NULL, OPT_PLACEHOLDER_CLASSES},
    {"shortlist", required_argument, NULL, OPT_SHORTLIST},
    {"shortlist-best", required_argument, NULL, OPT_SHORTLIST_BEST},
    {"source", required_argument, NULL, OPT_SOURCE},
    {"sample", no_argument, NULL, OPT_SAMPLE},
    {"sample-topk", required_argument, NULL, OPT_TOPK},
    {"sample-topp", required_argument, NULL, OPT_TOPP},
    {"temperature", required_argument, NULL, OPT_TEMPERATURE},
    {"seed", required_argument, NULL, OPT_SEED},
    {"nbest", required_argument, NULL, OPT_NBEST},
    {"scores", no_argument, NULL, OPT_SCORES},
    {"alignment", optional_argument, NULL, OPT_ALIGNMENT},
    CLI_FILTER_LONG_OPTIONS,
    {NULL, 0, NULL, 0},
};

typedef struct options {
    const char *model;
    tfm_decode_params decode;
    bool beam_given;
    const char *prefix_file;
    const char *constraints_file;
    const char *placeholders_file;    /* the source text */
    unsigned placeholder_classes;
    const char *shortlist_file;
    int shortlist_best;
    const char *source_file;          /* the source text, for the shortlist */
    cli_batch_options batch;
} options;

typedef struct decode_run {
    options opt;
    tfm_decode_batch *b;
    tfm_helper *helper;          /* the products' (cli_products_helper), or NULL */
    tfm_npy_stream stream;       /* the input being read, and its name */
    const char *name;
    tfm_line_reader *prefix_reader;
    tfm_line_reader *constraints_reader;
    tfm_line_reader *placeholders_reader;
    tfm_line_reader *source_reader;
    int constraints_fd, placeholders_fd, source_fd;
    tfm_vocab *vocab;            /* with --placeholders: the model's */
    tfm_shortlist *shortlist;    /* with --shortlist ... */
    tfm_vocab *source_vocab;     /* ... the model's source side's vocabulary */
    tfm_bpe *source_bpe;         /* ... and its encoder, for the --source text */
    bool steering_open;          /* the two above are open (at the first record) */
    size_t unmet;                /* records whose constraints could not be met */
    const char *failed_file;     /* where a record could not be read: file and line */
    size_t failed_line;
    size_t out_tokens;           /* ids written (best hypotheses), for -v */
} decode_run;

/* ---- the batch loop's steps (tfm_batch_loop) ------------------------------------------ */

/* Opens a side file read in step with the records (none: -1, no reader). */
static int open_side(const char *path, tfm_line_reader **reader)
{
    *reader = NULL;
    if (!path) return -1;
    int fd = cli_open_input(path);
    *reader = tfm_lines_create(fd);
    if (!*reader) cli_fail(NULL, 0, "out of memory");
    return fd;
}

static void close_side(int fd, tfm_line_reader *reader)
{
    if (!reader) return;
    tfm_lines_free(reader);
    cli_close_input(fd);
}

/* Opens the constraints file and the placeholders' source, once: when the
 * first record has been read, not at the start, so that a constraints file
 * that 'tokenize --glossary' writes earlier in the same pipeline exists (and
 * holds the record's line) by then. */
static void open_steering(decode_run *run)
{
    const options *opt = &run->opt;
    if (run->steering_open ||
        (!opt->constraints_file && !opt->placeholders_file && !opt->shortlist_file))
        return;
    run->steering_open = true;
    run->constraints_fd = open_side(opt->constraints_file, &run->constraints_reader);
    run->placeholders_fd = open_side(opt->placeholders_file, &run->placeholders_reader);
    run->source_fd = open_side(opt->source_file, &run->source_reader);
    tfm_error err;
    tfm_decode_sides sides = {.constraints = run->constraints_reader,
                              .placeholders = run->placeholders_reader, .vocab = run->vocab,
                              .placeholder_classes = opt->placeholder_classes,
                              .shortlist = run->shortlist, .shortlist_best = opt->shortlist_best,
                              .source = run->source_reader,
                              .source_bpe = run->source_bpe};
    if (tfm_decode_batch_sides(run->b, &sides, &err) != TFM_OK) cli_fail(NULL, 0, "%s", err.msg);
}

/* The name of the file a side of the records comes from. */
static const char *side_file(const options *opt, tfm_decode_side side, const char *stream)
{
    switch (side) {
    case TFM_SIDE_PREFIX: return opt->prefix_file;
    case TFM_SIDE_CONSTRAINTS: return opt->constraints_file;
    case TFM_SIDE_PLACEHOLDERS: return opt->placeholders_file;
    case TFM_SIDE_SOURCE: return opt->source_file;
    default: return stream;
    }
}

/* Reads the next record into slot `slot` of the batch, with its prefix line
 * (--prefix); a cropped record is warned about, a failure located. */
static tfm_status read_record(void *ctx, size_t slot, size_t *cost, tfm_error *err)
{
    decode_run *run = ctx;
    tfm_decode_record rec;
    tfm_status s = tfm_decode_batch_read(run->b, slot, &run->stream, run->prefix_reader, &rec, err);
    if (s == TFM_OK) {
        open_steering(run);
        s = tfm_decode_batch_read_sides(run->b, slot, &rec, err);
    }
    if (rec.rows_in_file > rec.rows)
        cli_warn(run->name, 0, "record %zu: %lld states are more than the %d the model takes; "
                 "cropped to the first %d", rec.number, (long long)rec.rows_in_file,
                 (int)rec.rows, (int)rec.rows);
    if (s != TFM_OK && s != TFM_EOF) {
        run->failed_file = side_file(&run->opt, rec.side, run->name);
        run->failed_line = rec.line;
    }
    *cost = (size_t)rec.rows;
    return s;
}

static bool input_ready(void *ctx)
{
    decode_run *run = ctx;
    return tfm_npy_stream_ready(&run->stream);
}

/* How many batches of --batch-size records each thread may have read
 * ahead: enough for QUEUED_PER_THREAD records.  How long a sentence takes
 * depends on its output's length, not known when the records are read:
 * with one batch per thread, a thread whose sentences ended early waited
 * for the others'.  With a queue, it takes the next.  Measured on an Intel
 * Xeon (2 CPUs), a base-shaped imported model at --batch-size 1, 20 lines:
 * a packed file, best of 4 on a busy machine: greedy 2.28 -> 2.05 s,
 * beam 4 3.27 -> 1.98 s (the same output).  Large batches even out. */
static size_t batch_rounds(const cli_batch_options *o)
{
    enum { QUEUED_PER_THREAD = 16 };
    const size_t size = (size_t)o->batch_size;
    return size >= QUEUED_PER_THREAD ? 1 : (QUEUED_PER_THREAD + size - 1) / size;
}

/* Decodes sentences [lo, hi) of the batch (a chunk: at most --batch-size
 * sentences) as one batch of the worker's own and formats their output. */
static tfm_status decode_slice(void *ctx, int w, size_t lo, size_t hi, tfm_error *err)
{
    decode_run *run = ctx;
    tfm_helper_enter(run->helper);
    tfm_status st = tfm_decode_batch_run(run->b, w, lo, hi, err);
    tfm_helper_leave(run->helper);
    return st;
}

static tfm_status write_sentence(void *ctx, size_t slot, tfm_error *err)
{
    decode_run *run = ctx;
    int best_len;
    const tfm_buf *out = tfm_decode_batch_output(run->b, slot, &best_len);
    if (tfm_decode_batch_unmet(run->b, slot)) {
        run->unmet++;
        cli_warn(run->name, 0, "record %zu: its constraints cannot all be met within the length "
                 "limit; the unconstrained translation is written", tfm_decode_batch_index(run->b, slot) + 1);
    }
    cli_write(out->data, out->len);
    run->out_tokens += (size_t)best_len;
    return TFM_OK;
}

/* Decodes one input: batches of the records that are ready (batch_rounds
 * batches per thread at most), in chunks of at most --batch-size records
 * and --batch-tokens states that the threads take one after another,
 * written in order; a bad record is reported after the records before
 * it. */
static void decode_file(void *ctx, const char *name)
{
    decode_run *run = ctx;
    int fd = cli_open_input(name);
    FILE *fp = fd == STDIN_FILENO ? stdin : fdopen(fd, "rb");
    if (!fp) cli_fail(name, 0, "out of memory");
    run->stream = tfm_decode_batch_stream(run->b, fp);
    run->name = name;
    tfm_batch_loop loop = cli_batch_loop(&run->opt.batch, run);
    const size_t rounds = batch_rounds(&run->opt.batch);
    loop.max_items *= rounds;
    loop.max_cost *= rounds;
    loop.chunk_items = (size_t)run->opt.batch.batch_size;
    loop.chunk_cost = (size_t)run->opt.batch.batch_tokens;
    loop.read = read_record;
    loop.ready = input_ready;
    loop.work = decode_slice;
    loop.write = write_sentence;
    tfm_batch_failure f;
    if (tfm_batch_loop_run(&loop, &f) != TFM_OK) {
        if (f.stage == TFM_BATCH_READ) cli_fail(run->failed_file, run->failed_line, "%s", f.err.msg);
        cli_fail(name, 0, "%s", f.err.msg);
    }
    if (fp != stdin) fclose(fp);
}

/* ---- options and the run ------------------------------------------------------------------- */

/* --shortlist: the file, checked against the model, and the encoder of
 * --source's text. */
static void load_shortlist(decode_run *run, const tfm_model *model)
{
    const options *opt = &run->opt;
    tfm_error err;
    if (tfm_shortlist_load(opt->shortlist_file, &run->shortlist, &err) != TFM_OK)
        cli_fail(NULL, 0, "--shortlist: %s", err.msg);
    if (tfm_shortlist_check_model(run->shortlist, model, &err) != TFM_OK)
        cli_fail(opt->shortlist_file, 0, "%s", err.msg);
    /* the model was loaded without its vocabularies (decode takes ids): the
     * shortlist's source text is tokenized with the source side's */
    if (tfm_model_load_vocab(opt->model, TFM_SOURCE, &run->source_vocab, &err) != TFM_OK ||
        tfm_bpe_create(run->source_vocab, &run->source_bpe, &err) != TFM_OK)
        cli_fail(opt->model, 0, "--shortlist: %s", err.msg);
    const int best = tfm_shortlist_per_source(run->shortlist);
    cli_info("shortlist: the %d most frequent target pieces and the %d best of each source "
             "piece", tfm_shortlist_frequent(run->shortlist),
             opt->shortlist_best && opt->shortlist_best < best ? opt->shortlist_best : best);
}

/* --length-rule's words, in the order of tfm_length_rule. */
static const char *const length_rule_names[] = {"power", "gnmt", NULL};

/* --alignment's words, in the order of tfm_alignment after TFM_ALIGNMENT_NONE. */
static const char *const alignment_names[] = {"hard", "soft", NULL};

/* The help text with the library's defaults in it, so the two cannot differ. */
static void format_usage(char *out, size_t size)
{
    const tfm_decode_params d = tfm_decode_default_params();
    snprintf(out, size, usage_format, d.search.beam, length_rule_names[d.search.length_rule],
             (double)d.search.length_penalty, d.search.max_length_offset, d.search.min_length,
             (double)d.search.temperature, (unsigned long long)d.search.seed,
             TFM_DECODE_BATCH_SIZE, TFM_DECODE_BATCH_TOKENS);
}

static void parse_options(int argc, char **argv, options *opt)
{
    tfm_search_params *sp = &opt->decode.search;
    static char usage[sizeof usage_format + 128];
    format_usage(usage, sizeof usage);
    int c;
    while ((c = getopt_long(argc, argv, "m:b:qvhV", long_options, NULL)) != -1) {
        switch (c) {
        case 'm': opt->model = optarg; break;
        case 'b':
            sp->beam = (int)cli_parse_int("--beam", optarg, 1, 1024);
            opt->beam_given = true;
            break;
        case OPT_GREEDY: sp->beam = 1; opt->beam_given = true; break;
        case OPT_LENGTH_RULE: /* in the order of tfm_length_rule */
            sp->length_rule = (tfm_length_rule)cli_parse_choice("--length-rule", optarg,
                                                                length_rule_names);
            break;
        case OPT_LENGTH_PENALTY:
            sp->length_penalty = (float)cli_parse_double("--length-penalty", optarg, 0, 100);
            break;
        case OPT_MAX_LENGTH_OFFSET:
            sp->max_length_offset = (int)cli_parse_int("--max-length-offset", optarg, 0, 1 << 24);
            break;
        case OPT_MAX_LENGTH:
            sp->max_length = (int)cli_parse_int("--max-length", optarg, 1, 1 << 24);
            break;
        case OPT_MIN_LENGTH:
            sp->min_length = (int)cli_parse_int("--min-length", optarg, 0, 1 << 24);
            break;
        case OPT_PLAIN_BEAM: sp->plain_beam = true; break;
        case OPT_NO_REPEAT:
            sp->no_repeat_ngram_size = (int)cli_parse_int("--no-repeat-ngram", optarg, 0, 1 << 20);
            break;
        case OPT_PREFIX: opt->prefix_file = optarg; break;
        case OPT_CONSTRAINTS: opt->constraints_file = optarg; break;
        case OPT_PLACEHOLDERS: opt->placeholders_file = optarg; break;
        case OPT_SHORTLIST: opt->shortlist_file = optarg; break;
        case OPT_SHORTLIST_BEST:
            opt->shortlist_best = (int)cli_parse_int("--shortlist-best", optarg, 1, 1 << 20);
            break;
        case OPT_SOURCE: opt->source_file = optarg; break;
        case OPT_PLACEHOLDER_CLASSES: {
            tfm_error err;
            if (tfm_placeholder_classes_parse(optarg, &opt->placeholder_classes, &err) != TFM_OK)
                cli_usage_error("--placeholder-classes: %s", err.msg);
            break;
        }
        case OPT_SAMPLE: sp->sampling = true; break;
        case OPT_TOPK:
            sp->top_k = (int)cli_parse_int("--sample-topk", optarg, 0, 1 << 24);
            sp->sampling = true;
            break;
        case OPT_TOPP:
            sp->top_p = (float)cli_parse_double("--sample-topp", optarg, 1e-6, 1);
            sp->sampling = true;
            break;
        case OPT_TEMPERATURE:
            sp->temperature = (float)cli_parse_double("--temperature", optarg, 0, 1e6);
            sp->sampling = true;
            break;
        case OPT_SEED: sp->seed = (uint64_t)cli_parse_int("--seed", optarg, 0, INT64_MAX); break;
        case OPT_NBEST: sp->nbest = (int)cli_parse_int("--nbest", optarg, 1, 1024); break;
        case OPT_SCORES: opt->decode.scores = true; break;
        case OPT_ALIGNMENT: /* in the order of tfm_alignment, after none */
            opt->decode.alignment = !optarg ? TFM_ALIGNMENT_HARD
                : (tfm_alignment)(1 + cli_parse_choice("--alignment", optarg, alignment_names));
            break;
        default:
            if (!cli_batch_option(c, optarg, &opt->batch)) cli_common_option(c, usage);
        }
    }
    if (!opt->model) cli_usage_error("a model is required: -m MODEL");
    if ((opt->constraints_file || opt->placeholders_file) && sp->sampling)
        cli_usage_error("--constraints and --placeholders steer beam or greedy search, not "
                        "sampling");
    if (opt->shortlist_file && !opt->source_file)
        cli_usage_error("--shortlist needs the source text: --source=FILE (line k for record k)");
    if (opt->source_file && !opt->shortlist_file)
        cli_usage_error("--source is the source text of --shortlist: give --shortlist too");
    if (opt->shortlist_best && !opt->shortlist_file)
        cli_usage_error("--shortlist-best needs --shortlist");
    tfm_error err;
    if (tfm_decode_params_validate(&opt->decode, opt->beam_given, &err) != TFM_OK)
        cli_usage_error("%s", err.msg);
}

int main(int argc, char **argv)
{
    cli_init("decode", argv);
    options opt = {.decode = tfm_decode_default_params(),
                   .batch = cli_batch_defaults(TFM_DECODE_BATCH_SIZE, TFM_DECODE_BATCH_TOKENS),
                   .placeholder_classes = TFM_PH_ALL};
    parse_options(argc, argv, &opt);
    const tfm_search_params *sp = &opt.decode.search;
    const int threads = opt.batch.threads;
    /* The BLAS's own threads are switched off: decoding multiplies small
     * matrices (sentences x beam rows), which gain nothing from a second BLAS
     * thread, so this program parallelises over sentences instead, one level
     * of threads at a time (DESIGN.md, Threads). */
    tfm_blas_threads(1);
    double t0 = tfm_clock_seconds();

    static decode_run run;
    tfm_error err;
    tfm_model *model = cli_load_model_for(opt.model, &opt.batch);
    if (tfm_model_pack_for_decoding(model, &err) != TFM_OK) cli_fail(NULL, 0, "%s", err.msg);
    tfm_model_release_quantized(model); /* the packs hold its matrices now */
    opt.decode.max_input = cli_max_input(&opt.batch, model);
    opt.decode.capacity = (size_t)opt.batch.batch_size * (size_t)threads * batch_rounds(&opt.batch);
    opt.decode.workers = threads;
    run.opt = opt;
    run.helper = cli_products_helper(&opt.batch);
    if (sp->sampling)
        cli_info("sampling %d per sentence (top-k %d, top-p %g, temperature %g, seed %llu)",
                 sp->nbest, sp->top_k, (double)sp->top_p, (double)sp->temperature,
                 (unsigned long long)sp->seed);
    else
        cli_info("%s search (beam %d, length rule %s, alpha %g, n-best %d); %d thread%s",
                 sp->beam == 1 ? "greedy" : "beam", sp->beam,
                 tfm_length_rule_name(sp->length_rule), (double)sp->length_penalty, sp->nbest,
                 threads, threads == 1 ? "" : "s");
    cli_info("matrix kernel: %s", tfm_model_kernel_name(model));
    cli_info("%s", tfm_model_panels_source(model));
    cli_info("why this kernel: %s", tfm_model_kernel_reason(model));
    if (tfm_decode_batch_create(model, &opt.decode, &run.b, &err) != TFM_OK)
        cli_fail(NULL, 0, "%s", err.msg);
    int prefix_fd = open_side(opt.prefix_file, &run.prefix_reader);
    if (opt.placeholders_file) {
        if (tfm_model_load_vocab(opt.model, TFM_TARGET, &run.vocab, &err) != TFM_OK)
            cli_fail(opt.model, 0, "%s", err.msg);
        /* a model from elsewhere spells them in its own pieces instead */
        if (tfm_vocab_placeholder_id(run.vocab, 1) < 0 && !tfm_vocab_spm(run.vocab))
            cli_fail(opt.model, 0, "--placeholders: the model's vocabulary has no placeholder "
                     "tokens (<ph1> ...): learn it with 'tokenize learn --placeholders'");
    }

    if (opt.shortlist_file) load_shortlist(&run, model);

    cli_each_input(argc, argv, decode_file, &run);
    cli_flush();
    open_steering(&run); /* no record read: the files must still be there, and empty */

    size_t records = tfm_decode_batch_records(run.b), line;
    if (tfm_decode_batch_finish(run.b, run.prefix_reader, &line, &err) != TFM_OK)
        cli_fail(opt.prefix_file, line, "%s", err.msg);
    tfm_decode_side side;
    if (tfm_decode_batch_finish_sides(run.b, &side, &line, &err) != TFM_OK)
        cli_fail(side_file(&opt, side, NULL), line, "%s", err.msg);
    close_side(prefix_fd, run.prefix_reader);
    close_side(run.constraints_fd, run.constraints_reader);
    close_side(run.placeholders_fd, run.placeholders_reader);
    close_side(run.source_fd, run.source_reader);
    cli_close_output();
    if (run.shortlist)
        cli_info("shortlist: the batches were decoded over %.0f of the %d target pieces on "
                 "average", tfm_decode_batch_shortlist_mean(run.b), model->config.tgt_vocab_size);
    if (run.unmet > 0)
        cli_info("%zu record%s kept unconstrained translations: their constraints could not be "
                 "met", run.unmet, run.unmet == 1 ? "" : "s");
    double t = tfm_clock_seconds() - t0;
    cli_info("decoded %zu sentences into %zu tokens in %.2f s (%.1f sentences/s, %.0f tokens/s)",
             records, run.out_tokens, t, t > 0 ? (double)records / t : 0.0,
             t > 0 ? (double)run.out_tokens / t : 0.0);
    tfm_decode_batch_free(run.b);
    cli_products_helper_free(run.helper);
    tfm_vocab_free(run.vocab);
    tfm_shortlist_free(run.shortlist);
    tfm_bpe_free(run.source_bpe);
    tfm_vocab_free(run.source_vocab);
    tfm_model_free(model);
    return CLI_EXIT_OK;
}
