/* test_lines.c - the line reader: long lines and the length limit, NUL
 * bytes, a last line without a newline, empty lines, and knowing when a line
 * is ready without blocking. */
#include <fcntl.h>
#include <unistd.h>

#include "check.h"
#include "tfm.h"

/* Writes data into a pipe from a child process and returns the read end. */
static int pipe_with(const char *data, size_t len)
{
    int fds[2];
    if (pipe(fds) != 0) return -1;
    if (fork() == 0) {
        close(fds[0]);
        size_t done = 0;
        while (done < len) {
            ssize_t n = write(fds[1], data + done, len - done);
            if (n <= 0) _exit(1);
            done += (size_t)n;
        }
        _exit(0);
    }
    close(fds[1]);
    return fds[0];
}

static void test_lines_basic(void)
{
    const char data[] = "one\n\ntwo\0zero\r\nlast";
    int fd = pipe_with(data, sizeof data - 1);
    tfm_line_reader *r = tfm_lines_create(fd);
    const char *line;
    size_t len;
    tfm_error err;
    CHECK(tfm_lines_next(r, &line, &len, &err) == TFM_OK && len == 3 && !memcmp(line, "one", 3));
    CHECK(tfm_lines_next(r, &line, &len, &err) == TFM_OK && len == 0 && line[0] == 0);
    CHECK(tfm_lines_next(r, &line, &len, &err) == TFM_OK && len == 9);
    CHECK(memcmp(line, "two\0zero\r", 9) == 0);
    CHECK(tfm_lines_next(r, &line, &len, &err) == TFM_OK && len == 4 && !strcmp(line, "last"));
    CHECK(tfm_lines_number(r) == 4);
    CHECK(tfm_lines_next(r, &line, &len, &err) == TFM_EOF);
    CHECK(tfm_lines_next(r, &line, &len, &err) == TFM_EOF);
    tfm_lines_free(r);
    close(fd);
}

static void test_lines_long(void)
{
    /* Three lines of 3 MB, 0 and 200 kB: far beyond the read chunk. */
    size_t big = 3u << 20, mid = 200000;
    size_t total = big + 1 + 1 + mid + 1;
    char *data = malloc(total);
    for (size_t i = 0; i < big; i++) data[i] = (char)('a' + i % 26);
    data[big] = '\n';
    data[big + 1] = '\n';
    memset(data + big + 2, 'z', mid);
    data[total - 1] = '\n';
    int fd = pipe_with(data, total);
    tfm_line_reader *r = tfm_lines_create(fd);
    const char *line;
    size_t len;
    tfm_error err;
    CHECK(tfm_lines_next(r, &line, &len, &err) == TFM_OK && len == big);
    CHECK(memcmp(line, data, big) == 0 && line[big] == 0);
    CHECK(tfm_lines_next(r, &line, &len, &err) == TFM_OK && len == 0);
    CHECK(tfm_lines_next(r, &line, &len, &err) == TFM_OK && len == mid && line[mid - 1] == 'z');
    CHECK(tfm_lines_next(r, &line, &len, &err) == TFM_EOF);
    tfm_lines_free(r);
    close(fd);
    free(data);
}

/* A line over the limit is an error at once, naming its number, with
 * memory bounded; reading goes on with the next line. */
static void test_lines_limit(void)
{
    size_t big = 3u << 20, last = 2u << 20;
    size_t total = big + 1 + 3 + last;
    char *data = malloc(total);
    memset(data, 'x', total);
    data[big] = '\n';
    memcpy(data + big + 1, "ok\n", 3);
    int fd = pipe_with(data, total);
    tfm_line_reader *r = tfm_lines_create(fd);
    tfm_lines_set_max_length(r, 1u << 20);
    const char *line;
    size_t len;
    tfm_error err;
    /* the failing line is number + 1, as for every error */
    CHECK(tfm_lines_next(r, &line, &len, &err) == TFM_ERR_RANGE && tfm_lines_number(r) == 0);
    CHECK_MSG(strstr(err.msg, "the line is longer than 1048576 bytes"), "%s", err.msg);
    CHECK(tfm_lines_next(r, &line, &len, &err) == TFM_OK && len == 2 && !strcmp(line, "ok"));
    CHECK(tfm_lines_number(r) == 2);
    /* the last line, without '\n', is too long as well */
    CHECK(tfm_lines_next(r, &line, &len, &err) == TFM_ERR_RANGE && tfm_lines_number(r) == 2);
    CHECK(tfm_lines_next(r, &line, &len, &err) == TFM_EOF && tfm_lines_number(r) == 3);
    tfm_lines_free(r);
    close(fd);
    free(data);

    /* input without end and without a newline: the error comes all the same */
    fd = open("/dev/zero", O_RDONLY);
    r = tfm_lines_create(fd);
    CHECK(tfm_lines_next(r, &line, &len, &err) == TFM_ERR_RANGE && tfm_lines_number(r) == 0);
    CHECK_MSG(strstr(err.msg, "longer than 16777216 bytes"), "%s", err.msg);
    tfm_lines_free(r);
    close(fd);
}

static void test_lines_ready(void)
{
    int fds[2];
    CHECK(pipe(fds) == 0);
    tfm_line_reader *r = tfm_lines_create(fds[0]);
    CHECK(!tfm_lines_ready(r)); /* nothing written yet: a read would block */
    CHECK(write(fds[1], "a\nb", 3) == 3);
    CHECK(tfm_lines_ready(r));
    const char *line;
    size_t len;
    tfm_error err;
    CHECK(tfm_lines_next(r, &line, &len, &err) == TFM_OK && len == 1);
    /* "b" is buffered but has no newline yet and nothing more is coming now. */
    CHECK(!tfm_lines_ready(r));
    close(fds[1]);
    CHECK(tfm_lines_ready(r)); /* end of input is ready */
    CHECK(tfm_lines_next(r, &line, &len, &err) == TFM_OK && len == 1 && line[0] == 'b');
    CHECK(tfm_lines_next(r, &line, &len, &err) == TFM_EOF);
    tfm_lines_free(r);
    close(fds[0]);
}

/* Peeking shows the next lines without taking them: at most max_lines,
 * no more than is ready, never a line over the limit; what comes next is
 * the same as without the peek, the long line's error included. */
static void test_lines_peek(void)
{
    int fds[2];
    CHECK(pipe(fds) == 0);
    tfm_line_reader *r = tfm_lines_create(fds[0]);
    const char *block, *line;
    size_t len;
    tfm_error err;
    CHECK(write(fds[1], "1 2\n\nthree\nfo", 13) == 13);
    CHECK(tfm_lines_peek(r, 100, 1 << 20, &block, &len, &err) == TFM_OK);
    CHECK_MSG(len == 11 && memcmp(block, "1 2\n\nthree\n", 11) == 0, "%zu", len); /* what is ready */
    CHECK(tfm_lines_peek(r, 2, 1 << 20, &block, &len, &err) == TFM_OK && len == 5);
    CHECK(tfm_lines_next(r, &line, &len, &err) == TFM_OK && !strcmp(line, "1 2"));
    CHECK(tfm_lines_number(r) == 1);
    close(fds[1]);
    CHECK(tfm_lines_peek(r, 100, 1 << 20, &block, &len, &err) == TFM_OK);
    CHECK(len == 9 && memcmp(block, "\nthree\nfo", 9) == 0); /* the end: the last line too */
    CHECK(tfm_lines_next(r, &line, &len, &err) == TFM_OK && len == 0);
    CHECK(tfm_lines_next(r, &line, &len, &err) == TFM_OK && !strcmp(line, "three"));
    CHECK(tfm_lines_next(r, &line, &len, &err) == TFM_OK && !strcmp(line, "fo"));
    CHECK(tfm_lines_next(r, &line, &len, &err) == TFM_EOF);
    tfm_lines_free(r);
    close(fds[0]);

    /* a line over the limit after a short one: the peek stops before it,
     * and reading it is the same error as without a peek */
    size_t big = 300000, total = 3 + big + 1 + 3;
    char *data = malloc(total);
    memcpy(data, "ok\n", 3);
    memset(data + 3, 'x', big);
    memcpy(data + 3 + big, "\nok\n", 4);
    int fd = pipe_with(data, total);
    r = tfm_lines_create(fd);
    tfm_lines_set_max_length(r, 100000);
    CHECK(tfm_lines_peek(r, 100, 1 << 20, &block, &len, &err) == TFM_OK && len == 3);
    CHECK(tfm_lines_next(r, &line, &len, &err) == TFM_OK && !strcmp(line, "ok"));
    CHECK(tfm_lines_next(r, &line, &len, &err) == TFM_ERR_RANGE && tfm_lines_number(r) == 1);
    CHECK(tfm_lines_next(r, &line, &len, &err) == TFM_OK && !strcmp(line, "ok"));
    CHECK(tfm_lines_number(r) == 3);
    tfm_lines_free(r);
    close(fd);
    free(data);
}

static void test_lines_error(void)
{
    tfm_line_reader *r = tfm_lines_create(-1); /* a descriptor that does not exist */
    const char *line;
    size_t len;
    tfm_error err;
    CHECK(tfm_lines_next(r, &line, &len, &err) == TFM_ERR_IO);
    CHECK_MSG(strstr(err.msg, "read error"), "%s", err.msg);
    tfm_lines_free(r);
    tfm_lines_free(NULL);
}

int main(void)
{
    RUN(test_lines_basic);
    RUN(test_lines_long);
    RUN(test_lines_limit);
    RUN(test_lines_ready);
    RUN(test_lines_peek);
    RUN(test_lines_error);
    CHECK_DONE();
}
