/* schedule.c - the learning rate of an update.
 *
 * The paper's (section 5.3, equation 3), times a factor as the Annotated
 * Transformer and tensor2tensor scale it:
 *
 *     lrate = factor * d_model^-0.5 * min(step^-0.5, step * warmup_steps^-1.5)
 *
 * rises linearly for the first warmup steps and then falls with the inverse
 * square root of the step; the peak, at step == warmup, is
 * factor * (d_model * warmup)^-0.5 (7.0e-4 for base with warmup 4000).  It
 * never reaches 0, and needs no budget.
 *
 * The budgeted schedules rise as the paper's does, to the same peak, and
 * then end at 0 on the last update of the budget (total): "linear" falls
 * linearly from the peak to 0 (Li et al. 2020, "Budgeted Training"); "wsd"
 * (warm-up, stable, decay) holds the peak and falls linearly over the last
 * TFM_WSD_DECAY_SHARE of the updates (Hägele et al. 2024).  Without a known
 * total (0) they hold the peak after the warm-up, as "constant" always does
 * (a choice for fine-tuning, which may stop at any point). */
#include <limits.h>
#include <math.h>

#include "tfm/train.h"

double tfm_lr_schedule(double factor, int d_model, int warmup, int64_t step)
{
    if (step < 1) step = 1;
    if (warmup < 1) warmup = 1;
    double s = (double)step;
    double rise = s * pow((double)warmup, -1.5);
    double fall = 1.0 / sqrt(s);
    return factor / sqrt((double)d_model) * (rise < fall ? rise : fall);
}

int64_t tfm_warmup_steps(int64_t warmup, double share, int64_t least, int64_t total)
{
    if (share <= 0) return warmup > 0 ? warmup : 1;
    double n = (double)(total > 0 ? total : TFM_WARMUP_UNKNOWN_TOTAL);
    double w = share * n;
    /* The floor, but never more than half the run (then it could not fall). */
    double floor = (double)least < n / 2 ? (double)least : n / 2;
    if (w < floor) w = floor;
    return w < 1 ? 1 : (int64_t)llround(w);
}

/* From the peak at update from to 0 just after update total: the rate of
 * update step (from <= step). */
static double fall_to_zero(double peak, int64_t from, int64_t step, int64_t total)
{
    if (total <= from) return peak;
    if (step > total) step = total;
    return peak * (double)(total - step + 1) / (double)(total - from + 1);
}

double tfm_lr_at(tfm_schedule kind, double factor, int d_model, int64_t warmup, int64_t step,
                 int64_t total)
{
    if (step < 1) step = 1;
    if (warmup < 1) warmup = 1;
    if (warmup > INT_MAX) warmup = INT_MAX;
    if (kind == TFM_SCHEDULE_NOAM) return tfm_lr_schedule(factor, d_model, (int)warmup, step);
    double peak = factor / sqrt((double)d_model * (double)warmup);
    if (step <= warmup) return peak * (double)step / (double)warmup;
    if (total <= 0 || kind == TFM_SCHEDULE_CONSTANT) return peak;
    if (kind == TFM_SCHEDULE_LINEAR) return fall_to_zero(peak, warmup, step, total);
    int64_t decay = (int64_t)llround(TFM_WSD_DECAY_SHARE * (double)total);
    int64_t from = total - decay > warmup ? total - decay : warmup;
    return step <= from ? peak : fall_to_zero(peak, from, step, total);
}
