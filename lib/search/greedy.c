/* greedy.c - greedy search and sampling: each row of the decoder is one
 * hypothesis that never branches, so a step only picks one token per row
 * (the most probable, or a draw) and a row that produced </s> leaves the
 * batch.
 *
 * A row's ids are written straight into its result slot, so nothing is
 * copied when rows leave: the decoder drops the finished rows
 * (tfm_decoder_reorder) and the others keep their slots.
 */
#include "search/search_internal.h"

tfm_status search_rows(tfm_search *s, tfm_decoder *d, tfm_error *err)
{
    const tfm_search_params *p = s->p;
    const tfm_search_input *in = s->in;
    const int n = in->n_sentences, V = s->V, S = s->S;
    const int m = s->spp; /* rows (hypotheses) per sentence */
    const int R0 = n * m;
    const bool sampling = p->sampling && p->temperature > 0.0f && p->top_k != 1;
    /* greedy without log-probs: the best token alone, no exponentials */
    const bool best_only = !sampling && !p->log_probs;

    int *slot = search_work(s, 0, (size_t)R0, sizeof(int));      /* row -> its slot */
    int *parent = search_work(s, 1, (size_t)R0, sizeof(int));    /* rows kept, for reorder */
    int32_t *tokens = search_work(s, 2, (size_t)R0, sizeof(int32_t));
    double *log_prob = search_work(s, 3, (size_t)R0, sizeof(double)); /* per slot */
    tfm_rng *rng = search_work(s, 4, sampling ? (size_t)R0 : 1, sizeof(tfm_rng)); /* per slot */
    search_cand *scratch = search_work(s, 5, sampling ? (size_t)V : 1, sizeof(search_cand));
    if (!slot || !parent || !tokens || !log_prob || !rng || !scratch)
        return tfm_error_set(err, TFM_ERR_NOMEM, "search: out of memory for %d rows", R0);

    for (int r = 0; r < R0; r++) {
        slot[r] = r;
        parent[r] = r / m; /* the sentence of row r, for the decoder */
        log_prob[r] = 0.0;
        if (sampling) {
            /* sample j of sentence i draws from its own stream, seeded by
             * (seed of i, j): independent of the batch around it */
            uint64_t key[2] = {in->seeds ? in->seeds[r / m] : p->seed, (uint64_t)(r % m)};
            tfm_rng_seed(&rng[r], tfm_hash_bytes(key, sizeof key));
        }
    }
    tfm_status st = tfm_decoder_start(d, n, in->states, in->src_lens, R0, parent, S, err);
    if (st != TFM_OK) return st;
    st = tfm_decoder_restrict(d, in->vocab, in->vocab_size, err);
    if (st != TFM_OK) return st;

    int R = R0;
    for (int t = 0; R > 0; t++) {
        for (int r = 0; r < R; r++) tokens[r] = t == 0 ? s->bos : s->ids[(size_t)slot[r] * S + t - 1];
        st = best_only ? tfm_decoder_step_best(d, tokens, s->logits, s->stats, err)
                       : tfm_decoder_step_logits(d, tokens, s->logits, s->stats, err);
        if (st != TFM_OK) return st;

        int kept = 0;
        for (int r = 0; r < R; r++) {
            const int i = slot[r], sent = i / m;
            int32_t *ids = s->ids + (size_t)i * S;
            float *lps = s->lps + (size_t)i * S;
            float *row = s->logits + (size_t)r * V;
            int32_t tok;
            if (sampling) { /* the sampler reads log-probs: write them */
                search_log_softmax(row, V, &s->stats[r]);
                search_constrain(s, sent, ids, t, row);
                tok = search_sample(p, row, V, &rng[i], scratch);
            } else { /* greedy needs only the best one's */
                search_constrain(s, sent, ids, t, row);
                if (!best_only) search_min_length_restat(s, sent, t, row, &s->stats[r]);
                tok = search_best(row, V, &s->stats[r]);
            }
            const float lp = sampling    ? row[tok]
                             : best_only ? 0.0f
                                         : search_lp(&s->stats[r], row[tok]);
            lps[t] = lp;
            log_prob[i] += lp;
            if (tok == s->eos) {
                search_hyp_write(s, &s->hyps[i], ids, lps, t, lp, log_prob[i]);
                continue;
            }
            ids[t] = tok;
            parent[kept] = r;
            slot[kept] = i;
            kept++;
        }
        /* rows that ended leave the decoder (no cache is copied) */
        if (kept < R && kept > 0) {
            st = tfm_decoder_reorder(d, kept, parent, err);
            if (st != TFM_OK) return st;
        }
        R = kept;
    }
    /* every row ends by its max_len (where only </s> is allowed) */
    for (int i = 0; i < n; i++) s->count[i] = m;
    return TFM_OK;
}
