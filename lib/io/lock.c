/* lock.c - a lock file that says a file is being written by a process,
 * so that a second process aiming at the same file refuses at once.
 *
 * flock() on PATH.lock: the kernel drops the lock when the process ends,
 * however it ends, so a lock left by a killed process holds nothing and
 * the next one takes it.  The file holds the holder's process id, for the
 * message of the one refused. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "tfm/io.h"

tfm_status tfm_lock_take(tfm_lock *lock, const char *path, tfm_error *err)
{
    *lock = (tfm_lock){0};
    size_t n = strlen(path) + sizeof ".lock";
    char *lock_path = malloc(n);
    if (!lock_path) return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    snprintf(lock_path, n, "%s.lock", path);
    int fd = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        tfm_error_set(err, TFM_ERR_IO, "%s: %s", lock_path, strerror(errno));
        free(lock_path);
        return TFM_ERR_IO;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        const int e = errno;
        char pid[32] = "";
        ssize_t got = pread(fd, pid, sizeof pid - 1, 0);
        pid[got > 0 ? got : 0] = 0;
        pid[strcspn(pid, "\n")] = 0;
        if (e == EWOULDBLOCK)
            tfm_error_set(err, TFM_ERR_IO, "%s is being written by another process (%s%s holds "
                          "%s); wait for it to end, or give another name", path,
                          pid[0] ? "process " : "", pid[0] ? pid : "a process", lock_path);
        else
            tfm_error_set(err, TFM_ERR_IO, "%s: %s", lock_path, strerror(e));
        close(fd);
        free(lock_path);
        return TFM_ERR_IO;
    }
    char pid[32];
    int len = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)len, 0) != len) {
        /* the lock holds all the same; only the message of another run lacks the id */
    }
    *lock = (tfm_lock){.fd = fd, .path = lock_path, .held = true};
    return TFM_OK;
}

void tfm_lock_release(tfm_lock *lock, bool remove)
{
    if (!lock->held) return;
    if (remove) unlink(lock->path); /* while still held: no other process has it */
    close(lock->fd);
    free(lock->path);
    *lock = (tfm_lock){0};
}
