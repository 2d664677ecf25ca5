/* ZIP archive reading (see zip.h).  Format reference: PKWARE APPNOTE.TXT 6.3, sections 4.3
 * (structure) and 4.5.3 (the ZIP64 extended information extra field). */
#include "zip.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"

#define SIG_LOCAL 0x04034b50u
#define SIG_CENTRAL 0x02014b50u
#define SIG_EOCD 0x06054b50u
#define SIG_EOCD64 0x06064b50u
#define SIG_LOCATOR64 0x07064b50u

#define EOCD_SIZE 22
#define EOCD64_SIZE 56
#define LOCATOR64_SIZE 20
#define CENTRAL_SIZE 46
#define LOCAL_SIZE 30
#define MAX_COMMENT 65535
/* The central directory is read into memory whole; no real archive comes near this. */
#define MAX_CD_BYTES ((uint64_t)1 << 30)

/* general purpose flag bit 0: the entry is encrypted */
#define FLAG_ENCRYPTED 0x0001u

struct yc_zip {
    /* the archive's path (owned) and open descriptor */
    char *path;
    int fd;
    /* file size in bytes */
    uint64_t size;
    /* entries in central directory order */
    int n;
    yc_zip_entry *entries;
    /* general purpose flags of each entry (bit 0: encrypted) */
    unsigned *flags;
    /* the entries sorted by name, for yc_zip_find */
    const yc_zip_entry **by_name;
};

static uint16_t rd16(const unsigned char *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}

static uint32_t rd32(const unsigned char *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static uint64_t rd64(const unsigned char *p)
{
    return (uint64_t)rd32(p) | ((uint64_t)rd32(p + 4) << 32);
}

uint32_t yc_zip_crc32(uint32_t crc, const void *data, size_t len)
{
    uint32_t table[256];
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        table[i] = c;
    }
    const unsigned char *p = data;
    crc = ~crc;
    for (size_t i = 0; i < len; i++)
        crc = table[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
    return ~crc;
}

/* Reads exactly `len` bytes at `offset`; the range has been checked against the file size, so a
 * short read means the file changed or failed under us. */
static int read_at(const yc_zip *z, uint64_t offset, void *dst, size_t len)
{
    unsigned char *p = dst;
    while (len > 0) {
        if (offset > (uint64_t)INT64_MAX)
            return yc_error_status(YC_EFORMAT, "%s: offset %llu is out of range", z->path,
                                   (unsigned long long)offset);
        size_t chunk = len > ((size_t)1 << 30) ? (size_t)1 << 30 : len;
        ssize_t got = pread(z->fd, p, chunk, (off_t)offset);
        if (got < 0) {
            if (errno == EINTR)
                continue;
            return yc_error_status(YC_EIO, "%s: read failed at byte %llu: %s", z->path,
                                   (unsigned long long)offset, strerror(errno));
        }
        if (got == 0)
            return yc_error_status(YC_EIO, "%s: unexpected end of file at byte %llu (was the "
                                   "file truncated while being read?)", z->path,
                                   (unsigned long long)offset);
        p += got;
        len -= (size_t)got;
        offset += (uint64_t)got;
    }
    return YC_OK;
}

/* True when [offset, offset + len) lies within [0, limit). */
static bool in_range(uint64_t offset, uint64_t len, uint64_t limit)
{
    return offset <= limit && len <= limit - offset;
}

/* Locates the end-of-central-directory record: the last signature in the final 64 KiB + 22 bytes
 * whose comment length fits the bytes after it. */
static int find_eocd(const yc_zip *z, uint64_t *pos, unsigned char rec[EOCD_SIZE])
{
    uint64_t tail = z->size < (uint64_t)(MAX_COMMENT + EOCD_SIZE) ? z->size
                                                                 : MAX_COMMENT + EOCD_SIZE;
    unsigned char *buf = yc_malloc((size_t)tail, "zip end record");
    if (!buf)
        return YC_ENOMEM;
    int status = read_at(z, z->size - tail, buf, (size_t)tail);
    if (status) {
        free(buf);
        return status;
    }
    for (uint64_t i = tail - EOCD_SIZE + 1; i-- > 0;) {
        if (rd32(buf + i) != SIG_EOCD)
            continue;
        uint64_t comment = rd16(buf + i + 20);
        if (i + EOCD_SIZE + comment > tail)
            continue;
        memcpy(rec, buf + i, EOCD_SIZE);
        *pos = z->size - tail + i;
        free(buf);
        return YC_OK;
    }
    free(buf);
    return yc_error_status(YC_EFORMAT, "%s: not a zip archive (no end of central directory "
                           "record)", z->path);
}

/* Where the central directory is and how many entries it lists, from the end record and, when
 * present, the ZIP64 end record.  *cd_end is where the central directory must end at most. */
static int read_directory_location(yc_zip *z, uint64_t *count, uint64_t *cd_offset,
                                   uint64_t *cd_size, uint64_t *cd_end)
{
    unsigned char eocd[EOCD_SIZE] = {0};
    uint64_t eocd_pos = 0;
    int status = find_eocd(z, &eocd_pos, eocd);
    if (status)
        return status;
    unsigned disk = rd16(eocd + 4), cd_disk = rd16(eocd + 6);
    uint64_t on_disk = rd16(eocd + 8);
    *count = rd16(eocd + 10);
    *cd_size = rd32(eocd + 12);
    *cd_offset = rd32(eocd + 16);
    *cd_end = eocd_pos;

    unsigned char loc[LOCATOR64_SIZE];
    if (eocd_pos >= LOCATOR64_SIZE) {
        if ((status = read_at(z, eocd_pos - LOCATOR64_SIZE, loc, sizeof loc)))
            return status;
        if (rd32(loc) == SIG_LOCATOR64) {
            uint64_t rec_pos = rd64(loc + 8);
            uint64_t limit = eocd_pos - LOCATOR64_SIZE;
            if (rd32(loc + 4) != 0 || rd32(loc + 16) > 1)
                return yc_error_status(YC_EUNSUPPORTED, "%s: multi-disk zip archives are not "
                                       "supported", z->path);
            if (!in_range(rec_pos, EOCD64_SIZE, limit))
                return yc_error_status(YC_EFORMAT, "%s: damaged zip archive: ZIP64 end record "
                                       "offset %llu is outside the file", z->path,
                                       (unsigned long long)rec_pos);
            unsigned char rec[EOCD64_SIZE];
            if ((status = read_at(z, rec_pos, rec, sizeof rec)))
                return status;
            if (rd32(rec) != SIG_EOCD64)
                return yc_error_status(YC_EFORMAT, "%s: damaged zip archive: no ZIP64 end record "
                                       "at byte %llu", z->path, (unsigned long long)rec_pos);
            disk = rd32(rec + 16);
            cd_disk = rd32(rec + 20);
            on_disk = rd64(rec + 24);
            *count = rd64(rec + 32);
            *cd_size = rd64(rec + 40);
            *cd_offset = rd64(rec + 48);
            *cd_end = rec_pos;
        }
    }
    if (disk != 0 || cd_disk != 0 || on_disk != *count)
        return yc_error_status(YC_EUNSUPPORTED, "%s: multi-disk zip archives are not supported",
                               z->path);
    if (*count > YC_ZIP_MAX_ENTRIES)
        return yc_error_status(YC_EFORMAT, "%s: zip archive lists %llu entries (at most %d are "
                               "read)", z->path, (unsigned long long)*count, YC_ZIP_MAX_ENTRIES);
    if (!in_range(*cd_offset, *cd_size, *cd_end) || *cd_size > MAX_CD_BYTES)
        return yc_error_status(YC_EFORMAT, "%s: damaged zip archive: central directory (%llu "
                               "bytes at %llu) is outside the file", z->path,
                               (unsigned long long)*cd_size, (unsigned long long)*cd_offset);
    if (*count * CENTRAL_SIZE > *cd_size)
        return yc_error_status(YC_EFORMAT, "%s: damaged zip archive: %llu entries do not fit a "
                               "central directory of %llu bytes", z->path,
                               (unsigned long long)*count, (unsigned long long)*cd_size);
    return YC_OK;
}

/* Applies a ZIP64 extended information field to the saturated 32-bit values of an entry. */
static int apply_zip64_extra(const yc_zip *z, int index, const unsigned char *extra, size_t len,
                             bool need_size, bool need_comp, bool need_offset, yc_zip_entry *e)
{
    size_t pos = 0;
    while (pos + 4 <= len) {
        unsigned id = rd16(extra + pos), sz = rd16(extra + pos + 2);
        pos += 4;
        if (sz > len - pos)
            break;
        if (id == 0x0001) {
            size_t need = 8u * ((size_t)need_size + need_comp + need_offset), at = pos;
            if (sz < need)
                return yc_error_status(YC_EFORMAT, "%s: damaged zip archive: entry %d has a "
                                       "short ZIP64 field", z->path, index);
            if (need_size) {
                e->size = rd64(extra + at);
                at += 8;
            }
            if (need_comp) {
                e->comp_size = rd64(extra + at);
                at += 8;
            }
            if (need_offset)
                e->header_offset = rd64(extra + at);
            return YC_OK;
        }
        pos += sz;
    }
    if (need_size || need_comp || need_offset)
        return yc_error_status(YC_EFORMAT, "%s: damaged zip archive: entry %d needs a ZIP64 field "
                               "and has none", z->path, index);
    return YC_OK;
}

static int parse_central_directory(yc_zip *z, const unsigned char *cd, uint64_t cd_size)
{
    uint64_t pos = 0;
    for (int i = 0; i < z->n; i++) {
        yc_zip_entry *e = &z->entries[i];
        if (cd_size - pos < CENTRAL_SIZE || rd32(cd + pos) != SIG_CENTRAL)
            return yc_error_status(YC_EFORMAT, "%s: damaged zip archive: bad central directory "
                                   "entry %d", z->path, i);
        const unsigned char *h = cd + pos;
        size_t name_len = rd16(h + 28), extra_len = rd16(h + 30), comment_len = rd16(h + 32);
        if (cd_size - pos - CENTRAL_SIZE < (uint64_t)name_len + extra_len + comment_len)
            return yc_error_status(YC_EFORMAT, "%s: damaged zip archive: central directory entry "
                                   "%d runs past the directory", z->path, i);
        z->flags[i] = rd16(h + 8);
        e->method = rd16(h + 10);
        e->crc32 = rd32(h + 16);
        e->comp_size = rd32(h + 20);
        e->size = rd32(h + 24);
        unsigned disk = rd16(h + 34);
        e->header_offset = rd32(h + 42);
        const unsigned char *name = h + CENTRAL_SIZE;
        if (name_len == 0 || memchr(name, 0, name_len))
            return yc_error_status(YC_EFORMAT, "%s: damaged zip archive: entry %d has an empty "
                                   "name or one with a NUL byte", z->path, i);
        if (!(e->name = yc_malloc(name_len + 1, "zip entry name")))
            return YC_ENOMEM;
        memcpy(e->name, name, name_len);
        e->name[name_len] = '\0';
        int status = apply_zip64_extra(z, i, name + name_len, extra_len, e->size == 0xFFFFFFFFu,
                                       e->comp_size == 0xFFFFFFFFu,
                                       e->header_offset == 0xFFFFFFFFu, e);
        if (status)
            return status;
        if (disk != 0 && disk != 0xFFFF)
            return yc_error_status(YC_EUNSUPPORTED, "%s: multi-disk zip archives are not "
                                   "supported", z->path);
        pos += CENTRAL_SIZE + name_len + extra_len + comment_len;
    }
    return YC_OK;
}

/* Reads each entry's local header, checks that it agrees with the central directory, and finds
 * the data's offset. */
static int read_local_headers(yc_zip *z, uint64_t data_limit)
{
    for (int i = 0; i < z->n; i++) {
        yc_zip_entry *e = &z->entries[i];
        size_t name_len = strlen(e->name);
        unsigned char h[LOCAL_SIZE];
        if (!in_range(e->header_offset, LOCAL_SIZE + (uint64_t)name_len, data_limit))
            return yc_error_status(YC_EFORMAT, "%s: damaged zip archive: entry '%s' starts "
                                   "outside the file (byte %llu)", z->path, e->name,
                                   (unsigned long long)e->header_offset);
        int status = read_at(z, e->header_offset, h, sizeof h);
        if (status)
            return status;
        if (rd32(h) != SIG_LOCAL || rd16(h + 26) != name_len)
            return yc_error_status(YC_EFORMAT, "%s: damaged zip archive: no local header for "
                                   "entry '%s' at byte %llu", z->path, e->name,
                                   (unsigned long long)e->header_offset);
        char *local_name = yc_malloc(name_len, "zip entry name");
        if (!local_name)
            return YC_ENOMEM;
        status = read_at(z, e->header_offset + LOCAL_SIZE, local_name, name_len);
        bool same = !status && memcmp(local_name, e->name, name_len) == 0;
        free(local_name);
        if (status)
            return status;
        if (!same)
            return yc_error_status(YC_EFORMAT, "%s: damaged zip archive: local header of entry "
                                   "'%s' names another entry", z->path, e->name);
        e->data_offset = e->header_offset + LOCAL_SIZE + name_len + rd16(h + 28);
        if (!in_range(e->data_offset, e->comp_size, data_limit))
            return yc_error_status(YC_EFORMAT, "%s: damaged zip archive: data of entry '%s' (%llu "
                                   "bytes at byte %llu) runs past its end", z->path, e->name,
                                   (unsigned long long)e->comp_size,
                                   (unsigned long long)e->data_offset);
    }
    return YC_OK;
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp((*(const yc_zip_entry *const *)a)->name, (*(const yc_zip_entry *const *)b)->name);
}

static int cmp_offset(const void *a, const void *b)
{
    uint64_t x = (*(const yc_zip_entry *const *)a)->header_offset;
    uint64_t y = (*(const yc_zip_entry *const *)b)->header_offset;
    return x < y ? -1 : x > y;
}

/* Unique names (sorted index for lookups) and entries that do not overlap each other, so that no
 * byte of the file is served as the data of two entries. */
static int index_entries(yc_zip *z)
{
    if (z->n == 0)
        return YC_OK;
    const yc_zip_entry **order = yc_malloc((size_t)z->n * sizeof *order, "zip index");
    if (!(z->by_name = yc_malloc((size_t)z->n * sizeof *z->by_name, "zip index")) || !order) {
        free(order);
        return YC_ENOMEM;
    }
    for (int i = 0; i < z->n; i++)
        z->by_name[i] = order[i] = &z->entries[i];
    qsort(z->by_name, (size_t)z->n, sizeof *z->by_name, cmp_name);
    qsort(order, (size_t)z->n, sizeof *order, cmp_offset);
    int status = YC_OK;
    for (int i = 1; i < z->n && !status; i++) {
        const yc_zip_entry *a = z->by_name[i - 1], *b = z->by_name[i];
        if (strcmp(a->name, b->name) == 0)
            status = yc_error_status(YC_EFORMAT, "%s: damaged zip archive: entry '%s' appears "
                                     "twice", z->path, a->name);
    }
    for (int i = 1; i < z->n && !status; i++) {
        const yc_zip_entry *a = order[i - 1], *b = order[i];
        if (a->data_offset + a->comp_size > b->header_offset)
            status = yc_error_status(YC_EFORMAT, "%s: damaged zip archive: entries '%s' and '%s' "
                                     "overlap", z->path, a->name, b->name);
    }
    free(order);
    return status;
}

int yc_zip_open(yc_zip **out, const char *path)
{
    *out = NULL;
    yc_zip *z = yc_calloc(1, sizeof *z, "zip archive");
    if (!z)
        return YC_ENOMEM;
    z->fd = -1;
    int status = YC_OK;
    unsigned char *cd = NULL;
    if (!(z->path = yc_strdup(path, "zip path"))) {
        status = YC_ENOMEM;
        goto fail;
    }
    z->fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (z->fd < 0 || fstat(z->fd, &st) != 0) {
        status = yc_error_status(YC_EIO, "cannot open %s: %s", path, strerror(errno));
        goto fail;
    }
    if (!S_ISREG(st.st_mode)) {
        status = yc_error_status(YC_EIO, "%s is not a regular file", path);
        goto fail;
    }
    z->size = (uint64_t)st.st_size;
    if (z->size < EOCD_SIZE) {
        status = yc_error_status(YC_EFORMAT, "%s: not a zip archive (%llu bytes)", path,
                                 (unsigned long long)z->size);
        goto fail;
    }
    uint64_t count, cd_offset, cd_size, cd_end;
    if ((status = read_directory_location(z, &count, &cd_offset, &cd_size, &cd_end)))
        goto fail;
    z->n = (int)count;
    if (!(cd = yc_malloc(cd_size ? (size_t)cd_size : 1, "zip central directory")) ||
        !(z->entries = yc_calloc(count ? (size_t)count : 1, sizeof *z->entries, "zip entries")) ||
        !(z->flags = yc_calloc(count ? (size_t)count : 1, sizeof *z->flags, "zip entries"))) {
        status = YC_ENOMEM;
        goto fail;
    }
    if ((status = read_at(z, cd_offset, cd, (size_t)cd_size)) ||
        (status = parse_central_directory(z, cd, cd_size)) ||
        (status = read_local_headers(z, cd_offset)) || (status = index_entries(z)))
        goto fail;
    free(cd);
    *out = z;
    return YC_OK;
fail:
    free(cd);
    yc_zip_close(z);
    return status;
}

void yc_zip_close(yc_zip *z)
{
    if (!z)
        return;
    if (z->fd >= 0)
        close(z->fd);
    if (z->entries)
        for (int i = 0; i < z->n; i++)
            free(z->entries[i].name);
    free(z->entries);
    free(z->flags);
    free(z->by_name);
    free(z->path);
    free(z);
}

const char *yc_zip_path(const yc_zip *z)
{
    return z->path;
}

int yc_zip_count(const yc_zip *z)
{
    return z->n;
}

const yc_zip_entry *yc_zip_get(const yc_zip *z, int i)
{
    return i >= 0 && i < z->n ? &z->entries[i] : NULL;
}

const yc_zip_entry *yc_zip_find(const yc_zip *z, const char *name)
{
    int lo = 0, hi = z->n - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        const yc_zip_entry *e = z->by_name[mid];
        int c = strcmp(name, e->name);
        if (c == 0)
            return e;
        if (c < 0)
            hi = mid - 1;
        else
            lo = mid + 1;
    }
    return NULL;
}

/* Refuses entries whose data cannot be served as it is stored. */
static int check_readable(const yc_zip *z, const yc_zip_entry *e)
{
    if (z->flags[e - z->entries] & FLAG_ENCRYPTED)
        return yc_error_status(YC_EUNSUPPORTED, "%s: entry '%s' is encrypted", z->path, e->name);
    if (e->method == 8)
        return yc_error_status(YC_EUNSUPPORTED, "%s: entry '%s' is compressed (deflate); yolocl "
                               "reads uncompressed archives as torch.save writes them (re-save "
                               "the file with torch.save, or unzip and zip it with -0)", z->path,
                               e->name);
    if (e->method != 0)
        return yc_error_status(YC_EUNSUPPORTED, "%s: entry '%s' uses compression method %u; only "
                               "stored (uncompressed) entries are supported", z->path, e->name,
                               e->method);
    if (e->comp_size != e->size)
        return yc_error_status(YC_EFORMAT, "%s: damaged zip archive: stored entry '%s' has "
                               "different stored and real sizes (%llu, %llu)", z->path, e->name,
                               (unsigned long long)e->comp_size, (unsigned long long)e->size);
    return YC_OK;
}

int yc_zip_read(yc_zip *z, const yc_zip_entry *e, uint64_t offset, void *dst, size_t len)
{
    int status = check_readable(z, e);
    if (status)
        return status;
    if (!in_range(offset, len, e->size))
        return yc_error_status(YC_EFORMAT, "%s: read of %zu bytes at %llu is outside entry '%s' "
                               "(%llu bytes)", z->path, len, (unsigned long long)offset, e->name,
                               (unsigned long long)e->size);
    return read_at(z, e->data_offset + offset, dst, len);
}

int yc_zip_read_all(yc_zip *z, const yc_zip_entry *e, size_t max_size, char **data, size_t *size)
{
    *data = NULL;
    *size = 0;
    int status = check_readable(z, e);
    if (status)
        return status;
    if (e->size > max_size || e->size >= SIZE_MAX)
        return yc_error_status(YC_EFORMAT, "%s: entry '%s' is %llu bytes (at most %zu expected)",
                               z->path, e->name, (unsigned long long)e->size, max_size);
    char *buf = yc_malloc((size_t)e->size + 1, "zip entry");
    if (!buf)
        return YC_ENOMEM;
    if ((status = read_at(z, e->data_offset, buf, (size_t)e->size))) {
        free(buf);
        return status;
    }
    if (yc_zip_crc32(0, buf, (size_t)e->size) != e->crc32) {
        free(buf);
        return yc_error_status(YC_EFORMAT, "%s: entry '%s' is damaged (CRC-32 mismatch)", z->path,
                               e->name);
    }
    buf[e->size] = '\0';
    *data = buf;
    *size = (size_t)e->size;
    return YC_OK;
}
