/* core/blas.h - sections that hold the BLAS at one thread (lib/core,
 * internal to the library; the programs' call is tfm_blas_threads in
 * tfm/core.h).
 *
 * Between begin and end the BLAS runs every product on the calling thread,
 * so threads of the library's own (tfm_parallel_for) may each call it
 * without threads inside threads.  Sections may overlap, from any threads:
 * the count is switched to 1 when the first begins and back when the last
 * ends (see blas.c).  While one is open, every BLAS call in the process runs
 * on one thread, other workspaces' large products included. */
#ifndef TFM_CORE_BLAS_H
#define TFM_CORE_BLAS_H

void tfm_blas_one_thread_begin(void);
void tfm_blas_one_thread_end(void);

/* The threads a product of the library's own may run on (nn_sgemm): the
 * programs' count (tfm_blas_threads, 1 until it is called), 1 while a
 * one-thread section is open. */
int tfm_blas_thread_count(void);

#endif
