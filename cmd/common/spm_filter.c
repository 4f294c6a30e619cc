/* spm_filter.c - a SentencePiece model as a line filter (see spm_filter.h):
 * the model file told by its first bytes, and the batch loop that encodes,
 * decodes or normalises the lines of each input with it ('tokenize -m
 * FILE.model'). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "files.h"
#include "filter.h"
#include "spm_filter.h"
#include "tfm/spm.h"

/* A model file that spm_train wrote (tfm/spm.h) encodes and decodes byte
 * for byte as spm_encode and spm_decode do.  It is told from a vocabulary or
 * a model file by its first bytes (tfm_spm_sniff), whatever its name.  The
 * lines go through a batch loop of their own: an encoder per worker, each
 * line's result (or error) kept in its slot and written in order. */

enum { SPM_BATCH_LINES = 1024, SPM_BATCH_BYTES = 1 << 22, SPM_MIN_LINES_PER_THREAD = 32 };

bool cli_is_spm_file(const char *path)
{
    struct stat st;
    if (strcmp(path, "-") == 0 || stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return false;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    unsigned char head[4096];
    size_t n = 0;
    for (ssize_t k; n < sizeof head && (k = read(fd, head + n, sizeof head - n)) != 0;) {
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) break;
        n += (size_t)k;
    }
    close(fd);
    return tfm_spm_sniff(head, n);
}

typedef struct spm_job {
    const tfm_spm *m;
    tfm_filter_op op;
    tfm_line_format output, input;
    bool strict;
    int workers;
    tfm_spm_encoder **enc;  /* [workers] */
    tfm_ids *ids;           /* [workers] */
    /* a slot per line of the batch */
    tfm_buf *line, *out;
    size_t *repaired;
    tfm_status *status;
    tfm_error *errors;
    /* the input being read */
    tfm_line_reader *lines;
    const char *name;
    size_t written;         /* lines of it written */
} spm_job;

static tfm_status spm_read(void *ctx, size_t slot, size_t *cost, tfm_error *err)
{
    spm_job *job = ctx;
    const char *line;
    size_t len;
    tfm_status s = tfm_lines_next(job->lines, &line, &len, err);
    if (s != TFM_OK) return s;
    tfm_buf_clear(&job->line[slot]);
    if (tfm_buf_append(&job->line[slot], line, len) != TFM_OK)
        return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    *cost = len + 1;
    return TFM_OK;
}

static bool spm_ready(void *ctx)
{
    spm_job *job = ctx;
    return tfm_lines_ready(job->lines);
}

/* One line as worker w: its result in out[slot], its failure in status. */
static void spm_line(spm_job *job, int w, size_t slot)
{
    const tfm_buf *in = &job->line[slot];
    const char *text = in->len ? in->data : "";
    tfm_buf *out = &job->out[slot];
    tfm_ids *ids = &job->ids[w];
    tfm_error *err = &job->errors[slot];
    tfm_status s = TFM_OK;
    job->repaired[slot] = 0;
    tfm_buf_clear(out);
    switch (job->op) {
    case TFM_FILTER_ENCODE:
        if (job->output == TFM_LINE_PIECES) {
            s = tfm_spm_encode_pieces(job->enc[w], text, in->len, out, &job->repaired[slot], err);
        } else {
            s = tfm_spm_encode(job->enc[w], text, in->len, ids, &job->repaired[slot], err);
            if (s == TFM_OK && tfm_ids_format(ids->data, ids->len, out) != TFM_OK)
                s = tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
        }
        break;
    case TFM_FILTER_NORMALIZE: {
        tfm_ids dummy;
        tfm_ids_init(&dummy);
        /* the invalid bytes are counted by encoding's normalizer */
        s = tfm_spm_normalize(job->enc[w], text, in->len, out, err);
        if (s == TFM_OK && job->strict)
            s = tfm_spm_encode(job->enc[w], text, in->len, &dummy, &job->repaired[slot], err);
        tfm_ids_free(&dummy);
        break;
    }
    default: { /* TFM_FILTER_DECODE */
        bool as_ids = job->input == TFM_LINE_IDS ||
                      (job->input == TFM_LINE_AUTO && tfm_id_line_count(text, in->len) >= 0);
        if (as_ids) {
            s = tfm_ids_parse(text, in->len, tfm_spm_size(job->m), ids, err);
            if (s == TFM_OK) s = tfm_spm_decode(job->m, ids->data, ids->len, out, err);
        } else {
            s = tfm_spm_decode_pieces(job->m, text, in->len, out, err);
        }
        break;
    }
    }
    if (s == TFM_OK && job->strict && job->repaired[slot] > 0)
        s = tfm_error_set(err, TFM_ERR_UTF8, "invalid UTF-8 (%zu byte%s; --strict)",
                          job->repaired[slot], job->repaired[slot] == 1 ? "" : "s");
    job->status[slot] = s;
}

static tfm_status spm_work(void *ctx, int worker, size_t lo, size_t hi, tfm_error *err)
{
    spm_job *job = ctx;
    for (size_t slot = lo; slot < hi; slot++) spm_line(job, worker, slot);
    return TFM_OK;
}

static tfm_status spm_write(void *ctx, size_t slot, tfm_error *err)
{
    spm_job *job = ctx;
    if (job->status[slot] != TFM_OK) {
        *err = job->errors[slot];
        return job->status[slot];
    }
    job->written++;
    size_t r = job->repaired[slot];
    if (r)
        cli_warn(job->name, job->written, "invalid UTF-8 replaced by U+FFFD (%zu byte%s)", r,
                 r == 1 ? "" : "s");
    cli_write_line(job->out[slot].data ? job->out[slot].data : "", job->out[slot].len);
    return TFM_OK;
}

static void flush_output(void *ctx)
{
    (void)ctx;
    cli_flush();
}

/* Runs one input through the batch loop; where it stopped is a line (read
 * or worked on), or the file as a whole. */
static void spm_file(void *ctx, const char *name)
{
    spm_job *job = ctx;
    cli_input in;
    cli_input_open(&in, name);
    job->lines = in.lines;
    job->name = name;
    job->written = 0;
    tfm_batch_loop loop = {.ctx = job, .max_items = SPM_BATCH_LINES, .max_cost = SPM_BATCH_BYTES,
                           .threads = job->workers,
                           .min_items_per_slice = SPM_MIN_LINES_PER_THREAD,
                           .read = spm_read, .ready = spm_ready, .work = spm_work,
                           .write = spm_write, .flush = flush_output};
    tfm_batch_failure f;
    if (tfm_batch_loop_run(&loop, &f) != TFM_OK) {
        cli_flush();
        cli_fail(name, f.stage == TFM_BATCH_WORK ? 0 : f.item + 1, "%s", f.err.msg);
    }
    cli_input_close(&in);
}

void cli_spm_filter_run(const char *path, const cli_spm_filter_params *p, int argc, char **argv)
{
    tfm_spm *m;
    tfm_error err;
    if (tfm_spm_load(path, &m, &err) != TFM_OK) cli_fail(path, 0, "%s", err.msg);
    spm_job job = {.m = m, .op = p->op, .output = p->output, .input = p->input,
                   .strict = p->strict, .workers = p->op == TFM_FILTER_DECODE ? 1 : p->threads};
    if (job.workers < 1) job.workers = 1;
    job.enc = calloc((size_t)job.workers, sizeof *job.enc);
    job.ids = calloc((size_t)job.workers, sizeof *job.ids);
    job.line = calloc(SPM_BATCH_LINES, sizeof *job.line);
    job.out = calloc(SPM_BATCH_LINES, sizeof *job.out);
    job.repaired = calloc(SPM_BATCH_LINES, sizeof *job.repaired);
    job.status = calloc(SPM_BATCH_LINES, sizeof *job.status);
    job.errors = calloc(SPM_BATCH_LINES, sizeof *job.errors);
    if (!job.enc || !job.ids || !job.line || !job.out || !job.repaired || !job.status ||
        !job.errors)
        cli_fail(NULL, 0, "out of memory");
    for (int w = 0; w < job.workers; w++)
        if (tfm_spm_encoder_create(m, &job.enc[w], &err) != TFM_OK)
            cli_fail(path, 0, "%s", err.msg);
    cli_info("SentencePiece %s model %s: %d pieces; %d thread%s",
             tfm_spm_type(m) == TFM_SPM_BPE ? "BPE" : "unigram", path, tfm_spm_size(m),
             job.workers, job.workers == 1 ? "" : "s");
    cli_each_input(argc, argv, spm_file, &job);
    cli_flush();
    for (int w = 0; w < job.workers; w++) {
        tfm_spm_encoder_free(job.enc[w]);
        tfm_ids_free(&job.ids[w]);
    }
    for (size_t i = 0; i < SPM_BATCH_LINES; i++) {
        tfm_buf_free(&job.line[i]);
        tfm_buf_free(&job.out[i]);
    }
    free(job.enc);
    free(job.ids);
    free(job.line);
    free(job.out);
    free(job.repaired);
    free(job.status);
    free(job.errors);
    tfm_spm_free(m);
}

