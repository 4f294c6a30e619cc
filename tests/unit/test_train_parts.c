/* test_train_parts.c - unit tests of the parts of lib/train that the
 * trainer is made of: Adam against steps computed by hand, the
 * learning-rate schedule's values, batching (every pair once per epoch, the
 * token budget, determinism by seed, continuing from a saved position),
 * loading parallel data (counts, skips, errors), checkpoints (a bit-for-bit
 * round trip of the whole training state), averaging, and the handling of
 * NaN and infinity.  The trainer and the training run: test_trainer.c. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "testisa.h"
#include "testtrain.h"
#include "tfm.h"

/* ---- Adam and the schedule ---------------------------------------------------------- */

/* Adam in double precision, written out as the paper of Kingma & Ba states
 * it, for comparison. */
static void adam_reference(double b1, double b2, double eps, int t, double lr, double *w,
                           double g, double *m, double *v)
{
    *m = b1 * *m + (1 - b1) * g;
    *v = b2 * *v + (1 - b2) * g * g;
    double mhat = *m / (1 - pow(b1, t)), vhat = *v / (1 - pow(b2, t));
    *w -= lr * mhat / (sqrt(vhat) + eps);
}

static void test_adam_first_step(void)
{
    /* Step 1: m = 0.1 g, v = 0.02 g^2, so the bias-corrected update is
     * lr * g / (|g| + eps): lr times the sign of g, whatever g's size. */
    tfm_adam_params p = tfm_adam_default_params();
    CHECK(p.beta1 == 0.9f && p.beta2 == 0.98f && p.eps == 1e-9f);
    float w[4] = {1.0f, -2.0f, 0.5f, 3.0f};
    const float g[4] = {0.25f, -8.0f, 1e-3f, 0.0f};
    float m[4] = {0}, v[4] = {0};
    tfm_adam_update(&p, 1, 0.01, 1.0f, 4, w, g, m, v);
    CHECK_NEAR(w[0], 1.0 - 0.01, 1e-6);
    CHECK_NEAR(w[1], -2.0 + 0.01, 1e-6);
    CHECK_NEAR(w[2], 0.5 - 0.01, 1e-5);
    CHECK(w[3] == 3.0f); /* no gradient, no move */
    CHECK_NEAR(m[1], -0.8, 1e-6);
    CHECK_NEAR(v[1], 0.02 * 64, 1e-5);
}

static void test_adam_against_reference(void)
{
    /* Ten steps with changing gradients and rates, against double precision. */
    tfm_adam_params p = tfm_adam_default_params();
    float w = 0.75f, m = 0, v = 0;
    double wd = 0.75, md = 0, vd = 0;
    for (int t = 1; t <= 10; t++) {
        float g = (float)(0.3 * sin(t) + 0.05 * t);
        double lr = tfm_lr_schedule(1.0, 64, 4, t);
        tfm_adam_update(&p, t, lr, 1.0f, 1, &w, &g, &m, &v);
        adam_reference(0.9, 0.98, 1e-9, t, lr, &wd, g, &md, &vd);
    }
    CHECK_NEAR(w, wd, 1e-6);
    CHECK_NEAR(m, md, 1e-6);
    CHECK_NEAR(v, vd, 1e-7);
    /* By hand, step 2 with g = 1 then g = -1, lr 0.1: m = 0.09 - 0.1 = -0.01,
     * v = 0.98 * 0.02 + 0.02 = 0.0396; update = 0.1 / 0.19 * m /
     * (sqrt(v) / sqrt(0.0396)) = 0.1 / 0.19 * -0.01 / 1. */
    float w2 = 0, m2 = 0, v2 = 0, g1 = 1, g2 = -1;
    tfm_adam_update(&p, 1, 0.1, 1.0f, 1, &w2, &g1, &m2, &v2);
    CHECK_NEAR(w2, -0.1, 1e-6);
    tfm_adam_update(&p, 2, 0.1, 1.0f, 1, &w2, &g2, &m2, &v2);
    CHECK_NEAR(m2, -0.01, 1e-7);
    CHECK_NEAR(v2, 0.0396, 1e-7);
    CHECK_NEAR(w2, -0.1 - 0.1 / 0.19 * -0.01, 1e-6);
    /* The gradient's scale applies before everything else: g = 4 * 0.25. */
    float w3 = 0, m3 = 0, v3 = 0, g3 = 4;
    tfm_adam_update(&p, 1, 0.1, 0.25f, 1, &w3, &g3, &m3, &v3);
    CHECK_NEAR(m3, 0.1, 1e-7);
    CHECK_NEAR(v3, 0.02, 1e-7);
}

/* Adam's versions (AVX2, on CPUs with AVX2 or AVX-512, and plain, chosen
 * by nn_isa_level, which TFM_ISA=none lowers) give the same bits over
 * 8-lane groups and a tail, three steps in a row, with gradients from tiny
 * to large and one always zero.  Where the build has one version (the
 * sanitizer build), the runs are the same code. */
static void test_adam_versions_agree(void)
{
    enum { N = 16 * 9 + 7 };
    static float w[3][N], m[3][N], v[3][N], g[N], w0[N];
    tfm_rng rng;
    const tfm_adam_params p = tfm_adam_default_params();
    char *saved = test_isa_save();
    for (int k = 0; k < 3; k++) {
        tfm_rng_seed(&rng, 5);
        for (int i = 0; i < N; i++) {
            w[k][i] = 2 * tfm_rng_float(&rng) - 1;
            m[k][i] = v[k][i] = 0.0f;
            w0[i] = w[k][i];
        }
        test_isa_ask(test_isas[k]);
        for (int t = 1; t <= 3; t++) {
            for (int i = 0; i < N; i++)
                g[i] = (2 * tfm_rng_float(&rng) - 1) * powf(10.0f, (float)(i % 9) - 6.0f);
            g[N / 2] = 0.0f;
            tfm_adam_update(&p, t, 1e-3 * t, 0.5f, N, w[k], g, m[k], v[k]);
        }
    }
    test_isa_restore(saved);
    for (int k = 1; k < 3; k++) {
        CHECK_MSG(memcmp(w[k], w[0], sizeof w[0]) == 0, "TFM_ISA=%s: other weights", test_isas[k]);
        CHECK_MSG(memcmp(m[k], m[0], sizeof m[0]) == 0, "TFM_ISA=%s: other m", test_isas[k]);
        CHECK_MSG(memcmp(v[k], v[0], sizeof v[0]) == 0, "TFM_ISA=%s: other v", test_isas[k]);
    }
    int moved = 0;
    for (int i = 0; i < N; i++) moved += isfinite(w[0][i]) && w[0][i] != w0[i];
    CHECK(moved == N - 1 && w[0][N / 2] == w0[N / 2]); /* all but the one never given a gradient */
}

static void test_schedule(void)
{
    /* lr = d^-0.5 min(step^-0.5, step warmup^-1.5): the paper's base. */
    double peak = 1.0 / sqrt(512.0) / sqrt(4000.0);
    CHECK_NEAR(tfm_lr_schedule(1.0, 512, 4000, 4000), peak, 1e-12);
    CHECK_NEAR(peak, 6.987712e-4, 1e-9);
    CHECK_NEAR(tfm_lr_schedule(1.0, 512, 4000, 1), 1.0 / sqrt(512.0) * pow(4000.0, -1.5), 1e-15);
    CHECK_NEAR(tfm_lr_schedule(1.0, 512, 4000, 2000), peak / 2, 1e-12);   /* linear rise */
    CHECK_NEAR(tfm_lr_schedule(1.0, 512, 4000, 16000), peak / 2, 1e-12);  /* 1/sqrt fall */
    CHECK_NEAR(tfm_lr_schedule(2.0, 512, 4000, 16000), peak, 1e-12);      /* the factor */
    CHECK_NEAR(tfm_lr_schedule(1.0, 64, 400, 400), 1.0 / sqrt(64.0 * 400.0), 1e-12);
}

static void test_budgeted_schedules(void)
{
    /* Every schedule rises to the paper's peak at the warm-up's end. */
    double peak = 0.3 / sqrt(256.0 * 100.0);
    for (int k = TFM_SCHEDULE_NOAM; k <= TFM_SCHEDULE_CONSTANT; k++) {
        CHECK_NEAR(tfm_lr_at((tfm_schedule)k, 0.3, 256, 100, 100, 1000), peak, 1e-15);
        CHECK_NEAR(tfm_lr_at((tfm_schedule)k, 0.3, 256, 100, 25, 1000), peak / 4, 1e-15);
    }
    /* The paper's is tfm_lr_schedule, whatever the total. */
    CHECK(tfm_lr_at(TFM_SCHEDULE_NOAM, 1, 512, 4000, 9000, 10) ==
          tfm_lr_schedule(1, 512, 4000, 9000));
    /* linear: from the peak at update 100 to peak / 901 at update 1000,
     * through the middle at update 550 (901 - 450 = 451 of 901 left). */
    CHECK_NEAR(tfm_lr_at(TFM_SCHEDULE_LINEAR, 0.3, 256, 100, 1000, 1000), peak / 901, 1e-15);
    CHECK_NEAR(tfm_lr_at(TFM_SCHEDULE_LINEAR, 0.3, 256, 100, 550, 1000), peak * 451 / 901, 1e-15);
    /* Past the total (an estimate that was too low) it stays at its last. */
    CHECK_NEAR(tfm_lr_at(TFM_SCHEDULE_LINEAR, 0.3, 256, 100, 1200, 1000), peak / 901, 1e-15);
    /* wsd: the peak held to update 800, then down to peak / 201 at 1000. */
    CHECK_NEAR(tfm_lr_at(TFM_SCHEDULE_WSD, 0.3, 256, 100, 800, 1000), peak, 1e-15);
    CHECK_NEAR(tfm_lr_at(TFM_SCHEDULE_WSD, 0.3, 256, 100, 900, 1000), peak * 101 / 201, 1e-15);
    CHECK_NEAR(tfm_lr_at(TFM_SCHEDULE_WSD, 0.3, 256, 100, 1000, 1000), peak / 201, 1e-15);
    /* A decay longer than what follows the warm-up starts at the warm-up's end. */
    CHECK_NEAR(tfm_lr_at(TFM_SCHEDULE_WSD, 0.3, 256, 100, 101, 110),
               tfm_lr_at(TFM_SCHEDULE_LINEAR, 0.3, 256, 100, 101, 110), 1e-15);
    /* Without a total the budgeted ones hold the peak. */
    CHECK_NEAR(tfm_lr_at(TFM_SCHEDULE_LINEAR, 0.3, 256, 100, 5000, 0), peak, 1e-15);
    CHECK_NEAR(tfm_lr_at(TFM_SCHEDULE_WSD, 0.3, 256, 100, 5000, 0), peak, 1e-15);
    /* constant holds it with a total too, past it as well. */
    CHECK_NEAR(tfm_lr_at(TFM_SCHEDULE_CONSTANT, 0.3, 256, 100, 1000, 1000), peak, 1e-15);
    CHECK_NEAR(tfm_lr_at(TFM_SCHEDULE_CONSTANT, 0.3, 256, 100, 5000, 1000), peak, 1e-15);
    /* The warm-up as a share: of the total, or of 1000 before it is known. */
    CHECK(tfm_warmup_steps(150, 0, 0, 2000) == 150);
    CHECK(tfm_warmup_steps(150, 0.08, 0, 2000) == 160);
    CHECK(tfm_warmup_steps(150, 0.08, 0, 0) == (int64_t)(0.08 * TFM_WARMUP_UNKNOWN_TOTAL + 0.5));
    CHECK(tfm_warmup_steps(150, 0.08, 0, 3) == 1);
    CHECK(tfm_warmup_steps(0, 0, 0, 3) == 1);
    /* At least least updates: 8% of 1200 is 96, raised to 150; but never
     * more than half the run (20 updates: 10). */
    CHECK(tfm_warmup_steps(4000, 0.08, 150, 1200) == 150);
    CHECK(tfm_warmup_steps(4000, 0.08, 150, 5000) == 400);
    CHECK(tfm_warmup_steps(4000, 0.08, 150, 20) == 10);
    CHECK(tfm_warmup_steps(4000, 0.08, 150, 0) == 150); /* of 1000 unknown: 80, raised */
}

static void test_nonfinite(void)
{
    float x[5] = {1, 2, 3, 4, 5};
    CHECK(tfm_sum_squares(x, 5) == 55.0);
    x[2] = NAN;
    CHECK(isnan(tfm_sum_squares(x, 5)));
    x[2] = INFINITY;
    CHECK(isinf(tfm_sum_squares(x, 5)));
    /* Large finite values do not overflow the double sum. */
    x[2] = 3e38f;
    CHECK(isfinite(tfm_sum_squares(x, 5)));
    float e[3] = {1, 1, 1}, w[3] = {3, 5, -1};
    tfm_ema_update(0.75f, 3, e, w);
    CHECK(e[0] == 1.5f && e[1] == 2.0f && e[2] == 0.5f);
}

/* ---- batching ------------------------------------------------------------------------ */

/* A corpus of n pairs of pseudo-random lengths 1..max_len (ids 4..). */
static tfm_corpus *random_corpus(size_t n, int max_len, uint64_t seed)
{
    tfm_corpus *c = tfm_corpus_create();
    tfm_rng r;
    tfm_rng_seed(&r, seed);
    int32_t src[512], tgt[512];
    for (size_t i = 0; i < n; i++) {
        int ns = 1 + (int)tfm_rng_below(&r, (uint64_t)max_len);
        int nt = 1 + (int)tfm_rng_below(&r, (uint64_t)max_len);
        for (int k = 0; k < ns; k++) src[k] = 4 + (int32_t)((i + (size_t)k) % 50);
        for (int k = 0; k < nt; k++) tgt[k] = 4 + (int32_t)((i * 7 + (size_t)k) % 50);
        tfm_corpus_add(c, src, ns, tgt, nt, NULL);
    }
    return c;
}

static void test_batches_cover_epoch(void)
{
    tfm_corpus *c = random_corpus(1000, 60, 7);
    tfm_batcher_params p = tfm_batcher_default_params();
    p.batch_tokens = 300;
    p.window = 5;
    tfm_batcher *b;
    tfm_error err;
    CHECK(tfm_batcher_create(c, &p, &b, &err) == TFM_OK);
    for (int epoch = 0; epoch < 3; epoch++) {
        int *seen = calloc(1000, sizeof *seen);
        int64_t padded = 0, real = 0, nb = 1;
        for (int64_t i = 0; i < nb; i++) {
            tfm_batch batch;
            CHECK(tfm_batcher_next(b, &batch, &err) == TFM_OK);
            CHECK(batch.epoch == epoch);
            /* The plan of the epoch is made when its first batch is taken. */
            if (i == 0) nb = tfm_batcher_epoch_batches(b);
            int ms = 0, mt = 0;
            int64_t tt = 0;
            for (int k = 0; k < batch.pairs.B; k++) {
                seen[batch.numbers[k]]++;
                if (batch.pairs.src_lens[k] > ms) ms = batch.pairs.src_lens[k];
                if (batch.pairs.tgt_lens[k] > mt) mt = batch.pairs.tgt_lens[k];
                tt += batch.pairs.tgt_lens[k] + 1;
                const int32_t *s, *t;
                int ns, nt;
                tfm_corpus_pair(c, batch.numbers[k], &s, &ns, &t, &nt);
                CHECK(batch.pairs.src[k] == s && batch.pairs.tgt[k] == t && batch.pairs.src_lens[k] == ns);
            }
            CHECK(tt == batch.tgt_tokens);
            int64_t cost = tfm_batch_cost(batch.pairs.B, ms, mt);
            CHECK_MSG(cost <= p.batch_tokens, "batch of %d costs %lld", batch.pairs.B, (long long)cost);
            padded += cost;
            real += tt > batch.src_tokens ? tt : batch.src_tokens;
        }
        CHECK(nb > 1000 * 30 / 300 / 2);
        for (int i = 0; i < 1000; i++) CHECK_MSG(seen[i] == 1, "pair %d seen %d times", i, seen[i]);
        /* Sorting by length keeps padding small. */
        CHECK_MSG(real * 10 > padded * 7, "real %lld of %lld", (long long)real, (long long)padded);
        free(seen);
    }
    tfm_batcher_free(b);
    tfm_corpus_free(c);
}

/* The pair numbers of the next n batches, flattened, with -1 between batches. */
static void take_batches(tfm_batcher *b, int n, long *out, size_t *len)
{
    *len = 0;
    for (int i = 0; i < n; i++) {
        tfm_batch batch;
        tfm_batcher_next(b, &batch, NULL);
        for (int k = 0; k < batch.pairs.B; k++) out[(*len)++] = (long)batch.numbers[k];
        out[(*len)++] = -1;
    }
}

static void test_batches_deterministic_and_resumable(void)
{
    tfm_corpus *c = random_corpus(300, 30, 3);
    tfm_batcher_params p = tfm_batcher_default_params();
    p.batch_tokens = 200;
    p.window = 3;
    p.seed = 42;
    tfm_batcher *a, *b, *d;
    tfm_error err;
    CHECK(tfm_batcher_create(c, &p, &a, &err) == TFM_OK);
    CHECK(tfm_batcher_create(c, &p, &b, &err) == TFM_OK);
    p.seed = 43;
    CHECK(tfm_batcher_create(c, &p, &d, &err) == TFM_OK);
    /* 150 batches cross several epoch boundaries. */
    enum { N = 150 };
    static long x[N * 310], y[N * 310], z[N * 310];
    size_t nx, ny, nz;
    take_batches(a, N, x, &nx);
    take_batches(b, N, y, &ny);
    take_batches(d, N, z, &nz);
    CHECK(nx == ny && memcmp(x, y, nx * sizeof *x) == 0);
    CHECK(nx != nz || memcmp(x, z, nx * sizeof *x) != 0);

    /* Stop a third of the way in, save the state, continue in a new batcher. */
    tfm_batcher_free(a);
    tfm_batcher_free(b);
    p.seed = 42;
    CHECK(tfm_batcher_create(c, &p, &a, &err) == TFM_OK);
    take_batches(a, 47, y, &ny);
    tfm_batcher_state s;
    tfm_batcher_get_state(a, &s);
    CHECK(tfm_batcher_create(c, &p, &b, &err) == TFM_OK);
    CHECK(tfm_batcher_set_state(b, &s, &err) == TFM_OK);
    size_t rest;
    take_batches(b, N - 47, y + ny, &rest);
    CHECK(ny + rest == nx && memcmp(x, y, nx * sizeof *x) == 0);

    /* A position beyond the epoch is refused and leaves the batcher as it was. */
    tfm_batcher_state bad = s;
    bad.position = 1000000;
    CHECK(tfm_batcher_set_state(b, &bad, &err) == TFM_ERR_RANGE);
    tfm_batcher_free(a);
    tfm_batcher_free(b);
    tfm_batcher_free(d);
    tfm_corpus_free(c);
}

static void test_batches_unshuffled_and_edges(void)
{
    tfm_corpus *c = random_corpus(50, 20, 5);
    tfm_batcher_params p = tfm_batcher_default_params();
    p.shuffle = false;
    p.batch_tokens = 64;
    tfm_batcher *b;
    tfm_error err;
    CHECK(tfm_batcher_create(c, &p, &b, &err) == TFM_OK);
    /* Without shuffling: one sorted window, batches in rising length. */
    int64_t nb = tfm_batcher_epoch_batches(b);
    int last_key = 0;
    for (int64_t i = 0; i < nb; i++) {
        tfm_batch batch;
        tfm_batcher_next(b, &batch, &err);
        for (int k = 0; k < batch.pairs.B; k++) {
            int key = batch.pairs.src_lens[k] > batch.pairs.tgt_lens[k] + 1 ? batch.pairs.src_lens[k]
                                                                 : batch.pairs.tgt_lens[k] + 1;
            CHECK(key >= last_key);
            last_key = key;
        }
    }
    tfm_batcher_free(b);
    /* A budget below one pair's cost: that pair is a batch of its own. */
    p.batch_tokens = 2;
    CHECK(tfm_batcher_create(c, &p, &b, &err) == TFM_OK);
    CHECK(tfm_batcher_epoch_batches(b) == 50);
    tfm_batcher_free(b);
    p.batch_tokens = 0;
    CHECK(tfm_batcher_create(c, &p, &b, &err) == TFM_ERR_ARG);
    tfm_corpus *empty = tfm_corpus_create();
    p.batch_tokens = 100;
    CHECK(tfm_batcher_create(empty, &p, &b, &err) == TFM_ERR_ARG);
    tfm_corpus_free(empty);
    tfm_corpus_free(c);
    CHECK(tfm_batch_cost(3, 10, 4) == 30 && tfm_batch_cost(3, 4, 10) == 33);
}

/* ---- loading data ---------------------------------------------------------------------- */

static void test_corpus_load_ids(void)
{
    const char *src = tmp_path("ids.src"), *tgt = tmp_path("ids.tgt");
    write_file(src, "5 6 7\n\n8 9\n10 11 12 13 14 15\n16\r\n17 18\n");
    write_file(tgt, "20 21\n22\n\n23\n24 25\n26");
    tfm_corpus_params p = tfm_corpus_default_params();
    p.max_length = 5;
    p.vocab_size = 100;
    tfm_corpus *c;
    tfm_corpus_stats st;
    tfm_error err;
    CHECK(tfm_corpus_load(src, tgt, &p, &c, &st, &err) == TFM_OK);
    /* Line 2 and 3: one side empty; line 4: 6 source ids > 5. */
    CHECK(st.lines == 6 && st.pairs == 3 && st.empty == 2 && st.too_long == 1);
    CHECK(st.src_format == TFM_CORPUS_IDS && st.tgt_format == TFM_CORPUS_IDS);
    /* Every source ends with </s>, as encode ends its input. */
    CHECK(tfm_corpus_size(c) == 3 && st.src_tokens == 6 + 3 && st.tgt_tokens == 5);
    const int32_t *s, *t;
    int ns, nt;
    tfm_corpus_pair(c, 1, &s, &ns, &t, &nt);
    CHECK(ns == 2 && s[0] == 16 && s[1] == TFM_ID_EOS && nt == 2 && t[0] == 24 && t[1] == 25);
    tfm_corpus_pair(c, 2, &s, &ns, &t, &nt);
    CHECK(ns == 3 && s[1] == 18 && s[2] == TFM_ID_EOS && nt == 1 && t[0] == 26);
    uint64_t h = tfm_corpus_hash(c);
    tfm_corpus_free(c);

    /* The same data give the same hash; other data another. */
    CHECK(tfm_corpus_load(src, tgt, &p, &c, &st, &err) == TFM_OK);
    CHECK(tfm_corpus_hash(c) == h);
    tfm_corpus_free(c);
    p.max_length = 0;
    CHECK(tfm_corpus_load(src, tgt, &p, &c, &st, &err) == TFM_OK);
    CHECK(st.pairs == 4 && tfm_corpus_hash(c) != h);
    tfm_corpus_free(c);
    /* Without the </s>: the sentences as they are. */
    p.append_eos = false;
    CHECK(tfm_corpus_load(src, tgt, &p, &c, &st, &err) == TFM_OK);
    tfm_corpus_pair(c, 0, &s, &ns, &t, &nt);
    CHECK(st.src_tokens == 12 && ns == 3 && s[2] == 7);
    tfm_corpus_free(c);
}

static void test_corpus_load_errors(void)
{
    const char *src = tmp_path("e.src"), *tgt = tmp_path("e.tgt");
    tfm_corpus_params p = tfm_corpus_default_params();
    p.vocab_size = 50;
    tfm_corpus *c;
    tfm_corpus_stats st;
    tfm_error err;
    /* Line counts that differ: both are named. */
    write_file(src, "5\n6\n7\n");
    write_file(tgt, "5\n6\n7\n8\n9\n");
    CHECK(tfm_corpus_load(src, tgt, &p, &c, &st, &err) == TFM_ERR_FORMAT);
    CHECK_MSG(strstr(err.msg, "source file has 3 lines") && strstr(err.msg, "target file has 5"),
              "%s", err.msg);
    CHECK(c == NULL);
    write_file(tgt, "5\n");
    CHECK(tfm_corpus_load(src, tgt, &p, &c, &st, &err) == TFM_ERR_FORMAT);
    CHECK_MSG(strstr(err.msg, "has 3 lines") && strstr(err.msg, "has 1"), "%s", err.msg);
    /* An id outside the vocabulary: the file and line are given. */
    write_file(src, "5\n6 77\n7\n");
    write_file(tgt, "5\n6\n7\n");
    CHECK(tfm_corpus_load(src, tgt, &p, &c, &st, &err) == TFM_ERR_RANGE);
    CHECK(st.error_file == 0 && st.error_line == 2);
    /* The specials are the model's to add. */
    write_file(src, "5\n6\n7\n");
    write_file(tgt, "5\n6\n7 3\n");
    CHECK(tfm_corpus_load(src, tgt, &p, &c, &st, &err) == TFM_ERR_RANGE);
    CHECK(st.error_file == 1 && st.error_line == 3 && strstr(err.msg, "</s>"));
    /* A file mostly of ids with a line that is not one: an error at that
     * line, saying the file was read as ids; text without a vocabulary;
     * a missing file. */
    write_file(tgt, "5\nsome text\n7\n");
    CHECK(tfm_corpus_load(src, tgt, &p, &c, &st, &err) == TFM_ERR_FORMAT);
    CHECK_MSG(st.error_file == 1 && st.error_line == 2 &&
                  strstr(err.msg, "(the file was read as id lines: 2 of its first 3 non-empty "
                                  "lines are)"),
              "%s", err.msg);
    write_file(tgt, "hello\nworld\n7\n");
    CHECK(tfm_corpus_load(src, tgt, &p, &c, &st, &err) == TFM_ERR_ARG);
    CHECK(st.error_file == 1 && strstr(err.msg, "needs a vocabulary"));
    CHECK(tfm_corpus_load(tmp_path("nothere"), tgt, &p, &c, &st, &err) == TFM_ERR_IO);
    CHECK(st.error_file == 0);
}

static void test_corpus_load_text(void)
{
    /* A vocabulary of the specials, the bytes and the space marker spells
     * text byte by byte. */
    tfm_norm_params np = tfm_norm_default_params();
    tfm_vocab *v = tfm_vocab_create(&np);
    int32_t space = tfm_vocab_add(v, "\xe2\x96\x81", 3, 0.0f, TFM_PIECE_NORMAL);
    const char *src = tmp_path("t.src"), *tgt = tmp_path("t.tgt");
    write_file(src, "ab\nc\xff\n");
    write_file(tgt, "1 2\nxyz\n");
    tfm_corpus_params p = tfm_corpus_default_params();
    p.vocab = v;
    p.format = TFM_CORPUS_TEXT;
    p.append_eos = false;
    tfm_corpus *c;
    tfm_corpus_stats st;
    tfm_error err;
    CHECK_MSG(tfm_corpus_load(src, tgt, &p, &c, &st, &err) == TFM_OK, "%s", err.msg);
    if (!c) {
        tfm_vocab_free(v);
        return;
    }
    CHECK(st.pairs == 2 && st.repaired == 1);
    const int32_t *s, *t;
    int ns, nt;
    tfm_corpus_pair(c, 0, &s, &ns, &t, &nt);
    /* "▁ab": the dummy prefix and two letters as bytes; "▁1▁2". */
    CHECK(ns == 3 && s[0] == space && s[1] == tfm_vocab_byte_id(v, 'a') &&
          s[2] == tfm_vocab_byte_id(v, 'b'));
    CHECK(nt == 4 && t[1] == tfm_vocab_byte_id(v, '1') && t[2] == space);
    tfm_corpus_free(c);
    /* Auto: the source reads as text, the target's first line as ids. */
    p.format = TFM_CORPUS_AUTO;
    write_file(tgt, "4 5\n4 5\n");
    CHECK_MSG(tfm_corpus_load(src, tgt, &p, &c, &st, &err) == TFM_OK, "%s", err.msg);
    if (!c) {
        tfm_vocab_free(v);
        return;
    }
    CHECK(st.src_format == TFM_CORPUS_TEXT && st.tgt_format == TFM_CORPUS_IDS);
    CHECK(st.format_guess[0].id_lines == 0 && st.format_guess[1].lines == 2 &&
          st.format_guess[1].id_lines == 2 && !st.format_guess[1].single_ids);
    tfm_corpus_pair(c, 1, &s, &ns, &t, &nt);
    CHECK(nt == 2 && t[0] == 4 && t[1] == 5);
    tfm_corpus_free(c);
    /* Auto decides on the first block, not the first line: strings that
     * start with an empty line and a number are text; single numbers are
     * ids (thin evidence, for a note); an id beyond the vocabulary is an
     * error at its line, not a reason to read ids as text. */
    struct {
        const char *src, *tgt;
        tfm_corpus_format want_src, want_tgt;
        size_t evidence;
        bool single;
    } cases[] = {
        {"\n42\nundefined\n", "4 5\n4\n6 7\n", TFM_CORPUS_TEXT, TFM_CORPUS_IDS, 3, false},
        {"ab\nc\nd\n", "\n4\n5\n", TFM_CORPUS_TEXT, TFM_CORPUS_IDS, 2, true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_file(src, cases[i].src);
        write_file(tgt, cases[i].tgt);
        c = NULL;
        CHECK_MSG(tfm_corpus_load(src, tgt, &p, &c, &st, &err) == TFM_OK, "case %zu: %s", i,
                  err.msg);
        CHECK_MSG(st.src_format == cases[i].want_src && st.tgt_format == cases[i].want_tgt &&
                      st.format_guess[1].id_lines == cases[i].evidence &&
                      st.format_guess[1].single_ids == cases[i].single,
                  "case %zu: formats %d %d, evidence %zu", i, (int)st.src_format,
                  (int)st.tgt_format, st.format_guess[1].id_lines);
        tfm_corpus_free(c);
    }
    write_file(tgt, "4 5\n99999\n6\n");
    CHECK(tfm_corpus_load(src, tgt, &p, &c, &st, &err) == TFM_ERR_RANGE);
    CHECK(st.error_file == 1 && st.error_line == 2);
    /* Many lines, several threads: the same corpus as one thread reads. */
    FILE *a = fopen(src, "wb"), *b = fopen(tgt, "wb");
    for (int i = 0; i < 9000; i++) {
        fprintf(a, "line %d of %s\n", i, i % 3 ? "text" : "more text");
        fprintf(b, "%d\n", 4 + i % 200);
    }
    fclose(a);
    fclose(b);
    p.n_threads = 1;
    CHECK(tfm_corpus_load(src, tgt, &p, &c, &st, &err) == TFM_OK);
    uint64_t h1 = tfm_corpus_hash(c);
    CHECK(st.pairs == 9000);
    tfm_corpus_free(c);
    p.n_threads = 3;
    CHECK(tfm_corpus_load(src, tgt, &p, &c, &st, &err) == TFM_OK);
    CHECK(tfm_corpus_hash(c) == h1);
    tfm_corpus_free(c);
    tfm_vocab_free(v);
}

/* ---- checkpoints ------------------------------------------------------------------------ */

static void fill_random(float *x, size_t n, uint64_t seed)
{
    tfm_rng r;
    tfm_rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++) x[i] = tfm_rng_float(&r) - 0.5f;
}

static void test_checkpoint_round_trip(void)
{
    tfm_norm_params np = tfm_norm_default_params();
    tfm_vocab *v = tfm_vocab_create(&np);
    tfm_vocab_add(v, "▁x", strlen("▁x"), -1.0f, TFM_PIECE_NORMAL);
    tfm_config c = tiny_config(tfm_vocab_size(v));
    tfm_model *m;
    tfm_error err;
    CHECK(tfm_model_create(&c, v, 9, &m, &err) == TFM_OK);
    m->step = 1234;
    size_t n = tfm_params_count(&c);
    tfm_train_state s;
    CHECK(tfm_train_state_init(&s, m, true, &err) == TFM_OK);
    CHECK(memcmp(s.ema, m->data, n * sizeof(float)) == 0);
    fill_random(s.exp_avg, n, 1);
    fill_random(s.exp_avg_sq, n, 2);
    fill_random(s.ema, n, 3);
    s.exp_avg[7] = -0.0f; /* the sign of zero survives too */
    s.batcher.epoch = 3;
    s.batcher.position = 17;
    tfm_rng_seed(&s.batcher.rng, 77);
    tfm_rng_seed(&s.dropout_rng, 78);
    tfm_rng_u64(&s.dropout_rng);
    s.bad_steps = 2;
    s.corpus_pairs = 123456;
    s.corpus_hash = 0xfedcba9876543210ULL;
    const char *path = tmp_path("round.ckpt-1234");
    const char *extra[] = {"train.note", "hello", NULL};
    CHECK(tfm_checkpoint_save(path, &s, extra, &err) == TFM_OK);
    char leftover[600];
    snprintf(leftover, sizeof leftover, "%s.model-tmp.%ld", path, (long)getpid());
    CHECK(access(leftover, F_OK) != 0);

    tfm_train_state r;
    CHECK_MSG(tfm_checkpoint_load(path, &r, &err) == TFM_OK, "%s", err.msg);
    if (r.model) {
        CHECK(r.model->step == 1234);
        CHECK(tfm_params_count(&r.model->config) == n);
        CHECK(memcmp(r.model->data, m->data, n * sizeof(float)) == 0);
        CHECK(memcmp(r.exp_avg, s.exp_avg, n * sizeof(float)) == 0);
        CHECK(memcmp(r.exp_avg_sq, s.exp_avg_sq, n * sizeof(float)) == 0);
        CHECK(r.ema && memcmp(r.ema, s.ema, n * sizeof(float)) == 0);
        CHECK(r.batcher.epoch == 3 && r.batcher.position == 17);
        CHECK(memcmp(&r.batcher.rng, &s.batcher.rng, sizeof(tfm_rng)) == 0);
        CHECK(memcmp(&r.dropout_rng, &s.dropout_rng, sizeof(tfm_rng)) == 0);
        CHECK(r.bad_steps == 2 && r.corpus_pairs == 123456 && r.corpus_hash == s.corpus_hash);
        CHECK(r.model->vocab && tfm_vocab_size(r.model->vocab) == tfm_vocab_size(v));
        CHECK(r.model->config.d_model == 16 && r.model->config.dropout == c.dropout);
    }
    tfm_train_state_free(&r);

    /* The model part alone loads from the checkpoint and from a model file. */
    tfm_model *lm;
    CHECK(tfm_checkpoint_load_model(path, &lm, &err) == TFM_OK);
    CHECK(lm && memcmp(lm->data, m->data, n * sizeof(float)) == 0 && lm->step == 1234);
    tfm_model_free(lm);
    const char *model_path = tmp_path("plain.safetensors");
    CHECK(tfm_model_save(m, model_path, NULL, &err) == TFM_OK);
    CHECK(tfm_checkpoint_load_model(model_path, &lm, &err) == TFM_OK);
    tfm_model_free(lm);
    /* A model file is not a checkpoint; a checkpoint loads as a model file
     * (for the programs that translate): its weights, not the moving
     * average, and not its state. */
    CHECK(tfm_checkpoint_load(model_path, &r, &err) == TFM_ERR_FORMAT);
    CHECK_MSG(strstr(err.msg, "not a checkpoint"), "%s", err.msg);
    lm = NULL;
    CHECK_MSG(tfm_model_load(path, &lm, &err) == TFM_OK, "%s", err.msg);
    CHECK(lm && memcmp(lm->data, m->data, n * sizeof(float)) == 0 && lm->step == 1234);
    CHECK(lm && memcmp(lm->data, s.ema, n * sizeof(float)) != 0);
    tfm_model_free(lm);

    /* Without a moving average. */
    free(s.ema);
    s.ema = NULL;
    CHECK(tfm_checkpoint_save(path, &s, NULL, &err) == TFM_OK);
    CHECK(tfm_checkpoint_load(path, &r, &err) == TFM_OK);
    CHECK(r.ema == NULL && r.exp_avg && memcmp(r.exp_avg, s.exp_avg, n * sizeof(float)) == 0);
    tfm_train_state_free(&r);

    /* A truncated checkpoint is refused, not half read. */
    FILE *fp = fopen(path, "rb");
    fseek(fp, 0, SEEK_END);
    long size = ftell(fp);
    fclose(fp);
    CHECK(truncate(path, size - 100) == 0);
    CHECK(tfm_checkpoint_load(path, &r, &err) == TFM_ERR_FORMAT);
    tfm_train_state_free(&s);
    tfm_vocab_free(v);
}

static void test_checkpoint_files(void)
{
    char prefix[8192];
    snprintf(prefix, sizeof prefix, "%s/run/m.ckpt", test_tmpdir);
    int64_t *steps;
    size_t n;
    tfm_error err;
    /* A folder that does not exist has no checkpoints. */
    CHECK(tfm_checkpoint_list(prefix, &steps, &n, &err) == TFM_OK && n == 0 && !steps);
    mkdir(tmp_path("run"), 0777);
    /* The temporary files of a writer that is gone, and of one that runs. */
    pid_t child = fork();
    if (child == 0) _exit(0);
    waitpid(child, NULL, 0);
    char dead[64], alive[64], dead_model[64];
    snprintf(dead, sizeof dead, "m.ckpt-7.tmp.%ld", (long)child);
    snprintf(dead_model, sizeof dead_model, "m.ckpt-30.model-tmp.%ld", (long)child);
    snprintf(alive, sizeof alive, "m.ckpt-8.tmp.%ld", (long)getppid());
    const char *names[] = {"m.ckpt-10", "m.ckpt-2", "m.ckpt-100", dead, "m.ckpt-x", "m.ckpt-",
                           "other.ckpt-5", dead_model, alive, "m.ckpt-30"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        char p[8192];
        snprintf(p, sizeof p, "%s/run/%s", test_tmpdir, names[i]);
        write_file(p, "x");
    }
    CHECK(tfm_checkpoint_list(prefix, &steps, &n, &err) == TFM_OK);
    CHECK(n == 4 && steps[0] == 2 && steps[1] == 10 && steps[2] == 30 && steps[3] == 100);
    free(steps);
    CHECK(tfm_checkpoint_prune(prefix, 2, &err) == TFM_OK);
    CHECK(tfm_checkpoint_list(prefix, &steps, &n, &err) == TFM_OK);
    CHECK(n == 2 && steps[0] == 30 && steps[1] == 100);
    free(steps);
    char p1[8192], p2[8192], p3[8192];
    snprintf(p1, sizeof p1, "%s/run/%s", test_tmpdir, dead);
    snprintf(p2, sizeof p2, "%s/run/%s", test_tmpdir, dead_model);
    snprintf(p3, sizeof p3, "%s/run/%s", test_tmpdir, alive);
    CHECK(access(p1, F_OK) != 0 && access(p2, F_OK) != 0);
    CHECK(access(p3, F_OK) == 0);
    tfm_buf b;
    tfm_buf_init(&b);
    tfm_checkpoint_path("a/m", 42, &b);
    CHECK(strcmp(b.data, "a/m-42") == 0);
    tfm_buf_free(&b);
    CHECK(tfm_checkpoint_prune(prefix, 0, &err) == TFM_ERR_ARG);
}

static void test_average(void)
{
    tfm_config c = tiny_config(300);
    tfm_model *a, *b, *avg;
    tfm_error err;
    tfm_model_create(&c, NULL, 1, &a, &err);
    tfm_model_create(&c, NULL, 2, &b, &err);
    a->step = 100;
    b->step = 200;
    size_t n = tfm_params_count(&c);
    const char *pa = tmp_path("avg-a"), *pb = tmp_path("avg-b");
    tfm_model_save(a, pa, NULL, &err);
    /* One of them a checkpoint: averaging takes either kind. */
    tfm_train_state s;
    tfm_train_state_init(&s, b, false, &err);
    tfm_rng_seed(&s.batcher.rng, 1);
    tfm_rng_seed(&s.dropout_rng, 2);
    CHECK(tfm_checkpoint_save(pb, &s, NULL, &err) == TFM_OK);
    const char *paths[] = {pa, pb};
    CHECK_MSG(tfm_average_models(paths, 2, &avg, &err) == TFM_OK, "%s", err.msg);
    bool same = true;
    for (size_t i = 0; i < n; i++)
        if (avg->data[i] != (a->data[i] + b->data[i]) / 2.0f) same = false;
    CHECK(same && avg->step == 200);
    tfm_model_free(avg);
    /* Averaging one model gives it back. */
    CHECK(tfm_average_models(paths, 1, &avg, &err) == TFM_OK);
    CHECK(memcmp(avg->data, a->data, n * sizeof(float)) == 0);
    tfm_model_free(avg);
    /* Models of different shapes cannot be averaged. */
    tfm_config c2 = c;
    c2.n_heads = 4;
    tfm_model *d;
    tfm_model_create(&c2, NULL, 3, &d, &err);
    const char *pd = tmp_path("avg-d");
    tfm_model_save(d, pd, NULL, &err);
    const char *bad[] = {pa, pd};
    CHECK(tfm_average_models(bad, 2, &avg, &err) == TFM_ERR_FORMAT && avg == NULL);
    tfm_model_free(d);
    tfm_model_free(a);
    tfm_train_state_free(&s);
}

int main(void)
{
    test_tmpdir_init("test-train-parts");
    RUN(test_adam_first_step);
    RUN(test_adam_against_reference);
    RUN(test_adam_versions_agree);
    RUN(test_schedule);
    RUN(test_budgeted_schedules);
    RUN(test_nonfinite);
    RUN(test_batches_cover_epoch);
    RUN(test_batches_deterministic_and_resumable);
    RUN(test_batches_unshuffled_and_edges);
    RUN(test_corpus_load_ids);
    RUN(test_corpus_load_errors);
    RUN(test_corpus_load_text);
    RUN(test_checkpoint_round_trip);
    RUN(test_checkpoint_files);
    RUN(test_average);
    test_tmpdir_cleanup();
    CHECK_DONE();
}
