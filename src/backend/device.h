/* Choosing the backend a command computes on (--device).
 *
 *   auto          the OpenCL GPU with the most memory, else the CPU backend (default)
 *   cpu           the CPU backend (OpenMP)
 *   opencl        the first OpenCL device (opencl:0)
 *   opencl:N      OpenCL device N, numbered over all platforms as `yolocl devices` lists them
 *   other text    the first OpenCL device whose name contains it, ignoring case
 *
 * Builds without OpenCL (configure --disable-opencl) accept auto and cpu only. */
#ifndef YC_DEVICE_H
#define YC_DEVICE_H

#include <stdbool.h>

#include "backend.h"

/* Opens the backend named by `spec` (NULL or empty: "auto").  `threads` <= 0 means the default
 * thread count of the CPU backend.  Prints which device it picked (and, for auto, why) when
 * `announce` is set.  YC_EUSAGE with a message listing the devices when nothing matches. */
int yc_device_open(const char *spec, int threads, bool announce, yc_backend **out);

/* Whether yc_device_open(spec) would start the CPU backend (*cpu), without starting anything or
 * printing: YC_OK, or yc_device_open's error for a spec that matches no device (*cpu false). */
int yc_device_is_cpu(const char *spec, bool *cpu);

/* The choice behind yc_device_open, on a given list of OpenCL devices (global order): *index is
 * -1 for the CPU backend, else the OpenCL device's index.  `have_opencl` says whether this build
 * has the OpenCL backend.  YC_EUSAGE with a message listing the devices when nothing matches. */
int yc_device_pick(const char *spec, const yc_device_info *devs, int ndev, bool have_opencl, int *index);

#endif
