/* tfm.h - the public header of libtfm, the core of a Transformer toolkit
 * ("Attention Is All You Need", Vaswani et al., 2017) built as Unix filters.
 *
 * This header is the manual.  It includes one header per part:
 *
 *   tfm/core.h   status codes and error details, buffers, UTF-8, hash maps,
 *                seeded random numbers, a blocking parallel-for, a clock, the batch
 *                loop every filter runs on (bounded batches of what is
 *                ready, split over threads, written in order)
 *   tfm/io.h     line reading that never holds a line back, .npy records and
 *                tensor streams, atomic file writes
 *   tfm/safetensors.h  the container of model and checkpoint files
 *   tfm/npz.h    NumPy .npz archives (Marian's model files)
 *   tfm/yaml.h   YAML documents (Marian's configurations and vocabularies)
 *   tfm/text.h   Unicode normalisation, vocabularies, BPE learning, encoding
 *                and decoding, line filters of them (tfm_text_filter),
 *                sentence pairs read from two files (tfm_pair_reader)
 *   tfm/spm.h    SentencePiece model files: reading, encoding, decoding
 *   tfm/metrics.h  BLEU, chrF and TER as sacreBLEU computes them, files
 *                scored in step (tfm_file_scorer), n-best lists
 *   tfm/model.h  the Transformer as data: configuration, parameters, the
 *                model's life, model files, its quantized and packed forms
 *   tfm/pass.h   the passes over batches: the batched encoder, the
 *                incremental decoder, the cross-attention of chosen targets
 *                (tfm_aligner) and alignments from attention, the forward
 *                and backward passes over batches of sentence pairs that
 *                training, scoring and inspection share, attention weights
 *   tfm/search.h greedy and beam search and sampling over the decoder,
 *                batches of encoder states decoded (tfm_decode_batch)
 *   tfm/train.h  training: data, batches, Adam and the schedule, checkpoints,
 *                the training run (tfm_run), training across processes
 *                (tfm_dist: Open MPI)
 *   tfm/view.h   what a model makes of given pairs: attention as npy, TSV,
 *                SVG, terminal heatmaps, alignments, batches of pairs
 *                inspected (tfm_inspector), pairs scored (tfm_score_pairs)
 *
 * The folders of lib/ sit on floors and call only downwards (the README's
 * Layout; tests/cli/test_layout.sh): core; io and nn (the kernels); text and
 * metrics; model; pass; search; train and view.
 *
 * Rules that hold everywhere:
 *   - Every function that can fail returns tfm_status; TFM_OK is 0.  Pass a
 *     tfm_error to learn what went wrong in words; the library never prints
 *     and never exits.
 *   - X_create / X_free come in pairs and X_free(NULL) does nothing.  Who
 *     must outlive whom is written beside each type.
 *   - Nothing random happens without a tfm_rng the caller seeded.
 *
 * A worked example: encode a line with a learnt vocabulary and decode it back.
 *
 *     #include <tfm.h>
 *
 *     tfm_error err;
 *     tfm_vocab *vocab;
 *     if (tfm_vocab_load("en-de.vocab", &vocab, &err) != TFM_OK) {
 *         fprintf(stderr, "en-de.vocab: %s\n", err.msg);
 *         return 1;
 *     }
 *     tfm_bpe *bpe;
 *     tfm_bpe_create(vocab, &bpe, &err);          // vocab must outlive bpe
 *     tfm_bpe_encode_params ep = {0};             // no dropout
 *     tfm_ids ids;
 *     tfm_ids_init(&ids);
 *     tfm_bpe_encode(bpe, &ep, "Hello world", 11, &ids, NULL, &err);
 *     tfm_buf text;
 *     tfm_buf_init(&text);
 *     tfm_bpe_decode(vocab, ids.data, ids.len, &text, &err);  // "Hello world"
 *     tfm_buf_free(&text);
 *     tfm_ids_free(&ids);
 *     tfm_bpe_free(bpe);
 *     tfm_vocab_free(vocab);
 *
 * Build with: cc prog.c $(pkg-config --cflags --libs --static tfm)
 */
#ifndef TFM_H
#define TFM_H

#include "tfm/core.h"
#include "tfm/io.h"
#include "tfm/safetensors.h"
#include "tfm/npz.h"
#include "tfm/yaml.h"
#include "tfm/text.h"
#include "tfm/spm.h"
#include "tfm/metrics.h"
#include "tfm/search.h"
#include "tfm/model.h"
#include "tfm/pass.h"
#include "tfm/train.h"
#include "tfm/view.h"

#endif
