/* threads.c - a parallel for-loop that blocks instead of spinning, and a
 * helper thread that sleeps between the calls it helps with.
 *
 * The loop's threads live only for one call: creating two threads costs
 * tens of microseconds, far less than any work worth splitting, and no idle
 * thread can then burn a shared CPU (see DESIGN.md, "Threads").  The helper
 * serves many calls of a few microseconds' handover each (the products of
 * a decoding step), so it lives on, asleep on a condition variable between
 * them. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
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

/* ---- a helper thread ------------------------------------------------------------------------ */

struct tfm_helper {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake, done;
    void (*fn)(void *ctx, int part); /* the call posted, under lock */
    void *ctx;
    unsigned long posted, finished;  /* calls posted and finished, under lock */
    bool stop;
    atomic_int workers_in;           /* tfm_helper_enter less tfm_helper_leave */
    atomic_bool held;                /* a call holds the helper */
};

static void *helper_main(void *arg)
{
    tfm_helper *h = arg;
    unsigned long seen = 0;
    pthread_mutex_lock(&h->lock);
    for (;;) {
        while (h->posted == seen && !h->stop) pthread_cond_wait(&h->wake, &h->lock);
        if (h->stop) break;
        seen = h->posted;
        void (*fn)(void *, int) = h->fn;
        void *ctx = h->ctx;
        pthread_mutex_unlock(&h->lock);
        fn(ctx, 1);
        pthread_mutex_lock(&h->lock);
        h->finished = seen;
        pthread_cond_signal(&h->done);
    }
    pthread_mutex_unlock(&h->lock);
    return NULL;
}

tfm_status tfm_helper_create(tfm_helper **out, tfm_error *err)
{
    *out = NULL;
    tfm_helper *h = calloc(1, sizeof *h);
    if (!h) return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory for a helper thread");
    pthread_mutex_init(&h->lock, NULL);
    pthread_cond_init(&h->wake, NULL);
    pthread_cond_init(&h->done, NULL);
    atomic_init(&h->workers_in, 0);
    atomic_init(&h->held, false);
    if (pthread_create(&h->thread, NULL, helper_main, h) != 0) {
        pthread_cond_destroy(&h->wake);
        pthread_cond_destroy(&h->done);
        pthread_mutex_destroy(&h->lock);
        free(h);
        return tfm_error_set(err, TFM_ERR_NOMEM, "cannot start a helper thread");
    }
    *out = h;
    return TFM_OK;
}

void tfm_helper_free(tfm_helper *h)
{
    if (!h) return;
    pthread_mutex_lock(&h->lock);
    h->stop = true;
    pthread_cond_signal(&h->wake);
    pthread_mutex_unlock(&h->lock);
    pthread_join(h->thread, NULL);
    pthread_cond_destroy(&h->wake);
    pthread_cond_destroy(&h->done);
    pthread_mutex_destroy(&h->lock);
    free(h);
}

void tfm_helper_enter(tfm_helper *h)
{
    if (h) atomic_fetch_add(&h->workers_in, 1);
}

void tfm_helper_leave(tfm_helper *h)
{
    if (h) atomic_fetch_sub(&h->workers_in, 1);
}

bool tfm_helper_run(tfm_helper *h, void (*fn)(void *ctx, int part), void *ctx)
{
    if (!h || atomic_load(&h->workers_in) > 1) return false; /* its CPU is a worker's */
    bool free_now = false;
    if (!atomic_compare_exchange_strong(&h->held, &free_now, true)) return false;
    pthread_mutex_lock(&h->lock);
    h->fn = fn;
    h->ctx = ctx;
    const unsigned long call = ++h->posted;
    pthread_cond_signal(&h->wake);
    pthread_mutex_unlock(&h->lock);
    fn(ctx, 0);
    pthread_mutex_lock(&h->lock);
    while (h->finished != call) pthread_cond_wait(&h->done, &h->lock);
    pthread_mutex_unlock(&h->lock);
    atomic_store(&h->held, false);
    return true;
}

unsigned long tfm_helper_calls(tfm_helper *h)
{
    if (!h) return 0;
    pthread_mutex_lock(&h->lock);
    const unsigned long calls = h->finished;
    pthread_mutex_unlock(&h->lock);
    return calls;
}
