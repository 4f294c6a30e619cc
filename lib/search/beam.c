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
 * Row histories (ids and their log-probs) live in two buffers, [rows, S]
 * each: a step reads the current one and writes the next, since a row may be
 * continued by several new rows or by none.
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
    int k, S, V;
    int cur;             /* which history buffer holds the current rows */
    int32_t *hist[2];    /* [rows, S] ids of each row */
    float *hlp[2];       /* [rows, S] their log-probs */
    double *logp[2];     /* [rows] each row's total log-prob */
    int *parent;         /* [rows] the old row each new row continues */
    int new_R;           /* new rows written so far in this step */
    search_cand *cands;  /* [2k] */
} beam;

/* Writes the next step's row new_R: row `from` of this step followed by tok. */
static void emit_row(beam *b, int from, int32_t tok, float tok_lp, double logp, int t)
{
    const int S = b->S, nxt = 1 - b->cur, r = b->new_R++;
    int32_t *ids = b->hist[nxt] + (size_t)r * S;
    float *lps = b->hlp[nxt] + (size_t)r * S;
    memcpy(ids, b->hist[b->cur] + (size_t)from * S, (size_t)t * sizeof *ids);
    memcpy(lps, b->hlp[b->cur] + (size_t)from * S, (size_t)t * sizeof *lps);
    ids[t] = tok;
    lps[t] = tok_lp;
    b->logp[nxt][r] = logp;
    b->parent[r] = from;
}

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
    search_hyp_write(s, &list[at], b->hist[b->cur] + (size_t)from * b->S,
                     b->hlp[b->cur] + (size_t)from * b->S, t, eos_lp, logp);
    bubble_up(list, at);
}

/* One step of one sentence: rank, finish, continue.  Returns whether the
 * sentence goes on (its new rows are then written). */
static bool sentence_step(beam *b, beam_sentence *a, int t)
{
    tfm_search *s = b->s;
    const int k = b->k, V = b->V, sent = a->sent;
    const int32_t eos = s->eos;
    const float *const logits = s->logits;
    const tfm_logit_stats *const stats = s->stats;
    const int32_t *hist = b->hist[b->cur];
    const double *logp = b->logp[b->cur];

    const int n_rows = a->n_beam + (a->greedy == GREEDY_OWN);
    for (int i = 0; i < n_rows; i++) {
        int r = a->row0 + i;
        search_constrain(s, sent, hist + (size_t)r * b->S, t, s->logits + (size_t)r * V);
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
    const int start = b->new_R;
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
            emit_row(b, r, c->tok, search_lp(&stats[r], logits[(size_t)r * V + c->tok]), c->score,
                     t);
            n_live++;
        }
    }
    const bool beam_done = s->count[sent] >= k || n_live == 0;
    if (beam_done) { /* its live rows are dropped */
        b->new_R = start;
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
                search_hyp_write(s, &list[k], hist + (size_t)g_from * b->S,
                                 b->hlp[b->cur] + (size_t)g_from * b->S, t, g_lp, g_logp);
                a->has_greedy = true;
            }
            a->greedy = GREEDY_DONE;
        } else if (a->greedy == GREEDY_IN_BEAM && g_sel >= 0 && !beam_done) {
            a->g_row = g_sel;
        } else if (s->count[sent] > 0 &&
                   g_logp / tfm_length_penalty(s->max_len[sent] + 1, s->p->length_penalty) <
                       list[0].score) {
            /* log-probs are <= 0 and lp grows with length, so no ending of
             * this path can score above logp / lp(max_len + 1) */
            a->greedy = GREEDY_DONE;
        } else if (!beam_done) {
            /* the greedy path keeps a place in the beam: the k-th, when the
             * k best candidates took them all */
            if (n_live == k) {
                b->new_R--;
                n_live--;
            }
            emit_row(b, g_from, g_tok, g_lp, g_logp, t);
            a->greedy = GREEDY_IN_BEAM;
            a->g_row = n_live++;
        } else {
            emit_row(b, g_from, g_tok, g_lp, g_logp, t);
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
    const tfm_search_input *in = s->in;
    const int n = in->n_sentences, S = s->S, k = s->p->beam;
    const size_t rows = (size_t)n * k; /* at most k rows per sentence, the greedy path's included */

    beam b = {.s = s, .k = k, .S = S, .V = s->V};
    beam_sentence *act = search_work(s, 0, (size_t)n, sizeof *act);
    int32_t *hist = search_work(s, 1, 2 * rows * S, sizeof *hist);
    float *hlp = search_work(s, 2, 2 * rows * S, sizeof *hlp);
    double *logp = search_work(s, 3, 2 * rows, sizeof *logp);
    int32_t *tokens = search_work(s, 4, rows, sizeof *tokens);
    b.parent = search_work(s, 5, rows, sizeof *b.parent);
    b.cands = search_work(s, 6, 2 * (size_t)k, sizeof *b.cands);
    if (!act || !hist || !hlp || !logp || !tokens || !b.parent || !b.cands)
        return tfm_error_set(err, TFM_ERR_NOMEM, "search: out of memory for %d sentences", n);
    for (int i = 0; i < 2; i++) {
        b.hist[i] = hist + i * rows * S;
        b.hlp[i] = hlp + i * rows * S;
        b.logp[i] = logp + i * rows;
    }

    /* every sentence starts with one hypothesis, <s>, the greedy path too */
    for (int i = 0; i < n; i++) {
        act[i] = (beam_sentence){.sent = i, .row0 = i, .n_beam = 1, .greedy = GREEDY_IN_BEAM};
        b.logp[0][i] = 0.0;
        b.parent[i] = i; /* here: the sentence of row i */
    }
    tfm_status st = tfm_decoder_start(d, n, in->states, in->src_lens, n, b.parent, S, err);
    if (st != TFM_OK) return st;

    int R = n, n_act = n;
    for (int t = 0; n_act > 0; t++) {
        for (int r = 0; r < R; r++)
            tokens[r] = t == 0 ? s->bos : b.hist[b.cur][(size_t)r * S + t - 1];
        st = tfm_decoder_step_logits(d, tokens, s->logits, s->stats, err);
        if (st != TFM_OK) return st;

        b.new_R = 0;
        int kept = 0;
        for (int i = 0; i < n_act; i++) {
            beam_sentence a = act[i];
            if (sentence_step(&b, &a, t)) act[kept++] = a;
        }
        n_act = kept;
        if (b.new_R == 0) break;
        st = tfm_decoder_reorder(d, b.new_R, b.parent, err);
        if (st != TFM_OK) return st;
        R = b.new_R;
        b.cur = 1 - b.cur;
    }
    return TFM_OK;
}
