/* inspect-attn - see what the model attends to.
 *
 *   inspect-attn -m MODEL --src SRC --tgt TGT [--format FORMAT]   pairs
 *   inspect-attn -m MODEL [FILE]                                  sources alone
 *
 * Reads sentence pairs (id lines, or text lines with --text), runs the
 * model's teacher-forced forward pass on each without dropout, and writes
 * the attention weights of one kind (cross, encoder self, decoder self) of
 * the chosen layers and heads: as .npy records, TSV tables, an SVG heatmap,
 * a terminal heatmap, or word alignments.  Given sources alone, it first
 * translates them (greedy search, or beam search with --beam) and shows the
 * attention that produced each translation.
 *
 * The program parses options, reads pairs and writes: the pairs come from
 * tfm_pair_reader (lib/text), each batch's translation, forward pass and
 * records (labels, cropping, the picture, table or alignment) from
 * tfm_inspector (lib/view). */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "files.h"

/* A batch holds at most the inspector's max_pairs sentences (16), or about
 * this many tokens. */
#define BATCH_TOKENS 4096

/* The help; the %-conversions are the library's defaults (format_usage). */
static const char usage_format[] =
    "Usage: inspect-attn -m MODEL [OPTION]... --src SRC --tgt TGT\n"
    "       inspect-attn -m MODEL [OPTION]... [SRC]\n"
    "Shows what a model attends to: the attention weights of sentence pairs, one\n"
    "record per pair, in order.  With SRC alone ('-' or none: standard input) each\n"
    "source is translated first and the attention that produced the translation\n"
    "is shown.  Lines are token ids or text, as most of each file's first lines\n"
    "are; with --text, text in the model's vocabulary.\n"
    "\n"
    "Input:\n"
    "  -m, --model=MODEL          the model file (safetensors)\n"
    "      --src=FILE             source lines\n"
    "      --tgt=FILE             target lines, one per source line (else translate)\n"
    "      --text                 lines are text, tokenized with the model's vocabulary\n"
    "                             (without it: as each file's first lines show)\n"
    "      --no-eos               do not end each source with </s> (the default for a\n"
    "                             model trained with 'train --no-eos', which says so)\n"
    "  -b, --beam=K               translate sources alone with beam search of K\n"
    "                             (default %d; 1 is greedy search)\n"
    "      --sentence=N           only the pair on line N (1-based)\n"
    "\n"
    "What to show:\n"
    "      --kind=KIND            'cross' (encoder-decoder attention), 'self'\n"
    "                             (encoder self-attention) or 'dec-self' (decoder\n"
    "                             self-attention, causal); default '%s'\n"
    "      --layer=N              a layer, 0-based as in the model's tensor names,\n"
    "                             'last' or 'all' (default '%s')\n"
    "      --head=N               a head (0-based), 'all', or 'mean', the mean of the\n"
    "                             heads (default '%s'; of a model trained with guided\n"
    "                             alignment, an imported Marian model: its alignment\n"
    "                             layer and head 0, as decode --alignment reads)\n"
    "\n"
    "Output:\n"
    "  -f, --format=FORMAT        one of these (default '%s'):\n"
    "                             'term': a heatmap for the terminal;\n"
    "                             'svg': an SVG heatmap of one sentence (--sentence,\n"
    "                             default 1), a panel per layer and head;\n"
    "                             'tsv': a table per layer and head, labels in the first\n"
    "                             row and column;\n"
    "                             'npy': a float32 record (layers, heads, queries, keys)\n"
    "                             per pair;\n"
    "                             'align': hard alignments 'i-j' (source-target, 0-based,\n"
    "                             fast_align's form), a line per pair;\n"
    "                             'soft': the target pieces, ' ||| ', and each target\n"
    "                             token's distribution over the source (Marian's form)\n"
    "  -o, --output=FILE          write to FILE (atomically) instead of standard output\n"
    "      --tokens=FILE          npy: write each record's labels to FILE, a line per\n"
    "                             record: query pieces, a tab, key pieces\n"
    "      --max-tokens=N         svg, term: draw at most N queries and N keys, with a\n"
    "                             note (default %d; 0: all)\n"
    "      --label-width=N        svg, term: shorten longer labels to N characters with\n"
    "                             an ellipsis (default %d; 0: never)\n"
    "      --color=WHEN           term: colours 'auto' (default: on a terminal, unless\n"
    "                             NO_COLOR is set), 'always' or 'never'\n"
    CLI_COMMON_HELP
    "\n"
    "Queries and keys: cross-attention has a query per target token and one for the\n"
    "final </s> (each labelled by the token it predicts) over the source tokens\n"
    "(</s> included); self: source over source; dec-self: the decoder's inputs\n"
    "(<s> and the target) over themselves.  The weights are those the model computes\n"
    "(no dropout): every row sums to 1.  align and soft use the mean of the chosen\n"
    "layers and heads; align leaves out the final </s> and target tokens that attend\n"
    "mostly to the source's </s>.\n"
    "Exit status: 0 on success, 1 on failure, 2 on a usage error.\n"
    "Examples:\n"
    "  inspect-attn -m m.safetensors --text --src de.txt --tgt en.txt --sentence 3\n"
    "  inspect-attn -m m.safetensors --text -f svg --layer all --head all de.txt > a.svg\n"
    "  inspect-attn -m m.safetensors --src de.ids --tgt en.ids -f align > de-en.align\n";

enum {
    OPT_SRC = 256, OPT_TGT, OPT_TEXT, OPT_NO_EOS, OPT_SENTENCE, OPT_KIND, OPT_LAYER, OPT_HEAD,
    OPT_TOKENS, OPT_MAX_TOKENS, OPT_LABEL_WIDTH, OPT_COLOR,
};

static const struct option long_options[] = {
    {"model", required_argument, NULL, 'm'},
    {"src", required_argument, NULL, OPT_SRC},
    {"tgt", required_argument, NULL, OPT_TGT},
    {"text", no_argument, NULL, OPT_TEXT},
    {"no-eos", no_argument, NULL, OPT_NO_EOS},
    {"beam", required_argument, NULL, 'b'},
    {"sentence", required_argument, NULL, OPT_SENTENCE},
    {"kind", required_argument, NULL, OPT_KIND},
    {"layer", required_argument, NULL, OPT_LAYER},
    {"head", required_argument, NULL, OPT_HEAD},
    {"format", required_argument, NULL, 'f'},
    {"output", required_argument, NULL, 'o'},
    {"tokens", required_argument, NULL, OPT_TOKENS},
    {"max-tokens", required_argument, NULL, OPT_MAX_TOKENS},
    {"label-width", required_argument, NULL, OPT_LABEL_WIDTH},
    {"color", required_argument, NULL, OPT_COLOR},
    CLI_COMMON_LONG_OPTIONS,
    {NULL, 0, NULL, 0},
};

/* In the order of tfm_view_format, of tfm_attention_kind and of tfm_color_when. */
static const char *const format_names[] = {"term", "svg", "tsv", "npy", "align", "soft", NULL};
static const char *const kind_names[] = {"self", "dec-self", "cross", NULL};
static const char *const color_names[] = {"auto", "always", "never", NULL};

typedef struct options {
    const char *model, *src, *tgt, *output, *tokens;
    bool text;
    bool beam_given;
    bool selection_given;         /* --layer or --head */
    size_t sentence;              /* 0: all */
    tfm_inspect_params inspect;   /* view (format, kind, layer, head, sizes; source_eos:
                                     not --no-eos), beam */
    tfm_color_when color;
} options;

typedef struct run {
    options opt;
    tfm_model *model;
    tfm_bpe *bpe, *src_bpe;        /* --text, or guess: tfm_model_text_encoders */
    bool guess;                    /* no --text: each side ids or text, as its lines show */
    tfm_inspector *inspector;
    cli_input src, tgt;
    tfm_pair_reader *pairs;
    bool done;                     /* the input has ended (or --sentence N was read) */
    const char *failed_file;       /* where a pair could not be taken: file and line */
    size_t failed_line;
    tfm_buf out;
    cli_output output, tokens;
    size_t written;                /* records written */
} run;

/* ---- reading pairs ------------------------------------------------------------------------ */

/* Records where a pair could not be taken (file and line) and returns the
 * status, for the message after the pairs before it are written. */
static tfm_status fail_at(run *r, const char *file, size_t line, tfm_status status)
{
    r->failed_file = file;
    r->failed_line = line;
    return status;
}

/* Warns about what reading a side of a pair did to it; room: the ids it may
 * hold (a source's </s> aside). */
static void warn_side(const tfm_pair_side *side, const char *name, size_t number, size_t room,
                      bool source)
{
    if (!side->done) return;
    if (side->repaired)
        cli_warn(name, number, "invalid UTF-8 replaced by U+FFFD (%zu sequence%s)", side->repaired,
                 side->repaired == 1 ? "" : "s");
    if (side->cropped)
        cli_warn(name, number, "%zu tokens are more than the model takes; cropped to the first %zu",
                 side->length, room);
    if (source && side->length == 0) cli_warn(name, number, "an empty source");
}

/* Reads the next wanted pair into slot `slot` of the batch (a source line
 * and, with --tgt, its target line); with --sentence N only pair N is
 * wanted, and the input ends after it. */
static tfm_status read_pair(void *ctx, size_t slot, size_t *cost, tfm_error *err)
{
    run *r = ctx;
    tfm_pair *p = tfm_inspector_pair(r->inspector, (int)slot);
    if (r->done) return TFM_EOF;
    tfm_status s = TFM_OK;
    while (s == TFM_OK && r->opt.sentence > tfm_lines_number(r->src.lines) + 1)
        s = tfm_pair_reader_next(r->pairs, NULL, err);
    if (s == TFM_OK) s = tfm_pair_reader_next(r->pairs, p, err);
    const tfm_pair_failure *f = tfm_pair_reader_failure(r->pairs);
    const size_t number = tfm_lines_number(r->src.lines);
    if (s != TFM_OK) {
        r->done = true;
        const bool sources_ended = s == TFM_EOF || (f->mismatch && f->side == TFM_SOURCE);
        if (r->opt.sentence && sources_ended) {
            tfm_error_set(err, TFM_ERR_RANGE, "--sentence %zu: the input has only %zu lines",
                          r->opt.sentence, number);
            return fail_at(r, r->src.name, 0, TFM_ERR_RANGE);
        }
        if (s == TFM_EOF) return TFM_EOF;
    }
    if (s != TFM_OK && f->mismatch) {
        if (f->side == TFM_SOURCE)
            tfm_error_set(err, TFM_ERR_FORMAT, "has more lines than %s (%zu)", r->src.name, number);
        else
            tfm_error_set(err, TFM_ERR_FORMAT, "has %zu lines, fewer than %s",
                          tfm_lines_number(r->tgt.lines), r->src.name);
        return fail_at(r, r->tgt.name, 0, TFM_ERR_FORMAT);
    }
    for (int k = 0; k < 2; k++) { /* a guess on thin evidence: say what was assumed */
        char note[200];
        if (tfm_pair_reader_note(r->pairs, (tfm_side)k, "--text", note, sizeof note))
            cli_warn(k == 0 ? r->src.name : r->tgt.name, 0, "%s", note);
    }
    const tfm_config *c = &r->model->config;
    warn_side(&p->src, r->src.name, number,
              (size_t)c->max_positions - (r->opt.inspect.view.source_eos ? 1 : 0), true);
    warn_side(&p->tgt, r->tgt.name, number, (size_t)c->max_positions - 1, false);
    if (s != TFM_OK)
        return fail_at(r, f->side == TFM_SOURCE ? r->src.name : r->tgt.name, f->line, s);
    if (r->opt.sentence) r->done = true;
    *cost = p->src.ids.len + p->tgt.ids.len;
    return TFM_OK;
}

static bool input_ready(void *ctx)
{
    run *r = ctx;
    return tfm_pair_reader_ready(r->pairs);
}

/* ---- the batch: forward pass and records ------------------------------------------------- */

/* Runs the model over the batch (one worker: the pairs [lo, hi) are the
 * whole batch), translating the sources first when they come alone. */
static tfm_status forward_batch(void *ctx, int worker, size_t lo, size_t hi, tfm_error *err)
{
    run *r = ctx;
    tfm_status s = tfm_inspector_forward(r->inspector, (int)(hi - lo), err);
    return s == TFM_OK ? s : fail_at(r, r->src.name, tfm_inspector_pair(r->inspector, 0)->line, s);
}

/* Writes the record of pair `slot`: npy records to the output, their
 * labels (--tokens) and every other format's text to theirs. */
static tfm_status write_pair(void *ctx, size_t slot, tfm_error *err)
{
    run *r = ctx;
    tfm_buf_clear(&r->out);
    tfm_status s = tfm_inspector_record(r->inspector, (int)slot, cli_output_fp(&r->output),
                                        &r->out, err);
    if (s == TFM_ERR_IO) cli_fail(r->output.name, 0, "%s", err->msg);
    if (s != TFM_OK)
        return fail_at(r, r->src.name, tfm_inspector_pair(r->inspector, (int)slot)->line, s);
    const bool npy = r->opt.inspect.view.format == TFM_VIEW_NPY;
    cli_output_write(npy ? &r->tokens : &r->output, r->out.data, r->out.len);
    r->written++;
    return TFM_OK;
}

static void flush_output(void *ctx)
{
    run *r = ctx;
    if (!r->output.is_file) cli_flush();
}

/* ---- options ----------------------------------------------------------------------------------- */

/* A layer or head as the options name it: a number, 'last', 'all' or 'mean'. */
static void selector_name(char *out, size_t size, int v)
{
    if (v == TFM_VIEW_LAST) snprintf(out, size, "last");
    else if (v == TFM_VIEW_ALL) snprintf(out, size, "all");
    else if (v == TFM_VIEW_MEAN) snprintf(out, size, "mean");
    else snprintf(out, size, "%d", v);
}

/* The help text with the library's defaults in it, so the two cannot differ. */
static void format_usage(char *out, size_t size)
{
    const tfm_inspect_params d = tfm_inspect_default_params();
    char layer[16], head[16];
    selector_name(layer, sizeof layer, d.view.layer);
    selector_name(head, sizeof head, d.view.head);
    snprintf(out, size, usage_format, d.beam, kind_names[d.view.kind], layer, head,
             format_names[d.view.format], d.view.max_tokens, d.view.label_width);
}

static void parse_options(int argc, char **argv, options *opt)
{
    static char usage[sizeof usage_format + 64];
    format_usage(usage, sizeof usage);
    tfm_view_params *view = &opt->inspect.view;
    int c;
    while ((c = getopt_long(argc, argv, "m:b:f:o:qvhV", long_options, NULL)) != -1) {
        switch (c) {
        case 'm': opt->model = optarg; break;
        case OPT_SRC: opt->src = optarg; break;
        case OPT_TGT: opt->tgt = optarg; break;
        case OPT_TEXT: opt->text = true; break;
        case OPT_NO_EOS: view->source_eos = false; break;
        case 'b':
            opt->inspect.beam = (int)cli_parse_int("--beam", optarg, 1, 1024);
            opt->beam_given = true;
            break;
        case OPT_SENTENCE:
            opt->sentence = (size_t)cli_parse_int("--sentence", optarg, 1, INT64_MAX);
            break;
        case OPT_KIND: view->kind = (tfm_attention_kind)cli_parse_choice("--kind", optarg, kind_names); break;
        case OPT_LAYER:
            opt->selection_given = true;
            if (!tfm_view_parse_layer(optarg, &view->layer))
                cli_usage_error("--layer: '%s' is not a number (0, 1, ...), 'last' or 'all'", optarg);
            break;
        case OPT_HEAD:
            opt->selection_given = true;
            if (!tfm_view_parse_head(optarg, &view->head))
                cli_usage_error("--head: '%s' is not a number (0, 1, ...), 'mean' or 'all'", optarg);
            break;
        case 'f': view->format = (tfm_view_format)cli_parse_choice("--format", optarg, format_names); break;
        case 'o': opt->output = optarg; break;
        case OPT_TOKENS: opt->tokens = optarg; break;
        case OPT_MAX_TOKENS: view->max_tokens = (int)cli_parse_int("--max-tokens", optarg, 0, 1 << 20); break;
        case OPT_LABEL_WIDTH:
            view->label_width = (int)cli_parse_int("--label-width", optarg, 0, 1 << 20);
            break;
        case OPT_COLOR: opt->color = (tfm_color_when)cli_parse_choice("--color", optarg, color_names); break;
        default: cli_common_option(c, usage);
        }
    }
    if (!opt->model) cli_usage_error("a model is required: -m MODEL");
    if (optind < argc && opt->src) cli_usage_error("give the sources either as --src or as FILE");
    if (argc - optind > 1) cli_usage_error("one source file at most (pairs: --src and --tgt)");
    if (optind < argc) opt->src = argv[optind];
    if (!opt->src) opt->src = "-";
    if (opt->tgt && strcmp(opt->src, "-") == 0 && strcmp(opt->tgt, "-") == 0)
        cli_usage_error("--src and --tgt cannot both be standard input");
    if (opt->tgt && opt->beam_given)
        cli_usage_error("--beam translates sources alone; with --tgt the targets are given");
    const tfm_view_format fmt = view->format;
    if ((fmt == TFM_VIEW_ALIGN || fmt == TFM_VIEW_SOFT) && view->kind != TFM_ATTENTION_CROSS)
        cli_usage_error("--format %s reads alignments off cross-attention: --kind cross",
                        format_names[fmt]);
    if (opt->tokens && (!opt->output || strcmp(opt->output, "-") == 0) &&
        strcmp(opt->tokens, "-") == 0)
        cli_usage_error("--tokens - and the records cannot both go to standard output");
    if (opt->tokens && fmt != TFM_VIEW_NPY)
        cli_usage_error("--tokens is for --format npy (the other formats show the tokens)");
    if (view->label_width == 1)
        cli_usage_error("--label-width 1 leaves no room beside the ellipsis: 0 or 2 and more");
}

/* Opens the sources (and targets) and the reader of their pairs, as the
 * model reads them: ids below the vocabulary sizes, a source cropped to
 * its positions with its </s>, a target cropped to them less one for <s>. */
static void open_input(run *r)
{
    cli_input_open(&r->src, r->opt.src);
    if (r->opt.tgt) cli_input_open(&r->tgt, r->opt.tgt);
    tfm_pair_params pp = tfm_pair_params_from_model(r->model);
    pp.source_eos = r->opt.inspect.view.source_eos;
    pp.bpe = r->bpe;
    pp.src_bpe = r->src_bpe;
    pp.guess_format = r->guess;
    tfm_error err;
    if (tfm_pair_reader_create(r->src.lines, r->tgt.lines, &pp, &r->pairs, &err) != TFM_OK)
        cli_fail(NULL, 0, "%s", err.msg);
}

int main(int argc, char **argv)
{
    cli_init("inspect-attn", argv);
    static run r;
    r.opt = (options){.inspect = tfm_inspect_default_params(), .color = TFM_COLOR_AUTO};
    parse_options(argc, argv, &r.opt);
    options *opt = &r.opt;
    tfm_view_params *view = &opt->inspect.view;
    const bool to_stdout = !opt->output || strcmp(opt->output, "-") == 0;
    if (view->format == TFM_VIEW_NPY && to_stdout && isatty(STDOUT_FILENO))
        cli_fail(NULL, 0, "refusing to write binary tensors to a terminal; redirect or pipe the "
                          "output, or use -o FILE");
    view->colors = tfm_term_choose_colors(opt->color, to_stdout && isatty(STDOUT_FILENO));
    view->tokens = opt->tokens != NULL;
    /* Attention of small batches is small matrix products, which gain
     * nothing from a second BLAS thread (DESIGN.md, Threads). */
    tfm_blas_threads(1);

    r.model = cli_load_model(opt->model);
    if (!tfm_model_source_eos(r.model)) view->source_eos = false; /* trained with --no-eos */
    /* a model trained with guided alignment (an imported Marian model) shows
     * its alignment head, the first of its alignment layer, unless told */
    const int align_layer = r.model->config.alignment_layer;
    if (!opt->selection_given && view->kind == TFM_ATTENTION_CROSS && align_layer >= 0) {
        view->layer = align_layer;
        view->head = 0;
        cli_info("showing the model's alignment head: layer %d, head 0", align_layer);
    }
    tfm_error err;
    if (tfm_view_check_selection(r.model, view->kind, view->layer, view->head, &err) != TFM_OK)
        cli_usage_error("--%s", err.msg);
    if (opt->text && tfm_model_text_encoders(r.model, &r.bpe, &r.src_bpe, &err) != TFM_OK)
        cli_fail(opt->model, 0, "--text: %s", err.msg);
    /* without --text, a model with a vocabulary reads each side as ids or
     * text, as its first lines show */
    r.guess = !opt->text && tfm_model_vocab(r.model, TFM_TARGET) &&
              tfm_model_text_encoders(r.model, &r.bpe, &r.src_bpe, &err) == TFM_OK;
    /* Encoder self-attention needs no target: sources alone are not translated. */
    opt->inspect.translate = !opt->tgt && view->kind != TFM_ATTENTION_ENCODER;
    if (tfm_inspector_create(r.model, &opt->inspect, &r.inspector, &err) != TFM_OK)
        cli_fail(NULL, 0, "%s", err.msg);
    tfm_buf_init(&r.out);

    /* svg draws one sentence: the first, unless --sentence says otherwise */
    const bool svg_first = view->format == TFM_VIEW_SVG && opt->sentence == 0;
    if (svg_first) opt->sentence = 1;
    open_input(&r);
    cli_output_open(&r.output, opt->output);
    if (opt->tokens) cli_output_open(&r.tokens, opt->tokens);
    cli_info("model %s: %s; %s", opt->model, tfm_attention_kind_title(view->kind),
             !opt->inspect.translate   ? "pairs as given"
             : opt->inspect.beam > 1 ? "translating with beam search"
                                     : "translating greedily");

    /* Batches of the pairs that are ready, a record per pair in order; a bad
     * line is reported after the records of the pairs before it. */
    tfm_batch_loop loop = {
        .ctx = &r, .max_items = (size_t)opt->inspect.max_pairs, .max_cost = BATCH_TOKENS,
        .threads = 1, .read = read_pair, .ready = input_ready, .work = forward_batch,
        .write = write_pair, .flush = flush_output,
    };
    tfm_batch_failure f;
    if (tfm_batch_loop_run(&loop, &f) != TFM_OK)
        cli_fail(r.failed_file, r.failed_line, "%s", f.err.msg);
    if (svg_first) {
        const char *line;
        size_t len;
        tfm_status s = tfm_lines_next(r.src.lines, &line, &len, &err);
        if (s != TFM_OK && s != TFM_EOF)
            cli_fail(r.src.name, tfm_lines_number(r.src.lines) + 1, "%s", err.msg);
        if (s == TFM_OK)
            cli_warn(NULL, 0, "svg draws one sentence, the first; choose another with "
                              "--sentence N");
    }
    cli_output_close(&r.output);
    if (opt->tokens) cli_output_close(&r.tokens);
    cli_info("%zu record%s written", r.written, r.written == 1 ? "" : "s");

    tfm_pair_reader_free(r.pairs);
    cli_input_close(&r.src);
    if (r.opt.tgt) cli_input_close(&r.tgt);
    tfm_buf_free(&r.out);
    tfm_inspector_free(r.inspector);
    tfm_bpe_free(r.bpe);
    tfm_bpe_free(r.src_bpe);
    tfm_model_free(r.model);
    return CLI_EXIT_OK;
}
