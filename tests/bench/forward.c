/* forward.c - throughput of the inference forward pass: the batched encoder
 * and greedy-like incremental decoder steps, on one thread, as a fraction of
 * the CPU's 1-thread FMA peak (DESIGN.md, "Performance yardsticks") and,
 * secondary, of OpenBLAS's sgemm rate on the same shapes in the same run.
 *
 * The model is the "small" preset (D 256, F 1024, H 4, 3 + 3 layers) with an
 * 8000-piece vocabulary and random weights: speed does not depend on the
 * values.  64 sentences of 25 tokens are encoded as one batch, then decoded
 * as 64 rows for --steps steps, each row feeding back its arg-max token.
 *
 * The flops counted are those of the matrix products (2 per multiply-add):
 * per decoder step and row, the q,k,v, output, encoder-attention q and
 * output, FFN and vocabulary projections, plus attention (scores and
 * weighted sums against t cached positions and S source positions); per
 * encoder token, the projections, FFN and attention over its sentence.
 *
 * The FMA peak is FMA_PEAK_512_1 from the environment (run.sh measures it
 * with bench/peak), FMA_PEAK_256_1 on a CPU without AVX-512 or with
 * TFM_ISA=avx2 (which keeps our kernels to 256 bits); run alone, without
 * them, this prints the sgemm fractions only.  The sgemm rate is OpenBLAS's
 * on the same products at the same number of rows (64 for a decoder step,
 * 64 x 25 for the encoder), weighted by flops, with the kernel
 * OPENBLAS_CORETYPE in the environment asks for.
 *
 * Output: a table, then machine-readable lines
 *   decode_tokens_per_s X                rows x steps per wall second
 *   decode_gflops X sgemm Y fraction Z   achieved rate, the reference, their ratio
 *   encode_tokens_per_s X
 *   encode_gflops X sgemm Y fraction Z
 *   decode_peak_fraction bits=B threads=1 F    achieved rate over the FMA peak
 *   encode_peak_fraction bits=B threads=1 F
 *   decode_sgemm_fraction threads=1 Z          (Z again, in the summary's form)
 *   encode_sgemm_fraction threads=1 Z
 * (with --packed, the summary's lines take weights=packed after their
 * other fields: the weights packed as encode and decode pack them).
 *
 * Usage: forward [--steps N] [--packed] (default 40 steps)
 */
#include <cblas.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tfm/pass.h"

#include "peak_env.h"

/* Debian's cblas.h declares it for OpenBLAS; a repeated declaration is harmless. */
void openblas_set_num_threads(int num_threads);

enum { SENTENCES = 64, SRC_LEN = 25, VOCAB = 8000 };

static double now(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The best rate of C[m, n] = A[m, k] B[n, k]^T (a linear layer) over ~0.2 s. */
static double sgemm_rate(int m, int n, int k)
{
    float *a = calloc((size_t)m * k, sizeof *a), *b = calloc((size_t)n * k, sizeof *b);
    float *c = calloc((size_t)m * n, sizeof *c);
    if (!a || !b || !c) {
        free(a), free(b), free(c);
        return 0;
    }
    for (size_t i = 0; i < (size_t)m * k; i++) a[i] = (float)(i % 7) * 0.1f;
    for (size_t i = 0; i < (size_t)n * k; i++) b[i] = (float)(i % 5) * 0.1f;
    double best = 1e30, t0 = now(CLOCK_MONOTONIC), t = t0;
    for (int rep = 0; rep < 3 || t - t0 < 0.2; rep++) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, a, k, b, k, 0.0f, c,
                    n);
        double t1 = now(CLOCK_MONOTONIC);
        if (t1 - t < best) best = t1 - t;
        t = t1;
    }
    free(a), free(b), free(c);
    return 2.0 * m * n * (double)k / best * 1e-9;
}

/* The rate at which the linear layers of one layer (q,k,v, the output
 * projections, the FFN; the decoder's encoder-attention q and output too)
 * and, for the decoder, the vocabulary projection run over rows rows: the
 * sum of their flops over the sum of their best times. */
static double reference_rate(int rows, int D, int F, bool decoder)
{
    struct { int n, k, count; } shapes[] = {
        {3 * D, D, 1}, {D, D, decoder ? 3 : 1}, {F, D, 1}, {D, F, 1}, {VOCAB, D, decoder},
    };
    double secs = 0, flops = 0;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        if (!shapes[i].count) continue;
        double f = 2.0 * rows * shapes[i].n * (double)shapes[i].k * shapes[i].count;
        secs += f / (sgemm_rate(rows, shapes[i].n, shapes[i].k) * 1e9);
        flops += f;
    }
    return flops / secs * 1e-9;
}

static void die(const char *what, const tfm_error *err)
{
    fprintf(stderr, "forward: %s: %s\n", what, err->msg);
    exit(1);
}

int main(int argc, char **argv)
{
    int steps = 40;
    bool packed = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--packed") == 0) {
            packed = true;
        } else if (strcmp(argv[i], "--steps") == 0 && i + 1 < argc) {
            char *end;
            errno = 0;
            long v = strtol(argv[++i], &end, 10);
            if (errno || *end || v < 1 || v > 500) {
                fprintf(stderr, "forward: --steps: expected 1 to 500, got '%s'\n", argv[i]);
                return 2;
            }
            steps = (int)v;
        } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            printf("usage: forward [--steps N] [--packed]   (decoder steps, default 40;\n"
                   "  --packed: the weights packed for encoding and decoding first, as encode\n"
                   "  and decode do; without it, the products of an unpacked model, as train's\n"
                   "  validation decoding and inspect-attn run them)\n");
            return 0;
        } else {
            fprintf(stderr,
                    "forward: unknown argument '%s'\nusage: forward [--steps N] [--packed]\n",
                    argv[i]);
            return 2;
        }
    }
    /* One BLAS thread: decoding parallelises over sentences, one decoder per
     * thread (DESIGN.md), so one thread's rate is the one that matters. */
    openblas_set_num_threads(1);

    tfm_error err;
    tfm_config c;
    if (tfm_config_preset("small", &c, &err)) die("preset", &err);
    c.src_vocab_size = c.tgt_vocab_size = VOCAB;
    tfm_model *m;
    if (tfm_model_create(&c, NULL, 1, &m, &err)) die("model", &err);
    if (packed && (tfm_model_pack_for_encoding(m, &err) || tfm_model_pack_for_decoding(m, &err)))
        die("packing", &err);
    const int D = c.d_model, F = c.d_ff, R = SENTENCES;

    /* the reference rates: the products of a decoder step (64 rows) and of
     * an encoder batch (64 x 25 rows), each weighted by its flops */
    double dec_ref = reference_rate(R, D, F, true);
    double enc_ref = reference_rate(SENTENCES * SRC_LEN, D, F, false);

    /* encoder: 64 sentences of 25 tokens */
    static int32_t ids[SENTENCES][SRC_LEN];
    const int32_t *ptrs[SENTENCES];
    int lens[SENTENCES];
    tfm_rng rng;
    tfm_rng_seed(&rng, 2);
    for (int s = 0; s < SENTENCES; s++) {
        for (int i = 0; i < SRC_LEN; i++) ids[s][i] = 4 + (int32_t)tfm_rng_below(&rng, VOCAB - 4);
        ptrs[s] = ids[s];
        lens[s] = SRC_LEN;
    }
    float *states = malloc((size_t)SENTENCES * SRC_LEN * D * sizeof *states);
    float *lp = malloc((size_t)R * VOCAB * sizeof *lp);
    if (!states || !lp) {
        fprintf(stderr, "forward: out of memory\n");
        return 1;
    }
    tfm_encoder *e;
    tfm_decoder *d;
    if (tfm_encoder_create(m, &e, &err)) die("encoder", &err);
    if (tfm_decoder_create(m, &d, &err)) die("decoder", &err);
    if (tfm_encoder_forward(e, SENTENCES, ptrs, lens, states, &err)) die("encode", &err); /* warm */
    /* The best repetition, as for the sgemm reference: the least disturbed
     * by other work on a shared machine.  cpu/wall is over all of them. */
    double enc_best = 1e30, enc_wall = 0, enc_cpu = 0;
    for (int rep = 0; rep < 3 || enc_wall < 1.0; rep++) {
        double w0 = now(CLOCK_MONOTONIC), c0 = now(CLOCK_PROCESS_CPUTIME_ID);
        if (tfm_encoder_forward(e, SENTENCES, ptrs, lens, states, &err)) die("encode", &err);
        double w = now(CLOCK_MONOTONIC) - w0;
        enc_cpu += now(CLOCK_PROCESS_CPUTIME_ID) - c0;
        enc_wall += w;
        if (w < enc_best) enc_best = w;
    }
    const double enc_tokens = (double)SENTENCES * SRC_LEN;
    /* per token per layer: q,k,v, out, fc1, fc2; attention: 2 * S * D */
    const double enc_flops = enc_tokens * c.n_encoder_layers *
                             (2.0 * (4.0 * D * D + 2.0 * D * F) + 2.0 * 2.0 * SRC_LEN * D);

    /* decoder: greedy-like steps of 64 rows; the best of 3 passes after a
     * warm-up pass */
    const float *sp[SENTENCES];
    int row_sentence[SENTENCES];
    for (int s = 0; s < SENTENCES; s++) {
        sp[s] = states + (size_t)s * SRC_LEN * D;
        row_sentence[s] = s;
    }
    int32_t tok[SENTENCES];
    double dec_best = 1e30, dec_wall = 0, dec_cpu = 0, dec_flops = 0;
    for (int pass = 0; pass < 4; pass++) {
        if (tfm_decoder_start(d, SENTENCES, sp, lens, R, row_sentence, steps, &err))
            die("start", &err);
        for (int r = 0; r < R; r++) tok[r] = c.bos_id;
        double wall = 0, cpu = 0;
        dec_flops = 0;
        for (int t = 0; t < steps; t++) {
            /* only the step is timed, not the arg-max a search would add */
            double w0 = now(CLOCK_MONOTONIC), c0 = now(CLOCK_PROCESS_CPUTIME_ID);
            if (tfm_decoder_step(d, tok, lp, &err)) die("step", &err);
            wall += now(CLOCK_MONOTONIC) - w0;
            cpu += now(CLOCK_PROCESS_CPUTIME_ID) - c0;
            for (int r = 0; r < R; r++) {
                const float *row = lp + (size_t)r * VOCAB;
                int best = 0;
                for (int v = 1; v < VOCAB; v++)
                    if (row[v] > row[best]) best = v;
                tok[r] = best;
            }
            /* per row per layer: self q,k,v + out, cross q + out, FFN; attention
             * over t+1 cached and S source positions; then the vocabulary */
            dec_flops += R * (c.n_decoder_layers *
                                  (2.0 * (6.0 * D * D + 2.0 * D * F) +
                                   2.0 * 2.0 * (t + 1 + SRC_LEN) * D) +
                              2.0 * VOCAB * D);
        }
        if (pass == 0) continue;
        dec_wall += wall;
        dec_cpu += cpu;
        if (wall < dec_best) dec_best = wall;
    }

    const char *isa = getenv("TFM_ISA");
    bool narrow = isa && strcmp(isa, "avx2") == 0;
    int bits;
    double peak = peak_env_gflops(1, narrow, &bits);
    printf("forward: small preset (D %d, F %d, H %d, %d+%d layers), V %d, 1 BLAS thread, "
           "weights %s\n",
           D, F, c.n_heads, c.n_encoder_layers, c.n_decoder_layers, VOCAB,
           packed ? "packed (as encode and decode run)" : "unpacked");
    if (peak > 0)
        printf("forward: the 1-thread FMA peak (%d bits%s): %.1f GFLOP/s\n", bits,
               narrow ? ", TFM_ISA=avx2" : "", peak);
    else
        printf("forward: no FMA peak in the environment (FMA_PEAK_512_1 and so on: run.sh "
               "measures it with bench/peak), so no fractions of it\n");
    printf("%-8s %12s %10s %10s %8s %12s %9s %9s\n", "part", "tokens/s", "GFLOP/s", "GF/cpu-s",
           "of peak", "sgemm GF/s", "of sgemm", "cpu/wall");
    double enc_g = enc_flops / enc_best * 1e-9, dec_g = dec_flops / dec_best * 1e-9;
    /* per CPU-second: all repetitions, so the count of flops scales with them */
    double enc_gc = enc_flops * (enc_wall / enc_best) / enc_cpu * 1e-9;
    double dec_gc = dec_flops * (dec_wall / dec_best) / dec_cpu * 1e-9;
    char enc_peak[16] = "-", dec_peak[16] = "-";
    if (peak > 0) {
        snprintf(enc_peak, sizeof enc_peak, "%.0f%%", 100 * enc_g / peak);
        snprintf(dec_peak, sizeof dec_peak, "%.0f%%", 100 * dec_g / peak);
    }
    printf("%-8s %12.0f %10.1f %10.1f %8s %12.1f %8.0f%% %9.2f\n", "encode",
           enc_tokens / enc_best, enc_g, enc_gc, enc_peak, enc_ref, 100 * enc_g / enc_ref,
           enc_cpu / enc_wall);
    printf("%-8s %12.0f %10.1f %10.1f %8s %12.1f %8.0f%% %9.2f\n", "decode",
           (double)R * steps / dec_best, dec_g, dec_gc, dec_peak, dec_ref, 100 * dec_g / dec_ref,
           dec_cpu / dec_wall);
    printf("(encode: %d sentences of %d tokens, %.1f ms per batch; decode: %d rows x %d steps, "
           "%.2f ms per step; best repetitions)\n\n",
           SENTENCES, SRC_LEN, 1e3 * enc_best, R, steps, 1e3 * dec_best / steps);
    /* the packed run's summary lines say so (make bench runs both) */
    const char *tag = packed ? " weights=packed" : "";
    printf("decode_tokens_per_s%s %.0f\n", tag, (double)R * steps / dec_best);
    printf("decode_gflops %.1f sgemm %.1f fraction %.2f\n", dec_g, dec_ref, dec_g / dec_ref);
    printf("encode_tokens_per_s%s %.0f\n", tag, enc_tokens / enc_best);
    printf("encode_gflops %.1f sgemm %.1f fraction %.2f\n", enc_g, enc_ref, enc_g / enc_ref);
    if (peak > 0) {
        printf("decode_peak_fraction bits=%d threads=1%s %.3f\n", bits, tag, dec_g / peak);
        printf("encode_peak_fraction bits=%d threads=1%s %.3f\n", bits, tag, enc_g / peak);
    }
    printf("decode_sgemm_fraction threads=1%s %.3f\n", tag, dec_g / dec_ref);
    printf("encode_sgemm_fraction threads=1%s %.3f\n", tag, enc_g / enc_ref);

    tfm_decoder_free(d);
    tfm_encoder_free(e);
    free(states);
    free(lp);
    tfm_model_free(m);
    return 0;
}
