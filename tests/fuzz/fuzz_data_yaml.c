/* Fuzz target: dataset yaml files (yc_data_yaml_load, src/data/data_yaml.c, on libyaml through
 * src/core/yamltree.c) and the image lists they name (yc_image_list: directories and .txt lists).
 *
 * The input is the yaml text, optionally followed by a line "#LIST" and the text of a .txt image
 * list (written to list.txt beside the yaml, which the yaml may name).  The yaml lies in a private
 * directory holding images/a.jpg, images/b.png and images/sub/c.bmp (empty files: only names are
 * read).  After a successful load, splits whose entries all lie inside that directory are listed
 * (never the rest of the file system).  Checked: names has nc non-NULL entries, every entry is
 * an absolute path, and listed paths come back sorted and unique. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dataset.h"
#include "fuzz.h"
#include "log.h"

static const char *tree(void)
{
    static char root[1200];
    static int state;
    if (state)
        return state > 0 ? root : NULL;
    state = -1;
    const char *d = fuzz_dir();
    if (!d)
        return NULL;
    char path[1400];
    snprintf(root, sizeof root, "%s/ds", d);
    const char *dirs[] = {"", "/images", "/images/sub", "/labels"};
    for (size_t i = 0; i < sizeof dirs / sizeof *dirs; i++) {
        snprintf(path, sizeof path, "%s%s", root, dirs[i]);
        if (mkdir(path, 0700) != 0) {
            perror(path);
            return NULL;
        }
    }
    const char *files[] = {"/images/a.jpg", "/images/b.png", "/images/sub/c.bmp", "/labels/a.txt"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        snprintf(path, sizeof path, "%s%s", root, files[i]);
        FILE *f = fopen(path, "w");
        if (!f || fclose(f) != 0) {
            perror(path);
            return NULL;
        }
    }
    state = 1;
    return root;
}

static int write_file(const char *path, const uint8_t *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t put = fwrite(data, 1, size, f);
    return fclose(f) == 0 && put == size ? 0 : -1;
}

/* True when every entry of the split is inside the private directory. */
static bool inside(const yc_data_yaml *y, int s, const char *root)
{
    size_t rl = strlen(root);
    for (int i = 0; i < y->n_entries[s]; i++) {
        const char *e = y->entries[s][i];
        if (strncmp(e, root, rl) != 0 || (e[rl] != '/' && e[rl] != '\0') || strstr(e, "/.."))
            return false;
    }
    return y->n_entries[s] > 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_init();
    const char *root = tree();
    if (!root)
        abort();
    static const char marker[] = "\n#LIST\n";
    const uint8_t *list = NULL;
    size_t yaml_len = size, list_len = 0;
    for (size_t i = 0; i + sizeof marker - 1 <= size; i++) {
        if (memcmp(data + i, marker, sizeof marker - 1) == 0) {
            yaml_len = i + 1;
            list = data + i + sizeof marker - 1;
            list_len = size - i - (sizeof marker - 1);
            break;
        }
    }
    static const char default_list[] = "images/a.jpg\n./images/b.png\n";
    char yaml_path[1300], list_path[1300];
    snprintf(yaml_path, sizeof yaml_path, "%s/data.yaml", root);
    snprintf(list_path, sizeof list_path, "%s/list.txt", root);
    if (write_file(yaml_path, data, yaml_len) ||
        (list ? write_file(list_path, list, list_len)
              : write_file(list_path, (const uint8_t *)default_list, sizeof default_list - 1))) {
        perror(root);
        abort();
    }
    yc_data_yaml y;
    fuzz_begin();
    int st = yc_data_yaml_load(yaml_path, &y);
    fuzz_check(st, "yc_data_yaml_load");
    if (st)
        return 0;
    if (y.nc < 1 || !y.names || !y.root || y.root[0] != '/')
        fuzz_fail("dataset yaml: no classes or no absolute root after a successful load");
    for (int i = 0; i < y.nc; i++)
        if (!y.names[i])
            fuzz_fail("dataset yaml: a class without a name");
    for (int s = 0; s < YC_SPLIT_COUNT; s++) {
        for (int i = 0; i < y.n_entries[s]; i++)
            if (!y.entries[s][i] || y.entries[s][i][0] != '/')
                fuzz_fail("dataset yaml: an entry that is not an absolute path");
        if (!inside(&y, s, root))
            continue;
        yc_path_list l;
        fuzz_begin();
        st = yc_image_list((const char *const *)y.entries[s], (size_t)y.n_entries[s], &l);
        fuzz_check(st, "yc_image_list");
        if (st)
            continue;
        for (size_t i = 0; i < l.n; i++) {
            if (i && strcmp(l.paths[i - 1], l.paths[i]) >= 0)
                fuzz_fail("image list not sorted and unique");
            char *label = yc_label_path(l.paths[i]);
            if (!label)
                fuzz_fail("yc_label_path returned NULL");
            free(label);
        }
        yc_path_list_free(&l);
    }
    yc_data_yaml_free(&y);
    return 0;
}
