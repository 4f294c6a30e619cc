/* tfm/view.h - looking at what the model attends to: one sentence's
 * attention weights gathered into a tensor, token labels beside them, and
 * writers for TSV matrices, SVG heatmaps, terminal heatmaps and word
 * alignments (fast_align's hard "i-j" pairs, Marian's soft distributions).
 * This is the library behind inspect-attn(1); and beside it, what
 * 'score -m' computes: the log-probability a model gives each target of a
 * batch of pairs (tfm_score_pairs).  Both run pairs through the model's
 * batched passes (tfm/pass.h) and report what it makes of them.
 *
 * The weights come from tfm_model_attention (tfm/pass.h): run tfm_model_loss
 * without dropout on a batch of pairs, then gather each pair's weights:
 *
 *     tfm_model_loss(ws, &batch, false, NULL, NULL, NULL, NULL, &err);
 *     tfm_tensor w;
 *     tfm_tensor_init(&w);
 *     tfm_attention_gather(model, ws, 0, TFM_ATTENTION_CROSS,
 *                          model->config.n_decoder_layers - 1, TFM_VIEW_MEAN, &w, &err);
 *     // w: [1, 1, target length + 1, source length]
 *     tfm_labels rows, cols;       // tfm_labels_set(...) from the pair's ids
 *     tfm_attention_view v = {.weights = &w, .rows = rows.text, .cols = cols.text,
 *                             .first_layer = model->config.n_decoder_layers - 1,
 *                             .first_head = TFM_VIEW_MEAN, .n_model_heads = 4};
 *     tfm_buf svg;
 *     tfm_buf_init(&svg);
 *     tfm_view_svg(&v, &svg, &err);
 *
 * Writers append to a tfm_buf and never print: the caller decides where the
 * text goes.  Weights are drawn on an absolute scale, 0 to 1.
 *
 * A program that writes a record per sentence pair (inspect-attn) leaves
 * the choice of ids, labels, cropping and titles to a tfm_viewer:
 *
 *     tfm_view_params p = tfm_view_default_params();
 *     p.format = TFM_VIEW_TSV;
 *     tfm_viewer *viewer;
 *     tfm_viewer_create(model, &p, &viewer, &err);
 *     // for each pair b of the batch, after tfm_model_loss:
 *     tfm_attention_gather(model, ws, b, p.kind, p.layer, p.head, &w, &err);
 *     tfm_view_pair pair = {src, src_len, tgt, tgt_len, line_number};
 *     tfm_buf_clear(&out);
 *     tfm_viewer_record(viewer, &w, &pair, stdout, &out, &err);  // then write out
 *
 * A tfm_inspector does all of that for batches of pairs, translating
 * sources that come alone first.
 */
#ifndef TFM_VIEW_H
#define TFM_VIEW_H

#include "tfm/core.h"
#include "tfm/io.h"
#include "tfm/metrics.h" /* scoring: where lines go (tfm_score_output), n-best lines */
#include "tfm/model.h"
#include "tfm/pass.h"
#include "tfm/text.h"

/* ---- gathering the weights ------------------------------------------------------ */

/* Selections of layers and heads besides a 0-based number (TFM_VIEW_LAST:
 * layers only, the last of the kind's stack). */
enum { TFM_VIEW_ALL = -1, TFM_VIEW_MEAN = -2, TFM_VIEW_LAST = -3 };

/* A layer as a user writes it: a number (0, 1, ...), "last" or "all"; a
 * head: a number, "mean" or "all".  False (*out unchanged) for anything
 * else. */
bool tfm_view_parse_layer(const char *text, int *out);
bool tfm_view_parse_head(const char *text, int *out);

/* Checks a selection against model m: TFM_ERR_RANGE for a layer the kind's
 * stack does not have or a head the model does not have, the message
 * naming the valid range and the words ("layer 2: the model's decoder has
 * layers 0 to 1 (or 'last', 'all')"). */
tfm_status tfm_view_check_selection(const tfm_model *m, tfm_attention_kind kind, int layer,
                                    int head, tfm_error *err);

/* Gathers pair b's weights of one kind, from the last forward pass of ws (a
 * workspace of model m), into out: float32 of shape [L, H', n_q, n_k] (n_q,
 * n_k as tfm_model_attention says).  layer: a layer number of the kind's
 * stack or TFM_VIEW_LAST (L = 1), or TFM_VIEW_ALL (L = the stack's depth).  head: a head
 * number (H' = 1), TFM_VIEW_ALL (H' = n_heads) or TFM_VIEW_MEAN (H' = 1, the
 * mean of the heads: its rows still sum to 1).  Errors as
 * tfm_model_attention; TFM_ERR_RANGE as tfm_view_check_selection. */
tfm_status tfm_attention_gather(const tfm_model *m, const tfm_pass_workspace *ws, int b,
                                tfm_attention_kind kind, int layer, int head, tfm_tensor *out,
                                tfm_error *err);

/* The first n_q rows and n_k columns (at most) of every matrix of in
 * ([L, H, rows, cols], float32) into out, for drawing long sentences. */
tfm_status tfm_attention_crop(const tfm_tensor *in, int n_q, int n_k, tfm_tensor *out,
                              tfm_error *err);

/* The mean of the L x H matrices of t ([L, H, n_q, n_k], float32) into
 * out[n_q * n_k]: one matrix for alignments. */
void tfm_attention_mean(const tfm_tensor *t, float *out);

/* ---- token labels ---------------------------------------------------------------- */

/* Labels of tokens: text[i] is the label of token i, NUL-terminated.  The
 * memory is the struct's (reused from call to call). */
typedef struct tfm_labels {
    int n;
    const char **text; /* [n] */
    tfm_buf buf;       /* the labels, one after another */
    size_t *off;       /* [n] where each starts in buf */
    int cap;
} tfm_labels;

void tfm_labels_init(tfm_labels *l);
void tfm_labels_free(tfm_labels *l);

/* Sets l to the pieces of ids[0..n) in v (as the vocabulary spells them:
 * "▁the", "<0x0A>", "</s>"), each shortened to max_chars characters (code
 * points) when longer, the last of them an ellipsis "…" (max_chars 0: never
 * shortened).  v may be NULL (a model without a vocabulary): the labels are
 * then the ids in decimal, as is an id v does not hold.  TFM_ERR_NOMEM. */
tfm_status tfm_labels_set(tfm_labels *l, const tfm_vocab *v, const int32_t *ids, int n,
                          int max_chars, tfm_error *err);

/* Appends the first len bytes of s to out, escaped for XML text and
 * attribute values: & < > " ' become entities, and what XML 1.0 cannot hold
 * (invalid UTF-8, control characters other than tab and newline, U+FFFE,
 * U+FFFF) becomes U+FFFD. */
tfm_status tfm_xml_escape(tfm_buf *out, const char *s, size_t len);

/* The width in terminal columns of a UTF-8 string (wide East Asian
 * characters count 2, combining marks 0; invalid bytes 1 each). */
int tfm_text_width(const char *s, size_t len);

/* ---- views ------------------------------------------------------------------------- */

/* One sentence's weights with their labels: what a writer draws. */
typedef struct tfm_attention_view {
    const tfm_tensor *weights; /* float32 [L, H, n_q, n_k] */
    const char *const *rows;   /* [n_q] labels of the queries */
    const char *const *cols;   /* [n_k] labels of the keys */
    int first_layer;           /* the model's number of weights' layer 0; the rest follow */
    int first_head;            /* likewise for heads, or TFM_VIEW_MEAN (then H == 1) */
    int n_model_heads;         /* the model's heads, for "mean of 8 heads" */
    const char *title;         /* a heading ("sentence 3: cross-attention"), or NULL */
    const char *note;          /* a line below it (a truncation notice), or NULL */
} tfm_attention_view;

/* The name of matrix (l, h) of a view: "layer 5, head 2" or "layer 5, mean
 * of 8 heads", appended to out. */
tfm_status tfm_view_matrix_name(const tfm_attention_view *v, int l, int h, tfm_buf *out);

/* TSV: one table per layer and head, each followed by an empty line.  A
 * table's first row holds, in its first cell, "TITLE: layer L, head H" (the
 * title left out when NULL) and then the column labels; each further row a
 * query's label and its weights ("%.6g").  Labels hold no tab or newline
 * (pieces cannot); one that does has them replaced by spaces. */
tfm_status tfm_view_tsv(const tfm_attention_view *v, tfm_buf *out, tfm_error *err);

/* SVG: one standalone document (XML declaration included), a grid of
 * panels, one row per layer and one column per head; each panel a heatmap
 * with the query labels on the left and the key labels above, rotated;
 * every cell carries a <title> with its labels and weight (a tooltip); a
 * colour legend below.  Colours: viridis, 0 dark to 1 yellow.  All text is
 * escaped with tfm_xml_escape. */
tfm_status tfm_view_svg(const tfm_attention_view *v, tfm_buf *out, tfm_error *err);

typedef enum tfm_term_colors {
    TFM_TERM_PLAIN = 0,     /* no escape sequences: the ramp " .:-=+*#%@" */
    TFM_TERM_256 = 1,       /* xterm's 256 colours (ESC[48;5;Nm) */
    TFM_TERM_TRUECOLOR = 2, /* 24-bit colour (ESC[48;2;R;G;Bm) */
} tfm_term_colors;

/* When a program colours its heatmaps (a --color option's words). */
typedef enum tfm_color_when { TFM_COLOR_AUTO = 0, TFM_COLOR_ALWAYS = 1, TFM_COLOR_NEVER = 2 } tfm_color_when;

/* The colours to draw with: none for NEVER, and for AUTO unless the output
 * is a terminal, NO_COLOR is unset or empty and TERM is not "dumb"
 * (https://no-color.org); then 24-bit colour when COLORTERM says
 * "truecolor" or "24bit", else 256 colours.  Reads the environment. */
tfm_term_colors tfm_term_choose_colors(tfm_color_when when, bool to_terminal);

/* A heatmap for a terminal, for each layer and head: its name (and the
 * title and note), the key labels written vertically above the columns, and
 * one line per query: its label, right-aligned, then one cell of two
 * columns per key; then a legend of the scale. */
tfm_status tfm_view_term(const tfm_attention_view *v, tfm_term_colors colors, tfm_buf *out,
                         tfm_error *err);

/* ---- one record per sentence pair ------------------------------------------------------ */

/* What a record is written as (the order is inspect-attn's --format list). */
typedef enum tfm_view_format {
    TFM_VIEW_TERM = 0,  /* tfm_view_term, cropped, a title per pair */
    TFM_VIEW_SVG = 1,   /* tfm_view_svg, likewise */
    TFM_VIEW_TSV = 2,   /* tfm_view_tsv, never cropped, labels never shortened */
    TFM_VIEW_NPY = 3,   /* the weights as an .npy record; the labels as a line */
    TFM_VIEW_ALIGN = 4, /* tfm_align_hard of the mean matrix, a line */
    TFM_VIEW_SOFT = 5,  /* the target's pieces, " ||| ", tfm_align_soft of the mean */
} tfm_view_format;

/* The words for a kind in titles: "encoder self-attention", "decoder
 * self-attention", "cross-attention". */
const char *tfm_attention_kind_title(tfm_attention_kind kind);

typedef struct tfm_view_params {
    tfm_view_format format;  /* default TFM_VIEW_TERM */
    tfm_attention_kind kind; /* the weights' kind (default TFM_ATTENTION_CROSS) */
    int layer;               /* as gathered: a number, TFM_VIEW_LAST (default) or _ALL */
    int head;                /* as gathered: a number, TFM_VIEW_ALL or _MEAN (default) */
    int max_tokens;          /* svg, term: at most this many queries and keys are drawn,
                                with a note saying so (default 100; 0: all) */
    int label_width;         /* svg, term: labels shortened to this many characters
                                (default 16; 0: never) */
    tfm_term_colors colors;  /* term (default TFM_TERM_PLAIN) */
    bool source_eos;         /* align: each non-empty source ends with </s>, which is
                                no word (default true) */
    bool tokens;             /* npy: also a line of labels, "query pieces TAB key
                                pieces" (default false) */
} tfm_view_params;

tfm_view_params tfm_view_default_params(void);

/* A sentence pair as the model read it. */
typedef struct tfm_view_pair {
    const int32_t *src; /* [src_len] the source, its </s> included when it has one */
    int src_len;
    const int32_t *tgt; /* [tgt_len] the target, without <s> and </s> */
    int tgt_len;
    size_t number;      /* its number in titles: "sentence 3: cross-attention" */
} tfm_view_pair;

/* Writes records: the labels and scratch memory they need, reused from
 * pair to pair.  The model must outlive the viewer. */
typedef struct tfm_viewer tfm_viewer;

/* Checks p against m (layer and head in range: else TFM_ERR_RANGE; align
 * and soft only for cross-attention, no negative sizes: else TFM_ERR_ARG)
 * and keeps a copy.  TFM_ERR_NOMEM. */
tfm_status tfm_viewer_create(const tfm_model *m, const tfm_view_params *p, tfm_viewer **out,
                             tfm_error *err);
void tfm_viewer_free(tfm_viewer *v);

/* One pair's record, from its weights w as tfm_attention_gather gives them
 * for the viewer's kind, layer and head.  The rows and columns stand for:
 *   cross:    each target token and a final </s> (what each query predicts)
 *             over the source;
 *   self:     the source over itself;
 *   dec-self: <s> and the target over themselves.
 * Text formats are appended to out.  npy: the weights are written to npy
 * (when not NULL) with tfm_npy_write, whose errors (TFM_ERR_IO) are
 * returned; with p.tokens the labels line is appended to out.  A w whose
 * queries and keys are not the pair's is TFM_ERR_ARG. */
tfm_status tfm_viewer_record(tfm_viewer *v, const tfm_tensor *w, const tfm_view_pair *pair,
                             FILE *npy, tfm_buf *out, tfm_error *err);

/* ---- scoring sentence pairs ------------------------------------------------------ */

/* What 'score -m' computes, as marian-scorer does: for each pair (source x,
 * target y of n ids), the log-probability the model gives y followed by
 * </s>, reading <s> y (teacher forcing) and the source with a </s> at its
 * end (as 'encode' and 'train' give it one; an empty source stays empty).
 * It is the training forward pass with dropout off (tfm_model_loss), the
 * validation loss of one sentence, so it is the number the model was
 * trained to raise; decode's log-probs are the same computation done
 * incrementally, and agree with it up to float rounding.
 *
 * The pairs are line n of the sources and line n of the targets
 * (tfm_pair_reader), or the lines of an n-best list 'I ||| IDS ||| FEATURES
 * ||| SCORE' with source line I + 1 (the list follows the sources' order
 * and covers each of them).  They are scored a batch at a time, the batch
 * holding the pairs that are ready (tfm_batch_loop), and a line is written
 * for each in input order:
 *   pairs:   "TOTAL<TAB>AVERAGE" (6 decimals; AVERAGE is TOTAL over the
 *            target's ids + 1), AVERAGE alone with normalize, and with
 *            per_token a TAB and each label's log-prob, </s>'s last;
 *   n-best:  the line with "NAME= TOTAL" (or AVERAGE) added to its features
 *            (tfm_nbest_add_feature).
 * A target longer than the model takes gets an empty line and a warning
 * (in an n-best list it is an error: a feature cannot be left out of one
 * hypothesis); a source too long is cropped, with a warning. */
typedef struct tfm_pair_scorer_params {
    bool nbest;            /* the targets are an n-best list */
    const char *feature;   /* the n-best feature's name; NULL: TFM_NBEST_FEATURE */
    bool normalize;        /* the average alone (n-best: as the feature) */
    bool per_token;        /* each label's log-prob too (not with nbest) */
    bool text;             /* text lines, tokenized with the model's vocabulary */
    bool source_eos;       /* sources end with </s>, unless the model was trained
                              without (tfm_model_source_eos).  Default true */
    bool strict;           /* text: invalid UTF-8 is an error */
    int batch_size;        /* pairs scored together, at most.  Default 64 */
    int batch_tokens;      /* source and target ids scored together.  Default 2048 */
} tfm_pair_scorer_params;

tfm_pair_scorer_params tfm_pair_scorer_default_params(void);
/* per_token goes without nbest, and feature with it, a name that
 * tfm_nbest_feature_name_ok; TFM_ERR_ARG saying which, in the terms of
 * score's options. */
tfm_status tfm_pair_scorer_params_validate(const tfm_pair_scorer_params *p, tfm_error *err);

/* The sums over the pairs scored, for the corpus perplexity: exp(-sum_logprob
 * / n_tokens). */
typedef struct tfm_pair_scores {
    double sum_logprob;    /* nats */
    int64_t n_tokens;      /* labels: target ids + 1 per pair */
    size_t n_pairs;        /* pairs scored */
    size_t n_unusable;     /* targets too long for the model: no score */
} tfm_pair_scores;

/* Appends what the sums say, as score -m reports it: "perplexity P over N
 * target tokens (</s> included) of K pairs; mean log-prob L per token" (or
 * that no pair was scored), and "; M targets too long for the model had no
 * score" when some had none.  No newline. */
tfm_status tfm_pair_scores_format(const tfm_pair_scores *t, tfm_buf *out);

/* Scores the pairs of src and tgt (an n-best list with nbest) under model
 * (with its current weights; not changed), writing a line per pair to out.
 * On a line that cannot be taken, the lines before it are written first,
 * then the run stops: its status, err and *at (may be NULL) saying where
 * (at->file is src's or tgt's label).  Sources and targets of different
 * lengths are TFM_ERR_FORMAT naming both counts (the rest of each is read to
 * count it; out->flush is called first); so is an n-best list that leaves
 * out sources or does not follow their order.  *totals (may be NULL) gets
 * the sums, also on failure. */
tfm_status tfm_score_pairs(const tfm_model *model, const tfm_pair_scorer_params *p,
                           const tfm_score_input *src, const tfm_score_input *tgt,
                           const tfm_score_output *out, tfm_pair_scores *totals,
                           tfm_score_failure *at, tfm_error *err);

/* ---- the attention of batches of pairs ----------------------------------------------------- */

/* An inspector runs a model over batches of sentence pairs and writes each
 * pair's record, as inspect-attn does: the teacher-forced forward pass
 * without dropout (tfm_model_loss), each pair's weights gathered
 * (tfm_attention_gather) and written by a tfm_viewer.  Sources that come
 * alone are translated first (greedy or beam search) and the best
 * hypothesis taken as the target: the attention shown is then the one that
 * produced the translation.  Inside a tfm_batch_loop:
 *
 *     tfm_inspect_params p = tfm_inspect_default_params();
 *     p.view.format = TFM_VIEW_ALIGN;
 *     tfm_inspector_create(model, &p, &in, &err);          // model outlives in
 *     read:  tfm_pair_reader_next(pairs, tfm_inspector_pair(in, slot), &err)
 *     work:  tfm_inspector_forward(in, hi - lo, &err)     // one worker: the batch
 *     write: tfm_inspector_record(in, slot, npy_fp, &out, &err)
 */
typedef struct tfm_inspect_params {
    tfm_view_params view;
    bool translate;  /* the pairs have sources alone: translate them (default false) */
    int beam;        /* translating: beam search of this width (default 1: greedy) */
    int max_pairs;   /* pairs in a batch at most (default 16) */
} tfm_inspect_params;

tfm_inspect_params tfm_inspect_default_params(void);

typedef struct tfm_inspector tfm_inspector;

/* Checks p.view as tfm_viewer_create does, and beam and max_pairs >= 1
 * (TFM_ERR_ARG); TFM_ERR_NOMEM. */
tfm_status tfm_inspector_create(const tfm_model *m, const tfm_inspect_params *p,
                                tfm_inspector **out, tfm_error *err);
void tfm_inspector_free(tfm_inspector *in);

/* Slot i of the batch (0 .. max_pairs-1): read a pair into it (its source
 * with its </s>, as the model reads it; the target, or nothing to
 * translate). */
tfm_pair *tfm_inspector_pair(tfm_inspector *in, int i);

/* Runs the model over slots [0, n): translates the sources first when
 * p.translate (each slot's target becomes its best hypothesis), then the
 * forward pass.  Errors of the encoder, the search and tfm_model_loss. */
tfm_status tfm_inspector_forward(tfm_inspector *in, int n, tfm_error *err);

/* Slot i's record after forward, as tfm_viewer_record writes it (npy: the
 * weights to npy; text appended to out).  Errors as tfm_attention_gather
 * and tfm_viewer_record (TFM_ERR_IO: writing to npy failed). */
tfm_status tfm_inspector_record(tfm_inspector *in, int i, FILE *npy, tfm_buf *out,
                                tfm_error *err);

#endif
