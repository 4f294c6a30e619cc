/* test_train.c - unit tests of lib/train: Adam against steps computed by
 * hand, the learning-rate schedule's values, batching (every pair once per
 * epoch, the token budget, determinism by seed, continuing from a saved
 * position), loading parallel data (counts, skips, errors), checkpoints
 * (a bit-for-bit round trip of the whole training state), averaging, the
 * handling of NaN and infinity, and the trainer itself on a tiny model:
 * the loss falls, a run stopped and resumed equals one never stopped, runs
 * on 1, 2 and 3 threads are the same bit for bit, and poisoned updates are
 * skipped; and the training run (tfm_run): early stopping on made-up
 * scores, defaults and usage errors, options kept in checkpoints and taken
 * back on resume, and a stop request. */
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "tfm.h"

static char tmpdir[256];

static const char *tmp_path(const char *name)
{
    static char paths[8][512];
    static int next;
    char *p = paths[next++ % 8];
    snprintf(p, 512, "%s/%s", tmpdir, name);
    return p;
}

static void write_file(const char *path, const char *text)
{
    FILE *fp = fopen(path, "wb");
    fputs(text, fp);
    fclose(fp);
}

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

static tfm_config tiny_config(int32_t vocab)
{
    tfm_config c;
    tfm_config_preset("tiny", &c, NULL);
    c.d_model = 16;
    c.d_ff = 32;
    c.n_heads = 2;
    c.n_encoder_layers = 1;
    c.n_decoder_layers = 1;
    c.max_positions = 64;
    c.src_vocab_size = c.tgt_vocab_size = vocab;
    return c;
}

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
    /* A model file is not a checkpoint; a checkpoint is not a model file. */
    CHECK(tfm_checkpoint_load(model_path, &r, &err) == TFM_ERR_FORMAT);
    CHECK_MSG(strstr(err.msg, "not a checkpoint"), "%s", err.msg);
    CHECK(tfm_model_load(path, &lm, &err) != TFM_OK);

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
    char prefix[512];
    snprintf(prefix, sizeof prefix, "%s/run/m.ckpt", tmpdir);
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
        char p[600];
        snprintf(p, sizeof p, "%s/run/%s", tmpdir, names[i]);
        write_file(p, "x");
    }
    CHECK(tfm_checkpoint_list(prefix, &steps, &n, &err) == TFM_OK);
    CHECK(n == 4 && steps[0] == 2 && steps[1] == 10 && steps[2] == 30 && steps[3] == 100);
    free(steps);
    CHECK(tfm_checkpoint_prune(prefix, 2, &err) == TFM_OK);
    CHECK(tfm_checkpoint_list(prefix, &steps, &n, &err) == TFM_OK);
    CHECK(n == 2 && steps[0] == 30 && steps[1] == 100);
    free(steps);
    char p1[600], p2[600], p3[600];
    snprintf(p1, sizeof p1, "%s/run/%s", tmpdir, dead);
    snprintf(p2, sizeof p2, "%s/run/%s", tmpdir, dead_model);
    snprintf(p3, sizeof p3, "%s/run/%s", tmpdir, alive);
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

/* ---- the trainer ----------------------------------------------------------------------------- */

/* The copy task: random sequences of ids 4..13, the target equal to the source. */
static tfm_corpus *copy_corpus(size_t n, uint64_t seed)
{
    tfm_corpus *c = tfm_corpus_create();
    tfm_rng r;
    tfm_rng_seed(&r, seed);
    int32_t ids[10];
    for (size_t i = 0; i < n; i++) {
        int len = 3 + (int)tfm_rng_below(&r, 6);
        for (int k = 0; k < len; k++) ids[k] = 4 + (int32_t)tfm_rng_below(&r, 10);
        tfm_corpus_add(c, ids, len, ids, len, NULL);
    }
    return c;
}

static tfm_train_params tiny_train_params(void)
{
    tfm_train_params p = tfm_train_default_params();
    p.batches.batch_tokens = 120;
    p.batches.window = 4;
    p.warmup = 20;
    p.lr_factor = 1.0;
    p.seed = 5;
    p.batches.seed = 6;
    return p;
}

static tfm_trainer *tiny_trainer(const tfm_corpus *data, const tfm_train_params *p)
{
    tfm_config c = tiny_config(14);
    c.dropout = 0.1f;
    tfm_model *m;
    tfm_error err;
    tfm_trainer *t = NULL;
    if (tfm_model_create(&c, NULL, 3, &m, &err) != TFM_OK) return NULL;
    if (tfm_trainer_create(m, data, p, &t, &err) != TFM_OK) {
        printf("# trainer: %s\n", err.msg);
        return NULL;
    }
    return t;
}

/* Checks validation's decoding against decodes made here with the public
 * API (greedy search on the encoder's states): its exact matches must be
 * those decodes' own, and validating against a corpus whose references are
 * those decodes must give every sentence exact and BLEU 100. */
static void check_validation_decodes(tfm_trainer *t, const tfm_corpus *valid,
                                     const tfm_valid_result *v)
{
    enum { N = 20 };
    const tfm_model *m = tfm_trainer_model(t);
    tfm_error err;
    tfm_encoder *enc = NULL;
    tfm_decoder *dec = NULL;
    tfm_search *search = NULL;
    CHECK(tfm_corpus_size(valid) == N);
    bool made = tfm_encoder_create(m, &enc, &err) == TFM_OK &&
                tfm_decoder_create(m, &dec, &err) == TFM_OK &&
                tfm_search_create(m, &search, &err) == TFM_OK;
    CHECK_MSG(made, "%s", err.msg);
    const int32_t *src[N], *tgt[N];
    int src_lens[N], tgt_lens[N];
    const float *states[N];
    size_t rows = 0;
    for (int i = 0; i < N; i++) {
        tfm_corpus_pair(valid, (size_t)i, &src[i], &src_lens[i], &tgt[i], &tgt_lens[i]);
        rows += (size_t)src_lens[i];
    }
    const size_t D = (size_t)m->config.d_model;
    float *buf = malloc(rows * D * sizeof *buf);
    tfm_search_params sp = tfm_search_default_params();
    sp.beam = 1;
    tfm_search_input in = {.n_sentences = N, .states = states, .src_lens = src_lens};
    if (made && buf && tfm_encoder_forward(enc, N, src, src_lens, buf, &err) == TFM_OK) {
        for (int i = 0, row = 0; i < N; row += src_lens[i], i++) states[i] = buf + row * D;
        CHECK_MSG(tfm_search_run(search, dec, &sp, &in, &err) == TFM_OK, "%s", err.msg);
        tfm_corpus *own = tfm_corpus_create();
        int exact = 0, tokens = 0;
        for (int i = 0; i < N; i++) {
            const tfm_hypothesis *h = &tfm_search_result(search, i).hyps[0];
            exact += h->len == tgt_lens[i] &&
                     memcmp(h->ids, tgt[i], (size_t)h->len * sizeof *h->ids) == 0;
            tokens += h->len;
            CHECK(tfm_corpus_add(own, src[i], src_lens[i], h->ids, h->len, &err) == TFM_OK);
        }
        CHECK_MSG(v->exact == exact / (double)N, "validation: %.3f exact, decodes: %d of %d",
                  v->exact, exact, N);
        tfm_valid_result w;
        CHECK_MSG(tokens > 0 && tfm_trainer_validate(t, own, true, &w, &err) == TFM_OK, "%s",
                  err.msg);
        CHECK_MSG(w.exact == 1.0 && fabs(w.bleu - 100.0) < 1e-9,
                  "against its own decodes: %.3f exact, BLEU %.4f", w.exact, w.bleu);
        /* and below 100 where they differ */
        if (exact < N) CHECK_MSG(v->bleu < 100.0, "BLEU %.4f with %d of %d exact", v->bleu, exact, N);
        tfm_corpus_free(own);
    } else {
        CHECK_MSG(false, "encoding: %s", err.msg);
    }
    free(buf);
    tfm_search_free(search);
    tfm_decoder_free(dec);
    tfm_encoder_free(enc);
}

static void test_trainer_learns(void)
{
    tfm_corpus *data = copy_corpus(200, 1);
    tfm_train_params p = tiny_train_params();
    tfm_trainer *t = tiny_trainer(data, &p);
    CHECK(t != NULL);
    if (!t) return;
    tfm_error err;
    double first = 0, last = 0;
    for (int i = 0; i < 60; i++) {
        tfm_step_result r;
        CHECK_MSG(tfm_trainer_step(t, &r, &err) == TFM_OK, "%s", err.msg);
        CHECK(!r.skipped && r.tgt_tokens > 0 && r.tgt_tokens <= 120 + 20);
        if (i == 0) first = r.loss_sum / (double)r.tgt_tokens;
        last = r.loss_sum / (double)r.tgt_tokens;
        CHECK(r.lr == tfm_lr_schedule(1.0, 16, 20, i + 1));
    }
    CHECK(tfm_trainer_steps(t) == 60);
    CHECK_MSG(last < first * 0.8, "loss %.3f -> %.3f", first, last);
    CHECK(tfm_trainer_epoch(t) > 1.0);
    tfm_valid_result v;
    tfm_corpus *valid = copy_corpus(20, 2);
    CHECK_MSG(tfm_trainer_validate(t, valid, true, &v, &err) == TFM_OK, "%s", err.msg);
    CHECK(v.sentences == 20 && v.tgt_tokens > 0 && v.decoded);
    CHECK(isfinite(v.loss_sum) && v.nll_sum <= v.loss_sum + 1e-6 * v.tgt_tokens);
    check_validation_decodes(t, valid, &v);
    /* The copy task learnt even this far uses its source: its targets are
     * likelier with their own sources than with their neighbours'. */
    CHECK(v.blind_tokens > 0 && v.blind_tokens <= v.tgt_tokens);
    CHECK_MSG(v.blind_nll_sum / (double)v.blind_tokens > v.nll_sum / (double)v.tgt_tokens + 0.1,
              "nll %.3f, with other sources %.3f", v.nll_sum / (double)v.tgt_tokens,
              v.blind_nll_sum / (double)v.blind_tokens);
    tfm_corpus_free(valid);
    /* Pairs that all have the same source lose nothing when they swap
     * sources: the blind sum is the sum itself, bit for bit. */
    tfm_corpus *same = tfm_corpus_create();
    tfm_rng r;
    tfm_rng_seed(&r, 3);
    const int32_t src[4] = {5, 6, 7, 8};
    for (int i = 0; i < 20; i++) {
        int32_t tgt[6];
        int len = 2 + (int)tfm_rng_below(&r, 5);
        for (int k = 0; k < len; k++) tgt[k] = 4 + (int32_t)tfm_rng_below(&r, 10);
        tfm_corpus_add(same, src, 4, tgt, len, NULL);
    }
    CHECK_MSG(tfm_trainer_validate(t, same, false, &v, &err) == TFM_OK, "%s", err.msg);
    CHECK(v.blind_tokens == v.tgt_tokens);
    CHECK_MSG(v.blind_nll_sum == v.nll_sum, "%.9g against %.9g", v.blind_nll_sum, v.nll_sum);
    tfm_corpus_free(same);
    tfm_trainer_free(t);
    tfm_corpus_free(data);
}

/* The trainer takes its rate from the schedule asked for and the total it is
 * told, which can change between updates (a run limited by time). */
static void test_trainer_budgeted_schedule(void)
{
    tfm_corpus *data = copy_corpus(50, 1);
    tfm_train_params p = tiny_train_params();
    p.schedule = TFM_SCHEDULE_LINEAR;
    p.warmup_share = 0.25;
    tfm_trainer *t = tiny_trainer(data, &p);
    CHECK(t != NULL);
    if (!t) return;
    tfm_error err;
    const int64_t totals[6] = {0, 8, 8, 12, 12, 12};
    for (int i = 0; i < 6; i++) {
        tfm_trainer_set_total(t, totals[i]);
        tfm_step_result r;
        CHECK_MSG(tfm_trainer_step(t, &r, &err) == TFM_OK, "%s", err.msg);
        int64_t warmup = tfm_warmup_steps(p.warmup, 0.25, 0, totals[i]);
        CHECK(r.lr == tfm_lr_at(TFM_SCHEDULE_LINEAR, p.lr_factor, 16, warmup, i + 1, totals[i]));
    }
    /* update 6 of 12, warm-up 3: 7 of 10 steps down are left */
    CHECK(tfm_warmup_steps(p.warmup, 0.25, 0, 12) == 3);
    tfm_trainer_free(t);
    tfm_corpus_free(data);
}

/* Saves the checkpoints of trainers a and b (name: a tag for the files) and
 * checks that they agree: Adam's moments, the moving average, the batcher's
 * position and the dropout generator. */
static void check_same_checkpoints(const tfm_trainer *a, const tfm_trainer *b, const char *name)
{
    char na[64], nb[64];
    snprintf(na, sizeof na, "%s-a", name);
    snprintf(nb, sizeof nb, "%s-b", name);
    const char *pa = tmp_path(na), *pb = tmp_path(nb);
    const size_t n = tfm_params_count(&tfm_trainer_model(a)->config);
    tfm_error err;
    CHECK(tfm_trainer_save(a, pa, NULL, &err) == TFM_OK);
    CHECK(tfm_trainer_save(b, pb, NULL, &err) == TFM_OK);
    tfm_train_state sa, sb;
    if (tfm_checkpoint_load(pa, &sa, &err) != TFM_OK) {
        CHECK_MSG(false, "%s: %s", pa, err.msg);
        return;
    }
    if (tfm_checkpoint_load(pb, &sb, &err) != TFM_OK) {
        CHECK_MSG(false, "%s: %s", pb, err.msg);
        tfm_train_state_free(&sa);
        return;
    }
    CHECK(memcmp(sa.exp_avg, sb.exp_avg, n * sizeof(float)) == 0);
    CHECK(memcmp(sa.exp_avg_sq, sb.exp_avg_sq, n * sizeof(float)) == 0);
    CHECK(sa.ema && sb.ema && memcmp(sa.ema, sb.ema, n * sizeof(float)) == 0);
    CHECK(memcmp(&sa.batcher, &sb.batcher, sizeof sa.batcher) == 0);
    CHECK(memcmp(&sa.dropout_rng, &sb.dropout_rng, sizeof sa.dropout_rng) == 0);
    tfm_train_state_free(&sa);
    tfm_train_state_free(&sb);
}

/* tiny_train_params with every piece of state an update carries: two
 * batches per update, a moving average of the weights, clipping. */
static tfm_train_params stateful_train_params(void)
{
    tfm_train_params p = tiny_train_params();
    p.accum = 2;
    p.ema_decay = 0.9;
    p.clip_norm = 0.5;
    return p;
}

/* n updates of t, each checked to succeed. */
static void take_steps(tfm_trainer *t, int n)
{
    tfm_error err;
    for (int i = 0; i < n; i++) {
        tfm_step_result r;
        CHECK_MSG(tfm_trainer_step(t, &r, &err) == TFM_OK, "%s", err.msg);
    }
}

static void test_trainer_resume_exact(void)
{
    tfm_corpus *data = copy_corpus(150, 3);
    tfm_train_params p = stateful_train_params();
    tfm_error err;
    /* 2N updates in one go. */
    tfm_trainer *a = tiny_trainer(data, &p);
    CHECK(a != NULL);
    if (!a) return;
    take_steps(a, 16);
    /* N updates, a checkpoint, a new trainer from it, N more. */
    tfm_trainer *b = tiny_trainer(data, &p);
    take_steps(b, 8);
    const char *path = tmp_path("resume.ckpt-8");
    CHECK(tfm_trainer_save(b, path, NULL, &err) == TFM_OK);
    tfm_trainer_free(b);
    CHECK_MSG(tfm_trainer_resume(path, data, &p, &b, &err) == TFM_OK, "%s", err.msg);
    if (!b) return;
    CHECK(tfm_trainer_steps(b) == 8);
    take_steps(b, 8);
    size_t n = tfm_params_count(&tfm_trainer_model(a)->config);
    CHECK(tfm_trainer_steps(b) == 16);
    CHECK_MSG(memcmp(tfm_trainer_model(a)->data, tfm_trainer_model(b)->data, n * sizeof(float)) == 0,
              "the resumed run's weights differ");
    /* The checkpoints of both, optimizer state and average included, agree. */
    check_same_checkpoints(a, b, "resume");
    /* The model written is the moving average. */
    const char *pm = tmp_path("resume-model");
    CHECK(tfm_trainer_save_model(a, pm, NULL, &err) == TFM_OK);
    tfm_model *m;
    CHECK(tfm_model_load(pm, &m, &err) == TFM_OK);
    CHECK(m && m->step == 16 && memcmp(m->data, tfm_trainer_model(a)->data, n * sizeof(float)) != 0);
    tfm_model_free(m);
    /* Other data: refused. */
    tfm_corpus *other = copy_corpus(150, 4);
    tfm_trainer *c;
    CHECK(tfm_trainer_resume(path, other, &p, &c, &err) == TFM_ERR_ARG);
    tfm_corpus_free(other);
    tfm_trainer_free(a);
    tfm_trainer_free(b);
    tfm_corpus_free(data);
}

/* The same updates on 1, 2 and 3 threads, bit for bit: a model with
 * several chunks of parameters (the optimizer's passes split in chunks of
 * 65536), with a moving average, clipping and two batches per update. */
static void test_trainer_threads(void)
{
    tfm_corpus *data = copy_corpus(150, 7);
    tfm_train_params p = stateful_train_params();
    tfm_config c = tiny_config(14);
    c.d_model = 64;
    c.d_ff = 256;
    c.n_heads = 4;
    c.n_encoder_layers = c.n_decoder_layers = 2;
    c.dropout = 0.1f;
    c.attention_dropout = 0.1f;
    const size_t n = tfm_params_count(&c);
    CHECK(n > 2 * 65536);
    tfm_trainer *t[3] = {NULL, NULL, NULL};
    tfm_step_result r[3][5];
    tfm_error err;
    for (int k = 0; k < 3; k++) {
        tfm_model *m;
        CHECK(tfm_model_create(&c, NULL, 3, &m, &err) == TFM_OK);
        p.n_threads = k + 1;
        CHECK_MSG(tfm_trainer_create(m, data, &p, &t[k], &err) == TFM_OK, "%s", err.msg);
        if (!t[k]) goto done;
        for (int i = 0; i < 5; i++) CHECK(tfm_trainer_step(t[k], &r[k][i], &err) == TFM_OK);
    }
    for (int k = 1; k < 3; k++) {
        for (int i = 0; i < 5; i++)
            CHECK_MSG(r[k][i].loss_sum == r[0][i].loss_sum &&
                          r[k][i].grad_norm == r[0][i].grad_norm,
                      "%d threads, update %d: loss %.17g, norm %.17g; one thread %.17g, %.17g",
                      k + 1, i + 1, r[k][i].loss_sum, r[k][i].grad_norm, r[0][i].loss_sum,
                      r[0][i].grad_norm);
        CHECK_MSG(memcmp(tfm_trainer_model(t[k])->data, tfm_trainer_model(t[0])->data,
                         n * sizeof(float)) == 0,
                  "%d threads: the weights differ", k + 1);
    }
    /* the moments and the average too, through checkpoints */
    check_same_checkpoints(t[0], t[2], "threads");
    /* a thread count below 1 is refused */
    p.n_threads = 0;
    CHECK(tfm_train_params_validate(&p, &err) == TFM_ERR_RANGE && strstr(err.msg, "n_threads"));
    CHECK(tfm_train_default_params().n_threads == 1);
done:
    for (int k = 0; k < 3; k++) tfm_trainer_free(t[k]);
    tfm_corpus_free(data);
}

static void test_trainer_nan(void)
{
    tfm_corpus *data = copy_corpus(100, 5);
    tfm_train_params p = tiny_train_params();
    p.debug_nan_step = 3;
    p.debug_nan_count = 2;
    p.max_bad_steps = 3;
    tfm_trainer *t = tiny_trainer(data, &p);
    CHECK(t != NULL);
    if (!t) return;
    tfm_error err;
    tfm_step_result r;
    size_t n = tfm_params_count(&tfm_trainer_model(t)->config);
    float *before = malloc(n * sizeof(float));
    for (int i = 0; i < 2; i++) CHECK(tfm_trainer_step(t, &r, &err) == TFM_OK && !r.skipped);
    memcpy(before, tfm_trainer_model(t)->data, n * sizeof(float));
    /* Updates 3 and 3 again are poisoned: skipped, the weights untouched. */
    CHECK(tfm_trainer_step(t, &r, &err) == TFM_OK && r.skipped && r.bad_steps == 1);
    CHECK(tfm_trainer_step(t, &r, &err) == TFM_OK && r.skipped && r.bad_steps == 2);
    CHECK(tfm_trainer_steps(t) == 2);
    CHECK(memcmp(before, tfm_trainer_model(t)->data, n * sizeof(float)) == 0);
    CHECK(tfm_trainer_step(t, &r, &err) == TFM_OK && !r.skipped && r.bad_steps == 0);
    CHECK(tfm_trainer_steps(t) == 3);
    tfm_trainer_free(t);
    /* max_bad_steps in a row: an error saying so. */
    p.debug_nan_count = 10;
    t = tiny_trainer(data, &p);
    int i = 0;
    tfm_status st = TFM_OK;
    for (; i < 10 && st == TFM_OK; i++) st = tfm_trainer_step(t, &r, &err);
    CHECK(st == TFM_ERR_RANGE && i == 5 && strstr(err.msg, "not finite"));
    CHECK(tfm_trainer_steps(t) == 2);
    tfm_trainer_free(t);
    free(before);
    tfm_corpus_free(data);
}

/* ---- the training run -------------------------------------------------------------- */

/* An update of two batches is Adam applied to g0 + g1, each batch's
 * gradient made on its own (from zero) and then added: the order that makes
 * one process with accum N equal N processes with accum 1, bit for bit
 * (tests/cli/test_train_mpi.sh).  Built here from the public API with a
 * twin of the model and of the batcher (dropout off: no generator). */
static void test_trainer_accumulation_order(void)
{
    tfm_corpus *data = copy_corpus(150, 3);
    tfm_train_params p = tiny_train_params();
    p.accum = 2;
    tfm_config c = tiny_config(14);
    c.dropout = 0;
    tfm_model *a, *b;
    tfm_error err;
    tfm_trainer *t = NULL;
    CHECK(tfm_model_create(&c, NULL, 3, &a, &err) == TFM_OK);
    CHECK(tfm_model_create(&c, NULL, 3, &b, &err) == TFM_OK);
    CHECK_MSG(tfm_trainer_create(a, data, &p, &t, &err) == TFM_OK, "%s", err.msg);
    size_t n = tfm_params_count(&c);
    float *g[2], *m = calloc(n, sizeof(float)), *v = calloc(n, sizeof(float));
    for (int k = 0; k < 2; k++) g[k] = calloc(n, sizeof(float));
    tfm_batcher *twin;
    tfm_pass_workspace *ws;
    CHECK(tfm_batcher_create(data, &p.batches, &twin, &err) == TFM_OK);
    CHECK(tfm_pass_workspace_create(b, &ws, &err) == TFM_OK);
    int64_t tokens = 0;
    for (int k = 0; k < 2; k++) {
        tfm_batch batch;
        CHECK(tfm_batcher_next(twin, &batch, &err) == TFM_OK);
        tfm_pair_batch tb = batch.pairs;
        tfm_loss_sums sums;
        CHECK(tfm_model_forward_backward(ws, &tb, NULL, 1.0f, g[k], &sums, &err) == TFM_OK);
        tokens += sums.n_tokens;
    }
    for (size_t i = 0; i < n; i++) g[0][i] += g[1][i];
    double lr = tfm_lr_schedule(p.lr_factor, c.d_model, p.warmup, 1);
    tfm_adam_update(&p.adam, 1, lr, (float)(1.0 / (double)tokens), n, b->data, g[0], m, v);
    tfm_step_result r;
    CHECK_MSG(tfm_trainer_step(t, &r, &err) == TFM_OK, "%s", err.msg);
    CHECK(r.tgt_tokens == tokens);
    CHECK_MSG(memcmp(tfm_trainer_model(t)->data, b->data, n * sizeof(float)) == 0,
              "the update is not Adam of g0 + g1 made apart");
    tfm_pass_workspace_free(ws);
    tfm_batcher_free(twin);
    for (int k = 0; k < 2; k++) free(g[k]);
    free(m);
    free(v);
    tfm_model_free(b);
    tfm_trainer_free(t);
    tfm_corpus_free(data);
}

/* Without a launcher (no mpirun in the environment) a tfm_dist is a group
 * of one, as NULL is: every exchange leaves the values as they are. */
static void test_dist_alone(void)
{
    unsetenv("OMPI_COMM_WORLD_SIZE");
    unsetenv("PMIX_RANK");
    unsetenv("PMI_RANK");
    tfm_dist *d = NULL;
    tfm_error err;
    CHECK(tfm_dist_create(NULL, NULL, &d, &err) == TFM_OK);
    tfm_dist *groups[2] = {d, NULL};
    for (int i = 0; i < 2; i++) {
        tfm_dist *g = groups[i];
        CHECK(tfm_dist_rank(g) == 0 && tfm_dist_size(g) == 1);
        double mine[3] = {1.5, -2, 3}, all[3] = {0};
        CHECK(tfm_dist_allgather(g, mine, sizeof mine, all, &err) == TFM_OK);
        CHECK(memcmp(mine, all, sizeof mine) == 0);
        float x[5] = {1, 2, 3, -4, 0.5f}, y[5];
        memcpy(y, x, sizeof x);
        CHECK(tfm_dist_sum_floats(g, x, 5, &err) == TFM_OK && memcmp(x, y, sizeof x) == 0);
        int64_t value = -7;
        CHECK(tfm_dist_max(g, &value, &err) == TFM_OK && value == -7);
        int rank = 5;
        CHECK(tfm_dist_first_difference(g, 42, &rank, &err) == TFM_OK && rank == -1);
    }
    tfm_dist_free(d);
    tfm_dist_free(NULL);
}

static void test_run_state_early_stopping(void)
{
    /* Made-up validation scores (higher is better) with patience 2: the
     * run stops at the second validation in a row that is no better than
     * the best, and a tie is no improvement. */
    const double scores[] = {10, 12, 11, 12, 13, 13, 12.5};
    const bool improved[] = {true, true, false, false, true, false, false};
    const int bad[] = {0, 0, 1, 2, 0, 1, 2};
    tfm_run_state s = {0};
    int stopped_at = -1;
    for (int i = 0; i < 7; i++) {
        CHECK(tfm_run_state_validation(&s, scores[i], 100 * (i + 1)) == improved[i]);
        CHECK(s.bad_validations == bad[i]);
        if (stopped_at < 0 && s.bad_validations >= 2) stopped_at = i;
    }
    CHECK(stopped_at == 3);
    CHECK(s.has_best && s.best_score == 13 && s.best_step == 500);
    /* A NaN score is never an improvement. */
    CHECK(!tfm_run_state_validation(&s, NAN, 800) && s.best_score == 13);
}

/* Whether the options given, with option id's text set to text, make a
 * usage error whose message holds want (id is unset again after). */
static bool usage_error(const char **given, tfm_run_option id, const char *text,
                        const char *want)
{
    tfm_run *r = NULL;
    tfm_error err;
    given[id] = text;
    tfm_status st = tfm_run_create(given, NULL, NULL, &r, &err);
    given[id] = NULL;
    tfm_run_free(r);
    return st == TFM_ERR_ARG && strstr(err.msg, want);
}

static void test_run_defaults_and_usage(void)
{
    /* The defaults' texts come from the library's default parameters. */
    char text[32];
    CHECK(tfm_run_option_default(TFM_OPT_BATCH_TOKENS, text, sizeof text) &&
          strtoll(text, NULL, 10) == tfm_batcher_default_params().batch_tokens);
    /* The schedule's depend on the budget (resolved when the run is made). */
    CHECK(tfm_run_option_default(TFM_OPT_WARMUP, text, sizeof text) && !strcmp(text, "auto"));
    CHECK(tfm_run_option_default(TFM_OPT_SCHEDULE, text, sizeof text) && !strcmp(text, "auto"));
    CHECK(tfm_run_option_default(TFM_OPT_RELATIVE_POS, text, sizeof text) &&
          !strcmp(text, TFM_AUTO_RELATIVE_POSITIONS));
    CHECK(tfm_run_option_default(TFM_OPT_SORT_WINDOW, text, sizeof text) &&
          atoi(text) == tfm_batcher_default_params().window);
    CHECK(tfm_run_option_default(TFM_OPT_MAX_LENGTH, text, sizeof text) &&
          atoi(text) == tfm_corpus_default_params().max_length);
    CHECK(tfm_run_option_default(TFM_OPT_PRESET, text, sizeof text) && !strcmp(text, "base"));
    CHECK(!tfm_run_option_default(TFM_OPT_THREADS, text, sizeof text) && text[0] == 0);
    double sec = 0;
    tfm_error err;
    CHECK(tfm_parse_duration("--max-time", "1h30m", &sec, &err) == TFM_OK && sec == 5400);
    CHECK(tfm_parse_duration("--max-time", "1.5d", &sec, &err) == TFM_OK && sec == 129600);
    CHECK(tfm_parse_duration("--max-time", "1x", &sec, &err) == TFM_ERR_ARG &&
          strstr(err.msg, "--max-time: '1x' is not a duration"));
    CHECK(tfm_parse_duration("--max-time", "", &sec, &err) == TFM_ERR_ARG);

    /* Usage errors are TFM_ERR_ARG and name the option. */
    const char *given[TFM_RUN_OPTION_COUNT] = {0};
    tfm_run *r = NULL;
    CHECK(tfm_run_create(given, NULL, NULL, &r, &err) == TFM_ERR_ARG && strstr(err.msg, "-o MODEL"));
    given[TFM_OPT_OUTPUT] = tmp_path("usage.st");
    given[TFM_OPT_VOCAB_SIZE] = "14";
    given[TFM_OPT_PRESET] = "tiny";
    CHECK(tfm_run_create(given, NULL, NULL, &r, &err) == TFM_ERR_ARG &&
          strstr(err.msg, "--src and --tgt are required"));
    given[TFM_OPT_SRC] = given[TFM_OPT_TGT] = "x";
    CHECK(usage_error(given, TFM_OPT_BATCH_TOKENS, "0", "--batch-tokens: 0 is out of range"));
    /* The model's ranges are tfm_config_validate's. */
    CHECK(usage_error(given, TFM_OPT_D_MODEL, "99999999", "the model: d_model is 99999999"));
    CHECK(usage_error(given, TFM_OPT_PATIENCE, "2", "--patience needs --valid-src"));
    /* The budgeted schedules need a budget; without one "auto" is the paper's. */
    CHECK(usage_error(given, TFM_OPT_SCHEDULE, "wsd",
                      "--schedule wsd ends at the budget, and there is none"));
    CHECK(usage_error(given, TFM_OPT_SCHEDULE, "cosine", "--schedule: 'cosine' is not one of"));
    CHECK(usage_error(given, TFM_OPT_WARMUP, "5%", "--warmup 5% is a share of the run's updates"));
    given[TFM_OPT_MAX_STEPS] = "100";
    static const char *const bad_warmups[] = {"100%", "0%", "x%", "%", "-3%", "1.5"};
    for (size_t i = 0; i < sizeof bad_warmups / sizeof bad_warmups[0]; i++)
        CHECK_MSG(usage_error(given, TFM_OPT_WARMUP, bad_warmups[i], "--warmup"), "%s",
                  bad_warmups[i]);
    given[TFM_OPT_WARMUP] = "12.5%";
    CHECK_MSG(tfm_run_create(given, NULL, NULL, &r, &err) == TFM_OK, "%s", err.msg);
    if (r) CHECK(tfm_run_params_of(r)->train.warmup_share == 0.125);
    tfm_run_free(r);
    given[TFM_OPT_MAX_STEPS] = NULL;
    given[TFM_OPT_WARMUP] = NULL;
    CHECK_MSG(tfm_run_create(given, NULL, NULL, &r, &err) == TFM_OK, "%s", err.msg);
    if (r) {
        const tfm_train_params *t = &tfm_run_params_of(r)->train;
        CHECK(t->schedule == TFM_SCHEDULE_NOAM && t->warmup == atoi(TFM_PAPER_WARMUP) &&
              t->warmup_share == 0 && t->lr_factor == atof(TFM_PAPER_LR_FACTOR));
        /* relative positions by default, */
        CHECK(tfm_run_params_of(r)->model.relative_positions == atoi(TFM_AUTO_RELATIVE_POSITIONS));
    }
    tfm_run_free(r);
    /* unless absolute ones are asked for */
    given[TFM_OPT_LEARNED_POS] = "yes";
    CHECK_MSG(tfm_run_create(given, NULL, NULL, &r, &err) == TFM_OK, "%s", err.msg);
    if (r)
        CHECK(tfm_run_params_of(r)->model.relative_positions == 0 &&
              tfm_run_params_of(r)->model.positions == TFM_POS_LEARNED);
    tfm_run_free(r);
    given[TFM_OPT_LEARNED_POS] = NULL;
    given[TFM_OPT_RESUME] = "";
    CHECK(tfm_run_create(given, NULL, NULL, &r, &err) == TFM_ERR_IO &&
          strstr(err.msg, "no checkpoint"));
    CHECK(r == NULL);
}

/* What a run reported, for the tests. */
typedef struct events {
    int count[TFM_RUN_END + 1];
    char warning[600];
    int64_t last_step;
    tfm_run_end end;
} events;

static void record_event(void *ctx, const tfm_run_event *ev)
{
    events *e = ctx;
    e->count[ev->kind]++;
    if (ev->kind == TFM_RUN_WARNING) snprintf(e->warning, sizeof e->warning, "%s", ev->text);
    if (ev->kind == TFM_RUN_STEP) e->last_step = ev->step;
    if (ev->kind == TFM_RUN_END) e->end = ev->end;
}

/* The options of a run of a tiny model on reversed sequences (the files
 * are written by the first caller). */
static void tiny_run_options(const char **given)
{
    if (access(tmp_path("run.src"), F_OK) != 0) {
        write_file(tmp_path("run.src"), "4 5 6\n7 8\n9 10 11 12\n5 5\n6 7 8\n4 9\n");
        write_file(tmp_path("run.tgt"), "6 5 4\n8 7\n12 11 10 9\n5 5\n8 7 6\n9 4\n");
    }
    given[TFM_OPT_PRESET] = "tiny";
    given[TFM_OPT_D_MODEL] = "16";
    given[TFM_OPT_D_FF] = "32";
    given[TFM_OPT_HEADS] = "2";
    given[TFM_OPT_LAYERS] = "1";
    given[TFM_OPT_VOCAB_SIZE] = "14";
    given[TFM_OPT_SRC] = tmp_path("run.src");
    given[TFM_OPT_TGT] = tmp_path("run.tgt");
    given[TFM_OPT_THREADS] = "1";
}

static void test_run_options_persist_and_resume(void)
{
    const char *given[TFM_RUN_OPTION_COUNT] = {0};
    tiny_run_options(given);
    given[TFM_OPT_ACCUM] = "2";
    given[TFM_OPT_BATCH_TOKENS] = "20";
    given[TFM_OPT_MAX_STEPS] = "4";
    given[TFM_OPT_SAVE_EVERY] = "2";
    given[TFM_OPT_OUTPUT] = tmp_path("run.st");
    events e = {0};
    tfm_run *r;
    tfm_error err;
    CHECK_MSG(tfm_run_create(given, record_event, &e, &r, &err) == TFM_OK, "%s", err.msg);
    if (!r) return;
    CHECK(tfm_run_params_of(r)->train.accum == 2 && tfm_run_params_of(r)->max_steps == 4);
    /* "auto" with a budget: the budgeted schedule's texts, which the
     * checkpoints keep */
    CHECK(!strcmp(tfm_run_option_value(r, TFM_OPT_WARMUP), TFM_AUTO_WARMUP));
    CHECK(!strcmp(tfm_run_option_value(r, TFM_OPT_SCHEDULE), "linear"));
    CHECK(tfm_run_params_of(r)->train.schedule == TFM_AUTO_SCHEDULE &&
          tfm_run_params_of(r)->train.warmup_share == atof(TFM_AUTO_WARMUP) / 100 &&
          tfm_run_params_of(r)->train.warmup_least == atoi(strchr(TFM_AUTO_WARMUP, ',') + 1) &&
          tfm_run_params_of(r)->train.lr_factor == atof(TFM_AUTO_LR_FACTOR));
    tfm_run_end end;
    CHECK_MSG(tfm_run_train(r, &end, &err) == TFM_OK, "%s", err.msg);
    CHECK(end == TFM_RUN_LIMIT && e.end == TFM_RUN_LIMIT);
    CHECK(e.count[TFM_RUN_DATA] == 1 && e.count[TFM_RUN_START] == 1 && e.count[TFM_RUN_END] == 1);
    CHECK(e.count[TFM_RUN_STEP] == 4 && e.last_step == 4);
    CHECK(e.count[TFM_RUN_CHECKPOINT] == 2); /* at 2 and 4; the end's is the one at 4 */
    tfm_run_free(r);

    /* Every option in effect is in the checkpoint and the model, defaults too. */
    tfm_safetensors *f;
    CHECK(tfm_safetensors_open(tmp_path("run.st.ckpt-4"), &f, &err) == TFM_OK);
    if (f) {
        const char *v = tfm_safetensors_metadata(f, "train.opt.accum");
        CHECK(v && !strcmp(v, "2"));
        v = tfm_safetensors_metadata(f, "train.opt.batch-tokens");
        CHECK(v && !strcmp(v, "20"));
        v = tfm_safetensors_metadata(f, "train.opt.sort-window");
        CHECK(v && !strcmp(v, "100"));
        v = tfm_safetensors_metadata(f, "train.opt.schedule");
        CHECK(v && !strcmp(v, "linear"));
        CHECK(tfm_safetensors_metadata(f, "train.opt.output") == NULL); /* ONCE */
        uint64_t whole;
        double real;
        CHECK(tfm_metadata_number(f, "train.elapsed", TFM_NUMBER_REAL, 0, 1e12, 0, NULL, &real,
                                  &err) == TFM_OK && real >= 0);
        CHECK(tfm_metadata_number(f, "train.bad_validations", TFM_NUMBER_WHOLE, 0, 0, 10, &whole,
                                  NULL, &err) == TFM_OK && whole == 0);
        CHECK(tfm_metadata_number(f, "no.such.key", TFM_NUMBER_WHOLE, 0, 0, 10, &whole, NULL,
                                  &err) == TFM_EOF);
        CHECK(tfm_metadata_number(f, "train.opt.src", TFM_NUMBER_WHOLE, 0, 0, 10, &whole, NULL,
                                  &err) == TFM_ERR_FORMAT &&
              strstr(err.msg, "metadata \"train.opt.src\" is '"));
        tfm_safetensors_free(f);
    }

    /* Resuming takes the checkpoint's options: none given again but the limit. */
    const char *again[TFM_RUN_OPTION_COUNT] = {0};
    again[TFM_OPT_RESUME] = "";
    again[TFM_OPT_OUTPUT] = tmp_path("run.st");
    again[TFM_OPT_MAX_STEPS] = "6";
    memset(&e, 0, sizeof e);
    CHECK_MSG(tfm_run_create(again, record_event, &e, &r, &err) == TFM_OK, "%s", err.msg);
    if (r) {
        const tfm_run_params *p = tfm_run_params_of(r);
        CHECK(p->resume && p->train.accum == 2 && p->train.batches.batch_tokens == 20);
        CHECK(p->model.d_model == 16 && p->max_steps == 6 && e.count[TFM_RUN_WARNING] == 0);
        CHECK_MSG(tfm_run_train(r, &end, &err) == TFM_OK, "%s", err.msg);
        CHECK(e.count[TFM_RUN_STEP] == 2 && e.last_step == 6); /* from 4, not from 0 */
        tfm_run_free(r);
    }
    /* A model option cannot change; a training option can, with a warning. */
    again[TFM_OPT_D_MODEL] = "32";
    CHECK(tfm_run_create(again, record_event, &e, &r, &err) == TFM_ERR_ARG &&
          strstr(err.msg, "--d-model cannot change when resuming"));
    again[TFM_OPT_D_MODEL] = "16"; /* the same text is no change */
    again[TFM_OPT_BATCH_TOKENS] = "30";
    memset(&e, 0, sizeof e);
    CHECK_MSG(tfm_run_create(again, record_event, &e, &r, &err) == TFM_OK, "%s", err.msg);
    CHECK(e.count[TFM_RUN_WARNING] == 1 &&
          strstr(e.warning, "--batch-tokens=30 differs from the checkpoint's 20"));
    if (r) CHECK(tfm_run_params_of(r)->train.batches.batch_tokens == 30);
    tfm_run_free(r);
}

static void test_run_stop_flag(void)
{
    /* A stop requested before the first update: the run saves and ends at once. */
    const char *given[TFM_RUN_OPTION_COUNT] = {0};
    tiny_run_options(given);
    given[TFM_OPT_OUTPUT] = tmp_path("stop.st");
    events e = {0};
    tfm_run *r;
    tfm_error err;
    CHECK_MSG(tfm_run_create(given, record_event, &e, &r, &err) == TFM_OK, "%s", err.msg);
    if (!r) return;
    volatile sig_atomic_t flag = SIGTERM;
    tfm_run_set_stop_flag(r, &flag);
    tfm_run_end end;
    CHECK_MSG(tfm_run_train(r, &end, &err) == TFM_OK, "%s", err.msg);
    CHECK(end == TFM_RUN_STOPPED && e.count[TFM_RUN_STEP] == 0 && e.count[TFM_RUN_END] == 1);
    /* No update, so nothing new to checkpoint; the model is written. */
    CHECK(e.count[TFM_RUN_CHECKPOINT] == 0 && access(tmp_path("stop.st"), F_OK) == 0);
    tfm_run_free(r);
}

/* What a run's events say to a person (lib/train/messages.c), gathered
 * as train prints them. */
typedef struct messages {
    const tfm_run *run;
    tfm_run_progress progress;
    tfm_buf text;              /* the event texts, in order */
    tfm_buf progress_lines;    /* one line per update, '\n' after each */
} messages;

static void record_messages(void *ctx, const tfm_run_event *ev)
{
    messages *m = ctx;
    if (ev->kind == TFM_RUN_START) m->progress = (tfm_run_progress){.last = ev->time};
    tfm_run_progress_add(&m->progress, ev);
    if (ev->kind == TFM_RUN_STEP) {
        CHECK(m->progress.tokens == ev->update->tgt_tokens && m->progress.tokens > 0);
        CHECK(tfm_run_progress_line(&m->progress, m->run, ev, &m->progress_lines) == TFM_OK);
        CHECK(m->progress.tokens == 0 && m->progress.loss == 0 && m->progress.last == ev->time);
        tfm_buf_putc(&m->progress_lines, '\n');
    }
    CHECK(tfm_run_event_text(m->run, ev, &m->text) == TFM_OK);
}

static void test_run_messages(void)
{
    char hms[32];
    tfm_format_hms(3723.4, hms, sizeof hms);
    CHECK(!strcmp(hms, "1:02:03"));
    tfm_format_hms(360000, hms, sizeof hms);
    CHECK(!strcmp(hms, "100:00:00"));
    tfm_format_hms(-1, hms, sizeof hms);
    CHECK(!strcmp(hms, "-"));
    tfm_format_hms(NAN, hms, sizeof hms);
    CHECK(!strcmp(hms, "-"));

    const char *given[TFM_RUN_OPTION_COUNT] = {0};
    tiny_run_options(given);
    given[TFM_OPT_MAX_STEPS] = "2";
    given[TFM_OPT_VALID_SRC] = tmp_path("run.src");
    given[TFM_OPT_VALID_TGT] = tmp_path("run.tgt");
    given[TFM_OPT_VALID_EVERY] = "2";
    given[TFM_OPT_PATIENCE] = "3";
    given[TFM_OPT_OUTPUT] = tmp_path("messages.st");
    messages m = {0};
    tfm_buf_init(&m.text);
    tfm_buf_init(&m.progress_lines);
    tfm_run *r;
    tfm_error err;
    CHECK_MSG(tfm_run_create(given, record_messages, &m, &r, &err) == TFM_OK, "%s", err.msg);
    if (!r) return;
    m.run = r;
    tfm_run_end end;
    CHECK_MSG(tfm_run_train(r, &end, &err) == TFM_OK, "%s", err.msg);
    tfm_run_free(r);
    const char *t = m.text.data;
    /* 22 source tokens: each source ends with </s>. */
    CHECK_MSG(strstr(t, "training data: 6 pairs of 6 lines (ids, ids), 22 source and 16 target "
                        "tokens; skipped 0 with an empty side, 0 longer than 256 tokens\n") &&
                  strstr(t, "validation data: 6 pairs"),
              "%s", t);
    CHECK_MSG(strstr(t, "\nmodel: d_model 16, d_ff 32, 2 heads, 1+1 layers, post-norm, "
                        "relative positions (clipped at 16), vocabulary 14, "),
              "%s", t);
    CHECK_MSG(strstr(t, "\noptions: --preset=tiny --d-model=16 ") && strstr(t, " --max-steps=2 "),
              "%s", t);
    CHECK_MSG(strstr(t, "\nvalid step 2 loss ") && strstr(t, " best so far\n"), "%s", t);
    CHECK_MSG(strstr(t, "checkpoint ") && strstr(t, "messages.st.ckpt-2\n"), "%s", t);
    CHECK_MSG(strstr(t, "\ndone after 2 updates, ") && strstr(t, "model written to ") &&
                  strstr(t, "messages.st\n"),
              "%s", t);
    CHECK_MSG(!strstr(t, "processes") && !strstr(t, "resuming"), "%s", t); /* alone, fresh */
    const char *p = m.progress_lines.data;
    CHECK_MSG(p && !strncmp(p, "step 1 epoch ", 13) && strstr(p, "\nstep 2 epoch ") &&
                  strstr(p, " tok/s elapsed 0:00:0") && strstr(p, " ETA "),
              "%s", p ? p : "(none)");

    /* The events of a run across processes, and of one that ends early. */
    tfm_buf_clear(&m.text);
    tfm_run_event stop = {.kind = TFM_RUN_EARLY_STOP, .bad_validations = 3, .best_step = 40,
                          .best_path = "m.st.best"};
    tfm_run_event last = {.kind = TFM_RUN_END, .end = TFM_RUN_PATIENCE, .averaged = 2,
                          .text = "m.st", .step = 70, .elapsed = 61, .run_seconds = 2,
                          .run_tokens = 3000, .run_updates = 10, .ranks = 2,
                          .run_wait_seconds = 0.1, .run_reduce_seconds = 0.05};
    CHECK(tfm_run_event_text(NULL, &stop, &m.text) == TFM_OK);
    CHECK(tfm_run_event_text(NULL, &last, &m.text) == TFM_OK);
    CHECK_MSG(!strcmp(m.text.data,
                      "early stop: 3 validations without improvement; the best (step 40) is "
                      "m.st.best\n"
                      "m.st is the average of the last 2 checkpoints\n"
                      "stopped early after 70 updates, 0.00 epochs, 0:01:01 (this run: 3000 target "
                      "tokens, 1500 tokens/s); model written to m.st\n"
                      "2 processes: per update, 10.0 ms waiting for the others and 5.0 ms summing "
                      "the gradients\n"),
              "%s", m.text.data);
    tfm_buf_free(&m.text);
    tfm_buf_free(&m.progress_lines);
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "%s/tfm-test-train.XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmpdir)) return 1;
    RUN(test_adam_first_step);
    RUN(test_adam_against_reference);
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
    RUN(test_trainer_learns);
    RUN(test_trainer_budgeted_schedule);
    RUN(test_trainer_resume_exact);
    RUN(test_trainer_threads);
    RUN(test_trainer_nan);
    RUN(test_trainer_accumulation_order);
    RUN(test_dist_alone);
    RUN(test_run_state_early_stopping);
    RUN(test_run_defaults_and_usage);
    RUN(test_run_options_persist_and_resume);
    RUN(test_run_stop_flag);
    RUN(test_run_messages);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) printf("# could not remove %s\n", tmpdir);
    CHECK_DONE();
}
