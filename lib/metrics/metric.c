/* metric.c - the tfm_metric object: parameters, accumulating segment
 * statistics, and scores from them (format.c prints them). */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "metrics_internal.h"

struct tfm_metric {
    tfm_metric_params p;
    size_t n_stats;
    double *totals;
    double *segs;          /* keep_segments: count x n_stats */
    size_t count, segs_cap;
    int min_refs, max_refs;
    double *stats;         /* one segment's statistics (scratch) */
    const char **refs;     /* the references of a segment */
    size_t *ref_lens;
    int refs_cap;
    tfm_metric_scratch s;
};

tfm_metric_params tfm_metric_default_params(tfm_metric_kind kind)
{
    tfm_metric_params p;
    memset(&p, 0, sizeof p);
    p.kind = kind;
    p.tokenize = TFM_BLEU_TOK_13A;
    p.smooth = TFM_BLEU_SMOOTH_EXP;
    p.smooth_value = -1;
    p.max_order = 4;
    p.char_order = 6;
    p.word_order = 0;
    p.beta = 2;
    return p;
}

bool tfm_metric_parse_name(const char *name, tfm_metric_params *p)
{
    static const struct { const char *name; tfm_metric_kind kind; int word_order; } names[] = {
        {"bleu", TFM_METRIC_BLEU, 0}, {"chrf", TFM_METRIC_CHRF, 0},
        {"chrf++", TFM_METRIC_CHRF, 2}, {"ter", TFM_METRIC_TER, 0},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(name, names[i].name) == 0) {
            *p = tfm_metric_default_params(names[i].kind);
            p->word_order = names[i].word_order;
            return true;
        }
    return false;
}

static const char *const tok_names[] = {"13a", "intl", "zh", "char", "none"};
static const char *const smooth_names[] = {"exp", "floor", "add-k", "none"};

bool tfm_bleu_tok_parse(const char *name, tfm_bleu_tok *tok)
{
    for (int i = 0; i < 5; i++)
        if (strcmp(name, tok_names[i]) == 0) {
            *tok = (tfm_bleu_tok)i;
            return true;
        }
    return false;
}

const char *tfm_bleu_tok_name(tfm_bleu_tok tok)
{
    return (unsigned)tok < 5 ? tok_names[tok] : "?";
}

bool tfm_bleu_smooth_parse(const char *name, tfm_bleu_smooth *smooth)
{
    for (int i = 0; i < 4; i++)
        if (strcmp(name, smooth_names[i]) == 0) {
            *smooth = (tfm_bleu_smooth)i;
            return true;
        }
    return false;
}

const char *tfm_bleu_smooth_name(tfm_bleu_smooth smooth)
{
    return (unsigned)smooth < 4 ? smooth_names[smooth] : "?";
}

/* ---- options by name ---------------------------------------------------------------- */

typedef enum option_kind { OPTION_FLAG, OPTION_INT, OPTION_DOUBLE, OPTION_TOK, OPTION_SMOOTH } option_kind;

/* The options of sacreBLEU's command line that set a parameter: where, and
 * what they take (ints and doubles between lo and hi). */
static const struct metric_option {
    const char *name;
    option_kind kind;
    size_t offset;
    double lo, hi;
} metric_options[] = {
#define PARAM(name, kind, field, lo, hi) {name, kind, offsetof(tfm_metric_params, field), lo, hi}
    PARAM("tokenize", OPTION_TOK, tokenize, 0, 0),
    PARAM("lowercase", OPTION_FLAG, lowercase, 0, 0),
    PARAM("smooth", OPTION_SMOOTH, smooth, 0, 0),
    PARAM("smooth-value", OPTION_DOUBLE, smooth_value, 0, 1e9),
    PARAM("char-order", OPTION_INT, char_order, 0, 10),
    PARAM("word-order", OPTION_INT, word_order, 0, 6),
    PARAM("beta", OPTION_INT, beta, 1, 100),
    PARAM("whitespace", OPTION_FLAG, whitespace, 0, 0),
    PARAM("eps-smoothing", OPTION_FLAG, eps_smoothing, 0, 0),
    PARAM("case-sensitive", OPTION_FLAG, case_sensitive, 0, 0),
    PARAM("normalized", OPTION_FLAG, normalized, 0, 0),
    PARAM("no-punct", OPTION_FLAG, no_punct, 0, 0),
#undef PARAM
};

/* "--NAME: 'VALUE' is not one of: a, b, c" for a choice among names[n]. */
static tfm_status not_one_of(const char *option, const char *value, const char *const *names,
                             int n, tfm_error *err)
{
    char list[128] = "";
    for (int i = 0; i < n; i++) {
        if (i) strncat(list, ", ", sizeof list - strlen(list) - 1);
        strncat(list, names[i], sizeof list - strlen(list) - 1);
    }
    return tfm_error_set(err, TFM_ERR_ARG, "--%s: '%.40s' is not one of: %s", option, value, list);
}

/* A whole number in [lo, hi] (integer: no fraction), or what was wrong. */
static tfm_status number_in(const char *option, const char *value, bool integer, double lo,
                            double hi, double *out, tfm_error *err)
{
    char *end;
    errno = 0;
    double v = integer ? (double)strtoll(value, &end, 10) : strtod(value, &end);
    if (end == value || *end || errno == ERANGE || !isfinite(v))
        return tfm_error_set(err, TFM_ERR_ARG, "--%s: '%.40s' is not %s", option, value,
                             integer ? "an integer" : "a number");
    if (v < lo || v > hi)
        return tfm_error_set(err, TFM_ERR_ARG, "--%s: %g is out of range (%g to %g)", option, v,
                             lo, hi);
    *out = v;
    return TFM_OK;
}

tfm_status tfm_metric_params_set(tfm_metric_params *p, const char *option, const char *value,
                                 tfm_error *err)
{
    const struct metric_option *o = NULL;
    for (size_t i = 0; i < sizeof metric_options / sizeof metric_options[0] && !o; i++)
        if (strcmp(option, metric_options[i].name) == 0) o = &metric_options[i];
    if (!o) return tfm_error_set(err, TFM_ERR_ARG, "--%.40s is not an option of the metrics", option);
    char *at = (char *)p + o->offset;
    if (o->kind == OPTION_FLAG) {
        *(bool *)at = true;
        return TFM_OK;
    }
    if (!value) return tfm_error_set(err, TFM_ERR_ARG, "--%s needs a value", option);
    double v;
    tfm_status st;
    switch (o->kind) {
    case OPTION_TOK:
        return tfm_bleu_tok_parse(value, &p->tokenize) ? TFM_OK
                                                       : not_one_of(option, value, tok_names, 5, err);
    case OPTION_SMOOTH:
        return tfm_bleu_smooth_parse(value, &p->smooth)
                   ? TFM_OK : not_one_of(option, value, smooth_names, 4, err);
    case OPTION_INT:
        if ((st = number_in(option, value, true, o->lo, o->hi, &v, err))) return st;
        *(int *)at = (int)v;
        return TFM_OK;
    case OPTION_DOUBLE:
        if ((st = number_in(option, value, false, o->lo, o->hi, &v, err))) return st;
        *(double *)at = v;
        return TFM_OK;
    case OPTION_FLAG: break;
    }
    return TFM_OK;
}

/* ---- creation ----------------------------------------------------------------------- */

static tfm_status check_params(const tfm_metric_params *p, tfm_error *err)
{
    switch (p->kind) {
    case TFM_METRIC_BLEU:
        if ((unsigned)p->tokenize > TFM_BLEU_TOK_NONE)
            return tfm_error_set(err, TFM_ERR_ARG, "unknown BLEU tokenizer %d", (int)p->tokenize);
        if ((unsigned)p->smooth > TFM_BLEU_SMOOTH_NONE)
            return tfm_error_set(err, TFM_ERR_ARG, "unknown BLEU smoothing %d", (int)p->smooth);
        if (p->max_order < 1 || p->max_order > TFM_BLEU_MAX_ORDER)
            return tfm_error_set(err, TFM_ERR_ARG, "BLEU n-gram order %d is not in 1..%d",
                                 p->max_order, TFM_BLEU_MAX_ORDER);
        return TFM_OK;
    case TFM_METRIC_CHRF:
        if (p->char_order < 0 || p->word_order < 0 || p->char_order + p->word_order < 1 ||
            p->char_order + p->word_order > TFM_CHRF_MAX_ORDER)
            return tfm_error_set(err, TFM_ERR_ARG,
                                 "chrF orders %d (characters) + %d (words) must add up to 1..%d",
                                 p->char_order, p->word_order, TFM_CHRF_MAX_ORDER);
        if (p->beta < 1)
            return tfm_error_set(err, TFM_ERR_ARG, "chrF beta %d is not positive", p->beta);
        return TFM_OK;
    case TFM_METRIC_TER:
        return TFM_OK;
    }
    return tfm_error_set(err, TFM_ERR_ARG, "unknown metric %d", (int)p->kind);
}

static size_t stats_size(const tfm_metric_params *p)
{
    switch (p->kind) {
    case TFM_METRIC_BLEU: return 2 + 2 * (size_t)p->max_order;
    case TFM_METRIC_CHRF: return 3 * (size_t)(p->char_order + p->word_order);
    case TFM_METRIC_TER: return 2;
    }
    return 0;
}

tfm_status tfm_metric_scratch_refs(tfm_metric_scratch *s, int n)
{
    if (n <= s->refs_cap) return TFM_OK;
    tfm_ids *r = realloc(s->refs, (size_t)n * sizeof *r);
    if (!r) return TFM_ERR_NOMEM;
    for (int i = s->refs_cap; i < n; i++) tfm_ids_init(&r[i]);
    s->refs = r;
    s->refs_cap = n;
    return TFM_OK;
}

void tfm_metric_scratch_free(tfm_metric_scratch *s)
{
    tfm_ids_free(&s->text);
    tfm_ids_free(&s->tmp);
    tfm_ids_free(&s->tmp2);
    tfm_ids_free(&s->hyp);
    for (int i = 0; i < s->refs_cap; i++) tfm_ids_free(&s->refs[i]);
    free(s->refs);
    tfm_py_words_free(&s->hyp_words);
    tfm_py_words_free(&s->ref_words);
    tfm_ngrams_free(&s->ngrams);
    tfm_ids_free(&s->tokens);
    tfm_ids_free(&s->pos_ids);
    tfm_counts_free(&s->hyp_count);
    tfm_counts_free(&s->ref_count);
    tfm_counts_free(&s->ref_max);
    tfm_counts_free(&s->order_of);
    tfm_ids_free(&s->touched);
    tfm_ids_free(&s->hyp_num);
    tfm_ids_free(&s->ref_num);
    memset(s, 0, sizeof *s);
}

tfm_status tfm_metric_create(const tfm_metric_params *p, tfm_metric **out, tfm_error *err)
{
    *out = NULL;
    tfm_status st = check_params(p, err);
    if (st != TFM_OK) return st;
    tfm_metric *m = calloc(1, sizeof *m);
    if (!m) return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    m->p = *p;
    m->n_stats = stats_size(p);
    m->totals = calloc(m->n_stats, sizeof *m->totals);
    m->stats = calloc(m->n_stats, sizeof *m->stats);
    if (!m->totals || !m->stats || tfm_metric_scratch_refs(&m->s, 1) != TFM_OK) {
        tfm_metric_free(m);
        return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    }
    *out = m;
    return TFM_OK;
}

void tfm_metric_free(tfm_metric *m)
{
    if (!m) return;
    free(m->totals);
    free(m->segs);
    free(m->stats);
    free(m->refs);
    free(m->ref_lens);
    tfm_metric_scratch_free(&m->s);
    free(m);
}

const tfm_metric_params *tfm_metric_get_params(const tfm_metric *m)
{
    return &m->p;
}

size_t tfm_metric_n_stats(const tfm_metric *m)
{
    return m->n_stats;
}

/* ---- segments ------------------------------------------------------------------------- */

tfm_status tfm_metric_segment(tfm_metric *m, const char *hyp, size_t hyp_len,
                              const char *const *refs, const size_t *ref_lens, int n_refs,
                              double *stats, int *n_used, tfm_error *err)
{
    if (n_refs < 1) return tfm_error_set(err, TFM_ERR_ARG, "a segment needs a reference");
    if (n_refs > TFM_METRIC_MAX_REFS)
        return tfm_error_set(err, TFM_ERR_ARG, "%d references; a segment has at most %d", n_refs,
                             TFM_METRIC_MAX_REFS);
    if (n_refs > m->refs_cap) {
        const char **r = realloc(m->refs, (size_t)n_refs * sizeof *r);
        if (r) m->refs = r;
        size_t *l = realloc(m->ref_lens, (size_t)n_refs * sizeof *l);
        if (l) m->ref_lens = l;
        if (!r || !l) return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
        m->refs_cap = n_refs;
    }
    /* Metric._cache_references leaves out undefined (None) references only:
     * an empty one, or one of spaces that the command line's rstrip()
     * empties, is a reference of no words and is scored. */
    for (int i = 0; i < n_refs; i++) {
        m->refs[i] = refs[i];
        m->ref_lens[i] = ref_lens[i];
    }
    const int used = n_refs;
    if (n_used) *n_used = used;
    switch (m->p.kind) {
    case TFM_METRIC_BLEU:
        return tfm_bleu_segment(&m->p, &m->s, hyp, hyp_len, m->refs, m->ref_lens, used, stats, err);
    case TFM_METRIC_CHRF:
        return tfm_chrf_segment(&m->p, &m->s, hyp, hyp_len, m->refs, m->ref_lens, used, stats, err);
    case TFM_METRIC_TER:
        return tfm_ter_segment(&m->p, &m->s, hyp, hyp_len, m->refs, m->ref_lens, used, stats, err);
    }
    return tfm_error_set(err, TFM_ERR_ARG, "unknown metric");
}

tfm_status tfm_metric_add_stats(tfm_metric *m, const double *stats, int n_used, tfm_error *err)
{
    if (m->p.keep_segments) {
        if (m->count == m->segs_cap) {
            size_t cap = m->segs_cap ? 2 * m->segs_cap : 1024;
            double *segs = realloc(m->segs, cap * m->n_stats * sizeof *segs);
            if (!segs) return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
            m->segs = segs;
            m->segs_cap = cap;
        }
        memcpy(m->segs + m->count * m->n_stats, stats, m->n_stats * sizeof *stats);
    }
    /* In segment order, as sacreBLEU's sum_of_lists adds them. */
    for (size_t k = 0; k < m->n_stats; k++) m->totals[k] += stats[k];
    if (m->count == 0 || n_used < m->min_refs) m->min_refs = n_used;
    if (m->count == 0 || n_used > m->max_refs) m->max_refs = n_used;
    m->count++;
    return TFM_OK;
}

tfm_status tfm_metric_add(tfm_metric *m, const char *hyp, size_t hyp_len,
                          const char *const *refs, const size_t *ref_lens, int n_refs,
                          tfm_error *err)
{
    int used;
    tfm_status st = tfm_metric_segment(m, hyp, hyp_len, refs, ref_lens, n_refs, m->stats, &used, err);
    if (st != TFM_OK) return st;
    return tfm_metric_add_stats(m, m->stats, used, err);
}

size_t tfm_metric_count(const tfm_metric *m)
{
    return m->count;
}

const double *tfm_metric_totals(const tfm_metric *m)
{
    return m->totals;
}

const double *tfm_metric_segments(const tfm_metric *m)
{
    return m->p.keep_segments ? m->segs : NULL;
}

int tfm_metric_nrefs(const tfm_metric *m)
{
    if (m->count == 0) return 0;
    return m->min_refs == m->max_refs ? m->min_refs : -1;
}

/* ---- scores ------------------------------------------------------------------------------ */

void tfm_metric_compute(const tfm_metric *m, const double *stats, tfm_score *out)
{
    switch (m->p.kind) {
    case TFM_METRIC_BLEU:
        tfm_bleu_compute(&m->p, stats, out);
        return;
    case TFM_METRIC_CHRF:
        memset(out, 0, sizeof *out);
        out->score = tfm_chrf_f_score(&m->p, stats);
        return;
    case TFM_METRIC_TER: {
        /* TER._compute_score_from_stats */
        memset(out, 0, sizeof *out);
        double edits = stats[0], ref_length = stats[1], score;
        /* empty references: 1 (100), even for an empty hypothesis */
        score = ref_length > 0 ? edits / ref_length : 1.0;
        out->score = 100 * score;
        out->num_edits = edits;
        out->ref_length = ref_length;
        return;
    }
    }
}

void tfm_metric_corpus_score(const tfm_metric *m, tfm_score *out)
{
    tfm_metric_compute(m, m->totals, out);
}
