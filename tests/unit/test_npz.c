/* test_npz.c - NumPy .npz archives: the fixtures of tests/data/npz (made by
 * its make.py with numpy.savez, numpy.savez_compressed, Python's zipfile and
 * cnpy's layout) read member by member; Fortran order transposed; text
 * members; and every kind of bad archive refused with the right status and
 * a message that says what is wrong: not a zip, empty, truncated at every
 * length, every byte flipped, sizes that lie, a corrupt deflate stream, a
 * bad CRC, members that are not .npy, twice, of the wrong dtype or size. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "testutil.h"
#include "tfm/npz.h"

static const char yml_text[] =
    "type: transformer\n"
    "dim-emb: 4\n"
    "enc-depth: 1\n"
    "dec-depth: 1\n"
    "tied-embeddings-all: true\n"
    "transformer-heads: 2\n"
    "version: v1.12.0 65bf82ff 2023-02-21 09:56:29 -0800\n";

/* The values make.py gives every tensor, element i in C order. */
static float pattern(int64_t i) { return (float)i * 0.25f - 1.0f; }

static char fixture_dir[4096];

static const char *fixture(const char *name)
{
    static char path[8192];
    snprintf(path, sizeof path, "%s/%s", fixture_dir, name);
    return path;
}

/* The bytes of a fixture (malloc'd; exits when missing: nothing to test). */
static unsigned char *load(const char *name, size_t *size)
{
    FILE *fp = fopen(fixture(name), "rb");
    if (!fp) {
        printf("FAIL: cannot open %s\n", fixture(name));
        exit(1);
    }
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    unsigned char *data = malloc((size_t)n + 1);
    if (!data || fread(data, 1, (size_t)n, fp) != (size_t)n) exit(1);
    fclose(fp);
    *size = (size_t)n;
    return data;
}

static bool has_pattern(const tfm_tensor *t)
{
    int64_t n = tfm_tensor_numel(t);
    for (int64_t i = 0; i < n; i++)
        if (((const float *)t->data)[i] != pattern(i)) return false;
    return true;
}

static bool contains(const char *msg, const char *part) { return strstr(msg, part) != NULL; }

/* ---- good archives ------------------------------------------------------------- */

static void check_model_archive(tfm_npz *z, const char *what)
{
    static const char *const names[] = {"Wemb", "encoder_l1_self_Wq", "decoder_ff_logit_out_b",
                                        "ids", "scalar", "empty", "special:model.yml"};
    tfm_error err;
    CHECK_MSG(tfm_npz_count(z) == 7, "%s: %zu members", what, tfm_npz_count(z));
    for (size_t i = 0; i < 7 && i < tfm_npz_count(z); i++) {
        CHECK_MSG(strcmp(tfm_npz_name(z, i), names[i]) == 0, "%s: %s", what,
                  tfm_npz_name(z, i));
        size_t at = 99;
        CHECK(tfm_npz_find(z, names[i], &at) && at == i);
    }
    CHECK(tfm_npz_name(z, 7) == NULL);
    CHECK(!tfm_npz_find(z, "Wemb.npy", NULL));
    CHECK(!tfm_npz_find(z, "nothere", NULL));

    tfm_tensor t;
    tfm_tensor_init(&t);
    int64_t wemb[2] = {6, 4};
    CHECK_MSG(tfm_npz_read_f32(z, "Wemb", 2, wemb, &t, &err) == TFM_OK, "%s: %s", what, err.msg);
    CHECK(has_pattern(&t));
    int64_t wq[2] = {4, 4};
    CHECK(tfm_npz_read_f32(z, "encoder_l1_self_Wq", 2, wq, &t, &err) == TFM_OK && has_pattern(&t));
    int64_t b[2] = {1, 6};
    CHECK(tfm_npz_read_f32(z, "decoder_ff_logit_out_b", 2, b, &t, &err) == TFM_OK);
    CHECK(has_pattern(&t));
    CHECK(tfm_npz_read_f32(z, "scalar", 0, NULL, &t, &err) == TFM_OK && t.ndim == 0);
    CHECK(((float *)t.data)[0] == -1.0f);
    int64_t e[2] = {0, 4};
    CHECK(tfm_npz_read_f32(z, "empty", 2, e, &t, &err) == TFM_OK && tfm_tensor_numel(&t) == 0);
    CHECK(tfm_npz_read(z, "ids", &t, &err) == TFM_OK && t.dtype == TFM_I32 && t.ndim == 1);
    CHECK(t.shape[0] == 3 && ((int32_t *)t.data)[0] == 3 && ((int32_t *)t.data)[1] == -1);
    CHECK(((int32_t *)t.data)[2] == 7);

    /* what the caller did not expect */
    int64_t wrong[2] = {4, 6};
    CHECK(tfm_npz_read_f32(z, "Wemb", 2, wrong, &t, &err) == TFM_ERR_FORMAT);
    CHECK_MSG(contains(err.msg, "tensor 'Wemb' has shape (6, 4), expected (4, 6)"), "%s",
              err.msg);
    int64_t flat[1] = {6};
    CHECK(tfm_npz_read_f32(z, "decoder_ff_logit_out_b", 1, flat, &t, &err) == TFM_ERR_FORMAT);
    CHECK_MSG(contains(err.msg, "has shape (1, 6), expected (6,)"), "%s", err.msg);
    int64_t three[1] = {3};
    CHECK(tfm_npz_read_f32(z, "ids", 1, three, &t, &err) == TFM_ERR_FORMAT);
    CHECK_MSG(contains(err.msg, "int32, expected float32"), "%s", err.msg);
    CHECK(tfm_npz_read(z, "nothere", &t, &err) == TFM_ERR_FORMAT);
    CHECK_MSG(contains(err.msg, "missing member 'nothere'"), "%s", err.msg);
    CHECK(tfm_npz_read(z, "special:model.yml", &t, &err) == TFM_ERR_UNSUPPORTED);
    CHECK_MSG(contains(err.msg, "i1'") && contains(err.msg, "special:model.yml"), "%s",
              err.msg);

    tfm_buf buf;
    tfm_buf_init(&buf);
    CHECK_MSG(tfm_npz_read_text(z, "special:model.yml", &buf, &err) == TFM_OK, "%s: %s", what,
              err.msg);
    CHECK(buf.len == strlen(yml_text) && memcmp(buf.data, yml_text, buf.len) == 0);
    CHECK(tfm_npz_read_text(z, "Wemb", &buf, &err) == TFM_ERR_FORMAT && buf.len == 0);
    CHECK_MSG(contains(err.msg, "'<f4'") && contains(err.msg, "text"), "%s", err.msg);
    CHECK(tfm_npz_read_bytes(z, "Wemb", &buf, &err) == TFM_OK);
    CHECK(buf.len == tfm_npz_member_size(z, 0) && memcmp(buf.data, "\x93NUMPY", 6) == 0);
    tfm_npy_header h;
    CHECK(tfm_npy_header_parse(buf.data, buf.len, &h, &err) == TFM_OK);
    CHECK(buf.len == h.data_offset + 6 * 4 * 4);
    CHECK(h.data_offset == (strcmp(what, "cnpy.npz") == 0 ? 80 : 128));
    tfm_buf_free(&buf);
    tfm_tensor_free(&t);
}

static void test_good_archives(void)
{
    static const char *const files[] = {"savez.npz", "savez_compressed.npz", "deflated.npz",
                                        "cnpy.npz"};
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        tfm_error err;
        tfm_npz *z = NULL;
        CHECK_MSG(tfm_npz_open(fixture(files[f]), &z, &err) == TFM_OK, "%s: %s", files[f],
                  err.msg);
        if (z) check_model_archive(z, files[f]);
        tfm_npz_free(z);
        size_t size;
        unsigned char *data = load(files[f], &size);
        z = NULL;
        CHECK_MSG(tfm_npz_parse(data, size, &z, &err) == TFM_OK, "%s: %s", files[f], err.msg);
        if (z) check_model_archive(z, files[f]);
        tfm_npz_free(z);
        free(data);
    }
    tfm_npz_free(NULL);
}

/* A file that cannot be mapped is read: a pipe, through /proc/self/fd. */
static void test_open_pipe(void)
{
    size_t size;
    unsigned char *data = load("savez_compressed.npz", &size);
    int fds[2];
    CHECK(size < 65536 && pipe(fds) == 0);
    CHECK(write(fds[1], data, size) == (ssize_t)size);
    close(fds[1]);
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fds[0]);
    tfm_npz *z = NULL;
    tfm_error err;
    CHECK_MSG(tfm_npz_open(path, &z, &err) == TFM_OK, "%s", err.msg);
    if (z) check_model_archive(z, "pipe");
    tfm_npz_free(z);
    close(fds[0]);
    free(data);
}

static void test_fortran_order(void)
{
    tfm_npz *z = NULL;
    tfm_error err;
    CHECK_MSG(tfm_npz_open(fixture("fortran.npz"), &z, &err) == TFM_OK, "%s", err.msg);
    if (!z) return;
    tfm_tensor t;
    tfm_tensor_init(&t);
    int64_t s2[2] = {3, 4}, s3[3] = {2, 3, 4}, s4[4] = {2, 1, 3, 2};
    CHECK(tfm_npz_read_f32(z, "f2", 2, s2, &t, &err) == TFM_OK && has_pattern(&t));
    CHECK(tfm_npz_read_f32(z, "f3", 3, s3, &t, &err) == TFM_OK && has_pattern(&t));
    CHECK(tfm_npz_read_f32(z, "f4", 4, s4, &t, &err) == TFM_OK && has_pattern(&t));
    tfm_tensor_free(&t);
    tfm_npz_free(z);
}

static void test_text_members(void)
{
    tfm_npz *z = NULL;
    tfm_error err;
    CHECK_MSG(tfm_npz_open(fixture("text.npz"), &z, &err) == TFM_OK, "%s", err.msg);
    if (!z) return;
    tfm_buf b;
    tfm_buf_init(&b);
    static const char *const good[] = {"u1", "S1", "S0d"};
    for (int i = 0; i < 3; i++) {
        CHECK_MSG(tfm_npz_read_text(z, good[i], &b, &err) == TFM_OK, "%s: %s", good[i],
                  err.msg);
        CHECK_MSG(b.len == 5 && strcmp(b.data, "hello") == 0, "%s", good[i]);
    }
    CHECK(tfm_npz_read_text(z, "nul_inside", &b, &err) == TFM_ERR_FORMAT);
    CHECK_MSG(contains(err.msg, "NUL byte inside its text, at byte 2"), "%s", err.msg);
    CHECK(tfm_npz_read_text(z, "two_d", &b, &err) == TFM_ERR_FORMAT);
    CHECK_MSG(contains(err.msg, "shape (2, 3)") && contains(err.msg, "one dimension"), "%s",
              err.msg);
    CHECK(tfm_npz_read_text(z, "f4", &b, &err) == TFM_ERR_FORMAT);
    CHECK(tfm_npz_read_text(z, "nothere", &b, &err) == TFM_ERR_FORMAT);
    CHECK_MSG(contains(err.msg, "missing member 'nothere'"), "%s", err.msg);
    tfm_buf_free(&b);
    tfm_npz_free(z);
}

/* ---- bad archives ----------------------------------------------------------------- */

/* Opening name fails with status and a message holding part. */
static void check_open_fails(const char *name, tfm_status status, const char *part)
{
    tfm_npz *z = (tfm_npz *)1;
    tfm_error err;
    tfm_status st = tfm_npz_open(fixture(name), &z, &err);
    CHECK_MSG(st == status && z == NULL, "%s: status %d: %s", name, (int)st, err.msg);
    CHECK_MSG(st == TFM_OK || contains(err.msg, part), "%s: '%s' lacks '%s'", name, err.msg,
              part);
}

/* Reading member of name fails with status and a message holding part. */
static void check_read_fails(const char *name, const char *member, tfm_status status,
                             const char *part)
{
    tfm_npz *z = NULL;
    tfm_error err;
    CHECK_MSG(tfm_npz_open(fixture(name), &z, &err) == TFM_OK, "%s: %s", name, err.msg);
    if (!z) return;
    tfm_tensor t;
    tfm_tensor_init(&t);
    tfm_status st = tfm_npz_read(z, member, &t, &err);
    CHECK_MSG(st == status, "%s %s: status %d: %s", name, member, (int)st, err.msg);
    CHECK_MSG(st == TFM_OK || contains(err.msg, part), "%s %s: '%s' lacks '%s'", name, member,
              err.msg, part);
    tfm_tensor_free(&t);
    tfm_npz_free(z);
}

static void test_bad_members(void)
{
    check_open_fails("not_npy.npz", TFM_ERR_FORMAT, "member 'README.txt' is not a .npy file");
    check_open_fails("duplicate.npz", TFM_ERR_FORMAT, "member 'Wemb.npy' comes twice");
    check_open_fails("bzip2.npz", TFM_ERR_UNSUPPORTED, "compressed with bzip2");
    check_read_fails("bad_header.npz", "x", TFM_ERR_FORMAT, "member 'x': header does not parse");
    check_read_fails("dtypes.npz", "f8", TFM_ERR_UNSUPPORTED, "dtype '<f8'");
    check_read_fails("dtypes.npz", "f2", TFM_ERR_UNSUPPORTED, "dtype '<f2'");
    check_read_fails("dtypes.npz", "i8", TFM_ERR_UNSUPPORTED, "dtype '<i8'");
    check_read_fails("dtypes.npz", "big", TFM_ERR_UNSUPPORTED, "big-endian ('>f4')");
    check_read_fails("dtypes.npz", "five_d", TFM_ERR_UNSUPPORTED,
                     "5 dimensions: at most 4 are supported");
    check_read_fails("dtypes.npz", "good", TFM_OK, "");
    check_read_fails("bad_size.npz", "short", TFM_ERR_FORMAT,
                     "shape (3, 4) of '<f4', which needs 48 bytes of data, but holds 40");
    check_read_fails("bad_size.npz", "long", TFM_ERR_FORMAT, "but holds 52");
}

static void test_not_a_zip(void)
{
    tfm_npz *z = (tfm_npz *)1;
    tfm_error err;
    CHECK(tfm_npz_parse("", 0, &z, &err) == TFM_ERR_FORMAT && z == NULL);
    CHECK_MSG(contains(err.msg, "an empty file is not a zip archive"), "%s", err.msg);
    CHECK(tfm_npz_parse(NULL, 0, &z, &err) == TFM_ERR_FORMAT);
    const char text[] = "type: transformer\ndim-emb: 512\n";
    CHECK(tfm_npz_parse(text, sizeof text - 1, &z, &err) == TFM_ERR_FORMAT);
    CHECK_MSG(contains(err.msg, "not a zip archive"), "%s", err.msg);
    /* a lone .npy record */
    size_t size;
    unsigned char *data = load("savez.npz", &size);
    CHECK(tfm_npz_parse(data + 30 + 8, 200, &z, &err) == TFM_ERR_FORMAT);
    free(data);

    /* files */
    const char *empty = tmp_path("empty.npz");
    FILE *fp = fopen(empty, "wb");
    CHECK(fp != NULL);
    if (fp) fclose(fp);
    CHECK(tfm_npz_open(empty, &z, &err) == TFM_ERR_FORMAT);
    CHECK_MSG(contains(err.msg, "empty"), "%s", err.msg);
    const char *missing = tmp_path("nothere.npz");
    CHECK(tfm_npz_open(missing, &z, &err) == TFM_ERR_IO && z == NULL);
    CHECK_MSG(contains(err.msg, missing) && contains(err.msg, "No such file"), "%s", err.msg);
    CHECK(tfm_npz_open(test_tmpdir, &z, &err) == TFM_ERR_IO);
}

/* Opens data and reads every member every way, as a program would; true
 * when all of it worked.  A failure must carry a message. */
static bool read_everything(const unsigned char *data, size_t size, char *msg, size_t msg_size)
{
    tfm_npz *z = NULL;
    tfm_error err;
    err.msg[0] = 0;
    bool ok = true;
    tfm_status st = tfm_npz_parse(data, size, &z, &err);
    if (st != TFM_OK) {
        CHECK_MSG(err.status == st && err.msg[0] != 0 && z == NULL, "status %d", (int)st);
        snprintf(msg, msg_size, "%s", err.msg);
        return false;
    }
    tfm_tensor t;
    tfm_tensor_init(&t);
    tfm_buf b;
    tfm_buf_init(&b);
    for (size_t i = 0; i < tfm_npz_count(z); i++) {
        const char *name = tfm_npz_name(z, i);
        tfm_status s1 = tfm_npz_read(z, name, &t, &err);
        if (s1 != TFM_OK && s1 != TFM_ERR_UNSUPPORTED) {
            ok = false;
            snprintf(msg, msg_size, "%s", err.msg);
        }
        if (s1 == TFM_OK) CHECK((size_t)tfm_tensor_numel(&t) * 4 <= t.cap || t.cap == 4);
        tfm_status s2 = tfm_npz_read_bytes(z, name, &b, &err);
        if (s2 != TFM_OK) {
            ok = false;
            CHECK_MSG(err.msg[0] != 0, "no message");
        } else {
            CHECK(b.len == tfm_npz_member_size(z, i));
        }
        tfm_status s3 = tfm_npz_read_text(z, name, &b, &err);
        CHECK(s3 == TFM_OK || err.msg[0] != 0);
    }
    tfm_buf_free(&b);
    tfm_tensor_free(&t);
    tfm_npz_free(z);
    return ok;
}

/* Every prefix of an archive: a zip's directory is at its end, so each
 * must fail to open, with a message. */
static void test_truncated(void)
{
    static const char *const files[] = {"savez.npz", "savez_compressed.npz", "cnpy.npz"};
    for (size_t f = 0; f < 3; f++) {
        size_t size;
        unsigned char *data = load(files[f], &size);
        char msg[512];
        size_t opened = 0;
        for (size_t n = 0; n < size; n++) {
            unsigned char *copy = malloc(n + 1);  /* exactly n bytes for ASan */
            memcpy(copy, data, n);
            if (read_everything(copy, n, msg, sizeof msg)) opened++;
            free(copy);
        }
        CHECK_MSG(opened == 0, "%s: %zu truncations read", files[f], opened);
        CHECK(read_everything(data, size, msg, sizeof msg));
        free(data);
    }
}

/* Every byte of an archive flipped in turn: no crash, no read past the
 * end, every failure with a message (the sanitizer build watches). */
static void test_every_byte_flipped(void)
{
    static const char *const files[] = {"savez_compressed.npz", "cnpy.npz"};
    for (size_t f = 0; f < 2; f++) {
        size_t size;
        unsigned char *data = load(files[f], &size);
        char msg[512];
        size_t failed = 0;
        for (size_t i = 0; i < size; i++) {
            data[i] ^= 0xff;
            if (!read_everything(data, size, msg, sizeof msg)) failed++;
            data[i] ^= 0xff;
        }
        /* Most bytes are checked by something (CRC, directory, header);
         * the dates, the version fields, and padding are not. */
        CHECK_MSG(failed > size / 2, "%s: only %zu of %zu flips detected", files[f], failed,
                  size);
        free(data);
    }
}

static uint32_t get32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint16_t get16(const unsigned char *p) { return (uint16_t)(p[0] | p[1] << 8); }
static void put32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

/* The central directory entry of the first member of a small archive. */
static unsigned char *first_central(unsigned char *data, size_t size)
{
    unsigned char *eocd = data + size - 22;
    if (get32(eocd) != 0x06054b50) return NULL;
    return data + get32(eocd + 16);
}

/* Opens data (which must open) and reads member name: its status, and the
 * message in err. */
static tfm_status read_member(const unsigned char *data, size_t size, const char *name,
                              tfm_error *err)
{
    tfm_npz *z = NULL;
    tfm_status st = tfm_npz_parse(data, size, &z, err);
    if (st != TFM_OK) return st;
    tfm_tensor t;
    tfm_tensor_init(&t);
    st = tfm_npz_read(z, name, &t, err);
    tfm_tensor_free(&t);
    tfm_npz_free(z);
    return st;
}

static void test_corrupt_data(void)
{
    size_t size;
    tfm_error err;
    /* a corrupt deflate stream: the first member's data mangled */
    unsigned char *data = load("deflated.npz", &size);
    size_t local = 0, start = 30 + get16(data + local + 26) + get16(data + local + 28);
    memset(data + start + 2, 0xff, 6);
    tfm_status st = read_member(data, size, "Wemb", &err);
    CHECK_MSG(st == TFM_ERR_FORMAT && contains(err.msg, "Wemb") &&
              (contains(err.msg, "deflate") || contains(err.msg, "CRC")), "%d: %s", (int)st,
              err.msg);
    free(data);

    /* a stored member with a changed byte: its CRC-32 no longer matches */
    data = load("cnpy.npz", &size);
    start = 30 + get16(data + 26) + get16(data + 28);
    data[start + 80 + 5] ^= 0x10;
    st = read_member(data, size, "Wemb", &err);
    CHECK_MSG(st == TFM_ERR_FORMAT && contains(err.msg, "member 'Wemb'") &&
              contains(err.msg, "CRC-32 does not match"), "%d: %s", (int)st, err.msg);
    free(data);
}

/* Sizes that lie, in the central directory and the local header alike (so
 * that libzip's consistency check passes and ours must catch them). */
static void test_lying_sizes(void)
{
    size_t size;
    tfm_error err;
    unsigned char *data = load("deflated.npz", &size);
    unsigned char *cd = first_central(data, size);
    CHECK(cd && get32(cd) == 0x02014b50);
    if (!cd) return;
    uint32_t comp = get32(cd + 20), real = get32(cd + 24);
    tfm_npz *z = NULL;

    /* a ratio no deflate stream reaches */
    put32(cd + 24, comp * 2000);
    put32(data + 22, comp * 2000);
    tfm_status st = tfm_npz_parse(data, size, &z, &err);
    CHECK_MSG(st == TFM_ERR_FORMAT && contains(err.msg, "more than deflate's ratio") &&
              contains(err.msg, "Wemb.npy"), "%d: %s", (int)st, err.msg);
    /* one byte more than the stream holds */
    put32(cd + 24, real + 1);
    put32(data + 22, real + 1);
    st = read_member(data, size, "Wemb", &err);
    CHECK_MSG(st == TFM_ERR_FORMAT && contains(err.msg, "Wemb"), "%d: %s", (int)st, err.msg);
    /* one byte less */
    put32(cd + 24, real - 1);
    put32(data + 22, real - 1);
    st = read_member(data, size, "Wemb", &err);
    CHECK_MSG(st == TFM_ERR_FORMAT && contains(err.msg, "Wemb"), "%d: %s", (int)st, err.msg);
    /* the directory alone lies: the local header disagrees */
    put32(data + 22, real);
    put32(cd + 24, real + 100);
    st = read_member(data, size, "Wemb", &err);
    CHECK_MSG(st == TFM_ERR_FORMAT, "%d: %s", (int)st, err.msg);
    /* a compressed size past the end of the archive */
    put32(cd + 24, real);
    put32(cd + 20, (uint32_t)size * 2);
    st = read_member(data, size, "Wemb", &err);
    CHECK_MSG(st == TFM_ERR_FORMAT, "%d: %s", (int)st, err.msg);
    put32(cd + 20, comp);
    CHECK(read_member(data, size, "Wemb", &err) == TFM_OK);
    free(data);

    /* stored, with sizes that differ */
    data = load("cnpy.npz", &size);
    cd = first_central(data, size);
    real = get32(cd + 24);
    put32(cd + 24, real + 8);
    put32(data + 22, real + 8);
    st = tfm_npz_parse(data, size, &z, &err);
    CHECK_MSG(st == TFM_ERR_FORMAT && contains(err.msg, "stored"), "%d: %s", (int)st, err.msg);
    free(data);
}

int main(void)
{
    const char *root = getenv("ROOT");
    snprintf(fixture_dir, sizeof fixture_dir, "%s/tests/data/npz", root ? root : ".");
    test_tmpdir_init("test_npz");
    RUN(test_good_archives);
    RUN(test_open_pipe);
    RUN(test_fortran_order);
    RUN(test_text_members);
    RUN(test_bad_members);
    RUN(test_not_a_zip);
    RUN(test_truncated);
    RUN(test_every_byte_flipped);
    RUN(test_corrupt_data);
    RUN(test_lying_sizes);
    test_tmpdir_cleanup();
    CHECK_DONE();
}
