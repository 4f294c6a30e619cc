/* testfiles.h - an open temporary file holding given text, for the tests
 * that read lines (tfm_lines_create(fileno(fp))). */
#ifndef TFM_TEST_FILES_H
#define TFM_TEST_FILES_H

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"

/* An open file holding data, read from its start (exits when none can be
 * made: nothing could be tested). */
static inline FILE *file_with(const char *data)
{
    FILE *fp = tmpfile();
    if (!fp) {
        CHECK(fp != NULL);
        exit(1);
    }
    fputs(data, fp);
    fflush(fp);
    CHECK(lseek(fileno(fp), 0, SEEK_SET) == 0);
    return fp;
}

#endif
