/* Convolutions of the OpenCL backend.
 *
 * By default each pass is one implicit GEMM over the whole batch (igemm.cl): forward and
 * backward-data one launch each, backward-filter one launch, plus one that adds the partial sums
 * of its split reduction when it is split, plus the Detect bias gradient.  The workspace holds
 * the partial sums of backward-filter: splits x K x CRS floats, the number of splits chosen so
 * that the grid has about four work-groups per compute unit (at most one split per 4 TK of the
 * reduction).
 *
 * YOLOCL_CL_CONV=clblast selects the earlier implementation, kept for comparison on devices:
 * im2col / col2im (conv.cl) around CLBlast's SGEMM, one GEMM per image, as the CPU backend
 * computes them (cpu/conv.c):
 *   forward         y[K, PQ]     = W[K, CRS] * col(x)[CRS, PQ]  (+ b[k] per row)
 *   backward-data   col[CRS, PQ] = W^T[CRS, K] * dy[K, PQ];  dx (=|+=) col2im(col)
 *   backward-filter dW[K, CRS]  += dy[K, PQ] * col(x)^T[PQ, CRS];  db[k] += sum dy[k, :]
 * A 1x1 convolution with stride 1 and no padding ("direct") uses the FP32 image itself as its
 * column matrix (forward, backward-filter) or as the GEMM's output (backward-data).  FP16
 * activations go through im2col / col2im / bias_store, which convert; the GEMM sees FP32 only.
 * CLBlast's temporary buffer (the largest CLBlastSGemmTempBufferSize of the op's GEMM) is a buffer
 * of the context's own.  The workspace, from its start (offsets relative to the span, regions
 * 256-byte aligned):
 *   the column matrix of one image (CRS * PQ floats) unless direct;
 *   forward with an FP16 output: the GEMM's FP32 result for one image (K * PQ floats). */
#include "cl_internal.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "log.h"
#include "util.h"

/* Shapes of one convolution. */
typedef struct geom {
    /* x (N,C,H,W), W (K,C,R,S), y (N,K,P,Q) */
    int N, C, H, W, K, R, S, P, Q;
    /* strides and padding */
    int sh, sw, ph, pw;
    /* C*R*S and P*Q */
    size_t crs, pq;
    /* 1x1, stride 1, no padding, and the image the GEMM uses in place is FP32 */
    bool direct;
} geom;

/* Where the regions of the workspace lie, relative to the span's start. */
typedef struct layout {
    /* largest temporary buffer of the op's GEMMs (0: none; the context holds it) */
    size_t temp;
    /* column matrix and FP32 output image (size 0 when unused) */
    size_t col_off, col_bytes, tmp_off, tmp_bytes;
    /* bytes in all */
    size_t total;
} layout;

static geom make_geom(const yc_op *op)
{
    /* x is also the activation a direct GEMM reads (forward, backward-filter) or writes as is */
    const yc_tensor *x, *w, *y;
    switch (op->kind) {
    case YC_OP_CONV2D:
        x = op->src[0], w = op->src[1], y = op->dst[0];
        break;
    case YC_OP_CONV2D_BWD_DATA:
        x = op->dst[0], w = op->src[1], y = op->src[0];
        break;
    default:
        x = op->src[0], w = op->dst[0], y = op->src[1];
        break;
    }
    geom g = {
        .N = x->n, .C = x->c, .H = x->h, .W = x->w, .K = w->n, .R = w->h, .S = w->w, .P = y->h, .Q = y->w,
        .sh = op->p.conv.stride_h, .sw = op->p.conv.stride_w, .ph = op->p.conv.pad_h, .pw = op->p.conv.pad_w,
    };
    g.crs = (size_t)g.C * g.R * g.S;
    g.pq = (size_t)g.P * g.Q;
    g.direct = g.R == 1 && g.S == 1 && g.sh == 1 && g.sw == 1 && g.ph == 0 && g.pw == 0 && x->type == YC_F32;
    return g;
}

/* The GEMM of one image (matrices and sizes; buffers and offsets filled in by the caller). */
static yc_cl_gemm image_gemm(const yc_op *op, const geom *g)
{
    yc_cl_gemm m = {.alpha = 1.0f};
    switch (op->kind) {
    case YC_OP_CONV2D:
        m.m = (size_t)g->K, m.n = g->pq, m.k = g->crs;
        m.lda = g->crs, m.ldb = g->pq, m.ldc = g->pq;
        break;
    case YC_OP_CONV2D_BWD_DATA:
        m.ta = true;
        m.m = g->crs, m.n = g->pq, m.k = (size_t)g->K;
        m.lda = g->crs, m.ldb = g->pq, m.ldc = g->pq;
        m.beta = g->direct ? (float)op->accumulate : 0.0f;
        break;
    default:
        m.tb = true;
        m.m = (size_t)g->K, m.n = g->crs, m.k = g->pq;
        m.lda = g->pq, m.ldb = g->pq, m.ldc = g->crs;
        m.beta = 1.0f;
        break;
    }
    return m;
}

static int make_layout(yc_cl_ctx *c, const yc_op *op, const geom *g, layout *L)
{
    *L = (layout){0};
    yc_cl_gemm m = image_gemm(op, g);
    /* nonzero offsets: the largest temporary buffer any placement needs */
    m.a_off = m.b_off = m.c_off = 1;
    int st = yc_cl_gemm_temp_size(c, &m, &L->temp);
    if (st)
        return st;
    L->col_off = 0;
    L->col_bytes = g->direct ? 0 : g->crs * g->pq * sizeof(float);
    L->tmp_off = yc_align_up(L->col_off + L->col_bytes, 256);
    L->tmp_bytes = op->kind == YC_OP_CONV2D && op->dst[0]->type != YC_F32 ? (size_t)g->K * g->pq * sizeof(float) : 0;
    L->total = L->tmp_bytes ? L->tmp_off + L->tmp_bytes : L->col_off + L->col_bytes;
    return YC_OK;
}

/* db[k] += the sum of dy over channel k of every image (the Detect convolutions' bias). */
static int bias_grad(yc_cl_ctx *c, const yc_tensor *dy, const yc_tensor *db, const geom *g)
{
    yc_cl_args a;
    int st = yc_cl_begin(c, YC_K_BIAS_GRAD, &a);
    if (st)
        return st;
    yc_cl_arg_tensor(&a, dy);
    yc_cl_arg_param(&a, db);
    yc_cl_arg_uint(&a, (unsigned)g->N);
    yc_cl_arg_uint(&a, (unsigned)g->pq);
    yc_cl_arg_local(&a, a.local * sizeof(cl_float2));
    size_t groups[1] = {(size_t)g->K};
    return yc_cl_run(&a, 1, groups, true);
}

/* ---- implicit GEMMs (igemm.cl) ------------------------------------------------------------ */

/* igemm.cl's work-group size, whatever the tile. */
enum { IG_WG = YC_CL_IGEMM_WG };

size_t yc_cl_igemm_local_bytes(int t)
{
    return (size_t)yc_cl_tiles[t].tk * (size_t)(yc_cl_tiles[t].tm + yc_cl_tiles[t].tn) *
           sizeof(float);
}

bool yc_cl_igemm_admits(size_t max_work_group, size_t local_mem)
{
    return max_work_group >= IG_WG && local_mem >= yc_cl_igemm_local_bytes(0);
}

int yc_cl_conv_pass(const yc_op *op)
{
    return op->kind == YC_OP_CONV2D ? 0 : op->kind == YC_OP_CONV2D_BWD_DATA ? 1 : 2;
}

/* The tuning key of a convolution: its pass, shape and storage. */
static yc_cl_conv_key tuned_key(const yc_op *op, const geom *g)
{
    const yc_tensor *in = op->src[0], *out = op->dst[0];
    return (yc_cl_conv_key){.pass = yc_cl_conv_pass(op), .n = g->N, .c = g->C, .h = g->H,
                            .w = g->W, .k = g->K, .r = g->R, .s = g->S, .sh = g->sh, .sw = g->sw,
                            .ph = g->ph, .pw = g->pw, .half_in = in->type == YC_F16,
                            .half_out = out->type == YC_F16};
}

yc_cl_conv_key yc_cl_conv_key_of(const yc_op *op)
{
    geom g = make_geom(op);
    return tuned_key(op, &g);
}

bool yc_cl_conv_key_equal(const yc_cl_conv_key *a, const yc_cl_conv_key *b)
{
    return a->pass == b->pass && a->n == b->n && a->c == b->c && a->h == b->h && a->w == b->w &&
           a->k == b->k && a->r == b->r && a->s == b->s && a->sh == b->sh && a->sw == b->sw &&
           a->ph == b->ph && a->pw == b->pw && a->half_in == b->half_in &&
           a->half_out == b->half_out;
}

/* The tile a convolution runs with: the forced one; the tuned one of its pass, shape and storage;
 * else the tuned one of the same pass, filter and storage at the nearest number of input pixels
 * of the batch (validation's batches, detection's single images, a last smaller batch and other
 * image sizes take the choice made for the training step); else the default, tile 0. */
static int conv_tile(const yc_cl_ctx *c, const yc_op *op, const geom *g)
{
    if (c->force_tile >= 0)
        return c->force_tile;
    yc_cl_conv_key key = tuned_key(op, g);
    int near = -1;
    double near_dist = 0;
    const double pixels = (double)key.n * key.h * key.w;
    for (int i = 0; i < c->ntuned; i++) {
        const yc_cl_conv_key *t = &c->tuned[i].key;
        if (yc_cl_conv_key_equal(t, &key))
            return c->tuned[i].tile;
        if (t->pass != key.pass || t->c != key.c || t->k != key.k || t->r != key.r ||
            t->s != key.s || t->sh != key.sh || t->sw != key.sw || t->ph != key.ph ||
            t->pw != key.pw || t->half_in != key.half_in || t->half_out != key.half_out)
            continue;
        double dist = fabs(log(pixels / ((double)t->n * t->h * t->w)));
        if (near < 0 || dist < near_dist) {
            near = i;
            near_dist = dist;
        }
    }
    return near >= 0 ? c->tuned[near].tile : 0;
}

int yc_cl_tile_count(void)
{
    return YC_CL_NTILES;
}

void yc_cl_tile_size(int t, int *tm, int *tn, int *tk)
{
    *tm = yc_cl_tiles[t].tm, *tn = yc_cl_tiles[t].tn, *tk = yc_cl_tiles[t].tk;
}

int yc_cl_conv_tile_of(yc_backend *be, const yc_op *op)
{
    geom g = make_geom(op);
    return conv_tile(be->ctx, op, &g);
}

void yc_cl_force_tile(yc_backend *be, int t)
{
    yc_cl_ctx *c = be->ctx;
    c->force_tile = t >= 0 && t < YC_CL_NTILES ? t : -1;
}

/* The split of backward-filter's reduction over N*P*Q for tile t: about four work-groups per
 * compute unit in all, each chunk a multiple of TK and at least 4 TK long. */
static void filter_split(const yc_cl_ctx *c, const geom *g, int t, int *splits, int *chunk)
{
    const yc_cl_tile *tl = &yc_cl_tiles[t];
    size_t tiles = (size_t)((g->K + tl->tm - 1) / tl->tm) * ((g->crs + tl->tn - 1) / tl->tn);
    size_t npq = (size_t)g->N * g->pq, cus = (size_t)(c->desc.info.compute_units > 0
                                                         ? c->desc.info.compute_units : 1);
    size_t want = (4 * cus + tiles - 1) / tiles, most = npq / (4 * (size_t)tl->tk);
    size_t n = want < most ? want : most;
    if (n < 1)
        n = 1;
    if (n > 4096)
        n = 4096;
    size_t ch = (npq + n - 1) / n;
    ch = (ch + tl->tk - 1) / tl->tk * tl->tk;
    *chunk = (int)ch;
    *splits = (int)((npq + ch - 1) / ch);
}

static size_t igemm_workspace(const yc_cl_ctx *c, const yc_op *op, const geom *g, int t)
{
    if (op->kind != YC_OP_CONV2D_BWD_FILTER)
        return 0;
    int splits, chunk;
    filter_split(c, g, t, &splits, &chunk);
    return splits > 1 ? (size_t)splits * g->K * g->crs * sizeof(float) : 0;
}

size_t yc_cl_conv_workspace_max(yc_cl_ctx *c, const yc_op *op)
{
    geom g = make_geom(op);
    size_t most = 0;
    for (int t = 0; t < YC_CL_NTILES; t++) {
        size_t w = igemm_workspace(c, op, &g, t);
        most = w > most ? w : most;
    }
    return most;
}

/* Starts an igemm.cl kernel of tile t, which must run with work-groups of IG_WG. */
static int igemm_begin(yc_cl_ctx *c, int t, yc_cl_igemm_kid which, yc_cl_args *a)
{
    int st = yc_cl_begin_igemm(c, t, which, a);
    if (!st && which != YC_IG_REDUCE && a->local != IG_WG)
        st = yc_error_status(YC_EUNSUPPORTED, "opencl: %s needs work-groups of %d on %s, which "
                             "allows %zu for it: run with YOLOCL_CL_CONV=clblast to use CLBlast's "
                             "GEMMs for the convolutions", a->name, IG_WG, c->desc.info.name,
                             a->local);
    return st;
}

/* The shape arguments every igemm.cl kernel ends with. */
static void shape_args(yc_cl_args *a, const geom *g)
{
    int v[] = {g->N, g->C, g->H, g->W, g->K, g->R, g->S, g->P, g->Q, g->sh, g->sw, g->ph, g->pw};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        yc_cl_arg_int(a, v[i]);
}

static int igemm_fwd(yc_cl_ctx *c, const yc_op *op, const geom *g, int t)
{
    const yc_tensor *x = op->src[0], *w = op->src[1], *b = op->src[2], *y = op->dst[0];
    const yc_cl_tile *tl = &yc_cl_tiles[t];
    yc_cl_args a;
    int st = igemm_begin(c, t, YC_IG_FWD, &a);
    if (st)
        return st;
    yc_cl_arg_tensor(&a, x);
    yc_cl_arg_param(&a, w);
    yc_cl_arg_param(&a, b ? b : w);
    yc_cl_arg_int(&a, b != NULL);
    yc_cl_arg_tensor(&a, y);
    shape_args(&a, g);
    size_t groups[2] = {((size_t)g->N * g->pq + tl->tn - 1) / tl->tn,
                        (size_t)(g->K + tl->tm - 1) / tl->tm};
    return yc_cl_run(&a, 2, groups, true);
}

static int igemm_bwd_data(yc_cl_ctx *c, const yc_op *op, const geom *g, int t)
{
    const yc_tensor *dy = op->src[0], *w = op->src[1], *dx = op->dst[0];
    const yc_cl_tile *tl = &yc_cl_tiles[t];
    yc_cl_args a;
    int st = igemm_begin(c, t, YC_IG_BWD_DATA, &a);
    if (st)
        return st;
    yc_cl_arg_tensor(&a, dy);
    yc_cl_arg_param(&a, w);
    yc_cl_arg_tensor(&a, dx);
    yc_cl_arg_int(&a, op->accumulate);
    shape_args(&a, g);
    /* one grid row per phase of the stride, as many columns as its largest phase has pixels */
    size_t hp = (size_t)(g->H + g->sh - 1) / g->sh, wp = (size_t)(g->W + g->sw - 1) / g->sw;
    size_t groups[3] = {((size_t)g->N * hp * wp + tl->tn - 1) / tl->tn,
                        (size_t)(g->C + tl->tm - 1) / tl->tm, (size_t)g->sh * g->sw};
    return yc_cl_run(&a, 3, groups, true);
}

static int igemm_bwd_filter(yc_cl_ctx *c, const yc_op *op, const geom *g, int t, yc_span ws)
{
    const yc_tensor *x = op->src[0], *dy = op->src[1], *dw = op->dst[0], *db = op->dst[1];
    const yc_cl_tile *tl = &yc_cl_tiles[t];
    int splits, chunk;
    filter_split(c, g, t, &splits, &chunk);
    cl_mem part = splits > 1 ? ws.buf->mem : dw->buf->mem;
    size_t part_off = splits > 1 ? ws.offset : dw->offset;
    yc_cl_args a;
    int st = igemm_begin(c, t, YC_IG_BWD_FILTER, &a);
    if (st)
        return st;
    yc_cl_arg_tensor(&a, x);
    yc_cl_arg_tensor(&a, dy);
    yc_cl_arg_param(&a, dw);
    yc_cl_arg_at(&a, part, part_off);
    yc_cl_arg_int(&a, splits);
    yc_cl_arg_int(&a, chunk);
    shape_args(&a, g);
    size_t groups[3] = {(g->crs + tl->tn - 1) / tl->tn, (size_t)(g->K + tl->tm - 1) / tl->tm,
                        (size_t)splits};
    if ((st = yc_cl_run(&a, 3, groups, true)))
        return st;
    if (splits > 1) {
        if ((st = igemm_begin(c, 0, YC_IG_REDUCE, &a)))
            return st;
        yc_cl_arg_at(&a, part, part_off);
        yc_cl_arg_param(&a, dw);
        yc_cl_arg_int(&a, splits);
        yc_cl_arg_uint(&a, (unsigned)((size_t)g->K * g->crs));
        size_t global[1] = {(size_t)g->K * g->crs};
        if ((st = yc_cl_run(&a, 1, global, false)))
            return st;
    }
    return db ? bias_grad(c, dy, db, g) : YC_OK;
}

int yc_cl_conv_workspace(yc_cl_ctx *c, const yc_op *op, size_t *bytes)
{
    geom g = make_geom(op);
    if (!c->conv_clblast) {
        *bytes = igemm_workspace(c, op, &g, conv_tile(c, op, &g));
        return YC_OK;
    }
    layout L;
    int st = make_layout(c, op, &g, &L);
    *bytes = st ? 0 : L.total;
    return st;
}

/* CLBlast's temporary buffer: one of the context's own, grown to the largest an op needs (never
 * a sub-buffer of a buffer the same GEMM reads or writes, which the OpenCL specification leaves
 * undefined and AMD's indirect GEMM path would hit). */
static int temp_buffer(yc_cl_ctx *c, const layout *L, cl_mem *out)
{
    *out = NULL;
    if (!L->temp)
        return YC_OK;
    if (!c->blast_temp || c->blast_temp_size < L->temp) {
        if (c->blast_temp)
            clReleaseMemObject(c->blast_temp);
        cl_int err;
        c->blast_temp = clCreateBuffer(c->context, CL_MEM_READ_WRITE, L->temp, NULL, &err);
        if (err != CL_SUCCESS) {
            c->blast_temp = NULL;
            c->blast_temp_size = 0;
            return yc_error_context(yc_cl_fail("clCreateBuffer", err),
                                    "CLBlast's temporary buffer (%zu bytes)", L->temp);
        }
        c->blast_temp_size = L->temp;
    }
    *out = c->blast_temp;
    return YC_OK;
}

/* Element offset of image n of an FP32 tensor. */
static size_t image_elem(const yc_tensor *t, int n)
{
    return t->offset / sizeof(float) + (size_t)n * (t->n > 1 ? t->nstride : yc_tensor_image_elems(t));
}

/* im2col of image n of x into the column region. */
static int run_im2col(yc_cl_ctx *c, const geom *g, const yc_tensor *x, int n, cl_mem ws, size_t col)
{
    yc_cl_args a;
    int st = yc_cl_begin(c, YC_K_IM2COL, &a);
    if (st)
        return st;
    yc_cl_arg_tensor(&a, x);
    yc_cl_arg_uint(&a, (unsigned)n);
    yc_cl_arg_at(&a, ws, col);
    int v[] = {g->C, g->H, g->W, g->R, g->S, g->P, g->Q, g->sh, g->sw, g->ph, g->pw};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        yc_cl_arg_int(&a, v[i]);
    size_t global[2] = {g->pq, g->crs};
    return yc_cl_run(&a, 2, global, false);
}

static int conv_fwd(yc_cl_ctx *c, const yc_op *op, const geom *g, const layout *L, yc_span ws, cl_mem temp)
{
    const yc_tensor *x = op->src[0], *w = op->src[1], *b = op->src[2], *y = op->dst[0];
    cl_mem wsm = ws.buf ? ws.buf->mem : NULL;
    size_t col = ws.offset + L->col_off, tmp = ws.offset + L->tmp_off;
    bool y32 = y->type == YC_F32;
    int st = YC_OK;
    for (int n = 0; n < g->N && !st; n++) {
        yc_cl_gemm m = image_gemm(op, g);
        m.a = w->buf->mem, m.a_off = w->offset / sizeof(float);
        if (g->direct)
            m.b = x->buf->mem, m.b_off = image_elem(x, n);
        else if (!(st = run_im2col(c, g, x, n, wsm, col)))
            m.b = wsm, m.b_off = col / sizeof(float);
        if (y32)
            m.c = y->buf->mem, m.c_off = image_elem(y, n);
        else
            m.c = wsm, m.c_off = tmp / sizeof(float);
        if (!st)
            st = yc_cl_gemm_run(c, &m, temp);
        if (!st && !y32) {
            yc_cl_args a;
            if (!(st = yc_cl_begin(c, YC_K_BIAS_STORE, &a))) {
                yc_cl_arg_at(&a, wsm, tmp);
                yc_cl_arg_ulong(&a, 0);
                yc_cl_arg_tensor(&a, y);
                yc_cl_arg_uint(&a, (unsigned)n);
                yc_cl_arg_at(&a, b ? b->buf->mem : wsm, b ? b->offset : 0);
                yc_cl_arg_int(&a, b != NULL);
                yc_cl_arg_uint(&a, (unsigned)g->K);
                yc_cl_arg_uint(&a, (unsigned)g->pq);
                size_t global[2] = {(size_t)g->K * g->pq, 1};
                st = yc_cl_run(&a, 2, global, false);
            }
        }
    }
    if (!st && y32 && b) {
        /* the bias over every image, in place */
        yc_cl_args a;
        if (!(st = yc_cl_begin(c, YC_K_BIAS_STORE, &a))) {
            yc_cl_arg_at(&a, y->buf->mem, y->offset);
            yc_cl_arg_ulong(&a, y->n > 1 ? y->nstride : yc_tensor_image_elems(y));
            yc_cl_arg_tensor(&a, y);
            yc_cl_arg_uint(&a, 0);
            yc_cl_arg_param(&a, b);
            yc_cl_arg_int(&a, 1);
            yc_cl_arg_uint(&a, (unsigned)g->K);
            yc_cl_arg_uint(&a, (unsigned)g->pq);
            size_t global[2] = {(size_t)g->K * g->pq, (size_t)g->N};
            st = yc_cl_run(&a, 2, global, false);
        }
    }
    return st;
}

static int conv_bwd_data(yc_cl_ctx *c, const yc_op *op, const geom *g, const layout *L, yc_span ws, cl_mem temp)
{
    const yc_tensor *dy = op->src[0], *w = op->src[1], *dx = op->dst[0];
    cl_mem wsm = ws.buf ? ws.buf->mem : NULL;
    size_t col = ws.offset + L->col_off;
    int st = YC_OK;
    for (int n = 0; n < g->N && !st; n++) {
        yc_cl_gemm m = image_gemm(op, g);
        m.a = w->buf->mem, m.a_off = w->offset / sizeof(float);
        m.b = dy->buf->mem, m.b_off = image_elem(dy, n);
        if (g->direct)
            m.c = dx->buf->mem, m.c_off = image_elem(dx, n);
        else
            m.c = wsm, m.c_off = col / sizeof(float);
        st = yc_cl_gemm_run(c, &m, temp);
        if (!st && !g->direct) {
            yc_cl_args a;
            if (!(st = yc_cl_begin(c, YC_K_COL2IM, &a))) {
                yc_cl_arg_at(&a, wsm, col);
                yc_cl_arg_tensor(&a, dx);
                yc_cl_arg_uint(&a, (unsigned)n);
                int v[] = {g->C, g->H, g->W, g->R, g->S, g->P, g->Q, g->sh, g->sw, g->ph, g->pw, op->accumulate};
                for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
                    yc_cl_arg_int(&a, v[i]);
                size_t global[1] = {(size_t)g->C * g->H * g->W};
                st = yc_cl_run(&a, 1, global, false);
            }
        }
    }
    return st;
}

static int conv_bwd_filter(yc_cl_ctx *c, const yc_op *op, const geom *g, const layout *L, yc_span ws,
                           cl_mem temp)
{
    const yc_tensor *x = op->src[0], *dy = op->src[1], *dw = op->dst[0], *db = op->dst[1];
    cl_mem wsm = ws.buf ? ws.buf->mem : NULL;
    size_t col = ws.offset + L->col_off;
    int st = YC_OK;
    for (int n = 0; n < g->N && !st; n++) {
        yc_cl_gemm m = image_gemm(op, g);
        m.a = dy->buf->mem, m.a_off = image_elem(dy, n);
        if (g->direct)
            m.b = x->buf->mem, m.b_off = image_elem(x, n);
        else if (!(st = run_im2col(c, g, x, n, wsm, col)))
            m.b = wsm, m.b_off = col / sizeof(float);
        m.c = dw->buf->mem, m.c_off = dw->offset / sizeof(float);
        if (!st)
            st = yc_cl_gemm_run(c, &m, temp);
    }
    if (!st && db)
        st = bias_grad(c, dy, db, g);
    return st;
}

/* The workspace span holds `need` bytes inside its buffer, at a float-aligned offset. */
static int check_span(const yc_op *op, yc_span ws, size_t need)
{
    if (need && (!ws.buf || ws.size < need || ws.offset % sizeof(float) != 0 ||
                 ws.offset > ws.buf->size || ws.size > ws.buf->size - ws.offset))
        return yc_error_status(YC_EFORMAT, "%s '%s': needs a float-aligned workspace of %zu bytes "
                               "inside its buffer, got %zu bytes at offset %zu",
                               yc_op_kind_name(op->kind), op->name ? op->name : "", need, ws.size,
                               ws.offset);
    return YC_OK;
}

int yc_cl_conv(yc_cl_ctx *c, const yc_op *op, yc_span ws)
{
    geom g = make_geom(op);
    int st;
    if (!c->conv_clblast) {
        int t = conv_tile(c, op, &g);
        if ((st = check_span(op, ws, igemm_workspace(c, op, &g, t))))
            return st;
        switch (op->kind) {
        case YC_OP_CONV2D:
            return igemm_fwd(c, op, &g, t);
        case YC_OP_CONV2D_BWD_DATA:
            return igemm_bwd_data(c, op, &g, t);
        default:
            return igemm_bwd_filter(c, op, &g, t, ws);
        }
    }
    layout L;
    st = make_layout(c, op, &g, &L);
    if (st)
        return st;
    if ((st = check_span(op, ws, L.total)))
        return st;
    cl_mem temp;
    if ((st = temp_buffer(c, &L, &temp)))
        return st;
    switch (op->kind) {
    case YC_OP_CONV2D:
        return conv_fwd(c, op, &g, &L, ws, temp);
    case YC_OP_CONV2D_BWD_DATA:
        return conv_bwd_data(c, op, &g, &L, ws, temp);
    default:
        return conv_bwd_filter(c, op, &g, &L, ws, temp);
    }
}
