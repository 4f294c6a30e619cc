/* fuzz_shortlist.c - libFuzzer target for loading a lexical shortlist
 * (decode --shortlist): the input, as a file, goes to tfm_shortlist_load.
 * Checks that
 *   - nothing reads out of bounds or overflows (the sanitizers watch),
 *   - a failure has its status and a message and leaves no shortlist,
 *   - an accepted shortlist keeps its promises: every candidate a target
 *     id, -1 only after a piece's last, and a batch's union of every
 *     source piece's candidates holds distinct target ids only. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memfile.h"
#include "tfm.h"

#define FUZZ_TARGET "fuzz_shortlist"
#include "require.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[64];
    int fd = memfile_open(data, size, path);
    if (fd < 0) return 0;
    tfm_shortlist *sl = (tfm_shortlist *)&size;
    tfm_error err = {0};
    tfm_status st = tfm_shortlist_load(path, &sl, &err);
    close(fd);
    if (st != TFM_OK) {
        require(sl == NULL, "a failure left a shortlist");
        require(err.status == st && err.msg[0] != 0, "a failure without its message");
        return 0;
    }
    const int src_V = tfm_shortlist_src_vocab_size(sl), tgt_V = tfm_shortlist_tgt_vocab_size(sl);
    const int N = tfm_shortlist_per_source(sl);
    if (src_V > 1 << 16 || tgt_V > 1 << 20) { /* a large but valid file: no union over it */
        tfm_shortlist_free(sl);
        return 0;
    }
    for (int s = 0; s < src_V; s++) {
        const int32_t *c = tfm_shortlist_candidates(sl, s, NULL);
        bool ended = false;
        for (int i = 0; i < N; i++) {
            require(c[i] >= -1 && c[i] < tgt_V, "a candidate outside the target vocabulary");
            require(!(ended && c[i] >= 0), "a candidate after the last");
            ended = ended || c[i] < 0;
        }
    }
    tfm_vocab_set set;
    if (tfm_vocab_set_init(&set, tgt_V, &err) == TFM_OK) {
        tfm_vocab_set_clear(&set);
        tfm_shortlist_add_frequent(sl, &set);
        for (int32_t s = 0; s < src_V; s++) tfm_shortlist_add_source(sl, &s, 1, 0, &set);
        tfm_vocab_set_sort(&set);
        for (int i = 1; i < set.n; i++) require(set.ids[i] > set.ids[i - 1], "a union not distinct");
        tfm_vocab_set_free(&set);
    }
    tfm_shortlist_free(sl);
    return 0;
}
