/* tfm/text.h - Unicode normalisation, the vocabulary, and byte-pair-encoding
 * sub-words (Sennrich et al., 2016) as SentencePiece applies them.
 *
 * The contract (tested): for every line x,
 *     tfm_bpe_decode(tfm_bpe_encode(x)) == tfm_normalize(x)
 * byte for byte, whatever x holds: any script, control characters, tabs,
 * invalid UTF-8 (normalised to U+FFFD), characters the vocabulary never saw
 * (spelled as <0xNN> byte pieces, never <unk>).
 *
 * Whitespace: the normalised text's spaces (U+0020) become U+2581 '▁' inside
 * pieces, and a '▁' is put in front of the line (SentencePiece's "dummy
 * prefix") so that the first word looks like every other word; decoding
 * turns '▁' back into spaces and drops that first one.  A literal U+2581 in
 * the input is always spelled with byte pieces, so it survives the trip.
 */
#ifndef TFM_TEXT_H
#define TFM_TEXT_H

#include <stdio.h>

#include "tfm/core.h"
#include "tfm/io.h"

/* ---- normalisation ------------------------------------------------------------ */

typedef enum tfm_norm_form {
    TFM_NORM_NONE = 0, /* only repair invalid UTF-8 */
    TFM_NORM_NFC = 1,
    TFM_NORM_NFKC = 2, /* the default, as in SentencePiece */
} tfm_norm_form;

typedef struct tfm_norm_params {
    tfm_norm_form form;
    bool case_fold;   /* Unicode case folding (utf8proc's CASEFOLD) */
    bool strict;      /* invalid UTF-8 is an error instead of U+FFFD */
} tfm_norm_params;

tfm_norm_params tfm_norm_default_params(void); /* NFKC, no case folding, not strict */

/* "none", "nfc", "nfkc" <-> form.  Returns false for an unknown name. */
bool tfm_norm_form_parse(const char *name, tfm_norm_form *form);
const char *tfm_norm_form_name(tfm_norm_form form);

/* Normalises len bytes of in (one line, may hold NUL bytes) and appends the
 * result to out (cleared first).  Each maximal invalid UTF-8 sequence becomes
 * U+FFFD and is counted in *n_repaired (may be NULL); with strict, the first
 * one is TFM_ERR_UTF8 naming its byte offset.  Pure ASCII input takes a fast
 * path (it is already NFC and NFKC). */
tfm_status tfm_normalize(const tfm_norm_params *p, const char *in, size_t len, tfm_buf *out,
                         size_t *n_repaired, tfm_error *err);


/* Character classes that decide where pieces may not join (SentencePiece's
 * split_by_unicode_script and split_by_number): a piece never mixes two
 * different classes other than TFM_CLASS_ANY. */
typedef enum tfm_char_class {
    TFM_CLASS_ANY = 0,     /* joins anything (the '▁' marker) */
    TFM_CLASS_COMMON,      /* punctuation, symbols, other */
    TFM_CLASS_NUMBER,
    TFM_CLASS_LATIN,
    TFM_CLASS_GREEK,
    TFM_CLASS_CYRILLIC,
    TFM_CLASS_ARMENIAN,
    TFM_CLASS_HEBREW,
    TFM_CLASS_ARABIC,
    TFM_CLASS_INDIC,       /* Devanagari ... Malayalam, Sinhala: one class per block below */
    TFM_CLASS_THAI,
    TFM_CLASS_HAN,         /* Han, Hiragana, Katakana together, as SentencePiece merges them */
    TFM_CLASS_HANGUL,
    TFM_CLASS_OTHER_SCRIPT, /* any other letter; the block start decides equality */
    TFM_CLASS_COUNT
} tfm_char_class;

tfm_char_class tfm_char_class_of(int32_t cp);
/* Two code points of script classes may join when their classes are equal
 * (and, for INDIC and OTHER_SCRIPT, they come from the same Unicode block). */
uint32_t tfm_char_script_key(int32_t cp); /* class in the high bits, block below */

/* True for code points that may be part of a learnt piece: not controls, not
 * whitespace other than the '▁' marker, not U+FFFD, not unassigned.  Others
 * are always spelled with byte pieces. */
bool tfm_char_pieceable(int32_t cp);

/* ---- vocabulary -------------------------------------------------------------------- */

typedef enum tfm_piece_type {
    TFM_PIECE_NORMAL = 0,   /* a character or a learnt merge */
    TFM_PIECE_CONTROL = 1,  /* <pad> <unk> <s> </s> */
    TFM_PIECE_USER = 2,     /* user-defined symbol, kept whole */
    TFM_PIECE_BYTE = 3,     /* <0x00> ... <0xFF> */
} tfm_piece_type;

/* Fixed ids of the special pieces. */
enum { TFM_ID_PAD = 0, TFM_ID_UNK = 1, TFM_ID_BOS = 2, TFM_ID_EOS = 3 };

/* A vocabulary: pieces with scores (merged pieces score -rank, so a higher
 * score merges first) and the normalisation it was learnt with.  Ids are
 * 0..size-1 in file order.  Layout: the 4 specials, then user symbols, then
 * the 256 byte pieces, then characters, then merges in the order learnt.
 * (User symbols may also follow the byte pieces, as when added to a
 * vocabulary from tfm_vocab_create; the learner puts them before.) */
typedef struct tfm_vocab tfm_vocab;

/* An empty vocabulary holding only the specials and the byte pieces (ids
 * 0..259); pieces added to it come after the bytes. */
tfm_vocab *tfm_vocab_create(const tfm_norm_params *norm);
void tfm_vocab_free(tfm_vocab *v);

/* The vocabulary of a model from elsewhere (an imported OPUS-MT model):
 * pieces in that model's order with any types (control pieces anywhere, no
 * byte pieces required), normalization none (the SentencePiece model
 * normalizes), and, once its pieces are in, the SentencePiece model that
 * segments text into them (tfm_vocab_attach_spm).  Such a vocabulary is
 * written with "layout=sentencepiece" in its header and the SentencePiece
 * model, base64, on the line after it (tfm-formats(5)), so a model file
 * that holds it needs no other file.  Encoders (tfm_bpe_create) segment
 * with the SentencePiece model and map its pieces to the vocabulary's ids
 * by their text (a piece the vocabulary lacks is its <unk>); decoding maps
 * back and detokenizes as spm_decode. */
tfm_vocab *tfm_vocab_create_foreign(void);
bool tfm_vocab_is_foreign(const tfm_vocab *v);
/* Parses the SentencePiece model file of size bytes (copied) and attaches it
 * to a foreign vocabulary holding all its pieces already; no piece can be
 * added after.  TFM_ERR_ARG for another vocabulary or a second model; the
 * errors of tfm_spm_parse. */
tfm_status tfm_vocab_attach_spm(tfm_vocab *v, const void *data, size_t size, tfm_error *err);
/* The attached model, or NULL. */
const struct tfm_spm *tfm_vocab_spm(const tfm_vocab *v);
/* The vocabulary id of a SentencePiece id (its <unk> when it lacks the
 * piece), and the SentencePiece id of a vocabulary id (-1 for control
 * pieces and pieces SentencePiece does not have); -1 outside the ranges or
 * without a model. */
int32_t tfm_vocab_from_spm(const tfm_vocab *v, int32_t spm_id);
int32_t tfm_vocab_to_spm(const tfm_vocab *v, int32_t id);

/* Appends a piece (text in '▁' form, len bytes); returns its id, or -1 when
 * the text is already present, is not a valid piece (empty, invalid UTF-8,
 * a space, a tab, a newline or another control character: the file could
 * not hold it), the score is not finite or is subnormal (the text cannot
 * hold it either), the type does not fit the layout (no control or byte
 * pieces: create made them), or memory runs out.  So every vocabulary can
 * be saved and loaded back. */
int32_t tfm_vocab_add(tfm_vocab *v, const char *text, size_t len, float score,
                      tfm_piece_type type);

int32_t tfm_vocab_size(const tfm_vocab *v);
/* The text of piece id, NUL-terminated, *len bytes (len may be NULL); NULL
 * for an id outside 0..size-1.  Valid as long as the vocabulary. */
const char *tfm_vocab_piece(const tfm_vocab *v, int32_t id, size_t *len);
float tfm_vocab_score(const tfm_vocab *v, int32_t id);
tfm_piece_type tfm_vocab_type(const tfm_vocab *v, int32_t id);
/* The id of a piece's text, or -1. */
int32_t tfm_vocab_find(const tfm_vocab *v, const char *text, size_t len);
/* The id of the byte piece <0xNN>. */
int32_t tfm_vocab_byte_id(const tfm_vocab *v, unsigned char byte);
/* The byte a byte piece stands for, or -1 when id is not a byte piece. */
int tfm_vocab_byte_value(const tfm_vocab *v, int32_t id);
const tfm_norm_params *tfm_vocab_norm(const tfm_vocab *v);
/* The number of merges learnt into v: its pieces that score below 0. */
int32_t tfm_vocab_merges(const tfm_vocab *v);

/* The vocabulary file: text, documented in tfm-formats(5).  First line
 *     #tfm-vocab 1 normalize=nfkc case-fold=no pieces=8000
 * then one line per piece: PIECE<TAB>SCORE<TAB>TYPE, TYPE one of
 * normal, control, user, byte. */
tfm_status tfm_vocab_save(const tfm_vocab *v, const char *path, tfm_error *err);
/* Writes the same text to an open stream (standard output, say). */
tfm_status tfm_vocab_write(const tfm_vocab *v, FILE *fp, tfm_error *err);
/* Reads a vocabulary file (or a pipe) of at most TFM_VOCAB_MAX_BYTES: the
 * size of a model's header, where the vocabulary is stored.  A longer input
 * (a wrong file, /dev/zero) is TFM_ERR_FORMAT, read no further. */
#define TFM_VOCAB_MAX_BYTES 16777216u
tfm_status tfm_vocab_load(const char *path, tfm_vocab **out, tfm_error *err);
/* The same from fd, whose first `have` bytes the caller has read already
 * (start; NULL when have is 0). */
tfm_status tfm_vocab_read_fd(int fd, const void *start, size_t have, tfm_vocab **out,
                             tfm_error *err);
/* Parses a vocabulary held in memory; errors name the line ("line 12: ..."). */
tfm_status tfm_vocab_parse(const char *data, size_t size, tfm_vocab **out, tfm_error *err);

/* The first line of the vocabulary's text form, without its newline
 * ("#tfm-vocab 1 normalize=nfkc case-fold=no pieces=8000"). */
#define TFM_VOCAB_HEADER_MAX 128
void tfm_vocab_header(const tfm_vocab *v, char *buf, size_t size);

/* A vocabulary as arrays, the form a packed model file keeps beside the
 * text (tfm-formats(5)) so that a program reads it in place instead of
 * parsing it:
 *   header    the first line of the text form (tfm_vocab_header);
 *   texts     every piece's text followed by a NUL byte, in id order;
 *   scores    size floats, types size bytes (tfm_piece_type values);
 *   spm       the SentencePiece model of a model from elsewhere, its bytes
 *             (spm_size 0: none), and spm_trie, its piece trie
 *             (tfm_spm_trie: spm_trie_units units of three int32; NULL:
 *             built when read). */
typedef struct tfm_vocab_arrays {
    const char *header;
    const char *texts;
    size_t texts_size;
    const float *scores;
    const uint8_t *types;
    size_t size;
    const void *spm;
    size_t spm_size;
    const int32_t *spm_trie;
    size_t spm_trie_units;
} tfm_vocab_arrays;
/* The arrays of a vocabulary, made (tfm_vocab_to_arrays) to be written. */
typedef struct tfm_vocab_arrays_made {
    char header[TFM_VOCAB_HEADER_MAX];
    tfm_buf texts, scores, types, spm, spm_trie;
} tfm_vocab_arrays_made;
/* The arrays of v in *out, whose buffers it starts (free them with
 * tfm_vocab_arrays_made_free, failure or not). */
tfm_status tfm_vocab_to_arrays(const tfm_vocab *v, tfm_vocab_arrays_made *out, tfm_error *err);
void tfm_vocab_arrays_made_free(tfm_vocab_arrays_made *made);
/* The arrays made, as tfm_vocab_from_arrays reads them. */
tfm_vocab_arrays tfm_vocab_arrays_of(const tfm_vocab_arrays_made *made);
/* The vocabulary the arrays hold, with every check of the text form
 * (messages name "piece N"); its pieces' texts stay where they are, so the
 * arrays must outlive it: on success it takes release(ctx) (NULL for none),
 * which it runs when freed (the SentencePiece model is parsed into a copy
 * of its own).  TFM_ERR_FORMAT names what is wrong with them: a count other
 * than the header's, a text not ended by its NUL, a SentencePiece model
 * with a vocabulary that is not from elsewhere, or a bad one. */
tfm_status tfm_vocab_from_arrays(const tfm_vocab_arrays *a, void (*release)(void *ctx),
                                 void *ctx, tfm_vocab **out, tfm_error *err);

/* ---- learning BPE ------------------------------------------------------------------ */

typedef struct tfm_bpe_learn_params {
    int32_t vocab_size;          /* total, specials and byte pieces included */
    tfm_norm_params norm;
    double character_coverage;   /* 0.9995 as SentencePiece: rarer characters use bytes */
    int max_piece_length;        /* in characters; 16 as SentencePiece */
    bool soft_vocab_limit;       /* too few merges possible: stop short instead of failing */
    int64_t input_sentence_size; /* sample this many lines (0: use all) */
    uint64_t seed;               /* for sampling */
    int n_threads;               /* the result does not depend on it */
    const char *const *user_symbols; /* kept whole; may be NULL; copied by create */
    int n_user_symbols;
    bool placeholders;           /* the user symbols <ph1> .. <ph32> follow those above,
                                    and each line's placeholders are replaced by them
                                    before it is learnt from (see "placeholders") */
    unsigned placeholder_classes; /* TFM_PH_* bits scanned for (default TFM_PH_ALL) */
    /* Called now and then on long runs: stage is "reading", "counting" or
     * "merging"; done / total in that stage's units (lines, lines, pieces;
     * total 0 when not known).  May be NULL. */
    void (*progress)(void *ctx, const char *stage, int64_t done, int64_t total);
    void *progress_ctx;
} tfm_bpe_learn_params;

/* vocab_size 8000, NFKC, coverage 0.9995, pieces of at most 16 characters,
 * no sampling, seed 1, one thread per CPU, no user symbols, no placeholders. */
tfm_bpe_learn_params tfm_bpe_learn_default_params(void);

/* A learner is fed lines, then asked for a vocabulary.  With
 * input_sentence_size set, it keeps a uniform random sample of that many
 * lines (reservoir sampling, seeded); otherwise it keeps only word counts,
 * so memory grows with the number of distinct words, not with the corpus.
 *
 * What it learns from: each normalised line, with a '▁' in front and its
 * spaces as '▁', cut into words, each starting at a '▁' ("a  b" gives "▁a"
 * "▁" "▁b"), as the encoder cuts them.  Characters that are not
 * tfm_char_pieceable (a literal U+2581 among them) and user symbols found
 * in the text (longest first; a '▁' in one matches a space) end a word and
 * are not learnt over.  A merged piece has '▁' only first, one script class
 * (TFM_CLASS_ANY aside) and at most max_piece_length characters; ties go
 * to the smaller ids, so the result is the same for any thread count.
 * With placeholders, each line's placeholders are replaced by their tokens
 * first (the text between them normalised on its own, as the encoder does),
 * so no merge is learnt over them.
 * create fails with TFM_ERR_RANGE when vocab_size is below
 * 4 + n_user_symbols (+ 32 with placeholders) + 256 + 1, and with TFM_ERR_ARG for a user symbol that
 * is not a valid piece (see tfm_vocab_add), holds a character that is not
 * pieceable (other than '▁'), or is a special or byte piece's text. */
typedef struct tfm_bpe_learner tfm_bpe_learner;

tfm_status tfm_bpe_learner_create(const tfm_bpe_learn_params *p, tfm_bpe_learner **out,
                                  tfm_error *err);
void tfm_bpe_learner_free(tfm_bpe_learner *l);
/* Adds one raw line (normalised inside).  *n_repaired counts invalid UTF-8
 * sequences replaced (may be NULL). */
tfm_status tfm_bpe_learner_add(tfm_bpe_learner *l, const char *line, size_t len,
                               size_t *n_repaired, tfm_error *err);
/* Adds many lines at once, normalising them on the learner's threads.  On
 * failure nothing of the batch is kept and the message starts with the
 * line's number in the batch, from 1 ("line 3: invalid UTF-8 at ..."). */
tfm_status tfm_bpe_learner_add_batch(tfm_bpe_learner *l, const char *const *lines,
                                     const size_t *lens, size_t n, size_t *n_repaired,
                                     tfm_error *err);
/* Learns the merges.  When the corpus cannot fill vocab_size pieces, fails
 * with TFM_ERR_RANGE saying the largest size it supports (or, with
 * soft_vocab_limit, returns that smaller vocabulary).  No lines may be
 * added after it. */
tfm_status tfm_bpe_learner_finish(tfm_bpe_learner *l, tfm_vocab **out, tfm_error *err);

/* What tfm_bpe_learner_read tells after each batch it added: the batch's
 * lines (1-based numbers in the reader), their bytes (a line end counted
 * for each) and the invalid UTF-8 sequences replaced in them. */
typedef struct tfm_learn_batch {
    size_t first_line, last_line;
    size_t bytes;
    size_t repaired;
} tfm_learn_batch;

/* Adds every line of r to the learner, in batches of the lines that are
 * ready (tfm_bpe_learner_add_batch), calling added(ctx, batch) after each
 * (added may be NULL).  Returns TFM_OK at the end of r, or the first
 * failure, described in *failure (may be NULL): TFM_BATCH_READ for a line r
 * could not read (failure->item: its 0-based number), TFM_BATCH_WORK for a
 * batch the learner refused (the message as add_batch gives it, "line N"
 * numbering the line in r, from 1). */
tfm_status tfm_bpe_learner_read(tfm_bpe_learner *l, tfm_line_reader *r,
                                void (*added)(void *ctx, const tfm_learn_batch *batch),
                                void *ctx, tfm_batch_failure *failure);

/* ---- encoding and decoding ------------------------------------------------------------ */

/* An encoder: a vocabulary plus the tables that make encoding fast (a table
 * of mergeable pairs and a cache of encoded words).  Holds a pointer to the
 * vocabulary: the vocabulary must outlive the encoder.  One encoder may be
 * used by one thread at a time; create one per thread. */
typedef struct tfm_bpe tfm_bpe;

tfm_status tfm_bpe_create(const tfm_vocab *v, tfm_bpe **out, tfm_error *err);
void tfm_bpe_free(tfm_bpe *b);

typedef struct tfm_bpe_encode_params {
    float dropout;      /* BPE-dropout (Provilkov et al., 2020): each merge skipped with
                           this probability; 0 for the deterministic segmentation */
    tfm_rng *rng;       /* required when dropout > 0 */
    bool strict;        /* invalid UTF-8 is TFM_ERR_UTF8 instead of U+FFFD */
} tfm_bpe_encode_params;

/* Normalises (as the vocabulary says) and encodes one raw line into ids
 * (cleared first).  The line may be empty (no ids).  *n_repaired as for
 * tfm_normalize.  p may be NULL: no dropout, not strict. */
tfm_status tfm_bpe_encode(tfm_bpe *b, const tfm_bpe_encode_params *p, const char *line,
                          size_t len, tfm_ids *out, size_t *n_repaired, tfm_error *err);

/* Appends the pieces of ids, separated by single spaces, to out (cleared first). */
tfm_status tfm_bpe_ids_to_pieces(const tfm_vocab *v, const int32_t *ids, size_t n,
                                 tfm_buf *out, tfm_error *err);
/* Parses a piece line (pieces separated by spaces) into ids; an unknown
 * piece is TFM_ERR_FORMAT naming it. */
tfm_status tfm_bpe_pieces_to_ids(const tfm_vocab *v, const char *line, size_t len,
                                 tfm_ids *out, tfm_error *err);

/* Decodes ids to text (out cleared first): pieces joined, '▁' to space, the
 * first space dropped, byte pieces gathered into bytes (a sequence that is
 * not valid UTF-8 becomes U+FFFD), <s> </s> <pad> dropped, <unk> as U+2047.
 * An id outside the vocabulary is TFM_ERR_RANGE. */
tfm_status tfm_bpe_decode(const tfm_vocab *v, const int32_t *ids, size_t n, tfm_buf *out,
                          tfm_error *err);

/* ---- placeholders -------------------------------------------------------------------- */

/* Placeholders are the parts of a software string that a translation must
 * carry over exactly: printf conversions, %(name)s, %1, {name}, ${var},
 * XML tags, entities.  A vocabulary learnt with them (tfm_bpe_learn_params
 * .placeholders) holds TFM_PH_TOKENS reserved user pieces <ph1> .. <ph32>;
 * encoding puts the token <phN> in place of each placeholder numbered N, and
 * decoding puts back the text of placeholder N of the source line.  The
 * scanning rules are in lib/text/placeholder.c and tokenize(1).
 *
 * Numbering: the distinct placeholder texts of a line, sorted bytewise
 * (memcmp order, the shorter first on a common prefix), are numbered from 1;
 * "%s of %d" gives %d 1 and %s 2, "%s and %s" gives both 1.  The number
 * depends only on the set of texts, so a line and its translation holding
 * the same placeholders number them alike without seeing each other.  A
 * text ranked above TFM_PH_TOKENS is number 0: it stays plain text.  The
 * classes scanned for must be the same at every step (learning, encoding,
 * decoding). */
enum { /* placeholder classes, a bit each */
    TFM_PH_PRINTF = 1 << 0,   /* %s %d %1$s %.2f %-10lu %08x %qs %zu %%: C/gettext c-format */
    TFM_PH_PYTHON = 1 << 1,   /* %(name)s */
    TFM_PH_QT = 1 << 2,       /* %1 .. %99 (Qt, KDE) */
    TFM_PH_BRACES = 1 << 3,   /* {name} {0} {} {name:fmt} (Python str.format, C#) */
    TFM_PH_DOLLAR = 1 << 4,   /* ${var} */
    TFM_PH_TAGS = 1 << 5,     /* <b> </b> <br/> <a href="x">: XML/HTML tags */
    TFM_PH_ENTITIES = 1 << 6, /* &amp; &#123; &#x1F; */
    TFM_PH_ALL = 127,
};
enum { TFM_PH_TOKENS = 32 };

typedef struct tfm_placeholder {
    size_t start, len;   /* bytes of the line */
    unsigned kind;       /* one TFM_PH_* bit */
    int index;           /* 1 .. TFM_PH_TOKENS: the token <ph index>; 0: kept as text */
    bool ordered;        /* a printf conversion whose argument is taken in order (not
                            positional %N$, not %%): translations must keep these in the
                            source's order, or msgfmt --check-format rejects them */
} tfm_placeholder;

/* The placeholders of a line, in the order they occur (items[0..n)), and
 * the number of distinct texts among them (numbered or not). */
typedef struct tfm_placeholders {
    tfm_placeholder *items;
    size_t n, cap;
    int n_distinct;
} tfm_placeholders;

void tfm_placeholders_init(tfm_placeholders *p);
void tfm_placeholders_free(tfm_placeholders *p); /* the items; the struct is the caller's */

/* Parses "printf,python,qt,braces,dollar,tags,entities" (any of them, comma
 * separated) or "all" or "none" into TFM_PH_* bits; an unknown name is
 * TFM_ERR_ARG naming it. */
tfm_status tfm_placeholder_classes_parse(const char *list, unsigned *classes, tfm_error *err);

/* Finds the placeholders of the classes asked for in line[0..len) and
 * numbers them; out (from tfm_placeholders_init) is overwritten.  Any bytes
 * may be in the line; a placeholder's text is always valid UTF-8 without a
 * control character (tab and newline included). */
tfm_status tfm_placeholders_scan(const char *line, size_t len, unsigned classes,
                                 tfm_placeholders *out, tfm_error *err);

/* The id of the user piece "<ph index>" in v, or -1 (a vocabulary without
 * placeholder tokens, or index outside 1 .. TFM_PH_TOKENS). */
int32_t tfm_vocab_placeholder_id(const tfm_vocab *v, int index);

/* The line with each numbered placeholder replaced by "<phN>", into out
 * (cleared first).  p: the line's tfm_placeholders_scan. */
tfm_status tfm_placeholders_replace(const char *line, size_t len, const tfm_placeholders *p,
                                    tfm_buf *out, tfm_error *err);

/* The text of the placeholder numbered index in line (its first
 * occurrence), *len bytes (len may be NULL), or NULL when none is. */
const char *tfm_placeholders_text(const char *line, const tfm_placeholders *p, int index,
                                  size_t *len);

/* tfm_bpe_encode with the numbered placeholders of p (the line's scan) as
 * their tokens: the text between them is normalised and encoded as usual,
 * each placeholder is the id of <phN> alone (never split, never merged with
 * its neighbours).  Only placeholders give placeholder ids: a "<ph1>" that
 * normalisation makes out of other characters is spelled as text.  Where
 * normalisation changes nothing at a placeholder's edges, the ids are those
 * of tfm_bpe_encode on tfm_placeholders_replace's text.  A vocabulary
 * without the tokens the line needs is TFM_ERR_FORMAT. */
tfm_status tfm_bpe_encode_placeholders(tfm_bpe *b, const tfm_bpe_encode_params *p,
                                       const char *line, size_t len, const tfm_placeholders *ph,
                                       tfm_ids *out, size_t *n_repaired, tfm_error *err);

/* tfm_bpe_decode that puts back placeholders: each <phN> id becomes the text
 * of placeholder N of src_line (ph: its scan), as it is in src_line (raw,
 * not normalised); a <phN> that src_line does not have is dropped and
 * counted in *n_dropped (may be NULL).  So for a line x encoded with
 * tfm_bpe_encode_placeholders, decoding gives normalize(x) with each
 * numbered placeholder as it was in x (the same as normalize(x) when
 * normalisation changes no placeholder and nothing at their edges). */
tfm_status tfm_bpe_decode_placeholders(const tfm_vocab *v, const int32_t *ids, size_t n,
                                       const char *src_line, size_t src_len,
                                       const tfm_placeholders *ph, tfm_buf *out,
                                       size_t *n_dropped, tfm_error *err);

/* ---- glossaries ---------------------------------------------------------------------- */

/* A glossary asks a translation to use given target terms for given source
 * terms: each source term found in a line gives a constraint for decode
 * --constraints (tfm_constraints_parse in tfm/search.h), met by any one of
 * its target terms.  Example (tokenize(1) does this for every line):
 *
 *     tfm_glossary *g;
 *     tfm_glossary_load("terms.tsv", vocab, NULL, &g, &err);
 *     tfm_term_matches m;
 *     tfm_term_matches_init(&m);
 *     tfm_bpe_encode(bpe, NULL, line, len, &ids, NULL, &err);
 *     tfm_glossary_match(g, ids.data, ids.len, &m, &err);
 *     tfm_glossary_constraints(g, &m, &constraints_line, &err);
 *
 * The file: UTF-8 text, one pair a line, SOURCE TAB TARGET, spaces at the
 * ends of each side trimmed; several lines may share a source term (any
 * one of their targets meets it); empty lines and lines that start with '#'
 * are skipped.  A line without a TAB, with two, or with an empty side is
 * TFM_ERR_FORMAT "line N: ...", and so is a term that is invalid UTF-8.
 *
 * Matching, on the ids of a line (rules in lib/text/glossary.c): a source
 * term is encoded on its own and found as a whole word, case-sensitively on
 * the normalised text: its ids start at a piece that begins with '▁' (or
 * glued after punctuation or a placeholder token, as "interface" in
 * "l'interface", or "file" in "(file)") and end at the end of the line or
 * before a piece that does not go on with a letter, digit or mark ("file,"
 * holds "file", "files" does not).  Longer terms first (more ids, then more
 * bytes, then the earlier line); an occurrence that overlaps one taken is
 * skipped.  A term never matches across a placeholder token.  Each term
 * found gives one constraint however often it occurs: its alternatives are
 * the encodings of its target terms, each as a word of its own (starting
 * with '▁'). */

/* The constraints a line may hold: decode's TFM_MAX_CONSTRAINTS (tfm/search.h),
 * kept equal by hand (a test checks the two). */
enum { TFM_GLOSSARY_MAX_CONSTRAINTS = 64 };

typedef struct tfm_glossary tfm_glossary;

/* Parses a glossary held in memory and encodes its terms with v, the
 * source's vocabulary, and its target terms with tgt_v, the target's (NULL:
 * v, a joint vocabulary); v must outlive the glossary.  Errors as above,
 * "line N: ..." naming the line. */
tfm_status tfm_glossary_parse(const char *data, size_t size, const tfm_vocab *v,
                              const tfm_vocab *tgt_v, tfm_glossary **out, tfm_error *err);
/* The same from a file descriptor (read to its end; at most 1 GiB). */
tfm_status tfm_glossary_read_fd(int fd, const tfm_vocab *v, const tfm_vocab *tgt_v,
                                tfm_glossary **out, tfm_error *err);
/* The same from a file: TFM_ERR_IO "cannot open PATH: ..." when it cannot be opened. */
tfm_status tfm_glossary_load(const char *path, const tfm_vocab *v, const tfm_vocab *tgt_v,
                             tfm_glossary **out, tfm_error *err);
void tfm_glossary_free(tfm_glossary *g);

/* The number of distinct source terms, numbered 0.. in the order of their
 * first line. */
int tfm_glossary_size(const tfm_glossary *g);
/* Source term `term` as written in the file (trimmed, not NUL-terminated),
 * *len bytes (len may be NULL); NULL outside 0..size-1. */
const char *tfm_glossary_term(const tfm_glossary *g, int term, size_t *len);
const tfm_vocab *tfm_glossary_vocab(const tfm_glossary *g);

/* A term found in a line. */
typedef struct tfm_term_match {
    int term;           /* its number (tfm_glossary_term) */
    int rank;           /* its priority: 0 is taken first */
    size_t start, len;  /* ids[start .. start + len): its leftmost occurrence taken */
} tfm_term_match;

/* The terms found in a line, and the memory matching works in (kept from
 * line to line; one per thread). */
typedef struct tfm_term_matches {
    tfm_term_match *found; /* [n_found]: one per term, in the order of their start */
    size_t n_found;
    size_t n_dropped;      /* further terms found beyond TFM_GLOSSARY_MAX_CONSTRAINTS
                              (those of the lowest priority), left out */
    /* working memory */
    size_t found_cap;
    tfm_term_match *cand;
    size_t n_cand, cand_cap;
    unsigned char *covered;
    size_t covered_cap;
} tfm_term_matches;

void tfm_term_matches_init(tfm_term_matches *m);
void tfm_term_matches_free(tfm_term_matches *m); /* its memory; the struct is the caller's */

/* Finds the glossary's terms in ids[0..n), a line encoded with the
 * glossary's vocabulary (with or without placeholders), into m.  g is only
 * read: threads may share it, each with its own m.  TFM_ERR_RANGE for an id
 * outside the vocabulary. */
tfm_status tfm_glossary_match(const tfm_glossary *g, const int32_t *ids, size_t n,
                              tfm_term_matches *m, tfm_error *err);

/* The constraints line of m's terms into out (cleared first): for each term
 * found, in order, its alternatives as id lines joined by " | ", the
 * constraints joined by TABs; an empty line when none was found. */
tfm_status tfm_glossary_constraints(const tfm_glossary *g, const tfm_term_matches *m,
                                    tfm_buf *out, tfm_error *err);

/* ---- line filters -------------------------------------------------------------------- */

/* A filter turns each line of a stream into one output line, in order, as
 * tokenize(1) does: text into ids or pieces (encode), id or piece lines back
 * into text (decode), or text into normalised text (normalize).  Lines are
 * taken in batches of those that are ready (tfm_batch_loop), so a line typed
 * at a terminal is answered at once; encoding runs on several threads, and
 * gives the same output for any thread count.  Example:
 *
 *     tfm_filter_params p = tfm_filter_default_params();
 *     p.output = TFM_LINE_PIECES;
 *     tfm_text_filter *f;
 *     tfm_text_filter_create(vocab, &p, &f, &err);
 *     tfm_text_filter_run(f, lines, write_line, NULL, ctx, &failure);
 */
typedef enum tfm_filter_op {
    TFM_FILTER_ENCODE = 0,
    TFM_FILTER_DECODE = 1,
    TFM_FILTER_NORMALIZE = 2,
} tfm_filter_op;

typedef enum tfm_line_format {
    TFM_LINE_AUTO = 0,   /* decode: an id line when every token is a decimal number */
    TFM_LINE_IDS = 1,    /* "12 7 431" */
    TFM_LINE_PIECES = 2, /* "▁the ▁cat" */
} tfm_line_format;

typedef struct tfm_filter_params {
    tfm_filter_op op;       /* default TFM_FILTER_ENCODE */
    tfm_line_format output; /* encode: ids (default) or pieces */
    tfm_line_format input;  /* decode: auto (default), ids or pieces */
    float dropout;          /* encode: BPE-dropout (default 0) */
    uint64_t seed;          /* encode: line n (0-based over every run of the filter) draws
                               from a generator seeded by seed and n (default 1) */
    bool strict;            /* encode, normalize: invalid UTF-8 is an error */
    tfm_norm_params norm;   /* normalize without a vocabulary (default NFKC; its strict
                               is not read: p.strict is) */
    int threads;            /* encode: threads to use (default: one per CPU); decode and
                               normalize run on one */
    /* Placeholders (see "placeholders" above): encode with
     * tfm_bpe_encode_placeholders, decode with tfm_bpe_decode_placeholders.
     * The vocabulary must hold <ph1> .. <ph32> (create fails otherwise). */
    bool placeholders;
    unsigned placeholder_classes;   /* TFM_PH_* bits (default TFM_PH_ALL) */
    tfm_line_reader *placeholder_source; /* decode: the source text, whose line k gives
                                       the placeholders of input line k, counted over every
                                       run.  Not owned; it must outlive the filter */
    /* decode: called before line `line` (1-based in the run's reader) is
     * written when its ids held n placeholder tokens its source line does not
     * have, which were dropped; ctx is the run's.  May be NULL. */
    void (*placeholders_dropped)(void *ctx, size_t line, size_t n);
    /* encode: the terms of this glossary found in each line (tfm_glossary_match)
     * give its constraints line (tfm_glossary_constraints), handed to
     * constraints(ctx, line, text, len, n_dropped) before line `line` is written
     * (n_dropped: terms beyond TFM_GLOSSARY_MAX_CONSTRAINTS left out); ctx is
     * the run's, and a status other than TFM_OK ends the run.  The glossary must
     * be of the filter's vocabulary, and dropout 0 (terms are found in the
     * deterministic segmentation).  Not owned; it must outlive the filter. */
    const tfm_glossary *glossary;
    tfm_status (*constraints)(void *ctx, size_t line, const char *text, size_t len,
                              size_t n_dropped, tfm_error *err);
    /* encode: the text of a piece put first on every non-empty line, such
     * as a multilingual model's target-language token ">>fra<<" (NULL:
     * none).  The vocabulary must hold it (create fails otherwise, naming
     * it).  Not owned: it must outlive the filter. */
    const char *first_piece;
} tfm_filter_params;

tfm_filter_params tfm_filter_default_params(void);

typedef struct tfm_text_filter tfm_text_filter;

/* v: the vocabulary, required to encode and decode (TFM_ERR_ARG without
 * it); to normalize, given, its normalisation is used instead of p->norm
 * (p->strict still applies).  v must outlive the filter. */
tfm_status tfm_text_filter_create(const tfm_vocab *v, const tfm_filter_params *p,
                                  tfm_text_filter **out, tfm_error *err);
void tfm_text_filter_free(tfm_text_filter *f);

/* One line through the filter as worker `worker` (0 .. threads-1; one
 * thread per worker at a time): the result in out (cleared first), the
 * invalid UTF-8 sequences replaced in *repaired (may be NULL).  index: the
 * line's number for dropout's generator.  Errors as tfm_bpe_encode,
 * tfm_ids_parse, tfm_bpe_pieces_to_ids, tfm_bpe_decode, tfm_normalize. */
tfm_status tfm_text_filter_line(tfm_text_filter *f, int worker, uint64_t index, const char *line,
                                size_t len, tfm_buf *out, size_t *repaired, tfm_error *err);
/* Decoding with placeholders, tfm_text_filter_line reads the next line of
 * the placeholder source for each line; a source that has ended is
 * TFM_ERR_FORMAT, and tfm_text_filter_source_ended is then true.  After the
 * last line, tfm_text_filter_finish checks that the source has ended too
 * (TFM_ERR_FORMAT, "line N: ...", when it goes on; TFM_OK otherwise and
 * when there is no source). */
bool tfm_text_filter_source_ended(const tfm_text_filter *f);
tfm_status tfm_text_filter_finish(tfm_text_filter *f, tfm_error *err);
/* The placeholder tokens dropped from the last line worker decoded. */
size_t tfm_text_filter_dropped(const tfm_text_filter *f, int worker);
/* With a glossary: the constraints line of the last line worker encoded
 * (NUL-terminated, *len bytes; len may be NULL) and the terms it left out
 * (*n_dropped, may be NULL).  Valid until that worker's next line. */
const char *tfm_text_filter_constraints(const tfm_text_filter *f, int worker, size_t *len,
                                        size_t *n_dropped);

/* Receives line `line` (1-based number in the reader) of a run's output, in
 * order: its text (len bytes, no newline) and the invalid UTF-8 sequences
 * replaced in it.  A status other than TFM_OK ends the run. */
typedef tfm_status (*tfm_filter_write_fn)(void *ctx, size_t line, const char *text, size_t len,
                                          size_t repaired, tfm_error *err);

/* Runs every line of r through the filter and gives each result to write,
 * in order; flush(ctx) (may be NULL) is called before the input is waited
 * for.  Returns TFM_OK at the end of r, or the first failure, described in
 * *failure (may be NULL; item: the line's 0-based number in r): a line that
 * could not be read (TFM_BATCH_READ) or filtered (TFM_BATCH_WRITE, with the
 * lines before it written first), or write's own.  The filter counts lines
 * over its runs: a second run (the next file) goes on from there. */
tfm_status tfm_text_filter_run(tfm_text_filter *f, tfm_line_reader *r, tfm_filter_write_fn write,
                               void (*flush)(void *ctx), void *ctx, tfm_batch_failure *failure);

/* ---- sentence pairs ----------------------------------------------------------------- */

/* A pair reader takes sentence pairs from two line readers in step: line n of
 * the sources and line n of the targets (or sources alone, given no target
 * reader).  Each line is an id line (tfm_ids_parse) or, given an encoder,
 * text encoded with it (tfm_bpe_encode); either way its ids are checked
 * against the side's vocabulary size.  A source is made what a model reads:
 * cropped to max_source ids, </s> included, then ended with eos_id (an empty
 * source stays empty, as 'encode' gives it).  A target longer than
 * max_target is cropped, or kept whole and flagged (crop_target false).
 *
 * The reader prints nothing: what a program warns about (invalid UTF-8
 * repaired, a line cropped, an empty source) is in the pair it returns, and
 * where a pair could not be taken (which file, which line) in
 * tfm_pair_reader_failure.  Example:
 *
 *     tfm_pair_params p = tfm_pair_default_params();
 *     p.src_vocab_size = c->src_vocab_size; p.max_source = c->max_positions; ...
 *     tfm_pair_reader_create(src_lines, tgt_lines, &p, &pr, &err);
 *     tfm_pair pair;
 *     tfm_pair_init(&pair);
 *     while ((s = tfm_pair_reader_next(pr, &pair, &err)) == TFM_OK)
 *         use(pair.line, pair.src.ids, pair.tgt.ids);
 *     if (s != TFM_EOF) report(tfm_pair_reader_failure(pr), err.msg);
 */
typedef enum tfm_side { TFM_SOURCE = 0, TFM_TARGET = 1 } tfm_side;

typedef struct tfm_pair_params {
    int32_t src_vocab_size, tgt_vocab_size; /* ids must be below these (<= 0: no limit) */
    size_t max_source;  /* ids a source may hold, </s> included (0: no limit) */
    size_t max_target;  /* ids a target may hold (0: no limit) */
    bool crop_target;   /* a longer target is cropped; false: kept whole, flagged too_long */
    bool source_eos;    /* a non-empty source ends with eos_id */
    int32_t eos_id;
    tfm_bpe *bpe;       /* lines are text encoded with it; NULL: id lines.  Not owned; it
                           must outlive the reader, which alone may use it meanwhile */
    tfm_bpe *src_bpe;   /* with bpe: the source side's own encoder (a model with a
                           vocabulary per side); NULL: bpe encodes both */
    bool strict;        /* text: invalid UTF-8 is an error instead of U+FFFD */
    bool guess_format;  /* with bpe: each side is id lines or text as its first lines show
                           (up to TFM_GUESS_LINES, what is ready; tfm_format_guess);
                           false: text whenever bpe is given */
} tfm_pair_params;

/* ---- id lines or text (format_guess.c) ---- */

enum { TFM_GUESS_LINES = 4096 }; /* the lines a guess of the format looks at, at most */
/* Fewer non-empty lines than this, all ids, are thin evidence that a file
 * holds ids rather than text. */
enum { TFM_GUESS_THIN = 10 };

/* What the first lines of a file say: ids when most non-empty ones are id
 * lines (tfm_id_line_count), else text. */
typedef struct tfm_format_guess {
    size_t lines;       /* non-empty lines seen */
    size_t id_lines;    /* ... that were id lines */
    bool single_ids;    /* each of them a single number */
} tfm_format_guess;

/* Counts one line (empty or blank lines say nothing). */
void tfm_format_guess_add(tfm_format_guess *g, const char *line, size_t len);
/* Whether the lines seen say ids (false when none were seen). */
bool tfm_format_guess_ids(const tfm_format_guess *g);
/* When ids were guessed on thin evidence (few lines, single numbers, or
 * some lines not ids): true, and the note to give in out ("read as id
 * lines: it has only 3 non-empty lines of ids; give HINT if it is text"). */
bool tfm_format_guess_note(const tfm_format_guess *g, const char *hint, char *out, size_t size);

/* How a side of a pair reader is read. */
typedef struct tfm_pair_format {
    bool decided;       /* known (always, without guess_format) */
    bool text;
    tfm_format_guess guess; /* guess_format: what the first lines said */
} tfm_pair_format;

/* Id lines, no vocabulary limits, no length limits, crop_target, sources
 * ended with TFM_ID_EOS, not strict. */
tfm_pair_params tfm_pair_default_params(void);

/* One side of a pair, and what happened to it. */
typedef struct tfm_pair_side {
    tfm_ids ids;        /* a source with its </s>; cropped where it was too long */
    bool done;          /* the line was read and parsed (also set, on a failure, for a
                           side parsed before it, so its warnings can be given) */
    size_t length;      /* ids the line gave, before cropping and </s> */
    size_t repaired;    /* text: invalid UTF-8 sequences replaced by U+FFFD */
    bool cropped;       /* longer than its limit: ids holds the first ones */
    bool too_long;      /* a target longer than max_target, kept whole (crop_target false) */
} tfm_pair_side;

typedef struct tfm_pair {
    size_t line;        /* the pair's 1-based line number */
    tfm_pair_side src, tgt; /* tgt: empty, not done, when there are sources alone */
} tfm_pair;

void tfm_pair_init(tfm_pair *p);
void tfm_pair_free(tfm_pair *p); /* the ids; the struct is the caller's */

/* Where the reader stopped on a failure: the file at fault and its line.
 * A mismatch (the files differ in length) has line 0 and names the file
 * that ended first. */
typedef struct tfm_pair_failure {
    tfm_side side;
    size_t line;
    bool mismatch;
} tfm_pair_failure;

typedef struct tfm_pair_reader tfm_pair_reader;

/* src is required (TFM_ERR_ARG without it), tgt may be NULL (sources
 * alone).  The reader owns neither: both must outlive it.  max_source 1
 * with source_eos crops every source to its </s> alone. */
tfm_status tfm_pair_reader_create(tfm_line_reader *src, tfm_line_reader *tgt,
                                  const tfm_pair_params *p, tfm_pair_reader **out,
                                  tfm_error *err);
void tfm_pair_reader_free(tfm_pair_reader *pr);

/* Reads the next pair into *pair: TFM_OK; TFM_EOF when the files end
 * together; or an error, said in err and located by tfm_pair_reader_failure:
 * a line that cannot be read, or a bad line (both lines are read before
 * either is parsed, so files of different lengths are found before a bad
 * line at their end), or a mismatch.  pair NULL: the pair is read past
 * (its lines are read in step, nothing is parsed). */
tfm_status tfm_pair_reader_next(tfm_pair_reader *pr, tfm_pair *pair, tfm_error *err);

/* Parses one line of a side as next does, into *out: for lines that come
 * from elsewhere (the hypotheses of an n-best list, say).  On a failure
 * nothing is recorded in tfm_pair_reader_failure. */
tfm_status tfm_pair_reader_parse(tfm_pair_reader *pr, tfm_side side, const char *line,
                                 size_t len, tfm_pair_side *out, tfm_error *err);

/* Reads what is left of the files, parsing nothing, to count them: the lines
 * each holds in all (*n_tgt 0 with sources alone).  For a message that gives
 * both lengths; an unreadable line fails as in next. */
tfm_status tfm_pair_reader_count(tfm_pair_reader *pr, size_t *n_src, size_t *n_tgt,
                                 tfm_error *err);

/* True when next would return without waiting: each file has a line ready
 * or has ended (tfm_lines_ready). */
bool tfm_pair_reader_ready(tfm_pair_reader *pr);

/* Once per side, when its format has been guessed on thin evidence: true,
 * and the note to give (tfm_format_guess_note with hint) in out. */
bool tfm_pair_reader_note(tfm_pair_reader *pr, tfm_side side, const char *hint, char *out,
                          size_t size);

/* Where the last failure of next or count was. */
const tfm_pair_failure *tfm_pair_reader_failure(const tfm_pair_reader *pr);

#endif
