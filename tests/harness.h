/* The test harness (tests/harness*.c): what the Check test programs build their cases from,
 * written once instead of once per program.
 *
 *  - a scratch directory per program, made in main and removed at its end, and paths inside it;
 *  - files: written whole (with their parent folders), read whole, counted in a folder, a file
 *    descriptor captured while the code under test prints;
 *  - tests/data ($YOLOCL_TEST_DATA): the tiny YOLOv5 and its weights;
 *  - synthetic images (a pixel pattern with solid rectangles) and the writer of image files in
 *    the formats the readers take (PNG, JPEG, tiled and striped TIFF);
 *  - datasets: the synthetic demo dataset of src/data/demo.c;
 *  - backends and models: the CPU backend, the tiny model on it, and the number of OpenCL
 *    devices, counted where it cannot hang a forked test.
 *
 * Two kinds of function:
 *  - those that end in a Check assertion when they fail (the writers, readers and openers: they
 *    run inside a test case, whose failure they are) say so: "fails the test";
 *  - those that a program's main() may call before or after its tests (the scratch directory,
 *    running the suite, removing a tree, counting OpenCL devices, writing the demo dataset)
 *    return a status and assert nothing, since Check's assertions are only valid inside a test.
 *
 * The functions are in tests/harness.c (core layer), harness_backend.c, harness_nn.c,
 * harness_data.c and harness_eval.c, one file per layer they need, in tests/libyctest.a: a program
 * that uses the scratch directory only does not load libvips or OpenCL with it.
 *
 * Skipping for lack of ../shared or an OpenCL device (exit 77) stays with tests/yctest.h, which
 * this header includes. */
#ifndef YC_HARNESS_H
#define YC_HARNESS_H

#include <check.h>
#include <stdbool.h>
#include <stddef.h>

#include "backend.h"
#include "dataset.h"
#include "demo.h"
#include "detect.h"
#include "image.h"
#include "model.h"
#include "yctest.h"

/* ---------------------------------------------------------------------------------------------
 * The scratch directory.
 * ------------------------------------------------------------------------------------------- */

/* Makes the program's scratch directory, $TMPDIR/yolocl-test-<name>-XXXXXX (/tmp when TMPDIR is
 * unset or empty; mkdtemp fills in the Xs, mode 0700), and makes it the current one that
 * yc_harness_tmpdir and yc_harness_tmp name.  Returns its path (static storage, valid until
 * yc_harness_tmpdir_remove), or NULL with a message on stderr when it cannot be made (a program's
 * main then returns YC_TEST_HARD_ERROR).  Forked test cases inherit it; files a case writes in it
 * stay for the cases after it.  A test case may also make one of its own (test_fault, test_cl),
 * removed by the case or its fixture. */
const char *yc_harness_tmpdir_make(const char *name);

/* The current scratch directory ("" before yc_harness_tmpdir_make). */
const char *yc_harness_tmpdir(void);

/* <scratch directory>/<fmt, ...>, formatted into the next of 8 rotating buffers of this thread
 * (shared with yc_harness_test_data: the 9th path from either reuses the first buffer). */
const char *yc_harness_tmp(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Removes the current scratch directory with everything in it (yc_harness_remove_tree) and
 * forgets it; nothing when there is none.  With YOLOCL_TEST_KEEP set in the environment it is
 * kept instead, and its path printed, to look at what the tests wrote.  Call it from main after
 * the suite has run. */
void yc_harness_tmpdir_remove(void);

/* Removes `path` and, for a directory, everything below it, depth first, without following
 * symbolic links (nftw with FTW_DEPTH | FTW_PHYS).  0 when all is gone, -1 when something could
 * not be removed (errno of the last failure) or `path` does not exist. */
int yc_harness_remove_tree(const char *path);

/* Runs every test of `s` (the runner takes it) with Check's default fork mode, or in the process
 * itself when `nofork`.  Returns the program's exit status: 0 when every test passed, 1
 * (EXIT_FAILURE) when one failed or errored. */
int yc_harness_run(Suite *s, bool nofork);

/* The main() of a program whose tests share one scratch directory: yc_harness_tmpdir_make(name),
 * yc_harness_run(s, false), yc_harness_tmpdir_remove().  Returns the exit status, or
 * YC_TEST_HARD_ERROR (99) when the directory cannot be made (the suite is then freed unrun). */
int yc_harness_main(Suite *s, const char *name);

/* ---------------------------------------------------------------------------------------------
 * Files.
 * ------------------------------------------------------------------------------------------- */

/* Makes the folder that `path` is in, and its missing parents (mkdir -p).  Fails the test when one
 * cannot be made. */
void yc_harness_make_parent(const char *path);

/* Writes the n bytes at data to `path` (created or truncated), making its missing parent
 * folders first.  Fails the test when a folder or the file cannot be written. */
void yc_harness_write(const char *path, const void *data, size_t n);

/* The same for a NUL-terminated text (without its NUL). */
void yc_harness_write_text(const char *path, const char *text);

/* The whole of `path`, NUL-terminated, on the heap (the caller frees it); its length (without the
 * NUL) in *len when len is not NULL.  Fails the test, with yc_last_error(), when it cannot be
 * read. */
char *yc_harness_read(const char *path, size_t *len);

/* How many entries of folder `dir` have names ending in `suffix` ("" counts them all, "." and
 * ".." included); -1 when the folder cannot be opened. */
int yc_harness_count_files(const char *dir, const char *suffix);

/* A file descriptor (1 or 2) sent to an anonymous temporary file (tmpfile) from
 * yc_harness_capture_start until yc_harness_capture_end, which puts it back. */
typedef struct yc_harness_capture {
    int fd;    /* the descriptor captured */
    int saved; /* a duplicate of what it was before */
    void *f;   /* the FILE * it goes to */
} yc_harness_capture;

/* Flushes stdout and stderr and sends fd into the capture.  Fails the test when the file cannot
 * be made or the descriptor redirected. */
void yc_harness_capture_start(yc_harness_capture *c, int fd);

/* Flushes stdout and stderr, restores the descriptor, closes the file and returns what was
 * written to it meanwhile (NUL-terminated, on the heap: the caller frees it).  Fails the test
 * when the descriptor cannot be restored or the file read. */
char *yc_harness_capture_end(yc_harness_capture *c);

/* ---------------------------------------------------------------------------------------------
 * tests/data.
 * ------------------------------------------------------------------------------------------- */

/* $YOLOCL_TEST_DATA/<fmt, ...> (make check sets it to the source tree's tests/data; unset or
 * empty: tests/data/..., relative to the current directory), in the rotating buffers of
 * yc_harness_tmp. */
const char *yc_harness_test_data(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* tests/data/tiny/yolov5n-tiny.yaml, the tiny YOLOv5 (yc_harness_test_data). */
#define YC_HARNESS_TINY_CFG "tiny/yolov5n-tiny.yaml"
/* Its full path, in a buffer of its own filled on the first call: valid, and the same, for the
 * whole run (for options structures that keep the pointer). */
const char *yc_harness_tiny_cfg(void);
/* tests/data/tiny/weights.safetensors, its trained weights. */
#define YC_HARNESS_TINY_WEIGHTS "tiny/weights.safetensors"

/* ---------------------------------------------------------------------------------------------
 * Images.
 * ------------------------------------------------------------------------------------------- */

/* Sizes im to h x w (yc_image_reserve) and fills it with a pattern that is different enough
 * everywhere for a misplaced window or tile to show: (x * 3 + y + 50 * which, x ^ y,
 * (x * y) >> 4), each taken modulo 256.  `which` (0, 1, ...) tells images apart.  Fails the test
 * when the pixels cannot be allocated. */
void yc_harness_pattern(yc_image *im, int h, int w, int which);

/* A solid rectangle: the pixels x1..x2, y1..y2 (inclusive) set to the colour (r, g, b). */
typedef struct yc_harness_rect {
    int x1, y1, x2, y2;
    int r, g, b;
} yc_harness_rect;

/* Paints the n rectangles into im, in order (each must lie inside the image). */
void yc_harness_paint(yc_image *im, const yc_harness_rect *rects, size_t n);

/* Writes im to `path` with libvips, making the missing parent folders: a name ending in
 * "_strip.tif" gives a striped, deflate-compressed TIFF, another ".tif" a TIFF in tiles of
 * 128 x 128, any other name what libvips writes for its suffix (yc_image_save: PNG, JPEG at
 * libvips' default quality, ...).  Fails the test when it cannot be written. */
void yc_harness_write_image(const char *path, const yc_image *im);

/* ---------------------------------------------------------------------------------------------
 * Datasets.
 * ------------------------------------------------------------------------------------------- */

/* Writes the synthetic demo dataset (yc_demo_write) into folder `dir` and its data yaml's path,
 * <dir>/YC_DEMO_YAML, into yaml (len bytes).  `opt` NULL: a small one for training tests, 16
 * training and 8 validation images of 64 to 96 px with the default seed and classes.  Returns
 * YC_OK or yc_demo_write's error (yc_last_error has the message); asserts nothing, so that a
 * main() or a child process may call it.  It runs OpenMP threads: a program whose test cases are
 * forked calls it in a child process or in a test case, never in the parent before its tests. */
int yc_harness_demo(const char *dir, const yc_demo_options *opt, char *yaml, size_t len);

/* The three-image polygon dataset tests/data/segdata (a, b, c: images and YOLOv5 segment labels,
 * 3 classes) copied into the scratch folder segval/ (yc_harness_tmp) and loaded into *ds (its
 * images folder: segval/images).  Fails the test when it cannot. */
void yc_harness_seg_dataset(yc_dataset *ds);

/* ---------------------------------------------------------------------------------------------
 * Backends and models.
 * ------------------------------------------------------------------------------------------- */

/* The CPU backend as the command line opens it (yc_device_open("cpu", threads, ...); threads
 * <= 0: the default count), into *be; the caller releases it (yc_backend_free).  Fails the test
 * when it cannot be opened. */
void yc_harness_cpu(yc_backend **be, int threads);

/* The tiny YOLOv5 of tests/data (YC_HARNESS_TINY_CFG) with nc classes (0: the yaml's), allocated
 * on `be` and initialised with seed `seed` (yc_model_init_weights).  The caller frees it
 * (yc_model_free).  Fails the test when any step fails. */
yc_model *yc_harness_tiny_model(yc_backend *be, int nc, int seed);
/* Synthetic labels for a batch of `batch` images in the loss's target layout (image, class, x, y,
 * w, h; normalised): image b gets 1 + b % 3 boxes of classes b, b + 1, ... mod 4 at places that
 * depend on b.  `targets` holds 6 floats for each of up to 3 * batch rows; returns the rows. */
int yc_harness_targets(int batch, float *targets);

/* The tiny YOLOv5 with its trained weights (YC_HARNESS_TINY_WEIGHTS) for inference
 * (yc_infer_model_load) on the CPU backend with one thread, opened into *be; the caller frees both
 * (yc_infer_model_free, yc_backend_free).  Fails the test, naming the missing file, when tests/data
 * is not found. */
void yc_harness_tiny_infer(yc_backend **be, yc_infer_model *im);

/* The number of OpenCL devices (0 in a build without OpenCL or when listing them fails), counted
 * in a child process: listing them starts the OpenCL platform (PoCL starts threads), and Check's
 * forked tests hang when their parent has done that.  For main(), before the suite runs. */
int yc_harness_opencl_devices(void);

#endif
