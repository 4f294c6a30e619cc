/* log.c - the training log: a TSV file of a line per update and per
 * validation, under a header line.  A run started afresh writes a new log;
 * a resumed run adds to the log it had, when the file is there. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tfm/train.h"

struct tfm_train_log {
    FILE *fp;
};

static const char header[] =
    "step\tepoch\tloss\tppl\tlr\ttokens_per_s\telapsed\tset\tbleu\texact\ttokens\n";

tfm_status tfm_train_log_open(const char *path, bool resume, tfm_train_log **out, tfm_error *err)
{
    *out = NULL;
    tfm_train_log *log = calloc(1, sizeof *log);
    if (!log) return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    bool fresh = !resume || access(path, F_OK) != 0;
    log->fp = fopen(path, fresh ? "w" : "a");
    if (!log->fp) {
        tfm_error_set(err, TFM_ERR_IO, "%s: %s", path, strerror(errno));
        free(log);
        return TFM_ERR_IO;
    }
    if (fresh) fputs(header, log->fp);
    *out = log;
    return TFM_OK;
}

tfm_status tfm_train_log_write(tfm_train_log *log, const tfm_run_event *ev, tfm_error *err)
{
    const tfm_step_result *u = ev->update;
    const tfm_valid_result *v = ev->valid;
    if (ev->kind != TFM_RUN_STEP && ev->kind != TFM_RUN_VALID) return TFM_OK;
    const bool step = ev->kind == TFM_RUN_STEP;
    double lr = step ? u->lr : 0;
    double rate = step && ev->seconds > 0 ? (double)u->tgt_tokens / ev->seconds : 0;
    fprintf(log->fp, "%" PRId64 "\t%.4f\t%.6f\t%.4f\t%.6g\t%.1f\t%.3f\t%s", ev->step, ev->epoch,
            ev->loss, ev->ppl, lr, rate, ev->elapsed, step ? "train" : "valid");
    if (!step && v->decoded) fprintf(log->fp, "\t%.2f\t%.4f", v->bleu, v->exact);
    else fputs("\t-\t-", log->fp);
    fprintf(log->fp, "\t%" PRId64 "\n", step ? u->tgt_tokens : v->tgt_tokens);
    if (fflush(log->fp) != 0 || ferror(log->fp))
        return tfm_error_set(err, TFM_ERR_IO, "write error: %s", strerror(errno));
    return TFM_OK;
}

void tfm_train_log_close(tfm_train_log *log)
{
    if (!log) return;
    fclose(log->fp);
    free(log);
}
