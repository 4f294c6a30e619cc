/* tokenize - sub-word tokenization with byte-pair encoding.
 *
 *   tokenize learn --vocab-size N [FILE...] > VOCAB   learn a vocabulary
 *   tokenize -m VOCAB [FILE...]                       text lines -> id lines
 *   tokenize -d -m VOCAB [FILE...]                    id or piece lines -> text
 *   tokenize normalize [FILE...]                      text -> normalised text
 *
 * The program only parses options, reads lines and prints: the work is in
 * lib/text (tfm_bpe_learner_*, tfm_bpe_encode, tfm_bpe_decode). */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

/* Lines are gathered into batches of at most this many lines or bytes, and a
 * batch is cut short whenever no further input is ready. */
#define BATCH_LINES 8192
#define BATCH_BYTES (8u << 20)
/* A batch of fewer lines than this per thread is encoded on fewer threads:
 * a handful of lines is not worth starting a thread. */
#define MIN_LINES_PER_THREAD 32

static const char usage_text[] =
    "Usage: tokenize [OPTION]... -m VOCAB [FILE]...\n"
    "       tokenize -d [OPTION]... -m VOCAB [FILE]...\n"
    "       tokenize learn --vocab-size N [OPTION]... [FILE]...\n"
    "       tokenize normalize [OPTION]... [FILE]...\n"
    "Sub-word tokenization with byte-pair encoding (BPE), as SentencePiece does it.\n"
    "Reads lines from the FILEs (or standard input; '-' is standard input) and\n"
    "writes one line for each line read, in order.\n"
    "\n"
    "Encoding and decoding:\n"
    "  -m, --model=VOCAB          a vocabulary file (from 'tokenize learn') or a model\n"
    "                             file, which carries its vocabulary\n"
    "  -d, --decode               decode id lines or piece lines back to text\n"
    "      --output=FORMAT        encode to 'ids' (default) or 'pieces'\n"
    "      --input=FORMAT         decode from 'auto' (default), 'ids' or 'pieces'\n"
    "      --dropout=P            BPE-dropout: skip each merge with probability P\n"
    "      --seed=N               seed of the random choices (default 1)\n"
    "      --threads=N            threads to use (default: the number of CPUs)\n"
    "      --strict               invalid UTF-8 is an error, not replaced by U+FFFD\n"
    "\n"
    "Learning ('tokenize learn'):\n"
    "      --vocab-size=N         pieces in the vocabulary, specials and bytes included\n"
    "      --normalize=FORM       'nfkc' (default), 'nfc' or 'none'\n"
    "      --case-fold            fold case (Unicode case folding) before anything else\n"
    "      --character-coverage=F share of character occurrences the alphabet covers;\n"
    "                             rarer characters are spelled with bytes (0.9995)\n"
    "      --max-piece-length=N   longest piece in characters (16)\n"
    "      --input-sentence-size=N  learn from a random sample of N lines (0: all)\n"
    "      --user-symbols=A,B,... symbols always kept whole as one piece\n"
    "      --soft-vocab-limit     a corpus too small for N pieces gives fewer pieces\n"
    "                             instead of an error\n"
    "  -o, --output-file=FILE     write the vocabulary to FILE (atomically) instead\n"
    "                             of standard output\n"
    "      --seed, --threads, --strict as above\n"
    "\n"
    "Normalising ('tokenize normalize'):\n"
    "      --normalize, --case-fold, --strict as above, or -m VOCAB to normalise\n"
    "                             as that vocabulary does\n"
    "\n"
    "Common options:\n"
    "  -q, --quiet                print errors only\n"
    "  -v, --verbose              print more about what is done\n"
    "  -h, --help                 display this help and exit\n"
    "  -V, --version              output version information and exit\n"
    "\n"
    "Invalid UTF-8 is replaced by U+FFFD with a warning naming the line. For every\n"
    "line X, 'tokenize -d' of 'tokenize' of X equals 'tokenize normalize' of X.\n"
    "Exit status: 0 on success, 1 on failure, 2 on a usage error.\n"
    "Example:\n"
    "  tokenize learn --vocab-size 8000 train.de train.en -o de-en.vocab\n"
    "  tokenize -m de-en.vocab < test.de | tokenize -d -m de-en.vocab\n";

enum {
    OPT_OUTPUT = 256,
    OPT_INPUT,
    OPT_DROPOUT,
    OPT_SEED,
    OPT_THREADS,
    OPT_STRICT,
    OPT_VOCAB_SIZE,
    OPT_NORMALIZE,
    OPT_CASE_FOLD,
    OPT_COVERAGE,
    OPT_MAX_PIECE,
    OPT_SENTENCE_SIZE,
    OPT_USER_SYMBOLS,
    OPT_SOFT_LIMIT,
};

static const struct option long_options[] = {
    {"model", required_argument, NULL, 'm'},
    {"decode", no_argument, NULL, 'd'},
    {"output", required_argument, NULL, OPT_OUTPUT},
    {"input", required_argument, NULL, OPT_INPUT},
    {"dropout", required_argument, NULL, OPT_DROPOUT},
    {"seed", required_argument, NULL, OPT_SEED},
    {"threads", required_argument, NULL, OPT_THREADS},
    {"strict", no_argument, NULL, OPT_STRICT},
    {"vocab-size", required_argument, NULL, OPT_VOCAB_SIZE},
    {"normalize", required_argument, NULL, OPT_NORMALIZE},
    {"case-fold", no_argument, NULL, OPT_CASE_FOLD},
    {"character-coverage", required_argument, NULL, OPT_COVERAGE},
    {"max-piece-length", required_argument, NULL, OPT_MAX_PIECE},
    {"input-sentence-size", required_argument, NULL, OPT_SENTENCE_SIZE},
    {"user-symbols", required_argument, NULL, OPT_USER_SYMBOLS},
    {"soft-vocab-limit", no_argument, NULL, OPT_SOFT_LIMIT},
    {"output-file", required_argument, NULL, 'o'},
    CLI_COMMON_LONG_OPTIONS,
    {NULL, 0, NULL, 0},
};

typedef enum { MODE_ENCODE, MODE_DECODE, MODE_LEARN, MODE_NORMALIZE } tokenize_mode;
typedef enum { FORMAT_AUTO, FORMAT_IDS, FORMAT_PIECES } line_format;

typedef struct options {
    tokenize_mode mode;
    const char *model;
    const char *output_file;
    line_format output;   /* encoding: ids or pieces */
    line_format input;    /* decoding: auto, ids or pieces */
    float dropout;
    uint64_t seed;
    int threads;
    bool strict;
    tfm_bpe_learn_params learn;
    char **user_symbols;
    bool learn_only_option_used;
    const char *learn_only_option;
    bool normalize_option_used; /* --normalize or --case-fold */
    bool vocab_size_given;
} options;

/* ---- batches of lines ------------------------------------------------------- */

/* A batch of lines copied out of the reader, text[offset[i] .. offset[i]+len[i]),
 * and each line's result for write_line.  Arrays hold BATCH_LINES. */
typedef struct line_batch {
    tfm_line_reader *reader;  /* the file being read, and its name */
    const char *name;
    tfm_buf text;
    size_t *offset;
    size_t *len;
    size_t first_line;        /* line number of slot 0 in its file */
    size_t base;              /* lines before this batch, over all files */
    size_t lines_read;        /* over all files */
    tfm_buf *out;             /* each line's output line */
    size_t *repaired;         /* invalid UTF-8 sequences replaced in it */
    tfm_status *status;       /* and whether it failed, with errors[i] saying why */
    tfm_error *errors;
    void *job;                /* the mode's own state */
} line_batch;

/* What a mode does with each batch: work on slots [lo, hi) as worker w,
 * filling out/repaired/status/errors, then (writes) write_line prints them. */
typedef struct line_mode {
    tfm_status (*work)(void *ctx, int worker, size_t lo, size_t hi, tfm_error *err);
    bool writes;
    int threads;
} line_mode;

static void batch_init(line_batch *b, void *job)
{
    memset(b, 0, sizeof *b);
    tfm_buf_init(&b->text);
    b->offset = malloc(BATCH_LINES * sizeof *b->offset);
    b->len = malloc(BATCH_LINES * sizeof *b->len);
    b->out = calloc(BATCH_LINES, sizeof *b->out);
    b->repaired = calloc(BATCH_LINES, sizeof *b->repaired);
    b->status = calloc(BATCH_LINES, sizeof *b->status);
    b->errors = calloc(BATCH_LINES, sizeof *b->errors);
    if (!b->offset || !b->len || !b->out || !b->repaired || !b->status || !b->errors)
        cli_fail(NULL, 0, "out of memory");
    b->job = job;
}

static void batch_free(line_batch *b)
{
    tfm_buf_free(&b->text);
    for (size_t i = 0; i < BATCH_LINES; i++) tfm_buf_free(&b->out[i]);
    free(b->offset);
    free(b->len);
    free(b->out);
    free(b->repaired);
    free(b->status);
    free(b->errors);
}

static const char *batch_line(const line_batch *b, size_t i)
{
    return b->text.data + b->offset[i];
}

/* Copies the next line into slot `slot` of the batch. */
static tfm_status read_line(void *ctx, size_t slot, size_t *cost, tfm_error *err)
{
    line_batch *b = ctx;
    if (slot == 0) {
        tfm_buf_clear(&b->text);
        b->first_line = tfm_lines_number(b->reader) + 1;
        b->base = b->lines_read;
    }
    const char *line;
    size_t len;
    tfm_status s = tfm_lines_next(b->reader, &line, &len, err);
    if (s != TFM_OK) return s;
    b->offset[slot] = b->text.len;
    b->len[slot] = len;
    if (tfm_buf_append(&b->text, line, len) != TFM_OK || tfm_buf_putc(&b->text, 0) != TFM_OK)
        return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    b->lines_read++;
    *cost = len + 1;
    return TFM_OK;
}

static bool line_ready(void *ctx)
{
    line_batch *b = ctx;
    return tfm_lines_ready(b->reader);
}

/* Writes line `slot`'s result, or returns its error. */
static tfm_status write_line(void *ctx, size_t slot, tfm_error *err)
{
    line_batch *b = ctx;
    if (b->status[slot] != TFM_OK) {
        *err = b->errors[slot];
        return b->status[slot];
    }
    if (b->repaired[slot])
        cli_warn(b->name, b->first_line + slot, "invalid UTF-8 replaced by U+FFFD (%zu sequence%s)",
                 b->repaired[slot], b->repaired[slot] == 1 ? "" : "s");
    cli_write_line(b->out[slot].data ? b->out[slot].data : "", b->out[slot].len);
    return TFM_OK;
}

static void flush_output(void *ctx)
{
    cli_flush();
}

static _Noreturn void fail_with(const char *file, size_t line, const tfm_error *err);

/* Runs the mode over every input file in batches of the lines that are
 * ready: worked on over the threads, written in order, and a bad line
 * reported after the lines before it. */
static void for_each_batch(char **files, int n_files, const line_mode *mode, void *job)
{
    static char *const stdin_only[] = {"-"};
    if (n_files == 0) {
        files = (char **)stdin_only;
        n_files = 1;
    }
    line_batch batch;
    batch_init(&batch, job);
    tfm_batch_loop loop = {
        .ctx = &batch, .max_items = BATCH_LINES, .max_cost = BATCH_BYTES,
        .threads = mode->threads, .min_items_per_slice = MIN_LINES_PER_THREAD,
        .read = read_line, .ready = line_ready, .work = mode->work,
        .write = mode->writes ? write_line : NULL, .flush = flush_output,
    };
    for (int f = 0; f < n_files; f++) {
        int fd = cli_open_input(files[f]);
        batch.reader = tfm_lines_create(fd);
        if (!batch.reader) cli_fail(NULL, 0, "out of memory");
        batch.name = files[f];
        tfm_batch_failure fail;
        if (tfm_batch_loop_run(&loop, &fail) != TFM_OK) {
            cli_flush();
            if (fail.stage == TFM_BATCH_WORK) cli_fail(files[f], 0, "%s", fail.err.msg);
            if (fail.stage == TFM_BATCH_WRITE) fail_with(files[f], fail.item + 1, &fail.err);
            cli_fail(files[f], fail.item + 1, "%s", fail.err.msg);
        }
        tfm_lines_free(batch.reader);
        cli_close_input(fd);
    }
    batch_free(&batch);
    cli_flush();
}

/* Prints the library's error for a line of an input, or for a file whose
 * message begins "line N: " (the vocabulary parser's form) as FILE:N. */
static _Noreturn void fail_with(const char *file, size_t line, const tfm_error *err)
{
    unsigned long n;
    int used = 0;
    if (line == 0 && sscanf(err->msg, "line %lu: %n", &n, &used) == 1 && used > 0)
        cli_fail(file, n, "%s", err->msg + used);
    cli_fail(file, line, "%s", err->msg);
}

/* ---- encoding ------------------------------------------------------------------- */

typedef struct encode_job {
    const options *opt;
    const tfm_vocab *vocab;
    tfm_bpe **encoders;       /* one per worker */
    tfm_ids *ids;             /* one per worker */
} encode_job;

/* Encodes lines [lo, hi) of the batch as worker w. */
static tfm_status encode_lines(void *ctx, int worker, size_t lo, size_t hi, tfm_error *err)
{
    line_batch *b = ctx;
    encode_job *job = b->job;
    tfm_ids *ids = &job->ids[worker];
    for (size_t i = lo; i < hi; i++) {
        /* Each line draws from its own generator, seeded by the seed and the
         * line's number, so results do not depend on the thread count. */
        tfm_rng rng;
        tfm_rng_seed(&rng, job->opt->seed * 0x9e3779b97f4a7c15ULL + b->base + i);
        tfm_bpe_encode_params ep = {.dropout = job->opt->dropout, .rng = &rng,
                                    .strict = job->opt->strict};
        tfm_buf *out = &b->out[i];
        tfm_buf_clear(out);
        b->errors[i].msg[0] = 0;
        tfm_status s = tfm_bpe_encode(job->encoders[worker], &ep, batch_line(b, i), b->len[i],
                                      ids, &b->repaired[i], &b->errors[i]);
        if (s == TFM_OK) {
            if (job->opt->output == FORMAT_PIECES)
                s = tfm_bpe_ids_to_pieces(job->vocab, ids->data, ids->len, out, &b->errors[i]);
            else
                s = tfm_ids_format(ids->data, ids->len, out);
        }
        if (s != TFM_OK && b->errors[i].msg[0] == 0) tfm_error_set(&b->errors[i], s, "%s", tfm_strerror(s));
        b->status[i] = s;
    }
    return TFM_OK;
}


static tfm_vocab *load_vocab(const char *path)
{
    tfm_vocab *vocab;
    tfm_error err;
    if (tfm_model_load_vocab(path, &vocab, &err) != TFM_OK) fail_with(path, 0, &err);
    return vocab;
}

static int run_encode(const options *opt, char **files, int n_files)
{
    tfm_vocab *vocab = load_vocab(opt->model);
    encode_job job = {.opt = opt, .vocab = vocab};
    job.encoders = calloc((size_t)opt->threads, sizeof *job.encoders);
    job.ids = calloc((size_t)opt->threads, sizeof *job.ids);
    if (!job.encoders || !job.ids) cli_fail(NULL, 0, "out of memory");
    for (int w = 0; w < opt->threads; w++) {
        tfm_error err;
        if (tfm_bpe_create(vocab, &job.encoders[w], &err) != TFM_OK) fail_with(opt->model, 0, &err);
        tfm_ids_init(&job.ids[w]);
    }
    line_mode mode = {.work = encode_lines, .writes = true, .threads = opt->threads};
    for_each_batch(files, n_files, &mode, &job);
    for (int w = 0; w < opt->threads; w++) {
        tfm_bpe_free(job.encoders[w]);
        tfm_ids_free(&job.ids[w]);
    }
    free(job.encoders);
    free(job.ids);
    tfm_vocab_free(vocab);
    return CLI_EXIT_OK;
}

/* ---- decoding ------------------------------------------------------------------- */

typedef struct decode_job {
    const options *opt;
    const tfm_vocab *vocab;
    tfm_ids ids;
} decode_job;

/* True when every space-separated token of the line is a decimal number. */
static bool looks_like_ids(const char *line, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (!(line[i] >= '0' && line[i] <= '9') && line[i] != ' ' && line[i] != '\t') return false;
    return true;
}

/* Decodes lines [lo, hi) of the batch (one worker). */
static tfm_status decode_lines(void *ctx, int worker, size_t lo, size_t hi, tfm_error *err)
{
    line_batch *b = ctx;
    decode_job *job = b->job;
    for (size_t i = lo; i < hi; i++) {
        const char *line = batch_line(b, i);
        size_t len = b->len[i];
        bool ids = job->opt->input == FORMAT_IDS ||
                   (job->opt->input == FORMAT_AUTO && looks_like_ids(line, len));
        tfm_error *e = &b->errors[i];
        tfm_status s = ids ? tfm_ids_parse(line, len, tfm_vocab_size(job->vocab), &job->ids, e)
                           : tfm_bpe_pieces_to_ids(job->vocab, line, len, &job->ids, e);
        if (s == TFM_OK) s = tfm_bpe_decode(job->vocab, job->ids.data, job->ids.len, &b->out[i], e);
        b->status[i] = s;
        b->repaired[i] = 0;
    }
    return TFM_OK;
}


static int run_decode(const options *opt, char **files, int n_files)
{
    decode_job job = {.opt = opt, .vocab = load_vocab(opt->model)};
    tfm_ids_init(&job.ids);
    line_mode mode = {.work = decode_lines, .writes = true, .threads = 1};
    for_each_batch(files, n_files, &mode, &job);
    tfm_ids_free(&job.ids);
    tfm_vocab_free((tfm_vocab *)job.vocab);
    return CLI_EXIT_OK;
}

/* ---- normalising -------------------------------------------------------------- */

typedef struct normalize_job {
    tfm_norm_params norm;
} normalize_job;

/* Normalises lines [lo, hi) of the batch (one worker). */
static tfm_status normalize_lines(void *ctx, int worker, size_t lo, size_t hi, tfm_error *err)
{
    line_batch *b = ctx;
    normalize_job *job = b->job;
    for (size_t i = lo; i < hi; i++) {
        b->repaired[i] = 0;
        b->status[i] = tfm_normalize(&job->norm, batch_line(b, i), b->len[i], &b->out[i],
                                     &b->repaired[i], &b->errors[i]);
    }
    return TFM_OK;
}


static int run_normalize(const options *opt, char **files, int n_files)
{
    normalize_job job = {.norm = opt->learn.norm};
    if (opt->model) { /* normalise as that vocabulary does */
        tfm_vocab *vocab = load_vocab(opt->model);
        job.norm = *tfm_vocab_norm(vocab);
        tfm_vocab_free(vocab);
    }
    job.norm.strict = opt->strict;
    line_mode mode = {.work = normalize_lines, .writes = true, .threads = 1};
    for_each_batch(files, n_files, &mode, &job);
    return CLI_EXIT_OK;
}

/* ---- learning ---------------------------------------------------------------------- */

typedef struct learn_job {
    tfm_bpe_learner *learner;
    const char **lines;
    int64_t lines_read;
    double bytes_read;
    struct timespec start;
    double last_report;
    bool tty;
} learn_job;

static double seconds_since(const struct timespec *start)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - start->tv_sec) + 1e-9 * (double)(now.tv_nsec - start->tv_nsec);
}

/* Progress on stderr: one updating line on a terminal, a plain line every
 * ten seconds otherwise. */
static void learn_progress(void *ctx, const char *stage, int64_t done, int64_t total)
{
    learn_job *job = ctx;
    if (cli_verbosity < 1) return;
    double t = seconds_since(&job->start);
    bool last = total > 0 && done >= total;
    if (!last && t - job->last_report < (job->tty ? 0.2 : 10.0)) return;
    job->last_report = t;
    char where[64];
    if (total > 0) snprintf(where, sizeof where, "%lld/%lld", (long long)done, (long long)total);
    else snprintf(where, sizeof where, "%lld", (long long)done);
    fprintf(stderr, "%stokenize: learn: %s %s (%.0f s)%s", job->tty ? "\r" : "", stage, where, t,
            job->tty ? "\033[K" : "\n");
    if (job->tty && last) fputc('\n', stderr);
}

/* Adds the batch's lines to the learner (one worker: the learner uses its
 * own threads). */
static tfm_status learn_lines(void *ctx, int worker, size_t lo, size_t hi, tfm_error *err)
{
    line_batch *b = ctx;
    learn_job *job = b->job;
    size_t repaired = 0;
    for (size_t i = lo; i < hi; i++) job->lines[i - lo] = batch_line(b, i);
    tfm_status s = tfm_bpe_learner_add_batch(job->learner, job->lines, b->len + lo, hi - lo,
                                             &repaired, err);
    if (s != TFM_OK) return s;
    if (repaired)
        cli_warn(b->name, 0, "lines %zu-%zu: %zu invalid UTF-8 sequence%s replaced by U+FFFD",
                 b->first_line + lo, b->first_line + hi - 1, repaired, repaired == 1 ? "" : "s");
    job->lines_read += (int64_t)(hi - lo);
    job->bytes_read += (double)b->text.len;
    learn_progress(job, "reading lines", job->lines_read, 0);
    return TFM_OK;
}


static int run_learn(options *opt, char **files, int n_files)
{
    learn_job job = {.tty = isatty(STDERR_FILENO)};
    clock_gettime(CLOCK_MONOTONIC, &job.start);
    job.last_report = -1e9;
    opt->learn.n_threads = opt->threads;
    opt->learn.seed = opt->seed;
    opt->learn.norm.strict = opt->strict;
    opt->learn.progress = learn_progress;
    opt->learn.progress_ctx = &job;
    tfm_error err;
    if (tfm_bpe_learner_create(&opt->learn, &job.learner, &err) != TFM_OK) cli_fail(NULL, 0, "%s", err.msg);
    job.lines = malloc(BATCH_LINES * sizeof *job.lines);
    if (!job.lines) cli_fail(NULL, 0, "out of memory");
    line_mode mode = {.work = learn_lines, .writes = false, .threads = 1};
    for_each_batch(files, n_files, &mode, &job);
    cli_info("read %lld lines (%.1f MB) in %.1f s", (long long)job.lines_read, job.bytes_read / 1e6,
             seconds_since(&job.start));
    tfm_vocab *vocab;
    if (tfm_bpe_learner_finish(job.learner, &vocab, &err) != TFM_OK) cli_fail(NULL, 0, "%s", err.msg);
    if (tfm_vocab_size(vocab) < opt->learn.vocab_size)
        cli_warn(NULL, 0, "the corpus supports only %d pieces; the vocabulary has %d, not %d",
                 tfm_vocab_size(vocab), tfm_vocab_size(vocab), opt->learn.vocab_size);
    int32_t merges = 0;
    for (int32_t id = 0; id < tfm_vocab_size(vocab); id++) merges += tfm_vocab_score(vocab, id) < 0;
    if (merges == 0)
        cli_warn(NULL, 0, "the alphabet fills the whole vocabulary, so no merges were learnt; use "
                          "a larger --vocab-size or a lower --character-coverage");
    tfm_status s = opt->output_file ? tfm_vocab_save(vocab, opt->output_file, &err)
                                    : tfm_vocab_write(vocab, stdout, &err);
    if (s != TFM_OK) cli_fail(opt->output_file ? opt->output_file : "standard output", 0, "%s", err.msg);
    cli_info("learnt %d pieces in %.1f s", tfm_vocab_size(vocab), seconds_since(&job.start));
    tfm_vocab_free(vocab);
    tfm_bpe_learner_free(job.learner);
    free(job.lines);
    return CLI_EXIT_OK;
}

/* ---- options ------------------------------------------------------------------------- */

/* Splits "a,b,c" into a NULL-terminated array of copies. */
static char **split_commas(const char *list, int *count)
{
    int n = 1;
    for (const char *p = list; *p; p++) n += *p == ',';
    char **out = calloc((size_t)n + 1, sizeof *out);
    if (!out) cli_fail(NULL, 0, "out of memory");
    int k = 0;
    for (const char *p = list;;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == 0) cli_usage_error("--user-symbols: empty symbol in '%s'", list);
        out[k] = strndup(p, len);
        if (!out[k++]) cli_fail(NULL, 0, "out of memory");
        if (!end) break;
        p = end + 1;
    }
    *count = k;
    return out;
}

static void parse_options(int argc, char **argv, options *opt)
{
    static const char *const output_formats[] = {"ids", "pieces", NULL};
    static const char *const input_formats[] = {"auto", "ids", "pieces", NULL};
    static const char *const forms[] = {"none", "nfc", "nfkc", NULL};
    int c;
    while ((c = getopt_long(argc, argv, "m:do:qvhV", long_options, NULL)) != -1) {
        bool learn_only = false;
        switch (c) {
        case 'm': opt->model = optarg; break;
        case 'd': opt->mode = opt->mode == MODE_ENCODE ? MODE_DECODE : opt->mode; break;
        case 'o': opt->output_file = optarg; learn_only = true; break;
        case OPT_OUTPUT:
            opt->output = cli_parse_choice("--output", optarg, output_formats) ? FORMAT_PIECES
                                                                               : FORMAT_IDS;
            break;
        case OPT_INPUT: opt->input = (line_format)cli_parse_choice("--input", optarg, input_formats); break;
        case OPT_DROPOUT: opt->dropout = (float)cli_parse_double("--dropout", optarg, 0, 1); break;
        case OPT_SEED: opt->seed = (uint64_t)cli_parse_int("--seed", optarg, 0, INT64_MAX); break;
        case OPT_THREADS: opt->threads = (int)cli_parse_int("--threads", optarg, 1, 64); break;
        case OPT_STRICT: opt->strict = true; break;
        case OPT_VOCAB_SIZE:
            opt->learn.vocab_size = (int32_t)cli_parse_int("--vocab-size", optarg, 1, 1 << 24);
            opt->vocab_size_given = true;
            learn_only = true;
            break;
        case OPT_NORMALIZE:
            opt->learn.norm.form = (tfm_norm_form)cli_parse_choice("--normalize", optarg, forms);
            opt->normalize_option_used = true;
            break;
        case OPT_CASE_FOLD: opt->learn.norm.case_fold = true; opt->normalize_option_used = true; break;
        case OPT_COVERAGE:
            opt->learn.character_coverage = cli_parse_double("--character-coverage", optarg, 0.5, 1);
            learn_only = true;
            break;
        case OPT_MAX_PIECE:
            opt->learn.max_piece_length = (int)cli_parse_int("--max-piece-length", optarg, 1, 1024);
            learn_only = true;
            break;
        case OPT_SENTENCE_SIZE:
            opt->learn.input_sentence_size =
                cli_parse_int("--input-sentence-size", optarg, 0, INT64_MAX);
            learn_only = true;
            break;
        case OPT_USER_SYMBOLS:
            opt->user_symbols = split_commas(optarg, &opt->learn.n_user_symbols);
            opt->learn.user_symbols = (const char *const *)opt->user_symbols;
            learn_only = true;
            break;
        case OPT_SOFT_LIMIT: opt->learn.soft_vocab_limit = true; learn_only = true; break;
        default: cli_common_option(c, usage_text);
        }
        if (learn_only && !opt->learn_only_option_used) {
            opt->learn_only_option_used = true;
            opt->learn_only_option = argv[optind - 1];
        }
    }
}

int main(int argc, char **argv)
{
    cli_init("tokenize", argv);
    options opt = {.mode = MODE_ENCODE, .output = FORMAT_IDS, .input = FORMAT_AUTO, .seed = 1};
    opt.learn = tfm_bpe_learn_default_params();
    opt.threads = tfm_cpu_count();
    /* The sub-commands come first: "tokenize learn ...", "tokenize normalize ...". */
    if (argc > 1 && strcmp(argv[1], "learn") == 0) opt.mode = MODE_LEARN;
    if (argc > 1 && strcmp(argv[1], "normalize") == 0) opt.mode = MODE_NORMALIZE;
    if (opt.mode != MODE_ENCODE) {
        argv++;
        argc--;
    }
    parse_options(argc, argv, &opt);
    char **files = argv + optind;
    int n_files = argc - optind;
    int status;
    switch (opt.mode) {
    case MODE_LEARN:
        if (!opt.vocab_size_given) cli_usage_error("learn: --vocab-size is required");
        status = run_learn(&opt, files, n_files);
        break;
    case MODE_NORMALIZE:
        if (opt.learn_only_option_used)
            cli_usage_error("%s is an option of 'tokenize learn'", opt.learn_only_option);
        if (opt.model && opt.normalize_option_used)
            cli_usage_error("--normalize and --case-fold cannot be used with -m: the "
                            "vocabulary says how it normalises");
        status = run_normalize(&opt, files, n_files);
        break;
    default:
        if (opt.learn_only_option_used)
            cli_usage_error("%s is an option of 'tokenize learn'", opt.learn_only_option);
        if (!opt.model) cli_usage_error("a vocabulary is required: -m VOCAB");
        if (opt.normalize_option_used)
            cli_usage_error("--normalize and --case-fold are options of 'tokenize learn' and "
                            "'tokenize normalize': the vocabulary says how it normalises");
        status = opt.mode == MODE_DECODE ? run_decode(&opt, files, n_files)
                                         : run_encode(&opt, files, n_files);
    }
    for (char **p = opt.user_symbols; p && *p; p++) free(*p);
    free(opt.user_symbols);
    return status;
}
