/* Files, paths, time and sizes (see util.h). */
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

int yc_read_file(const char *path, char **data, size_t *size)
{
    *data = NULL;
    if (size)
        *size = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return yc_error_status(YC_EIO, "cannot open %s: %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    char *buf = yc_malloc(cap + 1, "file contents");
    if (!buf) {
        fclose(f);
        return YC_ENOMEM;
    }
    for (;;) {
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0)
            break;
        if (n == cap) {
            if (cap > SIZE_MAX / 2 - 1) {
                free(buf);
                fclose(f);
                return yc_error_status(YC_ENOMEM, "%s is too large to read", path);
            }
            char *nb = yc_realloc(buf, cap * 2 + 1, "file contents");
            if (!nb) {
                free(buf);
                fclose(f);
                return YC_ENOMEM;
            }
            buf = nb;
            cap *= 2;
        }
    }
    int err = ferror(f);
    fclose(f);
    if (err) {
        free(buf);
        return yc_error_status(YC_EIO, "error reading %s", path);
    }
    buf[n] = '\0';
    *data = buf;
    if (size)
        *size = n;
    return YC_OK;
}

int yc_atomic_open(yc_atomic_file *af, const char *path)
{
    memset(af, 0, sizeof *af);
    af->final = yc_strdup(path, "path");
    size_t n = strlen(path) + 32;
    af->tmp = yc_malloc(n, "path");
    if (!af->final || !af->tmp) {
        free(af->final);
        free(af->tmp);
        return YC_ENOMEM;
    }
    snprintf(af->tmp, n, "%s.tmp.%ld", path, (long)getpid());
    af->f = fopen(af->tmp, "wb");
    if (!af->f) {
        int e = errno;
        yc_error_status(YC_EIO, "cannot create %s: %s", af->tmp, strerror(e));
        free(af->final);
        free(af->tmp);
        memset(af, 0, sizeof *af);
        return YC_EIO;
    }
    return YC_OK;
}

static void fsync_dir_of(const char *path)
{
    char *dir = yc_path_dirname(path);
    if (!dir)
        return;
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
    free(dir);
}

int yc_atomic_commit(yc_atomic_file *af)
{
    int status = YC_OK;
    if (!af->f)
        return yc_error_status(YC_EIO, "atomic write: file not open");
    if (fflush(af->f) != 0 || ferror(af->f)) {
        status = yc_error_status(YC_EIO, "cannot write %s (through %s): %s", af->final, af->tmp,
                                 strerror(errno));
    } else if (fsync(fileno(af->f)) != 0) {
        status = yc_error_status(YC_EIO, "cannot sync %s (through %s) to disk: %s", af->final,
                                 af->tmp, strerror(errno));
    }
    if (fclose(af->f) != 0 && status == YC_OK)
        status = yc_error_status(YC_EIO, "cannot close %s (through %s): %s", af->final, af->tmp,
                                 strerror(errno));
    af->f = NULL;
    if (status == YC_OK && rename(af->tmp, af->final) != 0)
        status = yc_error_status(YC_EIO, "cannot rename %s to %s: %s", af->tmp, af->final,
                                 strerror(errno));
    if (status != YC_OK)
        unlink(af->tmp);
    else
        fsync_dir_of(af->final);
    free(af->tmp);
    free(af->final);
    af->tmp = af->final = NULL;
    return status;
}

void yc_atomic_abort(yc_atomic_file *af)
{
    if (af->f)
        fclose(af->f);
    if (af->tmp)
        unlink(af->tmp);
    free(af->tmp);
    free(af->final);
    memset(af, 0, sizeof *af);
}

int yc_write_file_atomic(const char *path, const void *data, size_t size)
{
    yc_atomic_file af;
    int st = yc_atomic_open(&af, path);
    if (st)
        return st;
    if (size && fwrite(data, 1, size, af.f) != size) {
        int e = errno;
        yc_atomic_abort(&af);
        return yc_error_status(YC_EIO, "cannot write %s: %s", path, strerror(e));
    }
    return yc_atomic_commit(&af);
}

int yc_atomic_remove_stale(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int removed = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *tag = strstr(e->d_name, ".tmp.");
        if (!tag || tag == e->d_name)
            continue;
        const char *digits = tag + 5;
        char *end;
        errno = 0;
        long pid = strtol(digits, &end, 10);
        if (end == digits || *end || errno || pid <= 0 || (pid_t)pid != pid)
            continue;
        /* a live process (ours included) may still be writing it */
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue;
        char *path = yc_path_join(dir, e->d_name);
        if (path && unlink(path) == 0)
            removed++;
        free(path);
    }
    closedir(d);
    return removed;
}

char *yc_path_join(const char *a, const char *b)
{
    if (!a || !a[0] || b[0] == '/')
        return yc_strdup(b, "path");
    size_t la = strlen(a), lb = strlen(b);
    bool slash = a[la - 1] == '/';
    char *p = yc_malloc(la + lb + 2, "path");
    if (!p)
        return NULL;
    memcpy(p, a, la);
    if (!slash)
        p[la++] = '/';
    memcpy(p + la, b, lb + 1);
    return p;
}

char *yc_path_dirname(const char *path)
{
    char *copy = yc_strdup(path, "path");
    if (!copy)
        return NULL;
    char *d = yc_strdup(dirname(copy), "path");
    free(copy);
    return d;
}

const char *yc_path_basename(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

bool yc_file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

bool yc_is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

int yc_mkdirs(const char *path)
{
    char *p = yc_strdup(path, "path");
    if (!p)
        return YC_ENOMEM;
    for (char *s = p + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = '\0';
        if (mkdir(p, 0777) != 0 && errno != EEXIST) {
            int e = errno;
            int st = yc_error_status(YC_EIO, "cannot create directory %s: %s", p, strerror(e));
            free(p);
            return st;
        }
        *s = '/';
    }
    int st = YC_OK;
    if (mkdir(p, 0777) != 0 && errno != EEXIST)
        st = yc_error_status(YC_EIO, "cannot create directory %s: %s", p, strerror(errno));
    free(p);
    return st;
}

int yc_count_files(const char *dir, const char *suffix)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    size_t ls = strlen(suffix);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l > ls && strcmp(e->d_name + l - ls, suffix) == 0)
            n++;
    }
    closedir(d);
    return n;
}

double yc_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

size_t yc_peak_rss(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return 0;
    return (size_t)ru.ru_maxrss * 1024;
}

size_t yc_current_rss(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f)
        return 0;
    unsigned long size = 0, resident = 0;
    int n = fscanf(f, "%lu %lu", &size, &resident);
    fclose(f);
    long page = sysconf(_SC_PAGESIZE);
    return n == 2 && page > 0 ? (size_t)resident * (size_t)page : 0;
}

int yc_parse_size(const char *s, size_t *out)
{
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno || !isfinite(v) || v < 0)
        return yc_error_status(YC_EUSAGE, "'%s' is not a size (examples: 512M, 4G, 1.5GiB)", s);
    double mul = 1;
    switch (*end) {
    case 'k': case 'K': mul = 1024.0; end++; break;
    case 'm': case 'M': mul = 1024.0 * 1024; end++; break;
    case 'g': case 'G': mul = 1024.0 * 1024 * 1024; end++; break;
    case 't': case 'T': mul = 1024.0 * 1024 * 1024 * 1024; end++; break;
    default: break;
    }
    if (mul > 1 && (*end == 'i' || *end == 'I'))
        end++;
    if (*end == 'b' || *end == 'B')
        end++;
    if (*end)
        return yc_error_status(YC_EUSAGE, "'%s' is not a size (examples: 512M, 4G, 1.5GiB)", s);
    double bytes = v * mul;
    if (bytes >= 18446744073709551615.0)
        return yc_error_status(YC_EUSAGE, "size '%s' is too large", s);
    *out = (size_t)bytes;
    return YC_OK;
}

const char *yc_format_size(size_t bytes, char *buf, size_t len)
{
    const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024 && u < 4) {
        v /= 1024;
        u++;
    }
    if (u == 0)
        snprintf(buf, len, "%zu B", bytes);
    else
        snprintf(buf, len, "%.2f %s", v, unit[u]);
    return buf;
}

int yc_physical_cores(void)
{
    /* Count distinct (physical id, core id) pairs in /proc/cpuinfo; fall back to online CPUs. */
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    if (online < 1)
        online = 1;
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return (int)online;
    char line[256];
    int phys = -1, pairs = 0;
    int seen[1024][2];
    while (fgets(line, sizeof line, f)) {
        int v;
        if (sscanf(line, "physical id : %d", &v) == 1) {
            phys = v;
        } else if (sscanf(line, "core id : %d", &v) == 1) {
            bool dup = false;
            for (int i = 0; i < pairs; i++)
                if (seen[i][0] == phys && seen[i][1] == v)
                    dup = true;
            if (!dup && pairs < 1024) {
                seen[pairs][0] = phys;
                seen[pairs][1] = v;
                pairs++;
            }
        }
    }
    fclose(f);
    if (pairs < 1 || pairs > online)
        return (int)online;
    return pairs;
}

int yc_data_path(const char *rel, char *out, size_t len)
{
    const char *dirs[3];
    int n = 0;
    const char *env = getenv("YOLOCL_DATA_DIR");
    if (env && env[0])
        dirs[n++] = env;
    dirs[n++] = YC_PKGDATADIR;
    dirs[n++] = YC_SRCDATADIR;
    for (int i = 0; i < n; i++) {
        int w = snprintf(out, len, "%s/%s", dirs[i], rel);
        if (w > 0 && (size_t)w < len && yc_file_exists(out))
            return YC_OK;
    }
    char searched[3072] = "";
    for (int i = 0; i < n; i++) {
        size_t used = strlen(searched);
        snprintf(searched + used, sizeof searched - used, "%s%s", i ? ", " : "", dirs[i]);
    }
    if (len)
        out[0] = '\0';
    return yc_error_status(YC_EIO, "%s not found in %s (set YOLOCL_DATA_DIR to the data directory)",
                           rel, searched);
}
