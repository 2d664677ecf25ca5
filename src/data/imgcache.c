/* --cache ram|disk (see imgcache.h). */
#include "imgcache.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "image_read.h"
#include "log.h"
#include "util.h"

/* mutexes guarding the RAM entries, entry i under lock i % LOCKS */
#define LOCKS 64
#define MAGIC "YCICACH1"
#define HEADER_BYTES 48

typedef struct entry {
    /* fingerprint of the file the pixels came from; 0: empty */
    uint64_t fp;
} entry;

struct yc_img_cache {
    yc_cache_kind kind;
    const yc_dataset *ds;
    int imgsz;
    bool augment;
    /* per sample: load_image size (from the scan's sizes) and, for ram, the offset of its pixels */
    int *h, *w;
    size_t *offset;
    /* ram: the pixels and entries */
    uint8_t *pixels;
    entry *entries;
    pthread_mutex_t locks[LOCKS];
    /* disk: the directory; per sample a flag held while one thread writes its file */
    char *dir;
    atomic_uchar *writing;
    atomic_bool write_failed;
    atomic_size_t hits, stores, writes;
};

bool yc_cache_kind_parse(const char *s, yc_cache_kind *out)
{
    if (!s || !*s || !strcmp(s, "ram"))
        *out = YC_CACHE_RAM;
    else if (!strcmp(s, "disk"))
        *out = YC_CACHE_DISK;
    else
        return false;
    return true;
}

const char *yc_cache_kind_name(yc_cache_kind k)
{
    return k == YC_CACHE_RAM ? "ram" : k == YC_CACHE_DISK ? "disk" : "none";
}

/* load_image's size of sample s at imgsz. */
static void sample_size(const yc_sample *s, int imgsz, bool augment, int *h, int *w)
{
    yc_interp interp;
    yc_load_size(s->h, s->w, imgsz, augment, h, w, &interp);
}

size_t yc_img_cache_ram_bytes(const yc_dataset *ds, int imgsz)
{
    size_t total = 0;
    for (size_t i = 0; i < ds->n; i++) {
        int h, w;
        sample_size(&ds->samples[i], imgsz, true, &h, &w);
        total += 3 * (size_t)h * (size_t)w;
    }
    return total;
}

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
    h ^= h >> 31;
    h *= 0xBF58476D1CE4E5B9ull;
    return h ^ (h >> 29);
}

uint64_t yc_img_cache_fingerprint(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return 0;
    uint64_t h = mix(0x5EEDull, (uint64_t)st.st_size);
    h = mix(h, (uint64_t)st.st_mtim.tv_sec);
    h = mix(h, (uint64_t)st.st_mtim.tv_nsec);
    h = mix(h, (uint64_t)st.st_ino);
    h = mix(h, (uint64_t)st.st_dev);
    return h ? h : 1;
}

/* Checksum of a disk entry's pixels: 8 bytes at a time (fast enough to be cheap next to a read). */
static uint64_t checksum(const uint8_t *p, size_t n)
{
    uint64_t h = 0x243F6A8885A308D3ull;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t v;
        memcpy(&v, p + i, 8);
        h = (h ^ v) * 0x100000001B3ull;
        h ^= h >> 32;
    }
    for (; i < n; i++)
        h = (h ^ p[i]) * 0x100000001B3ull;
    return h;
}

static uint64_t path_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* A directory where this process can create files: `dir` created if needed. */
static bool usable_dir(const char *dir)
{
    return yc_mkdirs(dir) == YC_OK && access(dir, W_OK | X_OK) == 0;
}

/* The disk cache directory of ds: beside its scan cache, else under the user's cache directory
 * (into *out, heap).  YC_EIO naming the directories tried. */
static int choose_dir(const yc_dataset *ds, char **out)
{
    static const char suffix[] = ".yolocl.cache";
    char beside[PATH_MAX];
    if (ds->cache_path && strlen(ds->cache_path) > sizeof suffix - 1 &&
        !strcmp(ds->cache_path + strlen(ds->cache_path) - (sizeof suffix - 1), suffix))
        snprintf(beside, sizeof beside, "%.*s.yolocl-images",
                 (int)(strlen(ds->cache_path) - (sizeof suffix - 1)), ds->cache_path);
    else {
        char *d = yc_path_dirname(ds->samples[0].image);
        if (!d)
            return YC_ENOMEM;
        snprintf(beside, sizeof beside, "%s.yolocl-images", d);
        free(d);
    }
    yc_error_clear();
    if (usable_dir(beside)) {
        *out = yc_strdup(beside, "cache directory");
        return *out ? YC_OK : YC_ENOMEM;
    }
    char why[512];
    snprintf(why, sizeof why, "%s", yc_last_error());
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    char user[PATH_MAX];
    if (xdg && *xdg)
        snprintf(user, sizeof user, "%s/yolocl/images/%016llx", xdg,
                 (unsigned long long)path_hash(beside));
    else if (home && *home)
        snprintf(user, sizeof user, "%s/.cache/yolocl/images/%016llx", home,
                 (unsigned long long)path_hash(beside));
    else
        return yc_error_status(YC_EIO, "--cache disk: cannot write %s (%s), and neither "
                               "XDG_CACHE_HOME nor HOME names a cache directory", beside,
                               *why ? why : "not writable");
    if (!usable_dir(user))
        return yc_error_status(YC_EIO, "--cache disk: cannot write %s (%s) nor %s (%s)", beside,
                               *why ? why : "not writable", user,
                               *yc_last_error() ? yc_last_error() : "not writable");
    yc_info("--cache disk: %s is not writable; caching under %s\n", beside, user);
    *out = yc_strdup(user, "cache directory");
    return *out ? YC_OK : YC_ENOMEM;
}

int yc_img_cache_new(yc_img_cache **out, yc_cache_kind kind, const yc_dataset *ds, int imgsz,
                     bool augment, const char *dir_override)
{
    *out = NULL;
    if (kind != YC_CACHE_RAM && kind != YC_CACHE_DISK)
        return yc_error_status(YC_EUSAGE, "image cache: kind %d", (int)kind);
    if (!ds || ds->n == 0 || imgsz < 1)
        return yc_error_status(YC_EUSAGE, "image cache: no images or image size %d", imgsz);
    yc_img_cache *c = yc_calloc(1, sizeof *c, "image cache");
    if (!c)
        return YC_ENOMEM;
    c->kind = kind;
    c->ds = ds;
    c->imgsz = imgsz;
    c->augment = augment;
    for (int i = 0; i < LOCKS; i++)
        pthread_mutex_init(&c->locks[i], NULL);
    c->h = yc_malloc(ds->n * sizeof *c->h, "image cache");
    c->w = yc_malloc(ds->n * sizeof *c->w, "image cache");
    c->offset = yc_malloc(ds->n * sizeof *c->offset, "image cache");
    int st = c->h && c->w && c->offset ? YC_OK : YC_ENOMEM;
    size_t total = 0;
    for (size_t i = 0; !st && i < ds->n; i++) {
        sample_size(&ds->samples[i], imgsz, augment, &c->h[i], &c->w[i]);
        c->offset[i] = total;
        total += 3 * (size_t)c->h[i] * (size_t)c->w[i];
    }
    if (!st && kind == YC_CACHE_RAM) {
        char sz[32];
        c->entries = yc_calloc(ds->n, sizeof *c->entries, "image cache entries");
        c->pixels = yc_malloc(total ? total : 1, "--cache ram images");
        if (!c->entries || !c->pixels)
            st = yc_error_status(YC_ENOMEM, "--cache ram: cannot allocate %s for %zu images",
                                 yc_format_size(total, sz, sizeof sz), ds->n);
    }
    if (!st && kind == YC_CACHE_DISK) {
        c->writing = yc_calloc(ds->n, sizeof *c->writing, "image cache");
        if (!c->writing)
            st = YC_ENOMEM;
        else if (dir_override) {
            if (!usable_dir(dir_override))
                st = yc_error_status(YC_EIO, "--cache disk: cannot write %s: %s", dir_override,
                                     *yc_last_error() ? yc_last_error() : "not writable");
            else if (!(c->dir = yc_strdup(dir_override, "cache directory")))
                st = YC_ENOMEM;
        } else {
            st = choose_dir(ds, &c->dir);
        }
        if (!st)
            yc_atomic_remove_stale(c->dir);
    }
    if (st) {
        yc_img_cache_free(c);
        return st;
    }
    *out = c;
    return YC_OK;
}

void yc_img_cache_free(yc_img_cache *c)
{
    if (!c)
        return;
    for (int i = 0; i < LOCKS; i++)
        pthread_mutex_destroy(&c->locks[i]);
    free(c->h);
    free(c->w);
    free(c->offset);
    free(c->pixels);
    free(c->entries);
    free(c->dir);
    free(c->writing);
    free(c);
}

const char *yc_img_cache_dir(const yc_img_cache *c)
{
    return c->dir;
}

/* The disk entry of sample i. */
static void entry_path(const yc_img_cache *c, size_t i, char *buf, size_t len)
{
    snprintf(buf, len, "%s/%016llx-%d%c.yci", c->dir,
             (unsigned long long)path_hash(c->ds->samples[i].image), c->imgsz,
             c->augment ? 'l' : 'a');
}

static void put_u32(uint8_t *p, uint32_t v)
{
    memcpy(p, &v, 4);
}

static void put_u64(uint8_t *p, uint64_t v)
{
    memcpy(p, &v, 8);
}

static uint64_t get_u64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* The header of sample i's disk entry for an image of fingerprint fp. */
static void make_header(const yc_img_cache *c, size_t i, uint64_t fp, uint64_t sum, uint8_t *hd)
{
    const yc_sample *s = &c->ds->samples[i];
    memcpy(hd, MAGIC, 8);
    put_u64(hd + 8, fp);
    put_u32(hd + 16, (uint32_t)s->h);
    put_u32(hd + 20, (uint32_t)s->w);
    put_u32(hd + 24, (uint32_t)c->h[i]);
    put_u32(hd + 28, (uint32_t)c->w[i]);
    put_u32(hd + 32, (uint32_t)c->imgsz);
    put_u32(hd + 36, c->augment ? 1u : 0u);
    put_u64(hd + 40, sum);
}

/* Reads sample i's disk entry into out when it exists and checks out against fp. */
static int disk_get(yc_img_cache *c, size_t i, uint64_t fp, yc_image *out, bool *hit)
{
    char path[PATH_MAX];
    uint8_t hd[HEADER_BYTES], want[HEADER_BYTES];
    entry_path(c, i, path, sizeof path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return YC_OK;
    size_t n = 3 * (size_t)c->h[i] * (size_t)c->w[i];
    int st = YC_OK;
    make_header(c, i, fp, 0, want);
    if (pread(fd, hd, HEADER_BYTES, 0) == HEADER_BYTES && !memcmp(hd, want, 40)) {
        if (!(st = yc_image_reserve(out, c->h[i], c->w[i])) &&
            pread(fd, out->data, n, HEADER_BYTES) == (ssize_t)n &&
            checksum(out->data, n) == get_u64(hd + 40))
            *hit = true;
    }
    close(fd);
    return st;
}

int yc_img_cache_get(yc_img_cache *c, size_t i, uint64_t fp, yc_image *out, yc_load_info *info,
                     bool *hit)
{
    *hit = false;
    if (i >= c->ds->n || fp == 0)
        return YC_OK;
    int st = YC_OK;
    if (c->kind == YC_CACHE_RAM) {
        pthread_mutex_t *mu = &c->locks[i % LOCKS];
        pthread_mutex_lock(mu);
        if (c->entries[i].fp == fp &&
            !(st = yc_image_reserve(out, c->h[i], c->w[i]))) {
            memcpy(out->data, c->pixels + c->offset[i], 3 * (size_t)c->h[i] * (size_t)c->w[i]);
            *hit = true;
        }
        pthread_mutex_unlock(mu);
    } else {
        st = disk_get(c, i, fp, out, hit);
    }
    if (*hit) {
        const yc_sample *s = &c->ds->samples[i];
        *info = (yc_load_info){s->h, s->w, c->h[i], c->w[i]};
        atomic_fetch_add(&c->hits, 1);
    }
    return st;
}

/* Writes sample i's disk entry (temporary name, renamed; no fsync: a torn file fails its
 * checksum and is written again). */
static int disk_put(yc_img_cache *c, size_t i, uint64_t fp, const yc_image *img)
{
    char path[PATH_MAX], tmp[PATH_MAX + 32];
    uint8_t hd[HEADER_BYTES];
    size_t n = 3 * (size_t)img->h * (size_t)img->w;
    entry_path(c, i, path, sizeof path);
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    make_header(c, i, fp, checksum(img->data, n), hd);
    FILE *f = fopen(tmp, "wb");
    if (!f)
        return yc_error_status(YC_EIO, "cannot create %s: %s", tmp, strerror(errno));
    bool ok = fwrite(hd, 1, HEADER_BYTES, f) == HEADER_BYTES && fwrite(img->data, 1, n, f) == n;
    int e = errno;
    if (fclose(f) != 0 && ok) {
        ok = false;
        e = errno;
    }
    if (!ok || rename(tmp, path) != 0) {
        if (ok)
            e = errno;
        unlink(tmp);
        return yc_error_status(YC_EIO, "cannot write %s: %s", path, strerror(e));
    }
    return YC_OK;
}

void yc_img_cache_put(yc_img_cache *c, size_t i, uint64_t fp, const yc_image *img,
                      const yc_load_info *info)
{
    if (i >= c->ds->n || fp == 0)
        return;
    const yc_sample *s = &c->ds->samples[i];
    if (info->h0 != s->h || info->w0 != s->w || img->h != c->h[i] || img->w != c->w[i])
        return;
    size_t n = 3 * (size_t)img->h * (size_t)img->w;
    if (c->kind == YC_CACHE_RAM) {
        pthread_mutex_t *mu = &c->locks[i % LOCKS];
        pthread_mutex_lock(mu);
        memcpy(c->pixels + c->offset[i], img->data, n);
        c->entries[i].fp = fp;
        pthread_mutex_unlock(mu);
        atomic_fetch_add(&c->stores, 1);
        return;
    }
    if (atomic_load(&c->write_failed) || atomic_exchange(&c->writing[i], 1))
        return;
    if (disk_put(c, i, fp, img) == YC_OK) {
        atomic_fetch_add(&c->stores, 1);
        atomic_fetch_add(&c->writes, 1);
    } else if (!atomic_exchange(&c->write_failed, true)) {
        yc_warn("--cache disk: %s; images are decoded from their files from now on",
                yc_last_error());
    }
    atomic_store(&c->writing[i], 0);
}

yc_img_cache_stats yc_img_cache_get_stats(const yc_img_cache *c)
{
    return (yc_img_cache_stats){atomic_load(&c->hits), atomic_load(&c->stores),
                                atomic_load(&c->writes)};
}
