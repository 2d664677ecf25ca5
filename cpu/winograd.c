/* Winograd convolutions on the CPU: the 3x3 stride-1 padding-1 convolutions that conv.c hands over
 * (yc_cpu_winograd_applies), forward, backward-data and backward-filter, each as side*side GEMMs
 * over all tiles of one of winograd.h's algorithms: F(4x4, 3x3) (winograd_f43.c: 36 GEMMs, 4x
 * fewer multiply-adds than the direct convolution) or F(2x2, 3x3) (winograd_f23.c: 16 GEMMs, 2.25x
 * fewer), chosen per pass by algo_of.  Per pass, with U the transformed kernels, V the transformed
 * input patches, Z the transformed output gradients:
 *   forward          M_xi[K, tiles] = U_xi[K, C] * V_xi[C, tiles],  y = the output transform of M
 *   backward-data    the same with dy as input and the kernels rotated and transposed, U'[c, k]
 *                    from g[k, c] (a stride-1 pad-1 3x3 convolution's transpose is one with its
 *                    kernel rotated); dx (=|+=) the output
 *   backward-filter  dU_xi[K, C] += Z_xi[K, tiles] * V_xi[C, tiles]^T, and at the end
 *                    dW[k, c] += the algorithm's filter transform of dU[k, c]
 * Tiles past an image edge compute outputs that are dropped (forward, backward-data) or multiply
 * dy's zeros (backward-filter).  The results differ from the implicit GEMM's (conv.c) by rounding
 * only (tests/test_ops.c compares both with a double reference, F(4x4, 3x3) at a looser tolerance:
 * winograd_f43.c); an Inf or
 * NaN in the input spreads over its tile's outputs (a transform adds it to its neighbours) where
 * the direct convolution keeps it to the outputs that read it.
 *
 * Work: the tiles of all images, in (image, tile row, tile column) order, are cut into blocks of
 * `nt` tiles (forward, backward-data: a multiple of the GEMM's panel width, so that V's rows are read
 * in place by the GEMM, yc_sgemm_offsets; backward-filter: larger, and as many blocks as a multiple
 * of the thread count); a block is one work item: its input transform, the GEMMs, then the output
 * transform (forward, backward-data) or, before the GEMMs, its dy transform (backward-filter).
 * Forward and backward-data hand blocks out dynamically (a block's result does not depend on the
 * thread computing it); backward-filter splits them statically, each thread adding into its own dU
 * (side*side x K x C floats), the partials added in thread order before the final transform.
 *
 * Forward and backward-data store V[xi][c][tile] and M[xi][k][tile], working along runs of a block's
 * tiles on one tile row: the input rows are copied with their zero padding (pad_row), the
 * algorithm's transforms split them into tiles in registers and interleave the outputs back.  A
 * run below the previous one over the same columns reuses the input rows the two share.
 * Backward-filter stores V^T[xi][tile][c] and Z^T[xi][tile][k] (tile-major), 16 channels at a time,
 * from input and dy rows made channel-minor first (yc_transpose): its GEMMs sum over tiles, and with
 * both operands tile-major V^T is read in place and Z^T packed by copying, where channel-major
 * operands had both transposed by the GEMM's packing (four times the input's size, against once
 * for the rows).
 *
 * FP16 activations (x of forward and backward-filter, y of forward) are converted row by row on
 * the way in and rounded on the way out; the rest is as for FP32 tensors holding the same values.
 *
 * Workspace (each buffer rounded up to 16 floats): forward and backward-data: U (np x K x C), U
 * packed for the np GEMMs, V's row offsets, then per thread V, M, the transform rows and the
 * block's runs; backward-filter: V^T's row offsets, per thread V^T, Z^T, the transform rows, the
 * runs and one of Z^T's matrices packed, then one dU per thread. */
#include <omp.h>
#include <stdlib.h>

#include "cpu_ops.h"
#include "gemm.h"
#include "vec16.h"
#include "winograd.h"

/* Floats of a block's V and M together (forward, backward-data): 1 MiB, half of a core's L2 on the
 * machines measured, the other half for U's rows of the current GEMM and the transform rows.
 * Backward-filter's V^T and Z^T: 4 MiB, whose longer sums over tiles amortise each block's update of
 * the thread's dU (np x K x C floats, 1-4 MiB on YOLOv5s): 12-16% faster than 1 MiB on one thread
 * (YOLOv5s's 128- and 256-filter layers at 640, batch 8), provided the blocks split evenly over the
 * threads (below). */
#define YC_WINO_BLOCK ((size_t)1 << 18)
#define YC_WINO_BLOCK_FILTER ((size_t)1 << 20)

/* The largest input patch of the algorithms (rows of the input transform) and output tile. */
#define YC_WINO_MAX_IN 6
#define YC_WINO_MAX_OUT 4

/* Shapes of one op as its algorithm sees them. */
typedef struct wgeom {
    /* the algorithm, and its products per tile (side*side) */
    const yc_wino_algo *al;
    int np;
    /* images; channels transformed on the way in (forward, backward-filter: x's C; backward-data:
     * dy's K) and channels produced (forward: K, backward-data: C; backward-filter: dy's K) */
    int N, Cin, Kout;
    /* rows and columns of the input images (forward, backward-filter: x; backward-data: dy) and of
     * the output images (forward: y; backward-data: dx; backward-filter: dy) */
    int iH, iW, oH, oW;
    /* tile rows and columns per image (output rows and columns over the tile's out, rounded up) */
    int TH, TW;
    /* tiles of all images */
    size_t tiles;
    /* tiles per block, and the row stride of V, M and Z: nt rounded up to the GEMM's panel (which it
     * reads), plus a vector of slack (the transforms store whole vectors past a run's end) */
    int nt, ldt;
    /* blocks */
    int nblocks;
    /* forward with the SiLU epilogue (op.p.conv.silu): applied to each output row with the bias */
    bool silu;
} wgeom;

/* A run of a block's tiles along one tile row: image i, tile row ty, columns [tx0, tx0 + len),
 * stored from column j0 of V, M and Z. */
typedef struct run {
    int i, ty, tx0, len;
    size_t j0;
} run;

static size_t round16(size_t n)
{
    return (n + 15) / 16 * 16;
}

/* Columns of a padded input row for `len` tiles: the patches of tiles in_step apart. */
static int row_cols(const yc_wino_algo *al, int len)
{
    return al->in_step * len + al->in - al->in_step;
}

/* One thread's transform rows, each with room for the whole vectors the transforms load and store
 * past a run's end: the input transform's `in` padded input rows (rowin floats each); the output
 * transform's `out` interleaved output rows (out*rowt each). */
static size_t rowin(const wgeom *g)
{
    return round16((size_t)row_cols(g->al, g->TW) + 4 * VL);
}

static size_t rowt(const wgeom *g)
{
    return round16((size_t)g->TW + VL);
}

static size_t scratch_floats(const wgeom *g)
{
    size_t in = (size_t)g->al->in * rowin(g), out = (size_t)(g->al->out * g->al->out) * rowt(g);
    return in > out ? in : out;
}

/* Backward-filter's transform rows: `in` channel-minor input rows (row_cols columns each) and `out`
 * of dy (out*TW columns), and the rows they are transposed from (the larger channel count, columns
 * rounded up to 16). */
static size_t bf_scratch_floats(const wgeom *g)
{
    size_t nc = (size_t)row_cols(g->al, g->TW), nd = (size_t)g->al->out * (size_t)g->TW;
    size_t big = g->Cin > g->Kout ? (size_t)g->Cin : (size_t)g->Kout, wide = nc > nd ? nc : nd;
    return round16(nc * (size_t)g->al->in * (size_t)g->Cin + nd * (size_t)g->al->out * (size_t)g->Kout +
                   big * round16(wide));
}

/* filter: backward-filter's blocks, a multiple of T of them (its threads take equal shares, and a
 * thread with one block more than the others is the op's critical path) of at most
 * YC_WINO_BLOCK_FILTER floats, any number of tiles; otherwise blocks of YC_WINO_BLOCK floats in whole
 * panels of the GEMM. */
static wgeom wgeom_make(const yc_wino_algo *al, int N, int Cin, int Kout, int iH, int iW, int oH, int oW,
                        bool filter, int T)
{
    wgeom g = {.al = al, .np = al->side * al->side, .N = N, .Cin = Cin, .Kout = Kout};
    g.iH = iH, g.iW = iW, g.oH = oH, g.oW = oW;
    g.TH = (oH + al->out - 1) / al->out;
    g.TW = (oW + al->out - 1) / al->out;
    g.tiles = (size_t)N * (size_t)g.TH * (size_t)g.TW;
    size_t nr = (size_t)yc_sgemm_nr(), per = (size_t)g.np * (size_t)(Cin + Kout), nt;
    if (filter) {
        size_t most = YC_WINO_BLOCK_FILTER / per, t = T > 0 ? (size_t)T : 1;
        most = most < 1 ? 1 : most;
        size_t nb = (g.tiles + most - 1) / most;
        nb = (nb + t - 1) / t * t;
        nt = (g.tiles + nb - 1) / nb;
    } else {
        nt = YC_WINO_BLOCK / per / nr * nr;
        nt = nt < nr ? nr : nt;
        if (nt > g.tiles)
            nt = g.tiles;
    }
    g.nt = (int)nt;
    g.ldt = (int)((nt + nr - 1) / nr * nr + VL);
    g.nblocks = (int)((g.tiles + nt - 1) / nt);
    return g;
}

/* The convolution's x (N, C, H, W), its filters K and its output rows and columns P, Q. */
static void conv_dims(const yc_op *op, int *N, int *C, int *K, int *H, int *W, int *P, int *Q)
{
    const yc_tensor *x = op->kind == YC_OP_CONV2D_BWD_DATA ? op->dst[0] : op->src[0];
    const yc_tensor *w = op->kind == YC_OP_CONV2D_BWD_FILTER ? op->dst[0] : op->src[1];
    const yc_tensor *y = op->kind == YC_OP_CONV2D ? op->dst[0] : op->src[op->kind == YC_OP_CONV2D_BWD_DATA ? 0 : 1];
    *N = x->n, *C = x->c, *K = w->n, *H = x->h, *W = x->w, *P = y->h, *Q = y->w;
}

static int wino_env = -1;

/* YOLOCL_WINOGRAD in the environment (read once): "0" turns Winograd off, "2" keeps to F(2x2, 3x3),
 * "4" takes F(4x4, 3x3) wherever Winograd runs; anything else (or unset): 1, the choice below. */
static int wino_mode(void)
{
    int e = __atomic_load_n(&wino_env, __ATOMIC_RELAXED);
    if (e < 0) {
        const char *s = getenv("YOLOCL_WINOGRAD");
        e = s && (s[0] == '0' || s[0] == '2' || s[0] == '4') && s[1] == '\0' ? s[0] - '0' : 1;
        __atomic_store_n(&wino_env, e, __ATOMIC_RELAXED);
    }
    return e;
}

/* The choice, per pass, measured on YOLOv5s's 3x3 layers at 640 (batch 8, 2 threads, best of 3
 * against the implicit GEMM or the other algorithm).  F(4x4, 3x3) where its transformed kernels,
 * 36 x K x C floats that every block of tiles streams through, stay within a core's L2 (K*C <=
 * YC_WINO_F43_KC): forward and backward-data from 32 channels on both sides (32 at 160 x 160: 18.5
 * -> 14.2 ms forward against the implicit GEMM, 15.1 -> 13.5 backward-data against F(2x2, 3x3); 64
 * at 80 x 80: 14.4 -> 9.5 and 11.9 -> 9.8; 128 at 40 x 40: 12.4 -> 10.7 and 13.3 -> 10.8),
 * backward-filter from 64 (64: 17.8 -> 12.7 against the tapwise implicit GEMM; 128: 15.1 -> 12.2;
 * 32 was even).  With 256 channels at 20 x 20 F(2x2, 3x3) stays: backward-filter 11.8 against
 * 13.7 ms, backward-data even, forward within the host's noise (14.0 against 16.6 once, 11.3 against
 * 10.1 in a best of 5).  F(2x2, 3x3) elsewhere from min_f23 channels: with 32 its forward pass was even against
 * the implicit GEMM and backward-data 17% faster; with 64, backward-filter, whose products have one
 * operand packed per block, was 7% slower, with 128 and 256 channels 18-27% faster.
 * Backward-filter needs channel counts that are multiples of 16 (its transforms run on 16
 * channels at a time). */
#define YC_WINO_F43_KC (128 * 128)

static int min_f43(yc_op_kind kind)
{
    return kind == YC_OP_CONV2D_BWD_FILTER ? 64 : 32;
}

static int min_f23(yc_op_kind kind)
{
    switch (kind) {
    case YC_OP_CONV2D_BWD_DATA:
        return 32;
    case YC_OP_CONV2D_BWD_FILTER:
        return 128;
    default:
        return 64;
    }
}

/* The algorithm for a convolution op, or NULL: 3x3, stride 1, padding 1, one group, and the
 * channel counts above (YOLOCL_WINOGRAD=2 or 4: that algorithm wherever either applies). */
static const yc_wino_algo *algo_of(const yc_op *op)
{
    if (op->p.conv.kh != 3 || op->p.conv.kw != 3 || op->p.conv.stride_h != 1 || op->p.conv.stride_w != 1 ||
        op->p.conv.pad_h != 1 || op->p.conv.pad_w != 1 || op->p.conv.groups != 1)
        return NULL;
    int N, C, K, H, W, P, Q, mode = wino_mode();
    conv_dims(op, &N, &C, &K, &H, &W, &P, &Q);
    int least = C < K ? C : K;
    bool f43 = least >= min_f43(op->kind) && (size_t)C * (size_t)K <= YC_WINO_F43_KC;
    bool f23 = least >= min_f23(op->kind);
    if (mode == 0 || (!f43 && !f23) || (op->kind == YC_OP_CONV2D_BWD_FILTER && (C % 16 || K % 16)))
        return NULL;
    if (mode == 2)
        return &yc_wino_f23;
    return mode == 4 || f43 ? &yc_wino_f43 : &yc_wino_f23;
}

bool yc_cpu_winograd_applies(const yc_op *op)
{
    return algo_of(op) != NULL;
}

const char *yc_cpu_winograd_name(const yc_op *op)
{
    const yc_wino_algo *al = algo_of(op);
    return al ? al->name : NULL;
}

/* The op's geometry with T threads: forward and backward-filter transform x (C channels) into K
 * outputs, backward-data transforms dy (K channels) into C. */
static wgeom wgeom_of(const yc_op *op, int T)
{
    int N, C, K, H, W, P, Q;
    conv_dims(op, &N, &C, &K, &H, &W, &P, &Q);
    if (op->kind == YC_OP_CONV2D_BWD_DATA)
        return wgeom_make(algo_of(op), N, K, C, P, Q, H, W, false, T);
    wgeom g = wgeom_make(algo_of(op), N, C, K, H, W, P, Q, op->kind == YC_OP_CONV2D_BWD_FILTER, T);
    g.silu = op->kind == YC_OP_CONV2D && op->p.conv.silu;
    return g;
}

/* Where one op's buffers lie (floats from the workspace's start). */
typedef struct wplan {
    int T;
    /* forward, backward-data: U (np x Kout x Cin), its np packed copies (pk floats each), the
     * GEMM's row offsets of V (Cin ptrdiff_t) */
    size_t u, pk, offs;
    /* per thread: V (np x Cin x ldt), M or Z (np x Kout x ldt), transform rows, a block's runs, and
     * for backward-filter one of Z's matrices packed */
    size_t v, m, scr, runs, ap, per;
    /* floats before the first thread's set */
    size_t head;
    /* backward-filter: one dU (np x Kout x Cin) per thread, after the thread sets */
    size_t part;
    size_t bytes;
} wplan;

static wplan wplan_make(yc_op_kind kind, const wgeom *g, int threads)
{
    wplan pl = {.T = threads > 0 ? threads : 1};
    size_t kc = (size_t)g->Kout * (size_t)g->Cin, np = (size_t)g->np;
    if (kind != YC_OP_CONV2D_BWD_FILTER) {
        pl.u = round16(np * kc);
        pl.pk = round16(yc_sgemm_packed_floats(g->Kout, g->Cin));
        pl.offs = round16((size_t)g->Cin * sizeof(ptrdiff_t) / sizeof(float));
    } else {
        /* V^T's row offsets (nt ptrdiff_t) in the head; per thread, a block's Z^T packed */
        pl.offs = round16((size_t)g->nt * sizeof(ptrdiff_t) / sizeof(float));
        pl.ap = round16(yc_sgemm_packed_floats(g->Kout, g->nt));
        pl.part = round16(np * kc);
    }
    pl.v = round16(np * (size_t)g->Cin * (size_t)g->ldt);
    pl.m = round16(np * (size_t)g->Kout * (size_t)g->ldt);
    pl.scr = kind == YC_OP_CONV2D_BWD_FILTER ? bf_scratch_floats(g) : scratch_floats(g);
    pl.runs = round16(((size_t)g->nt * sizeof(run) + sizeof(float) - 1) / sizeof(float));
    pl.per = pl.v + pl.m + pl.scr + pl.runs + pl.ap;
    pl.head = pl.u + np * pl.pk + pl.offs;
    pl.bytes = (pl.head + (size_t)pl.T * (pl.per + pl.part)) * sizeof(float);
    return pl;
}

size_t yc_cpu_winograd_workspace(const yc_op *op, int threads)
{
    wgeom g = wgeom_of(op, threads);
    return wplan_make(op->kind, &g, threads).bytes;
}

/* ---------------------------------------------------------------------------------------------
 * Runs and rows.
 * ------------------------------------------------------------------------------------------- */

/* The runs of tiles [t0, t1) into runs[] (at most t1 - t0 of them); returns their count. */
static int runs_of(const wgeom *g, size_t t0, size_t t1, run *runs)
{
    size_t per = (size_t)g->TH * (size_t)g->TW, r = t0 % per;
    run u = {.i = (int)(t0 / per), .ty = (int)(r / (size_t)g->TW), .tx0 = (int)(r % (size_t)g->TW)};
    int n = 0;
    for (size_t t = t0; t < t1;) {
        size_t left = t1 - t, row = (size_t)(g->TW - u.tx0);
        u.len = (int)(left < row ? left : row);
        u.j0 = t - t0;
        runs[n++] = u;
        t += (size_t)u.len;
        u.tx0 = 0;
        if (++u.ty == g->TH)
            u.ty = 0, u.i++;
    }
    return n;
}

/* The first of the `in` input rows (in_step*ty + in_off + r) that run ri needs made: in - in_step
 * when run ri - 1 was the tile row above over the same columns, whose last rows are this run's
 * first (the row pointers are rotated so that they come first), else 0. */
static int reuse_rows(const yc_wino_algo *al, const run *runs, int ri, float **rows)
{
    if (ri == 0)
        return 0;
    const run *u = &runs[ri], *p = &runs[ri - 1];
    if (u->i != p->i || u->ty != p->ty + 1 || u->tx0 != p->tx0 || u->len != p->len)
        return 0;
    float *old[YC_WINO_MAX_IN];
    for (int r = 0; r < al->in; r++)
        old[r] = rows[r];
    for (int r = 0; r < al->in; r++)
        rows[r] = old[(r + al->in_step) % al->in];
    return al->in - al->in_step;
}

/* Input row ro of t (element offset; FP32 or FP16, W columns) for tiles [tx0, tx0 + len): xp[u] =
 * x[in_step*tx0 + in_off + u] for u < row_cols(len), zero outside the row, or everywhere when the
 * row is outside the image (!inside). */
static void pad_row(const yc_wino_algo *al, int W, const yc_hv *t, size_t ro, bool inside, int tx0, int len,
                    float *xp)
{
    int first = al->in_step * tx0 + al->in_off, n = row_cols(al, len);
    if (!inside) {
        memset(xp, 0, (size_t)n * sizeof *xp);
        return;
    }
    int lo = first < 0 ? 0 : first, hi = first + n > W ? W : first + n; /* columns read */
    memset(xp, 0, (size_t)(lo - first) * sizeof *xp);
    yc_hv_load(t, ro + (size_t)lo, xp + (lo - first), (size_t)(hi - lo));
    memset(xp + (hi - first), 0, (size_t)(first + n - hi) * sizeof *xp);
}

/* ---------------------------------------------------------------------------------------------
 * Forward and backward-data.
 * ------------------------------------------------------------------------------------------- */

/* V (np x Cin x ldt: V[xi][c][j]) of the block's runs of t (Cin channels); n tiles in all. */
static void input_tiles(const wgeom *g, const yc_hv *t, const run *runs, int nruns, size_t n, float *V, float *scr)
{
    const yc_wino_algo *al = g->al;
    size_t rl = rowin(g), sv = (size_t)g->Cin * (size_t)g->ldt, hw = (size_t)g->iH * (size_t)g->iW;
    float *xp[YC_WINO_MAX_IN];
    for (int r = 0; r < al->in; r++)
        xp[r] = scr + (size_t)r * rl;
    for (int c = 0; c < g->Cin; c++) {
        for (int ri = 0; ri < nruns; ri++) {
            run u = runs[ri];
            size_t base = (size_t)u.i * t->ns + (size_t)c * hw;
            for (int r = reuse_rows(al, runs, ri, xp); r < al->in; r++) {
                int ih = al->in_step * u.ty + al->in_off + r;
                bool inside = ih >= 0 && ih < g->iH;
                pad_row(al, g->iW, t, base + (inside ? (size_t)ih * g->iW : 0), inside, u.tx0, u.len, xp[r]);
            }
            al->input(V + (size_t)c * g->ldt + u.j0, sv, xp, u.len);
        }
    }
    /* columns past the last tile of a short block: read by the GEMM, never used */
    if (n < (size_t)g->ldt)
        for (size_t row = 0; row < (size_t)g->np * (size_t)g->Cin; row++)
            memset(V + row * g->ldt + n, 0, ((size_t)g->ldt - n) * sizeof *V);
}

/* Output t (Kout channels; FP32 or FP16, acc: added to, FP32 only) of the block's runs from M
 * (np x Kout x ldt), plus bias[k] (may be NULL), then SiLU with g->silu. */
static void output_tiles(const wgeom *g, const float *M, const run *runs, int nruns, const float *bias,
                         const yc_hv *t, int acc, float *scr)
{
    const yc_wino_algo *al = g->al;
    size_t sm = (size_t)g->Kout * (size_t)g->ldt, hw = (size_t)g->oH * (size_t)g->oW;
    float *out[YC_WINO_MAX_OUT];
    for (int h = 0; h < al->out; h++)
        out[h] = scr + (size_t)(h * al->out) * rowt(g);
    for (int ri = 0; ri < nruns; ri++) {
        run u = runs[ri];
        int col = al->out * u.tx0, n = al->out * u.len < g->oW - col ? al->out * u.len : g->oW - col;
        for (int k = 0; k < g->Kout; k++) {
            al->output(out, M + (size_t)k * g->ldt + u.j0, sm, u.len, bias ? bias[k] : 0.0f);
            for (int h = 0; h < al->out && al->out * u.ty + h < g->oH; h++) {
                if (g->silu)
                    yc_cpu_silu_span(out[h], out[h], (size_t)n);
                size_t off = (size_t)u.i * t->ns + (size_t)k * hw + (size_t)(al->out * u.ty + h) * g->oW +
                             (size_t)col;
                if (acc)
                    yc_cpu_add_row(t->p + off, out[h], n);
                else
                    yc_hv_store(t, off, out[h], (size_t)n);
            }
        }
    }
}

/* out (=|+= with acc) = the convolution of in by the 3x3 kernels w, plus bias: w is (Kout, Cin, 3, 3)
 * (forward), or (Cin, Kout, 3, 3) taken transposed and rotated (flip: backward-data, U'[c, k] from
 * W[k, c]).  kept: where the packed transformed kernels are kept between runs (frozen weights,
 * yc_cpu_wcache_get), written when fill, else read as they are; NULL: the workspace's. */
static void wino_forward(const wgeom *g, const wplan *pl, const yc_hv *in, const yc_hv *out, const float *w,
                         bool flip, const float *bias, int acc, void *ws, float *kept, bool fill)
{
    const yc_wino_algo *al = g->al;
    float *U = ws, *Up = U + pl->u;
    ptrdiff_t *offs = (ptrdiff_t *)(Up + (size_t)g->np * pl->pk);
    size_t kc = (size_t)g->Kout * (size_t)g->Cin, rows = (size_t)g->Kout, cols = (size_t)g->Cin;
    if (kept)
        Up = kept;
    if (!kept || fill) {
#pragma omp parallel for num_threads(pl->T) schedule(static)
        for (size_t r = 0; r < rows; r++)
            al->weights(U + r * cols, kc, w + (flip ? r : r * cols) * 9, flip ? rows * 9 : 9, (int)cols,
                        flip);
        for (int xi = 0; xi < g->np; xi++)
            yc_sgemm_pack(false, g->Kout, g->Cin, U + (size_t)xi * kc, g->Cin, Up + (size_t)xi * pl->pk);
    }
    for (int c = 0; c < g->Cin; c++)
        offs[c] = (ptrdiff_t)c * g->ldt;
#pragma omp parallel num_threads(pl->T)
    {
        float *V = (float *)ws + pl->head + (size_t)omp_get_thread_num() * pl->per;
        float *M = V + pl->v, *scr = M + pl->m;
        run *runs = (run *)(scr + pl->scr);
#pragma omp for schedule(dynamic, 1)
        for (int b = 0; b < g->nblocks; b++) {
            size_t t0 = (size_t)b * g->nt, t1 = t0 + (size_t)g->nt < g->tiles ? t0 + (size_t)g->nt : g->tiles;
            int n = (int)(t1 - t0);
            int nr = runs_of(g, t0, t1, runs);
            input_tiles(g, in, runs, nr, t1 - t0, V, scr);
            for (int xi = 0; xi < g->np; xi++)
                yc_sgemm_offsets(g->Kout, n, g->Cin, 1.0f, U + (size_t)xi * kc, g->Cin, Up + (size_t)xi * pl->pk,
                                 V + (size_t)xi * g->Cin * g->ldt, offs, 0.0f, M + (size_t)xi * g->Kout * g->ldt,
                                 g->ldt);
            output_tiles(g, M, runs, nr, bias, out, acc, scr);
        }
    }
}

void yc_cpu_winograd_fwd(const yc_cpu_args *a)
{
    wgeom g = wgeom_of(a->op, a->threads);
    wplan pl = wplan_make(YC_OP_CONV2D, &g, a->threads);
    bool fill = false;
    float *kept = yc_cpu_wcache_get(a->wcache, a->op->src[1], g.al, (size_t)g.np * pl.pk, &fill);
    wino_forward(&g, &pl, &a->src[0], &a->dst[0], a->src[1].p, false, a->src[2].p, 0, a->ws, kept,
                 fill);
}

/* dx (=|+=) the convolution of dy by W transposed and rotated: Cin = K (dy's channels), Kout = C */
void yc_cpu_winograd_bwd_data(const yc_cpu_args *a)
{
    wgeom g = wgeom_of(a->op, a->threads);
    wplan pl = wplan_make(YC_OP_CONV2D_BWD_DATA, &g, a->threads);
    wino_forward(&g, &pl, &a->src[0], &a->dst[0], a->src[1].p, true, NULL, a->op->accumulate, a->ws, NULL,
                 false);
}

/* ---------------------------------------------------------------------------------------------
 * Backward-filter.
 * ------------------------------------------------------------------------------------------- */

/* Channel-minor rows for backward-filter: rows of `rows` channels of t (element offset base of
 * channel 0, channel stride hw, H x W images), each given by pad_row (pad: row_cols(len) columns)
 * or dy's plain columns [out*tx0, out*tx0 + m) zero up to out*len, transposed into dst[u*rows + c]
 * through tmp (rows x ld). */
static void minor_row(const yc_wino_algo *al, int H, int W, const yc_hv *t, size_t base, size_t hw, int rows, int ih,
                      bool pad, int tx0, int len, float *tmp, size_t ld, float *dst)
{
    int ncols = pad ? row_cols(al, len) : al->out * len;
    bool inside = ih >= 0 && ih < H;
    for (int c = 0; c < rows; c++) {
        float *d = tmp + (size_t)c * ld;
        size_t ro = base + (size_t)c * hw + (inside ? (size_t)ih * W : 0);
        if (pad) {
            pad_row(al, W, t, ro, inside, tx0, len, d);
        } else {
            int col = al->out * tx0, m = !inside ? 0 : ncols < W - col ? ncols : W - col;
            yc_hv_load(t, ro + (size_t)col, d, (size_t)m);
            memset(d + m, 0, (size_t)(ncols - m) * sizeof *d);
        }
    }
    yc_transpose(rows, ncols, tmp, (ptrdiff_t)ld, dst, rows);
}

/* V^T (np x nt x Cin) and Z^T (np x nt x Kout) of the block's runs from x and dy.  scr: the
 * channel-minor rows (`in` of x, `out` of dy) and the transposition rows (bf_scratch_floats). */
static void filter_tiles(const wgeom *g, const yc_hv *x, const yc_hv *dy, const run *runs, int nruns, float *Vt,
                         float *Zt, float *scr)
{
    const yc_wino_algo *al = g->al;
    size_t C = (size_t)g->Cin, K = (size_t)g->Kout, xhw = (size_t)g->iH * (size_t)g->iW;
    size_t dhw = (size_t)g->oH * (size_t)g->oW, nc = (size_t)row_cols(al, g->TW), nd = (size_t)al->out * g->TW;
    size_t ld = round16(nc > nd ? nc : nd);
    float *xr[YC_WINO_MAX_IN], *dr[YC_WINO_MAX_OUT];
    for (int r = 0; r < al->in; r++)
        xr[r] = scr + (size_t)r * nc * C;
    for (int h = 0; h < al->out; h++)
        dr[h] = scr + (size_t)al->in * nc * C + (size_t)h * nd * K;
    float *tmp = scr + (size_t)al->in * nc * C + (size_t)al->out * nd * K;
    for (int ri = 0; ri < nruns; ri++) {
        run u = runs[ri];
        size_t xb = (size_t)u.i * x->ns, db = (size_t)u.i * dy->ns;
        for (int r = reuse_rows(al, runs, ri, xr); r < al->in; r++)
            minor_row(al, g->iH, g->iW, x, xb, xhw, g->Cin, al->in_step * u.ty + al->in_off + r, true, u.tx0, u.len,
                      tmp, ld, xr[r]);
        for (int h = 0; h < al->out; h++)
            minor_row(al, g->oH, g->oW, dy, db, dhw, g->Kout, al->out * u.ty + h, false, u.tx0, u.len, tmp, ld,
                      dr[h]);
        al->input_t(Vt + u.j0 * C, (size_t)g->nt * C, xr, u.len, g->Cin);
        al->dy_t(Zt + u.j0 * K, (size_t)g->nt * K, dr, u.len, g->Kout);
    }
}

void yc_cpu_winograd_bwd_filter(const yc_cpu_args *a)
{
    const yc_hv *x = &a->src[0], *dy = &a->src[1];
    float *dw = a->dst[0].p, *db = a->dst[1].p;
    wgeom g = wgeom_of(a->op, a->threads);
    wplan pl = wplan_make(YC_OP_CONV2D_BWD_FILTER, &g, a->threads);
    size_t kc = (size_t)g.Kout * (size_t)g.Cin, np = (size_t)g.np;
    float *parts = (float *)a->ws + pl.head + (size_t)pl.T * pl.per;
    ptrdiff_t *offs = (ptrdiff_t *)a->ws;
    for (int t = 0; t < g.nt; t++)
        offs[t] = (ptrdiff_t)t * g.Cin;
#pragma omp parallel num_threads(pl.T)
    {
        int t = omp_get_thread_num();
        float *Vt = (float *)a->ws + pl.head + (size_t)t * pl.per, *Zt = Vt + pl.v, *scr = Zt + pl.m;
        run *runs = (run *)(scr + pl.scr);
        float *du = parts + (size_t)t * pl.part;
        memset(du, 0, np * kc * sizeof *du);
        float *ap = (float *)(runs) + pl.runs;
        size_t sv = (size_t)g.nt * (size_t)g.Cin, sz = (size_t)g.nt * (size_t)g.Kout;
#pragma omp for schedule(static)
        for (int b = 0; b < g.nblocks; b++) {
            size_t t0 = (size_t)b * g.nt, t1 = t0 + (size_t)g.nt < g.tiles ? t0 + (size_t)g.nt : g.tiles;
            int nr = runs_of(&g, t0, t1, runs), n = (int)(t1 - t0);
            filter_tiles(&g, x, dy, runs, nr, Vt, Zt, scr);
            /* dU_xi[K, C] += Z^T_xi[tiles, K]^T * V^T_xi[tiles, C], V^T's rows read in place */
            for (size_t xi = 0; xi < np; xi++) {
                yc_sgemm_pack(true, g.Kout, n, Zt + xi * sz, g.Kout, ap);
                yc_sgemm_offsets(g.Kout, g.Cin, n, 1.0f, Zt + xi * sz, g.Kout, ap, Vt + xi * sv, offs, 1.0f,
                                 du + xi * kc, g.Cin);
            }
        }
        /* the partials into the first, in thread order; then dW += the filter transform of dU */
        int nt = omp_get_num_threads();
#pragma omp for schedule(static)
        for (size_t e = 0; e < np * kc; e++) {
            float s = parts[e];
            for (int u = 1; u < nt; u++)
                s += parts[(size_t)u * pl.part + e];
            parts[e] = s;
        }
#pragma omp for schedule(static)
        for (size_t e = 0; e < kc; e++)
            g.al->filter(dw + e * 9, parts + e, kc);
    }
    if (db)
        yc_cpu_conv2d_bias_grad(dy, db, pl.T);
}
