/* average.c - averaging the weights of several checkpoints into one model,
 * as the paper does for its results ("averaging the last 5 checkpoints,
 * which were written at 10-minute intervals" for base, the last 20 for big).
 * The moving average of the weights during training (tfm_ema_update) is the
 * other way to the same end; it lives in adam.c beside the update. */
#include <stdlib.h>
#include <string.h>

#include "tfm/train.h"

/* True when the two configurations describe the same network, so that
 * averaging their weights element by element means something (the rates of
 * dropout and label smoothing do not matter for that). */
static bool same_network(const tfm_config *a, const tfm_config *b)
{
    return a->src_vocab_size == b->src_vocab_size && a->tgt_vocab_size == b->tgt_vocab_size &&
           a->d_model == b->d_model && a->d_ff == b->d_ff && a->n_heads == b->n_heads &&
           a->n_encoder_layers == b->n_encoder_layers &&
           a->n_decoder_layers == b->n_decoder_layers && a->max_positions == b->max_positions &&
           a->positions == b->positions && a->relative_positions == b->relative_positions &&
           a->pre_norm == b->pre_norm &&
           a->shared_embeddings == b->shared_embeddings &&
           a->shared_decoder_embeddings == b->shared_decoder_embeddings &&
           a->attention_window == b->attention_window && a->layer_norm_eps == b->layer_norm_eps &&
           a->pad_id == b->pad_id && a->unk_id == b->unk_id && a->bos_id == b->bos_id &&
           a->eos_id == b->eos_id;
}

tfm_status tfm_average_models(const char *const *paths, int n, tfm_model **out,
                              tfm_error *err)
{
    *out = NULL;
    if (n < 1) return tfm_error_set(err, TFM_ERR_ARG, "no models to average");
    tfm_model *avg;
    tfm_status st = tfm_checkpoint_load_model(paths[0], &avg, err);
    if (st != TFM_OK) return st;
    size_t count = tfm_params_count(&avg->config);
    for (int i = 1; i < n; i++) {
        tfm_model *m;
        if ((st = tfm_checkpoint_load_model(paths[i], &m, err)) != TFM_OK) break;
        if (!same_network(&avg->config, &m->config)) {
            st = tfm_error_set(err, TFM_ERR_FORMAT,
                               "'%s' and '%s' are models of different shapes: only checkpoints "
                               "of one training run can be averaged",
                               paths[0], paths[i]);
            tfm_model_free(m);
            break;
        }
        for (size_t k = 0; k < count; k++) avg->data[k] += m->data[k];
        if (m->step > avg->step) avg->step = m->step;
        tfm_model_free(m);
    }
    if (st != TFM_OK) {
        tfm_model_free(avg);
        return st;
    }
    for (size_t k = 0; k < count; k++) avg->data[k] /= (float)n;
    *out = avg;
    return TFM_OK;
}

tfm_status tfm_average_write(const char *const *paths, int n, const char *out,
                             const char *const *metadata, tfm_error *err)
{
    tfm_model *avg;
    tfm_status st = tfm_average_models(paths, n, &avg, err);
    if (st != TFM_OK) return st;
    if ((st = tfm_model_save(avg, out, metadata, err)) != TFM_OK) tfm_error_prefix(err, "%s", out);
    tfm_model_free(avg);
    return st;
}
