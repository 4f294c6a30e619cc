/* spm_internal.h - what the files of the SentencePiece reader share
 * (lib/text/spm_model.c, spm_normalize.c, spm_encode.c, spm_decode.c): the
 * parsed model, its piece trie and its normalizer specs.
 *
 * The model keeps a copy of the file's bytes; the character maps point into
 * that copy, the pieces' texts are copied out NUL-terminated.  Everything is
 * built once by tfm_spm_parse and only read afterwards, so any number of
 * encoders on any threads may share one model. */
#ifndef TFM_TEXT_SPM_INTERNAL_H
#define TFM_TEXT_SPM_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tfm/spm.h"

/* "▁" (U+2581), SentencePiece's escaped space. */
#define SPM_SPACE "\xe2\x96\x81"
#define SPM_SPACE_LEN 3

typedef struct spm_piece {
    uint32_t off;   /* text at m->text + off, NUL-terminated */
    uint32_t len;
    float score;
    uint8_t type;   /* tfm_spm_piece_type */
} spm_piece;

/* A NormalizerSpec (the normalizer's, or the denormalizer's).  The
 * precompiled character map is a Darts-clone double array (32-bit
 * little-endian units, read in place from the file's bytes: a unit holds a
 * label, an offset to its children and a has-leaf bit, or a value) whose
 * values are offsets of NUL-terminated replacement strings in `strings`. */
typedef struct spm_norm {
    bool has_map;                 /* a non-empty precompiled_charsmap */
    const unsigned char *units;   /* n_units units of 4 bytes */
    size_t n_units;
    const char *strings;          /* strings_len bytes of replacements */
    size_t strings_len;
    bool add_dummy_prefix, remove_extra_whitespaces, escape_whitespaces;
    bool ws_suffix;               /* the trainer spec's treat_whitespace_as_suffix */
    bool user_symbols;            /* user-defined pieces pass through unnormalized */
    /* For each ASCII byte that decides its own fate (no user symbol and no
     * longer rule starts with it): -1 itself, -2 unknown (walk the map),
     * else the offset of its replacement in strings. */
    int32_t ascii[128];
} spm_norm;

/* A node of the piece trie: a double array with base and check, child c of
 * node s at base[s] + c when check there is s.  value: the piece id that
 * ends at the node, or -1. */
typedef struct spm_unit {
    int32_t base, check, value;
} spm_unit;

struct tfm_spm {
    unsigned char *bytes;   /* the file as parsed */
    size_t size;
    char *text;             /* the pieces' texts, each NUL-terminated */
    spm_piece *pieces;
    int32_t n;
    tfm_spm_model_type type;

    /* trainer_spec */
    bool byte_fallback, ws_suffix;
    int32_t spec_unk_id, spec_bos_id, spec_eos_id, spec_pad_id;
    char *unk_surface;      /* what decoding writes for the unknown piece */
    size_t unk_surface_len;
    char *special_text[4];  /* unk, bos, eos, pad piece texts (defaults when absent) */

    spm_norm norm;          /* normalizer_spec (with the trainer spec's whitespace suffix) */
    spm_norm denorm;        /* denormalizer_spec, used when has_denorm */
    bool has_denorm;

    /* Lookups, as SentencePiece's model keeps them: normal, user-defined and
     * unused pieces in one map, unknown, control and byte pieces in another
     * which is asked first. */
    tfm_strmap *normal, *reserved;
    int32_t unk;            /* the UNKNOWN piece */
    int32_t byte_id[256];   /* <0xNN> pieces, -1 without byte fallback */
    int32_t *canon;         /* [n]: the id a piece's text looks up to (itself unless a
                               text is both a reserved and a normal piece) */
    float min_score, max_score; /* over NORMAL pieces: the unigram's unknown penalty and
                                   user-symbol bonus */
    bool has_user, has_unused;
    /* BPE may be run word by word, with a cache: no piece holds U+2581 other
     * than at its start (at its end with ws_suffix), and none is unused. */
    bool bpe_by_word;

    spm_unit *trie;         /* normal, user-defined and unused pieces */
    int32_t trie_size;
};

static inline int32_t spm_trie_next(const tfm_spm *m, int32_t node, unsigned char c)
{
    int64_t p = (int64_t)m->trie[node].base + c;
    return p < m->trie_size && m->trie[p].check == node ? (int32_t)p : -1;
}

/* The length of the character at s by its first byte alone, as
 * SentencePiece's OneCharLen (1 for a stray continuation byte). */
static inline int spm_one_char_len(unsigned char c)
{
    static const unsigned char len[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return len[c >> 4];
}

/* SentencePiece's UTF-8 decoder (util.cc DecodeUTF8): the length of a valid
 * character at s[0..len) (len > 0), or 0 when invalid (one byte is then
 * taken as U+FFFD).  An encoded U+FFFD counts as valid, as there. */
int spm_utf8_len(const unsigned char *s, size_t len);

/* The longest user-defined piece that is a prefix of s[0..len), its length
 * in bytes, or 0. */
size_t spm_user_prefix(const tfm_spm *m, const unsigned char *s, size_t len);

/* Piece lookups as SentencePiece's PieceToId: the reserved map, then the
 * normal one, else the unknown piece. */
int32_t spm_piece_to_id(const tfm_spm *m, const char *s, size_t len);

/* Normalizes s[0..len) with spec (m gives the user symbols when
 * spec->user_symbols) into out (cleared first); *n_bad counts the bytes
 * that were invalid UTF-8 (may be NULL). */
tfm_status spm_normalize(const tfm_spm *m, const spm_norm *spec, const char *s, size_t len,
                         tfm_buf *out, size_t *n_bad, tfm_error *err);

/* Fills spec->ascii; the map must be set. */
void spm_norm_prepare(const tfm_spm *m, spm_norm *spec);

/* Checks a precompiled character map blob and points spec at it. */
tfm_status spm_norm_set_map(spm_norm *spec, const unsigned char *blob, size_t len,
                            tfm_error *err);

#endif
