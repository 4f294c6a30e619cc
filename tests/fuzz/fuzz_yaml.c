/* fuzz_yaml.c - libFuzzer target for the YAML reader: parses the input as a
 * document and walks its tree, checking that
 *   - nothing reads out of bounds, leaks or overflows (the sanitizers watch),
 *   - every failure carries its status and a message that names a line (or
 *     a byte, for bad encodings, or the limit it passed),
 *   - the tree keeps its promises: scalars NUL-terminated at their length
 *     with no NUL inside, mapping keys scalars and all different (so
 *     tfm_yaml_get finds each key's own value), depth within the limit,
 *     positions from 1,
 *   - every conversion of every node either succeeds or says why. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tfm/yaml.h"

#define FUZZ_TARGET "fuzz_yaml"
#include "require.h"

static void check_failure(tfm_status st, const tfm_error *err)
{
    require(err->status == st && err->msg[0] != 0, "a failure without its message");
}

static void convert(const tfm_yaml_node *n)
{
    tfm_error err;
    const char *s;
    size_t len;
    int64_t i;
    bool b;
    double d;
    const char **list;
    size_t count;
    tfm_status st = tfm_yaml_string(n, &s, &len, &err);
    if (st == TFM_OK) require(s == n->str && len == n->len, "the string is not the node's");
    else check_failure(st, &err);
    st = tfm_yaml_int(n, -1000, 1000, &i, &err);
    if (st == TFM_OK) require(i >= -1000 && i <= 1000, "an integer out of its range");
    else check_failure(st, &err);
    st = tfm_yaml_bool(n, &b, &err);
    if (st != TFM_OK) check_failure(st, &err);
    st = tfm_yaml_double(n, &d, &err);
    if (st != TFM_OK) check_failure(st, &err);
    st = tfm_yaml_strings(n, &list, &count, &err);
    if (st == TFM_OK) {
        require(count == (n->kind == TFM_YAML_SCALAR ? 1 : n->count), "a list of another size");
        require((count == 0) == (list == NULL), "an empty list allocated");
        free(list);
    } else {
        check_failure(st, &err);
        require(list == NULL && count == 0, "a failed list returned items");
    }
}

static void walk(const tfm_yaml_node *n, int depth)
{
    require(n != NULL, "a NULL node");
    require(n->line >= 1 && n->column >= 1, "a position from 0");
    require(n->str != NULL && n->str[n->len] == 0, "a string not NUL-terminated");
    convert(n);
    if (n->kind == TFM_YAML_SCALAR) {
        require(memchr(n->str, 0, n->len) == NULL, "a NUL inside a scalar");
        require(n->count == 0, "a scalar with children");
        return;
    }
    require(depth < TFM_YAML_MAX_DEPTH, "nesting deeper than the limit");
    bool map = n->kind == TFM_YAML_MAPPING;
    require(map || n->kind == TFM_YAML_SEQUENCE, "a node of no kind");
    size_t kids = map ? 2 * n->count : n->count;
    require(kids == 0 || n->children != NULL, "children missing");
    for (size_t i = 0; i < kids; i++) {
        const tfm_yaml_node *c = n->children[i];
        if (map && i % 2 == 0) {
            require(c->kind == TFM_YAML_SCALAR, "a key that is not a scalar");
            require(tfm_yaml_get(n, c->str) == n->children[i + 1] ||
                        strlen(c->str) != c->len,
                    "a key whose value tfm_yaml_get does not find");
        }
        if (map && i % 2 == 1) require(c->key == n->children[i - 1]->str, "a value's key lost");
        walk(c, depth + 1);
    }
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    tfm_yaml *doc = NULL;
    tfm_error err;
    tfm_status st = tfm_yaml_parse(data, size, &doc, &err);
    if (st != TFM_OK) {
        require(doc == NULL, "a failed parse returned a document");
        check_failure(st, &err);
        require(strstr(err.msg, "line ") || strstr(err.msg, "byte ") ||
                    st == TFM_ERR_NOMEM || st == TFM_ERR_RANGE,
                "a message that names no place");
        return 0;
    }
    const tfm_yaml_node *root = tfm_yaml_root(doc);
    if (root) walk(root, 0);
    tfm_yaml_free(doc);
    return 0;
}
