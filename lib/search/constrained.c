/* constrained.c - lexically constrained beam search: dynamic beam allocation
 * (Post & Vilar, 2018) in the vectorised form of Hu et al. (2019), as
 * fairseq's LexicallyConstrainedBeamSearch does it, over many sentences at
 * once (see tfm/search.h for the rules).
 *
 * As in beam.c, the decoder's rows are grouped by live sentence, at most k
 * each (search_constrained_rows: the beam, or four under greedy search for
 * a sentence with constraints), over beam_rows.c's histories and step loop.
 * What is added: each row carries its progress through its sentence's
 * constraints (cstate), the masks of limits, order, enclosed tokens, tokens
 * banned right after a constraint and an early </s> are applied to its
 * next-token log-probs, and a step's candidates (the sentence's best 2k, each row's
 * best token, and each row's tokens that advance a constraint) are ranked
 * within their bank and taken round-robin over the banks, the most advanced
 * first.  There is no greedy path to follow: it would not meet the
 * constraints.
 *
 * Finished hypotheses of a sentence fill its k first result slots, sorted
 * with those that meet every constraint first, then by score. */
#include <stdlib.h>
#include <string.h>

#include "search/search_internal.h"

/* A hypothesis's progress through its sentence's constraints. */
typedef struct cstate {
    uint64_t met; /* bit c: constraint c is met */
    int alt;      /* the alternative being matched, or -1 */
    int pos;      /* ids of it matched so far */
    int bank;     /* constraint ids produced: those of the met alternatives, plus pos */
    int just;     /* the constraint its last id met, or -1 */
} cstate;

/* A candidate continuation: local row followed by tok, with the state it leads to. */
typedef struct ccand {
    double score;
    int row;
    int32_t tok;
    int rank; /* its place in its bank, best first */
    cstate st;
} ccand;

typedef struct csent {
    int sent;
    int k;      /* its rows and finished slots at most (search_constrained_rows) */
    int row0;   /* its first row in the decoder */
    int n_live; /* rows row0 .. row0 + n_live - 1 */
} csent;

typedef struct cbeam {
    tfm_search *s;
    int k_max, V;        /* the most rows of a sentence (the stride of fin_met) */
    beam_rows rows;      /* the rows and their histories */
    cstate *state[2];    /* [rows] each row's progress, in step with rows' buffers */
    search_cand *heap;   /* [2 k_max] */
    ccand *cands;        /* [cand_cap] */
    int cand_cap;
    bool *fin_met;       /* [n, k_max] whether finished slot j meets every constraint */
} cbeam;

static const tfm_constraints *constraints_of(const tfm_search *s, int sent)
{
    return s->in->constraints ? s->in->constraints[sent] : NULL;
}

/* The bits of every constraint of c. */
static uint64_t all_met(const tfm_constraints *c)
{
    if (!c || c->n == 0) return 0;
    return c->n >= 64 ? ~(uint64_t)0 : ((uint64_t)1 << c->n) - 1;
}

/* Whether alternative a may take the next token of a hypothesis in state
 * st: its constraint is not met yet and is due (the constraints it must
 * follow are met), and it begins with the ids st has matched of its own
 * alternative (none when st matches nothing).  Its next id is then
 * ids[alt_start[a] + st->pos]. */
static bool alt_open(const tfm_constraints *c, const cstate *st, int a)
{
    const int con = c->alt_of[a];
    if (st->met >> con & 1 || (st->met & c->needs[con]) != c->needs[con]) return false;
    if (st->alt < 0 || a == st->alt) return true;
    if (c->alt_len[a] <= st->pos) return false;
    const int32_t *ids = c->ids.data;
    return memcmp(ids + c->alt_start[a], ids + c->alt_start[st->alt],
                  (size_t)st->pos * sizeof *ids) == 0;
}

/* st having matched one more id of alternative a. */
static cstate take(const tfm_constraints *c, cstate st, int a)
{
    st.alt = a;
    st.bank++;
    if (++st.pos == c->alt_len[a]) {
        st.met |= (uint64_t)1 << c->alt_of[a];
        st.just = c->alt_of[a];
        st.alt = -1;
        st.pos = 0;
    }
    return st;
}

/* The state after st produces tok: the alternative under way goes on (or
 * one that shares the ids it matched and goes on with tok), or it is given
 * up; a token that starts an open alternative (alt_open) then starts it
 * (the first such, in the order given). */
static cstate advance(const tfm_constraints *c, cstate st, int32_t tok)
{
    if (!c || c->n_alts == 0) return st;
    const int32_t *ids = c->ids.data;
    st.just = -1;
    if (st.alt >= 0) {
        if (ids[c->alt_start[st.alt] + st.pos] == tok) return take(c, st, st.alt);
        for (int a = 0; a < c->n_alts; a++)
            if (a != st.alt && alt_open(c, &st, a) && ids[c->alt_start[a] + st.pos] == tok)
                return take(c, st, a);
        st.bank -= st.pos; /* given up */
        st.alt = -1;
        st.pos = 0;
    }
    for (int a = 0; a < c->n_alts; a++)
        if (alt_open(c, &st, a) && ids[c->alt_start[a]] == tok) return take(c, st, a);
    return st;
}

/* Whether tok is one of ids[0..n). */
static bool among(const int32_t *ids, size_t n, int32_t tok)
{
    for (size_t i = 0; i < n; i++)
        if (ids[i] == tok) return true;
    return false;
}

/* Whether the ids st has matched of its alternative hold an enclosed token:
 * the hypothesis must then finish that alternative. */
static bool committed(const tfm_constraints *c, const cstate *st)
{
    if (st->alt < 0) return false;
    const int32_t *ids = c->ids.data + c->alt_start[st->alt];
    for (int j = 0; j < st->pos; j++)
        if (among(c->enclosed.data, c->enclosed.len, ids[j])) return true;
    return false;
}

/* Whether an open alternative takes tok next, after st (going on with what
 * st matched) or, unless commit, from its start. */
static bool opens_with(const tfm_constraints *c, const cstate *st, bool commit, int32_t tok)
{
    const int32_t *ids = c->ids.data;
    const cstate fresh = {.met = st->met, .alt = -1, .just = -1};
    for (int a = 0; a < c->n_alts; a++) {
        if (alt_open(c, st, a) && ids[c->alt_start[a] + st->pos] == tok) return true;
        if (!commit && st->alt >= 0 && alt_open(c, &fresh, a) && ids[c->alt_start[a]] == tok)
            return true;
    }
    return false;
}

/* The rule of enclosed tokens in lp [V], for a hypothesis in state st: a
 * committed hypothesis may only go on with its alternative (or one sharing
 * what it matched); any other may produce an enclosed token only where an
 * open alternative has it next. */
static void mask_enclosed(const tfm_search *s, const tfm_constraints *c, const cstate *st,
                          float *lp)
{
    if (committed(c, st)) {
        /* keep the next ids of the open alternatives, forbid the rest */
        enum { KEEP = 64 };
        int32_t keep[KEEP];
        float keep_lp[KEEP];
        int n = 0;
        bool too_many = false;
        for (int a = 0; a < c->n_alts && !too_many; a++) {
            if (!alt_open(c, st, a)) continue;
            too_many = n == KEEP;
            if (too_many) break;
            keep[n] = c->ids.data[c->alt_start[a] + st->pos];
            keep_lp[n] = lp[keep[n]];
            n++;
        }
        if (too_many) { /* more than can be kept aside: token by token */
            for (int32_t v = 0; v < s->V; v++)
                if (lp[v] > -INFINITY && !opens_with(c, st, true, v)) lp[v] = -INFINITY;
            return;
        }
        for (int32_t v = 0; v < s->V; v++) lp[v] = -INFINITY;
        for (int j = 0; j < n; j++) lp[keep[j]] = keep_lp[j];
        return;
    }
    for (size_t i = 0; i < c->enclosed.len; i++) {
        const int32_t tok = c->enclosed.data[i];
        if (lp[tok] > -INFINITY && !opens_with(c, st, false, tok)) lp[tok] = -INFINITY;
    }
}

/* Forbids in lp [V] what the constraints c forbid after hist[0..t) (a
 * hypothesis in state st): banned tokens, tokens at their limit, tokens of the order that
 * are not the next one due, tokens banned right after a constraint just met
 * or right after the last token, and </s> while a constraint is unmet
 * (unless nothing else is left). */
static void apply_masks(const tfm_search *s, const tfm_constraints *c, const int32_t *hist, int t,
                        const cstate *st, float *lp)
{
    const float eos_lp = lp[s->eos];
    for (size_t i = 0; i < c->banned.len; i++) lp[c->banned.data[i]] = -INFINITY;
    for (int i = 0; i < c->n_limited; i++) {
        int seen = 0;
        for (int j = 0; j < t; j++) seen += hist[j] == c->limited[i];
        if (seen >= c->limit[i]) lp[c->limited[i]] = -INFINITY;
    }
    const size_t n_ord = c->ordered.len;
    if (n_ord > 0) {
        const int32_t *ord = c->ordered.data;
        size_t done = 0;
        for (int j = 0; j < t; j++) done += among(ord, n_ord, hist[j]);
        const int32_t due = done < n_ord ? ord[done] : -1;
        for (size_t i = 0; i < n_ord; i++)
            if (ord[i] != due) lp[ord[i]] = -INFINITY;
    }
    if (c->enclosed.len > 0) mask_enclosed(s, c, st, lp);
    if (st->just >= 0)
        for (size_t i = 0; i < c->after_tok.len; i++)
            if (c->after_con.data[i] == st->just) lp[c->after_tok.data[i]] = -INFINITY;
    if (t > 0)
        for (size_t i = 0; i < c->pair_first.len; i++)
            if (c->pair_first.data[i] == hist[t - 1]) lp[c->pair_second.data[i]] = -INFINITY;
    if (st->met != all_met(c)) lp[s->eos] = -INFINITY;
    if (!search_any_allowed(lp, s->V)) lp[s->eos] = eos_lp;
}

/* ---- finished hypotheses ------------------------------------------------------------ */

static bool finished_better(bool met_a, float score_a, bool met_b, float score_b)
{
    if (met_a != met_b) return met_a;
    return score_a > score_b;
}

/* Offers row `from` followed by </s> to the finished list of sentence
 * sent, which keeps k. */
static void finish(cbeam *b, int sent, int k, int from, int t, float eos_lp, double logp,
                   bool met)
{
    tfm_search *s = b->s;
    tfm_hypothesis *list = s->hyps + (size_t)sent * s->spp;
    bool *fmet = b->fin_met + (size_t)sent * b->k_max;
    int at = s->count[sent];
    if (at == k) { /* full: replace the worst, if this one beats it */
        if (!finished_better(met, search_score(s, t, logp), fmet[k - 1], list[k - 1].score))
            return;
        at = k - 1;
    } else {
        s->count[sent]++;
    }
    search_hyp_write(s, &list[at], beam_rows_ids(&b->rows, from), beam_rows_lps(&b->rows, from),
                     t, eos_lp, logp);
    fmet[at] = met;
    while (at > 0 && finished_better(fmet[at], list[at].score, fmet[at - 1], list[at - 1].score)) {
        tfm_hypothesis h = list[at];
        list[at] = list[at - 1];
        list[at - 1] = h;
        bool m = fmet[at];
        fmet[at] = fmet[at - 1];
        fmet[at - 1] = m;
        at--;
    }
}

/* ---- candidates ----------------------------------------------------------------------- */

static int cmp_row_tok(const void *pa, const void *pb)
{
    const ccand *a = pa, *b = pb;
    if (a->row != b->row) return a->row < b->row ? -1 : 1;
    return (a->tok > b->tok) - (a->tok < b->tok);
}

/* Within a bank: the higher bank first, then the better score, then the
 * lower row and token (a strict total order, as search_cand_better). */
static int cmp_bank_score(const void *pa, const void *pb)
{
    const ccand *a = pa, *b = pb;
    if (a->st.bank != b->st.bank) return a->st.bank > b->st.bank ? -1 : 1;
    if (a->score != b->score) return a->score > b->score ? -1 : 1;
    return cmp_row_tok(pa, pb);
}

/* Round-robin over the banks: the best of each bank (the most advanced bank
 * first), then the second of each, ...  (rank, bank) is unique. */
static int cmp_stripes(const void *pa, const void *pb)
{
    const ccand *a = pa, *b = pb;
    if (a->rank != b->rank) return a->rank < b->rank ? -1 : 1;
    return (a->st.bank < b->st.bank) - (a->st.bank > b->st.bank);
}

static void add_cand(cbeam *b, int *n, int row, int32_t tok)
{
    if (*n < b->cand_cap) b->cands[(*n)++] = (ccand){.row = row, .tok = tok};
}

/* Gathers the candidates of sentence a into b->cands, deduplicated, with
 * their scores and states; returns how many. */
static int gather(cbeam *b, const csent *a, const tfm_constraints *c)
{
    tfm_search *s = b->s;
    const int k = a->k, V = b->V;
    const float *logits = s->logits;
    const tfm_logit_stats *stats = s->stats;
    const double *logp = b->rows.logp[b->rows.cur];
    const cstate *state = b->state[b->rows.cur];
    int n = 0;

    /* the best 2k of the sentence */
    search_heap h;
    search_heap_init(&h, b->heap, 2 * k);
    for (int i = 0; i < a->n_live; i++) {
        const int r = a->row0 + i;
        const float *row = logits + (size_t)r * V;
        const double base = logp[r];
        float cut = h.n == h.cap ? search_logit_cut(&h, base, &stats[r]) : -INFINITY;
        for (int v = search_next_not_below(row, 0, V, cut); v < V;
             v = search_next_not_below(row, v + 1, V, cut)) {
            search_heap_offer(&h, base + search_lp(&stats[r], row[v]), i, v);
            if (h.n == h.cap) cut = search_logit_cut(&h, base, &stats[r]);
        }
    }
    for (int j = 0; j < h.n; j++) add_cand(b, &n, h.c[j].row, h.c[j].tok);

    /* each row's best token, and the tokens that advance its constraints */
    for (int i = 0; i < a->n_live; i++) {
        const int r = a->row0 + i;
        const float *row = logits + (size_t)r * V;
        const int32_t best = search_best(row, V, &stats[r]);
        if (best >= 0) add_cand(b, &n, i, best);
        if (!c) continue;
        const cstate *st = &state[r];
        const cstate fresh = {.met = st->met, .alt = -1, .just = -1};
        for (int alt = 0; alt < c->n_alts; alt++) {
            if (st->alt >= 0 && alt_open(c, st, alt))
                add_cand(b, &n, i, c->ids.data[c->alt_start[alt] + st->pos]);
            if (alt_open(c, &fresh, alt)) add_cand(b, &n, i, c->ids.data[c->alt_start[alt]]);
        }
    }

    /* one of each (row, token) that is allowed, scored, with its state */
    qsort(b->cands, (size_t)n, sizeof *b->cands, cmp_row_tok);
    int m = 0;
    for (int j = 0; j < n; j++) {
        ccand x = b->cands[j];
        if (m > 0 && b->cands[m - 1].row == x.row && b->cands[m - 1].tok == x.tok) continue;
        const int r = a->row0 + x.row;
        const float v = logits[(size_t)r * V + x.tok];
        if (!(v > -INFINITY)) continue;
        x.score = logp[r] + search_lp(&stats[r], v);
        x.st = advance(c, state[r], x.tok);
        b->cands[m++] = x;
    }
    return m;
}

/* ---- a step --------------------------------------------------------------------------- */

/* Writes the next step's row: row `from` followed by x's token, with x's state. */
static void emit_row(cbeam *b, int from, const ccand *x, float tok_lp, int t)
{
    int r = beam_rows_emit(&b->rows, from, x->tok, tok_lp, x->score, t);
    b->state[1 - b->rows.cur][r] = x->st;
}

/* One step of one sentence: mask, gather, allocate the beam over the banks,
 * finish, continue.  Returns whether the sentence goes on. */
static bool sentence_step(void *ctx, void *sentence, int t)
{
    cbeam *b = ctx;
    csent *a = sentence;
    tfm_search *s = b->s;
    const int k = a->k, V = b->V, sent = a->sent;
    const tfm_constraints *c = constraints_of(s, sent);
    const uint64_t full = all_met(c);
    const tfm_logit_stats *stats = s->stats;
    const int plen = search_prefix_len(s, sent);

    for (int i = 0; i < a->n_live; i++) {
        const int r = a->row0 + i;
        float *row = s->logits + (size_t)r * V;
        const int32_t *hist = beam_rows_ids(&b->rows, r);
        search_constrain(s, sent, hist, t, row);
        search_min_length_restat(s, sent, t, row, &s->stats[r]);
        if (c && t >= plen && t < s->max_len[sent])
            apply_masks(s, c, hist, t, &b->state[b->rows.cur][r], row);
    }
    const int n = gather(b, a, c);

    /* rank within banks, then stripes across them */
    qsort(b->cands, (size_t)n, sizeof *b->cands, cmp_bank_score);
    for (int j = 0, rank = 0; j < n; j++) {
        rank = j > 0 && b->cands[j].st.bank == b->cands[j - 1].st.bank ? rank + 1 : 0;
        b->cands[j].rank = rank;
    }
    qsort(b->cands, (size_t)n, sizeof *b->cands, cmp_stripes);

    /* </s> among the first k finishes; others continue, up to k */
    const int start = b->rows.new_R;
    int n_live = 0;
    for (int j = 0; j < n; j++) {
        const ccand *x = &b->cands[j];
        const int r = a->row0 + x->row;
        const float tok_lp = search_lp(&stats[r], s->logits[(size_t)r * V + x->tok]);
        if (x->tok == s->eos) {
            if (j < k) finish(b, sent, k, r, t, tok_lp, x->score, x->st.met == full);
        } else if (n_live < k) {
            emit_row(b, r, x, tok_lp, t);
            n_live++;
        }
    }
    a->row0 = start;
    a->n_live = n_live;
    if (s->count[sent] < k && n_live > 0) return true;

    b->rows.new_R = start; /* done: its live rows are dropped */
    const int found = s->count[sent];
    s->met[sent] = found > 0 ? b->fin_met[(size_t)sent * b->k_max] : full == 0;
    s->count[sent] = found < s->p->nbest ? found : s->p->nbest;
    return false;
}

/* Whether ids[0..n) are all in [0, V). */
static bool ids_below(const int32_t *ids, size_t n, int V)
{
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= V) return false;
    return true;
}

int search_constrained_rows(const tfm_search_params *p, const tfm_constraints *c)
{
    if (p->beam == 1 && tfm_constraints_count(c) > 0) return SEARCH_GREEDY_CONSTRAINED_ROWS;
    return p->beam;
}

int search_constrained_most_rows(const tfm_search_params *p, const tfm_search_input *in)
{
    int most = p->beam;
    for (int i = 0; i < in->n_sentences; i++) {
        const int k = search_constrained_rows(p, in->constraints[i]);
        if (k > most) most = k;
    }
    return most;
}

tfm_status search_constrained(tfm_search *s, tfm_decoder *d, tfm_error *err)
{
    const tfm_search_input *in = s->in;
    const int n = in->n_sentences, k = search_constrained_most_rows(s->p, in);
    const size_t rows = (size_t)n * k;

    int most_alts = 0;
    for (int i = 0; i < n; i++) {
        const tfm_constraints *c = constraints_of(s, i);
        if (!c) continue;
        for (size_t j = 0; j < c->ids.len; j++) {
            int32_t id = c->ids.data[j];
            if (id < 0 || id >= s->V || id == s->pad || id == s->bos || id == s->eos)
                return tfm_error_set(err, TFM_ERR_RANGE, "search: sentence %d: constraint id "
                                     "%d is %s", i, (int)id, id < 0 || id >= s->V ?
                                     "outside the target vocabulary" : "<pad>, <s> or </s>");
        }
        if (!ids_below(c->banned.data, c->banned.len, s->V) ||
            !ids_below(c->limited, (size_t)c->n_limited, s->V) ||
            !ids_below(c->ordered.data, c->ordered.len, s->V) ||
            !ids_below(c->enclosed.data, c->enclosed.len, s->V) ||
            !ids_below(c->after_tok.data, c->after_tok.len, s->V) ||
            !ids_below(c->pair_second.data, c->pair_second.len, s->V))
            return tfm_error_set(err, TFM_ERR_RANGE, "search: sentence %d: a banned, limited, "
                                 "ordered or enclosed id outside the target vocabulary", i);
        if (c->n_alts > most_alts) most_alts = c->n_alts;
    }
    cbeam b = {.s = s, .k_max = k, .V = s->V};
    /* candidates of a sentence: 2k best, k rows' best, and per row the
     * next id of every alternative under way and the first of every one */
    b.cand_cap = 3 * k + k * 2 * most_alts;
    csent *act = search_work(s, 0, (size_t)n, sizeof *act);
    b.heap = search_work(s, 6, 2 * (size_t)k, sizeof *b.heap);
    cstate *state = search_work(s, 7, 2 * rows, sizeof *state);
    b.cands = search_work(s, 8, (size_t)b.cand_cap, sizeof *b.cands);
    b.fin_met = search_work(s, 9, rows, sizeof *b.fin_met);
    if (!act || !b.heap || !state || !b.cands || !b.fin_met || !beam_rows_init(&b.rows, s, rows))
        return tfm_error_set(err, TFM_ERR_NOMEM, "search: out of memory for %d sentences", n);
    memset(b.fin_met, 0, rows * sizeof *b.fin_met);
    b.state[0] = state;
    b.state[1] = state + rows;
    /* every sentence starts with one hypothesis, <s>, having met nothing */
    for (int i = 0; i < n; i++) {
        act[i] = (csent){.sent = i, .k = search_constrained_rows(s->p, constraints_of(s, i)),
                         .row0 = i, .n_live = 1};
        b.state[0][i] = (cstate){.alt = -1, .just = -1};
    }
    return beam_rows_run(s, d, &b.rows, act, sizeof *act, n, sentence_step, &b, err);
}
