/* messages.c - what a training run's events say to a person: the lines
 * 'train' prints on stderr, for any front end of a run (tfm_run).  The
 * texts are here and not in the program so that another front end (a
 * user's program over libtfm.a) prints the same run the same way. */
#include <inttypes.h>
#include <math.h>

#include "tfm/train.h"

void tfm_format_hms(double seconds, char *out, size_t size)
{
    if (!(seconds >= 0) || seconds > 1e9) {
        snprintf(out, size, "-");
        return;
    }
    long s = (long)(seconds + 0.5);
    snprintf(out, size, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
}

static const char *format_name(tfm_corpus_format f)
{
    return f == TFM_CORPUS_TEXT ? "text" : "ids";
}

static const char *plural(long long n, const char *many)
{
    return n == 1 ? "" : many;
}

/* The model, the options and the processes, as training starts. */
static tfm_status start_text(const tfm_run *r, const tfm_run_event *ev, tfm_buf *out)
{
    const tfm_run_params *o = tfm_run_params_of(r);
    const tfm_config *c = &tfm_trainer_model(tfm_run_trainer(r))->config;
    tfm_status st = TFM_OK;
    if (ev->text)
        st = tfm_buf_printf(out, "resuming from %s at update %" PRId64 "\n", ev->text, ev->step);
    else if (o->init)
        st = tfm_buf_printf(out, "fine-tuning %s: its weights, a new optimiser and schedule\n",
                            o->init);
    if (!st) st = tfm_buf_printf(out, "model: ");
    if (!st) st = tfm_config_describe(c, out);
    if (!st) st = tfm_buf_printf(out, "\noptions:");
    if (!st) st = tfm_run_options_format(r, out);
    if (!st) st = tfm_buf_printf(out, "\n");
    if (!st && ev->ranks > 1)
        st = tfm_buf_printf(out,
                            "%d processes of %d thread%s, each making %d batch%s of every update "
                            "(%d per update)\n",
                            ev->ranks, o->threads, plural(o->threads, "s"), o->train.accum,
                            plural(o->train.accum, "es"), ev->ranks * o->train.accum);
    return st;
}

static tfm_status valid_text(const tfm_run *r, const tfm_run_event *ev, tfm_buf *out)
{
    const tfm_valid_result *v = ev->valid;
    tfm_status st = tfm_buf_printf(out, "valid step %" PRId64 " loss %.3f ppl %.2f", ev->step,
                                   ev->loss, ev->ppl);
    if (!st && v->blind_tokens > 0)
        st = tfm_buf_printf(out, " (other sources: ppl %.1f)",
                            exp(v->blind_nll_sum / (double)v->blind_tokens));
    if (!st && v->decoded)
        st = tfm_buf_printf(out, " bleu %.2f exact %.1f%%", v->bleu, 100 * v->exact);
    if (!st)
        st = tfm_buf_printf(out, " (%.1fs)%s\n", ev->seconds,
                            ev->improved                        ? " best so far"
                            : tfm_run_params_of(r)->patience ? " no better"
                                                                : "");
    return st;
}

static tfm_status end_text(const tfm_run_event *ev, tfm_buf *out)
{
    tfm_status st = TFM_OK;
    if (ev->averaged)
        st = tfm_buf_printf(out, "%s is the average of the last %d checkpoints\n", ev->text,
                            ev->averaged);
    char elapsed[32];
    tfm_format_hms(ev->elapsed, elapsed, sizeof elapsed);
    if (!st)
        st = tfm_buf_printf(out,
                            "%s after %" PRId64 " updates, %.2f epochs, %s (this run: %" PRId64
                            " target tokens, %.0f tokens/s); model written to %s\n",
                            ev->end == TFM_RUN_STOPPED    ? "stopped by a signal"
                            : ev->end == TFM_RUN_PATIENCE ? "stopped early"
                                                          : "done",
                            ev->step, ev->epoch, elapsed, ev->run_tokens,
                            ev->run_seconds > 0 ? (double)ev->run_tokens / ev->run_seconds : 0.0,
                            ev->text);
    if (!st && ev->ranks > 1 && ev->run_updates > 0)
        st = tfm_buf_printf(out,
                            "%d processes: per update, %.1f ms waiting for the others and %.1f ms "
                            "summing the gradients\n",
                            ev->ranks, 1e3 * ev->run_wait_seconds / (double)ev->run_updates,
                            1e3 * ev->run_reduce_seconds / (double)ev->run_updates);
    return st;
}

tfm_status tfm_run_event_text(const tfm_run *r, const tfm_run_event *ev, tfm_buf *out)
{
    const tfm_corpus_stats *d = ev->data;
    switch (ev->kind) {
    case TFM_RUN_WARNING: return tfm_buf_printf(out, "%s\n", ev->text);
    case TFM_RUN_DATA:
        return tfm_buf_printf(out,
                              "%s data: %zu pairs of %zu lines (%s, %s), %" PRId64
                              " source and %" PRId64 " target tokens; skipped %zu with an empty "
                              "side, %zu longer than %d tokens\n",
                              ev->text, d->pairs, d->lines, format_name(d->src_format),
                              format_name(d->tgt_format), d->src_tokens, d->tgt_tokens, d->empty,
                              d->too_long, tfm_run_params_of(r)->corpus.max_length);
    case TFM_RUN_START: return start_text(r, ev, out);
    case TFM_RUN_STEP: return TFM_OK;
    case TFM_RUN_VALID: return valid_text(r, ev, out);
    case TFM_RUN_EARLY_STOP:
        return tfm_buf_printf(out,
                              "early stop: %d validations without improvement; the best (step "
                              "%" PRId64 ") is %s\n",
                              ev->bad_validations, ev->best_step, ev->best_path);
    case TFM_RUN_CHECKPOINT: return tfm_buf_printf(out, "checkpoint %s\n", ev->text);
    case TFM_RUN_END: return end_text(ev, out);
    }
    return TFM_OK;
}

void tfm_run_progress_add(tfm_run_progress *p, const tfm_run_event *ev)
{
    if (ev->kind != TFM_RUN_STEP) return;
    p->loss += ev->update->loss_sum;
    p->nll += ev->update->nll_sum;
    p->tokens += ev->update->tgt_tokens;
}

tfm_status tfm_run_progress_line(tfm_run_progress *p, const tfm_run *r, const tfm_run_event *ev,
                                 tfm_buf *out)
{
    double dt = ev->time - p->last;
    double tokens = p->tokens > 0 ? (double)p->tokens : 1;
    char elapsed[32], eta[32];
    tfm_format_hms(ev->elapsed, elapsed, sizeof elapsed);
    tfm_format_hms(tfm_run_eta(r, ev->time), eta, sizeof eta);
    tfm_status st = tfm_buf_printf(
        out, "step %" PRId64 " epoch %.2f loss %.3f ppl %.2f lr %.2e %.0f tok/s elapsed %s ETA %s",
        ev->step, ev->epoch, p->loss / tokens, exp(p->nll / tokens), ev->update->lr,
        dt > 0 ? (double)p->tokens / dt : 0, elapsed, eta);
    *p = (tfm_run_progress){.last = ev->time};
    return st;
}
