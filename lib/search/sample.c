/* sample.c - drawing the next token for sampling: temperature, top-k
 * (Fan et al., 2018) and nucleus / top-p (Holtzman et al., 2020).
 *
 * The distribution is p(v) proportional to exp(log_prob(v) / temperature)
 * over the allowed tokens, cut to the top_k most probable and then to the
 * smallest most-probable set whose mass reaches top_p of what is left.
 * Weights are computed relative to the best token (exp(0) = 1), in double,
 * so no temperature overflows them.
 */
#include <stdlib.h>

#include "search/search_internal.h"

static int cmp_better_first(const void *a, const void *b)
{
    const search_cand *x = a, *y = b;
    return search_cand_better(x, y) ? -1 : search_cand_better(y, x) ? 1 : 0;
}

int32_t search_sample(const tfm_search_params *p, const float *lp, int V, tfm_rng *rng,
                      search_cand *scratch)
{
    /* the candidates: the top_k best (a partial selection), or every allowed token */
    int n = 0;
    if (p->top_k > 0 && p->top_k < V) {
        search_heap h;
        search_heap_init(&h, scratch, p->top_k);
        for (int v = 0; v < V; v++) search_heap_offer(&h, lp[v], 0, v);
        n = h.n;
    } else {
        for (int v = 0; v < V; v++)
            if (lp[v] > -INFINITY) scratch[n++] = (search_cand){lp[v], 0, v};
    }
    if (n == 0) return search_argmax(lp, V); /* cannot happen after search_constrain */

    /* the nucleus needs the candidates best first; plain sampling does not */
    const bool nucleus = p->top_p < 1.0f;
    if (nucleus) qsort(scratch, (size_t)n, sizeof *scratch, cmp_better_first);
    double best = scratch[0].score;
    for (int i = 1; i < n; i++)
        if (scratch[i].score > best) best = scratch[i].score;

    /* weights, in place of the scores */
    const double inv_t = 1.0 / p->temperature;
    double total = 0.0;
    for (int i = 0; i < n; i++) {
        scratch[i].score = exp((scratch[i].score - best) * inv_t);
        total += scratch[i].score;
    }
    if (nucleus) {
        double mass = 0.0, want = p->top_p * total;
        int keep = 0;
        while (keep < n && mass < want) mass += scratch[keep++].score;
        if (keep == 0) keep = 1;
        n = keep;
        total = mass;
    }

    double u = tfm_rng_double(rng) * total, acc = 0.0;
    int32_t last = scratch[0].tok;
    for (int i = 0; i < n; i++) {
        if (scratch[i].score <= 0.0) continue; /* underflowed: never drawn */
        acc += scratch[i].score;
        last = scratch[i].tok;
        if (u < acc) return last;
    }
    return last; /* u rounded up to the total */
}
