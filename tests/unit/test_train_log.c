/* test_train_log.c - the training log (lib/train/log.c): the header and a
 * line per update and per validation, in the columns and formats of
 * train(1)'s --log; a resumed run adds to its log, a fresh one starts it
 * anew; a log that cannot be opened or written is an error naming why. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "testutil.h"
#include "tfm/train.h"

static const char header[] =
    "step\tepoch\tloss\tppl\tlr\ttokens_per_s\telapsed\tset\tbleu\texact\ttokens\n";

/* The whole of a file ("" when it cannot be read). */
static const char *slurp(const char *path)
{
    static char text[4096];
    text[0] = 0;
    FILE *fp = fopen(path, "rb");
    if (!fp) return text;
    size_t n = fread(text, 1, sizeof text - 1, fp);
    text[n] = 0;
    fclose(fp);
    return text;
}

static void write_events(tfm_train_log *log)
{
    tfm_error err;
    tfm_step_result u = {.lr = 2.5e-4, .tgt_tokens = 300};
    tfm_run_event step = {.kind = TFM_RUN_STEP, .step = 7, .epoch = 0.25, .elapsed = 12.34,
                          .seconds = 0.5, .update = &u, .loss = 3.5, .ppl = 20.0};
    tfm_valid_result v = {.decoded = true, .bleu = 12.345, .exact = 0.25, .tgt_tokens = 90};
    tfm_run_event valid = {.kind = TFM_RUN_VALID, .step = 8, .epoch = 0.5, .elapsed = 13,
                           .valid = &v, .loss = 2.25, .ppl = 9.5};
    tfm_run_event other = {.kind = TFM_RUN_CHECKPOINT, .text = "x"};
    CHECK(tfm_train_log_write(log, &step, &err) == TFM_OK);
    CHECK(tfm_train_log_write(log, &other, &err) == TFM_OK); /* no line */
    CHECK(tfm_train_log_write(log, &valid, &err) == TFM_OK);
    v.decoded = false;
    valid.step = 9;
    CHECK(tfm_train_log_write(log, &valid, &err) == TFM_OK);
}

static const char lines[] =
    "7\t0.2500\t3.500000\t20.0000\t0.00025\t600.0\t12.340\ttrain\t-\t-\t300\n"
    "8\t0.5000\t2.250000\t9.5000\t0\t0.0\t13.000\tvalid\t12.35\t0.2500\t90\n"
    "9\t0.5000\t2.250000\t9.5000\t0\t0.0\t13.000\tvalid\t-\t-\t90\n";

static void test_lines(void)
{
    const char *path = tmp_path("log.tsv");
    remove(path);
    tfm_train_log *log;
    tfm_error err;
    CHECK(tfm_train_log_open(path, false, &log, &err) == TFM_OK);
    write_events(log);
    char want[1024];
    snprintf(want, sizeof want, "%s%s", header, lines);
    CHECK_MSG(strcmp(slurp(path), want) == 0, "got:\n%s", slurp(path)); /* flushed per line */
    tfm_train_log_close(log);

    /* A resumed run adds to it, without a second header; a fresh run
     * starts it again. */
    CHECK(tfm_train_log_open(path, true, &log, &err) == TFM_OK);
    write_events(log);
    tfm_train_log_close(log);
    snprintf(want, sizeof want, "%s%s%s", header, lines, lines);
    CHECK_MSG(strcmp(slurp(path), want) == 0, "got:\n%s", slurp(path));
    CHECK(tfm_train_log_open(path, false, &log, &err) == TFM_OK);
    tfm_train_log_close(log);
    CHECK(strcmp(slurp(path), header) == 0);

    /* A resumed run without its log starts one, header first. */
    remove(path);
    CHECK(tfm_train_log_open(path, true, &log, &err) == TFM_OK);
    tfm_train_log_close(log);
    CHECK(strcmp(slurp(path), header) == 0);
    tfm_train_log_close(NULL);
}

static void test_failures(void)
{
    tfm_train_log *log = NULL;
    tfm_error err;
    const char *path = tmp_path("no/such/folder/log.tsv");
    CHECK(tfm_train_log_open(path, false, &log, &err) == TFM_ERR_IO && !log);
    CHECK_MSG(strstr(err.msg, path) && strstr(err.msg, "No such file"), "%s", err.msg);
    if (tfm_train_log_open("/dev/full", false, &log, &err) != TFM_OK) return;
    tfm_step_result u = {.tgt_tokens = 1};
    tfm_run_event step = {.kind = TFM_RUN_STEP, .update = &u};
    CHECK(tfm_train_log_write(log, &step, &err) == TFM_ERR_IO);
    CHECK_MSG(strcmp(err.msg, "write error: No space left on device") == 0, "%s", err.msg);
    tfm_train_log_close(log);
}

int main(void)
{
    test_tmpdir_init("test_train_log");
    RUN(test_lines);
    RUN(test_failures);
    test_tmpdir_cleanup();
    CHECK_DONE();
}
