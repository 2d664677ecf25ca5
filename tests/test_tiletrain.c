/* Tests of tiled training data (issue 7): src/data/tileset.c (the tile samples of a dataset, their
 * clipped labels, the view), src/data/tile_reader.c (windows read in every access mode) and the loader
 * with tiles (pixels of a sample without augmentation, reproducibility, tiles per epoch, a file
 * made corrupt after the scan).
 *
 * The fixture is a small dataset written in the test by libvips: a.png of 1500 x 900 and b.png of
 * 500 x 400 (a pixel pattern that differs at every pixel) with hand-written labels.  With tiles
 * of 640 and overlap 0.2 the stride is 640 - round(128) = 512, so a.png has x starts 0, 512, 860
 * (the last moved back to 1500 - 640) and y starts 0, 260 (900 - 640): tiles 0..5 in rows
 * (0,0) (512,0) (860,0) (0,260) (512,260) (860,260); b.png, smaller than a tile, is tile 6, the
 * whole image. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <vips/vips.h>

#include "dataset.h"
#include "hyp.h"
#include "image.h"
#include "loader.h"
#include "log.h"
#include "tile_reader.h"
#include "tileset.h"
#include "util.h"
#include "harness.h"

enum { A_W = 1500, A_H = 900, B_W = 500, B_H = 400 };

/* Writes <scratch directory>/<sub>/name: w x h pixels of yc_harness_pattern `which` (0: a, 1: b),
 * PNG or, for .tif, a tiled TIFF. */
static void write_image(const char *sub, const char *name, int which, int w, int h)
{
    yc_image im = YC_IMAGE_INIT;
    yc_harness_pattern(&im, h, w, which);
    yc_harness_write_image(yc_harness_tmp("%s/%s", sub, name), &im);
    yc_image_free(&im);
}

/* A label line from a pixel box of a w x h image. */
static void box_line(char *buf, size_t len, int cls, double x1, double y1, double x2, double y2,
                     int w, int h)
{
    snprintf(buf, len, "%d %.9f %.9f %.9f %.9f\n", cls, (x1 + x2) / 2 / w, (y1 + y2) / 2 / h,
             (x2 - x1) / w, (y2 - y1) / h);
}

/* The dataset under <scratch directory>/<sub> (images/a.<a_ext>, images/b.png, labels/...),
 * scanned. */
static void make_dataset_as(const char *sub, const char *a_ext, yc_dataset *ds)
{
    char dir[600], line[128], text[1024] = "", a_name[16];
    snprintf(dir, sizeof dir, "%s/images", sub);
    snprintf(a_name, sizeof a_name, "a.%s", a_ext);
    write_image(dir, a_name, 0, A_W, A_H);
    write_image(dir, "b.png", 1, B_W, B_H);
    snprintf(dir, sizeof dir, "%s/%s/labels", yc_harness_tmpdir(), sub);
    ck_assert_int_eq(yc_mkdirs(dir), YC_OK);
    /* a.png: box 1 (class 0) in tile (0,0), and 40 of its 200 rows in the tiles of row 260;
     * box 2 (class 1) across four tiles; box 3 (class 0) in the bottom-right corner; box 4
     * (class 1): 5 of its 65 columns in tile (0,0), under min area 0.1 */
    box_line(line, sizeof line, 0, 100, 100, 200, 300, A_W, A_H);
    strcat(text, line);
    box_line(line, sizeof line, 1, 600, 500, 700, 700, A_W, A_H);
    strcat(text, line);
    box_line(line, sizeof line, 0, 1450, 850, 1500, 900, A_W, A_H);
    strcat(text, line);
    box_line(line, sizeof line, 1, 635, 10, 700, 50, A_W, A_H);
    strcat(text, line);
    yc_harness_write_text(yc_harness_tmp("%s/labels/a.txt", sub), text);
    box_line(line, sizeof line, 0, 50, 50, 150, 100, B_W, B_H);
    yc_harness_write_text(yc_harness_tmp("%s/labels/b.txt", sub), line);
    char images[800];
    snprintf(images, sizeof images, "%s/%s/images", yc_harness_tmpdir(), sub);
    const char *entries[] = {images};
    yc_dataset_options o = {.nc = 2, .no_cache = true, .threads = 1, .quiet = true};
    ck_assert_msg(yc_dataset_load(entries, 1, &o, ds) == YC_OK, "%s", yc_last_error());
    ck_assert_uint_eq(ds->n, 2);
}

static void make_dataset(const char *sub, yc_dataset *ds)
{
    make_dataset_as(sub, "png", ds);
}

static void make_tiles(const yc_dataset *ds, yc_tileset *ts)
{
    yc_tile_options o;
    yc_tile_options_default(&o);
    o.tile = 640;
    ck_assert_msg(yc_tileset_make(ds, &o, ts) == YC_OK, "%s", yc_last_error());
}

/* Checks label row r (class, x, y, w, h normalised) against a pixel box of a w x h window. */
static void check_row(const float *v, int cls, double x1, double y1, double x2, double y2, int w,
                      int h)
{
    const double want[4] = {(x1 + x2) / 2 / w, (y1 + y2) / 2 / h, (x2 - x1) / w, (y2 - y1) / h};
    ck_assert_int_eq((int)v[0], cls);
    for (int i = 0; i < 4; i++)
        ck_assert_msg(fabs(v[1 + i] - want[i]) < 2e-6, "value %d: %.9g, expected %.9g", i,
                      v[1 + i], want[i]);
}

/* The view's boxes of tile t as label rows. */
static void view_rows(const yc_tileset *ts, size_t t, yc_labels *out)
{
    out->n = 0;
    const yc_box *b = yc_dataset_boxes(&ts->view, t);
    for (uint32_t i = 0; i < ts->view.samples[t].n_boxes; i++)
        ck_assert_int_eq(yc_labels_push(out, (float)b[i].cls, b[i].x, b[i].y, b[i].w, b[i].h),
                         YC_OK);
}

START_TEST(test_tile_list)
{
    yc_dataset ds;
    yc_tileset ts;
    make_dataset("list", &ds);
    make_tiles(&ds, &ts);
    ck_assert_int_eq(ts.stride, 512);
    ck_assert_uint_eq(ts.n, 7);
    ck_assert_uint_eq(ts.first[0], 0);
    ck_assert_uint_eq(ts.first[1], 6);
    ck_assert_uint_eq(ts.first[2], 7);
    ck_assert_uint_eq(ts.n_tiled, 1);
    static const int want[7][4] = {{0, 0, 640, 640},   {512, 0, 640, 640}, {860, 0, 640, 640},
                                   {0, 260, 640, 640}, {512, 260, 640, 640},
                                   {860, 260, 640, 640}, {0, 0, 500, 400}};
    for (int t = 0; t < 7; t++) {
        const yc_tile_window *w = &ts.tiles[t].win;
        ck_assert_uint_eq(ts.tiles[t].sample, t < 6 ? 0 : 1);
        ck_assert_msg(w->x == want[t][0] && w->y == want[t][1] && w->w == want[t][2] &&
                          w->h == want[t][3],
                      "tile %d: (%d %d %d %d)", t, w->x, w->y, w->w, w->h);
        ck_assert_int_eq(ts.view.samples[t].w, want[t][2]);
        ck_assert_int_eq(ts.view.samples[t].h, want[t][3]);
        ck_assert_str_eq(ts.view.samples[t].image, ds.samples[ts.tiles[t].sample].image);
    }
    ck_assert_uint_eq(ts.view.n, 7);
    yc_labels l = YC_LABELS_INIT, v = YC_LABELS_INIT;
    /* tile 0 (0,0): box 1 whole; box 2 clipped to (600,500)-(640,640) (5600 of 20000 px);
     * box 4 keeps 5/65 of its area < 0.1: dropped */
    ck_assert_int_eq(yc_tileset_labels(&ts, 0, ts.tiles[0].win, &l), YC_OK);
    ck_assert_int_eq(l.n, 2);
    check_row(l.v, 0, 100, 100, 200, 300, 640, 640);
    check_row(l.v + 5, 1, 600, 500, 640, 640, 640, 640);
    /* tile 1 (512,0): box 2 clipped to (600,500)-(700,640) -> (88,500)-(188,640); box 4 whole,
     * (123,10)-(188,50) */
    l.n = 0;
    ck_assert_int_eq(yc_tileset_labels(&ts, 1, ts.tiles[1].win, &l), YC_OK);
    ck_assert_int_eq(l.n, 2);
    check_row(l.v, 1, 88, 500, 188, 640, 640, 640);
    check_row(l.v + 5, 1, 123, 10, 188, 50, 640, 640);
    /* tile 2 (860,0): nothing (box 3 starts at row 850, outside rows 0..639) */
    l.n = 0;
    ck_assert_int_eq(yc_tileset_labels(&ts, 2, ts.tiles[2].win, &l), YC_OK);
    ck_assert_int_eq(l.n, 0);
    /* tile 3 (0,260): box 1 rows 260..300 (0.2 of it) -> (100,0)-(200,40); box 2 columns
     * 600..640 -> (600,240)-(640,440) */
    l.n = 0;
    ck_assert_int_eq(yc_tileset_labels(&ts, 3, ts.tiles[3].win, &l), YC_OK);
    ck_assert_int_eq(l.n, 2);
    check_row(l.v, 0, 100, 0, 200, 40, 640, 640);
    check_row(l.v + 5, 1, 600, 240, 640, 440, 640, 640);
    /* tile 5 (860,260): box 3 -> (590,590)-(640,640) */
    l.n = 0;
    ck_assert_int_eq(yc_tileset_labels(&ts, 5, ts.tiles[5].win, &l), YC_OK);
    ck_assert_int_eq(l.n, 1);
    check_row(l.v, 0, 590, 590, 640, 640, 640, 640);
    /* tile 6: b.png whole, its box unchanged */
    l.n = 0;
    ck_assert_int_eq(yc_tileset_labels(&ts, 6, ts.tiles[6].win, &l), YC_OK);
    ck_assert_int_eq(l.n, 1);
    check_row(l.v, 0, 50, 50, 150, 100, B_W, B_H);
    /* the view holds the same labels for every tile; class counts over the clipped boxes:
     * class 0 in tiles 0, 3, 5, 6 and class 1 in tiles 0, 1 (twice), 3, 4 */
    for (size_t t = 0; t < ts.n; t++) {
        l.n = 0;
        ck_assert_int_eq(yc_tileset_labels(&ts, t, ts.tiles[t].win, &l), YC_OK);
        view_rows(&ts, t, &v);
        ck_assert_int_eq(l.n, v.n);
        for (int i = 0; i < 5 * l.n; i++)
            ck_assert_float_eq(l.v[i], v.v[i]);
    }
    ck_assert_uint_eq(ts.view.class_counts[0], 4);
    ck_assert_uint_eq(ts.view.class_counts[1], 5);
    ck_assert_uint_eq(ts.view.n_empty, 1);
    /* a jittered window moves at most stride / 2 = 256 pixels and stays inside the image */
    for (int k = 0; k < 20; k++) {
        yc_tile_window w = yc_tileset_jitter(&ts, 4, k / 20.0, 1 - k / 20.0 - 1e-9);
        ck_assert(w.x >= 0 && w.y >= 0 && w.x + w.w <= A_W && w.y + w.h <= A_H);
        ck_assert(abs(w.x - 512) <= 256 && abs(w.y - 260) <= 256);
        ck_assert(w.w == 640 && w.h == 640);
    }
    yc_labels_free(&l);
    yc_labels_free(&v);
    yc_tileset_free(&ts);
    yc_dataset_free(&ds);
}
END_TEST

START_TEST(test_tile_options)
{
    yc_tile_options o;
    yc_tile_options_default(&o);
    ck_assert_int_eq(o.tile, 0);
    ck_assert_double_eq(o.overlap, 0.2);
    ck_assert_double_eq(o.min_area, 0.1);
    ck_assert_int_eq(yc_tile_options_check(&o, "t"), YC_OK);
    o.tile = 16;
    ck_assert_int_eq(yc_tile_options_check(&o, "t"), YC_EUSAGE);
    o.tile = 640;
    o.overlap = 1.0;
    ck_assert_int_eq(yc_tile_options_check(&o, "t"), YC_EUSAGE);
    o.overlap = 0.5;
    o.min_area = 1.5;
    ck_assert_int_eq(yc_tile_options_check(&o, "t"), YC_EUSAGE);
    ck_assert_ptr_nonnull(strstr(yc_last_error(), "1.5"));
}
END_TEST

/* The dataset yaml's keys tile, tile_overlap, tile_min_area: values, defaults, errors naming the
 * key and the line. */
START_TEST(test_yaml_keys)
{
    char dir[600], yaml[700];
    snprintf(dir, sizeof dir, "%s/yaml/images", yc_harness_tmpdir());
    ck_assert_int_eq(yc_mkdirs(dir), YC_OK);
    snprintf(yaml, sizeof yaml, "%s/yaml/d.yaml", yc_harness_tmpdir());
    yc_data_yaml y;
    yc_harness_write_text(yc_harness_tmp("yaml/d.yaml"),
                          "train: images\nval: images\nnames: [a]\n");
    ck_assert_msg(yc_data_yaml_load(yaml, &y) == YC_OK, "%s", yc_last_error());
    ck_assert_int_eq(y.tile, 0);
    ck_assert_double_eq(y.tile_overlap, 0.2);
    ck_assert_double_eq(y.tile_min_area, 0.1);
    yc_data_yaml_free(&y);
    yc_harness_write_text(yc_harness_tmp("yaml/d.yaml"),
                          "train: images\nval: images\nnames: [a]\ntile: 512\n"
                          "tile_overlap: 0.25\ntile_min_area: 0.3\n");
    ck_assert_msg(yc_data_yaml_load(yaml, &y) == YC_OK, "%s", yc_last_error());
    ck_assert_int_eq(y.tile, 512);
    ck_assert_double_eq(y.tile_overlap, 0.25);
    ck_assert_double_eq(y.tile_min_area, 0.3);
    yc_data_yaml_free(&y);
    yc_harness_write_text(yc_harness_tmp("yaml/d.yaml"),
                          "train: images\nval: images\nnames: [a]\ntile: null\n");
    ck_assert_int_eq(yc_data_yaml_load(yaml, &y), YC_OK);
    ck_assert_int_eq(y.tile, 0);
    yc_data_yaml_free(&y);
    yc_harness_write_text(yc_harness_tmp("yaml/d.yaml"),
                          "train: images\nval: images\nnames: [a]\ntile: 8\n");
    ck_assert_int_eq(yc_data_yaml_load(yaml, &y), YC_EFORMAT);
    ck_assert_ptr_nonnull(strstr(yc_last_error(), "tile: must be"));
    ck_assert_ptr_nonnull(strstr(yc_last_error(), "line 4"));
    yc_harness_write_text(yc_harness_tmp("yaml/d.yaml"),
                          "train: images\nval: images\nnames: [a]\ntile_overlap: 1\n");
    ck_assert_int_eq(yc_data_yaml_load(yaml, &y), YC_EFORMAT);
    ck_assert_ptr_nonnull(strstr(yc_last_error(), "tile_overlap"));
    yc_harness_write_text(yc_harness_tmp("yaml/d.yaml"),
                          "train: images\nval: images\nnames: [a]\ntile_min_area: x\n");
    ck_assert_int_eq(yc_data_yaml_load(yaml, &y), YC_EFORMAT);
    ck_assert_ptr_nonnull(strstr(yc_last_error(), "tile_min_area"));
}
END_TEST

/* The window of `path` cropped by vips_crop from the whole image. */
static void vips_window(const char *path, yc_tile_window w, yc_image *out)
{
    VipsImage *full = vips_image_new_from_file(path, NULL), *crop = NULL;
    ck_assert_msg(full != NULL, "%s: %s", path, vips_error_buffer());
    ck_assert_int_eq(vips_crop(full, &crop, w.x, w.y, w.w, w.h, NULL), 0);
    size_t len = 0;
    void *mem = vips_image_write_to_memory(crop, &len);
    ck_assert_ptr_nonnull(mem);
    ck_assert_uint_eq(len, (size_t)w.w * w.h * 3);
    ck_assert_int_eq(yc_image_reserve(out, w.h, w.w), YC_OK);
    memcpy(out->data, mem, len);
    g_free(mem);
    g_object_unref(crop);
    g_object_unref(full);
}

/* Reads the 6 windows of a.png's grid (and a few jittered ones) with a reader of decode_max and
 * compares them with vips_crop; `want` is the access mode expected. */
static void check_reader(const char *path, int decode_max, int want, size_t want_opens)
{
    yc_tile_reader *r = NULL;
    ck_assert_int_eq(yc_tile_reader_new(&r, 640, decode_max), YC_OK);
    yc_tile_window *win = NULL;
    size_t n = 0;
    ck_assert_int_eq(yc_tile_grid(A_W, A_H, 640, 0.2, &win, &n), YC_OK);
    ck_assert_uint_eq(n, 6);
    yc_image got = YC_IMAGE_INIT, exp = YC_IMAGE_INIT;
    for (size_t i = 0; i < n; i++) {
        ck_assert_msg(yc_tile_reader_read(r, path, A_W, A_H, win[i], &got) == YC_OK, "%s",
                      yc_last_error());
        ck_assert_int_eq(yc_tile_reader_access(r), want);
        vips_window(path, win[i], &exp);
        ck_assert_msg(got.w == exp.w && got.h == exp.h &&
                          !memcmp(got.data, exp.data, (size_t)got.w * got.h * 3),
                      "%s: window %zu differs from vips_crop", path, i);
    }
    /* in grid order one open serves every window */
    ck_assert_uint_eq(yc_tile_reader_get_stats(r).opens, 1);
    /* back to the top: a sequential image is opened again (a rewind), others are reused */
    yc_tile_window j = {37, 11, 640, 640};
    ck_assert_int_eq(yc_tile_reader_read(r, path, A_W, A_H, j, &got), YC_OK);
    vips_window(path, j, &exp);
    ck_assert(!memcmp(got.data, exp.data, (size_t)got.w * got.h * 3));
    ck_assert_uint_eq(yc_tile_reader_get_stats(r).opens, want_opens);
    ck_assert_uint_eq(yc_tile_reader_get_stats(r).rewinds, want_opens - 1);
    ck_assert_uint_eq(yc_tile_reader_get_stats(r).windows, 7);
    /* a size that differs from the scan's is an error naming the file */
    yc_tile_reader_close(r);
    ck_assert_int_eq(yc_tile_reader_read(r, path, A_W + 1, A_H, j, &got), YC_EFORMAT);
    ck_assert_ptr_nonnull(strstr(yc_last_error(), "changed since the scan"));
    yc_image_free(&got);
    yc_image_free(&exp);
    free(win);
    yc_tile_reader_free(r);
}

START_TEST(test_reader_modes)
{
    write_image("reader", "a.png", 0, A_W, A_H);
    write_image("reader", "a.tif", 0, A_W, A_H);
    char png[1024], tif[1024];
    snprintf(png, sizeof png, "%s/reader/a.png", yc_harness_tmpdir());
    snprintf(tif, sizeof tif, "%s/reader/a.tif", yc_harness_tmpdir());
    /* decoded whole (the training default for images up to 4096 pixels) */
    check_reader(png, YC_SLICE_DECODE_MAX, YC_SLICE_DECODED, 1);
    /* PNG larger than decode_max: one top-to-bottom band */
    check_reader(png, 0, YC_SLICE_SEQUENTIAL, 2);
    /* tiled TIFF: regions, any order */
    check_reader(tif, 0, YC_SLICE_RANDOM, 1);
    /* a missing file and a corrupt one are errors naming the file; the reader stays usable */
    yc_tile_reader *r = NULL;
    ck_assert_int_eq(yc_tile_reader_new(&r, 640, 0), YC_OK);
    yc_image got = YC_IMAGE_INIT;
    yc_tile_window w = {0, 0, 640, 640};
    char bad[1024];
    snprintf(bad, sizeof bad, "%s/reader/bad.png", yc_harness_tmpdir());
    ck_assert_int_eq(yc_tile_reader_read(r, bad, A_W, A_H, w, &got), YC_EIO);
    yc_harness_write_text(yc_harness_tmp("reader/bad.png"), "not a png at all");
    ck_assert_int_eq(yc_tile_reader_read(r, bad, A_W, A_H, w, &got), YC_EFORMAT);
    ck_assert_ptr_nonnull(strstr(yc_last_error(), "bad.png"));
    ck_assert_int_eq(yc_tile_reader_read(r, tif, A_W, A_H, w, &got), YC_OK);
    ck_assert_int_eq(yc_tile_reader_new(&(yc_tile_reader *){NULL}, 0, 0), YC_EUSAGE);
    yc_image_free(&got);
    yc_tile_reader_free(r);
}
END_TEST

/* A loader over the tiles (decode_max as yc_loader_options.tile_decode_max). */
static yc_loader *tile_loader_dm(const yc_dataset *ds, const yc_tileset *ts, const yc_hyp *hyp,
                                 bool train, int batch, int workers, uint64_t seed, int per_epoch,
                                 int decode_max)
{
    yc_loader_options o = {.ds = ds, .train = train, .hyp = hyp, .imgsz = 640, .batch = batch,
                           .rect = !train, .pad = 0.5, .stride = 32, .workers = workers,
                           .seed = seed, .tiles = ts, .tiles_per_epoch = per_epoch,
                           .tile_decode_max = decode_max};
    yc_loader *l = NULL;
    ck_assert_msg(yc_loader_new(&l, &o) == YC_OK, "%s", yc_last_error());
    return l;
}

static yc_loader *tile_loader(const yc_dataset *ds, const yc_tileset *ts, const yc_hyp *hyp,
                              bool train, int batch, int workers, uint64_t seed, int per_epoch)
{
    return tile_loader_dm(ds, ts, hyp, train, batch, workers, seed, per_epoch, 0);
}

/* All batches of one epoch, concatenated (pixels, then targets, then sample indices). */
typedef struct epoch_dump {
    uint8_t *px;
    size_t npx;
    float *tg;
    size_t ntg;
    int samples[64];
    int ns;
} epoch_dump;

static void dump_epoch(yc_loader *l, int epoch, epoch_dump *d)
{
    memset(d, 0, sizeof *d);
    ck_assert_int_eq(yc_loader_start(l, epoch, NULL, 0), YC_OK);
    for (;;) {
        const yc_batch *b = NULL;
        ck_assert_int_eq(yc_loader_next(l, &b), YC_OK);
        if (!b)
            break;
        size_t n = (size_t)b->n * 3 * b->h * b->w;
        d->px = realloc(d->px, d->npx + n);
        ck_assert_ptr_nonnull(d->px);
        memcpy(d->px + d->npx, b->images, n);
        d->npx += n;
        d->tg = realloc(d->tg, (d->ntg + (size_t)b->nt * 6 + 1) * sizeof *d->tg);
        ck_assert_ptr_nonnull(d->tg);
        memcpy(d->tg + d->ntg, b->targets, (size_t)b->nt * 6 * sizeof *d->tg);
        d->ntg += (size_t)b->nt * 6;
        for (int i = 0; i < b->n && d->ns < 64; i++)
            d->samples[d->ns++] = b->sample[i];
    }
}

static bool dumps_equal(const epoch_dump *a, const epoch_dump *b)
{
    return a->npx == b->npx && !memcmp(a->px, b->px, a->npx) && a->ntg == b->ntg &&
           !memcmp(a->tg, b->tg, a->ntg * sizeof *a->tg) && a->ns == b->ns &&
           !memcmp(a->samples, b->samples, (size_t)a->ns * sizeof *a->samples);
}

static void dump_free(epoch_dump *d)
{
    free(d->px);
    free(d->tg);
}

/* Validation samples (no augmentation): each is the vips_crop of its window, resized as
 * load_image (long side 640: a.png's windows unchanged, b.png 500x400 -> 640x512 linear) and
 * letterboxed into the rect shape without scaling up; the targets are the view's labels moved
 * into the letterbox. */
START_TEST(test_val_samples)
{
    yc_dataset ds;
    yc_tileset ts;
    make_dataset("val", &ds);
    make_tiles(&ds, &ts);
    yc_hyp hyp;
    yc_hyp_defaults(&hyp);
    yc_loader *l = tile_loader(&ds, &ts, &hyp, false, 1, 1, 0, 0);
    ck_assert_int_eq(yc_loader_nbatches(l), 7);
    ck_assert_int_eq(yc_loader_start(l, 0, NULL, 0), YC_OK);
    bool seen[7] = {false};
    yc_image crop = YC_IMAGE_INIT, sized = YC_IMAGE_INIT, boxed = YC_IMAGE_INIT;
    uint8_t *chw = NULL;
    for (;;) {
        const yc_batch *b = NULL;
        ck_assert_int_eq(yc_loader_next(l, &b), YC_OK);
        if (!b)
            break;
        ck_assert_int_eq(b->n, 1);
        int t = b->sample[0];
        ck_assert(t >= 0 && t < 7 && !seen[t]);
        seen[t] = true;
        const yc_sample *s = &ds.samples[ts.tiles[t].sample];
        vips_window(s->image, ts.tiles[t].win, &crop);
        yc_load_info li;
        ck_assert_int_eq(yc_load_resize(&crop, 640, false, &sized, &li), YC_OK);
        yc_letterbox_info lb;
        ck_assert_int_eq(yc_letterbox(&sized, &boxed, b->h, b->w, false, false, false, 32, &lb),
                         YC_OK);
        /* rect shapes: 640 x 640 -> ceil(640 / 32 + 0.5) * 32 = 672; 640 x 512 (h/w 0.8) ->
         * 544 x 672 */
        if (t < 6)
            ck_assert(b->h == 672 && b->w == 672);
        else
            ck_assert(b->h == 544 && b->w == 672 && sized.w == 640 && sized.h == 512);
        chw = realloc(chw, (size_t)3 * b->h * b->w);
        ck_assert_ptr_nonnull(chw);
        yc_image_to_chw(&boxed, chw);
        ck_assert_msg(!memcmp(chw, b->images, (size_t)3 * b->h * b->w),
                      "tile %d differs from the letterboxed vips_crop", t);
        ck_assert_int_eq(b->nt, (int)ts.view.samples[t].n_boxes);
        ck_assert_int_eq(b->info[0].w0, ts.tiles[t].win.w);
        ck_assert_int_eq(b->info[0].h0, ts.tiles[t].win.h);
        const yc_box *vb = yc_dataset_boxes(&ts.view, (size_t)t);
        for (int j = 0; j < b->nt; j++) {
            const float *r = b->targets + 6 * (size_t)j;
            double cx = (vb[j].x * sized.w + lb.pad_w) / b->w;
            ck_assert_int_eq((int)r[1], vb[j].cls);
            ck_assert_msg(fabs(r[2] - cx) < 1e-5, "tile %d box %d: x %g, expected %g", t, j,
                          r[2], cx);
        }
    }
    for (int t = 0; t < 7; t++)
        ck_assert(seen[t]);
    /* each window read once, each image opened once (b.png's tile first in rect order, then
     * a.png's) */
    yc_tile_reader_stats rs = yc_loader_tile_stats(l);
    ck_assert_uint_eq(rs.windows, 7);
    ck_assert_uint_eq(rs.opens, 2);
    yc_loader_free(l);
    /* in batches of 4 (rect order: b.png's tile, whose h/w is 0.8, then a.png's six), the
     * windows are read ahead once each, sorted by image: a.png then b.png in the first batch,
     * a.png again in the second */
    l = tile_loader(&ds, &ts, &hyp, false, 4, 1, 0, 0);
    epoch_dump d;
    dump_epoch(l, 0, &d);
    ck_assert_int_eq(d.ns, 7);
    ck_assert_int_eq(d.samples[0], 6);
    rs = yc_loader_tile_stats(l);
    ck_assert_uint_eq(rs.windows, 7);
    ck_assert_uint_eq(rs.opens, 3);
    dump_free(&d);
    free(chw);
    yc_image_free(&crop);
    yc_image_free(&sized);
    yc_image_free(&boxed);
    yc_loader_free(l);
    yc_tileset_free(&ts);
    yc_dataset_free(&ds);
}
END_TEST


/* Training samples (mosaic, jitter, the whole default augmentation) depend only on (seed, epoch,
 * position): two loaders with different thread counts give the same bytes; another epoch or
 * seed gives other bytes. */
START_TEST(test_train_reproducible)
{
    yc_dataset ds;
    yc_tileset ts;
    make_dataset("repro", &ds);
    make_tiles(&ds, &ts);
    yc_hyp hyp;
    yc_hyp_defaults(&hyp);
    yc_loader *a = tile_loader(&ds, &ts, &hyp, true, 2, 1, 5, 0);
    yc_loader *b = tile_loader(&ds, &ts, &hyp, true, 2, 2, 5, 0);
    yc_loader *c = tile_loader(&ds, &ts, &hyp, true, 2, 1, 6, 0);
    ck_assert_int_eq(yc_loader_nbatches(a), 4);
    epoch_dump da, db, dc, da1;
    dump_epoch(a, 0, &da);
    dump_epoch(b, 0, &db);
    dump_epoch(c, 0, &dc);
    dump_epoch(a, 1, &da1);
    ck_assert_int_eq(da.ns, 7);
    /* mosaic partners come from the batch: every window is read once per epoch (no mixup by
     * default; loader a ran two epochs) */
    ck_assert_double_eq(hyp.mixup, 0);
    ck_assert_uint_eq(yc_loader_tile_stats(a).windows, 14);
    ck_assert_uint_eq(yc_loader_tile_stats(b).windows, 7);
    ck_assert(dumps_equal(&da, &db));
    ck_assert(!dumps_equal(&da, &dc));
    ck_assert(!dumps_equal(&da, &da1));
    /* the same epoch again gives the same bytes */
    dump_free(&db);
    dump_epoch(a, 0, &db);
    ck_assert(dumps_equal(&da, &db));
    /* every tile once per epoch */
    int count[7] = {0};
    for (int i = 0; i < da.ns; i++)
        count[da.samples[i]]++;
    for (int t = 0; t < 7; t++)
        ck_assert_int_eq(count[t], 1);
    dump_free(&da);
    dump_free(&db);
    dump_free(&dc);
    dump_free(&da1);
    yc_loader_free(a);
    yc_loader_free(b);
    yc_loader_free(c);
    yc_tileset_free(&ts);
    yc_dataset_free(&ds);
}
END_TEST

/* The same training epoch whether a.png is decoded whole, read through a band (PNG) or through
 * regions (tiled TIFF): the loader's sorted reads, rewinds and misses give the decoded pixels. */
START_TEST(test_train_access_modes)
{
    yc_dataset ds, dt;
    yc_tileset ts, tt;
    make_dataset("modes_png", &ds);
    make_tiles(&ds, &ts);
    make_dataset_as("modes_tif", "tif", &dt);
    make_tiles(&dt, &tt);
    yc_hyp hyp;
    yc_hyp_defaults(&hyp);
    hyp.mixup = 0.5;
    epoch_dump whole, band, region;
    yc_loader *l = tile_loader_dm(&ds, &ts, &hyp, true, 3, 2, 9, 0, 0);
    dump_epoch(l, 1, &whole);
    yc_loader_free(l);
    l = tile_loader_dm(&ds, &ts, &hyp, true, 3, 2, 9, 0, -1);
    dump_epoch(l, 1, &band);
    yc_loader_free(l);
    l = tile_loader_dm(&dt, &tt, &hyp, true, 3, 2, 9, 0, -1);
    dump_epoch(l, 1, &region);
    yc_loader_free(l);
    ck_assert_int_eq(whole.ns, 7);
    ck_assert(dumps_equal(&whole, &band));
    ck_assert(dumps_equal(&whole, &region));
    dump_free(&whole);
    dump_free(&band);
    dump_free(&region);
    yc_tileset_free(&ts);
    yc_tileset_free(&tt);
    yc_dataset_free(&ds);
    yc_dataset_free(&dt);
}
END_TEST

/* --tiles-per-epoch 3: 3 distinct tiles per epoch in 2 batches, another subset in another epoch,
 * the same subset for the same seed and epoch. */
START_TEST(test_tiles_per_epoch)
{
    yc_dataset ds;
    yc_tileset ts;
    make_dataset("subset", &ds);
    make_tiles(&ds, &ts);
    yc_hyp hyp;
    yc_hyp_defaults(&hyp);
    hyp.mosaic = 0;
    yc_loader *l = tile_loader(&ds, &ts, &hyp, true, 2, 1, 3, 3);
    ck_assert_int_eq(yc_loader_nbatches(l), 2);
    int sets[6] = {0};
    for (int e = 0; e < 6; e++) {
        epoch_dump d;
        dump_epoch(l, e, &d);
        ck_assert_int_eq(d.ns, 3);
        for (int i = 0; i < 3; i++) {
            ck_assert(d.samples[i] >= 0 && d.samples[i] < 7);
            ck_assert(!(sets[e] & (1 << d.samples[i])));
            sets[e] |= 1 << d.samples[i];
        }
        dump_free(&d);
    }
    bool differ = false;
    for (int e = 1; e < 6; e++)
        differ |= sets[e] != sets[0];
    ck_assert_msg(differ, "the same 3 tiles in 6 epochs");
    epoch_dump d;
    dump_epoch(l, 2, &d);
    int again = 0;
    for (int i = 0; i < d.ns; i++)
        again |= 1 << d.samples[i];
    ck_assert_int_eq(again, sets[2]);
    dump_free(&d);
    yc_loader_free(l);
    /* tiles_per_epoch at or above the number of tiles means all of them */
    l = tile_loader(&ds, &ts, &hyp, true, 2, 1, 3, 100);
    ck_assert_int_eq(yc_loader_nbatches(l), 4);
    /* image weights do not apply to tiles */
    int idx[7] = {0};
    ck_assert_int_eq(yc_loader_start(l, 0, idx, 0), YC_EUSAGE);
    yc_loader_free(l);
    yc_tileset_free(&ts);
    yc_dataset_free(&ds);
}
END_TEST

/* An image made corrupt after the scan: its tiles are reported and skipped, the others load. */
START_TEST(test_corrupt_skipped)
{
    yc_dataset ds;
    yc_tileset ts;
    make_dataset("corrupt", &ds);
    make_tiles(&ds, &ts);
    yc_harness_write_text(yc_harness_tmp("corrupt/images/a.png"), "\x89PNG but not really");
    yc_hyp hyp;
    yc_hyp_defaults(&hyp);
    yc_loader *l = tile_loader(&ds, &ts, &hyp, false, 4, 1, 0, 0);
    epoch_dump d;
    dump_epoch(l, 0, &d);
    ck_assert_int_eq(d.ns, 1);
    ck_assert_int_eq(d.samples[0], 6);
    dump_free(&d);
    yc_loader_free(l);
    yc_tileset_free(&ts);
    yc_dataset_free(&ds);
}
END_TEST

static Suite *tiletrain_suite(void)
{
    Suite *s = suite_create("tiletrain");
    TCase *tc = tcase_create("tiles");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_tile_options);
    tcase_add_test(tc, test_yaml_keys);
    tcase_add_test(tc, test_tile_list);
    tcase_add_test(tc, test_reader_modes);
    suite_add_tcase(s, tc);
    tc = tcase_create("loader");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_val_samples);
    tcase_add_test(tc, test_train_reproducible);
    tcase_add_test(tc, test_train_access_modes);
    tcase_add_test(tc, test_tiles_per_epoch);
    tcase_add_test(tc, test_corrupt_skipped);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return yc_harness_main(tiletrain_suite(), "tiletrain");
}
