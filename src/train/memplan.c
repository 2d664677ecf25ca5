/* The memory of a whole run (see memplan.h). */
#include "memplan.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph.h"
#include "log.h"
#include "slice_image.h"
#include "util.h"
#include "val.h"

void yc_mem_report_free(yc_mem_report *r)
{
    free(r->train_plan.blocks);
    free(r->val_plan.blocks);
    yc_graph_free(r->train_graph);
    memset(r, 0, sizeof *r);
}

static void add(yc_mem_report *r, const char *what, size_t bytes, bool device)
{
    if (r->nitems == YC_MEM_MAX_ITEMS || bytes == 0)
        return;
    r->items[r->nitems++] = (yc_mem_item){what, bytes, device};
}

/* Builds a graph only to take its plan and workspace (a copy of the plan goes to *out); the
 * graph is kept in *keep when keep is not NULL (its names stay valid), else freed. */
static int plan_graph(yc_model *m, int batch, int h, int w, const yc_graph_options *go,
                      yc_plan *out, size_t *ws, size_t *heads, yc_graph **keep)
{
    yc_graph *g = NULL;
    int st = yc_graph_new_opts(&g, m, batch, h, w, go);
    if (!st && m->be)
        st = yc_graph_prepare(g);
    if (st) {
        yc_graph_free(g);
        return st;
    }
    const yc_plan *p = yc_graph_plan(g);
    *out = *p;
    out->blocks = yc_malloc((size_t)p->nblocks * sizeof *out->blocks + 1, "memory plan");
    if (!out->blocks) {
        yc_graph_free(g);
        return YC_ENOMEM;
    }
    memcpy(out->blocks, p->blocks, (size_t)p->nblocks * sizeof *out->blocks);
    *ws = m->be ? yc_graph_workspace_bytes(g) : 0;
    /* the levels' outputs, and a segmentation model's Proto output (head nl) */
    *heads = 0;
    for (int l = 0; l < m->nl + (m->nm > 0); l++)
        *heads += yc_tensor_elems(yc_graph_head(g, l)) * sizeof(float);
    if (keep) {
        *keep = g;
    } else {
        for (int i = 0; i < p->nblocks; i++)
            out->blocks[i].name = NULL; /* the names belonged to the graph */
        yc_graph_free(g);
    }
    return YC_OK;
}

int yc_memplan(const yc_run_shape *rs, yc_mem_report *r)
{
    memset(r, 0, sizeof *r);
    yc_model *m = rs->m;
    yc_backend *be = m->be;
    r->host_device = be && be->iface->buffer_host_ptr != NULL;
    int gs = 32;
    for (int l = 0; l < m->nl; l++)
        if (m->stride[l] > gs)
            gs = (int)m->stride[l];
    int s = rs->imgsz, sv = rs->imgsz + gs;
    size_t train_heads = 0, val_heads = 0, train_ws = 0, val_ws = 0;
    int st = YC_OK;
    if (rs->train) {
        yc_graph_options go = {.mode = YC_GRAPH_TRAIN, .half = rs->half,
                               .recompute = rs->recompute};
        st = plan_graph(m, rs->batch, s, s, &go, &r->train_plan, &train_ws, &train_heads,
                        &r->train_graph);
    }
    if (!st && rs->val_batch > 0) {
        yc_graph_options go = {.mode = YC_GRAPH_EVAL};
        if (rs->val_full_bytes > 0)
            st = plan_graph(m, 1, s, s, &go, &r->val_plan, &val_ws, &val_heads, NULL);
        else
            st = plan_graph(m, rs->val_batch, sv, sv, &go, &r->val_plan, &val_ws, &val_heads,
                            NULL);
    }
    if (st) {
        yc_mem_report_free(r);
        return yc_error_context(st, "planning %s at %d with batch %d", m->cfg->name, s,
                                rs->batch);
    }
    /* the graphs share one arena: chunk by chunk the larger of the two */
    size_t arena = 0, lower = 0;
    int nchunks = r->train_plan.nchunks > r->val_plan.nchunks ? r->train_plan.nchunks
                                                             : r->val_plan.nchunks;
    for (int c = 0; c < nchunks; c++) {
        size_t a = c < r->train_plan.nchunks ? r->train_plan.chunk_bytes[c] : 0;
        size_t b = c < r->val_plan.nchunks ? r->val_plan.chunk_bytes[c] : 0;
        arena += a > b ? a : b;
    }
    lower = r->train_plan.lower_bound_bytes > r->val_plan.lower_bound_bytes
                ? r->train_plan.lower_bound_bytes
                : r->val_plan.lower_bound_bytes;
    r->workspace_bytes = train_ws > val_ws ? train_ws : val_ws;

    size_t P = m->param_elems * sizeof(float), S = m->state_elems * sizeof(float);
    add(r, "parameters", P, true);
    add(r, "BatchNorm statistics", S, true);
    if (rs->train) {
        add(r, "gradients", P, true);
        add(r, "optimizer state", rs->optimizer == YC_OPTIM_SGD ? P : 2 * P, true);
        add(r, "EMA (parameters and statistics)", P + S, true);
    }
    add(r, "activation arena", arena, true);
    add(r, "op workspace", r->workspace_bytes, true);

    /* host: the data path */
    size_t workers = (size_t)(rs->workers > 0 ? rs->workers : 1);
    size_t decode = rs->read_bytes;
    size_t s2 = (size_t)s * (size_t)s, sv2 = (size_t)sv * (size_t)sv;
    size_t tile_store = 0, tile_store_val = 0;
    int loader_batch = rs->loader_batch > rs->batch ? rs->loader_batch : rs->batch;
    if (rs->tile > 0) {
        /* a reader keeps the buffers of an image decoded whole (twice while an EXIF-rotated one
         * is turned) up to YC_SLICE_DECODE_MAX a side and, when some image is larger, of a band
         * of tile rows of the widest image plus the window being read; the windows of a batch
         * are kept while it is built, plus one read outside the batch */
        size_t t2 = 3 * (size_t)rs->tile * (size_t)rs->tile;
        size_t dw = (size_t)(rs->max_image_w < YC_SLICE_DECODE_MAX ? rs->max_image_w
                                                                    : YC_SLICE_DECODE_MAX);
        size_t dh = (size_t)(rs->max_image_h < YC_SLICE_DECODE_MAX ? rs->max_image_h
                                                                    : YC_SLICE_DECODE_MAX);
        size_t whole = 2 * 3 * dw * dh;
        bool large = rs->max_image_w > YC_SLICE_DECODE_MAX || rs->max_image_h > YC_SLICE_DECODE_MAX;
        size_t band = large ? 3 * (size_t)rs->tile * (size_t)rs->max_image_w + t2 : 0;
        decode = whole + band;
        tile_store = ((size_t)loader_batch + 1) * t2;
        tile_store_val = ((size_t)rs->val_batch + 1) * t2;
    }
    /* segmentation: the masks of a batch (floats of (s / ratio)^2 each), per image or per target */
    bool seg = m->nm > 0;
    size_t ratio = (size_t)(rs->mask_ratio > 0 ? rs->mask_ratio : 4);
    size_t per_image = (size_t)(rs->masks_per_image > 0 ? rs->masks_per_image : 1);
    size_t mask_train = seg ? ((size_t)s / ratio) * ((size_t)s / ratio) * sizeof(float) : 0;
    size_t mask_val = seg ? ((size_t)sv / ratio) * ((size_t)sv / ratio) * sizeof(float) : 0;
    if (rs->train && seg) {
        add(r, "training loader masks", (workers + 1) * (size_t)loader_batch * per_image *
                                            mask_train, false);
        /* per thread: the masks of the sample being built (and a mixup partner's) */
        add(r, "training loader mask buffers", workers * 2 * per_image * mask_train, false);
        /* segment_step.h: the heads, Proto and their gradients copied to the host, whatever the
         * device; the loss's scratch (loss_seg.c): one image's Proto gradient in double, the
         * masks resized to the prototypes' size, a row of logits */
        size_t proto_hw = ((size_t)s / 4) * ((size_t)s / 4);
        add(r, "segmentation heads and Proto on the host (training)", 2 * train_heads, false);
        add(r, "segmentation loss scratch",
            (size_t)m->nm * proto_hw * sizeof(double) +
                (size_t)rs->batch * per_image * proto_hw * sizeof(float) +
                4 * (size_t)s * sizeof(double), false);
    }
    if (rs->train) {
        add(r, "training loader ring", (workers + 1) * (size_t)loader_batch * 3 * s2, false);
        /* per thread: mosaic canvas 2s x 2s, tile, warped sample, mixup image, decode */
        add(r, "training loader buffers", workers * (21 * s2 + decode), false);
        add(r, "training tile windows", workers * tile_store, false);
    }
    if (rs->val_batch > 0 && rs->val_full_bytes > 0) {
        /* one image at a time, one window at a time (staging included) */
        add(r, "whole-image validation buffers", rs->val_full_bytes, false);
    } else if (rs->val_batch > 0) {
        /* the trainer's validation loader has one thread: two slots */
        add(r, "validation loader ring", 2 * (size_t)rs->val_batch * 3 * sv2, false);
        add(r, "validation loader masks", 2 * (size_t)rs->val_batch * per_image * mask_val, false);
        add(r, "validation loader buffers", 6 * sv2 + decode, false);
        add(r, "validation tile windows", tile_store_val, false);
        /* per thread decoded rows for NMS; kept detections of a batch */
        size_t rows = 0;
        for (int l = 0; l < m->nl; l++)
            rows += (size_t)m->na * (size_t)(sv / (int)m->stride[l]) * (sv / (int)m->stride[l]);
        add(r, "validation decode and NMS", workers * rows * (size_t)m->no * sizeof(float) +
                                                (size_t)rs->val_batch * 300 * 6 * sizeof(float),
            false);
    }
    if (!r->host_device) {
        /* the input: uint8 through the backend's two pinned upload slots and their device
         * copies, each as large as the larger batch; else float32 converted on the host */
        bool u8 = be && be->iface->write_u8_scaled;
        bool device_loss = be && be->iface->yolo_loss;
        bool val_batches = rs->val_batch > 0 && rs->val_full_bytes == 0;
        size_t in_train = rs->train ? (size_t)rs->batch * 3 * s2 : 0;
        size_t in_val = val_batches ? (size_t)rs->val_batch * 3 * sv2 : 0;
        if (u8) {
            size_t slot = in_train > in_val ? in_train : in_val;
            add(r, "input upload slots", 2 * slot, true);
            add(r, "input upload slots (pinned)", 2 * slot, false);
        }
        /* the heads: copied to the host where the loss runs there */
        /* (a segmentation step's head copies are counted above) */
        if (rs->train)
            add(r, "input and head staging (training)",
                (u8 ? 0 : in_train * sizeof(float)) +
                    (device_loss || seg ? 0 : 2 * train_heads), false);
        /* validation reads the heads back whole where the device does not filter them, or when
         * more rows pass the threshold than it keeps room for */
        if (val_batches)
            add(r, "input and head staging (validation)",
                (u8 ? 0 : in_val * sizeof(float)) + val_heads, false);
        if (val_batches && be && be->iface->detect_filter) {
            size_t rows = 0;
            for (int l = 0; l < m->nl; l++)
                rows += (size_t)m->na * (size_t)(sv / (int)m->stride[l]) * (sv / (int)m->stride[l]);
            size_t cap = yc_val_candidate_cap(rows, rs->val_batch);
            size_t row_bytes = ((size_t)m->no + 1) * sizeof(float);
            add(r, "validation candidate rows", cap * row_bytes, true);
            add(r, "validation candidate rows (host)",
                cap * (row_bytes + sizeof(uint64_t)), false);
        }
    }
    /* every thread's touched stack and its malloc arena's free pieces: measured on the CPU
     * backend as 5-6 MiB for 6 threads (bench/mem_bench.sh); counted as 1 MiB a thread for the
     * loader workers, the compute threads, the main thread and the validation loader */
    int compute = r->host_device && m->be->info.compute_units > 0 ? m->be->info.compute_units
                                                                   : yc_physical_cores();
    add(r, "--cache ram images", rs->cache_bytes, false);
    add(r, "thread stacks and allocator slack", (workers + (size_t)compute + 2) << 20, false);
    add(r, "process baseline (libraries, dataset index)", rs->baseline, false);

    for (int i = 0; i < r->nitems; i++) {
        if (r->items[i].device)
            r->device_bytes += r->items[i].bytes;
        else
            r->host_bytes += r->items[i].bytes;
    }
    r->peak_bytes = r->host_device ? r->device_bytes + r->host_bytes : r->host_bytes;
    r->lower_bound_bytes = r->peak_bytes - (r->host_device ? arena - lower : 0);
    if (!r->host_device)
        r->lower_bound_bytes = r->host_bytes;
    return YC_OK;
}

int yc_plan_largest(const yc_plan *p, int *out, int n)
{
    int k = 0;
    for (int i = 0; i < p->nblocks; i++) {
        /* insert i into the sorted top list when it belongs there */
        int j = k;
        if (k < n)
            k++;
        else if (p->blocks[i].size <= p->blocks[out[n - 1]].size)
            continue;
        else
            j = n - 1;
        while (j > 0 && p->blocks[out[j - 1]].size < p->blocks[i].size) {
            out[j] = out[j - 1];
            j--;
        }
        out[j] = i;
    }
    return k;
}

yc_half_policy yc_half_default(yc_half_policy requested, const yc_backend *be)
{
    if (requested != YC_HALF_AUTO || !be)
        return requested;
    bool opencl = be->iface->buffer_host_ptr == NULL;
    return opencl && be->info.fp16_storage ? YC_HALF_ON : YC_HALF_AUTO;
}

/* The peak of one candidate. */
static int try_fit(const yc_run_shape *base, bool half, bool recompute, int batch, size_t *peak)
{
    yc_run_shape rs = *base;
    rs.half = half;
    rs.recompute = recompute;
    rs.batch = batch;
    if (base->batch > 0)
        rs.loader_batch = base->batch;
    if (rs.val_batch > 0)
        rs.val_batch = 2 * batch;
    yc_mem_report r;
    int st = yc_memplan(&rs, &r);
    if (st == YC_ENOMEM && batch > 1) {
        /* a tensor larger than the device's largest allocation: this batch does not fit, a
         * smaller one may */
        yc_error_clear();
        *peak = SIZE_MAX;
        return YC_OK;
    }
    if (st)
        return st;
    *peak = r.peak_bytes;
    yc_mem_report_free(&r);
    return YC_OK;
}

static int accumulate_for(int nominal, int micro)
{
    double a = nominal / (double)micro;
    double r = floor(a + 0.5);
    if (r - a == 0.5 && fmod(r, 2.0) != 0.0)
        r -= 1.0; /* Python's round: half to even */
    return r < 1 ? 1 : (int)r;
}

int yc_memfit(const yc_run_shape *base, size_t limit, yc_half_policy half, int nominal,
              int max_batch, yc_mem_fit *fit)
{
    memset(fit, 0, sizeof *fit);
    bool can_half = half != YC_HALF_OFF && base->m->be && base->m->be->info.fp16_storage;
    int want = base->batch;
    char lim[32], got[32], need[32];
    yc_format_size(limit, lim, sizeof lim);
    /* storage steps in the order tried: as requested, FP16, FP16 + recomputation (without FP16:
     * as requested, recomputation) */
    typedef struct storage {
        bool half, recompute;
    } storage;
    storage steps[3] = {{half == YC_HALF_ON && can_half, false}, {true, false}, {true, true}};
    int nsteps = 3;
    if (!can_half) {
        steps[1] = (storage){false, true};
        nsteps = 2;
    }
    if (base->recompute) /* --recompute: every choice recomputes */
        for (int i = 0; i < nsteps; i++)
            steps[i].recompute = true;
    size_t peak = 0, first_peak = 0;
    int st;
    if (want > 0) {
        for (int i = 0; i < nsteps; i++) {
            st = try_fit(base, steps[i].half, steps[i].recompute, want, &peak);
            if (st == YC_EUNSUPPORTED && i > 0)
                continue; /* the backend cannot run this storage choice: try the next */
            if (st)
                return st;
            if (i == 0)
                first_peak = peak;
            if (peak <= limit) {
                fit->half = steps[i].half;
                fit->recompute = steps[i].recompute;
                fit->micro_batch = want;
                fit->micro_batches = 1;
                fit->last_micro = want;
                fit->accumulate = accumulate_for(nominal, want);
                fit->peak_bytes = peak;
                if (i == 0)
                    snprintf(fit->reason, sizeof fit->reason, "batch %d fits in %s: %s planned%s",
                             want, lim, yc_format_size(peak, got, sizeof got),
                             fit->half ? " with FP16 storage" : "");
                else
                    snprintf(fit->reason, sizeof fit->reason, "batch %d %s%s, the limit is "
                             "%s: %s%s (%s planned)", want,
                             first_peak == SIZE_MAX ? "has a tensor larger than the device's "
                                                      "largest allocation" : "needs ",
                             first_peak == SIZE_MAX ? ""
                                                    : yc_format_size(first_peak, need, sizeof need),
                             lim,
                             fit->half ? "FP16 storage" : "",
                             fit->recompute ? (fit->half ? " and recomputation" : "recomputation")
                                            : "",
                             yc_format_size(peak, got, sizeof got));
                return YC_OK;
            }
        }
    }
    /* the largest micro-batch that fits with every saving on (binary search: peak grows with
     * the batch) */
    bool h = steps[nsteps - 1].half, rc = steps[nsteps - 1].recompute;
    int hi = want > 0 ? want - 1 : max_batch, lo = 1, best = 0;
    size_t best_peak = 0;
    /* the most saving storage the backend can run */
    while ((st = try_fit(base, h, rc, 1, &peak)) == YC_EUNSUPPORTED && (h || rc)) {
        if (h)
            h = false;
        else
            rc = false;
    }
    if (st == YC_ENOMEM) {
        char why[1200];
        snprintf(why, sizeof why, "%s", yc_last_error());
        return yc_error_status(st, "%s: even batch 1 does not fit: use a smaller --img, a smaller "
                               "model, or a device that allows larger allocations", why);
    }
    if (st)
        return st;
    if (peak > limit) {
        char sz[32];
        /* a term of the plan that one choice of the user's holds: named with its remedy when the
         * run fits without it */
        if (base->cache_bytes > 0 && peak - base->cache_bytes <= limit)
            return yc_error_status(YC_ENOMEM, "--cache ram holds %s of decoded images, and "
                                   "with them %s does not fit in %s even with batch 1 (%s "
                                   "planned): use --cache disk, or no --cache",
                                   yc_format_size(base->cache_bytes, sz, sizeof sz),
                                   base->m->cfg->name, lim,
                                   yc_format_size(peak, got, sizeof got));
        size_t readers = (size_t)(base->workers > 0 ? base->workers : 1) +
                         (base->val_batch > 0 && base->val_full_bytes == 0 ? 1 : 0);
        size_t reads = base->tile > 0 ? 0 : readers * base->read_bytes;
        if (base->read_image && reads > 0 && peak - reads <= limit)
            return yc_error_status(YC_ENOMEM, "reading %s (%dx%d) takes %s in each of %zu loader "
                                   "threads, and with that %s does not fit in %s even with "
                                   "batch 1 (%s planned): train on windows of it with --tile "
                                   "SIZE, give fewer --workers, or leave it out of the dataset",
                                   base->read_image, base->read_image_w, base->read_image_h,
                                   yc_format_size(base->read_bytes, sz, sizeof sz), readers,
                                   base->m->cfg->name, lim,
                                   yc_format_size(peak, got, sizeof got));
        yc_run_shape rs = *base;
        rs.batch = 1;
        rs.half = h;
        rs.recompute = rc;
        yc_mem_report r;
        int largest = -1;
        char big[32] = "?";
        if (yc_memplan(&rs, &r) == YC_OK) {
            if (yc_plan_largest(&r.train_plan, &largest, 1) == 1)
                yc_format_size(r.train_plan.blocks[largest].size, big, sizeof big);
            yc_mem_report_free(&r);
        }
        return yc_error_status(YC_ENOMEM, "%s does not fit in %s even with batch 1 (%s planned%s; "
                               "its largest activation is %s): use a smaller --img, a smaller "
                               "model%s, or a device with more memory",
                               base->m->cfg->name, lim, yc_format_size(peak, got, sizeof got),
                               h ? ", FP16 storage and recomputation" : "", big,
                               want > 1 ? ", a smaller --batch (the loader holds whole batches)"
                                        : "");
    }
    best = 1;
    best_peak = peak;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        if ((st = try_fit(base, h, rc, mid, &peak)))
            return st;
        if (peak <= limit) {
            best = mid;
            best_peak = peak;
            lo = mid + 1;
        } else {
            hi = mid - 1;
        }
    }
    fit->half = h;
    fit->recompute = rc;
    fit->micro_batch = best;
    fit->peak_bytes = best_peak;
    if (want > 0) {
        /* the requested batch, cut into micro-batches: YOLOv5's accumulate for that batch */
        fit->accumulate = accumulate_for(nominal, want);
        fit->micro_batches = (want + best - 1) / best;
        fit->last_micro = want - (fit->micro_batches - 1) * best;
        char split[64];
        if (fit->last_micro == best)
            snprintf(split, sizeof split, "%d micro-batches of %d", fit->micro_batches, best);
        else if (fit->micro_batches == 2)
            snprintf(split, sizeof split, "micro-batches of %d + %d", best, fit->last_micro);
        else
            snprintf(split, sizeof split, "%d micro-batches of %d + 1 of %d",
                     fit->micro_batches - 1, best, fit->last_micro);
        /* SIZE_MAX: a tensor of the whole batch exceeds the device's largest allocation */
        char needs[96];
        if (first_peak == SIZE_MAX)
            snprintf(needs, sizeof needs, "has a tensor larger than the device's largest "
                     "allocation");
        else
            snprintf(needs, sizeof needs, "needs %s",
                     yc_format_size(first_peak, need, sizeof need));
        snprintf(fit->reason, sizeof fit->reason, "batch %d %s, the limit is %s: %s%s per "
                 "batch, accumulate %d: %d images per optimizer step as YOLOv5 (%s planned)",
                 want, needs, lim,
                 h ? "FP16 storage, recomputation and " : "recomputation and ", split,
                 fit->accumulate, want * fit->accumulate,
                 yc_format_size(best_peak, got, sizeof got));
    } else {
        fit->accumulate = accumulate_for(nominal, best);
        fit->micro_batches = 1;
        fit->last_micro = best;
    }
    if (want <= 0)
        snprintf(fit->reason, sizeof fit->reason, "AutoBatch: batch %d is the largest that fits "
                 "in %s (%s planned%s), accumulate %d", best, lim,
                 yc_format_size(best_peak, got, sizeof got),
                 h ? ", FP16 storage and recomputation" : ", recomputation", fit->accumulate);
    return YC_OK;
}
