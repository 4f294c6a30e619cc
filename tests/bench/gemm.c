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
 * Then the accuracy of both against products in double precision, on 1,000
 * entries of each shape drawn at random: an entry's error is
 * |c - exact| / sum_k |a_ik b_kj| (the bound of a sum of K products grows
 * with that sum), in units of float's rounding error (2^-24); per shape the
 * largest and the mean, and over all shapes:
 *   gemm_error impl=tfm|openblas op=O shape=MxNxK max=X mean=Y
 *   gemm_error_all impl=tfm|openblas core=C max=X mean=Y
 * Two summation orders part trajectories of training by amounts of this
 * size, amplified update after update; what shows that the project's
 * kernels lose nothing is an error no larger than OpenBLAS's.  With
 * --errors, the accuracy alone (run.sh runs it with OpenBLAS's own kernel
 * choice too).
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

/* nn_isa_level's names: none sends the products to OpenBLAS */
static const char *const isa_names[] = {"none", "avx2", "avx512"};

enum { error_samples = 1000 };

/* The errors of C = op(A) op(B) (beta 0) against the exact products, in
 * units of 2^-24, over error_samples entries drawn with rng: the largest
 * in *max and their sum added to *sum. */
static void product_errors(const shape *s, const float *A, const float *B, const float *C,
                           tfm_rng *rng, double *max, double *sum)
{
    const int lda = s->ta ? s->M : s->K, ldb = s->tb ? s->K : s->N;
    for (int n = 0; n < error_samples; n++) {
        const int i = (int)tfm_rng_below(rng, (uint64_t)s->M);
        const int j = (int)tfm_rng_below(rng, (uint64_t)s->N);
        double exact = 0, magnitude = 0;
        for (int k = 0; k < s->K; k++) {
            const double a = s->ta ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k];
            const double b = s->tb ? B[(size_t)j * ldb + k] : B[(size_t)k * ldb + j];
            exact += a * b;
            magnitude += a * b < 0 ? -a * b : a * b;
        }
        const double diff = C[(size_t)i * s->N + j] - exact;
        const double e = (diff < 0 ? -diff : diff) / magnitude * 16777216.0;
        if (e > *max) *max = e;
        *sum += e;
    }
}

/* The accuracy pass (see the head of the file), on THREADS threads. */
static void print_errors(void)
{
    tfm_rng rng;
    tfm_rng_seed(&rng, 2);
    double all_max[2] = {0, 0}, all_sum[2] = {0, 0};
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        const shape *s = &shapes[i];
        const int lda = s->ta ? s->M : s->K, ldb = s->tb ? s->K : s->N;
        float *A = random_floats((size_t)s->M * s->K, &rng);
        float *B = random_floats((size_t)s->K * s->N, &rng);
        float *C = malloc((size_t)s->M * s->N * sizeof *C);
        for (int ours = 1; ours >= 0; ours--) {
            if (ours)
                nn_sgemm(s->ta, s->tb, s->M, s->N, s->K, 1.0f, A, lda, B, ldb, 0.0f, C, s->N);
            else
                cblas_sgemm(CblasRowMajor, s->ta ? CblasTrans : CblasNoTrans,
                            s->tb ? CblasTrans : CblasNoTrans, s->M, s->N, s->K, 1.0f, A, lda,
                            B, ldb, 0.0f, C, s->N);
            tfm_rng samples = rng; /* the same entries for both */
            double max = 0, sum = 0;
            product_errors(s, A, B, C, &samples, &max, &sum);
            printf("gemm_error impl=%s op=%s shape=%dx%dx%d max=%.3f mean=%.4f\n",
                   ours ? "tfm" : "openblas", s->op, s->M, s->N, s->K, max,
                   sum / error_samples);
            if (max > all_max[ours]) all_max[ours] = max;
            all_sum[ours] += sum;
        }
        tfm_rng_u64(&rng);
        free(A);
        free(B);
        free(C);
    }
    const double n = (double)error_samples * (sizeof shapes / sizeof *shapes);
    printf("gemm_error_all impl=tfm core=%s max=%.3f mean=%.4f\n", isa_names[nn_isa_level()],
           all_max[1], all_sum[1] / n);
    printf("gemm_error_all impl=openblas core=%s max=%.3f mean=%.4f\n", openblas_get_corename(),
           all_max[0], all_sum[0] / n);
}

int main(int argc, char **argv)
{
    const bool errors_only = argc > 1 && strcmp(argv[1], "--errors") == 0;
    if (argc > 1 && !errors_only) {
        fprintf(stderr, "usage: gemm [--errors]\n");
        return 2;
    }
    const char *env = getenv("THREADS");
    const int max_threads = env && atoi(env) > 0 ? atoi(env) : 2;
    env = getenv("GEMM_SECONDS");
    const double budget = env && atof(env) > 0 ? atof(env) : 0.3;
    printf("nn_sgemm kernels: %s%s; OpenBLAS kernels: %s\n", isa_names[nn_isa_level()],
           nn_isa_level() == NN_ISA_PLAIN ? " (OpenBLAS)" : "", openblas_get_corename());
    if (errors_only) {
        tfm_blas_threads(max_threads);
        print_errors();
        return 0;
    }
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
    print_errors();
    return 0;
}
