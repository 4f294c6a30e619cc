/* test_yaml.c - YAML documents and Marian vocabularies: a decoder.yml and a
 * model's configuration read and looked up; scalars kept raw (yes, null, 1
 * as keys are strings); every conversion's checks; and every refusal with
 * its line and column: tabs, unclosed quotes, duplicate keys, aliases,
 * non-scalar keys, NUL, two documents, depth, size and node limits; a
 * vocabulary with quoting and escapes, and with a gap, a duplicate id or
 * piece, a non-integer, negative or huge id; and the speed of a 60k-line
 * vocabulary. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "testutil.h"
#include "tfm/yaml.h"

static bool contains(const char *msg, const char *part) { return strstr(msg, part) != NULL; }

static tfm_yaml *parse(const char *text)
{
    tfm_yaml *doc = NULL;
    tfm_error err;
    tfm_status st = tfm_yaml_parse(text, strlen(text), &doc, &err);
    CHECK_MSG(st == TFM_OK, "%s", err.msg);
    return doc;
}

/* Parsing text fails with status and a message holding each of the parts
 * (NULL ends them). */
static void check_fails(const char *text, tfm_status status, const char *part1,
                        const char *part2)
{
    tfm_yaml *doc = (tfm_yaml *)1;
    tfm_error err;
    tfm_status st = tfm_yaml_parse(text, strlen(text), &doc, &err);
    CHECK_MSG(st == status && doc == NULL, "status %d for \"%s\": %s", (int)st, text, err.msg);
    CHECK_MSG(st == TFM_OK || contains(err.msg, part1), "'%s' lacks '%s'", err.msg, part1);
    CHECK_MSG(st == TFM_OK || !part2 || contains(err.msg, part2), "'%s' lacks '%s'", err.msg,
              part2);
}

static const char decoder_yml[] =
    "relative-paths: true\n"
    "models:\n"
    "  - opus.spm32k-spm32k.transformer-align.model1.npz.best-perplexity.npz\n"
    "vocabs:\n"
    "  - opus.spm32k-spm32k.vocab.yml\n"
    "  - opus.spm32k-spm32k.vocab.yml\n"
    "beam-size: 6\n"
    "normalize: 0.6\n"
    "word-penalty: 0\n"
    "mini-batch: 1\n"
    "maxi-batch: 1\n"
    "maxi-batch-sort: src\n";

static void test_decoder_yml(void)
{
    tfm_yaml *doc = parse(decoder_yml);
    if (!doc) return;
    tfm_error err;
    const tfm_yaml_node *root = tfm_yaml_root(doc);
    CHECK(root && root->kind == TFM_YAML_MAPPING && root->count == 9);
    CHECK(root->line == 1 && root->column == 1);
    const char **list;
    size_t n;
    CHECK(tfm_yaml_get_strings(root, "models", &list, &n, &err) == TFM_OK && n == 1);
    CHECK(n == 1 && strcmp(list[0], "opus.spm32k-spm32k.transformer-align.model1.npz."
                                    "best-perplexity.npz") == 0);
    free(list);
    CHECK(tfm_yaml_get_strings(root, "vocabs", &list, &n, &err) == TFM_OK && n == 2);
    CHECK(n == 2 && strcmp(list[1], "opus.spm32k-spm32k.vocab.yml") == 0);
    free(list);
    /* a scalar is a list of one */
    CHECK(tfm_yaml_get_strings(root, "maxi-batch-sort", &list, &n, &err) == TFM_OK && n == 1);
    CHECK(n == 1 && strcmp(list[0], "src") == 0);
    free(list);
    CHECK(tfm_yaml_get_strings(root, "shortlist", &list, &n, &err) == TFM_ERR_FORMAT);
    CHECK_MSG(contains(err.msg, "missing key 'shortlist'") && list == NULL && n == 0, "%s",
              err.msg);

    int64_t beam = 0;
    const tfm_yaml_node *b = tfm_yaml_get(root, "beam-size");
    CHECK(b && b->line == 7 && b->column == 12 && strcmp(b->key, "beam-size") == 0);
    CHECK(tfm_yaml_int(b, 1, 1000, &beam, &err) == TFM_OK && beam == 6);
    double norm = 0;
    CHECK(tfm_yaml_double(tfm_yaml_get(root, "normalize"), &norm, &err) == TFM_OK);
    CHECK(norm == 0.6);
    bool rel = false;
    CHECK(tfm_yaml_bool(tfm_yaml_get(root, "relative-paths"), &rel, &err) == TFM_OK && rel);
    int64_t v;
    CHECK(tfm_yaml_int(tfm_yaml_get(root, "maxi-batch-sort"), 0, 10, &v, &err) ==
          TFM_ERR_FORMAT);
    CHECK_MSG(contains(err.msg, "line 12, column 18: 'maxi-batch-sort': expected an integer, "
                                "found 'src'"), "%s", err.msg);
    CHECK(tfm_yaml_int(tfm_yaml_get(root, "models"), 0, 10, &v, &err) == TFM_ERR_FORMAT);
    CHECK_MSG(contains(err.msg, "line 3, column 3: 'models': expected an integer, found a "
                                "sequence"), "%s", err.msg);
    CHECK(tfm_yaml_get(root, "nothere") == NULL && tfm_yaml_get(NULL, "x") == NULL);
    CHECK(tfm_yaml_get(tfm_yaml_get(root, "models"), "x") == NULL);
    tfm_yaml_free(doc);
    tfm_yaml_free(NULL);
}

/* The start of a configuration as Marian keeps it in special:model.yml. */
static const char model_yml[] =
    "bert-class-symbol: \"[CLS]\"\n"
    "dec-cell: gru\n"
    "dec-depth: 6\n"
    "dim-emb: 512\n"
    "dim-vocabs:\n"
    "  - 58101\n"
    "  - 58101\n"
    "enc-depth: 6\n"
    "layer-normalization: false\n"
    "tied-embeddings-all: true\n"
    "transformer-dim-ffn: 2048\n"
    "transformer-ffn-activation: swish\n"
    "transformer-postprocess: dan\n"
    "transformer-preprocess: \"\"\n"
    "type: transformer\n"
    "ulr-dim-emb: 0\n"
    "version: v1.7.6 02f4af4 2018-12-12 18:51:10 -0800\n"
    "flow: {a: [1, 2], b: ~}\n";

static void test_model_yml(void)
{
    tfm_yaml *doc = parse(model_yml);
    if (!doc) return;
    tfm_error err;
    const tfm_yaml_node *root = tfm_yaml_root(doc);
    const char *s;
    size_t len;
    CHECK(tfm_yaml_string(tfm_yaml_get(root, "bert-class-symbol"), &s, &len, &err) == TFM_OK);
    CHECK(len == 5 && strcmp(s, "[CLS]") == 0);
    CHECK(tfm_yaml_string(tfm_yaml_get(root, "transformer-preprocess"), &s, &len, &err) ==
          TFM_OK && len == 0);
    CHECK(!tfm_yaml_get(root, "transformer-preprocess")->plain);
    const tfm_yaml_node *dv = tfm_yaml_get(root, "dim-vocabs");
    CHECK(dv && dv->kind == TFM_YAML_SEQUENCE && dv->count == 2);
    int64_t v = 0;
    CHECK(dv && tfm_yaml_int(dv->children[1], 0, 1 << 24, &v, &err) == TFM_OK && v == 58101);
    bool ln = true;
    CHECK(tfm_yaml_bool(tfm_yaml_get(root, "layer-normalization"), &ln, &err) == TFM_OK && !ln);
    CHECK(tfm_yaml_string(tfm_yaml_get(root, "version"), &s, NULL, &err) == TFM_OK);
    CHECK(strcmp(s, "v1.7.6 02f4af4 2018-12-12 18:51:10 -0800") == 0);
    const tfm_yaml_node *flow = tfm_yaml_get(root, "flow");
    CHECK(flow && flow->kind == TFM_YAML_MAPPING && flow->count == 2);
    const tfm_yaml_node *tilde = tfm_yaml_get(flow, "b");
    CHECK(tilde && tilde->kind == TFM_YAML_SCALAR && strcmp(tilde->str, "~") == 0);
    CHECK(tilde && tilde->plain);
    tfm_yaml_free(doc);
}

/* Keys and values are the raw strings: never resolved to null, bool or int. */
static void test_raw_scalars(void)
{
    tfm_yaml *doc = parse("yes: no\nnull: ~\n'quoted': \"1\"\n1: 2\n\"\\t\\u00e9\": 'it''s'\n"
                          "? complex key\n: value\nempty:\n");
    if (!doc) return;
    const tfm_yaml_node *root = tfm_yaml_root(doc);
    static const char *const keys[] = {"yes", "null", "quoted", "1", "\t\xc3\xa9",
                                       "complex key", "empty"};
    static const char *const values[] = {"no", "~", "1", "2", "it's", "value", ""};
    CHECK(root && root->count == 7);
    for (size_t i = 0; root && i < 7 && i < root->count; i++) {
        CHECK_MSG(strcmp(root->children[2 * i]->str, keys[i]) == 0, "key %zu", i);
        CHECK_MSG(strcmp(root->children[2 * i + 1]->str, values[i]) == 0, "value %zu", i);
        CHECK(tfm_yaml_get(root, keys[i]) == root->children[2 * i + 1]);
    }
    /* plain: yes, null, 1, complex key; quoted: 'quoted', "\t\u00e9" */
    CHECK(root->children[0]->plain && root->children[2]->plain && root->children[6]->plain);
    CHECK(root->children[10]->plain && !root->children[4]->plain && !root->children[8]->plain);
    CHECK(!root->children[9]->plain && !root->children[5]->plain);
    tfm_error err;
    bool b = true;
    CHECK(tfm_yaml_bool(tfm_yaml_get(root, "yes"), &b, &err) == TFM_OK && !b);
    CHECK(tfm_yaml_bool(tfm_yaml_get(root, "null"), &b, &err) == TFM_ERR_FORMAT);
    CHECK_MSG(contains(err.msg, "line 2, column 7: 'null': expected true or false"), "%s",
              err.msg);
    tfm_yaml_free(doc);
}

static void test_conversions(void)
{
    tfm_yaml *doc = parse("a: 12\nb: -3\nc: +7\nd: 0x10\ne: 12abc\n"
                          "f: 99999999999999999999\ng: 1e-6\nh: .inf\ni: nan\nj: ''\n"
                          "k: [x, [y]]\nl: On\nm: Y\nn: 1e999\no: '-'\n");
    if (!doc) return;
    const tfm_yaml_node *r = tfm_yaml_root(doc);
    tfm_error err;
    int64_t v;
    CHECK(tfm_yaml_int(tfm_yaml_get(r, "a"), 0, 100, &v, &err) == TFM_OK && v == 12);
    CHECK(tfm_yaml_int(tfm_yaml_get(r, "b"), -5, 100, &v, &err) == TFM_OK && v == -3);
    CHECK(tfm_yaml_int(tfm_yaml_get(r, "b"), 0, 100, &v, &err) == TFM_ERR_RANGE);
    CHECK_MSG(contains(err.msg, "'b': expected an integer from 0 to 100, found '-3'"), "%s",
              err.msg);
    CHECK(tfm_yaml_int(tfm_yaml_get(r, "c"), 0, 100, &v, &err) == TFM_OK && v == 7);
    CHECK(tfm_yaml_int(tfm_yaml_get(r, "d"), 0, 100, &v, &err) == TFM_ERR_FORMAT);
    CHECK(tfm_yaml_int(tfm_yaml_get(r, "e"), 0, 100, &v, &err) == TFM_ERR_FORMAT);
    CHECK(tfm_yaml_int(tfm_yaml_get(r, "f"), INT64_MIN, INT64_MAX, &v, &err) == TFM_ERR_RANGE);
    CHECK(tfm_yaml_int(tfm_yaml_get(r, "j"), 0, 100, &v, &err) == TFM_ERR_FORMAT);
    CHECK(tfm_yaml_int(tfm_yaml_get(r, "o"), 0, 100, &v, &err) == TFM_ERR_FORMAT);
    double d;
    CHECK(tfm_yaml_double(tfm_yaml_get(r, "g"), &d, &err) == TFM_OK && d == 1e-6);
    CHECK(tfm_yaml_double(tfm_yaml_get(r, "a"), &d, &err) == TFM_OK && d == 12);
    CHECK(tfm_yaml_double(tfm_yaml_get(r, "h"), &d, &err) == TFM_ERR_FORMAT);
    CHECK(tfm_yaml_double(tfm_yaml_get(r, "i"), &d, &err) == TFM_ERR_FORMAT);
    CHECK(tfm_yaml_double(tfm_yaml_get(r, "d"), &d, &err) == TFM_ERR_FORMAT);
    CHECK(tfm_yaml_double(tfm_yaml_get(r, "n"), &d, &err) == TFM_ERR_RANGE);
    CHECK(tfm_yaml_double(tfm_yaml_get(r, "o"), &d, &err) == TFM_ERR_FORMAT);
    bool b = false;
    CHECK(tfm_yaml_bool(tfm_yaml_get(r, "l"), &b, &err) == TFM_OK && b);
    CHECK(tfm_yaml_bool(tfm_yaml_get(r, "m"), &b, &err) == TFM_OK && b);
    const char **list = NULL;
    size_t n = 9;
    CHECK(tfm_yaml_strings(tfm_yaml_get(r, "k"), &list, &n, &err) == TFM_ERR_FORMAT);
    CHECK_MSG(contains(err.msg, "line 11, column 8: expected a string, found a sequence"), "%s",
              err.msg);
    CHECK(list == NULL && n == 0);
    CHECK(tfm_yaml_strings(r, &list, &n, &err) == TFM_ERR_FORMAT);
    CHECK(tfm_yaml_get_strings(tfm_yaml_get(r, "k"), "x", &list, &n, &err) == TFM_ERR_FORMAT);
    CHECK_MSG(contains(err.msg, "expected a mapping, found a sequence"), "%s", err.msg);
    const char *s;
    CHECK(tfm_yaml_string(tfm_yaml_get(r, "k"), &s, NULL, &err) == TFM_ERR_FORMAT);
    CHECK(tfm_yaml_string(NULL, &s, NULL, &err) == TFM_ERR_ARG);
    tfm_yaml_free(doc);

    doc = parse("[]");
    if (doc) {
        CHECK(tfm_yaml_strings(tfm_yaml_root(doc), &list, &n, &err) == TFM_OK && n == 0);
        CHECK(list == NULL);
    }
    tfm_yaml_free(doc);
}

static void test_empty_documents(void)
{
    static const char *const empty[] = {"", "# just a comment\n", "\n\n"};
    for (int i = 0; i < 3; i++) {
        tfm_yaml *doc = parse(empty[i]);
        CHECK(doc && tfm_yaml_root(doc) == NULL);
        tfm_yaml_free(doc);
    }
    tfm_yaml *doc = NULL;
    tfm_error err;
    CHECK(tfm_yaml_parse(NULL, 0, &doc, &err) == TFM_OK && tfm_yaml_root(doc) == NULL);
    tfm_yaml_free(doc);
}

static void test_refusals(void)
{
    check_fails("a: 1\n\tb: 2\n", TFM_ERR_FORMAT, "line 2, column 1:", "a tab");
    check_fails("a:\n\t- x\n", TFM_ERR_FORMAT, "line 2, column 1:", "tab");
    check_fails("a: \"open\nb: 2\n", TFM_ERR_FORMAT, "line 3, column 1:",
                "quoted scalar at line 1, column 4");
    check_fails("a: 'open\n", TFM_ERR_FORMAT, "line 2", "quoted scalar");
    check_fails("a: 1\nb: 2\na: 3\n", TFM_ERR_FORMAT,
                "line 3, column 1: the key 'a' comes twice in one mapping (first at line 1)",
                NULL);
    check_fails("x:\n  k: 1\n  'k': 2\n", TFM_ERR_FORMAT, "line 3, column 3: the key 'k'", NULL);
    check_fails("a: &x 1\nb: *x\n", TFM_ERR_UNSUPPORTED,
                "line 2, column 4: aliases (*x) are not supported", NULL);
    check_fails("? [a, b]\n: 1\n", TFM_ERR_FORMAT,
                "line 1, column 3: a key must be a scalar, not a sequence", NULL);
    check_fails("{a: 1}: 2\n", TFM_ERR_FORMAT, "a key must be a scalar, not a mapping", NULL);
    check_fails("a: \"x\\0y\"\n", TFM_ERR_FORMAT, "line 1, column 4: a scalar holds a NUL",
                NULL);
    check_fails("a: 1\n---\nb: 2\n", TFM_ERR_UNSUPPORTED, "line 2, column 1: a second document",
                NULL);
    check_fails("a: [1, 2\n", TFM_ERR_FORMAT, "line 2", NULL);
    check_fails("a: b: c\n", TFM_ERR_FORMAT, "line 1, column 5", NULL);
    check_fails("\xff\xfe\xfd", TFM_ERR_FORMAT, "byte", "UTF-8");
    check_fails("a: \x80\n", TFM_ERR_FORMAT, "byte 4", NULL);

    /* depth: TFM_YAML_MAX_DEPTH levels are fine, one more is not */
    char deep[2 * TFM_YAML_MAX_DEPTH + 8];
    size_t n = 0;
    for (int i = 0; i < TFM_YAML_MAX_DEPTH; i++) deep[n++] = '[';
    for (int i = 0; i < TFM_YAML_MAX_DEPTH; i++) deep[n++] = ']';
    deep[n] = 0;
    tfm_yaml *doc = parse(deep);
    tfm_yaml_free(doc);
    n = 0;
    for (int i = 0; i <= TFM_YAML_MAX_DEPTH; i++) deep[n++] = '[';
    for (int i = 0; i <= TFM_YAML_MAX_DEPTH; i++) deep[n++] = ']';
    deep[n] = 0;
    check_fails(deep, TFM_ERR_RANGE, "line 1, column 65: nesting deeper than 64 levels", NULL);

    /* size: refused before a byte is read */
    tfm_error err;
    doc = (tfm_yaml *)1;
    CHECK(tfm_yaml_parse("a", TFM_YAML_MAX_SIZE + 1, &doc, &err) == TFM_ERR_RANGE && !doc);
    CHECK_MSG(contains(err.msg, "more than the 268435456"), "%s", err.msg);
    tfm_yaml_vocab *v = (tfm_yaml_vocab *)1;
    CHECK(tfm_yaml_vocab_parse("a", TFM_YAML_MAX_SIZE + 1, &v, &err) == TFM_ERR_RANGE && !v);

}

/* nodes: a flow sequence of TFM_YAML_MAX_NODES scalars (and itself) is one
 * node too many, refused at the last scalar (some 4M events: about 1 s of
 * CPU optimised).  Under the sanitizers, where libyaml's allocations for
 * each scalar (its value and the scanner's buffers) made it 6 s of
 * test_yaml's 7, the sequence holds TFM_YAML_MAX_NODES - 1 empty sequences
 * (no value to allocate, and no child to copy) and then the scalar: the
 * same count of nodes, as many children pending in the outer sequence, the
 * same refusal of the same scalar, in under 2 s. */
static void test_node_limit(void)
{
    tfm_error err;
    const size_t items = TFM_YAML_MAX_NODES;
    char *big = malloc(3 * items + 3);
    CHECK(big != NULL);
    if (!big) return;
    size_t n = 0;
    big[n++] = '[';
#if SANITIZED
    for (size_t i = 0; i + 1 < items; i++) {
        big[n++] = '[';
        big[n++] = ']';
        big[n++] = ',';
    }
    big[n++] = '1';
    big[n++] = ']';
#else
    for (size_t i = 0; i < items; i++) {
        big[n++] = '1';
        big[n++] = ',';
    }
    big[n - 1] = ']';
#endif
    big[n] = 0;
    tfm_yaml *doc = (tfm_yaml *)1;
    CHECK(tfm_yaml_parse(big, n, &doc, &err) == TFM_ERR_RANGE && !doc);
    CHECK_MSG(contains(err.msg, "more than 4194304 nodes"), "%s", err.msg);
    /* the last scalar, just before the closing ']' */
    char where[64];
    snprintf(where, sizeof where, "line 1, column %zu:", n - 1);
    CHECK_MSG(contains(err.msg, where), "%s (not at %s)", err.msg, where);
    free(big);
}

/* ---- vocabularies ---------------------------------------------------------------- */

static const char vocab_yml[] =
    "\"</s>\": 0\n"
    "<unk>: 1\n"
    "\xe2\x96\x81the: 2\n"
    "\"\\\"\": 3\n"
    "yes: 4\n"
    "null: 5\n"
    "\"1\": 6\n"
    "? complex\n"
    ": 7\n"
    "'it''s': 8\n"
    "\"\\t\": 9\n"
    "\"\\u00e9\": 10\n"
    "\"#\": 12\n"
    "\": \": 11\n"
    "\"\": 13\n";

static void test_vocab(void)
{
    tfm_yaml_vocab *v = NULL;
    tfm_error err;
    CHECK_MSG(tfm_yaml_vocab_parse(vocab_yml, strlen(vocab_yml), &v, &err) == TFM_OK, "%s",
              err.msg);
    if (!v) return;
    static const char *const pieces[] = {"</s>", "<unk>", "\xe2\x96\x81the", "\"", "yes",
                                         "null", "1", "complex", "it's", "\t", "\xc3\xa9",
                                         ": ", "#", ""};
    CHECK(v->count == 14);
    for (size_t i = 0; i < 14 && i < v->count; i++) {
        CHECK_MSG(strcmp(v->pieces[i], pieces[i]) == 0, "id %zu: '%s'", i, v->pieces[i]);
        CHECK(v->lens[i] == strlen(pieces[i]));
    }
    tfm_yaml_vocab_free(v);
    tfm_yaml_vocab_free(NULL);

    /* the same file read as a document gives the same pairs */
    tfm_yaml *doc = parse(vocab_yml);
    const tfm_yaml_node *root = doc ? tfm_yaml_root(doc) : NULL;
    CHECK(root && root->count == 14);
    for (size_t i = 0; root && i < root->count; i++) {
        int64_t id = -1;
        CHECK(tfm_yaml_int(root->children[2 * i + 1], 0, 13, &id, &err) == TFM_OK);
        CHECK(id >= 0 && strcmp(root->children[2 * i]->str, pieces[id]) == 0);
    }
    tfm_yaml_free(doc);
}

/* Parsing text as a vocabulary fails with status and a message holding part. */
static void check_vocab_fails(const char *text, tfm_status status, const char *part)
{
    tfm_yaml_vocab *v = (tfm_yaml_vocab *)1;
    tfm_error err;
    tfm_status st = tfm_yaml_vocab_parse(text, strlen(text), &v, &err);
    CHECK_MSG(st == status && v == NULL, "status %d for \"%s\": %s", (int)st, text, err.msg);
    CHECK_MSG(st == TFM_OK || contains(err.msg, part), "'%s' lacks '%s'", err.msg, part);
}

static void test_vocab_refusals(void)
{
    check_vocab_fails("a: 0\nb: 1\nc: 3\n", TFM_ERR_FORMAT,
                      "line 3: piece 'c' has the id 3, but the vocabulary has 3 entries, so ids "
                      "go from 0 to 2, and no piece has the id 2");
    check_vocab_fails("a: 0\nb: 1\nc: 1\n", TFM_ERR_FORMAT,
                      "line 3: piece 'c' has the id 1, which piece 'b' has already (line 2)");
    check_vocab_fails("a: 0\nb: one\n", TFM_ERR_FORMAT,
                      "line 2: piece 'b' has the id 'one', which is not an integer");
    check_vocab_fails("a: 0\nb: 1.0\n", TFM_ERR_FORMAT, "'1.0', which is not an integer");
    check_vocab_fails("a: 0\nb: \n", TFM_ERR_FORMAT, "has the id '', which is not an integer");
    check_vocab_fails("a: 0\nb: -1\n", TFM_ERR_RANGE, "line 2: piece 'b' has the negative id -1");
    check_vocab_fails("a: 0\nb: 99999999999999999999999\n", TFM_ERR_RANGE,
                      "line 2: piece 'b' has the id 99999999999999999999999: ids are below");
    check_vocab_fails("a: 0\nb: 2147483647\n", TFM_ERR_RANGE, "ids are below 2^31 - 1");
    check_vocab_fails("a: 0\nb: 1\n\"a\": 2\n", TFM_ERR_FORMAT,
                      "line 3: piece 'a' comes twice (first at line 1)");
    check_vocab_fails("", TFM_ERR_FORMAT, "the vocabulary is empty");
    check_vocab_fails("# nothing\n", TFM_ERR_FORMAT, "the vocabulary is empty");
    check_vocab_fails("{}\n", TFM_ERR_FORMAT, "the vocabulary is empty");
    check_vocab_fails("- a\n- b\n", TFM_ERR_FORMAT,
                      "line 1, column 1: a vocabulary is one mapping from piece to id, not a "
                      "sequence");
    check_vocab_fails("just text\n", TFM_ERR_FORMAT, "not a scalar");
    check_vocab_fails("a: 0\nb: [1]\n", TFM_ERR_FORMAT,
                      "line 2: piece 'b' has a sequence as its id");
    check_vocab_fails("a: 0\nb: {c: 1}\n", TFM_ERR_FORMAT, "piece 'b' has a mapping as its id");
    check_vocab_fails("a: 0\n? [b]\n: 1\n", TFM_ERR_FORMAT,
                      "line 2, column 3: a piece must be a scalar, not a sequence");
    check_vocab_fails("a: &x 0\nb: *x\n", TFM_ERR_UNSUPPORTED, "line 2, column 4: aliases");
    check_vocab_fails("a: 0\n---\nb: 1\n", TFM_ERR_UNSUPPORTED, "a second document");
    check_vocab_fails("a: 0\n\tb: 1\n", TFM_ERR_FORMAT, "line 2, column 1:");
    check_vocab_fails("\"a: 0\nb: 1\n", TFM_ERR_FORMAT, "quoted scalar at line 1, column 1");
    check_vocab_fails("\"a\\0b\": 0\n", TFM_ERR_FORMAT, "a scalar holds a NUL");
    check_vocab_fails("a: 0\n\"\\x01\\x7f\": 5\n", TFM_ERR_FORMAT,
                      "line 2: piece '\\x01\\x7f' has the id 5");
}

/* The processor time of this process (the test runs one thread): unlike
 * the wall clock, it does not count the time other tests take the CPU. */
static double cpu_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A vocabulary of 60,000 lines in the form Marian writes, in well under
 * 100 ms of processor time. */
static void test_vocab_speed(void)
{
    const size_t n = 60000;
    tfm_buf text;
    tfm_buf_init(&text);
    tfm_buf_printf(&text, "\"</s>\": 0\n\"<unk>\": 1\n");
    for (size_t i = 2; i < n; i++)
        tfm_buf_printf(&text, "\xe2\x96\x81piece%zu: %zu\n", i * 7919 % 1000003, i);
    tfm_yaml_vocab *v = NULL;
    tfm_error err;
    double best = 1e9;
    for (int run = 0; run < 3; run++) {
        double t0 = cpu_seconds();
        tfm_status st = tfm_yaml_vocab_parse(text.data, text.len, &v, &err);
        double t = cpu_seconds() - t0;
        if (t < best) best = t;
        CHECK_MSG(st == TFM_OK, "%s", err.msg);
        if (v) CHECK(v->count == n && strcmp(v->pieces[n - 1], "\xe2\x96\x81piece" "130656") == 0);
        tfm_yaml_vocab_free(v);
        v = NULL;
    }
    printf("vocab of %zu lines (%zu bytes): %.1f ms of CPU\n", n, text.len, best * 1e3);
#if SANITIZED
    double bound = 1.0;  /* the sanitizers make it some ten times slower */
#else
    double bound = 0.1;
#endif
    CHECK_MSG(best < bound, "%.3f s", best);
    tfm_buf_free(&text);
}

static void test_files(void)
{
    const char *path = tmp_path("decoder.yml");
    write_file(path, decoder_yml);
    tfm_yaml *doc = NULL;
    tfm_error err;
    CHECK_MSG(tfm_yaml_load(path, &doc, &err) == TFM_OK, "%s", err.msg);
    CHECK(doc && tfm_yaml_get(tfm_yaml_root(doc), "beam-size") != NULL);
    tfm_yaml_free(doc);
    tfm_yaml_vocab *v = (tfm_yaml_vocab *)1;
    CHECK(tfm_yaml_vocab_load(path, &v, &err) == TFM_ERR_FORMAT && v == NULL);
    CHECK_MSG(contains(err.msg, "line 1: piece 'relative-paths' has the id 'true'"), "%s",
              err.msg);

    path = tmp_path("vocab.yml");
    write_file(path, vocab_yml);
    CHECK(tfm_yaml_vocab_load(path, &v, &err) == TFM_OK && v && v->count == 14);
    if (v != (tfm_yaml_vocab *)1) tfm_yaml_vocab_free(v);

    const char *missing = tmp_path("nothere.yml");
    CHECK(tfm_yaml_load(missing, &doc, &err) == TFM_ERR_IO && doc == NULL);
    CHECK_MSG(contains(err.msg, missing) && contains(err.msg, "No such file"), "%s", err.msg);
    CHECK(tfm_yaml_vocab_load(missing, &v, &err) == TFM_ERR_IO && v == NULL);
    CHECK(tfm_yaml_load(test_tmpdir, &doc, &err) == TFM_ERR_IO);
}

int main(void)
{
    test_tmpdir_init("test_yaml");
    RUN(test_decoder_yml);
    RUN(test_model_yml);
    RUN(test_raw_scalars);
    RUN(test_conversions);
    RUN(test_empty_documents);
    RUN(test_refusals);
    RUN(test_node_limit);
    RUN(test_vocab);
    RUN(test_vocab_refusals);
    RUN(test_vocab_speed);
    RUN(test_files);
    test_tmpdir_cleanup();
    CHECK_DONE();
}
