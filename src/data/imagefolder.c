/* ImageFolder classification datasets (imagefolder.h). */
#include "imagefolder.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "util.h"

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The subfolder names of dir (not hidden), sorted, into *names (heap, each a heap string). */
static int list_class_dirs(const char *dir, char ***names, int *count)
{
    *names = NULL;
    *count = 0;
    DIR *d = opendir(dir);
    if (!d)
        return yc_error_status(YC_EIO, "cannot open the dataset folder %s: %s", dir, strerror(errno));
    int st = YC_OK, cap = 0;
    struct dirent *e;
    while (!st && (e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char *p = yc_path_join(dir, e->d_name);
        bool is_dir = p && yc_is_dir(p);
        free(p);
        if (!p) {
            st = YC_ENOMEM;
            break;
        }
        if (!is_dir)
            continue;
        if (*count == cap) {
            cap = cap ? 2 * cap : 16;
            char **nn = yc_realloc(*names, (size_t)cap * sizeof *nn, "class names");
            if (!nn) {
                st = YC_ENOMEM;
                break;
            }
            *names = nn;
        }
        if (!((*names)[*count] = yc_strdup(e->d_name, "class name")))
            st = YC_ENOMEM;
        else
            (*count)++;
    }
    closedir(d);
    if (!st && *count > 0)
        qsort(*names, (size_t)*count, sizeof **names, cmp_str);
    return st;
}

int yc_imagefolder_open(const char *dir, yc_imagefolder *out)
{
    memset(out, 0, sizeof *out);
    if (!yc_is_dir(dir))
        return yc_error_status(YC_EIO, "%s is not a folder (a classification dataset has "
                               "ROOT/train/CLASS/*.jpg and ROOT/val/CLASS/*.jpg)", dir);
    int st = list_class_dirs(dir, &out->classes, &out->nc);
    if (!st && out->nc == 0)
        st = yc_error_status(YC_EFORMAT, "%s holds no class folders (a classification dataset "
                             "has one folder of images per class)", dir);
    if (!st && !(out->lists = yc_calloc((size_t)out->nc, sizeof *out->lists, "image lists")))
        st = YC_ENOMEM;
    for (int c = 0; c < out->nc && !st; c++) {
        char *p = yc_path_join(dir, out->classes[c]);
        if (!p) {
            st = YC_ENOMEM;
            break;
        }
        const char *entry = p;
        st = yc_image_list(&entry, 1, &out->lists[c]);
        if (!st && out->lists[c].n == 0)
            st = yc_error_status(YC_EFORMAT, "class folder %s holds no images", p);
        free(p);
        out->n += st ? 0 : out->lists[c].n;
    }
    if (!st) {
        out->paths = yc_malloc((out->n ? out->n : 1) * sizeof *out->paths, "dataset");
        out->labels = yc_malloc((out->n ? out->n : 1) * sizeof *out->labels, "dataset");
        if (!out->paths || !out->labels)
            st = YC_ENOMEM;
    }
    for (int c = 0, k = 0; c < out->nc && !st; c++)
        for (size_t i = 0; i < out->lists[c].n; i++, k++) {
            out->paths[k] = out->lists[c].paths[i];
            out->labels[k] = c;
        }
    if (st)
        yc_imagefolder_free(out);
    return st;
}

void yc_imagefolder_free(yc_imagefolder *f)
{
    for (int c = 0; c < f->nc; c++) {
        free(f->classes[c]);
        if (f->lists)
            yc_path_list_free(&f->lists[c]);
    }
    free(f->classes);
    free(f->lists);
    free(f->paths);
    free(f->labels);
    memset(f, 0, sizeof *f);
}

int yc_imagefolder_val_dir(const char *root, char *buf, size_t len)
{
    static const char *const names[] = {"test", "val"};
    for (int i = 0; i < 2; i++) {
        snprintf(buf, len, "%s/%s", root, names[i]);
        if (yc_is_dir(buf))
            return YC_OK;
    }
    return yc_error_status(YC_EIO, "%s has no test or val folder (a classification dataset has "
                           "ROOT/train and ROOT/val)", root);
}
