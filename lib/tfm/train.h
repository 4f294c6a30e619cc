/* tfm/train.h - training the Transformer with the paper's recipe: parallel
 * training data, batches by token count with sentences of like length
 * grouped together, Adam with the warm-up schedule, gradient clipping,
 * checkpoints that resume exactly, averaging of checkpoints and an
 * exponential moving average of the weights.  The forward and backward pass
 * itself is in tfm/model.h ("training: forward and backward").
 *
 * A worked example: train for 1000 updates, saving a checkpoint every 100.
 *
 *     tfm_corpus *data;
 *     tfm_corpus_params cp = tfm_corpus_default_params();
 *     cp.vocab = vocab;                           // text is encoded with it
 *     tfm_corpus_stats stats;
 *     if (tfm_corpus_load("train.de", "train.en", &cp, &data, &stats, &err)) ...
 *     tfm_model *m;
 *     tfm_model_create(&config, vocab, 1, &m, &err);
 *     tfm_train_params tp = tfm_train_default_params();
 *     tfm_trainer *t;
 *     tfm_trainer_create(m, data, &tp, &t, &err);  // t owns m; data outlives t
 *     while (tfm_trainer_steps(t) < 1000) {
 *         tfm_step_result r;
 *         if (tfm_trainer_step(t, &r, &err)) ...   // r.loss_sum / r.tgt_tokens ...
 *         if (tfm_trainer_steps(t) % 100 == 0)
 *             tfm_trainer_save(t, "m.ckpt-100", NULL, &err);
 *     }
 *     tfm_trainer_save_model(t, "m.safetensors", NULL, &err);
 *     tfm_trainer_free(t);
 *
 * Determinism: the same corpus, parameters, seed and BLAS thread count give
 * the same weights bit for bit, and a run stopped at a checkpoint and
 * resumed from it gives the same weights as one never stopped: the batch
 * order, the dropout random numbers and the optimizer state are all in the
 * checkpoint.
 */
#ifndef TFM_TRAIN_H
#define TFM_TRAIN_H

#include <signal.h>

#include "tfm/core.h"
#include "tfm/model.h"
#include "tfm/pass.h"
#include "tfm/safetensors.h"
#include "tfm/text.h"

/* ---- training data ------------------------------------------------------------ */

/* Sentence pairs held in memory as token ids: the source ids (ended by </s>
 * when the loader appends it) and the target ids, without <s> or </s> (the
 * model adds those). */
typedef struct tfm_corpus tfm_corpus;

/* An empty corpus, to fill with tfm_corpus_add (NULL when memory runs out). */
tfm_corpus *tfm_corpus_create(void);
void tfm_corpus_free(tfm_corpus *c);

/* Appends a pair; the ids are copied.  Lengths may be 0 (the loader skips
 * such pairs; a caller building a corpus decides for itself). */
tfm_status tfm_corpus_add(tfm_corpus *c, const int32_t *src, int src_len, const int32_t *tgt,
                          int tgt_len, tfm_error *err);

size_t tfm_corpus_size(const tfm_corpus *c);
/* The ids of pair i (i < size); valid as long as the corpus is not changed. */
void tfm_corpus_pair(const tfm_corpus *c, size_t i, const int32_t **src, int *src_len,
                     const int32_t **tgt, int *tgt_len);
/* A new corpus of the first n pairs of c (all of them when it has fewer);
 * NULL when memory runs out. */
tfm_corpus *tfm_corpus_head(const tfm_corpus *c, size_t n);
/* A hash of every id of every pair in order: a resumed run checks that it
 * reads the data it was trained on. */
uint64_t tfm_corpus_hash(const tfm_corpus *c);

typedef enum tfm_corpus_format {
    TFM_CORPUS_AUTO = 0, /* ids when most non-empty lines of the file's first 4096 lines
                            are id lines (tfm_format_guess); else text */
    TFM_CORPUS_IDS,      /* id lines, as 'tokenize' writes them */
    TFM_CORPUS_TEXT,     /* text lines, encoded with the vocabulary's BPE */
} tfm_corpus_format;

typedef struct tfm_corpus_params {
    tfm_corpus_format format;   /* of both files; AUTO decides for each. Default AUTO */
    const tfm_vocab *vocab;     /* encodes text; bounds ids.  May be NULL for ids: the
                                   joint vocabulary, or the target side's */
    const tfm_vocab *src_vocab; /* the source side's own; NULL: vocab serves both */
    int32_t vocab_size;         /* without a vocabulary: ids must be below this
                                   (0: any id); the target's when src_vocab_size is set */
    int32_t src_vocab_size;     /* without a source vocabulary: the source's bound
                                   (0: vocab_size) */
    int max_length;             /* pairs with more ids on either side are skipped;
                                   0: no limit.  Default 256 */
    int32_t pad_id, bos_id, eos_id; /* the model's special ids (default the vocabulary's
                                   fixed TFM_ID_*; an imported model has its own): id
                                   lines may not hold them, and </s> is eos_id */
    bool append_eos;            /* end every source with </s> (eos_id), as 'encode'
                                   does by default (fairseq's convention), so the model
                                   trains on the sources it will be given.  Not counted
                                   in max_length.  Default true */
    int n_threads;              /* for encoding text.  Default 1 */
} tfm_corpus_params;

tfm_corpus_params tfm_corpus_default_params(void);

/* What loading found.  Every line pair is either kept or counted in one of
 * the skipped counts: pairs + empty + too_long == lines. */
typedef struct tfm_corpus_stats {
    size_t lines;               /* line pairs read */
    size_t pairs;               /* kept */
    size_t empty;               /* skipped: the source or the target has no ids */
    size_t too_long;            /* skipped: more than max_length ids on a side */
    size_t repaired;            /* text lines with invalid UTF-8 replaced by U+FFFD */
    int64_t src_tokens, tgt_tokens; /* ids in the kept pairs (</s>s included) */
    tfm_corpus_format src_format, tgt_format; /* as read (IDS or TEXT) */
    /* With TFM_CORPUS_AUTO, what each side's first chunk (4096 lines) said
     * (tfm_format_guess; lines 0 when the format was given), for a note
     * when the evidence was thin (tfm_format_guess_note). */
    tfm_format_guess format_guess[2];
    /* Repairs, by side: the file started with a UTF-8 byte order mark, and
     * lines ended in CR LF; neither is data, and both were dropped. */
    bool bom[2];
    size_t crlf[2];
    /* On failure: which file (0 source, 1 target, -1 both or neither) and the
     * 1-based line (0: none), so the caller can print FILE:LINE: message. */
    int error_file;
    size_t error_line;
} tfm_corpus_stats;

/* Reads a parallel corpus: line i of src_path and line i of tgt_path are a
 * pair.  Files with different numbers of lines are TFM_ERR_FORMAT naming both
 * counts; a line that is not an id line (ids mode), an id outside the
 * vocabulary, or an id of <pad>, <s> or </s> (which the model adds itself)
 * is TFM_ERR_FORMAT or TFM_ERR_RANGE with stats->error_file and error_line
 * set.  Empty and over-long pairs are skipped and counted, never dropped
 * silently, so pair i of the corpus is always a pair of the files.  Text
 * needs p->vocab (TFM_ERR_ARG otherwise). */
tfm_status tfm_corpus_load(const char *src_path, const char *tgt_path,
                           const tfm_corpus_params *p, tfm_corpus **out,
                           tfm_corpus_stats *stats, tfm_error *err);

/* ---- batches -------------------------------------------------------------------- */

/* A batch of sentence pairs: the pairs as the model's passes take them
 * (tfm_model_forward_backward(ws, &batch.pairs, ...)), and where they come
 * from.  The pointers are valid until the next call of the batcher that
 * made it. */
typedef struct tfm_batch {
    tfm_pair_batch pairs;       /* B, and each pair's source and target ids (the
                                   target without <s> and </s>) and lengths */
    const size_t *numbers;      /* [B] the pairs' numbers in the corpus */
    int64_t src_tokens;         /* sum of src_lens */
    int64_t tgt_tokens;         /* sum of (tgt_lens + 1): the </s> is predicted too */
    int64_t epoch;              /* 0-based epoch this batch belongs to */
} tfm_batch;

/* The size of a batch in the sense of batch_tokens: B times the longest
 * sentence of either side, where a target counts one more (<s> in the
 * decoder's input, </s> in its output).  This is the padded size of the
 * larger side, as fairseq's --max-tokens counts it, so a budget of N keeps
 * both the source and the target side at most N tokens: the paper's
 * "approximately 25000 source tokens and 25000 target tokens" is a budget of
 * about 25000. */
int64_t tfm_batch_cost(int B, int max_src_len, int max_tgt_len);

typedef struct tfm_batcher_params {
    int64_t batch_tokens;  /* budget per batch (tfm_batch_cost).  Default 4096 */
    int window;            /* sentences are sorted by length within windows of about
                              this many batches (Marian's maxi-batch).  Default 100 */
    bool shuffle;          /* shuffle every epoch (training); false: one window over
                              the whole corpus, in a fixed order (validation).
                              Default true */
    uint64_t seed;         /* of the shuffles.  Default 1 */
} tfm_batcher_params;

tfm_batcher_params tfm_batcher_default_params(void);

/* Cuts a corpus into batches, epoch after epoch.  Each epoch: shuffle the
 * pairs; take windows of about window x batch_tokens tokens; sort each
 * window by length (longer side, then target, source, pair number); cut it
 * into batches greedily, each within the budget; shuffle the batches of the
 * window.  Every pair appears exactly once per epoch.  A pair whose own cost
 * exceeds the budget makes a batch of its own (the loader's max_length
 * keeps that from happening when batch_tokens > max_length).  The corpus
 * must outlive the batcher and not change. */
typedef struct tfm_batcher tfm_batcher;

/* TFM_ERR_ARG for an empty corpus or a budget or window below 1. */
tfm_status tfm_batcher_create(const tfm_corpus *c, const tfm_batcher_params *p,
                              tfm_batcher **out, tfm_error *err);
void tfm_batcher_free(tfm_batcher *b);

/* The next batch; after the last batch of an epoch the next epoch begins. */
tfm_status tfm_batcher_next(tfm_batcher *b, tfm_batch *out, tfm_error *err);

/* Where the batcher is: enough to continue exactly from there. */
typedef struct tfm_batcher_state {
    int64_t epoch;         /* 0-based epoch of the next batch's plan */
    int64_t position;      /* batches of that epoch already taken */
    tfm_rng rng;           /* the shuffling generator as it was when the epoch began */
} tfm_batcher_state;

void tfm_batcher_get_state(const tfm_batcher *b, tfm_batcher_state *s);
/* Continues from a saved state (of a batcher of the same corpus and
 * parameters): the epoch's plan is made again from its generator.
 * TFM_ERR_RANGE when the position lies beyond the epoch's batches. */
tfm_status tfm_batcher_set_state(tfm_batcher *b, const tfm_batcher_state *s, tfm_error *err);
/* The number of batches in the current epoch's plan. */
int64_t tfm_batcher_epoch_batches(const tfm_batcher *b);

/* ---- the optimizer and its schedule ------------------------------------------- */

typedef struct tfm_adam_params {
    float beta1, beta2, eps;
} tfm_adam_params;

/* The paper's: beta1 0.9, beta2 0.98, eps 1e-9. */
tfm_adam_params tfm_adam_default_params(void);

/* One Adam update (Kingma & Ba, 2015, with the bias corrections, exactly as
 * PyTorch's torch.optim.Adam computes it) of n parameters w with gradients
 * grad_scale * g, moments m and v (zero before step 1), at step t >= 1 with
 * rate lr:
 *     m = beta1 m + (1 - beta1) g
 *     v = beta2 v + (1 - beta2) g^2
 *     w -= (lr / (1 - beta1^t)) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
 * (the scale saves the trainer a pass over the gradient to normalise it). */
void tfm_adam_update(const tfm_adam_params *p, int64_t t, double lr, float grad_scale, size_t n,
                     float *w, const float *g, float *m, float *v);

/* The paper's learning rate (section 5.3):
 *     lr = factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)
 * rising linearly for warmup steps, then falling as 1/sqrt(step).  step >= 1;
 * warmup >= 1. */
double tfm_lr_schedule(double factor, int d_model, int warmup, int64_t step);

/* The shapes of the learning rate over a run (schedule.c). */
typedef enum tfm_schedule {
    TFM_SCHEDULE_NOAM,   /* the paper's: the warm-up, then 1/sqrt(step) */
    TFM_SCHEDULE_LINEAR, /* the warm-up, then linearly down to 0 at the budget's end */
    TFM_SCHEDULE_WSD,    /* the warm-up, the peak held, then linearly down to 0 over the
                            last TFM_WSD_DECAY_SHARE of the budget */
    TFM_SCHEDULE_CONSTANT, /* the warm-up, then the peak held to the end */
} tfm_schedule;
#define TFM_WSD_DECAY_SHARE 0.2
/* A warm-up given as a share of a total not yet known is taken of this many. */
#define TFM_WARMUP_UNKNOWN_TOTAL 1000

/* The warm-up in updates: warmup, or when share > 0 that share of total
 * updates (of TFM_WARMUP_UNKNOWN_TOTAL when total is 0, unknown) but at
 * least least updates, or half of them when that is less; at least 1. */
int64_t tfm_warmup_steps(int64_t warmup, double share, int64_t least, int64_t total);

/* The rate of update step (>= 1) of a run of total updates (0: unknown).
 * Every schedule rises linearly over warmup updates to the paper's peak,
 * factor * (d_model * warmup)^-0.5; NOAM is tfm_lr_schedule; LINEAR and WSD
 * reach 0 just after update total, and hold the peak while total is 0;
 * CONSTANT holds it. */
double tfm_lr_at(tfm_schedule kind, double factor, int d_model, int64_t warmup, int64_t step,
                 int64_t total);

/* The sum of squares of x in double precision (a NaN or an infinity in x
 * makes the result NaN or infinite). */
double tfm_sum_squares(const float *x, size_t n);

/* An exponential moving average of the weights: ema = decay ema + (1 - decay) w. */
void tfm_ema_update(float decay, size_t n, float *ema, const float *w);

/* ---- training across processes (MPI) ------------------------------------------ */

/* Data-parallel training: a program started by mpirun or srun is one of a
 * group of processes ("ranks", numbered from 0), each holding the whole
 * model.  An update is shared among them: each rank computes the gradient
 * of its own batches, the gradients are summed across the ranks, and every
 * rank applies the same update to its own copy of the weights, which so stay
 * identical without being sent.  Only this part of the library calls MPI
 * (Open MPI); a program that was not started by a launcher makes no MPI call
 * at all and is a group of one, as is a NULL tfm_dist everywhere below.
 *
 * The sums are taken in rank order, the same on every rank and on every run:
 * element i of the sum is ((x_0[i] + x_1[i]) + x_2[i]) + ... of the ranks'
 * values, the order in which one process adds its accumulated batches
 * (MPI_Allreduce promises neither an order nor the same result on every
 * rank).  See tfm_trainer_step for what this makes equal. */
typedef struct tfm_dist tfm_dist;

/* Joins the group when the environment says a launcher started the
 * program (mpirun and srun --mpi=pmix set OMPI_COMM_WORLD_SIZE, PMIX_RANK
 * or PMI_RANK): MPI_Init_thread with MPI_THREAD_FUNNELED (only the thread
 * that made the group calls these functions).  Else a group of one, with no
 * MPI call.  argc and argv are main's (MPI may read them), or NULL. */
tfm_status tfm_dist_create(int *argc, char ***argv, tfm_dist **out, tfm_error *err);
/* Waits for the other ranks (sleeping, not spinning) and leaves the group
 * (MPI_Finalize).  Call it only when the program succeeded: a rank that
 * fails ends without it, which makes the launcher end the others. */
void tfm_dist_free(tfm_dist *d);

/* How long a rank waits for the others in an exchange below before it
 * gives up: seconds (0: for ever), or TFM_DIST_TIMEOUT_UPDATES times the
 * longest update so far (the time between two gradient sums) if that is
 * longer, so that a slow rank's update is waited for.  A wait that passes
 * it fails with TFM_ERR_IO naming the ranks whose messages did not come
 * and their hosts:
 *     no answer from rank 1 (on node2) for 600 s in the gradient sum: ...
 * A peer whose machine or link went down fails no TCP connection for many
 * minutes, and MPI's own calls would wait for ever.  The limit must be
 * longer than any wait of a healthy rank: rank 0's validation or a
 * checkpoint's writing, while the others wait at the next update.  A group
 * starts with TFM_DIST_TIMEOUT. */
#define TFM_DIST_TIMEOUT 600
#define TFM_DIST_TIMEOUT_UPDATES 10
void tfm_dist_set_timeout(tfm_dist *d, double seconds);

int tfm_dist_rank(const tfm_dist *d);  /* 0 .. size - 1; 0 for NULL */
int tfm_dist_size(const tfm_dist *d);  /* 1 for NULL */

/* all[r * bytes, (r + 1) * bytes) gets rank r's mine[0, bytes), on every
 * rank.  A rank that comes first sleeps while it waits for the others (a
 * test every 0.2 ms): a rank waits here while rank 0 validates or writes a
 * checkpoint, and a spinning wait would take a CPU from it.  Each exchange
 * below is messages to and from every peer (not MPI's collectives), so
 * that a wait can end at the deadline of tfm_dist_set_timeout naming the
 * peers that did not answer. */
tfm_status tfm_dist_allgather(tfm_dist *d, const void *mine, size_t bytes, void *all,
                              tfm_error *err);

/* Replaces x[0, n) on every rank with the sum of every rank's x, in rank
 * order (above), bit for bit the same on every rank.  In buckets of
 * TFM_DIST_BUCKET floats; each bucket is cut into one slice per rank, rank
 * r adds up slice r of every rank (as MPI_Alltoallv would gather them) and
 * then every rank collects the summed slices (as MPI_Allgatherv would):
 * waiting without sleeping, as MPI's blocking calls do; as many bytes sent as a ring
 * MPI_Allreduce sends, 2 (size - 1) / size of x per rank.  All ranks call it
 * with the same n. */
#define TFM_DIST_BUCKET ((size_t)1 << 22)
tfm_status tfm_dist_sum_floats(tfm_dist *d, float *x, size_t n, tfm_error *err);

/* The lowest rank whose value differs from rank 0's, into *rank (-1: none):
 * how the ranks check that they read the same data and start from the same
 * weights. */
tfm_status tfm_dist_first_difference(tfm_dist *d, uint64_t value, int *rank, tfm_error *err);
/* *value becomes the largest of the ranks' values: how they agree on
 * whether to stop. */
tfm_status tfm_dist_max(tfm_dist *d, int64_t *value, tfm_error *err);

/* ---- training ------------------------------------------------------------------- */

typedef struct tfm_train_params {
    tfm_batcher_params batches;
    int accum;             /* batches per update (gradient accumulation).  Default 1 */
    tfm_schedule schedule; /* Default NOAM (the paper's) */
    double lr_factor;      /* of tfm_lr_at.  Default 1 (the paper's formula) */
    int warmup;            /* updates.  Default 4000 */
    double warmup_share;   /* > 0: the warm-up is this share of the run's updates
                              (tfm_trainer_set_total), not warmup.  Default 0 */
    int warmup_least;      /* with warmup_share: at least this many updates, or half
                              the run when that is less (tfm_warmup_steps).  Default 0 */
    double clip_norm;      /* > 0: gradients are scaled down to this global L2 norm.
                              Default 0 (off; the paper does not clip) */
    tfm_adam_params adam;
    double ema_decay;      /* > 0: keep an exponential moving average of the
                              weights (e.g. 0.9999).  Default 0 (off) */
    uint64_t seed;         /* of dropout.  Default 1 */
    int max_bad_steps;     /* updates in a row with a non-finite loss or gradient
                              before training fails.  Default 5 */
    int64_t debug_nan_step;  /* a testing aid: > 0 poisons the gradients of this
                                many updates ... */
    int64_t debug_nan_count; /* ... starting at update number debug_nan_step */
    int n_threads;         /* threads for the work of an update besides the BLAS's
                              own: the step's work between matrix products
                              (tfm_pass_workspace_set_threads) and the optimizer's
                              passes over the parameters.  Results do not depend
                              on it.  Default 1 */
    tfm_dist *dist;        /* the processes an update is shared with (not owned;
                              outlives the trainer).  Default NULL: this one alone */
} tfm_train_params;

tfm_train_params tfm_train_default_params(void);
/* TFM_ERR_RANGE naming the first field out of range. */
tfm_status tfm_train_params_validate(const tfm_train_params *p, tfm_error *err);

/* What one update did. */
typedef struct tfm_step_result {
    double loss_sum;       /* label-smoothed loss summed over target tokens */
    double nll_sum;        /* -log p(reference) summed: exp(nll_sum / tgt_tokens) is
                              the perplexity */
    int64_t tgt_tokens;    /* target tokens (</s> included) the loss was taken over */
    int64_t src_tokens;
    int sentences;
    double grad_norm;      /* the global L2 norm of the gradient (per target token)
                              before clipping */
    double lr;             /* the rate this update used */
    bool skipped;          /* loss or gradient not finite: the update was not made
                              (the batches are still consumed) */
    int bad_steps;         /* skipped updates in a row up to this one */
    int64_t epoch;         /* epoch of the last batch of the update (0-based) */
    double wait_seconds;   /* across processes: spent waiting for the other ranks
                              to finish their batches */
    double reduce_seconds; /* ... and summing the gradients (tfm_dist_sum_floats) */
} tfm_step_result;

/* The whole state of training: the model, the gradient and optimizer
 * buffers, the batcher, the dropout generator and a workspace for the
 * forward and backward pass.  Memory is allocated at creation and as the
 * largest batch grows, not per update. */
typedef struct tfm_trainer tfm_trainer;

/* Takes ownership of model (freed by tfm_trainer_free, also on failure);
 * corpus must outlive the trainer.  The step count starts at model->step. */
tfm_status tfm_trainer_create(tfm_model *model, const tfm_corpus *corpus,
                              const tfm_train_params *p, tfm_trainer **out, tfm_error *err);
void tfm_trainer_free(tfm_trainer *t);

/* One update: accum batches forward and backward, the gradient divided by
 * their target tokens, checked (non-finite: the update is skipped, see
 * tfm_step_result), clipped, and applied by Adam at the scheduled rate; then
 * the moving average.  Fails with TFM_ERR_RANGE when max_bad_steps updates
 * in a row were skipped ("the loss or the gradients were not finite ..."):
 * the weights are those of the last good update.
 *
 * Each batch draws its dropout from a generator seeded by one draw of the
 * trainer's, and the gradients of the batches are added in order, the first
 * copied: ((g0 + g1) + g2) + ...  Across processes (p->dist) an update
 * takes accum batches on every rank, accum x ranks in all: the next ones of
 * the batch plan, rank r making batches r accum to (r + 1) accum - 1.
 * Every rank walks the whole plan and draws every batch's seed, so the
 * data position and the generators after an update depend on the batches
 * per update, not on the ranks.  The ranks' gradients are summed in rank
 * order (tfm_dist_sum_floats), and the loss and counts in r are the whole
 * update's, on every rank.  So N processes with accum 1 make, bit for bit,
 * the updates of one process with accum N (the same batches, dropout and
 * sums in the same order); N processes with accum A > 1 make those of one
 * with accum N A up to rounding (the same sums bracketed otherwise: (g0 +
 * g1) + (g2 + g3) for ((g0 + g1) + g2) + g3).  A NaN or an infinity on one
 * rank is in the sums, so every rank skips the update alike
 * (debug_nan_step poisons the last rank's gradient).  A rank that fails
 * tells the others in the exchange of the figures, and they fail too:
 * "rank R could not make its part of the update". */
tfm_status tfm_trainer_step(tfm_trainer *t, tfm_step_result *r, tfm_error *err);

/* The updates the run will make in all (0: unknown, the default), which
 * the budgeted schedules end at and a warm-up given as a share is taken of.
 * A run limited by time re-estimates it before every update; across
 * processes every rank must set the same. */
void tfm_trainer_set_total(tfm_trainer *t, int64_t total);

/* The warm-up in updates, as the schedule takes it now. */
int64_t tfm_trainer_warmup(const tfm_trainer *t);

/* Updates made so far (skipped ones not counted). */
int64_t tfm_trainer_steps(const tfm_trainer *t);
/* The batcher's position: epochs done as a fraction (1.5: half way through
 * the second epoch). */
double tfm_trainer_epoch(const tfm_trainer *t);
const tfm_train_params *tfm_trainer_params(const tfm_trainer *t);
/* The model being trained (its raw weights). */
const tfm_model *tfm_trainer_model(const tfm_trainer *t);

/* What validation measured. */
typedef struct tfm_valid_result {
    double loss_sum, nll_sum;  /* as in tfm_step_result, without dropout */
    int64_t tgt_tokens;
    int sentences;
    double blind_nll_sum;      /* the nll of the same targets, each given another pair's
                                  source (the next of its batch): what the model predicts
                                  without its own source */
    int64_t blind_tokens;      /* the targets of that sum (batches of one pair left out) */
    bool decoded;              /* greedy decodes were made: */
    double bleu;               /* corpus BLEU (sacreBLEU's default 13a), on text when the
                                  model has a vocabulary, else on id lines */
    double exact;              /* share of sentences decoded exactly as the reference,
                                  0..1 */
} tfm_valid_result;

/* Measures the weights to ship (the moving average when there is one, else
 * the weights) on a held-out corpus: the loss without dropout and, with
 * decode, greedy decodes scored with BLEU and exact match. */
tfm_status tfm_trainer_validate(tfm_trainer *t, const tfm_corpus *valid, bool decode,
                                tfm_valid_result *r, tfm_error *err);

/* Whether a validation shows a model that does not translate: after the
 * warm-up and at least TFM_DIAGNOSE_LEAST_STEPS updates, its perplexity on
 * the validation targets is less than e^TFM_DIAGNOSE_LEAST_GAIN times lower
 * with their own sources than with other pairs' (v->blind_nll_sum): it has
 * learned a language model of the target side and ignores its input.  On
 * the software strings at update 400 (small preset, 2 threads): the
 * defaults' 3+3 layers 8.6 times lower (2.15 nats; 1.40 at update 250); a
 * 6+1 pre-norm model, slower to learn, 2.7 times (0.98); the 6+1 post-norm
 * model that never learns 1.17 times (0.15).  Then writes into text (size bytes) a warning that says so, of the
 * data named by data ("the validation data"), with the likely cause for
 * this configuration, and returns true. */
enum { TFM_DIAGNOSE_LEAST_STEPS = 500 };
#define TFM_DIAGNOSE_LEAST_GAIN 0.5
bool tfm_diagnose_validation(const tfm_config *c, int64_t step, int64_t warmup,
                             const tfm_valid_result *v, const char *data, char *text,
                             size_t size);
/* The same diagnosis of the trainer's model now, measured on probe (pairs
 * of the training data, for a run without validation data): *found and
 * text as tfm_diagnose_validation's; errors as tfm_trainer_validate's. */
tfm_status tfm_diagnose_trainer(tfm_trainer *t, const tfm_corpus *probe, char *text, size_t size,
                                bool *found, tfm_error *err);

/* Writes a checkpoint (see below) atomically. */
tfm_status tfm_trainer_save(const tfm_trainer *t, const char *path,
                            const char *const *extra_metadata, tfm_error *err);
/* Writes the weights to ship (the moving average when there is one) as a
 * model file, atomically, with the step and extra_metadata. */
tfm_status tfm_trainer_save_model(const tfm_trainer *t, const char *path,
                                  const char *const *extra_metadata, tfm_error *err);
/* A trainer continuing from a checkpoint: the model, optimizer, moving
 * average, batch position and generators as they were saved.  The corpus
 * must be the one the checkpoint was trained on (TFM_ERR_ARG otherwise: its
 * size and hash are in the checkpoint), and p should be the parameters it
 * was trained with for the run to continue exactly (a changed budget or
 * window changes the batches; the moving average is kept only when
 * p->ema_decay > 0). */
tfm_status tfm_trainer_resume(const char *path, const tfm_corpus *corpus,
                              const tfm_train_params *p, tfm_trainer **out, tfm_error *err);

/* ---- checkpoints ---------------------------------------------------------------- */

/* A checkpoint is a safetensors file holding what a model file holds (the
 * tensors under their names; the configuration, step and vocabulary in the
 * metadata) and also:
 *   tensors   optimizer.exp_avg.NAME, optimizer.exp_avg_sq.NAME  (Adam's m and v)
 *             ema.NAME                                           (with a moving average)
 *   metadata  checkpoint = "1"; train.epoch, train.position; train.batch_rng and
 *             train.dropout_rng (four 16-digit hexadecimal words each);
 *             train.bad_steps; train.corpus_pairs, train.corpus_hash
 * (tfm-formats(5)).  The training state, bit for bit. */
typedef struct tfm_train_state {
    tfm_model *model;          /* owned; model->step is the update count */
    float *exp_avg;            /* [tfm_params_count] each, owned */
    float *exp_avg_sq;
    float *ema;                /* NULL: none */
    tfm_batcher_state batcher;
    tfm_rng dropout_rng;
    int bad_steps;
    uint64_t corpus_pairs, corpus_hash;
} tfm_train_state;

/* Allocates the optimizer buffers (zero) and, with ema, the average (a copy
 * of the weights) for model, which s takes. */
tfm_status tfm_train_state_init(tfm_train_state *s, tfm_model *model, bool ema, tfm_error *err);
/* Frees what s owns (the model too); s may be zeroed or half made. */
void tfm_train_state_free(tfm_train_state *s);

/* Writes s to path atomically, with extra_metadata (NULL-terminated key,
 * value pairs, or NULL). */
tfm_status tfm_checkpoint_save(const char *path, const tfm_train_state *s,
                               const char *const *extra_metadata, tfm_error *err);
/* Reads a checkpoint into s (which the caller frees).  A model file that is
 * not a checkpoint is TFM_ERR_FORMAT saying so. */
tfm_status tfm_checkpoint_load(const char *path, tfm_train_state *s, tfm_error *err);

/* Loads the model of a model file or of a checkpoint (its weights, not the
 * moving average). */
tfm_status tfm_checkpoint_load_model(const char *path, tfm_model **out, tfm_error *err);

/* Checkpoint files of a run are named PREFIX-STEP ("m.ckpt-1200").  Lists the
 * steps of the files named so, in increasing order (*steps malloc'd, NULL
 * when there are none).  A missing folder is no checkpoints. */
tfm_status tfm_checkpoint_list(const char *prefix, int64_t **steps, size_t *n, tfm_error *err);
/* PREFIX-STEP into out. */
tfm_status tfm_checkpoint_path(const char *prefix, int64_t step, tfm_buf *out);
/* Removes all but the newest keep checkpoints of prefix (keep >= 1), and
 * the temporary files (PREFIX-STEP...tmp....PID) of writers that were killed
 * and no longer run. */
tfm_status tfm_checkpoint_prune(const char *prefix, int keep, tfm_error *err);

/* ---- averaging ------------------------------------------------------------------ */

/* The element-wise mean of the weights of n model files or checkpoints (the
 * paper averages the last 5 checkpoints of base, 20 of big).  They must have
 * the same configuration (TFM_ERR_FORMAT naming the first that differs); the
 * result has the configuration and vocabulary of the first and the step of
 * the newest. */
tfm_status tfm_average_models(const char *const *paths, int n, tfm_model **out,
                              tfm_error *err);
/* The same, written as the model file out (atomically, with the extra
 * metadata, which may be NULL); a failure to write is prefixed "OUT: ". */
tfm_status tfm_average_write(const char *const *paths, int n, const char *out,
                             const char *const *metadata, tfm_error *err);

/* ---- numbers in a checkpoint's metadata ----------------------------------------- */

typedef enum tfm_number_syntax {
    TFM_NUMBER_WHOLE,      /* a non-negative decimal integer, within [lo, max] */
    TFM_NUMBER_HEX,        /* hexadecimal digits, within [lo, max] */
    TFM_NUMBER_REAL,       /* a finite decimal number, within [lo, hi] (finite bounds) */
} tfm_number_syntax;

/* The number f's metadata holds under key, into *whole (WHOLE, HEX) or
 * *real (REAL).  TFM_EOF when the key is absent (the caller says whether it
 * must be there); TFM_ERR_FORMAT when its text is not such a number:
 *     metadata "KEY" is 'TEXT', not a whole number from LO to MAX
 * The one reader of numbers of the checkpoint's state and of the run's. */
tfm_status tfm_metadata_number(const tfm_safetensors *f, const char *key, tfm_number_syntax syntax,
                               double lo, double hi, uint64_t max, uint64_t *whole, double *real,
                               tfm_error *err);

/* ---- a training run ------------------------------------------------------------- */

/* The policy around the trainer that every front end of training needs
 * (train(1), a program of your own on libtfm.a): the options of a run as
 * texts and their persistence in every checkpoint and model, resuming with
 * the options a run was started with, checkpoints every K updates and the
 * newest N kept, validation, the best model so far and early stopping,
 * limits of updates, epochs and time, a clean stop on request, and at the
 * end a checkpoint and the model (or the average of the last checkpoints).
 *
 *     const char *given[TFM_RUN_OPTION_COUNT] = {0};  // from the command line
 *     given[TFM_OPT_SRC] = "train.de"; ...
 *     tfm_run *r;
 *     if (tfm_run_create(given, report, ctx, &r, &err)) ...  // TFM_ERR_ARG: usage
 *     tfm_run_set_stop_flag(r, &stop);  // set by a SIGINT handler
 *     if (tfm_run_train(r, &end, &err)) ...
 *     tfm_run_free(r);
 *
 * Every option has a text value: its default (from the library's default
 * parameters), the caller's, or on resume the checkpoint's.  The effective
 * values of all but the ONCE options are stored as metadata
 * "train.opt.NAME" in every checkpoint and model: a resumed run takes the
 * options it was started with, and given options override them.  The run
 * never prints: it reports what happens through the report callback, and
 * fails with a status and a message. */

/* The defaults of train(1) that depend on the run.  "auto" for a run with a
 * budget (--max-steps, --max-time, --max-epochs): the schedule, factor and
 * warm-up that gave the best models in 30 minutes on two CPUs (README,
 * "Train"); without a budget, and for --schedule noam, the paper's. */
#define TFM_AUTO_SCHEDULE TFM_SCHEDULE_LINEAR
#define TFM_AUTO_LR_FACTOR "0.3"
#define TFM_AUTO_WARMUP "8%,150"
#define TFM_PAPER_LR_FACTOR "1"
#define TFM_PAPER_WARMUP "4000"
/* Relative positions in self-attention, unless the options ask for
 * absolute ones (--learned-positions, --absolute-positions). */
#define TFM_AUTO_RELATIVE_POSITIONS "16"

/* The options, by the names of train(1). */
typedef enum tfm_run_option {
    TFM_OPT_PRESET, TFM_OPT_D_MODEL, TFM_OPT_D_FF, TFM_OPT_HEADS, TFM_OPT_LAYERS,
    TFM_OPT_ENC_LAYERS, TFM_OPT_DEC_LAYERS, TFM_OPT_MAX_POS, TFM_OPT_PRE_NORM,
    TFM_OPT_LEARNED_POS, TFM_OPT_RELATIVE_POS, TFM_OPT_ABSOLUTE_POS, TFM_OPT_ATTN_WINDOW,
    TFM_OPT_DROPOUT, TFM_OPT_ATTN_DROPOUT,
    TFM_OPT_ACT_DROPOUT, TFM_OPT_LABEL_SMOOTHING, TFM_OPT_VOCAB, TFM_OPT_SRC_VOCAB,
    TFM_OPT_TGT_VOCAB, TFM_OPT_VOCAB_SIZE,
    TFM_OPT_SRC, TFM_OPT_TGT, TFM_OPT_INPUT_FORMAT, TFM_OPT_MAX_LENGTH, TFM_OPT_NO_EOS,
    TFM_OPT_VALID_SRC, TFM_OPT_VALID_TGT, TFM_OPT_BATCH_TOKENS, TFM_OPT_ACCUM,
    TFM_OPT_SORT_WINDOW, TFM_OPT_SCHEDULE, TFM_OPT_LR_FACTOR, TFM_OPT_WARMUP,
    TFM_OPT_CLIP_NORM, TFM_OPT_EMA, TFM_OPT_SEED, TFM_OPT_THREADS, TFM_OPT_MAX_STEPS, TFM_OPT_MAX_EPOCHS, TFM_OPT_MAX_TIME,
    TFM_OPT_VALID_EVERY, TFM_OPT_VALID_BLEU, TFM_OPT_PATIENCE, TFM_OPT_SAVE_EVERY,
    TFM_OPT_KEEP, TFM_OPT_CHECKPOINT_DIR, TFM_OPT_AVERAGE_LAST, TFM_OPT_LOG,
    TFM_OPT_PROGRESS, TFM_OPT_DEBUG_NAN, TFM_OPT_RESUME, TFM_OPT_OUTPUT, TFM_OPT_INIT_ONLY,
    TFM_OPT_INIT, TFM_RUN_OPTION_COUNT
} tfm_run_option;

/* How an option relates to resuming: MODEL options are fixed by the
 * checkpoint (and by the model of --init, but for dropout and label
 * smoothing); TRAIN options change the run (a new value makes it differ
 * from an uninterrupted one); RUN options do not; ONCE options are not
 * stored (the run ignores PROGRESS: it is the caller's). */
typedef enum tfm_run_option_kind {
    TFM_KIND_MODEL, TFM_KIND_TRAIN, TFM_KIND_RUN, TFM_KIND_ONCE
} tfm_run_option_kind;

typedef struct tfm_run_option_info {
    const char *name;          /* "batch-tokens": the key is train.opt.NAME */
    int arg;                   /* as getopt_long's has_arg: 0 a flag (its text is "yes"),
                                  1 a value, 2 an optional value ("" when none) */
    tfm_run_option_kind kind;
} tfm_run_option_info;

extern const tfm_run_option_info tfm_run_options[TFM_RUN_OPTION_COUNT];

/* The text of option id's default into out (size bytes; 32 are enough), from
 * tfm_run_default_params(); false (and out "") when the option has none. */
bool tfm_run_option_default(tfm_run_option id, char *out, size_t size);

/* The effective values, typed. */
typedef struct tfm_run_params {
    const char *preset;        /* Default "base" */
    tfm_config model;          /* the preset with the overrides; on resume the
                                  options' (the trainer's model is the checkpoint's) */
    const char *vocab_path;    /* a vocabulary or a model file; NULL: none */
    const char *src_vocab_path, *tgt_vocab_path; /* a vocabulary per side instead (the
                                  model then shares only the decoder's embeddings) */
    int32_t vocab_size;        /* without a vocabulary: ids below it (the target's) */
    int32_t src_vocab_size;    /* the source's, when it differs; else 0 */
    const char *src, *tgt, *valid_src, *valid_tgt;
    tfm_corpus_params corpus;  /* format, max_length, append_eos, n_threads */
    tfm_train_params train;    /* seeds and threads set from seed and threads */
    uint64_t seed;             /* of everything (the weights get seed + 1).  Default 1 */
    int threads;               /* Default: tfm_cpu_count() */
    int64_t max_steps, max_epochs; /* 0: no limit */
    double max_time;           /* seconds; 0: no limit */
    int64_t valid_every;       /* Default 1000 */
    bool valid_bleu;
    int patience;              /* validations without improvement before stopping; 0: off */
    int64_t save_every;        /* Default 1000; 0: at the end only */
    int keep;                  /* checkpoints kept.  Default 5 */
    const char *checkpoint_dir; /* NULL: beside the output */
    int average_last;          /* > 0: the model is the average of the last so many */
    const char *log;
    const char *output;
    bool init_only, resume;
    const char *resume_from;   /* NULL: the newest checkpoint */
    const char *init;          /* --init: the model (or checkpoint) whose weights the run
                                  starts from, with a new optimiser, schedule and step
                                  count; NULL: random weights */
} tfm_run_params;

tfm_run_params tfm_run_default_params(void);

/* What a run reports. */
typedef enum tfm_run_event_kind {
    TFM_RUN_WARNING,           /* text: a warning; the run goes on */
    TFM_RUN_DATA,              /* a corpus was loaded: text "training" or "validation",
                                  data its counts */
    TFM_RUN_START,             /* the trainer is ready: text the checkpoint resumed
                                  from, or NULL */
    TFM_RUN_STEP,              /* an update was made: update; seconds it took */
    TFM_RUN_VALID,             /* a validation: valid and what follows from it */
    TFM_RUN_EARLY_STOP,        /* after the VALID that exhausted the patience (and its log
                                  line): bad_validations, best_step, best_path */
    TFM_RUN_CHECKPOINT,        /* text: the checkpoint written */
    TFM_RUN_END,               /* the model is written: end, averaged, text its path */
} tfm_run_event_kind;

/* Across processes the ranks end for the weightiest reason any of them
 * has, in this order: PATIENCE over STOPPED over LIMIT. */
typedef enum tfm_run_end {
    TFM_RUN_LIMIT,             /* a limit of updates, epochs or time was reached */
    TFM_RUN_STOPPED,           /* the stop flag was set (on this rank or another) */
    TFM_RUN_PATIENCE,          /* early stopping */
} tfm_run_end;

typedef struct tfm_run_event {
    tfm_run_event_kind kind;
    const char *text;
    const char *file;          /* WARNING: the file it is about (the log), or NULL */
    int64_t step;              /* updates made */
    double epoch;              /* tfm_trainer_epoch */
    double elapsed;            /* seconds of training, earlier processes' included */
    double time;               /* when: tfm_clock_seconds() */
    double seconds;            /* STEP, VALID: how long it took */
    const tfm_corpus_stats *data;     /* DATA */
    const tfm_step_result *update;    /* STEP */
    const tfm_valid_result *valid;    /* VALID, and: */
    double loss, ppl;                 /* per target token (STEP and VALID) */
    bool improved;                    /* the best so far (written to the best model) */
    bool early_stop;                  /* patience is exhausted */
    int bad_validations;              /* in a row */
    int64_t best_step;
    const char *best_path;            /* MODEL.best */
    tfm_run_end end;                  /* END */
    int averaged;                     /* END: checkpoints averaged (0: none) */
    double run_seconds;               /* END: this process's time of training */
    int64_t run_tokens;               /* END: target tokens of this process's updates */
    int64_t run_updates;              /* END: and their number */
    int ranks;                        /* processes training together (1: this one) */
    double run_wait_seconds;          /* END: of run_seconds, waiting for other ranks */
    double run_reduce_seconds;        /* END: and summing gradients across them */
} tfm_run_event;

/* What a run keeps in its checkpoints besides its options ("train.elapsed",
 * "train.best_score", "train.best_step", "train.bad_validations"). */
typedef struct tfm_run_state {
    double elapsed;            /* seconds of training before this process */
    double best_score;         /* of the best validation: higher is better (BLEU with
                                  decodes, else minus the log of the perplexity) */
    int64_t best_step;
    int bad_validations;       /* in a row since the best */
    bool has_best;
} tfm_run_state;

/* Records a validation's score at step: true when it is the best so far
 * (the first always is); else counts one more bad validation.  A run stops
 * early when patience > 0 and bad_validations reaches it. */
bool tfm_run_state_validation(tfm_run_state *s, double score, int64_t step);

/* The event is valid during the call only. */
typedef void tfm_run_report(void *ctx, const tfm_run_event *ev);

/* The training log (--log): a TSV file of a line per update (STEP event)
 * and per validation (VALID) under a header line,
 *     step epoch loss ppl lr tokens_per_s elapsed set bleu exact tokens
 * (set "train" or "valid"; lr and tokens_per_s 0, bleu and exact "-" where
 * they do not apply).  A run writes it itself; these are for a front end
 * of its own.  Opened for a resumed run (resume), an existing log is added
 * to; else it is written anew.  A line that cannot be written (a full disk,
 * a pipe whose reader went away) is TFM_ERR_IO "write error: REASON": the
 * run then warns and goes on without its log. */
typedef struct tfm_train_log tfm_train_log;

tfm_status tfm_train_log_open(const char *path, bool resume, tfm_train_log **out, tfm_error *err);
/* Writes ev's line (nothing for other events) and flushes it. */
tfm_status tfm_train_log_write(tfm_train_log *log, const tfm_run_event *ev, tfm_error *err);
void tfm_train_log_close(tfm_train_log *log);

typedef struct tfm_run tfm_run;

/* A run of the options given (NULL: not given; texts as in
 * tfm_run_option_info), which must outlive it.  On resume, reads the
 * checkpoint's options and run state and the vocabulary (the checkpoint's,
 * else the options'), and checks the model options (MODEL options cannot
 * change on resume).  report (may be NULL) gets warnings from now on.
 * TFM_ERR_ARG: the options do not describe a run (a usage error, the
 * message naming the option); other statuses: a file could not be read. */
tfm_status tfm_run_create(const char *const given[TFM_RUN_OPTION_COUNT], tfm_run_report *report,
                          void *ctx, tfm_run **out, tfm_error *err);
void tfm_run_free(tfm_run *r);

const tfm_run_params *tfm_run_params_of(const tfm_run *r);
/* The effective text of option id (NULL: none). */
const char *tfm_run_option_value(const tfm_run *r, tfm_run_option id);
/* Appends the options that make the run, as a command line would give
 * them: " --NAME=VALUE" for each option with a value but the ONCE ones,
 * and the threads in use when none were given. */
tfm_status tfm_run_options_format(const tfm_run *r, tfm_buf *out);
/* The trainer, once tfm_run_train has made it (NULL before). */
const tfm_trainer *tfm_run_trainer(const tfm_run *r);

/* The run stops at the end of the update under way once *flag is non-zero
 * (a signal handler's sig_atomic_t), saving a checkpoint and the model. */
void tfm_run_set_stop_flag(tfm_run *r, const volatile sig_atomic_t *flag);

/* Trains across the processes of d (which outlives the run; NULL: this one
 * alone), before tfm_run_train: every rank trains its share of each update
 * (tfm_trainer_step), and rank 0 alone validates, writes the checkpoints,
 * the best model, the log and the model, and reports validations.  The
 * ranks check that they read the same training data and start from the
 * same weights (TFM_ERR_FORMAT naming the first rank that does not), and
 * stop together.  Every checkpoint records the number of processes
 * ("train.ranks"); a run resumed on another number takes its own number x
 * accum batches per update from the checkpoint's position on, with a
 * warning when that differs from the checkpoint's (--accum can keep it:
 * 2 processes' run resumed on 1 with --accum 2 continues exactly). */
void tfm_run_set_dist(tfm_run *r, tfm_dist *d);

/* Sets the BLAS's threads (threads), loads the data, makes (or resumes)
 * the trainer, opens the log (log) and trains to a limit, a stop or early
 * stopping; then validates once more if the last update was not
 * validated, saves a checkpoint and writes the model.  *end says why it
 * ended. */
tfm_status tfm_run_train(tfm_run *r, tfm_run_end *end, tfm_error *err);

/* Writes a freshly initialised model of the options (init_only). */
tfm_status tfm_run_init_model(tfm_run *r, tfm_error *err);

/* The time left at time t: the nearest of the limits, at this process's
 * pace so far; negative when unknown. */
double tfm_run_eta(const tfm_run *r, double t);

/* ---- a run's messages to a person ------------------------------------------------ */

/* Appends what ev says to a person, as 'train' prints it on stderr: lines
 * ending in '\n', without the program's name ("valid step 1000 loss 2.071
 * ppl 7.93 (4.2s) best so far").  Nothing for STEP: see tfm_run_progress.
 * A front end chooses what to show: train shows CHECKPOINT with -v only,
 * and WARNING through its own warning printer (ev->file names the file). */
tfm_status tfm_run_event_text(const tfm_run *r, const tfm_run_event *ev, tfm_buf *out);

/* The progress line of the updates since the last one: their loss and
 * perplexity per target token, the learning rate, the target tokens per
 * second, the elapsed time and the time left (tfm_run_eta).  Start it with
 * last = the START event's time. */
typedef struct tfm_run_progress {
    double last;               /* time of the last line */
    double loss, nll;          /* sums since then ... */
    int64_t tokens;            /* ... over so many target tokens */
} tfm_run_progress;

/* Adds a STEP event's figures (other events: nothing). */
void tfm_run_progress_add(tfm_run_progress *p, const tfm_run_event *ev);
/* Appends the line at STEP event ev, without '\n' ("step 1200 epoch 0.41
 * loss 2.531 ppl 9.87 lr 7.00e-04 1502 tok/s elapsed 0:13:02 ETA 0:16:58"),
 * and starts the sums anew. */
tfm_status tfm_run_progress_line(tfm_run_progress *p, const tfm_run *r, const tfm_run_event *ev,
                                 tfm_buf *out);

/* Seconds as "1:02:03" (hours unbounded); "-" when negative or unknown. */
void tfm_format_hms(double seconds, char *out, size_t size);

/* "90", "90s", "1h30m", "2d", "1.5h": seconds (TFM_ERR_ARG naming option). */
tfm_status tfm_parse_duration(const char *option, const char *text, double *seconds,
                              tfm_error *err);

#endif
