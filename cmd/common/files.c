/* files.c - the files a command line names (see files.h). */
#include <string.h>

#include "files.h"

void cli_input_open(cli_input *in, const char *name)
{
    in->name = name;
    in->fd = cli_open_input(name);
    in->lines = tfm_lines_create(in->fd);
    if (!in->lines) cli_fail(NULL, 0, "out of memory");
}

void cli_input_close(cli_input *in)
{
    tfm_lines_free(in->lines);
    cli_close_input(in->fd);
    in->lines = NULL;
}

void cli_output_open(cli_output *out, const char *path)
{
    out->name = path ? path : "standard output";
    out->is_file = path != NULL && strcmp(path, "-") != 0;
    if (!out->is_file) return;
    tfm_error err;
    if (tfm_atomic_open(&out->file, path, &err) != TFM_OK) cli_fail(path, 0, "%s", err.msg);
}

FILE *cli_output_fp(cli_output *out)
{
    return out->is_file ? out->file.fp : stdout;
}

void cli_output_write(cli_output *out, const char *data, size_t len)
{
    if (!out->is_file) {
        cli_write(data, len);
        return;
    }
    if (len && fwrite(data, 1, len, out->file.fp) != len) {
        tfm_atomic_abort(&out->file);
        cli_fail(out->name, 0, "write error");
    }
}

void cli_output_close(cli_output *out)
{
    if (!out->is_file) {
        cli_flush();
        return;
    }
    tfm_error err;
    if (tfm_atomic_commit(&out->file, &err) != TFM_OK) cli_fail(out->name, 0, "%s", err.msg);
}
