/* OpenCL platform and device enumeration, and OpenCL error names.
 *
 * Devices are numbered over all platforms in the order the ICD loader reports them: platform 0's
 * devices first, then platform 1's, and so on.  That global index is the N of "opencl:N".  Every
 * OpenCL call's status is checked; a failure is reported with the call and the error's name.
 *
 * This header needs no OpenCL headers, so that code built without OpenCL can include it; the
 * functions exist only in builds with YC_HAVE_OPENCL. */
#ifndef YC_CL_DEVICES_H
#define YC_CL_DEVICES_H

#include <stdbool.h>

#include "backend.h"

/* One OpenCL platform. */
typedef struct yc_cl_platform_desc {
    /* CL_PLATFORM_NAME, CL_PLATFORM_VERSION and CL_PLATFORM_VENDOR */
    char name[256];
    char version[128];
    char vendor[128];
    /* global index of its first device and how many it has (0 when none or on error) */
    int first_device, device_count;
    /* why its devices could not be listed ("" when they could); the platform then contributes
     * no devices and the global numbering skips it */
    char error[256];
} yc_cl_platform_desc;

/* One OpenCL device: what the backend uses, plus what only a listing shows. */
typedef struct yc_cl_device_desc {
    /* kind YC_DEVICE_OPENCL, names, memory, capabilities, cl_platform and cl_device (the index
     * of the device within its platform) */
    yc_device_info info;
    /* global index, the N of "opencl:N" */
    int index;
    /* CL_DEVICE_TYPE as text: "GPU", "CPU", "ACCEL", "CUSTOM" or "DEFAULT", '+'-joined when a
     * device reports several */
    char type[32];
    /* CL_DEVICE_VENDOR, CL_DEVICE_VERSION, CL_DRIVER_VERSION, CL_DEVICE_OPENCL_C_VERSION */
    char vendor[128];
    char device_version[128];
    char driver_version[128];
    char c_version[128];
    /* CL_DEVICE_MAX_CLOCK_FREQUENCY in MHz, CL_DEVICE_MAX_WORK_GROUP_SIZE */
    unsigned clock_mhz;
    size_t max_work_group;
    /* CL_DEVICE_LOCAL_MEM_SIZE in bytes */
    size_t local_mem;
    /* cl_khr_fp64 is listed in CL_DEVICE_EXTENSIONS (cl_khr_fp16 is info.fp16_arith) */
    bool fp64;
} yc_cl_device_desc;

/* Lists every platform and every device (heap arrays, free() them).  No OpenCL platform at all
 * (clGetPlatformIDs answers CL_PLATFORM_NOT_FOUND_KHR or zero platforms) is not an error: both
 * counts are 0.  A platform whose devices cannot be queried is listed with its error and adds no
 * devices.  Returns YC_OK, YC_EDEVICE when clGetPlatformIDs fails, or YC_ENOMEM. */
int yc_cl_enumerate(yc_cl_platform_desc **platforms, int *nplatforms, yc_cl_device_desc **devices,
                    int *ndevices);

/* The devices of yc_cl_enumerate as backend device descriptions, in global order (heap array,
 * free() it; *count 0 and *out NULL when there are none). */
int yc_cl_list_devices(yc_device_info **out, int *count);

/* Name of an OpenCL status code ("CL_DEVICE_NOT_FOUND"), or "unknown OpenCL error" for codes
 * that no OpenCL version or common extension defines.  Takes a cl_int. */
const char *yc_cl_error_name(int code);

#endif
