/* Fuzz target: image files through libvips as yolocl opens them (the input is the file):
 *   - the dataset scan (yc_dataset_load on a directory holding this one image and a label file:
 *     src/data/labels.c's signature sniffing, header-only loaders, EXIF orientation, size checks and
 *     the JPEG end-marker test);
 *   - a window source as detect --slice and train --tile open it (yc_slice_source_open,
 *     src/data/slice_image.c): images up to 256 x 256 decoded whole by yc_image_decode (src/data/image.c:
 *     the conversion chain to 8-bit RGB, the lenient second pass for damaged files, EXIF
 *     rotation), larger ones read through libvips regions or a band of rows; the top-left window
 *     and, for images up to 4096 rows, the bottom-right one are read (nothing of images over 16
 *     million pixels, whose reading is slow by nature).
 * Damaged files must fail with a message or decode with a warning, never crash.  libvips' own
 * decoders (libjpeg, libpng, libtiff, libwebp, ...) run here too; a crash inside one of them is
 * a libvips or codec bug, reported as such (tests/fuzz/README in run.sh). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dataset.h"
#include "fuzz.h"
#include "image.h"
#include "log.h"
#include "slice_image.h"

static char images[1200];

static bool tree(void)
{
    static int state;
    if (state)
        return state > 0;
    state = -1;
    const char *d = fuzz_dir();
    if (!d)
        return false;
    char path[1400];
    snprintf(images, sizeof images, "%s/images", d);
    snprintf(path, sizeof path, "%s/labels", d);
    if (mkdir(images, 0700) != 0 || mkdir(path, 0700) != 0) {
        perror(d);
        return false;
    }
    snprintf(path, sizeof path, "%s/labels/img.txt", d);
    FILE *f = fopen(path, "w");
    if (!f || fputs("0 0.5 0.5 0.25 0.25\n", f) < 0 || fclose(f) != 0) {
        perror(path);
        return false;
    }
    state = 1;
    return true;
}

static void scan(void)
{
    const char *entries[1] = {images};
    yc_dataset_options opt = {.nc = 1, .no_cache = true, .threads = 2, .quiet = true};
    yc_dataset ds;
    fuzz_begin();
    int st = yc_dataset_load(entries, 1, &opt, &ds);
    fuzz_check(st, "yc_dataset_load");
    if (st)
        return;
    for (size_t i = 0; i < ds.n; i++)
        if (ds.samples[i].w < 1 || ds.samples[i].h < 1)
            fuzz_fail("dataset scan kept an image without a size");
    yc_dataset_free(&ds);
}

static void windows(const char *path)
{
    yc_slice_source *s = NULL;
    fuzz_begin();
    int st = yc_slice_source_open(&s, path, 256, 64);
    fuzz_check(st, "yc_slice_source_open");
    if (st)
        return;
    int w = yc_slice_source_width(s), h = yc_slice_source_height(s);
    if (w < 1 || h < 1)
        fuzz_fail("slice source without a size");
    const yc_image *whole = yc_slice_source_image(s);
    if (whole && (whole->w != w || whole->h != h))
        fuzz_fail("decoded image size differs from the source size");
    if ((double)w * h > 16e6) {
        /* a band of a larger image costs time in proportion to its pixels whatever the file
         * holds (libvips' ASCII PPM reader takes ~30 s here for 26 million missing pixels of a
         * 24-byte file): not a finding, so not read */
        yc_slice_source_free(s);
        return;
    }
    yc_image out = YC_IMAGE_INIT;
    yc_tile_window win = {0, 0, w < 64 ? w : 64, h < 64 ? h : 64};
    fuzz_begin();
    st = yc_slice_source_read(s, win, &out);
    fuzz_check(st, "yc_slice_source_read");
    if (!st && h <= 4096) {
        win.x = w - win.w;
        win.y = h - win.h;
        fuzz_begin();
        fuzz_check(yc_slice_source_read(s, win, &out), "yc_slice_source_read");
    }
    yc_image_free(&out);
    yc_slice_source_free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_init();
    if (!tree())
        abort();
    const char *path = fuzz_write("images/img.jpg", data, size);
    if (!path)
        abort();
    scan();
    windows(path);
    return 0;
}
