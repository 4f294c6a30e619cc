/* softmax.c - softmax and log-softmax over rows, numerically stable: the row
 * maximum is subtracted before exponentiating, so no exp overflows and the
 * largest term is exactly exp(0) = 1 (the sum is never 0).  The softmax's
 * backward sits beside it; the log-softmax's is fused into the loss
 * (loss.c), which reads probabilities back with exp_nonpositive.
 *
 * The log-softmax over the vocabulary runs on every decoder step over R x V
 * values (64 x 32000 for a base model's beam batch); with the C library's
 * scalar expf it took a fifth of a step.  So it evaluates exp eight lanes at
 * a time with GCC/Clang vector extensions, which compile to SSE (or NEON)
 * on any target without intrinsics or special flags, and to AVX2 where the
 * CPU has it; the logit statistics and exp_nonpositive go sixteen lanes at
 * a time with AVX-512 (NN_VERSIONS_512). */
#include <math.h>
#include <string.h>

#include "nn/layers.h"

/* dx, dy, y: [n].  With y = softmax(x): dx_i += y_i (dy_i - sum_j dy_j y_j).
 * A weight that is exactly 0 (a masked key) passes no gradient. */
void softmax_backward(float *dx, const float *dy, const float *y, int n)
{
    float dot = 0.0f;
    for (int i = 0; i < n; i++) dot += dy[i] * y[i];
    for (int i = 0; i < n; i++) dx[i] += y[i] * (dy[i] - dot);
}

/* The largest of x[0..n) and the first index holding it, n >= 1.  Each of
 * eight lanes keeps its own first maximum (it moves only on a strictly
 * larger value); the lanes are then merged preferring the lower index on
 * ties. */
NN_INLINE float row_max(const float *x, int n, int32_t *argmax)
{
    int i = 0;
    float max = x[0];
    int32_t at = 0;
    if (n >= 8) {
        nn_f32x8 m = nn_load8(x);
        nn_i32x8 idx = {0, 1, 2, 3, 4, 5, 6, 7}, cur = idx;
        for (i = 8; i + 8 <= n; i += 8) {
            cur += 8;
            nn_f32x8 v = nn_load8(x + i);
            nn_i32x8 gt = v > m;
            m = (nn_f32x8)(((nn_i32x8)v & gt) | ((nn_i32x8)m & ~gt));
            idx = (cur & gt) | (idx & ~gt);
        }
        max = m[0];
        at = idx[0];
        for (int j = 1; j < 8; j++)
            if (m[j] > max || (m[j] == max && idx[j] < at)) {
                max = m[j];
                at = idx[j];
            }
    }
    for (; i < n; i++)
        if (x[i] > max) {
            max = x[i];
            at = i;
        }
    *argmax = at;
    return max;
}

/* sum of exp(x[i] - max) over x[0..n).  Sixteen float lanes gather chunks
 * of 64 terms, then a double takes each chunk: over tens of thousands of
 * terms a float running sum would lose the small ones.  The lanes are one
 * 512-bit vector with AVX-512, two of eight elsewhere (sixteen lanes as one
 * vector, AVX2 spilled them to the stack), each lane summing the same
 * terms: every version gives the same bits. */
NN_INLINE double row_sum_exp(nn_isa isa, const float *x, int n, float max)
{
    enum { CHUNK = 64 };
    double sum = 0.0;
    int i = 0;
    while (i + 16 <= n) {
        float acc[16];
        int end = i + CHUNK < n ? i + CHUNK : n;
        if (isa == NN_ISA_AVX512) {
            nn_f32x16 a = {0};
            for (; i + 16 <= end; i += 16) {
                nn_f32x16 e = nn_load16(x + i) - max;
                nn_exp16_nonpositive(&e);
                a += e;
            }
            memcpy(acc, &a, sizeof a);
        } else {
            nn_f32x8 lo = {0, 0, 0, 0, 0, 0, 0, 0}, hi = lo;
            for (; i + 16 <= end; i += 16) {
                nn_f32x8 e = nn_load8(x + i) - max, f = nn_load8(x + i + 8) - max;
                nn_exp8_nonpositive(&e);
                nn_exp8_nonpositive(&f);
                lo += e;
                hi += f;
            }
            memcpy(acc, &lo, sizeof lo);
            memcpy(acc + 8, &hi, sizeof hi);
        }
        double pairs[8];
        for (int j = 0; j < 8; j++) pairs[j] = (double)acc[2 * j] + acc[2 * j + 1];
        sum += ((pairs[0] + pairs[1]) + (pairs[2] + pairs[3])) +
               ((pairs[4] + pairs[5]) + (pairs[6] + pairs[7]));
    }
    for (; i < n; i++) sum += nn_exp1_nonpositive(x[i] - max);
    return sum;
}

/* x: [n], n >= 1 */
NN_MULTIVERSION
void softmax_forward(float *x, int n)
{
    int32_t at;
    const float max = row_max(x, n, &at);
    nn_f32x8 acc = {0, 0, 0, 0, 0, 0, 0, 0};
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        nn_f32x8 e = nn_load8(x + i) - max;
        nn_exp8_nonpositive(&e);
        nn_store8(x + i, e);
        acc += e;
    }
    float sum = nn_sum8(&acc);
    for (; i < n; i++) {
        x[i] = nn_exp1_nonpositive(x[i] - max);
        sum += x[i];
    }
    const float inv = 1.0f / sum;
    for (i = 0; i < n; i++) x[i] *= inv;
}

/* The exps at 512 bits where the CPU has AVX-512 (the logits of training's
 * output layer: 3% of a step at 256). */
NN_INLINE void logit_stats_body(nn_isa isa, const float *x, int N, int n,
                                tfm_logit_stats *stats)
{
    for (int r = 0; r < N; r++) {
        const float *row = x + (size_t)r * n;
        tfm_logit_stats *st = &stats[r];
        st->max = row_max(row, n, &st->argmax);
        st->log_sum = (float)log(row_sum_exp(isa, row, n, st->max));
    }
}
NN_VERSIONS_512(, logit_stats, (const float *x, int N, int n, tfm_logit_stats *stats),
                (x, N, n, stats))

/* The result is (x - max) - log(sum), not x - (max + log(sum)): with logits
 * of 1e30 the latter would round log(sum) away. */
NN_MULTIVERSION
void log_softmax_apply(float *x, int N, int n, const tfm_logit_stats *stats)
{
    for (int r = 0; r < N; r++) {
        float *row = x + (size_t)r * n;
        const float max = stats[r].max, log_sum = stats[r].log_sum;
        int i = 0;
        for (; i + 8 <= n; i += 8) nn_store8(row + i, (nn_load8(row + i) - max) - log_sum);
        for (; i < n; i++) row[i] = (row[i] - max) - log_sum;
    }
}

void log_softmax_forward(float *x, int N, int n)
{
    for (int r = 0; r < N; r++) {
        tfm_logit_stats st;
        logit_stats(x + (size_t)r * n, 1, n, &st);
        log_softmax_apply(x + (size_t)r * n, 1, n, &st);
    }
}

/* x: [n], every value <= 0 (log-probabilities), in place; sixteen lanes
 * with AVX-512, eight elsewhere, each lane as nn_exp8_nonpositive computes
 * it. */
NN_INLINE void exp_nonpositive_body(nn_isa isa, float *x, size_t n)
{
    size_t i = 0;
    if (isa == NN_ISA_AVX512)
        for (; i + 16 <= n; i += 16) {
            nn_f32x16 e = nn_load16(x + i);
            nn_exp16_nonpositive(&e);
            memcpy(x + i, &e, sizeof e);
        }
    for (; i + 8 <= n; i += 8) {
        nn_f32x8 e = nn_load8(x + i);
        nn_exp8_nonpositive(&e);
        nn_store8(x + i, e);
    }
    for (; i < n; i++) x[i] = nn_exp1_nonpositive(x[i]);
}
NN_VERSIONS_512(, exp_nonpositive, (float *x, size_t n), (x, n))
