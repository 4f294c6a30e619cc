/* test_view.c - attention inspection (lib/view): drawing the weights that
 * test_attention.c checks.
 *
 * What it checks:
 *   - labels (pieces, shortened with an ellipsis on character boundaries),
 *     XML escaping of < & " ' and of what XML cannot hold, a well-formed SVG
 *     (xmllint, when installed), TSV tables that read back, terminal
 *     heatmaps in each colour mode with no stray escape sequences, hard and
 *     soft alignment strings, cropping and means;
 *   - one record per pair (tfm_viewer): each kind's row and column labels,
 *     each format (svg and term cropped to max_tokens with a note and
 *     shortened labels, tsv never cropped, npy records that read back with
 *     their labels line, align and soft from the mean matrix), weights
 *     gathered with TFM_VIEW_LAST;
 *   - errors: weights that are not the pair's, alignments of another kind;
 *   - the words for layers and heads, the check of a selection and its
 *     message, the choice of terminal colours from the environment;
 *   - an inspector (batches of pairs): records as the forward pass, gather
 *     and the viewer give them; sources alone given the greedy translation.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "testutil.h"
#include "testview.h"
#include "tfm/pass.h"
#include "tfm/search.h"
#include "tfm/view.h"

/* ---- labels and escaping ---------------------------------------------------------------- */

/* A vocabulary with the pieces XML must escape, a long one and
 * multi-byte ones; their ids follow the 260 specials and bytes. */
static const char *const test_pieces[] = {"<", "&", "\"", "'", "x<y&z\"'", "abcdefghijklmnop",
                                          "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9", /* ééééé */
                                          "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e"};     /* 日本語 */
enum { N_TEST_PIECES = sizeof test_pieces / sizeof *test_pieces };

static tfm_vocab *test_vocab(int32_t *first_id)
{
    tfm_norm_params np = tfm_norm_default_params();
    tfm_vocab *v = tfm_vocab_create(&np);
    if (!v) return NULL;
    for (int i = 0; i < N_TEST_PIECES; i++) {
        int32_t id = tfm_vocab_add(v, test_pieces[i], strlen(test_pieces[i]), -(float)i,
                                   TFM_PIECE_NORMAL);
        if (i == 0) *first_id = id;
        CHECK_MSG(id >= 0, "test_vocab: piece %d refused", i);
    }
    return v;
}

static void test_labels(void)
{
    int32_t first = -1;
    tfm_vocab *v = test_vocab(&first);
    CHECK(v != NULL);
    if (!v) return;
    tfm_labels l;
    tfm_labels_init(&l);
    tfm_error err;
    int32_t ids[N_TEST_PIECES + 2];
    for (int i = 0; i < N_TEST_PIECES; i++) ids[i] = first + i;
    ids[N_TEST_PIECES] = TFM_ID_EOS;
    ids[N_TEST_PIECES + 1] = 99999; /* not in the vocabulary */
    CHECK(tfm_labels_set(&l, v, ids, N_TEST_PIECES + 2, 0, &err) == TFM_OK);
    CHECK(l.n == N_TEST_PIECES + 2);
    for (int i = 0; i < N_TEST_PIECES; i++) CHECK(strcmp(l.text[i], test_pieces[i]) == 0);
    CHECK(strcmp(l.text[N_TEST_PIECES], "</s>") == 0);
    CHECK(strcmp(l.text[N_TEST_PIECES + 1], "99999") == 0);

    CHECK(tfm_labels_set(&l, v, ids, N_TEST_PIECES, 4, &err) == TFM_OK);
    CHECK(strcmp(l.text[0], "<") == 0);
    CHECK(strcmp(l.text[4], "x<y\xe2\x80\xa6") == 0);       /* x<y… */
    CHECK(strcmp(l.text[5], "abc\xe2\x80\xa6") == 0);       /* abc… */
    CHECK(strcmp(l.text[6], "\xc3\xa9\xc3\xa9\xc3\xa9\xe2\x80\xa6") == 0); /* ééé… */
    CHECK(strcmp(l.text[7], test_pieces[7]) == 0);          /* 3 characters: whole */
    CHECK(tfm_text_width(l.text[7], strlen(l.text[7])) == 6); /* wide characters */
    CHECK(tfm_text_width(l.text[6], strlen(l.text[6])) == 4);

    /* no vocabulary: the ids */
    CHECK(tfm_labels_set(&l, NULL, ids, 2, 0, &err) == TFM_OK);
    char want[16];
    snprintf(want, sizeof want, "%d", (int)first);
    CHECK(strcmp(l.text[0], want) == 0);
    tfm_labels_free(&l);
    tfm_vocab_free(v);
}

static void test_xml_escape(void)
{
    tfm_buf b;
    tfm_buf_init(&b);
    const char in[] = "a<b>&\"c'\t\x01\xff\xef\xbf\xbe\xc3\xa9";
    CHECK(tfm_xml_escape(&b, in, sizeof in - 1) == TFM_OK);
    const char want[] = "a&lt;b&gt;&amp;&quot;c&apos;\t\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"
                        "\xc3\xa9";
    CHECK_MSG(b.data && strcmp(b.data, want) == 0, "'%s'", b.data);
    tfm_buf_free(&b);
}

/* ---- writers ------------------------------------------------------------------------------ */

/* A view of made-up weights [L, H, 3, 4] with labels that need escaping. */
typedef struct view_fixture {
    tfm_tensor w;
    tfm_attention_view v;
} view_fixture;

static const char *const rows3[] = {"<s>", "x<y&z\"'", "\xe6\x97\xa5\xe6\x9c\xac"};
static const char *const cols4[] = {"&", "'", "\"", "</s>"};

static void view_make(view_fixture *f, int L, int H, bool mean)
{
    tfm_tensor_init(&f->w);
    const int64_t shape[4] = {L, H, 3, 4};
    tfm_tensor_reshape(&f->w, TFM_F32, 4, shape);
    float *w = f->w.data;
    for (int m = 0; m < L * H; m++)
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 4; j++) /* rows sum to 1 */
                w[(m * 3 + i) * 4 + j] = (j == (i + m) % 4) ? 0.7f : 0.1f;
    f->v = (tfm_attention_view){.weights = &f->w, .rows = rows3, .cols = cols4,
                                .first_layer = 1, .first_head = mean ? TFM_VIEW_MEAN : 0,
                                .n_model_heads = 4, .title = "sentence 1: <cross> & \"more\"",
                                .note = "showing 3 of 9 <tokens>"};
}

static size_t count(const char *s, const char *needle)
{
    size_t n = 0;
    for (const char *p = s; (p = strstr(p, needle)) != NULL; p += strlen(needle)) n++;
    return n;
}

static void test_svg(void)
{
    view_fixture f;
    view_make(&f, 2, 3, false);
    tfm_buf svg;
    tfm_buf_init(&svg);
    tfm_error err;
    CHECK(tfm_view_svg(&f.v, &svg, &err) == TFM_OK);
    CHECK(svg.data && strncmp(svg.data, "<?xml", 5) == 0);
    /* one rect per weight, the background and the legend */
    CHECK_MSG(count(svg.data, "<rect") == 2 * 3 * 12 + 2, "%zu", count(svg.data, "<rect"));
    CHECK(count(svg.data, "x&lt;y&amp;z&quot;&apos;") > 0);
    CHECK(count(svg.data, ">&amp;<") > 0);
    CHECK(count(svg.data, ">&apos;<") > 0);
    CHECK(count(svg.data, ">&quot;<") > 0);
    CHECK(count(svg.data, "&lt;/s&gt;") > 0);
    CHECK(count(svg.data, "x<y") == 0);
    CHECK(count(svg.data, "layer 2, head 2") == 1);
    CHECK(count(svg.data, "showing 3 of 9 &lt;tokens&gt;") == 1);

    const char *path = tmp_path("view.svg");
    FILE *fp = fopen(path, "wb");
    CHECK(fp != NULL);
    if (fp) {
        fwrite(svg.data, 1, svg.len, fp);
        fclose(fp);
    }
    if (system("command -v xmllint >/dev/null 2>&1") != 0) {
        SKIP(test_svg_xmllint, "xmllint is not installed (make deps installs libxml2-utils)");
    } else {
        char cmd[8400];
        snprintf(cmd, sizeof cmd, "xmllint --noout '%s'", path);
        CHECK_MSG(system(cmd) == 0, "xmllint rejects %s", path);
    }
    tfm_buf_free(&svg);
    tfm_tensor_free(&f.w);
}

static void test_tsv(void)
{
    view_fixture f;
    view_make(&f, 1, 2, false);
    tfm_buf tsv;
    tfm_buf_init(&tsv);
    tfm_error err;
    CHECK(tfm_view_tsv(&f.v, &tsv, &err) == TFM_OK);
    /* two tables of a header and 3 rows, each followed by an empty line */
    CHECK(count(tsv.data, "\n") == 2 * 5);
    const char *want_head = "sentence 1: <cross> & \"more\": layer 1, head 0\t&\t'\t\"\t</s>\n";
    CHECK_MSG(strncmp(tsv.data, want_head, strlen(want_head)) == 0, "%.80s", tsv.data);
    CHECK(count(tsv.data, "layer 1, head 1\t") == 1);
    /* the first table's second row reads back */
    const char *row = strchr(tsv.data, '\n') + 1;
    row = strchr(row, '\n') + 1;
    CHECK(strncmp(row, "x<y&z\"'\t", 8) == 0);
    float a, b, c, d;
    CHECK(sscanf(row + 8, "%f\t%f\t%f\t%f", &a, &b, &c, &d) == 4);
    CHECK(a == 0.1f && b == 0.7f && c == 0.1f && d == 0.1f);
    tfm_buf_free(&tsv);
    tfm_tensor_free(&f.w);
}

static void test_term(void)
{
    view_fixture f;
    view_make(&f, 1, 1, true);
    tfm_buf out;
    tfm_buf_init(&out);
    tfm_error err;
    CHECK(tfm_view_term(&f.v, TFM_TERM_PLAIN, &out, &err) == TFM_OK);
    CHECK(strchr(out.data, '\033') == NULL);
    CHECK(count(out.data, "layer 1, mean of 4 heads") == 1);
    CHECK(count(out.data, "    <s> ") == 1);           /* right-aligned to "x<y&z\"'" */
    CHECK(count(out.data, "\nx<y&z\"' ..##....\n") == 1); /* 0.1 is '.', 0.7 is '#' */
    CHECK(count(out.data, "\n   \xe6\x97\xa5\xe6\x9c\xac ....##..\n") == 1); /* 2 wide chars */
    CHECK(count(out.data, "[  ..::--==++**##%%@@@@] 1") == 1); /* the legend */
    /* the key labels, vertically: one character per line, two columns each */
    CHECK(count(out.data, "\n        & ' \" <\n              /\n              s\n") == 1);
    tfm_buf_clear(&out);
    CHECK(tfm_view_term(&f.v, TFM_TERM_256, &out, &err) == TFM_OK);
    CHECK(count(out.data, "\033[48;5;") == 12 + 11);
    CHECK(count(out.data, "\033[0m") == 3 + 1);
    tfm_buf_clear(&out);
    CHECK(tfm_view_term(&f.v, TFM_TERM_TRUECOLOR, &out, &err) == TFM_OK);
    CHECK(count(out.data, "\033[48;2;68;1;84m") == 1); /* the legend's 0 */
    CHECK(count(out.data, "\033[48;2;253;231;37m") == 1);

    /* labels that try to send escape sequences are defused */
    static const char *const evil_rows[] = {"a\033[31m", "b", "c"};
    f.v.rows = evil_rows;
    tfm_buf_clear(&out);
    CHECK(tfm_view_term(&f.v, TFM_TERM_PLAIN, &out, &err) == TFM_OK);
    CHECK(strchr(out.data, '\033') == NULL);
    tfm_buf_free(&out);
    tfm_tensor_free(&f.w);
}

static void test_alignments(void)
{
    /* 3 target rows over 2 words and </s> */
    const float w[3 * 3] = {0.2f, 0.5f, 0.3f, 0.4f, 0.4f, 0.2f, 0.1f, 0.1f, 0.8f};
    tfm_buf b;
    tfm_buf_init(&b);
    CHECK(tfm_align_hard(w, 3, 3, 2, &b) == TFM_OK);
    CHECK_MSG(b.data && strcmp(b.data, "1-0 0-1") == 0, "'%s'", b.data); /* a tie: the first */
    tfm_buf_clear(&b);
    CHECK(tfm_align_soft(w, 2, 3, &b) == TFM_OK);
    CHECK_MSG(b.data && strcmp(b.data, "0.2,0.5,0.3 0.4,0.4,0.2") == 0, "'%s'", b.data);
    tfm_buf_free(&b);
}

static void test_crop_and_mean(void)
{
    view_fixture f;
    view_make(&f, 2, 2, false);
    tfm_tensor c;
    tfm_tensor_init(&c);
    tfm_error err;
    CHECK(tfm_attention_crop(&f.w, 2, 3, &c, &err) == TFM_OK);
    CHECK(c.shape[0] == 2 && c.shape[1] == 2 && c.shape[2] == 2 && c.shape[3] == 3);
    const float *in = f.w.data, *out = c.data;
    for (int m = 0; m < 4; m++)
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 3; j++) CHECK(out[(m * 2 + i) * 3 + j] == in[(m * 3 + i) * 4 + j]);
    CHECK(tfm_attention_crop(&f.w, 10, 10, &c, &err) == TFM_OK); /* no larger than it is */
    CHECK(c.shape[2] == 3 && c.shape[3] == 4);
    float mean[12];
    tfm_attention_mean(&f.w, mean);
    for (int i = 0; i < 12; i++) {
        double s = 0;
        for (int m = 0; m < 4; m++) s += in[m * 12 + i];
        CHECK_NEAR(mean[i], s / 4, 1e-7);
    }
    tfm_tensor_free(&c);
    tfm_tensor_free(&f.w);
}

/* ---- one record per pair (tfm_viewer) ---------------------------------------------------- */

/* A model with the test vocabulary and one pair: the source "<" "x<y&z\"'"
 * "abcdefghijklmnop" </s>, the target "&" "日本語", sentence 7. */
typedef struct record_fixture {
    tfm_vocab *vocab;
    tfm_model *m;
    int32_t src[4], tgt[2];
    tfm_view_pair pair;
    tfm_buf out, want;
    tfm_tensor w;
} record_fixture;

static const char *const rec_src[] = {"<", "x<y&z\"'", "abcdefghijklmnop", "</s>"};
static const char *const rec_cross_rows[] = {"&", "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e", "</s>"};
static const char *const rec_dec[] = {"<s>", "&", "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e"};

static bool record_make(record_fixture *f)
{
    int32_t first = -1;
    memset(f, 0, sizeof *f);
    tfm_buf_init(&f->out);
    tfm_buf_init(&f->want);
    tfm_tensor_init(&f->w);
    f->vocab = test_vocab(&first);
    f->m = f->vocab ? random_model(3, 0, 0, f->vocab) : NULL;
    CHECK(f->m != NULL);
    const int32_t src[4] = {first, first + 4, first + 5, TFM_ID_EOS}, tgt[2] = {first + 1, first + 7};
    memcpy(f->src, src, sizeof src);
    memcpy(f->tgt, tgt, sizeof tgt);
    f->pair = (tfm_view_pair){f->src, 4, f->tgt, 2, 7};
    return f->m != NULL;
}

static void record_free(record_fixture *f)
{
    tfm_buf_free(&f->out);
    tfm_buf_free(&f->want);
    tfm_tensor_free(&f->w);
    tfm_model_free(f->m);
    tfm_vocab_free(f->vocab);
}

/* Made-up weights [L, H, n_q, n_k] whose rows sum to 1, distinct per matrix. */
static void record_weights(tfm_tensor *t, int L, int H, int n_q, int n_k)
{
    const int64_t shape[4] = {L, H, n_q, n_k};
    tfm_tensor_reshape(t, TFM_F32, 4, shape);
    float *w = t->data;
    for (int m = 0; m < L * H; m++)
        for (int i = 0; i < n_q; i++)
            for (int j = 0; j < n_k; j++)
                w[((size_t)m * n_q + i) * n_k + j] =
                    n_k == 1 ? 1.0f : j == (i + m) % n_k ? 0.5f : 0.5f / (float)(n_k - 1);
}

/* Same shape and the same floats. */
static bool same_tensor(const tfm_tensor *a, const tfm_tensor *b)
{
    if (a->ndim != b->ndim || memcmp(a->shape, b->shape, sizeof a->shape[0] * (size_t)a->ndim))
        return false;
    return memcmp(a->data, b->data, (size_t)tfm_tensor_numel(a) * sizeof(float)) == 0;
}

/* The record of f's pair and weights with params p, into f->out. */
static tfm_status record_run(record_fixture *f, const tfm_view_params *p, FILE *npy)
{
    tfm_viewer *v = NULL;
    tfm_error err;
    tfm_buf_clear(&f->out);
    tfm_status s = tfm_viewer_create(f->m, p, &v, &err);
    CHECK_MSG(s == TFM_OK, "%s", err.msg);
    if (s != TFM_OK) return s;
    s = tfm_viewer_record(v, &f->w, &f->pair, npy, &f->out, &err);
    tfm_viewer_free(v);
    return s;
}

/* Each kind's rows and columns, labelled, in a TSV record that is what
 * tfm_view_tsv gives for the same weights and labels. */
static void test_record_labels(void)
{
    record_fixture f;
    if (!record_make(&f)) return record_free(&f);
    const char *const *rows[3] = {rec_src, rec_dec, rec_cross_rows};
    const char *const *cols[3] = {rec_src, rec_dec, rec_src};
    const int n[3][2] = {{4, 4}, {3, 3}, {3, 4}};
    const char *const heads[3] = {"layer 0, head 2", "layer 1, mean of 4 heads",
                                  "layer 1, mean of 4 heads"};
    for (int kind = 0; kind < 3; kind++) {
        tfm_view_params p = tfm_view_default_params();
        p.format = TFM_VIEW_TSV;
        p.kind = (tfm_attention_kind)kind;
        if (kind == TFM_ATTENTION_ENCODER) p.layer = 0, p.head = 2;
        record_weights(&f.w, 1, 1, n[kind][0], n[kind][1]);
        CHECK(record_run(&f, &p, NULL) == TFM_OK);
        tfm_attention_view want = {.weights = &f.w, .rows = rows[kind], .cols = cols[kind],
                                   .first_layer = kind == TFM_ATTENTION_ENCODER ? 0 : 1,
                                   .first_head = kind == TFM_ATTENTION_ENCODER ? 2 : TFM_VIEW_MEAN,
                                   .n_model_heads = 4};
        char title[64];
        snprintf(title, sizeof title, "sentence 7: %s", tfm_attention_kind_title(p.kind));
        want.title = title;
        tfm_buf_clear(&f.want);
        tfm_error err;
        CHECK(tfm_view_tsv(&want, &f.want, &err) == TFM_OK);
        CHECK_MSG(f.out.len == f.want.len && memcmp(f.out.data, f.want.data, f.out.len) == 0,
                  "kind %d:\n%s\nwant:\n%s", kind, f.out.data, f.want.data);
        char head[128];
        snprintf(head, sizeof head, "%s: %s\t%s\t", title, heads[kind], cols[kind][0]);
        CHECK_MSG(strncmp(f.out.data, head, strlen(head)) == 0, "%.80s", f.out.data);
    }
    CHECK(strcmp(tfm_attention_kind_title(TFM_ATTENTION_CROSS), "cross-attention") == 0);
    CHECK(strcmp(tfm_attention_kind_title(TFM_ATTENTION_ENCODER), "encoder self-attention") == 0);
    CHECK(strcmp(tfm_attention_kind_title(TFM_ATTENTION_DECODER), "decoder self-attention") == 0);

    /* a model without a vocabulary: the ids */
    tfm_model *bare = random_model(4, 0, 0, NULL);
    if (bare) {
        tfm_view_params p = tfm_view_default_params();
        p.format = TFM_VIEW_TSV;
        const int32_t src[2] = {5, TFM_ID_EOS}, tgt[1] = {9};
        tfm_view_pair pair = {src, 2, tgt, 1, 1};
        record_weights(&f.w, 1, 1, 2, 2);
        tfm_viewer *v = NULL;
        tfm_error err;
        CHECK(tfm_viewer_create(bare, &p, &v, &err) == TFM_OK);
        tfm_buf_clear(&f.out);
        CHECK(v && tfm_viewer_record(v, &f.w, &pair, NULL, &f.out, &err) == TFM_OK);
        CHECK_MSG(strstr(f.out.data, "heads\t5\t3\n9\t") != NULL, "%s", f.out.data);
        tfm_viewer_free(v);
        tfm_model_free(bare);
    }
    record_free(&f);
}

/* Every format: svg and term titled, cropped and with shortened labels as
 * their writers draw them; tsv never cropped; npy and its labels line;
 * align and soft from the mean of the matrices. */
static void test_record_formats(void)
{
    record_fixture f;
    if (!record_make(&f)) return record_free(&f);
    tfm_error err;
    record_weights(&f.w, 2, 4, 3, 4); /* cross, --layer all --head all */
    tfm_view_params p = tfm_view_default_params();
    p.layer = TFM_VIEW_ALL;
    p.head = TFM_VIEW_ALL;
    p.max_tokens = 2;
    p.label_width = 3;
    static const char *const short_rows[] = {"&", "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e"};
    static const char *const short_cols[] = {"<", "x<\xe2\x80\xa6"}; /* x<… */
    tfm_tensor cropped;
    tfm_tensor_init(&cropped);
    CHECK(tfm_attention_crop(&f.w, 2, 2, &cropped, &err) == TFM_OK);
    tfm_attention_view want = {
        .weights = &cropped, .rows = short_rows, .cols = short_cols, .first_layer = 0,
        .first_head = 0, .n_model_heads = 4, .title = "sentence 7: cross-attention",
        .note = "(truncated to 2 tokens for legibility: showing 2 of 3 queries and 2 of 4 keys)"};
    for (int k = 0; k < 3; k++) {
        const tfm_view_format fmt[3] = {TFM_VIEW_SVG, TFM_VIEW_TERM, TFM_VIEW_TERM};
        p.format = fmt[k];
        p.colors = k == 2 ? TFM_TERM_256 : TFM_TERM_PLAIN;
        CHECK(record_run(&f, &p, NULL) == TFM_OK);
        tfm_buf_clear(&f.want);
        CHECK((k == 0 ? tfm_view_svg(&want, &f.want, &err)
                      : tfm_view_term(&want, p.colors, &f.want, &err)) == TFM_OK);
        CHECK_MSG(f.out.len == f.want.len && memcmp(f.out.data, f.want.data, f.out.len) == 0,
                  "format %d", (int)p.format);
        CHECK(count(f.out.data, "showing 2 of 3 queries and 2 of 4 keys") == 1);
    }
    /* within the limit: no note, nothing cropped; max_tokens 0: never cropped */
    p.format = TFM_VIEW_TERM;
    p.colors = TFM_TERM_PLAIN;
    for (int max = 0; max <= 4; max += 4) {
        p.max_tokens = max;
        CHECK(record_run(&f, &p, NULL) == TFM_OK);
        CHECK(count(f.out.data, "truncated") == 0);
        CHECK(count(f.out.data, "layer 1, head 3") == 1);
        CHECK(count(f.out.data, "</\xe2\x80\xa6 ") == 8); /* the last query ("</s>", width 3) */
    }
    /* tsv: whole labels, every query and key, whatever max_tokens says */
    p.format = TFM_VIEW_TSV;
    p.max_tokens = 2;
    CHECK(record_run(&f, &p, NULL) == TFM_OK);
    CHECK(count(f.out.data, "\tabcdefghijklmnop\t</s>\n") == 8);
    CHECK(count(f.out.data, "\n</s>\t") == 8);
    CHECK(count(f.out.data, "truncated") == 0);
    tfm_tensor_free(&cropped);

    /* npy: the weights as a record; the labels line only with p.tokens */
    p.format = TFM_VIEW_NPY;
    const char *path = tmp_path("record.npy");
    FILE *fp = fopen(path, "w+b");
    CHECK(fp != NULL);
    if (fp) {
        CHECK(record_run(&f, &p, fp) == TFM_OK);
        CHECK(f.out.len == 0);
        p.tokens = true;
        CHECK(record_run(&f, &p, fp) == TFM_OK);
        CHECK_MSG(strcmp(f.out.data, "& \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e </s>\t< x<y&z\"' "
                                     "abcdefghijklmnop </s>\n") == 0, "'%s'", f.out.data);
        CHECK(record_run(&f, &p, NULL) == TFM_OK); /* no file: the labels alone */
        rewind(fp);
        tfm_tensor back;
        tfm_tensor_init(&back);
        for (int r = 0; r < 2; r++) {
            CHECK(tfm_npy_read(fp, &back, &err) == TFM_OK);
            CHECK(back.dtype == TFM_F32 && same_tensor(&back, &f.w));
        }
        CHECK(tfm_npy_read(fp, &back, &err) == TFM_EOF);
        tfm_tensor_free(&back);
        fclose(fp);
    }

    /* align and soft: the mean of two layers; row 0 leans to the source's
     * "abc…" only in the mean, row 1 to </s> (unaligned), the final </s>
     * query is no target word */
    const int64_t shape[4] = {2, 1, 3, 4};
    tfm_tensor_reshape(&f.w, TFM_F32, 4, shape);
    const float w[2][12] = {{0.1f, 0.5f, 0.4f, 0.0f, 0.1f, 0.1f, 0.1f, 0.7f, 0.7f, 0.1f, 0.1f, 0.1f},
                            {0.1f, 0.1f, 0.8f, 0.0f, 0.1f, 0.1f, 0.1f, 0.7f, 0.7f, 0.1f, 0.1f, 0.1f}};
    memcpy(f.w.data, w, sizeof w);
    p = tfm_view_default_params();
    p.layer = TFM_VIEW_ALL;
    p.format = TFM_VIEW_ALIGN;
    CHECK(record_run(&f, &p, NULL) == TFM_OK);
    CHECK_MSG(strcmp(f.out.data, "2-0\n") == 0, "'%s'", f.out.data);
    p.source_eos = false; /* the last column is then a word */
    CHECK(record_run(&f, &p, NULL) == TFM_OK);
    CHECK_MSG(strcmp(f.out.data, "2-0 3-1\n") == 0, "'%s'", f.out.data);
    p.format = TFM_VIEW_SOFT;
    CHECK(record_run(&f, &p, NULL) == TFM_OK);
    CHECK_MSG(strcmp(f.out.data, "& \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e ||| 0.1,0.3,0.6,0 "
                                 "0.1,0.1,0.1,0.7 0.7,0.1,0.1,0.1\n") == 0, "'%s'", f.out.data);
    record_free(&f);
}

/* The viewer on weights gathered from a forward pass (TFM_VIEW_LAST: the
 * last layer), and its errors. */
static void test_record_gathered_and_errors(void)
{
    record_fixture f;
    if (!record_make(&f)) return record_free(&f);
    tfm_error err;
    tfm_pass_workspace *ws = NULL;
    CHECK(tfm_pass_workspace_create(f.m, &ws, &err) == TFM_OK);
    const int32_t *sp[1] = {f.src}, *tp[1] = {f.tgt};
    const int sl[1] = {4}, tl[1] = {2};
    tfm_pair_batch batch = {1, sp, sl, tp, tl};
    CHECK(ws && tfm_model_loss(ws, &batch, false, NULL, NULL, NULL, NULL, &err) == TFM_OK);
    tfm_tensor last;
    tfm_tensor_init(&last);
    for (int kind = 0; kind < 3 && ws; kind++) {
        tfm_view_params p = tfm_view_default_params();
        p.kind = (tfm_attention_kind)kind;
        p.format = TFM_VIEW_TSV;
        CHECK(tfm_attention_gather(f.m, ws, 0, p.kind, p.layer, p.head, &f.w, &err) == TFM_OK);
        CHECK(tfm_attention_gather(f.m, ws, 0, p.kind, 1, p.head, &last, &err) == TFM_OK);
        CHECK(same_tensor(&last, &f.w));
        CHECK(record_run(&f, &p, NULL) == TFM_OK);
        CHECK(count(f.out.data, ": layer 1, mean of 4 heads\t") == 1);
        CHECK(count(f.out.data, "\n") == (kind == TFM_ATTENTION_ENCODER ? 4u : 3u) + 2);
    }
    tfm_tensor_free(&last);
    tfm_pass_workspace_free(ws);

    /* weights that are not the pair's; parameters the model cannot take */
    tfm_view_params p = tfm_view_default_params();
    record_weights(&f.w, 1, 1, 3, 3);
    CHECK(record_run(&f, &p, NULL) == TFM_ERR_ARG);
    tfm_viewer *v = (tfm_viewer *)&v;
    p.kind = TFM_ATTENTION_ENCODER;
    p.format = TFM_VIEW_ALIGN;
    CHECK(tfm_viewer_create(f.m, &p, &v, &err) == TFM_ERR_ARG && v == NULL);
    p = tfm_view_default_params();
    p.layer = 2;
    CHECK(tfm_viewer_create(f.m, &p, &v, &err) == TFM_ERR_RANGE);
    CHECK(strstr(err.msg, "layers 0 to 1") != NULL);
    p = tfm_view_default_params();
    p.head = 4;
    CHECK(tfm_viewer_create(f.m, &p, &v, &err) == TFM_ERR_RANGE);
    p = tfm_view_default_params();
    p.max_tokens = -1;
    CHECK(tfm_viewer_create(f.m, &p, &v, &err) == TFM_ERR_ARG);
    tfm_viewer_free(NULL);
    record_free(&f);
}

/* ---- choosing layers, heads and colours ------------------------------------------------- */

static void test_selection(void)
{
    int v = 99;
    CHECK(tfm_view_parse_layer("last", &v) && v == TFM_VIEW_LAST);
    CHECK(tfm_view_parse_layer("all", &v) && v == TFM_VIEW_ALL);
    CHECK(tfm_view_parse_layer("3", &v) && v == 3);
    CHECK(tfm_view_parse_head("mean", &v) && v == TFM_VIEW_MEAN);
    CHECK(tfm_view_parse_head("all", &v) && v == TFM_VIEW_ALL);
    CHECK(tfm_view_parse_head("0", &v) && v == 0);
    v = 7;
    CHECK(!tfm_view_parse_layer("mean", &v) && !tfm_view_parse_head("last", &v));
    CHECK(!tfm_view_parse_layer("-1", &v) && !tfm_view_parse_layer("", &v));
    CHECK(!tfm_view_parse_head("2x", &v) && !tfm_view_parse_head("99999999999", &v));
    CHECK(v == 7);

    tfm_model *m = random_model(5, 0, 0, NULL); /* 2 layers each side, 4 heads */
    if (!m) return;
    tfm_error err;
    CHECK(tfm_view_check_selection(m, TFM_ATTENTION_CROSS, TFM_VIEW_LAST, TFM_VIEW_MEAN, &err) == TFM_OK);
    CHECK(tfm_view_check_selection(m, TFM_ATTENTION_ENCODER, TFM_VIEW_ALL, TFM_VIEW_ALL, &err) == TFM_OK);
    CHECK(tfm_view_check_selection(m, TFM_ATTENTION_DECODER, 1, 3, &err) == TFM_OK);
    CHECK(tfm_view_check_selection(m, TFM_ATTENTION_CROSS, 2, 0, &err) == TFM_ERR_RANGE);
    CHECK(strcmp(err.msg, "layer 2: the model's decoder has layers 0 to 1 (or 'last', 'all')") == 0);
    CHECK(tfm_view_check_selection(m, TFM_ATTENTION_ENCODER, 5, 0, &err) == TFM_ERR_RANGE);
    CHECK(strcmp(err.msg, "layer 5: the model's encoder has layers 0 to 1 (or 'last', 'all')") == 0);
    CHECK(tfm_view_check_selection(m, TFM_ATTENTION_CROSS, 0, 4, &err) == TFM_ERR_RANGE);
    CHECK(strcmp(err.msg, "head 4: the model has heads 0 to 3 (or 'mean', 'all')") == 0);
    CHECK(tfm_view_check_selection(m, TFM_ATTENTION_CROSS, -7, 0, &err) == TFM_ERR_RANGE);
    tfm_model_free(m);
}

/* Sets or (value NULL) unsets an environment variable. */
static void env(const char *name, const char *value)
{
    if (value) setenv(name, value, 1);
    else unsetenv(name);
}

static void test_choose_colors(void)
{
    env("NO_COLOR", NULL);
    env("TERM", "xterm");
    env("COLORTERM", NULL);
    CHECK(tfm_term_choose_colors(TFM_COLOR_NEVER, true) == TFM_TERM_PLAIN);
    CHECK(tfm_term_choose_colors(TFM_COLOR_AUTO, false) == TFM_TERM_PLAIN);
    CHECK(tfm_term_choose_colors(TFM_COLOR_AUTO, true) == TFM_TERM_256);
    CHECK(tfm_term_choose_colors(TFM_COLOR_ALWAYS, false) == TFM_TERM_256);
    env("COLORTERM", "truecolor");
    CHECK(tfm_term_choose_colors(TFM_COLOR_AUTO, true) == TFM_TERM_TRUECOLOR);
    env("COLORTERM", "24bit");
    CHECK(tfm_term_choose_colors(TFM_COLOR_ALWAYS, false) == TFM_TERM_TRUECOLOR);
    env("NO_COLOR", "1");
    CHECK(tfm_term_choose_colors(TFM_COLOR_AUTO, true) == TFM_TERM_PLAIN);
    CHECK(tfm_term_choose_colors(TFM_COLOR_ALWAYS, true) == TFM_TERM_TRUECOLOR);
    env("NO_COLOR", ""); /* set but empty: no effect */
    env("TERM", "dumb");
    CHECK(tfm_term_choose_colors(TFM_COLOR_AUTO, true) == TFM_TERM_PLAIN);
    env("TERM", "xterm");
    CHECK(tfm_term_choose_colors(TFM_COLOR_AUTO, true) == TFM_TERM_TRUECOLOR);
    env("COLORTERM", NULL);
}

/* ---- an inspector: batches of pairs ------------------------------------------------------ */

/* Sets pair p to the n ids of src (and m of tgt), numbered line. */
static void pair_set(tfm_pair *p, const int32_t *src, int n, const int32_t *tgt, int m, size_t line)
{
    tfm_ids_clear(&p->src.ids);
    tfm_ids_clear(&p->tgt.ids);
    for (int i = 0; i < n; i++) tfm_ids_push(&p->src.ids, src[i]);
    for (int i = 0; i < m; i++) tfm_ids_push(&p->tgt.ids, tgt[i]);
    p->line = line;
}

/* Pairs as given: each record is what the forward pass, tfm_attention_gather
 * and tfm_viewer_record give; sources alone: the target is the greedy
 * translation, and the record that of the pair with that target. */
static void test_inspector(void)
{
    record_fixture f;
    if (!record_make(&f)) return record_free(&f);
    tfm_error err;
    const int32_t src2[3] = {f.src[1], f.src[0], TFM_ID_EOS}, tgt2[3] = {f.tgt[1], f.tgt[0], f.tgt[1]};
    tfm_inspect_params p = tfm_inspect_default_params();
    p.view.format = TFM_VIEW_TSV;
    p.view.layer = TFM_VIEW_ALL;
    p.max_pairs = 2;
    tfm_inspector *in = NULL;
    CHECK_MSG(tfm_inspector_create(f.m, &p, &in, &err) == TFM_OK, "%s", err.msg);
    if (!in) return record_free(&f);
    CHECK(tfm_inspector_pair(in, 2) == NULL);
    pair_set(tfm_inspector_pair(in, 0), f.src, 4, f.tgt, 2, 7);
    pair_set(tfm_inspector_pair(in, 1), src2, 3, tgt2, 3, 8);
    CHECK(tfm_inspector_forward(in, 3, &err) == TFM_ERR_ARG);
    CHECK_MSG(tfm_inspector_forward(in, 2, &err) == TFM_OK, "%s", err.msg);
    CHECK(tfm_inspector_record(in, 1, NULL, &f.out, &err) == TFM_OK);
    CHECK(tfm_inspector_record(in, 2, NULL, &f.out, &err) == TFM_ERR_ARG);

    tfm_pass_workspace *ws = NULL;
    tfm_viewer *v = NULL;
    CHECK(tfm_pass_workspace_create(f.m, &ws, &err) == TFM_OK);
    CHECK(tfm_viewer_create(f.m, &p.view, &v, &err) == TFM_OK);
    const int32_t *sp[2] = {f.src, src2}, *tp[2] = {f.tgt, tgt2};
    const int sl[2] = {4, 3}, tl[2] = {2, 3};
    tfm_pair_batch batch = {2, sp, sl, tp, tl};
    CHECK(ws && tfm_model_loss(ws, &batch, false, NULL, NULL, NULL, NULL, &err) == TFM_OK);
    CHECK(ws && tfm_attention_gather(f.m, ws, 1, p.view.kind, p.view.layer, p.view.head, &f.w,
                                     &err) == TFM_OK);
    tfm_view_pair vp = {src2, 3, tgt2, 3, 8};
    CHECK(v && tfm_viewer_record(v, &f.w, &vp, NULL, &f.want, &err) == TFM_OK);
    CHECK(f.out.len > 0 && f.out.len == f.want.len && strcmp(f.out.data, f.want.data) == 0);
    CHECK(count(f.out.data, "sentence 8: cross-attention: layer 1") == 1);
    tfm_inspector_free(in);

    /* sources alone, translated greedily */
    p.translate = true;
    p.view.format = TFM_VIEW_SOFT;
    CHECK_MSG(tfm_inspector_create(f.m, &p, &in, &err) == TFM_OK, "%s", err.msg);
    if (!in) goto done;
    pair_set(tfm_inspector_pair(in, 0), src2, 3, NULL, 0, 1);
    CHECK_MSG(tfm_inspector_forward(in, 1, &err) == TFM_OK, "%s", err.msg);
    tfm_buf_clear(&f.out);
    CHECK(tfm_inspector_record(in, 0, NULL, &f.out, &err) == TFM_OK);
    const tfm_ids *hyp = &tfm_inspector_pair(in, 0)->tgt.ids;

    const int D = f.m->config.d_model;
    float *states = malloc(3 * (size_t)D * sizeof(float));
    const float *st[1] = {states};
    tfm_encoder *enc = NULL;
    tfm_decoder *dec = NULL;
    tfm_search *search = NULL;
    bool ok = states && tfm_encoder_create(f.m, &enc, &err) == TFM_OK &&
              tfm_encoder_forward(enc, 1, &sp[1], &sl[1], states, &err) == TFM_OK &&
              tfm_decoder_create(f.m, &dec, &err) == TFM_OK &&
              tfm_search_create(f.m, &search, &err) == TFM_OK;
    tfm_search_params sparams = tfm_search_default_params();
    sparams.beam = 1; /* greedy, as the inspector's default */
    tfm_search_input sin = {.n_sentences = 1, .states = st, .src_lens = &sl[1]};
    ok = ok && tfm_search_run(search, dec, &sparams, &sin, &err) == TFM_OK;
    CHECK_MSG(ok, "%s", err.msg);
    if (ok) {
        tfm_hypothesis h = tfm_search_result(search, 0).hyps[0];
        CHECK((int)hyp->len == h.len && memcmp(hyp->data, h.ids, hyp->len * sizeof(int32_t)) == 0);
    }
    /* the same record as the pair with that target, given */
    tfm_inspector *given = NULL;
    p.translate = false;
    CHECK(tfm_inspector_create(f.m, &p, &given, &err) == TFM_OK);
    if (given) {
        pair_set(tfm_inspector_pair(given, 0), src2, 3, hyp->data, (int)hyp->len, 1);
        CHECK(tfm_inspector_forward(given, 1, &err) == TFM_OK);
        tfm_buf_clear(&f.want);
        CHECK(tfm_inspector_record(given, 0, NULL, &f.want, &err) == TFM_OK);
        CHECK(f.out.len > 0 && strcmp(f.out.data, f.want.data) == 0);
    }
    tfm_inspector_free(given);
    tfm_search_free(search);
    tfm_decoder_free(dec);
    tfm_encoder_free(enc);
    free(states);
    tfm_inspector_free(in);

    /* what the viewer refuses, and a beam of 0 */
    p.view.layer = 2;
    in = (tfm_inspector *)&in;
    CHECK(tfm_inspector_create(f.m, &p, &in, &err) == TFM_ERR_RANGE && in == NULL);
    p = tfm_inspect_default_params();
    p.beam = 0;
    CHECK(tfm_inspector_create(f.m, &p, &in, &err) == TFM_ERR_ARG && in == NULL);
done:
    tfm_viewer_free(v);
    tfm_pass_workspace_free(ws);
    record_free(&f);
}

int main(void)
{
    test_tmpdir_init("test_view");
    RUN(test_labels);
    RUN(test_xml_escape);
    RUN(test_svg);
    RUN(test_tsv);
    RUN(test_term);
    RUN(test_alignments);
    RUN(test_crop_and_mean);
    RUN(test_record_labels);
    RUN(test_record_formats);
    RUN(test_record_gathered_and_errors);
    RUN(test_selection);
    RUN(test_choose_colors);
    RUN(test_inspector);
    test_tmpdir_cleanup();
    CHECK_DONE();
}
