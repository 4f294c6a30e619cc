/* run.c - a training run: the policy around the trainer that every front
 * end of training needs (train(1), a program of a user's on libtfm.a).
 * run_options.c makes the run from its options (tfm_run_create); this file
 * runs it (tfm_run_train, tfm_run_init_model).
 *
 * The effective values of the run's options are stored in every checkpoint
 * and model as "train.opt.NAME", beside the run's own state
 * ("train.elapsed", "train.best_score", "train.best_step",
 * "train.bad_validations"), so a resumed run continues with the options and
 * the early-stopping record it had.  The loop makes updates
 * (tfm_trainer_step) until a limit, a stop request or early stopping;
 * validates every valid_every updates, keeping the best model as
 * MODEL.best; saves a checkpoint every save_every and keeps the newest
 * keep; and at the end saves a checkpoint and writes the model, or the
 * average of the last average_last checkpoints.
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
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/run_internal.h"

static double elapsed(const tfm_run *r)
{
    return r->rs.elapsed + (tfm_clock_seconds() - r->started);
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
    if (st != TFM_OK) return run_not_usage(st);
    metadata md;
    st = tfm_model_save(m, r->p.output, build_metadata(r, &md, 0), err);
    if (st != TFM_OK) tfm_error_prefix(err, "%s", r->p.output);
    tfm_model_free(m);
    return run_not_usage(st);
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
        return run_not_usage(st);
    }
    if (stats.repaired)
        run_warn(r, "%s data: invalid UTF-8 replaced by U+FFFD in %zu lines", what, stats.repaired);
    for (int k = 0; k < 2; k++) {
        /* the repairs made, and a format guessed on thin evidence */
        const char *file = k == 0 ? src : tgt;
        const tfm_corpus_format f = k == 0 ? stats.src_format : stats.tgt_format;
        char note[200];
        if (stats.bom[k])
            run_warn(r, "%s data: %s: the byte order mark at its start was dropped", what, file);
        if (stats.crlf[k] && f == TFM_CORPUS_TEXT)
            run_warn(r, "%s data: %s: %zu lines end in CR LF; the CRs were dropped", what, file,
                     stats.crlf[k]);
        if (tfm_format_guess_note(&stats.format_guess[k], "--input-format text", note,
                                  sizeof note))
            run_warn(r, "%s data: %s %s", what, file, note);
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
        run_warn(r, "%s", prune_err.msg);
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
        run_warn(r, "%s", text);
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
        run_warn(r, "%s (--valid-src and --valid-tgt measure held-out data instead)", text);
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
            run_warn(r, "update %" PRId64 ": the loss or the gradients are not finite (NaN or "
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
        run_warn(r, "batches per update: %lld here (%d processes x --accum %d), %lld in the "
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
    if (st != TFM_OK) return run_not_usage(st);
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

    if ((st = train_loop(r, end, err))) return run_not_usage(st);
    /* A run that stops between validations is validated once more, so the
     * log ends with the figures of the model it writes. */
    int64_t last = tfm_trainer_steps(r->trainer);
    bool stop;
    if (*end == TFM_RUN_LIMIT && r->valid && last > r->first_step && last % p->valid_every != 0 &&
        (st = validate(r, &stop, err)))
        return run_not_usage(st);
    /* At the end: a checkpoint of the last state, then the model. */
    int averaged;
    if ((st = save_checkpoint(r, err)) || (st = write_model(r, &averaged, err)))
        return run_not_usage(st);
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
