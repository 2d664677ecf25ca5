/* Choosing the backend a command computes on (see device.h). */
#include "config.h"

#include "device.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cl_backend.h"
#include "cl_devices.h"
#include "log.h"

/* Whether `hay` contains `needle`, ignoring ASCII case. */
static bool contains_nocase(const char *hay, const char *needle)
{
    size_t n = strlen(needle);
    for (; *hay; hay++) {
        size_t i = 0;
        while (i < n && hay[i] && tolower((unsigned char)hay[i]) == tolower((unsigned char)needle[i]))
            i++;
        if (i == n)
            return true;
    }
    return n == 0;
}

/* "cpu, opencl:0 NAME (PLATFORM), ..." into buf. */
static const char *device_list(const yc_device_info *devs, int ndev, char *buf, size_t len)
{
    size_t used = (size_t)snprintf(buf, len, "cpu");
    for (int i = 0; i < ndev && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, ", opencl:%d %s (%s)", i, devs[i].name, devs[i].platform);
    return buf;
}

/* Parses the N of "opencl:N" (digits only); -1 when malformed. */
static int parse_index(const char *s)
{
    if (!*s || strlen(s) > 6)
        return -1;
    for (const char *p = s; *p; p++)
        if (!isdigit((unsigned char)*p))
            return -1;
    return atoi(s);
}

int yc_device_pick(const char *spec, const yc_device_info *devs, int ndev, bool have_opencl, int *index)
{
    *index = -1;
    if (!spec || !spec[0] || strcmp(spec, "auto") == 0) {
        size_t best = 0;
        for (int i = 0; i < ndev; i++)
            if (devs[i].is_gpu && (*index < 0 || devs[i].mem_total > best)) {
                *index = i;
                best = devs[i].mem_total;
            }
        return YC_OK;
    }
    if (strcmp(spec, "cpu") == 0)
        return YC_OK;
    char list[2048];
    bool opencl_word = strncmp(spec, "opencl", 6) == 0 && (spec[6] == '\0' || spec[6] == ':');
    if (!have_opencl)
        return yc_error_status(YC_EUSAGE,
                               "%s device '%s': this yolocl was built without OpenCL (configure "
                               "--disable-opencl): use --device cpu or auto",
                               opencl_word ? "cannot use" : "unknown", spec);
    if (opencl_word) {
        int n = spec[6] == ':' ? parse_index(spec + 7) : 0;
        if (n < 0)
            return yc_error_status(YC_EUSAGE, "bad device '%s': write opencl:N with N a device number (%s)", spec,
                                   ndev ? device_list(devs, ndev, list, sizeof list) : "no OpenCL device found");
        if (ndev == 0)
            return yc_error_status(YC_EUSAGE,
                                   "no OpenCL device found for '%s' (install an OpenCL driver, e.g. Debian's "
                                   "pocl-opencl-icd for CPUs; `yolocl devices` lists what is found): use "
                                   "--device cpu",
                                   spec);
        if (n >= ndev)
            return yc_error_status(YC_EUSAGE, "no device %s: the devices are %s", spec,
                                   device_list(devs, ndev, list, sizeof list));
        *index = n;
        return YC_OK;
    }
    for (int i = 0; i < ndev; i++)
        if (contains_nocase(devs[i].name, spec)) {
            *index = i;
            return YC_OK;
        }
    return yc_error_status(YC_EUSAGE,
                           "unknown device '%s': no device name contains it; the devices are %s (use "
                           "--device auto, cpu, opencl, opencl:N or part of a device name)",
                           spec, device_list(devs, ndev, list, sizeof list));
}

/* The OpenCL devices of this build and machine (none without OpenCL). */
static int list_opencl(yc_device_info **devs, int *ndev)
{
    *devs = NULL;
    *ndev = 0;
#ifdef YC_HAVE_OPENCL
    return yc_cl_list_devices(devs, ndev);
#else
    return YC_OK;
#endif
}

/* The OpenCL devices (*devs, *ndev; none when spec is "cpu") and the index spec picks among them
 * (-1: the CPU backend).  A failed listing is an error unless spec is automatic, when it is warned
 * about (quiet: not) and the CPU backend is picked.  *devs is the caller's to free, also on error. */
static int resolve(const char *spec, bool quiet, yc_device_info **devs, int *ndev, int *index)
{
    bool automatic = !spec || !spec[0] || strcmp(spec, "auto") == 0;
#ifdef YC_HAVE_OPENCL
    const bool have_opencl = true;
#else
    const bool have_opencl = false;
#endif
    *devs = NULL;
    *ndev = 0;
    *index = -1;
    if (!(spec && strcmp(spec, "cpu") == 0)) {
        int st = list_opencl(devs, ndev);
        if (st && automatic) {
            if (!quiet)
                yc_warn("listing OpenCL devices failed (%s): using the CPU backend\n", yc_last_error());
        } else if (st) {
            return yc_error_context(st, "listing OpenCL devices for --device %s", spec);
        }
        if (st) {
            free(*devs);
            *devs = NULL;
            *ndev = 0;
        }
    }
    return yc_device_pick(spec, *devs, *ndev, have_opencl, index);
}

int yc_device_is_cpu(const char *spec, bool *cpu)
{
    yc_device_info *devs = NULL;
    int ndev = 0, index = -1;
    int st = resolve(spec, true, &devs, &ndev, &index);
    free(devs);
    *cpu = st == YC_OK && index < 0;
    return st;
}

int yc_device_open(const char *spec, int threads, bool announce, yc_backend **out)
{
    *out = NULL;
    bool automatic = !spec || !spec[0] || strcmp(spec, "auto") == 0;
    yc_device_info *devs = NULL;
    int ndev = 0, index = -1;
    int st = resolve(spec, false, &devs, &ndev, &index);
    if (st) {
        free(devs);
        return st;
    }
    if (index < 0) {
        free(devs);
        st = yc_backend_cpu_new(out, threads);
        if (st)
            return yc_error_context(st, "starting the CPU backend");
        if (announce)
            yc_info("device: %s%s\n", (*out)->info.name,
                    automatic ? (ndev ? " (auto: no OpenCL GPU; --device opencl uses an OpenCL CPU device)"
                                      : " (auto: no OpenCL GPU)")
                              : "");
        return YC_OK;
    }
#ifdef YC_HAVE_OPENCL
    st = yc_backend_opencl_new(out, index);
    if (st) {
        if (automatic)
            st = yc_error_context(st, "--device auto chose opencl:%d (--device cpu computes on the CPU backend)",
                                  index);
        else
            st = yc_error_context(st, "--device %s", spec);
        free(devs);
        return st;
    }
    if (announce)
        yc_info("device: opencl:%d %s (%s)%s\n", index, devs[index].name, devs[index].platform,
                automatic ? " (auto: the OpenCL GPU with the most memory)" : "");
#endif
    free(devs);
    return YC_OK;
}
