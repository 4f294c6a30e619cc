/* tfm/spm.h - SentencePiece model files (lib/text/spm_*.c): the protobuf
 * file that spm_train writes (OPUS-MT's source.spm and target.spm are
 * such files), read without libsentencepiece, and its segmentation and
 * detokenization, byte for byte what spm_encode and spm_decode of Debian's
 * sentencepiece package give.
 *
 * What a model file holds and what is done with it:
 *   - the pieces with their scores and types (normal, unknown, control,
 *     user-defined, unused, byte);
 *   - the model type: unigram (Viterbi over the piece scores) or BPE (merges
 *     by score); char and word models are refused by name;
 *   - the normalizer spec: the precompiled character map (nmt_nfkc, nfkc,
 *     identity, a custom rule file: all are a map in the file),
 *     add_dummy_prefix, remove_extra_whitespaces, escape_whitespaces; the
 *     denormalizer spec, when the file has one, for decoding;
 *   - the trainer spec's fields that change encoding: byte_fallback,
 *     the unk/bos/eos/pad ids, unk_surface, treat_whitespace_as_suffix,
 *     split_digits and the like as far as encoding reads them.
 * A field the reader does not know is skipped, as protobuf readers do; a
 * file that is not a valid SentencePiece model is TFM_ERR_FORMAT saying what
 * is wrong ("piece 12: score is not a float", "not a SentencePiece model:
 * ..."), never a crash.
 *
 * Example:
 *
 *     tfm_spm *m;
 *     if (tfm_spm_load("source.spm", &m, &err) != TFM_OK) ...
 *     tfm_spm_encoder *e;
 *     tfm_spm_encoder_create(m, &e, &err);    // m must outlive e
 *     tfm_ids ids;
 *     tfm_ids_init(&ids);
 *     tfm_spm_encode(e, "Hello world", 11, &ids, NULL, &err);  // spm ids
 *     tfm_buf text;
 *     tfm_buf_init(&text);
 *     tfm_spm_decode(m, ids.data, ids.len, &text, &err);       // "Hello world"
 */
#ifndef TFM_SPM_H
#define TFM_SPM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tfm/core.h"

/* The piece types of sentencepiece_model.proto, with its numbers. */
typedef enum tfm_spm_piece_type {
    TFM_SPM_NORMAL = 1,
    TFM_SPM_UNKNOWN = 2,
    TFM_SPM_CONTROL = 3,
    TFM_SPM_USER_DEFINED = 4,
    TFM_SPM_UNUSED = 5,
    TFM_SPM_BYTE = 6,
} tfm_spm_piece_type;

typedef enum tfm_spm_model_type {
    TFM_SPM_UNIGRAM = 1,
    TFM_SPM_BPE = 2,
} tfm_spm_model_type;

/* A SentencePiece model, read only once made: any number of threads may
 * read it at once. */
typedef struct tfm_spm tfm_spm;

/* Parses the size bytes of a model file at data (copied: data may go at
 * once).  TFM_ERR_FORMAT naming what is wrong; TFM_ERR_NOMEM. */
tfm_status tfm_spm_parse(const void *data, size_t size, tfm_spm **out, tfm_error *err);
/* The piece trie tfm_spm_parse built from the pieces (most of its time for
 * a model of 32k pieces): a double array of *n_units units of three int32
 * (base, check, value), which a file may keep beside the model. */
const int32_t *tfm_spm_trie(const tfm_spm *m, size_t *n_units);
/* tfm_spm_parse, reading the trie tfm_spm_trie gave for the same model
 * (copied) instead of building it.  It is checked to be safe to walk, not
 * to be the trie of these pieces (a wrong one segments wrongly): the
 * caller vouches for that. */
tfm_status tfm_spm_parse_with_trie(const void *data, size_t size, const int32_t *units,
                                   size_t n_units, tfm_spm **out, tfm_error *err);
/* Reads and parses the file at path (TFM_ERR_IO when it cannot be read; a
 * file over 1 GiB is TFM_ERR_FORMAT, read no further).  Messages do not
 * name the file: the caller does. */
tfm_status tfm_spm_load(const char *path, tfm_spm **out, tfm_error *err);
void tfm_spm_free(tfm_spm *m);

/* Whether data looks like a SentencePiece model rather than another file
 * (a safetensors model, a tfm vocabulary): its first field is a piece.  A
 * cheap guess for choosing a reader; parsing decides. */
bool tfm_spm_sniff(const void *data, size_t size);

/* The file's bytes, exactly as parsed: a model file of this toolkit keeps
 * them whole. */
const void *tfm_spm_bytes(const tfm_spm *m, size_t *size);

tfm_spm_model_type tfm_spm_type(const tfm_spm *m);
int32_t tfm_spm_size(const tfm_spm *m);
/* The text of piece id (NUL-terminated, *len bytes; len may be NULL), or
 * NULL outside 0..size-1. */
const char *tfm_spm_piece(const tfm_spm *m, int32_t id, size_t *len);
float tfm_spm_score(const tfm_spm *m, int32_t id);
tfm_spm_piece_type tfm_spm_piece_type_of(const tfm_spm *m, int32_t id);
/* The id of a piece's text, or -1. */
int32_t tfm_spm_find(const tfm_spm *m, const char *text, size_t len);
/* The special ids of the trainer spec (-1 when the model has none). */
int32_t tfm_spm_unk_id(const tfm_spm *m);
int32_t tfm_spm_bos_id(const tfm_spm *m);
int32_t tfm_spm_eos_id(const tfm_spm *m);
int32_t tfm_spm_pad_id(const tfm_spm *m);

/* An encoder of a model: its scratch memory (and caches).  One thread at a
 * time per encoder; create one per thread.  m must outlive it. */
typedef struct tfm_spm_encoder tfm_spm_encoder;
tfm_status tfm_spm_encoder_create(const tfm_spm *m, tfm_spm_encoder **out, tfm_error *err);
void tfm_spm_encoder_free(tfm_spm_encoder *e);
/* Whether the encoder adds the model's dummy prefix (a U+2581 before the
 * line, when the model asks for one; on by default): off, a piece of text
 * is segmented as it would be glued to what comes before it. */
void tfm_spm_encoder_set_dummy_prefix(tfm_spm_encoder *e, bool on);

/* Normalizes and segments one line (len bytes, no newline) into piece ids
 * (out cleared first), exactly as spm_encode --output_format=id.  Invalid
 * UTF-8 is handled as SentencePiece handles it (each bad byte is U+FFFD to
 * the normalizer, and encodes as the unknown piece or byte pieces);
 * *n_repaired (may be NULL) counts the bad sequences. */
tfm_status tfm_spm_encode(tfm_spm_encoder *e, const char *line, size_t len, tfm_ids *out,
                          size_t *n_repaired, tfm_error *err);

/* The same segmentation as pieces separated by single spaces (out cleared
 * first), exactly as spm_encode --output_format=piece: a run of unknown
 * characters is one piece holding their (normalized) text, as the ids hold
 * one unknown id for it, which tfm_spm_ids_to_pieces cannot give back. */
tfm_status tfm_spm_encode_pieces(tfm_spm_encoder *e, const char *line, size_t len, tfm_buf *out,
                                 size_t *n_repaired, tfm_error *err);

/* Normalizes one line as the model's normalizer does (out cleared first):
 * what spm_normalize would print, with whitespace escaped to U+2581 as the
 * model says. */
tfm_status tfm_spm_normalize(tfm_spm_encoder *e, const char *line, size_t len, tfm_buf *out,
                             tfm_error *err);

/* Detokenizes piece ids (out cleared first), exactly as spm_decode
 * --input_format=id: pieces joined, U+2581 to space, the dummy prefix's
 * space dropped, byte pieces gathered into bytes (bytes that do not form
 * valid UTF-8 become U+FFFD each, as SentencePiece does), control pieces
 * dropped, the unknown piece as the model's unk_surface (" \u2047 " by
 * default), then the denormalizer when the model has one.  An id outside
 * the model is TFM_ERR_RANGE. */
tfm_status tfm_spm_decode(const tfm_spm *m, const int32_t *ids, size_t n, tfm_buf *out,
                          tfm_error *err);

/* Detokenizes a line of pieces separated by spaces (out cleared first),
 * exactly as spm_decode --input_format=piece: a piece the model does not
 * have is written as it is (so an unknown run of spm_encode's pieces comes
 * back as its text). */
tfm_status tfm_spm_decode_pieces(const tfm_spm *m, const char *line, size_t len, tfm_buf *out,
                                 tfm_error *err);

/* The pieces of ids, separated by single spaces (out cleared first), as
 * spm_encode --output_format=piece prints them; and back. An unknown piece
 * is TFM_ERR_FORMAT naming it. */
tfm_status tfm_spm_ids_to_pieces(const tfm_spm *m, const int32_t *ids, size_t n, tfm_buf *out,
                                 tfm_error *err);
tfm_status tfm_spm_pieces_to_ids(const tfm_spm *m, const char *line, size_t len, tfm_ids *out,
                                 tfm_error *err);

#endif
