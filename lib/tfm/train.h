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

#include "tfm/core.h"
#include "tfm/model.h"
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
/* A hash of every id of every pair in order: a resumed run checks that it
 * reads the data it was trained on. */
uint64_t tfm_corpus_hash(const tfm_corpus *c);

typedef enum tfm_corpus_format {
    TFM_CORPUS_AUTO = 0, /* ids when the first non-empty line of the file is an id line */
    TFM_CORPUS_IDS,      /* id lines, as 'tokenize' writes them */
    TFM_CORPUS_TEXT,     /* text lines, encoded with the vocabulary's BPE */
} tfm_corpus_format;

typedef struct tfm_corpus_params {
    tfm_corpus_format format;   /* of both files; AUTO decides for each. Default AUTO */
    const tfm_vocab *vocab;     /* encodes text; bounds ids.  May be NULL for ids */
    int32_t vocab_size;         /* without a vocabulary: ids must be below this
                                   (0: any id) */
    int max_length;             /* pairs with more ids on either side are skipped;
                                   0: no limit.  Default 256 */
    bool append_eos;            /* end every source with </s> (TFM_ID_EOS), as 'encode'
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

/* A batch of sentence pairs.  The pointers are valid until the next call of
 * the batcher that made it. */
typedef struct tfm_batch {
    int B;
    const int32_t *const *src;  /* [B] source ids */
    const int *src_lens;        /* [B] */
    const int32_t *const *tgt;  /* [B] target ids, without <s> and </s> */
    const int *tgt_lens;        /* [B] */
    const size_t *pairs;        /* [B] their numbers in the corpus */
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

/* The sum of squares of x in double precision (a NaN or an infinity in x
 * makes the result NaN or infinite). */
double tfm_sum_squares(const float *x, size_t n);

/* An exponential moving average of the weights: ema = decay ema + (1 - decay) w. */
void tfm_ema_update(float decay, size_t n, float *ema, const float *w);

/* ---- training ------------------------------------------------------------------- */

typedef struct tfm_train_params {
    tfm_batcher_params batches;
    int accum;             /* batches per update (gradient accumulation).  Default 1 */
    double lr_factor;      /* of tfm_lr_schedule.  Default 1 (the paper's formula) */
    int warmup;            /* Default 4000 */
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
                              (tfm_train_workspace_set_threads) and the optimizer's
                              passes over the parameters.  Results do not depend
                              on it.  Default 1 */
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
 * the weights are those of the last good update. */
tfm_status tfm_trainer_step(tfm_trainer *t, tfm_step_result *r, tfm_error *err);

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

#endif
