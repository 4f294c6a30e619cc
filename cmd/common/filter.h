/* filter.h - what the programs that filter a stream in batches over
 * threads (encode, decode) share on the command line: the resource options
 * --batch-size, --batch-tokens, --threads and --max-input-length, the batch
 * loop (tfm_batch_loop) they set, the inputs read in turn, and a clock for
 * -v's rates. */
#ifndef TFM_CLI_FILTER_H
#define TFM_CLI_FILTER_H

#include <getopt.h>

#include "cli.h"

enum { CLI_MAX_THREADS = 64 };

/* getopt_long values of the resource options (above any program's own). */
enum {
    CLI_OPT_BATCH_SIZE = 0x1000, CLI_OPT_BATCH_TOKENS, CLI_OPT_THREADS, CLI_OPT_MAX_INPUT,
    CLI_OPT_COMPUTE_TYPE,
};

/* Entries of a long_options table, one by one. */
#define CLI_OPTION_BATCH_SIZE {"batch-size", required_argument, NULL, CLI_OPT_BATCH_SIZE}
#define CLI_OPTION_BATCH_TOKENS {"batch-tokens", required_argument, NULL, CLI_OPT_BATCH_TOKENS}
#define CLI_OPTION_THREADS {"threads", required_argument, NULL, CLI_OPT_THREADS}
#define CLI_OPTION_MAX_INPUT {"max-input-length", required_argument, NULL, CLI_OPT_MAX_INPUT}
#define CLI_OPTION_COMPUTE_TYPE {"compute-type", required_argument, NULL, CLI_OPT_COMPUTE_TYPE}

/* All five and the common ones (CLI_COMMON_LONG_OPTIONS), last in a
 * long_options table, before the terminating {NULL, 0, NULL, 0}. */
#define CLI_FILTER_LONG_OPTIONS                                                       \
    CLI_OPTION_BATCH_SIZE, CLI_OPTION_BATCH_TOKENS, CLI_OPTION_MAX_INPUT, CLI_OPTION_THREADS, \
        CLI_OPTION_COMPUTE_TYPE, CLI_COMMON_LONG_OPTIONS

/* The help lines of --compute-type. */
#define CLI_COMPUTE_TYPE_HELP                                                          \
    "      --compute-type=TYPE    what the linear layers multiply in: float32, int8\n"  \
    "                             (weights int8 per output row, activations per row),\n" \
    "                             bf16, or default (the model file's own: float32,\n"   \
    "                             or the type 'train quantize' gave it)\n"

typedef struct cli_batch_options {
    int batch_size;       /* sentences a thread takes at once, at most */
    int batch_tokens;     /* source tokens a thread takes at once, at most */
    int threads;          /* default: the CPUs, at most CLI_MAX_THREADS */
    int max_input_length; /* 0: the model's max_positions */
    tfm_compute_type compute; /* --compute-type; TFM_COMPUTE_DEFAULT: the model's own */
} cli_batch_options;

/* The program's batch defaults, and a thread per CPU. */
cli_batch_options cli_batch_defaults(int batch_size, int batch_tokens);

/* For the default branch of a getopt_long switch: true when c is one of the
 * resource options (its value checked, else a usage error). */
bool cli_batch_option(int c, const char *arg, cli_batch_options *o);

/* The model file at path loaded for encode or decode in the options'
 * compute type (tfm_model_load_for_inference), or the program fails. */
tfm_model *cli_load_model_for(const char *path, const cli_batch_options *o);

/* The longest input the model takes: --max-input-length, or its
 * max_positions; a usage error when the option asks for more. */
int cli_max_input(const cli_batch_options *o, const tfm_model *m);

/* A batch loop over ctx bounded by the options: a batch per thread, of
 * batch_size items and batch_tokens of cost each; output flushed with
 * cli_flush.  The caller sets read, ready, work, write and the rest. */
tfm_batch_loop cli_batch_loop(const cli_batch_options *o, void *ctx);

/* With two threads or more, a helper thread (tfm_helper) for the packed
 * products, registered with tfm_model_products_helper: it lends its CPU to
 * a worker whose fellows are idle.  NULL with one thread; the program
 * fails when the thread cannot start.  Free it with cli_products_helper_free. */
tfm_helper *cli_products_helper(const cli_batch_options *o);
void cli_products_helper_free(tfm_helper *helper);

/* Calls fn with each input named after the options (argv[optind..]), or
 * with "-" (standard input) when there is none. */
void cli_each_input(int argc, char **argv, void (*fn)(void *ctx, const char *name), void *ctx);

#endif
