/* test_search.c - greedy search, beam search and sampling on random tiny
 * models (the "tiny" preset with a 40-token vocabulary, every parameter
 * nudged off its initial value, and the </s> embedding scaled so that some
 * hypotheses end early and others run to their max length).
 *
 * Properties: beam 1 equals greedy (two separate code paths); beam search's
 * best never scores below greedy's; a sentence decoded alone equals the same
 * sentence decoded in a batch; reported scores equal a recomputation with
 * the full (uncached) decoder; max and min lengths, n-best lists, forced
 * prefixes and n-gram blocking hold; sampling is seeded, its top-k and
 * nucleus limits hold, and its degenerate settings equal greedy search;
 * an empty source gives the empty sentence; bad arguments are refused.
 * Constrained beam search: test_constrained.c; the fixtures and the
 * tolerances: testsearch.h.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "testsearch.h"
#include "search/search_internal.h"
#include "tfm/pass.h"
#include "tfm/search.h"

/* Whether ids[0..len) hold some N-gram twice. */
static bool has_repeat(const int32_t *ids, int len, int N)
{
    for (int i = 0; i + N <= len; i++)
        for (int j = i + 1; j + N <= len; j++)
            if (memcmp(ids + i, ids + j, (size_t)N * sizeof *ids) == 0) return true;
    return false;
}

/* ---- the candidate heap against a full sort ------------------------------------------- */

static int cmp_cand(const void *a, const void *b)
{
    return search_cand_better(a, b) ? -1 : search_cand_better(b, a) ? 1 : 0;
}

static void test_heap_selects_best(void)
{
    tfm_rng rng;
    tfm_rng_seed(&rng, 7);
    search_cand all[300], kept[40];
    for (int trial = 0; trial < 200; trial++) {
        int n = 1 + (int)tfm_rng_below(&rng, 300), cap = 1 + (int)tfm_rng_below(&rng, 40);
        search_heap h;
        search_heap_init(&h, kept, cap);
        int m = 0;
        for (int i = 0; i < n; i++) {
            /* few distinct scores, so ties are common; some -inf */
            double sc = tfm_rng_below(&rng, 10) == 0 ? -INFINITY : -(double)tfm_rng_below(&rng, 8);
            search_cand c = {sc, (int)tfm_rng_below(&rng, 4), (int32_t)i};
            search_heap_offer(&h, c.score, c.row, c.tok);
            if (sc > -INFINITY) all[m++] = c;
        }
        qsort(all, (size_t)m, sizeof *all, cmp_cand);
        search_heap_sort(&h);
        CHECK(h.n == (m < cap ? m : cap));
        for (int i = 0; i < h.n; i++)
            CHECK(kept[i].score == all[i].score && kept[i].row == all[i].row &&
                  kept[i].tok == all[i].tok);
    }
}

/* ---- greedy and beam ---------------------------------------------------------------- */

/* (Under the sanitizers 8 sentences a model, lengths 0 to 12 among them.) */
static void test_beam1_equals_greedy(void)
{
    const int n = SENTENCES(24, 8);
    for (int model = 0; model < 4; model++) {
        fixture f;
        if (!fixture_make(&f, 100 + model, n, 1.0f + 0.7f * model, model == 3)) return;
        tfm_search *s2 = NULL;
        tfm_search_create(f.m, &s2, NULL);
        for (int variant = 0; variant < 4; variant++) {
            tfm_search_params p = tfm_search_default_params(); /* power, alpha 1 */
            p.beam = 1;
            p.max_length_offset = 15;
            if (variant == 1) p.min_length = 4, p.length_rule = TFM_LENGTH_GNMT,
                              p.length_penalty = 0.6f;
            if (variant == 2) p.no_repeat_ngram_size = 2, p.length_rule = TFM_LENGTH_GNMT;
            if (variant == 3) p.length_penalty = 0.5f;
            tfm_search_input in = input_of(&f, 0, n);
            if (!run(f.s, f.d, &p, &in, SEARCH_ROWS) || !run(s2, f.d, &p, &in, SEARCH_BEAM)) break;
            for (int i = 0; i < n; i++) {
                tfm_nbest g = tfm_search_result(f.s, i), b = tfm_search_result(s2, i);
                CHECK(g.n == 1 && b.n == 1);
                CHECK_MSG(same_ids(&g.hyps[0], &b.hyps[0]), "model %d variant %d sentence %d",
                          model, variant, i);
                CHECK(g.hyps[0].log_prob == b.hyps[0].log_prob);
                CHECK(g.hyps[0].score == b.hyps[0].score);
                CHECK(memcmp(g.hyps[0].token_log_probs, b.hyps[0].token_log_probs,
                             (size_t)(g.hyps[0].len + 1) * sizeof(float)) == 0);
            }
        }
        tfm_search_free(s2);
        fixture_free(&f);
    }
}

/* Greedy search without log-probs (log_probs false: the decoder's
 * tfm_decoder_step_best, no exponentials) picks the same ids as with them,
 * packed and not, with constraints; its log-probs and scores are 0. */
static void test_greedy_without_log_probs(void)
{
    /* under the sanitizers 8 sentences a model, lengths 0 to 12, packed and not */
    const int n = SENTENCES(24, 8);
    for (int model = 0; model < 4; model++) {
        fixture f;
        if (!fixture_make(&f, 300 + model, n, 1.0f + 0.5f * model, model == 3)) return;
        tfm_error err;
        if (model % 2) CHECK(tfm_model_pack_for_decoding(f.m, &err) == TFM_OK);
        tfm_search *s2 = NULL;
        tfm_search_create(f.m, &s2, NULL);
        tfm_search_params p = tfm_search_default_params(), q;
        p.beam = 1;
        p.max_length_offset = 15;
        p.min_length = model;
        p.no_repeat_ngram_size = model == 2 ? 2 : 0;
        q = p;
        q.log_probs = false;
        tfm_search_input in = input_of(&f, 0, n);
        if (run(f.s, f.d, &p, &in, SEARCH_ROWS) && run(s2, f.d, &q, &in, SEARCH_ROWS))
            for (int i = 0; i < n; i++) {
                tfm_nbest a = tfm_search_result(f.s, i), b = tfm_search_result(s2, i);
                CHECK(a.n == 1 && b.n == 1);
                CHECK_MSG(same_ids(&a.hyps[0], &b.hyps[0]), "model %d sentence %d", model, i);
                CHECK(b.hyps[0].log_prob == 0 && b.hyps[0].score == 0);
                for (int t = 0; t <= b.hyps[0].len; t++) CHECK(b.hyps[0].token_log_probs[t] == 0);
            }
        tfm_search_free(s2);
        fixture_free(&f);
    }
}

/* While --min-length forbids </s>, a step's log-probs are those of the
 * distribution without it (as CTranslate2 masks before its softmax), in
 * greedy, beam and plain beam search alike; and plain beam search (no
 * greedy path) still gives hypotheses whose scores are their own. */
static void test_min_length_renormalizes(void)
{
    const int n = 8;
    fixture f;
    if (!fixture_make(&f, 410, n, 1.5f, false)) return;
    float tok[128];
    for (int variant = 0; variant < 3; variant++) {
        tfm_search_params p = tfm_search_default_params();
        p.max_length_offset = 10;
        p.min_length = 3;
        p.beam = variant == 0 ? 1 : 4;
        p.nbest = variant == 0 ? 1 : 2;
        p.plain_beam = variant == 2;
        tfm_search_input in = input_of(&f, 0, n);
        if (!run(f.s, f.d, &p, &in, SEARCH_AUTO)) break;
        for (int i = 0; i < n; i++) {
            tfm_nbest nb = tfm_search_result(f.s, i);
            for (int j = 0; j < nb.n; j++) {
                const tfm_hypothesis *h = &nb.hyps[j];
                CHECK(h->len >= p.min_length || f.lens[i] == 0); /* an empty source: empty */
                /* an empty source's </s> is forced, not chosen */
                double sum = recompute_min_length(f.m, f.states[i], f.lens[i], h,
                                                  f.lens[i] ? p.min_length : 0, tok);
                CHECK_NEAR(h->log_prob, sum, 1e-4);
                for (int t = 0; t <= h->len; t++)
                    CHECK_NEAR(h->token_log_probs[t], tok[t], 1e-4);
                CHECK_NEAR(h->score, h->log_prob / (h->len + 1), 1e-5);
            }
        }
    }
    fixture_free(&f);
}

/* Each of the 18 settings (beam 2, 4, 6; alpha 0, 0.6, 1.5; the two length
 * rules) once, over the six models; under the sanitizers on 10 sentences a
 * model (lengths 0 to 12: 180 comparisons, beam ahead in about half). */
static void test_beam_not_below_greedy(void)
{
    const int n = SENTENCES(32, 10);
    int better = 0, total = 0;
    for (int model = 0; model < 6; model++) {
        fixture f;
        if (!fixture_make(&f, 200 + model, n, 1.0f + 0.5f * (model % 4), model == 5)) return;
        tfm_search *g = NULL;
        tfm_search_create(f.m, &g, NULL);
        const int beams[] = {2, 4, 6};
        const float alphas[] = {0.0f, 0.6f, 1.5f};
        for (int v = 0; v < 3; v++) {
            tfm_search_params p = tfm_search_default_params();
            p.max_length_offset = 12;
            p.length_penalty = alphas[(v + model) % 3];
            p.length_rule = (v + model) % 2 ? TFM_LENGTH_GNMT : TFM_LENGTH_POWER;
            p.beam = beams[v];
            tfm_search_params pg = p;
            pg.beam = 1;
            tfm_search_input in = input_of(&f, 0, n);
            if (!run(f.s, f.d, &p, &in, SEARCH_AUTO) || !run(g, f.d, &pg, &in, SEARCH_AUTO)) break;
            for (int i = 0; i < n; i++) {
                const tfm_hypothesis *hb = &tfm_search_result(f.s, i).hyps[0];
                const tfm_hypothesis *hg = &tfm_search_result(g, i).hyps[0];
                CHECK_MSG(hb->score >= hg->score - 1e-4, "model %d beam %d %s alpha %g sentence "
                          "%d: beam %.6f < greedy %.6f", model, p.beam,
                          tfm_length_rule_name(p.length_rule), (double)p.length_penalty, i,
                          (double)hb->score, (double)hg->score);
                better += hb->score > hg->score + 1e-4;
                total++;
            }
        }
        tfm_search_free(g);
        fixture_free(&f);
    }
    /* beam search must be doing something: it beats greedy often */
    CHECK_MSG(better > total / 4, "beam beat greedy on %d of %d", better, total);
}

/* Decoding a sentence alone gives what it gets in a batch. */
static void test_batch_equals_alone(void)
{
    /* under the sanitizers 8 sentences: two empty sources, lengths 3 to 12 */
    const int n = SENTENCES(16, 8);
    fixture f;
    if (!fixture_make(&f, 300, n, 1.8f, false)) return;
    tfm_search *one = NULL;
    tfm_search_create(f.m, &one, NULL);
    for (int variant = 0; variant < 4; variant++) {
        tfm_search_params p = tfm_search_default_params();
        p.max_length_offset = 10;
        if (variant == 0) p.beam = 1;
        if (variant == 1) p.beam = 4, p.nbest = 3;
        if (variant == 2) p.beam = 5, p.nbest = 5, p.no_repeat_ngram_size = 2, p.min_length = 2;
        if (variant == 3) p.sampling = true, p.nbest = 3, p.top_k = 10, p.top_p = 0.9f;
        uint64_t seeds[MAXN];
        for (int i = 0; i < n; i++) seeds[i] = 1000 + (uint64_t)i * 7;
        tfm_search_input in = input_of(&f, 0, n);
        in.seeds = seeds;
        if (!run(f.s, f.d, &p, &in, SEARCH_AUTO)) break;
        for (int i = 0; i < n; i++) {
            tfm_search_input in1 = input_of(&f, i, 1);
            in1.seeds = &seeds[i];
            if (!run(one, f.d, &p, &in1, SEARCH_AUTO)) break;
            tfm_nbest a = tfm_search_result(f.s, i), b = tfm_search_result(one, 0);
            CHECK_MSG(a.n == b.n, "variant %d sentence %d: %d vs %d", variant, i, a.n, b.n);
            for (int j = 0; j < a.n && j < b.n; j++) {
                CHECK_MSG(same_ids(&a.hyps[j], &b.hyps[j]), "variant %d sentence %d hyp %d",
                          variant, i, j);
                CHECK_NEAR(a.hyps[j].log_prob, b.hyps[j].log_prob, 1e-4);
                CHECK_NEAR(a.hyps[j].score, b.hyps[j].score, 1e-4);
            }
        }
    }
    tfm_search_free(one);
    fixture_free(&f);
}

/* Every hypothesis's scores equal the full decoder's, token by token. */
static void test_scores_recomputed(void)
{
    /* under the sanitizers 7 sentences (two empty sources, lengths 2 to 9),
     * the prefix on sentences 0, 3 and 6 (the first two empty sources) */
    const int n = SENTENCES(12, 7);
    fixture f;
    if (!fixture_make(&f, 400, n, 1.5f, false)) return;
    int32_t pre[3] = {7, 9, 7};
    const int32_t *prefixes[MAXN] = {0};
    int prefix_lens[MAXN] = {0};
    for (int i = 0; i < n; i += 3) prefixes[i] = pre, prefix_lens[i] = 1 + i % 3;
    float tok[128];
    for (int variant = 0; variant < 6; variant++) {
        tfm_search_params p = tfm_search_default_params();
        p.max_length_offset = 10;
        p.nbest = p.beam = variant % 3 == 0 ? 1 : 4;
        p.sampling = variant % 3 == 2;
        p.length_rule = variant < 3 ? TFM_LENGTH_POWER : TFM_LENGTH_GNMT;
        p.length_penalty = 0.6f + 0.4f * (float)(variant % 3);
        tfm_search_input in = input_of(&f, 0, n);
        in.prefixes = prefixes;
        in.prefix_lens = prefix_lens;
        if (!run(f.s, f.d, &p, &in, SEARCH_AUTO)) break;
        for (int i = 0; i < n; i++) {
            tfm_nbest nb = tfm_search_result(f.s, i);
            for (int j = 0; j < nb.n; j++) {
                const tfm_hypothesis *h = &nb.hyps[j];
                double sum = recompute(f.m, f.states[i], f.lens[i], h, tok);
                CHECK_NEAR(h->log_prob, sum, 1e-4);
                double tsum = 0;
                for (int t = 0; t <= h->len; t++) {
                    CHECK_NEAR(h->token_log_probs[t], tok[t], 1e-4);
                    tsum += h->token_log_probs[t];
                }
                CHECK_NEAR(h->log_prob, tsum, 1e-4);
                /* m = len + 1, the </s> counted */
                const double m = h->len + 1, alpha = p.length_penalty;
                const double lp = p.length_rule == TFM_LENGTH_POWER ? pow(m, alpha)
                                                                    : pow((5 + m) / 6, alpha);
                CHECK_NEAR(h->score, h->log_prob / lp, 1e-5);
                CHECK_NEAR(h->score, h->log_prob / tfm_length_penalty(p.length_rule, h->len + 1,
                                                                      p.length_penalty), 1e-5);
            }
        }
    }
    CHECK_NEAR(tfm_length_penalty(TFM_LENGTH_GNMT, 1, 0.6f), 1.0, 1e-12);
    CHECK_NEAR(tfm_length_penalty(TFM_LENGTH_GNMT, 7, 0.6f), pow(2.0, (double)0.6f), 1e-12);
    CHECK_NEAR(tfm_length_penalty(TFM_LENGTH_GNMT, 30, 0.0f), 1.0, 0);
    CHECK_NEAR(tfm_length_penalty(TFM_LENGTH_POWER, 1, 0.6f), 1.0, 1e-12);
    CHECK_NEAR(tfm_length_penalty(TFM_LENGTH_POWER, 7, 1.0f), 7.0, 1e-12);
    CHECK_NEAR(tfm_length_penalty(TFM_LENGTH_POWER, 4, 0.5f), 2.0, 1e-12);
    CHECK_NEAR(tfm_length_penalty(TFM_LENGTH_POWER, 30, 0.0f), 1.0, 0);
    /* both grow with m (the greedy path's bound in beam search relies on it) */
    for (int rule = 0; rule < 2; rule++)
        for (int m = 1; m < 300; m++)
            CHECK(tfm_length_penalty((tfm_length_rule)rule, m + 1, 0.3f) >=
                  tfm_length_penalty((tfm_length_rule)rule, m, 0.3f));
    CHECK(strcmp(tfm_length_rule_name(TFM_LENGTH_POWER), "power") == 0);
    CHECK(strcmp(tfm_length_rule_name(TFM_LENGTH_GNMT), "gnmt") == 0);
    CHECK(tfm_length_rule_name((tfm_length_rule)2) == NULL);
    fixture_free(&f);
}

static void test_lengths(void)
{
    const int n = 20;
    fixture f;
    if (!fixture_make(&f, 500, n, 2.0f, false)) return;
    int reached_max = 0, ended_early = 0;
    for (int variant = 0; variant < 9; variant++) {
        tfm_search_params p = tfm_search_default_params();
        p.beam = variant % 3 == 0 ? 1 : 4;
        p.nbest = p.beam == 1 ? 1 : 3;
        p.sampling = variant % 3 == 2;
        p.max_length_offset = 3 + variant;
        if (variant >= 3) p.max_length = 9;
        if (variant >= 6) p.min_length = variant == 8 ? 20 : 5; /* 20: above every max */
        tfm_search_input in = input_of(&f, 0, n);
        if (!run(f.s, f.d, &p, &in, SEARCH_AUTO)) break;
        for (int i = 0; i < n; i++) {
            int max_len = f.lens[i] + p.max_length_offset;
            if (p.max_length > 0 && max_len > p.max_length) max_len = p.max_length;
            if (f.lens[i] == 0) max_len = 0; /* an empty source: the empty sentence */
            tfm_nbest nb = tfm_search_result(f.s, i);
            CHECK(nb.n >= 1 && nb.n <= p.nbest);
            for (int j = 0; j < nb.n; j++) {
                const tfm_hypothesis *h = &nb.hyps[j];
                CHECK_MSG(h->len <= max_len, "variant %d: len %d > %d", variant, h->len, max_len);
                int min_len = p.min_length < max_len ? p.min_length : max_len;
                CHECK_MSG(h->len >= min_len, "variant %d: len %d < %d", variant, h->len, min_len);
                for (int t = 0; t < h->len; t++)
                    CHECK(h->ids[t] != TFM_ID_EOS && h->ids[t] != TFM_ID_BOS &&
                          h->ids[t] != TFM_ID_PAD && h->ids[t] >= 0 && h->ids[t] < V);
                reached_max += h->len == max_len;
                ended_early += h->len < max_len;
            }
        }
    }
    /* both ways of ending were exercised */
    CHECK(reached_max > 10 && ended_early > 10);
    fixture_free(&f);
}

static void test_nbest_sorted_distinct(void)
{
    /* under the sanitizers 8 sentences: three empty sources, lengths 4 to 12 */
    const int n = SENTENCES(16, 8);
    fixture f;
    if (!fixture_make(&f, 600, n, 1.6f, false)) return;
    int full = 0;
    for (int variant = 0; variant < 2; variant++) {
        tfm_search_params p = tfm_search_default_params();
        p.beam = p.nbest = variant == 0 ? 5 : 8;
        p.max_length_offset = 8;
        p.length_rule = variant == 0 ? TFM_LENGTH_GNMT : TFM_LENGTH_POWER;
        p.length_penalty = variant == 0 ? 0.6f : 1.0f;
        tfm_search_input in = input_of(&f, 0, n);
        if (!run(f.s, f.d, &p, &in, SEARCH_AUTO)) break;
        for (int i = 0; i < n; i++) {
            tfm_nbest nb = tfm_search_result(f.s, i);
            CHECK(nb.n >= 1 && nb.n <= p.nbest);
            full += nb.n == (f.lens[i] ? p.nbest : 1); /* an empty source: one, empty */
            for (int j = 0; j < nb.n; j++) {
                if (j > 0) CHECK(nb.hyps[j - 1].score >= nb.hyps[j].score);
                for (int k = 0; k < j; k++) CHECK(!same_ids(&nb.hyps[j], &nb.hyps[k]));
            }
        }
    }
    CHECK(full == 2 * n); /* a 40-token vocabulary always fills the list */
    fixture_free(&f);
}

static void test_prefix_forced(void)
{
    const int n = 10;
    fixture f;
    if (!fixture_make(&f, 700, n, 2.5f, false)) return;
    int32_t pre[20];
    for (int j = 0; j < 20; j++) pre[j] = 4 + (j * 7) % (V - 4);
    const int32_t *prefixes[MAXN];
    int prefix_lens[MAXN];
    for (int i = 0; i < n; i++) {
        prefixes[i] = i % 4 == 1 ? NULL : pre;
        prefix_lens[i] = i % 4 == 1 ? 0 : i % 4 == 3 ? 20 : 1 + i % 5; /* 20: beyond max_len */
    }
    for (int variant = 0; variant < 3; variant++) {
        tfm_search_params p = tfm_search_default_params();
        p.beam = variant == 1 ? 4 : 1;
        p.nbest = variant == 0 ? 1 : variant == 1 ? 4 : 2;
        p.sampling = variant == 2;
        p.max_length_offset = 5;
        tfm_search_input in = input_of(&f, 0, n);
        in.prefixes = prefixes;
        in.prefix_lens = prefix_lens;
        if (!run(f.s, f.d, &p, &in, SEARCH_AUTO)) break;
        for (int i = 0; i < n; i++) {
            tfm_nbest nb = tfm_search_result(f.s, i);
            for (int j = 0; j < nb.n; j++) {
                const tfm_hypothesis *h = &nb.hyps[j];
                if (f.lens[i] == 0) { /* an empty source: the empty sentence, prefix or not */
                    CHECK_MSG(h->len == 0, "variant %d sentence %d", variant, i);
                    continue;
                }
                CHECK_MSG(h->len >= prefix_lens[i] &&
                              memcmp(h->ids, pre, (size_t)prefix_lens[i] * sizeof *pre) == 0,
                          "variant %d sentence %d", variant, i);
                if (prefix_lens[i] == 20) CHECK(h->len == 20); /* max_len raised to the prefix */
            }
        }
    }
    /* a prefix holding </s> or an id outside the vocabulary is refused */
    tfm_search_params p = tfm_search_default_params();
    tfm_error err;
    for (int bad = 0; bad < 2; bad++) {
        int32_t b[2] = {5, bad ? V : TFM_ID_EOS};
        const int32_t *bp = b;
        int bl = 2;
        tfm_search_input in = input_of(&f, 0, 1);
        in.prefixes = &bp;
        in.prefix_lens = &bl;
        CHECK(tfm_search_run(f.s, f.d, &p, &in, &err) == TFM_ERR_RANGE);
        CHECK(tfm_search_result(f.s, 0).n == 0);
    }
    fixture_free(&f);
}

static void test_no_repeat_ngram(void)
{
    /* under the sanitizers 6 sentences of 30 ids or more (sources of 0 to
     * 12): without blocking they still repeat (35 times) */
    const int n = SENTENCES(16, 6);
    fixture f;
    if (!fixture_make(&f, 800, n, 1.0f, false)) return;
    for (int N = 0; N <= 3; N++) {
        int repeats = 0;
        for (int variant = 0; variant < 3; variant++) {
            tfm_search_params p = tfm_search_default_params();
            p.no_repeat_ngram_size = N;
            p.beam = variant == 1 ? 4 : 1;
            p.nbest = variant == 0 ? 1 : variant == 1 ? 4 : 2;
            p.sampling = variant == 2;
            p.max_length_offset = 25;
            p.min_length = 30; /* long outputs, where repeats would come */
            tfm_search_input in = input_of(&f, 0, n);
            if (!run(f.s, f.d, &p, &in, SEARCH_AUTO)) break;
            for (int i = 0; i < n; i++) {
                tfm_nbest nb = tfm_search_result(f.s, i);
                for (int j = 0; j < nb.n; j++) {
                    const tfm_hypothesis *h = &nb.hyps[j];
                    bool rep = has_repeat(h->ids, h->len, N ? N : 2);
                    repeats += rep;
                    if (N > 0) CHECK_MSG(!rep, "N %d variant %d sentence %d", N, variant, i);
                }
            }
        }
        if (N == 0) CHECK(repeats > 0); /* without blocking these models do repeat */
    }
    /* N = 1 with more steps than tokens: when every token has been used, </s>
     * comes back rather than leaving no choice */
    tfm_search_params p = tfm_search_default_params();
    p.no_repeat_ngram_size = 1;
    p.min_length = 100;
    p.max_length_offset = 100;
    p.beam = 3;
    tfm_search_input in = input_of(&f, 0, 4);
    if (run(f.s, f.d, &p, &in, SEARCH_AUTO)) {
        for (int i = 0; i < 4; i++) {
            const tfm_hypothesis *h = &tfm_search_result(f.s, i).hyps[0];
            CHECK(!has_repeat(h->ids, h->len, 1));
            CHECK(h->len <= V - 3); /* every token but <pad>, <s>, </s> at most once */
        }
    }
    fixture_free(&f);
}

/* ---- sampling ------------------------------------------------------------------------- */

static void test_sampling_seeded(void)
{
    const int n = 12;
    fixture f;
    if (!fixture_make(&f, 900, n, 1.5f, false)) return;
    tfm_search *s2 = NULL, *g = NULL;
    tfm_search_create(f.m, &s2, NULL);
    tfm_search_create(f.m, &g, NULL);
    tfm_search_params p = tfm_search_default_params();
    p.sampling = true;
    p.nbest = 3;
    p.max_length_offset = 10;
    p.seed = 42;
    tfm_search_input in = input_of(&f, 0, n);
    int differ_seed = 0, differ_sample = 0;
    if (run(f.s, f.d, &p, &in, SEARCH_AUTO) && run(s2, f.d, &p, &in, SEARCH_AUTO)) {
        for (int i = 0; i < n; i++) {
            tfm_nbest a = tfm_search_result(f.s, i), b = tfm_search_result(s2, i);
            CHECK(a.n == 3 && b.n == 3);
            for (int j = 0; j < 3; j++) CHECK(same_ids(&a.hyps[j], &b.hyps[j]));
            differ_sample += !same_ids(&a.hyps[0], &a.hyps[1]);
        }
        p.seed = 43;
        if (run(s2, f.d, &p, &in, SEARCH_AUTO))
            for (int i = 0; i < n; i++)
                differ_seed += !same_ids(&tfm_search_result(f.s, i).hyps[0],
                                         &tfm_search_result(s2, i).hyps[0]);
    }
    CHECK(differ_seed > n / 2);
    CHECK(differ_sample > n / 2);

    /* per-sentence seeds: a sentence keeps its samples in another batch */
    uint64_t seeds[MAXN];
    for (int i = 0; i < n; i++) seeds[i] = 77 + (uint64_t)i;
    in.seeds = seeds;
    tfm_search_input in2 = input_of(&f, 5, 4);
    in2.seeds = seeds + 5;
    if (run(f.s, f.d, &p, &in, SEARCH_AUTO) && run(s2, f.d, &p, &in2, SEARCH_AUTO))
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 3; j++)
                CHECK(same_ids(&tfm_search_result(f.s, 5 + i).hyps[j],
                               &tfm_search_result(s2, i).hyps[j]));

    /* the degenerate settings are greedy search */
    tfm_search_params pg = tfm_search_default_params();
    pg.beam = 1;
    pg.max_length_offset = 10;
    in.seeds = NULL;
    if (run(g, f.d, &pg, &in, SEARCH_AUTO)) {
        for (int variant = 0; variant < 4; variant++) {
            tfm_search_params ps = p;
            ps.nbest = 2;
            if (variant == 0) ps.top_k = 1;
            if (variant == 1) ps.temperature = 0.0f;
            if (variant == 2) ps.temperature = 1e-6f;
            if (variant == 3) ps.top_p = 1e-6f;
            if (!run(f.s, f.d, &ps, &in, SEARCH_AUTO)) break;
            for (int i = 0; i < n; i++) {
                const tfm_hypothesis *hg = &tfm_search_result(g, i).hyps[0];
                for (int j = 0; j < 2; j++) {
                    const tfm_hypothesis *h = &tfm_search_result(f.s, i).hyps[j];
                    CHECK_MSG(same_ids(h, hg), "variant %d sentence %d", variant, i);
                    CHECK_NEAR(h->score, hg->score, 1e-4);
                }
            }
        }
    }
    tfm_search_free(g);
    tfm_search_free(s2);
    fixture_free(&f);
}

/* Every sampled token lies in the top-k set, or in the nucleus, of the
 * full decoder's distribution at its position. */
static void test_sampling_limits(void)
{
    const int n = 8;
    fixture f;
    if (!fixture_make(&f, 1000, n, 1.5f, false)) return;
    for (int variant = 0; variant < 2; variant++) {
        tfm_search_params p = tfm_search_default_params();
        p.sampling = true;
        p.nbest = 4;
        p.max_length_offset = 10;
        p.top_k = variant == 0 ? 3 : 0;
        p.top_p = variant == 1 ? 0.5f : 1.0f;
        p.temperature = variant == 0 ? 2.0f : 0.7f;
        tfm_search_input in = input_of(&f, 0, n);
        if (!run(f.s, f.d, &p, &in, SEARCH_AUTO)) break;
        int outside = 0, tokens = 0;
        for (int i = 0; i < n; i++) {
            tfm_nbest nb = tfm_search_result(f.s, i);
            for (int j = 0; j < nb.n; j++) {
                const tfm_hypothesis *h = &nb.hyps[j];
                const int T = h->len + 1;
                int32_t tgt[128];
                float *lp = malloc((size_t)T * V * sizeof *lp);
                tgt[0] = TFM_ID_BOS;
                memcpy(tgt + 1, h->ids, (size_t)h->len * sizeof *tgt);
                CHECK(tfm_decoder_forward_full(f.m, f.states[i], f.lens[i], tgt, T, lp, NULL) ==
                      TFM_OK);
                for (int t = 0; t < T; t++) {
                    float *row = lp + (size_t)t * V;
                    int32_t chosen = t < h->len ? h->ids[t] : TFM_ID_EOS;
                    if (t == h->len && h->len == f.lens[i] + p.max_length_offset) continue; /* forced */
                    row[TFM_ID_PAD] = row[TFM_ID_BOS] = -INFINITY;
                    /* rank of the chosen token, and the tempered mass above it */
                    int rank = 0;
                    double above = 0, total = 0;
                    for (int v = 0; v < V; v++) {
                        double w = exp((row[v] - row[chosen]) / p.temperature);
                        total += w;
                        if (row[v] > row[chosen]) rank++, above += w;
                    }
                    if (variant == 0) outside += rank >= 3;
                    else outside += above / total >= 0.5 + 1e-4; /* the nucleus stops before it */
                    tokens++;
                }
                free(lp);
            }
        }
        CHECK_MSG(outside == 0, "variant %d: %d of %d tokens outside", variant, outside, tokens);
    }
    fixture_free(&f);
}

/* The sampler against a fixed distribution: frequencies match. */
static void test_sampler_frequencies(void)
{
    const float probs[6] = {0.4f, 0.25f, 0.15f, 0.1f, 0.1f, 0.0f};
    float lp[6];
    for (int v = 0; v < 6; v++) lp[v] = v == 5 ? -INFINITY : logf(probs[v]);
    search_cand scratch[6];
    tfm_rng rng;
    tfm_rng_seed(&rng, 3);
    const int draws = 20000;
    for (int variant = 0; variant < 4; variant++) {
        tfm_search_params p = tfm_search_default_params();
        p.sampling = true;
        double want[6];
        memcpy(want, (double[6]){0.4, 0.25, 0.15, 0.1, 0.1, 0}, sizeof want);
        if (variant == 1) { /* top-k 2 */
            p.top_k = 2;
            memcpy(want, (double[6]){0.4 / 0.65, 0.25 / 0.65, 0, 0, 0, 0}, sizeof want);
        }
        if (variant == 2) { /* nucleus 0.75: 0.4 + 0.25 + 0.15 = 0.8 reaches it */
            p.top_p = 0.75f;
            memcpy(want, (double[6]){0.5, 0.3125, 0.1875, 0, 0, 0}, sizeof want);
        }
        if (variant == 3) { /* temperature 0.5 squares the probabilities */
            p.temperature = 0.5f;
            double sq = 0.16 + 0.0625 + 0.0225 + 0.01 + 0.01;
            memcpy(want, (double[6]){0.16 / sq, 0.0625 / sq, 0.0225 / sq, 0.01 / sq, 0.01 / sq, 0},
                   sizeof want);
        }
        int count[6] = {0};
        for (int i = 0; i < draws; i++) {
            int32_t v = search_sample(&p, lp, 6, &rng, scratch);
            if (v >= 0 && v < 6) count[v]++;
        }
        for (int v = 0; v < 6; v++) {
            /* 5 standard deviations of a binomial count */
            double sd = sqrt(draws * want[v] * (1 - want[v]));
            CHECK_MSG(fabs(count[v] - draws * want[v]) <= 5 * sd + 1, "variant %d token %d: %d vs %.0f",
                      variant, v, count[v], draws * want[v]);
        }
    }
}

/* ---- edges and arguments ------------------------------------------------------------------- */

/* An empty source gives the empty sentence in every search (greedy, beam
 * with n-best, sampling), with or without a prefix, alone or in a batch:
 * one hypothesis per row, length 0, the log-prob of </s>. */
static void test_empty_source(void)
{
    fixture f;
    if (!fixture_make(&f, 1100, 4, 1.0f, false)) return;
    CHECK(f.lens[0] == 0 && f.lens[1] > 0);
    tfm_search *one = NULL;
    tfm_search_create(f.m, &one, NULL);
    const int32_t prefix_ids[] = {5, 6, 7};
    for (int variant = 0; variant < 8; variant++) {
        tfm_search_params p = tfm_search_default_params();
        p.beam = variant % 4 == 1 ? 4 : 1;
        p.nbest = variant % 4 == 1 ? 3 : variant % 4 == 2 ? 2 : 1;
        p.sampling = variant % 4 == 2;
        p.min_length = variant % 4 == 3 ? 5 : 0; /* even a minimum length */
        bool with_prefix = variant >= 4;
        const int32_t *prefixes[4] = {prefix_ids, prefix_ids, NULL, NULL};
        int prefix_lens[4] = {3, 3, 0, 0};
        tfm_search_input in = input_of(&f, 0, 1);
        tfm_search_input all = input_of(&f, 0, 4);
        if (with_prefix) {
            in.prefixes = all.prefixes = prefixes;
            in.prefix_lens = all.prefix_lens = prefix_lens;
        }
        if (!run(one, f.d, &p, &in, SEARCH_AUTO) || !run(f.s, f.d, &p, &all, SEARCH_AUTO)) break;
        for (int k = 0; k < 2; k++) {
            tfm_nbest nb = tfm_search_result(k ? f.s : one, 0);
            CHECK_MSG(nb.n >= 1 && nb.n <= p.nbest, "variant %d: %d hypotheses", variant, nb.n);
            for (int h = 0; h < nb.n; h++) {
                CHECK_MSG(nb.hyps[h].len == 0, "variant %d, %s, hypothesis %d: %d ids", variant,
                          k ? "in a batch" : "alone", h, nb.hyps[h].len);
                CHECK(nb.hyps[h].log_prob == nb.hyps[h].token_log_probs[0]);
                CHECK(nb.hyps[h].log_prob <= 0 && isfinite(nb.hyps[h].log_prob));
            }
        }
        /* the non-empty source beside it still gets its prefix */
        if (with_prefix) {
            tfm_nbest nb = tfm_search_result(f.s, 1);
            CHECK(nb.n >= 1 && nb.hyps[0].len >= 3 &&
                  memcmp(nb.hyps[0].ids, prefix_ids, sizeof prefix_ids) == 0);
        }
    }
    tfm_search_free(one);
    fixture_free(&f);
}

static void test_arguments(void)
{
    fixture f;
    if (!fixture_make(&f, 1200, 2, 1.0f, false)) return;
    tfm_error err;
    tfm_search_input in = input_of(&f, 0, 2);
    const tfm_search_params good = tfm_search_default_params();
    CHECK(good.beam == 4 && good.nbest == 1 && good.length_rule == TFM_LENGTH_POWER &&
          good.length_penalty == 1.0f && good.max_length_offset == 50);
    CHECK(tfm_search_params_validate(&good, &err) == TFM_OK);
    for (int bad = 0; bad < 11; bad++) {
        tfm_search_params p = good;
        switch (bad) {
        case 0: p.beam = 0; break;
        case 1: p.nbest = 5; break; /* more than the beam */
        case 2: p.length_penalty = -1; break;
        case 3: p.length_penalty = NAN; break;
        case 4: p.max_length_offset = -1; break;
        case 5: p.min_length = -2; break;
        case 6: p.top_p = 0; break;
        case 7: p.temperature = -1; break;
        case 8: p.top_k = -1; break;
        case 9: p.no_repeat_ngram_size = -1; break;
        case 10: p.length_rule = (tfm_length_rule)2; break;
        }
        CHECK_MSG(tfm_search_run(f.s, f.d, &p, &in, &err) == TFM_ERR_RANGE, "case %d", bad);
        CHECK(tfm_search_result(f.s, 0).n == 0);
    }
    /* sampling allows more samples than the beam */
    tfm_search_params p = good;
    p.sampling = true;
    p.nbest = 6;
    CHECK(tfm_search_params_validate(&p, &err) == TFM_OK);

    /* no sentences: nothing to do */
    tfm_search_input none = {.n_sentences = 0};
    CHECK(tfm_search_run(f.s, f.d, &good, &none, &err) == TFM_OK);
    CHECK(tfm_search_result(f.s, 0).n == 0);
    /* a source longer than the model takes */
    int long_len = f.m->config.max_positions + 1;
    tfm_search_input too_long = {.n_sentences = 1, .states = f.states, .src_lens = &long_len};
    CHECK(tfm_search_run(f.s, f.d, &good, &too_long, &err) == TFM_ERR_RANGE);
    /* a run after a failure works, and results outside the batch are empty */
    CHECK(tfm_search_run(f.s, f.d, &good, &in, &err) == TFM_OK);
    CHECK(tfm_search_result(f.s, 1).n == 1 && tfm_search_result(f.s, 2).n == 0 &&
          tfm_search_result(f.s, -1).n == 0);
    tfm_search_free(NULL);
    fixture_free(&f);
}


int main(void)
{
    /* rows of a few dozen: a second BLAS thread only spins (DESIGN.md) */
    openblas_set_num_threads(1);
    RUN(test_heap_selects_best);
    RUN(test_beam1_equals_greedy);
    RUN(test_greedy_without_log_probs);
    RUN(test_min_length_renormalizes);
    RUN(test_beam_not_below_greedy);
    RUN(test_batch_equals_alone);
    RUN(test_scores_recomputed);
    RUN(test_lengths);
    RUN(test_nbest_sorted_distinct);
    RUN(test_prefix_forced);
    RUN(test_no_repeat_ngram);
    RUN(test_sampling_seeded);
    RUN(test_sampling_limits);
    RUN(test_sampler_frequencies);
    RUN(test_empty_source);
    RUN(test_arguments);
    CHECK_DONE();
}
