/* OpenCL platform and device enumeration, and OpenCL error names (see cl_devices.h). */
#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif

#include "cl_devices.h"
#include "cl_internal.h"

#include <CL/cl.h>
#include <ctype.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

/* Defined by the cl_khr_icd extension (cl_ext.h); the ICD loader answers it when no platform is
 * installed. */
#ifndef CL_PLATFORM_NOT_FOUND_KHR
#define CL_PLATFORM_NOT_FOUND_KHR -1001
#endif

static const struct {
    int code;
    const char *name;
} cl_errors[] = {
    {0, "CL_SUCCESS"},
    {-1, "CL_DEVICE_NOT_FOUND"},
    {-2, "CL_DEVICE_NOT_AVAILABLE"},
    {-3, "CL_COMPILER_NOT_AVAILABLE"},
    {-4, "CL_MEM_OBJECT_ALLOCATION_FAILURE"},
    {-5, "CL_OUT_OF_RESOURCES"},
    {-6, "CL_OUT_OF_HOST_MEMORY"},
    {-7, "CL_PROFILING_INFO_NOT_AVAILABLE"},
    {-8, "CL_MEM_COPY_OVERLAP"},
    {-9, "CL_IMAGE_FORMAT_MISMATCH"},
    {-10, "CL_IMAGE_FORMAT_NOT_SUPPORTED"},
    {-11, "CL_BUILD_PROGRAM_FAILURE"},
    {-12, "CL_MAP_FAILURE"},
    {-13, "CL_MISALIGNED_SUB_BUFFER_OFFSET"},
    {-14, "CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST"},
    {-15, "CL_COMPILE_PROGRAM_FAILURE"},
    {-16, "CL_LINKER_NOT_AVAILABLE"},
    {-17, "CL_LINK_PROGRAM_FAILURE"},
    {-18, "CL_DEVICE_PARTITION_FAILED"},
    {-19, "CL_KERNEL_ARG_INFO_NOT_AVAILABLE"},
    {-30, "CL_INVALID_VALUE"},
    {-31, "CL_INVALID_DEVICE_TYPE"},
    {-32, "CL_INVALID_PLATFORM"},
    {-33, "CL_INVALID_DEVICE"},
    {-34, "CL_INVALID_CONTEXT"},
    {-35, "CL_INVALID_QUEUE_PROPERTIES"},
    {-36, "CL_INVALID_COMMAND_QUEUE"},
    {-37, "CL_INVALID_HOST_PTR"},
    {-38, "CL_INVALID_MEM_OBJECT"},
    {-39, "CL_INVALID_IMAGE_FORMAT_DESCRIPTOR"},
    {-40, "CL_INVALID_IMAGE_SIZE"},
    {-41, "CL_INVALID_SAMPLER"},
    {-42, "CL_INVALID_BINARY"},
    {-43, "CL_INVALID_BUILD_OPTIONS"},
    {-44, "CL_INVALID_PROGRAM"},
    {-45, "CL_INVALID_PROGRAM_EXECUTABLE"},
    {-46, "CL_INVALID_KERNEL_NAME"},
    {-47, "CL_INVALID_KERNEL_DEFINITION"},
    {-48, "CL_INVALID_KERNEL"},
    {-49, "CL_INVALID_ARG_INDEX"},
    {-50, "CL_INVALID_ARG_VALUE"},
    {-51, "CL_INVALID_ARG_SIZE"},
    {-52, "CL_INVALID_KERNEL_ARGS"},
    {-53, "CL_INVALID_WORK_DIMENSION"},
    {-54, "CL_INVALID_WORK_GROUP_SIZE"},
    {-55, "CL_INVALID_WORK_ITEM_SIZE"},
    {-56, "CL_INVALID_GLOBAL_OFFSET"},
    {-57, "CL_INVALID_EVENT_WAIT_LIST"},
    {-58, "CL_INVALID_EVENT"},
    {-59, "CL_INVALID_OPERATION"},
    {-60, "CL_INVALID_GL_OBJECT"},
    {-61, "CL_INVALID_BUFFER_SIZE"},
    {-62, "CL_INVALID_MIP_LEVEL"},
    {-63, "CL_INVALID_GLOBAL_WORK_SIZE"},
    {-64, "CL_INVALID_PROPERTY"},
    {-65, "CL_INVALID_IMAGE_DESCRIPTOR"},
    {-66, "CL_INVALID_COMPILER_OPTIONS"},
    {-67, "CL_INVALID_LINKER_OPTIONS"},
    {-68, "CL_INVALID_DEVICE_PARTITION_COUNT"},
    {-69, "CL_INVALID_PIPE_SIZE"},
    {-70, "CL_INVALID_DEVICE_QUEUE"},
    {-71, "CL_INVALID_SPEC_ID"},
    {-72, "CL_MAX_SIZE_RESTRICTION_EXCEEDED"},
    {-1000, "CL_INVALID_GL_SHAREGROUP_REFERENCE_KHR"},
    {-1001, "CL_PLATFORM_NOT_FOUND_KHR"},
    {-1002, "CL_INVALID_D3D10_DEVICE_KHR"},
    {-1003, "CL_INVALID_D3D10_RESOURCE_KHR"},
    {-1004, "CL_D3D10_RESOURCE_ALREADY_ACQUIRED_KHR"},
    {-1005, "CL_D3D10_RESOURCE_NOT_ACQUIRED_KHR"},
    {-1006, "CL_INVALID_D3D11_DEVICE_KHR"},
    {-1007, "CL_INVALID_D3D11_RESOURCE_KHR"},
    {-1008, "CL_D3D11_RESOURCE_ALREADY_ACQUIRED_KHR"},
    {-1009, "CL_D3D11_RESOURCE_NOT_ACQUIRED_KHR"},
    {-1010, "CL_INVALID_DX9_MEDIA_ADAPTER_KHR"},
    {-1011, "CL_INVALID_DX9_MEDIA_SURFACE_KHR"},
    {-1012, "CL_DX9_MEDIA_SURFACE_ALREADY_ACQUIRED_KHR"},
    {-1013, "CL_DX9_MEDIA_SURFACE_NOT_ACQUIRED_KHR"},
    {-1057, "CL_DEVICE_PARTITION_FAILED_EXT"},
    {-1058, "CL_INVALID_PARTITION_COUNT_EXT"},
    {-1059, "CL_INVALID_PARTITION_NAME_EXT"},
    {-1092, "CL_EGL_RESOURCE_NOT_ACQUIRED_KHR"},
    {-1093, "CL_INVALID_EGL_OBJECT_KHR"},
    {-1094, "CL_INVALID_ACCELERATOR_INTEL"},
    {-1095, "CL_INVALID_ACCELERATOR_TYPE_INTEL"},
    {-1096, "CL_INVALID_ACCELERATOR_DESCRIPTOR_INTEL"},
    {-1097, "CL_ACCELERATOR_TYPE_NOT_SUPPORTED_INTEL"},
    {-1098, "CL_INVALID_VA_API_MEDIA_ADAPTER_INTEL"},
    {-1099, "CL_INVALID_VA_API_MEDIA_SURFACE_INTEL"},
    {-1100, "CL_VA_API_MEDIA_SURFACE_ALREADY_ACQUIRED_INTEL"},
    {-1101, "CL_VA_API_MEDIA_SURFACE_NOT_ACQUIRED_INTEL"},
    {-1108, "CL_COMMAND_TERMINATED_ITSELF_WITH_FAILURE_ARM"},
    {-1121, "CL_CONTEXT_TERMINATED_KHR"},
    {-1138, "CL_INVALID_COMMAND_BUFFER_KHR"},
    {-1139, "CL_INVALID_SYNC_POINT_WAIT_LIST_KHR"},
    {-1140, "CL_INCOMPATIBLE_COMMAND_QUEUE_KHR"},
    {-1141, "CL_INVALID_MUTABLE_COMMAND_KHR"},
    {-1142, "CL_INVALID_SEMAPHORE_KHR"},
};

const char *yc_cl_error_name(int code)
{
    for (size_t i = 0; i < sizeof cl_errors / sizeof cl_errors[0]; i++)
        if (cl_errors[i].code == code)
            return cl_errors[i].name;
    return "unknown OpenCL error";
}

/* Records "CALL: NAME (code)" and returns YC_EDEVICE. */
static int cl_fail(const char *call, cl_int err)
{
    return yc_error_status(YC_EDEVICE, "%s: %s (%d)", call, yc_cl_error_name(err), (int)err);
}

/* Copies `src` into dst[len], dropping leading and trailing white space (some drivers pad
 * device names). */
static void copy_trimmed(char *dst, size_t len, const char *src)
{
    while (*src && isspace((unsigned char)*src))
        src++;
    size_t n = strlen(src);
    while (n > 0 && isspace((unsigned char)src[n - 1]))
        n--;
    if (n >= len)
        n = len - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

/* A string-valued clGetPlatformInfo / clGetDeviceInfo query into a heap string. */
static int platform_string(cl_platform_id p, cl_platform_info what, const char *call, char **out)
{
    size_t size = 0;
    *out = NULL;
    cl_int err = clGetPlatformInfo(p, what, 0, NULL, &size);
    if (err != CL_SUCCESS)
        return cl_fail(call, err);
    char *s = yc_malloc(size + 1, "OpenCL platform string");
    if (!s)
        return YC_ENOMEM;
    err = clGetPlatformInfo(p, what, size, s, NULL);
    if (err != CL_SUCCESS) {
        free(s);
        return cl_fail(call, err);
    }
    s[size] = '\0';
    *out = s;
    return YC_OK;
}

static int device_string(cl_device_id d, cl_device_info what, const char *call, char **out)
{
    size_t size = 0;
    *out = NULL;
    cl_int err = clGetDeviceInfo(d, what, 0, NULL, &size);
    if (err != CL_SUCCESS)
        return cl_fail(call, err);
    char *s = yc_malloc(size + 1, "OpenCL device string");
    if (!s)
        return YC_ENOMEM;
    err = clGetDeviceInfo(d, what, size, s, NULL);
    if (err != CL_SUCCESS) {
        free(s);
        return cl_fail(call, err);
    }
    s[size] = '\0';
    *out = s;
    return YC_OK;
}

/* A string query copied (trimmed) into a fixed field. */
static int device_string_into(cl_device_id d, cl_device_info what, const char *call, char *dst,
                              size_t len)
{
    char *s;
    int st = device_string(d, what, call, &s);
    if (st)
        return st;
    copy_trimmed(dst, len, s);
    free(s);
    return YC_OK;
}

/* A fixed-size clGetDeviceInfo query. */
static int device_value(cl_device_id d, cl_device_info what, const char *call, void *value,
                        size_t size)
{
    cl_int err = clGetDeviceInfo(d, what, size, value, NULL);
    return err == CL_SUCCESS ? YC_OK : cl_fail(call, err);
}

/* Whether the space-separated extension list holds `ext` as a whole word. */
static bool has_extension(const char *list, const char *ext)
{
    size_t n = strlen(ext);
    for (const char *p = list; (p = strstr(p, ext)) != NULL; p += n) {
        bool starts = p == list || isspace((unsigned char)p[-1]);
        bool ends = p[n] == '\0' || isspace((unsigned char)p[n]);
        if (starts && ends)
            return true;
    }
    return false;
}

static void type_name(cl_device_type t, char *buf, size_t len)
{
    static const struct {
        cl_device_type bit;
        const char *name;
    } types[] = {
        {CL_DEVICE_TYPE_GPU, "GPU"},
        {CL_DEVICE_TYPE_CPU, "CPU"},
        {CL_DEVICE_TYPE_ACCELERATOR, "ACCEL"},
        {CL_DEVICE_TYPE_CUSTOM, "CUSTOM"},
        {CL_DEVICE_TYPE_DEFAULT, "DEFAULT"},
    };
    buf[0] = '\0';
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        if (!(t & types[i].bit))
            continue;
        size_t used = strlen(buf);
        snprintf(buf + used, len - used, "%s%s", used ? "+" : "", types[i].name);
    }
    if (!buf[0])
        snprintf(buf, len, "unknown");
}

/* Fills one device description from its queries. */
static int describe_device(cl_device_id dev, yc_cl_device_desc *d)
{
    yc_device_info *info = &d->info;
    cl_device_type type = 0;
    cl_ulong global_mem = 0, max_alloc = 0, local_mem = 0;
    cl_uint units = 0, clock = 0, align_bits = 0;
    size_t wg = 0;
    int st;

    if ((st = device_string_into(dev, CL_DEVICE_NAME, "clGetDeviceInfo(CL_DEVICE_NAME)", info->name,
                                 sizeof info->name)) ||
        (st = device_string_into(dev, CL_DEVICE_VENDOR, "clGetDeviceInfo(CL_DEVICE_VENDOR)",
                                 d->vendor, sizeof d->vendor)) ||
        (st = device_string_into(dev, CL_DEVICE_VERSION, "clGetDeviceInfo(CL_DEVICE_VERSION)",
                                 d->device_version, sizeof d->device_version)) ||
        (st = device_string_into(dev, CL_DRIVER_VERSION, "clGetDeviceInfo(CL_DRIVER_VERSION)",
                                 d->driver_version, sizeof d->driver_version)) ||
        (st = device_string_into(dev, CL_DEVICE_OPENCL_C_VERSION,
                                 "clGetDeviceInfo(CL_DEVICE_OPENCL_C_VERSION)", d->c_version,
                                 sizeof d->c_version)) ||
        (st = device_value(dev, CL_DEVICE_TYPE, "clGetDeviceInfo(CL_DEVICE_TYPE)", &type,
                           sizeof type)) ||
        (st = device_value(dev, CL_DEVICE_GLOBAL_MEM_SIZE,
                           "clGetDeviceInfo(CL_DEVICE_GLOBAL_MEM_SIZE)", &global_mem,
                           sizeof global_mem)) ||
        (st = device_value(dev, CL_DEVICE_MAX_MEM_ALLOC_SIZE,
                           "clGetDeviceInfo(CL_DEVICE_MAX_MEM_ALLOC_SIZE)", &max_alloc,
                           sizeof max_alloc)) ||
        (st = device_value(dev, CL_DEVICE_LOCAL_MEM_SIZE,
                           "clGetDeviceInfo(CL_DEVICE_LOCAL_MEM_SIZE)", &local_mem,
                           sizeof local_mem)) ||
        (st = device_value(dev, CL_DEVICE_MAX_COMPUTE_UNITS,
                           "clGetDeviceInfo(CL_DEVICE_MAX_COMPUTE_UNITS)", &units, sizeof units)) ||
        (st = device_value(dev, CL_DEVICE_MAX_CLOCK_FREQUENCY,
                           "clGetDeviceInfo(CL_DEVICE_MAX_CLOCK_FREQUENCY)", &clock,
                           sizeof clock)) ||
        (st = device_value(dev, CL_DEVICE_MAX_WORK_GROUP_SIZE,
                           "clGetDeviceInfo(CL_DEVICE_MAX_WORK_GROUP_SIZE)", &wg, sizeof wg)) ||
        (st = device_value(dev, CL_DEVICE_MEM_BASE_ADDR_ALIGN,
                           "clGetDeviceInfo(CL_DEVICE_MEM_BASE_ADDR_ALIGN)", &align_bits,
                           sizeof align_bits)))
        return st;

    char *ext;
    if ((st = device_string(dev, CL_DEVICE_EXTENSIONS, "clGetDeviceInfo(CL_DEVICE_EXTENSIONS)",
                            &ext)))
        return st;
    info->fp16_arith = has_extension(ext, "cl_khr_fp16");
    d->fp64 = has_extension(ext, "cl_khr_fp64");

    info->kind = YC_DEVICE_OPENCL;
    info->mem_total = (size_t)global_mem;
    info->max_alloc = (size_t)max_alloc;
    info->alignment = align_bits >= 8 ? align_bits / 8 : 1;
    /* vload_half / vstore_half are core OpenCL C: every device stores FP16. */
    info->fp16_storage = true;
    info->is_gpu = (type & CL_DEVICE_TYPE_GPU) != 0;
    info->compute_units = (int)units;
    type_name(type, d->type, sizeof d->type);
    d->clock_mhz = clock;
    d->max_work_group = wg;
    d->local_mem = (size_t)local_mem;
    info->mem_free = yc_cl_free_memory(dev, d, ext);
    free(ext);
    return YC_OK;
}

/* Lists one platform's devices (appended to *devs).  On failure the platform's error is set and
 * nothing is appended; only YC_ENOMEM is returned as a failure of the whole enumeration. */
static int enumerate_platform(cl_platform_id pid, int pindex, yc_cl_platform_desc *p,
                              yc_cl_device_desc **devs, int *ndev)
{
    cl_uint n = 0;
    p->first_device = *ndev;
    p->device_count = 0;
    cl_int err = clGetDeviceIDs(pid, CL_DEVICE_TYPE_ALL, 0, NULL, &n);
    if (err == CL_DEVICE_NOT_FOUND || (err == CL_SUCCESS && n == 0))
        return YC_OK;
    if (err != CL_SUCCESS) {
        cl_fail("clGetDeviceIDs", err);
        snprintf(p->error, sizeof p->error, "%s", yc_last_error());
        return YC_OK;
    }
    cl_device_id *ids = yc_calloc(n, sizeof *ids, "OpenCL device ids");
    if (!ids)
        return YC_ENOMEM;
    err = clGetDeviceIDs(pid, CL_DEVICE_TYPE_ALL, n, ids, NULL);
    if (err != CL_SUCCESS) {
        free(ids);
        cl_fail("clGetDeviceIDs", err);
        snprintf(p->error, sizeof p->error, "%s", yc_last_error());
        return YC_OK;
    }
    yc_cl_device_desc *grown = yc_realloc(*devs, ((size_t)*ndev + n) * sizeof **devs,
                                          "OpenCL device list");
    if (!grown) {
        free(ids);
        return YC_ENOMEM;
    }
    *devs = grown;
    for (cl_uint i = 0; i < n; i++) {
        yc_cl_device_desc *d = &grown[*ndev + (int)i];
        memset(d, 0, sizeof *d);
        int st = describe_device(ids[i], d);
        if (st == YC_ENOMEM) {
            free(ids);
            return st;
        }
        if (st) {
            yc_error_context(st, "device %u", (unsigned)i);
            snprintf(p->error, sizeof p->error, "%s", yc_last_error());
            free(ids);
            return YC_OK;
        }
        d->index = *ndev + (int)i;
        d->info.cl_platform = pindex;
        d->info.cl_device = (int)i;
        snprintf(d->info.platform, sizeof d->info.platform, "%s", p->name);
        snprintf(d->info.version, sizeof d->info.version, "%s", p->version);
    }
    free(ids);
    p->device_count = (int)n;
    *ndev += (int)n;
    return YC_OK;
}

int yc_cl_enumerate(yc_cl_platform_desc **platforms, int *nplatforms, yc_cl_device_desc **devices,
                    int *ndevices)
{
    *platforms = NULL;
    *devices = NULL;
    *nplatforms = *ndevices = 0;

    cl_uint n = 0;
    cl_int err = clGetPlatformIDs(0, NULL, &n);
    if (err == CL_PLATFORM_NOT_FOUND_KHR || (err == CL_SUCCESS && n == 0))
        return YC_OK;
    if (err != CL_SUCCESS)
        return cl_fail("clGetPlatformIDs", err);
    cl_platform_id *ids = yc_calloc(n, sizeof *ids, "OpenCL platform ids");
    if (!ids)
        return YC_ENOMEM;
    err = clGetPlatformIDs(n, ids, NULL);
    if (err != CL_SUCCESS) {
        free(ids);
        return cl_fail("clGetPlatformIDs", err);
    }
    yc_cl_platform_desc *plats = yc_calloc(n, sizeof *plats, "OpenCL platform list");
    if (!plats) {
        free(ids);
        return YC_ENOMEM;
    }
    yc_cl_device_desc *devs = NULL;
    int ndev = 0;
    for (cl_uint i = 0; i < n; i++) {
        yc_cl_platform_desc *p = &plats[i];
        static const struct {
            cl_platform_info what;
            const char *call;
            size_t offset, len;
        } strings[] = {
            {CL_PLATFORM_NAME, "clGetPlatformInfo(CL_PLATFORM_NAME)",
             offsetof(yc_cl_platform_desc, name), sizeof plats->name},
            {CL_PLATFORM_VERSION, "clGetPlatformInfo(CL_PLATFORM_VERSION)",
             offsetof(yc_cl_platform_desc, version), sizeof plats->version},
            {CL_PLATFORM_VENDOR, "clGetPlatformInfo(CL_PLATFORM_VENDOR)",
             offsetof(yc_cl_platform_desc, vendor), sizeof plats->vendor},
        };
        int st = YC_OK;
        for (size_t k = 0; k < sizeof strings / sizeof strings[0] && st == YC_OK; k++) {
            char *s;
            st = platform_string(ids[i], strings[k].what, strings[k].call, &s);
            if (st == YC_OK) {
                copy_trimmed((char *)p + strings[k].offset, strings[k].len, s);
                free(s);
            }
        }
        if (st == YC_OK)
            st = enumerate_platform(ids[i], (int)i, p, &devs, &ndev);
        else if (st != YC_ENOMEM)
            snprintf(p->error, sizeof p->error, "%s", yc_last_error());
        if (st == YC_ENOMEM) {
            free(ids);
            free(plats);
            free(devs);
            return st;
        }
        p->first_device = p->device_count ? p->first_device : ndev;
    }
    free(ids);
    *platforms = plats;
    *nplatforms = (int)n;
    *devices = devs;
    *ndevices = ndev;
    return YC_OK;
}

int yc_cl_list_devices(yc_device_info **out, int *count)
{
    yc_cl_platform_desc *plats;
    yc_cl_device_desc *devs;
    int np, nd;
    *out = NULL;
    *count = 0;
    int st = yc_cl_enumerate(&plats, &np, &devs, &nd);
    if (st)
        return st;
    free(plats);
    if (nd == 0) {
        free(devs);
        return YC_OK;
    }
    yc_device_info *infos = yc_calloc((size_t)nd, sizeof *infos, "OpenCL device list");
    if (!infos) {
        free(devs);
        return YC_ENOMEM;
    }
    for (int i = 0; i < nd; i++)
        infos[i] = devs[i].info;
    free(devs);
    *out = infos;
    *count = nd;
    return YC_OK;
}
