/* decode - the Transformer's decoder as a filter: beam search, greedy search
 * and sampling over encoder states.
 *
 *   encode -m MODEL < src.ids | decode -m MODEL [--beam 4] > out.ids
 *
 * Reads a stream of .npy records (one per sentence, as 'encode' writes them)
 * and writes one line of target token ids per record, in order (or N lines
 * in Marian's n-best form with --nbest N).
 *
 * The program parses options, reads records and prints: the search is in
 * lib/search (tfm_search_run) over lib/nn's incremental decoder. */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

#define MAX_THREADS 64

static const char usage_text[] =
    "Usage: decode -m MODEL [OPTION]... [FILE]...\n"
    "Translates encoder states (the .npy stream 'encode' writes, one record per\n"
    "sentence) into lines of target token ids, one line per record, in order.\n"
    "Reads the FILEs, or standard input when none is given; '-' is standard input.\n"
    "\n"
    "Search:\n"
    "  -m, --model=MODEL          the model file (safetensors) the states came from\n"
    "  -b, --beam=K               beam size (default 4, as the paper); 1 is greedy\n"
    "      --greedy               greedy search: the same as --beam 1\n"
    "      --length-penalty=A     alpha of GNMT's ((5 + m) / 6)^alpha (default 0.6)\n"
    "      --max-length-offset=N  at most source length + N ids (default 50)\n"
    "      --max-length=N         at most N ids, whatever the source (default: no cap\n"
    "                             but the model's max_positions - 1)\n"
    "      --min-length=N         no </s> before N ids (default 0)\n"
    "      --no-repeat-ngram=N    never repeat an N-gram within a hypothesis (0: off)\n"
    "      --prefix=FILE          force a target prefix: one line of ids per record of\n"
    "                             the input; an empty line forces nothing\n"
    "\n"
    "Sampling (any of these samples instead of searching):\n"
    "      --sample               sample from the model's distribution\n"
    "      --sample-topk=K        sample from the K most probable tokens only\n"
    "      --sample-topp=P        sample from the smallest set holding probability P\n"
    "      --temperature=T        divide the log-probabilities by T (default 1)\n"
    "      --seed=N               seed of the samples (default 1); each sentence draws\n"
    "                             from its own generator, seeded by N and its number\n"
    "\n"
    "Output:\n"
    "      --nbest=N              N hypotheses per record (at most the beam; samples\n"
    "                             when sampling), in Marian's n-best form:\n"
    "                             'INDEX ||| IDS ||| F0= LOG-PROB ||| SCORE'\n"
    "      --scores               append a TAB and the score of each line's hypothesis:\n"
    "                             its log-probability divided by the length penalty\n"
    "\n"
    "Resources:\n"
    "      --batch-size=N         sentences each thread decodes together, at most\n"
    "                             (default 64)\n"
    "      --batch-tokens=N       source tokens each thread decodes together, at most\n"
    "                             (default 4096)\n"
    "      --max-input-length=N   crop longer sources to N states, with a warning\n"
    "                             (default: the model's max_positions)\n"
    "      --threads=N            threads to use (default: the number of CPUs); each\n"
    "                             takes its own batch of the sentences read\n"
    "  -q, --quiet                print errors only\n"
    "  -v, --verbose              print more about what is done\n"
    "  -h, --help                 display this help and exit\n"
    "  -V, --version              output version information and exit\n"
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
    OPT_GREEDY = 256, OPT_LENGTH_PENALTY, OPT_MAX_LENGTH_OFFSET, OPT_MAX_LENGTH, OPT_MIN_LENGTH,
    OPT_NO_REPEAT, OPT_PREFIX, OPT_SAMPLE, OPT_TOPK, OPT_TOPP, OPT_TEMPERATURE, OPT_SEED,
    OPT_NBEST, OPT_SCORES, OPT_BATCH_SIZE, OPT_BATCH_TOKENS, OPT_MAX_INPUT, OPT_THREADS,
};

static const struct option long_options[] = {
    {"model", required_argument, NULL, 'm'},
    {"beam", required_argument, NULL, 'b'},
    {"greedy", no_argument, NULL, OPT_GREEDY},
    {"length-penalty", required_argument, NULL, OPT_LENGTH_PENALTY},
    {"max-length-offset", required_argument, NULL, OPT_MAX_LENGTH_OFFSET},
    {"max-length", required_argument, NULL, OPT_MAX_LENGTH},
    {"min-length", required_argument, NULL, OPT_MIN_LENGTH},
    {"no-repeat-ngram", required_argument, NULL, OPT_NO_REPEAT},
    {"prefix", required_argument, NULL, OPT_PREFIX},
    {"sample", no_argument, NULL, OPT_SAMPLE},
    {"sample-topk", required_argument, NULL, OPT_TOPK},
    {"sample-topp", required_argument, NULL, OPT_TOPP},
    {"temperature", required_argument, NULL, OPT_TEMPERATURE},
    {"seed", required_argument, NULL, OPT_SEED},
    {"nbest", required_argument, NULL, OPT_NBEST},
    {"scores", no_argument, NULL, OPT_SCORES},
    {"batch-size", required_argument, NULL, OPT_BATCH_SIZE},
    {"batch-tokens", required_argument, NULL, OPT_BATCH_TOKENS},
    {"max-input-length", required_argument, NULL, OPT_MAX_INPUT},
    {"threads", required_argument, NULL, OPT_THREADS},
    CLI_COMMON_LONG_OPTIONS,
    {NULL, 0, NULL, 0},
};

typedef struct options {
    const char *model;
    tfm_search_params search;
    bool beam_given;
    const char *prefix_file;
    bool scores;
    int batch_size;
    int batch_tokens;
    int max_input_length; /* 0: the model's max_positions */
    int threads;
} options;

/* One worker: a decoder and a searcher of its own. */
typedef struct worker {
    tfm_decoder *decoder;
    tfm_search *search;
} worker;

/* The records read at once (up to a batch per thread) and, after decoding,
 * their output text.  Arrays hold `capacity` = batch_size x threads. */
typedef struct batch {
    tfm_tensor *records;        /* [capacity], reused from batch to batch */
    const float **states;       /* [capacity]: records[i].data */
    int *src_len;               /* [capacity]: rows of states used (after cropping) */
    tfm_ids *prefix;            /* [capacity] */
    const int32_t **prefix_ids; /* [capacity] */
    int *prefix_len;            /* [capacity] */
    uint64_t *seeds;            /* [capacity] */
    size_t *index;              /* [capacity]: 0-based record number over all inputs */
    tfm_buf *out;               /* [capacity]: the output lines of each record */
    int *best_len;              /* [capacity]: ids of the best hypothesis, for -v */
} batch;

typedef struct decode_run {
    options opt;
    tfm_model *model;
    int D;
    int max_input;
    worker workers[MAX_THREADS];
    batch b;
    tfm_npy_stream stream;       /* the input being read, and its name */
    const char *name;
    tfm_line_reader *prefix_reader;
    int prefix_fd;
    const char *failed_file;     /* where a record could not be read: file and line */
    size_t failed_line;
    size_t records;              /* records read over all inputs */
    size_t out_tokens;           /* ids written (best hypotheses), for -v */
} decode_run;

/* A record that cannot be taken: its file and line for the message. */
static tfm_status fail_record(decode_run *run, const char *file, size_t line, tfm_status status,
                              tfm_error *err)
{
    run->failed_file = file;
    run->failed_line = line;
    err->status = status;
    return status;
}

/* ---- reading records -------------------------------------------------------------------- */

/* Reads the prefix line of a record into b->prefix[slot]. */
static tfm_status read_prefix(decode_run *run, size_t slot, tfm_error *err)
{
    batch *b = &run->b;
    const char *line;
    size_t len;
    const char *name = run->opt.prefix_file;
    tfm_status s = tfm_lines_next(run->prefix_reader, &line, &len, err);
    size_t number = tfm_lines_number(run->prefix_reader);
    if (s == TFM_EOF) {
        tfm_error_set(err, TFM_ERR_FORMAT, "has %zu lines, but the input has more records: every "
                      "record needs a prefix line (an empty line forces nothing)", number);
        return fail_record(run, name, 0, TFM_ERR_FORMAT, err);
    }
    if (s != TFM_OK) return fail_record(run, name, number + 1, s, err);
    const tfm_config *c = &run->model->config;
    s = tfm_ids_parse(line, len, c->tgt_vocab_size, &b->prefix[slot], err);
    if (s != TFM_OK) return fail_record(run, name, number, s, err);
    for (size_t j = 0; j < b->prefix[slot].len; j++)
        if (b->prefix[slot].data[j] == c->eos_id) {
            tfm_error_set(err, TFM_ERR_FORMAT, "id %d at position %zu is </s>: a prefix cannot end "
                          "the sentence", (int)c->eos_id, j + 1);
            return fail_record(run, name, number, TFM_ERR_FORMAT, err);
        }
    if (b->prefix[slot].len > (size_t)c->max_positions - 1) {
        tfm_error_set(err, TFM_ERR_RANGE, "a prefix of %zu ids is longer than the model takes (%d)",
                      b->prefix[slot].len, c->max_positions - 1);
        return fail_record(run, name, number, TFM_ERR_RANGE, err);
    }
    return TFM_OK;
}

/* Reads the next record into slot `slot` of the batch, checks it, and reads
 * its prefix line (--prefix). */
static tfm_status read_record(void *ctx, size_t slot, size_t *cost, tfm_error *err)
{
    decode_run *run = ctx;
    batch *b = &run->b;
    tfm_npy_stream *st = &run->stream;
    const char *name = run->name;
    tfm_tensor *t = &b->records[slot];
    tfm_status s = tfm_npy_stream_read(st, t, err);
    if (s == TFM_EOF) return s;
    if (s != TFM_OK) return fail_record(run, name, 0, s, err);
    size_t record = st->record;
    char shape[96];
    tfm_tensor_shape_str(t, shape, sizeof shape);
    if (t->dtype != TFM_F32) {
        tfm_error_set(err, TFM_ERR_FORMAT, "record %zu: states must be float32 ('<f4'), not int32",
                      record);
        return fail_record(run, name, 0, TFM_ERR_FORMAT, err);
    }
    if (t->ndim != 2) {
        tfm_error_set(err, TFM_ERR_FORMAT, "record %zu: states must have shape (n, d_model), "
                      "not %s", record, shape);
        return fail_record(run, name, 0, TFM_ERR_FORMAT, err);
    }
    if (t->shape[1] != run->D) {
        tfm_error_set(err, TFM_ERR_FORMAT, "record %zu: states have width %lld, but the model's "
                      "d_model is %d", record, (long long)t->shape[1], run->D);
        return fail_record(run, name, 0, TFM_ERR_FORMAT, err);
    }
    int64_t rows = t->shape[0]; /* the stream keeps at most max_input */
    if (st->rows_in_file > rows)
        cli_warn(name, 0, "record %zu: %lld states are more than the %d the model takes; "
                 "cropped to the first %d", record, (long long)st->rows_in_file, run->max_input,
                 run->max_input);
    b->states[slot] = t->data;
    b->src_len[slot] = (int)rows;
    b->prefix_len[slot] = 0;
    b->prefix_ids[slot] = NULL;
    if (run->prefix_reader) {
        s = read_prefix(run, slot, err);
        if (s != TFM_OK) return s;
        b->prefix_len[slot] = (int)b->prefix[slot].len;
        b->prefix_ids[slot] = b->prefix[slot].len ? b->prefix[slot].data : NULL;
    }
    b->index[slot] = run->records;
    /* Sentence k's samples come from (seed, k): independent of the batch. */
    uint64_t key[2] = {run->opt.search.seed, (uint64_t)run->records};
    b->seeds[slot] = tfm_hash_bytes(key, sizeof key);
    run->records++;
    *cost = (size_t)rows;
    return TFM_OK;
}

static bool input_ready(void *ctx)
{
    decode_run *run = ctx;
    return tfm_npy_stream_ready(&run->stream);
}

/* ---- decoding and output ---------------------------------------------------------------- */

/* Formats the hypotheses of sentence i of the batch into b->out[i]. */
static tfm_status format_sentence(decode_run *run, const tfm_search *search, size_t i, int k)
{
    batch *b = &run->b;
    tfm_buf *out = &b->out[i];
    tfm_buf_clear(out);
    tfm_nbest nb = tfm_search_result(search, k);
    b->best_len[i] = nb.n > 0 ? nb.hyps[0].len : 0;
    bool ok = true;
    if (run->opt.search.nbest > 1) {
        for (int h = 0; h < nb.n && ok; h++) {
            const tfm_hypothesis *hyp = &nb.hyps[h];
            ok = tfm_nbest_format(b->index[i], hyp->ids, (size_t)hyp->len, (double)hyp->log_prob,
                                  (double)hyp->score, out) == TFM_OK;
        }
    } else if (nb.n > 0) {
        const tfm_hypothesis *hyp = &nb.hyps[0];
        ok = tfm_ids_format(hyp->ids, (size_t)hyp->len, out) == TFM_OK &&
             (!run->opt.scores || tfm_buf_printf(out, "\t%.6f", (double)hyp->score) == TFM_OK) &&
             tfm_buf_putc(out, '\n') == TFM_OK;
    } else {
        ok = tfm_buf_putc(out, '\n') == TFM_OK;
    }
    return ok ? TFM_OK : TFM_ERR_NOMEM;
}

/* Decodes sentences [lo, hi) of the batch as one batch of the worker's own
 * (at most --batch-size sentences: as many as were read, split evenly over
 * the threads) and formats their output. */
static tfm_status decode_slice(void *ctx, int w, size_t lo, size_t hi, tfm_error *err)
{
    decode_run *run = ctx;
    batch *b = &run->b;
    worker *wk = &run->workers[w];
    tfm_search_input in = {
        .n_sentences = (int)(hi - lo),
        .states = b->states + lo,
        .src_lens = b->src_len + lo,
        .prefixes = run->prefix_reader ? b->prefix_ids + lo : NULL,
        .prefix_lens = run->prefix_reader ? b->prefix_len + lo : NULL,
        .seeds = b->seeds + lo,
    };
    tfm_status s = tfm_search_run(wk->search, wk->decoder, &run->opt.search, &in, err);
    for (size_t i = lo; i < hi && s == TFM_OK; i++)
        if (format_sentence(run, wk->search, i, (int)(i - lo)) != TFM_OK)
            s = tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    if (s != TFM_OK)
        tfm_error_prefix(err, "records %zu to %zu", b->index[lo] + 1, b->index[hi - 1] + 1);
    return s;
}

static tfm_status write_sentence(void *ctx, size_t slot, tfm_error *err)
{
    decode_run *run = ctx;
    cli_write(run->b.out[slot].data, run->b.out[slot].len);
    run->out_tokens += (size_t)run->b.best_len[slot];
    return TFM_OK;
}

static void flush_output(void *ctx)
{
    cli_flush();
}

/* Decodes one input: batches of the records that are ready (at most a batch
 * per thread), split evenly over the threads, written in order; a bad
 * record is reported after the records before it. */
static void decode_file(decode_run *run, const char *name)
{
    int fd = cli_open_input(name);
    FILE *fp = fd == STDIN_FILENO ? stdin : fdopen(fd, "rb");
    if (!fp) cli_fail(name, 0, "out of memory");
    /* Memory stays bounded by what a record may hold: max_input rows of
     * d_model floats (a wrong width is named by read_record when it fits). */
    run->stream = (tfm_npy_stream){.fp = fp, .max_rows = run->max_input,
                                   .max_bytes = (size_t)run->max_input * (size_t)run->D *
                                                sizeof(float)};
    run->name = name;
    tfm_batch_loop loop = {
        .ctx = run,
        .max_items = (size_t)run->opt.batch_size * (size_t)run->opt.threads,
        .max_cost = (size_t)run->opt.batch_tokens * (size_t)run->opt.threads,
        .threads = run->opt.threads,
        .read = read_record, .ready = input_ready, .work = decode_slice,
        .write = write_sentence, .flush = flush_output,
    };
    tfm_batch_failure f;
    if (tfm_batch_loop_run(&loop, &f) != TFM_OK) {
        if (f.stage == TFM_BATCH_READ) cli_fail(run->failed_file, run->failed_line, "%s", f.err.msg);
        cli_fail(name, 0, "%s", f.err.msg);
    }
    if (fp != stdin) fclose(fp);
}

/* ---- options and the run ------------------------------------------------------------------- */

static void parse_options(int argc, char **argv, options *opt)
{
    tfm_search_params *sp = &opt->search;
    int c;
    while ((c = getopt_long(argc, argv, "m:b:qvhV", long_options, NULL)) != -1) {
        switch (c) {
        case 'm': opt->model = optarg; break;
        case 'b':
            sp->beam = (int)cli_parse_int("--beam", optarg, 1, 1024);
            opt->beam_given = true;
            break;
        case OPT_GREEDY: sp->beam = 1; opt->beam_given = true; break;
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
        case OPT_NO_REPEAT:
            sp->no_repeat_ngram_size = (int)cli_parse_int("--no-repeat-ngram", optarg, 0, 1 << 20);
            break;
        case OPT_PREFIX: opt->prefix_file = optarg; break;
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
        case OPT_SCORES: opt->scores = true; break;
        case OPT_BATCH_SIZE:
            opt->batch_size = (int)cli_parse_int("--batch-size", optarg, 1, 1 << 20);
            break;
        case OPT_BATCH_TOKENS:
            opt->batch_tokens = (int)cli_parse_int("--batch-tokens", optarg, 1, 1 << 26);
            break;
        case OPT_MAX_INPUT:
            opt->max_input_length = (int)cli_parse_int("--max-input-length", optarg, 1, 1 << 24);
            break;
        case OPT_THREADS: opt->threads = (int)cli_parse_int("--threads", optarg, 1, MAX_THREADS); break;
        default: cli_common_option(c, usage_text);
        }
    }
    if (!opt->model) cli_usage_error("a model is required: -m MODEL");
    if (sp->sampling && opt->beam_given && sp->beam > 1)
        cli_usage_error("--beam %d and sampling exclude each other: sampling draws --nbest "
                        "samples per sentence", sp->beam);
    if (!sp->sampling && sp->nbest > sp->beam)
        cli_usage_error("--nbest %d is more than the beam (%d): beam search keeps only beam "
                        "hypotheses; give --beam %d", sp->nbest, sp->beam, sp->nbest);
    tfm_error err;
    if (tfm_search_params_validate(sp, &err) != TFM_OK) cli_usage_error("%s", err.msg);
}

static double now_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void batch_alloc(batch *b, size_t n)
{
    b->records = calloc(n, sizeof *b->records);
    b->states = calloc(n, sizeof *b->states);
    b->src_len = calloc(n, sizeof *b->src_len);
    b->prefix = calloc(n, sizeof *b->prefix);
    b->prefix_ids = calloc(n, sizeof *b->prefix_ids);
    b->prefix_len = calloc(n, sizeof *b->prefix_len);
    b->seeds = calloc(n, sizeof *b->seeds);
    b->index = calloc(n, sizeof *b->index);
    b->out = calloc(n, sizeof *b->out);
    b->best_len = calloc(n, sizeof *b->best_len);
    if (!b->records || !b->states || !b->src_len || !b->prefix || !b->prefix_ids ||
        !b->prefix_len || !b->seeds || !b->index || !b->out || !b->best_len)
        cli_fail(NULL, 0, "out of memory");
    for (size_t i = 0; i < n; i++) {
        tfm_tensor_init(&b->records[i]);
        tfm_ids_init(&b->prefix[i]);
        tfm_buf_init(&b->out[i]);
    }
}

static void batch_release(batch *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        tfm_tensor_free(&b->records[i]);
        tfm_ids_free(&b->prefix[i]);
        tfm_buf_free(&b->out[i]);
    }
    free(b->records);
    free(b->states);
    free(b->src_len);
    free(b->prefix);
    free(b->prefix_ids);
    free(b->prefix_len);
    free(b->seeds);
    free(b->index);
    free(b->out);
    free(b->best_len);
}

int main(int argc, char **argv)
{
    cli_init("decode", argv);
    options opt = {.search = tfm_search_default_params(), .batch_size = 64,
                   .batch_tokens = 4096, .threads = tfm_cpu_count()};
    opt.search.seed = 1;
    if (opt.threads > MAX_THREADS) opt.threads = MAX_THREADS;
    parse_options(argc, argv, &opt);
    /* The BLAS's own threads are switched off: decoding multiplies small
     * matrices (sentences x beam rows), which gain nothing from a second BLAS
     * thread, so this program parallelises over sentences instead, one level
     * of threads at a time (DESIGN.md, Threads). */
    tfm_blas_threads(1);
    double t0 = now_seconds();

    static decode_run run;
    run.opt = opt;
    tfm_error err;
    run.model = cli_load_model(opt.model);
    if (tfm_model_pack_for_decoding(run.model, &err) != TFM_OK) cli_fail(NULL, 0, "%s", err.msg);
    const tfm_config *c = &run.model->config;
    run.D = c->d_model;
    run.max_input = c->max_positions;
    if (opt.max_input_length > c->max_positions)
        cli_usage_error("--max-input-length %d: the model takes at most %d positions",
                        opt.max_input_length, c->max_positions);
    if (opt.max_input_length > 0) run.max_input = opt.max_input_length;
    if (opt.search.sampling)
        cli_info("sampling %d per sentence (top-k %d, top-p %g, temperature %g, seed %llu)",
                 opt.search.nbest, opt.search.top_k, (double)opt.search.top_p,
                 (double)opt.search.temperature, (unsigned long long)opt.search.seed);
    else
        cli_info("%s search (beam %d, length penalty %g, n-best %d); %d thread%s",
                 opt.search.beam == 1 ? "greedy" : "beam", opt.search.beam,
                 (double)opt.search.length_penalty, opt.search.nbest, opt.threads,
                 opt.threads == 1 ? "" : "s");
    cli_info("matrix kernel: %s", tfm_model_kernel_name(run.model));
    for (int w = 0; w < opt.threads; w++) {
        if (tfm_decoder_create(run.model, &run.workers[w].decoder, &err) != TFM_OK ||
            tfm_search_create(run.model, &run.workers[w].search, &err) != TFM_OK)
            cli_fail(NULL, 0, "%s", err.msg);
    }
    if (opt.prefix_file) {
        run.prefix_fd = cli_open_input(opt.prefix_file);
        run.prefix_reader = tfm_lines_create(run.prefix_fd);
        if (!run.prefix_reader) cli_fail(NULL, 0, "out of memory");
    }
    batch_alloc(&run.b, (size_t)opt.batch_size * (size_t)opt.threads);

    char *stdin_only[] = {"-"};
    char **files = argc > optind ? argv + optind : stdin_only;
    int n_files = argc > optind ? argc - optind : 1;
    for (int f = 0; f < n_files; f++) decode_file(&run, files[f]);
    cli_flush();

    if (run.prefix_reader) {
        const char *line;
        size_t len;
        if (tfm_lines_next(run.prefix_reader, &line, &len, &err) == TFM_OK)
            cli_fail(opt.prefix_file, tfm_lines_number(run.prefix_reader),
                     "the prefix file has more lines than the input has records (%zu)",
                     run.records);
        tfm_lines_free(run.prefix_reader);
        cli_close_input(run.prefix_fd);
    }
    double t = now_seconds() - t0;
    cli_info("decoded %zu sentences into %zu tokens in %.2f s (%.1f sentences/s, %.0f tokens/s)",
             run.records, run.out_tokens, t, t > 0 ? (double)run.records / t : 0.0,
             t > 0 ? (double)run.out_tokens / t : 0.0);
    batch_release(&run.b, (size_t)opt.batch_size * (size_t)opt.threads);
    for (int w = 0; w < opt.threads; w++) {
        tfm_decoder_free(run.workers[w].decoder);
        tfm_search_free(run.workers[w].search);
    }
    tfm_model_free(run.model);
    return CLI_EXIT_OK;
}
