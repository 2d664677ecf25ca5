/* Command-line helpers shared by the commands: value parsing with clear messages, usage errors,
 * and exit statuses. */
#ifndef YC_CLI_H
#define YC_CLI_H

#include <stddef.h>

/* Exit statuses of the yolocl process. */
enum {
    YC_EXIT_OK = 0,      /* success */
    YC_EXIT_FAILURE = 1, /* the command ran and failed (message on stderr) */
    YC_EXIT_USAGE = 2,   /* bad command line: unknown option, bad value, missing argument */
};

/* Prints "yolocl CMD: <message>" and "Try 'yolocl CMD --help'." on stderr; returns YC_EXIT_USAGE. */
int yc_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Prints "yolocl: error: <yc_last_error()>" on stderr; returns YC_EXIT_FAILURE, or YC_EXIT_USAGE
 * when status is YC_EUSAGE. */
int yc_report_failure(int status);

/* Parse option values.  On a bad value they print a usage error naming the option (via
 * yc_usage_error with `cmd`) and return YC_EXIT_USAGE; on success 0. */
int yc_cli_int(const char *cmd, const char *opt, const char *arg, long min, long max, int *out);
int yc_cli_float(const char *cmd, const char *opt, const char *arg, double min, double max,
                 float *out);
int yc_cli_size(const char *cmd, const char *opt, const char *arg, size_t *out);
/* A pixel count: an integer, or WxH (their product), at least 1 and at most 2^40 (--max-pixels). */
int yc_cli_pixels(const char *cmd, const char *opt, const char *arg, size_t *out);

/* --project and --name of a run directory: non-empty, the name one directory level.  Returns 0
 * or YC_EXIT_USAGE with a usage error. */
int yc_cli_run_name(const char *cmd, const char *project, const char *name);

/* Getopt error handling for a command: call from the `case '?'` / `case ':'` of getopt_long
 * loops.  Uses optopt/argv to name the bad option.  Returns YC_EXIT_USAGE. */
int yc_cli_bad_option(const char *cmd, int argc, char **argv);

struct yc_backend;
struct yc_infer_model;
/* val and detect: opens the device (--device, announced), loads the model of --weights (with
 * --cfg) on it for inference, prints its summary line ("yolov5s summary: ... GFLOPs") and fuses
 * it (yc_model_fuse: Conv and BatchNorm folded, as YOLOv5's val.py and detect.py run it). */
int yc_open_infer_model(const char *device, const char *weights, const char *cfg,
                        struct yc_backend **be, struct yc_infer_model *im);

/* val and detect --half: FP16 storage of the activations with FP32 arithmetic (yolocl has no FP16
 * arithmetic kernels; YOLOv5's --half computes in FP16 on CUDA).  Prints which it is on be's
 * device; YC_EUSAGE (message naming the device) when the device cannot store FP16. */
int yc_half_check(const struct yc_backend *be, const char *cmd);

#endif
