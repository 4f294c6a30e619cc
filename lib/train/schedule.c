/* schedule.c - the learning rate of the paper (section 5.3, equation 3):
 *
 *     lrate = d_model^-0.5 * min(step^-0.5, step * warmup_steps^-1.5)
 *
 * times a factor, as the Annotated Transformer and tensor2tensor scale it.
 * It rises linearly for the first warmup steps and then falls with the
 * inverse square root of the step; the peak, at step == warmup, is
 * factor * (d_model * warmup)^-0.5 (7.0e-4 for base with warmup 4000). */
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
