/* testtrain.h - what the unit tests of lib/train (test_train_parts.c and
 * test_trainer.c) share: a folder of their own for their files, made and
 * removed by main, and a tiny model's configuration. */
#ifndef TFM_TEST_TRAIN_H
#define TFM_TEST_TRAIN_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "tfm.h"

static char tmpdir[256];

static inline const char *tmp_path(const char *name)
{
    static char paths[8][512];
    static int next;
    char *p = paths[next++ % 8];
    snprintf(p, 512, "%s/%s", tmpdir, name);
    return p;
}

static inline void write_file(const char *path, const char *text)
{
    FILE *fp = fopen(path, "wb");
    fputs(text, fp);
    fclose(fp);
}

/* Makes tmpdir, a new folder $TMPDIR/tfm-NAME.XXXXXX (/tmp without
 * TMPDIR); false when it cannot be made. */
static inline bool train_tmpdir_make(const char *name)
{
    snprintf(tmpdir, sizeof tmpdir, "%s/tfm-%s.XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", name);
    return mkdtemp(tmpdir) != NULL;
}

/* Removes tmpdir and what the tests left in it. */
static inline void train_tmpdir_remove(void)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) printf("# could not remove %s\n", tmpdir);
}

/* d_model 16, 2 heads, d_ff 32, a layer on each side, 64 positions, one
 * vocabulary of the given size on both sides. */
static inline tfm_config tiny_config(int32_t vocab)
{
    tfm_config c;
    tfm_config_preset("tiny", &c, NULL);
    c.d_model = 16;
    c.d_ff = 32;
    c.n_heads = 2;
    c.n_encoder_layers = 1;
    c.n_decoder_layers = 1;
    c.max_positions = 64;
    c.src_vocab_size = c.tgt_vocab_size = vocab;
    return c;
}

#endif
