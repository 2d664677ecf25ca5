/* yolocl: the command-line entry point.  Global options, then a command looked up in a table;
 * every command parses its own options and returns the exit status.  Only main exits. */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "dist.h"
#include "log.h"
#include "video.h"
#include "waitpolicy.h"

typedef struct command {
    /* what the user types */
    const char *name;
    /* the implementation (argv[0] is the command name) */
    int (*run)(int argc, char **argv);
    /* one line for the command list of --help */
    const char *summary;
} command;

static const command commands[] = {
    {"train", yc_cmd_train, "train a model (YOLOv5's train.py); no --data: the demo dataset"},
    {"val", yc_cmd_val, "validate weights on a dataset: P, R, mAP (YOLOv5's val.py)"},
    {"detect", yc_cmd_detect, "detect objects in images; write annotated images and labels"},
    {"plan", yc_cmd_plan, "print the memory a training run needs, planned before it starts"},
    {"devices", yc_cmd_devices, "list the CPU and every OpenCL platform and device"},
    {"info", yc_cmd_info, "print a model's layer table, parameter count and GFLOPs"},
    {"inspect", yc_cmd_inspect, "run one training step; write head outputs, loss and gradients"},
    {"bench", yc_cmd_bench, "time inference and training steps: ms, images/s, GFLOP/s"},
    {"tune", yc_cmd_tune, "measure the OpenCL convolution tiles for a device and keep the best"},
    {"export", yc_cmd_export, "write weights as a yolocl .safetensors or an ONNX model"},
    {"demo-data", yc_cmd_demo, "write the built-in demo dataset to a directory"},
};

static const command *find_command(const char *name)
{
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(commands[i].name, name) == 0)
            return &commands[i];
    return NULL;
}

static void print_help(void)
{
    fputs("Usage: yolocl [OPTION]... COMMAND [ARG]...\n"
          "Train and run YOLOv5 object detectors (Ultralytics YOLOv5 v7.0 compatible) on\n"
          "OpenCL devices and on CPUs.\n"
          "\n"
          "Commands:\n",
          stdout);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        printf("  %-10s %s\n", commands[i].name, commands[i].summary);
    printf("  %-10s %s\n", "help", "show the help of a command (yolocl help COMMAND)");
    fputs("\n"
          "Options (before the command):\n"
          "  -q, --quiet     print only errors and warnings\n"
          "  -v, --verbose   print extra detail on standard error\n"
          "  -h, --help      show this help and exit\n"
          "  -V, --version   show the version and build features and exit\n"
          "\n"
          "'yolocl COMMAND --help' shows the options of a command.\n"
          "Exit status: 0 success, 1 failure, 2 bad usage.\n"
          "See yolocl(1) for the full manual.\n",
          stdout);
}

static void print_version(void)
{
    printf("yolocl %s\n", PACKAGE_VERSION);
#ifdef YC_HAVE_OPENCL
    fputs("OpenCL: yes (OpenCL ICD loader, CLBlast)\n", stdout);
#else
    fputs("OpenCL: no (built with --disable-opencl)\n", stdout);
#endif
#ifdef _OPENMP
    static const struct {
        long date;
        const char *version;
    } omp_versions[] = {
        {200505, "2.5"}, {200805, "3.0"}, {201107, "3.1"}, {201307, "4.0"},
        {201511, "4.5"}, {201811, "5.0"}, {202011, "5.1"}, {202111, "5.2"},
    };
    const char *omp = NULL;
    for (size_t i = 0; i < sizeof omp_versions / sizeof omp_versions[0]; i++)
        if (omp_versions[i].date == (long)_OPENMP)
            omp = omp_versions[i].version;
    if (omp)
        printf("OpenMP: yes (%s)\n", omp);
    else
        printf("OpenMP: yes (_OPENMP %ld)\n", (long)_OPENMP);
#else
    fputs("OpenMP: no\n", stdout);
#endif
    if (yc_dist_built())
        printf("MPI: yes (%s; mpirun -np N yolocl train ... trains data-parallel)\n",
               yc_dist_library());
    else
        fputs("MPI: no (built without MPI: no distributed training)\n", stdout);
    if (yc_video_built_in()) {
        char v[256];
        printf("Video: yes (%s; webcams: %s)\n", yc_video_versions(v, sizeof v),
               yc_video_webcams_built_in() ? "yes" : "no, built without libavdevice");
    } else {
        fputs("Video: no (built without FFmpeg: detect reads images only)\n", stdout);
    }
}

/* yolocl help [COMMAND] */
static int run_help(int argc, char **argv)
{
    if (argc == 1 || (argc == 2 && (strcmp(argv[1], "help") == 0 ||
                                    strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0))) {
        print_help();
        return YC_EXIT_OK;
    }
    if (argc > 2)
        return yc_usage_error(NULL, "help takes one command name, not %d arguments", argc - 1);
    const command *c = find_command(argv[1]);
    if (!c)
        return yc_usage_error(NULL, "unknown command '%s'", argv[1]);
    char help_opt[] = "--help";
    char *args[] = {argv[1], help_opt, NULL};
    optind = 0;
    return c->run(2, args);
}

/* Flushes standard output and reports a failed write (a full disk, a closed pipe). */
static int close_stdout(int status)
{
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "yolocl: error: cannot write to standard output: %s\n", strerror(errno));
        return status == YC_EXIT_OK ? YC_EXIT_FAILURE : status;
    }
    return status;
}

int main(int argc, char **argv)
{
    yc_wait_policy_start(argv);
#ifdef M_MMAP_THRESHOLD
    /* Buffers of 128 KiB and more get their own mappings, returned to the system when freed.
     * glibc's default raises this threshold to the largest buffer freed so far (up to 32 MiB), so
     * freed decode and augmentation buffers would linger in the heap and in each thread's arena,
     * memory the plan does not see (measured: 5 MiB more peak RSS on a short run). */
    mallopt(M_MMAP_THRESHOLD, 128 * 1024);
#endif
    static const struct option opts[] = {
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {"quiet", no_argument, NULL, 'q'},
        {"verbose", no_argument, NULL, 'v'},
        {NULL, 0, NULL, 0},
    };
    int c;
    opterr = 0;
    /* '+': stop at the command name, whose options are the command's own. */
    while ((c = getopt_long(argc, argv, "+:hVqv", opts, NULL)) != -1) {
        switch (c) {
        case 'h':
            print_help();
            return close_stdout(YC_EXIT_OK);
        case 'V':
            print_version();
            return close_stdout(YC_EXIT_OK);
        case 'q':
            yc_verbosity = 0;
            break;
        case 'v':
            yc_verbosity = 2;
            break;
        default:
            return yc_cli_bad_option(NULL, argc, argv);
        }
    }
    if (optind >= argc)
        return yc_usage_error(NULL, "missing command");

    const char *name = argv[optind];
    int cargc = argc - optind;
    char **cargv = argv + optind;
    int status;
    if (strcmp(name, "help") == 0) {
        status = run_help(cargc, cargv);
    } else {
        const command *cmd = find_command(name);
        if (!cmd)
            return yc_usage_error(NULL, "unknown command '%s'", name);
        /* the command's getopt_long starts afresh at cargv[1] */
        optind = 0;
        status = cmd->run(cargc, cargv);
    }
    return close_stdout(status);
}
