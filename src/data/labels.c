/* Labels and their verification (YOLOv5's verify_image_label): yc_labels_parse reads a YOLO
 * label file (class x y w h per line, normalised, or polygons; duplicates dropped), and verify_one checks one
 * listed image (its format sniffed, its header read through libvips, EXIF orientation applied)
 * and its label file, into a scan record (dataset_internal.h): boxes, or why it is corrupt, and
 * warnings.  Numbers are parsed in the C locale whatever the process locale is. */
#include "dataset_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <vips/vips.h>

#include "log.h"
#include "util.h"

/* Largest label file read (a bigger one is reported as corrupt rather than read); it also bounds
 * the rows of one image well below 2^32. */
#define LABEL_MAX_BYTES ((size_t)16 << 20)

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

/* ------------------------------------------------------------------------------------------------
 * Verification of one image and its labels (YOLOv5's verify_image_label)
 * ---------------------------------------------------------------------------------------------- */

void yc_ds_rec_clear(scan_rec *r)
{
    free(r->boxes);
    free(r->counts);
    free(r->pts);
    free(r->reason);
    free(r->warn);
    uint64_t fp = r->fp;
    memset(r, 0, sizeof *r);
    r->fp = fp;
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

/* Removes duplicate rows (first occurrence kept, order kept), and with polygons (counts not
 * NULL) their point counts and points along; returns how many were removed, or (size_t)-1 when
 * out of memory. */
static size_t drop_duplicates(yc_box *b, size_t n, uint32_t *counts, float *pts)
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
    size_t k = 0, src = 0, dst = 0;
    for (size_t i = 0; i < n; i++) {
        size_t np = counts ? 2 * (size_t)counts[i] : 0;
        if (!drop[i]) {
            if (counts) {
                memmove(pts + dst, pts + src, np * sizeof *pts);
                counts[k] = counts[i];
                dst += np;
            }
            b[k++] = b[i];
        }
        src += np;
    }
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

/* Reads the numbers of one line [p, eol) and appends them to *vals (as float32, like numpy),
 * *nv counting them.  Returns 1, 0 with the reason in why, -1 when out of memory. */
static int parse_line(const char *p, const char *eol, size_t line, float **vals, size_t *cap,
                      size_t *used, size_t *nv, char *why, size_t why_len)
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
        if (!grow((void **)vals, cap, *used + 1, sizeof **vals))
            return -1;
        (*vals)[(*used)++] = (float)strtod_c(buf, NULL);
        (*nv)++;
    }
}

/* One row of values -> a checked box.  In a box file: 5 columns.  In a segment file (one row has
 * more than 6 values) every row is a polygon "class x1 y1 x2 y2 ...", reduced to its extent in
 * float32 as YOLOv5's segments2boxes.  Then YOLOv5's checks on the box. */
static bool line_to_box(const float *v, size_t nv, size_t line, bool segment, yc_box *out,
                        char *why, size_t why_len)
{
    for (size_t i = 0; i < nv; i++) {
        if (!isfinite(v[i])) {
            bad_value(why, why_len, "non-finite label value", v[i], line);
            return false;
        }
    }
    float box[5];
    if (segment) {
        if ((nv - 1) % 2) {
            snprintf(why, why_len, "polygon with an odd number of coordinates (%zu) (line %zu)",
                     nv - 1, line);
            return false;
        }
        if (nv < 3) {
            snprintf(why, why_len, "polygon without points (line %zu)", line);
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

/* One non-blank row of the file: its values in the shared array and its line number. */
typedef struct row_span {
    size_t first, nv, line;
} row_span;

/* Reads all rows of a label file's text (blank lines skipped), decides box or segment file as
 * verify_image_label does, and converts the rows into *boxes and, for a segment file, *counts
 * (points per row) and *pts (x, y pairs).  Returns 1, 0 with the reason in why, or -1 when out
 * of memory. */
static int parse_labels(const char *text, size_t len, yc_box **boxes, size_t *nb,
                        uint32_t **counts, float **pts, size_t *npts, char *why, size_t why_len)
{
    size_t cap_vals = 0, used = 0, cap_rows = 0, nrows = 0, line = 0;
    float *vals = NULL;
    row_span *rows = NULL;
    int res = 1;
    bool segment = false;
    *nb = 0;
    for (const char *p = text, *end = text + len; p < end && res == 1;) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        if (!eol)
            eol = end;
        line++;
        size_t nv, first = used;
        res = parse_line(p, eol, line, &vals, &cap_vals, &used, &nv, why, why_len);
        p = eol + 1;
        if (res != 1 || nv == 0)
            continue;
        if (!grow((void **)&rows, &cap_rows, nrows + 1, sizeof *rows))
            res = -1;
        else
            rows[nrows++] = (row_span){first, nv, line};
        segment = segment || nv > 6;
    }
    if (res == 1 && nrows) {
        *boxes = malloc(nrows * sizeof **boxes);
        if (segment) {
            /* every value but the class of each row is a coordinate: used - nrows of them */
            *counts = malloc(nrows * sizeof **counts);
            *pts = malloc((used > nrows ? used - nrows : 1) * sizeof **pts);
        }
        if (!*boxes || (segment && (!*counts || !*pts)))
            res = -1;
    }
    for (size_t r = 0; r < nrows && res == 1; r++) {
        const float *v = vals + rows[r].first;
        if (!line_to_box(v, rows[r].nv, rows[r].line, segment, &(*boxes)[*nb], why, why_len)) {
            res = 0;
            break;
        }
        if (segment) {
            memcpy(*pts + 2 * *npts, v + 1, (rows[r].nv - 1) * sizeof **pts);
            (*counts)[*nb] = (uint32_t)((rows[r].nv - 1) / 2);
            *npts += (rows[r].nv - 1) / 2;
        }
        (*nb)++;
    }
    free(vals);
    free(rows);
    return res;
}

int yc_labels_parse_polygons(const char *text, size_t len, yc_box **boxes, size_t *n,
                             size_t *n_removed, uint32_t **counts, float **points,
                             size_t *n_points, char *why, size_t why_len)
{
    *boxes = NULL;
    *n = *n_removed = 0;
    uint32_t *cnt = NULL;
    float *pts = NULL;
    size_t npts = 0;
    if (counts)
        *counts = NULL;
    if (points)
        *points = NULL;
    if (n_points)
        *n_points = 0;
    if (why_len)
        why[0] = '\0';
    int res = parse_labels(text, len, boxes, n, &cnt, &pts, &npts, why, why_len);
    size_t removed = res == 1 ? drop_duplicates(*boxes, *n, cnt, pts) : 0;
    if (res != 1 || removed == (size_t)-1 || *n - removed == 0 || !counts) {
        free(cnt);
        free(pts);
        cnt = NULL;
        pts = NULL;
        npts = 0;
    }
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
    if (cnt) {
        npts = 0;
        for (size_t i = 0; i < *n; i++)
            npts += cnt[i];
        *counts = cnt;
        *points = pts;
        *n_points = npts;
    }
    return YC_OK;
}

int yc_labels_parse(const char *text, size_t len, yc_box **boxes, size_t *n, size_t *n_removed,
                    char *why, size_t why_len)
{
    return yc_labels_parse_polygons(text, len, boxes, n, n_removed, NULL, NULL, NULL, why,
                                    why_len);
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
    uint32_t *counts = NULL;
    float *pts = NULL;
    size_t nb = 0, removed = 0, npts = 0;
    int res = yc_labels_parse_polygons(text, len, &boxes, &nb, &removed, &counts, &pts, &npts, why,
                                       why_len);
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
    r->counts = counts;
    r->pts = pts;
    r->npts = npts;
    return true;
}

/* verify_image_label: the image first, then its labels; any problem makes the image corrupt. */
void yc_ds_verify_one(const char *image, const char *label, scan_rec *r, bool *oom)
{
    char why[NOTE_MAX] = "";
    yc_ds_rec_clear(r);
    bool ok = verify_image(image, r, why, sizeof why, oom) &&
              verify_labels(label, r, why, sizeof why, oom);
    if (!ok) {
        free(r->boxes);
        free(r->counts);
        free(r->pts);
        r->boxes = NULL;
        r->counts = NULL;
        r->pts = NULL;
        r->nb = 0;
        r->npts = 0;
        r->w = r->h = 0;
        r->status = REC_CORRUPT;
        r->reason = strdup(why[0] ? why : "out of memory while verifying");
        if (!r->reason)
            *oom = true;
    }
}
