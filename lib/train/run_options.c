/* run_options.c - a training run made from its options (tfm_run_create):
 * the option table and the defaults, the texts parsed into the run's typed
 * parameters (presets, positions, the schedule's "auto"), the options of
 * the checkpoint resumed from or of --init's model merged with the given
 * ones, the checks of what they ask for together; the run's freeing and
 * accessors.  run.c trains the run.
 *
 * The options of a run are texts, each from one source: the library's
 * default parameters, the caller, or on resume the checkpoint it resumes
 * from.  Their effective values are stored in every checkpoint and model as
 * "train.opt.NAME" (run.c), so a resumed run continues with the options it
 * had; the checkpoint's run state (read_checkpoint) continues its
 * early-stopping record.
 *
 * Nothing here prints: warnings go to the caller's report callback, and
 * failures return a status with a message that names the option or the
 * file. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "train/run_internal.h"

void run_warn(tfm_run *r, const char *fmt, ...)
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

/* A failure of a call that reads a file is never a usage error. */
tfm_status run_not_usage(tfm_status st)
{
    return st == TFM_ERR_ARG ? TFM_ERR_FORMAT : st;
}

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
    if (st != TFM_OK) return run_not_usage(st);
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
    /* The bound of a whole number; a real one's (hi up to 1e30) is not one. */
    const uint64_t max = syntax == TFM_NUMBER_REAL ? 0 : (uint64_t)hi;
    *st = tfm_metadata_number(f, key, syntax, lo, hi, max, &whole, out, err);
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
    if (tfm_safetensors_has_metadata(f, "src_vocab")) return HOLDS_SIDES;
    return tfm_safetensors_has_metadata(f, "vocab") ? HOLDS_JOINT : HOLDS_NONE;
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
    return run_not_usage(st);
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
        return run_not_usage(st);
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
    return run_not_usage(st);
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
    if (st != TFM_OK) return run_not_usage(st);
    const tfm_model *m = r->init_model;
    if (m->quantized)
        return tfm_error_set(err, TFM_ERR_ARG,
                             "--init %s: the model is in %s and cannot be fine-tuned: start "
                             "from the float32 model it was quantized from",
                             path, tfm_compute_type_name(m->compute));
    tfm_safetensors *f;
    if ((st = tfm_safetensors_open(path, &f, err))) {
        tfm_error_prefix(err, "%s", path);
        return run_not_usage(st);
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
            run_warn(r, "--%s=%s differs from the checkpoint's %s: the run will not be the same as "
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
    return run_not_usage(st);
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
