/* test_constrained.c - constrained beam search on random tiny models
 * (testsearch.h's, those of test_search.c): it meets every constraint (any
 * order, several ids, alternatives) with beam 4 and 1, its scores equal the
 * full decoder's, a mixed batch equals its sentences alone, limits and
 * order hold, and a constraint that cannot fit is reported as unmet; greedy
 * search with constraints, tokens enclosed and banned after others, and
 * placeholders as constraints, as tokens and spelled in a model's pieces.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "testsearch.h"
#include "testspm.h"
#include "search/search_internal.h"
#include "tfm/pass.h"
#include "tfm/search.h"
#include "tfm/spm.h"
#include "tfm/text.h"

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
    /* "50% of %s": its text has a '%', so the pieces holding one stay; but
     * two pieces may not spell a placeholder the source does not have:
     * "%" then "%" ("%%"), "s" ("%s") or "8" ("%8", Qt's); "▁%" then "s";
     * nor may the piece "%d" come at all.  "%" then "$" or "▁of" spell
     * none, and pieces without a '%' are banned after none. */
    const int32_t d_id = tfm_vocab_add(v, "%d", 2, -1, TFM_PIECE_NORMAL);
    tfm_constraints_clear(c);
    line = "50% of %s";
    CHECK(tfm_constraints_add_placeholders(c, v, line, strlen(line), TFM_PH_ALL, &err) == TFM_OK);
    bool d_banned = false, pct_banned = false;
    for (size_t i = 0; i < c->banned.len; i++) {
        d_banned |= c->banned.data[i] == d_id;
        pct_banned |= c->banned.data[i] == id[0];
    }
    CHECK(d_banned && !pct_banned);
    /* pair[k]: "%" then %, s, 8, $, ▁of; "▁%" then s; "a" then anything */
    bool pair[7] = {0};
    for (size_t i = 0; i < c->pair_first.len; i++) {
        const int32_t first = c->pair_first.data[i], second = c->pair_second.data[i];
        if (first == id[0]) {
            pair[0] |= second == id[0];
            pair[1] |= second == more_id[2];
            pair[2] |= second == more_id[0];
            pair[3] |= second == more_id[3];
            pair[4] |= second == id[3];
        }
        pair[5] |= first == id[1] && second == more_id[2];
        pair[6] |= first == id[2];
    }
    CHECK(pair[0] && pair[1] && pair[2] && !pair[3] && !pair[4] && pair[5] && !pair[6]);
    /* "R&D: %s": "&" then "#38;" spells the entity "&#38;", "&" then "▁of" nothing */
    const int32_t entity_id = tfm_vocab_add(v, "#38;", 4, -1, TFM_PIECE_NORMAL);
    tfm_constraints_clear(c);
    line = "R&D: %s";
    CHECK(tfm_constraints_add_placeholders(c, v, line, strlen(line), TFM_PH_ALL, &err) == TFM_OK);
    bool entity_after = false, of_after = false;
    for (size_t i = 0; i < c->pair_first.len; i++) {
        if (c->pair_first.data[i] != id[6]) continue;
        entity_after |= c->pair_second.data[i] == entity_id;
        of_after |= c->pair_second.data[i] == id[3];
    }
    CHECK(entity_after && !of_after);
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

int main(void)
{
    /* rows of a few dozen: a second BLAS thread only spins (DESIGN.md) */
    openblas_set_num_threads(1);
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
