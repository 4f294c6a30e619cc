/* checkpoint.c - checkpoints: the whole state of training in one safetensors
 * file, written atomically, so that a run stopped at any moment (even by
 * kill -9) resumes from its last checkpoint exactly as if it had never
 * stopped.
 *
 * A checkpoint is a model file (the same tensors and metadata, added to the
 * writer by tfm_model_to_safetensors, so the two formats cannot drift) with
 * Adam's moments, the moving average of the weights and the training state
 * added.  The model part is read back by tfm_model_from_safetensors, which
 * checks every tensor and field as it does for a model file; the walks of
 * the optimizer buffers take the rest, and a tensor left over is an error.
 *
 * Saving writes through tfm_safetensors_write (temporary file PATH.tmp.PID,
 * fsync, rename), so a checkpoint file exists whole or not at all; what a
 * killed process leaves behind is temporary files, which
 * tfm_checkpoint_prune removes once their process is gone (among them the
 * PATH.model-tmp.PID files of earlier versions, which saved the model part
 * through a file of its own). */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <unistd.h>

#include "tfm/safetensors.h"
#include "tfm/train.h"

#define CHECKPOINT_VERSION "1"

/* Buffers of the parameters' size start on cache lines, as the model's do. */
static float *alloc_params(size_t n)
{
    size_t bytes = (n * sizeof(float) + 63) / 64 * 64;
    return aligned_alloc(64, bytes ? bytes : 64);
}

tfm_status tfm_train_state_init(tfm_train_state *s, tfm_model *model, bool ema, tfm_error *err)
{
    memset(s, 0, sizeof *s);
    s->model = model;
    size_t n = tfm_params_count(&model->config);
    s->exp_avg = alloc_params(n);
    s->exp_avg_sq = alloc_params(n);
    if (ema) s->ema = alloc_params(n);
    if (!s->exp_avg || !s->exp_avg_sq || (ema && !s->ema))
        return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory for the optimizer state of %zu "
                                                 "parameters", n);
    memset(s->exp_avg, 0, n * sizeof(float));
    memset(s->exp_avg_sq, 0, n * sizeof(float));
    if (ema) memcpy(s->ema, model->data, n * sizeof(float));
    return TFM_OK;
}

void tfm_train_state_free(tfm_train_state *s)
{
    tfm_model_free(s->model);
    free(s->exp_avg);
    free(s->exp_avg_sq);
    free(s->ema);
    memset(s, 0, sizeof *s);
}

/* ---- the training state as metadata ----------------------------------------------- */

static void format_rng(const tfm_rng *r, char *out, size_t size)
{
    snprintf(out, size, "%016" PRIx64 " %016" PRIx64 " %016" PRIx64 " %016" PRIx64, r->s[0],
             r->s[1], r->s[2], r->s[3]);
}

static tfm_status parse_rng(const char *key, const char *s, tfm_rng *r, tfm_error *err)
{
    int used = 0;
    if (sscanf(s, "%16" SCNx64 " %16" SCNx64 " %16" SCNx64 " %16" SCNx64 "%n", &r->s[0],
               &r->s[1], &r->s[2], &r->s[3], &used) != 4 || s[used] != 0 ||
        (r->s[0] | r->s[1] | r->s[2] | r->s[3]) == 0)
        return tfm_error_set(err, TFM_ERR_FORMAT,
                             "metadata '%s' is '%.80s', expected four non-zero hexadecimal words",
                             key, s);
    return TFM_OK;
}

tfm_status tfm_metadata_number(const tfm_safetensors *f, const char *key, tfm_number_syntax syntax,
                               double lo, double hi, uint64_t max, uint64_t *whole, double *real,
                               tfm_error *err)
{
    const char *s = tfm_safetensors_metadata(f, key);
    if (!s) return TFM_EOF;
    char *end;
    errno = 0;
    if (syntax == TFM_NUMBER_REAL) {
        double v = strtod(s, &end);
        /* The bounds are finite, so the test fails for NaN and infinity too. */
        if (end == s || *end || errno || !(v >= lo && v <= hi))
            return tfm_error_set(err, TFM_ERR_FORMAT,
                                 "metadata \"%s\" is '%.40s', not a number from %g to %g", key, s,
                                 lo, hi);
        *real = v;
        return TFM_OK;
    }
    bool hex = syntax == TFM_NUMBER_HEX;
    unsigned long long v = strtoull(s, &end, hex ? 16 : 10);
    if (!(hex ? isxdigit : isdigit)((unsigned char)s[0]) || *end || errno || v > max ||
        (double)v < lo)
        return tfm_error_set(err, TFM_ERR_FORMAT,
                             "metadata \"%s\" is '%.40s', not a %s number from %.0f to %" PRIu64,
                             key, s, hex ? "hexadecimal" : "whole", lo, max);
    *whole = v;
    return TFM_OK;
}

/* A whole decimal or (hex) hexadecimal number in [0, max] that must be there. */
static tfm_status parse_u64(const tfm_safetensors *f, const char *key, bool hex, uint64_t max,
                            uint64_t *out, tfm_error *err)
{
    tfm_status st = tfm_metadata_number(f, key, hex ? TFM_NUMBER_HEX : TFM_NUMBER_WHOLE, 0, 0, max,
                                        out, NULL, err);
    if (st == TFM_EOF) return tfm_error_set(err, TFM_ERR_FORMAT, "metadata '%s' is missing", key);
    return st;
}

/* The state's metadata as NULL-terminated key, value pairs in keys[] and
 * values held in text[] (each slot TEXT_SIZE bytes). */
#define STATE_KEYS 8
#define TEXT_SIZE 96

static size_t state_metadata(const tfm_train_state *s, const char **kv,
                             char text[][TEXT_SIZE])
{
    size_t n = 0, t = 0;
#define PUT(key, ...)                                               \
    do {                                                            \
        snprintf(text[t], TEXT_SIZE, __VA_ARGS__);                  \
        kv[n++] = key;                                              \
        kv[n++] = text[t++];                                        \
    } while (0)
    PUT(TFM_CHECKPOINT_KEY, "%s", CHECKPOINT_VERSION);
    PUT("train.epoch", "%" PRId64, s->batcher.epoch);
    PUT("train.position", "%" PRId64, s->batcher.position);
    format_rng(&s->batcher.rng, text[t], TEXT_SIZE);
    kv[n++] = "train.batch_rng";
    kv[n++] = text[t++];
    format_rng(&s->dropout_rng, text[t], TEXT_SIZE);
    kv[n++] = "train.dropout_rng";
    kv[n++] = text[t++];
    PUT("train.bad_steps", "%d", s->bad_steps);
    PUT("train.corpus_pairs", "%" PRIu64, s->corpus_pairs);
    PUT("train.corpus_hash", "%016" PRIx64, s->corpus_hash);
#undef PUT
    kv[n] = NULL;
    return n;
}

static tfm_status read_state_metadata(const tfm_safetensors *f, tfm_train_state *s,
                                      tfm_error *err)
{
    tfm_status st;
    uint64_t v;
    if ((st = parse_u64(f, "train.epoch", false, INT64_MAX, &v, err))) return st;
    s->batcher.epoch = (int64_t)v;
    if ((st = parse_u64(f, "train.position", false, INT64_MAX, &v, err))) return st;
    s->batcher.position = (int64_t)v;
    if ((st = parse_u64(f, "train.bad_steps", false, 1000000, &v, err))) return st;
    s->bad_steps = (int)v;
    if ((st = parse_u64(f, "train.corpus_pairs", false, UINT64_MAX, &s->corpus_pairs, err)))
        return st;
    if ((st = parse_u64(f, "train.corpus_hash", true, UINT64_MAX, &s->corpus_hash, err)))
        return st;
    const char *keys[2] = {"train.batch_rng", "train.dropout_rng"};
    tfm_rng *rngs[2] = {&s->batcher.rng, &s->dropout_rng};
    for (int i = 0; i < 2; i++) {
        const char *text = tfm_safetensors_metadata(f, keys[i]);
        if (!text) return tfm_error_set(err, TFM_ERR_FORMAT, "metadata '%s' is missing", keys[i]);
        if ((st = parse_rng(keys[i], text, rngs[i], err))) return st;
    }
    return TFM_OK;
}

/* ---- walking the optimizer buffers by name ---------------------------------------------- */

typedef struct buffer_pass {
    const char *prefix;      /* "optimizer.exp_avg." ... */
    tfm_safetensors_writer *w;  /* saving */
    tfm_safetensors *f;         /* loading */
    tfm_buf name;
    tfm_status st;
    tfm_error *err;
} buffer_pass;

static void buffer_tensor(void *ctx, const char *name, int ndim, const int64_t *shape,
                          float *data)
{
    buffer_pass *b = ctx;
    if (b->st != TFM_OK) return;
    tfm_buf_clear(&b->name);
    if (tfm_buf_printf(&b->name, "%s%s", b->prefix, name) != TFM_OK) {
        b->st = tfm_error_set(b->err, TFM_ERR_NOMEM, "out of memory");
        return;
    }
    if (b->w) {
        b->st = tfm_safetensors_writer_add_tensor(b->w, b->name.data, TFM_F32, ndim, shape, data,
                                                  b->err);
        return;
    }
    const void *found;
    b->st = tfm_safetensors_get(b->f, b->name.data, TFM_F32, ndim, shape, &found, b->err);
    if (b->st != TFM_OK || !data) return;
    size_t n = 1;
    for (int i = 0; i < ndim; i++) n *= (size_t)shape[i];
    memcpy(data, found, n * sizeof(float));
}

/* Adds (w) or reads (f) the buffer data, laid out as the model's parameters,
 * as tensors named prefix + parameter name.  Reading into a NULL buffer
 * checks the tensors and takes them without copying. */
static tfm_status walk_buffer(const tfm_config *c, float *data, const char *prefix,
                              tfm_safetensors_writer *w, tfm_safetensors *f, tfm_error *err)
{
    tfm_params p;
    if (tfm_params_layout(c, data, &p) != TFM_OK)
        return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    buffer_pass b = {.prefix = prefix, .w = w, .f = f, .st = TFM_OK, .err = err};
    tfm_buf_init(&b.name);
    tfm_params_visit(c, &p, buffer_tensor, &b);
    tfm_buf_free(&b.name);
    tfm_params_free_layout(&p);
    return b.st;
}

/* ---- saving ------------------------------------------------------------------------ */

tfm_status tfm_checkpoint_save(const char *path, const tfm_train_state *s,
                               const char *const *extra_metadata, tfm_error *err)
{
    /* The state's keys, then the caller's. */
    const char *kv[2 * STATE_KEYS + 1];
    char text[STATE_KEYS][TEXT_SIZE];
    size_t n_state = state_metadata(s, kv, text);
    size_t n_extra = 0;
    while (extra_metadata && extra_metadata[n_extra]) n_extra += 2;
    const char **all = malloc((n_state + n_extra + 1) * sizeof *all);
    tfm_safetensors_writer *w = tfm_safetensors_writer_create();
    if (!all || !w) {
        free(all);
        tfm_safetensors_writer_free(w);
        return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    }
    memcpy(all, kv, n_state * sizeof *all);
    for (size_t i = 0; i < n_extra; i++) all[n_state + i] = extra_metadata[i];
    all[n_state + n_extra] = NULL;

    const tfm_config *c = &s->model->config;
    tfm_status st = tfm_model_to_safetensors(s->model, all, w, err);
    if (st == TFM_OK) st = walk_buffer(c, s->exp_avg, TFM_CHECKPOINT_EXP_AVG, w, NULL, err);
    if (st == TFM_OK) st = walk_buffer(c, s->exp_avg_sq, TFM_CHECKPOINT_EXP_AVG_SQ, w, NULL, err);
    if (st == TFM_OK && s->ema) st = walk_buffer(c, s->ema, TFM_CHECKPOINT_EMA, w, NULL, err);
    if (st == TFM_OK) st = tfm_safetensors_write(w, path, err);
    tfm_safetensors_writer_free(w);
    free(all);
    return st;
}

/* ---- loading ----------------------------------------------------------------------- */

/* A moving average is there when any of its tensors is. */
static bool has_ema(const tfm_safetensors *f)
{
    const size_t n = strlen(TFM_CHECKPOINT_EMA);
    for (size_t i = 0; i < tfm_safetensors_count(f); i++)
        if (strncmp(tfm_safetensors_name(f, i), TFM_CHECKPOINT_EMA, n) == 0) return true;
    return false;
}

/* Reads the optimizer buffers of f into s's, or (s NULL) only checks them
 * against c and takes them. */
static tfm_status read_buffers(tfm_safetensors *f, const tfm_config *c, tfm_train_state *s,
                               tfm_error *err)
{
    tfm_status st = walk_buffer(c, s ? s->exp_avg : NULL, TFM_CHECKPOINT_EXP_AVG, NULL, f, err);
    if (st == TFM_OK)
        st = walk_buffer(c, s ? s->exp_avg_sq : NULL, TFM_CHECKPOINT_EXP_AVG_SQ, NULL, f, err);
    if (st == TFM_OK && has_ema(f))
        st = walk_buffer(c, s ? s->ema : NULL, TFM_CHECKPOINT_EMA, NULL, f, err);
    /* The model's tensors were all taken by tfm_model_from_safetensors, the
     * buffers' by the walks: anything left over does not belong in a
     * checkpoint. */
    if (st == TFM_OK) st = tfm_safetensors_check_all_used(f, err);
    return st;
}

tfm_status tfm_checkpoint_load_model(const char *path, tfm_model **out, tfm_error *err)
{
    *out = NULL;
    tfm_safetensors *f;
    tfm_status st = tfm_safetensors_open(path, &f, err);
    if (st != TFM_OK) {
        tfm_error_prefix(err, "'%s'", path);
        return st;
    }
    bool checkpoint = tfm_safetensors_metadata(f, TFM_CHECKPOINT_KEY) != NULL;
    st = tfm_model_from_safetensors(f, out, err);
    /* A model file holds nothing else; a checkpoint its buffers too. */
    if (st == TFM_OK)
        st = checkpoint ? read_buffers(f, &(*out)->config, NULL, err)
                        : tfm_safetensors_check_all_used(f, err);
    if (st != TFM_OK) {
        tfm_model_free(*out);
        *out = NULL;
        if (checkpoint) tfm_error_prefix(err, "checkpoint '%s'", path);
    }
    tfm_safetensors_free(f);
    return st;
}

tfm_status tfm_checkpoint_load(const char *path, tfm_train_state *s, tfm_error *err)
{
    memset(s, 0, sizeof *s);
    tfm_safetensors *f;
    tfm_status st = tfm_safetensors_open(path, &f, err);
    if (st != TFM_OK) {
        if (st != TFM_ERR_IO) tfm_error_prefix(err, "checkpoint '%s'", path);
        return st;
    }
    const char *version = tfm_safetensors_metadata(f, TFM_CHECKPOINT_KEY);
    if (!version) {
        tfm_safetensors_free(f);
        return tfm_error_set(err, TFM_ERR_FORMAT,
                             "'%s' is a model file, not a checkpoint: it holds no optimizer state",
                             path);
    }
    if (strcmp(version, CHECKPOINT_VERSION) != 0) {
        /* the message first: version lives in f */
        st = tfm_error_set(err, TFM_ERR_UNSUPPORTED,
                           "checkpoint '%s' has version '%.20s', but this program reads "
                           "version %s",
                           path, version, CHECKPOINT_VERSION);
        tfm_safetensors_free(f);
        return st;
    }
    tfm_model *m = NULL;
    st = tfm_model_from_safetensors(f, &m, err);
    if (st == TFM_OK) {
        st = tfm_train_state_init(s, m, has_ema(f), err);
        m = NULL; /* s owns it now */
    }
    if (st == TFM_OK) st = read_buffers(f, &s->model->config, s, err);
    if (st == TFM_OK) st = read_state_metadata(f, s, err);
    if (st != TFM_OK) {
        tfm_error_prefix(err, "checkpoint '%s'", path);
        tfm_model_free(m);
        tfm_train_state_free(s);
    }
    tfm_safetensors_free(f);
    return st;
}

/* ---- files of a run --------------------------------------------------------------------- */

tfm_status tfm_checkpoint_path(const char *prefix, int64_t step, tfm_buf *out)
{
    tfm_buf_clear(out);
    return tfm_buf_printf(out, "%s-%" PRId64, prefix, step);
}

static int compare_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

tfm_status tfm_checkpoint_list(const char *prefix, int64_t **steps, size_t *n, tfm_error *err)
{
    *steps = NULL;
    *n = 0;
    const char *slash = strrchr(prefix, '/');
    char *dir = slash == prefix ? strdup("/") : slash ? strndup(prefix, (size_t)(slash - prefix))
                                                      : strdup(".");
    const char *base = slash ? slash + 1 : prefix;
    size_t base_len = strlen(base);
    if (!dir) return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    DIR *d = opendir(dir);
    if (!d) {
        tfm_status st = errno == ENOENT ? TFM_OK
                                        : tfm_error_set(err, TFM_ERR_IO, "cannot list %s: %s", dir,
                                                        strerror(errno));
        free(dir);
        return st;
    }
    size_t cap = 0;
    tfm_status st = TFM_OK;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        /* PREFIX-DIGITS exactly: not the temporary files of a write. */
        const char *name = e->d_name;
        if (strncmp(name, base, base_len) != 0 || name[base_len] != '-') continue;
        const char *digits = name + base_len + 1;
        size_t nd = strspn(digits, "0123456789");
        if (nd == 0 || nd > 18 || digits[nd] != 0) continue;
        if (*n == cap) {
            cap = cap ? 2 * cap : 16;
            int64_t *grown = realloc(*steps, cap * sizeof *grown);
            if (!grown) {
                st = tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
                break;
            }
            *steps = grown;
        }
        (*steps)[(*n)++] = strtoll(digits, NULL, 10);
    }
    closedir(d);
    free(dir);
    if (st != TFM_OK) {
        free(*steps);
        *steps = NULL;
        *n = 0;
        return st;
    }
    if (*n) qsort(*steps, *n, sizeof **steps, compare_i64);
    return TFM_OK;
}

/* True for the temporary file of a checkpoint write of a process that no
 * longer runs: PREFIX-DIGITS followed by something ending in ".PID". */
static bool stale_temporary(const char *name, const char *base, size_t base_len)
{
    if (strncmp(name, base, base_len) != 0 || name[base_len] != '-') return false;
    const char *rest = name + base_len + 1;
    size_t nd = strspn(rest, "0123456789");
    if (nd == 0 || rest[nd] != '.' || !strstr(rest + nd, "tmp")) return false;
    const char *dot = strrchr(rest + nd, '.');
    char *end;
    long pid = strtol(dot + 1, &end, 10);
    if (*end || pid <= 0 || pid == (long)getpid()) return false;
    return kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

/* Removes the temporary files that killed writers of prefix left. */
static tfm_status remove_stale(const char *prefix, tfm_error *err)
{
    const char *slash = strrchr(prefix, '/');
    char *dir = slash == prefix ? strdup("/") : slash ? strndup(prefix, (size_t)(slash - prefix))
                                                      : strdup(".");
    const char *base = slash ? slash + 1 : prefix;
    if (!dir) return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    DIR *d = opendir(dir);
    tfm_status st = TFM_OK;
    struct dirent *e;
    tfm_buf path;
    tfm_buf_init(&path);
    while (d && (e = readdir(d)) != NULL && st == TFM_OK) {
        if (!stale_temporary(e->d_name, base, strlen(base))) continue;
        tfm_buf_clear(&path);
        if (tfm_buf_printf(&path, "%s/%s", dir, e->d_name) != TFM_OK)
            st = tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
        else if (unlink(path.data) != 0 && errno != ENOENT)
            st = tfm_error_set(err, TFM_ERR_IO, "cannot remove %s: %s", path.data, strerror(errno));
    }
    if (d) closedir(d);
    tfm_buf_free(&path);
    free(dir);
    return st;
}

tfm_status tfm_checkpoint_prune(const char *prefix, int keep, tfm_error *err)
{
    if (keep < 1) return tfm_error_set(err, TFM_ERR_ARG, "keep is %d, expected 1 or more", keep);
    tfm_status st0 = remove_stale(prefix, err);
    if (st0 != TFM_OK) return st0;
    int64_t *steps;
    size_t n;
    tfm_status st = tfm_checkpoint_list(prefix, &steps, &n, err);
    if (st != TFM_OK) return st;
    tfm_buf path;
    tfm_buf_init(&path);
    for (size_t i = 0; i + (size_t)keep < n && st == TFM_OK; i++) {
        if (tfm_checkpoint_path(prefix, steps[i], &path) != TFM_OK)
            st = tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
        else if (unlink(path.data) != 0 && errno != ENOENT)
            st = tfm_error_set(err, TFM_ERR_IO, "cannot remove %s: %s", path.data, strerror(errno));
    }
    tfm_buf_free(&path);
    free(steps);
    return st;
}
