/* train - trains a Transformer with the paper's recipe.
 *
 *   train --preset small -m VOCAB --src train.de --tgt train.en -o m.safetensors
 *   train --resume -o m.safetensors          continue from the last checkpoint
 *   train --init m.safetensors --src dom.de --tgt dom.en -o dom.safetensors   fine-tune
 *   train --init-only --preset tiny -m VOCAB -o m.safetensors
 *   train average -o avg.safetensors m.safetensors.ckpt-*
 *   train quantize --compute-type int8 -i m.safetensors -o m.int8.safetensors
 *   train shortlist -m m.safetensors --src train.de --tgt train.en -o m.shortlist
 *   train import opus-mt-en-fr/ -o en-fr.safetensors
 *
 * The program parses options and hands them to a training run (lib/train:
 * tfm_run), which holds the policy: the options stored in every checkpoint
 * and taken back on --resume, validation, checkpoints, early stopping and
 * averaging, and its log.  What is left here is printing: progress on
 * stderr, and a clean stop on SIGINT or SIGTERM (the handler sets a flag
 * the run polls; a checkpoint is saved at the next update's end).
 *
 * Started by mpirun or srun, the program is one rank of a data-parallel
 * run (tfm_dist): rank 0 prints and writes as a lone process does; the
 * other ranks print errors only, as "train: rank N: ...".  There SIGUSR1,
 * which mpirun forwards to every rank, also asks for a clean stop (mpirun
 * ends the ranks at once on SIGINT or SIGTERM). */
#include <getopt.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

/* TFM_DIST_TIMEOUT as text, for the help. */
#define TEXT_OF(x) #x
#define DIST_TIMEOUT_TEXT_OF(x) TEXT_OF(x)
#define DIST_TIMEOUT_TEXT DIST_TIMEOUT_TEXT_OF(TFM_DIST_TIMEOUT)

/* The help; the %s are the library's defaults (format_usage). */
static const char usage_format[] =
    "Usage: train [OPTION]... --src FILE --tgt FILE -m VOCAB -o MODEL\n"
    "       train --resume[=CHECKPOINT] [OPTION]... -o MODEL\n"
    "       train --init=MODEL [OPTION]... --src FILE --tgt FILE -o OUTPUT\n"
    "       train --init-only [OPTION]... -m VOCAB -o MODEL\n"
    "       train average -o MODEL FILE...\n"
    "       train quantize --compute-type=int8|bf16 --input=MODEL -o OUTPUT\n"
    "       train pack --input=MODEL -o OUTPUT\n"
    "       train shortlist -m MODEL --src FILE --tgt FILE [--text] [--per-source=N]\n"
    "       train import DIR -o MODEL\n"
    "                       [--frequent=N] -o SHORTLIST\n"
    "Trains a Transformer (\"Attention Is All You Need\") on a parallel corpus: line i\n"
    "of --tgt is the translation of line i of --src.  The files hold id lines (from\n"
    "'tokenize') or text, which is tokenized with the vocabulary.  MODEL is written\n"
    "atomically at the end; checkpoints MODEL.ckpt-STEP on the way.\n"
    "\n"
    "Model (fixed once training starts):\n"
    "      --preset=NAME          base, big, small, small-cpu (3+1 layers, pre-norm:\n"
    "                             decodes faster) or tiny (default %s)\n"
    "      --d-model=N, --d-ff=N, --heads=N, --layers=N (encoder and decoder),\n"
    "      --encoder-layers=N, --decoder-layers=N, --max-positions=N\n"
    "                             override the preset\n"
    "      --pre-norm             x + Sublayer(LayerNorm(x)) instead of the paper's post-norm\n"
    "      --relative-positions=K relative position representations in every\n"
    "                             self-attention, distances clipped at K (Shaw et al.),\n"
    "                             instead of absolute positions (" TFM_AUTO_RELATIVE_POSITIONS "; 0: the paper's\n"
    "                             sinusoids instead)\n"
    "      --learned-positions    learned position embeddings (instead of relative\n"
    "                             positions, unless --relative-positions is given)\n"
    "      --absolute-positions   absolute positions besides the relative ones\n"
    "                             (sinusoids, or learned with --learned-positions)\n"
    "      --attention-window=R   self-attention restricted to R neighbours (0: full)\n"
    "      --dropout=P            on sublayer outputs and embeddings (the preset's;\n"
    "                             %s: %g)\n"
    "      --attention-dropout=P  on attention weights (%g)\n"
    "      --activation-dropout=P on the FFN's activations after the ReLU (%g)\n"
    "      --label-smoothing=E    (%g)\n"
    "      --seed=N               seed of the weights, the batches and dropout (%s)\n"
    "\n"
    "Data:\n"
    "  -m, --vocab=VOCAB          the vocabulary (from 'tokenize learn') or a model file\n"
    "                             (--model=VOCAB is the same, as in tokenize)\n"
    "      --src-vocab=VOCAB, --tgt-vocab=VOCAB\n"
    "                             a vocabulary per side instead (from 'tokenize learn'\n"
    "                             on each side): the decoder's input and output\n"
    "                             embeddings are then one matrix, the encoder's its own\n"
    "      --vocab-size=N         without a vocabulary: id files with ids below N\n"
    "      --src=FILE, --tgt=FILE the training data\n"
    "      --input-format=F       'auto' (default: ids when the first 4096 lines are\n"
    "                             id lines), 'ids' or 'text'\n"
    "      --max-length=N         skip pairs with more than N tokens on a side (%s)\n"
    "      --no-eos               do not end each source with </s> (then give encode\n"
    "                             --no-eos too; by default both add it)\n"
    "      --valid-src=FILE, --valid-tgt=FILE  held-out data for validation\n"
    "\n"
    "Training:\n"
    "      --batch-tokens=N       tokens per batch, padding included, on each side (%s)\n"
    "      --accum=N              batches per update (gradient accumulation) (%s)\n"
    "      --sort-window=N        sentences are sorted by length within windows of N\n"
    "                             batches (%s)\n"
    "      --schedule=S           the learning rate's course: 'linear' rises over the\n"
    "                             warm-up, then falls to 0 at the end of the budget;\n"
    "                             'wsd' holds the peak and falls over the last 20%%;\n"
    "                             'constant' holds it; 'noam' (the paper's) falls as\n"
    "                             1/sqrt(step).  Default 'auto': linear with a budget\n"
    "                             (--max-steps, --max-time or --max-epochs), noam\n"
    "                             without\n"
    "      --lr-factor=F          the peak, at the warm-up's end, is\n"
    "                             F * (d_model * warmup)^-0.5 (auto: " TFM_AUTO_LR_FACTOR ";\n"
    "                             noam: " TFM_PAPER_LR_FACTOR ", the paper's)\n"
    "      --warmup=N|P%%[,N]      warm-up updates, or a share of the run's updates,\n"
    "                             estimated under --max-time from its pace, and with\n"
    "                             ,N at least N of them (at most half) (auto: %s;\n"
    "                             noam: " TFM_PAPER_WARMUP ", the paper's)\n"
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
    "      --valid-every=N        validate every N updates (%s)\n"
    "      --valid-bleu           also decode the validation sources greedily and\n"
    "                             score BLEU and exact matches\n"
    "      --patience=N           stop when N validations in a row did not improve (0: off);\n"
    "                             the best model so far is kept as MODEL.best\n"
    "      --save-every=N         save a checkpoint every N updates (%s; 0: at the end)\n"
    "      --keep=N               keep the newest N checkpoints (%s)\n"
    "      --checkpoint-dir=DIR   write checkpoints as DIR/ckpt-STEP\n"
    "      --resume[=CHECKPOINT]  continue from CHECKPOINT (default: the newest), with\n"
    "                             its options unless given again\n"
    "      --average-last=N       write as MODEL the average of the last N checkpoints\n"
    "  -o, --output=MODEL         the model file to write\n"
    "      --init-only            write a freshly initialised model and stop\n"
    "      --init=MODEL           fine-tune: start from the weights of MODEL (a model\n"
    "                             or a checkpoint) with a new optimiser and schedule;\n"
    "                             its vocabulary and shape stay (dropout and label\n"
    "                             smoothing may change), the training options are\n"
    "                             this run's\n"
    "\n"
    "Output:\n"
    "      --log=FILE             a TSV line per update and per validation\n"
    "      --progress=SECONDS     progress every SECONDS (terminal: 0.5, else 10)\n"
    "      --debug-inject-nan=STEP[:COUNT]\n"
    "                             a testing aid: poison the gradients of COUNT (1)\n"
    "                             updates from update STEP\n"
    CLI_COMMON_HELP
    "\n"
    "An update whose loss or gradient is NaN or infinite is skipped with a warning;\n"
    "after %s in a row training stops, keeping the last good checkpoint.  SIGINT or\n"
    "SIGTERM saves a checkpoint at the end of the update under way, then stops.\n"
    "\n"
    "Across processes: 'mpirun -np N train ...' (or srun --mpi=pmix) trains one model\n"
    "on N processes, each taking --accum batches of every update (N x --accum in\n"
    "all, so N processes equal one with --accum N) with --threads threads; rank 0\n"
    "writes the model, checkpoints and log, the others print errors only.  Every\n"
    "process must read the same data files and the same output folder.  mpirun\n"
    "binds each process to one core: for --threads N > 1 give it --bind-to none (or\n"
    "--map-by slot:PE=N).  SIGUSR1 to mpirun asks for the clean stop.\n"
    "      --peer-timeout=T       a process that waits longer than T (seconds, or 1h30m\n"
    "                             style) for another in an exchange fails, naming\n"
    "                             the ranks and hosts that did not answer (a machine\n"
    "                             or link down); at least 10 times the longest update\n"
    "                             so far.  T must outlast rank 0's validations and\n"
    "                             checkpoints (default " DIST_TIMEOUT_TEXT "; 0: wait for ever).\n"
    "                             mpirun --output-filename DIR keeps each rank's\n"
    "                             messages on its own host too, past a cut link.\n"
    "Exit status: 0 on success, 1 on failure, 2 on a usage error.\n"
    "Example:\n"
    "  train --preset small -m de-en.vocab --src train.de --tgt train.en \\\n"
    "        --valid-src dev.de --valid-tgt dev.en --valid-bleu --max-time 2h -o de-en.st\n";

static const char import_usage_text[] =
    "Usage: train import DIR -o MODEL\n"
    "Turns the OPUS-MT (Marian) model directory DIR (its decoder.yml, the model and\n"
    "vocabularies it names, source.spm and target.spm), or the Hugging Face\n"
    "conversion of one (config.json, model.safetensors, vocab.json, the .spm files),\n"
    "into MODEL, a model file of this toolkit that holds the weights, the\n"
    "architecture and both SentencePiece models: tokenize, encode, decode, score and\n"
    "inspect-attn then need no other file.\n"
    "\n"
    "  -o, --output=MODEL         the model file to write (atomically)\n"
    "  -q, --quiet / -v, --verbose / -h, --help / -V, --version\n";

static const char average_usage_text[] =
    "Usage: train average -o MODEL FILE...\n"
    "Writes the element-wise average of the weights of the FILEs (model files or\n"
    "checkpoints of one training run) as MODEL, atomically.\n";

static const char quantize_usage_text[] =
    "Usage: train quantize --compute-type=TYPE -i MODEL -o OUTPUT\n"
    "Writes MODEL with its matrices (the embeddings and every linear layer's weight)\n"
    "in TYPE as OUTPUT, atomically: int8 (one float scale per output row; about a\n"
    "quarter of the float32 file) or bf16 (about half).  'encode' and 'decode' then\n"
    "compute in TYPE by default, from the file's values, without quantizing at load.\n";

static const char pack_usage_text[] =
    "Usage: train pack -i MODEL -o OUTPUT\n"
    "Writes MODEL as OUTPUT, atomically, with the panels the matrix kernels of\n"
    "'encode' and 'decode' read (in MODEL's type: float32, int8 or bf16) beside its\n"
    "matrices.  Those programs then read them in place from the file instead of\n"
    "packing the weights when they start: a model ready in milliseconds, its pages\n"
    "shared by every process that runs it.  The file is about twice as large; every\n"
    "other program reads it as MODEL.  Pack last: quantize first, then pack.\n";

static const char shortlist_usage_format[] =
    "Usage: train shortlist -m MODEL --src FILE --tgt FILE -o SHORTLIST\n"
    "Learns a lexical shortlist for 'decode --shortlist' from a parallel corpus (line\n"
    "i of --tgt the translation of line i of --src, id lines for MODEL's vocabularies,\n"
    "or text with --text): for each source piece, the target pieces most often in the\n"
    "translations of the sentences holding it (by p(target | source) from their\n"
    "co-occurrence), and the most frequent target pieces.  Writes SHORTLIST\n"
    "atomically (safetensors; tfm-formats(5)).\n"
    "\n"
    "  -m, --model=MODEL          the model the shortlist is for (its vocabularies)\n"
    "      --src=FILE             source lines\n"
    "      --tgt=FILE             target lines\n"
    "      --text                 the files hold text, encoded with MODEL's vocabularies\n"
    "      --per-source=N         candidates kept per source piece (default %d)\n"
    "      --frequent=N           the most frequent target pieces, candidates of every\n"
    "                             sentence (default %d)\n"
    "  -o, --output=SHORTLIST     the file to write\n"
    "  -q, --quiet                print errors only\n"
    "  -v, --verbose              print more about what is done\n"
    "  -h, --help                 display this help and exit\n"
    "  -V, --version              output version information and exit\n";

/* ---- average, quantize and shortlist ---------------------------------------------------------- */

/* Counts every pair of the files for the shortlist; fails naming the
 * file and line of a bad one. */
static void count_pairs(tfm_shortlist_counter *counter, const char *src, const char *tgt,
                        tfm_model *model, bool text)
{
    const tfm_config *c = &model->config;
    tfm_error err;
    tfm_pair_params pp = tfm_pair_default_params();
    pp.src_vocab_size = c->src_vocab_size;
    pp.tgt_vocab_size = c->tgt_vocab_size;
    pp.source_eos = false;
    if (text && tfm_model_text_encoders(model, &pp.bpe, &pp.src_bpe, &err) != TFM_OK)
        cli_fail(NULL, 0, "--text: %s", err.msg);
    int src_fd = cli_open_input(src), tgt_fd = cli_open_input(tgt);
    tfm_line_reader *src_lines = tfm_lines_create(src_fd), *tgt_lines = tfm_lines_create(tgt_fd);
    tfm_pair_reader *pr = NULL;
    if (!src_lines || !tgt_lines) cli_fail(NULL, 0, "out of memory");
    if (tfm_pair_reader_create(src_lines, tgt_lines, &pp, &pr, &err) != TFM_OK)
        cli_fail(NULL, 0, "%s", err.msg);
    tfm_pair pair;
    tfm_pair_init(&pair);
    tfm_status st;
    while ((st = tfm_pair_reader_next(pr, &pair, &err)) == TFM_OK)
        if (tfm_shortlist_count(counter, pair.src.ids.data, pair.src.ids.len, pair.tgt.ids.data,
                                pair.tgt.ids.len, &err) != TFM_OK)
            cli_fail(src, pair.line, "%s", err.msg);
    if (st != TFM_EOF) {
        const tfm_pair_failure *f = tfm_pair_reader_failure(pr);
        const char *file = f->side == TFM_SOURCE ? src : tgt;
        if (f->mismatch)
            cli_fail(file, 0, "ends before %s: the files must have as many lines",
                     f->side == TFM_SOURCE ? tgt : src);
        cli_fail(file, f->line, "%s", err.msg);
    }
    tfm_pair_free(&pair);
    tfm_pair_reader_free(pr);
    tfm_lines_free(src_lines);
    tfm_lines_free(tgt_lines);
    cli_close_input(src_fd);
    cli_close_input(tgt_fd);
    tfm_bpe_free(pp.bpe);
    tfm_bpe_free(pp.src_bpe);
}

static int run_shortlist(int argc, char **argv)
{
    enum { OPT_SRC = 256, OPT_TGT, OPT_TEXT, OPT_PER_SOURCE, OPT_FREQUENT };
    static const struct option longs[] = {
        {"model", required_argument, NULL, 'm'},     {"output", required_argument, NULL, 'o'},
        {"src", required_argument, NULL, OPT_SRC},   {"tgt", required_argument, NULL, OPT_TGT},
        {"text", no_argument, NULL, OPT_TEXT},
        {"per-source", required_argument, NULL, OPT_PER_SOURCE},
        {"frequent", required_argument, NULL, OPT_FREQUENT},
        CLI_COMMON_LONG_OPTIONS,                     {NULL, 0, NULL, 0},
    };
    tfm_shortlist_params p = tfm_shortlist_default_params();
    char usage[sizeof shortlist_usage_format + 32];
    snprintf(usage, sizeof usage, shortlist_usage_format, p.per_source, p.frequent);
    const char *model_path = NULL, *out = NULL, *src = NULL, *tgt = NULL;
    bool text = false;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "m:o:qvhV", longs, NULL)) != -1) {
        if (c == 'm') model_path = optarg;
        else if (c == 'o') out = optarg;
        else if (c == OPT_SRC) src = optarg;
        else if (c == OPT_TGT) tgt = optarg;
        else if (c == OPT_TEXT) text = true;
        else if (c == OPT_PER_SOURCE)
            p.per_source = (int)cli_parse_int("--per-source", optarg, 1, 1 << 20);
        else if (c == OPT_FREQUENT) p.frequent = (int)cli_parse_int("--frequent", optarg, 0, 1 << 24);
        else cli_common_option(c, usage);
    }
    if (!model_path || !src || !tgt || !out)
        cli_usage_error("shortlist: -m MODEL, --src FILE, --tgt FILE and -o SHORTLIST are "
                        "required");
    if (optind < argc) cli_usage_error("shortlist: unexpected argument '%s'", argv[optind]);
    tfm_model *model = cli_load_model(model_path);
    tfm_error err;
    tfm_shortlist_counter *counter;
    if (tfm_shortlist_counter_create(model->config.src_vocab_size, model->config.tgt_vocab_size,
                                     &counter, &err) != TFM_OK)
        cli_fail(NULL, 0, "%s", err.msg);
    count_pairs(counter, src, tgt, model, text);
    tfm_shortlist *sl;
    if (tfm_shortlist_finish(counter, &p, &sl, &err) != TFM_OK ||
        tfm_shortlist_save(sl, out, &err) != TFM_OK)
        cli_fail(NULL, 0, "%s", err.msg);
    cli_info("%s: the %d most frequent target pieces and at most %d per source piece",
             out, tfm_shortlist_frequent(sl), tfm_shortlist_per_source(sl));
    tfm_shortlist_free(sl);
    tfm_shortlist_counter_free(counter);
    tfm_model_free(model);
    return CLI_EXIT_OK;
}


static int run_quantize(int argc, char **argv)
{
    static const struct option longs[] = {
        {"compute-type", required_argument, NULL, 't'}, {"input", required_argument, NULL, 'i'},
        {"output", required_argument, NULL, 'o'},       CLI_COMMON_LONG_OPTIONS,
        {NULL, 0, NULL, 0},
    };
    const char *in = NULL, *out = NULL, *type_name = NULL;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "i:o:qvhV", longs, NULL)) != -1) {
        if (c == 'i') in = optarg;
        else if (c == 'o') out = optarg;
        else if (c == 't') type_name = optarg;
        else cli_common_option(c, quantize_usage_text);
    }
    tfm_compute_type type;
    if (!type_name) cli_usage_error("quantize: --compute-type int8 or bf16 is required");
    if (!tfm_compute_type_parse(type_name, &type) ||
        (type != TFM_COMPUTE_INT8 && type != TFM_COMPUTE_BF16))
        cli_usage_error("quantize: --compute-type: '%s' is not one of: int8, bf16", type_name);
    if (!in || !out) cli_usage_error("quantize: -i MODEL and -o OUTPUT are required");
    if (optind < argc) cli_usage_error("quantize: unexpected argument '%s'", argv[optind]);
    tfm_error err;
    if (tfm_model_quantize_file(in, out, type, &err) != TFM_OK) cli_fail(NULL, 0, "%s", err.msg);
    cli_info("%s: %s quantized to %s", out, in, tfm_compute_type_name(type));
    return CLI_EXIT_OK;
}

static int run_pack(int argc, char **argv)
{
    static const struct option longs[] = {
        {"input", required_argument, NULL, 'i'}, {"output", required_argument, NULL, 'o'},
        CLI_COMMON_LONG_OPTIONS, {NULL, 0, NULL, 0},
    };
    const char *in = NULL, *out = NULL;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "i:o:qvhV", longs, NULL)) != -1) {
        if (c == 'i') in = optarg;
        else if (c == 'o') out = optarg;
        else cli_common_option(c, pack_usage_text);
    }
    if (!in || !out) cli_usage_error("pack: -i MODEL and -o OUTPUT are required");
    if (optind < argc) cli_usage_error("pack: unexpected argument '%s'", argv[optind]);
    tfm_error err;
    if (tfm_model_pack_file(in, out, &err) != TFM_OK) cli_fail(NULL, 0, "%s", err.msg);
    cli_info("%s: %s packed", out, in);
    return CLI_EXIT_OK;
}

/* The options of a subcommand that takes -o FILE and the common ones alone:
 * the output (required: a usage error naming what without it); optind is
 * then at the operands. */
static const char *output_option(int argc, char **argv, const char *usage, const char *what)
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
        else cli_common_option(c, usage);
    }
    if (!out) cli_usage_error("%s: -o MODEL is required", what);
    return out;
}

static int run_import(int argc, char **argv)
{
    const char *out = output_option(argc, argv, import_usage_text, "import");
    if (optind >= argc) cli_usage_error("import: give the model's directory");
    if (optind + 1 < argc) cli_usage_error("import: unexpected argument '%s'", argv[optind + 1]);
    const char *dir = argv[optind];
    tfm_error err;
    tfm_model *m;
    if (tfm_model_import(dir, &m, &err) != TFM_OK) cli_fail(NULL, 0, "%s", err.msg);
    tfm_buf what;
    tfm_buf_init(&what);
    tfm_config_describe(&m->config, &what);
    tfm_status st = tfm_model_save(m, out, NULL, &err);
    tfm_model_free(m);
    if (st != TFM_OK) {
        tfm_buf_free(&what);
        cli_fail(out, 0, "%s", err.msg);
    }
    cli_info("%s: imported %s (%s)", out, dir, what.data ? what.data : "");
    tfm_buf_free(&what);
    return CLI_EXIT_OK;
}

static int run_average(int argc, char **argv)
{
    const char *out = output_option(argc, argv, average_usage_text, "average");
    if (optind >= argc) cli_usage_error("average: no files to average");
    tfm_error err;
    if (tfm_average_write((const char *const *)argv + optind, argc - optind, out, NULL, &err))
        cli_fail(NULL, 0, "%s", err.msg);
    if (cli_verbosity >= 1)
        fprintf(stderr, "train: averaged %d models into %s\n", argc - optind, out);
    return CLI_EXIT_OK;
}

/* The help text with the library's defaults in it, so the two cannot differ. */
static void format_usage(char *out, size_t size)
{
    static const tfm_run_option shown[] = {
        TFM_OPT_SEED, TFM_OPT_MAX_LENGTH, TFM_OPT_BATCH_TOKENS, TFM_OPT_ACCUM,
        TFM_OPT_SORT_WINDOW, TFM_OPT_VALID_EVERY, TFM_OPT_SAVE_EVERY, TFM_OPT_KEEP};
    enum { N_SHOWN = sizeof shown / sizeof shown[0] };
    char d[N_SHOWN + 1][32];
    for (int i = 0; i < N_SHOWN; i++) tfm_run_option_default(shown[i], d[i], sizeof d[i]);
    snprintf(d[N_SHOWN], sizeof d[N_SHOWN], "%d", tfm_train_default_params().max_bad_steps);
    char preset[32];
    tfm_run_option_default(TFM_OPT_PRESET, preset, sizeof preset);
    tfm_config c;
    tfm_error err;
    if (tfm_config_preset(preset, &c, &err) != TFM_OK) c = (tfm_config){0};
    snprintf(out, size, usage_format, preset, preset, (double)c.dropout,
             (double)c.attention_dropout, (double)c.activation_dropout, (double)c.label_smoothing,
             d[0], d[1], d[2], d[3], d[4], TFM_AUTO_WARMUP, d[5], d[6], d[7], d[8]);
}

/* --peer-timeout: the program's own, not the run's (it sets the wait of
 * tfm_dist_set_timeout), so not stored in checkpoints. */
enum { OPT_PEER_TIMEOUT = 1000 };

/* Fills given[] with the options' texts: a flag's is "yes", --resume's
 * without a value ""; *peer_timeout gets --peer-timeout's text (or stays). */
static void parse_command_line(int argc, char **argv, const char *usage, const char **given,
                               const char **peer_timeout)
{
    static const struct option common[] = {CLI_COMMON_LONG_OPTIONS,
                                           {"model", required_argument, NULL, 'm'},
                                           {"peer-timeout", required_argument, NULL,
                                            OPT_PEER_TIMEOUT}};
    enum { N = TFM_RUN_OPTION_COUNT, N_COMMON = sizeof common / sizeof common[0] };
    struct option longs[N + N_COMMON + 1];
    for (int i = 0; i < N; i++)
        longs[i] = (struct option){tfm_run_options[i].name, tfm_run_options[i].arg, NULL, 256 + i};
    for (int i = 0; i < N_COMMON; i++) longs[N + i] = common[i];
    longs[N + N_COMMON] = (struct option){NULL, 0, NULL, 0};
    int c;
    while ((c = getopt_long(argc, argv, "m:o:qvhV", longs, NULL)) != -1) {
        int id;
        if (c == 'm') id = TFM_OPT_VOCAB;
        else if (c == 'o') id = TFM_OPT_OUTPUT;
        else if (c >= 256 && c < 256 + N) id = c - 256;
        else if (c == OPT_PEER_TIMEOUT) {
            *peer_timeout = optarg;
            continue;
        } else {
            cli_common_option(c, usage);
            continue;
        }
        given[id] = tfm_run_options[id].arg == no_argument ? "yes" : optarg ? optarg : "";
    }
    if (optind < argc) cli_usage_error("unexpected argument '%s'", argv[optind]);
}

/* ---- signals -------------------------------------------------------------------------------- */

/* The signal that asked the run to stop: a signal handler's one way out. */
static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
    stop_signal = sig;
}

static void install_handlers(bool across_processes)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    /* A second signal acts at once: the default action is back after the first. */
    sa.sa_flags = SA_RESETHAND;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    /* mpirun kills its ranks a second after it forwards SIGTERM, too soon
     * for a checkpoint; it forwards SIGUSR1 and lets them be. */
    if (across_processes) sigaction(SIGUSR1, &sa, NULL);
}

/* ---- printing what the run reports ----------------------------------------------------------- */

typedef struct printer {
    const tfm_run *run;
    double every;              /* --progress */
    bool tty;
    bool line_shown;           /* an updating line is on the terminal */
    tfm_run_progress progress;
    tfm_buf text;
} printer;

/* Clears the updating line before another message. */
static void progress_clear(printer *p)
{
    if (p->line_shown) {
        fputs("\r\033[K", stderr);
        p->line_shown = false;
    }
}

/* The progress line: rewritten in place on a terminal, else a line each. */
static void report(printer *p, const tfm_run_event *ev)
{
    tfm_buf_clear(&p->text);
    if (tfm_run_progress_line(&p->progress, p->run, ev, &p->text) != TFM_OK)
        cli_fail(NULL, 0, "out of memory");
    if (cli_verbosity < 1) return;
    if (p->tty) {
        fprintf(stderr, "\r%s\033[K", p->text.data);
        p->line_shown = true;
    } else {
        fprintf(stderr, "%s: %s\n", cli_program(), p->text.data);
    }
    fflush(stderr);
}

/* mpirun binds each rank to one core by default (with two ranks or fewer):
 * more threads than that would share it. */
static void warn_of_binding(const printer *p)
{
    cpu_set_t set;
    int threads = tfm_run_params_of(p->run)->threads;
    if (sched_getaffinity(0, sizeof set, &set) != 0 || CPU_COUNT(&set) >= threads) return;
    cli_warn(NULL, 0,
             "--threads %d, but this process may run on %d CPU%s: give mpirun '--map-by "
             "slot:PE=%d' (or '--bind-to none')",
             threads, CPU_COUNT(&set), CPU_COUNT(&set) == 1 ? "" : "s", threads);
}

/* Prints each line of the event's text as "train: LINE". */
static void print_event(printer *p, const tfm_run_event *ev)
{
    tfm_buf_clear(&p->text);
    if (tfm_run_event_text(p->run, ev, &p->text) != TFM_OK) cli_fail(NULL, 0, "out of memory");
    for (const char *line = p->text.data, *end; line && *line; line = end + 1) {
        end = strchr(line, '\n');
        fprintf(stderr, "%s: %.*s\n", cli_program(), (int)(end - line), line);
    }
}

static void on_event(void *ctx, const tfm_run_event *ev)
{
    printer *p = ctx;
    if (ev->kind == TFM_RUN_STEP) {
        tfm_run_progress_add(&p->progress, ev);
        if (ev->time - p->progress.last >= p->every) report(p, ev);
        return;
    }
    progress_clear(p);
    if (ev->kind == TFM_RUN_WARNING) cli_warn(ev->file, 0, "%s", ev->text);
    else if (cli_verbosity >= (ev->kind == TFM_RUN_CHECKPOINT ? 2 : 1)) print_event(p, ev);
    if (ev->kind == TFM_RUN_START) {
        if (ev->ranks > 1) warn_of_binding(p);
        p->tty = isatty(STDERR_FILENO) && cli_verbosity >= 1;
        p->progress = (tfm_run_progress){.last = ev->time};
        install_handlers(ev->ranks > 1);
    }
}

/* ---- main -------------------------------------------------------------------------------------- */

int main(int argc, char **argv)
{
    cli_init("train", argv);
    /* train writes no output a reader could stop taking but its --log, whose
     * loss must not end a training run (the run gives the log up): a write to a pipe whose
     * reader went away fails with EPIPE instead of killing the process. */
    signal(SIGPIPE, SIG_IGN);
    if (argc > 1 && strcmp(argv[1], "average") == 0) return run_average(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "import") == 0) return run_import(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "quantize") == 0) return run_quantize(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "pack") == 0) return run_pack(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "shortlist") == 0) return run_shortlist(argc - 1, argv + 1);
    char usage[sizeof usage_format + 20 * 32];
    format_usage(usage, sizeof usage);
    const char *given[TFM_RUN_OPTION_COUNT] = {0};
    const char *peer_timeout = NULL;
    parse_command_line(argc, argv, usage, given, &peer_timeout);
    printer p = {.every = isatty(STDERR_FILENO) ? 0.5 : 10.0};
    tfm_buf_init(&p.text);
    if (given[TFM_OPT_PROGRESS]) p.every = cli_parse_double("--progress", given[TFM_OPT_PROGRESS], 0.01, 1e9);

    /* One rank of several when mpirun or srun started us; else alone, and
     * no MPI call is made. */
    tfm_dist *dist;
    tfm_error err;
    double peer_wait = TFM_DIST_TIMEOUT;
    if (peer_timeout && tfm_parse_duration("--peer-timeout", peer_timeout, &peer_wait, &err))
        cli_usage_error("%s", err.msg);
    if (tfm_dist_create(&argc, &argv, &dist, &err) != TFM_OK) cli_fail(NULL, 0, "%s", err.msg);
    tfm_dist_set_timeout(dist, peer_wait);
    char rank_name[32];
    if (tfm_dist_rank(dist) > 0) {
        snprintf(rank_name, sizeof rank_name, "train: rank %d", tfm_dist_rank(dist));
        cli_set_program(rank_name);
        cli_verbosity = 0;
    }

    tfm_run *run;
    tfm_status st = tfm_run_create(given, on_event, &p, &run, &err);
    if (st == TFM_ERR_ARG) cli_usage_error("%s", err.msg);
    if (st != TFM_OK) cli_fail(NULL, 0, "%s", err.msg);
    p.run = run;
    tfm_run_set_dist(run, dist);
    const tfm_run_params *o = tfm_run_params_of(run);
    if (o->init_only) {
        if (tfm_run_init_model(run, &err) != TFM_OK) cli_fail(NULL, 0, "%s", err.msg);
        if (cli_verbosity >= 1)
            fprintf(stderr, "train: wrote an initialised model of %zu parameters to %s\n",
                    tfm_params_count(&o->model), o->output);
        tfm_run_free(run);
        tfm_dist_free(dist);
        tfm_buf_free(&p.text);
        return CLI_EXIT_OK;
    }
    cli_warn_unknown_isa();
    char behind[400];
    if (cli_verbosity >= 1 && tfm_blas_kernels_behind(behind, sizeof behind))
        cli_warn(NULL, 0, "%s", behind);
    tfm_run_set_stop_flag(run, &stop_signal);
    tfm_run_end why;
    if (tfm_run_train(run, &why, &err) != TFM_OK) {
        progress_clear(&p);
        cli_fail(NULL, 0, "%s", err.msg);
    }
    tfm_run_free(run);
    tfm_buf_free(&p.text);
    /* Only on success: a rank that fails exits without leaving the group,
     * and the launcher then ends the others. */
    tfm_dist_free(dist);
    /* End as the signal would have ended us, so the caller sees it (not
     * SIGUSR1, a request of mpirun's user, nor another rank's signal). */
    int sig = stop_signal;
    if (why == TFM_RUN_STOPPED && sig != 0 && sig != SIGUSR1) {
        signal(sig, SIG_DFL);
        raise(sig);
    }
    return CLI_EXIT_OK;
}
