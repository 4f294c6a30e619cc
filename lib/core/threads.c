/* threads.c - a parallel for-loop that blocks instead of spinning.
 *
 * Threads live only for one call: creating two threads costs tens of
 * microseconds, far less than any work worth splitting, and no idle thread
 * can then burn a shared CPU (see DESIGN.md, "Threads"). */
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include "tfm/core.h"

typedef struct {
    void (*fn)(void *ctx, size_t i);
    void *ctx;
    size_t n;
    atomic_size_t next;
} parallel_job;

static void *parallel_worker(void *arg)
{
    parallel_job *job = arg;
    for (;;) {
        size_t i = atomic_fetch_add(&job->next, 1);
        if (i >= job->n) break;
        job->fn(job->ctx, i);
    }
    return NULL;
}

tfm_status tfm_parallel_for(int n_threads, size_t n, void (*fn)(void *ctx, size_t i),
                            void *ctx)
{
    parallel_job job = {.fn = fn, .ctx = ctx, .n = n};
    atomic_init(&job.next, 0);
    if (n_threads > 64) n_threads = 64;
    if ((size_t)n_threads > n) n_threads = (int)n;
    pthread_t tids[64];
    int started = 0;
    for (int t = 1; t < n_threads; t++) {
        if (pthread_create(&tids[started], NULL, parallel_worker, &job) != 0) break;
        started++;
    }
    parallel_worker(&job); /* the calling thread works too */
    for (int t = 0; t < started; t++) pthread_join(tids[t], NULL);
    return TFM_OK;
}

int tfm_cpu_count(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}
