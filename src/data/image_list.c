/* Image lists (see dataset.h): the image files named by directories (walked recursively, in
 * sorted order), .txt lists (one path a line, relative to the list's directory) and single
 * images, gathered into one sorted, pooled list; and YOLOv5's label path of an image
 * (/images/ -> /labels/, suffix .txt). */
#include "dataset_internal.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "util.h"

/* Deepest directory nesting followed when listing images. */
#define DIR_MAX_DEPTH 64

bool yc_ds_path_exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0;
}

/* An absolute form of p (heap): p itself when absolute, else joined to the current directory. */
char *yc_ds_absolute_path(const char *p)
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
            if (!yc_ds_path_exists(cand) && yc_ds_path_exists(s)) {
                char *abs = yc_ds_absolute_path(s);
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
size_t yc_ds_label_path_into(const char *image, char *out, size_t cap)
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
    size_t need = yc_ds_label_path_into(image, NULL, 0);
    char *p = yc_malloc(need + 1, "label path");
    if (p)
        yc_ds_label_path_into(image, p, need + 1);
    return p;
}
