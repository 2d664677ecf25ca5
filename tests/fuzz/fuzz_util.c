/* Helpers shared by the fuzz targets (see fuzz.h). */
#include "fuzz.h"

#include <ftw.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

static char dir[1024];
static int dir_state; /* 0: not tried, 1: made, -1: failed */

static char names[8][64];
static char paths[8][1200];

void fuzz_init(void)
{
    yc_verbosity = 0;
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

static void remove_dir(void)
{
    if (dir_state == 1)
        nftw(dir, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

const char *fuzz_dir(void)
{
    if (dir_state == 0) {
        const char *base = getenv("TMPDIR");
        snprintf(dir, sizeof dir, "%s/yolocl-fuzz-XXXXXX", base && *base ? base : "/tmp");
        if (mkdtemp(dir)) {
            dir_state = 1;
            atexit(remove_dir);
        } else {
            perror("fuzz: mkdtemp");
            dir_state = -1;
        }
    }
    return dir_state == 1 ? dir : NULL;
}

const char *fuzz_write(const char *name, const void *data, size_t size)
{
    const char *d = fuzz_dir();
    if (!d)
        return NULL;
    int slot = 0;
    while (slot < 8 && names[slot][0] && strcmp(names[slot], name) != 0)
        slot++;
    if (slot == 8) {
        fprintf(stderr, "fuzz: too many file names\n");
        return NULL;
    }
    if (!names[slot][0]) {
        snprintf(names[slot], sizeof names[slot], "%s", name);
        snprintf(paths[slot], sizeof paths[slot], "%s/%s", d, name);
    }
    FILE *f = fopen(paths[slot], "wb");
    if (!f) {
        perror(paths[slot]);
        return NULL;
    }
    bool ok = fwrite(data, 1, size, f) == size;
    if (fclose(f) != 0 || !ok) {
        perror(paths[slot]);
        return NULL;
    }
    return paths[slot];
}

void fuzz_begin(void)
{
    yc_error_clear();
}

void fuzz_check(int status, const char *what)
{
    if (status != YC_OK && !yc_last_error()[0]) {
        fprintf(stderr, "fuzz: %s failed with status %d and no message\n", what, status);
        abort();
    }
    yc_error_clear();
}

void fuzz_fail(const char *what)
{
    fprintf(stderr, "fuzz: %s\n", what);
    abort();
}
