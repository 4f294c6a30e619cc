/* tfm/pass.h - the passes that run a model over batches (lib/pass): the
 * batched encoder and the incremental decoder of inference, the
 * cross-attention of chosen targets (tfm_aligner), alignments from
 * attention, and the forward and backward passes over batches of sentence
 * pairs that training, scoring and inspection share (tfm_pair_batch in a
 * tfm_pass_workspace), with their attention weights.
 *
 * Shapes in comments use: B sentences in a batch, S source length, T target
 * length, D = d_model, H heads, Dh = D / H, F = d_ff, V vocabulary size,
 * R rows of the decoder (hypotheses: sentences x beam).
 */
#ifndef TFM_PASS_H
#define TFM_PASS_H

#include "tfm/core.h"
#include "tfm/model.h"

/* ---- inference: the encoder ------------------------------------------------------------ */

/* Runs the encoder over batches of sentences.  Holds buffers sized for the
 * largest batch seen, so no memory is allocated once the shapes settle.  The
 * model must outlive the encoder; one encoder per thread. */
typedef struct tfm_encoder tfm_encoder;

/* encode(1)'s batches per thread, at most (its --batch-size and
 * --batch-tokens defaults): sentences, and source tokens. */
enum { TFM_ENCODE_BATCH_SIZE = 128, TFM_ENCODE_BATCH_TOKENS = 8192 };

tfm_status tfm_encoder_create(const tfm_model *m, tfm_encoder **out, tfm_error *err);
void tfm_encoder_free(tfm_encoder *e);

/* Encodes B sentences: ids[b] holds lens[b] source ids (lens[b] may be 0;
 * ids[b] is then not read).  states receives the final encoder states of all
 * sentences packed one after another: sum(lens) x D floats, sentence b at
 * row offset sum(lens[0..b)); nothing more is written.  The sentences are
 * packed without padding inside too (every GEMM runs over the sum(lens)
 * real rows; attention per sentence over its own rows), so the result of a
 * sentence does not depend on the others in the batch, up to float rounding
 * (~1e-6: the BLAS may block a product of N rows differently from one of M).
 * TFM_ERR_RANGE for an id outside the source vocabulary or a sentence
 * longer than max_positions. */
tfm_status tfm_encoder_forward(tfm_encoder *e, int B, const int32_t *const *ids, const int *lens,
                               float *states, tfm_error *err);

/* ---- inference: the incremental decoder -------------------------------------------------- */

/* Decodes many sentences at once, one target position per step, caching each
 * layer's self-attention keys and values and computing the encoder-decoder
 * keys and values once per sentence.  The model must outlive the decoder;
 * one decoder per thread. */
typedef struct tfm_decoder tfm_decoder;

tfm_status tfm_decoder_create(const tfm_model *m, tfm_decoder **out, tfm_error *err);
void tfm_decoder_free(tfm_decoder *d);

/* Starts a batch: n_sentences sources (states[s]: src_lens[s] x D floats, the
 * encoder's output; the decoder copies what it needs, so states may be freed
 * after the call), and R rows, row r decoding sentence row_sentence[r]
 * (several rows per sentence for a beam).  max_steps bounds the target
 * length of this batch (for the caches): 1 to max_positions.  When the
 * sources lie one after another in memory, as tfm_encoder_forward packs
 * them, their encoder-attention keys and values come from one GEMM per layer
 * without a copy.  A source with no states (src_lens[s] == 0) is allowed:
 * encoder-decoder attention then contributes zeros. */
tfm_status tfm_decoder_start(tfm_decoder *d, int n_sentences, const float *const *states,
                             const int *src_lens, int R, const int *row_sentence, int max_steps,
                             tfm_error *err);

/* Feeds one token per row (tokens[r]: the previous output, <s> at step 0) and
 * writes the log-probabilities of the next token: log_probs[R, V_tgt].
 * TFM_ERR_RANGE (and no step taken) for a token outside the target
 * vocabulary or a step beyond max_steps. */
tfm_status tfm_decoder_step(tfm_decoder *d, const int32_t *tokens, float *log_probs,
                            tfm_error *err);

/* tfm_decoder_step without the log-softmax pass over [R, V_tgt]: writes the
 * logits [R, V_tgt] and each row's stats [R], from which a search takes the
 * few log-probs it needs. */
tfm_status tfm_decoder_step_logits(tfm_decoder *d, const int32_t *tokens, float *logits,
                                   tfm_logit_stats *stats, tfm_error *err);
/* The same for a search that takes the best token alone and no log-prob
 * (greedy search whose scores are not wanted): stats' max and argmax only,
 * log_sum left out (NaN, or computed when the decoder is not packed), which
 * saves the exponential of every logit, a tenth of a greedy step. */
tfm_status tfm_decoder_step_best(tfm_decoder *d, const int32_t *tokens, float *logits,
                                 tfm_logit_stats *stats, tfm_error *err);

/* Restricts the output layer, from the next step until the next
 * tfm_decoder_start, to ids[0..n) (distinct, sorted, in the target
 * vocabulary; a lexical shortlist's): each step computes their logits
 * only, bit for bit as over the whole vocabulary, and writes -infinity for
 * every other id; the stats are those of the restricted row (the softmax
 * over ids), argmax a target id.  ids NULL or n 0: the whole vocabulary.
 * The caller may change the logits between steps, but outside ids only to
 * -infinity: a step given the same logits buffer as the step before writes
 * the ids alone in the rows that step filled (the searches only ever forbid
 * ids, and a full row of -infinity per row and step costs a vocabulary's
 * memory traffic).  TFM_ERR_ARG for ids that are not so, TFM_ERR_NOMEM. */
tfm_status tfm_decoder_restrict(tfm_decoder *d, const int32_t *ids, int n, tfm_error *err);

/* Rearranges rows after a beam-search step: new row i continues old row
 * parent[i] (its caches are copied), for i in [0, new_R).  Rows may be
 * dropped (finished) or duplicated (a beam splitting); new_R may exceed the
 * current rows (e.g. one row per sentence at step 0, a beam after it) and
 * may be 0.  TFM_ERR_ARG for a parent outside [0, rows). */
tfm_status tfm_decoder_reorder(tfm_decoder *d, int new_R, const int *parent, tfm_error *err);

/* The current number of rows and target position. */
int tfm_decoder_rows(const tfm_decoder *d);
int tfm_decoder_position(const tfm_decoder *d);

/* The reference: the whole decoder recomputed over a full target prefix
 * without caches, for one sentence.  states: [src_len, D] (may be NULL when
 * src_len is 0); tgt: T ids beginning with <s>; log_probs: [T, V_tgt], row t
 * the distribution after tgt[0..t].  Allocates per call.  Tests check the
 * incremental decoder against it. */
tfm_status tfm_decoder_forward_full(const tfm_model *m, const float *states, int src_len,
                                    const int32_t *tgt, int T, float *log_probs, tfm_error *err);

/* ---- inference: the cross-attention of chosen targets ------------------------------------- */

/* The decoder's teacher-forced pass over targets already chosen (a
 * search's hypotheses), for the encoder-decoder attention of one layer:
 * the weights inspect-attn reads word alignments from (tfm_model_attention
 * after tfm_model_loss, below), computed from encoder states instead of
 * source ids, so that decode can align its own output (decode --alignment).
 * Each target <s> y1 .. yn goes through the decoder's layers all positions
 * at once (the computation of tfm_decoder_forward_full, with the linear
 * layers packed when the model is packed for decoding), up to the chosen
 * layer's weights: the rest of that layer, the layers above it and the
 * output projection are left out.  Holds buffers sized for the largest run
 * seen.  The model must outlive it; one per thread.
 *
 *     tfm_aligner *al;
 *     tfm_aligner_create(model, &al, &err);
 *     // targets 0 and 1 both of sentence 0 (an n-best list), target 2 of sentence 1
 *     tfm_aligner_run(al, 2, states, src_lens, 3, (int[]){0, 0, 1}, tgt, tgt_lens,
 *                     model->config.n_decoder_layers - 1, &err);
 *     const float *w = tfm_aligner_weights(al, 2);  // [tgt_lens[2] + 1, src_lens[1]]
 */
typedef struct tfm_aligner tfm_aligner;

tfm_status tfm_aligner_create(const tfm_model *m, tfm_aligner **out, tfm_error *err);
void tfm_aligner_free(tfm_aligner *a);

/* Runs n targets: target i is tgt_lens[i] ids tgt[i] (without <s> and
 * </s>; tgt[i] not read when the length is 0) decoded from sentence
 * sentence[i] of n_sentences sources (states[s]: src_lens[s] x D floats,
 * the encoder's output, read during the call; several targets may share a
 * sentence).  layer: a decoder layer, 0-based.  TFM_ERR_RANGE for a layer,
 * an id or a length out of range, TFM_ERR_ARG for a sentence out of range
 * or a model whose weights are quantized and not packed, TFM_ERR_NOMEM. */
tfm_status tfm_aligner_run(tfm_aligner *a, int n_sentences, const float *const *states,
                           const int *src_lens, int n, const int *sentence,
                           const int32_t *const *tgt, const int *tgt_lens, int layer,
                           tfm_error *err);

/* Keeps head's weights alone (0-based) instead of the mean of the heads
 * (head -1, the default): a model trained with guided alignment aligns with
 * one head of one layer (config.alignment_layer, head 0, as Marian and
 * CTranslate2).  TFM_ERR_RANGE for another number. */
tfm_status tfm_aligner_set_head(tfm_aligner *a, int head, tfm_error *err);

/* Target i's weights after the last successful run (NULL for i out of
 * range): [tgt_lens[i] + 1, src_lens[sentence[i]]] floats, row t the mean
 * over the heads (taken in double, as tfm_attention_gather's mean) of
 * query t's distribution over the source states, where query t reads <s>
 * y1 .. yt and predicts y(t+1), the last one </s>: the rows and columns of
 * TFM_ATTENTION_CROSS.  Valid until the next run or tfm_aligner_free. */
const float *tfm_aligner_weights(const tfm_aligner *a, int i);

/* ---- alignments from attention (align.c) ------------------------------------------------- */

/* Hard alignment from one matrix w [n_rows, n_cols] (rows: target tokens,
 * columns: source positions): for each row t in order, the column i of its
 * largest weight (the first on ties) as "i-t", 0-based, separated by
 * spaces, appended to out (fast_align's and Marian's "source-target" form).
 * A row whose largest weight lies at a column >= n_words (the source's </s>)
 * is left unaligned, as fast_align leaves a word it cannot align. */
tfm_status tfm_align_hard(const float *w, int n_rows, int n_cols, int n_words, tfm_buf *out);

/* Soft alignment in Marian's form: each row's weights ("%.6g") joined by
 * ',', the rows joined by ' ', appended to out. */
tfm_status tfm_align_soft(const float *w, int n_rows, int n_cols, tfm_buf *out);

/* ---- passes over sentence pairs: training, scoring, inspecting ------------------------------ */

/* The training objective of a batch of sentence pairs, its gradient, and the
 * same forward pass for validation, scoring (score -m) and the attention
 * weights (inspect-attn): one batch type (tfm_pair_batch) and one workspace
 * (tfm_pass_workspace) serve all of them.
 *
 * A batch is B sentence pairs.  The decoder reads <s> followed by the target
 * (teacher forcing) and learns to predict the target followed by </s>, so a
 * pair with a target of n tokens makes n + 1 predictions.  The loss is the
 * label-smoothed cross-entropy with eps = config.label_smoothing (fairseq's
 * formula: (1 - eps) * nll + eps / V * sum over the vocabulary of -log p;
 * lib/nn/loss.c), summed over every prediction; a label equal to pad_id
 * counts nowhere.  Dropout (config.dropout on embeddings + positions and on
 * each sublayer's output, config.attention_dropout on attention weights)
 * applies only in training.
 *
 * Sentences are packed one after another without padding (as
 * tfm_encoder_forward does): the linear layers, norms and the FFN are GEMMs
 * over all the batch's rows, attention runs per sentence and head, and the
 * output projection and the loss are one [rows, V] product.  So a sentence's
 * loss does not depend on its companions, up to float rounding.
 *
 * A training step, in outline (error checks left out):
 *
 *     tfm_pass_workspace *ws;
 *     tfm_pass_workspace_create(model, &ws, &err);
 *     float *grads = calloc(tfm_params_count(&model->config), sizeof *grads);
 *     tfm_rng rng;
 *     tfm_rng_seed(&rng, seed);
 *     for (each step) {
 *         memset(grads, 0, n_params * sizeof *grads);   // gradients accumulate
 *         tfm_loss_sums sums;
 *         tfm_model_forward_backward(ws, &batch, &rng, 1.0f, grads, &sums, &err);
 *         // grads now hold d(sums.loss)/d(params): divide by sums.n_tokens
 *         // (fairseq's sample size), then update model->data (Adam)
 *     }
 *     tfm_pass_workspace_free(ws);
 */

/* B sentence pairs, as every pass takes them (the trainer's tfm_batch holds
 * one): src[b] holds src_lens[b] source ids and tgt[b]
 * tgt_lens[b] target ids, without <s> or </s> (the model adds them).  A
 * length may be 0 (the ids pointer is then not read); a source may be up to
 * max_positions long and a target up to max_positions - 1 (with <s> in
 * front).  The caller owns all the arrays. */
typedef struct tfm_pair_batch {
    int B;
    const int32_t *const *src;
    const int *src_lens;
    const int32_t *const *tgt;
    const int *tgt_lens;
} tfm_pair_batch;

/* Sums over the predictions of a batch (divide by n_tokens for means; the
 * paper's perplexity is exp(nll / n_tokens)). */
typedef struct tfm_loss_sums {
    double loss;      /* label-smoothed cross-entropy, nats */
    double nll;       /* -log p(label), nats */
    int64_t n_tokens; /* predictions counted: sum of tgt_lens[b] + 1, less <pad> labels */
} tfm_loss_sums;

/* Holds the activations of a batch (for the backward pass when training;
 * read by tfm_model_attention when inspecting), and the gradient scratch,
 * grown to the largest batch shape seen: once the shapes settle, a
 * step allocates nothing.  Memory grows with the batch: per source row and
 * encoder layer ~(8 D + F) floats, per target row and decoder layer
 * ~(12 D + F), the [target rows, V] logits once, and the attention weights,
 * H n_q n_k floats per sentence and attention, or H n (2r + 1) for a
 * self-attention restricted to a window of r (so a base model at 25,000
 * tokens needs several GB); a large batch may be split into several calls
 * whose gradients accumulate.  The model must outlive the workspace; its
 * parameters may change between calls (the optimizer updates them in
 * place).  One workspace per thread. */
typedef struct tfm_pass_workspace tfm_pass_workspace;

tfm_status tfm_pass_workspace_create(const tfm_model *m, tfm_pass_workspace **out,
                                      tfm_error *err);
void tfm_pass_workspace_free(tfm_pass_workspace *ws);

/* Threads for the work between the BLAS's matrix products: attention
 * sentence by sentence, the norms, dropout, the loss and the other
 * elementwise passes (default 1; clamped to 1..64).  The work is split in
 * pieces fixed by the batch alone, so results are the same bit for bit for
 * any count.  With more than one, OpenBLAS is set to one thread while the
 * attention runs (its products are small; one level of threads at a time)
 * and given its count back after, a process-wide setting: run one
 * multi-threaded workspace at a time. */
void tfm_pass_workspace_set_threads(tfm_pass_workspace *ws, int n_threads);

/* The forward pass only: the loss of a batch, and optionally what "score"
 * prints.  dropout: apply the training dropout (from rng, which may be NULL
 * when dropout is false or both rates are 0); false for validation and
 * scoring.  sums: receives the batch's sums (or NULL).  sentence_logprob:
 * [B] or NULL; receives each pair's log p(target + </s> | source), the sum
 * of its tokens'.  token_logprob: NULL or sum(tgt_lens[b] + 1) floats; pair b's
 * tgt_lens[b] + 1 values (log p of each label, </s> last) start at offset
 * sum over b' < b of (tgt_lens[b'] + 1).  A <pad> label gets 0 in both.
 * TFM_ERR_RANGE for an id outside its vocabulary or a sentence too long,
 * TFM_ERR_ARG for a missing rng, TFM_ERR_NOMEM. */
tfm_status tfm_model_loss(tfm_pass_workspace *ws, const tfm_pair_batch *batch, bool dropout,
                          tfm_rng *rng, tfm_loss_sums *sums, double *sentence_logprob,
                          float *token_logprob, tfm_error *err);

/* One training step's work: the forward pass with dropout (rng as for
 * tfm_model_loss with dropout true), then the backward pass.  grads:
 * tfm_params_count(&config) floats in the layout of tfm_params (lay it out
 * with tfm_params_layout to name its parts); ACCUMULATES
 * grad_scale * d(sums->loss)/d(params), so zero it before a step, or not
 * between the parts of a split batch.  A shared embedding matrix gathers the
 * gradients of all its uses.  Pass the same grads buffer every step (the
 * workspace keeps its layout; a new buffer is laid out again, which
 * allocates).  The rng is advanced by the dropout masks drawn, in a fixed
 * order, so the same state, batch, parameters and BLAS thread count give
 * the same gradients bit for bit.  Errors as tfm_model_loss; on an error grads are unchanged. */
tfm_status tfm_model_forward_backward(tfm_pass_workspace *ws, const tfm_pair_batch *batch,
                                      tfm_rng *rng, float grad_scale, float *grads,
                                      tfm_loss_sums *sums, tfm_error *err);

/* ---- inspection: the attention weights --------------------------------------------------- */

/* What the model attends to, as inspect-attn shows it.  Run tfm_model_loss
 * with dropout false on a batch of pairs, then read each pair's weights:
 * they are the ones the forward pass computed and saved (no second code
 * path), and that pass is the computation the incremental decoder performs
 * (its log-probs equal the search's, up to float rounding; tested).  For a
 * source alone, decode first (tfm_search_run) and take the hypothesis as the
 * target: the cross-attention is then the one that produced it. */

typedef enum tfm_attention_kind {
    TFM_ATTENTION_ENCODER = 0, /* encoder self-attention: queries and keys are the
                                  source tokens (n_q = n_k = source length) */
    TFM_ATTENTION_DECODER = 1, /* decoder self-attention, causal: queries and keys are
                                  the decoder's inputs <s> y1 .. yn (n_q = n_k = n + 1);
                                  weights on later positions are exactly 0 */
    TFM_ATTENTION_CROSS = 2,   /* encoder-decoder attention: query t reads the decoder's
                                  input t and predicts y(t+1) (the last one </s>), so
                                  n_q = n + 1; the keys are the source tokens */
} tfm_attention_kind;

/* Pair b's weights of one kind in one layer (0-based, of the encoder stack
 * for TFM_ATTENTION_ENCODER, else of the decoder stack) after the last
 * forward pass of ws (tfm_model_loss or tfm_model_forward_backward).
 * Sets *n_q and *n_k, and when weights is not NULL writes [H, n_q, n_k]
 * floats there: row (h, i) is head h's softmax distribution of query i
 * over the keys (it sums to 1; exactly 0 where masked).  The workspace
 * keeps only the band of a restricted self-attention (O(r n) floats, not
 * n x n); this is where it becomes a whole matrix, zeros outside the
 * band, for one sentence.  They are the weights before attention dropout,
 * which applies only in training.  n_k may be 0 (an empty source).
 * TFM_ERR_ARG when no forward pass has succeeded on ws, TFM_ERR_RANGE for
 * b, kind or layer out of range. */
tfm_status tfm_model_attention(const tfm_pass_workspace *ws, int b, tfm_attention_kind kind,
                               int layer, float *weights, int *n_q, int *n_k, tfm_error *err);

#endif
