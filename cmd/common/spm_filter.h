/* spm_filter.h - a SentencePiece model (spm_train's .model, tfm/spm.h) as a
 * line filter on the command line: each line of the inputs encoded to ids
 * or pieces, decoded back to text, or normalised, byte for byte as
 * spm_encode and spm_decode do, and written in order to standard output.
 * 'tokenize -m FILE.model' runs it.  Example:
 *
 *     if (cli_is_spm_file(path)) {
 *         cli_spm_filter_params p = {.op = TFM_FILTER_ENCODE, .output = TFM_LINE_IDS,
 *                                    .threads = 4};
 *         cli_spm_filter_run(path, &p, argc, argv);
 *     }
 *
 * Failures print "prog: FILE:LINE: reason" and exit 1 (cli.h). */
#ifndef TFM_CLI_SPM_FILTER_H
#define TFM_CLI_SPM_FILTER_H

#include "cli.h"

/* What the filter does with each line. */
typedef struct cli_spm_filter_params {
    tfm_filter_op op;        /* encode, decode or normalize */
    tfm_line_format output;  /* encode: ids or pieces */
    tfm_line_format input;   /* decode: auto, ids or pieces */
    bool strict;             /* invalid UTF-8 is an error, not replaced by U+FFFD */
    int threads;             /* encode, normalize: workers (decode: one); < 1 is 1 */
} cli_spm_filter_params;

/* Whether path is a regular file that starts as a SentencePiece model
 * (tfm_spm_sniff), whatever its name; "-" is not. */
bool cli_is_spm_file(const char *path);

/* Loads the model at path and runs each input named after the options
 * (argv[optind..], or standard input; cli_each_input) through it, writing
 * a line per line read. */
void cli_spm_filter_run(const char *path, const cli_spm_filter_params *p, int argc, char **argv);

#endif
