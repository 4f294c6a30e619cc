/* shortlist.c - lexical shortlists, as Marian and Bergamot decode with
 * them: for each source piece the target pieces that appear most often in
 * the translations of the sentences holding it, and the most frequent
 * target pieces; a batch is decoded over the union of its sentences'
 * candidates only (tfm_decoder_restrict), so the output layer and the
 * search's scan over it shrink from the whole target vocabulary to a few
 * thousand pieces.
 *
 * Learning counts co-occurrence over sentence pairs: c(s) pairs whose
 * source holds piece s, c(s, t) pairs holding s in the source and t in the
 * target (each counted once per pair), f(t) occurrences of t.  The F most
 * frequent targets (by f) are candidates of every sentence; each source
 * piece keeps its N best other targets by p(t | s) = c(s, t) / c(s), ties
 * to the smaller id.  Co-occurrence stands in for the word alignment of
 * Marian's fast_align recipe: without an aligner it over-counts frequent
 * targets, which the frequent list takes anyway.
 *
 * The file is safetensors (tfm-formats(5)): metadata "format" =
 * "tfm-shortlist", "version" = "1", the two vocabulary sizes, and tensors
 * "frequent" I32 [F], "candidates" I32 [V_src, N] (best first, -1 after a
 * piece's last) and "probs" F32 [V_src, N] (their p(t | s), 0 after). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tfm/safetensors.h"
#include "tfm/search.h"

struct tfm_shortlist {
    int src_V, tgt_V;
    int n_frequent;
    int per_source;
    int32_t *frequent;   /* [n_frequent] */
    int32_t *candidates; /* [src_V, per_source], -1 after the last */
    float *probs;        /* [src_V, per_source] */
};

struct tfm_shortlist_counter {
    int src_V, tgt_V;
    tfm_map64 *pairs;    /* (s << 32 | t) -> c(s, t) */
    int64_t *src_count;  /* [src_V] c(s) */
    int64_t *tgt_count;  /* [tgt_V] f(t) */
    size_t *src_seen;    /* [src_V] the last pair (+1) that counted s */
    size_t *tgt_seen;    /* [tgt_V] the last pair (+1) that counted t */
    size_t n_pairs;
};

tfm_shortlist_params tfm_shortlist_default_params(void)
{
    return (tfm_shortlist_params){.per_source = 50, .frequent = 100};
}

tfm_status tfm_shortlist_counter_create(int src_V, int tgt_V, tfm_shortlist_counter **out,
                                        tfm_error *err)
{
    *out = NULL;
    if (src_V <= 0 || tgt_V <= 0)
        return tfm_error_set(err, TFM_ERR_ARG, "shortlist: vocabulary sizes %d and %d", src_V,
                             tgt_V);
    tfm_shortlist_counter *c = calloc(1, sizeof *c);
    if (!c) return tfm_error_set(err, TFM_ERR_NOMEM, "shortlist: out of memory");
    c->src_V = src_V;
    c->tgt_V = tgt_V;
    c->pairs = tfm_map64_create(1 << 16);
    c->src_count = calloc((size_t)src_V, sizeof *c->src_count);
    c->tgt_count = calloc((size_t)tgt_V, sizeof *c->tgt_count);
    c->src_seen = calloc((size_t)src_V, sizeof *c->src_seen);
    c->tgt_seen = calloc((size_t)tgt_V, sizeof *c->tgt_seen);
    if (!c->pairs || !c->src_count || !c->tgt_count || !c->src_seen || !c->tgt_seen) {
        tfm_shortlist_counter_free(c);
        return tfm_error_set(err, TFM_ERR_NOMEM, "shortlist: out of memory");
    }
    *out = c;
    return TFM_OK;
}

void tfm_shortlist_counter_free(tfm_shortlist_counter *c)
{
    if (!c) return;
    tfm_map64_free(c->pairs);
    free(c->src_count);
    free(c->tgt_count);
    free(c->src_seen);
    free(c->tgt_seen);
    free(c);
}

/* Checks that ids[0..n) lie in [0, V); side names them in the message. */
static tfm_status check_ids(const int32_t *ids, size_t n, int V, const char *side, tfm_error *err)
{
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= V)
            return tfm_error_set(err, TFM_ERR_RANGE, "%s id %d at position %zu is outside the "
                                 "vocabulary [0, %d)", side, (int)ids[i], i + 1, V);
    return TFM_OK;
}

tfm_status tfm_shortlist_count(tfm_shortlist_counter *c, const int32_t *src, size_t n,
                               const int32_t *tgt, size_t m, tfm_error *err)
{
    if (check_ids(src, n, c->src_V, "source", err) != TFM_OK ||
        check_ids(tgt, m, c->tgt_V, "target", err) != TFM_OK)
        return err->status;
    const size_t pair = ++c->n_pairs;
    for (size_t j = 0; j < m; j++) c->tgt_count[tgt[j]]++;
    for (size_t i = 0; i < n; i++) {
        const int32_t s = src[i];
        if (c->src_seen[s] == pair) continue;
        c->src_seen[s] = pair;
        c->src_count[s]++;
        /* each target piece once for this source piece: stamps of pair
         * and source position, so they need no clearing */
        const size_t stamp = pair * ((size_t)n + 1) + i + 1;
        for (size_t j = 0; j < m; j++) {
            const int32_t t = tgt[j];
            if (c->tgt_seen[t] == stamp) continue;
            c->tgt_seen[t] = stamp;
            int64_t *v = tfm_map64_upsert(c->pairs, (uint64_t)s << 32 | (uint32_t)t, 0, NULL);
            if (!v) return tfm_error_set(err, TFM_ERR_NOMEM, "shortlist: out of memory");
            (*v)++;
        }
    }
    return TFM_OK;
}

/* A target and its count, ranked: more first, then the smaller id. */
typedef struct ranked {
    int32_t id;
    int64_t count;
} ranked;

static int by_count(const void *a, const void *b)
{
    const ranked *x = a, *y = b;
    if (x->count != y->count) return x->count > y->count ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

static tfm_shortlist *shortlist_alloc(int src_V, int tgt_V, int n_frequent, int per_source)
{
    tfm_shortlist *sl = calloc(1, sizeof *sl);
    if (!sl) return NULL;
    *sl = (tfm_shortlist){.src_V = src_V, .tgt_V = tgt_V, .n_frequent = n_frequent,
                          .per_source = per_source};
    sl->frequent = calloc((size_t)n_frequent + 1, sizeof *sl->frequent);
    sl->candidates = malloc(((size_t)src_V * per_source + 1) * sizeof *sl->candidates);
    sl->probs = calloc((size_t)src_V * per_source + 1, sizeof *sl->probs);
    if (!sl->frequent || !sl->candidates || !sl->probs) {
        tfm_shortlist_free(sl);
        return NULL;
    }
    for (size_t i = 0; i < (size_t)src_V * per_source; i++) sl->candidates[i] = -1;
    return sl;
}

tfm_status tfm_shortlist_finish(const tfm_shortlist_counter *c, const tfm_shortlist_params *p,
                                tfm_shortlist **out, tfm_error *err)
{
    *out = NULL;
    if (p->per_source < 0 || p->frequent < 0)
        return tfm_error_set(err, TFM_ERR_ARG, "shortlist: %d candidates per source piece and "
                             "%d frequent ones", p->per_source, p->frequent);
    const int src_V = c->src_V, tgt_V = c->tgt_V;
    const int F = p->frequent < tgt_V ? p->frequent : tgt_V;
    const int N = p->per_source < tgt_V ? p->per_source : tgt_V;
    tfm_shortlist *sl = shortlist_alloc(src_V, tgt_V, F, N);
    const size_t n_entries = tfm_map64_count(c->pairs);
    size_t *start = calloc((size_t)src_V + 1, sizeof *start);
    ranked *entries = malloc((n_entries > (size_t)tgt_V ? n_entries : (size_t)tgt_V) *
                             sizeof *entries + 1);
    bool *is_frequent = calloc((size_t)tgt_V, sizeof *is_frequent);
    if (!sl || !start || !entries || !is_frequent) {
        tfm_shortlist_free(sl);
        free(start);
        free(entries);
        free(is_frequent);
        return tfm_error_set(err, TFM_ERR_NOMEM, "shortlist: out of memory");
    }

    /* the frequent targets */
    for (int t = 0; t < tgt_V; t++) entries[t] = (ranked){.id = t, .count = c->tgt_count[t]};
    qsort(entries, (size_t)tgt_V, sizeof *entries, by_count);
    for (int i = 0; i < F; i++) {
        sl->frequent[i] = entries[i].id;
        is_frequent[entries[i].id] = true;
    }

    /* the co-occurring targets of each source piece, grouped by piece */
    uint64_t key;
    int64_t value;
    for (size_t it = 0; tfm_map64_next(c->pairs, &it, &key, &value);) start[(key >> 32) + 1]++;
    for (int s = 0; s < src_V; s++) start[s + 1] += start[s];
    for (size_t it = 0; tfm_map64_next(c->pairs, &it, &key, &value);) {
        const size_t s = (size_t)(key >> 32);
        entries[start[s]++] = (ranked){.id = (int32_t)(uint32_t)key, .count = value};
    }
    for (int s = src_V; s > 0; s--) start[s] = start[s - 1]; /* back to the starts */
    start[0] = 0;
    for (int s = 0; s < src_V; s++) {
        ranked *e = entries + start[s];
        const size_t n = start[s + 1] - start[s];
        qsort(e, n, sizeof *e, by_count);
        int32_t *cand = sl->candidates + (size_t)s * N;
        float *prob = sl->probs + (size_t)s * N;
        int kept = 0;
        for (size_t i = 0; i < n && kept < N; i++) {
            if (is_frequent[e[i].id]) continue;
            cand[kept] = e[i].id;
            prob[kept] = (float)((double)e[i].count / (double)c->src_count[s]);
            kept++;
        }
    }
    free(start);
    free(entries);
    free(is_frequent);
    *out = sl;
    return TFM_OK;
}

void tfm_shortlist_free(tfm_shortlist *sl)
{
    if (!sl) return;
    free(sl->frequent);
    free(sl->candidates);
    free(sl->probs);
    free(sl);
}

int tfm_shortlist_src_vocab_size(const tfm_shortlist *sl) { return sl->src_V; }
int tfm_shortlist_tgt_vocab_size(const tfm_shortlist *sl) { return sl->tgt_V; }
int tfm_shortlist_per_source(const tfm_shortlist *sl) { return sl->per_source; }
int tfm_shortlist_frequent(const tfm_shortlist *sl) { return sl->n_frequent; }

const int32_t *tfm_shortlist_candidates(const tfm_shortlist *sl, int32_t src, const float **probs)
{
    if (probs) *probs = sl->probs + (size_t)src * sl->per_source;
    return sl->candidates + (size_t)src * sl->per_source;
}

/* ---- the file -------------------------------------------------------------------------- */

enum { SHORTLIST_VERSION = 1 };

tfm_status tfm_shortlist_save(const tfm_shortlist *sl, const char *path, tfm_error *err)
{
    tfm_safetensors_writer *w = tfm_safetensors_writer_create();
    if (!w) return tfm_error_set(err, TFM_ERR_NOMEM, "shortlist: out of memory");
    char src_V[16], tgt_V[16], version[16];
    snprintf(src_V, sizeof src_V, "%d", sl->src_V);
    snprintf(tgt_V, sizeof tgt_V, "%d", sl->tgt_V);
    snprintf(version, sizeof version, "%d", SHORTLIST_VERSION);
    const int64_t f_shape[1] = {sl->n_frequent};
    const int64_t c_shape[2] = {sl->src_V, sl->per_source};
    tfm_status s = tfm_safetensors_writer_add_metadata(w, "format", "tfm-shortlist", err);
    if (s == TFM_OK) s = tfm_safetensors_writer_add_metadata(w, "version", version, err);
    if (s == TFM_OK) s = tfm_safetensors_writer_add_metadata(w, "src_vocab_size", src_V, err);
    if (s == TFM_OK) s = tfm_safetensors_writer_add_metadata(w, "tgt_vocab_size", tgt_V, err);
    if (s == TFM_OK)
        s = tfm_safetensors_writer_add_tensor(w, "frequent", TFM_I32, 1, f_shape, sl->frequent,
                                              err);
    if (s == TFM_OK)
        s = tfm_safetensors_writer_add_tensor(w, "candidates", TFM_I32, 2, c_shape,
                                              sl->candidates, err);
    if (s == TFM_OK)
        s = tfm_safetensors_writer_add_tensor(w, "probs", TFM_F32, 2, c_shape, sl->probs, err);
    if (s == TFM_OK) s = tfm_safetensors_write(w, path, err);
    tfm_safetensors_writer_free(w);
    return s;
}

/* The metadata value of key as a number in [lo, hi]. */
static tfm_status metadata_int(const tfm_safetensors *f, const char *key, long lo, long hi,
                               int *out, tfm_error *err)
{
    const char *v = tfm_safetensors_metadata(f, key);
    if (!v) return tfm_error_set(err, TFM_ERR_FORMAT, "no metadata '%s'", key);
    char *end;
    long x = strtol(v, &end, 10);
    if (end == v || *end || x < lo || x > hi)
        return tfm_error_set(err, TFM_ERR_FORMAT, "metadata '%s' is '%s', not a number in "
                             "[%ld, %ld]", key, v, lo, hi);
    *out = (int)x;
    return TFM_OK;
}

/* Checks what the file holds: targets in range, each piece's candidates
 * distinct from the frequent ones and from each other, -1 only after the
 * last, probabilities in [0, 1] (0 after the last). */
static tfm_status check_contents(const tfm_shortlist *sl, tfm_error *err)
{
    const int V = sl->tgt_V, N = sl->per_source;
    /* seen[t]: -1 a frequent target, s + 1 a candidate of piece s, 0 neither */
    int *seen = calloc((size_t)V, sizeof *seen);
    if (!seen) return tfm_error_set(err, TFM_ERR_NOMEM, "shortlist: out of memory");
    tfm_status st = TFM_OK;
    for (int i = 0; i < sl->n_frequent && st == TFM_OK; i++) {
        int32_t t = sl->frequent[i];
        if (t < 0 || t >= V || seen[t])
            st = tfm_error_set(err, TFM_ERR_FORMAT, "frequent target %d (entry %d) is outside "
                               "[0, %d) or given twice", (int)t, i + 1, V);
        else seen[t] = -1;
    }
    for (int s = 0; s < sl->src_V && st == TFM_OK; s++) {
        const int32_t *cand = sl->candidates + (size_t)s * N;
        const float *prob = sl->probs + (size_t)s * N;
        bool ended = false;
        for (int i = 0; i < N && st == TFM_OK; i++) {
            const int32_t t = cand[i];
            const bool ok = t == -1 ? prob[i] == 0.0f
                                    : !ended && t >= 0 && t < V && seen[t] != -1 &&
                                          seen[t] != s + 1 && prob[i] >= 0.0f && prob[i] <= 1.0f;
            if (!ok)
                st = tfm_error_set(err, TFM_ERR_FORMAT, "source piece %d: candidate %d is %d "
                                   "(p %g): outside [0, %d), given twice, a frequent one, or "
                                   "after the last", s, i + 1, (int)t, (double)prob[i], V);
            else if (t == -1) ended = true;
            else seen[t] = s + 1;
        }
    }
    free(seen);
    return st;
}

tfm_status tfm_shortlist_load(const char *path, tfm_shortlist **out, tfm_error *err)
{
    *out = NULL;
    tfm_safetensors *f;
    tfm_status s = tfm_safetensors_open(path, &f, err);
    if (s != TFM_OK) return s;
    const char *format = tfm_safetensors_metadata(f, "format");
    int version = 0, src_V = 0, tgt_V = 0;
    if (!format || strcmp(format, "tfm-shortlist") != 0)
        s = tfm_error_set(err, TFM_ERR_FORMAT, "not a shortlist (no metadata format = "
                          "\"tfm-shortlist\": 'train shortlist' writes them)");
    if (s == TFM_OK) s = metadata_int(f, "version", 1, 1000, &version, err);
    if (s == TFM_OK && version != SHORTLIST_VERSION)
        s = tfm_error_set(err, TFM_ERR_UNSUPPORTED, "shortlist version %d; this program reads "
                          "version %d", version, SHORTLIST_VERSION);
    if (s == TFM_OK) s = metadata_int(f, "src_vocab_size", 1, INT32_MAX, &src_V, err);
    if (s == TFM_OK) s = metadata_int(f, "tgt_vocab_size", 1, INT32_MAX, &tgt_V, err);
    size_t fi, ci;
    if (s == TFM_OK && (!tfm_safetensors_find(f, "frequent", &fi) ||
                        !tfm_safetensors_find(f, "candidates", &ci)))
        s = tfm_error_set(err, TFM_ERR_FORMAT, "missing tensor 'frequent' or 'candidates'");
    tfm_safetensors_info finfo, cinfo;
    if (s == TFM_OK) {
        tfm_safetensors_info_at(f, fi, &finfo);
        tfm_safetensors_info_at(f, ci, &cinfo);
        if (finfo.ndim != 1 || cinfo.ndim != 2 || cinfo.shape[0] != src_V ||
            finfo.shape[0] > tgt_V || cinfo.shape[1] > tgt_V)
            s = tfm_error_set(err, TFM_ERR_FORMAT, "tensors 'frequent' and 'candidates' must "
                              "have shapes [F] and [%d, N] (F, N at most %d)", src_V, tgt_V);
    }
    tfm_shortlist *sl = NULL;
    const void *frequent = NULL, *candidates = NULL, *probs = NULL;
    if (s == TFM_OK) {
        sl = shortlist_alloc(src_V, tgt_V, (int)finfo.shape[0], (int)cinfo.shape[1]);
        if (!sl) s = tfm_error_set(err, TFM_ERR_NOMEM, "shortlist: out of memory");
    }
    if (s == TFM_OK)
        s = tfm_safetensors_get(f, "frequent", TFM_I32, 1, finfo.shape, &frequent, err);
    if (s == TFM_OK)
        s = tfm_safetensors_get(f, "candidates", TFM_I32, 2, cinfo.shape, &candidates, err);
    if (s == TFM_OK) s = tfm_safetensors_get(f, "probs", TFM_F32, 2, cinfo.shape, &probs, err);
    if (s == TFM_OK) s = tfm_safetensors_check_all_used(f, err);
    if (s == TFM_OK) {
        memcpy(sl->frequent, frequent, (size_t)sl->n_frequent * sizeof *sl->frequent);
        const size_t n = (size_t)src_V * sl->per_source;
        memcpy(sl->candidates, candidates, n * sizeof *sl->candidates);
        memcpy(sl->probs, probs, n * sizeof *sl->probs);
        s = check_contents(sl, err);
    }
    tfm_safetensors_free(f);
    if (s != TFM_OK) {
        tfm_shortlist_free(sl);
        tfm_error_prefix(err, "%s", path);
        return s;
    }
    *out = sl;
    return TFM_OK;
}

tfm_status tfm_shortlist_check_model(const tfm_shortlist *sl, const tfm_model *m, tfm_error *err)
{
    const tfm_config *c = &m->config;
    if (sl->src_V != c->src_vocab_size || sl->tgt_V != c->tgt_vocab_size)
        return tfm_error_set(err, TFM_ERR_ARG, "the shortlist is for vocabularies of %d source "
                             "and %d target pieces, the model has %d and %d: learn it with the "
                             "model's vocabulary ('train shortlist -m MODEL')", sl->src_V,
                             sl->tgt_V, (int)c->src_vocab_size, (int)c->tgt_vocab_size);
    return TFM_OK;
}

/* ---- a batch's candidates ------------------------------------------------------------------ */

tfm_status tfm_vocab_set_init(tfm_vocab_set *set, int V, tfm_error *err)
{
    *set = (tfm_vocab_set){.V = V};
    set->stamp = calloc((size_t)V + 1, sizeof *set->stamp);
    set->ids = malloc(((size_t)V + 1) * sizeof *set->ids);
    if (!set->stamp || !set->ids) {
        tfm_vocab_set_free(set);
        return tfm_error_set(err, TFM_ERR_NOMEM, "shortlist: out of memory");
    }
    return TFM_OK;
}

void tfm_vocab_set_free(tfm_vocab_set *set)
{
    free(set->stamp);
    free(set->ids);
    *set = (tfm_vocab_set){0};
}

void tfm_vocab_set_clear(tfm_vocab_set *set)
{
    if (++set->gen == 0) { /* wrapped: every stamp is stale again */
        memset(set->stamp, 0, (size_t)set->V * sizeof *set->stamp);
        set->gen = 1;
    }
    set->n = 0;
}

void tfm_vocab_set_add(tfm_vocab_set *set, int32_t id)
{
    if (id < 0 || id >= set->V || set->stamp[id] == set->gen) return;
    set->stamp[id] = set->gen;
    set->ids[set->n++] = id;
}

void tfm_shortlist_add_frequent(const tfm_shortlist *sl, tfm_vocab_set *set)
{
    for (int i = 0; i < sl->n_frequent; i++) tfm_vocab_set_add(set, sl->frequent[i]);
}

void tfm_shortlist_add_source(const tfm_shortlist *sl, const int32_t *src, size_t n, int best,
                              tfm_vocab_set *set)
{
    const int N = best > 0 && best < sl->per_source ? best : sl->per_source;
    for (size_t i = 0; i < n; i++) {
        if (src[i] < 0 || src[i] >= sl->src_V) continue;
        const int32_t *cand = sl->candidates + (size_t)src[i] * sl->per_source;
        for (int j = 0; j < N && cand[j] >= 0; j++) tfm_vocab_set_add(set, cand[j]);
    }
}

static int by_id(const void *a, const void *b)
{
    const int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

void tfm_vocab_set_sort(tfm_vocab_set *set)
{
    qsort(set->ids, (size_t)set->n, sizeof *set->ids, by_id);
}
