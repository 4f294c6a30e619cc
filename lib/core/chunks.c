/* chunks.c - fixed-size chunks and per-thread slots over tfm_parallel_for.
 *
 * Both keep tfm_parallel_for's promise that nothing spins: threads are made
 * for the call and joined after it.  The chunks are a function of the sizes
 * alone, which is what makes threaded results independent of the thread
 * count (see chunks.h). */
#include <stdatomic.h>

#include "core/chunks.h"
#include "tfm/core.h"

size_t tfm_chunk_count(size_t n, size_t chunk)
{
    return n / chunk + (n % chunk != 0);
}

typedef struct chunk_job {
    void (*fn)(void *ctx, size_t c, size_t lo, size_t hi);
    void *ctx;
    size_t n, chunk;
} chunk_job;

static void run_chunk(void *arg, size_t c)
{
    const chunk_job *job = arg;
    size_t lo = c * job->chunk;
    size_t hi = job->n - lo < job->chunk ? job->n : lo + job->chunk;
    job->fn(job->ctx, c, lo, hi);
}

void tfm_parallel_chunks(int n_threads, size_t n, size_t chunk,
                         void (*fn)(void *ctx, size_t c, size_t lo, size_t hi), void *ctx)
{
    chunk_job job = {fn, ctx, n, chunk};
    size_t chunks = tfm_chunk_count(n, chunk);
    if (n_threads < 2 || chunks < 2) {
        for (size_t c = 0; c < chunks; c++) run_chunk(&job, c);
        return;
    }
    tfm_parallel_for(n_threads, chunks, run_chunk, &job);
}

typedef struct slot_job {
    void (*fn)(void *ctx, int slot, size_t i);
    void *ctx;
    size_t n;
    atomic_size_t next; /* the next item to hand out */
} slot_job;

/* tfm_parallel_for runs slot s exactly once, so the items this call takes
 * never overlap those of another call with the same slot. */
static void run_slot(void *arg, size_t slot)
{
    slot_job *job = arg;
    for (;;) {
        size_t i = atomic_fetch_add(&job->next, 1);
        if (i >= job->n) break;
        job->fn(job->ctx, (int)slot, i);
    }
}

void tfm_parallel_slots(int n_threads, size_t n, void (*fn)(void *ctx, int slot, size_t i),
                        void *ctx)
{
    if (n_threads < 2 || n < 2) {
        for (size_t i = 0; i < n; i++) fn(ctx, 0, i);
        return;
    }
    if ((size_t)n_threads > n) n_threads = (int)n;
    slot_job job = {.fn = fn, .ctx = ctx, .n = n};
    atomic_init(&job.next, 0);
    tfm_parallel_for(n_threads, (size_t)n_threads, run_slot, &job);
}
