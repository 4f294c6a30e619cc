/* mkmodel.c - a test tool: writes a freshly initialised (untrained) model
 * file, so that the tests and benchmarks of encode and decode have a model
 * before a trained one exists.
 *
 *   mkmodel --preset tiny --vocab V.vocab --seed 1 -o m.safetensors
 *   mkmodel --preset small --vocab V.vocab --d-model 128 --layers 2 -o m.safetensors
 *   mkmodel --preset tiny --vocab V.vocab --no-eos -o m.safetensors  (as train --no-eos marks it)
 *
 * The configuration is a preset (tfm_config_preset) with the overrides
 * given; the vocabulary file (from 'tokenize learn') is stored in the model
 * and sets both vocabulary sizes.  Weights come from tfm_model_create with
 * the seed; the file is written atomically by tfm_model_save.  A later
 * 'train' program takes this job over for users, so this tool lives with the
 * tests and prints plain messages. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tfm.h"

#define TOOL_NAME "mkmodel"
#include "tool.h"

static const char usage_text[] =
    "Usage: mkmodel --vocab VOCAB [OPTION]... -o MODEL\n"
    "Writes a freshly initialised model file (a test tool).\n"
    "  --preset NAME          tiny (default), small, base or big\n"
    "  --vocab FILE           the vocabulary (from 'tokenize learn'); required\n"
    "  --seed N               seed of the initial weights (default 1)\n"
    "  --d-model N, --d-ff N, --heads N, --layers N (encoder and decoder),\n"
    "  --encoder-layers N, --decoder-layers N, --max-positions N,\n"
    "  --pre-norm, --learned-positions   override the preset\n"
    "  --relative-positions K relative positions clipped at K, without absolute ones\n"
    "  --attention-window R   self-attention restricted to R neighbours\n"
    "  --no-eos               mark the model as trained without </s> ending sources\n"
    "  -o, --output FILE      the model file to write\n"
    "  -h, --help\n";

enum {
    OPT_PRESET = 256, OPT_VOCAB, OPT_SEED, OPT_D_MODEL, OPT_D_FF, OPT_HEADS, OPT_LAYERS,
    OPT_ENC_LAYERS, OPT_DEC_LAYERS, OPT_MAX_POS, OPT_PRE_NORM, OPT_LEARNED, OPT_NO_EOS,
    OPT_RELATIVE, OPT_WINDOW,
};

int main(int argc, char **argv)
{
    static const struct option options[] = {
        {"preset", required_argument, NULL, OPT_PRESET},
        {"vocab", required_argument, NULL, OPT_VOCAB},
        {"seed", required_argument, NULL, OPT_SEED},
        {"d-model", required_argument, NULL, OPT_D_MODEL},
        {"d-ff", required_argument, NULL, OPT_D_FF},
        {"heads", required_argument, NULL, OPT_HEADS},
        {"layers", required_argument, NULL, OPT_LAYERS},
        {"encoder-layers", required_argument, NULL, OPT_ENC_LAYERS},
        {"decoder-layers", required_argument, NULL, OPT_DEC_LAYERS},
        {"max-positions", required_argument, NULL, OPT_MAX_POS},
        {"pre-norm", no_argument, NULL, OPT_PRE_NORM},
        {"learned-positions", no_argument, NULL, OPT_LEARNED},
        {"no-eos", no_argument, NULL, OPT_NO_EOS},
        {"relative-positions", required_argument, NULL, OPT_RELATIVE},
        {"attention-window", required_argument, NULL, OPT_WINDOW},
        {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *preset = "tiny", *vocab_path = NULL, *out_path = NULL;
    uint64_t seed = 1;
    /* Overrides, applied after the preset; -1 (or false) leaves it alone. */
    int d_model = -1, d_ff = -1, heads = -1, enc_layers = -1, dec_layers = -1, max_pos = -1;
    int relative = 0, window = 0;
    bool pre_norm = false, learned = false, no_eos = false;
    int c;
    while ((c = getopt_long(argc, argv, "o:h", options, NULL)) != -1) {
        switch (c) {
        case OPT_PRESET: preset = optarg; break;
        case OPT_VOCAB: vocab_path = optarg; break;
        case OPT_SEED: seed = (uint64_t)parse_int("--seed", optarg, 0, 1L << 30); break;
        case OPT_D_MODEL: d_model = parse_int("--d-model", optarg, 1, 1 << 16); break;
        case OPT_D_FF: d_ff = parse_int("--d-ff", optarg, 1, 1 << 18); break;
        case OPT_HEADS: heads = parse_int("--heads", optarg, 1, 1 << 10); break;
        case OPT_LAYERS:
            enc_layers = dec_layers = parse_int("--layers", optarg, 1, 1000);
            break;
        case OPT_ENC_LAYERS: enc_layers = parse_int("--encoder-layers", optarg, 1, 1000); break;
        case OPT_DEC_LAYERS: dec_layers = parse_int("--decoder-layers", optarg, 1, 1000); break;
        case OPT_MAX_POS: max_pos = parse_int("--max-positions", optarg, 1, 1 << 20); break;
        case OPT_PRE_NORM: pre_norm = true; break;
        case OPT_LEARNED: learned = true; break;
        case OPT_NO_EOS: no_eos = true; break;
        case OPT_RELATIVE: relative = parse_int("--relative-positions", optarg, 0, 1 << 20); break;
        case OPT_WINDOW: window = parse_int("--attention-window", optarg, 0, 1 << 20); break;
        case 'o': out_path = optarg; break;
        case 'h': fputs(usage_text, stdout); return 0;
        default: fputs(usage_text, stderr); return 2;
        }
    }
    if (!vocab_path || !out_path || optind != argc) {
        fputs(usage_text, stderr);
        return 2;
    }

    tfm_error err;
    tfm_config config;
    if (tfm_config_preset(preset, &config, &err) != TFM_OK) die("--preset", err.msg);
    if (d_model > 0) config.d_model = d_model;
    if (d_ff > 0) config.d_ff = d_ff;
    if (heads > 0) config.n_heads = heads;
    if (enc_layers > 0) config.n_encoder_layers = enc_layers;
    if (dec_layers > 0) config.n_decoder_layers = dec_layers;
    if (max_pos > 0) config.max_positions = max_pos;
    if (pre_norm) config.pre_norm = true;
    if (learned) config.positions = TFM_POS_LEARNED;
    if (relative) config.positions = TFM_POS_NONE;
    config.relative_positions = relative;
    config.attention_window = window;

    tfm_vocab *vocab;
    if (tfm_vocab_load(vocab_path, &vocab, &err) != TFM_OK) die(vocab_path, err.msg);
    config.src_vocab_size = config.tgt_vocab_size = tfm_vocab_size(vocab);
    if (tfm_config_validate(&config, &err) != TFM_OK) die("configuration", err.msg);

    tfm_model *model;
    if (tfm_model_create(&config, vocab, seed, &model, &err) != TFM_OK) die(NULL, err.msg);
    tfm_vocab_free(vocab);
    if (no_eos) model->source_eos = false;
    if (tfm_model_save(model, out_path, NULL, &err) != TFM_OK) die(out_path, err.msg);
    tfm_model_free(model);
    return 0;
}
