/* ter.c - Translation Edit Rate (Snover et al., 2006) as sacreBLEU 2.3.1
 * computes it (sacrebleu/metrics/ter.py and lib_ter.py, a reimplementation
 * of Tercom).
 *
 * TER = (shifts + insertions + deletions + substitutions) / reference words,
 * where a shift moves a block of hypothesis words elsewhere.  The shifts
 * are found greedily: while some shift lowers the word edit distance, take
 * the best (largest gain, then longest block, then earliest start, then
 * earliest target) among the candidates Tercom allows: blocks of at most 10
 * words that match the reference somewhere within 50 positions, that are
 * wrong where they are and whose reference position is wrong too.  At most
 * 1000 candidates are tried per segment.  The edit distance is computed in
 * a band around the diagonal (25 cells each side, widened for very unequal
 * lengths) and its alignment decides which words count as wrong; ties
 * between edit operations are broken in sacreBLEU's order.  With several
 * references the fewest edits count, against the mean reference length.
 *
 * Each function below is named after the one of lib_ter.py it follows. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "metrics_internal.h"

#define MAX_SHIFT_SIZE 10
#define MAX_SHIFT_DIST 50
#define BEAM_WIDTH 25
#define MAX_SHIFT_CANDIDATES 1000
#define INF_COST ((int64_t)10000000000000000LL) /* lib_ter's _INT_INFINITY, 1e16 */
/* The edit distance matrix is (hyp words + 1) x (ref words + 1), as in
 * sacreBLEU; beyond this many cells a segment is refused rather than
 * exhausting memory. */
#define MAX_CELLS ((size_t)1 << 28)

enum { OP_NOP = ' ', OP_SUB = 's', OP_INS = 'i', OP_DEL = 'd', OP_UNDEF = 'x' };

/* BeamEditDistance: the edit distance of hypotheses against one reference.
 * Row i of the matrix depends only on the first i hypothesis words, so rows
 * are kept and reused for the next hypothesis that starts with the same
 * words (sacreBLEU keeps them in a prefix tree to the same end). */
typedef struct beam_ed {
    const int32_t *ref;
    size_t nr, nh;
    int64_t *cost;       /* (nh + 1) x (nr + 1) */
    char *op;
    int32_t *rows_for;   /* the words rows 1..valid were computed for */
    size_t valid;        /* rows 0..valid hold results */
    double ratio;
    int64_t beam;
} beam_ed;

static tfm_status beam_ed_init(beam_ed *e, const int32_t *ref, size_t nr, size_t nh)
{
    memset(e, 0, sizeof *e);
    e->ref = ref;
    e->nr = nr;
    e->nh = nh;
    size_t cells = (nh + 1) * (nr + 1);
    e->cost = malloc(cells * sizeof *e->cost);
    e->op = malloc(cells);
    e->rows_for = malloc((nh + 1) * sizeof *e->rows_for);
    if (!e->cost || !e->op || !e->rows_for) return TFM_ERR_NOMEM;
    /* Row 0: insert every reference word. */
    for (size_t j = 0; j <= nr; j++) {
        e->cost[j] = (int64_t)j;
        e->op[j] = OP_INS;
    }
    e->ratio = nh ? (double)nr / (double)nh : 1.0;
    e->beam = BEAM_WIDTH < e->ratio / 2 ? (int64_t)ceil(e->ratio / 2 + BEAM_WIDTH) : BEAM_WIDTH;
    return TFM_OK;
}

static void beam_ed_free(beam_ed *e)
{
    free(e->cost);
    free(e->op);
    free(e->rows_for);
}

/* _edit_distance: the distance of words[0..nh) to the reference.  With
 * trace, also the edit operations (hypothesis into reference) into
 * trace[0..*trace_len). */
static int64_t beam_ed_run(beam_ed *e, const int32_t *words, char *trace, size_t *trace_len)
{
    size_t nh = e->nh, nr = e->nr, w = nr + 1;
    size_t start = 0; /* rows 1..start can be kept */
    while (start < e->valid && e->rows_for[start] == words[start]) start++;
    for (size_t i = start + 1; i <= nh; i++) {
        int64_t *row = e->cost + i * w, *up = row - w;
        char *op = e->op + i * w;
        for (size_t j = 0; j < w; j++) {
            row[j] = INF_COST;
            op[j] = OP_UNDEF;
        }
        int64_t pseudo_diag = (int64_t)floor((double)i * e->ratio);
        int64_t min_j = pseudo_diag - e->beam, max_j = pseudo_diag + e->beam;
        if (min_j < 0) min_j = 0;
        if (max_j > (int64_t)w) max_j = (int64_t)w;
        if (i == nh) max_j = (int64_t)w;
        for (int64_t jj = min_j; jj < max_j; jj++) {
            size_t j = (size_t)jj;
            if (j == 0) {
                row[0] = up[0] + 1;
                op[0] = OP_DEL;
                continue;
            }
            bool same = words[i - 1] == e->ref[j - 1];
            /* sacreBLEU's preference (it flips the trace later): match or
             * substitution, then deletion, then insertion; a later option
             * wins only when strictly cheaper. */
            int64_t c = up[j - 1] + (same ? 0 : 1);
            if (row[j] > c) { row[j] = c; op[j] = same ? OP_NOP : OP_SUB; }
            c = up[j] + 1;
            if (row[j] > c) { row[j] = c; op[j] = OP_DEL; }
            c = row[j - 1] + 1;
            if (row[j] > c) { row[j] = c; op[j] = OP_INS; }
        }
        e->rows_for[i - 1] = words[i - 1];
    }
    e->valid = nh; /* rows 1..nh now belong to words[0..nh) */
    if (trace) {
        /* Walk back from the corner; the trace is built reversed. */
        size_t i = nh, j = nr, n = 0;
        while (i > 0 || j > 0) {
            char o = e->op[i * w + j];
            trace[n++] = o;
            if (o == OP_SUB || o == OP_NOP) { i--; j--; }
            else if (o == OP_INS) j--;
            else if (o == OP_DEL) i--;
            else { n = 0; break; } /* unreachable: the band always connects */
        }
        for (size_t a = 0, b = n ? n - 1 : 0; a < b; a++, b--) {
            char t = trace[a];
            trace[a] = trace[b];
            trace[b] = t;
        }
        *trace_len = n;
    }
    return e->cost[nh * w + nr];
}

/* Appends words[a:b] (Python slice: clipped to [0, n]) to out at *k. */
static void slice(const int32_t *words, int64_t n, int64_t a, int64_t b, int32_t *out, size_t *k)
{
    if (a < 0) a = 0;
    if (b > n) b = n;
    for (int64_t i = a; i < b; i++) out[(*k)++] = words[i];
}

/* _perform_shift: moves words[start:start+length] to before position target. */
static void perform_shift(const int32_t *words, int64_t n, int64_t start, int64_t length,
                          int64_t target, int32_t *out)
{
    size_t k = 0;
    if (target < start) {
        slice(words, n, 0, target, out, &k);
        slice(words, n, start, start + length, out, &k);
        slice(words, n, target, start, out, &k);
        slice(words, n, start + length, n, out, &k);
    } else if (target > start + length) {
        slice(words, n, 0, start, out, &k);
        slice(words, n, start + length, target, out, &k);
        slice(words, n, start, start + length, out, &k);
        slice(words, n, target, n, out, &k);
    } else {
        slice(words, n, 0, start, out, &k);
        slice(words, n, start + length, length + target, out, &k);
        slice(words, n, start, start + length, out, &k);
        slice(words, n, length + target, n, out, &k);
    }
}

/* Work space of one hypothesis-reference comparison. */
typedef struct ter_work {
    beam_ed ed;
    char *trace;
    int64_t *align;      /* reference position -> hypothesis position */
    int32_t *hyp_err, *ref_err;
    int32_t *best, *cand;
} ter_work;

static void ter_work_free(ter_work *t)
{
    beam_ed_free(&t->ed);
    free(t->trace);
    free(t->align);
    free(t->hyp_err);
    free(t->ref_err);
    free(t->best);
    free(t->cand);
}

/* _shift: the best shift of words_h (into out) and its gain, or 0. */
static int64_t best_shift(ter_work *t, const int32_t *words_h, size_t nh, const int32_t *words_r,
                          size_t nr, int32_t *out, int *checked)
{
    size_t trace_len;
    int64_t pre_score = beam_ed_run(&t->ed, words_h, t->trace, &trace_len);

    /* trace_to_alignment of the flipped trace (reference into hypothesis). */
    int64_t pos_h = -1, pos_r = -1;
    size_t nhe = 0, nre = 0;
    for (size_t k = 0; k < trace_len; k++) {
        char o = t->trace[k];
        if (o == OP_INS) o = OP_DEL;
        else if (o == OP_DEL) o = OP_INS;
        if (o == OP_NOP || o == OP_SUB) {
            pos_h++;
            pos_r++;
            t->align[pos_r] = pos_h;
            t->hyp_err[nhe++] = o == OP_SUB;
            t->ref_err[nre++] = o == OP_SUB;
        } else if (o == OP_INS) {
            pos_h++;
            t->hyp_err[nhe++] = 1;
        } else {
            pos_r++;
            t->align[pos_r] = pos_h;
            t->ref_err[nre++] = 1;
        }
    }

    if (nhe != nh || nre != nr) { /* no alignment (cannot happen): no shift */
        memcpy(out, words_h, nh * sizeof *out);
        return 0;
    }

    bool have_best = false;
    int64_t best[4] = {0, 0, 0, 0}; /* gain, length, -start_h, -target */
    bool stop = false;
    for (size_t sh = 0; sh < nh && !stop; sh++) {
        for (size_t sr = 0; sr < nr && !stop; sr++) {
            if (llabs((long long)sr - (long long)sh) > MAX_SHIFT_DIST) continue;
            size_t length = 0;
            while (words_h[sh + length] == words_r[sr + length] && length < MAX_SHIFT_SIZE) {
                length++;
                /* The candidate block (sh, sr, length). */
                int64_t herr = 0, rerr = 0;
                for (size_t k = 0; k < length; k++) {
                    herr += t->hyp_err[sh + k];
                    rerr += t->ref_err[sr + k];
                }
                bool skip = herr == 0 || rerr == 0 ||
                            ((int64_t)sh <= t->align[sr] && t->align[sr] < (int64_t)(sh + length));
                if (!skip) {
                    int64_t prev_idx = -1;
                    for (int64_t offset = -1; offset < (int64_t)length; offset++) {
                        int64_t at = (int64_t)sr + offset;
                        int64_t idx = at == -1 ? 0 : t->align[at] + 1;
                        if (idx == prev_idx) continue;
                        prev_idx = idx;
                        perform_shift(words_h, (int64_t)nh, (int64_t)sh, (int64_t)length, idx,
                                      t->cand);
                        int64_t c[4] = {pre_score - beam_ed_run(&t->ed, t->cand, NULL, NULL),
                                        (int64_t)length, -(int64_t)sh, -idx};
                        (*checked)++;
                        bool better = !have_best;
                        for (int k = 0; k < 4 && !better; k++) {
                            if (c[k] != best[k]) {
                                better = c[k] > best[k];
                                break;
                            }
                        }
                        if (better) {
                            have_best = true;
                            memcpy(best, c, sizeof best);
                            memcpy(t->best, t->cand, nh * sizeof *t->best);
                        }
                    }
                    if (*checked >= MAX_SHIFT_CANDIDATES) stop = true;
                }
                if (stop || nh == sh + length || nr == sr + length) break;
            }
        }
    }
    if (!have_best) {
        memcpy(out, words_h, nh * sizeof *out);
        return 0;
    }
    memcpy(out, t->best, nh * sizeof *out);
    return best[0];
}

/* translation_edit_rate: the edits that turn hyp into ref. */
static tfm_status translation_edit_rate(const int32_t *hyp, size_t nh, const int32_t *ref,
                                        size_t nr, int64_t *edits, tfm_error *err)
{
    if (nr == 0) { /* every hypothesis word is an edit */
        *edits = (int64_t)nh;
        return TFM_OK;
    }
    if ((nh + 1) > MAX_CELLS / (nr + 1))
        return tfm_error_set(err, TFM_ERR_UNSUPPORTED,
                             "TER of a segment of %zu words against a reference of %zu words "
                             "needs more than %zu matrix cells",
                             nh, nr, MAX_CELLS);
    ter_work t;
    memset(&t, 0, sizeof t);
    tfm_status st = beam_ed_init(&t.ed, ref, nr, nh);
    t.trace = malloc(nh + nr + 1);
    t.align = malloc((nr + 1) * sizeof *t.align);
    t.hyp_err = malloc((nh + 1) * sizeof *t.hyp_err);
    t.ref_err = malloc((nr + 1) * sizeof *t.ref_err);
    t.best = malloc((nh + 1) * sizeof *t.best);
    t.cand = malloc((nh + 1) * sizeof *t.cand);
    int32_t *input = malloc((nh + 1) * sizeof *input), *next = malloc((nh + 1) * sizeof *next);
    if (st != TFM_OK || !t.trace || !t.align || !t.hyp_err || !t.ref_err || !t.best || !t.cand ||
        !input || !next) {
        ter_work_free(&t);
        free(input);
        free(next);
        return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    }
    if (nh) memcpy(input, hyp, nh * sizeof *input);
    int64_t shifts = 0;
    int checked = 0;
    for (;;) {
        int64_t delta = best_shift(&t, input, nh, ref, nr, next, &checked);
        if (checked >= MAX_SHIFT_CANDIDATES || delta <= 0) break;
        shifts++;
        int32_t *swap = input;
        input = next;
        next = swap;
    }
    *edits = shifts + beam_ed_run(&t.ed, input, NULL, NULL);
    ter_work_free(&t);
    free(input);
    free(next);
    return TFM_OK;
}

/* TER._preprocess_segment: the tokenizer of the right-stripped line. */
static tfm_status preprocess(const tfm_metric_params *p, tfm_metric_scratch *s, tfm_ids *text,
                             tfm_ids *out)
{
    text->len = tfm_py_rstrip(text->data, text->len);
    return tfm_ter_tokenize_cps(p, text, out, &s->tmp2);
}

/* The word numbers of the words of t, added to the table. */
static tfm_status number(tfm_metric_scratch *s, const tfm_ids *t, tfm_ids *out)
{
    if (tfm_py_split(t->data, t->len, &s->ref_words) != TFM_OK) return TFM_ERR_NOMEM;
    tfm_ids_clear(out);
    for (size_t i = 0; i < s->ref_words.n; i++) {
        int64_t id = tfm_ngrams_word(&s->ngrams, t->data + s->ref_words.start[i],
                                     s->ref_words.len[i], true);
        if (id < 0 || tfm_cp_push(out, (int32_t)id) != TFM_OK) return TFM_ERR_NOMEM;
    }
    return TFM_OK;
}

tfm_status tfm_ter_segment(const tfm_metric_params *p, tfm_metric_scratch *s, const char *hyp,
                           size_t hyp_len, const char *const *refs, const size_t *ref_lens,
                           int n_refs, double *stats, tfm_error *err)
{
    size_t expected = hyp_len / 4 + 16;
    for (int r = 0; r < n_refs; r++) expected += ref_lens[r] / 4;
    if (tfm_ngrams_reset(&s->ngrams, expected, 8) != TFM_OK) goto nomem;
    if (tfm_py_decode(hyp, hyp_len, &s->text) != TFM_OK || preprocess(p, s, &s->text, &s->hyp) != TFM_OK ||
        number(s, &s->hyp, &s->hyp_num) != TFM_OK)
        goto nomem;
    int64_t best = INF_COST;
    double ref_lengths = 0;
    for (int r = 0; r < n_refs; r++) {
        /* sacreBLEU preprocesses a reference twice: once when it caches the
         * references, once more when it splits them into words. */
        if (tfm_py_decode(refs[r], ref_lens[r], &s->text) != TFM_OK ||
            preprocess(p, s, &s->text, &s->refs[0]) != TFM_OK ||
            preprocess(p, s, &s->refs[0], &s->text) != TFM_OK ||
            number(s, &s->text, &s->ref_num) != TFM_OK)
            goto nomem;
        int64_t edits = 0;
        tfm_status st = translation_edit_rate(s->hyp_num.data, s->hyp_num.len, s->ref_num.data,
                                              s->ref_num.len, &edits, err);
        if (st != TFM_OK) return st;
        ref_lengths += (double)s->ref_num.len;
        if (edits < best) best = edits;
    }
    stats[0] = (double)best;
    stats[1] = ref_lengths / n_refs;
    return TFM_OK;
nomem:
    return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
}
