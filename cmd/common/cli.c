/* cli.c - the shared command-line layer (see cli.h). */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

#define MAX_WARNINGS 100

static const char *program = "tfm";
static int warnings_shown;
int cli_verbosity = 1;

/* OpenBLAS's: 0 for a build that runs no threads of its own, 1 or 2 for
 * one that does; weak, so that a program that does not link OpenBLAS
 * (tokenize) sees NULL.  (Debian's serial build is not linked: it is not
 * safe to call from two threads at once; see the Makefile.) */
extern int openblas_get_parallel(void) __attribute__((weak));

/* OpenBLAS's, weak for the same reason: they read the environment again
 * and stop its threads, which the next product starts anew. */
extern void openblas_read_env(void) __attribute__((weak));
extern int blas_thread_shutdown_(void) __attribute__((weak));
extern int openblas_thread_timeout(void) __attribute__((weak));

/* OpenBLAS's idle threads spin (sched_yield) for 2^28 cycles before they
 * sleep, burning a shared CPU between matrix products (DESIGN.md: idle
 * threads block).  It reads OPENBLAS_THREAD_TIMEOUT (log2 of the cycles,
 * 4 at the least) when the library loads, before main, and gives it to its
 * threads when it starts them.  So the program sets it, has OpenBLAS read
 * it again and stops the threads: the first product starts them with the
 * short timeout.  (A setenv in .preinit_array comes too late: OpenBLAS's
 * constructor has run by then.)  A user's own setting is kept.  Where
 * OpenBLAS lacks those functions the program starts itself again with the
 * variable set (about 4 ms of CPU).  A program without OpenBLAS's threads
 * (not linked, or its serial build) has nothing to make block. */
static void make_blas_threads_block(char **argv)
{
    if (!openblas_get_parallel || openblas_get_parallel() == 0) return;
    if (getenv("OPENBLAS_THREAD_TIMEOUT")) return;
    if (setenv("OPENBLAS_THREAD_TIMEOUT", "4", 1) != 0) return;
    if (openblas_read_env && blas_thread_shutdown_ && openblas_thread_timeout) {
        openblas_read_env();
        if (openblas_thread_timeout() == 4 && blas_thread_shutdown_() == 0) return;
    }
    execv("/proc/self/exe", argv);
    /* If that failed, go on with spinning threads: slower, not wrong. */
}

void cli_init(const char *program_name, char **argv)
{
    make_blas_threads_block(argv);
    program = program_name;
    signal(SIGPIPE, SIG_DFL);
    /* A file-size limit (ulimit -f) reached is a write error with a message
     * (EFBIG), as a full disk is, rather than a silent kill. */
    signal(SIGXFSZ, SIG_IGN);
}

const char *cli_program(void)
{
    return program;
}

void cli_set_program(const char *name)
{
    program = name;
}

/* Appends to text[*n, size), keeping *n within it. */
static void append_v(char *text, size_t size, size_t *n, const char *fmt, va_list ap)
{
    int k = vsnprintf(text + *n, size - *n, fmt, ap);
    if (k > 0) *n += (size_t)k < size - *n ? (size_t)k : size - *n - 1;
}

static void append(char *text, size_t size, size_t *n, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void append(char *text, size_t size, size_t *n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    append_v(text, size, n, fmt, ap);
    va_end(ap);
}

/* The message is made whole and written at once, so that the lines of
 * processes sharing a terminal (train's ranks under mpirun) do not mix. */
static void vmessage(const char *file, size_t line, const char *kind, const char *fmt,
                     va_list ap)
{
    char text[4096];
    size_t n = 0;
    fflush(stdout);
    append(text, sizeof text - 1, &n, "%s: ", program);
    if (file && line) append(text, sizeof text - 1, &n, "%s:%zu: ", file, line);
    else if (file) append(text, sizeof text - 1, &n, "%s: ", file);
    if (kind) append(text, sizeof text - 1, &n, "%s", kind);
    append_v(text, sizeof text - 1, &n, fmt, ap);
    text[n++] = '\n'; /* the room kept for it */
    fwrite(text, 1, n, stderr);
}

void cli_error(const char *file, size_t line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vmessage(file, line, NULL, fmt, ap);
    va_end(ap);
}

void cli_warn(const char *file, size_t line, const char *fmt, ...)
{
    if (cli_verbosity < 1) return;
    if (warnings_shown == MAX_WARNINGS) {
        fprintf(stderr, "%s: further warnings are not shown\n", program);
        warnings_shown++;
    }
    if (warnings_shown > MAX_WARNINGS) return;
    warnings_shown++;
    va_list ap;
    va_start(ap, fmt);
    vmessage(file, line, "warning: ", fmt, ap);
    va_end(ap);
}

void cli_info(const char *fmt, ...)
{
    if (cli_verbosity < 2) return;
    va_list ap;
    va_start(ap, fmt);
    vmessage(NULL, 0, NULL, fmt, ap);
    va_end(ap);
}

void cli_fail(const char *file, size_t line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vmessage(file, line, NULL, fmt, ap);
    va_end(ap);
    exit(CLI_EXIT_FAILURE);
}

void cli_usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vmessage(NULL, 0, NULL, fmt, ap);
    va_end(ap);
    fprintf(stderr, "Try '%s --help' for more information.\n", program);
    exit(CLI_EXIT_USAGE);
}

void cli_print_version(void)
{
    printf("%s (tfm) %s\n", program, TFM_VERSION);
}

void cli_common_option(int c, const char *usage_text)
{
    switch (c) {
    case 'q': cli_verbosity = 0; break;
    case 'v': cli_verbosity = 2; break;
    case 'h':
        fputs(usage_text, stdout);
        cli_flush();
        exit(CLI_EXIT_OK);
    case 'V':
        cli_print_version();
        cli_flush();
        exit(CLI_EXIT_OK);
    default: cli_usage_error("unknown or incomplete option");
    }
}

void cli_warn_unknown_isa(void)
{
    static bool warned;
    char msg[200];
    if (warned || !tfm_isa_request_unknown(msg, sizeof msg)) return;
    warned = true;
    cli_warn(NULL, 0, "%s", msg);
}

tfm_model *cli_load_model(const char *path)
{
    cli_warn_unknown_isa();
    tfm_model *model;
    tfm_error err;
    /* The library's messages may name the file already: then not twice. */
    if (tfm_model_load(path, &model, &err) != TFM_OK)
        cli_fail(strstr(err.msg, path) ? NULL : path, 0, "%s", err.msg);
    return model;
}

void cli_info_model(const char *path, const tfm_model *m, int threads, const char *what)
{
    if (cli_verbosity < 1) return;
    tfm_buf text;
    tfm_buf_init(&text);
    if (tfm_config_describe(&m->config, &text) == TFM_OK)
        cli_info("model %s: %s; %d %s%s", path, text.data, threads, what, threads == 1 ? "" : "s");
    tfm_buf_free(&text);
}

long long cli_parse_int(const char *option, const char *text, long long min, long long max)
{
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (end == text || *end != 0 || errno == ERANGE)
        cli_usage_error("%s: '%s' is not an integer", option, text);
    if (v < min || v > max)
        cli_usage_error("%s: %lld is out of range (%lld to %lld)", option, v, min, max);
    return v;
}

double cli_parse_double(const char *option, const char *text, double min, double max)
{
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (end == text || *end != 0 || errno == ERANGE || !isfinite(v))
        cli_usage_error("%s: '%s' is not a number", option, text);
    if (v < min || v > max)
        cli_usage_error("%s: %g is out of range (%g to %g)", option, v, min, max);
    return v;
}

int cli_parse_choice(const char *option, const char *text, const char *const *choices)
{
    for (int i = 0; choices[i]; i++)
        if (strcmp(text, choices[i]) == 0) return i;
    char list[256] = "";
    for (int i = 0; choices[i]; i++) {
        if (i) strncat(list, ", ", sizeof list - strlen(list) - 1);
        strncat(list, choices[i], sizeof list - strlen(list) - 1);
    }
    cli_usage_error("%s: '%s' is not one of: %s", option, text, list);
}

int cli_open_input(const char *name)
{
    if (strcmp(name, "-") == 0) return STDIN_FILENO;
    int fd = open(name, O_RDONLY | O_CLOEXEC);
    if (fd < 0) cli_fail(name, 0, "%s", strerror(errno));
    return fd;
}

void cli_close_input(int fd)
{
    if (fd != STDIN_FILENO) close(fd);
}

static _Noreturn void write_failed(void)
{
    /* A reader that went away is not an error worth a message. */
    if (errno == EPIPE) exit(CLI_EXIT_FAILURE);
    cli_fail("standard output", 0, "write error: %s", strerror(errno));
}

void cli_write(const void *data, size_t len)
{
    if (len && fwrite(data, 1, len, stdout) != len) write_failed();
}

void cli_write_line(const char *data, size_t len)
{
    cli_write(data, len);
    if (putchar('\n') == EOF) write_failed();
}

void cli_flush(void)
{
    if (fflush(stdout) != 0) write_failed();
}

void cli_close_output(void)
{
    cli_flush();
    if (close(STDOUT_FILENO) != 0 && errno != EINTR && errno != EBADF) write_failed();
    /* fd 1 stays taken, by /dev/null, for whatever stdio still does */
    int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (null >= 0 && null != STDOUT_FILENO) {
        dup2(null, STDOUT_FILENO);
        close(null);
    }
}
