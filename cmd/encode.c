/* encode - the Transformer's encoder as a filter.
 *
 *   encode -m MODEL [FILE...] > states.npy
 *
 * Reads lines of source token ids (as 'tokenize' writes them) and writes, for
 * each line, the encoder's final states of that sentence as one .npy record
 * of shape (n, d_model), float32: a stream of records back to back, in input
 * order, which 'decode' reads (and numpy.load reads one at a time).
 *
 * The program parses options, reads lines, and prints: the lines are read
 * as the model reads sources by lib/text (tfm_pair_reader, its parameters
 * from tfm_pair_params_from_model), encoded by lib/pass (tfm_encoder_forward)
 * and written by lib/io (tfm_npy_write). */
#include <stdlib.h>
#include <unistd.h>

#include "filter.h"

/* A batch of fewer source tokens than this runs on one thread: splitting it
 * costs more in thread start-up than it saves. */
#define MIN_TOKENS_PER_THREAD 64

/* The help; the %d are the library's defaults (format_usage). */
static const char usage_format[] =
    "Usage: encode -m MODEL [OPTION]... [FILE]...\n"
    "Runs the Transformer's encoder over lines of source token ids (as 'tokenize'\n"
    "writes them) and writes the final encoder states of each line as one .npy\n"
    "record of shape (n, d_model), float32, in input order, to standard output.\n"
    "Reads the FILEs, or standard input when none is given; '-' is standard input.\n"
    "\n"
    "  -m, --model=MODEL          the model file (safetensors) to encode with\n"
    "      --no-eos               do not append </s> to each source sentence (by\n"
    "                             default </s> is appended, as fairseq does, unless\n"
    "                             the model was trained with 'train --no-eos')\n"
    "      --max-input-length=N   crop longer sources (</s> included) to N tokens,\n"
    "                             with a warning (default: the model's max_positions)\n"
    "      --batch-size=N         sentences each thread encodes together, at most\n"
    "                             (default %d)\n"
    "      --batch-tokens=N       source tokens each thread encodes together, at most\n"
    "                             (default %d)\n"
    "      --threads=N            threads to use (default: the number of CPUs); each\n"
    "                             takes its own batch of the sentences read\n"
    CLI_COMPUTE_TYPE_HELP
    CLI_COMMON_HELP
    "\n"
    "An empty line is an empty sentence: its record has shape (0, d_model) and no\n"
    "</s> is appended.  An id outside the model's source vocabulary is an error\n"
    "naming the line.  The output is binary: encode refuses to write it to a\n"
    "terminal.  A batch takes only the lines that are ready, so each line of an\n"
    "interactive pipe is answered at once.\n"
    "Exit status: 0 on success, 1 on failure, 2 on a usage error.\n"
    "Example:\n"
    "  tokenize -m m.safetensors < in.txt | encode -m m.safetensors \\\n"
    "    | decode -m m.safetensors | tokenize -d -m m.safetensors\n";

enum { OPT_NO_EOS = 256 };

static const struct option long_options[] = {
    {"model", required_argument, NULL, 'm'},
    {"no-eos", no_argument, NULL, OPT_NO_EOS},
    CLI_FILTER_LONG_OPTIONS,
    {NULL, 0, NULL, 0},
};

typedef struct options {
    const char *model;
    bool eos;
    cli_batch_options batch;
} options;

/* The sentences read at once (up to a batch per thread) and, after encoding,
 * their states.  Arrays hold `capacity` = batch_size x threads. */
typedef struct batch {
    tfm_pair *pairs;      /* [capacity]: each sentence (a source alone), </s> included */
    const int32_t **ptr;  /* [capacity]: pairs[i].src.ids.data, as the encoder takes them */
    int *len;             /* [capacity] */
    size_t *row;          /* [capacity + 1]: first state row of each sentence */
    float *states;        /* [row[n], D] */
    size_t states_cap;    /* floats */
} batch;

/* Everything the run needs; the workers read it. */
typedef struct encode_run {
    options opt;
    tfm_model *model;
    tfm_helper *helper;      /* the products' (cli_products_helper), or NULL */
    int D;
    tfm_pair_params source;  /* how a line becomes a source */
    tfm_encoder *encoders[CLI_MAX_THREADS];
    batch b;
    tfm_pair_reader *reader; /* the file being read, and its name */
    const char *name;
    size_t sentences, tokens;  /* totals, for -v */
} encode_run;

/* ---- the batch loop's steps (tfm_batch_loop) ------------------------------------------ */

/* Reads one line into sentence `slot` of the batch: its ids, cropped to the
 * longest source the model (or --max-input-length) takes, then </s>. */
static tfm_status read_sentence(void *ctx, size_t slot, size_t *cost, tfm_error *err)
{
    encode_run *run = ctx;
    batch *b = &run->b;
    tfm_pair *pair = &b->pairs[slot];
    tfm_status s = tfm_pair_reader_next(run->reader, pair, err);
    if (s != TFM_OK) return s;
    const tfm_ids *ids = &pair->src.ids;
    if (pair->src.cropped) {
        const bool eos = run->source.source_eos;
        cli_warn(run->name, pair->line, "%zu ids are more than the %zu tokens the model takes%s; "
                 "cropped to the first %zu", pair->src.length, run->source.max_source,
                 eos ? " (</s> included)" : "", ids->len - (eos ? 1 : 0));
    }
    b->ptr[slot] = ids->data;
    b->len[slot] = (int)ids->len;
    /* The states of the batch so far, grown here (one thread reads). */
    if (slot == 0) b->row[0] = 0;
    b->row[slot + 1] = b->row[slot] + ids->len;
    size_t need = b->row[slot + 1] * (size_t)run->D;
    if (need > b->states_cap) {
        size_t cap = need > 2 * b->states_cap ? need : 2 * b->states_cap;
        float *grown = realloc(b->states, cap * sizeof *grown);
        if (!grown) return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory for %zu states", need);
        b->states = grown;
        b->states_cap = cap;
    }
    *cost = ids->len;
    return TFM_OK;
}

static bool input_ready(void *ctx)
{
    encode_run *run = ctx;
    return tfm_pair_reader_ready(run->reader);
}

static tfm_status encode_slice(void *ctx, int worker, size_t lo, size_t hi, tfm_error *err)
{
    encode_run *run = ctx;
    batch *b = &run->b;
    tfm_helper_enter(run->helper);
    tfm_status st = tfm_encoder_forward(run->encoders[worker], (int)(hi - lo), b->ptr + lo,
                                        b->len + lo, b->states + b->row[lo] * (size_t)run->D, err);
    tfm_helper_leave(run->helper);
    return st;
}

static tfm_status write_states(void *ctx, size_t slot, tfm_error *err)
{
    encode_run *run = ctx;
    batch *b = &run->b;
    /* The record points into the batch's states; npy_write only reads it. */
    tfm_tensor t = {.dtype = TFM_F32, .ndim = 2, .shape = {b->len[slot], run->D},
                    .data = b->states + b->row[slot] * (size_t)run->D};
    run->sentences++;
    run->tokens += (size_t)b->len[slot];
    return tfm_npy_write(stdout, &t, err);
}

/* Encodes one input: batches of the lines that are ready (at most a batch per
 * thread), split over the threads in slices of about equal token counts,
 * written in order; a bad line is reported after the lines before it. */
static void encode_file(void *ctx, const char *name)
{
    encode_run *run = ctx;
    int fd = cli_open_input(name);
    tfm_line_reader *lines = tfm_lines_create(fd);
    tfm_error err;
    if (!lines) cli_fail(NULL, 0, "out of memory");
    if (tfm_pair_reader_create(lines, NULL, &run->source, &run->reader, &err) != TFM_OK)
        cli_fail(NULL, 0, "%s", err.msg);
    run->name = name;
    tfm_batch_loop loop = cli_batch_loop(&run->opt.batch, run);
    loop.min_cost_per_slice = MIN_TOKENS_PER_THREAD;
    loop.balance_cost = true;
    loop.read = read_sentence;
    loop.ready = input_ready;
    loop.work = encode_slice;
    loop.write = write_states;
    tfm_batch_failure f;
    if (tfm_batch_loop_run(&loop, &f) != TFM_OK) {
        if (f.stage == TFM_BATCH_WRITE) cli_fail("standard output", 0, "%s", f.err.msg);
        cli_fail(name, f.item + 1, "%s", f.err.msg);
    }
    tfm_pair_reader_free(run->reader);
    tfm_lines_free(lines);
    cli_close_input(fd);
}

/* ---- options and the run ------------------------------------------------------------------- */

static void parse_options(int argc, char **argv, options *opt)
{
    static char usage[sizeof usage_format + 32];
    snprintf(usage, sizeof usage, usage_format, TFM_ENCODE_BATCH_SIZE, TFM_ENCODE_BATCH_TOKENS);
    int c;
    while ((c = getopt_long(argc, argv, "m:qvhV", long_options, NULL)) != -1) {
        switch (c) {
        case 'm': opt->model = optarg; break;
        case OPT_NO_EOS: opt->eos = false; break;
        default:
            if (!cli_batch_option(c, optarg, &opt->batch)) cli_common_option(c, usage);
        }
    }
    if (!opt->model) cli_usage_error("a model is required: -m MODEL");
}

int main(int argc, char **argv)
{
    cli_init("encode", argv);
    options opt = {.eos = true,
                   .batch = cli_batch_defaults(TFM_ENCODE_BATCH_SIZE, TFM_ENCODE_BATCH_TOKENS)};
    parse_options(argc, argv, &opt);
    const int threads = opt.batch.threads;
    if (isatty(STDOUT_FILENO))
        cli_fail(NULL, 0, "refusing to write binary tensors to a terminal; redirect or pipe "
                          "the output");
    /* The BLAS's own threads are switched off: this program parallelises over
     * sentences itself, and two levels of threads fight (DESIGN.md, Threads). */
    tfm_blas_threads(1);
    double t0 = tfm_clock_seconds();

    static encode_run run;
    run.opt = opt;
    tfm_error err;
    run.model = cli_load_model_for(opt.model, &opt.batch);
    /* Sources as the model reads them (no </s> if trained with --no-eos). */
    run.source = tfm_pair_params_from_model(run.model);
    run.source.source_eos = run.source.source_eos && opt.eos;
    if (tfm_model_pack_for_encoding(run.model, &err) != TFM_OK) cli_fail(NULL, 0, "%s", err.msg);
    tfm_model_release_quantized(run.model); /* the packs hold its matrices now */
    run.helper = cli_products_helper(&opt.batch);
    const tfm_config *c = &run.model->config;
    run.D = c->d_model;
    run.source.max_source = (size_t)cli_max_input(&opt.batch, run.model);
    cli_info_model(opt.model, run.model, threads, "thread");
    cli_info("matrix kernel: %s", tfm_model_kernel_name(run.model));
    cli_info("%s", tfm_model_panels_source(run.model));
    cli_info("why this kernel: %s", tfm_model_kernel_reason(run.model));
    for (int w = 0; w < threads; w++)
        if (tfm_encoder_create(run.model, &run.encoders[w], &err) != TFM_OK)
            cli_fail(NULL, 0, "%s", err.msg);

    batch *b = &run.b;
    size_t bs = (size_t)opt.batch.batch_size * (size_t)threads; /* the batch's capacity */
    b->pairs = calloc(bs, sizeof *b->pairs);
    b->ptr = calloc(bs, sizeof *b->ptr);
    b->len = calloc(bs, sizeof *b->len);
    b->row = calloc(bs + 1, sizeof *b->row);
    if (!b->pairs || !b->ptr || !b->len || !b->row) cli_fail(NULL, 0, "out of memory");
    for (size_t i = 0; i < bs; i++) tfm_pair_init(&b->pairs[i]);

    cli_each_input(argc, argv, encode_file, &run);
    cli_close_output();

    double t = tfm_clock_seconds() - t0;
    cli_info("encoded %zu sentences, %zu tokens in %.2f s (%.0f tokens/s)", run.sentences,
             run.tokens, t, t > 0 ? (double)run.tokens / t : 0.0);
    for (size_t i = 0; i < bs; i++) tfm_pair_free(&b->pairs[i]);
    free(b->pairs);
    free(b->ptr);
    free(b->len);
    free(b->row);
    free(b->states);
    for (int w = 0; w < threads; w++) tfm_encoder_free(run.encoders[w]);
    cli_products_helper_free(run.helper);
    tfm_model_free(run.model);
    return CLI_EXIT_OK;
}
