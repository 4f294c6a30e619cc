/* core/chunks.h - work split into fixed-size chunks, or handed to thread
 * slots, run over tfm_parallel_for (lib/core, internal to the library).
 *
 * The split depends only on the size of the work and the chunk size, never
 * on the number of threads, so a result made of per-chunk parts (a sum over
 * chunks taken in chunk order, a random stream per chunk) is the same, bit
 * for bit, on any number of threads. */
#ifndef TFM_CORE_CHUNKS_H
#define TFM_CORE_CHUNKS_H

#include <stddef.h>

/* The number of chunks of chunk elements (the last may be shorter) that
 * cover n elements: ceil(n / chunk).  chunk >= 1. */
size_t tfm_chunk_count(size_t n, size_t chunk);

/* Runs fn(ctx, c, lo, hi) for every chunk c of [0, n), which covers
 * [lo, hi) = [c * chunk, min(n, (c + 1) * chunk)), on up to n_threads
 * threads, and waits for all of them.  With one chunk, or n_threads < 2,
 * everything runs in the calling thread in chunk order (no thread is
 * started), so the caller chooses chunk to be worth a thread start (tens of
 * microseconds).  fn must write only to what chunk c owns. */
void tfm_parallel_chunks(int n_threads, size_t n, size_t chunk,
                         void (*fn)(void *ctx, size_t c, size_t lo, size_t hi), void *ctx);

/* Runs fn(ctx, slot, i) for every i in [0, n), items handed out one at a
 * time in increasing order, on up to n_threads threads.  slot, in
 * [0, n_threads), names the thread running the item: no two calls with the
 * same slot ever run at once, so fn may use per-slot scratch.  Which slot
 * runs an item is unspecified; fn's results must not depend on it.  With
 * n < 2 or n_threads < 2 everything runs in the calling thread as slot 0. */
void tfm_parallel_slots(int n_threads, size_t n, void (*fn)(void *ctx, int slot, size_t i),
                        void *ctx);

#endif
