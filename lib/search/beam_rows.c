/* beam_rows.c - the rows of a beam-like search (beam.c, constrained.c): each
 * row's history and total log-prob in two buffers that a step reads and
 * writes, and the step loop that feeds the rows to the incremental decoder,
 * lets each live sentence choose its next rows, and makes the decoder
 * follow them with one tfm_decoder_reorder a step (which also drops the
 * rows of sentences that are done). */
#include <string.h>

#include "search/search_internal.h"

enum { WORK_HIST = 1, WORK_HLP, WORK_LOGP, WORK_TOKENS, WORK_PARENT }; /* search_work slots */

bool beam_rows_init(beam_rows *r, tfm_search *s, size_t rows)
{
    const int S = s->S;
    int32_t *hist = search_work(s, WORK_HIST, 2 * rows * S, sizeof *hist);
    float *hlp = search_work(s, WORK_HLP, 2 * rows * S, sizeof *hlp);
    double *logp = search_work(s, WORK_LOGP, 2 * rows, sizeof *logp);
    r->tokens = search_work(s, WORK_TOKENS, rows, sizeof *r->tokens);
    r->parent = search_work(s, WORK_PARENT, rows, sizeof *r->parent);
    if (!hist || !hlp || !logp || !r->tokens || !r->parent) return false;
    r->S = S;
    r->cur = 0;
    r->new_R = 0;
    for (int i = 0; i < 2; i++) {
        r->hist[i] = hist + i * rows * S;
        r->hlp[i] = hlp + i * rows * S;
        r->logp[i] = logp + i * rows;
    }
    return true;
}

int beam_rows_emit(beam_rows *r, int from, int32_t tok, float tok_lp, double logp, int t)
{
    const int S = r->S, nxt = 1 - r->cur, at = r->new_R++;
    int32_t *ids = r->hist[nxt] + (size_t)at * S;
    float *lps = r->hlp[nxt] + (size_t)at * S;
    memcpy(ids, r->hist[r->cur] + (size_t)from * S, (size_t)t * sizeof *ids);
    memcpy(lps, r->hlp[r->cur] + (size_t)from * S, (size_t)t * sizeof *lps);
    ids[t] = tok;
    lps[t] = tok_lp;
    r->logp[nxt][at] = logp;
    r->parent[at] = from;
    return at;
}

tfm_status beam_rows_run(tfm_search *s, tfm_decoder *d, beam_rows *r, void *act, size_t size,
                           int n, bool (*step)(void *ctx, void *sentence, int t), void *ctx,
                           tfm_error *err)
{
    const tfm_search_input *in = s->in;
    const int S = r->S;
    /* every sentence starts with one row, <s>, of log-prob 0 */
    for (int i = 0; i < n; i++) {
        r->logp[0][i] = 0.0;
        r->parent[i] = i; /* here: the sentence of row i */
    }
    tfm_status st = tfm_decoder_start(d, n, in->states, in->src_lens, n, r->parent, S, err);
    if (st != TFM_OK) return st;
    st = tfm_decoder_restrict(d, in->vocab, in->vocab_size, err);
    if (st != TFM_OK) return st;

    char *a = act;
    int R = n, n_act = n;
    for (int t = 0; n_act > 0; t++) {
        for (int i = 0; i < R; i++)
            r->tokens[i] = t == 0 ? s->bos : r->hist[r->cur][(size_t)i * S + t - 1];
        st = tfm_decoder_step_logits(d, r->tokens, s->logits, s->stats, err);
        if (st != TFM_OK) return st;

        r->new_R = 0;
        int kept = 0;
        for (int i = 0; i < n_act; i++) {
            if (!step(ctx, a + (size_t)i * size, t)) continue;
            if (kept != i) memcpy(a + (size_t)kept * size, a + (size_t)i * size, size);
            kept++;
        }
        n_act = kept;
        if (r->new_R == 0) break;
        st = tfm_decoder_reorder(d, r->new_R, r->parent, err);
        if (st != TFM_OK) return st;
        R = r->new_R;
        r->cur = 1 - r->cur;
    }
    return TFM_OK;
}
