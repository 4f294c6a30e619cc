/* bootstrap.c - bootstrap confidence intervals and the paired bootstrap
 * test, as sacreBLEU 2.3.1 computes them (sacrebleu/significance.py:
 * _bootstrap_resample, estimate_ci, _paired_bs_test, _compute_p_value).
 *
 * A resample draws n segments with replacement, sums their statistics and
 * scores the sum.  The interval is the mean of the resampled scores, ± half
 * the distance between the (n/40)-th lowest and highest: a 95% interval.
 * The paired test resamples the baseline and the system with the same
 * indices; its p-value is (c + 1) / (n + 1) where c counts the resamples
 * whose absolute difference, less the mean absolute difference, exceeds the
 * real absolute difference (Koehn, 2004; Moses'
 * bootstrap-hypothesis-difference-significance.pl).
 *
 * sacreBLEU draws the indices with numpy's default_rng(seed); here each
 * resample has its own tfm_rng, seeded from a generator seeded with the
 * seed, so the result does not depend on the number of threads but differs
 * from sacreBLEU's by resampling noise. */
#include <stdlib.h>
#include <string.h>

#include "metrics_internal.h"

tfm_bootstrap_params tfm_bootstrap_default_params(void)
{
    tfm_bootstrap_params p = {.n_samples = 1000, .seed = 12345, .n_threads = 1};
    return p;
}

typedef struct resample_job {
    const tfm_metric *m;
    const double *stats[2];    /* baseline (or the one system) and system */
    int n_systems;
    size_t n_segments, n_stats;
    const uint64_t *seeds;     /* one per resample */
    double *scores[2];         /* per resample */
    double *sums;              /* per thread slot: 2 x n_stats, per resample */
} resample_job;

static void resample_one(void *ctx, size_t s)
{
    resample_job *job = ctx;
    size_t k = job->n_stats;
    double *sum = job->sums + s * 2 * k;
    memset(sum, 0, 2 * k * sizeof *sum);
    tfm_rng rng;
    tfm_rng_seed(&rng, job->seeds[s]);
    for (size_t i = 0; i < job->n_segments; i++) {
        size_t at = (size_t)tfm_rng_below(&rng, job->n_segments) * k;
        for (int sys = 0; sys < job->n_systems; sys++) {
            const double *row = job->stats[sys] + at;
            double *acc = sum + (size_t)sys * k;
            for (size_t j = 0; j < k; j++) acc[j] += row[j];
        }
    }
    for (int sys = 0; sys < job->n_systems; sys++) {
        tfm_score score;
        tfm_metric_compute(job->m, sum + (size_t)sys * k, &score);
        job->scores[sys][s] = score.score;
    }
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* estimate_ci: the mean and half the 95% interval of n scores (sorts a copy). */
static tfm_status estimate_ci(const double *scores, size_t n, double *mean, double *ci)
{
    double *sorted = malloc(n * sizeof *sorted);
    if (!sorted) return TFM_ERR_NOMEM;
    memcpy(sorted, scores, n * sizeof *sorted);
    qsort(sorted, n, sizeof *sorted, compare_doubles);
    size_t lower = n / 40, upper = n - lower - 1;
    *ci = 0.5 * (sorted[upper] - sorted[lower]);
    double sum = 0;
    for (size_t i = 0; i < n; i++) sum += sorted[i];
    *mean = sum / (double)n;
    free(sorted);
    return TFM_OK;
}

/* Runs the resamples of one or two systems; scores[sys][s] are filled. */
static tfm_status run_resamples(const tfm_metric *m, const double *a, const double *b,
                                size_t n_segments, const tfm_bootstrap_params *bp,
                                double **scores, tfm_error *err)
{
    if (n_segments == 0) return tfm_error_set(err, TFM_ERR_ARG, "no segments to resample");
    if (bp->n_samples < 1) return tfm_error_set(err, TFM_ERR_ARG, "no resamples asked for");
    size_t n = (size_t)bp->n_samples;
    resample_job job = {
        .m = m, .stats = {a, b}, .n_systems = b ? 2 : 1, .n_segments = n_segments,
        .n_stats = tfm_metric_n_stats(m), .scores = {scores[0], scores[1]},
    };
    uint64_t *seeds = malloc(n * sizeof *seeds);
    job.sums = malloc(n * 2 * job.n_stats * sizeof *job.sums);
    tfm_status st = TFM_OK;
    if (!seeds || !job.sums) {
        st = tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    } else {
        tfm_rng rng;
        tfm_rng_seed(&rng, bp->seed);
        for (size_t s = 0; s < n; s++) seeds[s] = tfm_rng_u64(&rng);
        job.seeds = seeds;
        st = tfm_parallel_for(bp->n_threads > 0 ? bp->n_threads : 1, n, resample_one, &job);
        if (st != TFM_OK) st = tfm_error_set(err, st, "could not start threads");
    }
    free(seeds);
    free(job.sums);
    return st;
}

tfm_status tfm_metric_bootstrap(const tfm_metric *m, const double *seg_stats, size_t n_segments,
                                const tfm_bootstrap_params *bp, double *mean, double *ci,
                                tfm_error *err)
{
    double *scores = malloc((bp->n_samples > 0 ? (size_t)bp->n_samples : 1) * sizeof *scores);
    if (!scores) return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    double *both[2] = {scores, NULL};
    tfm_status st = run_resamples(m, seg_stats, NULL, n_segments, bp, both, err);
    if (st == TFM_OK && estimate_ci(scores, (size_t)bp->n_samples, mean, ci) != TFM_OK)
        st = tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    free(scores);
    return st;
}

/* The score of all segments of one system. */
static tfm_status corpus_score(const tfm_metric *m, const double *stats, size_t n_segments,
                               double *score)
{
    size_t k = tfm_metric_n_stats(m);
    double *sum = calloc(k, sizeof *sum);
    if (!sum) return TFM_ERR_NOMEM;
    for (size_t i = 0; i < n_segments; i++)
        for (size_t j = 0; j < k; j++) sum[j] += stats[i * k + j];
    tfm_score s;
    tfm_metric_compute(m, sum, &s);
    *score = s.score;
    free(sum);
    return TFM_OK;
}

tfm_status tfm_metric_paired_bootstrap(const tfm_metric *m, const double *base_stats,
                                       const double *sys_stats, size_t n_segments,
                                       const tfm_bootstrap_params *bp, tfm_paired_result *out,
                                       tfm_error *err)
{
    memset(out, 0, sizeof *out);
    size_t n = bp->n_samples > 0 ? (size_t)bp->n_samples : 1;
    double *base = malloc(n * sizeof *base), *sys = malloc(n * sizeof *sys);
    tfm_status st = TFM_OK;
    if (!base || !sys || corpus_score(m, base_stats, n_segments, &out->base_score) != TFM_OK ||
        corpus_score(m, sys_stats, n_segments, &out->sys_score) != TFM_OK) {
        st = tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
        goto done;
    }
    double *both[2] = {base, sys};
    st = run_resamples(m, base_stats, sys_stats, n_segments, bp, both, err);
    if (st != TFM_OK) goto done;
    if (estimate_ci(base, n, &out->base_mean, &out->base_ci) != TFM_OK ||
        estimate_ci(sys, n, &out->sys_mean, &out->sys_ci) != TFM_OK) {
        st = tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
        goto done;
    }
    /* _paired_bs_test and _compute_p_value */
    double real = out->base_score - out->sys_score, mean_diff = 0;
    if (real < 0) real = -real;
    for (size_t s = 0; s < n; s++) {
        base[s] = sys[s] - base[s];
        if (base[s] < 0) base[s] = -base[s];
        mean_diff += base[s];
    }
    mean_diff /= (double)n;
    size_t c = 0;
    for (size_t s = 0; s < n; s++) c += base[s] - mean_diff > real;
    out->p_value = (double)(c + 1) / (double)(n + 1);
done:
    free(base);
    free(sys);
    return st;
}
