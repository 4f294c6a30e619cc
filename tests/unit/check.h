/* check.h - the smallest test harness that reports honestly.
 *
 * Each CHECK prints nothing when it holds and "FAIL: test: file:line: expr"
 * when it does not; each TEST prints "PASS: name" only if none of its checks
 * failed.  tests/run.sh counts these lines, and counts a crash (a non-zero
 * exit) as a failure, so a test binary that dies half-way cannot pass. */
#ifndef TFM_TEST_CHECK_H
#define TFM_TEST_CHECK_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* SANITIZED: 1 in a sanitizer build (make check's build/asan), which runs
 * five to ten times slower: there the tests that repeat a check over many
 * cases may do fewer (each place says what the rest still covers). */
#if defined(__SANITIZE_ADDRESS__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SANITIZED 1
#endif
#endif
#ifndef SANITIZED
#define SANITIZED 0
#endif

static int check_failures_total;
static int check_failures_in_test;
static const char *check_current_test;

#define CHECK(expr)                                                                  \
    do {                                                                             \
        if (!(expr)) {                                                               \
            printf("FAIL: %s: %s:%d: %s\n", check_current_test, __FILE__, __LINE__,  \
                   #expr);                                                           \
            check_failures_in_test++;                                                \
        }                                                                            \
    } while (0)

#define CHECK_MSG(expr, ...)                                                         \
    do {                                                                             \
        if (!(expr)) {                                                               \
            printf("FAIL: %s: %s:%d: %s: ", check_current_test, __FILE__, __LINE__,  \
                   #expr);                                                           \
            printf(__VA_ARGS__);                                                     \
            printf("\n");                                                            \
            check_failures_in_test++;                                                \
        }                                                                            \
    } while (0)

#define CHECK_NEAR(a, b, tol)                                                        \
    CHECK_MSG(fabs((double)(a) - (double)(b)) <= (tol), "%.9g vs %.9g", (double)(a), \
              (double)(b))

/* Runs one test function and reports it. */
#define RUN(fn)                                                                      \
    do {                                                                             \
        check_current_test = #fn;                                                    \
        check_failures_in_test = 0;                                                  \
        fn();                                                                        \
        if (check_failures_in_test == 0) printf("PASS: %s\n", #fn);                  \
        check_failures_total += check_failures_in_test;                              \
        fflush(stdout);                                                              \
    } while (0)

#define SKIP(fn, why) printf("SKIP: %s: %s\n", #fn, why)

#define CHECK_DONE() return check_failures_total ? 1 : 0

#endif
