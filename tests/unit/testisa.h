/* testisa.h - running code under each instruction set TFM_ISA can ask for
 * (test_isas: the CPU's best, avx2, plain), for the tests that compare the
 * vector versions of a function bit for bit, and putting TFM_ISA back as it
 * was. */
#ifndef TFM_TEST_ISA_H
#define TFM_TEST_ISA_H

#include <stdlib.h>
#include <string.h>

#include "nn/layers.h"

/* NULL: TFM_ISA unset, the best the CPU has */
static const char *const test_isas[3] = {NULL, "avx2", "none"};

/* TFM_ISA=isa, or unset for NULL, from the next call of the library on
 * (which reads it once and keeps it: nn_isa_forget). */
static inline void test_isa_ask(const char *isa)
{
    if (isa) setenv("TFM_ISA", isa, 1);
    else unsetenv("TFM_ISA");
    nn_isa_forget();
}

/* TFM_ISA as it is now, for test_isa_restore. */
static inline char *test_isa_save(void)
{
    const char *was = getenv("TFM_ISA");
    return was ? strdup(was) : NULL;
}

static inline void test_isa_restore(char *saved)
{
    test_isa_ask(saved);
    free(saved);
}

#endif
