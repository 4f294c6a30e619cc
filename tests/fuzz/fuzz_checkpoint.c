/* fuzz_checkpoint.c - libFuzzer target for loading a checkpoint: the input,
 * as a file, is loaded as a training state (tfm_checkpoint_load: the model,
 * Adam's moments, the step and the random states, each checked) and as a
 * model (tfm_checkpoint_load_model, what 'train average' and 'decode' do with
 * a checkpoint).  Checks that
 *   - nothing reads out of bounds or overflows (the sanitizers watch),
 *   - a failure has its status and a message and leaves nothing behind (the
 *     state is freed as a caller frees it; ASan's leak check watches),
 *   - an accepted checkpoint holds a model whose configuration validates. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memfile.h"
#include "tfm.h"

#define FUZZ_TARGET "fuzz_checkpoint"
#include "require.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[64];
    int fd = memfile_open(data, size, path);
    if (fd < 0) return 0;
    tfm_train_state s;
    memset(&s, 0, sizeof s);
    tfm_error err = {0};
    tfm_status st = tfm_checkpoint_load(path, &s, &err);
    if (st != TFM_OK) {
        require(err.status == st && err.msg[0] != 0, "a failure without its message");
    } else {
        tfm_error e2;
        require(s.model != NULL, "a checkpoint without a model");
        require(tfm_config_validate(&s.model->config, &e2) == TFM_OK,
                "accepted a bad configuration");
    }
    tfm_train_state_free(&s);
    tfm_model *m = (tfm_model *)&size;
    st = tfm_checkpoint_load_model(path, &m, &err);
    if (st != TFM_OK) {
        require(m == NULL, "a failure left a model");
        require(err.status == st && err.msg[0] != 0, "a failure without its message");
    } else {
        tfm_model_free(m);
    }
    close(fd);
    return 0;
}
