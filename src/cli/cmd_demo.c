/* yolocl demo-data: writes the built-in demo dataset (the one `yolocl train` uses without
 * --data) to a directory of the user's choice, for detection, segmentation or classification. */
#include <getopt.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cli.h"
#include "commands.h"
#include "demo.h"
#include "log.h"
#include "options.h"

/* The command line. */
typedef struct demo_cli {
    int seed, n_train, n_val, crop;
    const char *dir, *task;
} demo_cli;

#define T demo_cli
static const yc_option rows[] = {
    YC_OPT_STRING(0, "task", "T", T, task,
                  "detect (default: boxes), segment (polygon outlines)\n"
                  "or classify (ImageFolder crops)"),
    YC_OPT_INT(0, "seed", "N", T, seed, 0, 2147483647,
               "generator seed (default 0: the dataset `yolocl train` uses)"),
    YC_OPT_INT(0, "train", "N", T, n_train, 1, 1000000, "training images (default 320)"),
    YC_OPT_INT(0, "val", "N", T, n_val, 1, 1000000, "validation images (default 80)"),
    YC_OPT_INT(0, "crop", "PX", T, crop, 16, 1024,
               "classify: side of the square crops (default 64)"),
    YC_OPT_HELP(),
    YC_OPT_END(),
};
#undef T

/* DIR: the one argument */
static int directory(void *obj, yc_opt_state *s)
{
    if (optind != s->argc - 1)
        return yc_usage_error(s->spec->cmd, optind < s->argc ? "expected one directory, got "
                                                               "several"
                                                             : "missing the directory to write");
    ((demo_cli *)obj)->dir = s->argv[optind++];
    return 0;
}

static const yc_command_options spec = {
    .cmd = "demo-data",
    .head = "Usage: yolocl demo-data DIR [--task T] [--seed N] [--train N] [--val N] [--crop PX]\n"
            "Write the built-in demo dataset (coloured shapes on textured backgrounds, 4 classes,\n"
            "exact labels) to DIR in YOLOv5 layout, with DIR/demo.yaml for --data; with --task\n"
            "classify, DIR/{train,val}/CLASS/*.png crops of the shapes (DIR is the --data root).\n"
            "\n",
    .rows = rows,
    .help_col = 18,
    .after = directory,
};

int yc_cmd_demo(int argc, char **argv)
{
    yc_demo_options opt;
    yc_demo_options_default(&opt);
    demo_cli c = {.seed = (int)opt.seed, .n_train = opt.n_train, .n_val = opt.n_val,
                  .crop = opt.crop, .task = "detect"};
    yc_opt_state s;
    int st = yc_options_parse(&spec, argc, argv, &c, &s);
    if (st)
        return st == YC_OPT_DONE ? YC_EXIT_OK : st;
    if ((st = yc_demo_task_parse(c.task, &opt.task)))
        return yc_usage_error(spec.cmd, "%s", yc_last_error());
    opt.seed = (uint64_t)c.seed;
    opt.crop = c.crop;
    opt.n_train = c.n_train;
    opt.n_val = c.n_val;
    if ((st = yc_demo_write(c.dir, &opt)))
        return yc_report_failure(st);
    if (opt.task == YC_DEMO_CLASSIFY)
        yc_info("wrote the crops of %d training and %d validation scenes to %s; train with: "
                "yolocl train --cfg yolov5n-cls --data %s\n", opt.n_train, opt.n_val, c.dir,
                c.dir);
    else
        yc_info("wrote %d training and %d validation images to %s; train with: yolocl train%s "
                "--data %s/%s\n", opt.n_train, opt.n_val, c.dir,
                opt.task == YC_DEMO_SEGMENT ? " --cfg yolov5n-seg" : "", c.dir, YC_DEMO_YAML);
    return YC_EXIT_OK;
}
