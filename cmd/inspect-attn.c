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
 * The program parses options, reads lines and writes: the weights come from
 * lib/nn (tfm_model_loss, tfm_model_attention), the pictures and alignments
 * from lib/view. */
#include <getopt.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

/* A batch holds at most this many sentences, or about this many tokens. */
#define BATCH_SENTENCES 16
#define BATCH_TOKENS 4096

static const char usage_text[] =
    "Usage: inspect-attn -m MODEL [OPTION]... --src SRC --tgt TGT\n"
    "       inspect-attn -m MODEL [OPTION]... [SRC]\n"
    "Shows what a model attends to: the attention weights of sentence pairs, one\n"
    "record per pair, in order.  With SRC alone ('-' or none: standard input) each\n"
    "source is translated first and the attention that produced the translation\n"
    "is shown.  Lines are token ids; with --text, text in the model's vocabulary.\n"
    "\n"
    "Input:\n"
    "  -m, --model=MODEL          the model file (safetensors)\n"
    "      --src=FILE             source lines\n"
    "      --tgt=FILE             target lines, one per source line (else translate)\n"
    "      --text                 lines are text, tokenized with the model's vocabulary\n"
    "      --no-eos               do not end each source with </s> (the default for a\n"
    "                             model trained with 'train --no-eos', which says so)\n"
    "  -b, --beam=K               translate sources alone with beam search of K\n"
    "                             (default 1: greedy search)\n"
    "      --sentence=N           only the pair on line N (1-based)\n"
    "\n"
    "What to show:\n"
    "      --kind=KIND            'cross' (encoder-decoder attention; default), 'self'\n"
    "                             (encoder self-attention) or 'dec-self' (decoder\n"
    "                             self-attention, causal)\n"
    "      --layer=N              a layer, 0-based as in the model's tensor names,\n"
    "                             'last' (default) or 'all'\n"
    "      --head=N               a head (0-based), 'all', or 'mean' (default: the\n"
    "                             mean of the heads)\n"
    "\n"
    "Output:\n"
    "  -f, --format=FORMAT        'term' (default): a heatmap for the terminal;\n"
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
    "                             note (default 100; 0: all)\n"
    "      --label-width=N        svg, term: shorten longer labels to N characters with\n"
    "                             an ellipsis (default 16; 0: never)\n"
    "      --color=WHEN           term: colours 'auto' (default: on a terminal, unless\n"
    "                             NO_COLOR is set), 'always' or 'never'\n"
    "  -q, --quiet                print errors only\n"
    "  -v, --verbose              print more about what is done\n"
    "  -h, --help                 display this help and exit\n"
    "  -V, --version              output version information and exit\n"
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

typedef enum { FORMAT_TERM, FORMAT_SVG, FORMAT_TSV, FORMAT_NPY, FORMAT_ALIGN, FORMAT_SOFT } format;
static const char *const format_names[] = {"term", "svg", "tsv", "npy", "align", "soft", NULL};
/* In the order of tfm_attention_kind. */
static const char *const kind_names[] = {"self", "dec-self", "cross", NULL};
static const char *const kind_titles[] = {"encoder self-attention", "decoder self-attention",
                                          "cross-attention"};
enum { COLOR_AUTO, COLOR_ALWAYS, COLOR_NEVER };
static const char *const color_names[] = {"auto", "always", "never", NULL};

enum { LAYER_LAST = -3 }; /* besides TFM_VIEW_ALL and TFM_VIEW_MEAN */

typedef struct options {
    const char *model, *src, *tgt, *output, *tokens;
    bool text, eos;
    int beam;
    bool beam_given;
    size_t sentence; /* 0: all */
    tfm_attention_kind kind;
    int layer, head;
    format fmt;
    int max_tokens, label_width;
    int color;
} options;

/* One pair of the batch. */
typedef struct pair {
    size_t line;     /* 1-based line number */
    tfm_ids src, tgt;
} pair;

typedef struct batch {
    int n;
    size_t tokens;
    pair p[BATCH_SENTENCES];
    const int32_t *src[BATCH_SENTENCES], *tgt[BATCH_SENTENCES];
    int src_len[BATCH_SENTENCES], tgt_len[BATCH_SENTENCES];
} batch;

/* Where output goes: standard output, or a file written atomically. */
typedef struct sink {
    const char *name;   /* for messages */
    bool is_file;
    tfm_atomic_file file;
} sink;

typedef struct run {
    options opt;
    tfm_model *model;
    const tfm_vocab *vocab;        /* the model's, or NULL */
    tfm_bpe *bpe;                  /* --text */
    tfm_encoder *encoder;          /* sources alone */
    tfm_decoder *decoder;
    tfm_search *search;
    float *states;
    size_t states_cap;
    tfm_train_workspace *ws;
    int layer, head;               /* resolved: a number or TFM_VIEW_ALL / TFM_VIEW_MEAN */
    tfm_term_colors colors;
    tfm_line_reader *src_reader, *tgt_reader;
    int src_fd, tgt_fd;
    const char *src_name, *tgt_name;
    bool done;                     /* the input has ended (or --sentence N was read) */
    const char *failed_file;       /* where a pair could not be taken: file and line */
    size_t failed_line;
    bool translate;                /* sources alone, and the kind needs a target */
    batch b;
    tfm_tensor weights, cropped;
    tfm_labels rows, cols;
    tfm_ids row_ids, col_ids;
    tfm_buf out;
    float *mean;
    size_t mean_cap;
    sink output, tokens;
    size_t written;                /* records written */
} run;

/* ---- output ----------------------------------------------------------------------------- */

static void sink_open(sink *s, const char *path)
{
    s->name = path ? path : "standard output";
    s->is_file = path != NULL && strcmp(path, "-") != 0;
    if (!s->is_file) return;
    tfm_error err;
    if (tfm_atomic_open(&s->file, path, &err) != TFM_OK) cli_fail(path, 0, "%s", err.msg);
}

static FILE *sink_fp(sink *s)
{
    return s->is_file ? s->file.fp : stdout;
}

static void sink_write(sink *s, const char *data, size_t len)
{
    if (!s->is_file) {
        cli_write(data, len);
        return;
    }
    if (len && fwrite(data, 1, len, s->file.fp) != len) {
        tfm_atomic_abort(&s->file);
        cli_fail(s->name, 0, "write error");
    }
}

static void sink_close(sink *s)
{
    if (!s->is_file) {
        cli_flush();
        return;
    }
    tfm_error err;
    if (tfm_atomic_commit(&s->file, &err) != TFM_OK) cli_fail(s->name, 0, "%s", err.msg);
}

/* ---- reading pairs ------------------------------------------------------------------------ */

/* Reads the next line of r; false at the end of the input. */
static bool next_line(tfm_line_reader *r, const char *name, const char **line, size_t *len)
{
    tfm_error err;
    tfm_status s = tfm_lines_next(r, line, len, &err);
    if (s == TFM_EOF) return false;
    if (s != TFM_OK) cli_fail(name, tfm_lines_number(r) + 1, "%s", err.msg);
    return true;
}

/* Parses one line into ids: an id line, or text (--text).  limit: the
 * vocabulary size; longest: ids kept (longer lines are cropped with a
 * warning).  False with err set when the line is unusable. */
static bool parse_line(run *r, const char *line, size_t len, const char *name, size_t number,
                       int32_t limit, size_t longest, tfm_ids *ids, tfm_error *err)
{
    if (r->opt.text) {
        size_t repaired = 0;
        if (tfm_bpe_encode(r->bpe, NULL, line, len, ids, &repaired, err) != TFM_OK) return false;
        if (repaired)
            cli_warn(name, number, "invalid UTF-8 replaced by U+FFFD (%zu sequence%s)", repaired,
                     repaired == 1 ? "" : "s");
    } else if (tfm_ids_parse(line, len, limit, ids, err) != TFM_OK) {
        return false;
    }
    if (ids->len > longest) {
        cli_warn(name, number, "%zu tokens are more than the model takes; cropped to the "
                 "first %zu", ids->len, longest);
        ids->len = longest;
    }
    return true;
}

/* Records where a pair could not be taken (file and line) and returns the
 * status, for the message after the pairs before it are written. */
static tfm_status fail_at(run *r, const char *file, size_t line, tfm_status status)
{
    r->failed_file = file;
    r->failed_line = line;
    return status;
}

/* Reads the next wanted pair into slot `slot` of the batch (a source line
 * and, with --target, its target line); with --sentence N only pair N is
 * wanted, and the input ends after it. */
static tfm_status read_pair(void *ctx, size_t slot, size_t *cost, tfm_error *err)
{
    run *r = ctx;
    const tfm_config *c = &r->model->config;
    pair *p = &r->b.p[slot];
    for (;;) {
        if (r->done) return TFM_EOF;
        const char *line;
        size_t len;
        tfm_status s = tfm_lines_next(r->src_reader, &line, &len, err);
        const size_t number = tfm_lines_number(r->src_reader);
        if (s != TFM_OK && s != TFM_EOF) return fail_at(r, r->src_name, number + 1, s);
        if (s == TFM_EOF) {
            r->done = true;
            if (r->opt.sentence) {
                tfm_error_set(err, TFM_ERR_RANGE, "--sentence %zu: the input has only %zu lines",
                              r->opt.sentence, number);
                return fail_at(r, r->src_name, 0, TFM_ERR_RANGE);
            }
            if (r->tgt_reader) {
                s = tfm_lines_next(r->tgt_reader, &line, &len, err);
                if (s == TFM_OK)
                    tfm_error_set(err, TFM_ERR_FORMAT, "has more lines than %s (%zu)", r->src_name,
                                  number);
                if (s != TFM_EOF)
                    return fail_at(r, r->tgt_name, s == TFM_OK ? 0 : number + 1,
                                   s == TFM_OK ? TFM_ERR_FORMAT : s);
            }
            return TFM_EOF;
        }
        const bool wanted = r->opt.sentence == 0 || number == r->opt.sentence;
        p->line = number;
        if (wanted) {
            size_t room = (size_t)c->max_positions - (r->opt.eos ? 1 : 0);
            if (!parse_line(r, line, len, r->src_name, number, c->src_vocab_size, room, &p->src, err))
                return fail_at(r, r->src_name, number, err->status ? err->status : TFM_ERR_FORMAT);
            if (p->src.len == 0) cli_warn(r->src_name, number, "an empty source");
            else if (r->opt.eos && tfm_ids_push(&p->src, c->eos_id) != TFM_OK)
                return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
        }
        if (r->tgt_reader) {
            s = tfm_lines_next(r->tgt_reader, &line, &len, err);
            if (s == TFM_EOF) {
                tfm_error_set(err, TFM_ERR_FORMAT, "has %zu lines, fewer than %s", number - 1,
                              r->src_name);
                return fail_at(r, r->tgt_name, 0, TFM_ERR_FORMAT);
            }
            if (s != TFM_OK) return fail_at(r, r->tgt_name, number, s);
            if (wanted && !parse_line(r, line, len, r->tgt_name, number, c->tgt_vocab_size,
                                      (size_t)c->max_positions - 1, &p->tgt, err))
                return fail_at(r, r->tgt_name, number, err->status ? err->status : TFM_ERR_FORMAT);
        } else {
            tfm_ids_clear(&p->tgt);
        }
        if (!wanted) continue;
        if (r->opt.sentence) r->done = true;
        *cost = p->src.len + p->tgt.len;
        return TFM_OK;
    }
}

static bool input_ready(void *ctx)
{
    run *r = ctx;
    return tfm_lines_ready(r->src_reader);
}


/* ---- translating sources alone ------------------------------------------------------------ */

/* Decodes the batch's sources and takes each best hypothesis as its target. */
static tfm_status translate(run *r, tfm_error *err)
{
    batch *b = &r->b;
    const int D = r->model->config.d_model;
    size_t rows = 0;
    for (int i = 0; i < b->n; i++) {
        b->src[i] = b->p[i].src.data;
        b->src_len[i] = (int)b->p[i].src.len;
        rows += b->p[i].src.len;
    }
    if (rows * D > r->states_cap || !r->states) {
        free(r->states);
        r->states_cap = rows * D;
        r->states = malloc((r->states_cap ? r->states_cap : 1) * sizeof(float));
        if (!r->states) cli_fail(NULL, 0, "out of memory for %zu encoder states", rows);
    }
    tfm_status s = tfm_encoder_forward(r->encoder, b->n, b->src, b->src_len, r->states, err);
    if (s != TFM_OK) return s;
    const float *states[BATCH_SENTENCES];
    for (int i = 0, off = 0; i < b->n; off += b->src_len[i], i++)
        states[i] = r->states + (size_t)off * D;
    tfm_search_params sp = tfm_search_default_params();
    sp.beam = r->opt.beam;
    tfm_search_input in = {.n_sentences = b->n, .states = states, .src_lens = b->src_len};
    s = tfm_search_run(r->search, r->decoder, &sp, &in, err);
    if (s != TFM_OK) return s;
    for (int i = 0; i < b->n; i++) {
        tfm_hypothesis h = tfm_search_result(r->search, i).hyps[0];
        tfm_ids *t = &b->p[i].tgt;
        tfm_ids_clear(t);
        for (int k = 0; k < h.len; k++)
            if (tfm_ids_push(t, h.ids[k]) != TFM_OK)
                return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    }
    return TFM_OK;
}

/* ---- writing one pair ---------------------------------------------------------------------- */

/* ids with one id in front (first >= 0) or behind (last >= 0), into out. */
static void ids_with(tfm_ids *out, int32_t first, const tfm_ids *ids, int32_t last)
{
    tfm_ids_clear(out);
    bool ok = first < 0 || tfm_ids_push(out, first) == TFM_OK;
    for (size_t i = 0; ok && i < ids->len; i++) ok = tfm_ids_push(out, ids->data[i]) == TFM_OK;
    if (ok && last >= 0) ok = tfm_ids_push(out, last) == TFM_OK;
    if (!ok) cli_fail(NULL, 0, "out of memory");
}

/* The ids the rows and columns of the pair's matrices stand for. */
static void label_ids(run *r, const pair *p)
{
    const tfm_config *c = &r->model->config;
    switch (r->opt.kind) {
    case TFM_ATTENTION_ENCODER:
        ids_with(&r->row_ids, -1, &p->src, -1);
        ids_with(&r->col_ids, -1, &p->src, -1);
        break;
    case TFM_ATTENTION_DECODER:
        ids_with(&r->row_ids, c->bos_id, &p->tgt, -1);
        ids_with(&r->col_ids, c->bos_id, &p->tgt, -1);
        break;
    case TFM_ATTENTION_CROSS:
        ids_with(&r->row_ids, -1, &p->tgt, c->eos_id); /* each query's prediction */
        ids_with(&r->col_ids, -1, &p->src, -1);
        break;
    }
}

static void set_labels(run *r, tfm_labels *l, const tfm_ids *ids, int max_chars)
{
    tfm_error err;
    if (tfm_labels_set(l, r->vocab, ids->data, (int)ids->len, max_chars, &err) != TFM_OK)
        cli_fail(NULL, 0, "%s", err.msg);
}

/* Pieces of ids separated by spaces, appended to r->out. */
static void append_pieces(run *r, const tfm_labels *l)
{
    for (int i = 0; i < l->n; i++) {
        if ((i > 0 && tfm_buf_putc(&r->out, ' ') != TFM_OK) ||
            tfm_buf_append(&r->out, l->text[i], strlen(l->text[i])) != TFM_OK)
            cli_fail(NULL, 0, "out of memory");
    }
}

static void write_npy(run *r)
{
    tfm_error err;
    if (tfm_npy_write(sink_fp(&r->output), &r->weights, &err) != TFM_OK)
        cli_fail(r->output.name, 0, "%s", err.msg);
    if (!r->opt.tokens) return;
    set_labels(r, &r->rows, &r->row_ids, 0);
    set_labels(r, &r->cols, &r->col_ids, 0);
    tfm_buf_clear(&r->out);
    append_pieces(r, &r->rows);
    if (tfm_buf_putc(&r->out, '\t') != TFM_OK) cli_fail(NULL, 0, "out of memory");
    append_pieces(r, &r->cols);
    if (tfm_buf_putc(&r->out, '\n') != TFM_OK) cli_fail(NULL, 0, "out of memory");
    sink_write(&r->tokens, r->out.data, r->out.len);
}

/* align and soft: one line from the mean matrix of the chosen layers and heads. */
static void write_alignment(run *r, const pair *p)
{
    const int n_q = (int)r->weights.shape[2], n_k = (int)r->weights.shape[3];
    size_t need = (size_t)n_q * n_k;
    if (need > r->mean_cap) {
        free(r->mean);
        r->mean = malloc(need * sizeof(float));
        if (!r->mean) cli_fail(NULL, 0, "out of memory");
        r->mean_cap = need;
    }
    tfm_attention_mean(&r->weights, r->mean);
    tfm_buf_clear(&r->out);
    tfm_status st;
    if (r->opt.fmt == FORMAT_ALIGN) {
        /* the source's words: its </s> is not one */
        int words = n_k - (r->opt.eos && n_k > 0 ? 1 : 0);
        st = tfm_align_hard(r->mean, n_q - 1, n_k, words, &r->out);
    } else {
        set_labels(r, &r->rows, &p->tgt, 0);
        append_pieces(r, &r->rows);
        st = tfm_buf_append(&r->out, " ||| ", 5);
        if (st == TFM_OK) st = tfm_align_soft(r->mean, n_q, n_k, &r->out);
    }
    if (st != TFM_OK || tfm_buf_putc(&r->out, '\n') != TFM_OK) cli_fail(NULL, 0, "out of memory");
    sink_write(&r->output, r->out.data, r->out.len);
}

/* tsv, svg, term: the view with labels (and for pictures, cropped). */
static void write_view(run *r, const pair *p)
{
    const bool picture = r->opt.fmt == FORMAT_SVG || r->opt.fmt == FORMAT_TERM;
    const int n_q = (int)r->weights.shape[2], n_k = (int)r->weights.shape[3];
    const tfm_tensor *w = &r->weights;
    char note[200] = "";
    const int max = picture ? r->opt.max_tokens : 0;
    tfm_error err;
    if (max > 0 && (n_q > max || n_k > max)) {
        if (tfm_attention_crop(&r->weights, max, max, &r->cropped, &err) != TFM_OK)
            cli_fail(NULL, 0, "%s", err.msg);
        w = &r->cropped;
        snprintf(note, sizeof note, "(truncated to %d tokens for legibility: showing %d of %d "
                 "queries and %d of %d keys)", max, n_q < max ? n_q : max, n_q,
                 n_k < max ? n_k : max, n_k);
        r->row_ids.len = r->row_ids.len < (size_t)max ? r->row_ids.len : (size_t)max;
        r->col_ids.len = r->col_ids.len < (size_t)max ? r->col_ids.len : (size_t)max;
    }
    const int width = picture ? r->opt.label_width : 0;
    set_labels(r, &r->rows, &r->row_ids, width);
    set_labels(r, &r->cols, &r->col_ids, width);
    char title[160];
    snprintf(title, sizeof title, "sentence %zu: %s", p->line, kind_titles[r->opt.kind]);
    const tfm_config *c = &r->model->config;
    tfm_attention_view v = {
        .weights = w, .rows = r->rows.text, .cols = r->cols.text,
        .first_layer = r->layer == TFM_VIEW_ALL ? 0 : r->layer,
        .first_head = r->head == TFM_VIEW_ALL ? 0 : r->head,
        .n_model_heads = c->n_heads, .title = title, .note = note[0] ? note : NULL};
    tfm_buf_clear(&r->out);
    tfm_status st;
    switch (r->opt.fmt) {
    case FORMAT_SVG: st = tfm_view_svg(&v, &r->out, &err); break;
    case FORMAT_TERM: st = tfm_view_term(&v, r->colors, &r->out, &err); break;
    default: st = tfm_view_tsv(&v, &r->out, &err); break;
    }
    if (st != TFM_OK) cli_fail(NULL, 0, "%s", err.msg);
    sink_write(&r->output, r->out.data, r->out.len);
}

/* Runs the forward pass over the batch (one worker: the pairs [lo, hi) are
 * the whole batch), translating the sources first when they come alone. */
static tfm_status forward_batch(void *ctx, int worker, size_t lo, size_t hi, tfm_error *err)
{
    run *r = ctx;
    batch *b = &r->b;
    b->n = (int)(hi - lo);
    tfm_status s = r->translate ? translate(r, err) : TFM_OK;
    if (s != TFM_OK) return fail_at(r, r->src_name, b->p[0].line, s);
    for (int i = 0; i < b->n; i++) {
        b->src[i] = b->p[i].src.data;
        b->src_len[i] = (int)b->p[i].src.len;
        b->tgt[i] = b->p[i].tgt.data;
        b->tgt_len[i] = (int)b->p[i].tgt.len;
    }
    tfm_train_batch tb = {b->n, b->src, b->src_len, b->tgt, b->tgt_len};
    s = tfm_model_loss(r->ws, &tb, false, NULL, NULL, NULL, NULL, err);
    return s == TFM_OK ? s : fail_at(r, r->src_name, b->p[0].line, s);
}

/* Writes the record of pair `slot`. */
static tfm_status write_pair(void *ctx, size_t slot, tfm_error *err)
{
    run *r = ctx;
    const pair *p = &r->b.p[slot];
    tfm_status s = tfm_attention_gather(r->model, r->ws, (int)slot, r->opt.kind, r->layer, r->head,
                                        &r->weights, err);
    if (s != TFM_OK) return fail_at(r, r->src_name, p->line, s);
    label_ids(r, p);
    switch (r->opt.fmt) {
    case FORMAT_NPY: write_npy(r); break;
    case FORMAT_ALIGN:
    case FORMAT_SOFT: write_alignment(r, p); break;
    default: write_view(r, p); break;
    }
    r->written++;
    return TFM_OK;
}

static void flush_output(void *ctx)
{
    run *r = ctx;
    if (!r->output.is_file) cli_flush();
}


/* ---- options ----------------------------------------------------------------------------------- */

/* A number >= 0 or one of two words (their values given). */
static int parse_selector(const char *option, const char *text, const char *word1, int value1,
                          const char *word2, int value2)
{
    if (strcmp(text, word1) == 0) return value1;
    if (strcmp(text, word2) == 0) return value2;
    char *end;
    long v = strtol(text, &end, 10);
    if (end == text || *end || v < 0 || v > INT_MAX)
        cli_usage_error("%s: '%s' is not a number (0, 1, ...), '%s' or '%s'", option, text, word1,
                        word2);
    return (int)v;
}

static void parse_options(int argc, char **argv, options *opt)
{
    int c;
    while ((c = getopt_long(argc, argv, "m:b:f:o:qvhV", long_options, NULL)) != -1) {
        switch (c) {
        case 'm': opt->model = optarg; break;
        case OPT_SRC: opt->src = optarg; break;
        case OPT_TGT: opt->tgt = optarg; break;
        case OPT_TEXT: opt->text = true; break;
        case OPT_NO_EOS: opt->eos = false; break;
        case 'b':
            opt->beam = (int)cli_parse_int("--beam", optarg, 1, 1024);
            opt->beam_given = true;
            break;
        case OPT_SENTENCE:
            opt->sentence = (size_t)cli_parse_int("--sentence", optarg, 1, INT64_MAX);
            break;
        case OPT_KIND: opt->kind = (tfm_attention_kind)cli_parse_choice("--kind", optarg, kind_names); break;
        case OPT_LAYER:
            opt->layer = parse_selector("--layer", optarg, "last", LAYER_LAST, "all", TFM_VIEW_ALL);
            break;
        case OPT_HEAD:
            opt->head = parse_selector("--head", optarg, "mean", TFM_VIEW_MEAN, "all", TFM_VIEW_ALL);
            break;
        case 'f': opt->fmt = (format)cli_parse_choice("--format", optarg, format_names); break;
        case 'o': opt->output = optarg; break;
        case OPT_TOKENS: opt->tokens = optarg; break;
        case OPT_MAX_TOKENS:
            opt->max_tokens = (int)cli_parse_int("--max-tokens", optarg, 0, 1 << 20);
            break;
        case OPT_LABEL_WIDTH:
            opt->label_width = (int)cli_parse_int("--label-width", optarg, 0, 1 << 20);
            break;
        case OPT_COLOR: opt->color = cli_parse_choice("--color", optarg, color_names); break;
        default: cli_common_option(c, usage_text);
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
    if ((opt->fmt == FORMAT_ALIGN || opt->fmt == FORMAT_SOFT) && opt->kind != TFM_ATTENTION_CROSS)
        cli_usage_error("--format %s reads alignments off cross-attention: --kind cross",
                        format_names[opt->fmt]);
    if (opt->tokens && (!opt->output || strcmp(opt->output, "-") == 0) &&
        strcmp(opt->tokens, "-") == 0)
        cli_usage_error("--tokens - and the records cannot both go to standard output");
    if (opt->tokens && opt->fmt != FORMAT_NPY)
        cli_usage_error("--tokens is for --format npy (the other formats show the tokens)");
    if (opt->label_width == 1)
        cli_usage_error("--label-width 1 leaves no room beside the ellipsis: 0 or 2 and more");
}

/* Resolves --layer and --head against the model: a usage error names the
 * valid range. */
static void resolve_selection(run *r)
{
    const tfm_config *c = &r->model->config;
    const bool enc = r->opt.kind == TFM_ATTENTION_ENCODER;
    const int depth = enc ? c->n_encoder_layers : c->n_decoder_layers;
    r->layer = r->opt.layer == LAYER_LAST ? depth - 1 : r->opt.layer;
    if (r->layer >= depth)
        cli_usage_error("--layer %d: the model's %s has layers 0 to %d (or 'last', 'all')",
                        r->layer, enc ? "encoder" : "decoder", depth - 1);
    r->head = r->opt.head;
    if (r->head >= c->n_heads)
        cli_usage_error("--head %d: the model has heads 0 to %d (or 'mean', 'all')", r->head,
                        c->n_heads - 1);
}

static tfm_term_colors choose_colors(const options *opt, bool to_terminal)
{
    if (opt->color == COLOR_NEVER) return TFM_TERM_PLAIN;
    if (opt->color == COLOR_AUTO) {
        const char *no_color = getenv("NO_COLOR"), *term = getenv("TERM");
        if (!to_terminal || (no_color && *no_color) || (term && strcmp(term, "dumb") == 0))
            return TFM_TERM_PLAIN;
    }
    const char *ct = getenv("COLORTERM");
    if (ct && (strcmp(ct, "truecolor") == 0 || strcmp(ct, "24bit") == 0))
        return TFM_TERM_TRUECOLOR;
    return TFM_TERM_256;
}

static void open_input(run *r)
{
    r->src_name = r->opt.src;
    r->src_fd = cli_open_input(r->opt.src);
    r->src_reader = tfm_lines_create(r->src_fd);
    if (!r->src_reader) cli_fail(NULL, 0, "out of memory");
    if (!r->opt.tgt) return;
    r->tgt_name = r->opt.tgt;
    r->tgt_fd = cli_open_input(r->opt.tgt);
    r->tgt_reader = tfm_lines_create(r->tgt_fd);
    if (!r->tgt_reader) cli_fail(NULL, 0, "out of memory");
}

int main(int argc, char **argv)
{
    cli_init("inspect-attn", argv);
    static run r;
    r.opt = (options){.eos = true, .beam = 1, .kind = TFM_ATTENTION_CROSS, .layer = LAYER_LAST,
                      .head = TFM_VIEW_MEAN, .fmt = FORMAT_TERM, .max_tokens = 100,
                      .label_width = 16, .color = COLOR_AUTO};
    parse_options(argc, argv, &r.opt);
    options *opt = &r.opt;
    const bool to_stdout = !opt->output || strcmp(opt->output, "-") == 0;
    if (opt->fmt == FORMAT_NPY && to_stdout && isatty(STDOUT_FILENO))
        cli_fail(NULL, 0, "refusing to write binary tensors to a terminal; redirect or pipe the "
                          "output, or use -o FILE");
    r.colors = choose_colors(opt, to_stdout && isatty(STDOUT_FILENO));
    /* Attention of small batches is small matrix products, which gain
     * nothing from a second BLAS thread (DESIGN.md, Threads). */
    tfm_blas_threads(1);

    r.model = cli_load_model(opt->model);
    if (!tfm_model_source_eos(r.model)) r.opt.eos = false; /* trained with --no-eos */
    r.vocab = r.model->vocab;
    resolve_selection(&r);
    tfm_error err;
    if (opt->text) {
        if (!r.vocab) cli_fail(opt->model, 0, "--text: the model has no vocabulary");
        if (tfm_bpe_create(r.vocab, &r.bpe, &err) != TFM_OK) cli_fail(opt->model, 0, "%s", err.msg);
    }
    /* Encoder self-attention needs no target: sources alone are not translated. */
    r.translate = !opt->tgt && opt->kind != TFM_ATTENTION_ENCODER;
    if (r.translate && (tfm_encoder_create(r.model, &r.encoder, &err) != TFM_OK ||
                        tfm_decoder_create(r.model, &r.decoder, &err) != TFM_OK ||
                        tfm_search_create(r.model, &r.search, &err) != TFM_OK))
        cli_fail(NULL, 0, "%s", err.msg);
    if (tfm_train_workspace_create(r.model, &r.ws, &err) != TFM_OK) cli_fail(NULL, 0, "%s", err.msg);
    for (int i = 0; i < BATCH_SENTENCES; i++) {
        tfm_ids_init(&r.b.p[i].src);
        tfm_ids_init(&r.b.p[i].tgt);
    }
    tfm_tensor_init(&r.weights);
    tfm_tensor_init(&r.cropped);
    tfm_labels_init(&r.rows);
    tfm_labels_init(&r.cols);
    tfm_ids_init(&r.row_ids);
    tfm_ids_init(&r.col_ids);
    tfm_buf_init(&r.out);

    /* svg draws one sentence: the first, unless --sentence says otherwise */
    const bool svg_first = opt->fmt == FORMAT_SVG && opt->sentence == 0;
    if (svg_first) opt->sentence = 1;
    open_input(&r);
    sink_open(&r.output, opt->output);
    if (opt->tokens) sink_open(&r.tokens, opt->tokens);
    cli_info("model %s: %s; %s", opt->model, kind_titles[opt->kind],
             !r.translate ? "pairs as given" : opt->beam > 1 ? "translating with beam search"
                                                             : "translating greedily");

    /* Batches of the pairs that are ready, a record per pair in order; a bad
     * line is reported after the records of the pairs before it. */
    tfm_batch_loop loop = {
        .ctx = &r, .max_items = BATCH_SENTENCES, .max_cost = BATCH_TOKENS, .threads = 1,
        .read = read_pair, .ready = input_ready, .work = forward_batch, .write = write_pair,
        .flush = flush_output,
    };
    tfm_batch_failure f;
    if (tfm_batch_loop_run(&loop, &f) != TFM_OK)
        cli_fail(r.failed_file, r.failed_line, "%s", f.err.msg);
    if (svg_first) {
        const char *line;
        size_t len;
        if (next_line(r.src_reader, r.src_name, &line, &len))
            cli_warn(NULL, 0, "svg draws one sentence, the first; choose another with "
                              "--sentence N");
    }
    sink_close(&r.output);
    if (opt->tokens) sink_close(&r.tokens);
    cli_info("%zu record%s written", r.written, r.written == 1 ? "" : "s");

    tfm_lines_free(r.src_reader);
    cli_close_input(r.src_fd);
    if (r.tgt_reader) {
        tfm_lines_free(r.tgt_reader);
        cli_close_input(r.tgt_fd);
    }
    for (int i = 0; i < BATCH_SENTENCES; i++) {
        tfm_ids_free(&r.b.p[i].src);
        tfm_ids_free(&r.b.p[i].tgt);
    }
    tfm_tensor_free(&r.weights);
    tfm_tensor_free(&r.cropped);
    tfm_labels_free(&r.rows);
    tfm_labels_free(&r.cols);
    tfm_ids_free(&r.row_ids);
    tfm_ids_free(&r.col_ids);
    tfm_buf_free(&r.out);
    free(r.mean);
    free(r.states);
    tfm_train_workspace_free(r.ws);
    tfm_search_free(r.search);
    tfm_decoder_free(r.decoder);
    tfm_encoder_free(r.encoder);
    tfm_bpe_free(r.bpe);
    tfm_model_free(r.model);
    return CLI_EXIT_OK;
}
