/* fuzz_model.c - libFuzzer target for loading a model file: the input, as a
 * file, is loaded as a model (tfm_model_load: the safetensors container, the
 * configuration and the vocabulary in its metadata, every tensor's dtype and
 * shape against the configuration), the same bytes as a model in memory
 * (tfm_model_parse), and as a vocabulary source (tfm_model_load_vocab, what
 * 'tokenize -m' does).  Checks that
 *   - nothing reads out of bounds or overflows (the sanitizers watch),
 *   - a failure has its status and a message, and leaves no object,
 *   - the file and the bytes in memory give the same status,
 *   - an accepted model has a configuration that validates, and its
 *     vocabulary (when it has one) the size the configuration says,
 *   - loading for inference (which does not read the vocabularies) accepts
 *     what loading accepts, and refuses the rest but a bad vocabulary. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memfile.h"
#include "tfm.h"

#define FUZZ_TARGET "fuzz_model"
#include "require.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[64];
    int fd = memfile_open(data, size, path);
    if (fd < 0) return 0;
    tfm_model *m = (tfm_model *)&size; /* must be reset */
    tfm_error err = {0};
    tfm_status st = tfm_model_load(path, &m, &err);
    if (st != TFM_OK) {
        require(m == NULL, "a failure left a model");
        require(err.status == st && err.msg[0] != 0, "a failure without its message");
    } else {
        tfm_error e2;
        require(tfm_config_validate(&m->config, &e2) == TFM_OK, "accepted a bad configuration");
        if (m->vocab)
            require(tfm_vocab_size(m->vocab) == m->config.src_vocab_size,
                    "the vocabulary and the configuration disagree");
    }
    tfm_model *mem = (tfm_model *)&size;
    tfm_error e3 = {0};
    tfm_status st_mem = tfm_model_parse(data, size, &mem, &e3);
    require(st_mem == st, "the file and the same bytes in memory disagree");
    require((st_mem == TFM_OK) == (mem != NULL), "a model left by a failure, or none on success");
    tfm_model_free(mem);
    /* as encode and decode load it: a quantized model keeps its matrices
     * in their type only, and both stacks pack from them */
    tfm_model *inf = (tfm_model *)&size;
    tfm_error e4 = {0};
    tfm_status st_inf = tfm_model_load_for_inference(path, TFM_COMPUTE_DEFAULT, &inf, &e4);
    /* it reads all but the vocabularies: it accepts what loading accepts,
     * and refuses it too unless the fault is in a vocabulary */
    require((st_inf == TFM_OK) == (st_mem == TFM_OK) ||
                (st_inf == TFM_OK && strstr(e3.msg, "vocab")),
            "loading for inference and loading disagree");
    if (st_inf == TFM_OK) {
        require(tfm_model_pack_for_encoding(inf, &e4) == TFM_OK, "an accepted model does not pack");
        require(tfm_model_pack_for_decoding(inf, &e4) == TFM_OK, "an accepted model does not pack");
        tfm_model_free(inf);
    } else {
        require(inf == NULL && e4.status == st_inf && e4.msg[0] != 0, "a failure left a model");
    }
    tfm_vocab *v = (tfm_vocab *)&size;
    st = tfm_model_load_vocab(path, TFM_SOURCE, &v, &err);
    if (st != TFM_OK) {
        require(v == NULL, "a failure left a vocabulary");
        require(err.status == st && err.msg[0] != 0, "a failure without its message");
    } else {
        require(tfm_vocab_size(v) > 0, "an empty vocabulary");
        /* what tokenize reads (a packed file's arrays) is what the model holds */
        const tfm_vocab *held = m ? (m->src_vocab ? m->src_vocab : m->vocab) : NULL;
        if (held) {
            require(tfm_vocab_size(v) == tfm_vocab_size(held), "tokenize reads another vocabulary");
            for (int32_t id = 0; id < tfm_vocab_size(v); id++) {
                size_t n0, n1;
                const char *t0 = tfm_vocab_piece(held, id, &n0), *t1 = tfm_vocab_piece(v, id, &n1);
                require(n0 == n1 && memcmp(t0, t1, n0) == 0 &&
                            tfm_vocab_score(held, id) == tfm_vocab_score(v, id) &&
                            tfm_vocab_type(held, id) == tfm_vocab_type(v, id),
                        "tokenize reads another piece");
            }
        }
        tfm_vocab_free(v);
    }
    tfm_model_free(m);
    close(fd);
    return 0;
}
