/* tfm/model.h - the Transformer of "Attention Is All You Need" as data
 * (lib/model): its configuration, its parameters, the model's life, its
 * files, and its quantized and packed forms.  The passes that run it over
 * batches are tfm/pass.h's (lib/pass).
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
    TFM_POS_SINUSOIDAL_CONCAT = 3, /* the same frequencies, the sines in the first half
                               of the dimensions and the cosines in the second:
                               PE(pos,i) = sin(pos/10000^(2i/D)), PE(pos,D/2+i) = cos(...),
                               i < D/2 (Marian's, as CTranslate2 and transformers run
                               Marian models) */
} tfm_pos_kind;

/* The feed-forward sublayer's activation, between its two linear layers. */
typedef enum tfm_activation {
    TFM_ACT_RELU = 0,         /* max(0, x): the paper's */
    TFM_ACT_SWISH = 1,        /* x * sigmoid(x) (SiLU): OPUS-MT's models */
    TFM_ACT_GELU_SIGMOID = 2, /* x * sigmoid(1.702 x): what Marian calls gelu */
} tfm_activation;

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
    /* Variants that models from elsewhere use (Marian's: see train-import(1));
     * 0 / false is the paper's model in each. */
    tfm_activation activation;  /* of the feed-forward sublayers */
    bool output_bias;         /* the output projection adds a bias [V_tgt] */
    bool decoder_start_zero;  /* the decoder's first input (position 0, where <s> stands)
                                 is a zero vector, not the embedding of <s>: only its
                                 position encoding enters (Marian's) */
    bool embedding_layer_norm; /* a LayerNorm on embeddings + positions, one per side,
                                 before the first layer (Marian's postprocess-emb n) */
    int alignment_layer;      /* the decoder layer (0-based) whose cross-attention,
                                 first head alone, gives alignments (a model trained
                                 with guided alignment); -1: none, alignments average
                                 the heads of the last layer */
} tfm_config;

/* Fills c with a named preset: "base" (N=6, D=512, F=2048, H=8, dropout 0.1),
 * "big" (N=6, D=1024, F=4096, H=16, dropout 0.3), "small" (N=3, D=256,
 * F=1024, H=4, dropout 0.1), "small-cpu" (small with 3 encoder layers, 1
 * decoder layer and pre-norm), "tiny" (N=2, D=64, F=256, H=4, dropout 0.1).
 * N is the number of encoder layers and of decoder layers.  All presets but
 * small-cpu post-norm; all: sinusoidal positions, shared embeddings,
 * max_positions 1024, full attention, attention_dropout and activation_dropout 0 (the paper
 * names neither), no relative positions, label_smoothing 0.1, layer_norm_eps
 * 1e-5, and the vocabulary's fixed special ids (TFM_ID_PAD ...).
 * Vocabulary sizes are left at 0 for the caller (they come from the
 * vocabulary).  Unknown names are TFM_ERR_ARG listing the known ones. */
tfm_status tfm_config_preset(const char *name, tfm_config *c, tfm_error *err);
/* The name of the i-th preset (from 0, in the order above), or NULL past
 * the last one. */
const char *tfm_config_preset_name(int i);

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
    float *output_bias;     /* [V_tgt] decoder.output_projection.bias (output_bias), else NULL */
    tfm_layer_norm encoder_embedding_norm; /* encoder.layernorm_embedding (embedding_layer_norm),
                                              else NULLs */
    tfm_layer_norm decoder_embedding_norm;
} tfm_params;

/* The number of floats in the parameter buffer of a valid configuration
 * (shared matrices counted once).  Tensors are packed in the order of
 * tfm_params_visit with no padding, so this is exactly the sum of the sizes
 * of the visited tensors (lib/model/params.c lists the order). */
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
typedef struct tfm_file_panels tfm_file_panels; /* model_panels.c */

/* What a search needs of a row of logits without its log-softmax written:
 * log_prob[v] = (logit[v] - max) - log_sum, bit for bit the value
 * tfm_decoder_step (tfm/pass.h) writes.  The output projection's kernels
 * gather it while the logits are in the cache (lib/nn/packed.c). */
typedef struct tfm_logit_stats {
    float max;      /* the largest logit */
    float log_sum;  /* log of the sum over v of exp(logit[v] - max) */
    int32_t argmax; /* the lowest id holding max */
} tfm_logit_stats;

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
    struct tfm_file_panels *file_panels; /* owned; the panels of a packed model file, in
                                            its mapping (NULL for other files) */
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
 * the environment says TFM_ISA=none.  A model loaded from a packed file
 * (tfm_model_save_packed) copies nothing: its layers read the file's panels
 * in place. */
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
/* Where the weights the kernels read come from, for decode -v: the packed
 * file's panels read in place, or packed at start. */
const char *tfm_model_panels_source(const tfm_model *m);
tfm_status tfm_model_pack_for_decoding(tfm_model *m, tfm_error *err);
/* The helper thread (tfm_helper) that the packed products of encode and
 * decode may halve their work with while the program's other workers are
 * idle (one sentence on two CPUs), for the whole process; NULL for none
 * (the default).  The results are the same bits either way. */
void tfm_model_products_helper(tfm_helper *helper);
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

/* A packed model file (train pack): m's file, written atomically to path,
 * with the panels of every matrix the inference kernels multiply by beside
 * the matrices, in m's type (float32, or its int8 or bf16), so that encode
 * and decode map them in place instead of packing at start
 * (tfm_model_load_for_inference; tfm-formats(5)).  Every other reader
 * reads it as the model file it also is.  TFM_ERR_ARG for a model without
 * its float32 weights. */
tfm_status tfm_model_save_packed(const tfm_model *m, const char *path, tfm_error *err);
/* train pack: the model file in (any type), packed, to out. */
tfm_status tfm_model_pack_file(const char *in, const char *out, tfm_error *err);

/* ---- models from elsewhere ----------------------------------------------------------- */

/* train import: the OPUS-MT (Marian) model directory dir, the one its
 * decoder.yml describes (the first of `models:`, the vocabularies of
 * `vocabs:`, source.spm and target.spm), as a model of this toolkit holding
 * everything a translation needs: Marian's configuration as the variants of
 * tfm_config, the weights, a vocabulary per side with its SentencePiece
 * model (tfm_vocab_create_foreign).  lib/model/import_marian.c lists what
 * is read and what is refused.  Messages name the file at fault and what
 * is wrong; what the toolkit cannot run is TFM_ERR_UNSUPPORTED naming
 * Marian's option and its value. */
tfm_status tfm_model_import_marian(const char *dir, tfm_model **out, tfm_error *err);
/* The same model from the Hugging Face conversion of such a directory
 * (config.json of model_type "marian", model.safetensors, vocab.json,
 * source.spm, target.spm: lib/model/import_hf.c). */
tfm_status tfm_model_import_hf(const char *dir, tfm_model **out, tfm_error *err);
/* Whichever dir is: an OPUS-MT directory (decoder.yml) or a Hugging Face
 * one (config.json); TFM_ERR_IO naming both when it holds neither. */
tfm_status tfm_model_import(const char *dir, tfm_model **out, tfm_error *err);

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
/* A training checkpoint (tfm_checkpoint_save, train.h) is a model file
 * with the training's state beside the model: the metadata key below, and
 * Adam's moments and the moving average as tensors under these prefixes.
 * The loaders of a whole file (below) read a checkpoint's model, its
 * weights and not their moving average, and leave the state unread: a run
 * can be translated with at any checkpoint.  A tensor of any other name
 * that the model does not have is still refused. */
#define TFM_CHECKPOINT_KEY "checkpoint"
#define TFM_CHECKPOINT_EXP_AVG "optimizer.exp_avg."
#define TFM_CHECKPOINT_EXP_AVG_SQ "optimizer.exp_avg_sq."
#define TFM_CHECKPOINT_EMA "ema."

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
 * a packed model file's matrices are read in place as panels (float_weights
 * false, float32 too, where this CPU has the float32 kernels); anything
 * else loads as tfm_model_load does.  The vocabularies are not read
 * (vocab and src_vocab are NULL: encode and decode take ids;
 * tfm_model_load_vocab reads a side's), so a file whose vocabulary is
 * damaged loads here and fails in tokenize.  Such a model can be packed and
 * run by encoders and decoders, not trained, scored or saved. */
tfm_status tfm_model_load_for_inference(const char *path, tfm_compute_type compute,
                                        tfm_model **out, tfm_error *err);
/* Loads only the vocabulary of a side: from a vocabulary file
 * (tfm-formats(5); any side) or from the metadata of a model file (its
 * joint vocabulary, or the side's own), whichever path names, without
 * reading the weights.  This is what "tokenize -m" takes. */
tfm_status tfm_model_load_vocab(const char *path, tfm_side side, tfm_vocab **out,
                                tfm_error *err);

#endif
