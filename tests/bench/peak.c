/* peak.c - the physical limits of the CPU this runs on, its fused
 * multiply-add peak and its memory bandwidth: the yardsticks the other
 * benchmarks' rates are fractions of (DESIGN.md, "Performance yardsticks";
 * the first section of tests/bench/run.sh).
 *
 * The FMA peak: each thread runs independent chains of vfmadd on vector
 * registers (acc = acc * a + b; 16 chains of 512 bits, or 12 of 256: more
 * than the FMA latency, 4 cycles, times 2 ports, and few enough to stay in
 * the register file) with nothing else in the loop but its counter, so the
 * rate is what the FMA units do at that width, 2 flops per lane and
 * instruction.  It is measured at 512 bits where the CPU has AVX-512F and at
 * 256 bits where it has AVX2 and FMA (__builtin_cpu_supports), with 1 thread
 * and with THREADS threads.  The widths differ by less than 2x on CPUs with
 * one 512-bit FMA unit per core and where AVX-512 lowers the clock.
 *
 * The memory bandwidth: a read stream (a vector sum over a buffer of --mb
 * MiB: 256, or twice the last-level cache where that is larger, as a cyclic
 * walk over twice a least-recently-used cache finds none of it there; at
 * most a quarter of the memory) and STREAM's triad (a[i] = b[i] + s c[i] on
 * thirds of the same buffer, counted as STREAM counts it, 3 x 4 bytes per
 * element: the write-allocate read of a is not counted), with 1 and THREADS
 * threads, each on its own slice, first touched by the thread that reads it.
 *
 * Each figure is the best of the passes that fit in --seconds (0.5; at least
 * 3): FMA passes of a tenth of that, memory passes over the whole buffer.
 * The best is the least disturbed by other work on a shared machine; but a
 * pass counts only if every thread had a CPU throughout (process CPU seconds
 * at least 0.9 x threads x wall seconds), as another process that holds one
 * of 2 CPUs makes the 2-thread figure the 1-thread one: it did so in half of
 * the runs while another engineer was building, with passes of 0.1 s and no
 * such check.  Passes go on for up to 4 x --seconds to find one.  Without
 * one, an FMA peak is the passes per CPU-second of each thread (its own CPU
 * clock), summed over the threads, times the flops of a pass: what the
 * threads do while they run, marked '~' (it would miss two threads that
 * share one core's FMA units if they never ran at once); a memory figure,
 * where threads that run by turns each have the whole bandwidth, stays that
 * of the best pass, marked '*': it is below the CPU's.  (Contention from
 * outside this system, as the other guests of a virtual machine's host,
 * does not show in CPU seconds: it shows as figures that vary from run to
 * run.)  On a virtual machine whose 2 CPUs are the two hyper-threads of one
 * core, the 2-thread FMA peak is the 1-thread one: this program measures
 * what the CPUs give, it does not assume it.
 *
 * Output: a table, then machine-readable lines (run.sh's summary format)
 *
 *   cpu name=MODEL_NAME family=F model=M cpus=N isa=avx512f,avx512_vnni,...
 *   fma_peak_gflops bits=512 threads=1 X      (512-bit lines only with AVX-512F)
 *   fma_peak_gflops bits=512 threads=T X
 *   fma_peak_gflops bits=256 threads=1 X
 *   fma_peak_gflops bits=256 threads=T X
 *   mem_bandwidth_gbs kind=read threads=1 X   (GB/s, 10^9 bytes per second)
 *   mem_bandwidth_gbs kind=read threads=T X
 *   mem_bandwidth_gbs kind=triad threads=1 X
 *   mem_bandwidth_gbs kind=triad threads=T X
 *
 *   peak_contended fma=N memory=M   the figures above without a pass that
 *                                   had every thread on a CPU throughout
 *
 * (the threads=T lines only when T > 1).
 *
 * Usage: peak [--threads T] [--seconds S] [--mb M]
 *   T: threads (default: THREADS in the environment, else the CPU count)
 *   S: seconds per figure (default 0.5)
 *   M: MiB of the memory buffer (default max(256, 2 x last-level cache))
 */
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { MAX_THREADS = 256 };

static double clock_of(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double now(void) { return clock_of(CLOCK_MONOTONIC); }

/* ---- the kernels ------------------------------------------------------------------------------ */

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define HAVE_X86 1
#define AVX2_TARGET __attribute__((target("avx2,fma")))
#define AVX512_TARGET __attribute__((target("avx2,fma,avx512f")))

/* The chains of one FMA loop: 16 accumulators of 512 bits (of the 32 zmm
 * registers), 12 of 256 bits (of the 16 ymm registers, beside a and b). */
enum { CHAINS_512 = 16, CHAINS_256 = 12 };

/* acc = acc * a + b converges to b / (1 - a) = 1: no overflow, no
 * subnormal numbers (which would be slow), and a result the compiler cannot
 * know, so it cannot drop the loop.  Each chain starts from its own value,
 * or the compiler would compute one and copy it (it did).  Written out, not
 * as a loop over an array, so that every accumulator is a register at -O2. */
#define FMA4(f, x, y, z, w) x = f(x, a, b), y = f(y, a, b), z = f(z, a, b), w = f(w, a, b)

AVX512_TARGET static float fma_loop_512(long iters)
{
    __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-6f);
#define C(k) _mm512_set1_ps(1.0f + (k) / 16.0f)
    __m512 c0 = C(0), c1 = C(1), c2 = C(2), c3 = C(3), c4 = C(4), c5 = C(5), c6 = C(6), c7 = C(7);
    __m512 c8 = C(8), c9 = C(9), c10 = C(10), c11 = C(11), c12 = C(12), c13 = C(13), c14 = C(14),
           c15 = C(15);
#undef C
    for (long i = 0; i < iters; i++) {
        FMA4(_mm512_fmadd_ps, c0, c1, c2, c3);
        FMA4(_mm512_fmadd_ps, c4, c5, c6, c7);
        FMA4(_mm512_fmadd_ps, c8, c9, c10, c11);
        FMA4(_mm512_fmadd_ps, c12, c13, c14, c15);
    }
    __m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(c0, c1), _mm512_add_ps(c2, c3)),
                             _mm512_add_ps(_mm512_add_ps(c4, c5), _mm512_add_ps(c6, c7)));
    s = _mm512_add_ps(s, _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(c8, c9), _mm512_add_ps(c10, c11)),
                                       _mm512_add_ps(_mm512_add_ps(c12, c13), _mm512_add_ps(c14, c15))));
    return _mm512_reduce_add_ps(s);
}

AVX2_TARGET static float fma_loop_256(long iters)
{
    __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-6f);
#define C(k) _mm256_set1_ps(1.0f + (k) / 16.0f)
    __m256 c0 = C(0), c1 = C(1), c2 = C(2), c3 = C(3), c4 = C(4), c5 = C(5), c6 = C(6), c7 = C(7);
    __m256 c8 = C(8), c9 = C(9), c10 = C(10), c11 = C(11);
#undef C
    for (long i = 0; i < iters; i++) {
        FMA4(_mm256_fmadd_ps, c0, c1, c2, c3);
        FMA4(_mm256_fmadd_ps, c4, c5, c6, c7);
        FMA4(_mm256_fmadd_ps, c8, c9, c10, c11);
    }
    __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(c0, c1), _mm256_add_ps(c2, c3)),
                             _mm256_add_ps(_mm256_add_ps(c4, c5), _mm256_add_ps(c6, c7)));
    s = _mm256_add_ps(s, _mm256_add_ps(_mm256_add_ps(c8, c9), _mm256_add_ps(c10, c11)));
    float lanes[8];
    _mm256_storeu_ps(lanes, s);
    return lanes[0] + lanes[1] + lanes[2] + lanes[3] + lanes[4] + lanes[5] + lanes[6] + lanes[7];
}

/* The sum of x [n], 8 vectors of 256 bits at a time (eight accumulators:
 * the adds' latency must not limit the loads). */
AVX2_TARGET static float read_avx2(const float *x, size_t n)
{
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0, s4 = s0, s5 = s0, s6 = s0, s7 = s0;
    size_t i = 0;
    for (; i + 64 <= n; i += 64) {
        s0 = _mm256_add_ps(s0, _mm256_loadu_ps(x + i));
        s1 = _mm256_add_ps(s1, _mm256_loadu_ps(x + i + 8));
        s2 = _mm256_add_ps(s2, _mm256_loadu_ps(x + i + 16));
        s3 = _mm256_add_ps(s3, _mm256_loadu_ps(x + i + 24));
        s4 = _mm256_add_ps(s4, _mm256_loadu_ps(x + i + 32));
        s5 = _mm256_add_ps(s5, _mm256_loadu_ps(x + i + 40));
        s6 = _mm256_add_ps(s6, _mm256_loadu_ps(x + i + 48));
        s7 = _mm256_add_ps(s7, _mm256_loadu_ps(x + i + 56));
    }
    __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)),
                             _mm256_add_ps(_mm256_add_ps(s4, s5), _mm256_add_ps(s6, s7)));
    float lanes[8], sum = 0;
    _mm256_storeu_ps(lanes, s);
    for (int l = 0; l < 8; l++) sum += lanes[l];
    for (; i < n; i++) sum += x[i];
    return sum;
}

/* a [n] = b [n] + s c [n] */
AVX2_TARGET static void triad_avx2(float *a, const float *b, const float *c, float s, size_t n)
{
    __m256 vs = _mm256_set1_ps(s);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        _mm256_storeu_ps(a + i, _mm256_fmadd_ps(vs, _mm256_loadu_ps(c + i), _mm256_loadu_ps(b + i)));
        _mm256_storeu_ps(a + i + 8,
                         _mm256_fmadd_ps(vs, _mm256_loadu_ps(c + i + 8), _mm256_loadu_ps(b + i + 8)));
    }
    for (; i < n; i++) a[i] = b[i] + s * c[i];
}
#else
#define HAVE_X86 0
#endif

/* The plain loops, where AVX2 is missing. */
static float read_plain(const float *x, size_t n)
{
    float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    size_t i = 0;
    for (; i + 4 <= n; i += 4) s0 += x[i], s1 += x[i + 1], s2 += x[i + 2], s3 += x[i + 3];
    for (; i < n; i++) s0 += x[i];
    return s0 + s1 + s2 + s3;
}

static void triad_plain(float *a, const float *b, const float *c, float s, size_t n)
{
    for (size_t i = 0; i < n; i++) a[i] = b[i] + s * c[i];
}

/* ---- a team of threads -------------------------------------------------------------------------- */

/* threads run one pass of `work` at a time: the caller is thread 0, the
 * others wait on a barrier (blocked, not spinning) between passes. */
typedef struct team team;
typedef void work_fn(team *tm, int id);
struct team {
    int threads;
    pthread_t tid[MAX_THREADS];
    pthread_barrier_t start, done;
    work_fn *work; /* the pass to run; NULL: the threads leave */
    long iters;    /* FMA loop iterations per thread */
    float *buf;    /* the memory buffer, n floats */
    size_t n;
    float sink[MAX_THREADS]; /* each thread's result, so that no loop is dropped */
    double cpu[MAX_THREADS];  /* each thread's CPU seconds in the pass (FMA passes) */
};

typedef struct worker_arg {
    team *tm;
    int id;
} worker_arg;

static void *worker(void *p)
{
    worker_arg *w = p;
    for (;;) {
        pthread_barrier_wait(&w->tm->start);
        if (!w->tm->work)
            break;
        w->tm->work(w->tm, w->id);
        pthread_barrier_wait(&w->tm->done);
    }
    return NULL;
}

static worker_arg worker_args[MAX_THREADS];

static int team_start(team *tm, int threads)
{
    tm->threads = threads;
    tm->work = NULL;
    memset(tm->cpu, 0, sizeof tm->cpu);
    pthread_barrier_init(&tm->start, NULL, (unsigned)threads);
    pthread_barrier_init(&tm->done, NULL, (unsigned)threads);
    for (int i = 1; i < threads; i++) {
        worker_args[i] = (worker_arg){ tm, i };
        if (pthread_create(&tm->tid[i], NULL, worker, &worker_args[i]) != 0) {
            fprintf(stderr, "peak: cannot start thread %d\n", i);
            return -1;
        }
    }
    return 0;
}

/* Runs one pass on every thread; returns its wall seconds, and the
 * process's CPU seconds in *cpu (NULL: not wanted). */
static double team_run(team *tm, work_fn *work, double *cpu)
{
    tm->work = work;
    double c0 = clock_of(CLOCK_PROCESS_CPUTIME_ID), t0 = now();
    pthread_barrier_wait(&tm->start);
    work(tm, 0);
    pthread_barrier_wait(&tm->done);
    double t = now() - t0;
    if (cpu)
        *cpu = clock_of(CLOCK_PROCESS_CPUTIME_ID) - c0;
    return t;
}

static void team_stop(team *tm)
{
    tm->work = NULL;
    pthread_barrier_wait(&tm->start);
    for (int i = 1; i < tm->threads; i++)
        pthread_join(tm->tid[i], NULL);
    pthread_barrier_destroy(&tm->start);
    pthread_barrier_destroy(&tm->done);
}

/* Thread id's slice of n elements: a multiple of 16 floats (64 bytes) but
 * the last. */
static void slice(size_t n, int threads, int id, size_t *begin, size_t *count)
{
    size_t per = n / (size_t)threads / 16 * 16;
    *begin = per * (size_t)id;
    *count = id == threads - 1 ? n - *begin : per;
}

#if HAVE_X86
static void work_fma_512(team *tm, int id)
{
    double c0 = clock_of(CLOCK_THREAD_CPUTIME_ID);
    tm->sink[id] = fma_loop_512(tm->iters);
    tm->cpu[id] = clock_of(CLOCK_THREAD_CPUTIME_ID) - c0;
}

static void work_fma_256(team *tm, int id)
{
    double c0 = clock_of(CLOCK_THREAD_CPUTIME_ID);
    tm->sink[id] = fma_loop_256(tm->iters);
    tm->cpu[id] = clock_of(CLOCK_THREAD_CPUTIME_ID) - c0;
}
#endif

static bool have_avx2;

static void work_fill(team *tm, int id)
{
    size_t b, n;
    slice(tm->n, tm->threads, id, &b, &n);
    for (size_t i = 0; i < n; i++)
        tm->buf[b + i] = 1.0f + (float)((b + i) & 7);
}

static void work_read(team *tm, int id)
{
    size_t b, n;
    slice(tm->n, tm->threads, id, &b, &n);
#if HAVE_X86
    if (have_avx2) {
        tm->sink[id] = read_avx2(tm->buf + b, n);
        return;
    }
#endif
    tm->sink[id] = read_plain(tm->buf + b, n);
}

/* a, b, c: the buffer's thirds; each thread its slice of each */
static void work_triad(team *tm, int id)
{
    size_t third = tm->n / 3, b, n;
    float *a = tm->buf, *x = tm->buf + third, *y = tm->buf + 2 * third;
    slice(third, tm->threads, id, &b, &n);
#if HAVE_X86
    if (have_avx2) {
        triad_avx2(a + b, x + b, y + b, 0.5f, n);
        return;
    }
#endif
    triad_plain(a + b, x + b, y + b, 0.5f, n);
}

/* ---- measurements -------------------------------------------------------------------------------- */

/* The passes of one figure. */
typedef struct timing {
    double best;     /* seconds of the fastest whole pass */
    double cpu_wall; /* its CPU seconds over wall seconds */
    int reps;        /* passes run */
    bool whole;      /* the best had every thread on a CPU throughout */
    double per_cpu;  /* FMA passes: the most, over the passes, of the sum
                        over the threads of 1 / the thread's CPU seconds */
} timing;

/* Times at least 3 passes, as many as fit in budget seconds; the best is
 * that of the passes in which every thread had a CPU throughout (CPU
 * seconds at least 0.9 x threads x wall seconds: another process did not
 * take one), until 4 x budget have passed without one; then the best of
 * all, marked as not whole. */
static timing best_pass(team *tm, work_fn *work, double budget)
{
    timing r = { 1e30, 0, 0, false, 0 };
    double any = 1e30, any_ratio = 0, t0 = now();
    for (;;) {
        double cpu, s = team_run(tm, work, &cpu), per_cpu = 0;
        r.reps++;
        for (int i = 0; i < tm->threads; i++)
            per_cpu += tm->cpu[i] > 0 ? 1 / tm->cpu[i] : 0;
        if (per_cpu > r.per_cpu)
            r.per_cpu = per_cpu;
        bool whole = cpu >= 0.9 * tm->threads * s;
        if (whole && s < r.best)
            r.best = s, r.cpu_wall = cpu / s, r.whole = true;
        if (s < any)
            any = s, any_ratio = cpu / s;
        double t = now() - t0;
        if (r.reps >= 3 && ((t >= budget && r.whole) || t >= 4 * budget))
            break;
    }
    if (!r.whole)
        r.best = any, r.cpu_wall = any_ratio;
    return r;
}

/* A row of the table: the figure, per thread, the best pass's cpu/wall,
 * the passes run, and a mark: '*' where no pass had every thread on a CPU
 * (mark) or '~' where the figure is one of CPU seconds. */
static void row(const char *what, const char *kind, int threads, double rate, const char *unit,
                const timing *r, const char *mark)
{
    printf("%-6s %-6s %7d %10.1f %10.1f %-7s %8.2f %5d%s%s\n", what, kind, threads, rate,
           rate / threads, unit, r->cpu_wall, r->reps, *mark ? " " : "", mark);
    fflush(stdout);
}

/* The CPU's model name, family and model from /proc/cpuinfo ("unknown" and
 * -1 where it does not say). */
static void cpu_model(char *name, size_t size, int *family, int *model)
{
    snprintf(name, size, "unknown");
    *family = *model = -1;
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[512];
    bool named = false;
    while (fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (!colon)
            continue;
        char *v = colon + 1;
        while (*v == ' ' || *v == '\t') v++;
        v[strcspn(v, "\n")] = '\0';
        if (!named && strncmp(line, "model name", 10) == 0) {
            snprintf(name, size, "%s", v);
            named = true;
        } else if (*family < 0 && strncmp(line, "cpu family", 10) == 0) {
            *family = atoi(v);
        } else if (*model < 0 && strncmp(line, "model", 5) == 0 && isspace((unsigned char)line[5])) {
            *model = atoi(v);
        }
        if (named && *family >= 0 && *model >= 0)
            break;
    }
    fclose(f);
}

/* A number option's value in [lo, hi]; exits 2 with a message when it is not. */
static double number(const char *opt, const char *s, double lo, double hi)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || end == s || !(v >= lo && v <= hi)) {
        fprintf(stderr, "peak: %s: expected a number in [%g, %g], got '%s'\n", opt, lo, hi, s);
        exit(2);
    }
    return v;
}

int main(int argc, char **argv)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    if (cpus < 1)
        cpus = 1;
    int threads = (int)(cpus < MAX_THREADS ? cpus : MAX_THREADS);
    const char *env = getenv("THREADS");
    if (env && *env)
        threads = (int)number("THREADS in the environment", env, 1, MAX_THREADS);
    double seconds = 0.5, mb = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
            threads = (int)number("--threads", argv[++i], 1, MAX_THREADS);
        } else if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) {
            seconds = number("--seconds", argv[++i], 0.01, 60);
        } else if (strcmp(argv[i], "--mb") == 0 && i + 1 < argc) {
            mb = number("--mb", argv[++i], 1, 65536);
        } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            printf("usage: peak [--threads T] [--seconds S] [--mb M]\n"
                   "  T threads (default: THREADS, else the CPU count); S seconds per\n"
                   "  figure (0.5); M MiB of memory buffer (max(256, 2 x last-level cache))\n");
            return 0;
        } else {
            fprintf(stderr, "peak: unknown argument '%s'\n"
                            "usage: peak [--threads T] [--seconds S] [--mb M]\n", argv[i]);
            return 2;
        }
    }

    /* What the CPU is and has. */
    char name[256];
    int family, model;
    cpu_model(name, sizeof name, &family, &model);
    bool have_512 = false, have_256 = false;
    char isa[256] = "";
#if HAVE_X86
    __builtin_cpu_init();
    static const struct { const char *cpu, *flag; } flags[] = {
        { "avx512f", "avx512f" },       { "avx512bw", "avx512bw" },
        { "avx512vnni", "avx512_vnni" }, { "avx512bf16", "avx512_bf16" },
        { "avx512fp16", "avx512_fp16" }, { "avx2", "avx2" },
        { "fma", "fma" },
    };
    /* __builtin_cpu_supports wants a constant: one test per name */
    const bool has[] = {
        __builtin_cpu_supports("avx512f"),    __builtin_cpu_supports("avx512bw"),
        __builtin_cpu_supports("avx512vnni"), __builtin_cpu_supports("avx512bf16"),
        __builtin_cpu_supports("avx512fp16"), __builtin_cpu_supports("avx2"),
        __builtin_cpu_supports("fma"),
    };
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
        if (has[i])
            snprintf(isa + strlen(isa), sizeof isa - strlen(isa), "%s%s", *isa ? "," : "",
                     flags[i].flag);
    have_avx2 = has[5];
    have_256 = has[5] && has[6];
    have_512 = have_256 && has[0];
#endif
    long llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (llc <= 0)
        llc = sysconf(_SC_LEVEL2_CACHE_SIZE);
    if (mb == 0) {
        mb = 256;
        if (llc > 0 && 2.0 * (double)llc / (1 << 20) > mb)
            mb = 2.0 * (double)llc / (1 << 20);
        long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
        double quarter = pages > 0 && page > 0 ? (double)pages * (double)page / 4 / (1 << 20) : 0;
        if (quarter > 0 && mb > quarter)
            mb = quarter;
    }

    printf("peak: %s (family %d, model %d), %ld CPUs, last-level cache %.0f MiB\n", name, family,
           model, cpus, llc > 0 ? (double)llc / (1 << 20) : 0.0);
    printf("peak: ISA %s\n", *isa ? isa : "(no AVX2 or AVX-512)");
    printf("peak: %d threads; each figure the best repetition in %.2f s (FMA: of %.3f s; "
           "memory: passes over %.0f MiB)\n", threads, seconds, seconds / 10, mb);
    /* the model name with its blanks as '_', one word for the summary */
    char word[256];
    size_t w = 0;
    for (const char *p = name; *p && w + 1 < sizeof word; p++) {
        if (isspace((unsigned char)*p)) {
            if (w > 0 && word[w - 1] != '_')
                word[w++] = '_';
        } else {
            word[w++] = *p;
        }
    }
    while (w > 0 && word[w - 1] == '_') w--;
    word[w] = '\0';

    int counts[2] = { 1, threads };
    int n_counts = threads > 1 ? 2 : 1;
    double fma[2][2] = { { 0 } }; /* [512 or 256][thread count index], GFLOP/s */
    double mem[2][2] = { { 0 } }; /* [read or triad][thread count index], GB/s */

    printf("\n%-6s %-6s %7s %10s %10s %-7s %8s %5s\n", "what", "kind", "threads", "rate",
           "per thread", "unit", "cpu/wall", "reps");
    /* the figures without a pass that had every thread on a CPU: FMA peaks
     * from CPU seconds, and memory figures below the CPU's */
    int estimated = 0, contended = 0;
#if HAVE_X86
    for (int wi = 0; wi < 2; wi++) {
        bool have = wi == 0 ? have_512 : have_256;
        if (!have)
            continue;
        work_fn *work = wi == 0 ? work_fma_512 : work_fma_256;
        double flops_per_iter = wi == 0 ? 2.0 * 16 * CHAINS_512 : 2.0 * 8 * CHAINS_256;
        for (int ci = 0; ci < n_counts; ci++) {
            team tm;
            if (team_start(&tm, counts[ci]) != 0)
                return 1;
            /* the iterations of one repetition of a tenth of `seconds`,
             * from a short pass (which also warms the core up to the width) */
            tm.iters = 1 << 16;
            double s = team_run(&tm, work, NULL);
            tm.iters = (long)((double)tm.iters * seconds / 10 / (s > 1e-6 ? s : 1e-6)) + 1;
            timing r = best_pass(&tm, work, seconds);
            team_stop(&tm);
            /* flops per thread and pass over the best pass's wall seconds,
             * or, where no pass had every thread on a CPU, times the passes
             * per CPU-second of the threads, summed */
            double per_pass = flops_per_iter * (double)tm.iters * 1e-9;
            fma[wi][ci] = r.whole ? per_pass * counts[ci] / r.best : per_pass * r.per_cpu;
            row("fma", wi == 0 ? "512" : "256", counts[ci], fma[wi][ci], "GFLOP/s", &r,
                r.whole ? "" : "~");
            estimated += !r.whole;
        }
    }
#endif

    size_t n = (size_t)(mb * (1 << 20)) / sizeof(float);
    float *buf = aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64);
    if (!buf) {
        fprintf(stderr, "peak: out of memory for %.0f MiB\n", mb);
        return 1;
    }
    {   /* the first touch of the pages, by all the threads, each its slice */
        team tm;
        if (team_start(&tm, threads) != 0)
            return 1;
        tm.buf = buf;
        tm.n = n;
        team_run(&tm, work_fill, NULL);
        team_stop(&tm);
    }
    for (int ci = 0; ci < n_counts; ci++) {
        team tm;
        if (team_start(&tm, counts[ci]) != 0)
            return 1;
        tm.buf = buf;
        tm.n = n;
        timing read = best_pass(&tm, work_read, seconds);
        timing triad = best_pass(&tm, work_triad, seconds);
        team_stop(&tm);
        mem[0][ci] = (double)(n * sizeof(float)) / read.best * 1e-9;
        mem[1][ci] = 3.0 * (double)(n / 3 * sizeof(float)) / triad.best * 1e-9;
        row("memory", "read", counts[ci], mem[0][ci], "GB/s", &read, read.whole ? "" : "*");
        row("memory", "triad", counts[ci], mem[1][ci], "GB/s", &triad, triad.whole ? "" : "*");
        contended += !read.whole + !triad.whole;
    }
    free(buf);
    if (fma[0][0] > 0 && fma[1][0] > 0)
        printf("(512 bits over 256 bits, 1 thread: %.2fx; 2.00 where a core has two 512-bit FMA "
               "units at the same clock)\n", fma[0][0] / fma[1][0]);
    if (!have_256)
        printf("(no AVX2 and FMA: the FMA peak is not measured)\n");
    if (estimated)
        printf("(~: no pass had every thread on a CPU throughout, other processes were busy: the "
               "figure is the threads' FMA passes per CPU-second, summed)\n");
    if (contended)
        printf("(*: no pass had every thread on a CPU throughout, other processes were busy: the "
               "figure is below the CPU's)\n");

    printf("\ncpu name=%s family=%d model=%d cpus=%ld isa=%s\n", *word ? word : "unknown", family,
           model, cpus, *isa ? isa : "none");
    for (int wi = 0; wi < 2; wi++)
        for (int ci = 0; ci < n_counts; ci++)
            if (fma[wi][ci] > 0)
                printf("fma_peak_gflops bits=%d threads=%d %.1f\n", wi == 0 ? 512 : 256,
                       counts[ci], fma[wi][ci]);
    for (int k = 0; k < 2; k++)
        for (int ci = 0; ci < n_counts; ci++)
            printf("mem_bandwidth_gbs kind=%s threads=%d %.1f\n", k ? "triad" : "read", counts[ci],
                   mem[k][ci]);
    printf("peak_contended fma=%d memory=%d\n", estimated, contended);
    return 0;
}
