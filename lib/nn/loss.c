/* loss.c - the training loss: label-smoothed cross-entropy (Szegedy et al.,
 * 2016; the paper's eps_ls = 0.1) over the output distribution, with labels
 * equal to the padding id counted nowhere.
 *
 * The formula is fairseq's label_smoothed_nll_loss
 * (fairseq/criterions/label_smoothed_cross_entropy.py, v0.10.x):
 *
 *     loss = (1 - eps) * nll + eps / V * smooth,
 *     nll = -log p(label),  smooth = -sum over the V classes of log p(v)
 *
 * which is the cross-entropy against the target distribution
 * q = (1 - eps) one_hot(label) + eps / V (Szegedy's uniform prior over all V
 * classes, the label included).  Later fairseq versions spread eps over the
 * V - 1 other classes instead (eps_i = eps / (V - 1), loss = (1 - eps -
 * eps_i) nll + eps_i smooth); with V in the thousands the two differ by
 * ~eps / V, and we keep the paper's reference distribution.
 *
 * Because q sums to 1, the gradient with respect to the logits z is simply
 * p - q.  The backward pass writes it over the log-probabilities in place:
 * the [rows, V] logits are the largest activation of a step, and this keeps
 * one of them. */
#include <string.h>

#include "nn/layers.h"

/* The sum of x[0..n): eight float lanes (which the compiler can keep in
 * vector registers without reassociating anything), emptied into a double
 * every 512 values so that a 32k-wide row keeps its small terms. */
static double row_sum(const float *x, int n)
{
    enum { LANES = 8, CHUNK = 64 * LANES };
    double total = 0.0;
    int i = 0;
    while (i + LANES <= n) {
        float acc[LANES] = {0};
        int end = i + CHUNK < n ? i + CHUNK : n;
        for (; i + LANES <= end; i += LANES)
            for (int k = 0; k < LANES; k++) acc[k] += x[i + k];
        for (int k = 0; k < LANES; k++) total += acc[k];
    }
    for (; i < n; i++) total += x[i];
    return total;
}

/* loss, nll: [N] (written); logp: [N, V]; labels: [N] */
void label_smoothed_loss_forward(double *loss, double *nll, const float *logp,
                                 const int32_t *labels, int N, int V, float eps, int32_t ignore)
{
    for (int n = 0; n < N; n++) {
        if (labels[n] == ignore) {
            loss[n] = nll[n] = 0.0;
            continue;
        }
        const float *row = logp + (size_t)n * V;
        double smooth = -row_sum(row, V);
        nll[n] = -(double)row[labels[n]];
        loss[n] = (1.0 - eps) * nll[n] + (double)eps / V * smooth;
    }
}

/* logp: [N, V] in place; labels: [N] */
void label_smoothed_loss_backward(float *logp, const int32_t *labels, int N, int V, float eps,
                                  int32_t ignore, float scale)
{
    const float off = eps / (float)V; /* q of every class but the label */
    for (int n = 0; n < N; n++) {
        float *row = logp + (size_t)n * V;
        if (labels[n] == ignore) {
            memset(row, 0, (size_t)V * sizeof *row);
            continue;
        }
        exp_nonpositive(row, (size_t)V); /* the probabilities p */
        for (int j = 0; j < V; j++) row[j] = scale * (row[j] - off);
        row[labels[n]] -= scale * (1.0f - eps);
    }
}
