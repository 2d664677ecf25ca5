/* Free memory of an OpenCL device, which core OpenCL cannot tell (the memory fit plans against
 * it, else against the total less a margin):
 *   a CPU device (PoCL): the host's MemAvailable;
 *   AMD (cl_amd_device_attribute_query): CL_DEVICE_GLOBAL_FREE_MEMORY_AMD, in KiB;
 *   NVIDIA: NVML (libnvidia-ml.so.1, loaded at run time, so it is no build dependency), the
 *     device found by its PCI address (cl_khr_pci_bus_info, else cl_nv_device_attribute_query);
 *   anything else: 0, unknown. */
#include "cl_internal.h"

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "log.h"

#define CL_DEVICE_GLOBAL_FREE_MEMORY_AMD_ 0x4039
#define CL_DEVICE_PCI_BUS_ID_NV_ 0x4008
#define CL_DEVICE_PCI_SLOT_ID_NV_ 0x4009
#define CL_DEVICE_PCI_DOMAIN_ID_NV_ 0x400A
#define CL_DEVICE_PCI_BUS_INFO_KHR_ 0x410F

static size_t host_available(size_t total)
{
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f)
        return 0;
    char line[256];
    unsigned long long kib = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kib) == 1)
            break;
    fclose(f);
    size_t bytes = kib > SIZE_MAX / 1024 ? SIZE_MAX : (size_t)kib * 1024;
    return bytes < total ? bytes : total;
}

/* The device's PCI address as NVML spells it, "dddddddd:bb:dd.f"; false when the driver does
 * not say. */
static bool pci_address(cl_device_id dev, const char *ext, char *out, size_t len)
{
    if (strstr(ext, "cl_khr_pci_bus_info")) {
        struct {
            cl_uint domain, bus, device, function;
        } info;
        if (clGetDeviceInfo(dev, CL_DEVICE_PCI_BUS_INFO_KHR_, sizeof info, &info, NULL) == CL_SUCCESS) {
            snprintf(out, len, "%08x:%02x:%02x.%x", info.domain, info.bus, info.device, info.function);
            return true;
        }
    }
    if (strstr(ext, "cl_nv_device_attribute_query")) {
        cl_uint bus = 0, slot = 0, domain = 0;
        if (clGetDeviceInfo(dev, CL_DEVICE_PCI_BUS_ID_NV_, sizeof bus, &bus, NULL) == CL_SUCCESS &&
            clGetDeviceInfo(dev, CL_DEVICE_PCI_SLOT_ID_NV_, sizeof slot, &slot, NULL) == CL_SUCCESS) {
            if (clGetDeviceInfo(dev, CL_DEVICE_PCI_DOMAIN_ID_NV_, sizeof domain, &domain, NULL) != CL_SUCCESS)
                domain = 0;
            /* the slot id packs device (bits 3..7) and function (bits 0..2) */
            snprintf(out, len, "%08x:%02x:%02x.%x", domain, bus, slot >> 3, slot & 7);
            return true;
        }
    }
    return false;
}

/* NVML's memory record (nvml.h, nvmlMemory_t) */
typedef struct nvml_memory {
    unsigned long long total, free, used;
} nvml_memory;

static size_t nvml_free(const char *pci)
{
    void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        return 0;
    typedef int (*init_fn)(void);
    typedef int (*by_pci_fn)(const char *, void **);
    typedef int (*mem_fn)(void *, nvml_memory *);
    init_fn init = (init_fn)(uintptr_t)dlsym(lib, "nvmlInit_v2");
    init_fn shutdown = (init_fn)(uintptr_t)dlsym(lib, "nvmlShutdown");
    by_pci_fn by_pci = (by_pci_fn)(uintptr_t)dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2");
    mem_fn mem = (mem_fn)(uintptr_t)dlsym(lib, "nvmlDeviceGetMemoryInfo");
    size_t free_bytes = 0;
    if (init && shutdown && by_pci && mem && init() == 0) {
        void *handle = NULL;
        nvml_memory m = {0};
        if (by_pci(pci, &handle) == 0 && mem(handle, &m) == 0 && m.free <= SIZE_MAX)
            free_bytes = (size_t)m.free;
        shutdown();
    }
    if (!free_bytes)
        yc_debug("opencl: NVML gave no free memory for the device at %s\n", pci);
    dlclose(lib);
    return free_bytes;
}

size_t yc_cl_free_memory(cl_device_id dev, const yc_cl_device_desc *d, const char *ext)
{
    if (strstr(d->type, "CPU"))
        return host_available(d->info.mem_total);
    if (strstr(ext, "cl_amd_device_attribute_query")) {
        size_t kib[2] = {0, 0};
        if (clGetDeviceInfo(dev, CL_DEVICE_GLOBAL_FREE_MEMORY_AMD_, sizeof kib, kib, NULL) == CL_SUCCESS &&
            kib[0] > 0 && kib[0] <= SIZE_MAX / 1024)
            return kib[0] * 1024 < d->info.mem_total ? kib[0] * 1024 : d->info.mem_total;
    }
    char pci[32];
    if (strstr(d->vendor, "NVIDIA") && pci_address(dev, ext, pci, sizeof pci)) {
        size_t f = nvml_free(pci);
        return f < d->info.mem_total ? f : d->info.mem_total;
    }
    return 0;
}
