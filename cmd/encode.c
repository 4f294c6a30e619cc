/* encode - the Transformer's encoder as a filter.
 *
 *   encode -m MODEL [FILE...] > states.npy
 *
 * Reads lines of source token ids (as 'tokenize' writes them) and writes, for
 * each line, the encoder's final states of that sentence as one .npy record
 * of shape (n, d_model), float32: a stream of records back to back, in input
 * order, which 'decode' reads (and numpy.load reads one at a time).
 *
 * The program parses options, reads lines, and prints: the work is in
 * lib/nn (tfm_encoder_forward) and lib/io (tfm_npy_write). */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

#define MAX_THREADS 64
/* A batch of fewer source tokens than this runs on one thread: splitting it
 * costs more in thread start-up than it saves. */
#define MIN_TOKENS_PER_THREAD 64

static const char usage_text[] =
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
    "                             (default 128)\n"
    "      --batch-tokens=N       source tokens each thread encodes together, at most\n"
    "                             (default 8192)\n"
    "      --threads=N            threads to use (default: the number of CPUs); each\n"
    "                             takes its own batch of the sentences read\n"
    "  -q, --quiet                print errors only\n"
    "  -v, --verbose              print more about what is done\n"
    "  -h, --help                 display this help and exit\n"
    "  -V, --version              output version information and exit\n"
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

enum { OPT_NO_EOS = 256, OPT_MAX_INPUT, OPT_BATCH_SIZE, OPT_BATCH_TOKENS, OPT_THREADS };

static const struct option long_options[] = {
    {"model", required_argument, NULL, 'm'},
    {"no-eos", no_argument, NULL, OPT_NO_EOS},
    {"max-input-length", required_argument, NULL, OPT_MAX_INPUT},
    {"batch-size", required_argument, NULL, OPT_BATCH_SIZE},
    {"batch-tokens", required_argument, NULL, OPT_BATCH_TOKENS},
    {"threads", required_argument, NULL, OPT_THREADS},
    CLI_COMMON_LONG_OPTIONS,
    {NULL, 0, NULL, 0},
};

typedef struct options {
    const char *model;
    bool eos;
    int max_input_length; /* 0: the model's max_positions */
    int batch_size;
    int batch_tokens;
    int threads;
} options;

/* The sentences read at once (up to a batch per thread) and, after encoding,
 * their states.  Arrays hold `capacity` = batch_size x threads. */
typedef struct batch {
    tfm_ids *ids;         /* [capacity]: each sentence's ids, </s> included */
    const int32_t **ptr;  /* [capacity]: ids[i].data, as the encoder takes them */
    int *len;             /* [capacity] */
    size_t *row;          /* [capacity + 1]: first state row of each sentence */
    float *states;        /* [row[n], D] */
    size_t states_cap;    /* floats */
} batch;

/* Everything the run needs; the workers read it. */
typedef struct encode_run {
    options opt;
    tfm_model *model;
    int D;
    int max_input;        /* longest source in tokens, </s> included */
    tfm_encoder *encoders[MAX_THREADS];
    batch b;
    tfm_line_reader *reader; /* the file being read, and its name */
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
    const char *line;
    size_t len;
    tfm_status s = tfm_lines_next(run->reader, &line, &len, err);
    if (s != TFM_OK) return s;
    size_t number = tfm_lines_number(run->reader);
    tfm_ids *ids = &b->ids[slot];
    s = tfm_ids_parse(line, len, run->model->config.src_vocab_size, ids, err);
    if (s != TFM_OK) return s;
    if (ids->len > 0) { /* an empty line stays an empty sentence: no </s> */
        size_t room = (size_t)run->max_input - (run->opt.eos ? 1 : 0);
        if (ids->len > room) {
            cli_warn(run->name, number, "%zu ids are more than the %d tokens the model takes%s; "
                     "cropped to the first %zu", ids->len, run->max_input,
                     run->opt.eos ? " (</s> included)" : "", room);
            ids->len = room;
        }
        if (run->opt.eos && tfm_ids_push(ids, run->model->config.eos_id) != TFM_OK)
            return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
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
    return tfm_lines_ready(run->reader);
}

static tfm_status encode_slice(void *ctx, int worker, size_t lo, size_t hi, tfm_error *err)
{
    encode_run *run = ctx;
    batch *b = &run->b;
    return tfm_encoder_forward(run->encoders[worker], (int)(hi - lo), b->ptr + lo, b->len + lo,
                               b->states + b->row[lo] * (size_t)run->D, err);
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

static void flush_output(void *ctx)
{
    cli_flush();
}

/* Encodes one input: batches of the lines that are ready (at most a batch per
 * thread), split over the threads in slices of about equal token counts,
 * written in order; a bad line is reported after the lines before it. */
static void encode_file(encode_run *run, const char *name)
{
    int fd = cli_open_input(name);
    run->reader = tfm_lines_create(fd);
    if (!run->reader) cli_fail(NULL, 0, "out of memory");
    run->name = name;
    tfm_batch_loop loop = {
        .ctx = run,
        .max_items = (size_t)run->opt.batch_size * (size_t)run->opt.threads,
        .max_cost = (size_t)run->opt.batch_tokens * (size_t)run->opt.threads,
        .threads = run->opt.threads,
        .min_cost_per_slice = MIN_TOKENS_PER_THREAD,
        .balance_cost = true,
        .read = read_sentence, .ready = input_ready, .work = encode_slice,
        .write = write_states, .flush = flush_output,
    };
    tfm_batch_failure f;
    if (tfm_batch_loop_run(&loop, &f) != TFM_OK) {
        if (f.stage == TFM_BATCH_WRITE) cli_fail("standard output", 0, "%s", f.err.msg);
        cli_fail(name, f.item + 1, "%s", f.err.msg);
    }
    tfm_lines_free(run->reader);
    cli_close_input(fd);
}

/* ---- options and the run ------------------------------------------------------------------- */

static void parse_options(int argc, char **argv, options *opt)
{
    int c;
    while ((c = getopt_long(argc, argv, "m:qvhV", long_options, NULL)) != -1) {
        switch (c) {
        case 'm': opt->model = optarg; break;
        case OPT_NO_EOS: opt->eos = false; break;
        case OPT_MAX_INPUT:
            opt->max_input_length = (int)cli_parse_int("--max-input-length", optarg, 1, 1 << 24);
            break;
        case OPT_BATCH_SIZE:
            opt->batch_size = (int)cli_parse_int("--batch-size", optarg, 1, 1 << 20);
            break;
        case OPT_BATCH_TOKENS:
            opt->batch_tokens = (int)cli_parse_int("--batch-tokens", optarg, 1, 1 << 26);
            break;
        case OPT_THREADS: opt->threads = (int)cli_parse_int("--threads", optarg, 1, MAX_THREADS); break;
        default: cli_common_option(c, usage_text);
        }
    }
    if (!opt->model) cli_usage_error("a model is required: -m MODEL");
}

static double now_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv)
{
    cli_init("encode", argv);
    options opt = {.eos = true, .batch_size = 128, .batch_tokens = 8192,
                   .threads = tfm_cpu_count()};
    if (opt.threads > MAX_THREADS) opt.threads = MAX_THREADS;
    parse_options(argc, argv, &opt);
    if (isatty(STDOUT_FILENO))
        cli_fail(NULL, 0, "refusing to write binary tensors to a terminal; redirect or pipe "
                          "the output");
    /* The BLAS's own threads are switched off: this program parallelises over
     * sentences itself, and two levels of threads fight (DESIGN.md, Threads). */
    tfm_blas_threads(1);
    double t0 = now_seconds();

    static encode_run run;
    run.opt = opt;
    tfm_error err;
    run.model = cli_load_model(opt.model);
    if (!tfm_model_source_eos(run.model)) run.opt.eos = false; /* trained with --no-eos */
    if (tfm_model_pack_for_encoding(run.model, &err) != TFM_OK) cli_fail(NULL, 0, "%s", err.msg);
    const tfm_config *c = &run.model->config;
    run.D = c->d_model;
    run.max_input = c->max_positions;
    if (opt.max_input_length > c->max_positions)
        cli_usage_error("--max-input-length %d: the model takes at most %d positions",
                        opt.max_input_length, c->max_positions);
    if (opt.max_input_length > 0) run.max_input = opt.max_input_length;
    cli_info("model %s: d_model %d, %d encoder layers, %d heads, vocabulary %d; %d thread%s",
             opt.model, c->d_model, c->n_encoder_layers, c->n_heads, (int)c->src_vocab_size,
             opt.threads, opt.threads == 1 ? "" : "s");
    cli_info("matrix kernel: %s", tfm_model_kernel_name(run.model));
    for (int w = 0; w < opt.threads; w++)
        if (tfm_encoder_create(run.model, &run.encoders[w], &err) != TFM_OK)
            cli_fail(NULL, 0, "%s", err.msg);

    batch *b = &run.b;
    size_t bs = (size_t)opt.batch_size * (size_t)opt.threads; /* the batch's capacity */
    b->ids = calloc(bs, sizeof *b->ids);
    b->ptr = calloc(bs, sizeof *b->ptr);
    b->len = calloc(bs, sizeof *b->len);
    b->row = calloc(bs + 1, sizeof *b->row);
    if (!b->ids || !b->ptr || !b->len || !b->row) cli_fail(NULL, 0, "out of memory");
    for (size_t i = 0; i < bs; i++) tfm_ids_init(&b->ids[i]);

    char *stdin_only[] = {"-"};
    char **files = argc > optind ? argv + optind : stdin_only;
    int n_files = argc > optind ? argc - optind : 1;
    for (int f = 0; f < n_files; f++) encode_file(&run, files[f]);
    cli_flush();

    double t = now_seconds() - t0;
    cli_info("encoded %zu sentences, %zu tokens in %.2f s (%.0f tokens/s)", run.sentences,
             run.tokens, t, t > 0 ? (double)run.tokens / t : 0.0);
    for (size_t i = 0; i < bs; i++) tfm_ids_free(&b->ids[i]);
    free(b->ids);
    free(b->ptr);
    free(b->len);
    free(b->row);
    free(b->states);
    for (int w = 0; w < opt.threads; w++) tfm_encoder_free(run.encoders[w]);
    tfm_model_free(run.model);
    return CLI_EXIT_OK;
}
