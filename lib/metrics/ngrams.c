/* ngrams.c - exact n-gram interning for one segment, and counters indexed
 * by n-gram id (see tfm_ngrams in metrics_internal.h). */
#include <stdlib.h>
#include <string.h>

#include "metrics_internal.h"

/* Key layout of tfm_ngrams.ids: tag (5 bits) | prefix + 1 (29 bits) | token
 * (29 bits + 1 spare).  Ids and word numbers stay below 2^29 (half a billion
 * distinct n-grams in one segment would not fit in memory anyway). */
#define ID_BITS 29
#define ID_LIMIT ((int64_t)1 << ID_BITS)

tfm_status tfm_ngrams_reset(tfm_ngrams *t, size_t expected_words, size_t expected_ids)
{
    /* Very long lines start from a moderate size and let the tables grow. */
    const size_t most = (size_t)1 << 16;
    tfm_ngrams_free(t);
    t->words = tfm_strmap_create(expected_words < most ? expected_words : most);
    t->ids = tfm_map64_create(expected_ids < most ? expected_ids : most);
    if (!t->words || !t->ids) {
        tfm_ngrams_free(t);
        return TFM_ERR_NOMEM;
    }
    return TFM_OK;
}

void tfm_ngrams_free(tfm_ngrams *t)
{
    tfm_strmap_free(t->words);
    tfm_map64_free(t->ids);
    memset(t, 0, sizeof *t);
}

int64_t tfm_ngrams_word(tfm_ngrams *t, const int32_t *cp, size_t n, bool add)
{
    const char *key = n ? (const char *)cp : "";
    if (!add) {
        int64_t *v = tfm_strmap_find(t->words, key, n * sizeof *cp);
        return v ? *v : -1;
    }
    if (t->n_words >= ID_LIMIT) return -2;
    bool inserted;
    int64_t *v = tfm_strmap_upsert(t->words, key, n * sizeof *cp, t->n_words, &inserted);
    if (!v) return -2;
    if (inserted) t->n_words++;
    return *v;
}

int64_t tfm_ngrams_id(tfm_ngrams *t, int tag, int64_t prefix, int64_t token, bool add)
{
    if (token < 0 || prefix < -1) return -1;
    uint64_t key = ((uint64_t)tag << (2 * ID_BITS + 1)) | ((uint64_t)(prefix + 1) << (ID_BITS + 1)) |
                   (uint64_t)token;
    if (!add) {
        int64_t *v = tfm_map64_find(t->ids, key);
        return v ? *v : -1;
    }
    if (t->n_ids >= ID_LIMIT - 1 || token >= ID_LIMIT * 2) return -2;
    bool inserted;
    int64_t *v = tfm_map64_upsert(t->ids, key, t->n_ids, &inserted);
    if (!v) return -2;
    if (inserted) t->n_ids++;
    return *v;
}

tfm_status tfm_counts_reserve(tfm_counts *c, size_t n)
{
    if (n <= c->cap) return TFM_OK;
    size_t cap = c->cap ? c->cap : 256;
    while (cap < n) cap *= 2;
    int64_t *v = realloc(c->v, cap * sizeof *v);
    if (!v) return TFM_ERR_NOMEM;
    memset(v + c->cap, 0, (cap - c->cap) * sizeof *v);
    c->v = v;
    c->cap = cap;
    return TFM_OK;
}

void tfm_counts_free(tfm_counts *c)
{
    free(c->v);
    c->v = NULL;
    c->cap = 0;
}

tfm_status tfm_ngrams_count(tfm_metric_scratch *s, const int32_t *tokens, size_t n_tok,
                            int max_order, int slot0, bool add)
{
    tfm_ids_clear(&s->pos_ids);
    for (size_t i = 0; i < n_tok; i++)
        if (tfm_cp_push(&s->pos_ids, -1) != TFM_OK) return TFM_ERR_NOMEM;
    int32_t *ids = s->pos_ids.data; /* the id of the n-gram starting at i */
    for (int n = 1; n <= max_order && (size_t)n <= n_tok; n++) {
        const int slot = slot0 + n - 1;
        for (size_t i = 0; i + (size_t)n <= n_tok; i++) {
            int64_t prefix = n == 1 ? -1 : ids[i];
            if (n > 1 && prefix < 0) continue; /* (n-1)-gram absent: so is this one */
            const int32_t last = tokens[i + (size_t)n - 1];
            int64_t id = tfm_ngrams_id(&s->ngrams, slot + 1, prefix, last, add);
            if (id == -2) return TFM_ERR_NOMEM;
            ids[i] = (int32_t)id;
            if (id < 0) continue;
            if (add) {
                if ((size_t)id >= s->hyp_count.cap &&
                    (tfm_counts_reserve(&s->hyp_count, (size_t)id + 1) != TFM_OK ||
                     tfm_counts_reserve(&s->order_of, (size_t)id + 1) != TFM_OK ||
                     tfm_counts_reserve(&s->ref_count, (size_t)id + 1) != TFM_OK ||
                     tfm_counts_reserve(&s->ref_max, (size_t)id + 1) != TFM_OK))
                    return TFM_ERR_NOMEM;
                s->hyp_count.v[id]++;
                s->order_of.v[id] = slot;
            } else if (s->ref_count.v[id]++ == 0) {
                if (tfm_cp_push(&s->touched, (int32_t)id) != TFM_OK) return TFM_ERR_NOMEM;
            }
        }
    }
    return TFM_OK;
}
