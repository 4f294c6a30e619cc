/* train/run_internal.h - what the two files of a training run share,
 * internal to lib/train: the run (struct tfm_run), which run_options.c
 * makes from its options (tfm_run_create) and run.c trains (tfm_run_train),
 * and the two helpers of run.c's that both call. */
#ifndef TFM_TRAIN_RUN_INTERNAL_H
#define TFM_TRAIN_RUN_INTERNAL_H

#include "tfm/train.h"

/* ---- the run ------------------------------------------------------------------------ */

struct tfm_run {
    const char *const *given;
    char *stored[TFM_RUN_OPTION_COUNT];         /* the checkpoint's (owned) */
    char defaults[TFM_RUN_OPTION_COUNT][32];
    const char *value[TFM_RUN_OPTION_COUNT];    /* in effect */
    tfm_run_params p;
    tfm_run_report *report;
    void *ctx;
    const volatile sig_atomic_t *stop;
    tfm_dist *dist;            /* NULL: one process */

    tfm_buf prefix;            /* checkpoints are PREFIX-STEP */
    tfm_buf best;              /* MODEL.best */
    tfm_buf scratch;
    char *resume_path;         /* the checkpoint resumed from */
    tfm_model *init_model;     /* --init's, until the trainer takes it */
    tfm_vocab *vocab;          /* joint, or the target side's */
    tfm_vocab *src_vocab;      /* the source side's own, or NULL */
    tfm_corpus *data, *valid;
    tfm_corpus *probe;         /* without validation data: training pairs to diagnose on */
    tfm_trainer *trainer;
    tfm_run_state rs;
    double started;            /* this process's start of training */
    int64_t first_step;        /* the step count when it started */
    double first_epoch;
    int64_t last_saved;        /* step of the newest checkpoint written or resumed from */
    int64_t run_tokens;        /* target tokens of this process's updates */
    int64_t run_updates;       /* and their number, */
    double run_wait, run_reduce; /* seconds waiting for the other ranks, summing gradients */
    int checkpoint_ranks;      /* the processes that trained the checkpoint resumed from */
    tfm_train_log *log;        /* NULL: none, or given up after a write failed */
    bool diagnosed;            /* the not-learning warning (tfm_diagnose_validation) was given */
    tfm_lock lock;             /* OUTPUT.lock, while training writes OUTPUT */
};

/* A warning (TFM_RUN_WARNING) to the run's report callback, if it has one. */
void run_warn(tfm_run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A failure of a call that reads a file is never a usage error: st, with
 * TFM_ERR_ARG made TFM_ERR_FORMAT. */
tfm_status run_not_usage(tfm_status st);

#endif
