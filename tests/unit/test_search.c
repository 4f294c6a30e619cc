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
 * Constrained beam search meets every constraint (any order, several ids,
 * alternatives) with beam 4 and 1, its scores equal the full decoder's, a
 * mixed batch equals its sentences alone, limits and order hold, and a
 * constraint that cannot fit is reported as unmet.
 *
 * Tolerances: a sentence's log-probs depend on the rows decoded beside it
 * only through the BLAS's blocking of a product (a few float roundings,
 * ~1e-6), and the full decoder sums in another order, so scores are compared
 * to 1e-4; ids are compared exactly (random models have no near-ties that
 * small, and the models are fixed by their seeds).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "testspm.h"
#include "search/search_internal.h"
#include "tfm/pass.h"
#include "tfm/search.h"
#include "tfm/spm.h"
#include "tfm/text.h"

enum { V = 40, MAXN = 32, MAX_SRC = 12 };

/* The sanitizer build (make check's build/asan) decodes some five times
 * slower; there the tests that check one property on every sentence of a
 * large batch, over many models or settings, decode fewer sentences:
 * SENTENCES(n, m) is m there, n elsewhere.  A fixture's first m sentences
 * are those of its n (the same draws in the same order): the empty source
 * first, then random lengths, every model and setting still run, and each
 * place says what the batch still holds. */
#if SANITIZED
#define SENTENCES(n, m) (m)
#else
#define SENTENCES(n, m) (n)
#endif

/* ---- fixtures -------------------------------------------------------------------- */

typedef struct fixture {
    tfm_model *m;
    tfm_decoder *d;
    tfm_search *s;
    int n;
    int lens[MAXN];
    const float *states[MAXN];
    float *packed; /* [sum(lens), D] */
} fixture;

/* A tiny random model and n random sources (lengths 0 .. MAX_SRC, the first
 * one empty) encoded by it.  eos_scale > 1 makes </s> likelier to win. */
static bool fixture_make(fixture *f, uint64_t seed, int n, float eos_scale, bool pre_norm)
{
    memset(f, 0, sizeof *f);
    tfm_error err;
    tfm_config c;
    tfm_config_preset("tiny", &c, NULL);
    c.src_vocab_size = c.tgt_vocab_size = V;
    c.pre_norm = pre_norm;
    if (tfm_model_create(&c, NULL, seed, &f->m, &err) != TFM_OK) {
        printf("FAIL: model: %s\n", err.msg);
        return false;
    }
    tfm_rng rng;
    tfm_rng_seed(&rng, seed + 1000);
    size_t np = tfm_params_count(&c);
    for (size_t i = 0; i < np; i++) f->m->data[i] += 0.2f * (tfm_rng_float(&rng) - 0.5f);
    const int D = c.d_model;
    float *e = f->m->params.output_proj + (size_t)c.eos_id * D; /* shared with the embeddings */
    for (int i = 0; i < D; i++) e[i] *= eos_scale;

    f->n = n;
    int32_t ids[MAXN][MAX_SRC];
    const int32_t *idp[MAXN];
    int total = 0;
    for (int i = 0; i < n; i++) {
        f->lens[i] = i == 0 ? 0 : (int)tfm_rng_below(&rng, MAX_SRC + 1);
        for (int j = 0; j < f->lens[i]; j++) ids[i][j] = 4 + (int32_t)tfm_rng_below(&rng, V - 4);
        idp[i] = ids[i];
        total += f->lens[i];
    }
    f->packed = malloc(((size_t)total + 1) * D * sizeof(float));
    tfm_encoder *enc = NULL;
    bool ok = f->packed && tfm_encoder_create(f->m, &enc, &err) == TFM_OK &&
              tfm_encoder_forward(enc, n, idp, f->lens, f->packed, &err) == TFM_OK &&
              tfm_decoder_create(f->m, &f->d, &err) == TFM_OK &&
              tfm_search_create(f->m, &f->s, &err) == TFM_OK;
    tfm_encoder_free(enc);
    if (!ok) {
        printf("FAIL: fixture: %s\n", err.msg);
        return false;
    }
    for (int i = 0, off = 0; i < n; off += f->lens[i], i++) f->states[i] = f->packed + (size_t)off * D;
    return true;
}

static void fixture_free(fixture *f)
{
    tfm_search_free(f->s);
    tfm_decoder_free(f->d);
    tfm_model_free(f->m);
    free(f->packed);
}

/* The input of sentences [first, first + n) of f. */
static tfm_search_input input_of(const fixture *f, int first, int n)
{
    return (tfm_search_input){.n_sentences = n, .states = f->states + first,
                              .src_lens = f->lens + first};
}

static bool same_ids(const tfm_hypothesis *a, const tfm_hypothesis *b)
{
    return a->len == b->len && memcmp(a->ids, b->ids, (size_t)a->len * sizeof *a->ids) == 0;
}

/* Runs a search on s; reports a failure. */
static bool run(tfm_search *s, tfm_decoder *d, const tfm_search_params *p,
                const tfm_search_input *in, search_algo algo)
{
    tfm_error err;
    tfm_status st = search_run(s, d, p, in, algo, &err);
    CHECK_MSG(st == TFM_OK, "%s", err.msg);
    return st == TFM_OK;
}

/* The log-prob of h recomputed by the full decoder, and each token's in tok,
 * with the first min_len steps taken without </s>: their
 * token log-probs are those of the distribution over the tokens allowed
 * (</s>, <pad> and <s> left out), lp - log(1 - p(</s>) - p(<pad>) - p(<s>)). */
static double recompute_min_length(const tfm_model *m, const float *states, int src_len,
                                   const tfm_hypothesis *h, int min_len, float *tok)
{
    const int T = h->len + 1;
    int32_t *tgt = malloc((size_t)T * sizeof *tgt);
    float *lp = malloc((size_t)T * V * sizeof *lp);
    tgt[0] = TFM_ID_BOS;
    memcpy(tgt + 1, h->ids, (size_t)h->len * sizeof *tgt);
    tfm_error err;
    double sum = NAN;
    if (tfm_decoder_forward_full(m, states, src_len, tgt, T, lp, &err) == TFM_OK) {
        sum = 0;
        for (int j = 0; j < T; j++) {
            int32_t next = j < h->len ? h->ids[j] : TFM_ID_EOS;
            const float *row = lp + (size_t)j * V;
            const double p_out = exp((double)row[TFM_ID_EOS]) + exp((double)row[TFM_ID_PAD]) +
                                 exp((double)row[TFM_ID_BOS]);
            tok[j] = row[next] - (j < min_len ? (float)log1p(-p_out) : 0.0f);
            sum += tok[j];
        }
    }
    free(tgt);
    free(lp);
    return sum;
}

/* The log-prob of h recomputed by the full decoder, and each token's in tok. */
static double recompute(const tfm_model *m, const float *states, int src_len,
                        const tfm_hypothesis *h, float *tok)
{
    return recompute_min_length(m, states, src_len, h, 0, tok);
}

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


/* ---- constrained beam search ------------------------------------------------------------- */

/* Whether ids[0..len) hold seq[0..n) somewhere. */
static bool contains(const int32_t *ids, int len, const int32_t *seq, int n)
{
    for (int i = 0; i + n <= len; i++)
        if (memcmp(ids + i, seq, (size_t)n * sizeof *ids) == 0) return true;
    return false;
}

static int occurrences(const int32_t *ids, int len, int32_t tok)
{
    int n = 0;
    for (int i = 0; i < len; i++) n += ids[i] == tok;
    return n;
}

/* Random constraints for sentence i: 1 to 3 constraints of 1 to 3 ids
 * (ids 4 .. V-1), every third one with a second alternative; their ids go
 * to store [3][2][3], lengths to lens [3][2], alternatives to n_alts [3]. */
static int random_constraints(tfm_rng *rng, int32_t store[3][2][3], int lens[3][2], int n_alts[3])
{
    int n = 1 + (int)tfm_rng_below(rng, 3);
    for (int c = 0; c < n; c++) {
        n_alts[c] = c % 3 == 2 ? 2 : 1;
        for (int a = 0; a < n_alts[c]; a++) {
            lens[c][a] = 1 + (int)tfm_rng_below(rng, 3);
            for (int j = 0; j < lens[c][a]; j++) store[c][a][j] = 4 + (int32_t)tfm_rng_below(rng, V - 4);
        }
    }
    return n;
}

/* Every constraint is met, in any order, with beam 4 and beam 1; n-best
 * lists hold the hypotheses that meet them first; reported scores equal
 * the full decoder's (the cache follows the reordered rows). */
static void test_constraints_met(void)
{
    /* under the sanitizers 8 sentences (lengths 0 to 10), the same random
     * constraints for each as in 16 */
    const int n = SENTENCES(16, 8);
    fixture f;
    if (!fixture_make(&f, 1300, n, 1.8f, false)) return;
    tfm_rng rng;
    tfm_rng_seed(&rng, 77);
    int32_t store[MAXN][3][2][3];
    int lens[MAXN][3][2], n_alts[MAXN][3], n_cons[MAXN];
    tfm_constraints *cons[MAXN], *reversed[MAXN];
    tfm_error err;
    for (int i = 0; i < n; i++) {
        cons[i] = tfm_constraints_create();
        reversed[i] = tfm_constraints_create();
        n_cons[i] = random_constraints(&rng, store[i], lens[i], n_alts[i]);
        for (int c = 0; c < n_cons[i]; c++) {
            const int32_t *alts[2] = {store[i][c][0], store[i][c][1]};
            CHECK(tfm_constraints_add(cons[i], alts, lens[i][c], n_alts[i][c], &err) == TFM_OK);
            int r = n_cons[i] - 1 - c;
            const int32_t *ralts[2] = {store[i][r][0], store[i][r][1]};
            CHECK(tfm_constraints_add(reversed[i], ralts, lens[i][r], n_alts[i][r], &err) == TFM_OK);
        }
    }
    float tok[128];
    for (int variant = 0; variant < 3; variant++) {
        tfm_search_params p = tfm_search_default_params();
        p.max_length_offset = 15;
        p.beam = variant == 0 ? 1 : 4;
        p.nbest = variant == 2 ? 4 : 1;
        tfm_search_input in = input_of(&f, 0, n);
        in.constraints = (const tfm_constraints *const *)cons;
        if (!run(f.s, f.d, &p, &in, SEARCH_AUTO)) break;
        int met = 0;
        for (int i = 1; i < n; i++) { /* sentence 0 has an empty source */
            tfm_nbest nb = tfm_search_result(f.s, i);
            CHECK(nb.n >= 1 && nb.n <= p.nbest);
            bool all[4] = {0};
            for (int j = 0; j < nb.n; j++) {
                const tfm_hypothesis *h = &nb.hyps[j];
                all[j] = true;
                for (int c = 0; c < n_cons[i]; c++) {
                    bool one = false;
                    for (int a = 0; a < n_alts[i][c]; a++)
                        one = one || contains(h->ids, h->len, store[i][c][a], lens[i][c][a]);
                    all[j] = all[j] && one;
                }
                double sum = recompute(f.m, f.states[i], f.lens[i], h, tok);
                CHECK_NEAR(h->log_prob, sum, 1e-4);
                /* those that meet every constraint first, then by score */
                if (j > 0) CHECK(all[j - 1] > all[j] || (all[j - 1] == all[j] &&
                                                         nb.hyps[j - 1].score >= h->score));
            }
            CHECK_MSG(all[0] == tfm_search_met(f.s, i), "variant %d sentence %d", variant, i);
            met += all[0];
        }
        CHECK_MSG(met == n - 1, "variant %d: %d of %d sentences met their constraints", variant,
                  met, n - 1);
        CHECK(tfm_search_result(f.s, 0).hyps[0].len == 0);

        /* the order the constraints are given in changes nothing */
        tfm_nbest first[MAXN];
        int32_t ids[MAXN][64];
        for (int i = 0; i < n; i++) {
            first[i] = tfm_search_result(f.s, i);
            memcpy(ids[i], first[i].hyps[0].ids, (size_t)first[i].hyps[0].len * sizeof(int32_t));
        }
        in.constraints = (const tfm_constraints *const *)reversed;
        if (!run(f.s, f.d, &p, &in, SEARCH_AUTO)) break;
        int same = 0;
        for (int i = 0; i < n; i++) {
            tfm_nbest nb = tfm_search_result(f.s, i);
            same += nb.hyps[0].len == first[i].hyps[0].len &&
                    memcmp(nb.hyps[0].ids, ids[i], (size_t)nb.hyps[0].len * sizeof(int32_t)) == 0;
        }
        CHECK_MSG(same == n, "variant %d: %d of %d the same with the constraints reversed",
                  variant, same, n);
    }
    for (int i = 0; i < n; i++) {
        tfm_constraints_free(cons[i]);
        tfm_constraints_free(reversed[i]);
    }
    fixture_free(&f);
}

/* A batch mixing constrained and unconstrained sentences equals each
 * sentence decoded alone; an unconstrained sentence in a constrained run
 * meets nothing and needs nothing. */
static void test_constraints_batch_equals_alone(void)
{
    const int n = 12;
    fixture f;
    if (!fixture_make(&f, 1400, n, 1.8f, false)) return;
    tfm_search *one = NULL;
    tfm_search_create(f.m, &one, NULL);
    tfm_constraints *cons[MAXN] = {0};
    tfm_error err;
    for (int i = 0; i < n; i += 2) {
        cons[i] = tfm_constraints_create();
        int32_t a[2] = {5 + i, 6}, b = 30 - i;
        const int32_t *alts[1] = {a}, *balt[1] = {&b};
        int la = 2, lb = 1;
        tfm_constraints_add(cons[i], alts, &la, 1, &err);
        tfm_constraints_add(cons[i], balt, &lb, 1, &err);
    }
    for (int beam = 1; beam <= 5; beam += 4) {
        tfm_search_params p = tfm_search_default_params();
        p.max_length_offset = 12;
        p.beam = p.nbest = beam;
        tfm_search_input in = input_of(&f, 0, n);
        in.constraints = (const tfm_constraints *const *)cons;
        if (!run(f.s, f.d, &p, &in, SEARCH_AUTO)) break;
        for (int i = 0; i < n; i++) {
            tfm_search_input in1 = input_of(&f, i, 1);
            in1.constraints = (const tfm_constraints *const *)&cons[i];
            if (!run(one, f.d, &p, &in1, SEARCH_AUTO)) break;
            tfm_nbest a = tfm_search_result(f.s, i), b = tfm_search_result(one, 0);
            CHECK_MSG(a.n == b.n, "beam %d sentence %d: %d vs %d", beam, i, a.n, b.n);
            for (int j = 0; j < a.n && j < b.n; j++) {
                CHECK_MSG(same_ids(&a.hyps[j], &b.hyps[j]), "beam %d sentence %d hyp %d", beam,
                          i, j);
                CHECK_NEAR(a.hyps[j].score, b.hyps[j].score, 1e-4);
            }
            CHECK(tfm_search_met(f.s, i) == tfm_search_met(one, 0));
        }
    }
    for (int i = 0; i < n; i++) tfm_constraints_free(cons[i]);
    tfm_search_free(one);
    fixture_free(&f);
}

/* Limits, the order and constraints that cannot be met. */
static void test_constraints_limits_order(void)
{
    const int n = 10;
    fixture f;
    if (!fixture_make(&f, 1500, n, 1.2f, false)) return;
    tfm_error err;
    tfm_constraints *c = tfm_constraints_create();
    for (int i = 1; i < n; i++) {
        if (f.lens[i] == 0) continue; /* an empty source gives the empty sentence */
        /* tokens 7 and 8 once each, 7 before 8; 9 never; plain search uses them */
        tfm_constraints_clear(c);
        int32_t seven = 7, eight = 8;
        const int32_t *a7 = &seven, *a8 = &eight;
        int one = 1;
        tfm_constraints_add(c, &a8, &one, 1, &err);
        tfm_constraints_add(c, &a7, &one, 1, &err);
        tfm_constraints_limit(c, 7, 1, &err);
        tfm_constraints_limit(c, 8, 1, &err);
        tfm_constraints_limit(c, 9, 0, &err);
        int32_t order[2] = {7, 8};
        tfm_constraints_order(c, order, 2, &err);
        const tfm_constraints *cs[1] = {c};
        tfm_search_params p = tfm_search_default_params();
        p.max_length_offset = 12;
        tfm_search_input in = input_of(&f, i, 1);
        in.constraints = cs;
        if (!run(f.s, f.d, &p, &in, SEARCH_AUTO)) break;
        const tfm_hypothesis *h = &tfm_search_result(f.s, 0).hyps[0];
        CHECK(tfm_search_met(f.s, 0));
        CHECK_MSG(occurrences(h->ids, h->len, 7) == 1 && occurrences(h->ids, h->len, 8) == 1 &&
                  occurrences(h->ids, h->len, 9) == 0, "sentence %d", i);
        int at7 = -1, at8 = -1;
        for (int t = 0; t < h->len; t++) {
            if (h->ids[t] == 7) at7 = t;
            if (h->ids[t] == 8) at8 = t;
        }
        CHECK_MSG(at7 < at8, "sentence %d: 7 at %d, 8 at %d", i, at7, at8);

        /* six ids in at most three: not met, and said so */
        tfm_constraints_clear(c);
        int32_t six[6] = {5, 6, 5, 6, 5, 6};
        const int32_t *a6 = six;
        int l6 = 6;
        tfm_constraints_add(c, &a6, &l6, 1, &err);
        p.max_length = 3;
        if (!run(f.s, f.d, &p, &in, SEARCH_AUTO)) break;
        CHECK(!tfm_search_met(f.s, 0));
        CHECK(tfm_search_result(f.s, 0).n == 1 && tfm_search_result(f.s, 0).hyps[0].len <= 3);
    }
    /* the --constraints line format */
    tfm_constraints_clear(c);
    const char line[] = "5 17 | 9\t32";
    CHECK(tfm_constraints_parse(c, line, strlen(line), V, &err) == TFM_OK);
    CHECK(c->n == 2 && c->n_alts == 3 && c->alt_len[0] == 2 && c->alt_len[1] == 1 &&
          c->alt_of[1] == 0 && c->alt_of[2] == 1 && c->ids.data[3] == 32);
    tfm_constraints_clear(c);
    CHECK(tfm_constraints_parse(c, "", 0, V, &err) == TFM_OK && tfm_constraints_empty(c));
    const char *bad[] = {"5\t\t6", "5 | ", "3", "41", "x 5", "5 |6 | "};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        tfm_constraints_clear(c);
        CHECK_MSG(tfm_constraints_parse(c, bad[k], strlen(bad[k]), V, &err) != TFM_OK, "'%s'",
                  bad[k]);
        CHECK_MSG(strstr(err.msg, "constraint "), "'%s': %s", bad[k], err.msg);
    }
    tfm_constraints_free(c);
    /* sampling cannot be constrained */
    tfm_search_params p = tfm_search_default_params();
    p.sampling = true;
    tfm_constraints *none[1] = {NULL};
    tfm_search_input in = input_of(&f, 1, 1);
    in.constraints = (const tfm_constraints *const *)none;
    CHECK(tfm_search_run(f.s, f.d, &p, &in, &err) == TFM_ERR_ARG);
    fixture_free(&f);
}


static bool ids_hold(const int32_t *ids, int n, int32_t tok)
{
    for (int i = 0; i < n; i++)
        if (ids[i] == tok) return true;
    return false;
}

/* Greedy search (beam 1) with constraints: a sentence with constraints gets
 * the rows of constrained beam search (SEARCH_GREEDY_CONSTRAINED_ROWS), so
 * its output is that search's best; a sentence without keeps greedy's
 * output, in the same batch, and so does one with a ban alone (of a token
 * greedy search does not write for it): one row, greedy among the tokens
 * allowed. */
static void test_constraints_greedy_rows(void)
{
    const int n = 12;
    fixture f;
    if (!fixture_make(&f, 1800, n, 1.8f, false)) return;
    tfm_search *plain = NULL;
    tfm_search_create(f.m, &plain, NULL);
    tfm_constraints *cons[MAXN] = {0};
    tfm_error err;
    tfm_search_params greedy = tfm_search_default_params();
    greedy.max_length_offset = 12;
    greedy.beam = 1;
    tfm_search_params wide = greedy;
    wide.beam = SEARCH_GREEDY_CONSTRAINED_ROWS;
    tfm_search_input bare = input_of(&f, 0, n);
    if (!run(plain, f.d, &greedy, &bare, SEARCH_AUTO)) {
        tfm_search_free(plain);
        fixture_free(&f);
        return;
    }
    for (int i = 0; i < n; i++) {
        cons[i] = tfm_constraints_create();
        if (i % 2 == 0) {
            int32_t a[2] = {5 + i, 6};
            const int32_t *alts[1] = {a};
            int la = 2;
            tfm_constraints_add(cons[i], alts, &la, 1, &err);
        } else if (i % 4 == 1) { /* a ban of a token greedy's output lacks */
            const tfm_hypothesis *g = &tfm_search_result(plain, i).hyps[0];
            int32_t tok = 4; /* the first id past the specials that greedy did not write */
            while (ids_hold(g->ids, g->len, tok)) tok++;
            CHECK(tfm_constraints_ban(cons[i], tok, &err) == TFM_OK);
        } else { /* none */
            tfm_constraints_free(cons[i]);
            cons[i] = NULL;
        }
    }
    tfm_search_input in = input_of(&f, 0, n);
    in.constraints = (const tfm_constraints *const *)cons;
    if (run(f.s, f.d, &greedy, &in, SEARCH_AUTO)) {
        int met = 0;
        for (int i = 0; i < n; i++) {
            tfm_nbest a = tfm_search_result(f.s, i);
            CHECK(a.n == 1);
            if (tfm_constraints_count(cons[i]) == 0) {
                CHECK_MSG(same_ids(&a.hyps[0], &tfm_search_result(plain, 0 + i).hyps[0]),
                          "sentence %d: not greedy's output", i);
                continue;
            }
            tfm_search_input one = input_of(&f, i, 1);
            one.constraints = (const tfm_constraints *const *)&cons[i];
            tfm_search *w = NULL;
            tfm_search_create(f.m, &w, NULL);
            if (run(w, f.d, &wide, &one, SEARCH_AUTO)) {
                CHECK_MSG(same_ids(&a.hyps[0], &tfm_search_result(w, 0).hyps[0]),
                          "sentence %d: not the constrained beam's output", i);
                CHECK_MSG(tfm_search_met(f.s, i) == tfm_search_met(w, 0), "sentence %d", i);
                met += tfm_search_met(f.s, i);
            }
            tfm_search_free(w);
        }
        CHECK_MSG(met >= n / 2 - 1, "%d constrained sentences met theirs", met);
    }
    for (int i = 0; i < n; i++) tfm_constraints_free(cons[i]);
    tfm_search_free(plain);
    fixture_free(&f);
}

/* Constraints met in a given order, and an enclosed token: m (a token the
 * plain search produces for the sentence, so that it is tempting) stands
 * for a placeholder's "%" piece, [m 11] and [m 12] for "%s" and "%d"
 * spelled in pieces, and m has no limit.  With beam 1 and 4, every sentence
 * meets both, m appears only as the first id of one of them (always
 * followed by 11 or 12), so twice, and the ordered constraints come in the
 * order asked for, either way. */
static void test_constraints_enclosed_order(void)
{
    /* under the sanitizers sentences 1 to 5 (lengths 3 to 11), each alone */
    const int n = SENTENCES(10, 6);
    fixture f;
    if (!fixture_make(&f, 1600, n, 1.2f, false)) return;
    tfm_error err;
    tfm_constraints *c = tfm_constraints_create();
    int32_t s_ids[2] = {0, 11}, d_ids[2] = {0, 12};
    const int32_t *as = s_ids, *ad = d_ids;
    int two = 2;
    int32_t tempting[MAXN] = {0};
    for (int i = 1; i < n; i++) {
        tfm_search_params p = tfm_search_default_params();
        p.max_length_offset = 12;
        tfm_search_input in = input_of(&f, i, 1);
        if (f.lens[i] == 0 || !run(f.s, f.d, &p, &in, SEARCH_AUTO)) continue;
        const tfm_hypothesis *h = &tfm_search_result(f.s, 0).hyps[0];
        for (int t = 0; t < h->len && !tempting[i]; t++)
            if (h->ids[t] >= 4 && h->ids[t] != 11 && h->ids[t] != 12) tempting[i] = h->ids[t];
    }
    for (int variant = 0; variant < 6; variant++) {
        const int beam = variant % 2 ? 4 : 1, order = variant / 2; /* none, s d, d s */
        for (int i = 1; i < n; i++) {
            if (f.lens[i] == 0 || !tempting[i]) continue;
            const int32_t m = tempting[i];
            s_ids[0] = d_ids[0] = m;
            tfm_constraints_clear(c);
            CHECK(tfm_constraints_add(c, &as, &two, 1, &err) == TFM_OK);
            CHECK(tfm_constraints_add(c, &ad, &two, 1, &err) == TFM_OK);
            CHECK(tfm_constraints_enclose(c, m, &err) == TFM_OK);
            int idx[2] = {order == 2, order != 2};
            if (order > 0) CHECK(tfm_constraints_order_constraints(c, idx, 2, &err) == TFM_OK);
            const tfm_constraints *cs[1] = {c};
            tfm_search_params p = tfm_search_default_params();
            p.max_length_offset = 12;
            p.beam = beam;
            tfm_search_input in = input_of(&f, i, 1);
            in.constraints = cs;
            if (!run(f.s, f.d, &p, &in, SEARCH_AUTO)) break;
            const tfm_hypothesis *h = &tfm_search_result(f.s, 0).hyps[0];
            CHECK_MSG(tfm_search_met(f.s, 0), "variant %d sentence %d", variant, i);
            CHECK_MSG(occurrences(h->ids, h->len, m) == 2, "variant %d sentence %d: %d", variant,
                      i, occurrences(h->ids, h->len, m));
            int32_t after[2] = {0, 0};
            for (int t = 0, k = 0; t < h->len; t++) {
                if (h->ids[t] != m) continue;
                CHECK_MSG(t + 1 < h->len && (h->ids[t + 1] == 11 || h->ids[t + 1] == 12),
                          "variant %d sentence %d: %d alone at %d", variant, i, m, t);
                if (k < 2 && t + 1 < h->len) after[k++] = h->ids[t + 1];
            }
            CHECK_MSG(after[0] != after[1], "variant %d sentence %d", variant, i);
            if (order == 1) CHECK_MSG(after[0] == 11 && after[1] == 12, "variant %d sentence %d",
                                      variant, i);
            if (order == 2) CHECK_MSG(after[0] == 12 && after[1] == 11, "variant %d sentence %d",
                                      variant, i);
        }
    }
    /* an order naming a constraint that is not there */
    int bad[2] = {0, 5};
    CHECK(tfm_constraints_order_constraints(c, bad, 2, &err) == TFM_ERR_RANGE);
    tfm_constraints_free(c);
    fixture_free(&f);
}

/* A token banned right after a constraint is met, or right after a token:
 * with the constraint [9 11] as the forced prefix of the output and </s>
 * not yet allowed, the search puts some x after it; banning x after the
 * constraint, or after the token 11, gives another token. */
static void test_constraints_ban_after(void)
{
    const int n = 10;
    fixture f;
    if (!fixture_make(&f, 1700, n, 1.2f, false)) return;
    tfm_error err;
    tfm_constraints *c = tfm_constraints_create();
    int32_t ids[2] = {9, 11};
    const int32_t *alt = ids;
    int two = 2, tried = 0;
    for (int i = 1; i < n; i++) {
        if (f.lens[i] == 0) continue;
        int32_t after = -1;
        for (int round = 0; round < 3; round++) {
            tfm_constraints_clear(c);
            CHECK(tfm_constraints_add(c, &alt, &two, 1, &err) == TFM_OK);
            if (round == 1) CHECK(tfm_constraints_ban_after(c, 0, after, &err) == TFM_OK);
            if (round == 2) CHECK(tfm_constraints_ban_pair(c, 11, after, &err) == TFM_OK);
            const tfm_constraints *cs[1] = {c};
            tfm_search_params p = tfm_search_default_params();
            p.max_length_offset = 12;
            p.min_length = 6; /* room after the constraint */
            tfm_search_input in = input_of(&f, i, 1);
            const int32_t *prefix[1] = {ids};
            in.prefixes = prefix;
            in.prefix_lens = &two;
            in.constraints = cs;
            if (!run(f.s, f.d, &p, &in, SEARCH_AUTO)) break;
            const tfm_hypothesis *h = &tfm_search_result(f.s, 0).hyps[0];
            CHECK(tfm_search_met(f.s, 0));
            CHECK(h->len > 2 && h->ids[0] == 9 && h->ids[1] == 11);
            const int32_t next = h->len > 2 ? h->ids[2] : -1;
            if (round == 0) after = next;
            if (round > 0) {
                CHECK_MSG(next != after, "sentence %d, round %d: %d after the constraint", i,
                          round, (int)next);
                tried++;
            }
        }
    }
    CHECK(tried >= 10);
    CHECK(tfm_constraints_ban_after(c, 3, 5, &err) == TFM_ERR_RANGE);
    tfm_constraints_free(c);
    fixture_free(&f);
}

/* Placeholders as constraints: one per occurrence, limits, the printf
 * order, pieces that could spell a placeholder banned unless the source's
 * text has their character, and pieces that would change a placeholder's
 * reading banned right before or after its token. */
static void test_placeholder_constraints(void)
{
    tfm_norm_params norm = tfm_norm_default_params();
    tfm_vocab *v = tfm_vocab_create(&norm);
    int32_t ph[4];
    char text[16];
    for (int k = 1; k <= 3; k++) {
        snprintf(text, sizeof text, "<ph%d>", k);
        ph[k] = tfm_vocab_add(v, text, strlen(text), 0, TFM_PIECE_USER);
    }
    const char *pieces[] = {"%", "\xE2\x96\x81%", "a", "\xE2\x96\x81of", "{", "<b", "&"};
    int32_t id[7];
    for (int i = 0; i < 7; i++) id[i] = tfm_vocab_add(v, pieces[i], strlen(pieces[i]), -1, TFM_PIECE_NORMAL);
    CHECK(ph[3] > 0 && id[6] > 0 && tfm_vocab_placeholder_id(v, 2) == ph[2]);
    tfm_constraints *c = tfm_constraints_create();
    tfm_error err;
    /* "%s of %d and %s": %d is <ph1>, %s <ph2>; in the printf order 2 1 2 */
    const char *line = "%s of %d and %s";
    CHECK(tfm_constraints_add_placeholders(c, v, line, strlen(line), TFM_PH_ALL, &err) == TFM_OK);
    CHECK(c->n == 3 && c->n_alts == 3);
    CHECK(c->ids.data[0] == ph[2] && c->ids.data[1] == ph[1] && c->ids.data[2] == ph[2]);
    int lim[4] = {-1, -1, -1, -1};
    for (int i = 0; i < c->n_limited; i++)
        for (int k = 1; k <= 3; k++)
            if (c->limited[i] == ph[k]) lim[k] = c->limit[i];
    CHECK(lim[1] == 1 && lim[2] == 2 && lim[3] == -1); /* <ph3>: absent, so banned (below) */
    CHECK(c->ordered.len == 3 && c->ordered.data[0] == ph[2] && c->ordered.data[1] == ph[1] &&
          c->ordered.data[2] == ph[2]);
    /* '%', '{', '<' and '&' are nowhere in the text: their pieces, and the
     * byte piece of '%', may not be produced; "a" and "▁of" may */
    bool banned[8] = {0}, byte_banned = false, ph_banned[4] = {0};
    for (size_t i = 0; i < c->banned.len; i++) {
        for (int k = 0; k < 7; k++) banned[k] |= c->banned.data[i] == id[k];
        byte_banned |= c->banned.data[i] == tfm_vocab_byte_id(v, '%');
        for (int k = 1; k <= 3; k++) ph_banned[k] |= c->banned.data[i] == ph[k];
    }
    CHECK(!ph_banned[1] && !ph_banned[2] && ph_banned[3]);
    CHECK(banned[0] && banned[1] && !banned[2] && !banned[3] && banned[4] && banned[5] && banned[6]);
    CHECK(byte_banned);
    /* "50% of %s": the text has a '%', so its pieces stay; {, <, & do not */
    tfm_constraints_clear(c);
    line = "50% of %s";
    CHECK(tfm_constraints_add_placeholders(c, v, line, strlen(line), TFM_PH_ALL, &err) == TFM_OK);
    memset(banned, 0, sizeof banned);
    for (size_t i = 0; i < c->banned.len; i++)
        for (int k = 0; k < 7; k++) banned[k] |= c->banned.data[i] == id[k];
    CHECK(!banned[0] && !banned[1] && banned[4] && banned[5] && banned[6]);
    CHECK(c->n == 1 && c->ordered.len == 0);
    /* ... but never right before %s's token: "%" then "%s" reads "%%s"
     * (as "▁%" does); "a" may come there */
    const int32_t s_tok = c->ids.data[0];
    bool before[3] = {0}; /* %, ▁%, a */
    for (size_t i = 0; i < c->pair_first.len; i++) {
        if (c->pair_second.data[i] != s_tok) continue;
        for (int k = 0; k < 3; k++) before[k] |= c->pair_first.data[i] == id[k];
    }
    CHECK(before[0] && before[1] && !before[2]);
    /* only the braces class: only the braces' pieces */
    tfm_constraints_clear(c);
    CHECK(tfm_constraints_add_placeholders(c, v, line, strlen(line), TFM_PH_BRACES, &err) == TFM_OK);
    CHECK(c->n == 0 && c->banned.len >= 2);
    for (size_t i = 0; i < c->banned.len; i++) CHECK(c->banned.data[i] != id[0] && c->banned.data[i] != id[5]);
    /* "%1 and %2": after %1's token (constraint 0) no piece that starts
     * with a digit, "s" or "$" ("%18", "%1s", "%1$s"); "▁8" and "▁of" may come */
    const char *more[] = {"8", "\xE2\x96\x81" "8", "s", "$"};
    int32_t more_id[4];
    for (int i = 0; i < 4; i++)
        more_id[i] = tfm_vocab_add(v, more[i], strlen(more[i]), -1, TFM_PIECE_NORMAL);
    tfm_constraints_clear(c);
    line = "%1 and %2";
    CHECK(tfm_constraints_add_placeholders(c, v, line, strlen(line), TFM_PH_ALL, &err) == TFM_OK);
    bool after[5] = {0}; /* 8, ▁8, s, $, ▁of */
    for (size_t i = 0; i < c->after_tok.len; i++) {
        if (c->after_con.data[i] != 0) continue;
        for (int k = 0; k < 4; k++) after[k] |= c->after_tok.data[i] == more_id[k];
        after[4] |= c->after_tok.data[i] == id[3];
    }
    CHECK(after[0] && !after[1] && after[2] && after[3] && !after[4]);
    /* a vocabulary without placeholder tokens is refused */
    tfm_vocab *plain = tfm_vocab_create(&norm);
    CHECK(tfm_constraints_add_placeholders(c, plain, line, strlen(line), TFM_PH_ALL, &err) ==
          TFM_ERR_ARG);
    tfm_vocab_free(plain);
    tfm_constraints_free(c);
    tfm_vocab_free(v);
}

/* Whether piece id of v holds '%'. */
static bool has_percent(const tfm_vocab *v, int32_t id)
{
    size_t n;
    const char *t = tfm_vocab_piece(v, id, &n);
    return t && memchr(t, '%', n) != NULL;
}

/* Placeholders spelled in a model's own pieces (a vocabulary without
 * placeholder tokens, an imported model's): one constraint per placeholder
 * and per stray mark of the source ("%P", "%L", a lone "%": GCC's
 * diagnostics have them), so that every piece holding '%' is either banned
 * or enclosed in those spellings; printf's conversions in order; and right
 * after "%1" no piece that would make it "%1s" or "%12". */
static void test_placeholder_pieces(void)
{
    tfm_vocab *v = test_spm_vocab("postnorm-swish-tiedall/source.spm");
    if (!v) return;
    tfm_constraints *c = tfm_constraints_create();
    tfm_error err;
    const char *line = "%P:%s:%d: at %L in %1 100%";
    CHECK(tfm_constraints_add_placeholders(c, v, line, strlen(line), TFM_PH_ALL, &err) == TFM_OK);
    /* %P, %s, %d, %L, %1 and the last % */
    CHECK_MSG(c->n == 6, "%d constraints", c->n);
    int free_percent = 0, percent = 0;
    for (int32_t id = 0; id < tfm_vocab_size(v); id++) {
        if (!has_percent(v, id)) continue;
        percent++;
        bool held = false;
        for (size_t i = 0; i < c->banned.len; i++) held |= c->banned.data[i] == id;
        for (size_t i = 0; i < c->enclosed.len; i++) held |= c->enclosed.data[i] == id;
        free_percent += !held;
    }
    CHECK_MSG(percent > 0 && free_percent == 0, "%d of %d pieces with '%%' free", free_percent,
              percent);
    /* %d (constraint 2) only after %s (1); the strays need nothing */
    CHECK(c->needs[2] == (uint64_t)1 << 1 && c->needs[0] == 0 && c->needs[3] == 0);
    /* after %1 (constraint 4): "s" would make "%1s" */
    const int32_t s_id = tfm_vocab_find(v, "s", 1);
    bool s_banned = false;
    for (size_t i = 0; i < c->after_tok.len; i++)
        s_banned |= c->after_con.data[i] == 4 && c->after_tok.data[i] == s_id;
    CHECK_MSG(s_id >= 0 && s_banned, "'s' (%d) after %%1", (int)s_id);
    tfm_constraints_free(c);
    tfm_vocab_free(v);
}

void openblas_set_num_threads(int num_threads);

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
    RUN(test_constraints_met);
    RUN(test_constraints_batch_equals_alone);
    RUN(test_constraints_limits_order);
    RUN(test_constraints_enclosed_order);
    RUN(test_constraints_greedy_rows);
    RUN(test_constraints_ban_after);
    RUN(test_placeholder_constraints);
    RUN(test_placeholder_pieces);
    CHECK_DONE();
}
