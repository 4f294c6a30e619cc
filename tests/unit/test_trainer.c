/* test_trainer.c - unit tests of lib/train's trainer and training run: the
 * trainer itself on a tiny model (the loss falls, the schedule follows the
 * total it is told, a run stopped and resumed equals one never stopped,
 * runs on 1, 2 and 3 threads are the same bit for bit, poisoned updates are
 * skipped); and the training run (tfm_run): the order in which accumulated
 * batches are summed, a group of one process, early stopping on made-up
 * scores, defaults and usage errors, options kept in checkpoints and taken
 * back on resume, a stop request, and its messages.  Adam, the schedule,
 * batching, data and checkpoints: test_train_parts.c. */
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "testtrain.h"
#include "tfm.h"

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
    test_tmpdir_init("test-trainer");
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
    test_tmpdir_cleanup();
    CHECK_DONE();
}
