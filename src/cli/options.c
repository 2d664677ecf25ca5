/* Command options from a table: getopt_long table, parsing, usage text (see options.h). */
#include "options.h"

#include <assert.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "imgcache.h"
#include "optim.h"
#include "slice.h"

#define AT(obj, off, type) ((type *)((char *)(obj) + (off)))

static bool takes_value(const yc_option *r)
{
    switch (r->type) {
    case YC_OPT_T_BOOL:
    case YC_OPT_T_SET:
    case YC_OPT_T_HELP:
    case YC_OPT_T_TEXT:
    case YC_OPT_T_END:
        return false;
    case YC_OPT_T_CALLBACK:
        return r->metavar != NULL;
    default:
        return true;
    }
}

static const yc_field *row_field(const yc_command_options *spec, const yc_option *r)
{
    const yc_field *f = r->key && spec->fields ? yc_field_find(spec->fields, r->key) : NULL;
    assert(!r->key || f); /* a row names a saved field that exists */
    return f;
}

size_t yc_opt_offset(const yc_command_options *spec, const yc_option *r)
{
    const yc_field *f = row_field(spec, r);
    return f ? f->offset : r->offset;
}

bool yc_opt_given(const yc_opt_state *s, const char *name)
{
    for (int i = 0; s->spec->rows[i].type != YC_OPT_T_END; i++)
        if (s->spec->rows[i].name && !strcmp(s->spec->rows[i].name, name))
            return s->given[i];
    return false;
}

/* The getopt_long table and short-option string of spec. */
static void getopt_tables(const yc_command_options *spec, struct option *lo, size_t nlo,
                          char *shorts, size_t nshorts)
{
    size_t n = 0, ns = 0;
    shorts[ns++] = ':';
    for (int i = 0; spec->rows[i].type != YC_OPT_T_END; i++) {
        const yc_option *r = &spec->rows[i];
        if (!r->name)
            continue;
        int has = !takes_value(r) ? no_argument
                  : (r->flags & YC_OPT_OPTIONAL_ARG) ? optional_argument
                                                      : required_argument;
        int val = r->short_name ? r->short_name : 256 + i;
        assert(n + 4 < nlo);
        lo[n++] = (struct option){r->name, has, NULL, val};
        for (int a = 0; a < 3 && r->aliases[a]; a++)
            lo[n++] = (struct option){r->aliases[a], has, NULL, val};
        if (r->short_name) {
            assert(ns + 3 < nshorts);
            shorts[ns++] = (char)r->short_name;
            if (has == required_argument)
                shorts[ns++] = ':';
        }
    }
    lo[n] = (struct option){NULL, 0, NULL, 0};
    shorts[ns] = '\0';
}

/* One option's value into obj. */
static int set_value(const yc_command_options *spec, const yc_option *r, const char *arg,
                     void *obj, yc_opt_state *s)
{
    const char *cmd = spec->cmd;
    char opt[64];
    snprintf(opt, sizeof opt, "--%s", r->name);
    size_t off = yc_opt_offset(spec, r);
    int st = 0;
    switch (r->type) {
    case YC_OPT_T_STRING:
        *AT(obj, off, const char *) = arg;
        break;
    case YC_OPT_T_INT:
        st = yc_cli_int(cmd, opt, arg, (long)r->lo, (long)r->hi, AT(obj, off, int));
        if (!st && r->zero && *AT(obj, off, int) == 0)
            return yc_usage_error(cmd, "%s", r->zero);
        break;
    case YC_OPT_T_FLOAT:
        st = yc_cli_float(cmd, opt, arg, r->lo, r->hi, AT(obj, off, float));
        break;
    case YC_OPT_T_DOUBLE: {
        float f;
        if ((st = yc_cli_float(cmd, opt, arg, r->lo, r->hi, &f)))
            break;
        double v = strtod(arg, NULL);
        if ((r->flags & YC_OPT_BELOW_HI) && v >= r->hi)
            return yc_usage_error(cmd, "invalid value '%s' for %s: expected a number from %g to "
                                  "below %g", arg, opt, r->lo, r->hi);
        *AT(obj, off, double) = v;
        break;
    }
    case YC_OPT_T_SIZE:
        st = yc_cli_size(cmd, opt, arg, AT(obj, off, size_t));
        break;
    case YC_OPT_T_PIXELS:
        st = yc_cli_pixels(cmd, opt, arg, AT(obj, off, size_t));
        break;
    case YC_OPT_T_BOOL:
        *AT(obj, off, bool) = true;
        break;
    case YC_OPT_T_SET:
        *AT(obj, off, int) = (int)r->value;
        break;
    case YC_OPT_T_ENUM: {
        const yc_field *f = row_field(spec, r);
        int (*parse)(const char *, int *) = r->parse ? r->parse : f->enum_parse;
        int v;
        if (parse(arg, &v))
            return yc_usage_error(cmd, "invalid value '%s' for %s: expected %s", arg, opt,
                                  r->choices);
        *AT(obj, off, int) = v;
        break;
    }
    case YC_OPT_T_CALLBACK:
        st = r->fn(r, arg, obj, s);
        break;
    case YC_OPT_T_HELP:
        yc_options_usage(spec);
        return YC_OPT_DONE;
    case YC_OPT_T_TEXT:
    case YC_OPT_T_END:
        break;
    }
    return st;
}

int yc_options_parse(const yc_command_options *spec, int argc, char **argv, void *obj,
                     yc_opt_state *s)
{
    static struct option lo[4 * YC_OPT_MAX];
    char shorts[2 * YC_OPT_MAX + 2];
    memset(s, 0, sizeof *s);
    s->spec = spec;
    s->argc = argc;
    s->argv = argv;
    int nrows = 0;
    while (spec->rows[nrows].type != YC_OPT_T_END)
        nrows++;
    assert(nrows <= YC_OPT_MAX);
    getopt_tables(spec, lo, sizeof lo / sizeof *lo, shorts, sizeof shorts);
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, shorts, lo, NULL)) != -1) {
        int i = -1;
        if (c >= 256 && c < 256 + nrows)
            i = c - 256;
        for (int k = 0; i < 0 && c > 0 && c < 256 && c != '?' && c != ':' && k < nrows; k++)
            if (spec->rows[k].short_name == c)
                i = k;
        if (i < 0)
            return yc_cli_bad_option(spec->cmd, argc, argv);
        s->given[i] = true;
        int st = set_value(spec, &spec->rows[i], optarg, obj, s);
        if (st)
            return st;
    }
    int st = spec->after ? spec->after(obj, s) : 0;
    if (st)
        return st;
    if (optind < argc)
        return yc_usage_error(spec->cmd, "unexpected argument '%s'", argv[optind]);
    return 0;
}

void yc_options_usage(const yc_command_options *spec)
{
    fputs(spec->head, stdout);
    for (const yc_option *r = spec->rows; r->type != YC_OPT_T_END; r++) {
        if (r->type == YC_OPT_T_TEXT) {
            fputs(r->help, stdout);
            continue;
        }
        if (r->flags & YC_OPT_HIDDEN)
            continue;
        char left[128];
        if (r->spec)
            snprintf(left, sizeof left, "      %s", r->spec);
        else if (r->short_name)
            snprintf(left, sizeof left, "  -%c, --%s%s%s", r->short_name, r->name,
                     r->metavar ? " " : "", r->metavar ? r->metavar : "");
        else
            snprintf(left, sizeof left, "      --%s%s%s", r->name, r->metavar ? " " : "",
                     r->metavar ? r->metavar : "");
        int n = printf("%s", left);
        do
            putchar(' ');
        while (++n < spec->help_col);
        for (const char *h = r->help; *h; h++) {
            putchar(*h);
            if (*h == '\n')
                printf("%*s", spec->help_col, "");
        }
        putchar('\n');
    }
}

/* ---- shared callbacks ---------------------------------------------------------------------- */

int yc_opt_slice_overlap(const yc_option *row, const char *arg, void *obj, yc_opt_state *s)
{
    float f;
    int st = yc_cli_float(s->spec->cmd, "--slice-overlap", arg, 0, 1, &f);
    if (st)
        return st;
    if (f >= 1)
        return yc_usage_error(s->spec->cmd, "--slice-overlap %s must be below 1", arg);
    AT(obj, yc_opt_offset(s->spec, row), yc_slice_options)->overlap = strtod(arg, NULL);
    return 0;
}

int yc_opt_slice_merge(const yc_option *row, const char *arg, void *obj, yc_opt_state *s)
{
    if (!yc_merge_params_parse(arg, row->value != 0, &AT(obj, yc_opt_offset(s->spec, row), yc_slice_options)->merge))
        return yc_usage_error(s->spec->cmd, "--slice-merge '%s': use %s", arg, row->choices);
    return 0;
}

int yc_opt_slice_thres(const yc_option *row, const char *arg, void *obj, yc_opt_state *s)
{
    float f;
    int st = yc_cli_float(s->spec->cmd, "--slice-thres", arg, 0, 1, &f);
    if (st)
        return st;
    AT(obj, yc_opt_offset(s->spec, row), yc_slice_options)->merge.threshold = strtod(arg, NULL);
    return 0;
}

int yc_opt_slice_full(const yc_option *row, const char *arg, void *obj, yc_opt_state *s)
{
    (void)arg;
    AT(obj, yc_opt_offset(s->spec, row), yc_slice_options)->full = true;
    return 0;
}

bool yc_opt_slice_given(const yc_opt_state *s)
{
    return yc_opt_given(s, "slice-overlap") || yc_opt_given(s, "slice-merge") ||
           yc_opt_given(s, "slice-thres") || yc_opt_given(s, "slice-full");
}

int yc_opt_tile(const yc_option *row, const char *arg, void *obj, yc_opt_state *s)
{
    int *tile = AT(obj, yc_opt_offset(s->spec, row), int);
    int st = yc_cli_int(s->spec->cmd, "--tile", arg, 0, 16384, tile);
    if (st)
        return st;
    if (*tile > 0 && *tile < 32)
        return yc_usage_error(s->spec->cmd, "invalid value '%s' for --tile: expected 0 (whole "
                              "images) or a window of 32 to 16384 pixels", arg);
    return 0;
}

int yc_opt_cache(const yc_option *row, const char *arg, void *obj, yc_opt_state *s)
{
    /* an optional value, also as the next argument (argparse nargs='?') */
    if (!arg && optind < s->argc && s->argv[optind][0] != '-')
        arg = s->argv[optind++];
    yc_cache_kind k;
    if (!yc_cache_kind_parse(arg, &k))
        return yc_usage_error(s->spec->cmd, "invalid value '%s' for --cache: expected ram or disk",
                              arg);
    *AT(obj, yc_opt_offset(s->spec, row), int) = (int)k;
    return 0;
}

int yc_opt_parse_optimizer(const char *name, int *v)
{
    yc_optim_kind k;
    int st = yc_optim_kind_parse(name, &k);
    if (!st)
        *v = (int)k;
    return st;
}

bool yc_opt_is_uint(const char *word)
{
    if (!word || !*word)
        return false;
    for (; *word; word++)
        if (*word < '0' || *word > '9')
            return false;
    return true;
}

int yc_opt_img_hw(const char *arg, yc_opt_state *s, int *h, int *w)
{
    int st = yc_cli_int(s->spec->cmd, "--img", arg, 32, 16384, h);
    if (st)
        return st;
    *w = *h;
    if (optind < s->argc && yc_opt_is_uint(s->argv[optind])) {
        if ((st = yc_cli_int(s->spec->cmd, "--img", s->argv[optind], 32, 16384, w)))
            return st;
        optind++;
    }
    return 0;
}
