/* tfm/npz.h - NumPy .npz archives (lib/io/npz.c): the model files of Marian
 * (OPUS-MT), read member by member with every size checked.  This layer
 * knows nothing of Marian: it lists members and hands out their arrays.
 *
 * An .npz is a zip archive (numpy.savez, numpy.savez_compressed, or cnpy's
 * npz_save as Marian writes it) whose members are .npy records named
 * NAME.npy, each stored or deflated.  Members are known here by NAME, the
 * member's name without ".npy": "encoder_l1_self_Wq", "Wemb",
 * "special:model.yml".
 *
 * An archive is accepted only when: it is a zip archive whose central
 * directory agrees with itself; every member's name ends in ".npy" and no
 * name comes twice; every member is stored or deflated, not encrypted; and
 * no member claims more than TFM_NPZ_MAX_MEMBER bytes uncompressed or more
 * than TFM_NPZ_MAX_RATIO times its compressed size.  A member's data is
 * checked when it is read: its CRC-32, its deflate stream, its .npy header,
 * its dtype and shape, and that its length is what the header says.  Every
 * failure is TFM_ERR_FORMAT (or TFM_ERR_UNSUPPORTED for valid input this
 * reader does not take: a compression method or dtype) with a sentence
 * naming the member and what is wrong, without the file's name.
 *
 * Reading a Marian model:
 *
 *     tfm_npz *z;
 *     if (tfm_npz_open("model.npz", &z, &err) != TFM_OK) ...
 *     tfm_buf yml;                        // the model's configuration
 *     tfm_buf_init(&yml);
 *     tfm_npz_read_text(z, "special:model.yml", &yml, &err);
 *     tfm_tensor w;
 *     tfm_tensor_init(&w);
 *     int64_t shape[2] = {512, 512};
 *     tfm_npz_read_f32(z, "encoder_l1_self_Wq", 2, shape, &w, &err);
 *     for (size_t i = 0; i < tfm_npz_count(z); i++) ... tfm_npz_name(z, i) ...
 *     tfm_tensor_free(&w);
 *     tfm_buf_free(&yml);
 *     tfm_npz_free(z);
 */
#ifndef TFM_NPZ_H
#define TFM_NPZ_H

#include "tfm/core.h"
#include "tfm/io.h"

/* The largest member, uncompressed: 4 GiB.  A Marian big model's largest
 * tensor (the embeddings, 64k x 1024 floats) is 256 MiB. */
#define TFM_NPZ_MAX_MEMBER ((uint64_t)4 << 30)
/* The most a member may claim to grow by when inflated.  Deflate cannot do
 * better than about 1032:1 (a run of 258 bytes in a code of 2 bits), so a
 * larger claim is a lie about sizes, not a real member. */
#define TFM_NPZ_MAX_RATIO 1032
/* The most members an archive may hold: a Marian big model has some 250. */
#define TFM_NPZ_MAX_MEMBERS 65536
/* The most dimensions a tensor of an .npz may have: Marian's have 1 or 2. */
#define TFM_NPZ_MAX_NDIM 4

/* An opened archive: the central directory read and checked.  Reading a
 * member decompresses it, so one object is not for several threads at once;
 * what it hands out (names, tensors, buffers) may be shared freely. */
typedef struct tfm_npz tfm_npz;

/* Opens and checks the archive at path.  A regular file is mapped
 * read-only (files are replaced by rename, never rewritten in place);
 * anything else (a pipe) is read into memory.  TFM_ERR_IO (cannot open or
 * read; the message names path) or TFM_ERR_FORMAT / TFM_ERR_UNSUPPORTED
 * (the message says what is wrong, without the path). */
tfm_status tfm_npz_open(const char *path, tfm_npz **out, tfm_error *err);

/* The same checks on a whole archive held in memory (for tests and
 * fuzzing).  The object points into data, which must stay valid and
 * unchanged until tfm_npz_free. */
tfm_status tfm_npz_parse(const void *data, size_t size, tfm_npz **out, tfm_error *err);

void tfm_npz_free(tfm_npz *z);

/* The number of members, and the name of member i (i < count) without its
 * ".npy", in the order of the central directory.  Names live as long as z. */
size_t tfm_npz_count(const tfm_npz *z);
const char *tfm_npz_name(const tfm_npz *z, size_t i);

/* Looks a member up by name (without ".npy"): true and its number in
 * *index (may be NULL), or false. */
bool tfm_npz_find(const tfm_npz *z, const char *name, size_t *index);

/* The uncompressed size of member i, its .npy record whole, as the central
 * directory says (checked against the data when the member is read). */
uint64_t tfm_npz_member_size(const tfm_npz *z, size_t i);

/* The member called name, uncompressed: its .npy record whole, header and
 * data, replacing the contents of out.  Fails with TFM_ERR_FORMAT "missing
 * member 'x'", or when its data are corrupt (a bad deflate stream, a CRC
 * that does not match, fewer or more bytes than the directory says). */
tfm_status tfm_npz_read_bytes(tfm_npz *z, const char *name, tfm_buf *out, tfm_error *err);

/* The member called name as a tensor, whatever its shape: dtype '<f4'
 * (TFM_F32) or '<i4' (TFM_I32), C order, 0 .. TFM_NPZ_MAX_NDIM dimensions,
 * and data of exactly the size its shape says.  t is reshaped to it (its
 * buffer reused when large enough).  Another dtype (float16, float64,
 * big-endian, ...) or Fortran order is TFM_ERR_UNSUPPORTED, saying which. */
tfm_status tfm_npz_read(tfm_npz *z, const char *name, tfm_tensor *t, tfm_error *err);

/* As tfm_npz_read, checked against what the caller expects: float32 of
 * ndim dimensions of the given shape.  "tensor 'x' has shape (1, 512),
 * expected (512,)" and the like for dtype are TFM_ERR_FORMAT. */
tfm_status tfm_npz_read_f32(tfm_npz *z, const char *name, int ndim, const int64_t *shape,
                            tfm_tensor *t, tfm_error *err);

/* The member called name as text: a 1-d array of 1-byte elements ('|i1',
 * '|u1', '|b1', '|S1', with any byte-order character: cnpy writes '<i1')
 * holding the text's bytes, as Marian keeps its configuration in
 * "special:model.yml"; or a 0-d or 1-d array of strings '|S<n>', read as
 * their bytes one after the other.  The text ends at the first NUL (Marian writes one at
 * the end); any byte after it other than NUL is TFM_ERR_FORMAT.  Replaces
 * the contents of out with the text (out->len excludes the NUL; the text
 * holds no NUL).  Another dtype or a shape of more than one dimension is
 * TFM_ERR_FORMAT. */
tfm_status tfm_npz_read_text(tfm_npz *z, const char *name, tfm_buf *out, tfm_error *err);

#endif
