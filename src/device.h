/* Choosing the backend a command computes on (--device). */
#ifndef YC_DEVICE_H
#define YC_DEVICE_H

#include "backend.h"

/* Opens the backend named by `spec`: "auto" (default when NULL or empty) or "cpu".  `threads` <= 0
 * means the default thread count.  Prints which device it picked when `announce` is set. */
int yc_device_open(const char *spec, int threads, bool announce, yc_backend **out);

#endif
