/* gemm.c - training's products on the project's kernels (nn_sgemm) against
 * OpenBLAS's cblas_sgemm, side by side in one run, on the shapes of a
 * training step of the small and base presets (4096 tokens a batch): the
 * linear layers' forward (x W^T), input gradient (dy W) and weight gradient
 * (dy^T x), and the output projection.
 *
 * Prints per shape and thread count (1, and THREADS when it is more):
 *   gemm_gflops impl=tfm|openblas op=fwd|dinp|dweight shape=MxNxK threads=T X
 * and, over all shapes, the time-weighted rate of each, its fraction of
 * the CPU's FMA peak (FMA_PEAK_* from run.sh, at the width of our kernels:
 * 256 bits under TFM_ISA=avx2) and ours over OpenBLAS's:
 *   gemm_total_gflops impl=tfm|openblas threads=T X
 *   gemm_peak_fraction impl=tfm|openblas bits=B threads=T F
 *   gemm_tfm_vs_openblas threads=T R
 * with the ISA of the kernels (TFM_ISA respected) and OpenBLAS's kernel
 * (openblas_get_corename: it follows OPENBLAS_CORETYPE).
 *
 * Environment: THREADS (default 2), GEMM_SECONDS (0.3 per measurement). */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/blas.h"
#include "peak_env.h"
#include "nn/layers.h"
#include "tfm/core.h"

char *openblas_get_corename(void);

typedef struct {
    const char *op;
    int M, N, K;
    bool ta, tb;
} shape;

/* tokens 4096; small: d 256, FFN 1024, vocabulary 8000; base: 512, 2048 */
static const shape shapes[] = {
    {"fwd", 4096, 768, 256, false, true},    {"fwd", 4096, 1024, 256, false, true},
    {"fwd", 4096, 256, 1024, false, true},   {"fwd", 4096, 8000, 256, false, true},
    {"dinp", 4096, 256, 1024, false, false}, {"dinp", 4096, 256, 8000, false, false},
    {"dweight", 1024, 256, 4096, true, false}, {"dweight", 8000, 256, 4096, true, false},
    {"fwd", 4096, 2048, 512, false, true},   {"dinp", 4096, 512, 2048, false, false},
    {"dweight", 2048, 512, 4096, true, false},
};

static float *random_floats(size_t n, tfm_rng *rng)
{
    float *v = malloc(n * sizeof *v);
    for (size_t i = 0; i < n; i++) v[i] = 2 * tfm_rng_float(rng) - 1;
    return v;
}

/* The best seconds of one product over GEMM_SECONDS of repeats. */
static double best_seconds(bool ours, const shape *s, const float *A, const float *B, float *C,
                           double budget)
{
    const int lda = s->ta ? s->M : s->K, ldb = s->tb ? s->K : s->N;
    double best = 1e30, start = tfm_clock_seconds();
    int runs = 0;
    while (runs < 3 || tfm_clock_seconds() - start < budget) {
        const double t0 = tfm_clock_seconds();
        if (ours)
            nn_sgemm(s->ta, s->tb, s->M, s->N, s->K, 1.0f, A, lda, B, ldb, 1.0f, C, s->N);
        else
            cblas_sgemm(CblasRowMajor, s->ta ? CblasTrans : CblasNoTrans,
                        s->tb ? CblasTrans : CblasNoTrans, s->M, s->N, s->K, 1.0f, A, lda, B,
                        ldb, 1.0f, C, s->N);
        const double t = tfm_clock_seconds() - t0;
        if (t < best) best = t;
        if (++runs > 200) break;
    }
    return best;
}

int main(void)
{
    const char *env = getenv("THREADS");
    const int max_threads = env && atoi(env) > 0 ? atoi(env) : 2;
    env = getenv("GEMM_SECONDS");
    const double budget = env && atof(env) > 0 ? atof(env) : 0.3;
    static const char *const isa_names[] = {"none (OpenBLAS)", "avx2", "avx512"};
    printf("nn_sgemm kernels: %s; OpenBLAS kernels: %s\n", isa_names[nn_isa_level()],
           openblas_get_corename());
    tfm_rng rng;
    tfm_rng_seed(&rng, 1);
    for (int threads = 1;; threads = max_threads) {
        tfm_blas_threads(threads);
        double total[2] = {0, 0}, flops = 0;
        for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
            const shape *s = &shapes[i];
            float *A = random_floats((size_t)s->M * s->K, &rng);
            float *B = random_floats((size_t)s->K * s->N, &rng);
            float *C = random_floats((size_t)s->M * s->N, &rng);
            const double f = 2.0 * s->M * s->N * s->K;
            flops += f;
            for (int ours = 1; ours >= 0; ours--) {
                const double t = best_seconds(ours, s, A, B, C, budget);
                total[ours] += t;
                printf("gemm_gflops impl=%s op=%s shape=%dx%dx%d threads=%d %.1f\n",
                       ours ? "tfm" : "openblas", s->op, s->M, s->N, s->K, threads, f / t / 1e9);
            }
            free(A);
            free(B);
            free(C);
        }
        int bits = 0;
        const double peak = peak_env_gflops(threads, nn_isa_level() != NN_ISA_AVX512, &bits);
        for (int ours = 1; ours >= 0; ours--) {
            const char *impl = ours ? "tfm" : "openblas";
            const double rate = flops / total[ours] / 1e9;
            printf("gemm_total_gflops impl=%s threads=%d %.1f\n", impl, threads, rate);
            if (peak > 0)
                printf("gemm_peak_fraction impl=%s bits=%d threads=%d %.2f\n", impl, bits,
                       threads, rate / peak);
        }
        printf("gemm_tfm_vs_openblas threads=%d %.2f\n", threads, total[0] / total[1]);
        if (peak <= 0) printf("(no FMA peak in the environment: run.sh measures it first)\n");
        if (threads == max_threads) break;
    }
    return 0;
}
