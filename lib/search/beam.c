/* beam.c - beam search over many sentences at once, with the greedy path
 * kept as a candidate (see tfm/search.h for the rules).
 *
 * The decoder's rows are grouped by live sentence: its n_beam live
 * hypotheses, at most k, the greedy path always among them (when the k best
 * candidates leave it out, it takes the k-th place), or, once the beam is
 * done, the greedy path alone.  Each step every live sentence ranks its candidates, sends
 * </s> candidates to its finished list and picks the rows that continue; the
 * new rows are written in the same grouped order and the decoder follows them
 * with one tfm_decoder_reorder, which also drops the rows of sentences that
 * are done.
 *
 * Row histories (ids and their log-probs) and the step loop are
 * beam_rows.c's, shared with constrained beam search.
 *
 * Finished hypotheses of sentence i go to its k first result slots, kept
 * sorted best first (a new one evicts the worst when all k are taken); slot
 * k holds the greedy path's hypothesis when the beam did not finish it
 * itself, and joins the list when the sentence is done.
 */
#include <stdlib.h>
#include <string.h>

#include "search/search_internal.h"

/* Where a sentence's greedy path is. */
enum {
    GREEDY_IN_BEAM, /* it is one of the live beam rows, g_row */
    GREEDY_OWN,     /* the beam is done; it goes on alone in the sentence's one row */
    GREEDY_DONE,    /* it finished, or can no longer beat the best finished hypothesis */
};

typedef struct beam_sentence {
    int sent;
    int row0;        /* its first row in the decoder */
    int n_beam;      /* live beam rows: row0 .. row0 + n_beam - 1 */
    int greedy;      /* GREEDY_* */
    int g_row;       /* GREEDY_IN_BEAM: which beam row (0 .. n_beam - 1) */
    bool has_greedy; /* slot k holds the greedy path's hypothesis */
} beam_sentence;

typedef struct beam {
    tfm_search *s;
    int k, V;
    beam_rows rows;    /* the rows and their histories */
    search_cand *cands;  /* [2k] */
} beam;

static void swap_hyp(tfm_hypothesis *a, tfm_hypothesis *b)
{
    tfm_hypothesis t = *a;
    *a = *b;
    *b = t;
}

/* Moves list[at] up past every hypothesis it beats (ties keep the earlier first). */
static void bubble_up(tfm_hypothesis *list, int at)
{
    while (at > 0 && list[at].score > list[at - 1].score) {
        swap_hyp(&list[at], &list[at - 1]);
        at--;
    }
}

/* Offers row `from` followed by </s> to the sentence's finished list. */
static void finish(beam *b, int sent, int from, int t, float eos_lp, double logp)
{
    tfm_search *s = b->s;
    tfm_hypothesis *list = s->hyps + (size_t)sent * s->spp;
    int at = s->count[sent];
    if (at == b->k) { /* full: replace the worst, if this one beats it */
        if (!(search_score(s, t, logp) > list[b->k - 1].score)) return;
        at = b->k - 1;
    } else {
        s->count[sent]++;
    }
    search_hyp_write(s, &list[at], beam_rows_ids(&b->rows, from),
                     beam_rows_lps(&b->rows, from), t, eos_lp, logp);
    bubble_up(list, at);
}

/* One step of one sentence: rank, finish, continue.  Returns whether the
 * sentence goes on (its new rows are then written). */
static bool sentence_step(void *ctx, void *sentence, int t)
{
    beam *b = ctx;
    beam_sentence *a = sentence;
    beam_rows *rows = &b->rows;
    tfm_search *s = b->s;
    const int k = b->k, V = b->V, sent = a->sent;
    const int32_t eos = s->eos;
    const float *const logits = s->logits;
    const tfm_logit_stats *const stats = s->stats;
    const double *logp = rows->logp[rows->cur];

    const int n_rows = a->n_beam + (a->greedy == GREEDY_OWN);
    for (int i = 0; i < n_rows; i++) {
        int r = a->row0 + i;
        search_constrain(s, sent, beam_rows_ids(rows, r), t, s->logits + (size_t)r * V);
        search_min_length_restat(s, sent, t, s->logits + (size_t)r * V, &s->stats[r]);
    }
    /* the greedy path's row and its next token */
    int g_from = -1;
    int32_t g_tok = -1;
    if (a->greedy != GREEDY_DONE) {
        g_from = a->row0 + (a->greedy == GREEDY_IN_BEAM ? a->g_row : a->n_beam);
        g_tok = search_best(logits + (size_t)g_from * V, V, &stats[g_from]);
    }

    /* the best 2k candidates of the beam rows */
    search_heap h;
    search_heap_init(&h, b->cands, 2 * k);
    for (int i = 0; i < a->n_beam; i++) {
        const int r = a->row0 + i;
        const float *row = logits + (size_t)r * V;
        const tfm_logit_stats *st = &stats[r];
        const double base = logp[r];
        float cut = h.n == h.cap ? search_logit_cut(&h, base, st) : -INFINITY;
        /* most of the row is below the cut: it cannot get in */
        for (int v = search_next_not_below(row, 0, V, cut); v < V;
             v = search_next_not_below(row, v + 1, V, cut)) {
            search_heap_offer(&h, base + search_lp(st, row[v]), i, v);
            if (h.n == h.cap) cut = search_logit_cut(&h, base, st);
        }
    }
    search_heap_sort(&h);

    /* best first: </s> among the first k finishes; others continue, up to k */
    const int start = rows->new_R;
    int n_live = 0, g_sel = -1;
    bool g_finished = false;
    for (int j = 0; j < h.n; j++) {
        const search_cand *c = &b->cands[j];
        const int r = a->row0 + c->row;
        const bool is_greedy = a->greedy == GREEDY_IN_BEAM && c->row == a->g_row && c->tok == g_tok;
        if (c->tok == eos) {
            if (j < k) {
                finish(b, sent, r, t, search_lp(&stats[r], logits[(size_t)r * V + eos]), c->score);
                if (is_greedy) g_finished = true;
            }
        } else if (n_live < k) {
            if (is_greedy) g_sel = n_live;
            beam_rows_emit(rows, r, c->tok, search_lp(&stats[r], logits[(size_t)r * V + c->tok]),
                             c->score, t);
            n_live++;
        }
    }
    const bool beam_done = s->count[sent] >= k || n_live == 0;
    if (beam_done) { /* its live rows are dropped */
        rows->new_R = start;
        n_live = 0;
    }

    /* the greedy path: stays in the beam, or goes on in its own row (after
     * the beam rows), or ends */
    tfm_hypothesis *list = s->hyps + (size_t)sent * s->spp;
    if (a->greedy != GREEDY_DONE) {
        const float g_lp = search_lp(&stats[g_from], logits[(size_t)g_from * V + g_tok]);
        const double g_logp = logp[g_from] + g_lp;
        if (g_tok == eos) {
            if (!g_finished) {
                search_hyp_write(s, &list[k], beam_rows_ids(rows, g_from),
                                 beam_rows_lps(rows, g_from), t, g_lp, g_logp);
                a->has_greedy = true;
            }
            a->greedy = GREEDY_DONE;
        } else if (a->greedy == GREEDY_IN_BEAM && g_sel >= 0 && !beam_done) {
            a->g_row = g_sel;
        } else if (s->count[sent] > 0 &&
                   g_logp / tfm_length_penalty(s->p->length_rule, s->max_len[sent] + 1,
                                               s->p->length_penalty) < list[0].score) {
            /* log-probs are <= 0 and lp grows with length under both rules,
             * so no ending of this path can score above logp / lp(max_len + 1) */
            a->greedy = GREEDY_DONE;
        } else if (!beam_done) {
            /* the greedy path keeps a place in the beam: the k-th, when the
             * k best candidates took them all */
            if (n_live == k) {
                rows->new_R--;
                n_live--;
            }
            beam_rows_emit(rows, g_from, g_tok, g_lp, g_logp, t);
            a->greedy = GREEDY_IN_BEAM;
            a->g_row = n_live++;
        } else {
            beam_rows_emit(rows, g_from, g_tok, g_lp, g_logp, t);
            a->greedy = GREEDY_OWN;
        }
    }
    a->row0 = start;
    a->n_beam = n_live;
    if (!beam_done || a->greedy != GREEDY_DONE) return true;

    /* done: the greedy path's hypothesis joins the list */
    int n = s->count[sent];
    if (a->has_greedy) {
        swap_hyp(&list[n], &list[k]);
        bubble_up(list, n);
        n++;
    }
    s->count[sent] = n < s->p->nbest ? n : s->p->nbest;
    return false;
}

tfm_status search_beam(tfm_search *s, tfm_decoder *d, tfm_error *err)
{
    const int n = s->in->n_sentences, k = s->p->beam;
    const size_t rows = (size_t)n * k; /* at most k rows per sentence, the greedy path's included */

    beam b = {.s = s, .k = k, .V = s->V};
    beam_sentence *act = search_work(s, 0, (size_t)n, sizeof *act);
    b.cands = search_work(s, 6, 2 * (size_t)k, sizeof *b.cands);
    if (!act || !b.cands || !beam_rows_init(&b.rows, s, rows))
        return tfm_error_set(err, TFM_ERR_NOMEM, "search: out of memory for %d sentences", n);
    /* every sentence starts with one hypothesis, <s>, the greedy path too */
    for (int i = 0; i < n; i++)
        act[i] = (beam_sentence){.sent = i, .row0 = i, .n_beam = 1,
                                 .greedy = s->p->plain_beam ? GREEDY_DONE : GREEDY_IN_BEAM};
    return beam_rows_run(s, d, &b.rows, act, sizeof *act, n, sentence_step, &b, err);
}
