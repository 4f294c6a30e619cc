/* trainer.c - the training loop's one update, validation, and the trainer's
 * checkpoints: everything of training but the forward and backward pass
 * (tfm_model_forward_backward, lib/pass) and the program around it
 * (cmd/train.c).
 *
 * An update: accum batches forward and backward, their gradients added in
 * order into one buffer (the gradient of the summed loss); with several
 * processes (tfm_dist), each rank's buffer summed across the ranks in rank
 * order.  The sum is divided by the number of target tokens (fairseq's
 * normalisation, so the rate does not depend on the batch size), checked
 * for NaN and infinity, clipped to a global norm if asked, and applied by
 * Adam at the scheduled rate; then the moving average.
 *
 * The batches of an update are the next accum x ranks of the batch plan;
 * rank r takes batches r accum .. (r + 1) accum - 1 of them.  Every rank
 * walks the whole plan and draws a dropout seed for every batch, so where
 * the data and the generators stand after an update depends on the number
 * of batches per update alone, not on which rank made which.
 *
 * The passes over all parameters (the norm, Adam, the average) run on
 * p.n_threads threads in fixed chunks of parameters; the norm adds the
 * chunks' sums in chunk order, so an update is the same for any count. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/chunks.h"
#include "tfm/metrics.h"
#include "tfm/search.h"
#include "tfm/train.h"

/* Sentences decoded together when validating. */
#define DECODE_BATCH 64

/* Parameters per chunk of the passes over all of them. */
#define PARAM_CHUNK ((size_t)1 << 16)

struct tfm_trainer {
    tfm_train_params p;
    const tfm_corpus *corpus;
    tfm_train_state s;           /* model, moments, average, generators */
    size_t n_params;
    float *grads;                /* [n_params] the update's gradient */
    float *batch_grads;          /* [n_params] one batch's, with accum > 1; else NULL */
    double *parts;               /* [ranks x PART_FIELDS] every rank's part of an update */
    double *chunk_sums;          /* [chunks of n_params] the squared norm per chunk */
    tfm_batcher *batcher;
    tfm_pass_workspace *ws;
    int64_t poisoned;            /* updates poisoned so far (debug_nan_*) */
    int64_t total;               /* updates the run will make (0: unknown) */
};

tfm_train_params tfm_train_default_params(void)
{
    return (tfm_train_params){
        .batches = tfm_batcher_default_params(),
        .accum = 1,
        .lr_factor = 1.0,
        .warmup = 4000,
        .clip_norm = 0.0,
        .adam = tfm_adam_default_params(),
        .ema_decay = 0.0,
        .seed = 1,
        .max_bad_steps = 5,
        .n_threads = 1,
    };
}

tfm_status tfm_train_params_validate(const tfm_train_params *p, tfm_error *err)
{
    if (p->batches.batch_tokens < 1)
        return tfm_error_set(err, TFM_ERR_RANGE, "batch_tokens is %lld, expected 1 or more",
                             (long long)p->batches.batch_tokens);
    if (p->batches.window < 1)
        return tfm_error_set(err, TFM_ERR_RANGE, "window is %d, expected 1 or more",
                             p->batches.window);
    if (p->accum < 1)
        return tfm_error_set(err, TFM_ERR_RANGE, "accum is %d, expected 1 or more", p->accum);
    if (!(p->lr_factor > 0) || !isfinite(p->lr_factor))
        return tfm_error_set(err, TFM_ERR_RANGE, "lr_factor is %g, expected a positive number",
                             p->lr_factor);
    if (p->warmup < 1)
        return tfm_error_set(err, TFM_ERR_RANGE, "warmup is %d, expected 1 or more", p->warmup);
    if (p->warmup_least < 0)
        return tfm_error_set(err, TFM_ERR_RANGE, "warmup_least is %d, expected 0 or more",
                             p->warmup_least);
    if (!(p->warmup_share >= 0 && p->warmup_share < 1))
        return tfm_error_set(err, TFM_ERR_RANGE, "warmup_share is %g, expected [0, 1)",
                             p->warmup_share);
    if (p->schedule != TFM_SCHEDULE_NOAM && p->schedule != TFM_SCHEDULE_LINEAR &&
        p->schedule != TFM_SCHEDULE_WSD)
        return tfm_error_set(err, TFM_ERR_RANGE, "schedule is %d, not a tfm_schedule",
                             (int)p->schedule);
    if (!(p->clip_norm >= 0) || !isfinite(p->clip_norm))
        return tfm_error_set(err, TFM_ERR_RANGE, "clip_norm is %g, expected 0 (off) or more",
                             p->clip_norm);
    if (!(p->adam.beta1 >= 0 && p->adam.beta1 < 1) || !(p->adam.beta2 >= 0 && p->adam.beta2 < 1))
        return tfm_error_set(err, TFM_ERR_RANGE, "Adam's betas are %g and %g, expected [0, 1)",
                             (double)p->adam.beta1, (double)p->adam.beta2);
    if (!(p->adam.eps > 0))
        return tfm_error_set(err, TFM_ERR_RANGE, "Adam's eps is %g, expected a positive number",
                             (double)p->adam.eps);
    if (!(p->ema_decay >= 0 && p->ema_decay < 1))
        return tfm_error_set(err, TFM_ERR_RANGE, "ema_decay is %g, expected [0, 1)",
                             p->ema_decay);
    if (p->max_bad_steps < 1)
        return tfm_error_set(err, TFM_ERR_RANGE, "max_bad_steps is %d, expected 1 or more",
                             p->max_bad_steps);
    if (p->n_threads < 1)
        return tfm_error_set(err, TFM_ERR_RANGE, "n_threads is %d, expected 1 or more",
                             p->n_threads);
    return TFM_OK;
}

void tfm_trainer_free(tfm_trainer *t)
{
    if (!t) return;
    tfm_pass_workspace_free(t->ws);
    tfm_batcher_free(t->batcher);
    free(t->grads);
    free(t->batch_grads);
    free(t->parts);
    free(t->chunk_sums);
    tfm_train_state_free(&t->s);
    free(t);
}

/* Figures of a rank's part of an update, exchanged as doubles (the counts
 * are exact in a double up to 2^53). */
enum { PART_LOSS, PART_NLL, PART_TGT_TOKENS, PART_SRC_TOKENS, PART_SENTENCES, PART_FAILED,
       PART_FIELDS };

/* A buffer of the parameters' size, on cache lines as the model's are. */
static float *alloc_params(size_t n)
{
    size_t bytes = (n * sizeof(float) + 63) / 64 * 64;
    float *p = aligned_alloc(64, bytes ? bytes : 64);
    if (p) memset(p, 0, n * sizeof(float));
    return p;
}

/* Makes what every trainer has besides its state: the gradient buffers, the
 * batcher (at the state's position) and the workspace. */
static tfm_status build(tfm_trainer *t, tfm_error *err)
{
    t->n_params = tfm_params_count(&t->s.model->config);
    t->grads = alloc_params(t->n_params);
    if (t->p.accum > 1) t->batch_grads = alloc_params(t->n_params);
    if (!t->grads || (t->p.accum > 1 && !t->batch_grads))
        return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory for the gradients");
    t->parts = malloc((size_t)tfm_dist_size(t->p.dist) * PART_FIELDS * sizeof *t->parts);
    if (!t->parts) return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    /* + 1: never malloc(0) */
    t->chunk_sums = malloc((tfm_chunk_count(t->n_params, PARAM_CHUNK) + 1) * sizeof(double));
    if (!t->chunk_sums) return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    tfm_status st = tfm_batcher_create(t->corpus, &t->p.batches, &t->batcher, err);
    if (st == TFM_OK) st = tfm_batcher_set_state(t->batcher, &t->s.batcher, err);
    if (st == TFM_OK) st = tfm_pass_workspace_create(t->s.model, &t->ws, err);
    if (st == TFM_OK) tfm_pass_workspace_set_threads(t->ws, t->p.n_threads);
    return st;
}

tfm_status tfm_trainer_create(tfm_model *model, const tfm_corpus *corpus,
                              const tfm_train_params *p, tfm_trainer **out, tfm_error *err)
{
    *out = NULL;
    tfm_status st = tfm_train_params_validate(p, err);
    if (st == TFM_OK && model->quantized)
        st = tfm_error_set(err, TFM_ERR_ARG, "a %s model cannot be trained: train the float32 "
                           "one and quantize it after",
                           tfm_compute_type_name(model->compute));
    tfm_trainer *t = st == TFM_OK ? calloc(1, sizeof *t) : NULL;
    if (st == TFM_OK && !t) st = tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    if (st != TFM_OK) {
        tfm_model_free(model);
        return st;
    }
    t->p = *p;
    t->corpus = corpus;
    st = tfm_train_state_init(&t->s, model, p->ema_decay > 0, err);
    if (st == TFM_OK) {
        tfm_rng_seed(&t->s.batcher.rng, p->batches.seed);
        /* Dropout draws from a stream of its own, apart from the shuffles even
         * when both come from one seed. */
        tfm_rng_seed(&t->s.dropout_rng, p->seed ^ 0x6a09e667f3bcc909ULL);
        t->s.corpus_pairs = tfm_corpus_size(corpus);
        t->s.corpus_hash = tfm_corpus_hash(corpus);
        st = build(t, err);
    } else {
        t->s.model = model; /* freed with the trainer */
    }
    if (st != TFM_OK) {
        tfm_trainer_free(t);
        return st;
    }
    *out = t;
    return TFM_OK;
}

tfm_status tfm_trainer_resume(const char *path, const tfm_corpus *corpus,
                              const tfm_train_params *p, tfm_trainer **out, tfm_error *err)
{
    *out = NULL;
    tfm_status st = tfm_train_params_validate(p, err);
    if (st != TFM_OK) return st;
    tfm_trainer *t = calloc(1, sizeof *t);
    if (!t) return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    t->p = *p;
    t->corpus = corpus;
    st = tfm_checkpoint_load(path, &t->s, err);
    if (st == TFM_OK &&
        (t->s.corpus_pairs != tfm_corpus_size(corpus) || t->s.corpus_hash != tfm_corpus_hash(corpus)))
        st = tfm_error_set(err, TFM_ERR_ARG,
                           "checkpoint '%s' was trained on %llu sentence pairs, but the training "
                           "data given %s: resuming needs the same data",
                           path, (unsigned long long)t->s.corpus_pairs,
                           t->s.corpus_pairs != tfm_corpus_size(corpus) ? "hold another number"
                                                                        : "hold other pairs");
    /* A moving average asked for now but not kept before starts from the
     * weights; one no longer asked for is dropped. */
    size_t n = st == TFM_OK ? tfm_params_count(&t->s.model->config) : 0;
    if (st == TFM_OK && p->ema_decay > 0 && !t->s.ema) {
        t->s.ema = malloc(n * sizeof(float));
        if (!t->s.ema) st = tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
        else memcpy(t->s.ema, t->s.model->data, n * sizeof(float));
    }
    if (st == TFM_OK && p->ema_decay == 0 && t->s.ema) {
        free(t->s.ema);
        t->s.ema = NULL;
    }
    if (st == TFM_OK) st = build(t, err);
    if (st != TFM_OK) {
        tfm_trainer_free(t);
        return st;
    }
    *out = t;
    return TFM_OK;
}

int64_t tfm_trainer_warmup(const tfm_trainer *t)
{
    return tfm_warmup_steps(t->p.warmup, t->p.warmup_share, t->p.warmup_least, t->total);
}

void tfm_trainer_set_total(tfm_trainer *t, int64_t total)
{
    t->total = total > 0 ? total : 0;
}

int64_t tfm_trainer_steps(const tfm_trainer *t)
{
    return t->s.model->step;
}

double tfm_trainer_epoch(const tfm_trainer *t)
{
    tfm_batcher_state s;
    tfm_batcher_get_state(t->batcher, &s);
    int64_t n = tfm_batcher_epoch_batches(t->batcher);
    return (double)s.epoch + (n > 0 ? (double)s.position / (double)n : 0.0);
}

const tfm_train_params *tfm_trainer_params(const tfm_trainer *t)
{
    return &t->p;
}

const tfm_model *tfm_trainer_model(const tfm_trainer *t)
{
    return t->s.model;
}

/* ---- the passes over all parameters ------------------------------------------------- */

/* One update's work on the parameters [lo, hi) of chunk c. */
typedef struct param_job {
    tfm_trainer *t;
    int64_t step;   /* Adam's t */
    double lr;
    float scale;    /* of the gradient */
} param_job;

static void sum_squares_chunk(void *ctx, size_t c, size_t lo, size_t hi)
{
    const param_job *j = ctx;
    j->t->chunk_sums[c] = tfm_sum_squares(j->t->grads + lo, hi - lo);
}

/* grads += batch_grads, over the chunk's parameters. */
static void add_batch_chunk(void *ctx, size_t c, size_t lo, size_t hi)
{
    const param_job *j = ctx;
    float *sum = j->t->grads;
    const float *g = j->t->batch_grads;
    for (size_t i = lo; i < hi; i++) sum[i] += g[i];
}

/* Adam, then the moving average of the weights just updated. */
static void update_chunk(void *ctx, size_t c, size_t lo, size_t hi)
{
    const param_job *j = ctx;
    tfm_trainer *t = j->t;
    tfm_adam_update(&t->p.adam, j->step, j->lr, j->scale, hi - lo, t->s.model->data + lo,
                    t->grads + lo, t->s.exp_avg + lo, t->s.exp_avg_sq + lo);
    if (t->s.ema)
        tfm_ema_update((float)t->p.ema_decay, hi - lo, t->s.ema + lo, t->s.model->data + lo);
}

static void for_params(tfm_trainer *t, void (*fn)(void *ctx, size_t c, size_t lo, size_t hi),
                       param_job *job)
{
    tfm_parallel_chunks(t->p.n_threads, t->n_params, PARAM_CHUNK, fn, job);
}

/* The sum of squares of the gradient: the chunks' sums added in order. */
static double grad_sum_squares(tfm_trainer *t)
{
    param_job job = {.t = t};
    for_params(t, sum_squares_chunk, &job);
    double sum = 0.0;
    for (size_t c = 0; c < tfm_chunk_count(t->n_params, PARAM_CHUNK); c++) sum += t->chunk_sums[c];
    return sum;
}

/* The gradient of this rank's batches of the update into t->grads, and
 * their figures into part[].  With accum 1 the batch's backward pass adds
 * into the zeroed t->grads itself; with more, each batch's gradient is made
 * in batch_grads and added to the sum in order (the first copied), so that
 * the sum does not depend on how the batches were shared out: ((g0 + g1) +
 * g2) whether one process made all three or three processes one each. */
static tfm_status backward_own_batches(tfm_trainer *t, double part[PART_FIELDS], int64_t *epoch,
                                       tfm_error *err)
{
    const int accum = t->p.accum;
    const int first = tfm_dist_rank(t->p.dist) * accum;
    const int batches = accum * tfm_dist_size(t->p.dist);
    const size_t bytes = t->n_params * sizeof(float);
    for (int k = 0; k < batches; k++) {
        uint64_t seed = tfm_rng_u64(&t->s.dropout_rng);
        tfm_batch b;
        tfm_status st = tfm_batcher_next(t->batcher, &b, err);
        if (st != TFM_OK) return st;
        *epoch = b.epoch;
        if (k < first || k >= first + accum) continue; /* another rank's */
        tfm_rng dropout;
        tfm_rng_seed(&dropout, seed);
        tfm_loss_sums sums;
        /* one memset: it streams at the memory's speed, a second thread adds nothing */
        memset(accum == 1 ? t->grads : t->batch_grads, 0, bytes);
        st = tfm_model_forward_backward(t->ws, &b.pairs, &dropout, 1.0f,
                                        accum == 1 ? t->grads : t->batch_grads, &sums, err);
        if (st != TFM_OK) return st;
        param_job job = {.t = t};
        if (accum > 1 && k == first) memcpy(t->grads, t->batch_grads, bytes);
        else if (accum > 1) for_params(t, add_batch_chunk, &job);
        part[PART_LOSS] += sums.loss;
        part[PART_NLL] += sums.nll;
        part[PART_TGT_TOKENS] += (double)sums.n_tokens;
        part[PART_SRC_TOKENS] += (double)b.src_tokens;
        part[PART_SENTENCES] += b.pairs.B;
    }
    return TFM_OK;
}

/* Every rank's part of the update, added in rank order into r: the whole
 * update's figures on every rank.  A rank that failed (own) says so in its
 * part, so that none waits for it; then every rank fails. */
static tfm_status add_up_parts(tfm_trainer *t, double part[PART_FIELDS], tfm_status own,
                               tfm_step_result *r, tfm_error *err)
{
    tfm_error exchange_err;
    part[PART_FAILED] = own != TFM_OK;
    double t0 = tfm_clock_seconds();
    tfm_status st = tfm_dist_allgather(t->p.dist, part, PART_FIELDS * sizeof(double), t->parts,
                                       own == TFM_OK ? err : &exchange_err);
    r->wait_seconds = tfm_clock_seconds() - t0;
    if (own != TFM_OK || st != TFM_OK) return own != TFM_OK ? own : st;
    double tgt = 0, src = 0, sentences = 0;
    for (int k = 0; k < tfm_dist_size(t->p.dist); k++) {
        const double *p = t->parts + (size_t)k * PART_FIELDS;
        if (p[PART_FAILED])
            return tfm_error_set(err, TFM_ERR_IO,
                                 "rank %d could not make its part of the update (its own message "
                                 "says why)",
                                 k);
        r->loss_sum += p[PART_LOSS];
        r->nll_sum += p[PART_NLL];
        tgt += p[PART_TGT_TOKENS];
        src += p[PART_SRC_TOKENS];
        sentences += p[PART_SENTENCES];
    }
    r->tgt_tokens = (int64_t)tgt;
    r->src_tokens = (int64_t)src;
    r->sentences = (int)sentences;
    return TFM_OK;
}

tfm_status tfm_trainer_step(tfm_trainer *t, tfm_step_result *r, tfm_error *err)
{
    memset(r, 0, sizeof *r);
    double part[PART_FIELDS] = {0};
    tfm_status st = backward_own_batches(t, part, &r->epoch, err);
    int64_t step = t->s.model->step + 1;
    /* A testing aid: a poisoned gradient on the last rank, which every rank
     * must then skip alike. */
    if (st == TFM_OK && t->p.debug_nan_step > 0 && step >= t->p.debug_nan_step &&
        t->poisoned < t->p.debug_nan_count &&
        tfm_dist_rank(t->p.dist) == tfm_dist_size(t->p.dist) - 1) {
        t->grads[t->n_params / 2] = NAN;
        t->poisoned++;
    }
    if ((st = add_up_parts(t, part, st, r, err)) != TFM_OK) return st;
    double t0 = tfm_clock_seconds();
    if ((st = tfm_dist_sum_floats(t->p.dist, t->grads, t->n_params, err)) != TFM_OK) return st;
    r->reduce_seconds = tfm_clock_seconds() - t0;

    double tokens = r->tgt_tokens > 0 ? (double)r->tgt_tokens : 1.0;
    r->grad_norm = sqrt(grad_sum_squares(t)) / tokens;
    int64_t warmup = tfm_trainer_warmup(t);
    r->lr = tfm_lr_at(t->p.schedule, t->p.lr_factor, t->s.model->config.d_model, warmup, step,
                      t->total);
    if (!isfinite(r->loss_sum) || !isfinite(r->grad_norm)) {
        r->skipped = true;
        r->bad_steps = ++t->s.bad_steps;
        if (t->s.bad_steps >= t->p.max_bad_steps)
            return tfm_error_set(err, TFM_ERR_RANGE,
                                 "the loss or the gradients were not finite (NaN or infinite) in "
                                 "%d updates in a row after update %lld: training has diverged "
                                 "(a lower --lr-factor, a longer --warmup or --clip-norm may help)",
                                 t->s.bad_steps, (long long)t->s.model->step);
        return TFM_OK;
    }
    t->s.bad_steps = 0;
    double scale = 1.0 / tokens;
    if (t->p.clip_norm > 0 && r->grad_norm > t->p.clip_norm)
        scale *= t->p.clip_norm / r->grad_norm;
    param_job job = {t, step, r->lr, (float)scale};
    for_params(t, update_chunk, &job);
    t->s.model->step = step;
    return TFM_OK;
}

/* ---- validation --------------------------------------------------------------------- */

/* Exchanges the weights and the moving average in place (no second copy of
 * the model is needed to evaluate the average). */
static void swap_weights(tfm_trainer *t)
{
    float *w = t->s.model->data, *e = t->s.ema;
    for (size_t i = 0; i < t->n_params; i++) {
        float x = w[i];
        w[i] = e[i];
        e[i] = x;
    }
}

/* The loss of a batch's targets, each given the source of the next pair of
 * its batch (the last the first's): what the model predicts without its own
 * source.  The batcher sorts by length, so the borrowed sources are of
 * about the right length.  A batch of one pair adds nothing. */
static tfm_status blind_loss(tfm_trainer *t, const tfm_pair_batch *pairs, tfm_valid_result *r,
                             tfm_error *err)
{
    const int B = pairs->B;
    if (B < 2) return TFM_OK;
    const int32_t **src = malloc((size_t)B * sizeof *src);
    int *src_lens = malloc((size_t)B * sizeof *src_lens);
    if (!src || !src_lens) {
        free(src);
        free(src_lens);
        return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < B; i++) {
        src[i] = pairs->src[(i + 1) % B];
        src_lens[i] = pairs->src_lens[(i + 1) % B];
    }
    tfm_pair_batch blind = *pairs;
    blind.src = src;
    blind.src_lens = src_lens;
    tfm_loss_sums sums;
    tfm_status st = tfm_model_loss(t->ws, &blind, false, NULL, &sums, NULL, NULL, err);
    if (st == TFM_OK) {
        r->blind_nll_sum += sums.nll;
        r->blind_tokens += sums.n_tokens;
    }
    free(src);
    free(src_lens);
    return st;
}

static tfm_status valid_loss(tfm_trainer *t, const tfm_corpus *valid, tfm_valid_result *r,
                             tfm_error *err)
{
    tfm_batcher_params bp = t->p.batches;
    bp.shuffle = false;
    tfm_batcher *b;
    tfm_status st = tfm_batcher_create(valid, &bp, &b, err);
    if (st != TFM_OK) return st;
    int64_t n = tfm_batcher_epoch_batches(b);
    for (int64_t i = 0; i < n && st == TFM_OK; i++) {
        tfm_batch batch;
        if ((st = tfm_batcher_next(b, &batch, err)) != TFM_OK) break;
        tfm_loss_sums sums;
        st = tfm_model_loss(t->ws, &batch.pairs, false, NULL, &sums, NULL, NULL, err);
        r->loss_sum += sums.loss;
        r->nll_sum += sums.nll;
        r->tgt_tokens += sums.n_tokens;
        r->sentences += batch.pairs.B;
        if (st == TFM_OK) st = blind_loss(t, &batch.pairs, r, err);
    }
    tfm_batcher_free(b);
    return st;
}

/* The text BLEU is taken on: the detokenised text with a vocabulary, else
 * the id line. */
static tfm_status ids_text(const tfm_vocab *v, const int32_t *ids, int n, tfm_buf *out,
                           tfm_error *err)
{
    tfm_buf_clear(out);
    if (v) return tfm_bpe_decode(v, ids, (size_t)n, out, err);
    if (tfm_ids_format(ids, (size_t)n, out) != TFM_OK)
        return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    return TFM_OK;
}

typedef struct decoder_set {
    tfm_encoder *enc;
    tfm_decoder *dec;
    tfm_search *search;
    tfm_metric *bleu;
    float *states;
    size_t states_cap;
    tfm_buf hyp, ref;
} decoder_set;

static void decoder_set_free(decoder_set *d)
{
    tfm_encoder_free(d->enc);
    tfm_decoder_free(d->dec);
    tfm_search_free(d->search);
    tfm_metric_free(d->bleu);
    free(d->states);
    tfm_buf_free(&d->hyp);
    tfm_buf_free(&d->ref);
}

/* Greedy decodes of sentences [lo, hi) of valid, scored into r and d->bleu. */
static tfm_status decode_range(const tfm_model *m, decoder_set *d, const tfm_corpus *valid,
                               size_t lo, size_t hi, tfm_valid_result *r, tfm_error *err)
{
    const int32_t *src[DECODE_BATCH], *tgt[DECODE_BATCH];
    int src_lens[DECODE_BATCH], tgt_lens[DECODE_BATCH];
    const float *states[DECODE_BATCH];
    int B = (int)(hi - lo);
    size_t rows = 0;
    for (int i = 0; i < B; i++) {
        tfm_corpus_pair(valid, lo + (size_t)i, &src[i], &src_lens[i], &tgt[i], &tgt_lens[i]);
        rows += (size_t)src_lens[i];
    }
    size_t D = (size_t)m->config.d_model;
    if (rows * D > d->states_cap) {
        free(d->states);
        d->states_cap = rows * D;
        d->states = malloc(d->states_cap * sizeof(float));
        if (!d->states) {
            d->states_cap = 0;
            return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
        }
    }
    tfm_status st = tfm_encoder_forward(d->enc, B, src, src_lens, d->states, err);
    if (st != TFM_OK) return st;
    size_t row = 0;
    for (int i = 0; i < B; i++) {
        states[i] = d->states + row * D;
        row += (size_t)src_lens[i];
    }
    tfm_search_params sp = tfm_search_default_params();
    sp.beam = 1;
    tfm_search_input in = {.n_sentences = B, .states = states, .src_lens = src_lens};
    if ((st = tfm_search_run(d->search, d->dec, &sp, &in, err)) != TFM_OK) return st;
    for (int i = 0; i < B; i++) {
        tfm_nbest nb = tfm_search_result(d->search, i);
        const tfm_hypothesis *h = &nb.hyps[0];
        if (h->len == tgt_lens[i] && memcmp(h->ids, tgt[i], (size_t)h->len * sizeof(int32_t)) == 0)
            r->exact += 1;
        if ((st = ids_text(m->vocab, h->ids, h->len, &d->hyp, err)) ||
            (st = ids_text(m->vocab, tgt[i], tgt_lens[i], &d->ref, err)))
            return st;
        const char *refs[1] = {d->ref.data ? d->ref.data : ""};
        size_t ref_lens[1] = {d->ref.len};
        /* A reference that is empty as text cannot be scored (sacreBLEU
         * refuses it too): it counts only in the exact matches. */
        st = tfm_metric_add(d->bleu, d->hyp.data ? d->hyp.data : "", d->hyp.len, refs, ref_lens,
                            1, err);
        if (st != TFM_OK && st != TFM_ERR_ARG) return st;
    }
    return TFM_OK;
}

static tfm_status valid_decode(const tfm_model *m, const tfm_corpus *valid, tfm_valid_result *r,
                               tfm_error *err)
{
    decoder_set d = {0};
    tfm_buf_init(&d.hyp);
    tfm_buf_init(&d.ref);
    tfm_metric_params mp = tfm_metric_default_params(TFM_METRIC_BLEU);
    tfm_status st = tfm_encoder_create(m, &d.enc, err);
    if (st == TFM_OK) st = tfm_decoder_create(m, &d.dec, err);
    if (st == TFM_OK) st = tfm_search_create(m, &d.search, err);
    if (st == TFM_OK) st = tfm_metric_create(&mp, &d.bleu, err);
    size_t n = tfm_corpus_size(valid);
    for (size_t lo = 0; lo < n && st == TFM_OK; lo += DECODE_BATCH)
        st = decode_range(m, &d, valid, lo, lo + DECODE_BATCH < n ? lo + DECODE_BATCH : n, r, err);
    if (st == TFM_OK) {
        tfm_score s;
        tfm_metric_corpus_score(d.bleu, &s);
        r->bleu = tfm_metric_count(d.bleu) ? s.score : 0.0;
        r->exact = n ? r->exact / (double)n : 0.0;
        r->decoded = true;
    }
    decoder_set_free(&d);
    return st;
}

tfm_status tfm_trainer_validate(tfm_trainer *t, const tfm_corpus *valid, bool decode,
                                tfm_valid_result *r, tfm_error *err)
{
    memset(r, 0, sizeof *r);
    if (tfm_corpus_size(valid) == 0)
        return tfm_error_set(err, TFM_ERR_ARG, "the validation data hold no sentence pairs");
    if (t->s.ema) swap_weights(t);
    tfm_status st = valid_loss(t, valid, r, err);
    if (st == TFM_OK && decode) st = valid_decode(t->s.model, valid, r, err);
    if (t->s.ema) swap_weights(t);
    return st;
}

/* ---- saving ------------------------------------------------------------------------- */

tfm_status tfm_trainer_save(const tfm_trainer *t, const char *path,
                            const char *const *extra_metadata, tfm_error *err)
{
    /* The state's batcher position is brought up to date for the file. */
    tfm_train_state s = t->s;
    tfm_batcher_get_state(t->batcher, &s.batcher);
    return tfm_checkpoint_save(path, &s, extra_metadata, err);
}

tfm_status tfm_trainer_save_model(const tfm_trainer *t, const char *path,
                                  const char *const *extra_metadata, tfm_error *err)
{
    if (!t->s.ema) return tfm_model_save(t->s.model, path, extra_metadata, err);
    /* The average, as a model that borrows everything else. */
    tfm_model view = *t->s.model;
    if (tfm_params_layout(&view.config, t->s.ema, &view.params) != TFM_OK)
        return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    view.data = t->s.ema;
    tfm_status st = tfm_model_save(&view, path, extra_metadata, err);
    tfm_params_free_layout(&view.params);
    return st;
}
