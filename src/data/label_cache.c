/* The scan cache (dataset.h, yc_dataset_options.no_cache): the scan records of a dataset saved
 * next to its labels, so that a second load verifies only the images whose fingerprint (size,
 * times and inode of the image and its label file) changed.  The file format is below; a cache
 * that is unreadable, from another version or fails its checksum is reported and ignored. */
#include "dataset_internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "log.h"
#include "util.h"

/* Cache format: magic and version (bump the version whenever the scan's results change). */
#define CACHE_MAGIC "YOLOCLDS"
#define CACHE_VERSION 2u

static uint64_t fnv1a(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

uint64_t yc_ds_stat_fingerprint(uint64_t h, const char *path)
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

/* ------------------------------------------------------------------------------------------------
 * Cache file: little-endian, FNV-1a checksum at the end.
 *   magic[8] u32 version u32 0 u64 n_records
 *   per record (paths strictly increasing):
 *     str path, u64 fingerprint, u32 status, u32 w, u32 h, u32 n_boxes,
 *     n_boxes x (i32 class, f32 x, f32 y, f32 w, f32 h),
 *     u32 polygons (1: a segment label file, 0: boxes), with polygons n_boxes x (u32 n_points,
 *     n_points x (f32 x, f32 y)),
 *     str reason, str warnings
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
        uint32_t has_poly = cr_u32(r);
        const unsigned char *polys_at = r->p;
        uint64_t npts = 0;
        if (!r->err && (has_poly > 1 || (has_poly && nb == 0))) {
            r->what = "invalid polygon flag";
            return false;
        }
        for (uint32_t k = 0; has_poly && k < nb; k++) {
            uint32_t np = cr_u32(r);
            if (r->err)
                return false;
            if (np == 0 || (uint64_t)np * 8 > (uint64_t)(r->end - r->p)) {
                r->what = "invalid polygon";
                return false;
            }
            for (uint32_t q = 0; q < 2 * np; q++) {
                float v = cr_f32(r);
                if (!isfinite(v)) {
                    r->what = "invalid polygon point";
                    return false;
                }
            }
            npts += np;
        }
        if (r->err)
            return false;
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
        yc_ds_rec_clear(s);
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
        if (has_poly) {
            s->counts = malloc((size_t)nb * sizeof *s->counts);
            s->pts = malloc(2 * (size_t)npts * sizeof *s->pts);
            if (!s->counts || !s->pts) {
                *oom = true;
                return false;
            }
            cache_reader pr = {polys_at, r->end, false, NULL};
            size_t at = 0;
            for (uint32_t k = 0; k < nb; k++) {
                s->counts[k] = cr_u32(&pr);
                for (uint32_t q = 0; q < 2 * s->counts[k]; q++)
                    s->pts[at++] = cr_f32(&pr);
            }
            s->npts = (size_t)npts;
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
long long yc_ds_cache_load(const char *cache_path, const yc_path_list *imgs, scan_rec *recs,
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
        } else if (n_records > (uint64_t)len / 32) {
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
void yc_ds_cache_save(const char *cache_path, const yc_path_list *imgs, const scan_rec *recs,
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
        cw_u32(&w, r->counts ? 1u : 0u);
        for (size_t k = 0, at = 0; r->counts && k < r->nb; k++) {
            cw_u32(&w, r->counts[k]);
            for (uint32_t q = 0; q < 2 * r->counts[k]; q++)
                cw_f32(&w, r->pts[at++]);
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
