/* A minimal ZIP archive reader for torch checkpoints (torch.save writes an uncompressed zip).
 *
 * Supports: the end-of-central-directory record (found within the last 64 KiB + 22 bytes), ZIP64
 * end records and ZIP64 extra fields (archives and entries over 4 GiB), central directory
 * entries, local headers, and stored (method 0) entries.  Compressed entries (deflate and
 * others), encrypted entries and multi-disk archives are refused with a message naming the
 * entry.  Nothing in the file is trusted: every count, size and offset is checked against the
 * file size (with overflow checks) before it is used, entry names must be unique and free of NUL
 * bytes, and whole-entry reads verify the CRC-32.  Reads use pread, so several threads may read
 * entries of one open archive at once. */
#ifndef YC_ZIP_H
#define YC_ZIP_H

#include <stddef.h>
#include <stdint.h>

/* Most entries an archive may list (a torch checkpoint has one per storage plus three). */
#define YC_ZIP_MAX_ENTRIES 1000000

typedef struct yc_zip_entry {
    /* entry name (NUL-terminated, "archive/data.pkl") */
    char *name;
    /* compression method as stored (0 = stored; others are refused on read) */
    unsigned method;
    /* sizes in bytes: as stored in the archive and after decompression */
    uint64_t comp_size, size;
    /* CRC-32 of the uncompressed data, from the central directory */
    uint32_t crc32;
    /* offset of the entry's local header, and of its first data byte in the file */
    uint64_t header_offset, data_offset;
} yc_zip_entry;

typedef struct yc_zip yc_zip;

/* Opens an archive and reads its central directory and every local header.  On failure *out is
 * NULL and the message names the file and the problem (YC_EIO: unreadable; YC_EFORMAT: not a zip
 * or damaged; YC_EUNSUPPORTED: a multi-disk archive). */
int yc_zip_open(yc_zip **out, const char *path);
void yc_zip_close(yc_zip *z);

/* The path given to yc_zip_open. */
const char *yc_zip_path(const yc_zip *z);

/* Number of entries and the i-th one (central directory order). */
int yc_zip_count(const yc_zip *z);
const yc_zip_entry *yc_zip_get(const yc_zip *z, int i);
/* Entry by exact name, or NULL. */
const yc_zip_entry *yc_zip_find(const yc_zip *z, const char *name);

/* Reads `len` bytes of a stored entry's data starting at `offset` within the entry.  Refuses
 * compressed or encrypted entries and ranges beyond the entry's size. */
int yc_zip_read(yc_zip *z, const yc_zip_entry *e, uint64_t offset, void *dst, size_t len);
/* Reads a whole stored entry into a new heap buffer (with a NUL byte appended, not counted in
 * *size) and checks its CRC-32.  Entries larger than `max_size` bytes are refused. */
int yc_zip_read_all(yc_zip *z, const yc_zip_entry *e, size_t max_size, char **data, size_t *size);

/* CRC-32 (ISO-HDLC, as zip uses it) of `len` bytes, continuing from `crc` (0 to start). */
uint32_t yc_zip_crc32(uint32_t crc, const void *data, size_t len);

#endif
