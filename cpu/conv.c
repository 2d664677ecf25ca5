/* Convolution on the CPU: forward, backward-data and backward-filter as GEMMs (gemm.h) over the
 * column matrix, read in place from the padded input (forward, backward-filter: implicit GEMM) or
 * written by the GEMM and added into dx (backward-data: col2im).  conv_dispatch.c sends the 3x3
 * stride-1 convolutions that Winograd's algorithms compute faster to winograd.c instead.
 *
 * Per image, with CRS = C*R*S and PQ = P*Q (the column matrix col is CRS x PQ):
 *   forward         y[K, PQ]     = W[K, CRS] * col(x)[CRS, PQ]  (+ b[k] per row)
 *   backward-data   col[CRS, PQ] = W^T[CRS, K] * dy[K, PQ];  dx (=|+=) col2im(col)
 *   backward-filter dW[K, CRS]  += dy[K, PQ] * col(x)^T[PQ, CRS];  db[k] += sum dy[k, :]
 * The work goes one block of output rows at a time (about YC_CONV_BLOCK floats of buffers, so that
 * a block stays in cache and the workspace stays small; the row count is chosen so that the GEMM's
 * panels of columns are mostly whole); each block is one GEMM.  A 1x1 convolution with stride 1
 * and no padding ("direct") needs no columns: the image (C x HW) is its own column matrix.
 *
 * Implicit GEMM (forward and backward-filter with a window or a stride): row (c, r, s) of the
 * column matrix is the input image shifted by (r, s) and subsampled by the stride.  Each block's
 * input rows are copied once with their zero padding and split into sh x sw phases (phase (a, b):
 * padded rows a, a + sh, ... and columns b, b + sw, ..., Wv columns); then every row of the column
 * matrix is one phase read at an offset, with output row p at column p*Wv, and the GEMM reads it
 * at those offsets (forward: in place, yc_sgemm_offsets; backward-filter: B^T's rows, packed from
 * there or, for a small dW, read in place by dot products, yc_sgemm_nt_offsets) instead of from a
 * column block 9 times the input's size.  Each output
 * row gets Wv - Q junk columns: the forward pass computes and drops them (bit-identical to im2col's
 * GEMM), the backward-filter pass multiplies them by zeros (dy copied into that layout).
 *
 * Tapwise backward-filter (an implicit convolution whose C is a multiple of 16, at least 32, with a
 * weight gradient of 20480 to 2^18 floats: YOLOv5s's 3x3 layers of 64 and 128 filters): the phases
 * are stored channel-minor, so that for a tap (r, s) the column rows (c, r, s) of all c are, at
 * each position, C consecutive floats.  dW's columns of one tap are then a plain GEMM,
 *   dW_rs[K, C] += dy[K, block] * X_rs[block, C],   X_rs's row v = C floats at position v + shift(r, s),
 * read in place (yc_sgemm_offsets), with dy packed once per block for the R*S products: the input
 * is transposed once (1x its size) where packing B^T's rows transposed the 9x column matrix.  Each
 * thread accumulates into its own partial in that order, dW[k, (r*S + s)*C + c], and the partials
 * are added into dW's order at the end (docs/PERFORMANCE.md, "Kernel choices", has the timings).
 *
 * Threading: the work is a list of items, (image, block) pairs (whole images for backward-data,
 * whose col2im of neighbouring blocks writes the same rows of dx).  With T threads, the largest
 * multiple of T of them is spread over the threads in one parallel region, each thread with its
 * own buffers and the GEMM single-threaded inside it (yc_sgemm runs on the calling thread in a
 * parallel region): no barrier in the loop.  Forward and backward-data hand items out
 * dynamically (every item is computed the same way whichever thread takes it, so results do not
 * depend on scheduling; a core taken by another process slows one item, not a fixed share).
 * Backward-filter splits them statically: thread 0 adds into dW, threads 1..T-1 into private dW
 * partials (split-K), summed into dW in thread order at the end.  The items left over run one by
 * one with parallel copies and the multi-threaded GEMM.
 *
 * FP16 activations (x of forward and backward-filter, y of forward): the implicit GEMM's input copy
 * converts x to FP32 and its output copy rounds y; a direct convolution converts its image block
 * into the column buffer (backward-filter) or, in the forward pass, converts x and/or computes y in
 * sub-blocks of at most `sub` columns, through per-thread buffers of C x sub (x) and K x sub (y)
 * floats, y rounded to FP16 after the bias.  The GEMM sees the same operands as for FP32 tensors
 * holding the same values, and a GEMM's element does not depend on how many columns it is given
 * (gemm.c: the sum over K is blocked the same way, and the forward GEMM with packed weights never
 * splits K): an FP16 result is the rounded FP32 one.
 *
 * The weights are packed for the GEMM once per op (forward: W[K, CRS]; backward-data: W^T[CRS, K],
 * gemm.h's yc_sgemm_pack) rather than once per block: a block of a few output rows of a 3x3
 * convolution is a GEMM small enough for repacking W to be a large share of its time.
 *
 * Workspace (each buffer rounded up to 64 bytes): the packed weights (forward, backward-data), the
 * implicit GEMM's column offsets (tapwise: position offsets), tapwise T sets of transposition rows,
 * T sets of per-thread buffers (the implicit GEMM's input phases and its forward output or
 * backward-filter dy, tapwise dy packed too; backward-data's column block; a direct FP16
 * convolution's FP32 copies), then for backward-filter T-1 dW partials of K*CRS floats (tapwise:
 * T); one set when every item runs alone. */
#include <omp.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "cpu_ops.h"
#include "gemm.h"

/* Floats of one column block (1 MiB): output rows are grouped so that CRS x rows*Q stays below
 * (or within 1.5 times it, see block_rows_for). */
#define YC_CONV_BLOCK ((size_t)1 << 18)

/* Direct forward sub-blocks (FP16 x or y, or a bias): the x and y sub-blocks together hold at most
 * this many floats (1 MiB, so that they stay in L2 between conversion, GEMM and bias), unless that
 * leaves fewer than YC_CONV_SUB_MIN columns (each GEMM call packs its B again: sub-blocks must not
 * be narrow). */
#define YC_CONV_SUB ((size_t)1 << 18)
#define YC_CONV_SUB_MIN 256

/* A direct convolution's forward and backward-data GEMMs read their B operand (x, dy) in place
 * (yc_sgemm_offsets: rows pq floats apart) rather than packed when the product has at most this
 * many rows or sums (YOLOv5s's 1x1 convolutions with 32 or 64 channels on a side): each packed
 * element would serve only a few row panels of the micro-kernel, and packing, a read and a write
 * of B, cost about what the product does (2 threads, 640, batch 8: 64 -> 32 filters at 160 x 160
 * 5.9 -> 4.5 ms forward, 128 -> 64 at 80 x 80 3.9 -> 3.4 ms forward and 4.2 -> 3.5 backward-data;
 * with 128 on both sides, packed was faster). */
#define YC_DIRECT_IN_PLACE 64

/* Tapwise backward-filter (geom.tapwise) for weight gradients of more than YC_TAPWISE_MIN floats (the
 * smaller ones read the columns in place by dot products, gemm.c's nt_dot) and at most
 * YC_TAPWISE_MAX (1 MiB: a thread's partial, which every block's R*S products update, stays in L2
 * beside the block; larger ones were slower than packing the columns on YOLOv5s's 256- and
 * 512-filter layers). */
#define YC_TAPWISE_MIN ((size_t)20480)
#define YC_TAPWISE_MAX ((size_t)1 << 18)

/* Shapes of one convolution and its blocking. */
typedef struct geom {
    /* input images, channels, rows, columns */
    int N, C, H, W;
    /* filters and their size */
    int K, R, S;
    /* output rows and columns */
    int P, Q;
    /* strides and padding */
    int sh, sw, ph, pw;
    /* C*R*S, P*Q, H*W */
    int crs, pq, hw;
    /* 1x1, stride 1, no padding: x is its own column matrix */
    bool direct;
    /* forward or backward-filter with a window or a stride ("implicit"): no column block.  Each
     * block's input is copied with its padding and split into sh x sw phases (phase (a, b) of
     * channel c holds the padded input's rows a, a + sh, ... and columns b, b + sw, ...: Wv
     * columns, `plane` floats per phase, then `slack` floats), so that every row of the column
     * matrix is one phase read from an offset; each output row has Wv - Q junk columns */
    bool implicit;
    int Wv;
    size_t plane, slack;
    /* backward-filter of an implicit convolution with C a multiple of 16, at least 32 ("tapwise"):
     * the block's phases are stored channel-minor, xt[(phase*plane + position)*C + c], so that
     * the column matrix's rows (c, r, s) for one tap (r, s) are, at each position, C consecutive
     * floats: dW's columns of that tap are one GEMM, dy[K, block] * X_rs[block, C], with X_rs read
     * in place (row v at v*C from the tap's first position) and nothing transposed but the input
     * once; `slack` then counts floats after the last phase */
    bool tapwise;
    /* x is FP16 (forward, backward-filter); y is FP16 (forward) */
    bool x16, y16;
    /* forward with a bias (YOLOv5's Detect convolutions): a direct convolution computes y in
     * sub-blocks and adds the bias to each while it is in cache (added to a whole block of 255
     * filters, out of L2 by then, it took a quarter of the Detect layers' time) */
    bool bias;
    /* forward with the SiLU epilogue (op.p.conv.silu): applied with the bias, while in cache */
    bool silu;
    /* output rows per block and blocks per image */
    int rows, nblocks;
} geom;

/* How one op runs and where its buffers lie in the workspace. */
typedef struct plan {
    /* threads */
    int T;
    /* work items (images or image blocks) and how many of them run in the per-thread mode (a
     * multiple of T; 0 when that mode is off) */
    int items, nfull;
    /* floats of one column block (implicit forward: of the block's input phases) and of one dW
     * partial (0 when not needed) */
    size_t col, part;
    /* direct forward with FP16 x or y or a bias: columns per sub-block, and floats of the FP16 x and
     * y sub-block buffers (0 when not needed) */
    int sub;
    size_t xs, ys;
    /* tapwise backward-filter: floats of the block's dy packed for the GEMMs (per thread), of the
     * 16 x Wv rows that are transposed into the channel-minor phases (per thread, in the head), and
     * how many dW partials there are (one per thread that runs items) */
    size_t ap, tr;
    int nparts;
    /* floats of one thread's buffers: col + xs + ys + ap */
    size_t per;
    /* floats of the weights packed once for every GEMM of the op (forward, backward-data; 0 for
     * backward-filter), at the start of the workspace */
    size_t pa;
    /* implicit GEMM: floats holding the CRS column offsets (ptrdiff_t; tapwise: the rows*Wv position
     * offsets), after the packed weights */
    size_t offs;
    /* floats before the first per-thread set: pa + offs + T * tr */
    size_t head;
    /* workspace bytes */
    size_t bytes;
} plan;

/* One thread's buffers in the workspace (NULL when not needed): the column block (implicit GEMM: the
 * input phases), the FP16 forward sub-block buffers (implicit GEMM: ys is the forward GEMM's output
 * or backward-filter's dy block). */
typedef struct bufs {
    float *col, *xs, *ys, *ap;
    /* implicit GEMM: the column offsets (shared by the threads) */
    ptrdiff_t *offs;
} bufs;

/* Columns the GEMM computes for P output rows of Q in blocks of `rows` rows: each block's rows*Q
 * rounded up to whole panels of nr columns. */
static size_t padded_cols(int rows, int P, int Q, size_t nr)
{
    size_t cost = 0;
    for (int p0 = 0; p0 < P; p0 += rows) {
        size_t n = (size_t)(P - p0 < rows ? P - p0 : rows) * (size_t)Q;
        cost += (n + nr - 1) / nr * nr;
    }
    return cost;
}

/* Output rows per column block for P rows of Q outputs (GEMM columns) whose buffers take `row`
 * floats per output row (CRS*Q for a column block).  The GEMM computes
 * whole panels of yc_sgemm_nr() columns, so a block of n = rows*Q columns costs n rounded up to a
 * panel: the block is the largest whose padded work is within 2% of the least padded work over
 * the row counts whose column block fits YC_CONV_BLOCK floats, or 1.5 times that when every
 * fitting count pads by more than an eighth.  (YOLOv5's 20 x 20 outputs with CRS 2304 get 8 rows
 * and 4% padding instead of 5 rows and 22%; 40 x 40 with CRS 1152, 4 rows and none instead of 5
 * and 12%.) */
static int block_rows_for(size_t row, int P, int Q)
{
    size_t nr = (size_t)yc_sgemm_nr(), ideal = (size_t)P * (size_t)Q;
    size_t fit = YC_CONV_BLOCK / row, wide = YC_CONV_BLOCK * 3 / 2 / row;
    fit = fit < 1 ? 1 : fit > (size_t)P ? (size_t)P : fit;
    wide = wide < fit ? fit : wide > (size_t)P ? (size_t)P : wide;
    size_t least = SIZE_MAX;
    for (size_t r = 1; r <= fit; r++) {
        size_t c = padded_cols((int)r, P, Q, nr);
        least = c < least ? c : least;
    }
    size_t top = fit;
    if (least * 8 > ideal * 9) {
        for (size_t r = fit + 1; r <= wide; r++) {
            size_t c = padded_cols((int)r, P, Q, nr);
            least = c < least ? c : least;
        }
        top = wide;
    }
    for (size_t r = top; r > 1; r--)
        if (padded_cols((int)r, P, Q, nr) * 50 <= least * 51)
            return (int)r;
    return 1;
}

static geom geom_make(const yc_op *op, int N, int C, int H, int W, int K, int P, int Q)
{
    geom g = {.N = N, .C = C, .H = H, .W = W, .K = K, .P = P, .Q = Q};
    g.R = op->p.conv.kh;
    g.S = op->p.conv.kw;
    g.sh = op->p.conv.stride_h;
    g.sw = op->p.conv.stride_w;
    g.ph = op->p.conv.pad_h;
    g.pw = op->p.conv.pad_w;
    g.crs = C * g.R * g.S;
    g.pq = P * Q;
    g.hw = H * W;
    g.direct = g.R == 1 && g.S == 1 && g.sh == 1 && g.sw == 1 && g.ph == 0 && g.pw == 0;
    g.x16 = op->kind != YC_OP_CONV2D_BWD_DATA && op->src[0]->type == YC_F16;
    g.y16 = op->kind == YC_OP_CONV2D && op->dst[0]->type == YC_F16;
    g.silu = op->kind == YC_OP_CONV2D && op->p.conv.silu;
    g.bias = op->kind == YC_OP_CONV2D && (op->src[2] != NULL || g.silu);
    g.implicit = (op->kind == YC_OP_CONV2D || op->kind == YC_OP_CONV2D_BWD_FILTER) && !g.direct;
    size_t nw = (size_t)K * (size_t)g.crs;
    g.tapwise = g.implicit && op->kind == YC_OP_CONV2D_BWD_FILTER && C >= 32 && C % 16 == 0 &&
                nw > YC_TAPWISE_MIN && nw <= YC_TAPWISE_MAX;
    if (g.implicit) {
        /* per output row, the block's phases take C*sh*sw*Wv floats and its GEMM output (or
         * backward-filter's dy) K*Wv; tapwise, dy packed for the GEMMs another K*Wv */
        g.Wv = (W + 2 * g.pw + g.sw - 1) / g.sw;
        size_t phases = (size_t)C * (size_t)g.sh * (size_t)g.sw;
        g.rows = block_rows_for((phases + (size_t)K * (g.tapwise ? 2 : 1)) * (size_t)g.Wv, P, g.Wv);
        g.plane = (size_t)(g.rows + (g.R - 1) / g.sh) * (size_t)g.Wv;
        /* the GEMM reads a tap's rows up to (S - 1)/sw positions past the last phase's plane
         * (junk columns, times dy's zeros) and up to a panel of columns past a row's C */
        g.slack = g.tapwise ? (size_t)((g.S - 1) / g.sw + 1) * (size_t)C + 64 : (size_t)((g.S - 1) / g.sw) + 64;
    }
    if (!g.implicit) {
        g.rows = block_rows_for((size_t)g.crs * (size_t)Q, P, Q);
    }
    g.nblocks = (P + g.rows - 1) / g.rows;
    return g;
}

static size_t round16(size_t n)
{
    return (n + 15) / 16 * 16;
}

static plan plan_make(yc_op_kind kind, const geom *g, int threads)
{
    plan pl = {.T = threads > 0 ? threads : 1};
    bool whole_images = kind == YC_OP_CONV2D_BWD_DATA && !g->direct;
    pl.items = whole_images ? g->N : g->N * g->nblocks;
    bool cols = !g->direct || (kind == YC_OP_CONV2D_BWD_FILTER && g->x16);
    size_t block = (size_t)g->rows * (size_t)g->Q;
    pl.col = cols ? round16((size_t)g->crs * block) : 0;
    if (g->implicit) {
        size_t nv = (size_t)g->rows * (size_t)g->Wv, noffs = g->tapwise ? nv : (size_t)g->crs;
        pl.col = round16((size_t)g->C * (size_t)g->sh * (size_t)g->sw * g->plane + g->slack);
        pl.ys = round16((size_t)g->K * nv);
        pl.offs = round16(noffs * sizeof(ptrdiff_t) / sizeof(float));
    }
    if (g->direct && kind != YC_OP_CONV2D_BWD_FILTER) /* B's row offsets when read in place */
        pl.offs = round16((size_t)(kind == YC_OP_CONV2D ? g->C : g->K) * sizeof(ptrdiff_t) / sizeof(float));
    if (g->tapwise) {
        pl.ap = round16(yc_sgemm_packed_floats(g->K, g->rows * g->Wv));
        pl.tr = round16((size_t)16 * (size_t)g->Wv);
    }
    pl.part = kind == YC_OP_CONV2D_BWD_FILTER ? round16((size_t)g->K * (size_t)g->crs) : 0;
    bool xsub = kind == YC_OP_CONV2D && g->direct && g->x16;
    bool ysub = kind == YC_OP_CONV2D && g->y16 && !g->implicit;
    bool bsub = kind == YC_OP_CONV2D && g->direct && g->bias;
    if (xsub || ysub || bsub) {
        size_t wide = (xsub ? (size_t)g->C : 0) + (ysub || bsub ? (size_t)g->K : 0);
        size_t sub = YC_CONV_SUB / wide;
        /* a multiple of 32, hence of every kernel's panel width: only the last sub-block pads */
        sub = sub < YC_CONV_SUB_MIN ? YC_CONV_SUB_MIN : sub / 32 * 32;
        pl.sub = sub < block ? (int)sub : (int)block;
        pl.xs = xsub ? round16((size_t)g->C * (size_t)pl.sub) : 0;
        pl.ys = ysub ? round16((size_t)g->K * (size_t)pl.sub) : 0;
    }
    pl.per = pl.col + pl.xs + pl.ys + pl.ap;
    if (kind == YC_OP_CONV2D)
        pl.pa = round16(yc_sgemm_packed_floats(g->K, g->crs));
    else if (kind == YC_OP_CONV2D_BWD_DATA)
        pl.pa = round16(yc_sgemm_packed_floats(g->direct ? g->C : g->crs, g->K));
    /* tapwise, every thread's dW partial is in the channel-minor order (thread 0's too); otherwise
     * thread 0 adds into dW itself */
    pl.nparts = g->tapwise ? 1 : 0;
    if (pl.T > 1 && pl.items >= pl.T) {
        pl.nfull = pl.items / pl.T * pl.T;
        pl.nparts = g->tapwise ? pl.T : pl.T - 1;
        pl.bytes = ((size_t)pl.T * pl.per + (size_t)pl.nparts * pl.part) * sizeof(float);
    }
    size_t alone = pl.per + (g->tapwise ? pl.part : 0);
    if (pl.nfull < pl.items && alone * sizeof(float) > pl.bytes)
        pl.bytes = alone * sizeof(float);
    pl.head = pl.pa + pl.offs + (size_t)pl.T * pl.tr;
    pl.bytes += pl.head * sizeof(float);
    return pl;
}

/* The buffers of thread t. */
static bufs bufs_of(const plan *pl, void *ws, int t)
{
    bufs b = {NULL, NULL, NULL, NULL, NULL};
    if (pl->offs)
        b.offs = (ptrdiff_t *)((float *)ws + pl->pa);
    if (!pl->per)
        return b;
    float *base = (float *)ws + pl->head + (size_t)t * pl->per;
    b.col = pl->col ? base : NULL;
    b.xs = pl->xs ? base + pl->col : NULL;
    b.ys = pl->ys ? base + pl->col + pl->xs : NULL;
    b.ap = pl->ap ? base + pl->col + pl->xs + pl->ys : NULL;
    return b;
}

/* The dW partials of backward-filter: after the T per-thread sets (one when every item runs
 * alone). */
static float *parts_of(const plan *pl, void *ws)
{
    return (float *)ws + pl->head + (size_t)(pl->nfull > 0 ? pl->T : 1) * pl->per;
}

/* Tapwise backward-filter: the transposition rows of thread t (of whichever team runs the copy). */
static float *tr_of(const plan *pl, void *ws, int t)
{
    return (float *)ws + pl->pa + pl->offs + (size_t)t * pl->tr;
}

/* Geometry from the op's tensors: x and dy (or y) are the activation slots of each kind. */
static geom geom_of_op(const yc_op *op)
{
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
    return geom_make(op, x->n, x->c, x->h, x->w, w->n, y->h, y->w);
}

size_t yc_cpu_gemm_conv_workspace(const yc_op *op, int threads)
{
    geom g = geom_of_op(op);
    return plan_make(op->kind, &g, threads).bytes;
}

/* Columns q with 0 <= q*sw - pw + s < W form [*q0, *q1) (empty when *q0 == *q1). */
static void valid_cols(const geom *g, int s, int *q0, int *q1)
{
    int lo = g->pw - s, hi = g->W - 1 + g->pw - s; /* q*sw in [lo, hi] */
    int a = lo > 0 ? (lo + g->sw - 1) / g->sw : 0;
    int b = hi >= 0 ? hi / g->sw + 1 : 0;
    if (a > g->Q)
        a = g->Q;
    if (b > g->Q)
        b = g->Q;
    if (b < a)
        b = a;
    *q0 = a;
    *q1 = b;
}

/* Output rows [*p0, *p1) of block `blk`. */
static void block_rows(const geom *g, int blk, int *p0, int *p1)
{
    *p0 = blk * g->rows;
    *p1 = *p0 + g->rows < g->P ? *p0 + g->rows : g->P;
}

/* d[q] = x[q*sw + off] for q in [q0, q1) from one FP16 input row xr, through FP32 chunks. */
static void gather_f16(const uint16_t *xr, float *d, int q0, int q1, int sw, int off)
{
    float buf[YC_CPU_CHUNK];
    int qc = (YC_CPU_CHUNK - 1) / sw + 1; /* outputs per chunk: their inputs span <= YC_CPU_CHUNK */
    for (int qa = q0; qa < q1; qa += qc) {
        int qb = q1 - qa < qc ? q1 : qa + qc;
        yc_half_to_float_n(xr + qa * sw + off, buf, (size_t)(qb - 1 - qa) * sw + 1);
        if (sw == 2)
            yc_cpu_gather2(d + qa, buf, qb - qa);
        else
            for (int q = qa; q < qb; q++)
                d[q] = buf[(q - qa) * sw];
    }
}

/* dx (C,H,W) += col2im of a column block (output rows [p0, p1), layout as in im2col) for
 * channels [c0, c1): each channel's rows write only that channel. */
static void col2im(const geom *g, const float *col, int p0, int p1, float *dx, int c0, int c1)
{
    size_t ld = (size_t)(p1 - p0) * g->Q;
    for (int c = c0; c < c1; c++) {
        float *dc = dx + (size_t)c * g->hw;
        for (int r = 0; r < g->R; r++) {
            for (int s = 0; s < g->S; s++) {
                const float *src = col + ((size_t)(c * g->R + r) * g->S + s) * ld;
                int q0, q1;
                valid_cols(g, s, &q0, &q1);
                for (int p = p0; p < p1; p++, src += g->Q) {
                    int ih = p * g->sh - g->ph + r;
                    if (ih < 0 || ih >= g->H)
                        continue;
                    float *dr = dc + (size_t)ih * g->W;
                    int off = s - g->pw; /* dr[q*sw + off] += src[q] */
                    if (g->sw == 1) {
                        yc_cpu_add_row(dr + q0 + off, src + q0, q1 - q0);
                    } else if (g->sw == 2) {
                        yc_cpu_scatter_add2(dr + 2 * q0 + off, src + q0, q1 - q0);
                    } else {
                        for (int q = q0; q < q1; q++)
                            dr[q * g->sw + off] += src[q];
                    }
                }
            }
        }
    }
}

/* Converts rows [c0, c1) of the FP16 matrix at element offset xo of x (row stride ldx) and
 * columns [0, n) into dst (row stride n); T threads (1: the calling thread only). */
static void convert_rows(const yc_hv *x, size_t xo, size_t ldx, int c0, int c1, int n, float *dst, int T)
{
#pragma omp parallel for num_threads(T) schedule(static) if (T > 1)
    for (int c = c0; c < c1; c++)
        yc_half_to_float_n(x->p16 + xo + (size_t)c * ldx, dst + (size_t)(c - c0) * n, (size_t)n);
}

/* The column matrix of a direct convolution's block (output rows [p0, p1) of image x at element
 * offset xo): x itself (FP32), or its FP32 copy in col (FP16, T threads); *ld is its row stride. */
static const float *direct_columns(const geom *g, const yc_hv *x, size_t xo, float *col, int p0, int p1, int T,
                                   int *ld)
{
    if (!x->p16) {
        *ld = g->pq;
        return x->p + xo + (size_t)p0 * g->Q;
    }
    *ld = (p1 - p0) * g->Q;
    convert_rows(x, xo + (size_t)p0 * g->Q, (size_t)g->pq, 0, g->C, *ld, col, T);
    return col;
}

/* Whether a direct convolution's GEMM of M rows and K sums over n columns from column col of image i
 * reads B (FP32, rows pq floats apart) in place: a thin product (YC_DIRECT_IN_PLACE) whose reads
 * past its n columns (up to a panel: yc_sgemm_offsets) stay inside the tensor, which they do
 * unless it ends where the tensor's last image does. */
static bool direct_in_place(const geom *g, int M, int K, int i, size_t col, int n)
{
    if (M > YC_DIRECT_IN_PLACE && K > YC_DIRECT_IN_PLACE)
        return false;
    return i < g->N - 1 || col + (size_t)n < (size_t)g->pq || n % yc_sgemm_nr() == 0;
}

/* offs[k] = k*pq for the n rows of a direct convolution's B read in place. */
static void direct_offsets(const geom *g, int n, ptrdiff_t *offs)
{
    for (int k = 0; k < n; k++)
        offs[k] = (ptrdiff_t)k * g->pq;
}

/* ---------------------------------------------------------------------------------------------
 * Forward: y (N,K,P,Q) = conv(x (N,C,H,W), W (K,C,R,S)) + b (1,K,1,1)
 * ------------------------------------------------------------------------------------------- */

/* y[k, 0:n] += b[k] (b may be NULL), then y = silu(y) with silu, for K rows of stride ld; T
 * threads. */
static void add_bias(float *y, size_t ld, int K, int n, const float *b, bool silu, int T)
{
    if (!b && !silu)
        return;
#pragma omp parallel for num_threads(T) schedule(static) if (T > 1)
    for (int k = 0; k < K; k++) {
        float *yk = y + (size_t)k * ld;
        if (b) {
            float bk = b[k];
            for (int i = 0; i < n; i++)
                yk[i] += bk;
        }
        if (silu)
            yc_cpu_silu_span(yk, yk, (size_t)n);
    }
}

/* Implicit GEMM (geom.implicit): the column offsets; row (c*R + r)*S + s of the column matrix
 * is phase (r % sh, s % sw) of channel c from its row r / sh and column s / sw. */
static void implicit_offsets(const geom *g, ptrdiff_t *offs)
{
    for (int row = 0; row < g->crs; row++) {
        int c = row / (g->R * g->S), r = row / g->S % g->R, s = row % g->S;
        size_t phase = ((size_t)c * g->sh + (size_t)(r % g->sh)) * g->sw + (size_t)(s % g->sw);
        offs[row] = (ptrdiff_t)(phase * g->plane + (size_t)(r / g->sh) * (size_t)g->Wv + (size_t)(s / g->sw));
    }
}

/* Phase row d[v] = x row xr at columns v*sw + b - pw for v < Wv, zero outside the image. */
static void implicit_row(const geom *g, const yc_hv *x, size_t xr, int b, float *d)
{
    /* v in [v0, v1): 0 <= v*sw + b - pw < W */
    int lo = g->pw - b, hi = g->W - 1 + g->pw - b;
    int v0 = lo > 0 ? (lo + g->sw - 1) / g->sw : 0, v1 = hi >= 0 ? hi / g->sw + 1 : 0;
    v1 = v1 > g->Wv ? g->Wv : v1;
    v0 = v0 > v1 ? v1 : v0;
    int off = b - g->pw; /* d[v] = x[xr + v*sw + off] */
    memset(d, 0, (size_t)v0 * sizeof *d);
    if (x->p16 && g->sw == 1)
        yc_half_to_float_n(x->p16 + xr + v0 + off, d + v0, (size_t)(v1 - v0));
    else if (x->p16)
        gather_f16(x->p16 + xr, d, v0, v1, g->sw, off);
    else if (g->sw == 1)
        memcpy(d + v0, x->p + xr + v0 + off, (size_t)(v1 - v0) * sizeof *d);
    else if (g->sw == 2)
        yc_cpu_gather2(d + v0, x->p + xr + 2 * v0 + off, v1 - v0);
    else
        for (int v = v0; v < v1; v++)
            d[v] = x->p[xr + (size_t)(v * g->sw + off)];
    memset(d + v1, 0, (size_t)(g->Wv - v1) * sizeof *d);
}

/* Row d[0, Wv) of phase (a, b) of channel c: padded input row p*sh + a (p an output row) of image x
 * (element offset xo), zero above and below the image. */
static void phase_row(const geom *g, const yc_hv *x, size_t xo, int c, int a, int b, int p, float *d)
{
    int ih = p * g->sh + a - g->ph;
    if (ih < 0 || ih >= g->H)
        memset(d, 0, (size_t)g->Wv * sizeof *d);
    else
        implicit_row(g, x, xo + (size_t)c * g->hw + (size_t)ih * g->W, b, d);
}

/* The phases of output rows [p0, p1) of image x (element offset xo; FP16 converted): phase (a, b)
 * of channel c, row u holds padded input row (p0 + u)*sh + a, for u < p1 - p0 + (R - 1)/sh; the
 * rest of each plane and the slack after the last are zero.  T threads. */
static void implicit_input(const geom *g, const yc_hv *x, size_t xo, int p0, int p1, float *xb, int T)
{
    int rb = p1 - p0 + (g->R - 1) / g->sh, nph = g->C * g->sh * g->sw;
    size_t rest = g->plane - (size_t)rb * (size_t)g->Wv;
#pragma omp parallel for num_threads(T) schedule(static) if (T > 1)
    for (int ph = 0; ph < nph; ph++) {
        int c = ph / (g->sh * g->sw), a = ph / g->sw % g->sh, b = ph % g->sw;
        float *d = xb + (size_t)ph * g->plane;
        for (int u = 0; u < rb; u++, d += g->Wv)
            phase_row(g, x, xo, c, a, b, p0 + u, d);
        memset(d, 0, rest * sizeof *d);
    }
    memset(xb + (size_t)nph * g->plane, 0, g->slack * sizeof *xb);
}

/* Tapwise backward-filter: the block's phases channel-minor, xt[(ph*plane + u*Wv + v)*C + c] = phase
 * ph (= a*sw + b) of channel c at row u, column v as implicit_input lays them out (zero where that
 * is zero), then the slack.  Each phase row of 16 channels is made by phase_row into the
 * transposition rows of the thread that makes it (trs + thread * trn floats, 16 x Wv) and
 * transposed into place.  T threads. */
static void implicit_input_t(const geom *g, const yc_hv *x, size_t xo, int p0, int p1, float *xt, float *trs,
                             size_t trn, int T)
{
    int rb = p1 - p0 + (g->R - 1) / g->sh, nph = g->sh * g->sw, outer = omp_get_thread_num();
    size_t C = (size_t)g->C, rest = g->plane - (size_t)rb * (size_t)g->Wv;
#pragma omp parallel for num_threads(T) schedule(static) if (T > 1)
    for (int pu = 0; pu < nph * rb; pu++) {
        int ph = pu / rb, u = pu % rb, a = ph / g->sw, b = ph % g->sw;
        float *d = xt + ((size_t)ph * g->plane + (size_t)u * (size_t)g->Wv) * C;
        float *tr = trs + (size_t)(T > 1 ? omp_get_thread_num() : outer) * trn;
        for (int c0 = 0; c0 < g->C; c0 += 16) {
            for (int i = 0; i < 16; i++)
                phase_row(g, x, xo, c0 + i, a, b, p0 + u, tr + (size_t)i * g->Wv);
            yc_transpose(16, g->Wv, tr, g->Wv, d + c0, (ptrdiff_t)C);
        }
        if (u == rb - 1)
            memset(d + (size_t)g->Wv * C, 0, rest * C * sizeof *d);
    }
    memset(xt + (size_t)nph * g->plane * C, 0, g->slack * sizeof *xt);
}

/* One block of the implicit forward: y[K, block] = W[K, CRS] * (the block's columns, read in place
 * from its phases) over rows*Wv columns into bf->ys, then the Q valid columns of each row
 * (+ b[k], then SiLU with geom.silu, FP16 rounded) into y; T threads. */
static void fwd_block_implicit(const geom *g, const yc_hv *x, const float *w, const float *wp, const float *b,
                               const yc_hv *y, const bufs *bf, int i, int blk, int T)
{
    int p0, p1;
    block_rows(g, blk, &p0, &p1);
    int nv = (p1 - p0) * g->Wv;
    implicit_input(g, x, (size_t)i * x->ns, p0, p1, bf->col, T);
    yc_sgemm_offsets(g->K, nv, g->crs, 1.0f, w, g->crs, wp, bf->col, bf->offs, 0.0f, bf->ys, nv);
    size_t yo = (size_t)i * y->ns + (size_t)p0 * g->Q;
#pragma omp parallel for num_threads(T) schedule(static) if (T > 1)
    for (int k = 0; k < g->K; k++) {
        float *src = bf->ys + (size_t)k * nv;
        size_t dst = yo + (size_t)k * g->pq;
        for (int p = p0; p < p1; p++, src += g->Wv, dst += (size_t)g->Q) {
            if (b) {
                float bk = b[k];
                for (int q = 0; q < g->Q; q++)
                    src[q] += bk;
            }
            if (g->silu)
                yc_cpu_silu_span(src, src, (size_t)g->Q);
            if (y->p16)
                yc_float_to_half_n(src, y->p16 + dst, (size_t)g->Q);
            else
                memcpy(y->p + dst, src, (size_t)g->Q * sizeof *src);
        }
    }
}

/* One block (output rows [p0, p1) of image i); T threads (1: the calling thread only).  A window
 * runs implicitly (above); a direct convolution multiplies x itself (FP32) or its FP32 copy (FP16),
 * per sub-block when x or y is FP16 or there is a bias. */
static void fwd_block(const geom *g, const plan *pl, const yc_hv *x, const float *w, const float *wp,
                      const float *b, const yc_hv *y, const bufs *bf, int i, int blk, int T)
{
    if (g->implicit) {
        fwd_block_implicit(g, x, w, wp, b, y, bf, i, blk, T);
        return;
    }
    int p0, p1;
    block_rows(g, blk, &p0, &p1);
    int n = (p1 - p0) * g->Q;
    size_t xo = (size_t)i * x->ns, yo = (size_t)i * y->ns + (size_t)p0 * g->Q;
    /* y[K, block] = W[K, C] * x[C, block] (+ b), in sub-blocks of columns (geom.bias, plan.sub) */
    int sub = g->y16 || g->x16 || g->bias ? pl->sub : n;
    for (int j0 = 0; j0 < n; j0 += sub) {
        int jn = n - j0 < sub ? n - j0 : sub, ldc = g->pq;
        float *Cj = y->p + yo + j0;
        if (g->y16) {
            Cj = bf->ys;
            ldc = jn;
        }
        const float *Bj = x->p + xo + (size_t)p0 * g->Q + j0;
        int ldb = g->pq;
        if (g->x16) {
            convert_rows(x, xo + (size_t)p0 * g->Q + j0, (size_t)g->pq, 0, g->C, jn, bf->xs, T);
            Bj = bf->xs, ldb = jn;
        }
        if (!g->x16 && direct_in_place(g, g->K, g->crs, i, (size_t)p0 * g->Q + (size_t)j0, jn))
            yc_sgemm_offsets(g->K, jn, g->crs, 1.0f, w, g->crs, wp, Bj, bf->offs, 0.0f, Cj, ldc);
        else
            yc_sgemm_packed(false, g->K, jn, g->crs, 1.0f, w, g->crs, wp, Bj, ldb, 0.0f, Cj, ldc);
        add_bias(Cj, (size_t)ldc, g->K, jn, b, g->silu, T);
        if (g->y16) {
#pragma omp parallel for num_threads(T) schedule(static) if (T > 1)
            for (int k = 0; k < g->K; k++)
                yc_float_to_half_n(Cj + (size_t)k * jn, y->p16 + yo + (size_t)k * g->pq + j0, (size_t)jn);
        }
    }
}

void yc_cpu_gemm_conv_fwd(const yc_cpu_args *a)
{
    const yc_hv *x = &a->src[0], *y = &a->dst[0];
    const float *w = a->src[1].p, *b = a->src[2].p;
    geom g = geom_make(a->op, x->n, x->c, x->h, x->w, y->c, y->h, y->w);
    plan pl = plan_make(YC_OP_CONV2D, &g, a->threads);
    /* W[K, CRS] packed for the GEMMs: in the workspace, or kept from an earlier run (frozen
     * weights, yc_cpu_wcache_get) */
    static const char packed_form = 0;
    bool fill;
    float *wp = yc_cpu_wcache_get(a->wcache, a->op->src[1], &packed_form,
                                  yc_sgemm_packed_floats(g.K, g.crs), &fill);
    if (!wp) {
        wp = a->ws;
        fill = true;
    }
    if (fill)
        yc_sgemm_pack(false, g.K, g.crs, w, g.crs, wp);
    if (g.implicit)
        implicit_offsets(&g, bufs_of(&pl, a->ws, 0).offs);
    else
        direct_offsets(&g, g.C, bufs_of(&pl, a->ws, 0).offs);
    if (pl.nfull > 0) {
#pragma omp parallel num_threads(pl.T)
        {
            bufs bf = bufs_of(&pl, a->ws, omp_get_thread_num());
#pragma omp for schedule(dynamic, 1)
            for (int it = 0; it < pl.nfull; it++)
                fwd_block(&g, &pl, x, w, wp, b, y, &bf, it / g.nblocks, it % g.nblocks, 1);
        }
    }
    bufs bf = bufs_of(&pl, a->ws, 0);
    for (int it = pl.nfull; it < pl.items; it++)
        fwd_block(&g, &pl, x, w, wp, b, y, &bf, it / g.nblocks, it % g.nblocks, pl.T);
}

/* ---------------------------------------------------------------------------------------------
 * Backward-data: dx (N,C,H,W) (=|+=) conv^T(dy (N,K,P,Q), W (K,C,R,S))
 * ------------------------------------------------------------------------------------------- */

/* Direct conv, one block of columns of image i: dx[C, block] (=|+=) W^T[C, K] * dy[K, block]; offs: dy's
 * row offsets when read in place */
static void bwd_data_direct(const geom *g, const float *dy, const float *w, const float *wp, float *dx,
                            const ptrdiff_t *offs, int i, int blk, int acc)
{
    int p0, p1;
    block_rows(g, blk, &p0, &p1);
    size_t off = (size_t)p0 * g->Q;
    int n = (p1 - p0) * g->Q;
    float beta = acc ? 1.0f : 0.0f;
    if (direct_in_place(g, g->C, g->K, i, off, n))
        yc_sgemm_offsets(g->C, n, g->K, 1.0f, w, g->crs, wp, dy + off, offs, beta, dx + off, g->pq);
    else
        yc_sgemm_packed(true, g->C, n, g->K, 1.0f, w, g->crs, wp, dy + off, g->pq, beta, dx + off, g->pq);
}

/* One whole image, block by block; T threads (1: the calling thread only). */
static void bwd_data_image(const geom *g, const float *dy, const float *w, const float *wp, float *dx, float *col,
                           int acc, int T)
{
    for (int blk = 0; blk < g->nblocks; blk++) {
        int p0, p1;
        block_rows(g, blk, &p0, &p1);
        int n = (p1 - p0) * g->Q;
        /* col[CRS, block] = W^T[CRS, K] * dy[K, block] */
        yc_sgemm_packed(true, g->crs, n, g->K, 1.0f, w, g->crs, wp, dy + (size_t)p0 * g->Q, g->pq, 0.0f, col, n);
        bool zero = !acc && blk == 0;
        if (T == 1) {
            if (zero)
                memset(dx, 0, (size_t)g->C * g->hw * sizeof *dx);
            col2im(g, col, p0, p1, dx, 0, g->C);
        } else {
#pragma omp parallel for num_threads(T) schedule(static)
            for (int c = 0; c < g->C; c++) {
                if (zero)
                    memset(dx + (size_t)c * g->hw, 0, (size_t)g->hw * sizeof *dx);
                col2im(g, col, p0, p1, dx, c, c + 1);
            }
        }
    }
}

void yc_cpu_gemm_conv_bwd_data(const yc_cpu_args *a)
{
    const yc_hv *dy = &a->src[0], *dx = &a->dst[0];
    const float *w = a->src[1].p;
    int acc = a->op->accumulate;
    geom g = geom_make(a->op, dx->n, dx->c, dx->h, dx->w, dy->c, dy->h, dy->w);
    plan pl = plan_make(YC_OP_CONV2D_BWD_DATA, &g, a->threads);
    float *wp = a->ws; /* W^T[CRS, K] packed for the GEMMs */
    yc_sgemm_pack(true, g.direct ? g.C : g.crs, g.K, w, g.crs, wp);
    if (g.direct) {
        /* items are (image, block) pairs; the GEMM is multi-threaded outside the region */
        ptrdiff_t *offs = bufs_of(&pl, a->ws, 0).offs;
        direct_offsets(&g, g.K, offs);
#pragma omp parallel for num_threads(pl.T) schedule(dynamic, 1) if (pl.nfull > 0)
        for (int it = 0; it < pl.nfull; it++) {
            int i = it / g.nblocks;
            bwd_data_direct(&g, dy->p + (size_t)i * dy->ns, w, wp, dx->p + (size_t)i * dx->ns, offs, i,
                            it % g.nblocks, acc);
        }
        for (int it = pl.nfull; it < pl.items; it++) {
            int i = it / g.nblocks;
            bwd_data_direct(&g, dy->p + (size_t)i * dy->ns, w, wp, dx->p + (size_t)i * dx->ns, offs, i,
                            it % g.nblocks, acc);
        }
        return;
    }
    if (pl.nfull > 0) {
#pragma omp parallel num_threads(pl.T)
        {
            float *col = bufs_of(&pl, a->ws, omp_get_thread_num()).col;
#pragma omp for schedule(dynamic, 1)
            for (int i = 0; i < pl.nfull; i++)
                bwd_data_image(&g, dy->p + (size_t)i * dy->ns, w, wp, dx->p + (size_t)i * dx->ns, col, acc, 1);
        }
    }
    for (int i = pl.nfull; i < g.N; i++)
        bwd_data_image(&g, dy->p + (size_t)i * dy->ns, w, wp, dx->p + (size_t)i * dx->ns, bufs_of(&pl, a->ws, 0).col,
                       acc, pl.T);
}

/* ---------------------------------------------------------------------------------------------
 * Backward-filter: dW (K,C,R,S) += dy (N,K,P,Q) (*) x (N,C,H,W);  db (1,K,1,1) += sum dy
 * ------------------------------------------------------------------------------------------- */

/* dy's rows [p0, p1) in the implicit columns' layout, ys[K, (p1 - p0)*Wv]: zero in each row's Wv - Q
 * junk columns (which then add nothing, unless the input holds an Inf or NaN where they read it:
 * 0 * Inf is NaN); T threads. */
static void implicit_dy(const geom *g, const float *dy, int p0, int p1, float *ys, int T)
{
    int nv = (p1 - p0) * g->Wv;
#pragma omp parallel for num_threads(T) schedule(static) if (T > 1)
    for (int k = 0; k < g->K; k++) {
        float *d = ys + (size_t)k * nv;
        const float *src = dy + (size_t)k * g->pq + (size_t)p0 * g->Q;
        for (int p = p0; p < p1; p++, d += g->Wv, src += g->Q) {
            memcpy(d, src, (size_t)g->Q * sizeof *d);
            memset(d + g->Q, 0, (size_t)(g->Wv - g->Q) * sizeof *d);
        }
    }
}

/* dw[K, CRS] = beta * dw + dy[K, block] * col(x)^T[block, CRS] for one block (tapwise: dw in the
 * channel-minor order, dw[k, (r*S + s)*C + c]); trs, trn: the transposition rows (tapwise); T
 * threads (1: the calling thread only). */
static void bwd_filter_block(const geom *g, const yc_hv *x, size_t xo, const float *dy, float *dw, const bufs *bf,
                             float *trs, size_t trn, int blk, float beta, int T)
{
    int p0, p1, ld;
    block_rows(g, blk, &p0, &p1);
    if (g->tapwise) {
        /* per tap (r, s): dw[K, tap's C] += dy[K, block] * X_rs[block, C], X_rs's row v at v*C from
         * the tap's phase and shift; dy packed once for the R*S products */
        int nv = (p1 - p0) * g->Wv;
        implicit_input_t(g, x, xo, p0, p1, bf->col, trs, trn, T);
        implicit_dy(g, dy, p0, p1, bf->ys, T);
        yc_sgemm_pack(false, g->K, nv, bf->ys, nv, bf->ap);
        for (int r = 0; r < g->R; r++)
            for (int s = 0; s < g->S; s++) {
                size_t ph = (size_t)(r % g->sh) * (size_t)g->sw + (size_t)(s % g->sw);
                size_t pos = ph * g->plane + (size_t)(r / g->sh) * (size_t)g->Wv + (size_t)(s / g->sw);
                yc_sgemm_offsets(g->K, g->C, nv, 1.0f, bf->ys, nv, bf->ap, bf->col + pos * (size_t)g->C, bf->offs,
                                 beta, dw + (size_t)(r * g->S + s) * (size_t)g->C, g->crs);
            }
        return;
    }
    if (g->implicit) {
        /* dw[K, CRS] += dy[K, block] * (the block's columns, B^T rows read from its phases) */
        int nv = (p1 - p0) * g->Wv;
        implicit_input(g, x, xo, p0, p1, bf->col, T);
        implicit_dy(g, dy, p0, p1, bf->ys, T);
        yc_sgemm_nt_offsets(g->K, g->crs, nv, 1.0f, bf->ys, nv, bf->col, bf->offs, beta, dw, g->crs);
        return;
    }
    const float *B = direct_columns(g, x, xo, bf->col, p0, p1, T, &ld);
    yc_sgemm(false, true, g->K, g->crs, (p1 - p0) * g->Q, 1.0f, dy + (size_t)p0 * g->Q, g->pq, B, ld, beta,
             dw, g->crs);
}

void yc_cpu_gemm_conv_bwd_filter(const yc_cpu_args *a)
{
    const yc_hv *x = &a->src[0], *dy = &a->src[1];
    float *dw = a->dst[0].p, *db = a->dst[1].p;
    geom g = geom_make(a->op, x->n, x->c, x->h, x->w, dy->c, dy->h, dy->w);
    plan pl = plan_make(YC_OP_CONV2D_BWD_FILTER, &g, a->threads);
    float *ws = a->ws, *parts = parts_of(&pl, ws), *trs = tr_of(&pl, ws, 0);
    size_t nw = (size_t)g.K * g.crs;
    if (g.tapwise) {
        ptrdiff_t *offs = bufs_of(&pl, ws, 0).offs;
        for (int v = 0; v < g.rows * g.Wv; v++)
            offs[v] = (ptrdiff_t)v * g.C;
    } else if (g.implicit) {
        implicit_offsets(&g, bufs_of(&pl, ws, 0).offs);
    }
    /* tapwise, partial t belongs to thread t; otherwise thread 0 adds into dW and partial t-1
     * belongs to thread t >= 1 */
    if (pl.nfull > 0) {
#pragma omp parallel num_threads(pl.T)
        {
            int t = omp_get_thread_num(), nt = omp_get_num_threads();
            bufs bf = bufs_of(&pl, ws, t);
            /* a partial is overwritten by its thread's first item (nfull >= T: every thread of the
             * team gets at least one item) */
            float *mine = g.tapwise ? parts + (size_t)t * pl.part : t == 0 ? dw : parts + (size_t)(t - 1) * pl.part;
            float beta = t == 0 && !g.tapwise ? 1.0f : 0.0f;
#pragma omp for schedule(static)
            for (int it = 0; it < pl.nfull; it++) {
                int i = it / g.nblocks;
                bwd_filter_block(&g, x, (size_t)i * x->ns, dy->p + (size_t)i * dy->ns, mine, &bf, trs, pl.tr,
                                 it % g.nblocks, beta, 1);
                beta = 1.0f;
            }
            if (!g.tapwise) {
#pragma omp for schedule(static)
                for (size_t e = 0; e < nw; e++) {
                    float s = dw[e];
                    for (int u = 1; u < nt; u++)
                        s += parts[(size_t)(u - 1) * pl.part + e];
                    dw[e] = s;
                }
            }
        }
    }
    bufs bf0 = bufs_of(&pl, ws, 0);
    float *mine0 = g.tapwise ? parts : dw;
    for (int it = pl.nfull; it < pl.items; it++) {
        int i = it / g.nblocks;
        float beta = g.tapwise && pl.nfull == 0 && it == 0 ? 0.0f : 1.0f;
        bwd_filter_block(&g, x, (size_t)i * x->ns, dy->p + (size_t)i * dy->ns, mine0, &bf0, trs, pl.tr,
                         it % g.nblocks, beta, pl.T);
    }
    if (g.tapwise) {
        /* dW[k, c, r, s] += the partials' [k, (r*S + s)*C + c], in thread order */
        int rs = g.R * g.S;
#pragma omp parallel for num_threads(pl.T) schedule(static) if (nw > 16384)
        for (int k = 0; k < g.K; k++)
            for (int t = 0; t < rs; t++) {
                float *d = dw + (size_t)k * g.crs + t;
                const float *src = parts + (size_t)k * g.crs + (size_t)t * g.C;
                for (int c = 0; c < g.C; c++) {
                    float s = d[(size_t)c * rs];
                    for (int u = 0; u < pl.nparts; u++)
                        s += src[(size_t)u * pl.part + c];
                    d[(size_t)c * rs] = s;
                }
            }
    }
    if (db)
        yc_cpu_conv2d_bias_grad(dy, db, pl.T);
}
