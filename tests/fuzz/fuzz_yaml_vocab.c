/* fuzz_yaml_vocab.c - libFuzzer target for the reader of Marian's vocab.yml:
 * parses the input as a vocabulary and checks that
 *   - nothing reads out of bounds, leaks or overflows (the sanitizers watch),
 *   - every failure carries its status and a message,
 *   - a vocabulary read holds count pieces, each NUL-terminated at its
 *     length, all different,
 *   - the generic reader agrees: the same input parsed as a document is a
 *     mapping whose pair i is (piece, id) with pieces[id] == piece. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tfm/yaml.h"

#define FUZZ_TARGET "fuzz_yaml_vocab"
#include "require.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    tfm_yaml_vocab *v = NULL;
    tfm_error err;
    tfm_status st = tfm_yaml_vocab_parse(data, size, &v, &err);
    if (st != TFM_OK) {
        require(v == NULL, "a failed parse returned a vocabulary");
        require(err.status == st && err.msg[0] != 0, "a failure without its message");
        return 0;
    }
    require(v->count > 0, "an empty vocabulary accepted");
    tfm_strmap *seen = tfm_strmap_create(v->count);
    require(seen != NULL, "out of memory");
    for (size_t id = 0; id < v->count; id++) {
        require(v->pieces[id] != NULL && v->pieces[id][v->lens[id]] == 0,
                "a piece not NUL-terminated at its length");
        require(strlen(v->pieces[id]) == v->lens[id], "a NUL inside a piece");
        bool inserted = false;
        require(tfm_strmap_upsert(seen, v->pieces[id], v->lens[id], 0, &inserted) && inserted,
                "a piece twice");
    }
    tfm_strmap_free(seen);

    tfm_yaml *doc = NULL;
    st = tfm_yaml_parse(data, size, &doc, &err);
    require(st == TFM_OK, "a vocabulary that the generic reader refuses");
    const tfm_yaml_node *root = tfm_yaml_root(doc);
    require(root && root->kind == TFM_YAML_MAPPING && root->count == v->count,
            "the generic reader sees another mapping");
    for (size_t i = 0; i < root->count; i++) {
        int64_t id = -1;
        require(tfm_yaml_int(root->children[2 * i + 1], 0, (int64_t)v->count - 1, &id, &err) ==
                    TFM_OK,
                "an id the generic reader does not take");
        const tfm_yaml_node *k = root->children[2 * i];
        require(k->len == v->lens[id] && memcmp(k->str, v->pieces[id], k->len) == 0,
                "the readers disagree on a piece");
    }
    tfm_yaml_free(doc);
    tfm_yaml_vocab_free(v);
    return 0;
}
