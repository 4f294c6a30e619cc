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
 * r receives slice r of every rank, adds them up in rank order, and every
 * rank then collects every summed slice.  That sends as many bytes as a
 * ring allreduce: 2 (size - 1) / size of the gradient per rank.
 *
 * Every exchange is point-to-point messages to and from each peer
 * (MPI_Isend, MPI_Irecv), tested until they complete or a deadline passes
 * (wait_all): the collectives of MPI say neither when to give up nor whom
 * a rank was waiting for.  A peer whose machine or link went down does not
 * fail a TCP connection for many minutes, and a blocked collective waits
 * for ever; here the rank gives up after the deadline, naming the ranks
 * (and hosts) whose messages did not come, and the caller ends the process
 * on its own, without needing mpirun's daemons across the cut link.  The
 * arithmetic is the collectives' was (MPI_Alltoallv then MPI_Allgatherv),
 * so the sums keep their bits.
 *
 * Waiting: a rank may wait long at the small exchanges (for rank 0 to
 * validate or write a checkpoint, for a rank with a longer batch): there it
 * tests every WAIT_NS and sleeps in between (DESIGN.md: idle threads
 * block).  The gradient's messages come once every rank is there (the
 * exchange of the update's loss sums comes first), and are tested without
 * sleeping, as Open MPI's blocking calls did, so that the transport keeps
 * moving them. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tfm/train.h"

/* Between two tests of a small exchange a waiting rank sleeps this long:
 * short beside an update (a second or more), long enough to leave the CPU
 * free. */
#define WAIT_NS 200000L

/* One tag per kind of message: the messages of one kind between two ranks
 * arrive in the order they were sent (MPI's non-overtaking rule), and every
 * rank makes the same exchanges in the same order. */
enum { TAG_VALUES = 1, TAG_SLICES = 2, TAG_SUMS = 3 };

/* A host name as a rank reports it (MPI_Get_processor_name, cut short). */
#define HOST_LEN 64

struct tfm_dist {
    bool mpi;              /* MPI_Init was called (and MPI_Finalize is due) */
    int rank, size;
    double timeout;        /* seconds of tfm_dist_set_timeout; 0: wait for ever */
    double last_sum;       /* clock at the start of the last gradient sum (0: none yet) */
    double longest_update; /* the longest time between two gradient sums */
    int *counts, *displs;  /* [size] the slices of a bucket */
    float *slices;         /* [TFM_DIST_BUCKET + size] received slices */
    uint64_t *values;      /* [size] a value of every rank */
    char *hosts;           /* [size][HOST_LEN] each rank's host */
    MPI_Request *reqs;     /* [2 size] the messages of an exchange under way */
    int *peers;            /* [2 size] the rank each message goes to or comes from */
};

/* Was the program started by a launcher?  mpirun sets OMPI_COMM_WORLD_SIZE;
 * srun --mpi=pmix sets PMIX_RANK, --mpi=pmi2 PMI_RANK. */
static bool launched(void)
{
    return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK") || getenv("PMI_RANK");
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static const char *host_of(const tfm_dist *d, int rank)
{
    return d->hosts + (size_t)rank * HOST_LEN;
}

/* The seconds a rank waits for the others in an exchange before it gives
 * up: the timeout, or TFM_DIST_TIMEOUT_UPDATES times the longest update
 * so far if that is longer (a slow rank's update is waited for); 0: for ever. */
static double wait_limit(const tfm_dist *d)
{
    if (d->timeout <= 0) return 0;
    double by_updates = TFM_DIST_TIMEOUT_UPDATES * d->longest_update;
    return by_updates > d->timeout ? by_updates : d->timeout;
}

/* A failed message to or from peer: TFM_ERR_IO naming it and MPI's words. */
static tfm_status peer_error(const tfm_dist *d, int peer, int rc, const char *what,
                             tfm_error *err)
{
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) snprintf(text, sizeof text, "error %d", rc);
    return tfm_error_set(err, TFM_ERR_IO, "%s with rank %d (on %s) failed: %s", what, peer,
                         host_of(d, peer), text);
}

/* The wait of reqs[0, n) passed the limit: TFM_ERR_IO naming, in rank
 * order, the peers whose messages are not through, e.g.
 *   no answer from rank 1 (on node2) for 60 s in the gradient sum: ... */
static tfm_status not_answered(const tfm_dist *d, int n, const char *what, double waited,
                               tfm_error *err)
{
    char names[256] = "";
    size_t len = 0;
    int count = 0;
    for (int p = 0; p < d->size; p++) {
        bool open = false;
        for (int i = 0; i < n && !open; i++) open = d->reqs[i] != MPI_REQUEST_NULL && d->peers[i] == p;
        if (!open) continue;
        if (count < 4 && len < sizeof names)
            len += (size_t)snprintf(names + len, sizeof names - len, "%s%d (on %s)",
                                    count ? ", " : "", p, host_of(d, p));
        count++;
    }
    if (count > 4 && len < sizeof names)
        snprintf(names + len, sizeof names - len, " and %d more", count - 4);
    return tfm_error_set(err, TFM_ERR_IO,
                         "no answer from rank%s %s for %.0f s in %s: its process, its machine or "
                         "the network to it is down or stalled (--peer-timeout)",
                         count > 1 ? "s" : "", names, waited, what);
}

/* Tests reqs[0, n) until every one has completed, sleeping pause_ns
 * between rounds (0: none).  Fails naming the peers whose messages are not
 * through when the wait passes wait_limit, or the peer of a message that
 * failed.  Completed requests become MPI_REQUEST_NULL (MPI_Test). */
static tfm_status wait_all(tfm_dist *d, int n, long pause_ns, const char *what, tfm_error *err)
{
    const struct timespec pause = {0, pause_ns};
    const double start = now(), limit = wait_limit(d);
    for (;;) {
        int open = 0;
        for (int i = 0; i < n; i++) {
            if (d->reqs[i] == MPI_REQUEST_NULL) continue;
            int done = 0;
            int rc = MPI_Test(&d->reqs[i], &done, MPI_STATUS_IGNORE);
            if (rc != MPI_SUCCESS) return peer_error(d, d->peers[i], rc, what, err);
            open += !done;
        }
        if (open == 0) return TFM_OK;
        double waited = now() - start;
        if (limit > 0 && waited > limit) return not_answered(d, n, what, waited, err);
        if (pause_ns > 0) nanosleep(&pause, NULL);
    }
}

/* Starts the receive of count items of type from peer into buf, as
 * d->reqs[*n] (*n grows by one). */
static tfm_status post_recv(tfm_dist *d, void *buf, int count, MPI_Datatype type, int peer,
                            int tag, int *n, const char *what, tfm_error *err)
{
    d->peers[*n] = peer;
    int rc = MPI_Irecv(buf, count, type, peer, tag, MPI_COMM_WORLD, &d->reqs[*n]);
    if (rc != MPI_SUCCESS) return peer_error(d, peer, rc, what, err);
    (*n)++;
    return TFM_OK;
}

/* The same for a send of buf to peer. */
static tfm_status post_send(tfm_dist *d, const void *buf, int count, MPI_Datatype type, int peer,
                            int tag, int *n, const char *what, tfm_error *err)
{
    d->peers[*n] = peer;
    int rc = MPI_Isend(buf, count, type, peer, tag, MPI_COMM_WORLD, &d->reqs[*n]);
    if (rc != MPI_SUCCESS) return peer_error(d, peer, rc, what, err);
    (*n)++;
    return TFM_OK;
}

/* all[r * bytes, (r + 1) * bytes) gets rank r's mine[0, bytes) on every
 * rank (an allgather by messages to and from each peer); what names the
 * exchange in a failure. */
static tfm_status exchange(tfm_dist *d, const void *mine, size_t bytes, void *all,
                           const char *what, tfm_error *err)
{
    if (bytes > INT32_MAX)
        return tfm_error_set(err, TFM_ERR_RANGE, "an exchange of %zu bytes per rank", bytes);
    tfm_status st = TFM_OK;
    int n = 0;
    for (int p = 0; p < d->size && st == TFM_OK; p++)
        if (p != d->rank)
            st = post_recv(d, (char *)all + (size_t)p * bytes, (int)bytes, MPI_BYTE, p, TAG_VALUES,
                           &n, what, err);
    for (int p = 0; p < d->size && st == TFM_OK; p++)
        if (p != d->rank) st = post_send(d, mine, (int)bytes, MPI_BYTE, p, TAG_VALUES, &n, what, err);
    if (st == TFM_OK) st = wait_all(d, n, WAIT_NS, what, err);
    if (st == TFM_OK) memmove((char *)all + (size_t)d->rank * bytes, mine, bytes);
    return st;
}

tfm_status tfm_dist_create(int *argc, char ***argv, tfm_dist **out, tfm_error *err)
{
    *out = NULL;
    tfm_dist *d = calloc(1, sizeof *d);
    if (!d) return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    d->size = 1;
    d->timeout = TFM_DIST_TIMEOUT;
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
    d->hosts = calloc(n, HOST_LEN);
    if (!d->values || !d->hosts) {
        tfm_dist_free(d);
        return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    }
    if (d->size > 1) {
        d->counts = malloc(n * sizeof *d->counts);
        d->displs = malloc(n * sizeof *d->displs);
        d->slices = malloc((TFM_DIST_BUCKET + n) * sizeof *d->slices);
        d->reqs = malloc(2 * n * sizeof *d->reqs);
        d->peers = malloc(2 * n * sizeof *d->peers);
        if (!d->counts || !d->displs || !d->slices || !d->reqs || !d->peers) {
            tfm_dist_free(d);
            return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
        }
        /* Every rank's host, to name a rank that stops answering. */
        char name[MPI_MAX_PROCESSOR_NAME] = "";
        int len = 0;
        if (MPI_Get_processor_name(name, &len) != MPI_SUCCESS) snprintf(name, sizeof name, "?");
        char mine[HOST_LEN] = "";
        memcpy(mine, name, strnlen(name, HOST_LEN - 1)); /* cut short, still ended by a 0 */
        for (int p = 0; p < d->size; p++) snprintf(d->hosts + (size_t)p * HOST_LEN, HOST_LEN, "?");
        tfm_status st = exchange(d, mine, HOST_LEN, d->hosts, "the exchange of host names", err);
        if (st != TFM_OK) {
            /* no MPI_Finalize: a rank that fails ends without leaving */
            d->mpi = false;
            tfm_dist_free(d);
            return st;
        }
    }
    *out = d;
    return TFM_OK;
}

void tfm_dist_set_timeout(tfm_dist *d, double seconds)
{
    if (d) d->timeout = seconds > 0 ? seconds : 0;
}

void tfm_dist_free(tfm_dist *d)
{
    if (!d) return;
    if (d->mpi) {
        /* Finalizing waits for every rank, spinning: wait here first, with
         * the deadline of every exchange. */
        tfm_error ignored;
        uint64_t one = 1;
        if (d->size == 1 ||
            exchange(d, &one, sizeof one, d->values, "the end", &ignored) == TFM_OK)
            MPI_Finalize();
    }
    free(d->counts);
    free(d->displs);
    free(d->slices);
    free(d->values);
    free(d->hosts);
    free(d->reqs);
    free(d->peers);
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
    return exchange(d, mine, bytes, all, "an exchange between the ranks", err);
}

/* Sums the bucket x[0, n) across the ranks in rank order (see the top):
 * slice r of every rank to rank r, which adds them up; then every summed
 * slice to every rank. */
static tfm_status sum_bucket(tfm_dist *d, float *x, int n, tfm_error *err)
{
    const int size = d->size, me = d->rank;
    static const char what[] = "the gradient sum";
    /* Slice r: n / size floats, one more for the first n % size ranks. */
    for (int r = 0, at = 0; r < size; r++) {
        d->counts[r] = n / size + (r < n % size);
        d->displs[r] = at;
        at += d->counts[r];
    }
    const int mine = d->counts[me];
    /* Slice me of rank r into slices[r * mine, (r + 1) * mine). */
    tfm_status st = TFM_OK;
    int k = 0;
    for (int r = 0; r < size && st == TFM_OK; r++)
        if (r != me)
            st = post_recv(d, d->slices + (size_t)r * (size_t)mine, mine, MPI_FLOAT, r, TAG_SLICES,
                           &k, what, err);
    for (int r = 0; r < size && st == TFM_OK; r++)
        if (r != me)
            st = post_send(d, x + d->displs[r], d->counts[r], MPI_FLOAT, r, TAG_SLICES, &k, what, err);
    if (st == TFM_OK) st = wait_all(d, k, 0, what, err);
    if (st != TFM_OK) return st;
    /* ((slice of rank 0 + slice of rank 1) + slice of rank 2) + ... */
    float *sum = x + d->displs[me];
    memcpy(d->slices + (size_t)me * (size_t)mine, sum, (size_t)mine * sizeof *sum);
    memcpy(sum, d->slices, (size_t)mine * sizeof *sum);
    for (int r = 1; r < size; r++) {
        const float *s = d->slices + (size_t)r * (size_t)mine;
        for (int i = 0; i < mine; i++) sum[i] += s[i];
    }
    /* Every summed slice to every rank. */
    k = 0;
    for (int r = 0; r < size && st == TFM_OK; r++)
        if (r != me)
            st = post_recv(d, x + d->displs[r], d->counts[r], MPI_FLOAT, r, TAG_SUMS, &k, what, err);
    for (int r = 0; r < size && st == TFM_OK; r++)
        if (r != me) st = post_send(d, sum, mine, MPI_FLOAT, r, TAG_SUMS, &k, what, err);
    if (st == TFM_OK) st = wait_all(d, k, 0, what, err);
    return st;
}

tfm_status tfm_dist_sum_floats(tfm_dist *d, float *x, size_t n, tfm_error *err)
{
    if (!d || d->size == 1) return TFM_OK;
    /* One sum per update: the time between two is an update's. */
    double t = now();
    if (d->last_sum > 0 && t - d->last_sum > d->longest_update) d->longest_update = t - d->last_sum;
    d->last_sum = t;
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
