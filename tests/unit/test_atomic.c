/* test_atomic.c - atomic file writes: a commit replaces the file whole, an
 * abort leaves the old file and no temporary file, and failures say which
 * path and why. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "testutil.h"
#include "tfm/io.h"

/* Makes a fresh folder for one test, so the file counts below are exact. */
static void make_folder(char *out, size_t size, const char *name)
{
    snprintf(out, size, "%s/%s", test_tmpdir, name);
    mkdir(out, 0777);
}

/* True when the file at path holds exactly text. */
static bool file_is(const char *path, const char *text)
{
    FILE *fp = fopen(path, "rb");
    if (!fp) return false;
    char buf[4096];
    size_t n = fread(buf, 1, sizeof buf, fp);
    fclose(fp);
    return n == strlen(text) && memcmp(buf, text, n) == 0;
}

/* The number of entries in a folder, "." and ".." aside. */
static int count_files(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) n++;
    closedir(d);
    return n;
}

static void test_commit_replaces(void)
{
    char dir[8192], path[8300], tmp[8400];
    make_folder(dir, sizeof dir, "commit");
    snprintf(path, sizeof path, "%s/model.bin", dir);
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    write_file(path, "old contents that are longer than the new");

    tfm_atomic_file f;
    tfm_error err;
    CHECK_MSG(tfm_atomic_open(&f, path, &err) == TFM_OK, "%s", err.msg);
    CHECK(f.fp != NULL && strcmp(f.tmp_path, tmp) == 0);
    fputs("new", f.fp);
    fflush(f.fp);
    /* until the commit, readers see the old file */
    CHECK(file_is(path, "old contents that are longer than the new"));
    CHECK(access(tmp, F_OK) == 0);
    CHECK(tfm_atomic_commit(&f, &err) == TFM_OK);
    CHECK(file_is(path, "new"));
    CHECK(access(tmp, F_OK) != 0);
    CHECK(count_files(dir) == 1);
    CHECK(f.fp == NULL && f.path == NULL && f.tmp_path == NULL);
    tfm_atomic_abort(&f); /* safe after commit, and removes nothing */
    CHECK(file_is(path, "new"));

    /* a file that did not exist, named without a folder */
    char cwd[8192];
    CHECK(getcwd(cwd, sizeof cwd) != NULL);
    CHECK(chdir(dir) == 0);
    CHECK(tfm_atomic_open(&f, "fresh.txt", &err) == TFM_OK);
    fputs("fresh", f.fp);
    CHECK_MSG(tfm_atomic_commit(&f, &err) == TFM_OK, "%s", err.msg);
    CHECK(file_is("fresh.txt", "fresh"));
    CHECK(chdir(cwd) == 0);
    CHECK(count_files(dir) == 2);
}

static void test_abort_keeps_old(void)
{
    char dir[8192], path[8300];
    make_folder(dir, sizeof dir, "abort");
    snprintf(path, sizeof path, "%s/ckpt", dir);
    write_file(path, "old");
    tfm_atomic_file f;
    tfm_error err;
    CHECK(tfm_atomic_open(&f, path, &err) == TFM_OK);
    fputs("half of a new file", f.fp);
    tfm_atomic_abort(&f);
    CHECK(file_is(path, "old"));
    CHECK(count_files(dir) == 1);
    tfm_atomic_abort(&f); /* twice is harmless */
    CHECK(file_is(path, "old"));
}

static void test_missing_folder(void)
{
    char path[8300];
    snprintf(path, sizeof path, "%s/no-such-folder/model.bin", test_tmpdir);
    tfm_atomic_file f;
    tfm_error err;
    CHECK(tfm_atomic_open(&f, path, &err) == TFM_ERR_IO);
    CHECK(err.status == TFM_ERR_IO);
    CHECK_MSG(strstr(err.msg, path) != NULL, "%s", err.msg);
    CHECK_MSG(strstr(err.msg, strerror(ENOENT)) != NULL, "%s", err.msg);
    CHECK(f.fp == NULL && f.path == NULL && f.tmp_path == NULL);
    tfm_atomic_abort(&f); /* safe after a failed open */
}

/* A commit that cannot rename (the path is a folder) fails, names both
 * paths, and leaves no temporary file. */
static void test_commit_failure_cleans_up(void)
{
    char dir[8192], path[8300];
    make_folder(dir, sizeof dir, "fail");
    snprintf(path, sizeof path, "%s/taken", dir);
    mkdir(path, 0777);
    char inner[8400];
    snprintf(inner, sizeof inner, "%s/x", path);
    write_file(inner, "x"); /* a non-empty folder cannot be renamed over */
    tfm_atomic_file f;
    tfm_error err;
    CHECK(tfm_atomic_open(&f, path, &err) == TFM_OK);
    fputs("data", f.fp);
    CHECK(tfm_atomic_commit(&f, &err) == TFM_ERR_IO);
    CHECK_MSG(strstr(err.msg, "cannot rename") && strstr(err.msg, path), "%s", err.msg);
    CHECK(count_files(dir) == 1);
    CHECK(f.fp == NULL && f.tmp_path == NULL);
    tfm_atomic_abort(&f);
    CHECK(file_is(inner, "x"));
}

/* A write error (a full disk) is reported by commit, which then removes the
 * temporary file.  The FILE is swapped for one on /dev/full, where every
 * write fails with ENOSPC. */
static void test_write_error(void)
{
    char dir[8192], path[8300];
    make_folder(dir, sizeof dir, "full");
    snprintf(path, sizeof path, "%s/out", dir);
    tfm_atomic_file f;
    tfm_error err;
    CHECK(tfm_atomic_open(&f, path, &err) == TFM_OK);
    FILE *full = fopen("/dev/full", "wb");
    if (!full) {
        tfm_atomic_abort(&f);
        return;
    }
    fclose(f.fp);
    f.fp = full;
    fputs("data that cannot be written", f.fp);
    CHECK(tfm_atomic_commit(&f, &err) == TFM_ERR_IO);
    CHECK_MSG(strstr(err.msg, "cannot write") && strstr(err.msg, strerror(ENOSPC)), "%s",
              err.msg);
    CHECK(count_files(dir) == 0);
    CHECK(access(path, F_OK) != 0);
}

int main(void)
{
    test_tmpdir_init("test_atomic");
    RUN(test_commit_replaces);
    RUN(test_abort_keeps_old);
    RUN(test_missing_folder);
    RUN(test_commit_failure_cleans_up);
    RUN(test_write_error);
    CHECK_DONE();
}
