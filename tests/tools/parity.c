/* parity.c - a test tool: the tfm half of the training-parity harness
 * (tests/parity/torch_parity.py is the PyTorch half).
 *
 *   parity --src train.ids.en --tgt train.ids.fr --vocab-size 8000 \
 *          --preset small --steps 20 -o DIR
 *
 * Creates a model (tfm_model_create, the initialisation 'train' uses), writes
 * it as DIR/init.safetensors, then runs --steps updates of the library's
 * trainer (tfm_trainer_step, the loop of 'train') and writes:
 *
 *   DIR/final.safetensors  the weights after the last update
 *   DIR/steps.tsv          per update: step, loss (label-smoothed, per target
 *                          token), nll per token, target tokens, sentences, lr
 *   DIR/batches.tsv        per sentence of each update: step, source ids (with
 *                          the </s> the corpus appends), target ids (without
 *                          <s> and </s>), in the order of the batch
 *
 * so that another implementation started from the same weights can be fed
 * the same batches in the same order.  The batches are read from a second
 * batcher of the same corpus, parameters and seed: the batcher is a
 * function of those alone (tfm/train.h), and the tool checks that every
 * batch has the sentence and token counts the trainer reported.
 *
 * Dropout defaults to 0 (a run with dropout cannot be repeated elsewhere). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tfm.h"

#define TOOL_NAME "parity"
#include "tool.h"

void openblas_set_num_threads(int num_threads);

static const char usage_text[] =
    "Usage: parity --src FILE --tgt FILE --vocab-size N [OPTION]... -o DIR\n"
    "Trains a fresh model for a few updates and writes its initial and final\n"
    "weights, the loss of each update and the batches it took (a test tool).\n"
    "  --preset NAME          tiny, small (default), base or big\n"
    "  --d-model N, --d-ff N, --heads N, --layers N   override the preset\n"
    "  --steps N              updates (20)\n"
    "  --batch-tokens N       (4096)\n"
    "  --lr-factor F          (0.3)\n"
    "  --warmup N             (150)\n"
    "  --label-smoothing E    (0.1)\n"
    "  --dropout P            on sublayer outputs and embeddings (0)\n"
    "  --seed N               of the weights and the batches (1)\n"
    "  --threads N            (1)\n"
    "  -o, --output DIR       an existing directory\n"
    "  -h, --help\n";

static FILE *open_out(const char *dir, const char *name, char *path, size_t cap)
{
    snprintf(path, cap, "%s/%s", dir, name);
    FILE *fp = fopen(path, "w");
    if (!fp) die(path, strerror(errno));
    return fp;
}

static void write_ids(FILE *fp, const int32_t *ids, int n)
{
    for (int i = 0; i < n; i++) fprintf(fp, i ? " %d" : "%d", (int)ids[i]);
}

enum {
    OPT_SRC = 256, OPT_TGT, OPT_VOCAB_SIZE, OPT_PRESET, OPT_D_MODEL, OPT_D_FF, OPT_HEADS,
    OPT_LAYERS, OPT_STEPS, OPT_BATCH_TOKENS, OPT_LR_FACTOR, OPT_WARMUP, OPT_LS, OPT_DROPOUT,
    OPT_SEED, OPT_THREADS,
};

int main(int argc, char **argv)
{
    static const struct option options[] = {
        {"src", required_argument, NULL, OPT_SRC},
        {"tgt", required_argument, NULL, OPT_TGT},
        {"vocab-size", required_argument, NULL, OPT_VOCAB_SIZE},
        {"preset", required_argument, NULL, OPT_PRESET},
        {"d-model", required_argument, NULL, OPT_D_MODEL},
        {"d-ff", required_argument, NULL, OPT_D_FF},
        {"heads", required_argument, NULL, OPT_HEADS},
        {"layers", required_argument, NULL, OPT_LAYERS},
        {"steps", required_argument, NULL, OPT_STEPS},
        {"batch-tokens", required_argument, NULL, OPT_BATCH_TOKENS},
        {"lr-factor", required_argument, NULL, OPT_LR_FACTOR},
        {"warmup", required_argument, NULL, OPT_WARMUP},
        {"label-smoothing", required_argument, NULL, OPT_LS},
        {"dropout", required_argument, NULL, OPT_DROPOUT},
        {"seed", required_argument, NULL, OPT_SEED},
        {"threads", required_argument, NULL, OPT_THREADS},
        {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *src = NULL, *tgt = NULL, *preset = "small", *dir = NULL;
    int vocab_size = 0, steps = 20, batch_tokens = 4096, warmup = 150, seed = 1, threads = 1;
    int d_model = 0, d_ff = 0, heads = 0, layers = 0;
    double lr_factor = 0.3, label_smoothing = 0.1, dropout = 0.0;
    int c;
    while ((c = getopt_long(argc, argv, "o:h", options, NULL)) != -1) {
        switch (c) {
        case OPT_SRC: src = optarg; break;
        case OPT_TGT: tgt = optarg; break;
        case OPT_VOCAB_SIZE: vocab_size = parse_int("--vocab-size", optarg, 5, 1 << 24); break;
        case OPT_PRESET: preset = optarg; break;
        case OPT_D_MODEL: d_model = parse_int("--d-model", optarg, 1, 1 << 16); break;
        case OPT_D_FF: d_ff = parse_int("--d-ff", optarg, 1, 1 << 18); break;
        case OPT_HEADS: heads = parse_int("--heads", optarg, 1, 1 << 10); break;
        case OPT_LAYERS: layers = parse_int("--layers", optarg, 1, 1000); break;
        case OPT_STEPS: steps = parse_int("--steps", optarg, 1, 1 << 20); break;
        case OPT_BATCH_TOKENS:
            batch_tokens = parse_int("--batch-tokens", optarg, 1, 1 << 24);
            break;
        case OPT_LR_FACTOR: lr_factor = parse_number("--lr-factor", optarg, 1e-9, 1e3); break;
        case OPT_WARMUP: warmup = parse_int("--warmup", optarg, 1, 1 << 24); break;
        case OPT_LS: label_smoothing = parse_number("--label-smoothing", optarg, 0, 0.99); break;
        case OPT_DROPOUT: dropout = parse_number("--dropout", optarg, 0, 0.99); break;
        case OPT_SEED: seed = parse_int("--seed", optarg, 0, 1 << 30); break;
        case OPT_THREADS: threads = parse_int("--threads", optarg, 1, 64); break;
        case 'o': dir = optarg; break;
        case 'h': fputs(usage_text, stdout); return 0;
        default: fputs(usage_text, stderr); return 2;
        }
    }
    if (!src || !tgt || !vocab_size || !dir || optind != argc) {
        fputs(usage_text, stderr);
        return 2;
    }
    openblas_set_num_threads(threads);

    tfm_error err;
    tfm_config config;
    if (tfm_config_preset(preset, &config, &err) != TFM_OK) die("--preset", err.msg);
    if (d_model) config.d_model = d_model;
    if (d_ff) config.d_ff = d_ff;
    if (heads) config.n_heads = heads;
    if (layers) config.n_encoder_layers = config.n_decoder_layers = layers;
    config.src_vocab_size = config.tgt_vocab_size = vocab_size;
    config.dropout = (float)dropout;
    config.attention_dropout = config.activation_dropout = 0.0f;
    config.label_smoothing = (float)label_smoothing;

    tfm_corpus_params cp = tfm_corpus_default_params();
    cp.vocab_size = vocab_size;
    cp.format = TFM_CORPUS_IDS;
    tfm_corpus *corpus;
    tfm_corpus_stats stats;
    if (tfm_corpus_load(src, tgt, &cp, &corpus, &stats, &err) != TFM_OK) die(src, err.msg);

    tfm_model *model;
    if (tfm_model_create(&config, NULL, (uint64_t)seed, &model, &err) != TFM_OK)
        die("creating the model", err.msg);
    char path[4096];
    snprintf(path, sizeof path, "%s/init.safetensors", dir);
    if (tfm_model_save(model, path, NULL, &err) != TFM_OK) die(path, err.msg);

    tfm_train_params tp = tfm_train_default_params();
    tp.batches.batch_tokens = batch_tokens;
    tp.batches.seed = (uint64_t)seed;
    tp.seed = (uint64_t)seed;
    tp.lr_factor = lr_factor;
    tp.warmup = warmup;
    tp.n_threads = threads;
    tfm_trainer *trainer;
    if (tfm_trainer_create(model, corpus, &tp, &trainer, &err) != TFM_OK) die("trainer", err.msg);
    tfm_batcher *batcher; /* the trainer's twin, to see the batches */
    if (tfm_batcher_create(corpus, &tp.batches, &batcher, &err) != TFM_OK) die("batcher", err.msg);

    FILE *steps_fp = open_out(dir, "steps.tsv", path, sizeof path);
    FILE *batches_fp = open_out(dir, "batches.tsv", path, sizeof path);
    fprintf(steps_fp, "step\tloss\tnll\ttgt_tokens\tsentences\tlr\n");
    for (int s = 1; s <= steps; s++) {
        tfm_batch b;
        if (tfm_batcher_next(batcher, &b, &err) != TFM_OK) die("batcher", err.msg);
        tfm_step_result r;
        if (tfm_trainer_step(trainer, &r, &err) != TFM_OK) die("training", err.msg);
        if (r.sentences != b.pairs.B || r.tgt_tokens != b.tgt_tokens)
            die("batcher", "the twin batcher's batch is not the trainer's");
        for (int i = 0; i < b.pairs.B; i++) {
            fprintf(batches_fp, "%d\t", s);
            write_ids(batches_fp, b.pairs.src[i], b.pairs.src_lens[i]);
            fputc('\t', batches_fp);
            write_ids(batches_fp, b.pairs.tgt[i], b.pairs.tgt_lens[i]);
            fputc('\n', batches_fp);
        }
        fprintf(steps_fp, "%d\t%.9g\t%.9g\t%lld\t%d\t%.9g\n", s, r.loss_sum / (double)r.tgt_tokens,
                r.nll_sum / (double)r.tgt_tokens, (long long)r.tgt_tokens, r.sentences, r.lr);
    }
    if (fclose(steps_fp) != 0 || fclose(batches_fp) != 0) die(dir, "cannot write the logs");
    snprintf(path, sizeof path, "%s/final.safetensors", dir);
    if (tfm_trainer_save_model(trainer, path, NULL, &err) != TFM_OK) die(path, err.msg);
    tfm_batcher_free(batcher);
    tfm_trainer_free(trainer);
    tfm_corpus_free(corpus);
    return 0;
}
