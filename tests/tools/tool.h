/* tool.h - what the test tools share: dying with a message, and numbers
 * from the command line checked against their range.  Define TOOL_NAME
 * (the program's name, a string) before including. */
#ifndef TFM_TESTS_TOOL_H
#define TFM_TESTS_TOOL_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#ifndef TOOL_NAME
#error "define TOOL_NAME before including tool.h"
#endif

/* "NAME: what: msg" (or "NAME: msg" when what is NULL), exit 1. */
static inline _Noreturn void die(const char *what, const char *msg)
{
    fprintf(stderr, TOOL_NAME ": %s%s%s\n", what ? what : "", what ? ": " : "", msg);
    exit(1);
}

/* The number text of option, in [lo, hi]; else a message and exit 2. */
static inline double parse_number(const char *option, const char *text, double lo, double hi)
{
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (end == text || *end || errno || !(v >= lo && v <= hi)) {
        fprintf(stderr, TOOL_NAME ": %s: '%s' is not a number from %g to %g\n", option, text, lo,
                hi);
        exit(2);
    }
    return v;
}

/* The integer text of option, in [lo, hi]; else a message and exit 2. */
static inline int parse_int(const char *option, const char *text, long lo, long hi)
{
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (end == text || *end || errno || v < lo || v > hi) {
        fprintf(stderr, TOOL_NAME ": %s: '%s' is not an integer from %ld to %ld\n", option, text,
                lo, hi);
        exit(2);
    }
    return (int)v;
}

#endif
