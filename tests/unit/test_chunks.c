/* test_chunks.c - unit tests of lib/core/chunks.c: fixed-size chunks run on
 * threads cover the work exactly once with the right bounds, whatever the
 * thread count; per-thread slots are never used by two items at once; and
 * the serial cases run in order in the calling thread. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "core/chunks.h"
#include "tfm/core.h"

static void test_chunk_count(void)
{
    CHECK(tfm_chunk_count(0, 4) == 0);
    CHECK(tfm_chunk_count(1, 4) == 1);
    CHECK(tfm_chunk_count(4, 4) == 1);
    CHECK(tfm_chunk_count(5, 4) == 2);
    CHECK(tfm_chunk_count(8, 4) == 2);
    CHECK(tfm_chunk_count(9, 1) == 9);
    CHECK(tfm_chunk_count(SIZE_MAX, SIZE_MAX) == 1);
}

/* Each element counts the chunks that covered it; each chunk records its
 * bounds and checks them against its number. */
typedef struct cover {
    size_t n, chunk;
    atomic_int *hits;     /* [n] */
    atomic_int calls;
    atomic_int bad;       /* chunks whose bounds do not match their number */
    pthread_t caller;
    atomic_int elsewhere; /* chunks run outside the calling thread */
    atomic_int last;      /* serial runs: the last chunk number seen, to check order */
    atomic_int disorder;
} cover;

static void cover_chunk(void *ctx, size_t c, size_t lo, size_t hi)
{
    cover *k = ctx;
    size_t want_hi = (c + 1) * k->chunk < k->n ? (c + 1) * k->chunk : k->n;
    if (lo != c * k->chunk || hi != want_hi || lo >= hi) atomic_fetch_add(&k->bad, 1);
    for (size_t i = lo; i < hi && i < k->n; i++) atomic_fetch_add(&k->hits[i], 1);
    atomic_fetch_add(&k->calls, 1);
    if (!pthread_equal(pthread_self(), k->caller)) atomic_fetch_add(&k->elsewhere, 1);
    if ((int)c != atomic_load(&k->last) + 1) atomic_fetch_add(&k->disorder, 1);
    atomic_store(&k->last, (int)c);
}

static void run_cover(int n_threads, size_t n, size_t chunk)
{
    cover k = {.n = n, .chunk = chunk};
    k.hits = calloc(n ? n : 1, sizeof *k.hits);
    k.caller = pthread_self();
    atomic_init(&k.last, -1);
    tfm_parallel_chunks(n_threads, n, chunk, cover_chunk, &k);
    int missed = 0;
    for (size_t i = 0; i < n; i++) missed += atomic_load(&k.hits[i]) != 1;
    CHECK_MSG(missed == 0, "threads %d, n %zu, chunk %zu: %d elements not covered once",
              n_threads, n, chunk, missed);
    CHECK_MSG((size_t)atomic_load(&k.calls) == tfm_chunk_count(n, chunk), "%d calls",
              atomic_load(&k.calls));
    CHECK(atomic_load(&k.bad) == 0);
    /* one chunk or one thread: in the calling thread, in order */
    if (n_threads < 2 || tfm_chunk_count(n, chunk) < 2) {
        CHECK(atomic_load(&k.elsewhere) == 0);
        CHECK(atomic_load(&k.disorder) == 0);
    }
    free(k.hits);
}

static void test_parallel_chunks(void)
{
    const int threads[] = {1, 2, 3, 8};
    const size_t sizes[] = {0, 1, 6, 7, 8, 9, 1000, 4099};
    for (size_t t = 0; t < sizeof threads / sizeof *threads; t++)
        for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
            run_cover(threads[t], sizes[s], 8);
            run_cover(threads[t], sizes[s], 1);
        }
    run_cover(0, 100, 7); /* 0 or fewer threads: the calling thread alone */
    run_cover(-3, 100, 7);
}

/* A sum made of per-chunk parts added in chunk order is the same for any
 * thread count: the reason the chunks are fixed. */
typedef struct sum_job {
    const float *x;
    double *parts;
} sum_job;

static void sum_chunk(void *ctx, size_t c, size_t lo, size_t hi)
{
    const sum_job *j = ctx;
    float s = 0; /* float on purpose: the grouping shows in the rounding */
    for (size_t i = lo; i < hi; i++) s += j->x[i];
    j->parts[c] = s;
}

static void test_chunk_sums_repeat(void)
{
    enum { N = 100003, CHUNK = 1000 };
    float *x = malloc(N * sizeof *x);
    double *parts = malloc(tfm_chunk_count(N, CHUNK) * sizeof *parts);
    tfm_rng rng;
    tfm_rng_seed(&rng, 5);
    for (int i = 0; i < N; i++) x[i] = tfm_rng_float(&rng) * 1000.0f;
    double want = 0;
    for (int t = 1; t <= 4; t++) {
        sum_job job = {x, parts};
        tfm_parallel_chunks(t, N, CHUNK, sum_chunk, &job);
        double total = 0;
        for (size_t c = 0; c < tfm_chunk_count(N, CHUNK); c++) total += parts[c];
        if (t == 1) want = total;
        CHECK_MSG(total == want, "%d threads: %.17g, one thread %.17g", t, total, want);
    }
    free(x);
    free(parts);
}

/* Slots: each item once; a slot never runs two items at once. */
typedef struct slots {
    size_t n;
    int n_threads;
    atomic_int *hits;   /* [n] */
    atomic_int busy[8]; /* per slot: items running now */
    atomic_int overlap, bad_slot, max_slot;
    pthread_t caller;
    atomic_int elsewhere;
} slots;

static void slot_item(void *ctx, int slot, size_t i)
{
    slots *s = ctx;
    if (slot < 0 || slot >= 8 || slot >= (s->n_threads < 1 ? 1 : s->n_threads)) {
        atomic_fetch_add(&s->bad_slot, 1);
        return;
    }
    if (atomic_fetch_add(&s->busy[slot], 1) != 0) atomic_fetch_add(&s->overlap, 1);
    if (i < s->n) atomic_fetch_add(&s->hits[i], 1);
    /* a little work, so that items of different threads do overlap in time */
    volatile double x = 0;
    for (int k = 0; k < 2000; k++) x = x + k * 0.5;
    (void)x;
    if (slot > atomic_load(&s->max_slot)) atomic_store(&s->max_slot, slot);
    if (!pthread_equal(pthread_self(), s->caller)) atomic_fetch_add(&s->elsewhere, 1);
    atomic_fetch_sub(&s->busy[slot], 1);
}

static void run_slots(int n_threads, size_t n)
{
    slots s = {.n = n, .n_threads = n_threads};
    s.hits = calloc(n ? n : 1, sizeof *s.hits);
    s.caller = pthread_self();
    tfm_parallel_slots(n_threads, n, slot_item, &s);
    int missed = 0;
    for (size_t i = 0; i < n; i++) missed += atomic_load(&s.hits[i]) != 1;
    CHECK_MSG(missed == 0, "threads %d, n %zu: %d items not run once", n_threads, n, missed);
    CHECK(atomic_load(&s.bad_slot) == 0);
    CHECK(atomic_load(&s.overlap) == 0);
    if (n_threads < 2 || n < 2) {
        CHECK(atomic_load(&s.max_slot) == 0);
        CHECK(atomic_load(&s.elsewhere) == 0);
    }
    free(s.hits);
}

static void test_parallel_slots(void)
{
    const int threads[] = {0, 1, 2, 3, 8};
    const size_t sizes[] = {0, 1, 2, 5, 300};
    for (size_t t = 0; t < sizeof threads / sizeof *threads; t++)
        for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) run_slots(threads[t], sizes[s]);
}

int main(void)
{
    RUN(test_chunk_count);
    RUN(test_parallel_chunks);
    RUN(test_chunk_sums_repeat);
    RUN(test_parallel_slots);
    CHECK_DONE();
}
