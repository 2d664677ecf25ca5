/* After the first training step, the training loop allocates nothing large: every device buffer
 * (the CPU backend's buffers are aligned_alloc'd host memory) and every host buffer of the data
 * path, the step, the optimizer and validation was sized by the memory plan or by the first
 * step.  The test binary wraps the allocator (-Wl,--wrap) and counts large allocations made by
 * yolocl's own code after the first batch of a 3-epoch training with validation.  That the count
 * means something is checked too: the wrappers saw the large allocations before the first step
 * (the planned buffers), and counting covered the batches after it. */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "demo.h"
#include "image.h"
#include "log.h"
#include "tile_reader.h"
#include "train.h"
#include "harness.h"

/* An allocation of at least this many bytes counts as large. */
#define LARGE (256 * 1024)

static atomic_int counting;
/* large allocations while counting and before it */
static atomic_long large_allocs, large_before;
static atomic_size_t largest;
/* batches reported while counting */
static atomic_int batches_counted;

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
void *__real_aligned_alloc(size_t align, size_t n);

static void note(size_t n)
{
    if (!atomic_load(&counting) && n >= LARGE)
        atomic_fetch_add(&large_before, 1);
    if (atomic_load(&counting) && n >= LARGE) {
        atomic_fetch_add(&large_allocs, 1);
        size_t prev = atomic_load(&largest);
        while (n > prev && !atomic_compare_exchange_weak(&largest, &prev, n))
            ;
    }
}

void *__wrap_malloc(size_t n)
{
    note(n);
    return __real_malloc(n);
}

void *__wrap_calloc(size_t n, size_t size)
{
    note(n * size);
    return __real_calloc(n, size);
}

void *__wrap_realloc(void *p, size_t n)
{
    note(n);
    return __real_realloc(p, n);
}

void *__wrap_aligned_alloc(size_t align, size_t n)
{
    note(n);
    return __real_aligned_alloc(align, n);
}

/* Counting starts when the first batch of the first epoch is done. */
static void progress(void *ctx, int epoch, int batch, double loss)
{
    (void)ctx;
    (void)loss;
    if (atomic_load(&counting))
        atomic_fetch_add(&batches_counted, 1);
    if (epoch == 0 && batch == 0)
        atomic_store(&counting, 1);
}

static void reset_counts(void)
{
    atomic_store(&counting, 0);
    atomic_store(&large_allocs, 0);
    atomic_store(&large_before, 0);
    atomic_store(&largest, 0);
    atomic_store(&batches_counted, 0);
}

START_TEST(no_large_allocation_after_the_first_step)
{
    reset_counts();
    const char *tmp = yc_harness_tmpdir_make("alloc");
    ck_assert_ptr_nonnull(tmp);
    char dir[600], yaml[700];
    snprintf(dir, sizeof dir, "%s/demo", tmp);
    yc_demo_options opt;
    yc_demo_options_default(&opt);
    opt.n_train = 24;
    opt.n_val = 8;
    opt.min_side = 64;
    opt.max_side = 128;
    ck_assert_msg(yc_demo_write(dir, &opt) == YC_OK, "%s", yc_last_error());
    snprintf(yaml, sizeof yaml, "%s/%s", dir, YC_DEMO_YAML);

    yc_train_opts o;
    yc_train_opts_defaults(&o);
    o.data = yaml;
    o.cfg = "yolov5n";
    o.epochs = 3;
    o.batch = 8;
    o.imgsz = 96;
    o.workers = 2;
    o.noplots = true;
    o.nosave = true;
    o.exist_ok = true;
    o.project = tmp;
    o.name = "alloc";
    o.progress = progress;
    bool interrupted = false;
    int verbosity = yc_verbosity;
    yc_verbosity = 0;
    int st = yc_train(&o, &interrupted);
    yc_verbosity = verbosity;
    atomic_store(&counting, 0);
    ck_assert_msg(st == YC_OK, "%s", yc_last_error());
    printf("large allocations: %ld before the first step, %ld after it over %d batches (largest "
           "%zu bytes)\n",
           atomic_load(&large_before), atomic_load(&large_allocs),
           atomic_load(&batches_counted), atomic_load(&largest));
    /* 3 epochs of 24 images in batches of 8: 8 batches after the first */
    ck_assert_int_eq(atomic_load(&batches_counted), 8);
    ck_assert_msg(atomic_load(&large_before) > 0, "the allocator wrappers saw nothing");
    ck_assert_msg(atomic_load(&large_allocs) == 0,
                  "%ld allocations of at least %d bytes after the first step (largest %zu)",
                  atomic_load(&large_allocs), LARGE, atomic_load(&largest));
    ck_assert_int_eq(yc_harness_remove_tree(tmp), 0);
}
END_TEST

/* A tile reader (tiled training, issue 7) that has read windows of a 1500 x 900 image decoded
 * whole and through a band (2.9 MB of rows) reads them again, after other images, without a
 * large allocation: the pixel buffers are kept from image to image. */
START_TEST(tile_reader_reuses_its_buffers)
{
    reset_counts();
    const char *tmp = yc_harness_tmpdir_make("alloc");
    ck_assert_ptr_nonnull(tmp);
    char a[600], b[600];
    snprintf(a, sizeof a, "%s/a.png", tmp);
    snprintf(b, sizeof b, "%s/b.png", tmp);
    yc_image im = YC_IMAGE_INIT, win = YC_IMAGE_INIT;
    ck_assert_int_eq(yc_image_reserve(&im, 900, 1500), YC_OK);
    for (size_t i = 0; i < (size_t)900 * 1500 * 3; i++)
        im.data[i] = (uint8_t)(i * 7 / 3);
    ck_assert_msg(yc_image_save(&im, a, 0) == YC_OK, "%s", yc_last_error());
    ck_assert_int_eq(yc_image_reserve(&im, 700, 800), YC_OK);
    ck_assert_msg(yc_image_save(&im, b, 0) == YC_OK, "%s", yc_last_error());
    yc_tile_window w1 = {100, 200, 640, 640}, w2 = {0, 0, 640, 640};
    for (int decode_max = 4096; decode_max >= 0; decode_max -= 4096) {
        yc_tile_reader *r = NULL;
        ck_assert_int_eq(yc_tile_reader_new(&r, 640, decode_max), YC_OK);
        for (int pass = 0; pass < 3; pass++) {
            if (pass == 2)
                atomic_store(&counting, 1);
            ck_assert_msg(yc_tile_reader_read(r, a, 1500, 900, w1, &win) == YC_OK, "%s",
                          yc_last_error());
            ck_assert_msg(yc_tile_reader_read(r, b, 800, 700, w2, &win) == YC_OK, "%s",
                          yc_last_error());
            ck_assert_msg(yc_tile_reader_read(r, a, 1500, 900, w2, &win) == YC_OK, "%s",
                          yc_last_error());
        }
        atomic_store(&counting, 0);
        ck_assert_msg(atomic_load(&large_before) > 0, "decode_max %d: the first passes allocated "
                      "nothing large: the wrappers count nothing", decode_max);
        atomic_store(&large_before, 0);
        /* 3 opens in the first pass, 2 in the others (a continues a) */
        ck_assert_uint_eq(yc_tile_reader_get_stats(r).opens, 7);
        yc_tile_reader_free(r);
        ck_assert_msg(atomic_load(&large_allocs) == 0,
                      "decode_max %d: %ld allocations of at least %d bytes when reopening "
                      "(largest %zu)",
                      decode_max, atomic_load(&large_allocs), LARGE, atomic_load(&largest));
    }
    yc_image_free(&im);
    yc_image_free(&win);
    ck_assert_int_eq(yc_harness_remove_tree(tmp), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("alloc");
    TCase *tc = tcase_create("train");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, no_large_allocation_after_the_first_step);
    tcase_add_test(tc, tile_reader_reuses_its_buffers);
    suite_add_tcase(s, tc);
    return yc_harness_run(s, true);
}
