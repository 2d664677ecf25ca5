/* yolocl demo-data: writes the built-in demo dataset (the one `yolocl train` uses without
 * --data) to a directory of the user's choice. */
#include <getopt.h>
#include <stdio.h>

#include "cli.h"
#include "commands.h"
#include "demo.h"
#include "log.h"

static void print_usage(void)
{
    fputs("Usage: yolocl demo-data DIR [--seed N] [--train N] [--val N]\n"
          "Write the built-in demo dataset (coloured shapes on textured backgrounds, 4 classes,\n"
          "exact labels) to DIR in YOLOv5 layout, with DIR/demo.yaml for --data.\n"
          "\n"
          "      --seed N    generator seed (default 0: the dataset `yolocl train` uses)\n"
          "      --train N   training images (default 320)\n"
          "      --val N     validation images (default 80)\n"
          "  -h, --help      show this help\n",
          stdout);
}

int yc_cmd_demo(int argc, char **argv)
{
    static const char *const cmd = "demo-data";
    static const struct option opts[] = {
        {"seed", required_argument, NULL, 's'},
        {"train", required_argument, NULL, 't'},
        {"val", required_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    yc_demo_options opt;
    yc_demo_options_default(&opt);
    int c, st, v;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (c) {
        case 's':
            if ((st = yc_cli_int(cmd, "--seed", optarg, 0, 2147483647, &v)))
                return st;
            opt.seed = (uint64_t)v;
            break;
        case 't':
            if ((st = yc_cli_int(cmd, "--train", optarg, 1, 1000000, &opt.n_train)))
                return st;
            break;
        case 'v':
            if ((st = yc_cli_int(cmd, "--val", optarg, 1, 1000000, &opt.n_val)))
                return st;
            break;
        case 'h':
            print_usage();
            return YC_EXIT_OK;
        default:
            return yc_cli_bad_option(cmd, argc, argv);
        }
    }
    if (optind != argc - 1)
        return yc_usage_error(cmd, optind < argc ? "expected one directory, got several"
                                                 : "missing the directory to write");
    const char *dir = argv[optind];
    if ((st = yc_demo_write(dir, &opt)))
        return yc_report_failure(st);
    yc_info("wrote %d training and %d validation images to %s; train with: yolocl train --data "
            "%s/%s\n", opt.n_train, opt.n_val, dir, dir, YC_DEMO_YAML);
    return YC_EXIT_OK;
}
