/* tfm/model.h - the Transformer of "Attention Is All You Need": its
 * configuration, its parameters, model files, and the forward pass used for
 * inference (a batched encoder and an incremental decoder).
 *
 * Shapes in comments use: B sentences in a batch, S source length, T target
 * length, D = d_model, H heads, Dh = D / H, F = d_ff, V vocabulary size,
 * R rows of the decoder (hypotheses: sentences x beam).
 *
 * Linear layers store their weight as [out, in], as PyTorch's nn.Linear does,
 * and compute y = x W^T + b, so a model file opens in Python unchanged.
 */
#ifndef TFM_MODEL_H
#define TFM_MODEL_H

#include <stdio.h>

#include "tfm/core.h"
#include "tfm/safetensors.h"
#include "tfm/text.h"

/* ---- configuration ---------------------------------------------------------- */

/* The absolute positions added to the embeddings. */
typedef enum tfm_pos_kind {
    TFM_POS_SINUSOIDAL = 0, /* PE(pos,2i) = sin(pos/10000^(2i/D)), PE(pos,2i+1) = cos(...) */
    TFM_POS_LEARNED = 1,    /* a learned [max_positions, D] table */
    TFM_POS_NONE = 2,       /* none: the model has relative positions only */
} tfm_pos_kind;

typedef struct tfm_config {
    int32_t src_vocab_size;
    int32_t tgt_vocab_size;
    int d_model;
    int d_ff;
    int n_heads;
    int n_encoder_layers;
    int n_decoder_layers;
    int max_positions;        /* longest sequence (source or target) the model takes */
    tfm_pos_kind positions;   /* absolute positions */
    int relative_positions;   /* 0: none; K > 0: relative position representations
                                 (Shaw et al., 2018) in every self-attention layer,
                                 distances clipped to [-K, K]: a table of keys and one of
                                 values, [2K+1, Dh] each, shared by the layer's heads */
    bool pre_norm;            /* x + Sublayer(LayerNorm(x)) and a final LayerNorm; else
                                 the paper's post-norm LayerNorm(x + Sublayer(x)) */
    bool shared_embeddings;   /* one matrix for source, target and the output projection
                                 (requires src_vocab_size == tgt_vocab_size) */
    bool shared_decoder_embeddings; /* without shared_embeddings: one matrix for the
                                 decoder's input embedding and the output projection
                                 (fairseq's --share-decoder-input-output-embed), the
                                 encoder's its own: what separate vocabularies want */
    int attention_window;     /* 0: full attention; r > 0: self-attention restricted to
                                 the r neighbours on each side (decoder: r before) */
    float dropout;            /* on sublayer outputs and on embeddings + positions */
    float attention_dropout;  /* on attention weights */
    float activation_dropout; /* on the FFN's hidden activations, after the ReLU */
    float label_smoothing;
    float layer_norm_eps;     /* 1e-5, PyTorch's default */
    int32_t pad_id, unk_id, bos_id, eos_id;
} tfm_config;

/* Fills c with a named preset: "base" (N=6, D=512, F=2048, H=8, dropout 0.1),
 * "big" (N=6, D=1024, F=4096, H=16, dropout 0.3), "small" (N=3, D=256,
 * F=1024, H=4, dropout 0.1), "tiny" (N=2, D=64, F=256, H=4, dropout 0.1).
 * N is the number of encoder layers and of decoder layers.  All presets:
 * sinusoidal positions, post-norm, shared embeddings, max_positions 1024,
 * full attention, attention_dropout and activation_dropout 0 (the paper
 * names neither), no relative positions, label_smoothing 0.1, layer_norm_eps
 * 1e-5, and the vocabulary's fixed special ids (TFM_ID_PAD ...).
 * Vocabulary sizes are left at 0 for the caller (they come from the
 * vocabulary).  Unknown names are TFM_ERR_ARG listing the known ones. */
tfm_status tfm_config_preset(const char *name, tfm_config *c, tfm_error *err);
/* The names of the presets, NULL-terminated. */
extern const char *const tfm_config_preset_names[];

/* Checks every field and their agreement: sizes positive and below limits
 * that keep size arithmetic safe, vocabulary sizes at least 4 (the
 * specials), D divisible by H, D even for sinusoidal positions,
 * relative_positions from 0 to max_positions - 1 (no distance is longer),
 * some positions (absolute, relative or both), equal vocabulary sizes for
 * shared embeddings, rates in [0, 1), layer_norm_eps in
 * (0, 1), distinct special ids inside both vocabularies.  TFM_ERR_RANGE with
 * a message naming the field (by its model-file metadata key). */
tfm_status tfm_config_validate(const tfm_config *c, tfm_error *err);

/* Appends a one-line description of the model for people, as `train`,
 * `encode` and `score -m` print it: "d_model 256, d_ff 1024, 4 heads, 3+3
 * layers, post-norm, sinusoidal positions, vocabulary 8000, 7577600
 * parameters" (the vocabulary as "8000/8100" when the sides differ;
 * positions "relative positions (clipped at 16)", "learned and relative
 * positions (...)", ...).  c must be valid; TFM_ERR_NOMEM when memory runs
 * out. */
tfm_status tfm_config_describe(const tfm_config *c, tfm_buf *out);

/* ---- parameters -------------------------------------------------------------- */

typedef struct tfm_linear {
    float *weight; /* [out, in] */
    float *bias;   /* [out] */
} tfm_linear;

typedef struct tfm_layer_norm {
    float *weight; /* [D] (gamma) */
    float *bias;   /* [D] (beta) */
} tfm_layer_norm;

/* q, k and v are contiguous: k.weight == q.weight + D*D and v.weight ==
 * k.weight + D*D (biases likewise), so one GEMM with a [3D, D] weight computes
 * all three for self-attention. */
typedef struct tfm_attention {
    tfm_linear q_proj, k_proj, v_proj, out_proj;
    float *relative_keys;   /* [2K+1, Dh] a^K of relative positions (self-attention
                               with relative_positions K > 0), else NULL */
    float *relative_values; /* [2K+1, Dh] a^V, else NULL */
} tfm_attention;

typedef struct tfm_encoder_layer {
    tfm_attention self_attn;
    tfm_layer_norm self_attn_layer_norm;
    tfm_linear fc1; /* [F, D] */
    tfm_linear fc2; /* [D, F] */
    tfm_layer_norm final_layer_norm;
} tfm_encoder_layer;

typedef struct tfm_decoder_layer {
    tfm_attention self_attn;
    tfm_layer_norm self_attn_layer_norm;
    tfm_attention encoder_attn;
    tfm_layer_norm encoder_attn_layer_norm;
    tfm_linear fc1;
    tfm_linear fc2;
    tfm_layer_norm final_layer_norm;
} tfm_decoder_layer;

/* Named pointers into one float buffer (or into a gradient or Adam-moment
 * buffer of the same layout).  Shared matrices point to the same memory. */
typedef struct tfm_params {
    float *src_embed;       /* [V_src, D]  encoder.embed_tokens.weight */
    float *tgt_embed;       /* [V_tgt, D]  decoder.embed_tokens.weight (== src_embed if shared) */
    float *output_proj;     /* [V_tgt, D]  decoder.output_projection.weight (== tgt_embed if shared) */
    float *src_positions;   /* [max_positions, D] learned only, else NULL */
    float *tgt_positions;
    tfm_encoder_layer *encoder_layers; /* [n_encoder_layers] */
    tfm_decoder_layer *decoder_layers; /* [n_decoder_layers] */
    tfm_layer_norm encoder_layer_norm; /* pre-norm only, else NULLs */
    tfm_layer_norm decoder_layer_norm;
} tfm_params;

/* The number of floats in the parameter buffer of a valid configuration
 * (shared matrices counted once).  Tensors are packed in the order of
 * tfm_params_visit with no padding, so this is exactly the sum of the sizes
 * of the visited tensors (lib/nn/params.c lists the order). */
size_t tfm_params_count(const tfm_config *c);

/* Points p's members into base (tfm_params_count(c) floats).  The layer
 * arrays are allocated (free them with tfm_params_free_layout).  base may
 * be NULL: every pointer is then NULL, and tfm_params_visit still reports
 * every name and shape (with NULL data), which lets a loader check a file
 * before allocating.  Fails with TFM_ERR_ARG for a configuration that
 * tfm_config_validate rejects, TFM_ERR_NOMEM when memory runs out. */
tfm_status tfm_params_layout(const tfm_config *c, float *base, tfm_params *p);
void tfm_params_free_layout(tfm_params *p);

/* Calls fn for every distinct tensor of the layout with its PyTorch-style name
 * ("encoder.layers.0.self_attn.q_proj.weight"), shape and data.  Model files,
 * gradient checks and optimizers walk the parameters with it. */
typedef void (*tfm_params_visit_fn)(void *ctx, const char *name, int ndim, const int64_t *shape,
                                    float *data);
void tfm_params_visit(const tfm_config *c, const tfm_params *p, tfm_params_visit_fn fn, void *ctx);

/* ---- compute types ------------------------------------------------------------- */

/* What inference's linear layers multiply in (encode and decode
 * --compute-type; CTranslate2's names), and what a quantized model holds its
 * matrices in (lib/nn/quant.c says how):
 *   float32  the trained weights, float32 products;
 *   int8     weights int8 with a float scale per output row, activations
 *            quantized per row when the product runs, int32 sums;
 *   bf16     weights and activations rounded to bfloat16, float32 sums.
 * Everything else (attention, norms, softmax, the search) stays float32,
 * but for the decoder's keys and values (its cache), which int8 and bf16
 * hold in bf16. */
typedef enum tfm_compute_type {
    TFM_COMPUTE_DEFAULT = -1, /* for loading: the model's own (float32 unless quantized) */
    TFM_COMPUTE_FLOAT32 = 0,
    TFM_COMPUTE_INT8 = 1,
    TFM_COMPUTE_BF16 = 2,
} tfm_compute_type;

/* "default", "float32" (or "float"), "int8", "bf16" (or "bfloat16"); false
 * when unknown. */
bool tfm_compute_type_parse(const char *name, tfm_compute_type *out);
const char *tfm_compute_type_name(tfm_compute_type t);

/* The int8 or bf16 form of a quantized model's matrices (opaque). */
typedef struct tfm_quantized tfm_quantized;

/* ---- the model ------------------------------------------------------------------ */

/* A model: configuration, parameters, and the vocabulary it was trained with
 * (NULL for a model made without one): one for both sides (joint), or one
 * per side.  The parameter buffer is owned. */
typedef struct tfm_model {
    tfm_config config;
    tfm_params params;
    float *data;          /* tfm_params_count(&config) floats */
    tfm_vocab *vocab;     /* owned; may be NULL: the joint vocabulary, or the target
                             side's when each side has its own */
    tfm_vocab *src_vocab; /* owned; the source side's own vocabulary, NULL when joint */
    int64_t step;         /* training steps behind these weights */
    bool source_eos;      /* trained with </s> ending each source (see tfm_model_source_eos) */
    struct tfm_packed_model *packed; /* owned; NULL unless packed for encoding or decoding */
    tfm_quantized *quantized; /* owned; NULL for a float32 model, else its matrices in int8
                                 or bf16 (tfm_model_quantize, or a quantized model file) */
    bool float_weights;   /* data holds every weight (a quantized model's dequantized);
                             false when a quantized model was loaded for inference only
                             (tfm_model_load_for_inference): its matrices are then in
                             quantized alone, and only inference's kernels read them */
    tfm_compute_type compute; /* what the packed linear layers multiply in */
} tfm_model;

/* A freshly initialised model: Xavier/Glorot uniform weights (as the reference
 * implementations do), zero biases, LayerNorm weight 1 and bias 0, embeddings
 * N(0, D^-0.5), step 0, source_eos true.  vocab may be NULL; if not, the
 * model takes a copy. */
tfm_status tfm_model_create(const tfm_config *c, const tfm_vocab *vocab, uint64_t seed,
                            tfm_model **out, tfm_error *err);
/* The same with a vocabulary per side (copies of both): their sizes are
 * src_vocab_size and tgt_vocab_size, and c cannot have shared_embeddings
 * (the source's pieces are not the target's). */
tfm_status tfm_model_create_sides(const tfm_config *c, const tfm_vocab *src_vocab,
                                  const tfm_vocab *tgt_vocab, uint64_t seed, tfm_model **out,
                                  tfm_error *err);
void tfm_model_free(tfm_model *m);

/* The vocabulary of a side: the side's own, or the joint one (NULL when the
 * model has none). */
const tfm_vocab *tfm_model_vocab(const tfm_model *m, tfm_side side);
/* Encoders of text for the model's sides, as tfm_pair_params takes them:
 * *bpe of the joint vocabulary or the target's, *src_bpe of the source's own
 * (NULL when joint).  TFM_ERR_ARG when the model holds no vocabulary. */
tfm_status tfm_model_text_encoders(const tfm_model *m, tfm_bpe **bpe, tfm_bpe **src_bpe,
                                   tfm_error *err);

/* Whether the model was trained with </s> appended to every source sentence
 * (the default of 'train', and what encode, score and inspect-attn do unless
 * told --no-eos): a source must be presented to the model the same way.
 * False for a model trained with 'train --no-eos', which stores metadata
 * "train.opt.no-eos" = "yes" in its files; true for one whose files lack the
 * key (every model before the option existed).  A saved model keeps it:
 * tfm_model_save writes the key when source_eos is false, unless the
 * caller's extra metadata give it. */
bool tfm_model_source_eos(const tfm_model *m);

/* The pair reader's parameters (tfm_pair_reader) of sentences as this model
 * reads them: ids below its vocabulary sizes, a source cropped to
 * max_positions ids and ended with its eos_id as tfm_model_source_eos says,
 * a target cropped to max_positions - 1 ids (the decoder's input starts with
 * <s>); id lines (bpe NULL), not strict.  A program then sets what its
 * options change (--max-input-length, --no-eos, crop_target, a BPE). */
tfm_pair_params tfm_pair_params_from_model(const tfm_model *m);

/* Packs a copy of the decoder's weights and the output projection for the
 * kernel of lib/nn/packed.c (the decoder's size again in memory), which
 * decoders then use: a decoding step no longer re-packs every weight for
 * the BLAS.  _for_encoding does the same for the encoder's weights, which
 * encoders then use.  For inference only: weights changed afterwards leave
 * the copy stale.  Each does nothing on a CPU without AVX2 and FMA, or when
 * the environment says TFM_ISA=none. */
tfm_status tfm_model_pack_for_encoding(tfm_model *m, tfm_error *err);
/* The kernel the packed weights use, for messages: "AVX-512", "AVX2" or
 * (none packed) "OpenBLAS sgemm" in float32; "int8 AVX-512 VNNI", "int8
 * AVX-512BW", "int8 AVX2", "int8 C"; "bf16 AVX-512 BF16", "bf16 AVX-512BW
 * (widened to float32)", "bf16 AVX2 (widened to float32)", "bf16 C". */
const char *tfm_model_kernel_name(const tfm_model *m);
/* Why that kernel, in one phrase for -v: what the CPU has ("the CPU has
 * AVX2 but not AVX-512BW (...)") or "TFM_ISA in the environment asks for no
 * more". */
const char *tfm_model_kernel_reason(const tfm_model *m);
tfm_status tfm_model_pack_for_decoding(tfm_model *m, tfm_error *err);
/* For a program that has packed all it will run (decode after
 * _for_decoding, encode after _for_encoding): frees the int8 or bf16
 * matrices of a model loaded for inference only (float_weights false),
 * whose packs now hold their values, so they are not in memory twice (the
 * decoder's and the encoder's: 48 MB of the base preset's int8).  The
 * model still runs what is packed; packing more is then refused
 * (TFM_ERR_ARG).  Nothing for a model with float weights. */
void tfm_model_release_quantized(tfm_model *m);

/* The type the linear layers of encoding and decoding multiply in, set
 * before packing (m->compute; a new model's is float32, a quantized model's
 * its own type).  The packs then take the weights in that type: a float32
 * model is quantized as it is packed (its file is unchanged), a quantized
 * model's own int8 or bf16 values are packed as they are.  A quantized
 * model computes in its own type or in float32 (from its dequantized
 * weights, which a model loaded for inference only does not hold).
 * With int8 or bf16 every CPU packs: kernels in plain C serve where the
 * instructions are missing (TFM_ISA=avx512bw, avx2 or none asks for less
 * than the best).  TFM_ERR_ARG naming what is refused. */
tfm_status tfm_model_set_compute_type(tfm_model *m, tfm_compute_type type, tfm_error *err);

/* Quantizes the model's matrices (every two-dimensional weight but the
 * learned position tables: the embeddings and every linear layer) to type,
 * int8 or bf16, and sets m->compute to it.  The float weights become the
 * quantized values (dequantized), so the model computes in float32 as the
 * quantized file read back would; tfm_model_save then writes the matrices
 * in type (tfm-formats(5)).  TFM_ERR_ARG for float32 or a model quantized
 * already; TFM_ERR_NOMEM. */
tfm_status tfm_model_quantize(tfm_model *m, tfm_compute_type type, tfm_error *err);

/* train quantize: the float32 model file in, quantized to type, written
 * atomically to out (the same metadata, the matrices in type). */
tfm_status tfm_model_quantize_file(const char *in, const char *out, tfm_compute_type type,
                                   tfm_error *err);

/* ---- model files ------------------------------------------------------------------ */

/* Model files are safetensors: every tensor under its PyTorch-style name, and
 * the configuration, the step, the source convention (tfm_model_source_eos)
 * and the vocabulary in __metadata__ (see tfm-formats(5)).  Loading checks
 * the header, every metadata field (a message names the key, the value and
 * what was expected), every tensor's dtype and shape against the
 * configuration, and that no tensor is missing or unexpected.  Messages do
 * not name the file: the caller does ("decode: m.safetensors: ...").
 *
 * The model goes into a safetensors writer and comes out of an opened
 * safetensors file, so a file that holds more than a model (a checkpoint:
 * lib/train/checkpoint.c) adds its own tensors and metadata to the same
 * writer and takes them from the same file.  The other calls are wrappers:
 *
 *     tfm_model_save(m, "m.safetensors", NULL, &err);      // atomic
 *     tfm_model_write_stream(m, stdout, NULL, &err);        // a pipe
 *     tfm_model_load("m.safetensors", &m, &err);            // mapped
 *     tfm_model_load_fd(0, &m, &err);                       // a pipe
 *     tfm_model_parse(bytes, size, &m, &err);               // memory
 */

/* Adds m's metadata and tensors to w: the format and its version, the
 * configuration, the step, "train.opt.no-eos" when m->source_eos is false,
 * the vocabulary (when m has one), then extra: NULL-terminated key, value
 * pairs, or NULL (a key the model's own metadata use is TFM_ERR_ARG naming
 * it).  The tensors' data are not copied: m must stay unchanged until w has
 * written. */
tfm_status tfm_model_to_safetensors(const tfm_model *m, const char *const *extra,
                                    tfm_safetensors_writer *w, tfm_error *err);
/* Reads the model held in f (a model file, or a checkpoint holding one),
 * with every check above but the last: the tensors of the model count as
 * used, and any others are left for the caller (tfm_safetensors_check_all_used
 * then says whether the file held more).  The model is a copy: f may be
 * freed at once. */
tfm_status tfm_model_from_safetensors(tfm_safetensors *f, tfm_model **out, tfm_error *err);

/* Writes atomically (tfm_safetensors_write).  extra_metadata as for
 * tfm_model_to_safetensors. */
tfm_status tfm_model_save(const tfm_model *m, const char *path, const char *const *extra_metadata,
                          tfm_error *err);
/* The same bytes to an open stream (not atomic; the caller flushes and
 * closes fp). */
tfm_status tfm_model_write_stream(const tfm_model *m, FILE *fp,
                                  const char *const *extra_metadata, tfm_error *err);
/* Loads the model file at path (mapped when it is a regular file, else
 * read).  TFM_ERR_IO when it cannot be opened or read. */
tfm_status tfm_model_load(const char *path, tfm_model **out, tfm_error *err);
/* Loads a model file read from fd, from its current position to its end (a
 * pipe, a socket, a file): the input must be that one file, and bytes after
 * the data its header describes are TFM_ERR_FORMAT (so an endless input is
 * refused, not read without end).  fd stays open. */
tfm_status tfm_model_load_fd(int fd, tfm_model **out, tfm_error *err);
/* Loads a model file held in memory: size bytes at data, which the call
 * only reads. */
tfm_status tfm_model_parse(const void *data, size_t size, tfm_model **out, tfm_error *err);
/* Loads a model file to run encode or decode in compute (its compute type
 * set; TFM_COMPUTE_DEFAULT: the file's own type): a quantized model
 * computing in its own type keeps its matrices in
 * that type only (float_weights false; the embeddings alone dequantized,
 * for their lookups), which is what keeps an int8 model small in memory;
 * anything else loads as tfm_model_load does.  Such a model can be packed
 * and run by encoders and decoders, not trained, scored or saved. */
tfm_status tfm_model_load_for_inference(const char *path, tfm_compute_type compute,
                                        tfm_model **out, tfm_error *err);
/* Loads only the vocabulary of a side: from a vocabulary file
 * (tfm-formats(5); any side) or from the metadata of a model file (its
 * joint vocabulary, or the side's own), whichever path names, without
 * reading the weights.  This is what "tokenize -m" takes. */
tfm_status tfm_model_load_vocab(const char *path, tfm_side side, tfm_vocab **out,
                                tfm_error *err);

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

/* What a search needs of a row of logits without its log-softmax written:
 * log_prob[v] = (logit[v] - max) - log_sum, bit for bit the value
 * tfm_decoder_step writes. */
typedef struct tfm_logit_stats {
    float max;      /* the largest logit */
    float log_sum;  /* log of the sum over v of exp(logit[v] - max) */
    int32_t argmax; /* the lowest id holding max */
} tfm_logit_stats;

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
 * TFM_ERR_ARG for ids that are not so, TFM_ERR_NOMEM. */
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

/* Target i's weights after the last successful run (NULL for i out of
 * range): [tgt_lens[i] + 1, src_lens[sentence[i]]] floats, row t the mean
 * over the heads (taken in double, as tfm_attention_gather's mean) of
 * query t's distribution over the source states, where query t reads <s>
 * y1 .. yt and predicts y(t+1), the last one </s>: the rows and columns of
 * TFM_ATTENTION_CROSS.  Valid until the next run or tfm_aligner_free. */
const float *tfm_aligner_weights(const tfm_aligner *a, int i);

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
