/* require.h - a fuzz target's own promise: when ok is false, names the
 * target (FUZZ_TARGET, defined before including this) and what failed on
 * stderr, and aborts, which libFuzzer reports as a finding. */
#ifndef FUZZ_REQUIRE_H
#define FUZZ_REQUIRE_H

#include <stdio.h>
#include <stdlib.h>

static void require(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "%s: %s\n", FUZZ_TARGET, what);
        abort();
    }
}

#endif
