/* clock.c - seconds of the monotonic clock, the one every time of the
 * library and the programs is read from (training's clock and pace, the
 * filters' -v rates). */
#include <time.h>

#include "tfm/core.h"

double tfm_clock_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
