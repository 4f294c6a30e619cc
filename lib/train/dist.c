/* dist.c - training across processes: the one file of the library that
 * calls MPI (see "training across processes" in tfm/train.h).
 *
 * What the trainer and the run need of a group of processes, and no more:
 * who this rank is, an exchange of a few values per rank (the loss sums of
 * an update, whether to stop), and the sum of every rank's gradient.
 *
 * The sum is taken in rank order, so that it is the same bit for bit on
 * every rank and equals what one process accumulating the same batches
 * computes.  MPI_Allreduce promises neither (its order depends on the
 * algorithm Open MPI picks for the message size and the number of ranks).
 * Instead each bucket of the gradient is cut into one slice per rank; rank
 * r receives slice r of every rank (MPI_Alltoallv), adds them up in rank
 * order, and every rank then collects every summed slice (MPI_Allgatherv).
 * That sends as many bytes as a ring allreduce: 2 (size - 1) / size of the
 * gradient per rank.
 *
 * Waiting: Open MPI's blocking calls spin while they wait.  Where a rank
 * may wait long (for rank 0 to validate or write a checkpoint, for a rank
 * with a longer batch), it starts the exchange without blocking and tests
 * it every WAIT_NS, sleeping in between (DESIGN.md: idle threads block). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tfm/train.h"

/* Between two tests of an exchange a waiting rank sleeps this long: short
 * beside an update (a second or more), long enough to leave the CPU free. */
#define WAIT_NS 200000L

struct tfm_dist {
    bool mpi;              /* MPI_Init was called (and MPI_Finalize is due) */
    int rank, size;
    int *counts, *displs;              /* [size] the slices of a bucket */
    int *recv_counts, *recv_displs;    /* [size] this rank's slice of every rank */
    float *slices;                     /* [TFM_DIST_BUCKET + size] received slices */
    uint64_t *values;                  /* [size] a value of every rank */
};

/* Was the program started by a launcher?  mpirun sets OMPI_COMM_WORLD_SIZE;
 * srun --mpi=pmix sets PMIX_RANK, --mpi=pmi2 PMI_RANK. */
static bool launched(void)
{
    return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK") || getenv("PMI_RANK");
}

static tfm_status mpi_error(int rc, const char *call, tfm_error *err)
{
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) snprintf(text, sizeof text, "error %d", rc);
    return tfm_error_set(err, TFM_ERR_IO, "%s: %s", call, text);
}

tfm_status tfm_dist_create(int *argc, char ***argv, tfm_dist **out, tfm_error *err)
{
    *out = NULL;
    tfm_dist *d = calloc(1, sizeof *d);
    if (!d) return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    d->size = 1;
    if (launched()) {
        int provided;
        int rc = MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
        if (rc != MPI_SUCCESS) {
            free(d);
            return tfm_error_set(err, TFM_ERR_IO, "MPI_Init_thread failed (error %d)", rc);
        }
        d->mpi = true;
        /* Errors come back as statuses with a message, not as an abort. */
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        MPI_Comm_rank(MPI_COMM_WORLD, &d->rank);
        MPI_Comm_size(MPI_COMM_WORLD, &d->size);
    }
    size_t n = (size_t)d->size;
    d->values = malloc(n * sizeof *d->values);
    if (!d->values) {
        tfm_dist_free(d);
        return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    }
    if (d->size > 1) {
        d->counts = malloc(n * sizeof *d->counts);
        d->displs = malloc(n * sizeof *d->displs);
        d->recv_counts = malloc(n * sizeof *d->recv_counts);
        d->recv_displs = malloc(n * sizeof *d->recv_displs);
        d->slices = malloc((TFM_DIST_BUCKET + n) * sizeof *d->slices);
        if (!d->counts || !d->displs || !d->recv_counts || !d->recv_displs || !d->slices) {
            tfm_dist_free(d);
            return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
        }
    }
    *out = d;
    return TFM_OK;
}

/* Tests req until it completes, sleeping WAIT_NS between tests. */
static tfm_status wait_sleeping(MPI_Request *req, const char *call, tfm_error *err)
{
    const struct timespec pause = {0, WAIT_NS};
    for (;;) {
        int done = 0;
        int rc = MPI_Test(req, &done, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) return mpi_error(rc, call, err);
        if (done) return TFM_OK;
        nanosleep(&pause, NULL);
    }
}

void tfm_dist_free(tfm_dist *d)
{
    if (!d) return;
    if (d->mpi) {
        /* Finalizing waits for every rank, spinning: wait here first. */
        MPI_Request req;
        tfm_error ignored;
        if (MPI_Ibarrier(MPI_COMM_WORLD, &req) == MPI_SUCCESS)
            wait_sleeping(&req, "MPI_Ibarrier", &ignored);
        MPI_Finalize();
    }
    free(d->counts);
    free(d->displs);
    free(d->recv_counts);
    free(d->recv_displs);
    free(d->slices);
    free(d->values);
    free(d);
}

int tfm_dist_rank(const tfm_dist *d)
{
    return d ? d->rank : 0;
}

int tfm_dist_size(const tfm_dist *d)
{
    return d ? d->size : 1;
}

tfm_status tfm_dist_allgather(tfm_dist *d, const void *mine, size_t bytes, void *all,
                              tfm_error *err)
{
    if (!d || d->size == 1) {
        memmove(all, mine, bytes);
        return TFM_OK;
    }
    if (bytes > INT32_MAX)
        return tfm_error_set(err, TFM_ERR_RANGE, "an exchange of %zu bytes per rank", bytes);
    MPI_Request req;
    int rc = MPI_Iallgather(mine, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE, MPI_COMM_WORLD,
                            &req);
    if (rc != MPI_SUCCESS) return mpi_error(rc, "MPI_Iallgather", err);
    return wait_sleeping(&req, "MPI_Iallgather", err);
}

/* Sums the bucket x[0, n) across the ranks in rank order (see the top). */
static tfm_status sum_bucket(tfm_dist *d, float *x, int n, tfm_error *err)
{
    const int size = d->size, me = d->rank;
    /* Slice r: n / size floats, one more for the first n % size ranks. */
    for (int r = 0, at = 0; r < size; r++) {
        d->counts[r] = n / size + (r < n % size);
        d->displs[r] = at;
        at += d->counts[r];
    }
    const int mine = d->counts[me];
    for (int r = 0; r < size; r++) {
        d->recv_counts[r] = mine;
        d->recv_displs[r] = r * mine;
    }
    int rc = MPI_Alltoallv(x, d->counts, d->displs, MPI_FLOAT, d->slices, d->recv_counts,
                           d->recv_displs, MPI_FLOAT, MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) return mpi_error(rc, "MPI_Alltoallv", err);
    /* ((slice of rank 0 + slice of rank 1) + slice of rank 2) + ... */
    float *sum = x + d->displs[me];
    memcpy(sum, d->slices, (size_t)mine * sizeof *sum);
    for (int r = 1; r < size; r++) {
        const float *s = d->slices + (size_t)r * (size_t)mine;
        for (int i = 0; i < mine; i++) sum[i] += s[i];
    }
    rc = MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, x, d->counts, d->displs, MPI_FLOAT,
                        MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) return mpi_error(rc, "MPI_Allgatherv", err);
    return TFM_OK;
}

tfm_status tfm_dist_sum_floats(tfm_dist *d, float *x, size_t n, tfm_error *err)
{
    if (!d || d->size == 1) return TFM_OK;
    for (size_t lo = 0; lo < n; lo += TFM_DIST_BUCKET) {
        size_t len = n - lo < TFM_DIST_BUCKET ? n - lo : TFM_DIST_BUCKET;
        tfm_status st = sum_bucket(d, x + lo, (int)len, err);
        if (st != TFM_OK) return st;
    }
    return TFM_OK;
}

tfm_status tfm_dist_first_difference(tfm_dist *d, uint64_t value, int *rank, tfm_error *err)
{
    *rank = -1;
    if (!d || d->size == 1) return TFM_OK;
    tfm_status st = tfm_dist_allgather(d, &value, sizeof value, d->values, err);
    for (int r = 1; r < d->size && st == TFM_OK && *rank < 0; r++)
        if (d->values[r] != d->values[0]) *rank = r;
    return st;
}

tfm_status tfm_dist_max(tfm_dist *d, int64_t *value, tfm_error *err)
{
    if (!d || d->size == 1) return TFM_OK;
    uint64_t mine = (uint64_t)*value;
    tfm_status st = tfm_dist_allgather(d, &mine, sizeof mine, d->values, err);
    for (int r = 0; r < d->size && st == TFM_OK; r++)
        if ((int64_t)d->values[r] > *value) *value = (int64_t)d->values[r];
    return st;
}
