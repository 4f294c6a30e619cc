/* tfm/core.h - status codes, error details, growable buffers, hash maps and
 * seeded random numbers: the pieces every other part of libtfm stands on.
 *
 * Conventions used throughout the library:
 *   - A function that can fail returns a tfm_status (TFM_OK == 0) and, when
 *     given a non-NULL tfm_error, writes a sentence saying what went wrong.
 *     The library never prints and never exits; programs do that.
 *   - Objects come in _create/_free pairs; _free(NULL) does nothing.
 *   - Every random choice comes from a tfm_rng seeded by the caller.
 */
#ifndef TFM_CORE_H
#define TFM_CORE_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- status codes and error details ------------------------------------ */

typedef enum tfm_status {
    TFM_OK = 0,
    TFM_EOF,          /* clean end of a stream: not an error */
    TFM_ERR_NOMEM,    /* out of memory */
    TFM_ERR_IO,       /* a read or write failed (errno-level failure) */
    TFM_ERR_FORMAT,   /* a file or record is malformed, truncated or corrupt */
    TFM_ERR_UTF8,     /* invalid UTF-8 where strict checking was asked for */
    TFM_ERR_RANGE,    /* a value is outside what is allowed */
    TFM_ERR_ARG,      /* a caller passed an impossible argument */
    TFM_ERR_UNSUPPORTED, /* valid input we do not handle (e.g. a dtype) */
    TFM_STATUS_COUNT
} tfm_status;

/* The detail of a failure: which status, and a sentence that says what was
 * expected and what was found.  Messages carry no program name and no file
 * name; the caller adds those ("tokenize: corpus.txt:12: <msg>"). */
typedef struct tfm_error {
    tfm_status status;
    char msg[512];
} tfm_error;

/* A short fixed description of a status ("out of memory", ...). */
const char *tfm_strerror(tfm_status status);

/* Records status and a printf-style message in err (if err is not NULL) and
 * returns status, so a library function can say
 *     return tfm_error_set(err, TFM_ERR_FORMAT, "bad magic %02x", b);     */
tfm_status tfm_error_set(tfm_error *err, tfm_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Appends to the message already in err (cut to fit); err may be NULL. */
void tfm_error_append(tfm_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Puts "context: " in front of the message already in err. */
void tfm_error_prefix(tfm_error *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* ---- growable byte buffer ------------------------------------------------ */

/* A growable byte string.  data is always NUL-terminated when len > 0 or
 * after any append, so it can be printed; len excludes the NUL. */
typedef struct tfm_buf {
    char *data;
    size_t len;
    size_t cap;
} tfm_buf;

void tfm_buf_init(tfm_buf *b);
void tfm_buf_free(tfm_buf *b);               /* frees data; b may be reused after init */
tfm_status tfm_buf_reserve(tfm_buf *b, size_t extra);   /* room for len+extra+1 */
/* b as an array of at least n elements of size bytes each (contents kept,
 * len set to their bytes when it grows); NULL when memory runs out or the
 * size overflows, never NULL on success, even for 0 elements.  Objects keep
 * their scratch in tfm_bufs grown to the largest shape seen, so steady-state
 * calls allocate nothing. */
void *tfm_buf_array(tfm_buf *b, size_t n, size_t size);

/* Asks the kernel to back the 2 MiB-aligned part of a large block (of at
 * least 4 MiB) with huge pages where it allows them (Linux's madvise
 * MADV_HUGEPAGE; nothing elsewhere).  Tensors of tens of megabytes then cost
 * a page fault per 2 MiB instead of per 4 KiB when first written, and fewer
 * TLB misses when read.  tfm_buf_reserve does it for every block it grows. */
void tfm_advise_huge_pages(void *p, size_t bytes);
/* The opposite, for a large buffer of which a program writes a few scattered
 * pieces (a model read in place from its file, whose biases and norms alone
 * are copied): each piece then costs its 4 KB page, not a 2 MB one. */
void tfm_advise_small_pages(void *p, size_t bytes);
tfm_status tfm_buf_append(tfm_buf *b, const void *data, size_t len);
tfm_status tfm_buf_putc(tfm_buf *b, char c);
tfm_status tfm_buf_printf(tfm_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static inline void tfm_buf_clear(tfm_buf *b) { b->len = 0; if (b->data) b->data[0] = 0; }

/* A growable array of int32 token ids. */
typedef struct tfm_ids {
    int32_t *data;
    size_t len;
    size_t cap;
} tfm_ids;

void tfm_ids_init(tfm_ids *v);
void tfm_ids_free(tfm_ids *v);
tfm_status tfm_ids_push(tfm_ids *v, int32_t id);
static inline void tfm_ids_clear(tfm_ids *v) { v->len = 0; }

/* Parses an id line ("12 7 431"): decimal non-negative integers separated
 * by spaces or tabs.  Fails with TFM_ERR_FORMAT naming the column of the
 * first bad token, or TFM_ERR_RANGE when an id is >= limit (limit <= 0: no
 * limit other than INT32_MAX).  An empty or blank line gives no ids. */
tfm_status tfm_ids_parse(const char *line, size_t len, int32_t limit, tfm_ids *out,
                         tfm_error *err);

/* How many ids line holds when it is an id line (decimal numbers separated
 * by spaces or tabs; a CR at the end is not data), or -1 when it is not:
 * what tells id files from text (a non-empty line of text that is all
 * numbers looks the same; decide on many lines). */
int tfm_id_line_count(const char *line, size_t len);

/* Appends the ids of v as a decimal id line (no newline) to out. */
tfm_status tfm_ids_format(const int32_t *ids, size_t n, tfm_buf *out);

/* ---- UTF-8 ------------------------------------------------------------------ */

/* Decodes one code point from s[0..len): returns its length in bytes (1..4)
 * and sets *cp, or returns 0 for an invalid or truncated sequence. */
int tfm_utf8_decode(const unsigned char *s, size_t len, int32_t *cp);
/* Encodes cp into out (at least 4 bytes); returns the length. */
int tfm_utf8_encode(int32_t cp, char *out);

/* Looks at the start of s[0..len) (len > 0): returns the length (1..4) of a
 * well-formed UTF-8 sequence and sets *cp, or returns minus the length of
 * the maximal invalid subpart to replace by one U+FFFD (Unicode 15, section
 * 3.9, "U+FFFD Substitution of Maximal Subparts"). */
int tfm_utf8_scan(const unsigned char *s, size_t len, int32_t *cp);

/* Appends s[0..len) to out with each maximal invalid UTF-8 subpart replaced
 * by U+FFFD.  Returns the number replaced in *n_bad, and the offset of the
 * first one in *first_bad (when not NULL and n_bad > 0). */
tfm_status tfm_utf8_repair_append(tfm_buf *out, const char *s, size_t len, size_t *n_bad,
                                  size_t *first_bad);

/* Whitespace as Python's str.isspace() sees it: Unicode category Zs and the
 * bidirectional classes WS, B and S (so U+001C..U+001F and U+0085 too).
 * sacreBLEU is Python: its strip() and split() use this. */
static inline bool tfm_py_isspace(int32_t cp)
{
    if (cp <= 0x20) return cp == 0x20 || (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x1F);
    if (cp < 0x85) return false;
    switch (cp) {
    case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F:
    case 0x3000:
        return true;
    default:
        return cp >= 0x2000 && cp <= 0x200A;
    }
}

/* The value of the hexadecimal digit c (0-9, a-f, A-F), or -1 (not
 * isxdigit, whose answer depends on the locale). */
static inline int tfm_hex_digit(int c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* The length of s[0..len) without trailing whitespace as Python's
 * str.rstrip() sees it (tfm_py_isspace); an invalid or truncated sequence
 * is not whitespace.  sacreBLEU's command line strips every line so. */
size_t tfm_utf8_rstrip(const char *s, size_t len);

/* ---- hash maps ----------------------------------------------------------- */

/* Open-addressing map from a 64-bit key to a 64-bit value.  Keys are any
 * uint64_t; the map stores them with a separate occupancy flag, so no key
 * value is reserved. */
typedef struct tfm_map64 tfm_map64;

tfm_map64 *tfm_map64_create(size_t expected);
void tfm_map64_free(tfm_map64 *m);
size_t tfm_map64_count(const tfm_map64 *m);
/* Returns a pointer to the value of key, or NULL when absent.  The pointer is
 * valid until the next insertion. */
int64_t *tfm_map64_find(const tfm_map64 *m, uint64_t key);
/* Returns a pointer to the value of key, inserting it with value init when
 * absent (NULL when memory runs out).  *inserted tells which (may be NULL). */
int64_t *tfm_map64_upsert(tfm_map64 *m, uint64_t key, int64_t init, bool *inserted);
bool tfm_map64_remove(tfm_map64 *m, uint64_t key);
/* Iteration: for (size_t it = 0; tfm_map64_next(m, &it, &k, &v); ) ...  */
bool tfm_map64_next(const tfm_map64 *m, size_t *iter, uint64_t *key, int64_t *value);

/* Map from a byte string to a 64-bit value.  The map keeps its own copy of
 * every key; one made by tfm_strmap_create_borrowing keeps the caller's
 * pointers instead (never NULL, even for an empty key), and the caller
 * keeps the keys' bytes alive and unchanged while the map lives (no malloc
 * per key). */
typedef struct tfm_strmap tfm_strmap;

tfm_strmap *tfm_strmap_create(size_t expected);
tfm_strmap *tfm_strmap_create_borrowing(size_t expected);
void tfm_strmap_free(tfm_strmap *m);
size_t tfm_strmap_count(const tfm_strmap *m);
int64_t *tfm_strmap_find(const tfm_strmap *m, const char *key, size_t len);
int64_t *tfm_strmap_upsert(tfm_strmap *m, const char *key, size_t len, int64_t init,
                           bool *inserted);
/* Iteration as for tfm_map64; *key points into the map (not NUL-terminated
 * necessarily; use *len). */
bool tfm_strmap_next(const tfm_strmap *m, size_t *iter, const char **key, size_t *len,
                     int64_t *value);

/* 64-bit FNV-1a-style hash of bytes, good enough for tables (not for security). */
uint64_t tfm_hash_bytes(const void *data, size_t len);

/* ---- random numbers --------------------------------------------------------- */

/* xoshiro256** seeded through splitmix64: fast, small state, and the state can
 * be saved in a checkpoint and restored exactly. */
typedef struct tfm_rng {
    uint64_t s[4];
} tfm_rng;

void tfm_rng_seed(tfm_rng *r, uint64_t seed);
uint64_t tfm_rng_u64(tfm_rng *r);
/* Uniform in [0, 1) with 24 bits (float) or 53 bits (double) of precision. */
float tfm_rng_float(tfm_rng *r);
double tfm_rng_double(tfm_rng *r);
/* Uniform integer in [0, n); n > 0.  Unbiased (rejection sampling). */
uint64_t tfm_rng_below(tfm_rng *r, uint64_t n);

/* ---- threads ---------------------------------------------------------------- */

/* Runs fn(ctx, i) for i in [0, n) on up to n_threads threads (the calling
 * thread included) and waits for all of them.  Threads are created for the
 * call and joined after it, so nothing spins while idle.  Work item i always
 * runs exactly once; which thread runs it is unspecified, so fn must write
 * only to the slot of item i for the result to be deterministic. */
tfm_status tfm_parallel_for(int n_threads, size_t n, void (*fn)(void *ctx, size_t i),
                            void *ctx);

/* A helper: one more thread, that lends its CPU to one worker's loops
 * while the program's other workers are idle (decoding one sentence on a
 * machine of two CPUs).  Workers bracket their work with tfm_helper_enter
 * and tfm_helper_leave.  tfm_helper_run(h, fn, ctx) runs fn(ctx, 0) on the
 * calling thread and fn(ctx, 1) on the helper at once, and returns true
 * when both are done, if at most one worker is in and no other call holds
 * the helper; else it runs nothing and returns false, and the caller does
 * all the work.  The helper sleeps between calls (never spins).  A NULL
 * helper is never free. */
typedef struct tfm_helper tfm_helper;
tfm_status tfm_helper_create(tfm_helper **out, tfm_error *err);
void tfm_helper_free(tfm_helper *h);
void tfm_helper_enter(tfm_helper *h);
void tfm_helper_leave(tfm_helper *h);
bool tfm_helper_run(tfm_helper *h, void (*fn)(void *ctx, int part), void *ctx);
/* The calls the helper has run (0 for NULL). */
unsigned long tfm_helper_calls(tfm_helper *h);

/* Seconds of the monotonic clock (clock.c): differences are durations. */
double tfm_clock_seconds(void);

/* The number of CPUs this process may run on (at least 1). */
int tfm_cpu_count(void);

/* Sets the number of threads of the BLAS (OpenBLAS) and of the library's own
 * matrix products (training's) for the whole process, at least 1 (a count
 * of the process, not of a thread or an object: call it once, before the
 * work starts).  The library holds them at one thread only while its own
 * threads call them (a training workspace's attention), and then gives them
 * back this count; a call made meanwhile takes effect then. */
void tfm_blas_threads(int n);

/* Whether training's matrix products run on OpenBLAS kernels older than
 * the CPU can (a CPU newer than the OpenBLAS build falls back to its
 * oldest: Debian 12's runs "Prescott", SSE3, on Xeons with AVX-512 FP16).
 * They run on the library's own kernels wherever the CPU has AVX2, unless
 * TFM_ISA=none asks for none; so only then.  If so, writes what to do into
 * msg (size bytes, NUL-terminated). */
bool tfm_blas_kernels_behind(char *msg, size_t size);

/* Whether TFM_ISA in the environment holds a value the kernel choice does
 * not know (it knows avx512bw, avx2 and none, and ignores anything else:
 * the best kernels of the CPU).  If so, writes so into msg (size bytes,
 * NUL-terminated). */
bool tfm_isa_request_unknown(char *msg, size_t size);

/* ---- batches of a stream ---------------------------------------------------- */

/* The loop every filter runs over its input (lib/core/batch_loop.c): read
 * the items that are ready into a bounded batch, work on it in slices over
 * threads, write the results in input order, and report a bad item only
 * after every item before it is written.
 *
 * A batch holds at most max_items items (slots 0 .. max_items-1, which the
 * caller allocates) and stops growing once the costs of its items reach
 * max_cost (0: no limit; the item that crosses it is kept).  After the first
 * item of a batch, ready() is asked before each read: a batch ends early
 * when the next item would wait, and flush() is called after writing when
 * the input has to be waited for.  Slices hold about equal item counts, or
 * equal costs with balance_cost; a batch gets up to `threads` slices, fewer
 * when it has fewer than min_items_per_slice items or min_cost_per_slice of
 * cost per slice.  The split depends only on the batch and the thread
 * count. */
typedef struct tfm_batch_loop {
    void *ctx;
    size_t max_items;
    size_t max_cost;
    int threads;
    size_t min_items_per_slice;
    size_t min_cost_per_slice;
    bool balance_cost;
    /* Chunks (chunk_items > 0; the three fields above are then unused): the
     * batch is cut into runs of consecutive items, at most chunk_items items
     * and chunk_cost of cost each (0: no cost limit; an item that costs more
     * is a chunk of its own), as even in item count as a multiple of
     * `threads` chunks allows; each worker takes the next chunk whenever it
     * is free.  For work whose time per item varies more than its cost
     * says (decoding: the output's length): a worker whose items ended early
     * takes more instead of waiting for the others.  The chunks depend only
     * on the batch and the thread count; which worker takes which chunk
     * depends on timing. */
    size_t chunk_items;
    size_t chunk_cost;
    /* Reads the next item into slot `slot`: TFM_OK with *cost set, TFM_EOF
     * at the end of the input, or an error (err says why). */
    tfm_status (*read)(void *ctx, size_t slot, size_t *cost, tfm_error *err);
    /* True when read would not wait (NULL: always). */
    bool (*ready)(void *ctx);
    /* Works on slots [lo, hi) of the batch as worker `worker` (0 .. threads-1;
     * concurrent calls get different workers). */
    tfm_status (*work)(void *ctx, int worker, size_t lo, size_t hi, tfm_error *err);
    /* Writes the result of slot `slot`, in order (NULL: nothing to write). */
    tfm_status (*write)(void *ctx, size_t slot, tfm_error *err);
    /* Makes what was written visible (NULL: nothing to do). */
    void (*flush)(void *ctx);
} tfm_batch_loop;

typedef enum tfm_batch_stage { TFM_BATCH_READ, TFM_BATCH_WORK, TFM_BATCH_WRITE } tfm_batch_stage;

/* Where a batch loop stopped: the stage, the item (0-based over the whole
 * input) and its slot in the batch (for WORK: the first item of the slice
 * that failed), and the callback's error. */
typedef struct tfm_batch_failure {
    tfm_batch_stage stage;
    size_t item;
    size_t slot;
    tfm_error err;
} tfm_batch_failure;

/* Runs the loop to the end of the input: TFM_OK, or the status of the first
 * failure, described in *failure (which may be NULL). */
tfm_status tfm_batch_loop_run(const tfm_batch_loop *loop, tfm_batch_failure *failure);

#endif
