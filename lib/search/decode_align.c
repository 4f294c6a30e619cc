/* decode_align.c - the word alignments of decode --alignment
 * (decode_align.h): the hypotheses of many sentences aligned by one
 * teacher-forced pass of tfm_aligner, each alignment written as
 * inspect-attn -f align (tfm_align_hard) or -f soft (tfm_align_soft)
 * writes it, and kept with the record and ids it belongs to, so that a
 * sentence is only ever given its own hypotheses' alignments. */
#include <stdlib.h>
#include <string.h>

#include "decode_align.h"
#include "tfm/view.h"

struct decode_aligner {
    tfm_aligner *aligner;
    tfm_alignment kind;
    int layer;
    bool source_eos;
    int max_sentences, max_hyps;
    /* the aligner's targets of a run, [max_sentences * max_hyps] each */
    int *sentence;
    const int32_t **ids;
    int *len;
    /* what the last run kept: sentences k0 .. k0 + n - 1 of its search */
    int k0, n;
    size_t *record;   /* [max_sentences] each sentence's record */
    int *first;       /* [max_sentences + 1] each sentence's first hypothesis */
    tfm_ids kept;     /* the hypotheses' ids, one after another */
    size_t *kept_at;  /* [max_sentences * max_hyps + 1] where each hypothesis's ids start */
    tfm_buf text;     /* the alignments, one after another */
    size_t *text_at;  /* [max_sentences * max_hyps + 1] where each alignment starts */
};

tfm_status decode_aligner_create(const tfm_model *m, tfm_alignment kind, int layer,
                                 bool source_eos, int max_sentences, int max_hyps,
                                 decode_aligner **out, tfm_error *err)
{
    *out = NULL;
    if (max_sentences < 1 || max_hyps < 1)
        return tfm_error_set(err, TFM_ERR_ARG, "aligner: %d sentences of %d hypotheses",
                             max_sentences, max_hyps);
    decode_aligner *a = calloc(1, sizeof *a);
    if (!a) return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    a->kind = kind;
    a->layer = layer;
    a->source_eos = source_eos;
    a->max_sentences = max_sentences;
    a->max_hyps = max_hyps;
    tfm_ids_init(&a->kept);
    tfm_buf_init(&a->text);
    const size_t hyps = (size_t)max_sentences * (size_t)max_hyps;
    a->sentence = calloc(hyps, sizeof *a->sentence);
    a->ids = calloc(hyps, sizeof *a->ids);
    a->len = calloc(hyps, sizeof *a->len);
    a->record = calloc((size_t)max_sentences, sizeof *a->record);
    a->first = calloc((size_t)max_sentences + 1, sizeof *a->first);
    a->kept_at = calloc(hyps + 1, sizeof *a->kept_at);
    a->text_at = calloc(hyps + 1, sizeof *a->text_at);
    tfm_status s = TFM_OK;
    if (!a->sentence || !a->ids || !a->len || !a->record || !a->first || !a->kept_at ||
        !a->text_at)
        s = tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    if (s == TFM_OK) s = tfm_aligner_create(m, &a->aligner, err);
    /* a model trained with guided alignment aligns with the first head of its
     * alignment layer (Marian's, CTranslate2's), when that is the layer read */
    if (s == TFM_OK && m->config.alignment_layer >= 0 && layer == m->config.alignment_layer)
        s = tfm_aligner_set_head(a->aligner, 0, err);
    if (s != TFM_OK) {
        decode_aligner_free(a);
        return s;
    }
    *out = a;
    return TFM_OK;
}

void decode_aligner_free(decode_aligner *a)
{
    if (!a) return;
    tfm_aligner_free(a->aligner);
    free(a->sentence);
    free(a->ids);
    free(a->len);
    free(a->record);
    free(a->first);
    free(a->kept_at);
    free(a->text_at);
    tfm_ids_free(&a->kept);
    tfm_buf_free(&a->text);
    free(a);
}

/* Appends the alignment of a hypothesis of len ids to a source of S states
 * from its weights w [len + 1, S] (tfm_aligner_weights). */
static tfm_status append_text(decode_aligner *a, const float *w, int len, int S)
{
    if (a->kind == TFM_ALIGNMENT_SOFT) return tfm_align_soft(w, len + 1, S, &a->text);
    /* the target tokens' rows, not the final </s>'s; the source's words, not its </s> */
    const int words = S - (a->source_eos ? 1 : 0);
    return tfm_align_hard(w, len, S, words, &a->text);
}

/* states[j]: [src_lens[j], D] */
tfm_status decode_aligner_run(decode_aligner *a, const tfm_search *search, int k0, int n,
                              const float *const *states, const int *src_lens,
                              const size_t *records, tfm_error *err)
{
    a->n = 0;
    tfm_ids_clear(&a->kept);
    tfm_buf_clear(&a->text);
    if (n < 0 || n > a->max_sentences)
        return tfm_error_set(err, TFM_ERR_ARG, "aligner: %d sentences, at most %d", n,
                             a->max_sentences);
    /* the hypotheses (their ids kept), and those with a source as the targets */
    int t = 0, m = 0;
    for (int j = 0; j < n; j++) {
        const tfm_nbest nb = tfm_search_result(search, k0 + j);
        if (nb.n > a->max_hyps)
            return tfm_error_set(err, TFM_ERR_ARG, "aligner: %d hypotheses, at most %d", nb.n,
                                 a->max_hyps);
        a->record[j] = records[j];
        a->first[j] = t;
        for (int h = 0; h < nb.n; h++, t++) {
            const tfm_hypothesis *hyp = &nb.hyps[h];
            a->kept_at[t] = a->kept.len;
            for (int i = 0; i < hyp->len; i++)
                if (tfm_ids_push(&a->kept, hyp->ids[i]) != TFM_OK)
                    return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
            if (src_lens[j] == 0) continue; /* no source, no alignment */
            a->sentence[m] = j;
            a->ids[m] = hyp->ids;
            a->len[m] = hyp->len;
            m++;
        }
    }
    a->first[n] = t;
    a->kept_at[t] = a->kept.len;
    tfm_status s = tfm_aligner_run(a->aligner, n, states, src_lens, m, a->sentence, a->ids,
                                   a->len, a->layer, err);
    if (s != TFM_OK) return s;
    /* the alignments' text, in the order of the hypotheses */
    t = 0;
    m = 0;
    for (int j = 0; j < n; j++)
        for (int h = 0; h < a->first[j + 1] - a->first[j]; h++, t++) {
            a->text_at[t] = a->text.len;
            if (src_lens[j] == 0) continue;
            const int len = (int)(a->kept_at[t + 1] - a->kept_at[t]);
            if (append_text(a, tfm_aligner_weights(a->aligner, m++), len, src_lens[j]) != TFM_OK)
                return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
        }
    a->text_at[t] = a->text.len;
    a->k0 = k0;
    a->n = n;
    return TFM_OK;
}

bool decode_aligner_has(const decode_aligner *a, int k, size_t record, tfm_nbest nb)
{
    const int j = k - a->k0;
    if (j < 0 || j >= a->n || a->record[j] != record || a->first[j + 1] - a->first[j] != nb.n)
        return false;
    for (int h = 0; h < nb.n; h++) {
        const int t = a->first[j] + h;
        const size_t len = a->kept_at[t + 1] - a->kept_at[t];
        if (len != (size_t)nb.hyps[h].len ||
            (len && memcmp(a->kept.data + a->kept_at[t], nb.hyps[h].ids, len * sizeof(int32_t))))
            return false;
    }
    return true;
}

const char *decode_aligner_text(const decode_aligner *a, int k, int h, size_t *len)
{
    const int t = a->first[k - a->k0] + h;
    *len = a->text_at[t + 1] - a->text_at[t];
    return *len ? a->text.data + a->text_at[t] : "";
}
