/* test_gemm.c - nn_sgemm, training's matrix product on the project's own
 * kernels: every combination of transposes, alpha and beta, shapes that
 * fill no block evenly and leading dimensions wider than the rows, against
 * a product in double precision; beta 0 overwrites a NaN in C; and the
 * invariants the trainer relies on, bit for bit: the AVX2 kernel gives the
 * AVX-512 kernel's bits, a row computed alone gives its bits in the whole
 * product (where B is read in place rather than packed, for a few rows),
 * and two threads give one thread's; and a product onto a bias gives the
 * bits of the bias copied in and added to. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "core/blas.h"
#include "nn/layers.h"
#include "testisa.h"

static tfm_rng rng_state, *rng = &rng_state;

static float *random_floats(size_t n)
{
    float *v = malloc(n * sizeof *v);
    for (size_t i = 0; i < n; i++) v[i] = 2 * tfm_rng_float(rng) - 1;
    return v;
}

/* One product's shape and operands, with C's starting values kept. */
typedef struct {
    bool ta, tb;
    int M, N, K, lda, ldb, ldc;
    float alpha, beta;
    float *A, *B, *C0;
} product;

static product make_product(bool ta, bool tb, int M, int N, int K, int pad, float alpha,
                            float beta)
{
    product p = {ta, tb, M, N, K, 0, 0, N + pad, alpha, beta, NULL, NULL, NULL};
    p.lda = (ta ? M : K) + pad;
    p.ldb = (tb ? K : N) + pad;
    p.A = random_floats((size_t)(ta ? K : M) * p.lda);
    p.B = random_floats((size_t)(tb ? N : K) * p.ldb);
    p.C0 = random_floats((size_t)M * p.ldc);
    return p;
}

static void free_product(product *p)
{
    free(p->A);
    free(p->B);
    free(p->C0);
}

/* C = the product by nn_sgemm, from C0 (rows row0 .. row0 + rows - 1 only). */
static float *run_rows(const product *p, int row0, int rows, float *C)
{
    const float *A = p->ta ? p->A + row0 : p->A + (size_t)row0 * p->lda;
    nn_sgemm(p->ta, p->tb, rows, p->N, p->K, p->alpha, A, p->lda, p->B, p->ldb, p->beta,
             C + (size_t)row0 * p->ldc, p->ldc);
    return C;
}

static float *run(const product *p)
{
    float *C = malloc((size_t)p->M * p->ldc * sizeof *C);
    memcpy(C, p->C0, (size_t)p->M * p->ldc * sizeof *C);
    return run_rows(p, 0, p->M, C);
}

/* C = the product by nn_sgemm, from C0, seven rows at a time. */
static float *run_by_7(const product *p)
{
    float *C = malloc((size_t)p->M * p->ldc * sizeof *C);
    memcpy(C, p->C0, (size_t)p->M * p->ldc * sizeof *C);
    for (int r = 0; r < p->M; r += 7) run_rows(p, r, p->M - r < 7 ? p->M - r : 7, C);
    return C;
}

/* The largest error of C against the product in double precision, over
 * the scale of the terms (sum of |a b|, plus |beta c|). */
static double worst_error(const product *p, const float *C)
{
    double worst = 0;
    for (int i = 0; i < p->M; i++)
        for (int j = 0; j < p->N; j++) {
            double sum = 0, scale = 0;
            for (int k = 0; k < p->K; k++) {
                const double a =
                    p->ta ? p->A[(size_t)k * p->lda + i] : p->A[(size_t)i * p->lda + k];
                const double b =
                    p->tb ? p->B[(size_t)j * p->ldb + k] : p->B[(size_t)k * p->ldb + j];
                sum += a * b;
                scale += fabs(a * b);
            }
            const double c0 = p->C0[(size_t)i * p->ldc + j];
            const double want = p->alpha * sum + (p->beta == 0 ? 0 : p->beta * c0);
            scale = fabs(p->alpha) * scale + (p->beta == 0 ? 0 : fabs(p->beta * c0)) + 1e-30;
            const double e = fabs(C[(size_t)i * p->ldc + j] - want) / scale;
            if (!(e <= worst)) worst = e; /* a NaN is the worst */
        }
    return worst;
}

/* Every transpose, odd shapes around the kernels' blocks (6, 8, 16, 32
 * wide; 256 deep), alpha and beta of every kind, padded leading
 * dimensions: within a few float epsilons of the exact product; and the
 * padding of C is never written. */
static void test_against_double(void)
{
    /* ... and attention's: a sentence's tokens by 64, where B (or a
     * transposed A) is read in place */
    static const int shapes[][3] = {{1, 1, 1},    {7, 33, 5},   {8, 32, 256}, {13, 17, 257},
                                    {50, 70, 600}, {6, 16, 3},   {97, 45, 31}, {3, 100, 513},
                                    {33, 33, 64},  {64, 12, 64}, {12, 50, 33}};
    static const float ab[][2] = {{1, 1}, {1, 0}, {0.5f, 2}, {-1.5f, 0}, {1, -0.25f}};
    int n = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        for (int t = 0; t < 4; t++) {
            const float *x = ab[n++ % 5];
            product p = make_product(t & 1, t & 2, shapes[s][0], shapes[s][1], shapes[s][2],
                                     (int)(s % 3), x[0], x[1]);
            float *C = run(&p);
            const double e = worst_error(&p, C);
            CHECK_MSG(e < 1e-5, "M %d N %d K %d ta %d tb %d alpha %g beta %g: error %g", p.M,
                      p.N, p.K, p.ta, p.tb, p.alpha, p.beta, e);
            bool pad_kept = true;
            for (int i = 0; i < p.M; i++)
                for (int j = p.N; j < p.ldc; j++)
                    pad_kept &= C[(size_t)i * p.ldc + j] == p.C0[(size_t)i * p.ldc + j];
            CHECK_MSG(pad_kept, "M %d N %d: C written past N", p.M, p.N);
            free(C);
            free_product(&p);
        }
}

/* Long sums (a weight gradient sums over a batch's 4,096 tokens): k is
 * summed in blocks, each from zero, then the blocks are added, so the
 * rounding error grows with the block's length and not with K's, as one
 * chain of FMAs over all of k would: nn_sgemm's root-mean-square error
 * against double is under half that chain's. */
static void test_long_sums(void)
{
    const int M = 16, N = 32, K = 4096;
    product p = make_product(true, false, M, N, K, 0, 1, 0);
    float *C = run(&p);
    double ours = 0, chain = 0;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double exact = 0;
            float one_chain = 0;
            for (int k = 0; k < K; k++) {
                const float a = p.A[(size_t)k * p.lda + i], b = p.B[(size_t)k * p.ldb + j];
                exact += (double)a * b;
                one_chain = fmaf(a, b, one_chain);
            }
            const double e = C[(size_t)i * p.ldc + j] - exact, f = one_chain - exact;
            ours += e * e;
            chain += f * f;
        }
    CHECK_MSG(ours < 0.25 * chain, "rms error %g, one chain's %g", sqrt(ours / (M * N)),
              sqrt(chain / (M * N)));
    free(C);
    free_product(&p);
}

/* Beta 0: C's old values are not read (a NaN there is gone); K 0: C is
 * only scaled by beta. */
static void test_beta_zero_and_empty(void)
{
    product p = make_product(false, true, 9, 40, 20, 0, 1, 0);
    for (int i = 0; i < 9 * 40; i++) p.C0[i] = NAN;
    float *C = run(&p);
    CHECK(worst_error(&p, C) < 1e-5);
    free(C);
    float c[4] = {1, 2, 3, 4}, a[1] = {0}, b[1] = {0};
    nn_sgemm(false, false, 2, 2, 0, 1, a, 1, b, 2, 0.5f, c, 2);
    CHECK(c[0] == 0.5f && c[3] == 2.0f);
    nn_sgemm(false, false, 2, 2, 0, 1, a, 1, b, 2, 0.0f, c, 2);
    CHECK(c[0] == 0.0f && c[3] == 0.0f);
    free_product(&p);
}

/* B read in place (a few rows of A, B not transposed) whose rows are as
 * far apart as a kernel's block is wide (32, or 16 for AVX2) while the
 * product takes fewer columns, B's buffer ending at its last column: the
 * kernels read no column past N (the sanitizer build finds any that does;
 * one did, through a B that looked packed). */
static void test_b_in_place_edges(void)
{
    static const int widths[] = {32, 16};
    for (int w = 0; w < 2; w++) {
        const int M = 5, K = 9, ldb = widths[w], N = ldb - 7;
        product p = make_product(false, false, M, N, K, 0, 1, 1);
        free(p.B);
        p.ldb = ldb;
        p.B = random_floats((size_t)(K - 1) * ldb + N); /* the last row ends at column N */
        float *C = run(&p);
        CHECK_MSG(worst_error(&p, C) < 1e-5, "ldb %d, N %d", ldb, N);
        free(C);
        free_product(&p);
    }
}

static bool same_bits(const float *a, const float *b, size_t n)
{
    return memcmp(a, b, n * sizeof *a) == 0;
}

/* p's product on 1, 2 and 3 threads, into by[0], by[1], by[2]. */
static void run_on_threads(const product *p, float *by[3])
{
    for (int t = 0; t < 3; t++) {
        tfm_blas_threads(t + 1);
        by[t] = run(p);
    }
    tfm_blas_threads(1);
}

/* The product of transposes t (bit 0: A, bit 1: B), M x N x K, on 2 and 3
 * threads: the bits of 1 thread, within a few float epsilons of exact. */
static void check_thread_counts(int t, int M, int N, int K, const char *what)
{
    product p = make_product(t & 1, t & 2, M, N, K, 3, 1, t == 3 ? 0 : 1);
    float *by[3];
    run_on_threads(&p, by);
    CHECK_MSG(same_bits(by[0], by[1], (size_t)M * p.ldc) &&
                  same_bits(by[0], by[2], (size_t)M * p.ldc),
              "ta %d tb %d: %s, 2 and 3 threads", p.ta, p.tb, what);
    CHECK_MSG(worst_error(&p, by[1]) < 1e-5, "ta %d tb %d: %s, 2 threads: error %g", p.ta,
              p.tb, what, worst_error(&p, by[1]));
    for (int k = 0; k < 3; k++) free(by[k]);
    free_product(&p);
}

/* The product of transposes t on M x N x K, whole (B packed: more than 64
 * rows) and by 7 rows (B read in place or turned whole when narrow,
 * packed when a transposed B is big): the same bits. */
static void check_rows_by_7(int t, int M, int N, int K, const char *what)
{
    product p = make_product(t & 1, t & 2, M, N, K, 1, 1, 1);
    float *whole = run(&p), *rows = run_by_7(&p);
    CHECK_MSG(same_bits(whole, rows, (size_t)M * p.ldc), "ta %d tb %d: %s, rows by 7", p.ta,
              p.tb, what);
    free(rows);
    free(whole);
    free_product(&p);
}

/* The invariants, on shapes big enough for several blocks of k and for two
 * threads: AVX2 = AVX-512; each row alone = the whole; 2 threads = 1. */
static void test_invariants(void)
{
    const int M = SANITIZED ? 70 : 300, N = 200, K = 600;
    for (int t = 0; t < 4; t++) {
        product p = make_product(t & 1, t & 2, M, N, K, 3, 1, t == 3 ? 0 : 1);
        float *by[3];
        run_on_threads(&p, by);
        float *one = by[0], *two = by[1];
        CHECK_MSG(worst_error(&p, two) < 1e-5, "ta %d tb %d: 2 threads: error %g", p.ta, p.tb,
                  worst_error(&p, two));
        CHECK_MSG(same_bits(one, two, (size_t)M * p.ldc), "ta %d tb %d: 2 threads", p.ta, p.tb);
        CHECK_MSG(same_bits(one, by[2], (size_t)M * p.ldc), "ta %d tb %d: 3 threads", p.ta,
                  p.tb);
        free(by[2]);
        /* few rows: C cut by columns among the threads (B read in place
         * when not transposed) */
        check_thread_counts(t, 60, 3 * N, K, "60 rows");
        /* more columns than rows, with several blocks of k (a widening
         * layer's weight gradient, A transposed): C cut by columns */
        check_thread_counts(t, 100, 300, K, "100 rows, 300 columns");
        /* a narrow B (24 columns: 14,400 floats), turned whole for 7 rows
         * when transposed; a wide one (N 200) packed */
        check_rows_by_7(t, 100, 24, K, "24 columns");

        float *rows = run_by_7(&p);
        CHECK_MSG(same_bits(one, rows, (size_t)M * p.ldc), "ta %d tb %d: rows by 7", p.ta, p.tb);
        free(rows);

        const nn_isa isa = nn_isa_level();
        if (isa == NN_ISA_AVX512) {
            test_isa_ask("avx2");
            float *avx2 = run(&p);
            rows = run_by_7(&p);
            test_isa_ask(NULL);
            CHECK_MSG(same_bits(one, avx2, (size_t)M * p.ldc), "ta %d tb %d: AVX2 kernel",
                      p.ta, p.tb);
            CHECK_MSG(same_bits(one, rows, (size_t)M * p.ldc), "ta %d tb %d: AVX2, rows by 7",
                      p.ta, p.tb);
            free(avx2);
            free(rows);
        }
        free(two);
        free(one);
        free_product(&p);
    }
    if (nn_isa_level() != NN_ISA_AVX512)
        printf("SKIP: test_invariants: AVX2 = AVX-512: this CPU has no AVX-512\n");
}

/* nn_sgemm_bias = C filled with the bias, then nn_sgemm with beta 1, bit
 * for bit: on the kernels (B in place or packed, one block of k or several,
 * 1 and 2 threads) and on the BLAS (TFM_ISA=none); K 0 leaves the bias. */
static void test_bias(void)
{
    static const int shapes[][3] = {{5, 40, 64}, {33, 33, 64}, {70, 90, 600}, {200, 300, 40},
                                    {9, 7, 0}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        for (int t = 0; t < 4; t++)
            for (int way = 0; way < 3; way++) {
                const int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
                product p = make_product(t & 1, t & 2, M, N, K, 2, 0.5f, 1);
                float *bias = random_floats((size_t)N);
                for (int i = 0; i < M; i++)
                    memcpy(p.C0 + (size_t)i * p.ldc, bias, (size_t)N * sizeof *bias);
                if (way == 1) tfm_blas_threads(2);
                if (way == 2) test_isa_ask("none");
                float *want = run(&p);
                float *got = malloc((size_t)M * p.ldc * sizeof *got);
                for (size_t i = 0; i < (size_t)M * p.ldc; i++) got[i] = NAN;
                nn_sgemm_bias(p.ta, p.tb, M, N, K, p.alpha, p.A, p.lda, p.B, p.ldb, bias, got,
                              p.ldc);
                test_isa_ask(NULL);
                tfm_blas_threads(1);
                bool same = true;
                for (int i = 0; i < M; i++)
                    same &= same_bits(want + (size_t)i * p.ldc, got + (size_t)i * p.ldc,
                                      (size_t)N);
                CHECK_MSG(same, "M %d N %d K %d ta %d tb %d, %s: the bias filled in first",
                          M, N, K, p.ta, p.tb,
                          way == 0 ? "1 thread" : way == 1 ? "2 threads" : "the BLAS");
                free(got);
                free(want);
                free(bias);
                free_product(&p);
            }
}

int main(void)
{
    tfm_rng_seed(rng, 7);
    RUN(test_against_double);
    RUN(test_long_sums);
    RUN(test_beta_zero_and_empty);
    RUN(test_b_in_place_edges);
    RUN(test_invariants);
    RUN(test_bias);
    CHECK_DONE();
}
