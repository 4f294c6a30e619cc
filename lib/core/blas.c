/* blas.c - the BLAS's thread count: the one place libtfm sets it, for the
 * programs (tfm_blas_threads) and for the library's own one-thread sections
 * (core/blas.h); and the same count for the library's own matrix products
 * (nn_sgemm: tfm_blas_thread_count), which follow the same rules.
 *
 * OpenBLAS's count is process-wide state.  A section that holds it at one
 * thread (the training workspace's attention, which runs sentences on
 * threads of its own: DESIGN.md, one level of threads at a time) used to
 * read the count, set 1 and restore what it read; two such sections at once
 * (two workspaces in one process) could then restore 1 for good, or restore
 * the full count while the other still ran its threads.  Here the sections
 * are counted under a lock: the first one in saves the count, the last one
 * out restores it, and a tfm_blas_threads call made meanwhile is what gets
 * restored.  A single section makes exactly the OpenBLAS calls it made
 * before (measured: removing the section instead, so sentences' products
 * ran with BLAS threads inside our threads, made training ~5% slower).
 *
 * OpenBLAS's calls are declared here rather than through cblas.h, whose
 * declarations differ between the BLAS builds Debian ships. */
#include <pthread.h>
#include <stdatomic.h>

#include "core/blas.h"
#include "tfm/core.h"

int openblas_get_num_threads(void);
void openblas_set_num_threads(int num_threads);

static pthread_mutex_t blas_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int one_thread_depth; /* sections open now (changed under the lock) */
static int saved_threads;    /* the count to restore when the last one closes */
static atomic_int threads_wanted = 1; /* the programs' count, for the project's own products */

void tfm_blas_threads(int n)
{
    if (n < 1) n = 1;
    pthread_mutex_lock(&blas_lock);
    threads_wanted = n;
    if (one_thread_depth > 0)
        saved_threads = n;
    else
        openblas_set_num_threads(n);
    pthread_mutex_unlock(&blas_lock);
}

void tfm_blas_one_thread_begin(void)
{
    pthread_mutex_lock(&blas_lock);
    if (one_thread_depth++ == 0) {
        saved_threads = openblas_get_num_threads();
        if (saved_threads != 1) openblas_set_num_threads(1);
    }
    pthread_mutex_unlock(&blas_lock);
}

void tfm_blas_one_thread_end(void)
{
    pthread_mutex_lock(&blas_lock);
    if (one_thread_depth > 0 && --one_thread_depth == 0 && saved_threads != 1)
        openblas_set_num_threads(saved_threads);
    pthread_mutex_unlock(&blas_lock);
}

/* Read without the lock: every small product of attention asks, from two
 * threads at once, and the lock was contended. */
int tfm_blas_thread_count(void)
{
    return atomic_load(&one_thread_depth) > 0 ? 1 : atomic_load(&threads_wanted);
}
