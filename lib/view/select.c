/* select.c - which layers and heads to look at: the words a user writes
 * for them ("last", "all", "mean" or a number) and the check of a
 * selection against a model, with a message that names the valid range. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "tfm/view.h"

/* A number >= 0, or one of two words (their values given). */
static bool parse_selector(const char *text, const char *word1, int value1, const char *word2,
                           int value2, int *out)
{
    if (strcmp(text, word1) == 0) return *out = value1, true;
    if (strcmp(text, word2) == 0) return *out = value2, true;
    char *end;
    long v = strtol(text, &end, 10);
    if (end == text || *end || v < 0 || v > INT_MAX) return false;
    *out = (int)v;
    return true;
}

bool tfm_view_parse_layer(const char *text, int *out)
{
    return parse_selector(text, "last", TFM_VIEW_LAST, "all", TFM_VIEW_ALL, out);
}

bool tfm_view_parse_head(const char *text, int *out)
{
    return parse_selector(text, "mean", TFM_VIEW_MEAN, "all", TFM_VIEW_ALL, out);
}

tfm_status tfm_view_check_selection(const tfm_model *m, tfm_attention_kind kind, int layer,
                                    int head, tfm_error *err)
{
    const tfm_config *c = &m->config;
    const bool enc = kind == TFM_ATTENTION_ENCODER;
    const int depth = enc ? c->n_encoder_layers : c->n_decoder_layers;
    if (layer != TFM_VIEW_LAST && layer != TFM_VIEW_ALL && (layer < 0 || layer >= depth))
        return tfm_error_set(err, TFM_ERR_RANGE,
                             "layer %d: the model's %s has layers 0 to %d (or 'last', 'all')",
                             layer, enc ? "encoder" : "decoder", depth - 1);
    if (head != TFM_VIEW_MEAN && head != TFM_VIEW_ALL && (head < 0 || head >= c->n_heads))
        return tfm_error_set(err, TFM_ERR_RANGE,
                             "head %d: the model has heads 0 to %d (or 'mean', 'all')", head,
                             c->n_heads - 1);
    return TFM_OK;
}
