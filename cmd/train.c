/* train - trains a Transformer with the paper's recipe.
 *
 *   train --preset small -m VOCAB --src train.de --tgt train.en -o m.safetensors
 *   train --resume -o m.safetensors          continue from the last checkpoint
 *   train --init-only --preset tiny -m VOCAB -o m.safetensors
 *   train average -o avg.safetensors m.safetensors.ckpt-*
 *
 * The program parses options, reads the data, and runs the loop: one
 * update after another (lib/train: tfm_trainer_step), progress on stderr
 * and in a log, validation, checkpoints, early stopping, and a clean stop
 * on SIGINT or SIGTERM (a checkpoint is saved at the next update's end).
 *
 * Every option has a text value (its default, the command line's, or on
 * --resume the checkpoint's), and the effective values are stored in every
 * checkpoint and model as metadata "train.opt.NAME": a resumed run takes
 * the options it was started with, and the command line overrides them. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

/* OpenBLAS's own call (Debian's cblas.h declares it; others may not). */
void openblas_set_num_threads(int num_threads);

static const char usage_text[] =
    "Usage: train [OPTION]... --src FILE --tgt FILE -m VOCAB -o MODEL\n"
    "       train --resume[=CHECKPOINT] [OPTION]... -o MODEL\n"
    "       train --init-only [OPTION]... -m VOCAB -o MODEL\n"
    "       train average -o MODEL FILE...\n"
    "Trains a Transformer (\"Attention Is All You Need\") on a parallel corpus: line i\n"
    "of --tgt is the translation of line i of --src.  The files hold id lines (from\n"
    "'tokenize') or text, which is tokenized with the vocabulary.  MODEL is written\n"
    "atomically at the end; checkpoints MODEL.ckpt-STEP on the way.\n"
    "\n"
    "Model (fixed once training starts):\n"
    "      --preset=NAME          base (default), big, small or tiny\n"
    "      --d-model=N, --d-ff=N, --heads=N, --layers=N (encoder and decoder),\n"
    "      --encoder-layers=N, --decoder-layers=N, --max-positions=N\n"
    "                             override the preset\n"
    "      --pre-norm             x + Sublayer(LayerNorm(x)) instead of the paper's post-norm\n"
    "      --learned-positions    learned position embeddings instead of sinusoids\n"
    "      --attention-window=R   self-attention restricted to R neighbours (0: full)\n"
    "      --dropout=P            on sublayer outputs and embeddings (preset's: 0.1)\n"
    "      --attention-dropout=P  on attention weights (0)\n"
    "      --activation-dropout=P on the FFN's activations after the ReLU (0)\n"
    "      --label-smoothing=E    (0.1)\n"
    "      --seed=N               seed of the weights, the batches and dropout (1)\n"
    "\n"
    "Data:\n"
    "  -m, --vocab=VOCAB          the vocabulary (from 'tokenize learn') or a model file\n"
    "                             (--model=VOCAB is the same, as in tokenize)\n"
    "      --vocab-size=N         without a vocabulary: id files with ids below N\n"
    "      --src=FILE, --tgt=FILE the training data\n"
    "      --input-format=F       'auto' (default: each file by its first line), 'ids'\n"
    "                             or 'text'\n"
    "      --max-length=N         skip pairs with more than N tokens on a side (256)\n"
    "      --no-eos               do not end each source with </s> (then give encode\n"
    "                             --no-eos too; by default both add it)\n"
    "      --valid-src=FILE, --valid-tgt=FILE  held-out data for validation\n"
    "\n"
    "Training:\n"
    "      --batch-tokens=N       tokens per batch, padding included, on each side (4096)\n"
    "      --accum=N              batches per update (gradient accumulation) (1)\n"
    "      --sort-window=N        sentences are sorted by length within windows of N\n"
    "                             batches (100)\n"
    "      --lr-factor=F          lr = F * d_model^-0.5 * min(step^-0.5,\n"
    "                             step * warmup^-1.5) (1)\n"
    "      --warmup=N             warm-up updates (4000)\n"
    "      --clip-norm=X          clip the gradient to this global norm (0: off)\n"
    "      --ema=DECAY            keep a moving average of the weights (e.g. 0.9999) and\n"
    "                             write it as the model (0: off)\n"
    "      --threads=N            threads of the BLAS and of the rest of a step\n"
    "                             (default: the number of CPUs)\n"
    "\n"
    "Stopping, validation, checkpoints:\n"
    "      --max-steps=N          stop after N updates (0: no limit)\n"
    "      --max-epochs=N         stop after N passes over the data (0: no limit)\n"
    "      --max-time=T           stop after T of training: seconds, or 1h30m style\n"
    "      --valid-every=N        validate every N updates (1000)\n"
    "      --valid-bleu           also decode the validation sources greedily and\n"
    "                             score BLEU and exact matches\n"
    "      --patience=N           stop when N validations in a row did not improve (0: off);\n"
    "                             the best model so far is kept as MODEL.best\n"
    "      --save-every=N         save a checkpoint every N updates (1000; 0: at the end)\n"
    "      --keep=N               keep the newest N checkpoints (5)\n"
    "      --checkpoint-dir=DIR   write checkpoints as DIR/ckpt-STEP\n"
    "      --resume[=CHECKPOINT]  continue from CHECKPOINT (default: the newest), with\n"
    "                             its options unless given again\n"
    "      --average-last=N       write as MODEL the average of the last N checkpoints\n"
    "  -o, --output=MODEL         the model file to write\n"
    "      --init-only            write a freshly initialised model and stop\n"
    "\n"
    "Output:\n"
    "      --log=FILE             a TSV line per update and per validation\n"
    "      --progress=SECONDS     progress every SECONDS (terminal: 0.5, else 10)\n"
    "      --debug-inject-nan=STEP[:COUNT]\n"
    "                             a testing aid: poison the gradients of COUNT (1)\n"
    "                             updates from update STEP\n"
    "  -q, --quiet                print errors only\n"
    "  -v, --verbose              print more\n"
    "  -h, --help                 display this help and exit\n"
    "  -V, --version              output version information and exit\n"
    "\n"
    "An update whose loss or gradient is NaN or infinite is skipped with a warning;\n"
    "after 5 in a row training stops, keeping the last good checkpoint.  SIGINT or\n"
    "SIGTERM saves a checkpoint at the end of the update under way, then stops.\n"
    "Exit status: 0 on success, 1 on failure, 2 on a usage error.\n"
    "Example:\n"
    "  train --preset small -m de-en.vocab --src train.de --tgt train.en \\\n"
    "        --valid-src dev.de --valid-tgt dev.en --valid-bleu --max-time 2h -o de-en.st\n";

static const char average_usage_text[] =
    "Usage: train average -o MODEL FILE...\n"
    "Writes the element-wise average of the weights of the FILEs (model files or\n"
    "checkpoints of one training run) as MODEL, atomically.\n";

/* ---- the option table ---------------------------------------------------------------- */

/* How an option relates to resuming: MODEL options are fixed by the
 * checkpoint; TRAIN options change the run (a new value makes it differ
 * from an uninterrupted one); RUN options do not; ONCE options are not
 * stored at all. */
typedef enum opt_kind { K_MODEL, K_TRAIN, K_RUN, K_ONCE } opt_kind;

enum {
    O_PRESET, O_D_MODEL, O_D_FF, O_HEADS, O_LAYERS, O_ENC_LAYERS, O_DEC_LAYERS, O_MAX_POS,
    O_PRE_NORM, O_LEARNED_POS, O_ATTN_WINDOW, O_DROPOUT, O_ATTN_DROPOUT, O_ACT_DROPOUT,
    O_LABEL_SMOOTHING, O_VOCAB, O_VOCAB_SIZE, O_SRC, O_TGT, O_INPUT_FORMAT, O_MAX_LENGTH, O_NO_EOS, O_VALID_SRC,
    O_VALID_TGT, O_BATCH_TOKENS, O_ACCUM, O_SORT_WINDOW, O_LR_FACTOR, O_WARMUP, O_CLIP_NORM,
    O_EMA, O_SEED, O_THREADS, O_MAX_STEPS, O_MAX_EPOCHS, O_MAX_TIME, O_VALID_EVERY,
    O_VALID_BLEU, O_PATIENCE, O_SAVE_EVERY, O_KEEP, O_CHECKPOINT_DIR, O_AVERAGE_LAST, O_LOG,
    O_PROGRESS, O_DEBUG_NAN, O_RESUME, O_OUTPUT, O_INIT_ONLY,
    O_COUNT
};

typedef struct opt_def {
    const char *name;
    int has_arg;           /* no_argument: a flag, whose value is "yes" */
    opt_kind kind;
    const char *def;       /* the default's text; NULL: not set */
} opt_def;

static const opt_def defs[O_COUNT] = {
    [O_PRESET] = {"preset", required_argument, K_MODEL, "base"},
    [O_D_MODEL] = {"d-model", required_argument, K_MODEL, NULL},
    [O_D_FF] = {"d-ff", required_argument, K_MODEL, NULL},
    [O_HEADS] = {"heads", required_argument, K_MODEL, NULL},
    [O_LAYERS] = {"layers", required_argument, K_MODEL, NULL},
    [O_ENC_LAYERS] = {"encoder-layers", required_argument, K_MODEL, NULL},
    [O_DEC_LAYERS] = {"decoder-layers", required_argument, K_MODEL, NULL},
    [O_MAX_POS] = {"max-positions", required_argument, K_MODEL, NULL},
    [O_PRE_NORM] = {"pre-norm", no_argument, K_MODEL, NULL},
    [O_LEARNED_POS] = {"learned-positions", no_argument, K_MODEL, NULL},
    [O_ATTN_WINDOW] = {"attention-window", required_argument, K_MODEL, NULL},
    [O_DROPOUT] = {"dropout", required_argument, K_MODEL, NULL},
    [O_ATTN_DROPOUT] = {"attention-dropout", required_argument, K_MODEL, NULL},
    [O_ACT_DROPOUT] = {"activation-dropout", required_argument, K_MODEL, NULL},
    [O_LABEL_SMOOTHING] = {"label-smoothing", required_argument, K_MODEL, NULL},
    [O_VOCAB] = {"vocab", required_argument, K_MODEL, NULL},
    [O_VOCAB_SIZE] = {"vocab-size", required_argument, K_MODEL, NULL},
    [O_SRC] = {"src", required_argument, K_TRAIN, NULL},
    [O_TGT] = {"tgt", required_argument, K_TRAIN, NULL},
    [O_INPUT_FORMAT] = {"input-format", required_argument, K_TRAIN, "auto"},
    [O_MAX_LENGTH] = {"max-length", required_argument, K_TRAIN, "256"},
    [O_NO_EOS] = {"no-eos", no_argument, K_TRAIN, NULL},
    [O_VALID_SRC] = {"valid-src", required_argument, K_RUN, NULL},
    [O_VALID_TGT] = {"valid-tgt", required_argument, K_RUN, NULL},
    [O_BATCH_TOKENS] = {"batch-tokens", required_argument, K_TRAIN, "4096"},
    [O_ACCUM] = {"accum", required_argument, K_TRAIN, "1"},
    [O_SORT_WINDOW] = {"sort-window", required_argument, K_TRAIN, "100"},
    [O_LR_FACTOR] = {"lr-factor", required_argument, K_TRAIN, "1"},
    [O_WARMUP] = {"warmup", required_argument, K_TRAIN, "4000"},
    [O_CLIP_NORM] = {"clip-norm", required_argument, K_TRAIN, "0"},
    [O_EMA] = {"ema", required_argument, K_TRAIN, "0"},
    [O_SEED] = {"seed", required_argument, K_TRAIN, "1"},
    [O_THREADS] = {"threads", required_argument, K_RUN, NULL},
    [O_MAX_STEPS] = {"max-steps", required_argument, K_RUN, "0"},
    [O_MAX_EPOCHS] = {"max-epochs", required_argument, K_RUN, "0"},
    [O_MAX_TIME] = {"max-time", required_argument, K_RUN, "0"},
    [O_VALID_EVERY] = {"valid-every", required_argument, K_RUN, "1000"},
    [O_VALID_BLEU] = {"valid-bleu", no_argument, K_RUN, NULL},
    [O_PATIENCE] = {"patience", required_argument, K_RUN, "0"},
    [O_SAVE_EVERY] = {"save-every", required_argument, K_RUN, "1000"},
    [O_KEEP] = {"keep", required_argument, K_RUN, "5"},
    [O_CHECKPOINT_DIR] = {"checkpoint-dir", required_argument, K_RUN, NULL},
    [O_AVERAGE_LAST] = {"average-last", required_argument, K_RUN, "0"},
    [O_LOG] = {"log", required_argument, K_RUN, NULL},
    [O_PROGRESS] = {"progress", required_argument, K_ONCE, NULL},
    [O_DEBUG_NAN] = {"debug-inject-nan", required_argument, K_ONCE, NULL},
    [O_RESUME] = {"resume", optional_argument, K_ONCE, NULL},
    [O_OUTPUT] = {"output", required_argument, K_ONCE, NULL},
    [O_INIT_ONLY] = {"init-only", no_argument, K_ONCE, NULL},
};

/* The text values: given on the command line, stored in the checkpoint,
 * and in effect. */
static const char *given[O_COUNT], *stored[O_COUNT], *value[O_COUNT];
static char *stored_copies[O_COUNT];

/* "--name" for messages. */
static const char *opt_name(int id)
{
    static char names[O_COUNT][40];
    snprintf(names[id], sizeof names[id], "--%s", defs[id].name);
    return names[id];
}

static long long int_value(int id, long long lo, long long hi)
{
    return cli_parse_int(opt_name(id), value[id], lo, hi);
}

static double double_value(int id, double lo, double hi)
{
    return cli_parse_double(opt_name(id), value[id], lo, hi);
}

static bool flag_value(int id)
{
    return value[id] && strcmp(value[id], "yes") == 0;
}

/* ---- durations -------------------------------------------------------------------- */

/* "90", "90s", "1h30m", "2d", "1.5h": seconds. */
static double parse_duration(const char *option, const char *text)
{
    double total = 0;
    const char *s = text;
    if (!*s) cli_usage_error("%s: an empty duration", option);
    while (*s) {
        char *end;
        errno = 0;
        double v = strtod(s, &end);
        if (end == s || errno || !(v >= 0) || !isfinite(v))
            cli_usage_error("%s: '%s' is not a duration (seconds, or 1h30m style)", option, text);
        double unit = 1;
        switch (*end) {
        case 'd': unit = 86400; end++; break;
        case 'h': unit = 3600; end++; break;
        case 'm': unit = 60; end++; break;
        case 's': end++; break;
        case 0: break;
        default:
            cli_usage_error("%s: '%s' is not a duration (seconds, or 1h30m style)", option, text);
        }
        total += v * unit;
        s = end;
    }
    return total;
}

/* "1:02:03" */
static void format_hms(double seconds, char *out, size_t size)
{
    if (!(seconds >= 0) || seconds > 1e9) {
        snprintf(out, size, "-");
        return;
    }
    long s = (long)(seconds + 0.5);
    snprintf(out, size, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
}

/* ---- the effective options ------------------------------------------------------------- */

typedef struct options {
    tfm_config config;         /* with the vocabulary sizes */
    const char *vocab_path;
    int32_t vocab_size;
    const char *src, *tgt, *valid_src, *valid_tgt;
    tfm_corpus_format input_format;
    int max_length;
    bool append_eos;
    tfm_train_params train;
    uint64_t seed;
    int threads;
    int64_t max_steps, max_epochs;
    double max_time;
    int64_t valid_every;
    bool valid_bleu;
    int patience;
    int64_t save_every;
    int keep;
    const char *checkpoint_dir;
    int average_last;
    const char *log_path;
    double progress;
    const char *output;
    bool init_only;
    bool resume;
    const char *resume_from;   /* --resume=FILE, or NULL: the newest */
} options;

/* Builds the model configuration from the preset and the overrides. */
static void build_config(options *o)
{
    tfm_config *c = &o->config;
    tfm_error err;
    if (tfm_config_preset(value[O_PRESET], c, &err) != TFM_OK) cli_usage_error("--preset: %s", err.msg);
    if (value[O_D_MODEL]) c->d_model = (int)int_value(O_D_MODEL, 2, 65536);
    if (value[O_D_FF]) c->d_ff = (int)int_value(O_D_FF, 1, 1 << 18);
    if (value[O_HEADS]) c->n_heads = (int)int_value(O_HEADS, 1, 65536);
    if (value[O_LAYERS]) c->n_encoder_layers = c->n_decoder_layers = (int)int_value(O_LAYERS, 1, 256);
    if (value[O_ENC_LAYERS]) c->n_encoder_layers = (int)int_value(O_ENC_LAYERS, 1, 256);
    if (value[O_DEC_LAYERS]) c->n_decoder_layers = (int)int_value(O_DEC_LAYERS, 1, 256);
    if (value[O_MAX_POS]) c->max_positions = (int)int_value(O_MAX_POS, 2, 1 << 20);
    if (flag_value(O_PRE_NORM)) c->pre_norm = true;
    if (flag_value(O_LEARNED_POS)) c->positions = TFM_POS_LEARNED;
    if (value[O_ATTN_WINDOW]) c->attention_window = (int)int_value(O_ATTN_WINDOW, 0, 1 << 20);
    if (value[O_DROPOUT]) c->dropout = (float)double_value(O_DROPOUT, 0, 0.99);
    if (value[O_ATTN_DROPOUT]) c->attention_dropout = (float)double_value(O_ATTN_DROPOUT, 0, 0.99);
    if (value[O_ACT_DROPOUT]) c->activation_dropout = (float)double_value(O_ACT_DROPOUT, 0, 0.99);
    if (value[O_LABEL_SMOOTHING]) c->label_smoothing = (float)double_value(O_LABEL_SMOOTHING, 0, 0.99);
}

static void resolve(options *o)
{
    memset(o, 0, sizeof *o);
    build_config(o);
    o->vocab_path = value[O_VOCAB];
    o->vocab_size = value[O_VOCAB_SIZE] ? (int32_t)int_value(O_VOCAB_SIZE, 5, 1 << 24) : 0;
    o->src = value[O_SRC];
    o->tgt = value[O_TGT];
    o->valid_src = value[O_VALID_SRC];
    o->valid_tgt = value[O_VALID_TGT];
    static const char *const formats[] = {"auto", "ids", "text", NULL};
    int f = cli_parse_choice("--input-format", value[O_INPUT_FORMAT], formats);
    o->input_format = f == 0 ? TFM_CORPUS_AUTO : f == 1 ? TFM_CORPUS_IDS : TFM_CORPUS_TEXT;
    o->max_length = (int)int_value(O_MAX_LENGTH, 1, 1 << 20);
    o->append_eos = !flag_value(O_NO_EOS);

    tfm_train_params *t = &o->train;
    *t = tfm_train_default_params();
    t->batches.batch_tokens = int_value(O_BATCH_TOKENS, 1, INT64_C(1) << 40);
    t->accum = (int)int_value(O_ACCUM, 1, 1 << 20);
    t->batches.window = (int)int_value(O_SORT_WINDOW, 1, 1 << 20);
    t->lr_factor = double_value(O_LR_FACTOR, 1e-9, 1e9);
    t->warmup = (int)int_value(O_WARMUP, 1, INT32_MAX);
    t->clip_norm = double_value(O_CLIP_NORM, 0, 1e30);
    t->ema_decay = double_value(O_EMA, 0, 0.999999999);
    o->seed = (uint64_t)int_value(O_SEED, 0, INT64_MAX);
    /* One seed for all three, each stream kept apart (the library mixes the
     * dropout seed; the weights get seed + 1). */
    t->seed = o->seed;
    t->batches.seed = o->seed;
    o->threads = value[O_THREADS] ? (int)int_value(O_THREADS, 1, 1024) : tfm_cpu_count();
    t->n_threads = o->threads;

    o->max_steps = int_value(O_MAX_STEPS, 0, INT64_MAX);
    o->max_epochs = int_value(O_MAX_EPOCHS, 0, INT64_MAX);
    o->max_time = parse_duration("--max-time", value[O_MAX_TIME]);
    o->valid_every = int_value(O_VALID_EVERY, 1, INT64_MAX);
    o->valid_bleu = flag_value(O_VALID_BLEU);
    o->patience = (int)int_value(O_PATIENCE, 0, 1 << 30);
    o->save_every = int_value(O_SAVE_EVERY, 0, INT64_MAX);
    o->keep = (int)int_value(O_KEEP, 1, 1 << 20);
    o->checkpoint_dir = value[O_CHECKPOINT_DIR];
    o->average_last = (int)int_value(O_AVERAGE_LAST, 0, 1 << 20);
    o->log_path = value[O_LOG];
    o->progress = value[O_PROGRESS] ? double_value(O_PROGRESS, 0.01, 1e9)
                                    : isatty(STDERR_FILENO) ? 0.5 : 10.0;
    if (value[O_DEBUG_NAN]) {
        long long step, count = 1;
        int used = 0;
        const char *s = value[O_DEBUG_NAN];
        if (!((sscanf(s, "%lld%n", &step, &used) == 1 && s[used] == 0) ||
              (sscanf(s, "%lld:%lld%n", &step, &count, &used) == 2 && s[used] == 0)) ||
            step < 1 || count < 1)
            cli_usage_error("--debug-inject-nan: '%s' is not STEP or STEP:COUNT", s);
        t->debug_nan_step = step;
        t->debug_nan_count = count;
    }
    o->output = value[O_OUTPUT];
    o->init_only = flag_value(O_INIT_ONLY);
    o->resume = given[O_RESUME] != NULL;
    o->resume_from = given[O_RESUME] && given[O_RESUME][0] ? given[O_RESUME] : NULL;
}

/* ---- parsing the command line ------------------------------------------------------------ */

static void parse_command_line(int argc, char **argv)
{
    static const struct option common[] = {CLI_COMMON_LONG_OPTIONS,
                                           {"model", required_argument, NULL, 'm'}};
    enum { N_COMMON = sizeof common / sizeof common[0] };
    struct option longs[O_COUNT + N_COMMON + 1];
    for (int i = 0; i < O_COUNT; i++)
        longs[i] = (struct option){defs[i].name, defs[i].has_arg, NULL, 256 + i};
    for (int i = 0; i < N_COMMON; i++) longs[O_COUNT + i] = common[i];
    longs[O_COUNT + N_COMMON] = (struct option){NULL, 0, NULL, 0};
    int c;
    while ((c = getopt_long(argc, argv, "m:o:qvhV", longs, NULL)) != -1) {
        int id;
        if (c == 'm') id = O_VOCAB;
        else if (c == 'o') id = O_OUTPUT;
        else if (c >= 256 && c < 256 + O_COUNT) id = c - 256;
        else {
            cli_common_option(c, usage_text);
            continue;
        }
        given[id] = defs[id].has_arg == no_argument ? "yes" : optarg ? optarg : "";
    }
    if (optind < argc) cli_usage_error("unexpected argument '%s'", argv[optind]);
}

/* ---- files of the run ---------------------------------------------------------------------- */

typedef struct run_paths {
    tfm_buf prefix;            /* checkpoints are PREFIX-STEP */
    tfm_buf best;              /* MODEL.best */
    tfm_buf scratch;
} run_paths;

static void make_paths(run_paths *p, const options *o)
{
    tfm_buf_init(&p->prefix);
    tfm_buf_init(&p->best);
    tfm_buf_init(&p->scratch);
    if (o->checkpoint_dir) {
        if (mkdir(o->checkpoint_dir, 0777) != 0 && errno != EEXIST)
            cli_fail(o->checkpoint_dir, 0, "%s", strerror(errno));
        tfm_buf_printf(&p->prefix, "%s/ckpt", o->checkpoint_dir);
    } else {
        tfm_buf_printf(&p->prefix, "%s.ckpt", o->output);
    }
    tfm_buf_printf(&p->best, "%s.best", o->output);
}

/* The newest checkpoint of the run, or NULL (malloc'd). */
static char *newest_checkpoint(const char *prefix)
{
    int64_t *steps;
    size_t n;
    tfm_error err;
    if (tfm_checkpoint_list(prefix, &steps, &n, &err) != TFM_OK) cli_fail(NULL, 0, "%s", err.msg);
    char *path = NULL;
    if (n) {
        tfm_buf b;
        tfm_buf_init(&b);
        tfm_checkpoint_path(prefix, steps[n - 1], &b);
        path = b.data;
    }
    free(steps);
    return path;
}

/* Reads the options a checkpoint was trained with into stored[]. */
static void read_stored_options(const char *path)
{
    tfm_safetensors *f;
    tfm_error err;
    if (tfm_safetensors_open(path, &f, &err) != TFM_OK) cli_fail(path, 0, "%s", err.msg);
    for (int i = 0; i < O_COUNT; i++) {
        char key[64];
        snprintf(key, sizeof key, "train.opt.%s", defs[i].name);
        const char *v = tfm_safetensors_metadata(f, key);
        if (v && defs[i].kind != K_ONCE) {
            stored_copies[i] = strdup(v);
            stored[i] = stored_copies[i];
        }
    }
    tfm_safetensors_free(f);
}

/* ---- metadata: the effective options and the run's state ------------------------------------ */

typedef struct run_state {
    double elapsed;            /* seconds of training before this process */
    double best_score;         /* higher is better */
    int64_t best_step;
    int bad_validations;
    bool has_best;
} run_state;

typedef struct metadata {
    const char *kv[2 * (O_COUNT + 8) + 1];
    char keys[O_COUNT][48];
    char state[5][64];
    size_t n;
} metadata;

static void build_metadata(metadata *m, const run_state *rs, double elapsed)
{
    m->n = 0;
    for (int i = 0; i < O_COUNT; i++) {
        if (defs[i].kind == K_ONCE || !value[i]) continue;
        snprintf(m->keys[i], sizeof m->keys[i], "train.opt.%s", defs[i].name);
        m->kv[m->n++] = m->keys[i];
        m->kv[m->n++] = value[i];
    }
    snprintf(m->state[0], sizeof m->state[0], "%.3f", elapsed);
    m->kv[m->n++] = "train.elapsed";
    m->kv[m->n++] = m->state[0];
    if (rs->has_best) {
        snprintf(m->state[1], sizeof m->state[1], "%.17g", rs->best_score);
        snprintf(m->state[2], sizeof m->state[2], "%" PRId64, rs->best_step);
        m->kv[m->n++] = "train.best_score";
        m->kv[m->n++] = m->state[1];
        m->kv[m->n++] = "train.best_step";
        m->kv[m->n++] = m->state[2];
    }
    snprintf(m->state[3], sizeof m->state[3], "%d", rs->bad_validations);
    m->kv[m->n++] = "train.bad_validations";
    m->kv[m->n++] = m->state[3];
    m->kv[m->n] = NULL;
}

/* The number a checkpoint's metadata holds under key, within [lo, hi] (and
 * whole when integer): false when the key is absent; a value that is not
 * such a number is a format error naming the file and the key. */
static bool metadata_number(const tfm_safetensors *f, const char *path, const char *key,
                            double lo, double hi, bool integer, double *out)
{
    const char *s = tfm_safetensors_metadata(f, key);
    if (!s) return false;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end || errno || !isfinite(v) || v < lo || v > hi || (integer && v != floor(v)))
        cli_fail(path, 0, "the checkpoint's metadata \"%s\" is '%.40s', not %s from %g to %g: "
                 "the file is corrupt", key, s, integer ? "a whole number" : "a number", lo, hi);
    *out = v;
    return true;
}

static void read_run_state(const char *path, run_state *rs)
{
    memset(rs, 0, sizeof *rs);
    tfm_safetensors *f;
    tfm_error err;
    if (tfm_safetensors_open(path, &f, &err) != TFM_OK) cli_fail(path, 0, "%s", err.msg);
    double v;
    if (metadata_number(f, path, "train.elapsed", 0, 1e12, false, &v)) rs->elapsed = v;
    if (metadata_number(f, path, "train.best_score", -1e30, 1e30, false, &v)) {
        rs->best_score = v;
        rs->has_best = true;
    }
    if (metadata_number(f, path, "train.best_step", 0, 1e15, true, &v)) rs->best_step = (int64_t)v;
    if (metadata_number(f, path, "train.bad_validations", 0, INT_MAX, true, &v))
        rs->bad_validations = (int)v;
    tfm_safetensors_free(f);
}

/* ---- progress ------------------------------------------------------------------------------ */

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct progress {
    bool tty;
    bool line_shown;           /* an updating line is on the terminal */
    double last;               /* time of the last report */
    /* Since the last report: */
    double loss, nll;
    int64_t tokens, steps;
    double started;            /* this process's start of training */
    int64_t first_step;        /* the step count when this process started */
    double first_epoch;        /* and the epoch */
    int64_t total_tokens;      /* target tokens trained on by this process */
    FILE *log;                 /* --log, until a write to it fails */
    const char *log_name;
} progress;

/* Clears the updating line before another message. */
static void progress_clear(progress *p)
{
    if (p->line_shown) {
        fputs("\r\033[K", stderr);
        p->line_shown = false;
    }
}

/* ---- signals -------------------------------------------------------------------------------- */

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
    stop_signal = sig;
}

static void install_handlers(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    /* A second signal acts at once: the default action is back after the first. */
    sa.sa_flags = SA_RESETHAND;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

/* ---- loading ------------------------------------------------------------------------------- */

static const char *format_name(tfm_corpus_format f)
{
    return f == TFM_CORPUS_TEXT ? "text" : "ids";
}

static tfm_corpus *load_corpus(const options *o, const char *src, const char *tgt,
                               const tfm_vocab *vocab, int32_t vocab_size, const char *what)
{
    tfm_corpus_params cp = tfm_corpus_default_params();
    cp.format = o->input_format;
    cp.vocab = vocab;
    cp.vocab_size = vocab_size;
    cp.max_length = o->max_length;
    cp.append_eos = o->append_eos;
    cp.n_threads = o->threads;
    tfm_corpus *c;
    tfm_corpus_stats st;
    tfm_error err;
    if (tfm_corpus_load(src, tgt, &cp, &c, &st, &err) != TFM_OK) {
        const char *file = st.error_file == 0 ? src : st.error_file == 1 ? tgt : NULL;
        if (file) cli_fail(file, st.error_line, "%s", err.msg);
        cli_fail(NULL, 0, "%s and %s: %s", src, tgt, err.msg);
    }
    if (st.repaired)
        cli_warn(NULL, 0, "%s data: invalid UTF-8 replaced by U+FFFD in %zu lines", what, st.repaired);
    if (cli_verbosity >= 1)
        fprintf(stderr,
                "train: %s data: %zu pairs of %zu lines (%s, %s), %" PRId64 " source and %" PRId64
                " target tokens; skipped %zu with an empty side, %zu longer than %d tokens\n",
                what, st.pairs, st.lines, format_name(st.src_format), format_name(st.tgt_format),
                st.src_tokens, st.tgt_tokens, st.empty, st.too_long, o->max_length);
    if (st.pairs == 0) cli_fail(NULL, 0, "%s data: %s and %s hold no usable sentence pair", what, src, tgt);
    return c;
}

/* ---- average --------------------------------------------------------------------------------- */

static int run_average(int argc, char **argv)
{
    static const struct option longs[] = {
        {"output", required_argument, NULL, 'o'},
        CLI_COMMON_LONG_OPTIONS,
        {NULL, 0, NULL, 0},
    };
    const char *out = NULL;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "o:qvhV", longs, NULL)) != -1) {
        if (c == 'o') out = optarg;
        else cli_common_option(c, average_usage_text);
    }
    if (!out) cli_usage_error("average: -o MODEL is required");
    if (optind >= argc) cli_usage_error("average: no files to average");
    tfm_model *m;
    tfm_error err;
    if (tfm_average_models((const char *const *)argv + optind, argc - optind, &m, &err) != TFM_OK)
        cli_fail(NULL, 0, "%s", err.msg);
    if (tfm_model_save(m, out, NULL, &err) != TFM_OK) cli_fail(out, 0, "%s", err.msg);
    if (cli_verbosity >= 1)
        fprintf(stderr, "train: averaged %d models into %s\n", argc - optind, out);
    tfm_model_free(m);
    return CLI_EXIT_OK;
}

/* ---- training ------------------------------------------------------------------------------------ */

typedef struct run {
    options *o;
    run_paths paths;
    tfm_trainer *trainer;
    tfm_corpus *data, *valid;
    run_state rs;
    progress pr;
    int64_t last_saved;        /* step of the newest checkpoint written or resumed from */
} run;

static double elapsed(const run *r)
{
    return r->rs.elapsed + (now() - r->pr.started);
}

static void save_checkpoint(run *r)
{
    int64_t step = tfm_trainer_steps(r->trainer);
    if (step == r->last_saved) return;
    metadata md;
    build_metadata(&md, &r->rs, elapsed(r));
    tfm_checkpoint_path(r->paths.prefix.data, step, &r->paths.scratch);
    tfm_error err;
    if (tfm_trainer_save(r->trainer, r->paths.scratch.data, md.kv, &err) != TFM_OK)
        cli_fail(r->paths.scratch.data, 0, "%s", err.msg);
    r->last_saved = step;
    if (tfm_checkpoint_prune(r->paths.prefix.data, r->o->keep, &err) != TFM_OK)
        cli_warn(NULL, 0, "%s", err.msg);
    cli_info("checkpoint %s", r->paths.scratch.data);
}

static void report(run *r, const tfm_step_result *res, double t)
{
    progress *p = &r->pr;
    int64_t step = tfm_trainer_steps(r->trainer);
    double dt = t - p->last;
    double tokens = p->tokens > 0 ? (double)p->tokens : 1;
    double loss = p->loss / tokens, ppl = exp(p->nll / tokens);
    double rate = dt > 0 ? (double)p->tokens / dt : 0;
    double epoch = tfm_trainer_epoch(r->trainer);
    double el = elapsed(r);
    /* The time left: the nearest of the limits, at this process's pace. */
    double eta = -1, run_time = t - p->started;
    int64_t done = step - p->first_step;
    if (r->o->max_steps > 0 && done > 0)
        eta = (double)(r->o->max_steps - step) * run_time / (double)done;
    double epochs_done = epoch - p->first_epoch;
    if (r->o->max_epochs > 0 && epochs_done > 0) {
        double e = ((double)r->o->max_epochs - epoch) * run_time / epochs_done;
        if (eta < 0 || e < eta) eta = e;
    }
    if (r->o->max_time > 0 && (eta < 0 || r->o->max_time - el < eta)) eta = r->o->max_time - el;
    char el_text[32], eta_text[32];
    format_hms(el, el_text, sizeof el_text);
    format_hms(eta, eta_text, sizeof eta_text);
    if (cli_verbosity >= 1) {
        char line[256];
        snprintf(line, sizeof line,
                 "step %" PRId64 " epoch %.2f loss %.3f ppl %.2f lr %.2e %.0f tok/s elapsed %s ETA %s",
                 step, epoch, loss, ppl, res->lr, rate, el_text, eta_text);
        if (p->tty) {
            fprintf(stderr, "\r%s\033[K", line);
            p->line_shown = true;
        } else {
            fprintf(stderr, "train: %s\n", line);
        }
        fflush(stderr);
    }
    p->last = t;
    p->loss = p->nll = 0;
    p->tokens = p->steps = 0;
}

static void log_line(run *r, const char *set, double epoch, double loss, double ppl, double lr,
                     double rate, int64_t tokens, const tfm_valid_result *v)
{
    if (!r->pr.log) return;
    fprintf(r->pr.log, "%" PRId64 "\t%.4f\t%.6f\t%.4f\t%.6g\t%.1f\t%.3f\t%s", tfm_trainer_steps(r->trainer),
            epoch, loss, ppl, lr, rate, elapsed(r), set);
    if (v && v->decoded) fprintf(r->pr.log, "\t%.2f\t%.4f", v->bleu, v->exact);
    else fputs("\t-\t-", r->pr.log);
    fprintf(r->pr.log, "\t%" PRId64 "\n", tokens);
    /* A log that cannot be written (a full disk, a pipe whose reader went
     * away) is given up with one warning: training, worth more than its
     * log, goes on and writes its checkpoints and model. */
    if (fflush(r->pr.log) != 0 || ferror(r->pr.log)) {
        progress_clear(&r->pr);
        cli_warn(r->pr.log_name, 0, "write error: %s; training goes on without the log",
                 strerror(errno));
        fclose(r->pr.log);
        r->pr.log = NULL;
    }
}

/* Validates; returns true when training should stop (patience exhausted). */
static bool validate(run *r)
{
    tfm_valid_result v;
    tfm_error err;
    double t0 = now();
    if (tfm_trainer_validate(r->trainer, r->valid, r->o->valid_bleu, &v, &err) != TFM_OK)
        cli_fail(r->o->valid_src, 0, "validation: %s", err.msg);
    double tokens = v.tgt_tokens > 0 ? (double)v.tgt_tokens : 1;
    double loss = v.loss_sum / tokens, ppl = exp(v.nll_sum / tokens);
    /* Higher is better: BLEU when decoding, else minus the perplexity's log. */
    double score = v.decoded ? v.bleu : -v.nll_sum / tokens;
    int64_t step = tfm_trainer_steps(r->trainer);
    bool improved = !r->rs.has_best || score > r->rs.best_score;
    if (improved) {
        r->rs.has_best = true;
        r->rs.best_score = score;
        r->rs.best_step = step;
        r->rs.bad_validations = 0;
        metadata md;
        build_metadata(&md, &r->rs, elapsed(r));
        if (tfm_trainer_save_model(r->trainer, r->paths.best.data, md.kv, &err) != TFM_OK)
            cli_fail(r->paths.best.data, 0, "%s", err.msg);
    } else {
        r->rs.bad_validations++;
    }
    progress_clear(&r->pr);
    if (cli_verbosity >= 1) {
        fprintf(stderr, "train: valid step %" PRId64 " loss %.3f ppl %.2f", step, loss, ppl);
        if (v.decoded) fprintf(stderr, " bleu %.2f exact %.1f%%", v.bleu, 100 * v.exact);
        fprintf(stderr, " (%.1fs)%s\n", now() - t0,
                improved ? " best so far" : r->o->patience ? " no better" : "");
    }
    log_line(r, "valid", tfm_trainer_epoch(r->trainer), loss, ppl, 0, 0, v.tgt_tokens, &v);
    if (r->o->patience > 0 && r->rs.bad_validations >= r->o->patience) {
        if (cli_verbosity >= 1)
            fprintf(stderr, "train: early stop: %d validations without improvement; the best "
                            "(step %" PRId64 ") is %s\n",
                    r->rs.bad_validations, r->rs.best_step, r->paths.best.data);
        return true;
    }
    return false;
}

/* Why the loop ended. */
typedef enum { END_LIMIT, END_SIGNAL, END_PATIENCE } end_reason;

static end_reason train_loop(run *r)
{
    const options *o = r->o;
    progress *p = &r->pr;
    for (;;) {
        if (stop_signal) return END_SIGNAL;
        int64_t step = tfm_trainer_steps(r->trainer);
        if (o->max_steps > 0 && step >= o->max_steps) return END_LIMIT;
        if (o->max_epochs > 0 && tfm_trainer_epoch(r->trainer) >= (double)o->max_epochs - 1e-12)
            return END_LIMIT;
        if (o->max_time > 0 && elapsed(r) >= o->max_time) return END_LIMIT;

        tfm_step_result res;
        tfm_error err;
        double t0 = now();
        if (tfm_trainer_step(r->trainer, &res, &err) != TFM_OK) {
            progress_clear(p);
            if (r->last_saved > 0) {
                tfm_checkpoint_path(r->paths.prefix.data, r->last_saved, &r->paths.scratch);
                cli_fail(NULL, 0, "update %" PRId64 ": %s; the last checkpoint is %s", step + 1,
                         err.msg, r->paths.scratch.data);
            }
            cli_fail(NULL, 0, "update %" PRId64 ": %s", step + 1, err.msg);
        }
        double t1 = now();
        if (res.skipped) {
            progress_clear(p);
            cli_warn(NULL, 0, "update %" PRId64 ": the loss or the gradients are not finite "
                              "(NaN or infinite): update skipped (%d in a row)",
                     step + 1, res.bad_steps);
            continue;
        }
        p->loss += res.loss_sum;
        p->nll += res.nll_sum;
        p->tokens += res.tgt_tokens;
        p->total_tokens += res.tgt_tokens;
        p->steps++;
        double tokens = res.tgt_tokens > 0 ? (double)res.tgt_tokens : 1;
        log_line(r, "train", tfm_trainer_epoch(r->trainer), res.loss_sum / tokens,
                 exp(res.nll_sum / tokens), res.lr, t1 > t0 ? (double)res.tgt_tokens / (t1 - t0) : 0,
                 res.tgt_tokens, NULL);
        if (t1 - p->last >= o->progress) report(r, &res, t1);
        step = tfm_trainer_steps(r->trainer);
        if (r->valid && step % o->valid_every == 0 && validate(r)) return END_PATIENCE;
        if (o->save_every > 0 && step % o->save_every == 0) save_checkpoint(r);
    }
}

static int run_training(options *o)
{
    run r = {.o = o};
    make_paths(&r.paths, o);
    tfm_error err;

    /* The checkpoint to resume from, and the vocabulary the data need. */
    char *resume_path = NULL;
    if (o->resume) {
        resume_path = o->resume_from ? strdup(o->resume_from) : newest_checkpoint(r.paths.prefix.data);
        if (!resume_path)
            cli_fail(NULL, 0, "--resume: there is no checkpoint %s-STEP to resume from",
                     r.paths.prefix.data);
        read_run_state(resume_path, &r.rs);
    }
    tfm_vocab *vocab = NULL;
    const char *vocab_from = o->resume ? resume_path : o->vocab_path;
    int32_t vocab_size = o->vocab_size;
    if (o->resume) {
        /* The model's own vocabulary (a model without one has its size). */
        tfm_safetensors *f;
        if (tfm_safetensors_open(resume_path, &f, &err) != TFM_OK) cli_fail(resume_path, 0, "%s", err.msg);
        bool has_vocab = tfm_safetensors_metadata(f, "vocab") != NULL;
        double size;
        if (metadata_number(f, resume_path, "src_vocab_size", 1, INT32_MAX, true, &size))
            vocab_size = (int32_t)size;
        tfm_safetensors_free(f);
        if (!has_vocab) vocab_from = NULL;
    }
    if (vocab_from && tfm_model_load_vocab(vocab_from, &vocab, &err) != TFM_OK)
        cli_fail(vocab_from, 0, "%s", err.msg);
    if (!o->resume) {
        if (vocab) vocab_size = tfm_vocab_size(vocab);
        o->config.src_vocab_size = o->config.tgt_vocab_size = vocab_size;
        if (tfm_config_validate(&o->config, &err) != TFM_OK) cli_usage_error("the model: %s", err.msg);
    }

    r.data = load_corpus(o, o->src, o->tgt, vocab, vocab_size, "training");
    if (o->valid_src) r.valid = load_corpus(o, o->valid_src, o->valid_tgt, vocab, vocab_size, "validation");

    if (o->resume) {
        if (tfm_trainer_resume(resume_path, r.data, &o->train, &r.trainer, &err) != TFM_OK)
            cli_fail(NULL, 0, "%s", err.msg);
        r.last_saved = tfm_trainer_steps(r.trainer);
        if (cli_verbosity >= 1)
            fprintf(stderr, "train: resuming from %s at update %" PRId64 "\n", resume_path,
                    r.last_saved);
    } else {
        tfm_model *m;
        if (tfm_model_create(&o->config, vocab, o->seed + 1, &m, &err) != TFM_OK)
            cli_fail(NULL, 0, "%s", err.msg);
        if (tfm_trainer_create(m, r.data, &o->train, &r.trainer, &err) != TFM_OK)
            cli_fail(NULL, 0, "%s", err.msg);
    }
    tfm_vocab_free(vocab);

    const tfm_config *c = &tfm_trainer_model(r.trainer)->config;
    if (cli_verbosity >= 1) {
        fprintf(stderr,
                "train: model: d_model %d, d_ff %d, %d heads, %d+%d layers, %s-norm, vocabulary "
                "%d, %zu parameters\n",
                c->d_model, c->d_ff, c->n_heads, c->n_encoder_layers, c->n_decoder_layers,
                c->pre_norm ? "pre" : "post", (int)c->tgt_vocab_size, tfm_params_count(c));
        fputs("train: options:", stderr);
        for (int i = 0; i < O_COUNT; i++)
            if (defs[i].kind != K_ONCE && value[i]) fprintf(stderr, " --%s=%s", defs[i].name, value[i]);
        if (!value[O_THREADS]) fprintf(stderr, " --threads=%d", o->threads);
        fputc('\n', stderr);
    }

    if (o->log_path) {
        bool fresh = !o->resume || access(o->log_path, F_OK) != 0;
        r.pr.log = fopen(o->log_path, fresh ? "w" : "a");
        if (!r.pr.log) cli_fail(o->log_path, 0, "%s", strerror(errno));
        r.pr.log_name = o->log_path;
        if (fresh)
            fputs("step\tepoch\tloss\tppl\tlr\ttokens_per_s\telapsed\tset\tbleu\texact\ttokens\n",
                  r.pr.log);
    }
    r.pr.tty = isatty(STDERR_FILENO) && cli_verbosity >= 1;
    r.pr.started = r.pr.last = now();
    r.pr.first_step = tfm_trainer_steps(r.trainer);
    r.pr.first_epoch = tfm_trainer_epoch(r.trainer);

    install_handlers();
    end_reason why = train_loop(&r);
    progress_clear(&r.pr);
    /* A run that stops between validations is validated once more, so the
     * log ends with the figures of the model it writes. */
    int64_t last_step = tfm_trainer_steps(r.trainer);
    if (why == END_LIMIT && r.valid && last_step > r.pr.first_step && last_step % o->valid_every != 0)
        validate(&r);

    /* At the end: a checkpoint of the last state, then the model. */
    save_checkpoint(&r);
    metadata md;
    build_metadata(&md, &r.rs, elapsed(&r));
    if (o->average_last > 0) {
        int64_t *steps;
        size_t n;
        if (tfm_checkpoint_list(r.paths.prefix.data, &steps, &n, &err) != TFM_OK)
            cli_fail(NULL, 0, "%s", err.msg);
        size_t k = n < (size_t)o->average_last ? n : (size_t)o->average_last;
        char **paths = calloc(k, sizeof *paths);
        for (size_t i = 0; i < k; i++) {
            tfm_checkpoint_path(r.paths.prefix.data, steps[n - k + i], &r.paths.scratch);
            paths[i] = strdup(r.paths.scratch.data);
        }
        tfm_model *avg;
        if (tfm_average_models((const char *const *)paths, (int)k, &avg, &err) != TFM_OK)
            cli_fail(NULL, 0, "%s", err.msg);
        if (tfm_model_save(avg, o->output, md.kv, &err) != TFM_OK) cli_fail(o->output, 0, "%s", err.msg);
        if (cli_verbosity >= 1)
            fprintf(stderr, "train: %s is the average of the last %zu checkpoints\n", o->output, k);
        tfm_model_free(avg);
        for (size_t i = 0; i < k; i++) free(paths[i]);
        free(paths);
        free(steps);
    } else if (tfm_trainer_save_model(r.trainer, o->output, md.kv, &err) != TFM_OK) {
        cli_fail(o->output, 0, "%s", err.msg);
    }
    if (cli_verbosity >= 1) {
        char el[32];
        format_hms(elapsed(&r), el, sizeof el);
        double run_time = now() - r.pr.started;
        fprintf(stderr,
                "train: %s after %" PRId64 " updates, %.2f epochs, %s (this run: %" PRId64
                " target tokens, %.0f tokens/s); model written to %s\n",
                why == END_SIGNAL ? "stopped by a signal" : why == END_PATIENCE ? "stopped early" : "done",
                tfm_trainer_steps(r.trainer), tfm_trainer_epoch(r.trainer), el, r.pr.total_tokens,
                run_time > 0 ? (double)r.pr.total_tokens / run_time : 0.0, o->output);
    }
    if (r.pr.log) fclose(r.pr.log);
    tfm_trainer_free(r.trainer);
    tfm_corpus_free(r.data);
    tfm_corpus_free(r.valid);
    tfm_buf_free(&r.paths.prefix);
    tfm_buf_free(&r.paths.best);
    tfm_buf_free(&r.paths.scratch);
    free(resume_path);
    if (why == END_SIGNAL) {
        /* End as the signal would have ended us, so the caller sees it. */
        int sig = stop_signal;
        signal(sig, SIG_DFL);
        raise(sig);
    }
    return CLI_EXIT_OK;
}

static int run_init_only(options *o)
{
    tfm_error err;
    tfm_vocab *vocab = NULL;
    if (o->vocab_path && tfm_model_load_vocab(o->vocab_path, &vocab, &err) != TFM_OK)
        cli_fail(o->vocab_path, 0, "%s", err.msg);
    int32_t n = vocab ? tfm_vocab_size(vocab) : o->vocab_size;
    o->config.src_vocab_size = o->config.tgt_vocab_size = n;
    if (tfm_config_validate(&o->config, &err) != TFM_OK) cli_usage_error("the model: %s", err.msg);
    tfm_model *m;
    if (tfm_model_create(&o->config, vocab, o->seed + 1, &m, &err) != TFM_OK)
        cli_fail(NULL, 0, "%s", err.msg);
    run_state rs = {0};
    metadata md;
    build_metadata(&md, &rs, 0);
    if (tfm_model_save(m, o->output, md.kv, &err) != TFM_OK) cli_fail(o->output, 0, "%s", err.msg);
    if (cli_verbosity >= 1)
        fprintf(stderr, "train: wrote an initialised model of %zu parameters to %s\n",
                tfm_params_count(&o->config), o->output);
    tfm_model_free(m);
    tfm_vocab_free(vocab);
    return CLI_EXIT_OK;
}

int main(int argc, char **argv)
{
    cli_init("train", argv);
    /* train writes no output a reader could stop taking but its --log, whose
     * loss must not end a training run (log_line): a write to a pipe whose
     * reader went away fails with EPIPE instead of killing the process. */
    signal(SIGPIPE, SIG_IGN);
    if (argc > 1 && strcmp(argv[1], "average") == 0) return run_average(argc - 1, argv + 1);
    parse_command_line(argc, argv);
    if (!given[O_OUTPUT]) cli_usage_error("-o MODEL is required");

    /* On --resume, the checkpoint's options come first, then the command line's. */
    if (given[O_RESUME]) {
        if (given[O_INIT_ONLY]) cli_usage_error("--resume and --init-only do not go together");
        run_paths p;
        options tmp = {.output = given[O_OUTPUT], .checkpoint_dir = given[O_CHECKPOINT_DIR]};
        make_paths(&p, &tmp);
        char *path = given[O_RESUME][0] ? strdup(given[O_RESUME]) : newest_checkpoint(p.prefix.data);
        if (!path)
            cli_fail(NULL, 0, "--resume: there is no checkpoint %s-STEP to resume from", p.prefix.data);
        read_stored_options(path);
        free(path);
        tfm_buf_free(&p.prefix);
        tfm_buf_free(&p.best);
        tfm_buf_free(&p.scratch);
    }
    for (int i = 0; i < O_COUNT; i++) {
        if (given[O_RESUME] && defs[i].kind == K_MODEL && given[i] &&
            (!stored[i] || strcmp(given[i], stored[i]) != 0))
            cli_usage_error("%s cannot change when resuming: the model is the checkpoint's",
                            opt_name(i));
        if (given[O_RESUME] && defs[i].kind == K_TRAIN && given[i] && stored[i] &&
            strcmp(given[i], stored[i]) != 0)
            cli_warn(NULL, 0, "%s=%s differs from the checkpoint's %s: the run will not be the "
                              "same as one never stopped",
                     opt_name(i), given[i], stored[i]);
        value[i] = given[i] ? given[i] : stored[i] ? stored[i] : defs[i].def;
    }
    options o;
    resolve(&o);
    if (!o.resume && !o.vocab_path && !o.vocab_size)
        cli_usage_error("a vocabulary is required: -m VOCAB (or --vocab-size N for id files)");
    if (o.vocab_path && o.vocab_size && !o.resume)
        cli_usage_error("-m and --vocab-size do not go together: the vocabulary has its size");
    if (o.init_only) return run_init_only(&o);
    if (!o.src || !o.tgt) cli_usage_error("--src and --tgt are required");
    if (!o.valid_src != !o.valid_tgt) cli_usage_error("--valid-src and --valid-tgt go together");
    if (o.valid_bleu && !o.valid_src) cli_usage_error("--valid-bleu needs --valid-src and --valid-tgt");
    if (o.patience && !o.valid_src) cli_usage_error("--patience needs --valid-src and --valid-tgt");
    int longest = o.config.max_positions - 1;
    if (o.max_length > longest) {
        if (given[O_MAX_LENGTH])
            cli_usage_error("--max-length %d: the model takes at most %d target tokens "
                            "(--max-positions %d)", o.max_length, longest, o.config.max_positions);
        o.max_length = longest;
    }
    openblas_set_num_threads(o.threads);
    int rc = run_training(&o);
    for (int i = 0; i < O_COUNT; i++) free(stored_copies[i]);
    return rc;
}
