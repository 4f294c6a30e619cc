/* testutil.h - what several unit tests need besides checks: a temporary
 * folder (the harness's $TEST_TMP, or a fresh one), file names inside it,
 * writing a small file, and running a Python script with Debian's numpy
 * when it is there. */
#ifndef TFM_TEST_UTIL_H
#define TFM_TEST_UTIL_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"

/* Debian's python3, which has python3-numpy; not whatever python3 is first
 * on the PATH. */
#define TEST_PYTHON "/usr/bin/python3"

static char test_tmpdir[4096];
static bool test_tmpdir_made; /* by us, so ours to remove */

/* Sets test_tmpdir: $TEST_TMP when set, else a new folder /tmp/NAME.XXXXXX.
 * Exits when no folder can be made (nothing could be tested). */
static inline void test_tmpdir_init(const char *name)
{
    const char *env = getenv("TEST_TMP");
    if (env && *env) {
        snprintf(test_tmpdir, sizeof test_tmpdir, "%s", env);
        return;
    }
    snprintf(test_tmpdir, sizeof test_tmpdir, "/tmp/%s.XXXXXX", name);
    if (!mkdtemp(test_tmpdir)) {
        perror("mkdtemp");
        exit(1);
    }
    test_tmpdir_made = true;
}

/* Removes the folder test_tmpdir_init made (the harness cleans $TEST_TMP). */
static inline void test_tmpdir_cleanup(void)
{
    if (!test_tmpdir_made) return;
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", test_tmpdir);
    if (system(cmd) != 0) printf("warning: could not remove %s\n", test_tmpdir);
}

/* A file name inside test_tmpdir, valid for the next seven calls (a few
 * buffers in turn, so a callee's tmp_path does not overwrite its caller's,
 * and a run's options may hold five or six file names at once). */
static inline const char *tmp_path(const char *name)
{
    static char paths[8][8192];
    static int next;
    char *path = paths[next++ % 8];
    snprintf(path, sizeof paths[0], "%s/%s", test_tmpdir, name);
    return path;
}

/* Writes text to the file at path, replacing it (a failed check when the
 * file cannot be opened). */
static inline void write_file(const char *path, const char *text)
{
    FILE *fp = fopen(path, "wb");
    CHECK(fp != NULL);
    if (!fp) return;
    fputs(text, fp);
    fclose(fp);
}

static inline bool have_numpy(void)
{
    return system(TEST_PYTHON " -c 'import numpy' >/dev/null 2>&1") == 0;
}

/* Writes script to test_tmpdir/script.py and runs it with one argument;
 * returns its exit status. */
static inline int run_python(const char *script, const char *arg)
{
    FILE *fp = fopen(tmp_path("script.py"), "w");
    if (!fp) return -1;
    fputs(script, fp);
    fclose(fp);
    char cmd[20000];
    snprintf(cmd, sizeof cmd, "%s '%s/script.py' '%s'", TEST_PYTHON, test_tmpdir, arg);
    fflush(stdout);
    return system(cmd);
}

#endif
