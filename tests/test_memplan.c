/* The memory fit (memplan.h): for limits constructed from the planner's own peaks, yc_memfit
 * makes the documented choice in the documented order: the batch as requested, FP16 storage,
 * FP16 storage and recomputation, micro-batches of the largest size that fits which cut the
 * requested batch (YOLOv5's accumulate for that batch),
 * AutoBatch for batch -1, and an error naming the largest activation when nothing fits.  The
 * CPU backend answers the workspace and FP16 questions; nothing is allocated. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "image_read.h"
#include "log.h"
#include "memplan.h"
#include "model.h"
#include "modelcfg.h"
#include "harness.h"

#define NOMINAL 64
#define BATCH 16
#define IMG 128

static yc_model *m;
static yc_backend *be;

static void setup(void)
{
    char path[1024];
    yc_model_cfg *cfg = NULL;
    ck_assert_msg(yc_model_cfg_find("yolov5n", path, sizeof path) == YC_OK, "%s",
                  yc_last_error());
    ck_assert_msg(yc_model_cfg_load(&cfg, path, 0) == YC_OK, "%s", yc_last_error());
    ck_assert_msg(yc_model_new(&m, cfg) == YC_OK, "%s", yc_last_error());
    ck_assert_msg(yc_backend_cpu_new(&be, 1) == YC_OK, "%s", yc_last_error());
    ck_assert(be->info.fp16_storage);
    m->be = be;
}

static void teardown(void)
{
    m->be = NULL;
    yc_model_free(m);
    yc_backend_free(be);
}

static yc_run_shape shape(int batch)
{
    /* with validation (yc_memfit plans it at twice the micro-batch) */
    return (yc_run_shape){.m = m, .train = true, .batch = batch, .val_batch = 2,
                          .imgsz = IMG, .optimizer = YC_OPTIM_SGD, .workers = 2,
                          .max_image_w = 640, .max_image_h = 480, .baseline = 50 << 20};
}

/* The planned peak of one candidate, as the fit computes it (validation batch twice the
 * micro-batch). */
static size_t peak_of(int batch, bool half, bool recompute)
{
    yc_run_shape rs = shape(batch);
    rs.val_batch = 2 * batch;
    rs.half = half;
    rs.recompute = recompute;
    yc_mem_report r;
    ck_assert_msg(yc_memplan(&rs, &r) == YC_OK, "%s", yc_last_error());
    size_t p = r.peak_bytes;
    yc_mem_report_free(&r);
    return p;
}

static yc_mem_fit fit_in(size_t limit, yc_half_policy half, int batch, bool recompute)
{
    yc_run_shape rs = shape(batch);
    rs.recompute = recompute;
    yc_mem_fit fit;
    ck_assert_msg(yc_memfit(&rs, limit, half, NOMINAL, 256, &fit) == YC_OK, "%s",
                  yc_last_error());
    ck_assert_uint_le(fit.peak_bytes, limit);
    ck_assert(fit.reason[0]);
    return fit;
}

START_TEST(savings_order_is_fp16_then_recomputation)
{
    size_t fp32 = peak_of(BATCH, false, false), fp16 = peak_of(BATCH, true, false);
    size_t fp16rc = peak_of(BATCH, true, true), fp32rc = peak_of(BATCH, false, true);
    ck_assert_uint_lt(fp16, fp32);
    ck_assert_uint_lt(fp16rc, fp16);
    ck_assert_uint_lt(fp32rc, fp32);

    /* fits as it is: FP32 under the automatic policy, FP16 when asked for */
    yc_mem_fit f = fit_in(fp32, YC_HALF_AUTO, BATCH, false);
    ck_assert(!f.half && !f.recompute);
    ck_assert_int_eq(f.micro_batch, BATCH);
    ck_assert_int_eq(f.accumulate, NOMINAL / BATCH);
    ck_assert_uint_eq(f.peak_bytes, fp32);
    f = fit_in(fp32, YC_HALF_ON, BATCH, false);
    ck_assert(f.half && !f.recompute);
    ck_assert_uint_eq(f.peak_bytes, fp16);

    /* one byte short: FP16 storage first */
    f = fit_in(fp32 - 1, YC_HALF_AUTO, BATCH, false);
    ck_assert(f.half && !f.recompute);
    ck_assert_int_eq(f.micro_batch, BATCH);
    ck_assert_uint_eq(f.peak_bytes, fp16);
    ck_assert_msg(strstr(f.reason, "FP16 storage"), "%s", f.reason);

    /* then recomputation as well */
    f = fit_in(fp16 - 1, YC_HALF_AUTO, BATCH, false);
    ck_assert(f.half && f.recompute);
    ck_assert_int_eq(f.micro_batch, BATCH);
    ck_assert_uint_eq(f.peak_bytes, fp16rc);
    ck_assert_msg(strstr(f.reason, "recomputation"), "%s", f.reason);

    /* --no-half: recomputation alone */
    f = fit_in(fp32 - 1, YC_HALF_OFF, BATCH, false);
    ck_assert(!f.half && f.recompute);
    ck_assert_uint_eq(f.peak_bytes, fp32rc);

    /* --recompute: every choice recomputes, the first one included */
    f = fit_in(fp32, YC_HALF_AUTO, BATCH, true);
    ck_assert(!f.half && f.recompute);
    ck_assert_uint_eq(f.peak_bytes, fp32rc);
}
END_TEST

/* The planned peak of micro-batch `micro` of a requested `batch`, as the fit computes it: the
 * loader builds whole batches, the training and validation graphs are the micro-batch's. */
static size_t peak_split(int batch, int micro, bool half, bool recompute)
{
    yc_run_shape rs = shape(micro);
    rs.loader_batch = batch;
    rs.val_batch = 2 * micro;
    rs.half = half;
    rs.recompute = recompute;
    yc_mem_report r;
    ck_assert_msg(yc_memplan(&rs, &r) == YC_OK, "%s", yc_last_error());
    size_t p = r.peak_bytes;
    yc_mem_report_free(&r);
    return p;
}

START_TEST(micro_batches_keep_the_requested_batch)
{
    /* batches 16, 24, 64 and 100 under limits between the FP16 + recomputation peaks of
     * micro-batches: the fit picks exactly the largest micro-batch under the limit, cuts the batch
     * into parts that hold each of its images once, and keeps YOLOv5's accumulate for the batch:
     * round(64 / 16) = 4, round(64 / 24) = 3 (72 images a step), 1 for 64 and 100 */
    static const int batches[] = {16, 24, 64, 100}, accumulate[] = {4, 3, 1, 1};
    for (int bi = 0; bi < 4; bi++) {
        int batch = batches[bi];
        const int micro[] = {batch - 1, batch / 2 + 1, batch / 3, 7, 1};
        for (size_t i = 0; i < sizeof micro / sizeof *micro; i++) {
            int b = micro[i];
            size_t below = peak_split(batch, b + 1, true, true) - 1;
            size_t at = peak_split(batch, b, true, true);
            ck_assert_uint_le(at, below);
            for (int k = 0; k < 2; k++) {
                yc_mem_fit f = fit_in(k ? below : at, YC_HALF_AUTO, batch, false);
                ck_assert_msg(f.micro_batch == b, "batch %d: micro-batch %d, not %d", batch,
                              f.micro_batch, b);
                ck_assert(f.half && f.recompute);
                ck_assert_int_eq(f.micro_batches, (batch + b - 1) / b);
                ck_assert(f.last_micro >= 1 && f.last_micro <= b);
                ck_assert_int_eq((f.micro_batches - 1) * b + f.last_micro, batch);
                ck_assert_int_eq(f.accumulate, accumulate[bi]);
                ck_assert_uint_eq(f.peak_bytes, at);
                char images[64];
                snprintf(images, sizeof images, "%d images per optimizer step",
                         batch * accumulate[bi]);
                ck_assert_msg(strstr(f.reason, images), "%s", f.reason);
            }
        }
    }
    /* --no-half: micro-batches with recomputation only */
    size_t at = peak_split(BATCH, 6, false, true);
    yc_mem_fit f = fit_in(at, YC_HALF_OFF, BATCH, false);
    ck_assert(!f.half && f.recompute);
    ck_assert_int_eq(f.micro_batch, 6);
    ck_assert_int_eq(f.micro_batches, 3);
    ck_assert_int_eq(f.last_micro, 4);
    ck_assert_int_eq(f.accumulate, 4);
    ck_assert_msg(strstr(f.reason, "2 micro-batches of 6 + 1 of 4"), "%s", f.reason);
}
END_TEST

START_TEST(autobatch_is_the_largest_batch_that_fits)
{
    size_t at = peak_of(23, true, true);
    yc_mem_fit f = fit_in(at, YC_HALF_AUTO, -1, false);
    ck_assert_int_eq(f.micro_batch, 23);
    ck_assert_int_eq(f.accumulate, 3);
    ck_assert_msg(strstr(f.reason, "AutoBatch"), "%s", f.reason);
    /* at most max_batch */
    yc_run_shape rs = shape(-1);
    ck_assert_int_eq(yc_memfit(&rs, (size_t)1 << 40, YC_HALF_AUTO, NOMINAL, 40, &f), YC_OK);
    ck_assert_int_eq(f.micro_batch, 40);
    ck_assert_int_eq(f.accumulate, 2);
}
END_TEST

START_TEST(nothing_fits_names_the_largest_tensor)
{
    size_t one = peak_split(BATCH, 1, true, true);
    yc_run_shape rs = shape(BATCH);
    yc_mem_fit f;
    ck_assert_int_eq(yc_memfit(&rs, one - 1, YC_HALF_AUTO, NOMINAL, 256, &f), YC_ENOMEM);
    const char *e = yc_last_error();
    ck_assert_msg(strstr(e, "even with batch 1") && strstr(e, "largest activation") &&
                      strstr(e, "--img"),
                  "%s", e);
    /* a micro-batch of 1 at exactly its peak still fits */
    f = fit_in(one, YC_HALF_AUTO, BATCH, false);
    ck_assert_int_eq(f.micro_batch, 1);
    ck_assert_int_eq(f.micro_batches, BATCH);
    ck_assert_int_eq(f.accumulate, NOMINAL / BATCH);
}
END_TEST

/* A device whose largest allocation (an OpenCL device's CL_DEVICE_MAX_MEM_ALLOC_SIZE) is smaller
 * than a tensor of the requested batch: the fit takes the largest batch whose tensors all fit
 * instead of failing; when not even batch 1 fits, the error names the tensor and what to do. */
START_TEST(largest_allocation_limits_the_batch)
{
    size_t saved = be->info.max_alloc;
    yc_run_shape rs = shape(BATCH);
    yc_mem_report r;
    rs.batch = 4;
    rs.val_batch = 8;
    ck_assert_int_eq(yc_memplan(&rs, &r), YC_OK);
    int largest = -1;
    ck_assert_int_eq(yc_plan_largest(&r.train_plan, &largest, 1), 1);
    be->info.max_alloc = r.train_plan.blocks[largest].size;
    yc_mem_report_free(&r);
    /* the batches whose plans stay within the allocation limit */
    int expect = 0;
    for (int b = 1; b <= BATCH; b++) {
        rs.batch = b;
        rs.val_batch = 2 * b;
        if (yc_memplan(&rs, &r) == YC_OK) {
            expect = b;
            yc_mem_report_free(&r);
        }
    }
    ck_assert_int_ge(expect, 1);
    ck_assert_int_lt(expect, BATCH);
    rs = shape(BATCH);
    yc_mem_fit f;
    int st = yc_memfit(&rs, (size_t)1 << 40, YC_HALF_AUTO, NOMINAL, 256, &f);
    ck_assert_msg(st == YC_OK, "%s", yc_last_error());
    ck_assert_int_eq(f.micro_batch, expect);
    /* below batch 1's largest tensor */
    rs.batch = 1;
    rs.val_batch = 2;
    rs.half = rs.recompute = true;
    ck_assert_int_eq(yc_memplan(&rs, &r), YC_OK);
    ck_assert_int_eq(yc_plan_largest(&r.train_plan, &largest, 1), 1);
    be->info.max_alloc = r.train_plan.blocks[largest].size / 2;
    yc_mem_report_free(&r);
    rs = shape(BATCH);
    ck_assert_int_eq(yc_memfit(&rs, (size_t)1 << 40, YC_HALF_AUTO, NOMINAL, 256, &f), YC_ENOMEM);
    const char *e = yc_last_error();
    ck_assert_msg(strstr(e, "largest allocation") && strstr(e, "even batch 1") &&
                      strstr(e, "--img"),
                  "%s", e);
    be->info.max_alloc = saved;
}
END_TEST

START_TEST(fp16_by_default_on_opencl_only)
{
    /* the CPU backend: FP16 only when needed */
    ck_assert_int_eq(yc_half_default(YC_HALF_AUTO, be), YC_HALF_AUTO);
    ck_assert_int_eq(yc_half_default(YC_HALF_ON, be), YC_HALF_ON);
    /* a device whose memory is not the host's (no host pointer), that can store FP16 */
    struct yc_backend_i iface = {0};
    yc_backend dev = {.iface = &iface};
    dev.info.fp16_storage = true;
    ck_assert_int_eq(yc_half_default(YC_HALF_AUTO, &dev), YC_HALF_ON);
    ck_assert_int_eq(yc_half_default(YC_HALF_OFF, &dev), YC_HALF_OFF);
    dev.info.fp16_storage = false;
    ck_assert_int_eq(yc_half_default(YC_HALF_AUTO, &dev), YC_HALF_AUTO);
}
END_TEST

/* The plan counts what the process holds: every item is there once, and the peak is their sum
 * on a device that shares host memory. */
START_TEST(report_items_add_up)
{
    yc_run_shape rs = shape(BATCH);
    yc_mem_report r;
    ck_assert_int_eq(yc_memplan(&rs, &r), YC_OK);
    size_t sum = 0;
    bool baseline = false, arena = false, ema = false;
    for (int i = 0; i < r.nitems; i++) {
        sum += r.items[i].bytes;
        baseline |= strstr(r.items[i].what, "baseline") && r.items[i].bytes == (size_t)50 << 20;
        arena |= !strcmp(r.items[i].what, "activation arena");
        ema |= strstr(r.items[i].what, "EMA") &&
               r.items[i].bytes == (m->param_elems + m->state_elems) * sizeof(float);
    }
    ck_assert(baseline && arena && ema);
    ck_assert(r.host_device);
    ck_assert_uint_eq(sum, r.peak_bytes);
    ck_assert_uint_le(r.lower_bound_bytes, r.peak_bytes);
    yc_mem_report_free(&r);
    /* the optimizer state: SGD's momentum buffer, Adam's two moments */
    for (int adam = 0; adam < 2; adam++) {
        rs.optimizer = adam ? YC_OPTIM_ADAM : YC_OPTIM_SGD;
        ck_assert_int_eq(yc_memplan(&rs, &r), YC_OK);
        size_t state = 0;
        for (int i = 0; i < r.nitems; i++)
            if (!strcmp(r.items[i].what, "optimizer state"))
                state = r.items[i].bytes;
        ck_assert_uint_eq(state, (adam ? 2 : 1) * m->param_elems * sizeof(float));
        yc_mem_report_free(&r);
    }
}
END_TEST

/* The bytes of the item named `what`, 0 when absent. */
static size_t item_bytes(const yc_mem_report *r, const char *what)
{
    for (int i = 0; i < r->nitems; i++)
        if (!strcmp(r->items[i].what, what))
            return r->items[i].bytes;
    return 0;
}

/* A segmentation model (yolov5n-seg) counts what its run adds to a detection run's: the Proto
 * output (in the activation arena), the host copies of its heads and Proto and of their
 * gradients (its training step's), the masks in the training and validation loaders' batches at
 * 1/mask_ratio of the image size (one map per image with overlap, masks_per_image without), and
 * the mask loss's scratch; the items still add up to the peak, and a detection model of the same
 * width counts none of them. */
START_TEST(segmentation_counts_masks_and_proto)
{
    char path[1024];
    yc_model_cfg *cfg = NULL;
    yc_model *sm = NULL;
    ck_assert(yc_model_cfg_find("yolov5n-seg", path, sizeof path) == YC_OK);
    ck_assert_msg(yc_model_cfg_load(&cfg, path, 0) == YC_OK, "%s", yc_last_error());
    ck_assert_msg(yc_model_new(&sm, cfg) == YC_OK, "%s", yc_last_error());
    sm->be = be;
    yc_run_shape rs = shape(BATCH);
    rs.m = sm;
    rs.val_batch = 2 * BATCH;
    yc_mem_report r;
    ck_assert_msg(yc_memplan(&rs, &r) == YC_OK, "%s", yc_last_error());
    size_t sum = 0;
    for (int i = 0; i < r.nitems; i++)
        sum += r.items[i].bytes;
    ck_assert_uint_eq(sum, r.peak_bytes);
    /* heads: 3 levels of na * no channels, Proto nm at a quarter of the image */
    size_t heads = 0;
    for (int l = 0; l < 3; l++) {
        size_t g = (size_t)IMG / (8u << l);
        heads += (size_t)BATCH * (size_t)(sm->na * sm->no) * g * g;
    }
    const size_t q = IMG / 4, proto = (size_t)BATCH * (size_t)sm->nm * q * q;
    ck_assert_uint_eq(item_bytes(&r, "segmentation heads and Proto on the host (training)"),
                      2 * (heads + proto) * sizeof(float));
    /* 2 workers + 1 slots of BATCH maps of (128 / 4)^2 floats; validation's 2 slots at 160 */
    ck_assert_uint_eq(item_bytes(&r, "training loader masks"), 3 * BATCH * q * q * sizeof(float));
    const size_t qv = (IMG + 32) / 4;
    ck_assert_uint_eq(item_bytes(&r, "validation loader masks"),
                      2 * 2 * BATCH * qv * qv * sizeof(float));
    ck_assert_uint_gt(item_bytes(&r, "segmentation loss scratch"),
                      (size_t)sm->nm * q * q * sizeof(double));
    /* Proto's output is in the training graph's plan */
    bool proto_block = false;
    for (int i = 0; i < r.train_plan.nblocks; i++)
        proto_block |= r.train_plan.blocks[i].name &&
                       strstr(r.train_plan.blocks[i].name, "proto.cv3") != NULL;
    ck_assert_msg(proto_block, "no Proto block in the training plan");
    yc_mem_report_free(&r);
    /* without overlap, a mask per target; mask ratio 2 quadruples them */
    rs.masks_per_image = 5;
    rs.mask_ratio = 2;
    ck_assert_msg(yc_memplan(&rs, &r) == YC_OK, "%s", yc_last_error());
    ck_assert_uint_eq(item_bytes(&r, "training loader masks"),
                      3 * BATCH * 5 * 4 * q * q * sizeof(float));
    yc_mem_report_free(&r);
    /* a detection model counts none of it */
    rs = shape(BATCH);
    ck_assert_msg(yc_memplan(&rs, &r) == YC_OK, "%s", yc_last_error());
    ck_assert_uint_eq(item_bytes(&r, "training loader masks"), 0);
    ck_assert_uint_eq(item_bytes(&r, "segmentation heads and Proto on the host (training)"), 0);
    yc_mem_report_free(&r);
    sm->be = NULL;
    yc_model_free(sm);
}
END_TEST

/* Tiled training (issue 7): with tiles of 640 the loader buffers no longer grow with the largest
 * image: each thread counts a reader (a 4096 x 4096 image decoded whole, twice, and a band of 640
 * rows of the widest image plus a window) and the windows of its batch plus one. */
START_TEST(tiles_bound_the_loader_buffers)
{
    yc_run_shape rs = shape(BATCH);
    rs.max_image_w = 30000;
    rs.max_image_h = 30000;
    /* whole images: a 30000 x 30000 image is read reduced (image_read.h), its cost bounded by
     * the output, not its 5.4 GB decode (issue 26) */
    rs.read_bytes = yc_image_read_bytes(30000, 30000, IMG, IMG, NULL);
    yc_mem_report whole, tiled;
    ck_assert_msg(yc_memplan(&rs, &whole) == YC_OK, "%s", yc_last_error());
    rs.tile = 640;
    ck_assert_msg(yc_memplan(&rs, &tiled) == YC_OK, "%s", yc_last_error());
    const size_t s2 = (size_t)IMG * IMG, t2 = 3 * (size_t)640 * 640;
    const size_t whole_decode = 2 * 3 * (size_t)30000 * 30000;
    const size_t reader = 2 * 3 * (size_t)4096 * 4096 + 3 * (size_t)640 * 30000 + t2;
    ck_assert_uint_lt(rs.read_bytes, whole_decode / 50);
    ck_assert_uint_eq(item_bytes(&whole, "training loader buffers"), 2 * (21 * s2 + rs.read_bytes));
    ck_assert_uint_eq(item_bytes(&tiled, "training loader buffers"), 2 * (21 * s2 + reader));
    ck_assert_uint_eq(item_bytes(&tiled, "training tile windows"), 2 * (BATCH + 1) * t2);
    ck_assert_uint_eq(item_bytes(&tiled, "validation tile windows"), (2 + 1) * t2);
    ck_assert_uint_eq(item_bytes(&whole, "training tile windows"), 0);
    /* both bounded: within the tile reader's 100 MB of each other, not gigabytes apart */
    ck_assert_uint_lt(whole.peak_bytes, tiled.peak_bytes + ((size_t)256 << 20));
    yc_mem_report_free(&whole);
    yc_mem_report_free(&tiled);
    /* a very wide image: a 4096 x 2000 decode and a band of the whole width */
    rs.max_image_w = 100000;
    rs.max_image_h = 2000;
    ck_assert_msg(yc_memplan(&rs, &tiled) == YC_OK, "%s", yc_last_error());
    size_t both = 2 * 3 * (size_t)4096 * 2000 + 3 * (size_t)640 * 100000 + t2;
    ck_assert_uint_eq(item_bytes(&tiled, "training loader buffers"), 2 * (21 * s2 + both));
    yc_mem_report_free(&tiled);
    /* images no larger than 4096: no band */
    rs.max_image_w = 3000;
    rs.max_image_h = 2000;
    ck_assert_msg(yc_memplan(&rs, &tiled) == YC_OK, "%s", yc_last_error());
    ck_assert_uint_eq(item_bytes(&tiled, "training loader buffers"),
                      2 * (21 * s2 + 2 * 3 * (size_t)3000 * 2000));
    yc_mem_report_free(&tiled);
}
END_TEST

/* --cache ram is a term of the plan, and the fit names it (with --cache disk as the remedy) when
 * the run fits without it; a read cost that alone breaks the limit names its image and --tile
 * (issue 26). */
START_TEST(cache_and_costly_images_are_named_by_the_fit)
{
    yc_run_shape rs = shape(1);
    size_t base = peak_of(1, false, false);
    rs.cache_bytes = (size_t)3 << 30;
    yc_mem_report r;
    ck_assert_int_eq(yc_memplan(&rs, &r), YC_OK);
    ck_assert_uint_eq(item_bytes(&r, "--cache ram images"), rs.cache_bytes);
    ck_assert_uint_eq(r.peak_bytes, base + rs.cache_bytes);
    yc_mem_report_free(&r);
    yc_mem_fit f;
    ck_assert_int_eq(yc_memfit(&rs, base + ((size_t)1 << 30), YC_HALF_AUTO, NOMINAL, 1, &f),
                     YC_ENOMEM);
    ck_assert_msg(strstr(yc_last_error(), "--cache ram holds 3.00 GiB") &&
                      strstr(yc_last_error(), "use --cache disk"),
                  "%s", yc_last_error());
    rs.cache_bytes = 0;
    rs.read_bytes = (size_t)2 << 30;
    rs.read_image = "scan.tif";
    rs.read_image_w = 20000;
    rs.read_image_h = 30000;
    ck_assert_int_eq(yc_memfit(&rs, base + ((size_t)1 << 30), YC_HALF_AUTO, NOMINAL, 1, &f),
                     YC_ENOMEM);
    ck_assert_msg(strstr(yc_last_error(), "reading scan.tif (20000x30000)") &&
                      strstr(yc_last_error(), "--tile"),
                  "%s", yc_last_error());
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("memplan");
    TCase *tc = tcase_create("fit");
    tcase_set_timeout(tc, 300);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, savings_order_is_fp16_then_recomputation);
    tcase_add_test(tc, micro_batches_keep_the_requested_batch);
    tcase_add_test(tc, autobatch_is_the_largest_batch_that_fits);
    tcase_add_test(tc, nothing_fits_names_the_largest_tensor);
    tcase_add_test(tc, largest_allocation_limits_the_batch);
    tcase_add_test(tc, report_items_add_up);
    tcase_add_test(tc, fp16_by_default_on_opencl_only);
    tcase_add_test(tc, tiles_bound_the_loader_buffers);
    tcase_add_test(tc, segmentation_counts_masks_and_proto);
    tcase_add_test(tc, cache_and_costly_images_are_named_by_the_fit);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return yc_harness_run(suite(), false);
}
