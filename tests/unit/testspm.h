/* testspm.h - an imported model's vocabulary for the tests: the pieces of
 * a SentencePiece model of tests/data/opus-mt, in its order, the model
 * attached, as train import makes it. */
#ifndef TFM_TEST_SPM_H
#define TFM_TEST_SPM_H

#include <stdio.h>
#include <stdlib.h>

#include "check.h"
#include "tfm/spm.h"
#include "tfm/text.h"

/* The vocabulary of tests/data/opus-mt/NAME (a path under it, such as
 * "postnorm-swish-tiedall/source.spm"); NULL (and a failed check) when it
 * cannot be read. */
static inline tfm_vocab *test_spm_vocab(const char *name)
{
    const char *root = getenv("ROOT");
    char path[512];
    snprintf(path, sizeof path, "%s/tests/data/opus-mt/%s", root ? root : ".", name);
    tfm_spm *m = NULL;
    tfm_error err;
    if (tfm_spm_load(path, &m, &err) != TFM_OK) {
        CHECK_MSG(false, "%s: %s", path, err.msg);
        return NULL;
    }
    tfm_vocab *v = tfm_vocab_create_foreign();
    for (int32_t id = 0; v && id < tfm_spm_size(m); id++) {
        size_t len;
        const char *piece = tfm_spm_piece(m, id, &len);
        const bool control = tfm_spm_piece_type_of(m, id) != TFM_SPM_NORMAL;
        CHECK(tfm_vocab_add(v, piece, len, 0.0f, control ? TFM_PIECE_CONTROL : TFM_PIECE_NORMAL) ==
              id);
    }
    size_t size;
    const void *bytes = tfm_spm_bytes(m, &size);
    CHECK(v && tfm_vocab_attach_spm(v, bytes, size, &err) == TFM_OK);
    tfm_spm_free(m);
    return v;
}

#endif
