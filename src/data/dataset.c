/* Datasets in YOLOv5's layout (see dataset.h): yaml, image lists, the label scan, its cache, the
 * pooled in-memory dataset and rectangular batch shapes. */
#include "dataset.h"
#include "npsort.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include <vips/vips.h>

#include "image.h"
#include "log.h"
#include "util.h"
#include "yamltree.h"

/* Largest label file read (a bigger one is reported as corrupt rather than read); it also bounds
 * the rows of one image well below 2^32. */
#define LABEL_MAX_BYTES ((size_t)16 << 20)
/* Deepest directory nesting followed when listing images. */
#define DIR_MAX_DEPTH 64
/* Longest text kept for one note (reason or warnings of one image). */
#define NOTE_MAX 512
/* Cache format: magic and version (bump the version whenever the scan's results change). */
#define CACHE_MAGIC "YOLOCLDS"
#define CACHE_VERSION 1u
/* Suffix of the cache file next to the labels directory or the .txt list. */
#define CACHE_SUFFIX ".yolocl.cache"

/* ------------------------------------------------------------------------------------------------
 * The C locale for number parsing, initialised once per process
 * ---------------------------------------------------------------------------------------------- */

static pthread_once_t locale_once = PTHREAD_ONCE_INIT;
static locale_t c_locale;

static void locale_init_once(void)
{
    c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0);
}

/* strtod in the C locale whatever the process locale is. */
static double strtod_c(const char *s, char **end)
{
    pthread_once(&locale_once, locale_init_once);
    if (c_locale)
        return strtod_l(s, end, c_locale);
    return strtod(s, end);
}

/* ------------------------------------------------------------------------------------------------
 * Small helpers
 * ---------------------------------------------------------------------------------------------- */

static bool path_exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t ls = strlen(s), lx = strlen(suffix);
    return ls >= lx && memcmp(s + ls - lx, suffix, lx) == 0;
}

/* realpath() of an existing path, else a copy (heap; NULL when out of memory). */
static char *resolve_path(const char *p)
{
    char *r = realpath(p, NULL);
    if (r)
        return r;
    return yc_strdup(p, "path");
}

/* An absolute form of p (heap): p itself when absolute, else joined to the current directory. */
static char *absolute_path(const char *p)
{
    if (p[0] == '/')
        return yc_strdup(p, "path");
    char *cwd = getcwd(NULL, 0);
    if (!cwd) {
        yc_error_status(YC_EIO, "cannot get the current directory: %s", strerror(errno));
        return NULL;
    }
    char *r = yc_path_join(cwd, p);
    free(cwd);
    return r;
}

/* Copies s into out (capacity cap) with control characters shown as '?', at most `maxlen`
 * characters, "..." appended when cut. */
static void printable(char *out, size_t cap, const char *s, size_t len, size_t maxlen)
{
    size_t k = 0;
    size_t lim = len < maxlen ? len : maxlen;
    for (size_t i = 0; i < lim && k + 4 < cap; i++) {
        unsigned char c = (unsigned char)s[i];
        out[k++] = (c < 0x20 || c == 0x7f) ? '?' : (char)c;
    }
    if (len > lim && k + 4 < cap) {
        memcpy(out + k, "...", 3);
        k += 3;
    }
    out[k] = '\0';
}

static uint64_t fnv1a(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}
#define FNV_OFFSET 0xcbf29ce484222325ULL

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
    if (!path_exists(x) && strncmp(entry, "../", 3) == 0) {
        char *retry = yc_path_join(root, entry + 3);
        if (!retry) {
            free(x);
            return NULL;
        }
        if (path_exists(retry)) {
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
        if (!optional && !path_exists(r)) {
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
        char *a = absolute_path(dir);
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

/* ------------------------------------------------------------------------------------------------
 * Image lists
 * ---------------------------------------------------------------------------------------------- */

static const char *const image_formats[] = {"bmp", "dng",  "jpeg", "jpg",  "mpo",
                                            "png", "tif", "tiff", "webp", "pfm"};

bool yc_is_image_path(const char *path)
{
    const char *dot = strrchr(yc_path_basename(path), '.');
    if (!dot)
        return false;
    for (size_t i = 0; i < sizeof image_formats / sizeof *image_formats; i++)
        if (strcasecmp(dot + 1, image_formats[i]) == 0)
            return true;
    return false;
}

/* A growing list of strings in one pool (offsets, so the pool may move). */
typedef struct strlist {
    /* the characters, strings NUL-terminated back to back */
    char *pool;
    /* bytes used and allocated in pool */
    size_t len, cap;
    /* start of each string in pool */
    size_t *off;
    /* strings stored and offsets allocated */
    size_t n, ncap;
} strlist;

static void strlist_free(strlist *l)
{
    free(l->pool);
    free(l->off);
    memset(l, 0, sizeof *l);
}

/* Appends a + (a and b ? "/" : "") + b; either part may be NULL. */
static int strlist_add(strlist *l, const char *a, const char *b)
{
    size_t la = a ? strlen(a) : 0, lb = b ? strlen(b) : 0;
    bool slash = a && b && la && a[la - 1] != '/';
    size_t need = la + lb + (slash ? 1 : 0) + 1;
    if (need > SIZE_MAX / 4 - l->len)
        return yc_error_status(YC_ENOMEM, "out of memory: image list too long");
    if (l->len + need > l->cap) {
        size_t cap = l->cap ? l->cap : 4096;
        while (cap < l->len + need)
            cap *= 2;
        char *p = yc_realloc(l->pool, cap, "image list");
        if (!p)
            return YC_ENOMEM;
        l->pool = p;
        l->cap = cap;
    }
    if (l->n == l->ncap) {
        size_t ncap = l->ncap ? l->ncap * 2 : 256;
        size_t *o = yc_realloc(l->off, ncap * sizeof *o, "image list");
        if (!o)
            return YC_ENOMEM;
        l->off = o;
        l->ncap = ncap;
    }
    char *dst = l->pool + l->len;
    if (la)
        memcpy(dst, a, la);
    if (slash)
        dst[la] = '/';
    if (lb)
        memcpy(dst + la + (slash ? 1 : 0), b, lb);
    dst[need - 1] = '\0';
    l->off[l->n++] = l->len;
    l->len += need;
    return YC_OK;
}

static int cmp_str_ptr(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Turns the strlist into a sorted, duplicate-free yc_path_list (the list's pool moves over). */
static int strlist_finish(strlist *l, yc_path_list *out)
{
    out->paths = yc_calloc(l->n ? l->n : 1, sizeof *out->paths, "image list");
    if (!out->paths)
        return YC_ENOMEM;
    for (size_t i = 0; i < l->n; i++)
        out->paths[i] = l->pool + l->off[i];
    qsort(out->paths, l->n, sizeof *out->paths, cmp_str_ptr);
    size_t k = 0;
    for (size_t i = 0; i < l->n; i++)
        if (k == 0 || strcmp(out->paths[k - 1], out->paths[i]) != 0)
            out->paths[k++] = out->paths[i];
    out->n = k;
    out->pool = l->pool;
    l->pool = NULL;
    strlist_free(l);
    return YC_OK;
}

void yc_path_list_free(yc_path_list *l)
{
    if (!l)
        return;
    free(l->paths);
    free(l->pool);
    memset(l, 0, sizeof *l);
}

/* Identity of a directory on the current walk, to cut symbolic-link loops. */
typedef struct dir_id {
    /* device */
    dev_t dev;
    /* inode */
    ino_t ino;
} dir_id;

static int walk_dir(const char *dir, strlist *l, dir_id *stack, int depth)
{
    DIR *d = opendir(dir);
    if (!d) {
        if (depth == 0)
            return yc_error_status(YC_EIO, "cannot read directory %s: %s", dir, strerror(errno));
        yc_warn("cannot read directory %s: %s; skipped", dir, strerror(errno));
        return YC_OK;
    }
    struct stat st;
    if (fstat(dirfd(d), &st) != 0) {
        int e = errno;
        closedir(d);
        return yc_error_status(YC_EIO, "cannot stat directory %s: %s", dir, strerror(e));
    }
    for (int i = 0; i < depth; i++) {
        if (stack[i].dev == st.st_dev && stack[i].ino == st.st_ino) {
            closedir(d);
            yc_warn("%s: directory loop (symbolic link to a parent); not followed", dir);
            return YC_OK;
        }
    }
    stack[depth].dev = st.st_dev;
    stack[depth].ino = st.st_ino;
    int status = YC_OK;
    for (;;) {
        errno = 0;
        struct dirent *e = readdir(d);
        if (!e) {
            if (errno)
                status = yc_error_status(YC_EIO, "cannot read directory %s: %s", dir,
                                         strerror(errno));
            break;
        }
        if (e->d_name[0] == '.')
            continue;
        bool is_dir = e->d_type == DT_DIR, is_reg = e->d_type == DT_REG;
        if (!is_dir && !is_reg) {
            char *full = yc_path_join(dir, e->d_name);
            if (!full) {
                status = YC_ENOMEM;
                break;
            }
            struct stat fs;
            if (stat(full, &fs) == 0) {
                is_dir = S_ISDIR(fs.st_mode);
                is_reg = S_ISREG(fs.st_mode);
            }
            free(full);
        }
        if (is_reg && yc_is_image_path(e->d_name)) {
            status = strlist_add(l, dir, e->d_name);
        } else if (is_dir) {
            if (depth + 1 >= DIR_MAX_DEPTH) {
                yc_warn("%s/%s: more than %d nested directories; not followed", dir, e->d_name,
                        DIR_MAX_DEPTH);
                continue;
            }
            char *full = yc_path_join(dir, e->d_name);
            if (!full) {
                status = YC_ENOMEM;
                break;
            }
            status = walk_dir(full, l, stack, depth + 1);
            free(full);
        }
        if (status)
            break;
    }
    closedir(d);
    return status;
}

/* Strips surrounding whitespace in place; returns the start. */
static char *strip(char *s)
{
    while (*s == ' ' || *s == '\t' || *s == '\r' || *s == '\n' || *s == '\v' || *s == '\f')
        s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r' || s[n - 1] == '\n' ||
                 s[n - 1] == '\v' || s[n - 1] == '\f'))
        s[--n] = '\0';
    return s;
}

static int read_list_file(const char *txt, strlist *l)
{
    FILE *f = fopen(txt, "r");
    if (!f)
        return yc_error_status(YC_EIO, "cannot open %s: %s", txt, strerror(errno));
    char *dir = yc_path_dirname(txt);
    if (!dir) {
        fclose(f);
        return YC_ENOMEM;
    }
    char *line = NULL;
    size_t cap = 0;
    int status = YC_OK;
    for (;;) {
        errno = 0;
        ssize_t got = getline(&line, &cap, f);
        if (got < 0) {
            if (ferror(f))
                status = yc_error_status(YC_EIO, "error reading %s: %s", txt, strerror(errno));
            break;
        }
        char *s = strip(line);
        if (!*s || !yc_is_image_path(s))
            continue;
        if (s[0] == '/') {
            status = strlist_add(l, s, NULL);
        } else if (s[0] == '.' && s[1] == '/') {
            status = strlist_add(l, dir, s + 2);
        } else {
            char *cand = yc_path_join(dir, s);
            if (!cand) {
                status = YC_ENOMEM;
                break;
            }
            if (!path_exists(cand) && path_exists(s)) {
                char *abs = absolute_path(s);
                status = abs ? strlist_add(l, abs, NULL) : YC_ENOMEM;
                free(abs);
            } else {
                status = strlist_add(l, cand, NULL);
            }
            free(cand);
        }
        if (status)
            break;
    }
    free(line);
    free(dir);
    fclose(f);
    return status;
}

int yc_image_list(const char *const *entries, size_t n_entries, yc_path_list *out)
{
    memset(out, 0, sizeof *out);
    strlist l = {0};
    int status = YC_OK;
    dir_id stack[DIR_MAX_DEPTH];
    for (size_t i = 0; i < n_entries && status == YC_OK; i++) {
        const char *e = entries[i];
        struct stat st;
        if (stat(e, &st) != 0) {
            status = yc_error_status(YC_EIO, "%s does not exist", e);
        } else if (S_ISDIR(st.st_mode)) {
            status = walk_dir(e, &l, stack, 0);
        } else if (yc_is_image_path(e)) {
            status = strlist_add(&l, e, NULL);
        } else {
            status = read_list_file(e, &l);
        }
    }
    if (status == YC_OK)
        status = strlist_finish(&l, out);
    if (status) {
        strlist_free(&l);
        yc_path_list_free(out);
    }
    return status;
}

/* Label path of `image` into out (capacity cap); returns the length it needs (without NUL). */
static size_t label_path_into(const char *image, char *out, size_t cap)
{
    const char *hit = NULL;
    for (const char *p = strstr(image, "/images/"); p; p = strstr(p + 1, "/images/"))
        hit = p;
    const char *base = yc_path_basename(image);
    const char *dot = strrchr(base, '.');
    size_t stem = dot ? (size_t)(dot - image) : strlen(image);
    size_t need = stem + 4;
    if (out && cap > need) {
        memcpy(out, image, stem);
        if (hit && (size_t)(hit - image) + 8 <= stem)
            memcpy(out + (hit - image), "/labels/", 8);
        memcpy(out + stem, ".txt", 5);
    }
    return need;
}

char *yc_label_path(const char *image)
{
    size_t need = label_path_into(image, NULL, 0);
    char *p = yc_malloc(need + 1, "label path");
    if (p)
        label_path_into(image, p, need + 1);
    return p;
}

/* ------------------------------------------------------------------------------------------------
 * Verification of one image and its labels (YOLOv5's verify_image_label)
 * ---------------------------------------------------------------------------------------------- */

typedef enum rec_status {
    REC_LABELS = 0,  /* label file with boxes */
    REC_MISSING = 1, /* no label file: background */
    REC_EMPTY = 2,   /* empty label file: background */
    REC_CORRUPT = 3, /* excluded */
} rec_status;

/* What the scan (or the cache) knows about one listed image. */
typedef struct scan_rec {
    /* hash of the image's and the label file's size and times (0 bytes mixed in when absent) */
    uint64_t fp;
    /* a rec_status */
    int status;
    /* EXIF-corrected size (0 when corrupt) */
    int32_t w, h;
    /* number of boxes and the boxes (heap, class ids as in the file) */
    uint32_t nb;
    yc_box *boxes;
    /* why the image is corrupt (heap), NULL otherwise */
    char *reason;
    /* warnings, '\n'-separated (heap), NULL when none */
    char *warn;
    /* filled from the cache rather than verified */
    bool cached;
} scan_rec;

static void rec_clear(scan_rec *r)
{
    free(r->boxes);
    free(r->reason);
    free(r->warn);
    uint64_t fp = r->fp;
    memset(r, 0, sizeof *r);
    r->fp = fp;
}

static uint64_t stat_fingerprint(uint64_t h, const char *path)
{
    struct stat st;
    uint64_t v[7] = {0};
    if (stat(path, &st) == 0) {
        v[0] = 1;
        v[1] = (uint64_t)st.st_size;
        v[2] = (uint64_t)st.st_mtim.tv_sec;
        v[3] = (uint64_t)st.st_mtim.tv_nsec;
        v[4] = (uint64_t)st.st_ctim.tv_sec;
        v[5] = (uint64_t)st.st_ctim.tv_nsec;
        v[6] = (uint64_t)st.st_ino;
    }
    unsigned char b[8];
    for (int i = 0; i < 7; i++) {
        for (int k = 0; k < 8; k++)
            b[k] = (unsigned char)(v[i] >> (8 * k));
        h = fnv1a(h, b, 8);
    }
    return h;
}

typedef enum img_format {
    FMT_UNKNOWN,
    FMT_JPEG,
    FMT_PNG,
    FMT_WEBP,
    FMT_TIFF,
    FMT_BMP,
    FMT_PFM,
} img_format;

static img_format sniff_format(const unsigned char *b, size_t n)
{
    if (n >= 3 && b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF)
        return FMT_JPEG;
    if (n >= 8 && memcmp(b, "\x89PNG\r\n\x1a\n", 8) == 0)
        return FMT_PNG;
    if (n >= 12 && memcmp(b, "RIFF", 4) == 0 && memcmp(b + 8, "WEBP", 4) == 0)
        return FMT_WEBP;
    if (n >= 4 && (memcmp(b, "II*\0", 4) == 0 || memcmp(b, "MM\0*", 4) == 0 ||
                   memcmp(b, "II+\0", 4) == 0 || memcmp(b, "MM\0+", 4) == 0))
        return FMT_TIFF;
    if (n >= 2 && b[0] == 'B' && b[1] == 'M')
        return FMT_BMP;
    if (n >= 3 && b[0] == 'P' && (b[1] == 'F' || b[1] == 'f') &&
        (b[2] == '\n' || b[2] == '\r' || b[2] == ' ' || b[2] == '\t'))
        return FMT_PFM;
    return FMT_UNKNOWN;
}

/* Builds a loader on `path` (header only: nothing is decoded) and reads size and orientation. */
static bool header_try(const char *loader, const char *path, int *w, int *h, int *orient)
{
    VipsOperation *op = vips_operation_new(loader);
    if (!op)
        return false;
    bool ok = false;
    if (vips_object_set(VIPS_OBJECT(op), "filename", path, "access", VIPS_ACCESS_SEQUENTIAL,
                        NULL) == 0 &&
        vips_object_build(VIPS_OBJECT(op)) == 0) {
        VipsImage *out = NULL;
        g_object_get(op, "out", &out, NULL);
        if (out) {
            *w = vips_image_get_width(out);
            *h = vips_image_get_height(out);
            *orient = vips_image_get_orientation(out);
            ok = true;
            g_object_unref(out);
        }
    }
    vips_object_unref_outputs(VIPS_OBJECT(op));
    g_object_unref(op);
    return ok;
}

/* libvips' error buffer is shared by all threads: a failed read is repeated under a lock so the
 * message taken is this file's. */
static pthread_mutex_t vips_error_lock = PTHREAD_MUTEX_INITIALIZER;

/* Takes (and clears) libvips' error text as one line into why: "<prefix><message>". */
static void take_vips_error(const char *prefix, char *why, size_t why_len)
{
    char *msg = vips_error_buffer_copy();
    char joined[NOTE_MAX];
    size_t k = 0;
    for (const char *p = msg ? msg : ""; *p && k + 3 < sizeof joined; p++) {
        if (*p == '\n') {
            if (p[1] && k)
                joined[k++] = ';', joined[k++] = ' ';
        } else {
            joined[k++] = *p;
        }
    }
    joined[k] = '\0';
    g_free(msg);
    char shown[320];
    printable(shown, sizeof shown, joined, k, 300);
    snprintf(why, why_len, "%s%s", prefix, k ? shown : "unknown libvips error");
}

static bool read_header(const char *loader, const char *path, int *w, int *h, int *orient,
                        char *why, size_t why_len)
{
    if (header_try(loader, path, w, h, orient))
        return true;
    pthread_mutex_lock(&vips_error_lock);
    vips_error_clear();
    bool ok = header_try(loader, path, w, h, orient);
    if (!ok)
        take_vips_error("cannot read the image: ", why, why_len);
    vips_error_clear();
    pthread_mutex_unlock(&vips_error_lock);
    return ok;
}

/* Appends one warning line to r->warn. */
static bool add_warning(scan_rec *r, const char *text)
{
    size_t old = r->warn ? strlen(r->warn) : 0, add = strlen(text);
    char *p = realloc(r->warn, old + add + 2);
    if (!p)
        return false;
    if (old)
        p[old++] = '\n';
    memcpy(p + old, text, add + 1);
    r->warn = p;
    return true;
}

/* Checks one image file: format, size, orientation, JPEG end marker.  Fills w and h; on a problem
 * writes the reason and returns false. */
static bool verify_image(const char *path, scan_rec *r, char *why, size_t why_len, bool *oom)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(why, why_len, "cannot open the image: %s", strerror(errno));
        return false;
    }
    struct stat st;
    unsigned char head[16], tail[2] = {0, 0};
    ssize_t nh = -1;
    bool tail_ok = false;
    if (fstat(fd, &st) == 0) {
        nh = pread(fd, head, sizeof head, 0);
        if (st.st_size >= 2)
            tail_ok = pread(fd, tail, 2, st.st_size - 2) == 2;
    }
    int e = errno;
    close(fd);
    if (nh < 0) {
        snprintf(why, why_len, "cannot read the image: %s", strerror(e));
        return false;
    }
    if (nh == 0) {
        snprintf(why, why_len, "empty image file");
        return false;
    }
    img_format fmt = sniff_format(head, (size_t)nh);
    const char *loader = NULL;
    switch (fmt) {
    case FMT_JPEG: loader = "jpegload"; break;
    case FMT_PNG: loader = "pngload"; break;
    case FMT_WEBP: loader = "webpload"; break;
    case FMT_TIFF: loader = "tiffload"; break;
    case FMT_PFM: loader = "ppmload"; break;
    case FMT_BMP:
        pthread_mutex_lock(&vips_error_lock);
        loader = vips_foreign_find_load(path);
        vips_error_clear();
        pthread_mutex_unlock(&vips_error_lock);
        if (!loader) {
            snprintf(why, why_len, "BMP images need a libvips built with ImageMagick");
            return false;
        }
        break;
    case FMT_UNKNOWN:
        snprintf(why, why_len,
                 "unknown image format (not bmp, dng, jpeg, mpo, png, tiff, webp or pfm)");
        return false;
    }
    int w = 0, h = 0, orient = 1;
    if (!read_header(loader, path, &w, &h, &orient, why, why_len))
        return false;
    if (orient >= 5 && orient <= 8) {
        int t = w;
        w = h;
        h = t;
    }
    if (w < 10 || h < 10) {
        snprintf(why, why_len, "image size %dx%d <10 pixels", w, h);
        return false;
    }
    r->w = w;
    r->h = h;
    if (fmt == FMT_JPEG && !(tail_ok && tail[0] == 0xFF && tail[1] == 0xD9)) {
        if (!add_warning(r, "corrupt JPEG (no end marker): it will be decoded as far as possible"))
            *oom = true;
    }
    return true;
}

/* A number as Python's float() reads it, decimal only: [+-] digits [. digits] [e [+-] digits],
 * or nan / inf / infinity. */
static bool plain_number(const char *s)
{
    const char *p = s;
    if (*p == '+' || *p == '-')
        p++;
    if (strcasecmp(p, "nan") == 0 || strcasecmp(p, "inf") == 0 || strcasecmp(p, "infinity") == 0)
        return true;
    int digits = 0;
    while (*p >= '0' && *p <= '9')
        p++, digits++;
    if (*p == '.') {
        p++;
        while (*p >= '0' && *p <= '9')
            p++, digits++;
    }
    if (!digits)
        return false;
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-')
            p++;
        int ed = 0;
        while (*p >= '0' && *p <= '9')
            p++, ed++;
        if (!ed)
            return false;
    }
    return *p == '\0';
}

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

/* Value formatted for a message (as Python prints a float32: shortest round trip). */
static void fmt_value(char *out, size_t cap, float v)
{
    snprintf(out, cap, "%.9g", (double)v);
    for (int prec = 1; prec <= 9; prec++) {
        char buf[48];
        snprintf(buf, sizeof buf, "%.*g", prec, (double)v);
        if (strtof(buf, NULL) == v || isnan(v)) {
            snprintf(out, cap, "%s", buf);
            break;
        }
    }
}

typedef struct row_ref {
    /* the box (class as float for ordering, then x y w h) */
    float v[5];
    /* position in the file */
    size_t index;
} row_ref;

static int cmp_row(const void *a, const void *b)
{
    const row_ref *x = a, *y = b;
    for (int k = 0; k < 5; k++) {
        if (x->v[k] < y->v[k])
            return -1;
        if (x->v[k] > y->v[k])
            return 1;
    }
    return x->index < y->index ? -1 : x->index > y->index;
}

/* Removes duplicate rows (first occurrence kept, order kept); returns how many were removed, or
 * (size_t)-1 when out of memory. */
static size_t drop_duplicates(yc_box *b, size_t n)
{
    if (n < 2)
        return 0;
    row_ref *rows = malloc(n * sizeof *rows);
    unsigned char *drop = calloc(n, 1);
    if (!rows || !drop) {
        free(rows);
        free(drop);
        return (size_t)-1;
    }
    for (size_t i = 0; i < n; i++) {
        rows[i].v[0] = (float)b[i].cls;
        rows[i].v[1] = b[i].x + 0.0f;
        rows[i].v[2] = b[i].y + 0.0f;
        rows[i].v[3] = b[i].w + 0.0f;
        rows[i].v[4] = b[i].h + 0.0f;
        rows[i].index = i;
    }
    qsort(rows, n, sizeof *rows, cmp_row);
    size_t removed = 0;
    for (size_t i = 1; i < n; i++) {
        if (memcmp(rows[i].v, rows[i - 1].v, sizeof rows[i].v) == 0 &&
            b[rows[i].index].cls == b[rows[i - 1].index].cls) {
            drop[rows[i].index] = 1;
            removed++;
        }
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (!drop[i])
            b[k++] = b[i];
    free(rows);
    free(drop);
    return removed;
}

/* Grows *p (elements of `size` bytes, capacity *cap) to hold at least `need`; false when out of
 * memory. */
static bool grow(void **p, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap)
        return true;
    size_t c = *cap ? *cap * 2 : 16;
    while (c < need)
        c *= 2;
    void *q = realloc(*p, c * size);
    if (!q)
        return false;
    *p = q;
    *cap = c;
    return true;
}

/* "<what> <value> (line N)" into why. */
static void bad_value(char *why, size_t why_len, const char *what, float v, size_t line)
{
    char shown[48];
    fmt_value(shown, sizeof shown, v);
    snprintf(why, why_len, "%s %s (line %zu)", what, shown, line);
}

/* Reads the numbers of one line [p, eol) into *vals (as float32, like numpy).  Returns 1 with *nv
 * set, 0 with the reason in why, -1 when out of memory. */
static int parse_line(const char *p, const char *eol, size_t line, float **vals, size_t *cap,
                      size_t *nv, char *why, size_t why_len)
{
    *nv = 0;
    for (;;) {
        while (p < eol && is_space(*p))
            p++;
        if (p >= eol)
            return 1;
        const char *tok = p;
        while (p < eol && !is_space(*p))
            p++;
        size_t tl = (size_t)(p - tok);
        char buf[64];
        if (tl < sizeof buf && !memchr(tok, '\0', tl)) {
            memcpy(buf, tok, tl);
            buf[tl] = '\0';
        }
        if (tl >= sizeof buf || memchr(tok, '\0', tl) || !plain_number(buf)) {
            char shown[48];
            printable(shown, sizeof shown, tok, tl, 24);
            snprintf(why, why_len, "invalid label value '%s' (line %zu)", shown, line);
            return 0;
        }
        if (!grow((void **)vals, cap, *nv + 1, sizeof **vals))
            return -1;
        (*vals)[(*nv)++] = (float)strtod_c(buf, NULL);
    }
}

/* One row of values -> a checked box: 5 columns, or a polygon (more than 6 values) reduced to its
 * extent in float32 as YOLOv5's segments2boxes; then YOLOv5's checks. */
static bool line_to_box(const float *v, size_t nv, size_t line, yc_box *out, char *why,
                        size_t why_len)
{
    for (size_t i = 0; i < nv; i++) {
        if (!isfinite(v[i])) {
            bad_value(why, why_len, "non-finite label value", v[i], line);
            return false;
        }
    }
    float box[5];
    if (nv > 6) {
        if ((nv - 1) % 2) {
            snprintf(why, why_len, "polygon with an odd number of coordinates (%zu) (line %zu)",
                     nv - 1, line);
            return false;
        }
        float x1 = v[1], x2 = v[1], y1 = v[2], y2 = v[2];
        for (size_t i = 1; i + 1 < nv; i += 2) {
            x1 = v[i] < x1 ? v[i] : x1;
            x2 = v[i] > x2 ? v[i] : x2;
            y1 = v[i + 1] < y1 ? v[i + 1] : y1;
            y2 = v[i + 1] > y2 ? v[i + 1] : y2;
        }
        box[0] = v[0];
        box[1] = (x1 + x2) / 2;
        box[2] = (y1 + y2) / 2;
        box[3] = x2 - x1;
        box[4] = y2 - y1;
    } else if (nv == 5) {
        memcpy(box, v, sizeof box);
    } else {
        snprintf(why, why_len, "labels require 5 columns, %zu columns detected (line %zu)", nv,
                 line);
        return false;
    }
    for (int k = 0; k < 5; k++) {
        if (box[k] < 0) {
            bad_value(why, why_len, "negative label value", box[k], line);
            return false;
        }
    }
    for (int k = 1; k < 5; k++) {
        if (box[k] > 1) {
            bad_value(why, why_len, "non-normalized or out of bounds coordinate", box[k], line);
            return false;
        }
    }
    if (box[0] != floorf(box[0]) || box[0] > (float)INT32_MAX / 2) {
        char shown[48];
        fmt_value(shown, sizeof shown, box[0]);
        snprintf(why, why_len, "class %s is not a valid class id (line %zu)", shown, line);
        return false;
    }
    *out = (yc_box){(int32_t)box[0], box[1], box[2], box[3], box[4]};
    return true;
}

/* Reads all rows of a label file's text into *boxes (blank lines skipped).  Returns 1, 0 with
 * the reason in why, or -1 when out of memory. */
static int parse_labels(const char *text, size_t len, yc_box **boxes, size_t *nb, char *why,
                        size_t why_len)
{
    size_t cap_boxes = 0, cap_vals = 0, line = 0;
    float *vals = NULL;
    int res = 1;
    *nb = 0;
    for (const char *p = text, *end = text + len; p < end && res == 1;) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        if (!eol)
            eol = end;
        line++;
        size_t nv;
        res = parse_line(p, eol, line, &vals, &cap_vals, &nv, why, why_len);
        p = eol + 1;
        if (res != 1 || nv == 0)
            continue;
        if (!grow((void **)boxes, &cap_boxes, *nb + 1, sizeof **boxes))
            res = -1;
        else if (line_to_box(vals, nv, line, &(*boxes)[*nb], why, why_len))
            (*nb)++;
        else
            res = 0;
    }
    free(vals);
    return res;
}

int yc_labels_parse(const char *text, size_t len, yc_box **boxes, size_t *n, size_t *n_removed,
                    char *why, size_t why_len)
{
    *boxes = NULL;
    *n = *n_removed = 0;
    if (why_len)
        why[0] = '\0';
    int res = parse_labels(text, len, boxes, n, why, why_len);
    size_t removed = res == 1 ? drop_duplicates(*boxes, *n) : 0;
    if (res != 1 || removed == (size_t)-1) {
        free(*boxes);
        *boxes = NULL;
        *n = 0;
        if (res == 0)
            return YC_EFORMAT;
        snprintf(why, why_len, "out of memory while reading the labels");
        return yc_error_status(YC_ENOMEM, "out of memory while reading the labels");
    }
    *n -= removed;
    *n_removed = removed;
    return YC_OK;
}

/* Checks the label file.  Fills status, boxes and warnings; on a problem writes the reason and
 * returns false. */
static bool verify_labels(const char *path, scan_rec *r, char *why, size_t why_len, bool *oom)
{
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) {
        r->status = REC_MISSING;
        return true;
    }
    if ((size_t)st.st_size > LABEL_MAX_BYTES) {
        snprintf(why, why_len, "label file too large (%lld bytes)", (long long)st.st_size);
        return false;
    }
    char *text = NULL;
    size_t len = 0;
    if (yc_read_file(path, &text, &len) != YC_OK) {
        snprintf(why, why_len, "cannot read the label file: %s", yc_last_error());
        yc_error_clear();
        return false;
    }
    yc_box *boxes = NULL;
    size_t nb = 0, removed = 0;
    int res = yc_labels_parse(text, len, &boxes, &nb, &removed, why, why_len);
    free(text);
    if (res != YC_OK) {
        if (res == YC_ENOMEM) {
            *oom = true;
            yc_error_clear();
        }
        return false;
    }
    if (removed) {
        char msg[96];
        snprintf(msg, sizeof msg, "%zu duplicate labels removed", removed);
        if (!add_warning(r, msg))
            *oom = true;
    }
    if (nb == 0) {
        free(boxes);
        r->status = REC_EMPTY;
        return true;
    }
    r->status = REC_LABELS;
    r->boxes = boxes;
    r->nb = (uint32_t)nb;
    return true;
}

/* verify_image_label: the image first, then its labels; any problem makes the image corrupt. */
static void verify_one(const char *image, const char *label, scan_rec *r, bool *oom)
{
    char why[NOTE_MAX] = "";
    rec_clear(r);
    bool ok = verify_image(image, r, why, sizeof why, oom) &&
              verify_labels(label, r, why, sizeof why, oom);
    if (!ok) {
        free(r->boxes);
        r->boxes = NULL;
        r->nb = 0;
        r->w = r->h = 0;
        r->status = REC_CORRUPT;
        r->reason = strdup(why[0] ? why : "out of memory while verifying");
        if (!r->reason)
            *oom = true;
    }
}

/* ------------------------------------------------------------------------------------------------
 * Cache file: little-endian, FNV-1a checksum at the end.
 *   magic[8] u32 version u32 0 u64 n_records
 *   per record (paths strictly increasing):
 *     str path, u64 fingerprint, u32 status, u32 w, u32 h, u32 n_boxes,
 *     n_boxes x (i32 class, f32 x, f32 y, f32 w, f32 h), str reason, str warnings
 *   u64 checksum of everything before it
 * where str = u32 length (0xffffffff: none) + bytes.
 * ---------------------------------------------------------------------------------------------- */

typedef struct cache_writer {
    /* destination stream */
    FILE *f;
    /* running checksum */
    uint64_t h;
    /* a write failed */
    bool err;
} cache_writer;

static void cw_bytes(cache_writer *w, const void *p, size_t n)
{
    if (w->err || n == 0)
        return;
    if (fwrite(p, 1, n, w->f) != n)
        w->err = true;
    w->h = fnv1a(w->h, p, n);
}

static void cw_u32(cache_writer *w, uint32_t v)
{
    unsigned char b[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                          (unsigned char)(v >> 24)};
    cw_bytes(w, b, 4);
}

static void cw_u64(cache_writer *w, uint64_t v)
{
    cw_u32(w, (uint32_t)v);
    cw_u32(w, (uint32_t)(v >> 32));
}

static void cw_f32(cache_writer *w, float f)
{
    uint32_t v;
    memcpy(&v, &f, 4);
    cw_u32(w, v);
}

static void cw_str(cache_writer *w, const char *s)
{
    if (!s) {
        cw_u32(w, 0xffffffffu);
        return;
    }
    size_t n = strlen(s);
    cw_u32(w, (uint32_t)n);
    cw_bytes(w, s, n);
}

typedef struct cache_reader {
    /* next byte */
    const unsigned char *p;
    /* end of the records (the checksum follows) */
    const unsigned char *end;
    /* a read ran past the end or a value was invalid; `what` says which */
    bool err;
    const char *what;
} cache_reader;

static uint32_t cr_u32(cache_reader *r)
{
    if (r->err || r->end - r->p < 4) {
        if (!r->err)
            r->what = "truncated";
        r->err = true;
        return 0;
    }
    uint32_t v = (uint32_t)r->p[0] | (uint32_t)r->p[1] << 8 | (uint32_t)r->p[2] << 16 |
                 (uint32_t)r->p[3] << 24;
    r->p += 4;
    return v;
}

static uint64_t cr_u64(cache_reader *r)
{
    uint64_t lo = cr_u32(r);
    return lo | (uint64_t)cr_u32(r) << 32;
}

static float cr_f32(cache_reader *r)
{
    uint32_t v = cr_u32(r);
    float f;
    memcpy(&f, &v, 4);
    return f;
}

/* A string of at most `max` bytes without NUL; *len = (size_t)-1 for "none". */
static const char *cr_str(cache_reader *r, size_t max, size_t *len)
{
    uint32_t n = cr_u32(r);
    *len = (size_t)-1;
    if (r->err || n == 0xffffffffu)
        return NULL;
    if (n > max || (size_t)(r->end - r->p) < n || memchr(r->p, '\0', n)) {
        r->err = true;
        r->what = "invalid string";
        return NULL;
    }
    const char *s = (const char *)r->p;
    r->p += n;
    *len = n;
    return s;
}

/* strcmp order between a counted string and a C string. */
static int cmp_counted(const char *a, size_t alen, const char *b)
{
    size_t blen = strlen(b);
    int c = memcmp(a, b, alen < blen ? alen : blen);
    if (c)
        return c;
    return alen < blen ? -1 : alen > blen;
}

static char *dup_counted(const char *s, size_t n)
{
    char *p = malloc(n + 1);
    if (p) {
        memcpy(p, s, n);
        p[n] = '\0';
    }
    return p;
}

/* One pass over the records: validates all; when `apply`, records whose path and fingerprint
 * match the list fill recs[] (cached = true).  Returns false with r->what on invalid content. */
static bool cache_pass(cache_reader *r, uint64_t n_records, const yc_path_list *imgs,
                       scan_rec *recs, bool apply, bool *oom)
{
    size_t i = 0;
    const char *prev = NULL;
    size_t prev_len = 0;
    for (uint64_t j = 0; j < n_records; j++) {
        size_t plen;
        const char *path = cr_str(r, 1 << 16, &plen);
        uint64_t fp = cr_u64(r);
        uint32_t status = cr_u32(r), w = cr_u32(r), h = cr_u32(r), nb = cr_u32(r);
        if (r->err)
            return false;
        if (!path || plen == 0) {
            r->what = "record without a path";
            return false;
        }
        if (prev) {
            size_t m = prev_len < plen ? prev_len : plen;
            int c = memcmp(prev, path, m);
            if (c > 0 || (c == 0 && prev_len >= plen)) {
                r->what = "records out of order";
                return false;
            }
        }
        prev = path;
        prev_len = plen;
        if (status > REC_CORRUPT) {
            r->what = "invalid status";
            return false;
        }
        if (status != REC_CORRUPT && (w < 10 || h < 10 || w > INT32_MAX || h > INT32_MAX)) {
            r->what = "invalid image size";
            return false;
        }
        if ((status == REC_LABELS) != (nb > 0) ||
            (uint64_t)nb * 20 > (uint64_t)(r->end - r->p)) {
            r->what = "invalid box count";
            return false;
        }
        const unsigned char *boxes_at = r->p;
        for (uint32_t k = 0; k < nb; k++) {
            int32_t cls = (int32_t)cr_u32(r);
            float v[4];
            for (int q = 0; q < 4; q++)
                v[q] = cr_f32(r);
            if (r->err)
                return false;
            if (cls < 0 || !(v[0] >= 0 && v[0] <= 1) || !(v[1] >= 0 && v[1] <= 1) ||
                !(v[2] >= 0 && v[2] <= 1) || !(v[3] >= 0 && v[3] <= 1)) {
                r->what = "invalid box";
                return false;
            }
        }
        size_t rlen, wlen;
        const char *reason = cr_str(r, NOTE_MAX, &rlen);
        const char *warn = cr_str(r, NOTE_MAX, &wlen);
        if (r->err)
            return false;
        if ((status == REC_CORRUPT) != (reason != NULL)) {
            r->what = "invalid reason";
            return false;
        }
        if (!apply)
            continue;
        while (i < imgs->n && cmp_counted(path, plen, imgs->paths[i]) > 0)
            i++;
        if (i >= imgs->n || cmp_counted(path, plen, imgs->paths[i]) != 0 || recs[i].fp != fp)
            continue;
        scan_rec *s = &recs[i];
        rec_clear(s);
        s->status = (int)status;
        s->w = (int32_t)w;
        s->h = (int32_t)h;
        s->cached = true;
        if (nb) {
            s->boxes = malloc((size_t)nb * sizeof *s->boxes);
            if (!s->boxes) {
                *oom = true;
                return false;
            }
            cache_reader br = {boxes_at, r->end, false, NULL};
            for (uint32_t k = 0; k < nb; k++) {
                s->boxes[k].cls = (int32_t)cr_u32(&br);
                s->boxes[k].x = cr_f32(&br);
                s->boxes[k].y = cr_f32(&br);
                s->boxes[k].w = cr_f32(&br);
                s->boxes[k].h = cr_f32(&br);
            }
            s->nb = nb;
        }
        if (reason && !(s->reason = dup_counted(reason, rlen)))
            *oom = true;
        if (warn && !(s->warn = dup_counted(warn, wlen)))
            *oom = true;
        if (*oom)
            return false;
        i++;
    }
    if (r->p != r->end) {
        r->what = "trailing bytes";
        return false;
    }
    return true;
}

/* Fills recs[] from the cache where path and fingerprint match.  A missing cache is silent; an
 * unreadable or invalid one is reported and ignored.  Returns the number of records in the file
 * (0 when none was used), or -1 when out of memory. */
static long long cache_load(const char *cache_path, const yc_path_list *imgs, scan_rec *recs,
                            const char *prefix)
{
    if (!yc_file_exists(cache_path))
        return 0;
    char *data = NULL;
    size_t len = 0;
    if (yc_read_file(cache_path, &data, &len) != YC_OK) {
        yc_warn("%s%s; scanning again", prefix, yc_last_error());
        yc_error_clear();
        return 0;
    }
    const char *why = NULL;
    long long result = 0;
    const unsigned char *u = (const unsigned char *)data;
    if (len < 32 || memcmp(u, CACHE_MAGIC, 8) != 0) {
        why = "not a yolocl scan cache";
    } else {
        cache_reader hr = {u + 8, u + len - 8, false, NULL};
        uint32_t version = cr_u32(&hr);
        cr_u32(&hr);
        uint64_t n_records = cr_u64(&hr);
        cache_reader ck = {u + len - 8, u + len, false, NULL};
        uint64_t sum = cr_u64(&ck);
        if (version != CACHE_VERSION) {
            why = "made by another version";
        } else if (sum != fnv1a(FNV_OFFSET, u, len - 8)) {
            why = "checksum mismatch";
        } else if (n_records > (uint64_t)len / 28) {
            why = "invalid record count";
        } else {
            bool oom = false;
            const unsigned char *start = hr.p;
            if (!cache_pass(&hr, n_records, imgs, recs, false, &oom)) {
                why = hr.what ? hr.what : "invalid content";
            } else {
                /* validated: applying it can only fail for want of memory */
                cache_reader ar = {start, u + len - 8, false, NULL};
                result = cache_pass(&ar, n_records, imgs, recs, true, &oom) ? (long long)n_records
                                                                            : -1;
            }
        }
    }
    if (why)
        yc_warn("%signoring the scan cache %s (%s); scanning again", prefix, cache_path, why);
    free(data);
    return result;
}

/* Writes the cache; failures are warnings (the dataset is still usable). */
static void cache_save(const char *cache_path, const yc_path_list *imgs, const scan_rec *recs,
                       const char *prefix)
{
    yc_atomic_file af;
    if (yc_atomic_open(&af, cache_path) != YC_OK) {
        yc_warn("%scache directory is not writeable, scan results not saved: %s", prefix,
                yc_last_error());
        yc_error_clear();
        return;
    }
    cache_writer w = {af.f, FNV_OFFSET, false};
    cw_bytes(&w, CACHE_MAGIC, 8);
    cw_u32(&w, CACHE_VERSION);
    cw_u32(&w, 0);
    cw_u64(&w, imgs->n);
    for (size_t i = 0; i < imgs->n; i++) {
        const scan_rec *r = &recs[i];
        cw_str(&w, imgs->paths[i]);
        cw_u64(&w, r->fp);
        cw_u32(&w, (uint32_t)r->status);
        cw_u32(&w, (uint32_t)r->w);
        cw_u32(&w, (uint32_t)r->h);
        cw_u32(&w, r->nb);
        for (uint32_t k = 0; k < r->nb; k++) {
            cw_u32(&w, (uint32_t)r->boxes[k].cls);
            cw_f32(&w, r->boxes[k].x);
            cw_f32(&w, r->boxes[k].y);
            cw_f32(&w, r->boxes[k].w);
            cw_f32(&w, r->boxes[k].h);
        }
        cw_str(&w, r->reason);
        cw_str(&w, r->warn);
    }
    uint64_t sum = w.h;
    cw_u64(&w, sum);
    if (w.err) {
        int e = errno;
        yc_atomic_abort(&af);
        yc_warn("%scannot write the scan cache %s: %s", prefix, cache_path, strerror(e));
        return;
    }
    if (yc_atomic_commit(&af) != YC_OK) {
        yc_warn("%scannot write the scan cache: %s", prefix, yc_last_error());
        yc_error_clear();
    }
}

/* ------------------------------------------------------------------------------------------------
 * Loading a dataset
 * ---------------------------------------------------------------------------------------------- */

void yc_dataset_free(yc_dataset *ds)
{
    if (!ds)
        return;
    free(ds->samples);
    free(ds->boxes);
    free(ds->class_counts);
    free(ds->notes);
    free(ds->strings);
    free(ds->cache_path);
    memset(ds, 0, sizeof *ds);
}

static int scan_threads(const yc_dataset_options *opt)
{
    if (opt->threads > 0)
        return opt->threads;
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 2)
        n = 2;
    return n > 8 ? 8 : (int)n;
}

/* The base of the cache name: the last entry without .txt when it is a list file, else the
 * directory of the first label file. */
static char *cache_base(const char *const *entries, size_t n_entries, const char *first_label)
{
    const char *last = entries[n_entries - 1];
    struct stat st;
    if (stat(last, &st) == 0 && S_ISREG(st.st_mode) && !yc_is_image_path(last)) {
        char *b = yc_strdup(last, "path");
        if (b && ends_with(b, ".txt"))
            b[strlen(b) - 4] = '\0';
        return b;
    }
    return yc_path_dirname(first_label);
}

/* Number of '\n'-separated lines in s (0 for NULL). */
static size_t count_lines(const char *s)
{
    if (!s)
        return 0;
    size_t n = 1;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

/* Copies s into the pool at *pos; returns where it went. */
static const char *pool_put(char *pool, size_t *pos, const char *s, size_t len)
{
    char *dst = pool + *pos;
    memcpy(dst, s, len);
    dst[len] = '\0';
    *pos += len + 1;
    return dst;
}

/* Builds the dataset from the records: applies the class check and single_cls, packs the pools. */
static int build_dataset(const yc_path_list *imgs, const char *const *labels, scan_rec *recs,
                         const yc_dataset_options *opt, yc_dataset *ds)
{
    size_t n_ok = 0, n_boxes = 0, n_notes = 0, text = 0;
    for (size_t i = 0; i < imgs->n; i++) {
        scan_rec *r = &recs[i];
        if (r->status != REC_CORRUPT && !opt->single_cls) {
            for (uint32_t k = 0; k < r->nb; k++) {
                if (r->boxes[k].cls >= opt->nc) {
                    char why[NOTE_MAX];
                    snprintf(why, sizeof why, "class %d >= nc = %d (classes are 0 to %d)",
                             (int)r->boxes[k].cls, opt->nc, opt->nc - 1);
                    free(r->reason);
                    r->reason = strdup(why);
                    if (!r->reason)
                        return yc_error_status(YC_ENOMEM, "out of memory for scan notes");
                    r->status = REC_CORRUPT;
                    break;
                }
            }
        }
        text += strlen(imgs->paths[i]) + 1;
        if (r->status != REC_CORRUPT) {
            n_ok++;
            n_boxes += r->nb;
            text += strlen(labels[i]) + 1;
        } else {
            n_notes++;
            text += strlen(r->reason) + 1;
        }
        n_notes += count_lines(r->warn);
        text += r->warn ? strlen(r->warn) + 1 : 0;
    }
    ds->nc = opt->nc;
    ds->n_listed = imgs->n;
    ds->samples = yc_calloc(n_ok ? n_ok : 1, sizeof *ds->samples, "dataset samples");
    ds->boxes = yc_calloc(n_boxes ? n_boxes : 1, sizeof *ds->boxes, "dataset boxes");
    ds->class_counts = yc_calloc((size_t)opt->nc, sizeof *ds->class_counts, "class counts");
    ds->notes = yc_calloc(n_notes ? n_notes : 1, sizeof *ds->notes, "scan notes");
    ds->strings = yc_malloc(text ? text : 1, "dataset paths");
    if (!ds->samples || !ds->boxes || !ds->class_counts || !ds->notes || !ds->strings)
        return YC_ENOMEM;
    size_t pos = 0;
    for (size_t i = 0; i < imgs->n; i++) {
        scan_rec *r = &recs[i];
        const char *img = pool_put(ds->strings, &pos, imgs->paths[i], strlen(imgs->paths[i]));
        if (r->status == REC_CORRUPT) {
            ds->n_corrupt++;
            yc_scan_note *note = &ds->notes[ds->n_notes++];
            note->kind = YC_NOTE_CORRUPT;
            note->image = img;
            note->text = pool_put(ds->strings, &pos, r->reason, strlen(r->reason));
        } else {
            yc_sample *s = &ds->samples[ds->n++];
            s->image = img;
            s->label = pool_put(ds->strings, &pos, labels[i], strlen(labels[i]));
            s->w = r->w;
            s->h = r->h;
            s->first_box = ds->n_boxes;
            s->n_boxes = r->nb;
            for (uint32_t k = 0; k < r->nb; k++) {
                yc_box b = r->boxes[k];
                if (opt->single_cls)
                    b.cls = 0;
                ds->class_counts[b.cls]++;
                ds->boxes[ds->n_boxes++] = b;
            }
            ds->n_missing += r->status == REC_MISSING;
            ds->n_empty += r->status == REC_EMPTY;
        }
        if (r->warn) {
            const char *w = pool_put(ds->strings, &pos, r->warn, strlen(r->warn));
            for (;;) {
                yc_scan_note *note = &ds->notes[ds->n_notes++];
                note->kind = YC_NOTE_WARNING;
                note->image = img;
                note->text = w;
                char *nl = strchr(w, '\n');
                if (!nl)
                    break;
                *nl = '\0';
                w = nl + 1;
            }
        }
    }
    return YC_OK;
}

static void print_report(const yc_dataset *ds, const char *prefix, const char *what)
{
    yc_info("%sScanning %s... %zu images, %zu backgrounds, %zu corrupt\n", prefix, what, ds->n,
            yc_dataset_backgrounds(ds), ds->n_corrupt);
    for (size_t i = 0; i < ds->n_notes; i++) {
        const yc_scan_note *n = &ds->notes[i];
        yc_warn("%s%s: %s%s", prefix, n->image,
                n->kind == YC_NOTE_CORRUPT ? "ignoring corrupt image/label: " : "", n->text);
    }
    if (ds->n && ds->n_boxes == 0)
        yc_warn("%sno labels found in %s: every image is a background", prefix, what);
}

int yc_dataset_load(const char *const *entries, size_t n_entries, const yc_dataset_options *opt,
                    yc_dataset *ds)
{
    memset(ds, 0, sizeof *ds);
    if (!opt || opt->nc < 1)
        return yc_error_status(YC_ERR, "dataset: the number of classes must be at least 1");
    if (n_entries == 0)
        return yc_error_status(YC_ERR, "dataset: no image directories or lists given");
    int st = yc_vips_init();
    if (st)
        return st;
    const char *prefix = opt->prefix ? opt->prefix : "";
    yc_path_list imgs;
    st = yc_image_list(entries, n_entries, &imgs);
    if (st)
        return st;
    if (imgs.n == 0) {
        yc_path_list_free(&imgs);
        return yc_error_status(YC_EIO,
                               "no images found in %s%s (image suffixes: bmp dng jpeg jpg mpo png "
                               "tif tiff webp pfm)",
                               entries[0], n_entries > 1 ? " and the other entries" : "");
    }
    size_t n = imgs.n, n_todo = 0, total = 0;
    long long in_cache = 0;
    bool oom = false;
    int nt = scan_threads(opt);
    char **labels = yc_calloc(n, sizeof *labels, "label paths");
    scan_rec *recs = yc_calloc(n, sizeof *recs, "scan records");
    size_t *todo = yc_malloc(n * sizeof *todo, "scan list");
    char *label_pool = NULL, *base = NULL;
    if (!labels || !recs || !todo) {
        st = YC_ENOMEM;
        goto done;
    }
    for (size_t i = 0; i < n; i++)
        total += label_path_into(imgs.paths[i], NULL, 0) + 1;
    label_pool = yc_malloc(total, "label paths");
    if (!label_pool) {
        st = YC_ENOMEM;
        goto done;
    }
    for (size_t i = 0, pos = 0; i < n; i++) {
        size_t need = label_path_into(imgs.paths[i], NULL, 0);
        labels[i] = label_pool + pos;
        label_path_into(imgs.paths[i], labels[i], need + 1);
        pos += need + 1;
    }
    base = cache_base(entries, n_entries, labels[0]);
    if (!base) {
        st = YC_ENOMEM;
        goto done;
    }
#pragma omp parallel for schedule(dynamic, 64) num_threads(nt)
    for (size_t i = 0; i < n; i++)
        recs[i].fp = stat_fingerprint(stat_fingerprint(FNV_OFFSET, imgs.paths[i]), labels[i]);

    if (!opt->no_cache) {
        size_t bl = strlen(base);
        ds->cache_path = yc_malloc(bl + sizeof CACHE_SUFFIX, "cache path");
        if (!ds->cache_path) {
            st = YC_ENOMEM;
            goto done;
        }
        memcpy(ds->cache_path, base, bl);
        memcpy(ds->cache_path + bl, CACHE_SUFFIX, sizeof CACHE_SUFFIX);
        in_cache = cache_load(ds->cache_path, &imgs, recs, prefix);
        if (in_cache < 0) {
            st = yc_error_status(YC_ENOMEM, "out of memory reading the scan cache");
            goto done;
        }
    }

    for (size_t i = 0; i < n; i++)
        if (!recs[i].cached)
            todo[n_todo++] = i;
#pragma omp parallel num_threads(nt)
    {
        bool my_oom = false;
#pragma omp for schedule(dynamic, 4)
        for (size_t k = 0; k < n_todo; k++)
            verify_one(imgs.paths[todo[k]], labels[todo[k]], &recs[todo[k]], &my_oom);
        if (my_oom) {
#pragma omp atomic write
            oom = true;
        }
#ifdef _OPENMP
        if (omp_get_thread_num() != 0)
            vips_thread_shutdown();
#endif
    }
    if (oom) {
        st = yc_error_status(YC_ENOMEM, "out of memory while scanning %zu images", n);
        goto done;
    }
    ds->n_verified = n_todo;
    if (ds->cache_path && (n_todo > 0 || (size_t)in_cache != n))
        cache_save(ds->cache_path, &imgs, recs, prefix);

    st = build_dataset(&imgs, (const char *const *)labels, recs, opt, ds);
    if (st)
        goto done;
    if (!opt->quiet)
        print_report(ds, prefix, n_todo == 0 && ds->cache_path ? ds->cache_path : base);
    if (ds->n == 0)
        st = yc_error_status(YC_EFORMAT, "no usable images: all %zu listed images are corrupt",
                             ds->n_listed);
done:
    if (recs)
        for (size_t i = 0; i < n; i++)
            rec_clear(&recs[i]);
    free(recs);
    free(todo);
    free(labels);
    free(label_pool);
    free(base);
    yc_path_list_free(&imgs);
    if (st)
        yc_dataset_free(ds);
    return st;
}

int yc_dataset_load_split(const yc_data_yaml *y, yc_split split, const yc_dataset_options *opt,
                          yc_dataset *ds)
{
    memset(ds, 0, sizeof *ds);
    if ((unsigned)split >= YC_SPLIT_COUNT)
        return yc_error_status(YC_ERR, "dataset: invalid split %d", (int)split);
    if (y->n_entries[split] == 0)
        return yc_error_status(YC_EFORMAT, "%s: %s: no entries", y->file, split_names[split]);
    yc_dataset_options o = opt ? *opt : (yc_dataset_options){0};
    o.nc = y->nc;
    int st = yc_dataset_load((const char *const *)y->entries[split], (size_t)y->n_entries[split],
                             &o, ds);
    if (st)
        return yc_error_context(st, "%s: %s", y->file, split_names[split]);
    return YC_OK;
}

/* ------------------------------------------------------------------------------------------------
 * Rectangular batches
 * ---------------------------------------------------------------------------------------------- */

typedef struct ar_index {
    /* aspect ratio h/w */
    double ar;
    /* image index */
    size_t i;
} ar_index;

void yc_rect_batches_free(yc_rect_batches *rb)
{
    if (!rb)
        return;
    free(rb->order);
    free(rb->hw);
    memset(rb, 0, sizeof *rb);
}

int yc_rect_batches_make(const int32_t *w, const int32_t *h, size_t n, int batch, int imgsz,
                         int stride, double pad, yc_rect_batches *out)
{
    memset(out, 0, sizeof *out);
    if (n == 0 || batch < 1 || imgsz < 1 || stride < 1 || !(pad >= 0 && pad < 1e6))
        return yc_error_status(YC_ERR,
                               "rect batches: invalid arguments (images %zu, batch %d, imgsz %d, "
                               "stride %d, pad %g)",
                               n, batch, imgsz, stride, pad);
    ar_index *a = yc_malloc(n * sizeof *a, "aspect ratios");
    double *ar = yc_malloc(n * sizeof *ar, "aspect ratios");
    ptrdiff_t *idx = yc_malloc(n * sizeof *idx, "aspect ratios");
    if (!a || !ar || !idx) {
        free(a);
        free(ar);
        free(idx);
        return YC_ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        if (w[i] < 1 || h[i] < 1) {
            free(a);
            free(ar);
            free(idx);
            return yc_error_status(YC_ERR, "rect batches: image %zu has size %dx%d", i,
                                   (int)w[i], (int)h[i]);
        }
        ar[i] = (double)h[i] / (double)w[i];
    }
    /* irect = ar.argsort(): numpy's default (unstable) sort, whose order of equal ratios decides
     * which batch, and so which shape, an image gets */
    yc_np_argsort_f64(ar, idx, (ptrdiff_t)n);
    for (size_t i = 0; i < n; i++) {
        a[i].ar = ar[idx[i]];
        a[i].i = (size_t)idx[i];
    }
    free(ar);
    free(idx);
    size_t nb = (n + (size_t)batch - 1) / (size_t)batch;
    out->order = yc_malloc(n * sizeof *out->order, "rect order");
    out->hw = yc_malloc(nb * 2 * sizeof *out->hw, "rect shapes");
    if (!out->order || !out->hw) {
        free(a);
        yc_rect_batches_free(out);
        return YC_ENOMEM;
    }
    for (size_t i = 0; i < n; i++)
        out->order[i] = a[i].i;
    for (size_t b = 0; b < nb; b++) {
        size_t lo = b * (size_t)batch, hi = lo + (size_t)batch < n ? lo + (size_t)batch : n;
        double mini = a[lo].ar, maxi = a[hi - 1].ar;
        double s[2] = {1, 1};
        if (maxi < 1)
            s[0] = maxi;
        else if (mini > 1)
            s[1] = 1 / mini;
        for (int k = 0; k < 2; k++) {
            double v = ceil(s[k] * imgsz / stride + pad);
            if (v * stride > INT32_MAX) {
                free(a);
                yc_rect_batches_free(out);
                return yc_error_status(YC_ERR, "rect batches: shape too large for imgsz %d",
                                       imgsz);
            }
            out->hw[2 * b + (size_t)k] = (int32_t)v * stride;
        }
    }
    free(a);
    out->n = n;
    out->n_batches = nb;
    return YC_OK;
}

int yc_dataset_rect_batches(const yc_dataset *ds, int batch, int imgsz, int stride, double pad,
                            yc_rect_batches *out)
{
    memset(out, 0, sizeof *out);
    if (ds->n == 0)
        return yc_error_status(YC_ERR, "rect batches: the dataset is empty");
    int32_t *wh = yc_malloc(ds->n * 2 * sizeof *wh, "image sizes");
    if (!wh)
        return YC_ENOMEM;
    for (size_t i = 0; i < ds->n; i++) {
        wh[i] = ds->samples[i].w;
        wh[ds->n + i] = ds->samples[i].h;
    }
    int st = yc_rect_batches_make(wh, wh + ds->n, ds->n, batch, imgsz, stride, pad, out);
    free(wh);
    return st;
}
