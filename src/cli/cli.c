/* Command-line helpers shared by the commands (see cli.h). */
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "detect.h"
#include "device.h"
#include "graph.h"
#include "log.h"
#include "util.h"

/* "yolocl CMD" or "yolocl" when there is no command. */
static void print_prog(const char *cmd)
{
    if (cmd && cmd[0])
        fprintf(stderr, "yolocl %s", cmd);
    else
        fputs("yolocl", stderr);
}

int yc_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    print_prog(cmd);
    fputs(": ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    fputs("Try '", stderr);
    print_prog(cmd);
    fputs(" --help'.\n", stderr);
    return YC_EXIT_USAGE;
}

int yc_report_failure(int status)
{
    const char *msg = yc_last_error();
    if (msg[0])
        fprintf(stderr, "yolocl: error: %s\n", msg);
    else
        fprintf(stderr, "yolocl: error: failed with status %d\n", status);
    return status == YC_EUSAGE ? YC_EXIT_USAGE : YC_EXIT_FAILURE;
}

int yc_cli_int(const char *cmd, const char *opt, const char *arg, long min, long max, int *out)
{
    if (min < INT_MIN)
        min = INT_MIN;
    if (max > INT_MAX)
        max = INT_MAX;
    char *end = NULL;
    errno = 0;
    long v = strtol(arg, &end, 10);
    if (!arg[0] || end == arg || *end || errno == EINVAL)
        return yc_usage_error(cmd, "invalid value '%s' for %s: expected an integer", arg, opt);
    if (errno == ERANGE || v < min || v > max)
        return yc_usage_error(cmd, "invalid value '%s' for %s: expected an integer from %ld to %ld",
                              arg, opt, min, max);
    *out = (int)v;
    return 0;
}

int yc_cli_float(const char *cmd, const char *opt, const char *arg, double min, double max,
                 float *out)
{
    char *end = NULL;
    errno = 0;
    double v = strtod(arg, &end);
    if (!arg[0] || end == arg || *end || !isfinite(v))
        return yc_usage_error(cmd, "invalid value '%s' for %s: expected a number", arg, opt);
    if (errno == ERANGE || v < min || v > max)
        return yc_usage_error(cmd, "invalid value '%s' for %s: expected a number from %g to %g",
                              arg, opt, min, max);
    *out = (float)v;
    return 0;
}

int yc_cli_size(const char *cmd, const char *opt, const char *arg, size_t *out)
{
    size_t v;
    if (yc_parse_size(arg, &v) != YC_OK) {
        int st = yc_usage_error(cmd, "invalid value for %s: %s", opt, yc_last_error());
        yc_error_clear();
        return st;
    }
    *out = v;
    return 0;
}

int yc_cli_pixels(const char *cmd, const char *opt, const char *arg, size_t *out)
{
    const unsigned long long most = 1ull << 40;
    unsigned long long a = 0, b = 1;
    char *end = NULL;
    errno = 0;
    if (arg[0] >= '0' && arg[0] <= '9')
        a = strtoull(arg, &end, 10);
    bool ok = end && end != arg && errno == 0;
    if (ok && (*end == 'x' || *end == 'X')) {
        const char *second = end + 1;
        ok = *second >= '0' && *second <= '9';
        if (ok)
            b = strtoull(second, &end, 10);
        ok = ok && errno == 0 && end != second;
    }
    if (!ok || *end)
        return yc_usage_error(cmd, "invalid value '%s' for %s: expected a number of pixels or "
                              "WxH, e.g. 20000x20000", arg, opt);
    if (a < 1 || b < 1 || a > most || b > most || a * b > most)
        return yc_usage_error(cmd, "invalid value '%s' for %s: expected from 1 to 2^40 pixels",
                              arg, opt);
    *out = (size_t)(a * b);
    return 0;
}

/* getopt_long (glibc) leaves, after an error:
 * - unknown or ambiguous long option: optopt 0, argv[optind-1] the option as written;
 * - long option missing its value (then optind == argc), or given one it does not take
 *   ("--json=1"): optopt the option's val, argv[optind-1] the option as written;
 * - unknown short option: optopt the character; argv[optind] is its cluster while characters
 *   of the cluster remain, else argv[optind-1];
 * - short option missing its value: optopt the character, the last one of the last argument.
 *   An unknown short option can end the command line too, so that one case is worded to cover
 *   both. */
int yc_cli_bad_option(const char *cmd, int argc, char **argv)
{
    const char *arg = optind >= 1 && optind - 1 < argc ? argv[optind - 1] : NULL;
    const char *next = optind >= 0 && optind < argc ? argv[optind] : NULL;
    bool in_cluster = optopt > 0 && optopt < 256 && next && next[0] == '-' && next[1] &&
                      next[1] != '-' && strchr(next + 1, optopt);
    if (arg && arg[0] == '-' && arg[1] == '-' && arg[2] && !in_cluster) {
        const char *eq = strchr(arg, '=');
        int namelen = eq ? (int)(eq - arg) : (int)strlen(arg);
        if (optopt == 0)
            return yc_usage_error(cmd, "unknown option '%.*s'", namelen, arg);
        if (eq)
            return yc_usage_error(cmd, "option '%.*s' does not take a value", namelen, arg);
        return yc_usage_error(cmd, "option '%s' needs a value", arg);
    }
    if (optopt > 0 && optopt < 256) {
        size_t len = arg ? strlen(arg) : 0;
        if (!in_cluster && optind == argc && len >= 2 && arg[0] == '-' &&
            arg[len - 1] == (char)optopt)
            return yc_usage_error(cmd, "option '-%c' is unknown or needs a value", optopt);
        return yc_usage_error(cmd, "unknown option '-%c'", optopt);
    }
    if (arg)
        return yc_usage_error(cmd, "invalid option '%s'", arg);
    return yc_usage_error(cmd, "invalid option");
}

int yc_cli_run_name(const char *cmd, const char *project, const char *name)
{
    if (!project[0] || !name[0] || strchr(name, '/'))
        return yc_usage_error(cmd, "--project and --name must be non-empty, and --name a single "
                              "directory name");
    return 0;
}

int yc_open_infer_model(const char *device, const char *weights, const char *cfg,
                        yc_backend **be, yc_infer_model *im)
{
    int st;
    if ((st = yc_device_open(device, 0, true, be)) ||
        (st = yc_infer_model_load(im, weights, cfg, *be)))
        return st;
    yc_model *m = im->m;
    printf("%s summary: %d layers, %zu parameters, 0 gradients, %.1f GFLOPs\n", m->cfg->name,
           yc_model_count_modules(m), yc_model_count_params(m), yc_model_gflops(m, 640));
    /* val.py and detect.py run the fused model (attempt_load(fuse=True)) */
    return yc_model_fuse(m);
}

int yc_half_check(const yc_backend *be, const char *cmd)
{
    if (!be->info.fp16_storage)
        return yc_error_status(YC_EUSAGE, "%s --half: %s cannot store FP16 tensors; run without "
                               "--half", cmd, be->info.name);
    printf("--half: FP16 storage of activations with FP32 arithmetic on %s (%s)\n",
           be->info.name, be->info.fp16_arith ? "yolocl has no FP16 arithmetic kernels"
                                              : "the device has no FP16 arithmetic");
    return YC_OK;
}
