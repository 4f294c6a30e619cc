/* sgemm.c - measures this machine's single-precision matrix product rate
 * (OpenBLAS cblas_sgemm) on the shapes of one Transformer training step and
 * one decoding step, with 1 and with 2 BLAS threads.
 *
 * This rate is a reference, what a well-known BLAS does on these shapes; the
 * physical limit is the CPU's FMA peak (tests/bench/peak.c; DESIGN.md,
 * "Performance yardsticks"), and each rate is also printed as a fraction of
 * the peak of the same thread count, at the widest width the CPU has, when
 * run.sh has put it in the environment (FMA_PEAK_512_1 and so on; see
 * peak_env.h).  run.sh runs this with OpenBLAS's own choice of kernel
 * (OPENBLAS_CORETYPE unset), and again with OPENBLAS_CORETYPE=Haswell for
 * comparison: the kernel that ran is printed, as OpenBLAS does not know
 * every CPU (Debian 12's 0.3.21 runs Prescott, an SSE3 kernel, on the
 * AVX-512 Xeon of family 6, model 207: a sixth of its 1-thread FMA peak).
 *
 * Output: one table row per (threads, shape), then machine-readable lines
 *
 *   sgemm_blas core=NAME coretype=ENV    the kernel OpenBLAS ran, and
 *                                        OPENBLAS_CORETYPE (or "unset")
 *   sgemm_gflops threads=1 X             training shapes, geometric mean
 *   sgemm_gflops threads=2 Y
 *   sgemm_gflops_decode threads=1 Z      decoding shapes (64 rows), geometric mean
 *   sgemm_gflops_decode threads=2 W
 *   sgemm_peak_fraction threads=T F      X or Y over the FMA peak (when known)
 *   sgemm_peak_fraction_decode threads=T F
 *
 * With --name-core, every line but sgemm_blas names the kernel first
 * ("sgemm_gflops core=Haswell threads=1 X"), so that the lines of a run
 * with a kernel forced cannot be read as those of OpenBLAS's own choice.
 *
 * The geometric mean counts every shape once, so one shape slowed down (by
 * other work on a shared machine) cannot move it far.  The flop-weighted rate
 * (sum of flops / sum of best times: the rate at which the set runs once
 * each) is printed beside it; a third of its flops are the base vocabulary
 * projection's, so that one shape decides much of it.
 *
 * Each shape is warmed up once, then repeated until --seconds (0.3 s) have
 * passed; the best repetition gives the rate (GFLOP/s = 2*M*N*K / time), as
 * the best is the least disturbed by other work on a shared machine.  Process
 * CPU seconds are reported beside wall seconds: with T threads an idle
 * machine gives cpu/wall close to T, and one busy with other processes less
 * ("GF/cpus" is then the fairer figure).  Contention outside this system (a
 * virtual machine whose two CPUs share one physical core with other guests)
 * is invisible to both: it shows only as rates that vary from run to run, so
 * compare figures taken in the same run.
 *
 * Usage: sgemm [--seconds S] [--name-core]   (S per shape and thread count; 0.3)
 */
#include <cblas.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tfm/core.h"

#include "peak_env.h"

/* Debian's cblas.h declares these for OpenBLAS, other cblas.h files do not;
 * a repeated identical declaration is harmless. */
void openblas_set_num_threads(int num_threads);
char *openblas_get_config(void);
char *openblas_get_corename(void);

/* One product C[M x N] = op(A)[M x K] * B[K x N], row-major.  trans_a marks a
 * weight-gradient product (dW = X^T dY), whose A is stored K x M. */
typedef struct shape {
    const char *preset;
    const char *name;
    int m, n, k;
    int trans_a;
    int decoding; /* 0: counts toward sgemm_gflops, 1: toward _decode */
} shape;

/* Presets: small (d_model 256, d_ff 1024, vocab 8000) and base (d_model 512,
 * d_ff 2048, vocab 32000).  Training rows: 4096 tokens per batch; the vocab
 * projection uses 1024 rows so that its run stays short (its rate is what
 * matters, not its size).  Decoding rows: 64 sentences x beams per step. */
enum { TRAIN_ROWS = 4096, VOCAB_ROWS = 1024, DECODE_ROWS = 64 };

static int make_shapes(shape *out)
{
    static const struct { const char *name; int d, d_ff, vocab; } presets[] = {
        { "small", 256, 1024, 8000 },
        { "base", 512, 2048, 32000 },
    };
    int n = 0;
    for (int dec = 0; dec <= 1; dec++) {
        for (size_t p = 0; p < sizeof presets / sizeof presets[0]; p++) {
            const char *pn = presets[p].name;
            int d = presets[p].d, ff = presets[p].d_ff, v = presets[p].vocab;
            int rows = dec ? DECODE_ROWS : TRAIN_ROWS;
            int vrows = dec ? DECODE_ROWS : VOCAB_ROWS;
            out[n++] = (shape){ pn, "qkv projection", rows, 3 * d, d, 0, dec };
            out[n++] = (shape){ pn, "output projection", rows, d, d, 0, dec };
            out[n++] = (shape){ pn, "ffn up", rows, ff, d, 0, dec };
            out[n++] = (shape){ pn, "ffn down", rows, d, ff, 0, dec };
            out[n++] = (shape){ pn, "vocab projection", vrows, v, d, 0, dec };
            if (!dec) /* the backward pass: one weight gradient, K = tokens */
                out[n++] = (shape){ pn, "ffn up dW (A^T)", d, ff, rows, 1, dec };
        }
    }
    return n;
}

static double now(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static float *random_matrix(tfm_rng *rng, size_t count)
{
    float *m = malloc(count * sizeof *m);
    if (!m)
        return NULL;
    for (size_t i = 0; i < count; i++)
        m[i] = tfm_rng_float(rng) - 0.5f;
    return m;
}

typedef struct result {
    double best;   /* seconds of the fastest repetition */
    double wall;   /* seconds of all timed repetitions */
    double cpu;    /* process CPU seconds of the same */
    int reps;
} result;

/* Times one shape; returns 0 on success, -1 when memory ran out. */
static int time_shape(const shape *s, double budget, tfm_rng *rng, result *r)
{
    size_t m = (size_t)s->m, n = (size_t)s->n, k = (size_t)s->k;
    float *a = random_matrix(rng, m * k);
    float *b = random_matrix(rng, k * n);
    float *c = calloc(m * n, sizeof *c);
    if (!a || !b || !c) {
        free(a), free(b), free(c);
        return -1;
    }
    /* Row-major: A is M x K (lda = K), or stored K x M (lda = M) when transposed. */
    enum CBLAS_TRANSPOSE ta = s->trans_a ? CblasTrans : CblasNoTrans;
    int lda = s->trans_a ? s->m : s->k;

    /* Warm-up: first touch of the pages, thread start-up, caches. */
    cblas_sgemm(CblasRowMajor, ta, CblasNoTrans, s->m, s->n, s->k, 1.0f, a, lda, b, s->n,
                0.0f, c, s->n);

    r->best = INFINITY;
    r->reps = 0;
    double wall0 = now(CLOCK_MONOTONIC), cpu0 = now(CLOCK_PROCESS_CPUTIME_ID);
    double t = wall0;
    /* At least 3 repetitions, so "best" means something even for the slow shapes. */
    while (r->reps < 3 || t - wall0 < budget) {
        cblas_sgemm(CblasRowMajor, ta, CblasNoTrans, s->m, s->n, s->k, 1.0f, a, lda, b,
                    s->n, 0.0f, c, s->n);
        double t1 = now(CLOCK_MONOTONIC);
        if (t1 - t < r->best)
            r->best = t1 - t;
        t = t1;
        r->reps++;
    }
    r->wall = t - wall0;
    r->cpu = now(CLOCK_PROCESS_CPUTIME_ID) - cpu0;
    free(a), free(b), free(c);
    return 0;
}

static double gflop(const shape *s)
{
    return 2.0 * s->m * s->n * (double)s->k * 1e-9;
}

int main(int argc, char **argv)
{
    double budget = 0.3;
    bool name_core = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) {
            char *end;
            errno = 0;
            budget = strtod(argv[++i], &end);
            if (errno || *end || end == argv[i] || !(budget >= 0 && budget <= 60)) {
                fprintf(stderr, "sgemm: --seconds: expected a number in [0, 60], got '%s'\n",
                        argv[i]);
                return 2;
            }
        } else if (strcmp(argv[i], "--name-core") == 0) {
            name_core = true;
        } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            printf("usage: sgemm [--seconds S] [--name-core]\n"
                   "  S: timed seconds per shape, default 0.3; --name-core: the kernel's name\n"
                   "  in every machine-readable line\n");
            return 0;
        } else {
            fprintf(stderr, "sgemm: unknown argument '%s'\n"
                            "usage: sgemm [--seconds S] [--name-core]\n", argv[i]);
            return 2;
        }
    }

    shape shapes[32];
    int n_shapes = make_shapes(shapes);
    tfm_rng rng;
    tfm_rng_seed(&rng, 1);

    const char *core = openblas_get_corename();
    const char *coretype = getenv("OPENBLAS_CORETYPE");
    if (!coretype || !*coretype)
        coretype = "unset";
    printf("sgemm: OpenBLAS %s (core %s), %d CPUs, OPENBLAS_CORETYPE %s\n", openblas_get_config(),
           core, tfm_cpu_count(), coretype);
    static const int thread_counts[] = { 1, 2 };
    double peak[2] = { 0 };
    int bits[2] = { 0 };
    for (int ti = 0; ti < 2; ti++)
        peak[ti] = peak_env_gflops(thread_counts[ti], false, &bits[ti]);
    for (int ti = 0; ti < 2; ti++)
        if (peak[ti] > 0)
            printf("sgemm: the FMA peak of %d thread%s (%d bits): %.1f GFLOP/s\n",
                   thread_counts[ti], thread_counts[ti] > 1 ? "s" : "", bits[ti], peak[ti]);
    if (peak[0] == 0 && peak[1] == 0)
        printf("sgemm: no FMA peak in the environment (FMA_PEAK_512_1 and so on: run.sh measures "
               "it with bench/peak), so no fractions of it\n");
    /* Other work on the machine shows here and, during the run, in cpu/wall. */
    double load[1] = { -1 };
    if (getloadavg(load, 1) != 1)
        load[0] = -1;
    printf("sgemm: best of repeats over %.2f s per shape; M x N x K, row-major; "
           "load average %.2f at start\n", budget, load[0]);
    printf("%-3s %-6s %-18s %5s %6s %5s %8s %7s %5s %8s %6s\n", "thr", "preset", "product", "M",
           "N", "K", "GFLOP/s", "of peak", "reps", "cpu/wall", "GF/cpus");

    double rate[2][2] = { { 0 } };    /* [thread index][decoding] flop-weighted */
    double geo[2][2] = { { 0 } };     /* geometric means */
    for (int ti = 0; ti < 2; ti++) {
        int threads = thread_counts[ti];
        openblas_set_num_threads(threads);
        double flops[2] = { 0 }, secs[2] = { 0 }, logsum[2] = { 0 };
        int count[2] = { 0 };
        for (int i = 0; i < n_shapes; i++) {
            const shape *s = &shapes[i];
            result r;
            if (time_shape(s, budget, &rng, &r) != 0) {
                fprintf(stderr, "sgemm: out of memory for %d x %d x %d\n", s->m, s->n, s->k);
                return 1;
            }
            double g = gflop(s) / r.best;
            /* GFLOP per CPU-second over all repetitions: what the product costs
             * the machine, whatever else is running. */
            double per_cpu = gflop(s) * r.reps / r.cpu;
            char of_peak[16] = "-";
            if (peak[ti] > 0)
                snprintf(of_peak, sizeof of_peak, "%.0f%%", 100 * g / peak[ti]);
            printf("%-3d %-6s %-18s %5d %6d %5d %8.1f %7s %5d %8.2f %6.1f\n", threads, s->preset,
                   s->name, s->m, s->n, s->k, g, of_peak, r.reps, r.cpu / r.wall, per_cpu);
            fflush(stdout);
            flops[s->decoding] += gflop(s);
            secs[s->decoding] += r.best;
            logsum[s->decoding] += log(g);
            count[s->decoding]++;
        }
        for (int d = 0; d < 2; d++) {
            rate[ti][d] = flops[d] / secs[d];
            geo[ti][d] = exp(logsum[d] / count[d]);
        }
    }

    printf("\n%-9s %-8s %14s %14s\n", "shapes", "threads", "flop-weighted", "geometric mean");
    for (int d = 0; d < 2; d++)
        for (int ti = 0; ti < 2; ti++)
            printf("%-9s %-8d %14.1f %14.1f\n", d ? "decoding" : "training", thread_counts[ti],
                   rate[ti][d], geo[ti][d]);
    printf("\n");
    /* the kernel's name as the first attribute, with --name-core */
    char tag[80] = "";
    if (name_core)
        snprintf(tag, sizeof tag, "core=%s ", core);
    printf("sgemm_blas core=%s coretype=%s\n", core, coretype);
    for (int d = 0; d < 2; d++)
        for (int ti = 0; ti < 2; ti++)
            printf("sgemm_gflops%s %sthreads=%d %.1f\n", d ? "_decode" : "", tag,
                   thread_counts[ti], geo[ti][d]);
    for (int d = 0; d < 2; d++)
        for (int ti = 0; ti < 2; ti++)
            if (peak[ti] > 0)
                printf("sgemm_peak_fraction%s %sthreads=%d %.3f\n", d ? "_decode" : "", tag,
                       thread_counts[ti], geo[ti][d] / peak[ti]);
    return 0;
}
