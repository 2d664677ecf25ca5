/* yolocl devices: the CPU device and every OpenCL platform and device, as text or JSON. */
#include "config.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "cl_devices.h"
#include "cli.h"
#include "commands.h"
#include "json.h"
#include "log.h"
#include "options.h"
#include "util.h"

/* The CPU as the OpenMP backend sees it. */
typedef struct cpu_desc {
    yc_device_info info;
    /* physical cores and hardware threads (online logical CPUs) */
    int cores, threads;
    /* how FP16 values are converted: "F16C" or "portable conversion" */
    const char *fp16_via;
} cpu_desc;

/* The OpenCL part of the listing. */
typedef struct cl_listing {
    /* whether this build has OpenCL */
    bool built;
    yc_cl_platform_desc *platforms;
    int nplatforms;
    yc_cl_device_desc *devices;
    int ndevices;
    /* why platforms could not be listed at all ("" when they could) */
    char error[512];
} cl_listing;

/* The command line. */
typedef struct devices_cli {
    bool json;
} devices_cli;

static const yc_option rows[] = {
    YC_OPT_BOOL(0, "json", devices_cli, json,
                "print one JSON object {\"devices\": [...]} for scripts"),
    {.type = YC_OPT_T_HELP, .short_name = 'h', .name = "help", .help = "show this help and exit"},
    YC_OPT_END(),
};

static const yc_command_options spec = {
    .cmd = "devices",
    .head = "Usage: yolocl devices [--json]\n"
            "List the devices yolocl can run on: the CPU (OpenMP backend) and every device\n"
            "of every OpenCL platform, numbered opencl:0, opencl:1, ... over all platforms.\n"
            "For each: memory, largest single allocation and FP16 support (storage: values\n"
            "kept as half precision; arithmetic: native half math, OpenCL's cl_khr_fp16).\n"
            "\n"
            "Options:\n",
    .rows = rows,
    .help_col = 15,
};

static bool cpu_has_f16c(void)
{
#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("f16c") != 0;
#else
    return false;
#endif
}

/* The value of the first "key : value" line of /proc/cpuinfo whose key is one of `keys`. */
static bool cpuinfo_value(const char *const *keys, char *buf, size_t len)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return false;
    char line[512];
    bool found = false;
    while (!found && fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (!colon)
            continue;
        char *end = colon;
        while (end > line && (end[-1] == ' ' || end[-1] == '\t'))
            end--;
        for (const char *const *k = keys; *k && !found; k++) {
            size_t n = strlen(*k);
            if ((size_t)(end - line) != n || strncmp(line, *k, n) != 0)
                continue;
            char *v = colon + 1;
            while (*v == ' ' || *v == '\t')
                v++;
            v[strcspn(v, "\n")] = '\0';
            if (*v) {
                snprintf(buf, len, "%s", v);
                found = true;
            }
        }
    }
    fclose(f);
    return found;
}

/* MemTotal and MemAvailable of /proc/meminfo in bytes (sysconf's page counts when it cannot be
 * read; 0 when unknown). */
static void host_memory(size_t *total, size_t *avail)
{
    *total = *avail = 0;
    FILE *f = fopen("/proc/meminfo", "r");
    if (f) {
        char line[256];
        unsigned long long kb;
        while (fgets(line, sizeof line, f)) {
            if (sscanf(line, "MemTotal: %llu kB", &kb) == 1)
                *total = (size_t)kb * 1024;
            else if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
                *avail = (size_t)kb * 1024;
        }
        fclose(f);
    }
    long page = sysconf(_SC_PAGESIZE);
    if (*total == 0 && page > 0) {
        long pages = sysconf(_SC_PHYS_PAGES);
        if (pages > 0)
            *total = (size_t)pages * (size_t)page;
    }
    if (*avail == 0 && page > 0) {
        long pages = sysconf(_SC_AVPHYS_PAGES);
        if (pages > 0)
            *avail = (size_t)pages * (size_t)page;
    }
}

static void describe_cpu(cpu_desc *c)
{
    static const char *const name_keys[] = {"model name", "Model", "cpu model", "cpu", NULL};
    memset(c, 0, sizeof *c);
    yc_device_info *info = &c->info;
    info->kind = YC_DEVICE_CPU;
    if (!cpuinfo_value(name_keys, info->name, sizeof info->name))
        snprintf(info->name, sizeof info->name, "unknown CPU");
    info->cl_platform = info->cl_device = -1;
    host_memory(&info->mem_total, &info->mem_free);
    info->max_alloc = info->mem_total;
    info->alignment = 64;
    bool f16c = cpu_has_f16c();
    info->fp16_storage = true;
    info->fp16_arith = false;
    info->is_gpu = false;
    c->cores = yc_physical_cores();
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    c->threads = online > 0 ? (int)online : c->cores;
    info->compute_units = c->cores;
    c->fp16_via = f16c ? "F16C" : "portable conversion";
}

/* Fills the OpenCL part; a failure of the whole enumeration is kept in l->error. */
static int list_opencl(cl_listing *l)
{
    memset(l, 0, sizeof *l);
#ifdef YC_HAVE_OPENCL
    l->built = true;
    int st = yc_cl_enumerate(&l->platforms, &l->nplatforms, &l->devices, &l->ndevices);
    if (st == YC_ENOMEM)
        return st;
    if (st)
        snprintf(l->error, sizeof l->error, "%s", yc_last_error());
#endif
    return YC_OK;
}

static void free_listing(cl_listing *l)
{
    free(l->platforms);
    free(l->devices);
}

/* ------------------------------------------------------------------------------------------ */

static const char *size_text(size_t bytes, char *buf, size_t len)
{
    if (bytes == 0)
        return "unknown";
    return yc_format_size(bytes, buf, len);
}

static void print_text(const cpu_desc *c, const cl_listing *l)
{
    char a[32], b[32];
    const yc_device_info *ci = &c->info;
    printf("cpu: %s\n", ci->name);
    printf("    %-17s %d physical, %d threads\n", "cores", c->cores, c->threads);
    printf("    %-17s %s total, %s available\n", "memory", size_text(ci->mem_total, a, sizeof a),
           size_text(ci->mem_free, b, sizeof b));
    printf("    %-17s yes (%s)\n", "fp16 storage", c->fp16_via);
    printf("    %-17s no\n", "fp16 arithmetic");

    if (!l->built) {
        fputs("\nOpenCL: not in this build (configured with --disable-opencl)\n", stdout);
        return;
    }
    if (l->error[0])
        return;
    if (l->nplatforms == 0) {
        fputs("\nno OpenCL platforms\n", stdout);
        return;
    }
    for (int p = 0; p < l->nplatforms; p++) {
        const yc_cl_platform_desc *pl = &l->platforms[p];
        printf("\nOpenCL platform %d: %s\n", p, pl->name[0] ? pl->name : "(unnamed)");
        printf("    %-17s %s\n", "version", pl->version);
        printf("    %-17s %s\n", "vendor", pl->vendor);
        if (pl->error[0])
            printf("    %-17s %s\n", "error", pl->error);
        else if (pl->device_count == 0)
            printf("    %-17s none\n", "devices");
        for (int i = pl->first_device; i < pl->first_device + pl->device_count; i++) {
            const yc_cl_device_desc *d = &l->devices[i];
            const yc_device_info *di = &d->info;
            printf("  opencl:%d: %s\n", d->index, di->name);
            printf("    %-17s %s\n", "type", d->type);
            printf("    %-17s %s\n", "vendor", d->vendor);
            printf("    %-17s %s\n", "version", d->device_version);
            printf("    %-17s %s\n", "driver", d->driver_version);
            printf("    %-17s %s\n", "OpenCL C", d->c_version);
            printf("    %-17s %d\n", "compute units", di->compute_units);
            printf("    %-17s %s\n", "global memory", size_text(di->mem_total, a, sizeof a));
            if (di->mem_free)
                printf("    %-17s %s\n", "free memory", size_text(di->mem_free, a, sizeof a));
            else
                printf("    %-17s %s\n", "free memory",
                       "unknown (the memory fit plans against 90% of the global memory)");
            printf("    %-17s %s\n", "largest alloc", size_text(di->max_alloc, a, sizeof a));
            printf("    %-17s %s\n", "fp16 storage", "yes (vload_half/vstore_half)");
            printf("    %-17s %s\n", "fp16 arithmetic",
                   di->fp16_arith ? "yes (cl_khr_fp16)" : "no (no cl_khr_fp16)");
        }
    }
}

/* A JSON string literal.  The strings printed here are at most 512 bytes, and escaping makes a
 * byte at most 6, so the buffer always holds the result. */
static void json_string(const char *s)
{
    char buf[4096];
    yc_json_escape(buf, sizeof buf, s, strlen(s));
    fputs(buf, stdout);
}

static void json_key_string(const char *key, const char *value)
{
    printf(", \"%s\": ", key);
    json_string(value);
}

static const char *json_bool(bool b)
{
    return b ? "true" : "false";
}

static void print_json(const cpu_desc *c, const cl_listing *l)
{
    const yc_device_info *ci = &c->info;
    fputs("{\"devices\": [\n  {\"id\": \"cpu\", \"kind\": \"cpu\"", stdout);
    json_key_string("name", ci->name);
    printf(", \"cores\": %d, \"threads\": %d, \"mem_total\": %zu, \"mem_available\": %zu"
           ", \"fp16_storage\": true",
           c->cores, c->threads, ci->mem_total, ci->mem_free);
    json_key_string("fp16_conversion", c->fp16_via);
    fputs(", \"fp16_arith\": false}", stdout);
    for (int i = 0; i < l->ndevices; i++) {
        const yc_cl_device_desc *d = &l->devices[i];
        const yc_device_info *di = &d->info;
        printf(",\n  {\"id\": \"opencl:%d\", \"kind\": \"opencl\", \"platform_index\": %d"
               ", \"device_index\": %d",
               d->index, di->cl_platform, di->cl_device);
        json_key_string("platform", di->platform);
        json_key_string("platform_version", di->version);
        json_key_string("name", di->name);
        json_key_string("type", d->type);
        json_key_string("vendor", d->vendor);
        json_key_string("device_version", d->device_version);
        json_key_string("driver_version", d->driver_version);
        json_key_string("opencl_c_version", d->c_version);
        printf(", \"compute_units\": %d, \"clock_mhz\": %u, \"global_mem\": %zu, \"free_mem\": %zu"
               ", \"max_alloc\": %zu, \"local_mem\": %zu, \"fp16_storage\": %s, \"fp16_arith\": %s"
               ", \"fp64\": %s}",
               di->compute_units, d->clock_mhz, di->mem_total, di->mem_free, di->max_alloc, d->local_mem,
               json_bool(di->fp16_storage), json_bool(di->fp16_arith), json_bool(d->fp64));
    }
    printf("\n],\n\"opencl\": {\"built\": %s", json_bool(l->built));
    if (l->error[0])
        json_key_string("error", l->error);
    fputs(", \"platforms\": [", stdout);
    for (int p = 0; p < l->nplatforms; p++) {
        const yc_cl_platform_desc *pl = &l->platforms[p];
        printf("%s\n  {\"index\": %d", p ? "," : "", p);
        json_key_string("name", pl->name);
        json_key_string("version", pl->version);
        json_key_string("vendor", pl->vendor);
        printf(", \"first_device\": %d, \"devices\": %d", pl->first_device, pl->device_count);
        if (pl->error[0])
            json_key_string("error", pl->error);
        putchar('}');
    }
    fputs(l->nplatforms ? "\n]}}\n" : "]}}\n", stdout);
}

int yc_cmd_devices(int argc, char **argv)
{
    devices_cli o = {.json = false};
    yc_opt_state s;
    int st = yc_options_parse(&spec, argc, argv, &o, &s);
    if (st)
        return st == YC_OPT_DONE ? YC_EXIT_OK : st;
    bool json = o.json;

    cpu_desc cpu;
    describe_cpu(&cpu);
    cl_listing cl;
    st = list_opencl(&cl);
    if (st)
        return yc_report_failure(st);
    if (json)
        print_json(&cpu, &cl);
    else
        print_text(&cpu, &cl);
    int status = YC_EXIT_OK;
    if (cl.error[0]) {
        yc_error_status(YC_EDEVICE, "cannot list OpenCL platforms: %s", cl.error);
        fflush(stdout);
        status = yc_report_failure(YC_EDEVICE);
    }
    free_listing(&cl);
    return status;
}
