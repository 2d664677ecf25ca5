/* Files, paths, time and sizes: small helpers every part of yolocl uses. */
#ifndef YC_UTIL_H
#define YC_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* Reads a whole file into a NUL-terminated heap buffer (*size excludes the NUL). */
int yc_read_file(const char *path, char **data, size_t *size);

/* A file written under a temporary name and renamed into place on commit, so a crash or a full
 * disk never leaves a torn file at `path`: readers see the old file or the complete new one. */
typedef struct yc_atomic_file {
    /* the stream to write to */
    FILE *f;
    /* temporary path (same directory as final) */
    char *tmp;
    /* the destination */
    char *final;
} yc_atomic_file;

/* Opens `path`.tmp.<pid> for writing. */
int yc_atomic_open(yc_atomic_file *af, const char *path);
/* Flushes, fsyncs, renames over the destination and fsyncs the directory.  On any failure the
 * temporary file is removed, the destination is left as it was, and an error names the step. */
int yc_atomic_commit(yc_atomic_file *af);
/* Abandons the write (removes the temporary file). */
void yc_atomic_abort(yc_atomic_file *af);
/* Convenience: the whole file in one call. */
int yc_write_file_atomic(const char *path, const void *data, size_t size);
/* Removes the temporary files (NAME.tmp.PID) that writes killed before their rename left in `dir`:
 * those whose process PID no longer exists.  Returns how many were removed (0 when dir cannot be
 * read). */
int yc_atomic_remove_stale(const char *dir);

/* "a/b" (heap); b is returned copied when it is absolute or a is empty. */
char *yc_path_join(const char *a, const char *b);
/* Directory part of a path ("." when there is none), heap. */
char *yc_path_dirname(const char *path);
/* Last component of a path, pointing into `path`. */
const char *yc_path_basename(const char *path);
bool yc_file_exists(const char *path);
bool yc_is_dir(const char *path);
/* Creates a directory and its parents (mkdir -p). */
int yc_mkdirs(const char *path);

/* Number of files in `dir` whose names end with `suffix` (0 when dir does not exist). */
int yc_count_files(const char *dir, const char *suffix);

/* Monotonic clock in seconds. */
double yc_now(void);

/* Peak resident set size of this process so far, bytes. */
size_t yc_peak_rss(void);
/* Resident set size now, bytes (0 when unknown). */
size_t yc_current_rss(void);

/* Parses "123", "4G", "512M", "64k", "1.5GiB" (binary multiples) into bytes. */
int yc_parse_size(const char *s, size_t *out);
/* Formats bytes as "1.23 GiB" into buf. */
const char *yc_format_size(size_t bytes, char *buf, size_t len);

/* Number of physical cores (falls back to online CPUs). */
int yc_physical_cores(void);

/* Round up to a multiple of `align` (a power of two or any positive value). */
static inline size_t yc_align_up(size_t x, size_t align)
{
    return (x + align - 1) / align * align;
}

#endif

/* Finds a bundled data file (e.g. "models/yolov5s.yaml") in $YOLOCL_DATA_DIR, the installed
 * package data directory, then the source tree's data/ directory.  Writes the first existing path
 * into `out`; YC_EIO with the places searched when none exists. */
int yc_data_path(const char *rel, char *out, size_t len);
