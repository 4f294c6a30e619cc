/* atomic.c - writing a file so that readers see the old file or the whole new
 * one, never half of it (DESIGN.md: an interrupted `train` never leaves a
 * corrupt model or checkpoint behind).
 *
 * The data goes to "PATH.tmp.PID" in the same folder (rename is atomic only
 * within one file system), is flushed to the disk with fsync, and is renamed
 * over PATH; the folder is then fsynced so that the rename itself survives a
 * crash. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tfm/io.h"

/* Frees what f holds and leaves it empty, so that abort after commit (or a
 * second abort) does nothing. */
static void atomic_reset(tfm_atomic_file *f)
{
    free(f->path);
    free(f->tmp_path);
    f->fp = NULL;
    f->path = NULL;
    f->tmp_path = NULL;
}

tfm_status tfm_atomic_open(tfm_atomic_file *f, const char *path, tfm_error *err)
{
    f->fp = NULL;
    f->path = strdup(path);
    size_t size = strlen(path) + 32; /* ".tmp." and a pid */
    f->tmp_path = malloc(size);
    if (!f->path || !f->tmp_path) {
        atomic_reset(f);
        return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    }
    snprintf(f->tmp_path, size, "%s.tmp.%ld", path, (long)getpid());
    /* O_TRUNC: a temporary file left by a crashed run with our pid is ours to
     * overwrite.  The mode is the usual 0666 less the umask. */
    int fd = open(f->tmp_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0) {
        tfm_status st = tfm_error_set(err, TFM_ERR_IO, "cannot create %s (to write %s): %s",
                                      f->tmp_path, path, strerror(errno));
        atomic_reset(f);
        return st;
    }
    f->fp = fdopen(fd, "wb");
    if (!f->fp) {
        tfm_status st = tfm_error_set(err, TFM_ERR_IO, "cannot open %s: %s", f->tmp_path,
                                      strerror(errno));
        close(fd);
        unlink(f->tmp_path);
        atomic_reset(f);
        return st;
    }
    return TFM_OK;
}

/* Makes a finished rename durable by syncing the folder that holds path. */
static tfm_status sync_folder(const char *path, tfm_error *err)
{
    const char *slash = strrchr(path, '/');
    char *dir = slash == path ? strdup("/") : slash ? strndup(path, (size_t)(slash - path))
                                                    : strdup(".");
    if (!dir) return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    tfm_status st = TFM_OK;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        st = tfm_error_set(err, TFM_ERR_IO, "wrote %s but cannot open its folder %s: %s", path,
                           dir, strerror(errno));
    } else {
        /* Some file systems cannot sync a folder (EINVAL); the rename is
         * done all the same. */
        if (fsync(fd) != 0 && errno != EINVAL)
            st = tfm_error_set(err, TFM_ERR_IO, "wrote %s but cannot sync its folder %s: %s",
                               path, dir, strerror(errno));
        close(fd);
    }
    free(dir);
    return st;
}

tfm_status tfm_atomic_commit(tfm_atomic_file *f, tfm_error *err)
{
    if (!f->fp) return tfm_error_set(err, TFM_ERR_ARG, "atomic file is not open");
    tfm_status st = TFM_OK;
    /* Each step runs only when the ones before it worked; fclose runs always
     * (it frees the FILE), and its failure is a failure to write. */
    if (fflush(f->fp) != 0 || ferror(f->fp))
        st = tfm_error_set(err, TFM_ERR_IO, "cannot write %s: %s", f->tmp_path, strerror(errno));
    else if (fsync(fileno(f->fp)) != 0)
        st = tfm_error_set(err, TFM_ERR_IO, "cannot sync %s: %s", f->tmp_path, strerror(errno));
    int closed = fclose(f->fp);
    f->fp = NULL;
    if (st == TFM_OK && closed != 0)
        st = tfm_error_set(err, TFM_ERR_IO, "cannot write %s: %s", f->tmp_path, strerror(errno));
    if (st == TFM_OK && rename(f->tmp_path, f->path) != 0)
        st = tfm_error_set(err, TFM_ERR_IO, "cannot rename %s to %s: %s", f->tmp_path, f->path,
                           strerror(errno));
    if (st != TFM_OK) {
        unlink(f->tmp_path);
        atomic_reset(f);
        return st;
    }
    st = sync_folder(f->path, err);
    atomic_reset(f);
    return st;
}

void tfm_atomic_abort(tfm_atomic_file *f)
{
    if (f->fp) fclose(f->fp);
    if (f->tmp_path) unlink(f->tmp_path);
    atomic_reset(f);
}
