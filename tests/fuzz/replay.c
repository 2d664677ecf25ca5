/* Replays inputs through one fuzz target without libFuzzer (make check runs one replay program per
 * target, built with the normal compiler: tests/fuzz/replay_<target>).
 *
 *   replay_<target> [FILE|DIR]...
 *
 * feeds every file named, and every regular file of every directory named (not recursively, in
 * name order), to the target's LLVMFuzzerTestOneInput.  With no argument it replays
 * $YOLOCL_FUZZ_DIR/seeds/<target> and $YOLOCL_FUZZ_DIR/regress/<target> (the seed corpus and the
 * inputs that once crashed), <target> being the program's name after "replay_".  A crash, a
 * sanitizer report or an abort from the target fails the test; exit status 0 otherwise. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

static int replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return -1;
    }
    size_t cap = 1 << 16, n = 0;
    unsigned char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap)
            break;
        unsigned char *nb = realloc(buf, cap * 2);
        if (!nb) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = nb;
        cap *= 2;
    }
    int err = ferror(f);
    fclose(f);
    if (!buf || err) {
        fprintf(stderr, "%s: %s\n", path, buf ? "read error" : "out of memory");
        free(buf);
        return -1;
    }
    /* an exact-size copy, so that reads past the input are caught as they are under libFuzzer */
    unsigned char *exact = malloc(n ? n : 1);
    if (!exact) {
        free(buf);
        return -1;
    }
    memcpy(exact, buf, n);
    free(buf);
    LLVMFuzzerTestOneInput(exact, n);
    free(exact);
    return 0;
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Replays the regular files of `dir`; returns how many, or -1. */
static long replay_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) {
        perror(dir);
        return -1;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    long status = 0;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            char **nn = realloc(names, cap * sizeof *nn);
            if (!nn) {
                status = -1;
                break;
            }
            names = nn;
        }
        size_t len = strlen(dir) + strlen(e->d_name) + 2;
        if (!(names[n] = malloc(len))) {
            status = -1;
            break;
        }
        snprintf(names[n], len, "%s/%s", dir, e->d_name);
        n++;
    }
    closedir(d);
    if (n)
        qsort(names, n, sizeof *names, cmp_name);
    for (size_t i = 0; i < n; i++) {
        struct stat st;
        if (status >= 0 && stat(names[i], &st) == 0 && S_ISREG(st.st_mode)) {
            if (replay_file(names[i]))
                status = -1;
            else
                status++;
        }
        free(names[i]);
    }
    free(names);
    if (status < 0)
        fprintf(stderr, "%s: cannot list or read the directory\n", dir);
    return status;
}

static int replay_path(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        perror(path);
        return 1;
    }
    if (!S_ISDIR(st.st_mode)) {
        if (replay_file(path))
            return 1;
        printf("replayed %s\n", path);
        return 0;
    }
    long n = replay_dir(path);
    if (n < 0)
        return 1;
    printf("replayed %ld inputs from %s\n", n, path);
    return 0;
}

int main(int argc, char **argv)
{
    int bad = 0;
    if (argc > 1) {
        for (int i = 1; i < argc; i++)
            bad |= replay_path(argv[i]);
        return bad;
    }
    const char *prog = strrchr(argv[0], '/');
    prog = prog ? prog + 1 : argv[0];
    if (strncmp(prog, "replay_", 7) != 0 || !prog[7]) {
        fprintf(stderr, "%s: name the inputs, or run as replay_<target>\n", argv[0]);
        return 2;
    }
    const char *base = getenv("YOLOCL_FUZZ_DIR");
    if (!base || !*base) {
        fprintf(stderr, "%s: set YOLOCL_FUZZ_DIR to tests/fuzz, or name the inputs\n", argv[0]);
        return 2;
    }
    const char *kinds[] = {"seeds", "regress"};
    for (int k = 0; k < 2; k++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s/%s", base, kinds[k], prog + 7);
        struct stat st;
        if (k == 1 && stat(path, &st) != 0)
            continue; /* no crash found yet: no regress/ directory */
        bad |= replay_path(path);
    }
    return bad;
}
