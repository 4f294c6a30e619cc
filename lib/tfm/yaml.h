/* tfm/yaml.h - YAML documents (lib/io/yaml.c, parsed by libyaml): Marian's
 * configurations (decoder.yml, the model's special:model.yml) as a small
 * tree, and Marian's vocabularies (vocab.yml) as an array of pieces
 * indexed by id.
 *
 * Scalars are kept as the raw strings the YAML holds, never resolved to a
 * type: the key `yes`, `null` or `1` is the string "yes", "null" or "1"
 * (pyyaml's resolution turns such vocabulary pieces into true, None and 1;
 * CTranslate2's converters/marian.py reads vocabularies by hand for that
 * reason).  The caller asks for the type it wants (tfm_yaml_int, _bool,
 * _double), and that is checked.
 *
 * What is refused, each with a message that names the line and column
 * from 1 ("line 12, column 3: ...") and, where there is one, the key:
 * what libyaml refuses (tabs as indentation, an unclosed quote, bad
 * indentation, invalid UTF-8); an input larger than TFM_YAML_MAX_SIZE;
 * nesting deeper than TFM_YAML_MAX_DEPTH; more than TFM_YAML_MAX_NODES
 * nodes; aliases (`*name`: refused, so no alias can multiply a document);
 * more than one document; a key that is not a scalar; a key twice in one
 * mapping; a scalar holding a NUL ("\0").  Failures are TFM_ERR_FORMAT,
 * TFM_ERR_UNSUPPORTED (aliases, several documents), TFM_ERR_RANGE (the
 * limits) or TFM_ERR_NOMEM.
 *
 * Reading a Marian decoder.yml:
 *
 *     tfm_yaml *doc;
 *     if (tfm_yaml_load("decoder.yml", &doc, &err) != TFM_OK) ...
 *     const tfm_yaml_node *root = tfm_yaml_root(doc);
 *     const char **models;
 *     size_t n_models;
 *     tfm_yaml_get_strings(root, "models", &models, &n_models, &err);
 *     int64_t beam = 4;
 *     const tfm_yaml_node *b = tfm_yaml_get(root, "beam-size");  // NULL if absent
 *     if (b) tfm_yaml_int(b, 1, 1000, &beam, &err);
 *     ...
 *     free(models);
 *     tfm_yaml_free(doc);
 */
#ifndef TFM_YAML_H
#define TFM_YAML_H

#include "tfm/core.h"

/* The largest input: 256 MiB (a 64k-piece vocab.yml is about 1 MB). */
#define TFM_YAML_MAX_SIZE ((size_t)256 << 20)
/* The deepest nesting of sequences and mappings: Marian's files have 2. */
#define TFM_YAML_MAX_DEPTH 64
/* The most nodes a document may have (a 64k-piece vocabulary read as a
 * document has 128k); each costs some 64 bytes. */
#define TFM_YAML_MAX_NODES ((size_t)4 << 20)

/* ---- documents ------------------------------------------------------------------ */

typedef enum tfm_yaml_kind {
    TFM_YAML_SCALAR = 0,
    TFM_YAML_SEQUENCE = 1,
    TFM_YAML_MAPPING = 2,
} tfm_yaml_kind;

/* A node of a parsed document, read-only, living as long as its document.
 *   scalar:   str[0..len) its value, NUL-terminated, holding no NUL; plain
 *             is true when it was written without quotes or block style
 *             (YAML resolves only plain scalars: "yes" in quotes is a string
 *             to every reader, plain yes is true to a YAML 1.1 reader);
 *   sequence: count items, children[0 .. count);
 *   mapping:  count pairs, children[2i] the key (always a scalar) and
 *             children[2i + 1] its value, in the order of the document.
 * key is the key whose value this node is, or NULL (for messages).
 * line and column (from 1) are where the node starts. */
typedef struct tfm_yaml_node tfm_yaml_node;
struct tfm_yaml_node {
    tfm_yaml_kind kind;
    bool plain;
    size_t line, column;
    const char *str;
    size_t len;
    size_t count;
    const tfm_yaml_node *const *children;
    const char *key;
};

/* A parsed document; it owns every node. */
typedef struct tfm_yaml tfm_yaml;

/* Parses one YAML document (UTF-8, or UTF-16 with a byte order mark, as
 * libyaml reads).  data need not outlive the document. */
tfm_status tfm_yaml_parse(const void *data, size_t size, tfm_yaml **out, tfm_error *err);
/* Reads path and parses it; TFM_ERR_IO names path, other messages do not. */
tfm_status tfm_yaml_load(const char *path, tfm_yaml **out, tfm_error *err);
void tfm_yaml_free(tfm_yaml *doc);

/* The top node, or NULL when the input holds no document (empty, or only
 * comments). */
const tfm_yaml_node *tfm_yaml_root(const tfm_yaml *doc);

/* ---- looking things up ------------------------------------------------------------ */

/* The value of key in mapping map, or NULL when map is NULL, not a mapping,
 * or has no such key. */
const tfm_yaml_node *tfm_yaml_get(const tfm_yaml_node *map, const char *key);

/* The conversions below fail with TFM_ERR_FORMAT and a message such as
 * "line 4, column 10: 'beam-size': expected an integer, found 'four'"
 * (TFM_ERR_RANGE when an integer is outside [min, max]). */

/* A scalar's raw string (any scalar: plain or quoted), living as long as
 * the document; len may be NULL. */
tfm_status tfm_yaml_string(const tfm_yaml_node *n, const char **s, size_t *len,
                           tfm_error *err);
/* A decimal integer with an optional sign ("12", "-3", "+7"; no spaces,
 * no "0x", no "1e3"; checked with strtoll) within [min, max]. */
tfm_status tfm_yaml_int(const tfm_yaml_node *n, int64_t min, int64_t max, int64_t *out,
                        tfm_error *err);
/* A YAML 1.1 boolean as Marian writes them: true/false, yes/no, on/off,
 * y/n, each also Capitalized or UPPER CASE. */
tfm_status tfm_yaml_bool(const tfm_yaml_node *n, bool *out, tfm_error *err);
/* A finite decimal number as strtod reads it ("0.1", "1e-6", "-2"); not
 * ".inf" or ".nan". */
tfm_status tfm_yaml_double(const tfm_yaml_node *n, double *out, tfm_error *err);
/* A sequence of scalars (a single scalar counts as a list of one): *out
 * gets an array of count string pointers (malloc'd: the caller frees it
 * with free; the strings live as long as the document; NULL when count is
 * 0). */
tfm_status tfm_yaml_strings(const tfm_yaml_node *n, const char ***out, size_t *count,
                            tfm_error *err);

/* tfm_yaml_get followed by tfm_yaml_strings, with "missing key 'x'"
 * (TFM_ERR_FORMAT) when map has no such key. */
tfm_status tfm_yaml_get_strings(const tfm_yaml_node *map, const char *key, const char ***out,
                                size_t *count, tfm_error *err);

/* ---- Marian vocabularies ------------------------------------------------------------ */

/* A vocab.yml: a mapping from piece to id, one entry a line
 *     "</s>": 0
 *     <unk>: 1
 *     ▁the: 5
 * read as pieces[id].  Each piece is the raw string of its key (quoted
 * or not: never resolved, so `yes: 7` is the piece "yes"); ids are the
 * integers 0 .. count-1, each exactly once.  Refused, with the line and the
 * piece named: a key or id that is not a scalar, an id that is not a
 * decimal integer, a negative id or one of count or more (so an id left
 * out is named as the gap it leaves), an id twice, a piece twice, an empty
 * document.  Read by libyaml's event parser straight into the array, with
 * no tree: a 60k-line file takes some 35 ms of CPU, most of it libyaml's. */
typedef struct tfm_yaml_vocab {
    size_t count;
    const char *const *pieces;  /* pieces[id], NUL-terminated, no NUL inside */
    const size_t *lens;         /* lens[id] == strlen(pieces[id]) */
} tfm_yaml_vocab;

tfm_status tfm_yaml_vocab_parse(const void *data, size_t size, tfm_yaml_vocab **out,
                                tfm_error *err);
/* Reads path and parses it; TFM_ERR_IO names path, other messages do not. */
tfm_status tfm_yaml_vocab_load(const char *path, tfm_yaml_vocab **out, tfm_error *err);
void tfm_yaml_vocab_free(tfm_yaml_vocab *v);

#endif
