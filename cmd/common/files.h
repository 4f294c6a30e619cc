/* files.h - the files a command line names: an input read line by line
 * ('-' is standard input), and an output that is standard output or a file
 * written atomically (-o FILE).  Failures print "prog: NAME: reason" and
 * exit 1, as the rest of the command-line layer does (cli.h). */
#ifndef TFM_CLI_FILES_H
#define TFM_CLI_FILES_H

#include "cli.h"

/* An input and its line reader. */
typedef struct cli_input {
    const char *name;       /* as given: "-" is standard input */
    int fd;
    tfm_line_reader *lines;
} cli_input;

/* Opens name (cli_open_input) and makes its line reader. */
void cli_input_open(cli_input *in, const char *name);
void cli_input_close(cli_input *in); /* frees the reader, closes the file (not stdin) */

/* Standard output, or a file written atomically (tfm_atomic_open): nothing
 * of it is seen until cli_output_close, and a failure leaves no file. */
typedef struct cli_output {
    const char *name;       /* for messages: the path, or "standard output" */
    bool is_file;
    tfm_atomic_file file;
} cli_output;

/* path NULL or "-": standard output. */
void cli_output_open(cli_output *out, const char *path);
FILE *cli_output_fp(cli_output *out);
void cli_output_write(cli_output *out, const char *data, size_t len);
/* Flushes standard output, or commits the file. */
void cli_output_close(cli_output *out);

#endif
