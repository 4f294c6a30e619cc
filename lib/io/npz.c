/* npz.c - NumPy .npz archives (tfm/npz.h describes the format and what is
 * checked), the model files of Marian.
 *
 * The zip container is read by libzip rather than minizip: libzip opens an
 * archive held in memory as easily as a file (zip_source_buffer_create),
 * which lets tfm_npz_open map the file once and the fuzzer hand its input
 * over without a temporary file; with ZIP_CHECKCONS it checks that the
 * central directory agrees with each member's local header; and it checks
 * each member's CRC-32 as the member is read to its end.  (minizip reads
 * memory only through hand-written I/O callbacks, and checks less.)  Deflate
 * is zlib's, under libzip.
 *
 * What libzip leaves to us: sizes a hostile directory may claim (a member of
 * terabytes, or a compression ratio that deflate cannot reach), duplicate
 * names (libzip finds the first and hides the other), and that a member
 * inflates to exactly the size the directory says: we read the size said,
 * then ask for one more byte, which must not come and which makes libzip
 * reach the end of the member and check its CRC.
 *
 * A tensor is read in two steps so that its data are inflated once, into
 * the tensor itself: first the start of the member (enough for any .npy
 * header), then, once the header has given the shape, the rest straight
 * into the tensor's buffer.  Fortran-order members (numpy writes them for a
 * column-major array) are transposed into C order. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zip.h>

#include "tfm/io.h"
#include "tfm/npz.h"

/* Tensors are handed out as they lie in the member, which is right only when
 * the machine's byte order is the format's ('<', little-endian). */
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "npz.c hands out data as they are in the file and so needs a little-endian machine"
#endif

#define NPY_SUFFIX ".npy"
#define NPY_SUFFIX_LEN 4
/* Enough of a member's start for any .npy header: the magic string, the
 * version and a 4-byte length (12 bytes), and the longest header npy.c
 * reads (64 KiB). */
#define NPZ_HEAD_BYTES (12 + 65536)
/* A deflated member may be this much larger than TFM_NPZ_MAX_RATIO times
 * its compressed size: the fixed cost of the smallest streams. */
#define NPZ_RATIO_SLACK 1024
/* Pieces in which a member's data are inflated. */
#define NPZ_READ_CHUNK ((size_t)1 << 20)
/* A file read from a pipe is held in memory: no more than this. */
#define NPZ_MAX_PIPE ((uint64_t)1 << 40)
/* Room for a shape in a message. */
#define NPZ_SHAPE_TEXT 128

typedef struct npz_member {
    char *name;          /* without ".npy" */
    zip_uint64_t index;  /* in the archive */
    uint64_t size;       /* uncompressed, as the directory says */
} npz_member;

struct tfm_npz {
    zip_t *za;
    void *map;           /* the file, mapped; or NULL */
    size_t map_size;
    tfm_buf owned;       /* the file read from a pipe */
    uint64_t archive_size;
    npz_member *members;
    size_t count;
    tfm_strmap *by_name; /* name -> position in members */
};

/* ---- opening ------------------------------------------------------------------- */

/* The words for a libzip error, as a sentence of ours. */
static tfm_status zip_failure(tfm_error *err, zip_error_t *ze, const char *what)
{
    int code = zip_error_code_zip(ze);
    const char *words = zip_error_strerror(ze);
    switch (code) {
    case ZIP_ER_MEMORY:
        return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory %s", what);
    case ZIP_ER_NOZIP:
        return tfm_error_set(err, TFM_ERR_FORMAT,
                             "not a zip archive: no end of central directory record was found");
    case ZIP_ER_MULTIDISK:
        return tfm_error_set(err, TFM_ERR_UNSUPPORTED,
                             "a zip archive split over several disks is not supported");
    case ZIP_ER_COMPNOTSUPP:
    case ZIP_ER_ENCRNOTSUPP:
    case ZIP_ER_NOPASSWD:
        return tfm_error_set(err, TFM_ERR_UNSUPPORTED, "%s: %s", what, words);
    case ZIP_ER_INCONS:
        return tfm_error_set(err, TFM_ERR_FORMAT,
                             "corrupt zip archive %s: %s (the central directory does not "
                             "agree with the members, or the archive is truncated)", what, words);
    case ZIP_ER_CRC:
        return tfm_error_set(err, TFM_ERR_FORMAT,
                             "corrupt data %s: the CRC-32 does not match the data", what);
    case ZIP_ER_ZLIB:
    case ZIP_ER_COMPRESSED_DATA:
        return tfm_error_set(err, TFM_ERR_FORMAT, "corrupt deflate stream %s: %s", what,
                             words);
    case ZIP_ER_EOF:
    case ZIP_ER_READ:
    case ZIP_ER_SEEK:
        return tfm_error_set(err, TFM_ERR_FORMAT, "truncated zip archive %s: %s", what, words);
    default:
        return tfm_error_set(err, TFM_ERR_FORMAT, "bad zip archive %s: %s", what, words);
    }
}

static const char *method_name(zip_int32_t m)
{
    switch (m) {
    case ZIP_CM_BZIP2: return "bzip2";
    case ZIP_CM_LZMA: return "LZMA";
    case ZIP_CM_XZ: return "xz";
    case 93: return "zstd";  /* ZIP_CM_ZSTD, newer than libzip 1.7 */
    default: return "an unknown method";
    }
}

/* Checks entry i of the open archive and adds it to z->members. */
static tfm_status add_member(tfm_npz *z, zip_uint64_t i, tfm_error *err)
{
    zip_stat_t st;
    zip_stat_init(&st);
    if (zip_stat_index(z->za, i, 0, &st) != 0)
        return zip_failure(err, zip_get_error(z->za), "reading the central directory");
    const zip_uint64_t need = ZIP_STAT_NAME | ZIP_STAT_SIZE | ZIP_STAT_COMP_SIZE |
                              ZIP_STAT_COMP_METHOD | ZIP_STAT_ENCRYPTION_METHOD;
    if ((st.valid & need) != need || !st.name)
        return tfm_error_set(err, TFM_ERR_FORMAT,
                             "member %" PRIu64 " of the central directory is incomplete",
                             (uint64_t)i + 1);
    size_t len = strlen(st.name);
    if (len < NPY_SUFFIX_LEN || strcmp(st.name + len - NPY_SUFFIX_LEN, NPY_SUFFIX) != 0)
        return tfm_error_set(err, TFM_ERR_FORMAT,
                             "member '%s' is not a .npy file: an .npz holds NAME.npy members "
                             "only", st.name);
    if (len == NPY_SUFFIX_LEN)
        return tfm_error_set(err, TFM_ERR_FORMAT, "member '.npy' has an empty name");
    if (st.encryption_method != ZIP_EM_NONE)
        return tfm_error_set(err, TFM_ERR_UNSUPPORTED,
                             "member '%s' is encrypted, which is not supported", st.name);
    if (st.comp_method != ZIP_CM_STORE && st.comp_method != ZIP_CM_DEFLATE)
        return tfm_error_set(err, TFM_ERR_UNSUPPORTED,
                             "member '%s' is compressed with %s (method %d): expected stored "
                             "or deflated", st.name, method_name(st.comp_method),
                             (int)st.comp_method);
    if (st.size > TFM_NPZ_MAX_MEMBER)
        return tfm_error_set(err, TFM_ERR_FORMAT,
                             "member '%s' claims %" PRIu64 " bytes uncompressed: more than the "
                             "%" PRIu64 " allowed", st.name, (uint64_t)st.size,
                             (uint64_t)TFM_NPZ_MAX_MEMBER);
    if (st.comp_size > z->archive_size)
        return tfm_error_set(err, TFM_ERR_FORMAT,
                             "member '%s' claims %" PRIu64 " compressed bytes in an archive of "
                             "%" PRIu64, st.name, (uint64_t)st.comp_size, z->archive_size);
    if (st.comp_method == ZIP_CM_STORE && st.size != st.comp_size)
        return tfm_error_set(err, TFM_ERR_FORMAT,
                             "member '%s' is stored (not compressed) but its sizes differ: %"
                             PRIu64 " bytes compressed, %" PRIu64 " uncompressed", st.name,
                             (uint64_t)st.comp_size, (uint64_t)st.size);
    if (st.comp_method == ZIP_CM_DEFLATE &&
        st.size > (uint64_t)st.comp_size * TFM_NPZ_MAX_RATIO + NPZ_RATIO_SLACK)
        return tfm_error_set(err, TFM_ERR_FORMAT,
                             "member '%s' claims %" PRIu64 " bytes from %" PRIu64 " deflated: "
                             "more than deflate's ratio of %d allows", st.name,
                             (uint64_t)st.size, (uint64_t)st.comp_size, TFM_NPZ_MAX_RATIO);

    size_t n = len - NPY_SUFFIX_LEN;
    bool inserted;
    int64_t *slot = tfm_strmap_upsert(z->by_name, st.name, n, (int64_t)z->count, &inserted);
    if (!slot) return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    if (!inserted)
        return tfm_error_set(err, TFM_ERR_FORMAT, "member '%s' comes twice in the archive",
                             st.name);
    npz_member *m = &z->members[z->count];
    m->name = malloc(n + 1);
    if (!m->name) return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    memcpy(m->name, st.name, n);
    m->name[n] = 0;
    m->index = i;
    m->size = st.size;
    z->count++;
    return TFM_OK;
}

/* Opens data[0..size) with libzip: the archive, or NULL and the error in
 * *ze. */
static zip_t *open_buffer(const void *data, size_t size, int flags, zip_error_t *ze)
{
    zip_source_t *src = zip_source_buffer_create(data, size, 0, ze);
    if (!src) return NULL;
    zip_t *za = zip_open_from_source(src, flags, ze);
    if (!za) zip_source_free(src);
    return za;
}

/* libzip's consistency check refuses a name that comes twice without saying
 * which: the archive is opened again without the check to name it. */
static tfm_status duplicate_failure(const void *data, size_t size, tfm_error *err)
{
    zip_error_t ze;
    zip_error_init(&ze);
    zip_t *za = open_buffer(data, size, ZIP_RDONLY, &ze);
    zip_error_fini(&ze);
    tfm_strmap *seen = tfm_strmap_create(16);
    zip_int64_t n = za ? zip_get_num_entries(za, 0) : 0;
    for (zip_int64_t i = 0; seen && i < n; i++) {
        const char *name = zip_get_name(za, (zip_uint64_t)i, 0);
        bool inserted = true;
        if (name && !tfm_strmap_upsert(seen, name, strlen(name), 0, &inserted)) break;
        if (name && !inserted) {
            tfm_error_set(err, TFM_ERR_FORMAT, "member '%s' comes twice in the archive", name);
            n = -1;
        }
    }
    tfm_strmap_free(seen);
    if (za) zip_discard(za);
    if (n < 0) return TFM_ERR_FORMAT;
    return tfm_error_set(err, TFM_ERR_FORMAT, "a member's name comes twice in the archive");
}

/* Opens the archive in data[0..size) into z, which is otherwise ready. */
static tfm_status parse_into(tfm_npz *z, const void *data, size_t size, tfm_error *err)
{
    if (size == 0)
        return tfm_error_set(err, TFM_ERR_FORMAT, "an empty file is not a zip archive");
    z->archive_size = size;
    zip_error_t ze;
    zip_error_init(&ze);
    z->za = open_buffer(data, size, ZIP_RDONLY | ZIP_CHECKCONS, &ze);
    if (!z->za) {
        tfm_status st = zip_error_code_zip(&ze) == ZIP_ER_EXISTS
                            ? duplicate_failure(data, size, err)
                            : zip_failure(err, &ze, "in its central directory");
        zip_error_fini(&ze);
        return st;
    }
    zip_error_fini(&ze);
    zip_int64_t n = zip_get_num_entries(z->za, 0);
    if (n < 0) return tfm_error_set(err, TFM_ERR_FORMAT, "the archive has no member list");
    if (n > TFM_NPZ_MAX_MEMBERS)
        return tfm_error_set(err, TFM_ERR_FORMAT,
                             "the archive has %" PRId64 " members: more than the %d allowed",
                             (int64_t)n, TFM_NPZ_MAX_MEMBERS);
    z->members = calloc(n > 0 ? (size_t)n : 1, sizeof *z->members);
    z->by_name = tfm_strmap_create((size_t)n);
    if (!z->members || !z->by_name) return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    for (zip_int64_t i = 0; i < n; i++) {
        tfm_status st = add_member(z, (zip_uint64_t)i, err);
        if (st != TFM_OK) return st;
    }
    return TFM_OK;
}

static tfm_npz *npz_new(void)
{
    tfm_npz *z = calloc(1, sizeof *z);
    if (z) tfm_buf_init(&z->owned);
    return z;
}

tfm_status tfm_npz_parse(const void *data, size_t size, tfm_npz **out, tfm_error *err)
{
    *out = NULL;
    tfm_npz *z = npz_new();
    if (!z) return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    tfm_status st = parse_into(z, data ? data : "", data ? size : 0, err);
    if (st != TFM_OK) {
        tfm_npz_free(z);
        return st;
    }
    *out = z;
    return TFM_OK;
}

tfm_status tfm_npz_open(const char *path, tfm_npz **out, tfm_error *err)
{
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return tfm_error_set(err, TFM_ERR_IO, "%s: %s", path, strerror(errno));
    tfm_npz *z = npz_new();
    if (!z) {
        close(fd);
        return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    }
    struct stat sb;
    tfm_status st = TFM_OK;
    if (fstat(fd, &sb) != 0) {
        st = tfm_error_set(err, TFM_ERR_IO, "%s: %s", path, strerror(errno));
    } else {
        if (S_ISREG(sb.st_mode) && sb.st_size > 0) {
            void *map = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
            if (map != MAP_FAILED) {
                z->map = map;
                z->map_size = (size_t)sb.st_size;
            }
        }
        /* A file that cannot be mapped (a pipe, a file system without mmap)
         * is read instead. */
        if (!z->map) {
            st = tfm_read_upto(fd, &z->owned, NPZ_MAX_PIPE, err);
            if (st == TFM_ERR_IO) tfm_error_prefix(err, "%s", path);
        }
    }
    close(fd);
    if (st == TFM_OK)
        st = z->map ? parse_into(z, z->map, z->map_size, err)
                    : parse_into(z, z->owned.data ? z->owned.data : "", z->owned.len, err);
    if (st != TFM_OK) {
        tfm_npz_free(z);
        return st;
    }
    *out = z;
    return TFM_OK;
}

void tfm_npz_free(tfm_npz *z)
{
    if (!z) return;
    /* zip_discard also frees the source, which does not own the data. */
    if (z->za) zip_discard(z->za);
    for (size_t i = 0; i < z->count; i++) free(z->members[i].name);
    free(z->members);
    tfm_strmap_free(z->by_name);
    if (z->map) munmap(z->map, z->map_size);
    tfm_buf_free(&z->owned);
    free(z);
}

/* ---- listing --------------------------------------------------------------------- */

size_t tfm_npz_count(const tfm_npz *z) { return z->count; }

const char *tfm_npz_name(const tfm_npz *z, size_t i)
{
    return i < z->count ? z->members[i].name : NULL;
}

bool tfm_npz_find(const tfm_npz *z, const char *name, size_t *index)
{
    int64_t *v = tfm_strmap_find(z->by_name, name, strlen(name));
    if (!v) return false;
    if (index) *index = (size_t)*v;
    return true;
}

uint64_t tfm_npz_member_size(const tfm_npz *z, size_t i)
{
    return i < z->count ? z->members[i].size : 0;
}

/* ---- reading a member ------------------------------------------------------------ */

/* A member being read: its entry and libzip's open file. */
typedef struct member_reader {
    const npz_member *m;
    zip_file_t *zf;
    uint64_t done;       /* bytes read so far */
    tfm_error *err;
} member_reader;

static tfm_status member_open(tfm_npz *z, const char *name, member_reader *r, tfm_error *err)
{
    memset(r, 0, sizeof *r);
    r->err = err;
    size_t i;
    if (!tfm_npz_find(z, name, &i))
        return tfm_error_set(err, TFM_ERR_FORMAT, "missing member '%s'", name);
    r->m = &z->members[i];
    r->zf = zip_fopen_index(z->za, r->m->index, 0);
    if (!r->zf) {
        char what[300];
        snprintf(what, sizeof what, "in member '%.256s'", name);
        return zip_failure(err, zip_get_error(z->za), what);
    }
    return TFM_OK;
}

static void member_close(member_reader *r)
{
    if (r->zf) zip_fclose(r->zf);
    r->zf = NULL;
}

/* The failure of a read from the member. */
static tfm_status member_failure(member_reader *r)
{
    char what[300];
    snprintf(what, sizeof what, "in member '%.256s'", r->m->name);
    return zip_failure(r->err, zip_file_get_error(r->zf), what);
}

/* Reads n bytes of the member into dst; fewer is a member shorter than the
 * directory says, or corrupt. */
static tfm_status member_read(member_reader *r, void *dst, size_t n)
{
    size_t have = 0;
    while (have < n) {
        size_t want = n - have < NPZ_READ_CHUNK ? n - have : NPZ_READ_CHUNK;
        zip_int64_t got = zip_fread(r->zf, (char *)dst + have, want);
        if (got < 0) return member_failure(r);
        if (got == 0)
            return tfm_error_set(r->err, TFM_ERR_FORMAT,
                                 "member '%s' is truncated: it ends after %" PRIu64 " bytes, "
                                 "the central directory says %" PRIu64, r->m->name,
                                 r->done + have, r->m->size);
        have += (size_t)got;
    }
    r->done += have;
    return TFM_OK;
}

/* After the last byte the directory says: the member must end there, and
 * reaching its end makes libzip check the CRC-32. */
static tfm_status member_finish(member_reader *r)
{
    char extra;
    zip_int64_t got = zip_fread(r->zf, &extra, 1);
    if (got < 0) return member_failure(r);
    if (got > 0)
        return tfm_error_set(r->err, TFM_ERR_FORMAT,
                             "member '%s' holds more than the %" PRIu64 " bytes the central "
                             "directory says", r->m->name, r->m->size);
    return TFM_OK;
}

/* After a header found bad: when the member's data are corrupt (a bad
 * deflate stream or CRC-32, found by reading on to its end), that is the
 * failure to report, since it made the header bad. */
static tfm_status member_blame_data(member_reader *r, char *scratch, size_t size,
                                    tfm_status st)
{
    if (st != TFM_ERR_FORMAT || !r->zf) return st;
    for (;;) {
        zip_int64_t got = zip_fread(r->zf, scratch, size);
        if (got < 0) return member_failure(r);
        if (got == 0) return st;
    }
}

tfm_status tfm_npz_read_bytes(tfm_npz *z, const char *name, tfm_buf *out, tfm_error *err)
{
    tfm_buf_clear(out);
    member_reader r;
    tfm_status st = member_open(z, name, &r, err);
    if (st != TFM_OK) return st;
    if (r.m->size > SIZE_MAX - 1 || tfm_buf_reserve(out, (size_t)r.m->size) != TFM_OK) {
        member_close(&r);
        return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory for member '%s' (%" PRIu64
                             " bytes)", name, r.m->size);
    }
    st = member_read(&r, out->data, (size_t)r.m->size);
    if (st == TFM_OK) st = member_finish(&r);
    member_close(&r);
    out->len = st == TFM_OK ? (size_t)r.m->size : 0;
    out->data[out->len] = 0;
    return st;
}

/* ---- the .npy header of a member ------------------------------------------------ */

/* Writes a shape as Python does, "(3, 4)", "(5,)", cut to fit. */
static void format_shape(int ndim, const int64_t *shape, char *out, size_t size)
{
    size_t pos = 0;
    out[0] = 0;
    for (int i = 0; i <= ndim && pos < size; i++) {
        int n = i == ndim ? snprintf(out + pos, size - pos, ndim == 1 ? ",)" : ")")
                          : snprintf(out + pos, size - pos, "%s%" PRId64, i ? ", " : "(",
                                     shape[i]);
        if (n < 0) break;
        pos += (size_t)n;
    }
}

/* The element size of a dtype that holds text ('|i1', '|S1', '|S100', ...),
 * or 0 for any other. */
static size_t text_element_size(const char *descr)
{
    const char *p = descr;
    if (*p == '|' || *p == '<' || *p == '>' || *p == '=') p++;
    if (strcmp(p, "i1") == 0 || strcmp(p, "u1") == 0 || strcmp(p, "b1") == 0) return 1;
    if (*p != 'S' || p[1] < '1' || p[1] > '9') return 0;
    char *end;
    errno = 0;
    unsigned long long n = strtoull(p + 1, &end, 10);
    if (*end != 0 || errno != 0 || n > TFM_NPZ_MAX_MEMBER) return 0;
    return (size_t)n;
}

/* Reads the start of member r (enough for any header) into
 * head[0 .. *head_len) and parses its header into h. */
static tfm_status member_header(member_reader *r, char *head, size_t *head_len,
                                tfm_npy_header *h)
{
    size_t n = r->m->size < NPZ_HEAD_BYTES ? (size_t)r->m->size : NPZ_HEAD_BYTES;
    tfm_status st = member_read(r, head, n);
    if (st != TFM_OK) return st;
    *head_len = n;
    st = tfm_npy_header_parse(head, n, h, r->err);
    if (st != TFM_OK) tfm_error_prefix(r->err, "member '%s'", r->m->name);
    return st;
}

/* Checks that h's shape of elements of elem bytes fills a member of size
 * bytes exactly after its header: *data_bytes gets that size. */
static tfm_status data_size(const char *name, uint64_t size, const tfm_npy_header *h,
                            size_t elem, size_t *data_bytes, tfm_error *err)
{
    char shape[NPZ_SHAPE_TEXT];
    format_shape(h->ndim, h->shape, shape, sizeof shape);
    uint64_t total = elem;
    for (int i = 0; i < h->ndim; i++) {
        if (h->shape[i] < 0)
            return tfm_error_set(err, TFM_ERR_FORMAT,
                                 "member '%s' has shape %s with a negative dimension", name,
                                 shape);
        if (h->shape[i] == 0) total = 0;
    }
    for (int i = 0; i < h->ndim && total > 0; i++) {
        if ((uint64_t)h->shape[i] > TFM_NPZ_MAX_MEMBER / total)
            return tfm_error_set(err, TFM_ERR_FORMAT,
                                 "member '%s' has shape %s of '%s': more data than its %" PRIu64
                                 " bytes", name, shape, h->descr, size);
        total *= (uint64_t)h->shape[i];
    }
    if ((uint64_t)h->data_offset + total != size)
        return tfm_error_set(err, TFM_ERR_FORMAT,
                             "member '%s' has shape %s of '%s', which needs %" PRIu64 " bytes "
                             "of data, but holds %" PRIu64, name, shape, h->descr, total,
                             size - (uint64_t)h->data_offset);
    *data_bytes = (size_t)total;
    return TFM_OK;
}

/* ---- tensors ------------------------------------------------------------------------ */

/* The library's dtype of a .npy descr, or a refusal saying why not. */
static tfm_status tensor_dtype(const member_reader *r, const char *descr, tfm_dtype *out)
{
    if (strcmp(descr, "<f4") == 0) *out = TFM_F32;
    else if (strcmp(descr, "<i4") == 0) *out = TFM_I32;
    else if (descr[0] == '>' && descr[1] != 0 && strcmp(descr + 1, "i1") != 0 &&
             strcmp(descr + 1, "u1") != 0)
        return tfm_error_set(r->err, TFM_ERR_UNSUPPORTED,
                             "member '%s' is big-endian ('%s'): expected little-endian float32 "
                             "('<f4') or int32 ('<i4')", r->m->name, descr);
    else
        return tfm_error_set(r->err, TFM_ERR_UNSUPPORTED,
                             "member '%s' has dtype '%s': expected float32 ('<f4') or int32 "
                             "('<i4')", r->m->name, descr);
    return TFM_OK;
}

/* Makes the C-order form of t's data, which hold a Fortran-order array of
 * t's shape (its first index varying fastest), using a copy. */
static tfm_status transpose_fortran(tfm_tensor *t, size_t bytes)
{
    if (t->ndim < 2 || bytes == 0) return TFM_OK;
    void *f = malloc(bytes);
    if (!f) return TFM_ERR_NOMEM;
    memcpy(f, t->data, bytes);
    const uint32_t *src = f;
    uint32_t *dst = t->data;
    int nd = t->ndim;
    /* Element (i0, ..., i{n-1}) is at i0 + s0 * (i1 + s1 * (...)) in
     * Fortran order; we walk the indices in C order and keep that offset. */
    int64_t idx[TFM_NPZ_MAX_NDIM] = {0}, stride[TFM_NPZ_MAX_NDIM];
    int64_t s = 1;
    for (int d = 0; d < nd; d++) {
        stride[d] = s;
        s *= t->shape[d];
    }
    size_t n = bytes / 4, off = 0;
    for (size_t k = 0; k < n; k++) {
        dst[k] = src[off];
        for (int d = nd - 1; d >= 0; d--) {
            if (++idx[d] < t->shape[d]) {
                off += (size_t)stride[d];
                break;
            }
            off -= (size_t)(stride[d] * (t->shape[d] - 1));
            idx[d] = 0;
        }
    }
    free(f);
    return TFM_OK;
}

tfm_status tfm_npz_read(tfm_npz *z, const char *name, tfm_tensor *t, tfm_error *err)
{
    member_reader r;
    tfm_status st = member_open(z, name, &r, err);
    if (st != TFM_OK) return st;
    char *head = malloc(NPZ_HEAD_BYTES);
    if (!head) {
        member_close(&r);
        return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    }
    tfm_npy_header h;
    size_t head_len = 0, bytes = 0;
    tfm_dtype dtype = TFM_F32;
    /* Each step runs only when those before it succeeded. */
    st = member_header(&r, head, &head_len, &h);
    if (st == TFM_OK) st = tensor_dtype(&r, h.descr, &dtype);
    if (st == TFM_OK && h.ndim > TFM_NPZ_MAX_NDIM)
        st = tfm_error_set(err, TFM_ERR_UNSUPPORTED,
                           "member '%s' has %d dimensions: at most %d are supported", name,
                           h.ndim, TFM_NPZ_MAX_NDIM);
    if (st == TFM_OK) st = data_size(name, r.m->size, &h, 4, &bytes, err);
    st = member_blame_data(&r, head, NPZ_HEAD_BYTES, st);
    if (st == TFM_OK && tfm_tensor_reshape(t, dtype, h.ndim, h.shape) != TFM_OK)
        st = tfm_error_set(err, TFM_ERR_NOMEM, "out of memory for member '%s' (%zu bytes)",
                           name, bytes);
    if (st == TFM_OK) {
        size_t in_head = head_len - h.data_offset;
        memcpy(t->data, head + h.data_offset, in_head);
        st = member_read(&r, (char *)t->data + in_head, bytes - in_head);
    }
    if (st == TFM_OK) st = member_finish(&r);
    if (st == TFM_OK && h.fortran_order && transpose_fortran(t, bytes) != TFM_OK)
        st = tfm_error_set(err, TFM_ERR_NOMEM, "out of memory to transpose member '%s'", name);
    member_close(&r);
    free(head);
    return st;
}

tfm_status tfm_npz_read_f32(tfm_npz *z, const char *name, int ndim, const int64_t *shape,
                            tfm_tensor *t, tfm_error *err)
{
    tfm_status st = tfm_npz_read(z, name, t, err);
    if (st != TFM_OK) return st;
    bool same = t->ndim == ndim;
    for (int i = 0; same && i < ndim; i++) same = t->shape[i] == shape[i];
    if (t->dtype != TFM_F32)
        return tfm_error_set(err, TFM_ERR_FORMAT, "tensor '%s' is int32, expected float32",
                             name);
    if (!same) {
        char have[NPZ_SHAPE_TEXT], want[NPZ_SHAPE_TEXT];
        tfm_tensor_shape_str(t, have, sizeof have);
        format_shape(ndim < 0 ? 0 : ndim > TFM_MAX_DIMS ? TFM_MAX_DIMS : ndim, shape, want,
                     sizeof want);
        return tfm_error_set(err, TFM_ERR_FORMAT, "tensor '%s' has shape %s, expected %s",
                             name, have, want);
    }
    return TFM_OK;
}

/* ---- text ------------------------------------------------------------------------------ */

tfm_status tfm_npz_read_text(tfm_npz *z, const char *name, tfm_buf *out, tfm_error *err)
{
    tfm_status st = tfm_npz_read_bytes(z, name, out, err);
    if (st != TFM_OK) return st;
    tfm_npy_header h;
    st = tfm_npy_header_parse(out->data, out->len, &h, err);
    if (st != TFM_OK) {
        tfm_error_prefix(err, "member '%s'", name);
        goto fail;
    }
    size_t elem = text_element_size(h.descr);
    if (elem == 0) {
        st = tfm_error_set(err, TFM_ERR_FORMAT,
                           "member '%s' has dtype '%s': expected text as bytes ('|i1', '|u1', "
                           "'|b1' or '|S1')", name, h.descr);
        goto fail;
    }
    if (h.ndim > 1) {
        char shape[NPZ_SHAPE_TEXT];
        format_shape(h.ndim, h.shape, shape, sizeof shape);
        st = tfm_error_set(err, TFM_ERR_FORMAT,
                           "member '%s' has shape %s: expected text as one dimension", name,
                           shape);
        goto fail;
    }
    size_t len;
    st = data_size(name, out->len, &h, elem, &len, err);
    if (st != TFM_OK) goto fail;
    const char *text = out->data + h.data_offset;
    const char *nul = memchr(text, 0, len);
    if (nul) {
        for (const char *p = nul; p < text + len; p++)
            if (*p != 0) {
                st = tfm_error_set(err, TFM_ERR_FORMAT,
                                   "member '%s' holds a NUL byte inside its text, at byte %zu",
                                   name, (size_t)(nul - text));
                goto fail;
            }
        len = (size_t)(nul - text);
    }
    memmove(out->data, text, len);
    out->len = len;
    out->data[len] = 0;
    return TFM_OK;
fail:
    tfm_buf_clear(out);
    return st;
}
