/* test_core.c - status messages, buffers, id lines, hash maps, the random
 * number generator and the parallel for-loop. */
#include <pthread.h>
#include <stdatomic.h>

#include "check.h"
#include "tfm.h"

static void test_error_messages(void)
{
    tfm_error err;
    CHECK(tfm_error_set(&err, TFM_ERR_FORMAT, "bad %s %d", "thing", 7) == TFM_ERR_FORMAT);
    CHECK(err.status == TFM_ERR_FORMAT);
    CHECK(strcmp(err.msg, "bad thing 7") == 0);
    tfm_error_prefix(&err, "record %d", 3);
    CHECK(strcmp(err.msg, "record 3: bad thing 7") == 0);
    CHECK(tfm_error_set(NULL, TFM_ERR_IO, "x") == TFM_ERR_IO); /* NULL err is allowed */
    CHECK(strcmp(tfm_strerror(TFM_ERR_NOMEM), "out of memory") == 0);
    CHECK(strcmp(tfm_strerror((tfm_status)999), "unknown status") == 0);
    /* A long message is cut, never overflowed. */
    char longtext[2000];
    memset(longtext, 'x', sizeof longtext - 1);
    longtext[sizeof longtext - 1] = 0;
    tfm_error_set(&err, TFM_ERR_FORMAT, "%s", longtext);
    tfm_error_prefix(&err, "record %d", 12);
    CHECK(strncmp(err.msg, "record 12: xxx", 14) == 0);
    CHECK(strlen(err.msg) == sizeof err.msg - 1);
}

static void test_buf(void)
{
    tfm_buf b;
    tfm_buf_init(&b);
    for (int i = 0; i < 1000; i++) CHECK(tfm_buf_printf(&b, "%d,", i) == TFM_OK);
    CHECK(strncmp(b.data, "0,1,2,", 6) == 0);
    CHECK(b.len == strlen(b.data));
    tfm_buf_clear(&b);
    CHECK(b.len == 0 && b.data[0] == 0);
    CHECK(tfm_buf_append(&b, "a\0b", 3) == TFM_OK && b.len == 3 && b.data[2] == 'b');
    tfm_buf_free(&b);
    tfm_buf_free(&b); /* twice is fine */
}

static void test_ids_parse(void)
{
    tfm_ids ids;
    tfm_ids_init(&ids);
    tfm_error err;
    const char *line = "12 0\t7   2147483647";
    CHECK(tfm_ids_parse(line, strlen(line), 0, &ids, &err) == TFM_OK);
    CHECK(ids.len == 4 && ids.data[0] == 12 && ids.data[1] == 0 && ids.data[3] == 2147483647);
    CHECK(tfm_ids_parse("", 0, 10, &ids, &err) == TFM_OK && ids.len == 0);
    CHECK(tfm_ids_parse("   ", 3, 10, &ids, &err) == TFM_OK && ids.len == 0);
    CHECK(tfm_ids_parse("1 2 x3", 6, 0, &ids, &err) == TFM_ERR_FORMAT);
    CHECK_MSG(strstr(err.msg, "column 5") && strstr(err.msg, "'x3'"), "%s", err.msg);
    CHECK(tfm_ids_parse("1 -2", 4, 0, &ids, &err) == TFM_ERR_FORMAT);
    CHECK(tfm_ids_parse("1 2a", 4, 0, &ids, &err) == TFM_ERR_FORMAT);
    CHECK(tfm_ids_parse("2147483648", 10, 0, &ids, &err) == TFM_ERR_RANGE);
    CHECK(tfm_ids_parse("99999999999999999999999", 23, 0, &ids, &err) == TFM_ERR_RANGE);
    CHECK(tfm_ids_parse("3 10", 4, 10, &ids, &err) == TFM_ERR_RANGE);
    CHECK_MSG(strstr(err.msg, "id 10 is outside the vocabulary (0..9)"), "%s", err.msg);
    /* A NUL byte inside the line is a bad token, not the end of the line. */
    CHECK(tfm_ids_parse("1 \0 2", 5, 0, &ids, &err) == TFM_ERR_FORMAT);
    /* tfm_id_line_count takes the same tokens, and a CR at the end */
    CHECK(tfm_id_line_count(line, strlen(line)) == 4);
    CHECK(tfm_id_line_count("", 0) == 0 && tfm_id_line_count("   ", 3) == 0);
    CHECK(tfm_id_line_count("4 5\r", 4) == 2);
    CHECK(tfm_id_line_count("1 2 x3", 6) == -1 && tfm_id_line_count("1 2a", 4) == -1);
    CHECK(tfm_id_line_count("2147483648", 10) == -1 && tfm_id_line_count("1 \0 2", 5) == -1);

    tfm_buf out;
    tfm_buf_init(&out);
    int32_t v[] = {0, 5, 123456, 2147483647};
    CHECK(tfm_ids_format(v, 4, &out) == TFM_OK);
    CHECK(strcmp(out.data, "0 5 123456 2147483647") == 0);
    CHECK(tfm_ids_parse(out.data, out.len, 0, &ids, &err) == TFM_OK);
    CHECK(ids.len == 4 && memcmp(ids.data, v, sizeof v) == 0);
    tfm_buf_free(&out);
    tfm_ids_free(&ids);
}

static void test_map64(void)
{
    tfm_map64 *m = tfm_map64_create(4);
    enum { N = 20000 };
    for (uint64_t k = 0; k < N; k++) {
        bool inserted;
        int64_t *v = tfm_map64_upsert(m, k * 7919u, (int64_t)k, &inserted);
        CHECK(v && inserted);
    }
    CHECK(tfm_map64_count(m) == N);
    for (uint64_t k = 0; k < N; k++) {
        int64_t *v = tfm_map64_find(m, k * 7919u);
        CHECK(v && *v == (int64_t)k);
    }
    CHECK(tfm_map64_find(m, 1) == NULL);
    /* Remove every other key: the rest must still be found (backward shift). */
    for (uint64_t k = 0; k < N; k += 2) CHECK(tfm_map64_remove(m, k * 7919u));
    CHECK(!tfm_map64_remove(m, 0));
    CHECK(tfm_map64_count(m) == N / 2);
    int missing = 0;
    for (uint64_t k = 1; k < N; k += 2) missing += tfm_map64_find(m, k * 7919u) == NULL;
    CHECK(missing == 0);
    size_t it = 0, seen = 0;
    uint64_t key;
    int64_t value;
    while (tfm_map64_next(m, &it, &key, &value)) {
        seen++;
        CHECK(key == (uint64_t)value * 7919u && value % 2 == 1);
    }
    CHECK(seen == N / 2);
    /* UINT64_MAX and 0 are ordinary keys. */
    CHECK(tfm_map64_upsert(m, UINT64_MAX, 5, NULL) && *tfm_map64_find(m, UINT64_MAX) == 5);
    tfm_map64_free(m);
    tfm_map64_free(NULL);
}

static void test_strmap(void)
{
    tfm_strmap *m = tfm_strmap_create(0);
    char key[32];
    for (int i = 0; i < 5000; i++) {
        int n = snprintf(key, sizeof key, "w%d", i);
        int64_t *v = tfm_strmap_upsert(m, key, (size_t)n, 0, NULL);
        CHECK(v != NULL);
        *v += i;
    }
    CHECK(tfm_strmap_count(m) == 5000);
    CHECK(*tfm_strmap_find(m, "w4321", 5) == 4321);
    CHECK(tfm_strmap_find(m, "w4321x", 6) == NULL);
    /* Keys with NUL bytes are distinct from their prefixes. */
    CHECK(tfm_strmap_upsert(m, "a\0b", 3, 1, NULL) && tfm_strmap_upsert(m, "a", 1, 2, NULL));
    CHECK(*tfm_strmap_find(m, "a\0b", 3) == 1 && *tfm_strmap_find(m, "a", 1) == 2);
    CHECK(tfm_strmap_find(m, "", 0) == NULL);
    size_t it = 0, n = 0;
    while (tfm_strmap_next(m, &it, NULL, NULL, NULL)) n++;
    CHECK(n == 5002);
    tfm_strmap_free(m);
}

/* A borrowing map keeps the caller's pointers: it finds what a copying map
 * finds, through growth, and its keys are the caller's bytes. */
static void test_strmap_borrowing(void)
{
    enum { N = 3000 };
    static char texts[N][8];
    tfm_strmap *m = tfm_strmap_create_borrowing(0);
    for (int i = 0; i < N; i++) {
        int n = snprintf(texts[i], sizeof texts[i], "p%d", i);
        bool inserted = false;
        CHECK(tfm_strmap_upsert(m, texts[i], (size_t)n, i, &inserted) && inserted);
    }
    bool inserted = true;
    CHECK(*tfm_strmap_upsert(m, "p17", 3, 99, &inserted) == 17 && !inserted);
    CHECK(tfm_strmap_count(m) == N && *tfm_strmap_find(m, "p2999", 5) == 2999);
    CHECK(tfm_strmap_find(m, "p3000", 5) == NULL);
    size_t it = 0, n = 0;
    const char *key;
    size_t len;
    int64_t value;
    while (tfm_strmap_next(m, &it, &key, &len, &value)) {
        CHECK(key == texts[value] && len == strlen(texts[value]));
        n++;
    }
    CHECK(n == N);
    tfm_strmap_free(m); /* frees none of texts: ASan would say so */
}

static void test_rng(void)
{
    tfm_rng a, b;
    tfm_rng_seed(&a, 42);
    tfm_rng_seed(&b, 42);
    for (int i = 0; i < 100; i++) CHECK(tfm_rng_u64(&a) == tfm_rng_u64(&b));
    tfm_rng_seed(&b, 43);
    CHECK(tfm_rng_u64(&a) != tfm_rng_u64(&b));
    /* Uniformity, roughly: the mean of 100k floats is near 1/2, all in [0,1). */
    double sum = 0;
    int out_of_range = 0, counts[10] = {0};
    for (int i = 0; i < 100000; i++) {
        float x = tfm_rng_float(&a);
        out_of_range += x < 0 || x >= 1;
        sum += x;
        counts[tfm_rng_below(&a, 10)]++;
    }
    CHECK(out_of_range == 0);
    CHECK_NEAR(sum / 100000, 0.5, 0.01);
    for (int k = 0; k < 10; k++) CHECK_MSG(counts[k] > 9500 && counts[k] < 10500, "%d", counts[k]);
    /* The state is plain data: copying it continues the same sequence. */
    tfm_rng c = a;
    CHECK(tfm_rng_u64(&c) == tfm_rng_u64(&a));
}

typedef struct {
    atomic_int runs[1000];
} parallel_ctx;

static void count_run(void *ctx, size_t i)
{
    parallel_ctx *p = ctx;
    atomic_fetch_add(&p->runs[i], 1);
}

static void test_parallel_for(void)
{
    static parallel_ctx p;
    for (int threads = 1; threads <= 4; threads++) {
        for (int i = 0; i < 1000; i++) atomic_init(&p.runs[i], 0);
        CHECK(tfm_parallel_for(threads, 1000, count_run, &p) == TFM_OK);
        int wrong = 0;
        for (int i = 0; i < 1000; i++) wrong += atomic_load(&p.runs[i]) != 1;
        CHECK_MSG(wrong == 0, "threads=%d: %d items not run exactly once", threads, wrong);
    }
    CHECK(tfm_parallel_for(2, 0, count_run, &p) == TFM_OK);
    CHECK(tfm_cpu_count() >= 1);
}

typedef struct {
    atomic_int parts[2];
    pthread_t thread[2];
} helper_ctx;

static void record_part(void *ctx, int part)
{
    helper_ctx *h = ctx;
    atomic_fetch_add(&h->parts[part], 1);
    h->thread[part] = pthread_self();
}

/* The helper runs part 1 on its own thread while the caller runs part 0,
 * call after call; it refuses (and runs nothing) while two workers are in
 * or when there is no helper. */
static void test_helper(void)
{
    tfm_helper *h;
    tfm_error err;
    CHECK(tfm_helper_create(&h, &err) == TFM_OK);
    helper_ctx c;
    atomic_init(&c.parts[0], 0);
    atomic_init(&c.parts[1], 0);
    tfm_helper_enter(h); /* one worker in: the helper is free */
    int ran = 0;
    for (int i = 0; i < 200; i++) ran += tfm_helper_run(h, record_part, &c);
    CHECK_MSG(ran == 200, "%d of 200 calls ran", ran);
    CHECK(tfm_helper_calls(h) == 200);
    CHECK(atomic_load(&c.parts[0]) == 200 && atomic_load(&c.parts[1]) == 200);
    CHECK(pthread_equal(c.thread[0], pthread_self()));
    CHECK(!pthread_equal(c.thread[1], pthread_self()));
    tfm_helper_enter(h); /* two in: the other's CPU is taken */
    CHECK(!tfm_helper_run(h, record_part, &c));
    CHECK(atomic_load(&c.parts[0]) == 200 && atomic_load(&c.parts[1]) == 200);
    tfm_helper_leave(h);
    CHECK(tfm_helper_run(h, record_part, &c));
    tfm_helper_leave(h);
    CHECK(!tfm_helper_run(NULL, record_part, &c));
    tfm_helper_free(h);
    tfm_helper_free(NULL);
}

int main(void)
{
    RUN(test_error_messages);
    RUN(test_buf);
    RUN(test_ids_parse);
    RUN(test_map64);
    RUN(test_strmap);
    RUN(test_strmap_borrowing);
    RUN(test_rng);
    RUN(test_parallel_for);
    RUN(test_helper);
    CHECK_DONE();
}
