/* tfm/safetensors.h - safetensors files, the container of models and
 * checkpoints (DESIGN.md "File formats"): reading with every field checked,
 * and writing atomically.  This layer knows nothing of any model: it moves
 * named tensors and string metadata.
 *
 * The format (https://github.com/huggingface/safetensors):
 *
 *   N        8 bytes, little-endian unsigned: the length of the header
 *   HEADER   N bytes of UTF-8 JSON, an object:
 *              {"__metadata__": {"key": "value", ...},          (optional)
 *               "NAME": {"dtype": "F32", "shape": [2, 3],
 *                        "data_offsets": [BEGIN, END]}, ...}
 *   DATA     the tensors' bytes, little-endian, C order; BEGIN and END
 *            count from the start of DATA
 *
 * A file is accepted only if it keeps the rules of the reference
 * implementation: N is at most 100,000,000; the header is valid UTF-8 JSON
 * with no name twice; metadata values are strings; each tensor's END - BEGIN
 * is exactly its number of elements times its dtype's size; and the tensors,
 * ordered by offset, cover DATA exactly, each beginning where the one before
 * ends, the last ending at the end of the file.  Every failure is a sentence
 * naming the tensor and saying what was expected.
 *
 * Every dtype of the format is read and checked (BOOL, U8, I8, F8_E5M2,
 * F8_E4M3, F8_E8M0, F4, F6_E2M3, F6_E3M2, I16, U16, F16, BF16, I32, U32, F32,
 * C64, F64, I64, U64), so a file holding BF16 tensors still opens; asking for
 * the data of a tensor whose dtype is not F32, I32, I8 or BF16 is
 * TFM_ERR_UNSUPPORTED.
 *
 * Reading a model:
 *
 *     tfm_safetensors *f;
 *     if (tfm_safetensors_open("m.safetensors", &f, &err) != TFM_OK) ...
 *     const char *layers = tfm_safetensors_metadata(f, "n_layers");  // NULL if absent
 *     const float *w;
 *     int64_t shape[2] = {2048, 512};
 *     tfm_safetensors_get(f, "encoder.layers.0.fc1.weight", TFM_F32, 2, shape,
 *                         (const void **)&w, &err);   // w lives as long as f
 *     ...
 *     tfm_safetensors_check_all_used(f, &err);        // "unexpected tensor 'x'"
 *     tfm_safetensors_free(f);
 *
 * Writing one:
 *
 *     tfm_safetensors_writer *w = tfm_safetensors_writer_create();
 *     tfm_safetensors_writer_add_metadata(w, "n_layers", "6", &err);
 *     tfm_safetensors_writer_add_tensor(w, "encoder.layers.0.fc1.weight", TFM_F32,
 *                                       2, shape, weights, &err);
 *     tfm_safetensors_write(w, "m.safetensors", &err);  // atomic
 *     tfm_safetensors_writer_free(w);
 */
#ifndef TFM_SAFETENSORS_H
#define TFM_SAFETENSORS_H

#include <stdio.h>

#include "tfm/core.h"
#include "tfm/io.h"

/* The largest header we read or write: 16 MiB.  A model's header holds its
 * vocabulary (about 1 MB at 32k pieces) and a few hundred tensor entries,
 * so this leaves room for ten times that, while a hostile header cannot
 * make its parsed form cost gigabytes.  (The reference implementation
 * allows 100 MB; no model of ours comes near either.) */
#define TFM_SAFETENSORS_MAX_HEADER 16777216u
/* The most JSON values (numbers, strings, arrays, objects) a header may hold:
 * a base model's checkpoint has some 10,000.  cJSON spends some 64 bytes on
 * each, so the parsed header stays under 20 MB. */
#define TFM_SAFETENSORS_MAX_VALUES 262144u
/* The most dimensions a tensor may have (the format sets no limit; NumPy's
 * is 64). */
#define TFM_SAFETENSORS_MAX_NDIM 64

/* ---- reading ------------------------------------------------------------------ */

/* An opened file: the header parsed and checked, the data mapped (or held in
 * memory).  Tensors are numbered 0 .. count-1 in the order of their data in
 * the file.  _get and _read note which tensors were taken (and may keep an
 * aligned copy), so one object is not for several threads at once; the
 * pointers they return may be shared freely. */
typedef struct tfm_safetensors tfm_safetensors;

/* Opens and checks the file at path.  A regular file is mapped read-only
 * (MAP_PRIVATE), so a large model costs no copy and pages load as they are
 * used; anything else (a pipe) is read into memory.  Files are replaced by
 * rename (tfm_atomic_file), never rewritten in place, which is what makes
 * the mapping safe to keep.  Fails with TFM_ERR_IO (cannot open or read;
 * the message names path) or TFM_ERR_FORMAT (the message says what is
 * wrong, without the path). */
tfm_status tfm_safetensors_open(const char *path, tfm_safetensors **out, tfm_error *err);

/* The same checks on a whole file held in memory (for tests and fuzzing).
 * The object points into data, which must stay valid and unchanged until
 * tfm_safetensors_free. */
tfm_status tfm_safetensors_parse(const void *data, size_t size, tfm_safetensors **out,
                                 tfm_error *err);

void tfm_safetensors_free(tfm_safetensors *f);

/* Reads a file from fd, one that cannot be mapped (a pipe), whose first
 * `have` bytes the caller has read already (start; NULL when have is 0):
 * only as far as its header says, as tfm_safetensors_open reads a pipe. */
tfm_status tfm_safetensors_read_fd(int fd, const void *start, size_t have,
                                   tfm_safetensors **out, tfm_error *err);

/* The number of tensors, and the name of tensor i (i < count).  Names and
 * every other string returned here live as long as f. */
size_t tfm_safetensors_count(const tfm_safetensors *f);
const char *tfm_safetensors_name(const tfm_safetensors *f, size_t i);

/* Looks a tensor up by name: true and its number in *index (may be NULL),
 * or false.  Does not count as using it. */
bool tfm_safetensors_find(const tfm_safetensors *f, const char *name, size_t *index);

/* What the header says of one tensor. */
typedef struct tfm_safetensors_info {
    const char *name;
    const char *dtype_name; /* as in the file: "F32", "BF16", ... */
    bool supported;         /* the dtype is F32, I32, I8 or BF16, which the library reads */
    tfm_dtype dtype;        /* meaningful only when supported */
    int ndim;               /* 0 .. TFM_SAFETENSORS_MAX_NDIM */
    const int64_t *shape;   /* ndim dimensions */
    uint64_t nbytes;        /* the size of its data */
} tfm_safetensors_info;

/* Describes tensor i (i < count). */
void tfm_safetensors_info_at(const tfm_safetensors *f, size_t i, tfm_safetensors_info *out);

/* The data of the tensor called name, checked against what the caller
 * expects: dtype and a shape of ndim dimensions.  On success *data points to
 * numel elements, aligned for the dtype and valid as long as f (in the
 * mapping when the file places it aligned, else in a copy f owns), and the
 * tensor counts as used.  Failures: "missing tensor 'x'" and "tensor 'x' has
 * shape [2048, 512], expected [1024, 512]" (and the like for dtype) are
 * TFM_ERR_FORMAT; a tensor whose dtype the library does not read (BF16, ...)
 * is TFM_ERR_UNSUPPORTED; a copy that cannot be made is TFM_ERR_NOMEM. */
tfm_status tfm_safetensors_get(tfm_safetensors *f, const char *name, tfm_dtype dtype, int ndim,
                               const int64_t *shape, const void **data, tfm_error *err);

/* Copies the tensor called name, whatever its shape, into t (reshaped to
 * it), for callers that take a file's shapes as they come (averaging
 * checkpoints, inspecting).  Counts as using it.  A dtype other than F32 or
 * I32, or more than TFM_MAX_DIMS dimensions, is TFM_ERR_UNSUPPORTED. */
tfm_status tfm_safetensors_read(tfm_safetensors *f, const char *name, tfm_tensor *t,
                                tfm_error *err);

/* Fails with TFM_ERR_FORMAT "unexpected tensor 'x'" (and how many more)
 * when a tensor of the file was never taken by _get or _read: a model that
 * loads without looking at every tensor was likely built with other
 * settings than the file's. */
tfm_status tfm_safetensors_check_all_used(const tfm_safetensors *f, tfm_error *err);
/* Counts every tensor whose name begins with prefix as used, without
 * reading it: the part of a file that a reader knows and leaves (a
 * training checkpoint's optimizer state, for a program that translates). */
void tfm_safetensors_skip_prefixed(tfm_safetensors *f, const char *prefix);

/* Metadata.  A long value (64 KB or more: a model's vocabulary) is checked
 * and read the first time it is asked for, not at open, so that a program
 * that does not need it does not pay for it; a fault in it (invalid UTF-8,
 * a raw control byte, \u0000, a bad escape) is then reported by
 * tfm_safetensors_metadata_get, naming its byte in the header, while the
 * calls that return a pointer return NULL for it.  The first call for a
 * long value writes to f: calls on one file from several threads at once
 * must be serialised. */
bool tfm_safetensors_has_metadata(const tfm_safetensors *f, const char *key);
/* The metadata value of key in *value, NULL when the file has none
 * (TFM_OK); TFM_ERR_FORMAT when a long value is not what the format
 * allows. */
tfm_status tfm_safetensors_metadata_get(const tfm_safetensors *f, const char *key,
                                        const char **value, tfm_error *err);
/* The metadata value of key, or NULL when the file has none (or a long
 * value is faulty). */
const char *tfm_safetensors_metadata(const tfm_safetensors *f, const char *key);
/* Listing the metadata, in the order of the header: key and value of entry
 * i (i < metadata_count; a faulty long value is NULL). */
size_t tfm_safetensors_metadata_count(const tfm_safetensors *f);
const char *tfm_safetensors_metadata_key(const tfm_safetensors *f, size_t i);
const char *tfm_safetensors_metadata_value(const tfm_safetensors *f, size_t i);

/* ---- writing ------------------------------------------------------------------ */

/* Collects metadata and tensors, then writes them as one file: the header
 * (metadata first, then the tensors in the order they were added, with
 * contiguous offsets) padded with spaces to a multiple of 8 bytes as the
 * reference writer does, so that the data section starts 8-byte aligned. */
typedef struct tfm_safetensors_writer tfm_safetensors_writer;

/* NULL when memory runs out. */
tfm_safetensors_writer *tfm_safetensors_writer_create(void);
void tfm_safetensors_writer_free(tfm_safetensors_writer *w);
/* Pads the header to a multiple of 64 bytes instead, so that the data
 * section (and every tensor at a multiple of 64 in it) starts on a cache
 * line of a mapped file: for data read in place (a packed model's panels). */
void tfm_safetensors_writer_align_data(tfm_safetensors_writer *w);

/* Adds a metadata entry; key and value are copied.  Both must be valid
 * UTF-8 (TFM_ERR_UTF8) and the key new (TFM_ERR_ARG). */
tfm_status tfm_safetensors_writer_add_metadata(tfm_safetensors_writer *w, const char *key,
                                               const char *value, tfm_error *err);

/* Adds a tensor of dtype and shape (ndim 0 .. TFM_MAX_DIMS).  The name and
 * shape are copied; the data are NOT: data (numel * tfm_dtype_size bytes; may be NULL when
 * numel is 0) must stay valid and unchanged until the writer is freed.  The
 * name must be valid UTF-8, new, and not "__metadata__" (TFM_ERR_ARG or
 * TFM_ERR_UTF8); a bad shape is TFM_ERR_RANGE. */
tfm_status tfm_safetensors_writer_add_tensor(tfm_safetensors_writer *w, const char *name,
                                             tfm_dtype dtype, int ndim, const int64_t *shape,
                                             const void *data, tfm_error *err);

/* Writes the file to path atomically (tfm_atomic_file): readers see the old
 * file or the whole new one.  The writer is not changed and may write again. */
tfm_status tfm_safetensors_write(const tfm_safetensors_writer *w, const char *path,
                                 tfm_error *err);

/* Writes the same bytes to an open stream (not atomic; for pipes and tests). */
tfm_status tfm_safetensors_write_stream(const tfm_safetensors_writer *w, FILE *fp,
                                        tfm_error *err);

#endif
