/* format.c - printing scores, signatures and paired tests exactly as
 * sacreBLEU 2.3.1 does (sacrebleu/metrics/base.py: Score.format,
 * Signature.format; its command line's JSON is json.dumps(indent=1,
 * ensure_ascii=False)).
 *
 * The JSON is built with cJSON, which escapes every string; its numbers are
 * cJSON raw values holding the text sacreBLEU shows (tfm_json_number: "48.5",
 * "0.0"; cJSON would print 48.5 and 0).  Only the layout is ours: cJSON_Print
 * indents with tabs and puts no space after ',' and ':', and sacreBLEU's
 * output, which people diff against ours, does both the Python way. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "metrics_internal.h"

void tfm_metric_name(const tfm_metric *m, char *out, size_t size)
{
    const tfm_metric_params *p = tfm_metric_get_params(m);
    switch (p->kind) {
    case TFM_METRIC_BLEU: snprintf(out, size, "BLEU"); return;
    case TFM_METRIC_TER: snprintf(out, size, "TER"); return;
    case TFM_METRIC_CHRF: {
        /* CHRFScore: f'chrF{beta}' + '+' * word_order */
        int n = snprintf(out, size, "chrF%d", p->beta);
        for (int i = 0; i < p->word_order && n >= 0 && (size_t)n + 1 < size; i++) out[n++] = '+';
        if (n >= 0 && (size_t)n < size) out[n] = 0;
        return;
    }
    }
    snprintf(out, size, "?");
}

tfm_score_format tfm_score_format_default(void)
{
    tfm_score_format f;
    memset(&f, 0, sizeof f);
    f.width = 1;
    f.nrefs = 1;
    return f;
}

/* The signature as (key, value) pairs, in sacreBLEU's order. */
typedef struct sig_pair {
    const char *key;
    char value[32];
} sig_pair;

static int signature_pairs(const tfm_metric *m, const tfm_score_format *f, sig_pair *pairs)
{
    int n = 0;
    const tfm_metric_params *p = tfm_metric_get_params(m);
#define PAIR(k, ...) (pairs[n].key = (k), snprintf(pairs[n].value, sizeof pairs[n].value, __VA_ARGS__), n++)
    if (f->nrefs < 0) PAIR("nrefs", "var");
    else PAIR("nrefs", "%d", f->nrefs);
    if (f->n_bootstrap > 0) {
        PAIR("bs", "%d", f->n_bootstrap);
        PAIR("seed", "%llu", (unsigned long long)f->seed);
    }
    switch (p->kind) {
    case TFM_METRIC_BLEU:
        PAIR("case", "%s", p->lowercase ? "lc" : "mixed");
        PAIR("eff", "%s", p->effective_order ? "yes" : "no");
        PAIR("tok", "%s", tfm_bleu_tok_name(p->tokenize));
        if (p->smooth == TFM_BLEU_SMOOTH_FLOOR || p->smooth == TFM_BLEU_SMOOTH_ADD_K) {
            double v = p->smooth_value >= 0 ? p->smooth_value
                                            : tfm_bleu_smooth_default_value(p->smooth);
            PAIR("smooth", "%s[%.2f]", tfm_bleu_smooth_name(p->smooth), v);
        } else {
            PAIR("smooth", "%s", tfm_bleu_smooth_name(p->smooth));
        }
        break;
    case TFM_METRIC_CHRF:
        PAIR("case", "%s", p->lowercase ? "lc" : "mixed");
        PAIR("eff", "%s", p->eps_smoothing ? "no" : "yes");
        PAIR("nc", "%d", p->char_order);
        PAIR("nw", "%d", p->word_order);
        PAIR("space", "%s", p->whitespace ? "yes" : "no");
        break;
    case TFM_METRIC_TER:
        PAIR("case", "%s", p->case_sensitive ? "mixed" : "lc");
        PAIR("tok", "tercom");
        PAIR("norm", "%s", p->normalized ? "yes" : "no");
        PAIR("punct", "%s", p->no_punct ? "no" : "yes");
        PAIR("asian", "no");
        break;
    }
    PAIR("version", TFM_SACREBLEU_VERSION);
#undef PAIR
    return n;
}

tfm_status tfm_metric_signature(const tfm_metric *m, const tfm_score_format *f, tfm_buf *out)
{
    sig_pair pairs[16];
    int n = signature_pairs(m, f, pairs);
    tfm_status s = TFM_OK;
    for (int i = 0; i < n && s == TFM_OK; i++)
        s = tfm_buf_printf(out, "%s%s:%s", i ? "|" : "", pairs[i].key, pairs[i].value);
    return s;
}

tfm_status tfm_json_number(double x, int width, tfm_buf *out)
{
    char text[64];
    int n = snprintf(text, sizeof text, "%.*f", width, x);
    if (n < 0 || (size_t)n >= sizeof text) return tfm_buf_printf(out, "%.17g", x);
    char *dot = strchr(text, '.');
    if (!dot) return tfm_buf_printf(out, "%s.0", text);
    /* Python's repr: the shortest digits, but at least one after the point. */
    while (n > 0 && text[n - 1] == '0' && text + n - 1 > dot + 1) text[--n] = 0;
    return tfm_buf_append(out, text, (size_t)n);
}

/* The verbose part of a BLEU score (BLEUScore._verbose). */
static tfm_status bleu_verbose(const tfm_score *s, tfm_buf *out)
{
    tfm_status st = TFM_OK;
    for (int i = 0; i < s->order && st == TFM_OK; i++)
        st = tfm_buf_printf(out, "%s%.1f", i ? "/" : "", s->precisions[i]);
    if (st == TFM_OK)
        st = tfm_buf_printf(out, " (BP = %.3f ratio = %.3f hyp_len = %lld ref_len = %lld)", s->bp,
                            s->ratio, (long long)s->hyp_len, (long long)s->ref_len);
    return st;
}

#define MU "\xce\xbc"     /* U+03BC */
#define PLUSMINUS "\xc2\xb1" /* U+00B1 */

/* ---- JSON ------------------------------------------------------------------------------ */

/* Appends the cJSON text of one value (a scalar, or a key as a string). */
static tfm_status dump_scalar(const cJSON *j, tfm_buf *out)
{
    char *text = cJSON_PrintUnformatted(j);
    if (!text) return TFM_ERR_NOMEM;
    tfm_status st = tfm_buf_append(out, text, strlen(text));
    cJSON_free(text);
    return st;
}

/* Appends j as Python's json.dumps(j, indent=1, ensure_ascii=False) lays it
 * out, except that containers at depth `expand` and deeper (the root is at
 * depth 0) go on one line with json.dumps's separators ", " and ": ". */
static tfm_status dump(const cJSON *j, int depth, int expand, tfm_buf *out)
{
    if (!cJSON_IsObject(j) && !cJSON_IsArray(j)) return dump_scalar(j, out);
    bool object = cJSON_IsObject(j), lines = depth < expand;
    tfm_status st = tfm_buf_putc(out, object ? '{' : '[');
    for (const cJSON *c = j->child; c && st == TFM_OK; c = c->next) {
        if (c != j->child) st = tfm_buf_append(out, lines ? "," : ", ", lines ? 1 : 2);
        if (st == TFM_OK && lines) st = tfm_buf_printf(out, "\n%*s", depth + 1, "");
        if (st == TFM_OK && object) {
            cJSON *key = cJSON_CreateStringReference(c->string);
            st = key ? dump_scalar(key, out) : TFM_ERR_NOMEM;
            cJSON_Delete(key);
            if (st == TFM_OK) st = tfm_buf_append(out, ": ", 2);
        }
        if (st == TFM_OK) st = dump(c, depth + 1, expand, out);
    }
    if (st == TFM_OK && lines && j->child) st = tfm_buf_printf(out, "\n%*s", depth, "");
    if (st == TFM_OK) st = tfm_buf_putc(out, object ? '}' : ']');
    return st;
}

/* Adds x to obj as sacreBLEU's JSON shows a number rounded to width
 * decimals (tfm_json_number), as a cJSON raw value; false when out of memory. */
static bool add_rounded(cJSON *obj, const char *key, double x, int width)
{
    tfm_buf b;
    tfm_buf_init(&b);
    bool ok = tfm_json_number(x, width, &b) == TFM_OK && cJSON_AddRawToObject(obj, key, b.data);
    tfm_buf_free(&b);
    return ok;
}

/* Adds "score", "signature" and the rest of what tfm_metric_format's JSON
 * shows to obj. */
static bool add_score(cJSON *obj, const tfm_metric *m, const tfm_score_format *f,
                      const tfm_score *s, const char *sig, const char *verbose, bool show_ci)
{
    int w = f->width;
    bool ok = add_rounded(obj, "score", s->score, w) && cJSON_AddStringToObject(obj, "signature", sig);
    if (ok && show_ci) {
        char text[128];
        snprintf(text, sizeof text, MU " = %.*f " PLUSMINUS " %.*f", w, f->mean, w, f->ci);
        ok = add_rounded(obj, "confidence_mean", f->mean, w) &&
             add_rounded(obj, "confidence_var", f->ci, w) &&
             cJSON_AddStringToObject(obj, "confidence", text);
    }
    if (ok && verbose[0]) ok = cJSON_AddStringToObject(obj, "verbose_score", verbose) != NULL;
    sig_pair pairs[16];
    int n = signature_pairs(m, f, pairs);
    for (int i = 0; i < n && ok; i++) ok = cJSON_AddStringToObject(obj, pairs[i].key, pairs[i].value);
    return ok;
}

/* Appends root laid out by dump and deletes it; NULL (cJSON out of memory) fails. */
static tfm_status dump_and_delete(cJSON *root, bool ok, int expand, tfm_buf *out)
{
    tfm_status st = root && ok ? dump(root, 0, expand, out) : TFM_ERR_NOMEM;
    cJSON_Delete(root);
    return st;
}

/* ---- scores ------------------------------------------------------------------------------ */

/* "33.1 (μ = 33.0 ± 1.0)": the score with its interval when mean > 0, as
 * Score.format shows it ("if self._mean > 0"). */
static tfm_status score_text(double score, bool has_ci, double mean, double ci, int w, tfm_buf *out)
{
    tfm_status st = tfm_buf_printf(out, "%.*f", w, score);
    if (st == TFM_OK && has_ci && mean > 0)
        st = tfm_buf_printf(out, " (" MU " = %.*f " PLUSMINUS " %.*f)", w, mean, w, ci);
    return st;
}

tfm_status tfm_metric_format(const tfm_metric *m, const tfm_score *s, const tfm_score_format *f,
                             tfm_buf *out)
{
    char name[40];
    tfm_metric_name(m, name, sizeof name);
    tfm_buf sig, verbose;
    tfm_buf_init(&sig);
    tfm_buf_init(&verbose);
    bool show_ci = f->has_ci && f->mean > 0;
    tfm_status st = tfm_metric_signature(m, f, &sig);
    if (st == TFM_OK && tfm_metric_get_params(m)->kind == TFM_METRIC_BLEU) st = bleu_verbose(s, &verbose);
    if (st != TFM_OK) goto done;

    if (f->score_only) { /* Score.format: score_only wins over JSON */
        st = score_text(s->score, f->has_ci, f->mean, f->ci, f->width, out);
    } else if (!f->json) {
        st = tfm_buf_printf(out, "%s|%s = ", name, sig.data);
        if (st == TFM_OK) st = score_text(s->score, f->has_ci, f->mean, f->ci, f->width, out);
        if (st == TFM_OK && verbose.len) st = tfm_buf_printf(out, " %s", verbose.data);
    } else {
        /* json.dumps(d, indent=1, ensure_ascii=False), or one line when compact. */
        cJSON *root = cJSON_CreateObject();
        bool ok = root && cJSON_AddStringToObject(root, "name", name) &&
                  add_score(root, m, f, s, sig.data ? sig.data : "", verbose.data ? verbose.data : "",
                            show_ci);
        st = dump_and_delete(root, ok, f->compact ? 0 : 1, out);
    }
done:
    tfm_buf_free(&sig);
    tfm_buf_free(&verbose);
    return st;
}

/* ---- paired tests -------------------------------------------------------------------------- */

/* Row i's numbers: the baseline's are in every pairing, so in row 1's. */
static void row_numbers(const tfm_paired_row *rows, int i, double *score, double *mean, double *ci)
{
    const tfm_paired_result *r = i ? &rows[i].r : &rows[1].r;
    *score = i ? r->sys_score : r->base_score;
    *mean = i ? r->sys_mean : r->base_mean;
    *ci = i ? r->sys_ci : r->base_ci;
}

/* Adds an integer to obj as a raw value (cJSON would print 2^63 as 9.22e+18). */
static bool add_integer(cJSON *obj, const char *key, unsigned long long v)
{
    char text[32];
    snprintf(text, sizeof text, "%llu", v);
    return cJSON_AddRawToObject(obj, key, text) != NULL;
}

static tfm_status paired_json(const tfm_paired_row *rows, int n, const tfm_score_format *f,
                              const char *name, const char *sig, tfm_buf *out)
{
    cJSON *root = cJSON_CreateObject(), *systems = NULL;
    bool ok = root && cJSON_AddStringToObject(root, "name", name) &&
              cJSON_AddStringToObject(root, "signature", sig) &&
              cJSON_AddStringToObject(root, "test", "paired-bs") &&
              add_integer(root, "n_samples", (unsigned long long)f->n_bootstrap) &&
              add_integer(root, "seed", (unsigned long long)f->seed) &&
              (systems = cJSON_AddArrayToObject(root, "systems"));
    for (int i = 0; i < n && ok; i++) {
        double score, mean, ci;
        row_numbers(rows, i, &score, &mean, &ci);
        cJSON *sys = cJSON_CreateObject();
        if (!sys || !cJSON_AddItemToArray(systems, sys)) {
            cJSON_Delete(sys);
            ok = false;
            break;
        }
        ok = cJSON_AddStringToObject(sys, "file", rows[i].file) &&
             cJSON_AddBoolToObject(sys, "baseline", i == 0) &&
             add_rounded(sys, "score", score, f->width) &&
             add_rounded(sys, "confidence_mean", mean, f->width) &&
             add_rounded(sys, "confidence_var", ci, f->width) &&
             (i == 0 || add_rounded(sys, "p_value", rows[i].r.p_value, 4));
    }
    return dump_and_delete(root, ok, 2, out);
}

tfm_status tfm_paired_format(const tfm_metric *m, const tfm_paired_row *rows, int n,
                             const tfm_score_format *f, tfm_buf *out)
{
    if (n < 2) return TFM_ERR_ARG;
    char name[40];
    tfm_metric_name(m, name, sizeof name);
    tfm_buf sig;
    tfm_buf_init(&sig);
    tfm_status st = tfm_metric_signature(m, f, &sig);
    if (st != TFM_OK) goto done;
    if (f->score_only) { /* as sacreBLEU: the numbers alone, even with -f json */
        for (int i = 0; i < n && st == TFM_OK; i++) {
            double score, mean, ci;
            row_numbers(rows, i, &score, &mean, &ci);
            st = tfm_buf_printf(out, "%s%.*f", i ? "\n" : "", f->width, score);
            if (st == TFM_OK && i) st = tfm_buf_printf(out, "\t%.4f", rows[i].r.p_value);
        }
    } else if (f->json) {
        st = paired_json(rows, n, f, name, sig.data, out);
    } else {
        /* The signature, then a tab-separated row per system: role, score
         * (μ = mean ± interval), p-value (starred below 0.05), label. */
        st = tfm_buf_printf(out, "%s|%s", name, sig.data);
        for (int i = 0; i < n && st == TFM_OK; i++) {
            double score, mean, ci, p = rows[i].r.p_value;
            row_numbers(rows, i, &score, &mean, &ci);
            st = tfm_buf_printf(out, "\n%s\t", i ? "system" : "baseline");
            if (st == TFM_OK) st = score_text(score, true, mean, ci, f->width, out);
            if (st == TFM_OK && i) st = tfm_buf_printf(out, "\t(p = %.4f)%s\t", p, p < 0.05 ? "*" : "");
            else if (st == TFM_OK) st = tfm_buf_append(out, "\t\t", 2);
            if (st == TFM_OK)
                st = tfm_buf_printf(out, "%s", rows[i].label ? rows[i].label : rows[i].file);
        }
    }
done:
    tfm_buf_free(&sig);
    return st;
}
