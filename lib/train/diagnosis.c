/* diagnosis.c - whether a validation shows a model that does not translate,
 * and what is the likely cause.
 *
 * A translation model that fails to train seldom diverges: its loss falls
 * as a language model's of the target side falls, and its perplexity ends
 * far above where it should, with outputs that are fluent fragments of the
 * target language, whatever the source.  Validation measures this directly
 * (tfm_valid_result): the perplexity of the targets with their own sources
 * against that with other pairs' sources.  A model that uses its source is
 * many times better with its own (8 times by update 400 on the software
 * strings, 2.1 nats per token; more later); one that ignores it is hardly
 * better at all. */
#include <math.h>
#include <stdio.h>

#include "tfm/train.h"

/* The likely cause, for this configuration. */
static const char *likely_cause(const tfm_config *c)
{
    const int deepest = c->n_encoder_layers > c->n_decoder_layers ? c->n_encoder_layers
                                                                   : c->n_decoder_layers;
    if (!c->pre_norm && deepest >= 6)
        return "the likely cause is post-norm layers this deep at this learning rate: train "
               "with --pre-norm (or a lower --lr-factor, a longer --warmup)";
    return "check that line i of --tgt translates line i of --src (and the same for "
           "--valid-src and --valid-tgt); else a lower --lr-factor or a longer --warmup may help";
}

bool tfm_diagnose_validation(const tfm_config *c, int64_t step, int64_t warmup,
                             const tfm_valid_result *v, const char *data, char *text, size_t size)
{
    if (step < TFM_DIAGNOSE_LEAST_STEPS || step <= warmup) return false;
    if (v->tgt_tokens <= 0 || v->blind_tokens <= 0) return false;
    const double nll = v->nll_sum / (double)v->tgt_tokens;
    const double blind = v->blind_nll_sum / (double)v->blind_tokens;
    const double gain = blind - nll;
    if (!(gain < TFM_DIAGNOSE_LEAST_GAIN)) return false;
    snprintf(text, size,
             "the model is not learning to translate: after %lld updates its perplexity on %s "
             "is %.1f with each sentence's own source and %.1f with other sentences' (a model "
             "that translates is several times better with its own); %s",
             (long long)step, data, exp(nll), exp(blind), likely_cause(c));
    return true;
}

tfm_status tfm_diagnose_trainer(tfm_trainer *t, const tfm_corpus *probe, char *text, size_t size,
                                bool *found, tfm_error *err)
{
    *found = false;
    const int64_t step = tfm_trainer_steps(t);
    const int64_t warmup = tfm_trainer_warmup(t);
    /* nothing to measure before it could be said */
    if (step < TFM_DIAGNOSE_LEAST_STEPS || step <= warmup) return TFM_OK;
    tfm_valid_result v;
    tfm_status st = tfm_trainer_validate(t, probe, false, &v, err);
    if (st != TFM_OK) return st;
    char data[64];
    snprintf(data, sizeof data, "the first %zu training pairs", tfm_corpus_size(probe));
    *found = tfm_diagnose_validation(&tfm_trainer_model(t)->config, step, warmup, &v, data,
                                     text, size);
    return TFM_OK;
}
