/* rules.c - what every search shares, below all of them: the length rules,
 * scratch memory, the rules every search obeys (search_constrain), the
 * scores of hypotheses, and candidate selection (the skipping cut and the
 * heap of the best candidates). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "search/search_internal.h"

/* ---- length rules --------------------------------------------------------------------- */

/* Both rules are >= 1 for m >= 1 and grow with m for alpha >= 0 (beam.c's
 * bound on the greedy path relies on it). */
double tfm_length_penalty(tfm_length_rule rule, int m, float alpha)
{
    if (alpha == 0.0f) return 1.0;
    if (rule == TFM_LENGTH_GNMT) return pow((5.0 + m) / 6.0, (double)alpha);
    return pow((double)m, (double)alpha);
}

const char *tfm_length_rule_name(tfm_length_rule rule)
{
    switch (rule) {
    case TFM_LENGTH_POWER: return "power";
    case TFM_LENGTH_GNMT: return "gnmt";
    }
    return NULL;
}

/* ---- scratch ---------------------------------------------------------------------------- */

void *search_work(tfm_search *s, int i, size_t n, size_t size)
{
    return tfm_buf_array(&s->work[i], n, size);
}

/* ---- sources and prefixes ----------------------------------------------------------------- */

/* An empty source is translated into the empty sentence (only </s>), in
 * every search and whatever its prefix: a model given no source would
 * otherwise invent a sentence from its language model alone. */
bool search_source_empty(const tfm_search_input *in, int sent)
{
    return in->src_lens[sent] == 0;
}

static int prefix_len(const tfm_search_input *in, int sent)
{
    if (!in->prefixes || !in->prefix_lens || search_source_empty(in, sent)) return 0;
    return in->prefix_lens[sent];
}

int search_prefix_len(const tfm_search *s, int sent)
{
    return prefix_len(s->in, sent);
}

/* ---- rules and helpers shared by the searches ------------------------------------------- */

/* Leaves only tok allowed in lp [V]. */
static void force(float *lp, int V, int32_t tok)
{
    float keep = lp[tok];
    for (int v = 0; v < V; v++) lp[v] = -INFINITY;
    lp[tok] = keep;
}

bool search_any_allowed(const float *lp, int V)
{
    for (int v = 0; v < V; v++)
        if (lp[v] > -INFINITY) return true;
    return false;
}

void search_constrain(const tfm_search *s, int sent, const int32_t *hist, int t, float *lp)
{
    const tfm_search_params *p = s->p;
    const int V = s->V;
    int plen = prefix_len(s->in, sent);
    if (t < plen) {
        force(lp, V, s->in->prefixes[sent][t]);
        return;
    }
    if (t >= s->max_len[sent]) {
        force(lp, V, s->eos);
        return;
    }
    /* never wanted as output: training never makes them targets */
    lp[s->pad] = -INFINITY;
    lp[s->bos] = -INFINITY;

    const float eos_lp = lp[s->eos];
    bool banned = false; /* whether anything beyond <pad> and <s> was forbidden */
    if (t < p->min_length) {
        lp[s->eos] = -INFINITY;
        banned = true;
    }
    /* n-gram blocking: the last N-1 ids, followed by v, must not equal any
     * earlier N-gram hist[i .. i+N) */
    const int N = p->no_repeat_ngram_size;
    if (N > 0 && t >= N) {
        const int32_t *tail = hist + t - (N - 1);
        for (int i = 0; i + N <= t; i++) {
            if (memcmp(hist + i, tail, (size_t)(N - 1) * sizeof *hist) == 0) {
                lp[hist[i + N - 1]] = -INFINITY;
                banned = true;
            }
        }
    }
    /* never leave a hypothesis without a way forward: </s> comes back */
    if (banned && !search_any_allowed(lp, V)) lp[s->eos] = eos_lp;
}

void search_min_length_restat(const tfm_search *s, int sent, int t, const float *logits,
                              tfm_logit_stats *st)
{
    if (t >= s->p->min_length || t < prefix_len(s->in, sent) || t >= s->max_len[sent]) return;
    const int V = s->V;
    float max = -INFINITY;
    int32_t argmax = 0;
    for (int v = 0; v < V; v++)
        if (logits[v] > max) {
            max = logits[v];
            argmax = v;
        }
    if (max == -INFINITY) return; /* nothing allowed: search_constrain gave </s> back */
    double sum = 0;
    for (int v = 0; v < V; v++) sum += exp((double)logits[v] - max);
    *st = (tfm_logit_stats){.max = max, .log_sum = (float)log(sum), .argmax = argmax};
}

int32_t search_argmax(const float *lp, int V)
{
    int32_t best = -1;
    float best_lp = -INFINITY;
    for (int v = 0; v < V; v++) {
        if (lp[v] > best_lp) {
            best_lp = lp[v];
            best = v;
        }
    }
    return best;
}

float search_score(const tfm_search *s, int len, double log_prob)
{
    return (float)(log_prob / tfm_length_penalty(s->p->length_rule, len + 1,
                                                 s->p->length_penalty));
}

void search_hyp_write(const tfm_search *s, tfm_hypothesis *h, const int32_t *ids,
                      const float *lps, int len, float eos_lp, double log_prob)
{
    /* the slot storage behind h belongs to the searcher and is writable */
    int32_t *out_ids = (int32_t *)(uintptr_t)h->ids;
    float *out_lps = (float *)(uintptr_t)h->token_log_probs;
    if (out_ids != ids) memmove(out_ids, ids, (size_t)len * sizeof *ids);
    if (out_lps != lps) memmove(out_lps, lps, (size_t)len * sizeof *lps);
    out_lps[len] = eos_lp;
    h->len = len;
    h->log_prob = (float)log_prob;
    h->score = search_score(s, len, log_prob);
}

/* ---- skipping what cannot get in ------------------------------------------------------ */

/* The lowest logit of a row (base: its hypothesis's log-prob; st: its stats)
 * whose candidate could still enter the full heap h, lowered by a margin far
 * above the rounding of search_lp, so the exact test (search_heap_offer)
 * decides every case near the edge. */
float search_logit_cut(const search_heap *h, double base, const tfm_logit_stats *st)
{
    double cut = h->c[0].score - base + st->max + st->log_sum;
    double margin = 1e-3 * (1.0 + fabs(cut) + fabs(st->max) + fabs(st->log_sum));
    return (float)(cut - margin);
}

/* The first v in [from, V) whose value is not below cut (a NaN is not):
 * sixteen values at a time, blocks entirely below skipped with a few
 * vector compares, as most of a row's are. */
int search_next_not_below(const float *row, int from, int V, float cut)
{
    typedef float f32x4 __attribute__((vector_size(16)));
    typedef int32_t i32x4 __attribute__((vector_size(16)));
    int v = from;
    for (; v + 16 <= V; v += 16) {
        f32x4 x[4];
        memcpy(x, row + v, sizeof x);
        const i32x4 below = (x[0] < cut) & (x[1] < cut) & (x[2] < cut) & (x[3] < cut);
        if (!(below[0] & below[1] & below[2] & below[3])) break; /* a lane is not below */
    }
    while (v < V && row[v] < cut) v++;
    return v;
}

/* ---- the candidate heap ---------------------------------------------------------------- */

static void swap_cand(search_cand *a, search_cand *b)
{
    search_cand t = *a;
    *a = *b;
    *b = t;
}

/* Restores the min-heap below i over the first n entries. */
static void sift_down(search_cand *c, int n, int i)
{
    for (;;) {
        int l = 2 * i + 1, r = l + 1, w = i;
        if (l < n && search_cand_better(&c[w], &c[l])) w = l;
        if (r < n && search_cand_better(&c[w], &c[r])) w = r;
        if (w == i) return;
        swap_cand(&c[i], &c[w]);
        i = w;
    }
}

void search_heap_push_slow(search_heap *h, search_cand c)
{
    if (h->cap <= 0) return;
    if (h->n < h->cap) {
        int i = h->n++;
        h->c[i] = c;
        while (i > 0) { /* sift up: the worse of the two goes above */
            int parent = (i - 1) / 2;
            if (!search_cand_better(&h->c[parent], &h->c[i])) break;
            swap_cand(&h->c[parent], &h->c[i]);
            i = parent;
        }
        return;
    }
    if (!search_cand_better(&c, &h->c[0])) return;
    h->c[0] = c;
    sift_down(h->c, h->n, 0);
}

void search_heap_sort(search_heap *h)
{
    /* heapsort of a min-heap: the worst goes to the end first, leaving the
     * array best first */
    for (int n = h->n; n > 1; n--) {
        swap_cand(&h->c[0], &h->c[n - 1]);
        sift_down(h->c, n - 1, 0);
    }
}
