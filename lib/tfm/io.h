/* tfm/io.h - reading lines without holding them back, NumPy .npy records and
 * tensor streams, and atomic file writes. */
#ifndef TFM_IO_H
#define TFM_IO_H

#include <stdio.h>

#include "tfm/core.h"

/* ---- lines ------------------------------------------------------------------ */

/* Reads '\n'-terminated lines from a file descriptor with its own buffer, so
 * that a program can ask whether another line is ready without blocking
 * (DESIGN.md: batching never holds a line back).  Lines are held whole in
 * memory, up to a length limit (TFM_LINES_MAX_LENGTH bytes unless set
 * otherwise), so memory stays bounded whatever the input; they may contain
 * NUL bytes; a final line without '\n' is still a line; a '\r' before the
 * '\n' is kept (it is data). */
typedef struct tfm_line_reader tfm_line_reader;

/* The reader does not own fd and never closes it. */
tfm_line_reader *tfm_lines_create(int fd);
void tfm_lines_free(tfm_line_reader *r);

/* 16 MiB: a sentence is rarely more than a few kilobytes. */
#define TFM_LINES_MAX_LENGTH ((size_t)16 << 20)
void tfm_lines_set_max_length(tfm_line_reader *r, size_t max_length);

/* Reads the next line into *line / *len (without the '\n'; the text is
 * NUL-terminated and valid until the next call).  Returns TFM_OK, TFM_EOF at
 * the end, or TFM_ERR_IO / TFM_ERR_NOMEM.  A line longer than the limit is
 * TFM_ERR_RANGE as soon as the limit is passed (as for the other errors, it
 * is line tfm_lines_number + 1); a caller that goes on gets the next line,
 * the rest of the long one being read past in chunks, never held. */
tfm_status tfm_lines_next(tfm_line_reader *r, const char **line, size_t *len,
                          tfm_error *err);

/* The lines tfm_lines_next would return next, without taking them: *block
 * points at *len bytes of whole lines (each with its '\n'; the last may
 * lack it at the end of the input), at most max_lines of them, and at least
 * one line (waiting for it), then no more than is ready without waiting or
 * than ends past max_bytes.  Valid until the next call; empty at the end of
 * the input or when the next line is longer than the limit. */
tfm_status tfm_lines_peek(tfm_line_reader *r, size_t max_lines, size_t max_bytes,
                          const char **block, size_t *len, tfm_error *err);

/* True when the next tfm_lines_next would return at once: a whole line is
 * buffered, the input has ended, or the descriptor has data ready now. */
bool tfm_lines_ready(tfm_line_reader *r);

/* The 1-based number of the line last returned. */
size_t tfm_lines_number(const tfm_line_reader *r);

/* ---- bounded reads ------------------------------------------------------------ */

/* Appends up to want bytes of fd to b (fewer only where the input ends),
 * retrying reads that a signal interrupts.  The buffer grows with what
 * arrives, not with what was asked for, so a bound of terabytes costs only
 * what the input really holds.  TFM_ERR_IO ("read error: ...") or
 * TFM_ERR_NOMEM. */
tfm_status tfm_read_upto(int fd, tfm_buf *b, uint64_t want, tfm_error *err);

/* ---- lock files ----------------------------------------------------------------- */

/* PATH.lock held (flock) while a process writes PATH, so that a second
 * process refuses at once; the kernel frees it when the holder ends, even
 * killed, so a lock left behind blocks nothing. */
typedef struct tfm_lock {
    int fd;
    char *path;   /* PATH.lock */
    bool held;
} tfm_lock;

/* Takes the lock of path: TFM_OK, or TFM_ERR_IO saying which process holds
 * it ("PATH is being written by another process (process 123 holds
 * PATH.lock) ...") or why PATH.lock cannot be made. */
tfm_status tfm_lock_take(tfm_lock *lock, const char *path, tfm_error *err);
/* Frees the lock (nothing when not held); remove: delete PATH.lock too,
 * once the work is done. */
void tfm_lock_release(tfm_lock *lock, bool remove);

/* ---- atomic files ------------------------------------------------------------- */

/* Writes a file so that readers see either the old file or the whole new
 * one: write to "PATH.tmp.PID", fsync, rename over PATH, fsync the folder. */
typedef struct tfm_atomic_file {
    FILE *fp;            /* write to this */
    char *path;
    char *tmp_path;
} tfm_atomic_file;

tfm_status tfm_atomic_open(tfm_atomic_file *f, const char *path, tfm_error *err);
/* Flushes, fsyncs and renames; on any failure removes the temporary file. */
tfm_status tfm_atomic_commit(tfm_atomic_file *f, tfm_error *err);
/* Abandons the write: removes the temporary file (safe after commit too). */
void tfm_atomic_abort(tfm_atomic_file *f);

/* ---- tensors and .npy ---------------------------------------------------------- */

typedef enum tfm_dtype {
    TFM_F32 = 0, /* '<f4' */
    TFM_I32 = 1, /* '<i4' */
    TFM_I8 = 2,  /* safetensors' I8 (quantized weights; not in .npy or tfm_tensor) */
    TFM_BF16 = 3, /* safetensors' BF16, the upper half of a float32 (the same) */
} tfm_dtype;

/* Bytes of one element: 4, 4, 1, 2. */
size_t tfm_dtype_size(tfm_dtype d);

#define TFM_MAX_DIMS 8

/* A dense C-order tensor.  data holds numel * 4 bytes and is owned by the
 * tensor (freed by tfm_tensor_free); cap is its allocated size in bytes, so
 * reading many records into one tensor reuses its memory. */
typedef struct tfm_tensor {
    tfm_dtype dtype;
    int ndim;
    int64_t shape[TFM_MAX_DIMS];
    void *data;
    size_t cap;
} tfm_tensor;

void tfm_tensor_init(tfm_tensor *t);
void tfm_tensor_free(tfm_tensor *t);
/* Sets dtype and shape and makes room for the data (contents undefined;
 * data is never NULL afterwards).  A bad shape (ndim outside 0..TFM_MAX_DIMS,
 * a negative dimension, more than 2^40 bytes) is TFM_ERR_RANGE, an unknown
 * dtype TFM_ERR_ARG. */
tfm_status tfm_tensor_reshape(tfm_tensor *t, tfm_dtype dtype, int ndim, const int64_t *shape);
int64_t tfm_tensor_numel(const tfm_tensor *t);
/* "(3, 512)" style, for messages. */
void tfm_tensor_shape_str(const tfm_tensor *t, char *out, size_t size);

/* Writes t as one .npy version 1.0 record (little-endian, C order, header
 * padded to a multiple of 64 bytes as numpy does). */
tfm_status tfm_npy_write(FILE *fp, const tfm_tensor *t, tfm_error *err);

/* Reads one .npy record (versions 1.0, 2.0 and 3.0 headers; dtypes '<f4' and
 * '<i4' only, C order only) into t.  Returns TFM_EOF when the stream ends
 * cleanly before a record; a record cut short, a bad magic string, a header
 * that does not parse, an unsupported dtype or a shape whose size overflows is
 * TFM_ERR_FORMAT / TFM_ERR_UNSUPPORTED with a message saying which.  On
 * failure t keeps its buffer and shape but its data are undefined. */
tfm_status tfm_npy_read(FILE *fp, tfm_tensor *t, tfm_error *err);

/* Parses a record held in memory (for fuzzing and tests): *used is set to the
 * number of bytes the record took. */
tfm_status tfm_npy_parse(const void *data, size_t size, tfm_tensor *t, size_t *used,
                         tfm_error *err);

/* The header of a record held in memory, as written, for readers of dtypes
 * that tfm_tensor does not hold (the text members of .npz archives): the
 * magic string, version and header dict are checked as tfm_npy_parse checks
 * them (an empty input is TFM_ERR_FORMAT here), but not the dtype, the
 * order or the shape's size.  data_offset is where the data start. */
typedef struct tfm_npy_header {
    char descr[32];       /* '<f4', '|i1', ... */
    bool fortran_order;
    int ndim;             /* 0 .. TFM_MAX_DIMS */
    int64_t shape[TFM_MAX_DIMS];
    size_t data_offset;
} tfm_npy_header;

tfm_status tfm_npy_header_parse(const void *data, size_t size, tfm_npy_header *h,
                                tfm_error *err);

/* A stream of records, one per sentence: counts records so that errors can
 * name the record ("record 12: ...", 1-based). */
typedef struct tfm_npy_stream {
    FILE *fp;
    size_t record;        /* records read or written so far */
    int64_t max_rows;     /* reading: 0, or keep only the first max_rows rows (first
                             dimension) of a record, reading past the rest unheld,
                             so that memory is bounded by what is kept */
    size_t max_bytes;     /* reading: 0, or refuse (TFM_ERR_RANGE, before reading its
                             data) a record that would keep more bytes than this */
    int64_t rows_in_file; /* after a read: the record's first dimension in the file
                             (more than the tensor's when it was cropped) */
} tfm_npy_stream;

/* Reads the next record; on error the message starts with "record N: ". */
tfm_status tfm_npy_stream_read(tfm_npy_stream *s, tfm_tensor *t, tfm_error *err);
tfm_status tfm_npy_stream_write(tfm_npy_stream *s, const tfm_tensor *t, tfm_error *err);
/* True when reading the next record will not wait for input that has not
 * come yet: bytes are buffered in s->fp, the stream has ended, or its file
 * descriptor has data (or an end) ready now. */
bool tfm_npy_stream_ready(const tfm_npy_stream *s);

#endif
