/* batch.c - cutting the training data into batches by token count, with
 * sentences of like length together so that little of a batch is padding
 * (the paper: "sentence pairs were batched together by approximate sequence
 * length").
 *
 * Each epoch has a plan, made from the shuffling generator as it was when the
 * epoch began: shuffle all pairs; take windows of about window x
 * batch_tokens tokens (Marian's "maxi-batches"); sort each window by length
 * and cut it greedily into batches within the budget; shuffle the batches of
 * the window, so that lengths do not rise steadily through it.  Because the
 * plan is a function of that generator state alone, a checkpoint needs only
 * the state, the epoch and the number of batches taken to continue exactly.
 */
#include <stdlib.h>
#include <string.h>

#include "tfm/train.h"

/* A pair in a window being sorted. */
typedef struct sort_rec {
    int32_t key;           /* the longer side: max(src_len, tgt_len + 1) */
    int32_t tgt_len, src_len;
    size_t pair;
} sort_rec;

/* A batch of a window: order[begin, end). */
typedef struct segment {
    size_t begin, end;
} segment;

struct tfm_batcher {
    const tfm_corpus *corpus;
    tfm_batcher_params p;
    size_t n;              /* pairs */
    size_t *perm;          /* [n] the shuffled pairs */
    size_t *order;         /* [n] pairs in the order of the epoch's batches */
    size_t *starts;        /* [n + 1] batch i is order[starts[i], starts[i + 1]) */
    int64_t n_batches;
    sort_rec *recs;        /* [n] scratch for sorting a window */
    segment *segs;         /* [n] scratch for shuffling a window's batches */
    tfm_batcher_state state;
    tfm_rng rng;           /* the generator after the current epoch's plan */
    /* The batch handed out. */
    const int32_t **src, **tgt;
    int *src_lens, *tgt_lens;
    size_t *pairs;
};

int64_t tfm_batch_cost(int B, int max_src_len, int max_tgt_len)
{
    int64_t longest = max_src_len > max_tgt_len + 1 ? max_src_len : max_tgt_len + 1;
    return (int64_t)B * longest;
}

tfm_batcher_params tfm_batcher_default_params(void)
{
    return (tfm_batcher_params){.batch_tokens = 4096, .window = 100, .shuffle = true, .seed = 1};
}

void tfm_batcher_free(tfm_batcher *b)
{
    if (!b) return;
    free(b->perm);
    free(b->order);
    free(b->starts);
    free(b->recs);
    free(b->segs);
    free(b->src);
    free(b->tgt);
    free(b->src_lens);
    free(b->tgt_lens);
    free(b->pairs);
    free(b);
}

static void plan_epoch(tfm_batcher *b);

tfm_status tfm_batcher_create(const tfm_corpus *c, const tfm_batcher_params *p,
                              tfm_batcher **out, tfm_error *err)
{
    *out = NULL;
    size_t n = tfm_corpus_size(c);
    if (n == 0) return tfm_error_set(err, TFM_ERR_ARG, "the corpus holds no sentence pairs");
    if (p->batch_tokens < 1)
        return tfm_error_set(err, TFM_ERR_ARG, "batch_tokens is %lld, expected 1 or more",
                             (long long)p->batch_tokens);
    if (p->window < 1)
        return tfm_error_set(err, TFM_ERR_ARG, "window is %d, expected 1 or more", p->window);
    tfm_batcher *b = calloc(1, sizeof *b);
    if (!b) return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    b->corpus = c;
    b->p = *p;
    b->n = n;
    b->perm = malloc(n * sizeof *b->perm);
    b->order = malloc(n * sizeof *b->order);
    b->starts = malloc((n + 1) * sizeof *b->starts);
    b->recs = malloc(n * sizeof *b->recs);
    b->segs = malloc(n * sizeof *b->segs);
    b->src = malloc(n * sizeof *b->src);
    b->tgt = malloc(n * sizeof *b->tgt);
    b->src_lens = malloc(n * sizeof *b->src_lens);
    b->tgt_lens = malloc(n * sizeof *b->tgt_lens);
    b->pairs = malloc(n * sizeof *b->pairs);
    if (!b->perm || !b->order || !b->starts || !b->recs || !b->segs || !b->src || !b->tgt ||
        !b->src_lens || !b->tgt_lens || !b->pairs) {
        tfm_batcher_free(b);
        return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory batching %zu pairs", n);
    }
    tfm_rng_seed(&b->state.rng, p->seed);
    plan_epoch(b);
    *out = b;
    return TFM_OK;
}

/* By length: the longer side, then the target, then the source; the pair
 * number last, so that the order is total and the plan deterministic. */
static int rec_compare(const void *x, const void *y)
{
    const sort_rec *a = x, *b = y;
    if (a->key != b->key) return a->key < b->key ? -1 : 1;
    if (a->tgt_len != b->tgt_len) return a->tgt_len < b->tgt_len ? -1 : 1;
    if (a->src_len != b->src_len) return a->src_len < b->src_len ? -1 : 1;
    return a->pair < b->pair ? -1 : a->pair > b->pair;
}

static sort_rec make_rec(const tfm_corpus *c, size_t pair)
{
    const int32_t *s, *t;
    int ns, nt;
    tfm_corpus_pair(c, pair, &s, &ns, &t, &nt);
    sort_rec r = {.key = ns > nt + 1 ? ns : nt + 1, .tgt_len = nt, .src_len = ns, .pair = pair};
    return r;
}

/* Sorts perm[lo, hi) by length, cuts it into batches, and appends them (in
 * shuffled order when shuffling) to the plan. */
static void plan_window(tfm_batcher *b, size_t lo, size_t hi, size_t *written)
{
    size_t m = hi - lo;
    for (size_t i = 0; i < m; i++) b->recs[i] = make_rec(b->corpus, b->perm[lo + i]);
    qsort(b->recs, m, sizeof *b->recs, rec_compare);

    /* Greedy cut: sorted by the longer side, a batch's cost is its size
     * times the key of its last pair. */
    size_t n_segs = 0;
    for (size_t a = 0; a < m;) {
        size_t e = a + 1; /* a pair over the budget still makes a batch of one */
        while (e < m && (int64_t)(e - a + 1) * b->recs[e].key <= b->p.batch_tokens) e++;
        b->segs[n_segs++] = (segment){a, e};
        a = e;
    }
    if (b->p.shuffle)
        for (size_t i = n_segs; i > 1; i--) {
            size_t j = (size_t)tfm_rng_below(&b->rng, i);
            segment t = b->segs[i - 1];
            b->segs[i - 1] = b->segs[j];
            b->segs[j] = t;
        }
    for (size_t s = 0; s < n_segs; s++) {
        b->starts[b->n_batches++] = *written;
        for (size_t i = b->segs[s].begin; i < b->segs[s].end; i++)
            b->order[(*written)++] = b->recs[i].pair;
    }
}

/* Makes the plan of state.epoch from state.rng. */
static void plan_epoch(tfm_batcher *b)
{
    b->rng = b->state.rng;
    for (size_t i = 0; i < b->n; i++) b->perm[i] = i;
    if (b->p.shuffle)
        for (size_t i = b->n; i > 1; i--) {
            size_t j = (size_t)tfm_rng_below(&b->rng, i);
            size_t t = b->perm[i - 1];
            b->perm[i - 1] = b->perm[j];
            b->perm[j] = t;
        }
    /* Without shuffling, one window holds everything: the least padding. */
    int64_t window_tokens = b->p.shuffle ? b->p.batch_tokens * b->p.window : INT64_MAX;
    if (b->p.shuffle && window_tokens / b->p.window != b->p.batch_tokens) window_tokens = INT64_MAX;
    b->n_batches = 0;
    size_t written = 0;
    for (size_t lo = 0; lo < b->n;) {
        size_t hi = lo;
        int64_t tokens = 0;
        while (hi < b->n && tokens < window_tokens) {
            tokens += make_rec(b->corpus, b->perm[hi]).key;
            hi++;
        }
        plan_window(b, lo, hi, &written);
        lo = hi;
    }
    b->starts[b->n_batches] = written;
}

tfm_status tfm_batcher_next(tfm_batcher *b, tfm_batch *out, tfm_error *err)
{
    if (b->state.position >= b->n_batches) {
        b->state.epoch++;
        b->state.position = 0;
        b->state.rng = b->rng;
        plan_epoch(b);
    }
    size_t lo = b->starts[b->state.position], hi = b->starts[b->state.position + 1];
    memset(out, 0, sizeof *out);
    for (size_t i = lo; i < hi; i++) {
        size_t k = i - lo;
        b->pairs[k] = b->order[i];
        tfm_corpus_pair(b->corpus, b->order[i], &b->src[k], &b->src_lens[k], &b->tgt[k],
                        &b->tgt_lens[k]);
        out->src_tokens += b->src_lens[k];
        out->tgt_tokens += b->tgt_lens[k] + 1;
    }
    out->pairs = (tfm_pair_batch){.B = (int)(hi - lo), .src = b->src, .src_lens = b->src_lens,
                                  .tgt = b->tgt, .tgt_lens = b->tgt_lens};
    out->numbers = b->pairs;
    out->epoch = b->state.epoch;
    b->state.position++;
    (void)err;
    return TFM_OK;
}

void tfm_batcher_get_state(const tfm_batcher *b, tfm_batcher_state *s)
{
    *s = b->state;
}

tfm_status tfm_batcher_set_state(tfm_batcher *b, const tfm_batcher_state *s, tfm_error *err)
{
    if (s->epoch < 0 || s->position < 0)
        return tfm_error_set(err, TFM_ERR_RANGE, "a batcher state of epoch %lld, position %lld",
                             (long long)s->epoch, (long long)s->position);
    tfm_batcher_state old = b->state;
    b->state = *s;
    plan_epoch(b);
    if (s->position > b->n_batches) {
        int64_t have = b->n_batches;
        b->state = old;
        plan_epoch(b);
        return tfm_error_set(err, TFM_ERR_RANGE,
                             "the saved position is batch %lld of epoch %lld, but the epoch has "
                             "%lld batches: the data or the batch settings differ",
                             (long long)s->position, (long long)s->epoch + 1, (long long)have);
    }
    return TFM_OK;
}

int64_t tfm_batcher_epoch_batches(const tfm_batcher *b)
{
    return b->n_batches;
}
