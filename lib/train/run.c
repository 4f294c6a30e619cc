/* run.c - a training run: the policy around the trainer that every front
 * end of training needs (train(1), a program of a user's on libtfm.a).
 *
 * The options of a run are texts, each from one source: the library's
 * default parameters, the caller, or on resume the checkpoint it resumes
 * from.  Their effective values are stored in every checkpoint and model as
 * "train.opt.NAME", beside the run's own state ("train.elapsed",
 * "train.best_score", "train.best_step", "train.bad_validations"), so a
 * resumed run continues with the options and the early-stopping record it
 * had.  The loop makes updates (tfm_trainer_step) until a limit, a stop
 * request or early stopping; validates every valid_every updates, keeping
 * the best model as MODEL.best; saves a checkpoint every save_every and
 * keeps the newest keep; and at the end saves a checkpoint and writes the
 * model, or the average of the last average_last checkpoints.
 *
 * Across processes (tfm_run_set_dist) every rank trains, and rank 0 alone
 * validates and writes: checkpoints, the best model, the log and the model.
 * The ranks agree before each update whether to stop (one may get a signal
 * or reach the time limit first; rank 0 alone knows of early stopping), and
 * check at the start that they read the same data and start from the same
 * weights.
 *
 * Nothing here prints: what happens goes to the caller's report callback,
 * and failures return a status with a message that names the file. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tfm/train.h"

enum { NO_ARG = 0, ARG = 1, OPTIONAL_ARG = 2 };

#define M TFM_KIND_MODEL
#define T TFM_KIND_TRAIN
#define R TFM_KIND_RUN
#define O TFM_KIND_ONCE
const tfm_run_option_info tfm_run_options[TFM_RUN_OPTION_COUNT] = {
    [TFM_OPT_PRESET] = {"preset", ARG, M},
    [TFM_OPT_D_MODEL] = {"d-model", ARG, M},
    [TFM_OPT_D_FF] = {"d-ff", ARG, M},
    [TFM_OPT_HEADS] = {"heads", ARG, M},
    [TFM_OPT_LAYERS] = {"layers", ARG, M},
    [TFM_OPT_ENC_LAYERS] = {"encoder-layers", ARG, M},
    [TFM_OPT_DEC_LAYERS] = {"decoder-layers", ARG, M},
    [TFM_OPT_MAX_POS] = {"max-positions", ARG, M},
    [TFM_OPT_PRE_NORM] = {"pre-norm", NO_ARG, M},
    [TFM_OPT_LEARNED_POS] = {"learned-positions", NO_ARG, M},
    [TFM_OPT_RELATIVE_POS] = {"relative-positions", ARG, M},
    [TFM_OPT_ABSOLUTE_POS] = {"absolute-positions", NO_ARG, M},
    [TFM_OPT_ATTN_WINDOW] = {"attention-window", ARG, M},
    [TFM_OPT_DROPOUT] = {"dropout", ARG, M},
    [TFM_OPT_ATTN_DROPOUT] = {"attention-dropout", ARG, M},
    [TFM_OPT_ACT_DROPOUT] = {"activation-dropout", ARG, M},
    [TFM_OPT_LABEL_SMOOTHING] = {"label-smoothing", ARG, M},
    [TFM_OPT_VOCAB] = {"vocab", ARG, M},
    [TFM_OPT_SRC_VOCAB] = {"src-vocab", ARG, M},
    [TFM_OPT_TGT_VOCAB] = {"tgt-vocab", ARG, M},
    [TFM_OPT_VOCAB_SIZE] = {"vocab-size", ARG, M},
    [TFM_OPT_SRC] = {"src", ARG, T},
    [TFM_OPT_TGT] = {"tgt", ARG, T},
    [TFM_OPT_INPUT_FORMAT] = {"input-format", ARG, T},
    [TFM_OPT_MAX_LENGTH] = {"max-length", ARG, T},
    [TFM_OPT_NO_EOS] = {"no-eos", NO_ARG, T},
    [TFM_OPT_VALID_SRC] = {"valid-src", ARG, R},
    [TFM_OPT_VALID_TGT] = {"valid-tgt", ARG, R},
    [TFM_OPT_BATCH_TOKENS] = {"batch-tokens", ARG, T},
    [TFM_OPT_ACCUM] = {"accum", ARG, T},
    [TFM_OPT_SORT_WINDOW] = {"sort-window", ARG, T},
    [TFM_OPT_SCHEDULE] = {"schedule", ARG, T},
    [TFM_OPT_LR_FACTOR] = {"lr-factor", ARG, T},
    [TFM_OPT_WARMUP] = {"warmup", ARG, T},
    [TFM_OPT_CLIP_NORM] = {"clip-norm", ARG, T},
    [TFM_OPT_EMA] = {"ema", ARG, T},
    [TFM_OPT_SEED] = {"seed", ARG, T},
    [TFM_OPT_THREADS] = {"threads", ARG, R},
    [TFM_OPT_MAX_STEPS] = {"max-steps", ARG, R},
    [TFM_OPT_MAX_EPOCHS] = {"max-epochs", ARG, R},
    [TFM_OPT_MAX_TIME] = {"max-time", ARG, R},
    [TFM_OPT_VALID_EVERY] = {"valid-every", ARG, R},
    [TFM_OPT_VALID_BLEU] = {"valid-bleu", NO_ARG, R},
    [TFM_OPT_PATIENCE] = {"patience", ARG, R},
    [TFM_OPT_SAVE_EVERY] = {"save-every", ARG, R},
    [TFM_OPT_KEEP] = {"keep", ARG, R},
    [TFM_OPT_CHECKPOINT_DIR] = {"checkpoint-dir", ARG, R},
    [TFM_OPT_AVERAGE_LAST] = {"average-last", ARG, R},
    [TFM_OPT_LOG] = {"log", ARG, R},
    [TFM_OPT_PROGRESS] = {"progress", ARG, O},
    [TFM_OPT_DEBUG_NAN] = {"debug-inject-nan", ARG, O},
    [TFM_OPT_RESUME] = {"resume", OPTIONAL_ARG, O},
    [TFM_OPT_OUTPUT] = {"output", ARG, O},
    [TFM_OPT_INIT_ONLY] = {"init-only", NO_ARG, O},
    [TFM_OPT_INIT] = {"init", ARG, O},
};
#undef M
#undef T
#undef R
#undef O

static const char *const input_formats[] = {"auto", "ids", "text", NULL};
static const char *const schedules[] = {"noam", "linear", "wsd", "constant",
                                        NULL}; /* tfm_schedule's order */

tfm_run_params tfm_run_default_params(void)
{
    tfm_run_params p = {
        .preset = "base",
        .corpus = tfm_corpus_default_params(),
        .train = tfm_train_default_params(),
        .threads = tfm_cpu_count(),
        .valid_every = 1000,
        .save_every = 1000,
        .keep = 5,
    };
    p.seed = p.train.seed;
    tfm_config_preset(p.preset, &p.model, NULL);
    return p;
}

bool tfm_run_option_default(tfm_run_option id, char *out, size_t size)
{
    tfm_run_params p = tfm_run_default_params();
    const tfm_train_params *t = &p.train;
    int n = -1;
    switch (id) {
    case TFM_OPT_PRESET: n = snprintf(out, size, "%s", p.preset); break;
    case TFM_OPT_INPUT_FORMAT: n = snprintf(out, size, "%s", input_formats[p.corpus.format]); break;
    case TFM_OPT_MAX_LENGTH: n = snprintf(out, size, "%d", p.corpus.max_length); break;
    case TFM_OPT_BATCH_TOKENS: n = snprintf(out, size, "%" PRId64, t->batches.batch_tokens); break;
    case TFM_OPT_ACCUM: n = snprintf(out, size, "%d", t->accum); break;
    case TFM_OPT_SORT_WINDOW: n = snprintf(out, size, "%d", t->batches.window); break;
    case TFM_OPT_RELATIVE_POS: n = snprintf(out, size, "%s", TFM_AUTO_RELATIVE_POSITIONS); break;
    case TFM_OPT_SCHEDULE: /* fall through: resolve_schedule */
    case TFM_OPT_LR_FACTOR:
    case TFM_OPT_WARMUP: n = snprintf(out, size, "auto"); break;
    case TFM_OPT_CLIP_NORM: n = snprintf(out, size, "%g", t->clip_norm); break;
    case TFM_OPT_EMA: n = snprintf(out, size, "%g", t->ema_decay); break;
    case TFM_OPT_SEED: n = snprintf(out, size, "%" PRIu64, p.seed); break;
    case TFM_OPT_MAX_STEPS: n = snprintf(out, size, "%" PRId64, p.max_steps); break;
    case TFM_OPT_MAX_EPOCHS: n = snprintf(out, size, "%" PRId64, p.max_epochs); break;
    case TFM_OPT_MAX_TIME: n = snprintf(out, size, "%g", p.max_time); break;
    case TFM_OPT_VALID_EVERY: n = snprintf(out, size, "%" PRId64, p.valid_every); break;
    case TFM_OPT_PATIENCE: n = snprintf(out, size, "%d", p.patience); break;
    case TFM_OPT_SAVE_EVERY: n = snprintf(out, size, "%" PRId64, p.save_every); break;
    case TFM_OPT_KEEP: n = snprintf(out, size, "%d", p.keep); break;
    case TFM_OPT_AVERAGE_LAST: n = snprintf(out, size, "%d", p.average_last); break;
    default:
        if (size) out[0] = 0;
        break;
    }
    return n >= 0;
}

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

static double elapsed(const tfm_run *r)
{
    return r->rs.elapsed + (tfm_clock_seconds() - r->started);
}

static void warn(tfm_run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warn(tfm_run *r, const char *fmt, ...)
{
    if (!r->report) return;
    char text[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    tfm_run_event ev = {.kind = TFM_RUN_WARNING, .text = text, .time = tfm_clock_seconds(),
                        .ranks = tfm_dist_size(r->dist)};
    r->report(r->ctx, &ev);
}

/* Writes ev's line to the log.  A log that cannot be written is given up
 * with one warning: training, worth more than its log, goes on and writes
 * its checkpoints and model. */
static void log_event(tfm_run *r, const tfm_run_event *ev)
{
    tfm_error err;
    if (!r->log || tfm_train_log_write(r->log, ev, &err) == TFM_OK) return;
    tfm_train_log_close(r->log);
    r->log = NULL;
    if (!r->report) return;
    char text[600];
    snprintf(text, sizeof text, "%s; training goes on without the log", err.msg);
    tfm_run_event w = {.kind = TFM_RUN_WARNING, .text = text, .file = r->p.log,
                       .time = tfm_clock_seconds(), .ranks = tfm_dist_size(r->dist)};
    r->report(r->ctx, &w);
}

/* An event of the trainer's position now. */
static tfm_run_event event(const tfm_run *r, tfm_run_event_kind kind)
{
    tfm_run_event ev = {.kind = kind, .time = tfm_clock_seconds(), .ranks = tfm_dist_size(r->dist)};
    if (r->trainer) {
        ev.step = tfm_trainer_steps(r->trainer);
        ev.epoch = tfm_trainer_epoch(r->trainer);
        ev.elapsed = r->rs.elapsed + (ev.time - r->started);
    }
    return ev;
}

static void emit(const tfm_run *r, const tfm_run_event *ev)
{
    if (r->report) r->report(r->ctx, ev);
}

/* Rank 0 validates and writes files; the other ranks only train. */
static bool writes(const tfm_run *r)
{
    return tfm_dist_rank(r->dist) == 0;
}

/* A failure of a call that reads a file is never a usage error. */
static tfm_status not_usage(tfm_status st)
{
    return st == TFM_ERR_ARG ? TFM_ERR_FORMAT : st;
}

/* ---- options as texts ---------------------------------------------------------------- */

static tfm_status int_option(const tfm_run *r, tfm_run_option id, long long lo, long long hi,
                             long long *out, tfm_error *err)
{
    const char *text = r->value[id], *name = tfm_run_options[id].name;
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (end == text || *end != 0 || errno == ERANGE)
        return tfm_error_set(err, TFM_ERR_ARG, "--%s: '%s' is not an integer", name, text);
    if (v < lo || v > hi)
        return tfm_error_set(err, TFM_ERR_ARG, "--%s: %lld is out of range (%lld to %lld)", name,
                             v, lo, hi);
    *out = v;
    return TFM_OK;
}

static tfm_status double_option(const tfm_run *r, tfm_run_option id, double lo, double hi,
                                double *out, tfm_error *err)
{
    const char *text = r->value[id], *name = tfm_run_options[id].name;
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (end == text || *end != 0 || errno == ERANGE || !isfinite(v))
        return tfm_error_set(err, TFM_ERR_ARG, "--%s: '%s' is not a number", name, text);
    if (v < lo || v > hi)
        return tfm_error_set(err, TFM_ERR_ARG, "--%s: %g is out of range (%g to %g)", name, v, lo,
                             hi);
    *out = v;
    return TFM_OK;
}

static bool flag_option(const tfm_run *r, tfm_run_option id)
{
    return r->value[id] && strcmp(r->value[id], "yes") == 0;
}

tfm_status tfm_parse_duration(const char *option, const char *text, double *seconds,
                              tfm_error *err)
{
    double total = 0;
    const char *s = text;
    if (!*s) return tfm_error_set(err, TFM_ERR_ARG, "%s: an empty duration", option);
    while (*s) {
        char *end;
        errno = 0;
        double v = strtod(s, &end);
        double unit = 1;
        bool ok = end != s && !errno && v >= 0 && isfinite(v);
        switch (ok ? *end : '?') {
        case 'd': unit = 86400; end++; break;
        case 'h': unit = 3600; end++; break;
        case 'm': unit = 60; end++; break;
        case 's': end++; break;
        case 0: break;
        default:
            return tfm_error_set(err, TFM_ERR_ARG,
                                 "%s: '%s' is not a duration (seconds, or 1h30m style)", option,
                                 text);
        }
        total += v * unit;
        s = end;
    }
    *seconds = total;
    return TFM_OK;
}

/* The positions: relative ones (--relative-positions K) replace the
 * absolute ones unless --absolute-positions keeps them as well (sinusoids,
 * or the learned table with --learned-positions); --learned-positions
 * alone beside relative positions is a contradiction, not a guess. */
static tfm_status resolve_positions(tfm_run *r, tfm_error *err)
{
    tfm_config *c = &r->p.model;
    const bool absolute = flag_option(r, TFM_OPT_ABSOLUTE_POS);
    /* The default relative positions give way to the absolute ones asked
     * for by name. */
    if (!r->given[TFM_OPT_RELATIVE_POS] && !r->stored[TFM_OPT_RELATIVE_POS] &&
        (flag_option(r, TFM_OPT_LEARNED_POS) || absolute))
        r->value[TFM_OPT_RELATIVE_POS] = NULL;
    if (!r->value[TFM_OPT_RELATIVE_POS]) {
        if (absolute)
            return tfm_error_set(err, TFM_ERR_ARG,
                                 "--absolute-positions goes with --relative-positions K "
                                 "(without them, absolute positions are the only ones)");
        return TFM_OK;
    }
    long long k;
    tfm_status st = int_option(r, TFM_OPT_RELATIVE_POS, INT_MIN, INT_MAX, &k, err);
    if (st) return st;
    if (k < 0 || k > c->max_positions - 1)
        return tfm_error_set(err, TFM_ERR_ARG,
                             "--relative-positions %lld: the clipping distance goes from 1 to "
                             "max_positions - 1 = %d (0: none)",
                             k, c->max_positions - 1);
    c->relative_positions = (int)k;
    if (k == 0) return TFM_OK;
    if (c->positions == TFM_POS_LEARNED && !absolute)
        return tfm_error_set(err, TFM_ERR_ARG,
                             "--learned-positions with --relative-positions: relative positions "
                             "replace the absolute ones; add --absolute-positions to learn both");
    if (!absolute) c->positions = TFM_POS_NONE;
    return TFM_OK;
}

/* The model's options.  Their ranges are tfm_config_validate's: numbers are
 * only checked to be numbers here. */
static tfm_status resolve_model(tfm_run *r, tfm_error *err)
{
    tfm_config *c = &r->p.model;
    tfm_status st;
    if ((st = tfm_config_preset(r->value[TFM_OPT_PRESET], c, err))) {
        tfm_error_prefix(err, "--preset");
        return TFM_ERR_ARG;
    }
    r->p.preset = r->value[TFM_OPT_PRESET];
    static const tfm_run_option ints[] = {TFM_OPT_D_MODEL, TFM_OPT_D_FF, TFM_OPT_HEADS,
                                          TFM_OPT_LAYERS, TFM_OPT_ENC_LAYERS, TFM_OPT_DEC_LAYERS,
                                          TFM_OPT_MAX_POS, TFM_OPT_ATTN_WINDOW};
    int *int_fields[] = {&c->d_model, &c->d_ff, &c->n_heads, &c->n_encoder_layers,
                         &c->n_encoder_layers, &c->n_decoder_layers, &c->max_positions,
                         &c->attention_window};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        long long v;
        if (!r->value[ints[i]]) continue;
        if ((st = int_option(r, ints[i], INT_MIN, INT_MAX, &v, err))) return st;
        *int_fields[i] = (int)v;
        if (ints[i] == TFM_OPT_LAYERS) c->n_decoder_layers = (int)v;
    }
    static const tfm_run_option rates[] = {TFM_OPT_DROPOUT, TFM_OPT_ATTN_DROPOUT,
                                           TFM_OPT_ACT_DROPOUT, TFM_OPT_LABEL_SMOOTHING};
    float *rate_fields[] = {&c->dropout, &c->attention_dropout, &c->activation_dropout,
                            &c->label_smoothing};
    for (size_t i = 0; i < sizeof rates / sizeof rates[0]; i++) {
        double v;
        if (!r->value[rates[i]]) continue;
        if ((st = double_option(r, rates[i], -HUGE_VAL, HUGE_VAL, &v, err))) return st;
        *rate_fields[i] = (float)v;
    }
    if (flag_option(r, TFM_OPT_PRE_NORM)) c->pre_norm = true;
    if (flag_option(r, TFM_OPT_LEARNED_POS)) c->positions = TFM_POS_LEARNED;
    return resolve_positions(r, err);
}

/* Sets option id's text in effect to text (its own copy, which the
 * checkpoints then store). */
static void set_value(tfm_run *r, tfm_run_option id, const char *text)
{
    snprintf(r->defaults[id], sizeof r->defaults[id], "%s", text);
    r->value[id] = r->defaults[id];
}

/* --warmup: N updates, or P% of the run's updates, or P%,N: P% but at
 * least N updates (at most half of them). */
static tfm_status warmup_option(tfm_run *r, tfm_train_params *t, tfm_error *err)
{
    const char *text = r->value[TFM_OPT_WARMUP];
    const char *share_end = strchr(text, '%');
    if (!share_end) {
        long long v;
        tfm_status st = int_option(r, TFM_OPT_WARMUP, 1, INT32_MAX, &v, err);
        if (st) return st;
        t->warmup = (int)v;
        t->warmup_share = 0;
        return TFM_OK;
    }
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    long long least = 0;
    bool ok = end == share_end && errno != ERANGE && v > 0 && v < 100;
    if (ok && share_end[1] == ',') {
        errno = 0;
        least = strtoll(share_end + 2, &end, 10);
        ok = end != share_end + 2 && *end == 0 && errno != ERANGE && least >= 1 &&
             least <= INT32_MAX && share_end[2] >= '0' && share_end[2] <= '9';
    } else if (ok) {
        ok = share_end[1] == 0;
    }
    if (!ok)
        return tfm_error_set(err, TFM_ERR_ARG,
                             "--warmup: '%s' is neither a number of updates nor a share of them "
                             "above 0%% and below 100%% (P%%, or P%%,N for at least N updates)",
                             text);
    t->warmup_share = v / 100;
    t->warmup_least = (int)least;
    return TFM_OK;
}

/* --schedule, --lr-factor and --warmup, whose "auto" depends on the budget:
 * with one, the budgeted schedule and its recipe; without, the paper's.
 * The texts in effect become the values chosen, which the checkpoints keep. */
static tfm_status resolve_schedule(tfm_run *r, tfm_error *err)
{
    tfm_run_params *p = &r->p;
    tfm_train_params *t = &p->train;
    bool budget = p->max_steps > 0 || p->max_time > 0 || p->max_epochs > 0;
    const char *text = r->value[TFM_OPT_SCHEDULE];
    int kind = -1;
    for (int i = 0; schedules[i]; i++)
        if (strcmp(text, schedules[i]) == 0) kind = i;
    if (strcmp(text, "auto") == 0) kind = budget ? TFM_AUTO_SCHEDULE : TFM_SCHEDULE_NOAM;
    if (kind < 0)
        return tfm_error_set(err, TFM_ERR_ARG,
                             "--schedule: '%s' is not one of: auto, noam, linear, wsd, constant",
                             text);
    t->schedule = (tfm_schedule)kind;
    set_value(r, TFM_OPT_SCHEDULE, schedules[kind]);
    if (strcmp(r->value[TFM_OPT_LR_FACTOR], "auto") == 0)
        set_value(r, TFM_OPT_LR_FACTOR,
                  kind == TFM_SCHEDULE_NOAM ? TFM_PAPER_LR_FACTOR : TFM_AUTO_LR_FACTOR);
    if (strcmp(r->value[TFM_OPT_WARMUP], "auto") == 0)
        set_value(r, TFM_OPT_WARMUP,
                  kind == TFM_SCHEDULE_NOAM || !budget ? TFM_PAPER_WARMUP : TFM_AUTO_WARMUP);
    tfm_status st = double_option(r, TFM_OPT_LR_FACTOR, 1e-9, 1e9, &t->lr_factor, err);
    if (st == TFM_OK) st = warmup_option(r, t, err);
    if (st != TFM_OK || budget || p->init_only) return st;
    if (kind == TFM_SCHEDULE_LINEAR || kind == TFM_SCHEDULE_WSD)
        return tfm_error_set(err, TFM_ERR_ARG,
                             "--schedule %s ends at the budget, and there is none: give "
                             "--max-steps, --max-time or --max-epochs (or --schedule noam)",
                             schedules[kind]);
    if (t->warmup_share > 0)
        return tfm_error_set(err, TFM_ERR_ARG,
                             "--warmup %s is a share of the run's updates, and without a budget "
                             "(--max-steps, --max-time or --max-epochs) they are not known",
                             r->value[TFM_OPT_WARMUP]);
    return TFM_OK;
}

/* The typed parameters of the texts in effect. */
static tfm_status resolve(tfm_run *r, tfm_error *err)
{
    tfm_run_params *p = &r->p;
    *p = tfm_run_default_params();
    tfm_status st;
    long long v;
    if ((st = resolve_model(r, err))) return st;
    p->vocab_path = r->value[TFM_OPT_VOCAB];
    p->src_vocab_path = r->value[TFM_OPT_SRC_VOCAB];
    p->tgt_vocab_path = r->value[TFM_OPT_TGT_VOCAB];
    if (r->value[TFM_OPT_VOCAB_SIZE]) {
        if ((st = int_option(r, TFM_OPT_VOCAB_SIZE, 1, INT32_MAX, &v, err))) return st;
        p->vocab_size = (int32_t)v;
    }
    p->src = r->value[TFM_OPT_SRC];
    p->tgt = r->value[TFM_OPT_TGT];
    p->valid_src = r->value[TFM_OPT_VALID_SRC];
    p->valid_tgt = r->value[TFM_OPT_VALID_TGT];
    int f = -1;
    for (int i = 0; input_formats[i]; i++)
        if (strcmp(r->value[TFM_OPT_INPUT_FORMAT], input_formats[i]) == 0) f = i;
    if (f < 0)
        return tfm_error_set(err, TFM_ERR_ARG, "--input-format: '%s' is not one of: auto, ids, text",
                             r->value[TFM_OPT_INPUT_FORMAT]);
    p->corpus.format = (tfm_corpus_format)f;
    if ((st = int_option(r, TFM_OPT_MAX_LENGTH, 1, 1 << 20, &v, err))) return st;
    p->corpus.max_length = (int)v;
    p->corpus.append_eos = !flag_option(r, TFM_OPT_NO_EOS);

    tfm_train_params *t = &p->train;
    if ((st = int_option(r, TFM_OPT_BATCH_TOKENS, 1, INT64_C(1) << 40, &v, err))) return st;
    t->batches.batch_tokens = v;
    if ((st = int_option(r, TFM_OPT_ACCUM, 1, 1 << 20, &v, err))) return st;
    t->accum = (int)v;
    if ((st = int_option(r, TFM_OPT_SORT_WINDOW, 1, 1 << 20, &v, err))) return st;
    t->batches.window = (int)v;
    if ((st = double_option(r, TFM_OPT_CLIP_NORM, 0, 1e30, &t->clip_norm, err))) return st;
    if ((st = double_option(r, TFM_OPT_EMA, 0, 0.999999999, &t->ema_decay, err))) return st;
    if ((st = int_option(r, TFM_OPT_SEED, 0, INT64_MAX, &v, err))) return st;
    /* One seed for all three, each stream kept apart (the trainer mixes the
     * dropout seed; the weights get seed + 1). */
    p->seed = (uint64_t)v;
    t->seed = t->batches.seed = p->seed;
    if (r->value[TFM_OPT_THREADS]) {
        if ((st = int_option(r, TFM_OPT_THREADS, 1, 1024, &v, err))) return st;
        p->threads = (int)v;
    }
    t->n_threads = p->corpus.n_threads = p->threads;

    if ((st = int_option(r, TFM_OPT_MAX_STEPS, 0, INT64_MAX, &v, err))) return st;
    p->max_steps = v;
    if ((st = int_option(r, TFM_OPT_MAX_EPOCHS, 0, INT64_MAX, &v, err))) return st;
    p->max_epochs = v;
    if ((st = tfm_parse_duration("--max-time", r->value[TFM_OPT_MAX_TIME], &p->max_time, err)))
        return st;
    if ((st = resolve_schedule(r, err))) return st;
    if ((st = int_option(r, TFM_OPT_VALID_EVERY, 1, INT64_MAX, &v, err))) return st;
    p->valid_every = v;
    p->valid_bleu = flag_option(r, TFM_OPT_VALID_BLEU);
    if ((st = int_option(r, TFM_OPT_PATIENCE, 0, 1 << 30, &v, err))) return st;
    p->patience = (int)v;
    if ((st = int_option(r, TFM_OPT_SAVE_EVERY, 0, INT64_MAX, &v, err))) return st;
    p->save_every = v;
    if ((st = int_option(r, TFM_OPT_KEEP, 1, 1 << 20, &v, err))) return st;
    p->keep = (int)v;
    p->checkpoint_dir = r->value[TFM_OPT_CHECKPOINT_DIR];
    if ((st = int_option(r, TFM_OPT_AVERAGE_LAST, 0, 1 << 20, &v, err))) return st;
    p->average_last = (int)v;
    p->log = r->value[TFM_OPT_LOG];
    if (r->value[TFM_OPT_DEBUG_NAN]) {
        long long step, count = 1;
        int used = 0;
        const char *s = r->value[TFM_OPT_DEBUG_NAN];
        if (!((sscanf(s, "%lld%n", &step, &used) == 1 && s[used] == 0) ||
              (sscanf(s, "%lld:%lld%n", &step, &count, &used) == 2 && s[used] == 0)) ||
            step < 1 || count < 1)
            return tfm_error_set(err, TFM_ERR_ARG,
                                 "--debug-inject-nan: '%s' is not STEP or STEP:COUNT", s);
        t->debug_nan_step = step;
        t->debug_nan_count = count;
    }
    p->output = r->value[TFM_OPT_OUTPUT];
    p->init_only = flag_option(r, TFM_OPT_INIT_ONLY);
    p->resume = r->given[TFM_OPT_RESUME] != NULL;
    p->resume_from = p->resume && r->given[TFM_OPT_RESUME][0] ? r->given[TFM_OPT_RESUME] : NULL;
    p->init = r->given[TFM_OPT_INIT];
    return TFM_OK;
}

/* What the options ask for together. */
static tfm_status check_usage(tfm_run *r, tfm_error *err)
{
    tfm_run_params *p = &r->p;
    if (!p->src_vocab_path != !p->tgt_vocab_path)
        return tfm_error_set(err, TFM_ERR_ARG,
                             "--src-vocab and --tgt-vocab go together (or -m VOCAB, one for both)");
    bool sides = p->src_vocab_path != NULL;
    if (!p->resume && !p->init && !p->vocab_path && !sides && !p->vocab_size)
        return tfm_error_set(err, TFM_ERR_ARG,
                             "a vocabulary is required: -m VOCAB, or --src-vocab and --tgt-vocab "
                             "(or --vocab-size N for id files)");
    if ((p->vocab_path || sides) && p->vocab_size && !p->resume)
        return tfm_error_set(err, TFM_ERR_ARG,
                             "%s and --vocab-size do not go together: the vocabulary has its size",
                             sides ? "--src-vocab" : "-m");
    if (p->vocab_path && sides && !p->resume)
        return tfm_error_set(err, TFM_ERR_ARG,
                             "-m VOCAB (one vocabulary for both sides) and --src-vocab, "
                             "--tgt-vocab (one per side) do not go together");
    if (p->init_only) return TFM_OK;
    if (!p->src || !p->tgt) return tfm_error_set(err, TFM_ERR_ARG, "--src and --tgt are required");
    if (!p->valid_src != !p->valid_tgt)
        return tfm_error_set(err, TFM_ERR_ARG, "--valid-src and --valid-tgt go together");
    if (p->valid_bleu && !p->valid_src)
        return tfm_error_set(err, TFM_ERR_ARG, "--valid-bleu needs --valid-src and --valid-tgt");
    if (p->patience && !p->valid_src)
        return tfm_error_set(err, TFM_ERR_ARG, "--patience needs --valid-src and --valid-tgt");
    int longest = p->model.max_positions - 1;
    if (p->corpus.max_length > longest) {
        if (r->given[TFM_OPT_MAX_LENGTH])
            return tfm_error_set(err, TFM_ERR_ARG,
                                 "--max-length %d: the model takes at most %d target tokens "
                                 "(--max-positions %d)",
                                 p->corpus.max_length, longest, p->model.max_positions);
        p->corpus.max_length = longest;
    }
    return TFM_OK;
}

/* ---- the checkpoint's options and state ------------------------------------------------- */

static tfm_status make_paths(tfm_run *r, tfm_error *err)
{
    /* Before the options are merged (to find the newest checkpoint) only the
     * given ones are known. */
    const char *dir = r->given[TFM_OPT_CHECKPOINT_DIR] ? r->given[TFM_OPT_CHECKPOINT_DIR]
                                                       : r->value[TFM_OPT_CHECKPOINT_DIR];
    tfm_buf_clear(&r->prefix);
    tfm_buf_clear(&r->best);
    if (dir) {
        if (mkdir(dir, 0777) != 0 && errno != EEXIST)
            return tfm_error_set(err, TFM_ERR_IO, "%s: %s", dir, strerror(errno));
        if (tfm_buf_printf(&r->prefix, "%s/ckpt", dir) != TFM_OK)
            return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    } else if (tfm_buf_printf(&r->prefix, "%s.ckpt", r->given[TFM_OPT_OUTPUT]) != TFM_OK) {
        return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    }
    if (tfm_buf_printf(&r->best, "%s.best", r->given[TFM_OPT_OUTPUT]) != TFM_OK)
        return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    return TFM_OK;
}

/* The checkpoint to resume from: the one given, or the newest. */
static tfm_status find_resume_path(tfm_run *r, tfm_error *err)
{
    const char *given = r->given[TFM_OPT_RESUME];
    if (given[0]) {
        r->resume_path = strdup(given);
        return r->resume_path ? TFM_OK : tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    }
    int64_t *steps;
    size_t n;
    tfm_status st = tfm_checkpoint_list(r->prefix.data, &steps, &n, err);
    if (st != TFM_OK) return not_usage(st);
    if (n) st = tfm_checkpoint_path(r->prefix.data, steps[n - 1], &r->scratch);
    free(steps);
    if (!n)
        return tfm_error_set(err, TFM_ERR_IO, "--resume: there is no checkpoint %s-STEP to resume from",
                             r->prefix.data);
    r->resume_path = st == TFM_OK ? strdup(r->scratch.data) : NULL;
    return r->resume_path ? TFM_OK : tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
}

/* A number of the checkpoint's run state: false when absent (or after a
 * failure, in *st). */
static bool state_number(const tfm_safetensors *f, const char *path, const char *key,
                         tfm_number_syntax syntax, double lo, double hi, double *out,
                         tfm_status *st, tfm_error *err)
{
    if (*st != TFM_OK) return false;
    uint64_t whole;
    *st = tfm_metadata_number(f, key, syntax, lo, hi, (uint64_t)hi, &whole, out, err);
    if (*st == TFM_EOF) {
        *st = TFM_OK;
        return false;
    }
    if (*st != TFM_OK) {
        char why[sizeof err->msg];
        memcpy(why, err->msg, sizeof why);
        *st = tfm_error_set(err, TFM_ERR_FORMAT, "%s: the checkpoint's %s: the file is corrupt",
                            path, why);
        return false;
    }
    if (syntax != TFM_NUMBER_REAL) *out = (double)whole;
    return true;
}

/* Which vocabularies a model file holds. */
typedef enum { HOLDS_NONE, HOLDS_JOINT, HOLDS_SIDES } model_vocabs;

static model_vocabs vocabs_held(const tfm_safetensors *f)
{
    if (tfm_safetensors_metadata(f, "src_vocab")) return HOLDS_SIDES;
    return tfm_safetensors_metadata(f, "vocab") ? HOLDS_JOINT : HOLDS_NONE;
}

/* Loads the vocabularies of the model file at path (held, as vocabs_held
 * says) as the run's. */
static tfm_status load_vocabs(tfm_run *r, const char *path, model_vocabs held, tfm_error *err)
{
    tfm_status st = TFM_OK;
    if (held == HOLDS_SIDES) st = tfm_model_load_vocab(path, TFM_SOURCE, &r->src_vocab, err);
    if (st == TFM_OK && held != HOLDS_NONE)
        st = tfm_model_load_vocab(path, TFM_TARGET, &r->vocab, err);
    if (st != TFM_OK) tfm_error_prefix(err, "%s", path);
    return not_usage(st);
}

/* Reads the checkpoint's options into stored[], its run state, and its
 * vocabularies (or the sizes of its ids). */
static tfm_status read_checkpoint(tfm_run *r, bool options_only, tfm_error *err)
{
    const char *path = r->resume_path;
    tfm_safetensors *f;
    tfm_status st = tfm_safetensors_open(path, &f, err);
    if (st != TFM_OK) {
        tfm_error_prefix(err, "%s", path);
        return not_usage(st);
    }
    if (options_only) {
        for (int i = 0; i < TFM_RUN_OPTION_COUNT && st == TFM_OK; i++) {
            char key[64];
            snprintf(key, sizeof key, "train.opt.%s", tfm_run_options[i].name);
            const char *v = tfm_safetensors_metadata(f, key);
            if (!v || tfm_run_options[i].kind == TFM_KIND_ONCE) continue;
            if (!(r->stored[i] = strdup(v))) st = tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
        }
        tfm_safetensors_free(f);
        return st;
    }
    tfm_run_state *rs = &r->rs;
    memset(rs, 0, sizeof *rs);
    double v;
    if (state_number(f, path, "train.elapsed", TFM_NUMBER_REAL, 0, 1e12, &v, &st, err))
        rs->elapsed = v;
    if (state_number(f, path, "train.best_score", TFM_NUMBER_REAL, -1e30, 1e30, &v, &st, err)) {
        rs->best_score = v;
        rs->has_best = true;
    }
    if (state_number(f, path, "train.best_step", TFM_NUMBER_WHOLE, 0, 1e15, &v, &st, err))
        rs->best_step = (int64_t)v;
    if (state_number(f, path, "train.bad_validations", TFM_NUMBER_WHOLE, 0, INT_MAX, &v, &st, err))
        rs->bad_validations = (int)v;
    r->checkpoint_ranks = 1; /* checkpoints of versions before training across processes */
    if (state_number(f, path, "train.ranks", TFM_NUMBER_WHOLE, 1, 1 << 24, &v, &st, err))
        r->checkpoint_ranks = (int)v;
    /* The model's own vocabularies (a model without one has their sizes). */
    model_vocabs held = vocabs_held(f);
    if (state_number(f, path, "tgt_vocab_size", TFM_NUMBER_WHOLE, 1, INT32_MAX, &v, &st, err))
        r->p.vocab_size = (int32_t)v;
    if (state_number(f, path, "src_vocab_size", TFM_NUMBER_WHOLE, 1, INT32_MAX, &v, &st, err) &&
        v != r->p.vocab_size)
        r->p.src_vocab_size = (int32_t)v;
    tfm_safetensors_free(f);
    if (st == TFM_OK) st = load_vocabs(r, path, held, err);
    return not_usage(st);
}

/* ---- --init: a run from a model's weights ------------------------------------------------ */

/* What a fine-tuning takes from its model and cannot change: its shape, its
 * positions and its source convention.  Dropout and label smoothing may
 * change; the vocabulary is the model's (tfm_run_create). */
static bool fixed_when_fine_tuning(tfm_run_option id)
{
    switch (id) {
    case TFM_OPT_DROPOUT:
    case TFM_OPT_ATTN_DROPOUT:
    case TFM_OPT_ACT_DROPOUT:
    case TFM_OPT_LABEL_SMOOTHING: return false;
    case TFM_OPT_NO_EOS: return true;
    default: return tfm_run_options[id].kind == TFM_KIND_MODEL;
    }
}

static tfm_status fine_tuning_conflict(const tfm_run *r, tfm_run_option id, tfm_error *err)
{
    const char *name = tfm_run_options[id].name, *init = r->given[TFM_OPT_INIT];
    const char *given = r->given[id], *stored = r->stored[id];
    if (tfm_run_options[id].arg == NO_ARG)
        return tfm_error_set(err, TFM_ERR_ARG,
                             "--%s cannot change when fine-tuning: %s was trained without it",
                             name, init);
    if (!stored)
        return tfm_error_set(err, TFM_ERR_ARG,
                             "--%s=%s cannot change when fine-tuning: %s does not record one "
                             "(its dimensions, layers and positions are its own)",
                             name, given, init);
    return tfm_error_set(err, TFM_ERR_ARG,
                         "--%s=%s cannot change when fine-tuning: %s has %s=%s (only dropout and "
                         "label smoothing may)",
                         name, given, init, name, stored);
}

/* Sets stored[id] to the text of the model's value (NULL: a flag not set). */
static tfm_status store_text(tfm_run *r, tfm_run_option id, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static tfm_status store_text(tfm_run *r, tfm_run_option id, const char *fmt, ...)
{
    free(r->stored[id]);
    r->stored[id] = NULL;
    if (!fmt) return TFM_OK;
    char text[64];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    r->stored[id] = strdup(text);
    return r->stored[id] ? TFM_OK : TFM_ERR_NOMEM;
}

/* The model options of c as texts in stored[], so that they are the run's
 * (and its checkpoints') whatever the metadata of the model say; preset
 * and no_eos are the model file's "train.opt.preset" and
 * "train.opt.no-eos", or NULL. */
static tfm_status store_model_options(tfm_run *r, const tfm_config *c, const char *preset,
                                      const char *no_eos)
{
    const bool relative = c->relative_positions > 0;
    const bool yes_no_eos = no_eos && strcmp(no_eos, "yes") == 0;
    tfm_status st = store_text(r, TFM_OPT_PRESET, preset ? "%s" : NULL, preset);
    if (!st) st = store_text(r, TFM_OPT_D_MODEL, "%d", c->d_model);
    if (!st) st = store_text(r, TFM_OPT_D_FF, "%d", c->d_ff);
    if (!st) st = store_text(r, TFM_OPT_HEADS, "%d", c->n_heads);
    if (!st)
        st = store_text(r, TFM_OPT_LAYERS,
                        c->n_encoder_layers == c->n_decoder_layers ? "%d" : NULL,
                        c->n_encoder_layers);
    if (!st) st = store_text(r, TFM_OPT_ENC_LAYERS, "%d", c->n_encoder_layers);
    if (!st) st = store_text(r, TFM_OPT_DEC_LAYERS, "%d", c->n_decoder_layers);
    if (!st) st = store_text(r, TFM_OPT_MAX_POS, "%d", c->max_positions);
    if (!st) st = store_text(r, TFM_OPT_PRE_NORM, c->pre_norm ? "yes" : NULL);
    if (!st)
        st = store_text(r, TFM_OPT_LEARNED_POS, c->positions == TFM_POS_LEARNED ? "yes" : NULL);
    if (!st) st = store_text(r, TFM_OPT_RELATIVE_POS, "%d", c->relative_positions);
    if (!st)
        st = store_text(r, TFM_OPT_ABSOLUTE_POS,
                        relative && c->positions != TFM_POS_NONE ? "yes" : NULL);
    if (!st) st = store_text(r, TFM_OPT_ATTN_WINDOW, "%d", c->attention_window);
    if (!st) st = store_text(r, TFM_OPT_DROPOUT, "%g", c->dropout);
    if (!st) st = store_text(r, TFM_OPT_ATTN_DROPOUT, "%g", c->attention_dropout);
    if (!st) st = store_text(r, TFM_OPT_ACT_DROPOUT, "%g", c->activation_dropout);
    if (!st) st = store_text(r, TFM_OPT_LABEL_SMOOTHING, "%g", c->label_smoothing);
    if (!st) st = store_text(r, TFM_OPT_NO_EOS, yes_no_eos ? "yes" : NULL);
    return st;
}

/* Reads the model of --init (a model file or a checkpoint): its weights,
 * its options (store_model_options) and its vocabulary, or the size of
 * its ids. */
static tfm_status read_init_model(tfm_run *r, tfm_error *err)
{
    const char *path = r->given[TFM_OPT_INIT];
    if (r->given[TFM_OPT_RESUME])
        return tfm_error_set(err, TFM_ERR_ARG,
                             "--init and --resume do not go together: --init starts a run from "
                             "a model's weights, --resume continues a run (a fine-tuning's too) "
                             "from its checkpoint");
    if (r->given[TFM_OPT_INIT_ONLY])
        return tfm_error_set(err, TFM_ERR_ARG, "--init and --init-only do not go together");
    static const tfm_run_option vocab_options[] = {TFM_OPT_VOCAB, TFM_OPT_SRC_VOCAB,
                                                   TFM_OPT_TGT_VOCAB, TFM_OPT_VOCAB_SIZE};
    for (size_t i = 0; i < sizeof vocab_options / sizeof vocab_options[0]; i++)
        if (r->given[vocab_options[i]])
            return tfm_error_set(err, TFM_ERR_ARG,
                                 "%s%s with --init: the vocabulary is the model's own (%s); "
                                 "leave it out",
                                 vocab_options[i] == TFM_OPT_VOCAB ? "-" : "--",
                                 vocab_options[i] == TFM_OPT_VOCAB
                                     ? "m"
                                     : tfm_run_options[vocab_options[i]].name,
                                 path);
    tfm_status st = tfm_checkpoint_load_model(path, &r->init_model, err);
    if (st != TFM_OK) return not_usage(st);
    const tfm_model *m = r->init_model;
    if (m->quantized)
        return tfm_error_set(err, TFM_ERR_ARG,
                             "--init %s: the model is in %s and cannot be fine-tuned: start "
                             "from the float32 model it was quantized from",
                             path, tfm_compute_type_name(m->compute));
    tfm_safetensors *f;
    if ((st = tfm_safetensors_open(path, &f, err))) {
        tfm_error_prefix(err, "%s", path);
        return not_usage(st);
    }
    st = store_model_options(r, &m->config, tfm_safetensors_metadata(f, "train.opt.preset"),
                             tfm_safetensors_metadata(f, "train.opt.no-eos"));
    model_vocabs held = vocabs_held(f);
    tfm_safetensors_free(f);
    if (st != TFM_OK) return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    return load_vocabs(r, path, held, err);
}

/* The options in effect: given, else the checkpoint's (or --init's model's),
 * else the default; on resume MODEL options cannot change, and changed TRAIN
 * options are warned of. */
static tfm_status merge_options(tfm_run *r, tfm_error *err)
{
    bool resume = r->given[TFM_OPT_RESUME] != NULL;
    for (int i = 0; i < TFM_RUN_OPTION_COUNT; i++) {
        const char *given = r->given[i], *stored = r->stored[i];
        const char *name = tfm_run_options[i].name;
        if (r->init_model && given && fixed_when_fine_tuning((tfm_run_option)i) &&
            (!stored || strcmp(given, stored) != 0))
            return fine_tuning_conflict(r, (tfm_run_option)i, err);
        if (resume && tfm_run_options[i].kind == TFM_KIND_MODEL && given &&
            (!stored || strcmp(given, stored) != 0))
            return tfm_error_set(err, TFM_ERR_ARG,
                                 "--%s cannot change when resuming: the model is the checkpoint's",
                                 name);
        /* (--accum: check_batches_per_update, which knows the processes) */
        if (resume && tfm_run_options[i].kind == TFM_KIND_TRAIN && i != TFM_OPT_ACCUM && given &&
            stored && strcmp(given, stored) != 0)
            warn(r, "--%s=%s differs from the checkpoint's %s: the run will not be the same as "
                    "one never stopped",
                 name, given, stored);
        bool has_default = tfm_run_option_default(i, r->defaults[i], sizeof r->defaults[i]);
        /* A checkpoint has the model's options; one written before an
         * option existed ran as the option's absence, not its new default
         * (checkpoints before --schedule ran the paper's). */
        if (resume && !given && !stored && i == TFM_OPT_SCHEDULE) {
            snprintf(r->defaults[i], sizeof r->defaults[i], "%s", schedules[TFM_SCHEDULE_NOAM]);
            has_default = true;
        } else if ((resume || r->init_model) && !given && !stored &&
                   tfm_run_options[i].kind == TFM_KIND_MODEL && i != TFM_OPT_PRESET) {
            has_default = false;
        }
        r->value[i] = given ? given : stored ? stored : has_default ? r->defaults[i] : NULL;
    }
    return TFM_OK;
}

/* Whether path is a model file with a vocabulary per side. */
static bool file_has_sides(const char *path)
{
    tfm_safetensors *f;
    tfm_error ignored;
    if (tfm_safetensors_open(path, &f, &ignored) != TFM_OK) return false;
    bool sides = vocabs_held(f) == HOLDS_SIDES;
    tfm_safetensors_free(f);
    return sides;
}

/* The vocabulary of side from the file an option names (NULL: none). */
static tfm_status load_vocab_option(const char *path, tfm_side side, tfm_vocab **out,
                                    tfm_error *err)
{
    if (!path) return TFM_OK;
    tfm_status st = tfm_model_load_vocab(path, side, out, err);
    if (st != TFM_OK) tfm_error_prefix(err, "%s", path);
    return not_usage(st);
}

tfm_status tfm_run_create(const char *const given[TFM_RUN_OPTION_COUNT], tfm_run_report *report,
                          void *ctx, tfm_run **out, tfm_error *err)
{
    *out = NULL;
    if (!given[TFM_OPT_OUTPUT]) return tfm_error_set(err, TFM_ERR_ARG, "-o MODEL is required");
    if (given[TFM_OPT_RESUME] && given[TFM_OPT_INIT_ONLY])
        return tfm_error_set(err, TFM_ERR_ARG, "--resume and --init-only do not go together");
    tfm_run *r = calloc(1, sizeof *r);
    if (!r) return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    r->given = given;
    r->report = report;
    r->ctx = ctx;
    tfm_buf_init(&r->prefix);
    tfm_buf_init(&r->best);
    tfm_buf_init(&r->scratch);
    tfm_status st = TFM_OK;
    if (given[TFM_OPT_INIT]) {
        st = read_init_model(r, err);
    } else if (given[TFM_OPT_RESUME]) {
        st = make_paths(r, err);
        if (st == TFM_OK) st = find_resume_path(r, err);
        if (st == TFM_OK) st = read_checkpoint(r, true, err);
    }
    if (st == TFM_OK) st = merge_options(r, err);
    if (st == TFM_OK) st = resolve(r, err);
    if (st == TFM_OK && r->init_model) {
        /* The model's own configuration, with the rates the options give. */
        const tfm_config *c = &r->p.model;
        tfm_config *m = &r->init_model->config;
        m->dropout = c->dropout;
        m->attention_dropout = c->attention_dropout;
        m->activation_dropout = c->activation_dropout;
        m->label_smoothing = c->label_smoothing;
        r->p.model = *m;
        r->p.vocab_size = m->tgt_vocab_size;
        if (m->src_vocab_size != m->tgt_vocab_size) r->p.src_vocab_size = m->src_vocab_size;
    }
    if (st == TFM_OK) st = check_usage(r, err);
    if (st == TFM_OK && !r->p.init_only) st = make_paths(r, err);
    if (st == TFM_OK && r->p.resume) st = read_checkpoint(r, false, err);
    if (st == TFM_OK && !r->p.resume && r->p.vocab_path && file_has_sides(r->p.vocab_path))
        st = tfm_error_set(err, TFM_ERR_ARG,
                           "-m %s: the model has a vocabulary per side; give them as "
                           "--src-vocab %s --tgt-vocab %s",
                           r->p.vocab_path, r->p.vocab_path, r->p.vocab_path);
    if (st == TFM_OK && !r->p.resume) {
        st = load_vocab_option(r->p.vocab_path, TFM_TARGET, &r->vocab, err);
        if (st == TFM_OK) st = load_vocab_option(r->p.src_vocab_path, TFM_SOURCE, &r->src_vocab, err);
        if (st == TFM_OK) st = load_vocab_option(r->p.tgt_vocab_path, TFM_TARGET, &r->vocab, err);
    }
    if (st == TFM_OK && !r->p.resume) {
        tfm_config *c = &r->p.model;
        if (r->vocab) r->p.vocab_size = tfm_vocab_size(r->vocab);
        if (r->src_vocab) r->p.src_vocab_size = tfm_vocab_size(r->src_vocab);
        c->tgt_vocab_size = r->p.vocab_size;
        c->src_vocab_size = r->p.src_vocab_size ? r->p.src_vocab_size : r->p.vocab_size;
        if (r->src_vocab) {
            /* A vocabulary per side: the decoder's two embeddings shared, the
             * encoder's its own. */
            c->shared_embeddings = false;
            c->shared_decoder_embeddings = true;
        }
        if (tfm_config_validate(c, err) != TFM_OK) {
            tfm_error_prefix(err, "the model");
            st = TFM_ERR_ARG;
        }
    }
    if (st != TFM_OK) {
        tfm_run_free(r);
        return st;
    }
    *out = r;
    return TFM_OK;
}

void tfm_run_free(tfm_run *r)
{
    if (!r) return;
    for (int i = 0; i < TFM_RUN_OPTION_COUNT; i++) free(r->stored[i]);
    tfm_buf_free(&r->prefix);
    tfm_buf_free(&r->best);
    tfm_buf_free(&r->scratch);
    free(r->resume_path);
    tfm_model_free(r->init_model);
    tfm_vocab_free(r->vocab);
    tfm_vocab_free(r->src_vocab);
    tfm_trainer_free(r->trainer);
    tfm_corpus_free(r->data);
    tfm_corpus_free(r->valid);
    tfm_corpus_free(r->probe);
    tfm_train_log_close(r->log);
    tfm_lock_release(&r->lock, false);
    free(r);
}

const tfm_run_params *tfm_run_params_of(const tfm_run *r)
{
    return &r->p;
}

const char *tfm_run_option_value(const tfm_run *r, tfm_run_option id)
{
    return r->value[id];
}

tfm_status tfm_run_options_format(const tfm_run *r, tfm_buf *out)
{
    tfm_status st = TFM_OK;
    for (int i = 0; i < TFM_RUN_OPTION_COUNT && st == TFM_OK; i++)
        if (tfm_run_options[i].kind != TFM_KIND_ONCE && r->value[i])
            st = tfm_buf_printf(out, " --%s=%s", tfm_run_options[i].name, r->value[i]);
    if (st == TFM_OK && !r->value[TFM_OPT_THREADS])
        st = tfm_buf_printf(out, " --threads=%d", r->p.threads);
    return st;
}

const tfm_trainer *tfm_run_trainer(const tfm_run *r)
{
    return r->trainer;
}

void tfm_run_set_stop_flag(tfm_run *r, const volatile sig_atomic_t *flag)
{
    r->stop = flag;
}

void tfm_run_set_dist(tfm_run *r, tfm_dist *d)
{
    r->dist = d;
}

/* ---- metadata: the effective options and the run's state ---------------------------------- */

typedef struct metadata {
    const char *kv[2 * (TFM_RUN_OPTION_COUNT + 8) + 1];
    char keys[TFM_RUN_OPTION_COUNT][48];
    char state[5][64];
} metadata;

static const char *const *build_metadata(const tfm_run *r, metadata *m, double seconds)
{
    size_t n = 0;
    for (int i = 0; i < TFM_RUN_OPTION_COUNT; i++) {
        if (tfm_run_options[i].kind == TFM_KIND_ONCE || !r->value[i]) continue;
        snprintf(m->keys[i], sizeof m->keys[i], "train.opt.%s", tfm_run_options[i].name);
        m->kv[n++] = m->keys[i];
        m->kv[n++] = r->value[i];
    }
    snprintf(m->state[0], sizeof m->state[0], "%.3f", seconds);
    m->kv[n++] = "train.elapsed";
    m->kv[n++] = m->state[0];
    if (r->rs.has_best) {
        snprintf(m->state[1], sizeof m->state[1], "%.17g", r->rs.best_score);
        snprintf(m->state[2], sizeof m->state[2], "%" PRId64, r->rs.best_step);
        m->kv[n++] = "train.best_score";
        m->kv[n++] = m->state[1];
        m->kv[n++] = "train.best_step";
        m->kv[n++] = m->state[2];
    }
    snprintf(m->state[3], sizeof m->state[3], "%d", r->rs.bad_validations);
    m->kv[n++] = "train.bad_validations";
    m->kv[n++] = m->state[3];
    snprintf(m->state[4], sizeof m->state[4], "%d", tfm_dist_size(r->dist));
    m->kv[n++] = "train.ranks";
    m->kv[n++] = m->state[4];
    m->kv[n] = NULL;
    return m->kv;
}

/* A model of the options with fresh weights and the run's vocabularies. */
static tfm_status new_model(const tfm_run *r, tfm_model **out, tfm_error *err)
{
    uint64_t seed = r->p.seed + 1;
    if (r->src_vocab) return tfm_model_create_sides(&r->p.model, r->src_vocab, r->vocab, seed, out, err);
    return tfm_model_create(&r->p.model, r->vocab, seed, out, err);
}

tfm_status tfm_run_init_model(tfm_run *r, tfm_error *err)
{
    if (!writes(r)) return TFM_OK;
    tfm_model *m;
    tfm_status st = new_model(r, &m, err);
    if (st != TFM_OK) return not_usage(st);
    metadata md;
    st = tfm_model_save(m, r->p.output, build_metadata(r, &md, 0), err);
    if (st != TFM_OK) tfm_error_prefix(err, "%s", r->p.output);
    tfm_model_free(m);
    return not_usage(st);
}

/* ---- training ----------------------------------------------------------------------------- */

static tfm_status load_corpus(tfm_run *r, const char *src, const char *tgt, const char *what,
                              tfm_corpus **out, tfm_error *err)
{
    tfm_corpus_params cp = r->p.corpus;
    cp.vocab = r->vocab;
    cp.src_vocab = r->src_vocab;
    cp.vocab_size = r->p.vocab_size;
    cp.src_vocab_size = r->p.src_vocab_size;
    cp.pad_id = r->p.model.pad_id; /* an imported model's own */
    cp.bos_id = r->p.model.bos_id;
    cp.eos_id = r->p.model.eos_id;
    tfm_corpus_stats stats;
    tfm_status st = tfm_corpus_load(src, tgt, &cp, out, &stats, err);
    if (st != TFM_OK) {
        const char *file = stats.error_file == 0 ? src : stats.error_file == 1 ? tgt : NULL;
        if (file && stats.error_line) tfm_error_prefix(err, "%s:%zu", file, stats.error_line);
        else if (file) tfm_error_prefix(err, "%s", file);
        else tfm_error_prefix(err, "%s and %s", src, tgt);
        return not_usage(st);
    }
    if (stats.repaired)
        warn(r, "%s data: invalid UTF-8 replaced by U+FFFD in %zu lines", what, stats.repaired);
    for (int k = 0; k < 2; k++) {
        /* the repairs made, and a format guessed on thin evidence */
        const char *file = k == 0 ? src : tgt;
        const tfm_corpus_format f = k == 0 ? stats.src_format : stats.tgt_format;
        char note[200];
        if (stats.bom[k])
            warn(r, "%s data: %s: the byte order mark at its start was dropped", what, file);
        if (stats.crlf[k] && f == TFM_CORPUS_TEXT)
            warn(r, "%s data: %s: %zu lines end in CR LF; the CRs were dropped", what, file,
                 stats.crlf[k]);
        if (tfm_format_guess_note(&stats.format_guess[k], "--input-format text", note,
                                  sizeof note))
            warn(r, "%s data: %s %s", what, file, note);
    }
    tfm_run_event ev = event(r, TFM_RUN_DATA);
    ev.text = what;
    ev.data = &stats;
    emit(r, &ev);
    if (stats.pairs == 0)
        return tfm_error_set(err, TFM_ERR_FORMAT, "%s data: %s and %s hold no usable sentence pair",
                             what, src, tgt);
    return TFM_OK;
}

static tfm_status save_checkpoint(tfm_run *r, tfm_error *err)
{
    int64_t step = tfm_trainer_steps(r->trainer);
    if (step == r->last_saved || !writes(r)) return TFM_OK;
    metadata md;
    const char *const *kv = build_metadata(r, &md, elapsed(r));
    tfm_checkpoint_path(r->prefix.data, step, &r->scratch);
    tfm_status st = tfm_trainer_save(r->trainer, r->scratch.data, kv, err);
    if (st != TFM_OK) {
        tfm_error_prefix(err, "%s", r->scratch.data);
        return st;
    }
    r->last_saved = step;
    tfm_error prune_err;
    if (tfm_checkpoint_prune(r->prefix.data, r->p.keep, &prune_err) != TFM_OK)
        warn(r, "%s", prune_err.msg);
    tfm_run_event ev = event(r, TFM_RUN_CHECKPOINT);
    ev.text = r->scratch.data;
    emit(r, &ev);
    return TFM_OK;
}

bool tfm_run_state_validation(tfm_run_state *s, double score, int64_t step)
{
    if (s->has_best && !(score > s->best_score)) {
        s->bad_validations++;
        return false;
    }
    s->has_best = true;
    s->best_score = score;
    s->best_step = step;
    s->bad_validations = 0;
    return true;
}

/* Validates; *stop when patience is exhausted. */
static tfm_status validate(tfm_run *r, bool *stop, tfm_error *err)
{
    tfm_valid_result v;
    double t0 = tfm_clock_seconds();
    tfm_status st = tfm_trainer_validate(r->trainer, r->valid, r->p.valid_bleu, &v, err);
    if (st != TFM_OK) {
        tfm_error_prefix(err, "%s: validation", r->p.valid_src);
        return st;
    }
    double tokens = v.tgt_tokens > 0 ? (double)v.tgt_tokens : 1;
    /* Higher is better: BLEU when decoding, else minus the perplexity's log. */
    double score = v.decoded ? v.bleu : -v.nll_sum / tokens;
    bool improved = tfm_run_state_validation(&r->rs, score, tfm_trainer_steps(r->trainer));
    if (improved) {
        metadata md;
        const char *const *kv = build_metadata(r, &md, elapsed(r));
        if ((st = tfm_trainer_save_model(r->trainer, r->best.data, kv, err))) {
            tfm_error_prefix(err, "%s", r->best.data);
            return st;
        }
    }
    tfm_run_event ev = event(r, TFM_RUN_VALID);
    ev.seconds = ev.time - t0;
    ev.valid = &v;
    ev.loss = v.loss_sum / tokens;
    ev.ppl = exp(v.nll_sum / tokens);
    ev.improved = improved;
    ev.bad_validations = r->rs.bad_validations;
    ev.best_step = r->rs.best_step;
    ev.best_path = r->best.data;
    ev.early_stop = r->p.patience > 0 && r->rs.bad_validations >= r->p.patience;
    *stop = ev.early_stop;
    emit(r, &ev);
    log_event(r, &ev);
    char text[600];
    if (!r->diagnosed && tfm_diagnose_validation(&tfm_trainer_model(r->trainer)->config, ev.step,
                                                 tfm_trainer_warmup(r->trainer), &v,
                                                 "the validation data", text, sizeof text)) {
        warn(r, "%s", text);
        r->diagnosed = true;
    }
    if (ev.early_stop) {
        ev.kind = TFM_RUN_EARLY_STOP;
        emit(r, &ev);
    }
    return TFM_OK;
}

/* Without validation data: the diagnosis of tfm_diagnose_validation on
 * training pairs, until it has warned once. */
static tfm_status diagnose_on_probe(tfm_run *r, tfm_error *err)
{
    char text[600];
    bool found;
    if (r->diagnosed) return TFM_OK;
    tfm_status st = tfm_diagnose_trainer(r->trainer, r->probe, text, sizeof text, &found, err);
    if (st != TFM_OK) return st;
    if (found) {
        warn(r, "%s (--valid-src and --valid-tgt measure held-out data instead)", text);
        r->diagnosed = true;
    }
    return TFM_OK;
}

/* Why the run should end before the next update, as this rank sees it: a
 * tfm_run_end, or -1 to go on. */
static int64_t end_seen(const tfm_run *r, bool patience_out)
{
    const tfm_run_params *p = &r->p;
    if (patience_out) return TFM_RUN_PATIENCE;
    if (r->stop && *r->stop) return TFM_RUN_STOPPED;
    int64_t step = tfm_trainer_steps(r->trainer);
    if (p->max_steps > 0 && step >= p->max_steps) return TFM_RUN_LIMIT;
    if (p->max_epochs > 0 && tfm_trainer_epoch(r->trainer) >= (double)p->max_epochs - 1e-12)
        return TFM_RUN_LIMIT;
    if (p->max_time > 0 && elapsed(r) >= p->max_time) return TFM_RUN_LIMIT;
    return -1;
}

/* The updates the run will have made at its end, as this rank sees it
 * before the next one: the fewest that --max-steps, the time left at the
 * pace of this process's updates so far (validations and checkpoints
 * included), and the epochs left at their pace allow; 0 when no limit is
 * set, or none is known yet (a run limited by time, before its first
 * update). */
static int64_t expected_updates(const tfm_run *r)
{
    const tfm_run_params *p = &r->p;
    int64_t step = tfm_trainer_steps(r->trainer);
    /* The pace: this process's updates, or before its first one those of
     * the run it resumes. */
    bool resumed_pace = step == r->first_step;
    double updates = (double)(resumed_pace ? step : step - r->first_step);
    double total = p->max_steps > 0 ? (double)p->max_steps : 0;
    if (p->max_time > 0) {
        double now = r->rs.elapsed + (tfm_clock_seconds() - r->started);
        double seconds = resumed_pace ? r->rs.elapsed : now - r->rs.elapsed;
        double left = p->max_time > now ? p->max_time - now : 0;
        double t = updates > 0 && seconds > 0 ? (double)step + 1 + left * updates / seconds : 0;
        if (t > 0 && (total == 0 || t < total)) total = t;
    }
    if (p->max_epochs > 0) {
        double epoch = tfm_trainer_epoch(r->trainer);
        double epochs = resumed_pace ? epoch : epoch - r->first_epoch;
        double e = updates > 0 && epochs > 0
                       ? (double)step + ((double)p->max_epochs - epoch) * updates / epochs
                       : 0;
        if (e > 0 && (total == 0 || e < total)) total = e;
    }
    return total > (double)(INT64_MAX / 2) ? INT64_MAX / 2 : (int64_t)total;
}

static tfm_status train_loop(tfm_run *r, tfm_run_end *end, tfm_error *err)
{
    const tfm_run_params *p = &r->p;
    bool patience_out = false; /* rank 0's last validation exhausted the patience */
    for (;;) {
        /* All ranks stop at the same update, for the weightiest reason any
         * of them has (tfm_run_end's order: early stop, signal, limit). */
        int64_t why = end_seen(r, patience_out);
        tfm_status st = tfm_dist_max(r->dist, &why, err);
        if (st != TFM_OK) return st;
        if (why >= 0) {
            *end = (tfm_run_end)why;
            return TFM_OK;
        }
        /* Every rank takes the longest estimate, so all use one rate (only
         * the clock's can differ between them). */
        int64_t total = expected_updates(r);
        if (p->max_time > 0 && (st = tfm_dist_max(r->dist, &total, err))) return st;
        tfm_trainer_set_total(r->trainer, total);
        int64_t step = tfm_trainer_steps(r->trainer);
        tfm_step_result res;
        double t0 = tfm_clock_seconds();
        st = tfm_trainer_step(r->trainer, &res, err);
        if (st != TFM_OK) {
            if (r->last_saved > 0 && writes(r)) {
                tfm_checkpoint_path(r->prefix.data, r->last_saved, &r->scratch);
                size_t len = strlen(err->msg);
                snprintf(err->msg + len, sizeof err->msg - len, "; the last checkpoint is %s",
                         r->scratch.data);
            }
            tfm_error_prefix(err, "update %" PRId64, step + 1);
            return st;
        }
        if (res.skipped) {
            warn(r, "update %" PRId64 ": the loss or the gradients are not finite (NaN or "
                    "infinite): update skipped (%d in a row)",
                 step + 1, res.bad_steps);
            continue;
        }
        r->run_tokens += res.tgt_tokens;
        r->run_updates++;
        r->run_wait += res.wait_seconds;
        r->run_reduce += res.reduce_seconds;
        tfm_run_event ev = event(r, TFM_RUN_STEP);
        double tokens = res.tgt_tokens > 0 ? (double)res.tgt_tokens : 1;
        ev.update = &res;
        ev.seconds = ev.time - t0;
        ev.loss = res.loss_sum / tokens;
        ev.ppl = exp(res.nll_sum / tokens);
        log_event(r, &ev);
        emit(r, &ev);
        step = tfm_trainer_steps(r->trainer);
        if (r->valid && step % p->valid_every == 0 && (st = validate(r, &patience_out, err)))
            return st;
        if (r->probe && step % p->valid_every == 0 && (st = diagnose_on_probe(r, err)))
            return st;
        if (p->save_every > 0 && step % p->save_every == 0 && (st = save_checkpoint(r, err)))
            return st;
    }
}

/* The model at the end: the trainer's, or the average of the last
 * average_last checkpoints (*averaged of them). */
static tfm_status write_model(tfm_run *r, int *averaged, tfm_error *err)
{
    metadata md;
    const char *const *kv = build_metadata(r, &md, elapsed(r));
    const char *out = r->p.output;
    *averaged = 0;
    if (!writes(r)) return TFM_OK;
    tfm_status st;
    if (r->p.average_last <= 0) {
        if ((st = tfm_trainer_save_model(r->trainer, out, kv, err))) tfm_error_prefix(err, "%s", out);
        return st;
    }
    int64_t *steps;
    size_t n;
    if ((st = tfm_checkpoint_list(r->prefix.data, &steps, &n, err))) return st;
    size_t k = n < (size_t)r->p.average_last ? n : (size_t)r->p.average_last;
    char **paths = calloc(k ? k : 1, sizeof *paths);
    st = paths ? TFM_OK : tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < k && st == TFM_OK; i++) {
        tfm_checkpoint_path(r->prefix.data, steps[n - k + i], &r->scratch);
        if (!(paths[i] = strdup(r->scratch.data)))
            st = tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    }
    if (st == TFM_OK) st = tfm_average_write((const char *const *)paths, (int)k, out, kv, err);
    if (st == TFM_OK) *averaged = (int)k;
    for (size_t i = 0; paths && i < k; i++) free(paths[i]);
    free(paths);
    free(steps);
    return st;
}

/* The trainer: resumed from the checkpoint, or a new model of the options. */
static tfm_status make_trainer(tfm_run *r, tfm_error *err)
{
    tfm_status st;
    if (r->p.resume) {
        if ((st = tfm_trainer_resume(r->resume_path, r->data, &r->p.train, &r->trainer, err)))
            return st;
        r->last_saved = tfm_trainer_steps(r->trainer);
        return TFM_OK;
    }
    tfm_model *m = r->init_model;
    r->init_model = NULL; /* the trainer's now */
    if (m) m->step = 0;   /* a new run: its schedule starts again */
    else if ((st = new_model(r, &m, err))) return st;
    return tfm_trainer_create(m, r->data, &r->p.train, &r->trainer, err);
}

/* Every rank must train on the same data from the same weights: data files
 * or checkpoints that are not shared between machines would otherwise send
 * a rank its own way unnoticed. */
static tfm_status check_ranks_agree(tfm_run *r, tfm_error *err)
{
    if (tfm_dist_size(r->dist) == 1) return TFM_OK;
    int rank;
    tfm_status st = tfm_dist_first_difference(r->dist, tfm_corpus_hash(r->data), &rank, err);
    if (st == TFM_OK && rank >= 0)
        return tfm_error_set(err, TFM_ERR_FORMAT,
                             "rank %d read other training data than rank 0 from %s and %s: every "
                             "process must read the same files (a shared file system, or copies)",
                             rank, r->p.src, r->p.tgt);
    const tfm_model *m = tfm_trainer_model(r->trainer);
    uint64_t state = tfm_hash_bytes(m->data, tfm_params_count(&m->config) * sizeof(float)) ^
                     (uint64_t)m->step * 0x9e3779b97f4a7c15ULL;
    if (st == TFM_OK) st = tfm_dist_first_difference(r->dist, state, &rank, err);
    if (st == TFM_OK && rank >= 0)
        return tfm_error_set(err, TFM_ERR_FORMAT,
                             "rank %d does not start from the weights rank 0 starts from%s%s: "
                             "every process must resume from the same checkpoint (share the "
                             "output or checkpoint folder)",
                             rank, r->p.resume ? ", " : "", r->p.resume ? r->resume_path : "");
    return st;
}

/* Resuming on another number of processes: an update takes ranks x accum
 * batches, so the run stays the one it was only when the product stays. */
static void check_batches_per_update(tfm_run *r)
{
    if (!r->p.resume) return;
    long long before_accum = r->stored[TFM_OPT_ACCUM] ? atoll(r->stored[TFM_OPT_ACCUM]) : 1;
    long long before = (long long)r->checkpoint_ranks * before_accum;
    long long now = (long long)tfm_dist_size(r->dist) * r->p.train.accum;
    if (before != now)
        warn(r, "batches per update: %lld here (%d processes x --accum %d), %lld in the "
                "checkpoint's run (%d x %lld): the run will not be the same as one never "
                "stopped",
             now, tfm_dist_size(r->dist), r->p.train.accum, before, r->checkpoint_ranks,
             before_accum);
}

tfm_status tfm_run_train(tfm_run *r, tfm_run_end *end, tfm_error *err)
{
    *end = TFM_RUN_LIMIT;
    const tfm_run_params *p = &r->p;
    tfm_blas_threads(p->threads);
    r->p.train.dist = r->dist;
    /* one run at a time on an output and its checkpoints */
    tfm_status st = writes(r) ? tfm_lock_take(&r->lock, p->output, err) : TFM_OK;
    if (st != TFM_OK) return st;
    st = load_corpus(r, p->src, p->tgt, "training", &r->data, err);
    if (st == TFM_OK && p->valid_src && writes(r))
        st = load_corpus(r, p->valid_src, p->valid_tgt, "validation", &r->valid, err);
    /* a run without validation data is diagnosed on its first pairs (none
     * when memory is short: the check is a help, not a need) */
    if (st == TFM_OK && !p->valid_src && writes(r)) r->probe = tfm_corpus_head(r->data, 1000);
    if (st == TFM_OK) st = make_trainer(r, err);
    if (st == TFM_OK) st = check_ranks_agree(r, err);
    if (st != TFM_OK) return not_usage(st);
    check_batches_per_update(r);
    tfm_vocab_free(r->vocab);
    tfm_vocab_free(r->src_vocab);
    r->vocab = r->src_vocab = NULL;

    r->started = tfm_clock_seconds();
    r->first_step = tfm_trainer_steps(r->trainer);
    r->first_epoch = tfm_trainer_epoch(r->trainer);
    tfm_run_event ev = event(r, TFM_RUN_START);
    ev.text = p->resume ? r->resume_path : NULL;
    emit(r, &ev);
    if (p->log && writes(r) && (st = tfm_train_log_open(p->log, p->resume, &r->log, err)))
        return st;

    if ((st = train_loop(r, end, err))) return not_usage(st);
    /* A run that stops between validations is validated once more, so the
     * log ends with the figures of the model it writes. */
    int64_t last = tfm_trainer_steps(r->trainer);
    bool stop;
    if (*end == TFM_RUN_LIMIT && r->valid && last > r->first_step && last % p->valid_every != 0 &&
        (st = validate(r, &stop, err)))
        return not_usage(st);
    /* At the end: a checkpoint of the last state, then the model. */
    int averaged;
    if ((st = save_checkpoint(r, err)) || (st = write_model(r, &averaged, err)))
        return not_usage(st);
    ev = event(r, TFM_RUN_END);
    ev.end = *end;
    ev.averaged = averaged;
    ev.text = p->output;
    ev.run_seconds = ev.time - r->started;
    ev.run_tokens = r->run_tokens;
    ev.run_updates = r->run_updates;
    ev.run_wait_seconds = r->run_wait;
    ev.run_reduce_seconds = r->run_reduce;
    emit(r, &ev);
    tfm_lock_release(&r->lock, true);
    return TFM_OK;
}

double tfm_run_eta(const tfm_run *r, double t)
{
    const tfm_run_params *p = &r->p;
    int64_t step = tfm_trainer_steps(r->trainer);
    double epoch = tfm_trainer_epoch(r->trainer);
    double eta = -1, run_time = t - r->started;
    int64_t done = step - r->first_step;
    if (p->max_steps > 0 && done > 0) eta = (double)(p->max_steps - step) * run_time / (double)done;
    double epochs_done = epoch - r->first_epoch;
    if (p->max_epochs > 0 && epochs_done > 0) {
        double e = ((double)p->max_epochs - epoch) * run_time / epochs_done;
        if (eta < 0 || e < eta) eta = e;
    }
    double left = p->max_time - (r->rs.elapsed + run_time);
    if (p->max_time > 0 && (eta < 0 || left < eta)) eta = left;
    return eta;
}
