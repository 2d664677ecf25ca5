/* YOLOv5's loss on the OpenCL device (yc_backend_i.yolo_loss; kernels in loss.cl).
 *
 * The host makes the assignments (src/nn/loss.c's build_targets); here they are ordered by cell
 * (a stable sort: entries of one cell stay in assignment order, so the last one sets the cell's
 * objectness target as on the host), packed level after level into one staging area (entry
 * integers, entry floats, the first entry of each cell, the ranges loss_sums reads) and written
 * to the device without waiting.  The staging is reused by the next call: if no synchronize
 * happened since the last write, that write is waited for first (a micro-batch's parts).
 *
 * Launches per call: per level a fill of the objectness targets, loss_cells and loss_obj, then
 * one loss_sums, the staging's writes (4) and the read of the sums. */
#include "cl_internal.h"

#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "util.h"

/* Grows a device buffer of the loss to at least `bytes`. */
static int grow_mem(yc_cl_ctx *c, cl_mem *m, size_t *cap, size_t bytes)
{
    if (bytes <= *cap && *m)
        return YC_OK;
    size_t n = bytes < 4096 ? 4096 : bytes;
    if (n < 2 * *cap)
        n = 2 * *cap;
    if (*m)
        clReleaseMemObject(*m);
    cl_int err;
    *m = clCreateBuffer(c->context, CL_MEM_READ_WRITE, n, NULL, &err);
    if (err != CL_SUCCESS) {
        *m = NULL;
        *cap = 0;
        return yc_error_context(yc_cl_fail("clCreateBuffer", err), "loss buffers (%zu bytes)", n);
    }
    *cap = n;
    return YC_OK;
}

/* Grows a host staging array to at least `bytes`. */
static int grow_host(void **p, size_t *cap, size_t bytes)
{
    if (bytes <= *cap)
        return YC_OK;
    size_t n = bytes < 4096 ? 4096 : bytes;
    if (n < 2 * *cap)
        n = 2 * *cap;
    void *q = yc_realloc(*p, n, "loss staging");
    if (!q)
        return YC_ENOMEM;
    *p = q;
    *cap = n;
    return YC_OK;
}

/* The sort keys of one level's entries: cell key then entry index (a stable order). */
typedef struct entry_key {
    long long cell;
    int index;
} entry_key;

static int cmp_key(const void *pa, const void *pb)
{
    const entry_key *a = pa, *b = pb;
    if (a->cell != b->cell)
        return a->cell < b->cell ? -1 : 1;
    return (a->index > b->index) - (a->index < b->index);
}

void yc_cl_loss_release(yc_cl_ctx *c)
{
    yc_cl_loss_state *s = &c->loss;
    cl_mem mems[] = {s->ent_i, s->ent_f, s->cell_first, s->ranges, s->tobj, s->ebox, s->ecls,
                     s->part};
    for (size_t i = 0; i < sizeof mems / sizeof mems[0]; i++)
        if (mems[i])
            clReleaseMemObject(mems[i]);
    if (s->written)
        clReleaseEvent(s->written);
    free(s->h_ent_i);
    free(s->h_ent_f);
    free(s->h_cell_first);
    free(s->keys);
    memset(s, 0, sizeof *s);
}

/* Packs the levels' entries, cell by cell, into the staging; fills ncells[], the cells' offsets
 * and the ranges of loss_sums (part offsets are set by the caller). */
static int stage(yc_cl_ctx *c, const yc_yolo_loss *l, int *ncells, int *cell_off, int *ranges)
{
    yc_cl_loss_state *s = &c->loss;
    size_t total = 0, cells_max = 0;
    for (int k = 0; k < l->nl; k++) {
        total += (size_t)l->level[k].n;
        cells_max += (size_t)l->level[k].n + 1;
    }
    int st = grow_host((void **)&s->h_ent_i, &s->h_ent_i_cap, (total + 1) * 5 * sizeof(int));
    if (!st)
        st = grow_host((void **)&s->h_ent_f, &s->h_ent_f_cap, (total + 1) * 6 * sizeof(float));
    if (!st)
        st = grow_host((void **)&s->h_cell_first, &s->h_cell_first_cap, (cells_max + 1) * sizeof(int));
    if (st)
        return st;
    int e0 = 0, c0 = 0;
    for (int k = 0; k < l->nl; k++) {
        const yc_yolo_loss_level *v = &l->level[k];
        const int ny = v->head->h, nx = v->head->w;
        if ((st = grow_host((void **)&s->keys, &s->keys_cap, ((size_t)v->n + 1) * sizeof(entry_key))))
            return st;
        for (int i = 0; i < v->n; i++)
            s->keys[i] = (entry_key){
                (((long long)v->b[i] * l->na + v->a[i]) * ny + v->gj[i]) * nx + v->gi[i], i};
        qsort(s->keys, (size_t)v->n, sizeof *s->keys, cmp_key);
        cell_off[k] = c0;
        int nc = 0;
        for (int j = 0; j < v->n; j++) {
            int i = s->keys[j].index, e = e0 + j;
            if (j == 0 || s->keys[j].cell != s->keys[j - 1].cell)
                s->h_cell_first[c0 + nc++] = e;
            int *ei = s->h_ent_i + 5 * (size_t)e;
            ei[0] = v->b[i], ei[1] = v->a[i], ei[2] = v->gj[i], ei[3] = v->gi[i], ei[4] = v->cls[i];
            float *ef = s->h_ent_f + 6 * (size_t)e;
            memcpy(ef, v->tbox + 4 * (size_t)i, 4 * sizeof(float));
            memcpy(ef + 4, v->anch + 2 * (size_t)i, 2 * sizeof(float));
        }
        s->h_cell_first[c0 + nc] = e0 + v->n;
        ncells[k] = nc;
        ranges[4 * k] = e0;
        ranges[4 * k + 1] = v->n;
        e0 += v->n;
        c0 += nc + 1;
    }
    s->staged_entries = (size_t)e0;
    s->staged_cells = (size_t)c0;
    return YC_OK;
}

int yc_cl_yolo_loss(yc_cl_ctx *c, const yc_yolo_loss *l)
{
    yc_cl_loss_state *s = &c->loss;
    if (l->nl < 1 || l->nl > 8)
        return yc_error_status(YC_EFORMAT, "opencl loss: %d levels", l->nl);
    /* the staging is about to change: its last write must be done */
    if (s->written) {
        if (s->written_at == c->syncs) {
            cl_int err = clWaitForEvents(1, &s->written);
            c->count->host_waits++;
            if (err != CL_SUCCESS)
                return yc_cl_fail("clWaitForEvents (loss staging)", err);
        }
        clReleaseEvent(s->written);
        s->written = NULL;
    }
    int ncells[8], cell_off[8], ranges[4 * 8];
    int st = stage(c, l, ncells, cell_off, ranges);
    if (st)
        return st;
    /* objectness partial sums: one per work-group of loss_obj */
    yc_cl_args a;
    if ((st = yc_cl_begin(c, YC_K_LOSS_OBJ, &a)))
        return st;
    size_t local = a.local, parts = 0, tobj_max = 0;
    int part_off[8];
    for (int k = 0; k < l->nl; k++) {
        const yc_tensor *h = l->level[k].head;
        size_t cells = (size_t)l->batch * l->na * h->h * h->w;
        part_off[k] = (int)parts;
        ranges[4 * k + 2] = (int)parts;
        ranges[4 * k + 3] = (int)((cells + local - 1) / local);
        parts += (size_t)ranges[4 * k + 3];
        tobj_max = cells > tobj_max ? cells : tobj_max;
    }
    size_t ne = s->staged_entries + 1, ncl = s->staged_cells + 1;
    if ((st = grow_mem(c, &s->ent_i, &s->ent_i_cap, ne * 5 * sizeof(int))) ||
        (st = grow_mem(c, &s->ent_f, &s->ent_f_cap, ne * 6 * sizeof(float))) ||
        (st = grow_mem(c, &s->cell_first, &s->cell_first_cap, ncl * sizeof(int))) ||
        (st = grow_mem(c, &s->ranges, &s->ranges_cap, sizeof ranges)) ||
        (st = grow_mem(c, &s->tobj, &s->tobj_cap, tobj_max * sizeof(float))) ||
        (st = grow_mem(c, &s->ebox, &s->ebox_cap, ne * sizeof(float))) ||
        (st = grow_mem(c, &s->ecls, &s->ecls_cap, ne * sizeof(float))) ||
        (st = grow_mem(c, &s->part, &s->part_cap, (parts + 1) * 2 * sizeof(float) + 2 * 3 * 8 * sizeof(float))))
        return st;
    memcpy(s->h_ranges, ranges, sizeof ranges);
    struct {
        cl_mem m;
        const void *p;
        size_t bytes;
    } w[4] = {{s->ent_i, s->h_ent_i, s->staged_entries * 5 * sizeof(int)},
              {s->ent_f, s->h_ent_f, s->staged_entries * 6 * sizeof(float)},
              {s->cell_first, s->h_cell_first, s->staged_cells * sizeof(int)},
              {s->ranges, s->h_ranges, sizeof s->h_ranges}};
    for (int i = 0; i < 4; i++) {
        if (!w[i].bytes)
            continue;
        cl_event *ev = i == 3 ? &s->written : NULL;
        cl_int err = clEnqueueWriteBuffer(c->queue, w[i].m, CL_FALSE, 0, w[i].bytes, w[i].p, 0, NULL, ev);
        c->count->bytes_to_device += w[i].bytes;
        if (err != CL_SUCCESS) {
            /* the writes queued before this one read the staging, which the next call rewrites */
            clFinish(c->queue);
            return yc_cl_fail("clEnqueueWriteBuffer (loss assignments)", err);
        }
    }
    s->written_at = c->syncs;
    /* the sums live after the partial sums, in the same buffer */
    size_t sums_off = (parts + 1) * 2 * sizeof(float);
    for (int k = 0; k < l->nl && !st; k++) {
        const yc_yolo_loss_level *v = &l->level[k];
        const yc_tensor *h = v->head;
        size_t cells = (size_t)l->batch * l->na * h->h * h->w;
        float minus1 = -1.0f;
        cl_int err = clEnqueueFillBuffer(c->queue, s->tobj, &minus1, sizeof minus1, 0,
                                         cells * sizeof(float), 0, NULL, NULL);
        c->count->launches++;
        if (err != CL_SUCCESS)
            return yc_cl_fail("clEnqueueFillBuffer (objectness targets)", err);
        if (ncells[k] > 0) {
            if ((st = yc_cl_begin(c, YC_K_LOSS_CELLS, &a)))
                return st;
            yc_cl_arg_tensor(&a, h);
            yc_cl_arg_tensor(&a, v->grad ? v->grad : h);
            yc_cl_arg_mem(&a, s->ent_i);
            yc_cl_arg_mem(&a, s->ent_f);
            yc_cl_arg_mem(&a, s->cell_first);
            yc_cl_arg_uint(&a, (unsigned)cell_off[k]);
            yc_cl_arg_uint(&a, (unsigned)ncells[k]);
            yc_cl_arg_mem(&a, s->tobj);
            yc_cl_arg_mem(&a, s->ebox);
            yc_cl_arg_mem(&a, s->ecls);
            yc_cl_arg_int(&a, l->na);
            yc_cl_arg_int(&a, l->nc);
            yc_cl_arg_int(&a, h->h);
            yc_cl_arg_int(&a, h->w);
            yc_cl_arg_float(&a, v->gbox);
            yc_cl_arg_float(&a, v->gcls);
            yc_cl_arg_float(&a, l->cp);
            yc_cl_arg_float(&a, l->cn);
            yc_cl_arg_float(&a, l->cls_pw);
            yc_cl_arg_float(&a, l->fl_gamma);
            yc_cl_arg_int(&a, v->grad != NULL);
            size_t g[1] = {(size_t)ncells[k]};
            if ((st = yc_cl_run(&a, 1, g, false)))
                return st;
        }
        if ((st = yc_cl_begin(c, YC_K_LOSS_OBJ, &a)))
            return st;
        yc_cl_arg_tensor(&a, h);
        yc_cl_arg_tensor(&a, v->grad ? v->grad : h);
        yc_cl_arg_mem(&a, s->tobj);
        yc_cl_arg_int(&a, l->batch);
        yc_cl_arg_int(&a, l->na);
        yc_cl_arg_int(&a, l->nc);
        yc_cl_arg_int(&a, h->h);
        yc_cl_arg_int(&a, h->w);
        yc_cl_arg_float(&a, v->gobj);
        yc_cl_arg_float(&a, l->obj_pw);
        yc_cl_arg_float(&a, l->fl_gamma);
        yc_cl_arg_int(&a, v->grad != NULL);
        yc_cl_arg_mem(&a, s->part);
        yc_cl_arg_uint(&a, (unsigned)part_off[k]);
        yc_cl_arg_local(&a, a.local * sizeof(cl_float2));
        size_t groups[1] = {(size_t)ranges[4 * k + 3]};
        st = yc_cl_run(&a, 1, groups, true);
    }
    if (st || (st = yc_cl_begin(c, YC_K_LOSS_SUMS, &a)))
        return st;
    yc_cl_arg_mem(&a, s->ebox);
    yc_cl_arg_mem(&a, s->ecls);
    yc_cl_arg_mem(&a, s->part);
    yc_cl_arg_mem(&a, s->ranges);
    yc_cl_arg_at(&a, s->part, sums_off);
    yc_cl_arg_local(&a, a.local * sizeof(cl_float2));
    size_t groups[1] = {(size_t)l->nl};
    if ((st = yc_cl_run(&a, 1, groups, true)))
        return st;
    size_t bytes = (size_t)l->nl * 3 * 2 * sizeof(float);
    cl_int err = clEnqueueReadBuffer(c->queue, s->part, CL_FALSE, sums_off, bytes, l->sums, 0, NULL, NULL);
    c->count->bytes_from_device += bytes;
    return err == CL_SUCCESS ? YC_OK : yc_cl_fail("clEnqueueReadBuffer (loss sums)", err);
}
