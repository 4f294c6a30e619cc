/* test_decode_align.c - the word alignments of decode --alignment
 * (lib/search/decode_align.c and tfm_decode_batch with alignment), on a
 * tiny random model.
 *
 * What it checks:
 *   - the alignments of a search's hypotheses (beam 3, 3-best) aligned all
 *     at once are those aligned sentence by sentence, and the hard pairs
 *     are the ones inspect-attn reads off the training pass
 *     (tfm_model_loss, tfm_attention_gather of the last layer's mean,
 *     tfm_align_hard without the final </s> and the source's </s>);
 *   - a sentence with no source has an empty alignment;
 *   - decode_aligner_has gives a sentence only its own alignments: another
 *     record, other ids, another count of hypotheses, a sentence outside
 *     the run are refused; too many sentences is an error;
 *   - tfm_decode_batch with alignment, over 1 and 2 workers: each line is
 *     the line without alignment with ' ||| ' and the pairs inserted after
 *     the ids (1-best, --scores, n-best), the same pairs as above, and an
 *     empty source's line unchanged.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "search/decode_align.h"
#include "testmodel.h"
#include "tfm/io.h"
#include "tfm/search.h"
#include "tfm/view.h"

enum { B = 5, MAX_SRC = 9, V = 40, NBEST = 3 };

typedef struct fixture {
    tfm_model *m;
    int32_t src[B][MAX_SRC + 1]; /* the ids and </s>, as encode reads them */
    int lens[B];                 /* states: ids + 1, 0 for the empty source */
    float *states;               /* all sentences, one after another */
    const float *state_of[B];
    size_t records[B];
    tfm_search *search;          /* beam 3, 3-best, run over the B sentences */
    tfm_decoder *decoder;
} fixture;

static bool fixture_make(fixture *f)
{
    memset(f, 0, sizeof *f);
    tfm_config c;
    tfm_config_preset("tiny", &c, NULL);
    c.src_vocab_size = c.tgt_vocab_size = V;
    f->m = test_nudged_model(&c, 17);
    if (!f->m) return false;
    tfm_rng rng;
    tfm_rng_seed(&rng, 5);
    int total = 0;
    const int32_t *sp[B];
    for (int s = 0; s < B; s++) {
        const int n = s == 2 ? 0 : 2 + (int)tfm_rng_below(&rng, MAX_SRC - 1);
        for (int j = 0; j < n; j++) f->src[s][j] = 4 + (int32_t)tfm_rng_below(&rng, V - 4);
        f->src[s][n] = TFM_ID_EOS;
        f->lens[s] = n ? n + 1 : 0;
        sp[s] = f->src[s];
        f->records[s] = 100 + (size_t)s;
        total += f->lens[s];
    }
    tfm_error err;
    tfm_encoder *enc = NULL;
    f->states = malloc((size_t)total * c.d_model * sizeof(float) + 1);
    bool ok = f->states && tfm_encoder_create(f->m, &enc, &err) == TFM_OK &&
              tfm_encoder_forward(enc, B, sp, f->lens, f->states, &err) == TFM_OK &&
              tfm_search_create(f->m, &f->search, &err) == TFM_OK &&
              tfm_decoder_create(f->m, &f->decoder, &err) == TFM_OK;
    tfm_encoder_free(enc);
    for (int s = 0, off = 0; s < B; off += f->lens[s], s++)
        f->state_of[s] = f->states + (size_t)off * c.d_model;
    if (ok) {
        tfm_search_params sp_ = tfm_search_default_params();
        sp_.beam = NBEST;
        sp_.nbest = NBEST;
        sp_.max_length_offset = 4;
        tfm_search_input in = {.n_sentences = B, .states = f->state_of, .src_lens = f->lens};
        ok = tfm_search_run(f->search, f->decoder, &sp_, &in, &err) == TFM_OK;
    }
    CHECK_MSG(ok, "fixture: %s", err.msg);
    return ok;
}

static void fixture_free(fixture *f)
{
    tfm_search_free(f->search);
    tfm_decoder_free(f->decoder);
    free(f->states);
    tfm_model_free(f->m);
}

/* inspect-attn -f align's line for a source (ids and </s>) and a target. */
static void inspect_align(const tfm_model *m, const int32_t *src, int src_len,
                          const int32_t *tgt, int tgt_len, tfm_buf *out)
{
    tfm_error err;
    tfm_pass_workspace *ws = NULL;
    tfm_tensor t;
    tfm_tensor_init(&t);
    tfm_buf_clear(out);
    tfm_pair_batch batch = {1, &src, &src_len, &tgt, &tgt_len};
    bool ok = tfm_pass_workspace_create(m, &ws, &err) == TFM_OK &&
              tfm_model_loss(ws, &batch, false, NULL, NULL, NULL, NULL, &err) == TFM_OK &&
              tfm_attention_gather(m, ws, 0, TFM_ATTENTION_CROSS, TFM_VIEW_LAST, TFM_VIEW_MEAN,
                                   &t, &err) == TFM_OK &&
              tfm_align_hard(t.data, tgt_len, src_len, src_len - 1, out) == TFM_OK;
    CHECK_MSG(ok, "inspect: %s", err.msg);
    tfm_tensor_free(&t);
    tfm_pass_workspace_free(ws);
}

static void test_aligner_runs(void)
{
    fixture f;
    if (!fixture_make(&f)) {
        fixture_free(&f);
        return;
    }
    tfm_error err;
    const int last = f.m->config.n_decoder_layers - 1;
    decode_aligner *all = NULL, *one = NULL;
    CHECK(decode_aligner_create(f.m, TFM_ALIGNMENT_HARD, last, true, B, NBEST, &all, &err) ==
          TFM_OK);
    CHECK(decode_aligner_create(f.m, TFM_ALIGNMENT_HARD, last, true, 1, NBEST, &one, &err) ==
          TFM_OK);
    if (!all || !one) goto done;
    CHECK(decode_aligner_run(all, f.search, 0, B, f.state_of, f.lens, f.records, &err) ==
          TFM_OK);
    tfm_buf ref;
    tfm_buf_init(&ref);
    int pairs = 0;
    for (int k = 0; k < B; k++) {
        tfm_nbest nb = tfm_search_result(f.search, k);
        CHECK(nb.n == (f.lens[k] ? NBEST : 1)); /* an empty source: the empty sentence */
        CHECK(decode_aligner_has(all, k, f.records[k], nb));
        CHECK(decode_aligner_run(one, f.search, k, 1, &f.state_of[k], &f.lens[k], &f.records[k],
                                 &err) == TFM_OK);
        CHECK(decode_aligner_has(one, k, f.records[k], nb));
        for (int h = 0; h < nb.n; h++) {
            size_t la, lo;
            const char *a = decode_aligner_text(all, k, h, &la);
            const char *o = decode_aligner_text(one, k, h, &lo);
            CHECK_MSG(la == lo && memcmp(a, o, la) == 0, "sentence %d, hypothesis %d: '%.*s' "
                      "together, '%.*s' alone", k, h, (int)la, a, (int)lo, o);
            if (f.lens[k] == 0) {
                CHECK(la == 0);
                continue;
            }
            inspect_align(f.m, f.src[k], f.lens[k], nb.hyps[h].ids, nb.hyps[h].len, &ref);
            CHECK_MSG(ref.len == la && (la == 0 || memcmp(ref.data, a, la) == 0),
                      "sentence %d, hypothesis %d: '%.*s', inspect-attn '%s'", k, h, (int)la, a,
                      ref.data ? ref.data : "");
            for (size_t c = 0; c < la; c++) pairs += a[c] == '-';
        }
    }
    CHECK_MSG(pairs > 10, "only %d pairs: the test is weak", pairs);
    tfm_buf_free(&ref);

    /* only a sentence's own alignments */
    tfm_nbest nb = tfm_search_result(f.search, 1);
    CHECK(!decode_aligner_has(all, 1, f.records[1] + 1, nb)); /* another record */
    CHECK(!decode_aligner_has(all, B, f.records[1], nb));     /* outside the run */
    CHECK(!decode_aligner_has(all, -1, f.records[1], nb));
    tfm_nbest fewer = {nb.hyps, nb.n - 1};
    CHECK(!decode_aligner_has(all, 1, f.records[1], fewer));
    tfm_hypothesis changed[NBEST];
    int32_t ids[64];
    memcpy(changed, nb.hyps, sizeof changed);
    CHECK(changed[1].len > 0 && changed[1].len <= 64);
    if (changed[1].len > 0 && changed[1].len <= 64) {
        memcpy(ids, changed[1].ids, (size_t)changed[1].len * sizeof *ids);
        ids[changed[1].len - 1] ^= 1;
        changed[1].ids = ids;
        CHECK(!decode_aligner_has(all, 1, f.records[1], (tfm_nbest){changed, NBEST}));
    }
    /* the single run holds its sentence only */
    CHECK(!decode_aligner_has(one, 0, f.records[0], tfm_search_result(f.search, 0)));
    CHECK(decode_aligner_run(one, f.search, 0, 2, f.state_of, f.lens, f.records, &err) ==
          TFM_ERR_ARG);
    CHECK(!decode_aligner_has(one, B - 1, f.records[B - 1], tfm_search_result(f.search, B - 1)));
done:
    decode_aligner_free(all);
    decode_aligner_free(one);
    decode_aligner_free(NULL);
    fixture_free(&f);
}

/* ---- tfm_decode_batch with alignment -------------------------------------------------- */

/* The output lines of every record of the fixture's states through a
 * decode batch of `workers` workers (slices split evenly), concatenated. */
static bool decode_all(const fixture *f, tfm_alignment alignment, int nbest, bool scores,
                       int workers, tfm_buf *out)
{
    tfm_decode_params p = tfm_decode_default_params();
    p.search.beam = NBEST;
    p.search.nbest = nbest;
    p.search.max_length_offset = 4;
    p.scores = scores;
    p.alignment = alignment;
    p.capacity = B;
    p.workers = workers;
    tfm_error err;
    tfm_decode_batch *b = NULL;
    FILE *fp = tmpfile();
    tfm_npy_stream w = {.fp = fp};
    bool ok = fp && tfm_decode_batch_create(f->m, &p, &b, &err) == TFM_OK;
    for (int s = 0; s < B && ok; s++) {
        tfm_tensor t = {.dtype = TFM_F32, .ndim = 2, .shape = {f->lens[s], f->m->config.d_model},
                        .data = (float *)f->state_of[s]};
        ok = tfm_npy_stream_write(&w, &t, &err) == TFM_OK;
    }
    if (ok) rewind(fp);
    tfm_npy_stream in = ok ? tfm_decode_batch_stream(b, fp) : (tfm_npy_stream){0};
    for (int s = 0; s < B && ok; s++) {
        tfm_decode_record rec;
        ok = tfm_decode_batch_read(b, (size_t)s, &in, NULL, &rec, &err) == TFM_OK;
    }
    for (int w_ = 0; w_ < workers && ok; w_++) {
        size_t lo = (size_t)B * w_ / workers, hi = (size_t)B * (w_ + 1) / workers;
        ok = tfm_decode_batch_run(b, w_, lo, hi, &err) == TFM_OK;
    }
    tfm_buf_clear(out);
    for (int s = 0; s < B && ok; s++) {
        const tfm_buf *line = tfm_decode_batch_output(b, (size_t)s, NULL);
        ok = tfm_buf_append(out, line->data, line->len) == TFM_OK;
    }
    CHECK_MSG(ok, "decode batch: %s", err.msg);
    tfm_decode_batch_free(b);
    if (fp) fclose(fp);
    return ok;
}

/* plain with, on each line, ' ||| ' and the next line of pairs inserted
 * after the ids field (field 0 of a 1-best line, field 1 of an n-best
 * line), except on the lines of a 1-best list whose source is empty
 * (lens[line] 0). */
static void insert_pairs(const char *plain, const char *pairs, bool nbest, const int *lens,
                         tfm_buf *out)
{
    tfm_buf_clear(out);
    for (int k = 0; *plain; k++) {
        const char *eol = strchr(plain, '\n'), *peol = strchr(pairs, '\n');
        if (!eol || !peol) break;
        size_t at;
        if (nbest) {
            const char *bar = strstr(plain, " ||| ");
            bar = bar ? strstr(bar + 5, " ||| ") : NULL;
            at = bar && bar < eol ? (size_t)(bar - plain) : (size_t)(eol - plain);
        } else {
            at = strcspn(plain, "\t\n");
        }
        tfm_buf_append(out, plain, at);
        if (nbest || lens[k] > 0) {
            tfm_buf_append(out, " ||| ", 5);
            tfm_buf_append(out, pairs, (size_t)(peol - pairs));
        }
        tfm_buf_append(out, plain + at, (size_t)(eol + 1 - plain - at));
        plain = eol + 1;
        pairs = peol + 1;
    }
}

static void test_decode_batch_lines(void)
{
    fixture f;
    if (!fixture_make(&f)) {
        fixture_free(&f);
        return;
    }
    /* the pairs of every hypothesis, as inspect-attn gives them, a line each */
    tfm_buf pairs1, pairsn, ref;
    tfm_buf_init(&pairs1);
    tfm_buf_init(&pairsn);
    tfm_buf_init(&ref);
    for (int k = 0; k < B; k++) {
        tfm_nbest nb = tfm_search_result(f.search, k);
        for (int h = 0; h < nb.n; h++) {
            if (f.lens[k] > 0)
                inspect_align(f.m, f.src[k], f.lens[k], nb.hyps[h].ids, nb.hyps[h].len, &ref);
            else
                tfm_buf_clear(&ref);
            if (h == 0) {
                tfm_buf_append(&pairs1, ref.data ? ref.data : "", ref.len);
                tfm_buf_putc(&pairs1, '\n');
            }
            tfm_buf_append(&pairsn, ref.data ? ref.data : "", ref.len);
            tfm_buf_putc(&pairsn, '\n');
        }
    }
    struct { int nbest; bool scores; } forms[] = {{1, false}, {1, true}, {NBEST, false}};
    tfm_buf plain, aligned, want;
    tfm_buf_init(&plain);
    tfm_buf_init(&aligned);
    tfm_buf_init(&want);
    for (size_t i = 0; i < sizeof forms / sizeof *forms; i++) {
        const bool nb = forms[i].nbest > 1;
        /* workers decode other batches: scores may move in the last digit */
        for (int workers = 1; workers <= 2; workers++) {
            if (!decode_all(&f, TFM_ALIGNMENT_NONE, forms[i].nbest, forms[i].scores, workers,
                            &plain) ||
                !decode_all(&f, TFM_ALIGNMENT_HARD, forms[i].nbest, forms[i].scores, workers,
                            &aligned))
                continue;
            insert_pairs(plain.data, nb ? pairsn.data : pairs1.data, nb, f.lens, &want);
            CHECK_MSG(aligned.len == want.len && memcmp(aligned.data, want.data, want.len) == 0,
                      "nbest %d, scores %d, %d workers:\n%s\nwanted:\n%s", forms[i].nbest,
                      forms[i].scores, workers, aligned.data, want.data);
        }
    }
    /* soft: as many groups as ids + 1 on each line with a source */
    if (decode_all(&f, TFM_ALIGNMENT_SOFT, 1, false, 2, &aligned)) {
        const char *line = aligned.data;
        for (int k = 0; k < B; k++) {
            const char *eol = strchr(line, '\n');
            const char *bar = strstr(line, " ||| ");
            if (!eol) break;
            if (f.lens[k] == 0) {
                CHECK(eol == line);
            } else if (bar && bar < eol) {
                int groups = 1;
                for (const char *c = bar + 5; c < eol; c++) groups += *c == ' ';
                CHECK(groups == tfm_search_result(f.search, k).hyps[0].len + 1);
            } else {
                CHECK_MSG(false, "line %d has no ' ||| '", k);
            }
            line = eol + 1;
        }
    }
    tfm_decode_params p = tfm_decode_default_params();
    p.alignment = (tfm_alignment)3;
    tfm_decode_batch *b = NULL;
    tfm_error err;
    CHECK(tfm_decode_batch_create(f.m, &p, &b, &err) == TFM_ERR_ARG && b == NULL);
    tfm_buf_free(&plain);
    tfm_buf_free(&aligned);
    tfm_buf_free(&want);
    tfm_buf_free(&pairs1);
    tfm_buf_free(&pairsn);
    tfm_buf_free(&ref);
    fixture_free(&f);
}

int main(void)
{
    RUN(test_aligner_runs);
    RUN(test_decode_batch_lines);
    CHECK_DONE();
}
