/* cli.h - the command-line layer every program shares: messages in the
 * form "prog: FILE:LINE: what is wrong", checked number parsing, exit codes
 * (0 success, 1 failure, 2 usage), input files with '-' for stdin, and
 * output that ends quietly when the reader of a pipe goes away. */
#ifndef TFM_CLI_H
#define TFM_CLI_H

#include <stdbool.h>
#include <stdio.h>

#include "tfm.h"

enum { CLI_EXIT_OK = 0, CLI_EXIT_FAILURE = 1, CLI_EXIT_USAGE = 2 };

/* Sets the program name used in messages, restores the default SIGPIPE
 * action (so that "prog | head" ends quietly even when the parent ignored
 * it), and makes OpenBLAS's idle threads sleep instead of spinning (which
 * may start the program again with its environment set: call it first). */
void cli_init(const char *program_name, char **argv);
const char *cli_program(void);
/* Names the program in messages from now on (the name must outlive its
 * use): train's ranks other than 0 are "train: rank N". */
void cli_set_program(const char *name);

/* Verbosity: -q sets it to 0 (errors only), -v to 2; warnings print at >= 1. */
extern int cli_verbosity;

/* "prog: FILE:LINE: message" (LINE omitted when 0, FILE when NULL). */
void cli_error(const char *file, size_t line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The same with "warning: " and only when verbosity >= 1; after 100 warnings
 * one line says the rest are not shown. */
void cli_warn(const char *file, size_t line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Prints at verbosity >= 2. */
void cli_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* cli_error, then exit(1). */
_Noreturn void cli_fail(const char *file, size_t line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* "prog: message" and "Try 'prog --help' for more information.", exit(2). */
_Noreturn void cli_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Prints "prog (tfm) VERSION" to stdout. */
void cli_print_version(void);

/* The long options every program shares; put last in a long_options table,
 * before the terminating {NULL, 0, NULL, 0}, and handle them with
 * cli_common_option (their short forms are "qvhV"). */
#define CLI_COMMON_LONG_OPTIONS                                                \
    {"quiet", no_argument, NULL, 'q'}, {"verbose", no_argument, NULL, 'v'},    \
        {"help", no_argument, NULL, 'h'}, {"version", no_argument, NULL, 'V'}

/* Their lines in a --help text. */
#define CLI_COMMON_HELP                                                        \
    "  -q, --quiet                print errors only\n"                       \
    "  -v, --verbose              print more about what is done\n"           \
    "  -h, --help                 display this help and exit\n"              \
    "  -V, --version              output version information and exit\n"

/* The options every program shares, for the default branch of a getopt_long
 * switch: -q, -v, -h (prints usage_text and exits 0), -V (exits 0); any
 * other option is a usage error. */
void cli_common_option(int c, const char *usage_text);

/* Warns, once per process, when TFM_ISA in the environment holds a value
 * the kernel choice ignores (TFM_ISA=AVX2, say).  Every program that loads
 * a model calls it (cli_load_model, cli_load_model_for), train too. */
void cli_warn_unknown_isa(void);

/* Loads a model file or exits with "prog: PATH: reason" (PATH left out
 * when the reason names it already). */
tfm_model *cli_load_model(const char *path);

/* With -v: "prog: model PATH: <tfm_config_describe>; N threads" (`what`
 * names the threads, "thread" or "BLAS thread"). */
void cli_info_model(const char *path, const tfm_model *m, int threads, const char *what);

/* Checked number parsing for option values: the whole string must be a
 * number within [min, max], else a usage error naming the option. */
long long cli_parse_int(const char *option, const char *text, long long min, long long max);
double cli_parse_double(const char *option, const char *text, double min, double max);
/* One of the NULL-terminated choices; returns its index, else a usage error. */
int cli_parse_choice(const char *option, const char *text, const char *const *choices);

/* Opens an input for reading as a file descriptor: "-" is stdin.  Exits
 * with "prog: NAME: reason" when it cannot be opened. */
int cli_open_input(const char *name);
void cli_close_input(int fd);

/* Writes to stdout; on failure prints the reason and exits 1. */
void cli_write(const void *data, size_t len);
void cli_write_line(const char *data, size_t len); /* data and '\n' */
void cli_flush(void);
/* Flushes and closes standard output once a program has written all of it:
 * the next program of a pipeline sees its end of file then, not after this
 * one has freed its model and ended its threads (a write error is fatal). */
void cli_close_output(void);

#endif
