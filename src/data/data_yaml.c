/* Dataset yaml files in YOLOv5's layout (see dataset.h): path, the train/val/test entries
 * resolved against it (directories, .txt lists or images, with YOLOv5's fallbacks), nc and names
 * (a list or an index map), and yolocl's tile keys.  The yaml is read with yamltree.h; every
 * error names the file and the key. */
#include "dataset_internal.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "util.h"
#include "yamltree.h"

/* realpath() of an existing path, else a copy (heap; NULL when out of memory). */
static char *resolve_path(const char *p)
{
    char *r = realpath(p, NULL);
    if (r)
        return r;
    return yc_strdup(p, "path");
}

/* ------------------------------------------------------------------------------------------------
 * Dataset yaml
 * ---------------------------------------------------------------------------------------------- */

static const char *const split_names[YC_SPLIT_COUNT] = {"train", "val", "test"};

const char *yc_split_name(yc_split s)
{
    return (unsigned)s < YC_SPLIT_COUNT ? split_names[s] : "?";
}

void yc_data_yaml_free(yc_data_yaml *y)
{
    if (!y)
        return;
    free(y->file);
    free(y->root);
    for (int s = 0; s < YC_SPLIT_COUNT; s++) {
        for (int i = 0; i < y->n_entries[s]; i++)
            free(y->entries[s][i]);
        free(y->entries[s]);
    }
    for (int i = 0; i < y->nc; i++)
        free(y->names[i]);
    free(y->names);
    memset(y, 0, sizeof *y);
}

/* A non-negative decimal integer that fits an int, the whole text. */
static bool parse_index(const char *s, long *out)
{
    if (!s || !*s)
        return false;
    long v = 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9')
            return false;
        v = v * 10 + (*p - '0');
        if (v > INT_MAX)
            return false;
    }
    *out = v;
    return true;
}

static int parse_names(const char *file, const yc_yaml_node *n, yc_data_yaml *y)
{
    if (!n || yc_yaml_is_null(n))
        return yc_error_status(YC_EFORMAT,
                               "%s: names: missing (a list of class names, or a mapping 0: name, "
                               "1: name, ...)",
                               file);
    if (n->kind == YC_YAML_SCALAR)
        return yc_error_status(YC_EFORMAT,
                               "%s: names: must be a list or a mapping of class ids to names, not "
                               "'%s'",
                               file, n->value);
    if (n->n == 0)
        return yc_error_status(YC_EFORMAT, "%s: names: is empty (no classes)", file);
    y->names = yc_calloc((size_t)n->n, sizeof *y->names, "class names");
    if (!y->names)
        return YC_ENOMEM;
    y->nc = n->n;
    for (int i = 0; i < n->n; i++) {
        long k = i;
        if (n->kind == YC_YAML_MAP) {
            if (!parse_index(n->keys[i], &k) || k >= n->n)
                return yc_error_status(YC_EFORMAT,
                                       "%s: names: key '%s' (line %d) is not a class id: keys must "
                                       "be the integers 0 to %d",
                                       file, n->keys[i], n->items[i]->line, n->n - 1);
            if (y->names[k])
                return yc_error_status(YC_EFORMAT, "%s: names: class %ld appears twice (line %d)",
                                       file, k, n->items[i]->line);
        }
        const yc_yaml_node *v = n->items[i];
        if (v->kind != YC_YAML_SCALAR || yc_yaml_is_null(v))
            return yc_error_status(YC_EFORMAT,
                                   "%s: names: class %ld (line %d) must be a name (a string)", file,
                                   k, v->line);
        y->names[k] = yc_strdup(v->value, "class name");
        if (!y->names[k])
            return YC_ENOMEM;
    }
    return YC_OK;
}

/* root/entry resolved; a missing relative entry starting with ../ is retried without it. */
static char *resolve_entry(const char *root, const char *entry)
{
    char *x = yc_path_join(root, entry);
    if (!x)
        return NULL;
    if (!yc_ds_path_exists(x) && strncmp(entry, "../", 3) == 0) {
        char *retry = yc_path_join(root, entry + 3);
        if (!retry) {
            free(x);
            return NULL;
        }
        if (yc_ds_path_exists(retry)) {
            free(x);
            x = retry;
        } else {
            free(retry);
        }
    }
    char *r = resolve_path(x);
    free(x);
    return r;
}

static int parse_split(const char *file, const yc_yaml_node *root, yc_split s, bool has_download,
                       yc_data_yaml *y)
{
    const char *key = split_names[s];
    const yc_yaml_node *n = yc_yaml_get(root, key);
    bool optional = s == YC_SPLIT_TEST;
    if (!n || yc_yaml_is_null(n)) {
        if (optional)
            return YC_OK;
        return yc_error_status(YC_EFORMAT,
                               n ? "%s: %s: is empty (a directory, a .txt list or a list of them)"
                                 : "%s: %s: missing (a directory, a .txt list or a list of them)",
                               file, key);
    }
    if (n->kind == YC_YAML_MAP)
        return yc_error_status(YC_EFORMAT,
                               "%s: %s: must be a path or a list of paths, not a mapping (line %d)",
                               file, key, n->line);
    int count = n->kind == YC_YAML_SCALAR ? 1 : n->n;
    if (count == 0) {
        if (optional)
            return YC_OK;
        return yc_error_status(YC_EFORMAT, "%s: %s: is an empty list", file, key);
    }
    y->entries[s] = yc_calloc((size_t)count, sizeof(char *), "dataset entries");
    if (!y->entries[s])
        return YC_ENOMEM;
    for (int i = 0; i < count; i++) {
        const yc_yaml_node *e = n->kind == YC_YAML_SCALAR ? n : n->items[i];
        if (e->kind != YC_YAML_SCALAR || yc_yaml_is_null(e))
            return yc_error_status(YC_EFORMAT, "%s: %s[%d]: must be a path (line %d)", file, key,
                                   i, e->line);
        char *r = resolve_entry(y->root, e->value);
        if (!r)
            return YC_ENOMEM;
        y->entries[s][y->n_entries[s]++] = r;
        if (!optional && !yc_ds_path_exists(r)) {
            char where[64];
            if (n->kind == YC_YAML_SCALAR)
                snprintf(where, sizeof where, "%s", key);
            else
                snprintf(where, sizeof where, "%s[%d]", key, i);
            return yc_error_status(YC_EIO, "%s: %s: %s does not exist%s", file, where, r,
                                   has_download ? " (yolocl does not run the download: key; "
                                                  "fetch the dataset yourself)"
                                                : "");
        }
    }
    return YC_OK;
}

/* A number of the yaml in [lo, hi] (hi_open: [lo, hi)) into *out; absent or null keeps *out. */
static int parse_unit(const char *file, const yc_yaml_node *root, const char *key, double lo,
                      double hi, bool hi_open, double *out)
{
    const yc_yaml_node *n = yc_yaml_get(root, key);
    if (!n || yc_yaml_is_null(n))
        return YC_OK;
    double v;
    if (yc_yaml_double(n, &v) != YC_OK || !(v >= lo && (hi_open ? v < hi : v <= hi)))
        return yc_error_status(YC_EFORMAT, "%s: %s: must be a number in [%g, %g%s (line %d)", file,
                               key, lo, hi, hi_open ? ")" : "]", n->line);
    *out = v;
    return YC_OK;
}

/* yolocl's keys of tiled training: tile, tile_overlap, tile_min_area. */
static int parse_tile_keys(const char *file, const yc_yaml_node *root, yc_data_yaml *y)
{
    y->tile = 0;
    y->tile_overlap = 0.2;
    y->tile_min_area = 0.1;
    const yc_yaml_node *n = yc_yaml_get(root, "tile");
    if (n && !yc_yaml_is_null(n)) {
        long v;
        if (yc_yaml_int(n, &v) != YC_OK || v < 32 || v > 16384)
            return yc_error_status(YC_EFORMAT, "%s: tile: must be a window size of 32 to 16384 "
                                   "pixels, or null (line %d)", file, n->line);
        y->tile = (int)v;
    }
    int st = parse_unit(file, root, "tile_overlap", 0, 1, true, &y->tile_overlap);
    if (!st)
        st = parse_unit(file, root, "tile_min_area", 0, 1, false, &y->tile_min_area);
    return st;
}

int yc_data_yaml_load(const char *file, yc_data_yaml *out)
{
    memset(out, 0, sizeof *out);
    yc_yaml_node *root = NULL;
    int st = yc_yaml_load_file(file, &root);
    if (st)
        return st;
    yc_data_yaml y = {0};
    char *dir = NULL;
    if (root->kind != YC_YAML_MAP) {
        st = yc_error_status(YC_EFORMAT,
                             "%s: a dataset yaml must be a mapping of keys (path, train, val, "
                             "test, names)",
                             file);
        goto done;
    }
    y.file = yc_strdup(file, "path");
    char *d = yc_path_dirname(file);
    if (!y.file || !d) {
        free(d);
        st = YC_ENOMEM;
        goto done;
    }
    dir = resolve_path(d);
    free(d);
    if (!dir) {
        st = YC_ENOMEM;
        goto done;
    }
    if (dir[0] != '/') {
        char *a = yc_ds_absolute_path(dir);
        free(dir);
        dir = a;
        if (!dir) {
            st = YC_ENOMEM;
            goto done;
        }
    }
    const yc_yaml_node *p = yc_yaml_get(root, "path");
    if (p && !yc_yaml_is_null(p)) {
        if (p->kind != YC_YAML_SCALAR) {
            st = yc_error_status(YC_EFORMAT, "%s: path: must be a directory (line %d)", file,
                                 p->line);
            goto done;
        }
        char *j = yc_path_join(dir, p->value);
        y.root = j ? resolve_path(j) : NULL;
        free(j);
    } else {
        y.root = yc_strdup(dir, "path");
    }
    if (!y.root) {
        st = YC_ENOMEM;
        goto done;
    }
    st = parse_names(file, yc_yaml_get(root, "names"), &y);
    if (st)
        goto done;
    const yc_yaml_node *nc = yc_yaml_get(root, "nc");
    if (nc && !yc_yaml_is_null(nc)) {
        long v;
        if (yc_yaml_int(nc, &v) != YC_OK || v != y.nc)
            yc_warn("%s: nc: %s differs from the %d names; using nc = %d (nc is always "
                    "len(names), as in YOLOv5)",
                    file, nc->kind == YC_YAML_SCALAR ? nc->value : "(not a number)", y.nc, y.nc);
    }
    if ((st = parse_tile_keys(file, root, &y)))
        goto done;
    const yc_yaml_node *dl = yc_yaml_get(root, "download");
    bool has_download = dl && !yc_yaml_is_null(dl);
    if (has_download)
        yc_info("%s: download: ignored (yolocl never downloads datasets)\n", file);
    for (int s = 0; s < YC_SPLIT_COUNT && st == YC_OK; s++)
        st = parse_split(file, root, (yc_split)s, has_download, &y);
done:
    free(dir);
    yc_yaml_free(root);
    if (st) {
        yc_data_yaml_free(&y);
        return st;
    }
    *out = y;
    return YC_OK;
}
