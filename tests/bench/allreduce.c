/* allreduce.c - the gradient sum across processes on its own, for the
 * training benchmark across processes (tests/bench/train_mpi.sh): the
 * milliseconds one sum of a whole gradient takes, for the gradients of the
 * small and base presets (8000-piece vocabulary, as the training benchmark
 * has), by MPI_Allreduce (in place, float32, Open MPI's choice of algorithm)
 * and by tfm_dist_sum_floats (train's: in rank order, the same bits on every
 * rank and as one process accumulating).  The difference is what the fixed
 * order costs.
 *
 * Each sum runs REPS times (default 5) after one warm-up, every rank
 * starting together (a barrier); the median is printed.  Run under mpirun;
 * LABEL names Open MPI's allreduce algorithm in the output (give mpirun
 * "--mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_allreduce_algorithm
 * 4" for the ring, "default" for its own choice):
 *
 *   mpirun -np 2 build/release/bench/allreduce [REPS [LABEL]]
 *
 * Output (rank 0), also for run.sh's summary:
 *   gradient_mb preset=P X
 *   allreduce_ms preset=P ranks=N algorithm=LABEL X
 *   ordered_sum_ms preset=P ranks=N X
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tfm.h"

#define MAX_REPS 101

static int compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The median of reps timed sums of x[0, n) by one method (ordered or not). */
static double median_ms(tfm_dist *d, float *x, size_t n, bool ordered, int reps)
{
    double ms[MAX_REPS];
    tfm_error err;
    for (int i = -1; i < reps; i++) {
        for (size_t k = 0; k < n; k++) x[k] = (float)(k % 7) * 0.25f; /* no overflow */
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        if (ordered) {
            if (tfm_dist_sum_floats(d, x, n, &err) != TFM_OK) {
                fprintf(stderr, "allreduce: %s\n", err.msg);
                exit(1);
            }
        } else {
            MPI_Allreduce(MPI_IN_PLACE, x, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        }
        if (i >= 0) ms[i] = 1e3 * (MPI_Wtime() - t0); /* i == -1: the warm-up */
    }
    qsort(ms, (size_t)reps, sizeof ms[0], compare_double);
    return ms[reps / 2];
}

int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : 5;
    const char *label = argc > 2 ? argv[2] : "default";
    if (reps < 1 || reps > MAX_REPS) {
        fprintf(stderr, "usage: allreduce [REPS (1 to %d) [LABEL]]\n", MAX_REPS);
        return 2;
    }
    tfm_dist *d;
    tfm_error err;
    if (tfm_dist_create(&argc, &argv, &d, &err) != TFM_OK) {
        fprintf(stderr, "allreduce: %s\n", err.msg);
        return 1;
    }
    if (tfm_dist_size(d) < 2) {
        fprintf(stderr, "allreduce: run it under mpirun -np 2 (or more)\n");
        tfm_dist_free(d);
        return 1;
    }
    const char *presets[] = {"small", "base"};
    for (int p = 0; p < 2; p++) {
        tfm_config c;
        tfm_config_preset(presets[p], &c, NULL);
        c.src_vocab_size = c.tgt_vocab_size = 8000;
        size_t n = tfm_params_count(&c);
        float *x = malloc(n * sizeof *x);
        if (!x) {
            fprintf(stderr, "allreduce: out of memory\n");
            return 1;
        }
        double plain = median_ms(d, x, n, false, reps);
        double ordered = median_ms(d, x, n, true, reps);
        if (tfm_dist_rank(d) == 0) {
            printf("gradient_mb preset=%s %.1f\n", presets[p], (double)n * 4 / 1e6);
            printf("allreduce_ms preset=%s ranks=%d algorithm=%s %.1f\n", presets[p],
                   tfm_dist_size(d), label, plain);
            printf("ordered_sum_ms preset=%s ranks=%d %.1f\n", presets[p], tfm_dist_size(d),
                   ordered);
        }
        free(x);
    }
    tfm_dist_free(d);
    return 0;
}
