/* test_batch_loop.c - unit tests of lib/core/batch_loop.c, the loop every
 * filter runs: batches stay within their item and cost limits; a batch ends
 * where the input would wait, and the output is flushed there; every item is
 * worked on once and written once, in order, the same at any thread count;
 * a bad item is reported only after the items before it are written; a
 * failed slice or write stops the loop at the right item; and slices and
 * chunks follow the documented split. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tfm/core.h"

#define MAX_ITEMS 200
#define MAX_SLICES 64

/* A scripted input of n items: item i has cost cost[i]; the input "pauses"
 * after item i when pause_after[i] (read would wait); item bad_item cannot be
 * read. */
typedef struct source {
    size_t n;
    size_t cost[MAX_ITEMS];
    bool pause_after[MAX_ITEMS];
    size_t bad_item;         /* SIZE_MAX: none */
    size_t fail_work_item;   /* the slice holding this item fails; SIZE_MAX: none */
    size_t fail_write_item;  /* SIZE_MAX: none */
    /* state */
    size_t next;             /* items read so far */
    int slot_item[MAX_ITEMS];/* the item in each slot of the current batch */
    int result[MAX_ITEMS];   /* per slot, set by work */
    atomic_int worked[MAX_ITEMS]; /* per item: how many times worked on */
    int written[MAX_ITEMS];  /* items in the order written */
    size_t n_written;
    size_t batch_sizes[MAX_ITEMS], n_batches;
    size_t flushed_at[MAX_ITEMS], n_flushes; /* n_written at each flush */
    size_t slices[MAX_ITEMS][2], n_slices;   /* the slices of the last batch */
    pthread_mutex_t lock;
    atomic_int busy_workers[MAX_SLICES];     /* a worker index used twice at once */
    atomic_int worker_clash;
} source;

static void source_init(source *s, size_t n)
{
    memset(s, 0, sizeof *s);
    s->n = n;
    for (size_t i = 0; i < n; i++) s->cost[i] = 1;
    s->bad_item = s->fail_work_item = s->fail_write_item = SIZE_MAX;
    pthread_mutex_init(&s->lock, NULL);
}

static tfm_status src_read(void *ctx, size_t slot, size_t *cost, tfm_error *err)
{
    source *s = ctx;
    if (slot == 0) s->n_batches++;
    if (s->next == s->n) return TFM_EOF;
    if (s->next == s->bad_item) return tfm_error_set(err, TFM_ERR_FORMAT, "item %zu is bad", s->next);
    s->slot_item[slot] = (int)s->next;
    *cost = s->cost[s->next];
    s->next++;
    s->batch_sizes[s->n_batches - 1] = slot + 1;
    return TFM_OK;
}

static bool src_ready(void *ctx)
{
    source *s = ctx;
    return s->next == 0 || !s->pause_after[s->next - 1];
}

static tfm_status src_work(void *ctx, int worker, size_t lo, size_t hi, tfm_error *err)
{
    source *s = ctx;
    if (atomic_fetch_add(&s->busy_workers[worker], 1) != 0) atomic_fetch_add(&s->worker_clash, 1);
    pthread_mutex_lock(&s->lock);
    s->slices[s->n_slices][0] = lo;
    s->slices[s->n_slices][1] = hi;
    s->n_slices++;
    pthread_mutex_unlock(&s->lock);
    tfm_status st = TFM_OK;
    for (size_t i = lo; i < hi; i++) {
        int item = s->slot_item[i];
        atomic_fetch_add(&s->worked[item], 1);
        s->result[i] = item * 3 + 1;
        if ((size_t)item == s->fail_work_item)
            st = tfm_error_set(err, TFM_ERR_RANGE, "item %d failed", item);
    }
    atomic_fetch_sub(&s->busy_workers[worker], 1);
    return st;
}

static tfm_status src_write(void *ctx, size_t slot, tfm_error *err)
{
    source *s = ctx;
    int item = s->slot_item[slot];
    if ((size_t)item == s->fail_write_item) return tfm_error_set(err, TFM_ERR_IO, "disk full");
    if (s->result[slot] != item * 3 + 1) return tfm_error_set(err, TFM_ERR_ARG, "not worked on");
    s->written[s->n_written++] = item;
    return TFM_OK;
}

static void src_flush(void *ctx)
{
    source *s = ctx;
    s->flushed_at[s->n_flushes++] = s->n_written;
}

static tfm_batch_loop loop_for(source *s, size_t max_items, size_t max_cost, int threads)
{
    s->n_slices = 0;
    return (tfm_batch_loop){.ctx = s, .max_items = max_items, .max_cost = max_cost,
                            .threads = threads, .read = src_read, .ready = src_ready,
                            .work = src_work, .write = src_write, .flush = src_flush};
}

static bool all_written_in_order(const source *s, size_t n)
{
    if (s->n_written != n) return false;
    for (size_t i = 0; i < n; i++)
        if (s->written[i] != (int)i || s->worked[i] != 1) return false;
    return true;
}

static void test_every_item_once_in_order(void)
{
    for (int threads = 1; threads <= 8; threads *= 2) {
        source s;
        source_init(&s, 150);
        tfm_batch_loop loop = loop_for(&s, 16, 0, threads);
        tfm_batch_failure f;
        CHECK(tfm_batch_loop_run(&loop, &f) == TFM_OK);
        CHECK(all_written_in_order(&s, 150));
        CHECK(s.worker_clash == 0);
        for (size_t b = 0; b + 1 < s.n_batches; b++) CHECK(s.batch_sizes[b] == 16);
    }
}

static void test_empty_input(void)
{
    source s;
    source_init(&s, 0);
    tfm_batch_loop loop = loop_for(&s, 8, 0, 2);
    CHECK(tfm_batch_loop_run(&loop, NULL) == TFM_OK);
    CHECK(s.n_written == 0);
    CHECK(s.n_slices == 0);
}

/* The batch stops once its cost reaches max_cost; the item that crosses it
 * is kept, and a single item above the limit still makes a batch. */
static void test_cost_limit(void)
{
    source s;
    source_init(&s, 6);
    size_t costs[6] = {3, 3, 3, 10, 1, 1};
    memcpy(s.cost, costs, sizeof costs);
    tfm_batch_loop loop = loop_for(&s, 100, 5, 1);
    CHECK(tfm_batch_loop_run(&loop, NULL) == TFM_OK);
    CHECK(all_written_in_order(&s, 6));
    /* {3,3} reaches 6 >= 5; {3,10}; {1,1} then the end. */
    CHECK(s.n_batches >= 3);
    CHECK(s.batch_sizes[0] == 2);
    CHECK(s.batch_sizes[1] == 2);
    CHECK(s.batch_sizes[2] == 2);
}

/* Where the input would wait, the batch ends and the output is flushed, so
 * what has come is answered at once. */
static void test_batches_end_where_input_waits(void)
{
    source s;
    source_init(&s, 6);
    s.pause_after[0] = s.pause_after[3] = true; /* bursts {0}, {1,2,3}, {4,5} */
    tfm_batch_loop loop = loop_for(&s, 100, 0, 2);
    CHECK(tfm_batch_loop_run(&loop, NULL) == TFM_OK);
    CHECK(all_written_in_order(&s, 6));
    CHECK(s.batch_sizes[0] == 1);
    CHECK(s.batch_sizes[1] == 3);
    CHECK(s.batch_sizes[2] == 2);
    CHECK(s.n_flushes == 2);
    CHECK(s.flushed_at[0] == 1);
    CHECK(s.flushed_at[1] == 4);
}

/* A bad item: the items before it are worked on and written, then the loop
 * stops with the read's error and the item's number. */
static void test_bad_item_after_clean_prefix(void)
{
    for (int threads = 1; threads <= 4; threads *= 2) {
        source s;
        source_init(&s, 50);
        s.bad_item = 21;
        tfm_batch_loop loop = loop_for(&s, 8, 0, threads);
        tfm_batch_failure f;
        CHECK(tfm_batch_loop_run(&loop, &f) == TFM_ERR_FORMAT);
        CHECK(f.stage == TFM_BATCH_READ);
        CHECK(f.item == 21);
        CHECK(f.slot == 21 - 16);
        CHECK(strcmp(f.err.msg, "item 21 is bad") == 0);
        CHECK(all_written_in_order(&s, 21));
    }
}

static void test_failed_slice(void)
{
    source s;
    source_init(&s, 40);
    s.fail_work_item = 13;
    tfm_batch_loop loop = loop_for(&s, 10, 0, 2); /* batch 10..19 in slices 10-14, 15-19 */
    tfm_batch_failure f;
    CHECK(tfm_batch_loop_run(&loop, &f) == TFM_ERR_RANGE);
    CHECK(f.stage == TFM_BATCH_WORK);
    CHECK(f.item == 10);
    CHECK(f.slot == 0);
    CHECK(strcmp(f.err.msg, "item 13 failed") == 0);
    CHECK(all_written_in_order(&s, 10)); /* nothing of the failed batch */
}

static void test_failed_write(void)
{
    source s;
    source_init(&s, 40);
    s.fail_write_item = 17;
    tfm_batch_loop loop = loop_for(&s, 10, 0, 2);
    tfm_batch_failure f;
    CHECK(tfm_batch_loop_run(&loop, &f) == TFM_ERR_IO);
    CHECK(f.stage == TFM_BATCH_WRITE);
    CHECK(f.item == 17);
    CHECK(f.slot == 7);
    CHECK(s.n_written == 17);
}

/* The slices (or chunks) of s's last batch of n items as "lo-hi lo-hi ...",
 * sorted by lo. */
static void describe_slices(const source *s, size_t n, char *out, size_t cap)
{
    size_t used = 0;
    out[0] = 0;
    for (size_t lo = 0; lo < n;) {
        size_t k;
        for (k = 0; k < s->n_slices && s->slices[k][0] != lo; k++) {}
        if (k == s->n_slices) break;
        used += (size_t)snprintf(out + used, cap - used, "%s%zu-%zu", lo ? " " : "", lo,
                                 s->slices[k][1]);
        lo = s->slices[k][1];
    }
}

/* One batch of n items (costs, or 1 each) over threads, split as split's
 * split fields say (the slices' min_items_per_slice, min_cost_per_slice
 * and balance_cost, or the chunks' chunk_items and chunk_cost): every item
 * worked on once and written in order, no worker index used twice at once;
 * the slices or chunks into out as "lo-hi lo-hi ...". */
static void split_of(size_t n, const size_t *costs, int threads, tfm_batch_loop split, char *out,
                     size_t cap)
{
    source s;
    source_init(&s, n);
    if (costs) memcpy(s.cost, costs, n * sizeof *costs);
    tfm_batch_loop loop = loop_for(&s, 1000, 0, threads);
    loop.min_items_per_slice = split.min_items_per_slice;
    loop.min_cost_per_slice = split.min_cost_per_slice;
    loop.balance_cost = split.balance_cost;
    loop.chunk_items = split.chunk_items;
    loop.chunk_cost = split.chunk_cost;
    CHECK(tfm_batch_loop_run(&loop, NULL) == TFM_OK);
    CHECK(all_written_in_order(&s, n));
    CHECK(s.worker_clash == 0);
    describe_slices(&s, n, out, cap);
}

/* One batch of n items in slices; returns them as "lo-hi lo-hi ...". */
static void slices_of(size_t n, const size_t *costs, int threads, size_t min_items,
                      size_t min_cost, bool balance, char *out, size_t cap)
{
    const tfm_batch_loop split = {.min_items_per_slice = min_items,
                                  .min_cost_per_slice = min_cost, .balance_cost = balance};
    split_of(n, costs, threads, split, out, cap);
}

static void test_slices(void)
{
    char got[256];
    slices_of(10, NULL, 3, 0, 0, false, got, sizeof got);
    CHECK_MSG(strcmp(got, "0-3 3-6 6-10") == 0, "%s", got);
    slices_of(2, NULL, 4, 0, 0, false, got, sizeof got); /* never an empty slice */
    CHECK_MSG(strcmp(got, "0-1 1-2") == 0, "%s", got);
    slices_of(10, NULL, 4, 64, 0, false, got, sizeof got); /* too few items for two */
    CHECK_MSG(strcmp(got, "0-10") == 0, "%s", got);
    size_t costs[6] = {10, 1, 1, 1, 1, 10};
    slices_of(6, costs, 2, 0, 0, true, got, sizeof got); /* equal cost: 12 and 12 */
    CHECK_MSG(strcmp(got, "0-3 3-6") == 0, "%s", got);
    slices_of(6, costs, 2, 0, 100, true, got, sizeof got); /* 24 < 100 per slice: one */
    CHECK_MSG(strcmp(got, "0-6") == 0, "%s", got);
    slices_of(6, costs, 2, 0, 12, true, got, sizeof got); /* 24 / 12: two */
    CHECK_MSG(strcmp(got, "0-3 3-6") == 0, "%s", got);
}

/* One batch of n items in chunks (chunk_items, chunk_cost); returns them as
 * "lo-hi lo-hi ...". */
static void chunks_of(size_t n, const size_t *costs, int threads, size_t chunk_items,
                      size_t chunk_cost, char *out, size_t cap)
{
    const tfm_batch_loop split = {.chunk_items = chunk_items, .chunk_cost = chunk_cost};
    split_of(n, costs, threads, split, out, cap);
}

static void test_chunks(void)
{
    char got[256];
    chunks_of(10, NULL, 2, 1, 0, got, sizeof got); /* one item each */
    CHECK_MSG(strcmp(got, "0-1 1-2 2-3 3-4 4-5 5-6 6-7 7-8 8-9 9-10") == 0, "%s", got);
    chunks_of(100, NULL, 2, 64, 0, got, sizeof got); /* one round: even halves */
    CHECK_MSG(strcmp(got, "0-50 50-100") == 0, "%s", got);
    chunks_of(10, NULL, 2, 3, 0, got, sizeof got); /* two rounds of two: 4 chunks of 3 at most */
    CHECK_MSG(strcmp(got, "0-3 3-6 6-9 9-10") == 0, "%s", got);
    chunks_of(3, NULL, 4, 8, 0, got, sizeof got); /* fewer items than threads */
    CHECK_MSG(strcmp(got, "0-1 1-2 2-3") == 0, "%s", got);
    size_t costs[6] = {10, 1, 1, 1, 1, 10};
    chunks_of(6, costs, 1, 6, 12, got, sizeof got); /* 12 and 12: within the limit */
    CHECK_MSG(strcmp(got, "0-3 3-6") == 0, "%s", got);
    chunks_of(6, costs, 1, 6, 11, got, sizeof got); /* cut where the cost would pass 11 */
    CHECK_MSG(strcmp(got, "0-2 2-5 5-6") == 0, "%s", got);
    size_t big[3] = {50, 1, 1};
    chunks_of(3, big, 1, 3, 12, got, sizeof got); /* an item over the limit goes alone */
    CHECK_MSG(strcmp(got, "0-1 1-3") == 0, "%s", got);
    /* at any thread count: every item once, in order (chunks_of), in
     * chunks of 2 items at most that cover the batch */
    for (int threads = 1; threads <= 5; threads++) {
        chunks_of(37, NULL, threads, 2, 0, got, sizeof got);
        size_t lo, hi, end = 0;
        int used;
        for (const char *p = got; sscanf(p, "%zu-%zu%n", &lo, &hi, &used) == 2; p += used) {
            CHECK(lo == end && hi > lo && hi - lo <= 2);
            end = hi;
        }
        CHECK_MSG(end == 37, "threads %d: %s", threads, got);
    }
}

/* A failed chunk: the first failure in item order is reported, whichever
 * worker met it, and nothing of the batch is written. */
static void test_failed_chunk(void)
{
    for (int threads = 1; threads <= 3; threads++) {
        source s;
        source_init(&s, 40);
        s.fail_work_item = 13;
        tfm_batch_loop loop = loop_for(&s, 10, 0, threads); /* batch 10..19 */
        loop.chunk_items = 2;
        tfm_batch_failure f;
        CHECK(tfm_batch_loop_run(&loop, &f) == TFM_ERR_RANGE);
        CHECK(f.stage == TFM_BATCH_WORK);
        CHECK_MSG(f.item == 12, "threads %d: item %zu", threads, f.item); /* chunk 12-13 */
        CHECK(f.slot == 2);
        CHECK(strcmp(f.err.msg, "item 13 failed") == 0);
        CHECK(all_written_in_order(&s, 10));
    }
}

static void test_bad_arguments(void)
{
    tfm_batch_failure f;
    tfm_batch_loop loop = {.max_items = 4};
    CHECK(tfm_batch_loop_run(&loop, &f) == TFM_ERR_ARG);
    CHECK(tfm_batch_loop_run(NULL, NULL) == TFM_ERR_ARG);
}

int main(void)
{
    RUN(test_every_item_once_in_order);
    RUN(test_empty_input);
    RUN(test_cost_limit);
    RUN(test_batches_end_where_input_waits);
    RUN(test_bad_item_after_clean_prefix);
    RUN(test_failed_slice);
    RUN(test_failed_write);
    RUN(test_slices);
    RUN(test_chunks);
    RUN(test_failed_chunk);
    RUN(test_bad_arguments);
    CHECK_DONE();
}
