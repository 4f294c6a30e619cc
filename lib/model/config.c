/* config.c - the model's configuration: the named presets (the paper's
 * "base" and "big", and small ones that train on a laptop) and the check
 * that a configuration describes a model that can be built.
 *
 * The field names in the messages are the keys of the model file's
 * metadata (tfm-formats(5)), so a message about a bad file names what to
 * look for in it. */
#include <stdio.h>
#include <string.h>

#include "tfm/model.h"

/* Limits that keep every size computation far from overflow, even for a
 * configuration read from a hostile file: with them the parameter count
 * stays below 2^46 floats.  They are well above any model trained on CPUs. */
enum {
    MAX_VOCAB = 1 << 24,
    MAX_D_MODEL = 1 << 16,
    MAX_D_FF = 1 << 18,
    MAX_LAYERS = 256,
    MAX_POSITIONS = 1 << 20,
};

typedef struct preset {
    const char *name;
    int encoder_layers, decoder_layers, d_model, d_ff, heads;
    float dropout;
    bool pre_norm;
} preset;

/* "base" and "big" are Table 3 of the paper; "small" keeps Dh = 64 as the
 * paper does (256 / 4 heads); "small-cpu" is small shaped for decoding on
 * CPUs: one decoder layer (the layers a decoding step runs for every output
 * token), and pre-norm, with which so shallow a decoder learns far faster
 * than with post-norm (README, "Models shaped for CPUs"); "tiny" is for
 * tests and smoke runs. */
static const preset presets[] = {
    {"base", 6, 6, 512, 2048, 8, 0.1f, false},
    {"big", 6, 6, 1024, 4096, 16, 0.3f, false},
    {"small", 3, 3, 256, 1024, 4, 0.1f, false},
    {"small-cpu", 3, 1, 256, 1024, 4, 0.1f, true},
    {"tiny", 2, 2, 64, 256, 4, 0.1f, false},
};

const char *tfm_config_preset_name(int i)
{
    return i >= 0 && (size_t)i < sizeof presets / sizeof presets[0] ? presets[i].name : NULL;
}

/* The names of the table's presets, "base, big, ..." (for a message). */
static void list_presets(char *out, size_t size)
{
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < sizeof presets / sizeof presets[0] && used < size; i++) {
        int n = snprintf(out + used, size - used, "%s%s", i ? ", " : "", presets[i].name);
        if (n < 0) break;
        used += (size_t)n;
    }
}

tfm_status tfm_config_preset(const char *name, tfm_config *c, tfm_error *err)
{
    const preset *p = NULL;
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++)
        if (name && strcmp(name, presets[i].name) == 0) p = &presets[i];
    if (!p) {
        char known[128];
        list_presets(known, sizeof known);
        return tfm_error_set(err, TFM_ERR_ARG, "unknown preset '%s' (known presets: %s)",
                             name ? name : "(null)", known);
    }

    /* Everything not in the table is the paper's setting and is the same
     * for every preset. */
    memset(c, 0, sizeof *c);
    c->src_vocab_size = 0; /* the caller takes these from the vocabulary */
    c->tgt_vocab_size = 0;
    c->d_model = p->d_model;
    c->d_ff = p->d_ff;
    c->n_heads = p->heads;
    c->n_encoder_layers = p->encoder_layers;
    c->n_decoder_layers = p->decoder_layers;
    c->max_positions = 1024;
    c->positions = TFM_POS_SINUSOIDAL;
    c->relative_positions = 0;
    c->pre_norm = p->pre_norm;
    c->shared_embeddings = true;
    c->attention_window = 0;
    c->dropout = p->dropout;
    c->attention_dropout = 0.0f; /* the paper uses none */
    c->activation_dropout = 0.0f;
    c->label_smoothing = 0.1f;
    c->layer_norm_eps = 1e-5f;
    c->pad_id = TFM_ID_PAD;
    c->unk_id = TFM_ID_UNK;
    c->bos_id = TFM_ID_BOS;
    c->eos_id = TFM_ID_EOS;
    c->activation = TFM_ACT_RELU;
    c->alignment_layer = -1;
    return TFM_OK;
}

/* Fails unless lo <= value <= hi, naming the field. */
static tfm_status check_int(const char *field, long long value, long long lo, long long hi,
                            tfm_error *err)
{
    if (value >= lo && value <= hi) return TFM_OK;
    return tfm_error_set(err, TFM_ERR_RANGE, "%s is %lld, expected an integer from %lld to %lld",
                         field, value, lo, hi);
}

/* Fails unless the probability lies in [0, 1). */
static tfm_status check_rate(const char *field, float value, tfm_error *err)
{
    if (value >= 0.0f && value < 1.0f) return TFM_OK; /* false for NaN too */
    return tfm_error_set(err, TFM_ERR_RANGE, "%s is %g, expected a number in [0, 1)", field,
                         (double)value);
}

tfm_status tfm_config_validate(const tfm_config *c, tfm_error *err)
{
    tfm_status st;
    /* A vocabulary always holds the 4 special pieces, so fewer is no vocabulary. */
    if ((st = check_int("src_vocab_size", c->src_vocab_size, 4, MAX_VOCAB, err))) return st;
    if ((st = check_int("tgt_vocab_size", c->tgt_vocab_size, 4, MAX_VOCAB, err))) return st;
    if ((st = check_int("d_model", c->d_model, 1, MAX_D_MODEL, err))) return st;
    if ((st = check_int("d_ff", c->d_ff, 1, MAX_D_FF, err))) return st;
    if ((st = check_int("n_heads", c->n_heads, 1, c->d_model, err))) return st;
    if (c->d_model % c->n_heads != 0)
        return tfm_error_set(err, TFM_ERR_RANGE,
                             "d_model %d is not divisible by n_heads %d: every head needs "
                             "d_model / n_heads dimensions",
                             c->d_model, c->n_heads);
    if ((st = check_int("n_encoder_layers", c->n_encoder_layers, 1, MAX_LAYERS, err))) return st;
    if ((st = check_int("n_decoder_layers", c->n_decoder_layers, 1, MAX_LAYERS, err))) return st;
    if ((st = check_int("max_positions", c->max_positions, 1, MAX_POSITIONS, err))) return st;

    if (c->positions != TFM_POS_SINUSOIDAL && c->positions != TFM_POS_LEARNED &&
        c->positions != TFM_POS_NONE && c->positions != TFM_POS_SINUSOIDAL_CONCAT)
        return tfm_error_set(err, TFM_ERR_RANGE,
                             "positions is %d, expected sinusoidal (%d), learned (%d), none (%d) "
                             "or sinusoidal-concat (%d)",
                             (int)c->positions, TFM_POS_SINUSOIDAL, TFM_POS_LEARNED,
                             TFM_POS_NONE, TFM_POS_SINUSOIDAL_CONCAT);
    if (c->activation != TFM_ACT_RELU && c->activation != TFM_ACT_SWISH &&
        c->activation != TFM_ACT_GELU_SIGMOID)
        return tfm_error_set(err, TFM_ERR_RANGE,
                             "activation is %d, expected relu (%d), swish (%d) or gelu-sigmoid (%d)",
                             (int)c->activation, TFM_ACT_RELU, TFM_ACT_SWISH,
                             TFM_ACT_GELU_SIGMOID);
    if ((st = check_int("alignment_layer", c->alignment_layer, -1, c->n_decoder_layers - 1, err)))
        return st;
    /* A distance is at most max_positions - 1: a larger K has rows no pair reaches. */
    if ((st = check_int("relative_positions", c->relative_positions, 0, c->max_positions - 1,
                        err)))
        return st;
    /* Attention alone is blind to order: without positions a sentence is a bag of words. */
    if (c->positions == TFM_POS_NONE && c->relative_positions == 0)
        return tfm_error_set(err, TFM_ERR_RANGE,
                             "positions is none and relative_positions is 0: the model would "
                             "have no positions at all");
    /* The sinusoids come in sin/cos pairs, one pair per two dimensions. */
    if ((c->positions == TFM_POS_SINUSOIDAL || c->positions == TFM_POS_SINUSOIDAL_CONCAT) &&
        c->d_model % 2 != 0)
        return tfm_error_set(err, TFM_ERR_RANGE,
                             "d_model %d is odd: sinusoidal positions need an even d_model",
                             c->d_model);
    if (c->shared_embeddings && c->src_vocab_size != c->tgt_vocab_size)
        return tfm_error_set(err, TFM_ERR_RANGE,
                             "shared_embeddings needs one vocabulary, but src_vocab_size is %d "
                             "and tgt_vocab_size is %d",
                             (int)c->src_vocab_size, (int)c->tgt_vocab_size);
    if ((st = check_int("attention_window", c->attention_window, 0, MAX_POSITIONS, err)))
        return st;

    if ((st = check_rate("dropout", c->dropout, err))) return st;
    if ((st = check_rate("attention_dropout", c->attention_dropout, err))) return st;
    if ((st = check_rate("activation_dropout", c->activation_dropout, err))) return st;
    if ((st = check_rate("label_smoothing", c->label_smoothing, err))) return st;
    if (!(c->layer_norm_eps > 0.0f && c->layer_norm_eps < 1.0f))
        return tfm_error_set(err, TFM_ERR_RANGE, "layer_norm_eps is %g, expected a number in (0, 1)",
                             (double)c->layer_norm_eps);

    /* Special ids index both embedding tables, and must differ: a <pad>
     * that is also </s> would mask the end of every sentence. */
    int32_t smallest = c->src_vocab_size < c->tgt_vocab_size ? c->src_vocab_size
                                                             : c->tgt_vocab_size;
    const char *names[4] = {"pad_id", "unk_id", "bos_id", "eos_id"};
    int32_t ids[4] = {c->pad_id, c->unk_id, c->bos_id, c->eos_id};
    for (int i = 0; i < 4; i++) {
        if ((st = check_int(names[i], ids[i], 0, smallest - 1, err))) return st;
        for (int j = 0; j < i; j++)
            if (ids[i] == ids[j])
                return tfm_error_set(err, TFM_ERR_RANGE, "%s and %s are both %d, expected distinct ids",
                                     names[j], names[i], (int)ids[i]);
    }
    return TFM_OK;
}
