/* batch_loop.c - the loop every filter runs over its input: gather the items
 * that are ready into a bounded batch, work on the batch in slices over
 * threads, write the results in input order, and report a bad item only
 * after every item before it is written.
 *
 * These are the toolkit's promises to pipelines (README, "Pipelines"):
 *   - bounded memory: a batch never holds more than max_items items, and
 *     stops growing once their costs reach max_cost;
 *   - one answer per item, in order, whatever the thread count;
 *   - interactive answers: after the first item of a batch, only items that
 *     are ready now are taken, so a line typed at a terminal is answered at
 *     once, and the output is flushed whenever the input has to be waited
 *     for;
 *   - a clean prefix: when item k cannot be read, items before it are worked
 *     on and written first, then the failure is returned.
 *
 * The split of a batch into slices (one per worker) or chunks (taken by the
 * workers one after another: tfm_batch_loop's chunk_items) depends only on
 * the batch (its item count and costs) and the thread count, never on
 * timing. */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "tfm/core.h"

typedef struct loop_state {
    const tfm_batch_loop *loop;
    size_t n;              /* items in the batch */
    size_t n_slices;
    size_t *slice_start;   /* [n_slices + 1]: slice s is items [start[s], start[s+1]) */
    tfm_status *status;    /* [threads] each worker's */
    tfm_error *errors;     /* [threads] */
    size_t *failed_slice;  /* [threads] the slice a worker failed on */
    atomic_size_t next_slice; /* chunks: the next one a worker takes */
    atomic_bool stop;      /* chunks: a worker failed, take no more */
} loop_state;

/* Slices: worker w works on slice w. */
static void work_slice(void *ctx, size_t w)
{
    loop_state *st = ctx;
    const tfm_batch_loop *loop = st->loop;
    st->errors[w].msg[0] = 0;
    st->failed_slice[w] = w;
    st->status[w] = loop->work(loop->ctx, (int)w, st->slice_start[w], st->slice_start[w + 1],
                               &st->errors[w]);
}

/* Chunks: worker w takes the next chunk until none is left (or one failed). */
static void work_chunks(void *ctx, size_t w)
{
    loop_state *st = ctx;
    const tfm_batch_loop *loop = st->loop;
    st->errors[w].msg[0] = 0;
    st->status[w] = TFM_OK;
    while (!atomic_load(&st->stop)) {
        const size_t s = atomic_fetch_add(&st->next_slice, 1);
        if (s >= st->n_slices) break;
        tfm_status r = loop->work(loop->ctx, (int)w, st->slice_start[s], st->slice_start[s + 1],
                                  &st->errors[w]);
        if (r != TFM_OK) {
            st->status[w] = r;
            st->failed_slice[w] = s;
            atomic_store(&st->stop, true);
            break;
        }
    }
}

/* How many slices a batch of n items costing `cost` in all gets. */
static size_t count_slices(const tfm_batch_loop *loop, size_t n, size_t cost)
{
    size_t k = loop->threads > 0 ? (size_t)loop->threads : 1;
    if (loop->min_items_per_slice > 0 && n / loop->min_items_per_slice < k)
        k = n / loop->min_items_per_slice;
    if (loop->min_cost_per_slice > 0 && cost / loop->min_cost_per_slice < k)
        k = cost / loop->min_cost_per_slice;
    if (k > n) k = n;
    return k < 1 ? 1 : k;
}

/* Slices of about equal item counts, or (balance_cost) of about equal costs:
 * slice w starts at the first item whose costs before it reach w/k of the
 * total. */
static void plan_slices(const tfm_batch_loop *loop, size_t n, const size_t *cost_before,
                        size_t k, size_t *start)
{
    start[0] = 0;
    size_t i = 0;
    for (size_t w = 1; w < k; w++) {
        if (loop->balance_cost) {
            size_t target = (size_t)((unsigned long long)cost_before[n] * w / k);
            while (i < n && cost_before[i] < target) i++;
            start[w] = i;
        } else {
            start[w] = n * w / k;
        }
    }
    start[k] = n;
}

/* Chunks of the n items (see tfm_batch_loop): as many as a multiple of the
 * threads needs to keep chunk_items, of equal item counts, each cut again
 * before an item that would take it past chunk_cost.  Returns their count. */
static size_t plan_chunks(const tfm_batch_loop *loop, size_t n, const size_t *cost_before,
                          size_t *start)
{
    const size_t threads = loop->threads > 0 ? (size_t)loop->threads : 1;
    const size_t per_round = threads * loop->chunk_items;
    const size_t chunks = threads * ((n + per_round - 1) / per_round);
    const size_t target = (n + chunks - 1) / chunks; /* items in a chunk, at most */
    size_t k = 0;
    start[0] = 0;
    for (size_t i = 1; i <= n; i++) {
        const size_t lo = start[k];
        const bool full = i - lo == target;
        const bool last = i == n;
        const bool next_too_costly = !last && loop->chunk_cost > 0 &&
                                     cost_before[i + 1] - cost_before[lo] > loop->chunk_cost;
        if (full || last || next_too_costly) start[++k] = i;
    }
    return k;
}

static tfm_status fail_at(tfm_batch_failure *f, tfm_batch_stage stage, size_t item, size_t slot,
                          const tfm_error *err, tfm_status status)
{
    if (f) {
        f->stage = stage;
        f->item = item;
        f->slot = slot;
        f->err = *err;
        if (f->err.msg[0] == 0) tfm_error_set(&f->err, status, "%s", tfm_strerror(status));
        f->err.status = status;
    }
    return status;
}

tfm_status tfm_batch_loop_run(const tfm_batch_loop *loop, tfm_batch_failure *failure)
{
    tfm_error err = {0}, read_err = {0};
    if (!loop || !loop->read || !loop->work || loop->max_items == 0)
        return tfm_error_set(failure ? &failure->err : NULL, TFM_ERR_ARG,
                             "a batch loop needs read and work callbacks and max_items > 0");
    size_t threads = loop->threads > 0 ? (size_t)loop->threads : 1;
    size_t *cost_before = malloc((loop->max_items + 1) * sizeof *cost_before);
    const size_t max_slices = loop->chunk_items > 0 ? loop->max_items : threads;
    size_t *slice_start = malloc((max_slices + 1) * sizeof *slice_start);
    tfm_status *status = malloc(threads * sizeof *status);
    tfm_error *errors = malloc(threads * sizeof *errors);
    size_t *failed_slice = malloc(threads * sizeof *failed_slice);
    tfm_status result = TFM_OK;
    if (!cost_before || !slice_start || !status || !errors || !failed_slice) {
        result = tfm_error_set(&err, TFM_ERR_NOMEM, "out of memory for a batch of %zu items",
                               loop->max_items);
        result = fail_at(failure, TFM_BATCH_READ, 0, 0, &err, result);
        goto done;
    }
    loop_state st = {.loop = loop, .slice_start = slice_start, .status = status, .errors = errors,
                     .failed_slice = failed_slice};
    size_t items_before = 0; /* items of earlier batches */
    bool ended = false;
    while (!ended) {
        /* Gather. */
        size_t n = 0;
        cost_before[0] = 0;
        tfm_status read_status = TFM_OK;
        while (n < loop->max_items && (loop->max_cost == 0 || cost_before[n] < loop->max_cost)) {
            if (n > 0 && loop->ready && !loop->ready(loop->ctx)) break;
            size_t cost = 0;
            read_err.msg[0] = 0;
            read_status = loop->read(loop->ctx, n, &cost, &read_err);
            if (read_status != TFM_OK) break;
            cost_before[n + 1] = cost_before[n] + cost;
            n++;
        }
        if (read_status == TFM_EOF) ended = true;
        /* Work and write what was read, even when the next item was bad. */
        if (n > 0) {
            st.n = n;
            size_t workers; /* each runs work_slice or work_chunks once */
            if (loop->chunk_items > 0) {
                st.n_slices = plan_chunks(loop, n, cost_before, slice_start);
                workers = st.n_slices < threads ? st.n_slices : threads;
                atomic_init(&st.next_slice, 0);
                atomic_init(&st.stop, false);
                tfm_parallel_for((int)workers, workers, work_chunks, &st);
            } else {
                st.n_slices = workers = count_slices(loop, n, cost_before[n]);
                plan_slices(loop, n, cost_before, workers, slice_start);
                tfm_parallel_for((int)workers, workers, work_slice, &st);
            }
            /* the failure of the first slice in order */
            size_t failed = SIZE_MAX, failed_worker = 0;
            for (size_t w = 0; w < workers; w++)
                if (status[w] != TFM_OK && failed_slice[w] < failed) {
                    failed = failed_slice[w];
                    failed_worker = w;
                }
            if (failed != SIZE_MAX) {
                size_t lo = slice_start[failed];
                result = fail_at(failure, TFM_BATCH_WORK, items_before + lo, lo,
                                 &errors[failed_worker], status[failed_worker]);
                goto done;
            }
            if (loop->write)
                for (size_t i = 0; i < n; i++) {
                    err.msg[0] = 0;
                    tfm_status s = loop->write(loop->ctx, i, &err);
                    if (s != TFM_OK) {
                        result = fail_at(failure, TFM_BATCH_WRITE, items_before + i, i, &err, s);
                        goto done;
                    }
                }
            items_before += n;
        }
        if (read_status != TFM_OK && read_status != TFM_EOF) {
            result = fail_at(failure, TFM_BATCH_READ, items_before, n, &read_err, read_status);
            goto done;
        }
        /* The next read may wait: make what was written visible first. */
        if (!ended && loop->flush && loop->ready && !loop->ready(loop->ctx)) loop->flush(loop->ctx);
    }
done:
    free(cost_before);
    free(slice_start);
    free(status);
    free(errors);
    free(failed_slice);
    return result;
}
