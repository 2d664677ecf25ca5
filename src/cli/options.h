/* A command's options declared once, as a table (after git's parse-options): each row names an
 * option (long name, short name, aliases), its value (type, range), the field of the command's
 * options struct it sets (by offset, or by the key of a saved field, field.h) and its help text.
 * From the table come the getopt_long table, the parsing with its usage errors, and the usage
 * text of --help.
 *
 *     typedef struct { const char *data; int epochs; bool rect; } my_opts;
 *     static const yc_option rows[] = {
 *         YC_OPT_STRING('d', "data", "FILE", my_opts, data, "dataset yaml"),
 *         YC_OPT_INT('e', "epochs", "N", my_opts, epochs, 1, 1000000, "epochs (default 100)"),
 *         YC_OPT_BOOL(0, "rect", my_opts, rect, "rectangular training"),
 *         YC_OPT_HELP(),
 *         YC_OPT_END(),
 *     };
 *     static const yc_command_options spec = {.cmd = "train", .head = "Usage: ...\n\n",
 *                                             .rows = rows, .help_col = 27};
 *     my_opts o = {...defaults...};
 *     yc_opt_state s;
 *     int st = yc_options_parse(&spec, argc, argv, &o, &s);   // YC_OPT_DONE after --help
 *
 * The usage text is the head, then a line per row ("  -e, --epochs N" padded to help_col, then
 * the help; '\n' in the help continues it at help_col), YC_OPT_TEXT rows as they are.  Rows with
 * a key take their field from a saved-field table (field.h; yolocl train's yc_train_fields), so
 * that an option saved with a run is declared by one row there and one here.  Rows shared by
 * several commands are the YC_OPTS_* macros below. */
#ifndef YC_OPTIONS_H
#define YC_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>

#include "field.h"

typedef enum yc_opt_type {
    YC_OPT_T_END = 0,
    YC_OPT_T_STRING,   /* const char * = the value */
    YC_OPT_T_INT,      /* int, an integer in [lo, hi] (yc_cli_int) */
    YC_OPT_T_FLOAT,    /* float, a number in [lo, hi] (yc_cli_float) */
    YC_OPT_T_DOUBLE,   /* double, a number in [lo, hi], below hi with YC_OPT_BELOW_HI */
    YC_OPT_T_SIZE,     /* size_t, a size with a unit (yc_cli_size: --mem) */
    YC_OPT_T_PIXELS,   /* size_t, a pixel count N or WxH (yc_cli_pixels: --max-pixels) */
    YC_OPT_T_BOOL,     /* bool = true; no value */
    YC_OPT_T_SET,      /* int = `value`; no value (--half, --no-half) */
    YC_OPT_T_ENUM,     /* int = parse(value) (the row's, else its saved field's enum_parse),
                          else a usage error "expected <choices>" */
    YC_OPT_T_CALLBACK, /* fn(row, value, obj, state) does it all */
    YC_OPT_T_HELP,     /* -h, --help: prints the usage, parsing ends with YC_OPT_DONE */
    YC_OPT_T_TEXT,     /* no option: a line of the usage text (help), printed as it is */
} yc_opt_type;

/* flags */
enum {
    YC_OPT_OPTIONAL_ARG = 1 << 0, /* the value may be left out, or be the next argument when that
                                     does not start with '-' (argparse nargs='?') */
    YC_OPT_BELOW_HI = 1 << 1,     /* a number below hi, not up to it */
    YC_OPT_HIDDEN = 1 << 2,       /* not in the usage text (its help names it elsewhere) */
};

struct yc_opt_state;
struct yc_option;
/* Parses `arg` (NULL for a bare optional value) for the row into obj, at yc_opt_offset(s->spec,
 * row); 0 or a usage error's exit status (yc_usage_error). */
typedef int (*yc_opt_fn)(const struct yc_option *row, const char *arg, void *obj,
                         struct yc_opt_state *s);

typedef struct yc_option {
    yc_opt_type type;
    int short_name;            /* a character, or 0 */
    const char *name;          /* long name without "--" */
    const char *aliases[3];    /* other long names of the same option (--batch for --batch-size) */
    const char *metavar;       /* the value's name in the usage ("N", "[RUN]"); NULL: none */
    size_t offset;             /* the field set in the command's struct */
    const char *key;           /* or: the key of a saved field (yc_command_options.fields) */
    double lo, hi;             /* range of a number */
    long value;                /* YC_OPT_T_SET: the value stored */
    unsigned flags;
    yc_opt_fn fn;              /* YC_OPT_T_CALLBACK */
    const char *choices;       /* YC_OPT_T_ENUM: "SGD, Adam or AdamW" for its usage error */
    int (*parse)(const char *name, int *v); /* YC_OPT_T_ENUM without a key: the value of a name */
    const char *zero;          /* YC_OPT_T_INT: 0 is refused with this usage error */
    const char *spec;          /* the usage's left column in place of "-s, --name METAVAR" */
    const char *help;          /* the usage text; '\n' continues it on the next line */
} yc_option;

typedef struct yc_command_options {
    const char *cmd;           /* "train": usage errors say "yolocl train: ..." */
    const char *head;          /* the usage text before the options */
    const yc_option *rows;     /* ends with YC_OPT_END() */
    int help_col;              /* the column where help texts start */
    const yc_field *fields;    /* the saved fields rows refer to by key (train), or NULL */
    /* called after the options, before arguments left over are refused (may take some); may
     * be NULL */
    int (*after)(void *obj, struct yc_opt_state *s);
} yc_command_options;

#define YC_OPT_MAX 96

/* What a parse found, for checks across options and for callbacks. */
typedef struct yc_opt_state {
    const yc_command_options *spec;
    int argc;
    char **argv;
    /* given[i]: rows[i] was on the command line */
    bool given[YC_OPT_MAX];
} yc_opt_state;

/* Returned by yc_options_parse after --help (the usage is printed): exit 0. */
#define YC_OPT_DONE (-1)

/* Parses argv (argv[0] the command name) into obj by spec's rows; arguments that are not
 * options are a usage error.  Returns 0, YC_OPT_DONE after --help, or the exit status of a usage
 * error (printed). */
int yc_options_parse(const yc_command_options *spec, int argc, char **argv, void *obj,
                     yc_opt_state *s);

/* Whether the option with this long name was given. */
bool yc_opt_given(const yc_opt_state *s, const char *name);

/* True when `word` is a plain non-negative integer (a further value of a many-valued option). */
bool yc_opt_is_uint(const char *word);

/* --img H [W] (YOLOv5's --imgsz nargs='+'), for an option callback: `arg` the height, and the
 * next argument the width when it is a number (consumed), else the height again; each 32 to
 * 16384.  Returns 0 or YC_EXIT_USAGE with a usage error. */
int yc_opt_img_hw(const char *arg, yc_opt_state *s, int *h, int *w);

/* Prints the usage text of spec on stdout. */
void yc_options_usage(const yc_command_options *spec);

/* The field a row sets: its offset, or its saved field's. */
size_t yc_opt_offset(const yc_command_options *spec, const yc_option *row);

/* ---- rows ---------------------------------------------------------------------------------- */

#define YC_OPT_END() {.type = YC_OPT_T_END}
#define YC_OPT_STRING(s, n, meta, T, f, h)                                                       \
    {.type = YC_OPT_T_STRING, .short_name = s, .name = n, .metavar = meta,                       \
     .offset = offsetof(T, f), .help = h}
#define YC_OPT_INT(s, n, meta, T, f, lo_, hi_, h)                                                \
    {.type = YC_OPT_T_INT, .short_name = s, .name = n, .metavar = meta,                          \
     .offset = offsetof(T, f), .lo = lo_, .hi = hi_, .help = h}
#define YC_OPT_FLOAT(s, n, meta, T, f, lo_, hi_, h)                                              \
    {.type = YC_OPT_T_FLOAT, .short_name = s, .name = n, .metavar = meta,                        \
     .offset = offsetof(T, f), .lo = lo_, .hi = hi_, .help = h}
#define YC_OPT_BOOL(s, n, T, f, h)                                                               \
    {.type = YC_OPT_T_BOOL, .short_name = s, .name = n, .offset = offsetof(T, f), .help = h}
#define YC_OPT_SET(n, T, f, v, h)                                                                \
    {.type = YC_OPT_T_SET, .name = n, .offset = offsetof(T, f), .value = v, .help = h}
#define YC_OPT_SIZE(n, meta, T, f, h)                                                            \
    {.type = YC_OPT_T_SIZE, .name = n, .metavar = meta, .offset = offsetof(T, f), .help = h}
#define YC_OPT_PIXELS(n, meta, T, f, h)                                                          \
    {.type = YC_OPT_T_PIXELS, .name = n, .metavar = meta, .offset = offsetof(T, f), .help = h}
#define YC_OPT_CALLBACK(s, n, meta, T, f, fn_, h)                                                \
    {.type = YC_OPT_T_CALLBACK, .short_name = s, .name = n, .metavar = meta,                     \
     .offset = offsetof(T, f), .fn = fn_, .help = h}
#define YC_OPT_TEXT(t) {.type = YC_OPT_T_TEXT, .help = t}
#define YC_OPT_HELP() {.type = YC_OPT_T_HELP, .short_name = 'h', .name = "help", .help = "show this help"}

/* ---- shared groups ------------------------------------------------------------------------- */

/* device: --device D */
#define YC_OPTS_DEVICE(T, device)                                                                \
    YC_OPT_STRING(0, "device", "D", T, device,                                                   \
                  "auto, cpu, opencl, opencl:N or a device name substring")

/* run directory: --project DIR, --name NAME, --exist-ok (their help differs by command) */
#define YC_OPTS_RUN_DIR(T, project, name, exist_ok, project_h, name_h, exist_h)                  \
    YC_OPT_STRING(0, "project", "DIR", T, project, project_h),                                   \
    YC_OPT_STRING(0, "name", "NAME", T, name, name_h),                                           \
    YC_OPT_BOOL(0, "exist-ok", T, exist_ok, exist_h)

/* memory: --mem SIZE, --half and --no-half (the int yc_half_policy at `half`), --recompute */
#define YC_OPTS_MEM(T, mem, h) YC_OPT_SIZE("mem", "SIZE", T, mem, h)
#define YC_OPTS_HALF(T, half, half_spec, half_h, nohalf_flags, nohalf_h)                         \
    {.type = YC_OPT_T_SET, .name = "half", .offset = offsetof(T, half), .value = YC_HALF_ON,     \
     .spec = half_spec, .help = half_h},                                                         \
    {.type = YC_OPT_T_SET, .name = "no-half", .offset = offsetof(T, half), .value = YC_HALF_OFF, \
     .flags = nohalf_flags, .help = nohalf_h}
#define YC_OPTS_RECOMPUTE(T, recompute, h) YC_OPT_BOOL(0, "recompute", T, recompute, h)

/* slicing (detect --slice, val --val-full) over the yc_slice_options at `so`: --slice-overlap X
 * (below 1), --slice-merge M (with IoS suppression, nms-ios, when `ios`; `choices` for its usage
 * error), --slice-thres X, --slice-full.  yc_opt_slice_given says whether any was given. */
#define YC_OPTS_SLICE(T, so, overlap_h, ios, choices_, merge_h, thres_h, full_h)                 \
    {.type = YC_OPT_T_CALLBACK, .name = "slice-overlap", .metavar = "X",                        \
     .offset = offsetof(T, so), .fn = yc_opt_slice_overlap, .help = overlap_h},                  \
    {.type = YC_OPT_T_CALLBACK, .name = "slice-merge", .metavar = "M", .offset = offsetof(T, so),\
     .fn = yc_opt_slice_merge, .value = ios, .choices = choices_, .help = merge_h},              \
    {.type = YC_OPT_T_CALLBACK, .name = "slice-thres", .metavar = "X", .offset = offsetof(T, so),\
     .fn = yc_opt_slice_thres, .help = thres_h},                                                 \
    {.type = YC_OPT_T_CALLBACK, .name = "slice-full", .offset = offsetof(T, so),                 \
     .fn = yc_opt_slice_full, .help = full_h}

int yc_opt_slice_overlap(const yc_option *row, const char *arg, void *obj, yc_opt_state *s);
int yc_opt_slice_merge(const yc_option *row, const char *arg, void *obj, yc_opt_state *s);
int yc_opt_slice_thres(const yc_option *row, const char *arg, void *obj, yc_opt_state *s);
int yc_opt_slice_full(const yc_option *row, const char *arg, void *obj, yc_opt_state *s);
bool yc_opt_slice_given(const yc_opt_state *s);

/* --tile SIZE: 0 (whole images) or a window of 32 to 16384 pixels, into an int. */
#define YC_OPT_TILE(T, f, h)                                                                     \
    {.type = YC_OPT_T_CALLBACK, .name = "tile", .metavar = "SIZE", .offset = offsetof(T, f),     \
     .fn = yc_opt_tile, .help = h}
int yc_opt_tile(const yc_option *row, const char *arg, void *obj, yc_opt_state *s);

/* --cache [ram|disk]: an optional value, also the next argument (bare: ram), into an int
 * (yc_cache_kind). */
#define YC_OPT_CACHE(meta, T, f, h)                                                              \
    {.type = YC_OPT_T_CALLBACK, .name = "cache", .metavar = meta, .offset = offsetof(T, f),      \
     .flags = YC_OPT_OPTIONAL_ARG, .fn = yc_opt_cache, .help = h}
int yc_opt_cache(const yc_option *row, const char *arg, void *obj, yc_opt_state *s);

/* --optimizer NAME: SGD, Adam or AdamW into an int (yc_optim_kind). */
int yc_opt_parse_optimizer(const char *name, int *v);

#endif
