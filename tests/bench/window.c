/* window.c - the cost of self-attention against the sentence length n,
 * full and restricted to a window of r neighbours: Table 1 of the paper
 * (seed 001's table), "Self-Attention O(n^2 d)" and "Self-Attention
 * (restricted) O(r n d)" per layer, by measurement, forward and backward as
 * training runs them.  tests/bench/window.sh runs it over n and r and fits
 * the exponent of n.  Two parts, d_model 256 and 4 heads (Dh 64) in both:
 *
 *   attention  what the table's row counts (the seed: similarities, softmax,
 *              weighted sum): attention_forward and attention_backward of
 *              one sentence, all heads, q, k and v given
 *   layer      one encoder layer's training step, the projections and the
 *              FFN (d_ff 1024, O(n d^2)) included: a model of one encoder
 *              layer and a one-layer decoder reading a one-token target (it
 *              gives the encoder a loss; its cost grows with n only through
 *              the encoder-decoder attention of 2 queries), 64-token
 *              vocabulary, sinusoidal positions, dropout 0.1 as in
 *              training, through tfm_model_forward_backward
 *
 * One process measures one configuration, so that its peak memory is its
 * own; one thread (BLAS and workspace): the growth with n is the question,
 * not the speed of a shared machine's second core.
 *
 *   time    the best of repeated passes after a warm-up (at least 3, and
 *           for --seconds in all)
 *   memory  the resident size the passes added: the peak (getrusage) minus
 *           the resident size before the first pass.  attention: with q, k,
 *           v, the output and their gradients already in memory, so the
 *           weights kept between the passes and the scratch; layer: with the
 *           model, its gradient buffer and the BLAS's buffers in memory (a
 *           step on a one-token sentence first), so the activations, the
 *           weights kept, the activations' gradients and the scratch
 *   scores  (attention) the weights kept per head: n x n, or the band
 *
 * Usage: window --part attention|layer --n N --window R [--seconds S]
 * Output: window_attention n=N window=R seconds=X peak_mb=Y scores_per_head=Z
 *         window_layer n=N window=R seconds=X peak_mb=Y
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "nn/layers.h" /* the attention kernels, for the attention part */
#include "tfm/pass.h"

void openblas_set_num_threads(int num_threads);

enum { VOCAB = 64, MAX_N = 1 << 16 };

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The resident size now, in bytes (/proc/self/statm's second field). */
static double resident_bytes(void)
{
    long pages = 0, resident = 0;
    FILE *fp = fopen("/proc/self/statm", "r");
    if (fp) {
        if (fscanf(fp, "%ld %ld", &pages, &resident) != 2) resident = 0;
        fclose(fp);
    }
    return (double)resident * (double)sysconf(_SC_PAGESIZE);
}

/* The peak resident size so far, in bytes. */
static double peak_bytes(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss * 1024.0; /* kilobytes on Linux */
}

static long parse(const char *option, const char *text, long lo, long hi)
{
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || end == text || *end || v < lo || v > hi) {
        fprintf(stderr, "window: %s: expected an integer from %ld to %ld, got '%s'\n", option, lo,
                hi, text);
        exit(2);
    }
    return v;
}

static void die(const char *what, const tfm_error *err)
{
    fprintf(stderr, "window: %s: %s\n", what, err->msg);
    exit(1);
}

static const char usage_text[] =
    "usage: window --part attention|layer --n N --window R [--seconds S]\n";

/* Timing: fn(ctx) repeated after a warm-up, at least 3 times and for
 * seconds in all; the best time. */
static double best_time(void (*fn)(void *), void *ctx, double seconds)
{
    double best = 1e30, total = 0;
    for (int rep = 0; rep < 4 || total < seconds; rep++) {
        double t0 = now();
        fn(ctx);
        double t = now() - t0;
        if (rep == 0) continue; /* the warm-up: buffers grow, pages are touched */
        total += t;
        if (t < best) best = t;
    }
    return best;
}

/* The megabytes the resident size grew above before, at its peak. */
static double grown_mb(double before)
{
    double grown = peak_bytes() - before;
    return (grown > 0 ? grown : 0) / 1048576.0;
}

/* ---- the attention part ---------------------------------------------------------- */

enum { D = 256, H = 4, Dh = D / H };

typedef struct attention_pass {
    int n;
    attention_mask mask;
    float *qkv, *out, *dout, *dqkv, *att, *scratch;
} attention_pass;

static void attention_step(void *ctx)
{
    attention_pass *a = ctx;
    const int n = a->n;
    attention_forward(a->out, D, a->qkv, 3 * D, a->qkv + D, 3 * D, a->qkv + 2 * D, 3 * D, n, n, H,
                      Dh, a->mask, NULL, a->scratch, a->att);
    attention_backward(a->dqkv, a->dqkv + D, a->dqkv + 2 * D, NULL, a->dout, D, a->qkv, 3 * D,
                       a->qkv + D, 3 * D, a->qkv + 2 * D, 3 * D, a->att, NULL, 0.0f, n, n, H, Dh,
                       a->mask, NULL, a->scratch);
}

static float *filled(size_t count, tfm_rng *rng)
{
    float *x = malloc((count ? count : 1) * sizeof *x);
    if (!x) {
        fprintf(stderr, "window: out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < count; i++) x[i] = tfm_rng_float(rng) - 0.5f;
    return x;
}

static void measure_attention(int n, int window, double seconds)
{
    tfm_rng rng;
    tfm_rng_seed(&rng, 3);
    attention_pass a = {n, {0, false, window}, NULL, NULL, NULL, NULL, NULL, NULL};
    a.qkv = filled((size_t)n * 3 * D, &rng);
    a.out = filled((size_t)n * D, &rng);
    a.dout = filled((size_t)n * D, &rng);
    a.dqkv = filled((size_t)n * 3 * D, &rng);
    const double before = resident_bytes();
    size_t fwd = attention_scratch_size(n, n, a.mask, 0);
    size_t bwd = attention_backward_scratch_size(n, n, a.mask, 0);
    a.scratch = malloc((fwd > bwd ? fwd : bwd) * sizeof(float));
    a.att = malloc((attention_weights_size(n, n, H, a.mask) + 1) * sizeof(float));
    if (!a.scratch || !a.att) {
        fprintf(stderr, "window: out of memory\n");
        exit(1);
    }
    double best = best_time(attention_step, &a, seconds);
    printf("window_attention n=%d window=%d seconds=%.6f peak_mb=%.2f scores_per_head=%zu\n", n,
           window, best, grown_mb(before), attention_weights_size(n, n, 1, a.mask));
    free(a.qkv), free(a.out), free(a.dout), free(a.dqkv), free(a.scratch), free(a.att);
}

/* ---- the layer part ----------------------------------------------------------------- */

typedef struct layer_pass {
    tfm_pass_workspace *ws;
    const tfm_pair_batch *batch;
    float *grads;
    size_t n_params;
    tfm_rng rng;
} layer_pass;

static void layer_step(void *ctx)
{
    layer_pass *l = ctx;
    tfm_error err;
    tfm_loss_sums sums;
    memset(l->grads, 0, l->n_params * sizeof *l->grads);
    if (tfm_model_forward_backward(l->ws, l->batch, &l->rng, 1.0f, l->grads, &sums, &err))
        die("step", &err);
}

static void measure_layer(int n, int window, double seconds)
{
    tfm_error err;
    tfm_config c;
    if (tfm_config_preset("small", &c, &err)) die("preset", &err);
    c.src_vocab_size = c.tgt_vocab_size = VOCAB;
    c.n_encoder_layers = c.n_decoder_layers = 1;
    c.max_positions = n;
    c.attention_window = window;
    tfm_model *m;
    if (tfm_model_create(&c, NULL, 1, &m, &err)) die("model", &err);
    layer_pass l = {.n_params = tfm_params_count(&c)};
    tfm_rng_seed(&l.rng, 3);
    int32_t *src = malloc((size_t)n * sizeof *src);
    l.grads = malloc(l.n_params * sizeof *l.grads);
    if (!src || !l.grads) {
        fprintf(stderr, "window: out of memory\n");
        exit(1);
    }
    for (int i = 0; i < n; i++) src[i] = 4 + (int32_t)tfm_rng_below(&l.rng, VOCAB - 4);
    const int32_t tgt[1] = {5};
    const int32_t *srcp = src, *tgtp = tgt;
    const int one = 1;
    if (tfm_pass_workspace_create(m, &l.ws, &err)) die("workspace", &err);
    /* a one-token step first: the BLAS's buffers and the gradients resident */
    const tfm_pair_batch tiny = {1, &srcp, &one, &tgtp, &one};
    l.batch = &tiny;
    layer_step(&l);
    const double before = resident_bytes();
    const tfm_pair_batch batch = {1, &srcp, &n, &tgtp, &one};
    l.batch = &batch;
    double best = best_time(layer_step, &l, seconds);
    printf("window_layer n=%d window=%d seconds=%.6f peak_mb=%.2f\n", n, window, best,
           grown_mb(before));
    tfm_pass_workspace_free(l.ws);
    tfm_model_free(m);
    free(l.grads);
    free(src);
}

int main(int argc, char **argv)
{
    long n = 0, window = -1;
    double seconds = 1.0;
    const char *part = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--part") == 0 && i + 1 < argc) {
            part = argv[++i];
        } else if (strcmp(argv[i], "--n") == 0 && i + 1 < argc) {
            n = parse("--n", argv[++i], 1, MAX_N);
        } else if (strcmp(argv[i], "--window") == 0 && i + 1 < argc) {
            window = parse("--window", argv[++i], 0, MAX_N);
        } else if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) {
            seconds = (double)parse("--seconds", argv[++i], 0, 600);
        } else {
            fputs(usage_text, strcmp(argv[i], "--help") == 0 ? stdout : stderr);
            return strcmp(argv[i], "--help") == 0 ? 0 : 2;
        }
    }
    bool attention = part && strcmp(part, "attention") == 0;
    if (n < 1 || window < 0 || !part || (!attention && strcmp(part, "layer") != 0)) {
        fputs(usage_text, stderr);
        return 2;
    }
    openblas_set_num_threads(1);
    if (attention) measure_attention((int)n, (int)window, seconds);
    else measure_layer((int)n, (int)window, seconds);
    return 0;
}
