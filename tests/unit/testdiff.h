/* testdiff.h - the largest absolute difference of two float arrays, a NaN
 * counting as a failure, for the tests of the forward pass (test_kernels.c
 * and test_forward.c). */
#ifndef TFM_TEST_DIFF_H
#define TFM_TEST_DIFF_H

#include <math.h>
#include <stddef.h>

static inline double max_abs_diff(const float *a, const float *b, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (!(d <= m)) m = d; /* NaN propagates as a failure */
    }
    return m;
}

#endif
