/* Tests of the dataset layer: yaml forms, image lists and label paths, the label checks on a
 * directory of deliberately broken files (made here at run time), the scan cache (creation,
 * reuse, invalidation, corruption, unwritable directories), rectangular batch shapes.
 * test_dataset_ref (this file built with YC_TEST_SHARED) scans COCO128 from ../shared and exits 77
 * without it. */
#include <check.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <vips/vips.h>

#include "dataset.h"
#include "image.h"
#include "log.h"
#include "util.h"
#include "harness.h"
#include "yctest.h"

#ifndef YC_TEST_SHARED
static void test_vips(void)
{
    ck_assert_msg(yc_vips_init() == YC_OK, "%s", yc_last_error());
}

/* A w x h image (format from the suffix) with some texture; orientation > 0 adds EXIF. */
static void make_image(const char *path, int w, int h, int orientation)
{
    test_vips();
    yc_harness_make_parent(path);
    VipsImage *noise = NULL, *img = NULL, *cast = NULL;
    ck_assert_int_eq(vips_gaussnoise(&noise, w, h, "mean", 128.0, "sigma", 40.0, NULL), 0);
    ck_assert_int_eq(vips_cast_uchar(noise, &cast, NULL), 0);
    ck_assert_int_eq(vips_copy(cast, &img, NULL), 0);
    if (orientation > 0)
        vips_image_set_int(img, VIPS_META_ORIENTATION, orientation);
    ck_assert_msg(vips_image_write_to_file(img, path, NULL) == 0, "writing %s: %s", path,
                  vips_error_buffer());
    g_object_unref(img);
    g_object_unref(cast);
    g_object_unref(noise);
}

#endif

static yc_dataset_options opts(int nc)
{
    yc_dataset_options o = {0};
    o.nc = nc;
    o.threads = 2;
    o.quiet = true;
    return o;
}

#ifndef YC_TEST_SHARED

/* Loads one directory or list. */
static int load1(const char *entry, const yc_dataset_options *o, yc_dataset *ds)
{
    const char *e[1] = {entry};
    return yc_dataset_load(e, 1, o, ds);
}

/* Index of the sample whose image ends with `suffix`, or -1. */
static long find_sample(const yc_dataset *ds, const char *suffix)
{
    for (size_t i = 0; i < ds->n; i++) {
        size_t a = strlen(ds->samples[i].image), b = strlen(suffix);
        if (a >= b && strcmp(ds->samples[i].image + a - b, suffix) == 0)
            return (long)i;
    }
    return -1;
}

/* The note of the given kind for the image ending with `suffix`, or NULL. */
static const char *find_note(const yc_dataset *ds, const char *suffix, yc_note_kind kind)
{
    for (size_t i = 0; i < ds->n_notes; i++) {
        const yc_scan_note *n = &ds->notes[i];
        size_t a = strlen(n->image), b = strlen(suffix);
        if (n->kind == kind && a >= b && strcmp(n->image + a - b, suffix) == 0)
            return n->text;
    }
    return NULL;
}

/* ------------------------------------------------------------------------------------------------
 * Dataset yaml
 * ---------------------------------------------------------------------------------------------- */

/* y/ds: images/{train,val}, labels, train.txt; yaml files next to ds. */
static void make_yaml_tree(void)
{
    make_image(yc_harness_tmp("y/ds/images/train/a.jpg"), 32, 24, 0);
    make_image(yc_harness_tmp("y/ds/images/train/b.jpg"), 32, 24, 0);
    make_image(yc_harness_tmp("y/ds/images/val/c.jpg"), 24, 32, 0);
    make_image(yc_harness_tmp("y/ds/images/extra/d.png"), 20, 20, 0);
    yc_harness_write_text(yc_harness_tmp("y/ds/labels/train/a.txt"), "0 0.5 0.5 0.2 0.2\n");
    yc_harness_write_text(yc_harness_tmp("y/ds/labels/train/b.txt"),
                          "1 0.5 0.5 0.2 0.2\n1 0.2 0.2 0.1 0.1\n");
    yc_harness_write_text(yc_harness_tmp("y/ds/labels/val/c.txt"), "1 0.5 0.5 0.5 0.5\n");
    yc_harness_write_text(yc_harness_tmp("y/ds/extra.txt"), "./images/extra/d.png\n");
}

START_TEST(yaml_names_list_and_dir)
{
    make_yaml_tree();
    yc_harness_write_text(yc_harness_tmp("y/list.yaml"),
                          "path: ds\ntrain: images/train\nval: images/val\ntest:\n"
                          "names: [cat, dog]\n");
    yc_data_yaml y;
    ck_assert_msg(yc_data_yaml_load(yc_harness_tmp("y/list.yaml"), &y) == YC_OK, "%s",
                  yc_last_error());
    ck_assert_int_eq(y.nc, 2);
    ck_assert_str_eq(y.names[0], "cat");
    ck_assert_str_eq(y.names[1], "dog");
    char *root = realpath(yc_harness_tmp("y/ds"), NULL);
    ck_assert_ptr_nonnull(root);
    ck_assert_str_eq(y.root, root);
    ck_assert_int_eq(y.n_entries[YC_SPLIT_TRAIN], 1);
    ck_assert_int_eq(y.n_entries[YC_SPLIT_VAL], 1);
    ck_assert_int_eq(y.n_entries[YC_SPLIT_TEST], 0);
    char want[1200];
    snprintf(want, sizeof want, "%s/images/train", root);
    ck_assert_str_eq(y.entries[YC_SPLIT_TRAIN][0], want);
    yc_dataset_options o = opts(1);
    yc_dataset ds;
    ck_assert_msg(yc_dataset_load_split(&y, YC_SPLIT_TRAIN, &o, &ds) == YC_OK, "%s",
                  yc_last_error());
    ck_assert_int_eq(ds.nc, 2);
    ck_assert_uint_eq(ds.n, 2);
    ck_assert_uint_eq(ds.n_boxes, 3);
    ck_assert_uint_eq(ds.class_counts[0], 1);
    ck_assert_uint_eq(ds.class_counts[1], 2);
    ck_assert_int_eq(ds.samples[0].w, 32);
    ck_assert_int_eq(ds.samples[0].h, 24);
    yc_dataset_free(&ds);
    ck_assert_int_ne(yc_dataset_load_split(&y, YC_SPLIT_TEST, &o, &ds), YC_OK);
    ck_assert_ptr_nonnull(strstr(yc_last_error(), "test: no entries"));
    yc_data_yaml_free(&y);
    free(root);
}
END_TEST

START_TEST(yaml_names_dict_txt_and_lists)
{
    make_yaml_tree();
    /* names as a mapping in any order, train as a list mixing a directory and a .txt list, val as
     * a .txt, test as a missing path (only an error when test is loaded); an absolute path key */
    char *root = realpath(yc_harness_tmp("y/ds"), NULL);
    ck_assert_ptr_nonnull(root);
    char text[2048];
    snprintf(text, sizeof text,
             "path: %s\ntrain:\n  - images/train\n  - extra.txt\nval: extra.txt\n"
             "test: images/nothing\nnames:\n  1: dog\n  0: cat\n  2: 'bird'\n",
             root);
    yc_harness_write_text(yc_harness_tmp("y/dict.yaml"), text);
    yc_data_yaml y;
    ck_assert_msg(yc_data_yaml_load(yc_harness_tmp("y/dict.yaml"), &y) == YC_OK, "%s",
                  yc_last_error());
    ck_assert_int_eq(y.nc, 3);
    ck_assert_str_eq(y.names[0], "cat");
    ck_assert_str_eq(y.names[1], "dog");
    ck_assert_str_eq(y.names[2], "bird");
    ck_assert_int_eq(y.n_entries[YC_SPLIT_TRAIN], 2);
    ck_assert_int_eq(y.n_entries[YC_SPLIT_TEST], 1);
    yc_dataset_options o = opts(1);
    yc_dataset ds;
    ck_assert_msg(yc_dataset_load_split(&y, YC_SPLIT_TRAIN, &o, &ds) == YC_OK, "%s",
                  yc_last_error());
    ck_assert_uint_eq(ds.n, 3);
    /* sorted by path: images/extra/d.png, images/train/a.jpg, images/train/b.jpg */
    ck_assert_int_ge(find_sample(&ds, "/images/extra/d.png"), 0);
    ck_assert_int_eq(find_sample(&ds, "/images/extra/d.png"), 0);
    ck_assert_int_eq(find_sample(&ds, "/images/train/b.jpg"), 2);
    ck_assert_uint_eq(ds.n_missing, 1);
    /* the last entry is a .txt list: the cache sits next to it */
    char want[1200];
    snprintf(want, sizeof want, "%s/extra.yolocl.cache", root);
    ck_assert_str_eq(ds.cache_path, want);
    yc_dataset_free(&ds);
    ck_assert_msg(yc_dataset_load_split(&y, YC_SPLIT_VAL, &o, &ds) == YC_OK, "%s",
                  yc_last_error());
    ck_assert_uint_eq(ds.n, 1);
    ck_assert_uint_eq(yc_dataset_backgrounds(&ds), 1);
    yc_dataset_free(&ds);
    ck_assert_int_ne(yc_dataset_load_split(&y, YC_SPLIT_TEST, &o, &ds), YC_OK);
    ck_assert_msg(strstr(yc_last_error(), "dict.yaml: test: ") &&
                      strstr(yc_last_error(), "images/nothing does not exist"),
                  "%s", yc_last_error());
    yc_data_yaml_free(&y);
    free(root);
}
END_TEST

START_TEST(yaml_relative_and_retry)
{
    make_yaml_tree();
    /* no path: entries are relative to the yaml's directory; ../ds/... does not exist from y/ so
     * it is retried as ds/... (YOLOv5's rule) */
    yc_harness_write_text(yc_harness_tmp("y/retry.yaml"),
                          "train: ../ds/images/train\nval: ds/images/val\n"
                          "names: {0: a, 1: b}\n");
    yc_data_yaml y;
    ck_assert_msg(yc_data_yaml_load(yc_harness_tmp("y/retry.yaml"), &y) == YC_OK, "%s",
                  yc_last_error());
    char *want = realpath(yc_harness_tmp("y/ds/images/train"), NULL);
    ck_assert_ptr_nonnull(want);
    ck_assert_str_eq(y.entries[YC_SPLIT_TRAIN][0], want);
    free(want);
    yc_data_yaml_free(&y);

    /* a relative path: key is resolved against the yaml's directory, not the CWD */
    yc_harness_write_text(yc_harness_tmp("y/sub/rel.yaml"),
                          "path: ../ds\ntrain: images/train\nval: images/val\n"
                          "names: [a, b]\n");
    char *cwd = getcwd(NULL, 0);
    ck_assert_int_eq(chdir("/"), 0);
    ck_assert_msg(yc_data_yaml_load(yc_harness_tmp("y/sub/rel.yaml"), &y) == YC_OK, "%s",
                  yc_last_error());
    ck_assert_int_eq(chdir(cwd), 0);
    free(cwd);
    char *root = realpath(yc_harness_tmp("y/ds"), NULL);
    ck_assert_str_eq(y.root, root);
    free(root);
    yc_data_yaml_free(&y);
}
END_TEST

/* Loads `text` as a yaml and expects failure with every string in `want` in the message. */
static void expect_yaml_error(const char *name, const char *text, const char *want1,
                              const char *want2)
{
    yc_harness_write_text(yc_harness_tmp("y/%s", name), text);
    yc_data_yaml y;
    ck_assert_msg(yc_data_yaml_load(yc_harness_tmp("y/%s", name), &y) != YC_OK, "%s loaded", name);
    const char *e = yc_last_error();
    ck_assert_msg(strstr(e, name) != NULL, "message does not name the file: %s", e);
    ck_assert_msg(strstr(e, want1) != NULL, "expected '%s' in: %s", want1, e);
    if (want2)
        ck_assert_msg(strstr(e, want2) != NULL, "expected '%s' in: %s", want2, e);
}

START_TEST(yaml_errors)
{
    make_yaml_tree();
    expect_yaml_error("nonames.yaml", "path: ds\ntrain: images/train\nval: images/val\n",
                      "names: missing", NULL);
    expect_yaml_error("notrain.yaml", "path: ds\nval: images/val\nnames: [a]\n",
                      "train: missing", NULL);
    expect_yaml_error("emptyval.yaml", "path: ds\ntrain: images/train\nval:\nnames: [a]\n",
                      "val: is empty", NULL);
    expect_yaml_error("noval.yaml", "path: ds\ntrain: images/train\nval: images/nope\n"
                                    "names: [a]\ndownload: https://example.com/x.zip\n",
                      "val: ", "images/nope does not exist (yolocl does not run the download");
    expect_yaml_error("badlist.yaml", "path: ds\ntrain: [images/train, images/gone]\n"
                                      "val: images/val\nnames: [a]\n",
                      "train[1]: ", "images/gone does not exist");
    expect_yaml_error("badkey.yaml", "path: ds\ntrain: images/train\nval: images/val\n"
                                     "names: {0: a, 2: b}\n",
                      "names: key '2'", "0 to 1");
    expect_yaml_error("dupkey.yaml", "path: ds\ntrain: images/train\nval: images/val\n"
                                     "names: {0: a, 0: b}\n",
                      "duplicate key '0'", NULL);
    expect_yaml_error("emptynames.yaml", "path: ds\ntrain: images/train\nval: images/val\n"
                                         "names: []\n",
                      "names: is empty", NULL);
    expect_yaml_error("nullname.yaml", "path: ds\ntrain: images/train\nval: images/val\n"
                                       "names: [a, ~]\n",
                      "names: class 1", NULL);
    expect_yaml_error("scalar.yaml", "just text\n", "must be a mapping", NULL);
    expect_yaml_error("trainmap.yaml", "path: ds\ntrain: {a: 1}\nval: images/val\nnames: [a]\n",
                      "train: must be a path or a list", NULL);
}
END_TEST

START_TEST(yaml_nc_mismatch_and_download)
{
    make_yaml_tree();
    yc_harness_write_text(yc_harness_tmp("y/nc.yaml"),
                          "path: ds\ntrain: images/train\nval: images/val\nnc: 3\n"
                          "names: [a, b]\ndownload: https://example.com/x.zip\n");
    yc_harness_capture err, out;
    yc_harness_capture_start(&err, 2);
    yc_harness_capture_start(&out, 1);
    yc_data_yaml y;
    int st = yc_data_yaml_load(yc_harness_tmp("y/nc.yaml"), &y);
    char *o = yc_harness_capture_end(&out);
    char *e = yc_harness_capture_end(&err);
    ck_assert_msg(st == YC_OK, "%s", yc_last_error());
    ck_assert_int_eq(y.nc, 2);
    ck_assert_msg(strstr(e, "nc.yaml: nc: 3 differs from the 2 names; using nc = 2") != NULL,
                  "%s", e);
    ck_assert_msg(strstr(o, "nc.yaml: download: ignored") != NULL, "%s", o);
    free(o);
    free(e);
    yc_data_yaml_free(&y);

    /* a matching nc is silent */
    yc_harness_write_text(yc_harness_tmp("y/nc2.yaml"),
                          "path: ds\ntrain: images/train\nval: images/val\nnc: 2\n"
                          "names: [a, b]\n");
    yc_harness_capture_start(&err, 2);
    st = yc_data_yaml_load(yc_harness_tmp("y/nc2.yaml"), &y);
    e = yc_harness_capture_end(&err);
    ck_assert_int_eq(st, YC_OK);
    ck_assert_str_eq(e, "");
    free(e);
    yc_data_yaml_free(&y);
}
END_TEST

/* ------------------------------------------------------------------------------------------------
 * Image lists and label paths
 * ---------------------------------------------------------------------------------------------- */

START_TEST(label_paths)
{
    struct {
        const char *img, *lbl;
    } cases[] = {
        {"/d/images/train/a.jpg", "/d/labels/train/a.txt"},
        {"/d/images/x/images/a.b.PNG", "/d/images/x/labels/a.b.txt"},
        {"/d/imgs/a.jpeg", "/d/imgs/a.txt"},
        {"images/a.jpg", "images/a.txt"},
        {"/x.y/images/a", "/x.y/labels/a.txt"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *l = yc_label_path(cases[i].img);
        ck_assert_ptr_nonnull(l);
        ck_assert_str_eq(l, cases[i].lbl);
        free(l);
    }
    ck_assert(yc_is_image_path("a/b.JPG"));
    ck_assert(yc_is_image_path("b.tiff"));
    ck_assert(yc_is_image_path("b.pfm"));
    ck_assert(yc_is_image_path("b.Mpo"));
    ck_assert(!yc_is_image_path("b.gif"));
    ck_assert(!yc_is_image_path("b.txt"));
    ck_assert(!yc_is_image_path("jpg"));
    ck_assert(!yc_is_image_path("a.jpg/b"));
}
END_TEST

START_TEST(image_lists)
{
    yc_harness_write_text(yc_harness_tmp("l/imgs/b.jpg"), "x");
    yc_harness_write_text(yc_harness_tmp("l/imgs/A.JPG"), "x");
    yc_harness_write_text(yc_harness_tmp("l/imgs/sub/deep/c.png"), "x");
    yc_harness_write_text(yc_harness_tmp("l/imgs/.hidden.jpg"), "x");
    yc_harness_write_text(yc_harness_tmp("l/imgs/.cache/e.jpg"), "x");
    yc_harness_write_text(yc_harness_tmp("l/imgs/notes.txt"), "x");
    yc_harness_write_text(yc_harness_tmp("l/imgs/anim.gif"), "x");
    ck_assert_int_eq(symlink(".", yc_harness_tmp("l/imgs/sub/loop")), 0);
    yc_harness_write_text(yc_harness_tmp("l/other/z.webp"), "x");
    char list[2048];
    snprintf(list, sizeof list,
             "./imgs/b.jpg\n  imgs/sub/deep/c.png  \r\n\n%s\n./imgs/readme.md\n"
             "imgs/missing.jpg\n",
             yc_harness_tmp("l/other/z.webp"));
    yc_harness_write_text(yc_harness_tmp("l/list.txt"), list);
    const char *entries[] = {yc_harness_tmp("l/imgs"), yc_harness_tmp("l/list.txt")};
    yc_path_list pl;
    ck_assert_msg(yc_image_list(entries, 2, &pl) == YC_OK, "%s", yc_last_error());
    const char *want[] = {"l/imgs/A.JPG", "l/imgs/b.jpg", "l/imgs/missing.jpg",
                          "l/imgs/sub/deep/c.png", "l/other/z.webp"};
    ck_assert_uint_eq(pl.n, 5);
    for (size_t i = 0; i < 5; i++)
        ck_assert_str_eq(pl.paths[i], yc_harness_tmp("%s", want[i]));
    yc_path_list_free(&pl);

    /* a relative line that exists only from the current directory is taken from there */
    yc_harness_write_text(yc_harness_tmp("l/cwdlist/list.txt"), "other/z.webp\n");
    char *cwd = getcwd(NULL, 0);
    ck_assert_int_eq(chdir(yc_harness_tmp("l")), 0);
    const char *e2[] = {yc_harness_tmp("l/cwdlist/list.txt")};
    ck_assert_int_eq(yc_image_list(e2, 1, &pl), YC_OK);
    ck_assert_uint_eq(pl.n, 1);
    char *want2 = realpath(yc_harness_tmp("l/other/z.webp"), NULL);
    char *got2 = realpath(pl.paths[0], NULL);
    ck_assert_ptr_nonnull(got2);
    ck_assert_str_eq(got2, want2);
    free(want2);
    free(got2);
    ck_assert_int_eq(chdir(cwd), 0);
    free(cwd);
    yc_path_list_free(&pl);

    const char *bad[] = {yc_harness_tmp("l/nowhere")};
    ck_assert_int_ne(yc_image_list(bad, 1, &pl), YC_OK);
    ck_assert_ptr_nonnull(strstr(yc_last_error(), "l/nowhere does not exist"));
}
END_TEST

/* ------------------------------------------------------------------------------------------------
 * Broken files
 * ---------------------------------------------------------------------------------------------- */

static void make_broken_tree(void)
{
    /* image stem, suffix, size, EXIF orientation, label text (NULL: no label file) */
    static const struct {
        const char *stem, *ext;
        int w, h, orientation;
        const char *label;
    } files[] = {
        {"good", "jpg", 40, 30, 0, "2 0.5 0.5 0.25 0.125\n"},
        {"small", "png", 5, 5, 0, "0 0.5 0.5 0.2 0.2\n"},
        {"trunc", "jpg", 64, 48, 0, "0 0.5 0.5 0.2 0.2\n"},
        {"cols4", "jpg", 20, 20, 0, "0 0.5 0.5 0.2 0.2\n0 0.5 0.5 0.2\n"},
        {"neg", "jpg", 20, 20, 0, "0 -0.1 0.5 0.2 0.2\n"},
        {"over", "jpg", 20, 20, 0, "0 0.5 1.2 0.2 0.2\n"},
        {"nan", "jpg", 20, 20, 0, "0 0.5 0.5 nan 0.2\n"},
        {"cls", "jpg", 20, 20, 0, "0 0.5 0.5 0.2 0.2\n7 0.5 0.5 0.2 0.2\n"},
        {"dup", "jpg", 20, 20, 0,
         "1 0.5 0.5 0.2 0.2\n0 0.1 0.1 0.1 0.1\n1 0.5 0.5 0.2 0.2\n1 0.50 0.5 0.2 0.2\n"},
        {"poly", "jpg", 20, 20, 0, "1 0.1 0.2 0.5 0.2 0.5 0.6 0.1 0.6\n0 0.5 0.5 0.2 0.2\n"},
        {"oddpoly", "jpg", 20, 20, 0, "1 0.1 0.2 0.5 0.2 0.5 0.6 0.1\n"},
        {"empty", "jpg", 20, 20, 0, "\n  \n"},
        {"missing", "jpg", 20, 20, 0, NULL},
        {"word", "jpg", 20, 20, 0, "0 0.5 0.5 0.2 abc\n"},
        {"frac", "jpg", 20, 20, 0, "1.5 0.5 0.5 0.2 0.2\n"},
        {"rot", "jpg", 40, 20, 6, "0 0.5 0.5 0.2 0.2\r\n"},
    };
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        make_image(yc_harness_tmp("b/images/%s.%s", files[i].stem, files[i].ext), files[i].w,
                   files[i].h, files[i].orientation);
        if (files[i].label)
            yc_harness_write_text(yc_harness_tmp("b/labels/%s.txt", files[i].stem), files[i].label);
    }
    /* not an image at all, and a JPEG signature followed by garbage */
    yc_harness_write_text(yc_harness_tmp("b/images/garbage.jpg"), "this is not an image at all\n");
    yc_harness_write_text(yc_harness_tmp("b/labels/garbage.txt"), "0 0.5 0.5 0.2 0.2\n");
    yc_harness_write(yc_harness_tmp("b/images/badjpeg.jpg"),
                     "\xff\xd8\xff\xe0\x00\x10JFIF\x00garbage", 18);
    /* a JPEG cut short: header intact, end marker missing */
    char *data;
    size_t len;
    ck_assert_int_eq(yc_read_file(yc_harness_tmp("b/images/trunc.jpg"), &data, &len), YC_OK);
    ck_assert_uint_gt(len, 400);
    yc_harness_write(yc_harness_tmp("b/images/trunc.jpg"), data, len - 100);
    free(data);
}

START_TEST(broken_files)
{
    make_broken_tree();
    yc_dataset_options o = opts(3);
    o.quiet = false;
    o.prefix = "train: ";
    yc_dataset ds;
    yc_harness_capture out, err;
    yc_harness_capture_start(&out, 1);
    yc_harness_capture_start(&err, 2);
    int st = load1(yc_harness_tmp("b/images"), &o, &ds);
    char *e = yc_harness_capture_end(&err);
    char *so = yc_harness_capture_end(&out);
    ck_assert_msg(st == YC_OK, "%s", yc_last_error());

    /* corrupt: excluded, with the exact reason */
    struct {
        const char *file, *reason;
    } corrupt[] = {
        {"small.png", "image size 5x5 <10 pixels"},
        {"garbage.jpg", "unknown image format (not bmp, dng, jpeg, mpo, png, tiff, webp or pfm)"},
        {"cols4.jpg", "labels require 5 columns, 4 columns detected (line 2)"},
        {"neg.jpg", "negative label value -0.1 (line 1)"},
        {"over.jpg", "non-normalized or out of bounds coordinate 1.2 (line 1)"},
        {"nan.jpg", "non-finite label value nan (line 1)"},
        {"cls.jpg", "class 7 >= nc = 3 (classes are 0 to 2)"},
        {"oddpoly.jpg", "polygon with an odd number of coordinates (7) (line 1)"},
        {"word.jpg", "invalid label value 'abc' (line 1)"},
        {"frac.jpg", "class 1.5 is not a valid class id (line 1)"},
    };
    for (size_t i = 0; i < sizeof corrupt / sizeof *corrupt; i++) {
        ck_assert_msg(find_sample(&ds, corrupt[i].file) < 0, "%s kept", corrupt[i].file);
        const char *r = find_note(&ds, corrupt[i].file, YC_NOTE_CORRUPT);
        ck_assert_msg(r != NULL, "no reason for %s", corrupt[i].file);
        ck_assert_str_eq(r, corrupt[i].reason);
        char line[1200];
        snprintf(line, sizeof line,
                 "yolocl: warning: train: %s: ignoring corrupt image/label: %s\n",
                 yc_harness_tmp("b/images/%s", corrupt[i].file), corrupt[i].reason);
        ck_assert_msg(strstr(e, line) != NULL, "missing line %s in:\n%s", line, e);
    }
    const char *bj = find_note(&ds, "badjpeg.jpg", YC_NOTE_CORRUPT);
    ck_assert_ptr_nonnull(bj);
    ck_assert_msg(strncmp(bj, "cannot read the image: ", 23) == 0 && strlen(bj) > 23, "%s", bj);
    ck_assert_uint_eq(ds.n_corrupt, 11);
    ck_assert_uint_eq(ds.n_listed, 18);
    ck_assert_uint_eq(ds.n, 7);

    /* kept */
    long i = find_sample(&ds, "good.jpg");
    ck_assert_int_ge(i, 0);
    ck_assert_int_eq(ds.samples[i].w, 40);
    ck_assert_int_eq(ds.samples[i].h, 30);
    ck_assert_uint_eq(ds.samples[i].n_boxes, 1);
    const yc_box *b = yc_dataset_boxes(&ds, (size_t)i);
    ck_assert_int_eq(b[0].cls, 2);
    ck_assert(b[0].x == 0.5f && b[0].y == 0.5f && b[0].w == 0.25f && b[0].h == 0.125f);
    ck_assert_str_eq(ds.samples[i].label, yc_harness_tmp("b/labels/good.txt"));

    i = find_sample(&ds, "trunc.jpg");
    ck_assert_int_ge(i, 0);
    ck_assert_uint_eq(ds.samples[i].n_boxes, 1);
    ck_assert_str_eq(find_note(&ds, "trunc.jpg", YC_NOTE_WARNING),
                     "corrupt JPEG (no end marker): it will be decoded as far as possible");

    i = find_sample(&ds, "dup.jpg");
    ck_assert_int_ge(i, 0);
    ck_assert_uint_eq(ds.samples[i].n_boxes, 2);
    b = yc_dataset_boxes(&ds, (size_t)i);
    ck_assert(b[0].cls == 1 && b[0].x == 0.5f && b[1].cls == 0 && b[1].x == 0.1f);
    ck_assert_str_eq(find_note(&ds, "dup.jpg", YC_NOTE_WARNING), "2 duplicate labels removed");

    i = find_sample(&ds, "poly.jpg");
    ck_assert_int_ge(i, 0);
    ck_assert_uint_eq(ds.samples[i].n_boxes, 2);
    b = yc_dataset_boxes(&ds, (size_t)i);
    ck_assert_int_eq(b[0].cls, 1);
    ck_assert(b[0].x == (0.1f + 0.5f) / 2 && b[0].y == (0.2f + 0.6f) / 2);
    ck_assert(b[0].w == 0.5f - 0.1f && b[0].h == 0.6f - 0.2f);
    /* a segment file (one row has more than 6 values): the 5-value row is a 2-point polygon, as
     * in YOLOv5's verify_image_label */
    ck_assert(b[1].cls == 0 && b[1].x == (0.2f + 0.5f) / 2 && b[1].w == 0.5f - 0.2f);
    ck_assert(ds.has_polygons);
    ck_assert_uint_eq(yc_dataset_polygons(&ds, (size_t)i)[1].n, 2);

    i = find_sample(&ds, "empty.jpg");
    ck_assert_int_ge(i, 0);
    ck_assert_uint_eq(ds.samples[i].n_boxes, 0);
    i = find_sample(&ds, "missing.jpg");
    ck_assert_int_ge(i, 0);
    ck_assert_uint_eq(ds.samples[i].n_boxes, 0);
    ck_assert_uint_eq(ds.n_empty, 1);
    ck_assert_uint_eq(ds.n_missing, 1);

    /* EXIF orientation 6: 40x20 stored, 20x40 as decoded */
    i = find_sample(&ds, "rot.jpg");
    ck_assert_int_ge(i, 0);
    ck_assert_int_eq(ds.samples[i].w, 20);
    ck_assert_int_eq(ds.samples[i].h, 40);

    /* totals and the summary line */
    ck_assert_uint_eq(ds.n_boxes, 1 + 1 + 2 + 2 + 1);
    ck_assert_uint_eq(ds.class_counts[0], 4);
    ck_assert_uint_eq(ds.class_counts[1], 2);
    ck_assert_uint_eq(ds.class_counts[2], 1);
    char line[1200];
    snprintf(line, sizeof line, "train: Scanning %s... 7 images, 2 backgrounds, 11 corrupt\n",
             yc_harness_tmp("b/labels"));
    ck_assert_msg(strstr(so, line) != NULL, "expected %s in:\n%s", line, so);
    ck_assert_ptr_nonnull(strstr(e, "dup.jpg: 2 duplicate labels removed\n"));
    free(e);
    free(so);
    yc_dataset_free(&ds);

    /* single_cls: every class becomes 0 and class ids are not checked against nc */
    o = opts(1);
    o.single_cls = true;
    o.no_cache = true;
    ck_assert_int_eq(load1(yc_harness_tmp("b/images"), &o, &ds), YC_OK);
    ck_assert_uint_eq(ds.n, 8);
    i = find_sample(&ds, "cls.jpg");
    ck_assert_int_ge(i, 0);
    b = yc_dataset_boxes(&ds, (size_t)i);
    ck_assert(b[0].cls == 0 && b[1].cls == 0);
    ck_assert_uint_eq(ds.class_counts[0], ds.n_boxes);
    yc_dataset_free(&ds);
}
END_TEST

START_TEST(all_corrupt_and_empty)
{
    yc_harness_write_text(yc_harness_tmp("c/images/a.jpg"), "nope");
    yc_dataset_options o = opts(1);
    yc_dataset ds;
    ck_assert_int_ne(load1(yc_harness_tmp("c/images"), &o, &ds), YC_OK);
    ck_assert_ptr_nonnull(strstr(yc_last_error(), "all 1 listed images are corrupt"));
    ck_assert_int_eq(yc_mkdirs(yc_harness_tmp("c/none")), YC_OK);
    ck_assert_int_ne(load1(yc_harness_tmp("c/none"), &o, &ds), YC_OK);
    ck_assert_ptr_nonnull(strstr(yc_last_error(), "no images found in"));
}
END_TEST

/* ------------------------------------------------------------------------------------------------
 * Cache
 * ---------------------------------------------------------------------------------------------- */

static void make_cache_tree(void)
{
    for (int i = 0; i < 4; i++) {
        make_image(yc_harness_tmp("k/images/train/%d.jpg", i), 24, 16, 0);
        yc_harness_write_text(yc_harness_tmp("k/labels/train/%d.txt", i),
                              "0 0.5 0.5 0.2 0.2\n1 0.3 0.3 0.1 0.1\n");
    }
}

static void assert_same(const yc_dataset *a, const yc_dataset *b)
{
    ck_assert_uint_eq(a->n, b->n);
    ck_assert_uint_eq(a->n_boxes, b->n_boxes);
    ck_assert_uint_eq(a->n_corrupt, b->n_corrupt);
    ck_assert_uint_eq(a->n_notes, b->n_notes);
    for (size_t i = 0; i < a->n; i++) {
        ck_assert_str_eq(a->samples[i].image, b->samples[i].image);
        ck_assert_int_eq(a->samples[i].w, b->samples[i].w);
        ck_assert_int_eq(a->samples[i].h, b->samples[i].h);
        ck_assert_uint_eq(a->samples[i].n_boxes, b->samples[i].n_boxes);
    }
    ck_assert_int_eq(memcmp(a->boxes, b->boxes, a->n_boxes * sizeof *a->boxes), 0);
    for (size_t i = 0; i < a->n_notes; i++)
        ck_assert_str_eq(a->notes[i].text, b->notes[i].text);
}

START_TEST(cache_create_reuse_invalidate)
{
    make_cache_tree();
    yc_dataset_options o = opts(2);
    yc_dataset first, ds;
    ck_assert_int_eq(load1(yc_harness_tmp("k/images/train"), &o, &first), YC_OK);
    ck_assert_uint_eq(first.n_verified, 4);
    ck_assert_str_eq(first.cache_path, yc_harness_tmp("k/labels/train.yolocl.cache"));
    ck_assert(yc_file_exists(yc_harness_tmp("k/labels/train.yolocl.cache")));

    /* reuse: nothing verified, same result, and the summary names the cache */
    o.quiet = false;
    yc_harness_capture out;
    yc_harness_capture_start(&out, 1);
    ck_assert_int_eq(load1(yc_harness_tmp("k/images/train"), &o, &ds), YC_OK);
    char *so = yc_harness_capture_end(&out);
    o.quiet = true;
    ck_assert_uint_eq(ds.n_verified, 0);
    assert_same(&first, &ds);
    char line[1200];
    snprintf(line, sizeof line, "Scanning %s... 4 images, 0 backgrounds, 0 corrupt\n",
             yc_harness_tmp("k/labels/train.yolocl.cache"));
    ck_assert_msg(strstr(so, line) != NULL, "%s", so);
    free(so);
    yc_dataset_free(&ds);

    /* a changed label file is verified again, alone (same size: only the times differ, and
     * file times have the kernel's tick as granularity, hence the pause) */
    usleep(50000);
    yc_harness_write_text(yc_harness_tmp("k/labels/train/2.txt"),
                          "1 0.5 0.5 0.2 0.2\n1 0.3 0.3 0.1 0.1\n");
    ck_assert_int_eq(load1(yc_harness_tmp("k/images/train"), &o, &ds), YC_OK);
    ck_assert_uint_eq(ds.n_verified, 1);
    ck_assert_uint_eq(ds.class_counts[0], 3);
    ck_assert_uint_eq(ds.class_counts[1], 5);
    yc_dataset_free(&ds);
    ck_assert_int_eq(load1(yc_harness_tmp("k/images/train"), &o, &ds), YC_OK);
    ck_assert_uint_eq(ds.n_verified, 0);
    ck_assert_uint_eq(ds.class_counts[1], 5);
    yc_dataset_free(&ds);

    /* a removed label file: that image becomes a background */
    ck_assert_int_eq(unlink(yc_harness_tmp("k/labels/train/3.txt")), 0);
    ck_assert_int_eq(load1(yc_harness_tmp("k/images/train"), &o, &ds), YC_OK);
    ck_assert_uint_eq(ds.n_verified, 1);
    ck_assert_uint_eq(ds.n_missing, 1);
    yc_dataset_free(&ds);

    /* a new image is verified alone; a removed one just leaves the cache */
    make_image(yc_harness_tmp("k/images/train/9.jpg"), 24, 16, 0);
    ck_assert_int_eq(load1(yc_harness_tmp("k/images/train"), &o, &ds), YC_OK);
    ck_assert_uint_eq(ds.n_verified, 1);
    ck_assert_uint_eq(ds.n, 5);
    yc_dataset_free(&ds);
    ck_assert_int_eq(unlink(yc_harness_tmp("k/images/train/9.jpg")), 0);
    ck_assert_int_eq(load1(yc_harness_tmp("k/images/train"), &o, &ds), YC_OK);
    ck_assert_uint_eq(ds.n_verified, 0);
    ck_assert_uint_eq(ds.n, 4);
    yc_dataset_free(&ds);

    /* the class check is applied after the cache: another nc needs no scan */
    o.nc = 1;
    ck_assert_int_eq(load1(yc_harness_tmp("k/images/train"), &o, &ds), YC_OK);
    ck_assert_uint_eq(ds.n_verified, 0);
    ck_assert_uint_eq(ds.n_corrupt, 3);
    ck_assert_str_eq(find_note(&ds, "/0.jpg", YC_NOTE_CORRUPT),
                     "class 1 >= nc = 1 (classes are 0 to 0)");
    yc_dataset_free(&ds);

    /* no_cache neither reads nor writes */
    o.nc = 2;
    o.no_cache = true;
    ck_assert_int_eq(load1(yc_harness_tmp("k/images/train"), &o, &ds), YC_OK);
    ck_assert_uint_eq(ds.n_verified, 4);
    ck_assert_ptr_null(ds.cache_path);
    yc_dataset_free(&ds);
    yc_dataset_free(&first);
}
END_TEST

/* Rewrites the cache with `mutate` applied, loads, expects a warning and a full rescan. */
static void expect_cache_rejected(const char *what, void (*mutate)(char *data, size_t *len))
{
    const char *cp = yc_harness_tmp("k/labels/train.yolocl.cache");
    char *data;
    size_t len;
    ck_assert_int_eq(yc_read_file(cp, &data, &len), YC_OK);
    mutate(data, &len);
    yc_harness_write(cp, data, len);
    free(data);
    yc_dataset_options o = opts(2);
    yc_dataset ds;
    yc_harness_capture err;
    yc_harness_capture_start(&err, 2);
    int st = load1(yc_harness_tmp("k/images/train"), &o, &ds);
    char *e = yc_harness_capture_end(&err);
    ck_assert_msg(st == YC_OK, "%s: %s", what, yc_last_error());
    ck_assert_msg(ds.n_verified == 4, "%s: %zu verified", what, ds.n_verified);
    ck_assert_msg(strstr(e, "ignoring the scan cache") != NULL, "%s: %s", what, e);
    ck_assert_uint_eq(ds.n_boxes, 8);
    free(e);
    yc_dataset_free(&ds);
    /* rebuilt: the next load uses it */
    ck_assert_int_eq(load1(yc_harness_tmp("k/images/train"), &o, &ds), YC_OK);
    ck_assert_uint_eq(ds.n_verified, 0);
    yc_dataset_free(&ds);
}

static void flip_middle(char *d, size_t *n)
{
    d[*n / 2] ^= 0x40;
}
static void truncate_cache(char *d, size_t *n)
{
    (void)d;
    *n = *n * 2 / 3;
}
static void garbage_cache(char *d, size_t *n)
{
    memset(d, 'x', *n);
}
static void bad_version(char *d, size_t *n)
{
    (void)n;
    d[8] = 99;
}
/* A valid checksum over invalid content: a box coordinate > 1.  The first record's first box
 * starts after magic, version, flags, count (24 bytes), the path string, fingerprint and four
 * u32; its x is 4 bytes further. */
static void bad_box_valid_sum(char *d, size_t *n)
{
    uint32_t plen = (uint32_t)(unsigned char)d[24] | (uint32_t)(unsigned char)d[25] << 8;
    size_t at = 24 + 4 + plen + 8 + 16 + 4;
    float big = 2.0f;
    memcpy(d + at, &big, 4);
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i + 8 < *n; i++) {
        h ^= (unsigned char)d[i];
        h *= 0x100000001b3ULL;
    }
    for (int k = 0; k < 8; k++)
        d[*n - 8 + (size_t)k] = (char)(h >> (8 * k));
}

START_TEST(cache_corrupt_files)
{
    make_cache_tree();
    yc_dataset_options o = opts(2);
    yc_dataset ds;
    ck_assert_int_eq(load1(yc_harness_tmp("k/images/train"), &o, &ds), YC_OK);
    yc_dataset_free(&ds);
    expect_cache_rejected("flipped byte", flip_middle);
    expect_cache_rejected("truncated", truncate_cache);
    expect_cache_rejected("garbage", garbage_cache);
    expect_cache_rejected("version", bad_version);
    expect_cache_rejected("box out of range", bad_box_valid_sum);
}
END_TEST

START_TEST(cache_unwritable)
{
    /* labels never existed, so the cache's directory (k2/labels) does not exist either */
    make_image(yc_harness_tmp("u/images/train/a.jpg"), 24, 16, 0);
    yc_dataset_options o = opts(1);
    yc_dataset ds;
    yc_harness_capture err;
    yc_harness_capture_start(&err, 2);
    int st = load1(yc_harness_tmp("u/images/train"), &o, &ds);
    char *e = yc_harness_capture_end(&err);
    ck_assert_msg(st == YC_OK, "%s", yc_last_error());
    ck_assert_msg(strstr(e, "cache directory is not writeable") != NULL, "%s", e);
    ck_assert_uint_eq(ds.n_missing, 1);
    free(e);
    yc_dataset_free(&ds);
    if (geteuid() != 0) {
        /* a read-only labels parent (root ignores permissions, so only checked as a user) */
        make_image(yc_harness_tmp("r/images/train/a.jpg"), 24, 16, 0);
        yc_harness_write_text(yc_harness_tmp("r/labels/train/a.txt"), "0 0.5 0.5 0.1 0.1\n");
        ck_assert_int_eq(chmod(yc_harness_tmp("r/labels"), 0555), 0);
        yc_harness_capture_start(&err, 2);
        st = load1(yc_harness_tmp("r/images/train"), &o, &ds);
        e = yc_harness_capture_end(&err);
        chmod(yc_harness_tmp("r/labels"), 0755);
        ck_assert_int_eq(st, YC_OK);
        ck_assert_msg(strstr(e, "cache directory is not writeable") != NULL, "%s", e);
        free(e);
        yc_dataset_free(&ds);
    }
}
END_TEST

/* ------------------------------------------------------------------------------------------------
 * Rectangular batches
 * ---------------------------------------------------------------------------------------------- */

START_TEST(rect_shapes)
{
    yc_rect_batches rb;
    int32_t w1[] = {640}, h1[] = {480};
    ck_assert_int_eq(yc_rect_batches_make(w1, h1, 1, 16, 640, 32, 0.5, &rb), YC_OK);
    ck_assert_uint_eq(rb.n_batches, 1);
    ck_assert_int_eq(rb.hw[0], 512);
    ck_assert_int_eq(rb.hw[1], 672);
    yc_rect_batches_free(&rb);
    ck_assert_int_eq(yc_rect_batches_make(w1, h1, 1, 16, 640, 32, 0.0, &rb), YC_OK);
    ck_assert_int_eq(rb.hw[0], 480);
    ck_assert_int_eq(rb.hw[1], 640);
    yc_rect_batches_free(&rb);
    ck_assert_int_eq(yc_rect_batches_make(h1, w1, 1, 16, 640, 32, 0.5, &rb), YC_OK);
    ck_assert_int_eq(rb.hw[0], 672);
    ck_assert_int_eq(rb.hw[1], 512);
    yc_rect_batches_free(&rb);

    /* five images, batch 2: sorted by h/w (ties by index); a mixed batch is square */
    int32_t w[] = {640, 480, 640, 500, 640}, h[] = {480, 640, 480, 500, 360};
    ck_assert_int_eq(yc_rect_batches_make(w, h, 5, 2, 640, 32, 0.5, &rb), YC_OK);
    ck_assert_uint_eq(rb.n, 5);
    ck_assert_uint_eq(rb.n_batches, 3);
    size_t want_order[] = {4, 0, 2, 3, 1};
    for (int i = 0; i < 5; i++)
        ck_assert_uint_eq(rb.order[i], want_order[i]);
    /* batch 0: ar 0.5625, 0.75 -> [0.75, 1] -> ceil(15.5)*32 x ceil(20.5)*32 */
    ck_assert_int_eq(rb.hw[0], 512);
    ck_assert_int_eq(rb.hw[1], 672);
    /* batch 1: ar 0.75, 1 -> [1, 1] */
    ck_assert_int_eq(rb.hw[2], 672);
    ck_assert_int_eq(rb.hw[3], 672);
    /* batch 2: ar 1.333 -> [1, 0.75] */
    ck_assert_int_eq(rb.hw[4], 672);
    ck_assert_int_eq(rb.hw[5], 512);
    yc_rect_batches_free(&rb);
    /* imgsz 320, pad 0: 640x360 alone -> ceil(0.5625*10)*32 = 192 */
    int32_t w3[] = {640}, h3[] = {360};
    ck_assert_int_eq(yc_rect_batches_make(w3, h3, 1, 1, 320, 32, 0.0, &rb), YC_OK);
    ck_assert_int_eq(rb.hw[0], 192);
    ck_assert_int_eq(rb.hw[1], 320);
    yc_rect_batches_free(&rb);
    ck_assert_int_ne(yc_rect_batches_make(w3, h3, 1, 0, 320, 32, 0.0, &rb), YC_OK);

    /* over a dataset */
    make_image(yc_harness_tmp("rect/images/a.jpg"), 64, 48, 0);
    make_image(yc_harness_tmp("rect/images/b.jpg"), 48, 64, 0);
    yc_dataset_options o = opts(1);
    o.no_cache = true;
    yc_dataset ds;
    ck_assert_int_eq(load1(yc_harness_tmp("rect/images"), &o, &ds), YC_OK);
    ck_assert(yc_dataset_aspect(&ds, 0) == 0.75);
    ck_assert_int_eq(yc_dataset_rect_batches(&ds, 1, 64, 32, 0.5, &rb), YC_OK);
    ck_assert_uint_eq(rb.order[0], 0);
    ck_assert_int_eq(rb.hw[0], 64);
    ck_assert_int_eq(rb.hw[1], 96);
    ck_assert_int_eq(rb.hw[2], 96);
    ck_assert_int_eq(rb.hw[3], 64);
    yc_rect_batches_free(&rb);
    yc_dataset_free(&ds);
}
END_TEST

#else /* YC_TEST_SHARED */

static const char *const ref_files[] = {"data/coco128.yaml", NULL};

/* ------------------------------------------------------------------------------------------------
 * COCO128 from ../shared
 * ---------------------------------------------------------------------------------------------- */

START_TEST(coco128)
{
    char path[2048];
    yc_test_shared_path(ref_files[0], path, sizeof path);
    yc_data_yaml y;
    ck_assert_msg(yc_data_yaml_load(path, &y) == YC_OK, "%s", yc_last_error());
    ck_assert_int_eq(y.nc, 80);
    ck_assert_str_eq(y.names[0], "person");
    ck_assert_str_eq(y.names[79], "toothbrush");
    ck_assert_int_eq(y.n_entries[YC_SPLIT_TEST], 0);
    yc_dataset_options o = opts(1);
    o.no_cache = true; /* never write into the shared tree */
    o.quiet = false;
    yc_dataset ds;
    yc_harness_capture out;
    yc_harness_capture_start(&out, 1);
    double t0 = yc_now();
    int st = yc_dataset_load_split(&y, YC_SPLIT_TRAIN, &o, &ds);
    double dt = yc_now() - t0;
    char *so = yc_harness_capture_end(&out);
    ck_assert_msg(st == YC_OK, "%s", yc_last_error());
    ck_assert_uint_eq(ds.n, 128);
    ck_assert_uint_eq(yc_dataset_backgrounds(&ds), 2);
    ck_assert_uint_eq(ds.n_corrupt, 0);
    ck_assert_uint_eq(ds.n_boxes, 929);
    ck_assert_ptr_nonnull(strstr(so, "128 images, 2 backgrounds, 0 corrupt"));
    ck_assert_ptr_nonnull(strstr(so, "/labels/train2017... "));
    size_t sum = 0;
    for (int c = 0; c < 80; c++)
        sum += ds.class_counts[c];
    ck_assert_uint_eq(sum, 929);
    printf("coco128: %zu images, %zu boxes scanned in %.3f s\n", ds.n, ds.n_boxes, dt);
    free(so);
    yc_dataset_free(&ds);
    ck_assert_int_eq(yc_dataset_load_split(&y, YC_SPLIT_VAL, &o, &ds), YC_OK);
    ck_assert_uint_eq(ds.n, 128);
    yc_dataset_free(&ds);
    yc_data_yaml_free(&y);
}
END_TEST

#endif /* YC_TEST_SHARED */

static Suite *dataset_suite(void)
{
    Suite *s = suite_create("dataset");
#ifdef YC_TEST_SHARED
    TCase *tc = tcase_create("coco128");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, coco128);
    suite_add_tcase(s, tc);
#else
    TCase *tc = tcase_create("yaml");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, yaml_names_list_and_dir);
    tcase_add_test(tc, yaml_names_dict_txt_and_lists);
    tcase_add_test(tc, yaml_relative_and_retry);
    tcase_add_test(tc, yaml_errors);
    tcase_add_test(tc, yaml_nc_mismatch_and_download);
    suite_add_tcase(s, tc);
    tc = tcase_create("lists");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, label_paths);
    tcase_add_test(tc, image_lists);
    suite_add_tcase(s, tc);
    tc = tcase_create("scan");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, broken_files);
    tcase_add_test(tc, all_corrupt_and_empty);
    suite_add_tcase(s, tc);
    tc = tcase_create("cache");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, cache_create_reuse_invalidate);
    tcase_add_test(tc, cache_corrupt_files);
    tcase_add_test(tc, cache_unwritable);
    suite_add_tcase(s, tc);
    tc = tcase_create("rect");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, rect_shapes);
    suite_add_tcase(s, tc);
#endif
    return s;
}

int main(void)
{
#ifdef YC_TEST_SHARED
    char missing[2048];
    if (!yc_test_have_shared(ref_files, missing, sizeof missing))
        return yc_test_skip(YC_TEST_NEEDS_SHARED, "%s not found (coco128)", missing);
#endif
    return yc_harness_main(dataset_suite(), "dataset");
}
