/* Winograd F(2x2, 3x3) convolution on the CPU: the 3x3 stride-1 convolutions with padding 1 (YOLOv5's
 * bottleneck convolutions), forward, backward-data and backward-filter, in 16 GEMMs of a quarter of
 * the direct convolution's multiply-adds each (2.25x fewer in all).
 *
 * The output is cut into 2 x 2 tiles; tile (ty, tx) of an image reads the 4 x 4 input patch d at
 * rows 2ty-1 .. 2ty+2, columns 2tx-1 .. 2tx+2 (zero outside the image), and with
 *   B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1],  G = [1 0 0; .5 .5 .5; .5 -.5 .5; 0 0 1],
 *   A^T = [1 1 1 0; 0 1 -1 -1]
 * its outputs are
 *   Y[k] = A^T [ sum_c U[k, c] (.) V[c] ] A,   U[k, c] = G g[k, c] G^T,   V[c] = B^T d[c] B,
 * (.) elementwise over the 16 positions xi of a 4 x 4 matrix.  For each xi the sum over c is a
 * matrix product over all tiles at once:
 *   forward          M_xi[K, tiles] = U_xi[K, C] * V_xi[C, tiles]
 *   backward-data    the same with dy as input and the weights flipped and transposed,
 *                    U'[c, k] = G rot180(g[k, c]) G^T (a stride-1 pad-1 3x3 convolution's
 *                    transpose is one with its kernel rotated), dx (=|+=) the output
 *   backward-filter  dU_xi[K, C] += Z_xi[K, tiles] * V_xi[C, tiles]^T,  Z[k] = A dY[k] A^T
 *                    (dY the tile's 2 x 2 outputs' gradient, zero past the image), and at the
 *                    end dW[k, c] += G^T dU[k, c] G
 * (the last is the transpose of the forward's linear map from g to Y: dL/dg = G^T [V (.) A dY A^T] G
 * summed over tiles).  Tiles past an odd image edge compute outputs that are dropped (forward)
 * or multiply dy's zeros (backward-filter).
 *
 * Arithmetic: the transforms add and subtract, and halve (exact), so the GEMMs see the direct
 * convolution's products regrouped: the result differs from the implicit GEMM's (conv.c) by
 * rounding only, a few units of the last place of the largest terms (tests/test_ops.c compares
 * both with a double reference at the same tolerance).  An Inf or NaN in the input spreads over
 * its tile's outputs (a transform adds it to its neighbours) where the direct convolution keeps
 * it to the outputs that read it.
 *
 * Work: the tiles of all images, in (image, tile row, tile column) order, are cut into blocks of
 * `nt` tiles (forward, backward-data: a multiple of the GEMM's panel width, so that V's rows are read
 * in place by the GEMM, yc_sgemm_offsets; backward-filter: larger, and as many blocks as a multiple
 * of the thread count); a block is one work item: its input transform, the 16
 * GEMMs, then the output transform (forward, backward-data) or, before the GEMMs, its dy transform
 * (backward-filter).  Forward and backward-data hand blocks out dynamically (a block's result does
 * not depend on the thread computing it); backward-filter splits them statically, each thread
 * adding into its own dU (16 x K x C floats), the partials added in thread order before the final
 * transform.
 *
 * Transforms run on 16 values at a time (vec16.h).  Forward and backward-data store V[xi][c][tile]
 * and M[xi][k][tile], 16 tiles of a run along a tile row at a time: the input rows are copied with
 * their zero padding, tile v's four columns are then elements 2v .. 2v+3, split into even and odd
 * ones in registers; the outputs are interleaved back the same way.  Backward-filter stores them
 * tile-major, V^T[xi][tile][c] and Z^T[xi][tile][k], 16 channels at a time, from input and dy rows
 * made channel-minor first (yc_transpose): its GEMMs sum over tiles, and with both operands
 * tile-major V^T is read in place and Z^T packed by copying, where channel-major operands had both
 * transposed by the GEMM's packing (four times the input's size, against once for the rows).
 *
 * FP16 activations (x of forward and backward-filter, y of forward) are converted row by row on
 * the way in and rounded on the way out; the rest is as for FP32 tensors holding the same values.
 *
 * Workspace (each buffer rounded up to 16 floats): forward and backward-data: U (16 x K x C), U
 * packed for the 16 GEMMs, V's row offsets, then per thread V, M, the transform rows and the
 * block's runs; backward-filter: V^T's row offsets, per thread V^T, Z^T, the transform rows, the
 * runs and one of Z^T's matrices packed, then one dU per thread. */
#include <omp.h>
#include <stdlib.h>

#include "cpu_ops.h"
#include "gemm.h"
#include "vec16.h"

/* Floats of a block's V and M together (forward, backward-data): 1 MiB, half of a core's L2 on the
 * machines measured, the other half for U's rows of the current GEMM and the transform rows.
 * Backward-filter's V^T and Z^T: 4 MiB, whose longer sums over tiles amortise each block's update of
 * the thread's dU (16 x K x C floats, 1-4 MiB on YOLOv5s): 12-16% faster than 1 MiB on one thread
 * (YOLOv5s's 128- and 256-filter layers at 640, batch 8), provided the blocks split evenly over the
 * threads (below). */
#define YC_WINO_BLOCK ((size_t)1 << 18)
#define YC_WINO_BLOCK_FILTER ((size_t)1 << 20)

/* Shapes: a 3x3 stride-1 pad-1 convolution keeps the image size. */
typedef struct wgeom {
    /* images; channels transformed on the way in (forward, backward-filter: x's C; backward-data:
     * dy's K) and channels produced (forward: K, backward-data: C; backward-filter: dy's K) */
    int N, Cin, Kout;
    /* rows and columns of every image (input and output alike) */
    int H, W;
    /* tile rows and columns per image, ceil(H/2) and ceil(W/2) */
    int TH, TW;
    /* tiles of all images */
    size_t tiles;
    /* tiles per block, and the row stride of V, M and Z: nt rounded up to the GEMM's panel (which it
     * reads), plus a vector of slack (the transforms store whole vectors past a run's end) */
    int nt, ldt;
    /* blocks */
    int nblocks;
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

/* One thread's transform rows, each with room for the whole vectors the transforms load and store
 * past a run's end: the input transform's four padded input rows (rowin floats each); the output
 * transform's two interleaved output rows and the dy transform's two dy rows (2*rowt each). */
static size_t rowin(const wgeom *g)
{
    return round16(2 * (size_t)g->TW + 2 + 3 * VL);
}

static size_t rowt(const wgeom *g)
{
    return round16((size_t)g->TW + VL);
}

static size_t scratch_floats(const wgeom *g)
{
    size_t in = 4 * rowin(g), out = 4 * rowt(g);
    return in > out ? in : out;
}

/* Backward-filter's transform rows: four channel-minor input rows and two of dy (2*TW + 2 columns
 * each), and the rows they are transposed from (the larger channel count, columns rounded up to 16). */
static size_t bf_scratch_floats(const wgeom *g)
{
    size_t nc = 2 * (size_t)g->TW + 2, big = g->Cin > g->Kout ? (size_t)g->Cin : (size_t)g->Kout;
    return round16(nc * (4 * (size_t)g->Cin + 2 * (size_t)g->Kout) + big * round16(nc));
}

/* filter: backward-filter's blocks, a multiple of T of them (its threads take equal shares, and a
 * thread with one block more than the others is the op's critical path) of at most
 * YC_WINO_BLOCK_FILTER floats, any number of tiles; otherwise blocks of YC_WINO_BLOCK floats in whole
 * panels of the GEMM. */
static wgeom wgeom_make(int N, int Cin, int Kout, int H, int W, bool filter, int T)
{
    wgeom g = {.N = N, .Cin = Cin, .Kout = Kout, .H = H, .W = W};
    g.TH = (H + 1) / 2;
    g.TW = (W + 1) / 2;
    g.tiles = (size_t)N * (size_t)g.TH * (size_t)g.TW;
    size_t nr = (size_t)yc_sgemm_nr(), per = 16 * (size_t)(Cin + Kout), nt;
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

/* Whether a convolution op runs here: 3x3, stride 1, padding 1, one group, and at least
 * min_channels(kind) channels on both sides.  Below that the 16 GEMMs' sums over channels are too
 * short for the 2.25x fewer multiply-adds to pay (measured on YOLOv5s's layers at 640, one thread,
 * against the implicit GEMM: with 32 channels the forward pass was even and backward-data 17%
 * faster; with 64, backward-filter, whose products have one operand packed per block, was 7%
 * slower, with 128 and 256 channels 18-27% faster).  Backward-filter also needs channel counts
 * that are multiples of 16 (its transforms run on 16 channels at a time).  YOLOCL_WINOGRAD=0 in the
 * environment turns all of it off (read once). */
static int min_channels(yc_op_kind kind)
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

static int wino_env = -1;

static bool wino_enabled(void)
{
    int e = __atomic_load_n(&wino_env, __ATOMIC_RELAXED);
    if (e < 0) {
        const char *s = getenv("YOLOCL_WINOGRAD");
        e = s && s[0] == '0' && s[1] == '\0' ? 0 : 1;
        __atomic_store_n(&wino_env, e, __ATOMIC_RELAXED);
    }
    return e;
}

/* The convolution's input channels C, filters K, image rows and columns from its tensors. */
static void conv_dims(const yc_op *op, int *N, int *C, int *K, int *H, int *W)
{
    const yc_tensor *x = op->kind == YC_OP_CONV2D_BWD_DATA ? op->dst[0] : op->src[0];
    const yc_tensor *w = op->kind == YC_OP_CONV2D_BWD_FILTER ? op->dst[0] : op->src[1];
    *N = x->n, *C = x->c, *K = w->n, *H = x->h, *W = x->w;
}

bool yc_cpu_winograd_applies(const yc_op *op)
{
    if (op->p.conv.kh != 3 || op->p.conv.kw != 3 || op->p.conv.stride_h != 1 || op->p.conv.stride_w != 1 ||
        op->p.conv.pad_h != 1 || op->p.conv.pad_w != 1 || op->p.conv.groups != 1)
        return false;
    int N, C, K, H, W;
    conv_dims(op, &N, &C, &K, &H, &W);
    if (op->kind == YC_OP_CONV2D_BWD_FILTER && (C % 16 || K % 16))
        return false;
    return C >= min_channels(op->kind) && K >= min_channels(op->kind) && wino_enabled();
}

/* The op's geometry with T threads: forward and backward-filter transform x (C channels) into K
 * outputs, backward-data transforms dy (K channels) into C. */
static wgeom wgeom_of(const yc_op *op, int T)
{
    int N, C, K, H, W;
    conv_dims(op, &N, &C, &K, &H, &W);
    if (op->kind == YC_OP_CONV2D_BWD_DATA)
        return wgeom_make(N, K, C, H, W, false, T);
    return wgeom_make(N, C, K, H, W, op->kind == YC_OP_CONV2D_BWD_FILTER, T);
}

/* Where one op's buffers lie (floats from the workspace's start). */
typedef struct wplan {
    int T;
    /* forward, backward-data: U (16 x Kout x Cin), its 16 packed copies (pk floats each), the
     * GEMM's row offsets of V (Cin ptrdiff_t) */
    size_t u, pk, offs;
    /* per thread: V (16 x Cin x ldt), M or Z (16 x Kout x ldt), transform rows, a block's runs, and
     * for backward-filter one of Z's 16 matrices packed */
    size_t v, m, scr, runs, ap, per;
    /* floats before the first thread's set */
    size_t head;
    /* backward-filter: one dU (16 x Kout x Cin) per thread, after the thread sets */
    size_t part;
    size_t bytes;
} wplan;

static wplan wplan_make(yc_op_kind kind, const wgeom *g, int threads)
{
    wplan pl = {.T = threads > 0 ? threads : 1};
    size_t kc = (size_t)g->Kout * (size_t)g->Cin;
    if (kind != YC_OP_CONV2D_BWD_FILTER) {
        pl.u = round16(16 * kc);
        pl.pk = round16(yc_sgemm_packed_floats(g->Kout, g->Cin));
        pl.offs = round16((size_t)g->Cin * sizeof(ptrdiff_t) / sizeof(float));
    } else {
        /* V^T's row offsets (nt ptrdiff_t) in the head; per thread, a block's Z^T packed */
        pl.offs = round16((size_t)g->nt * sizeof(ptrdiff_t) / sizeof(float));
        pl.ap = round16(yc_sgemm_packed_floats(g->Kout, g->nt));
        pl.part = round16(16 * kc);
    }
    pl.v = round16(16 * (size_t)g->Cin * (size_t)g->ldt);
    pl.m = round16(16 * (size_t)g->Kout * (size_t)g->ldt);
    pl.scr = kind == YC_OP_CONV2D_BWD_FILTER ? bf_scratch_floats(g) : scratch_floats(g);
    pl.runs = round16(((size_t)g->nt * sizeof(run) + sizeof(float) - 1) / sizeof(float));
    pl.per = pl.v + pl.m + pl.scr + pl.runs + pl.ap;
    pl.head = pl.u + 16 * pl.pk + pl.offs;
    pl.bytes = (pl.head + (size_t)pl.T * (pl.per + pl.part)) * sizeof(float);
    return pl;
}

size_t yc_cpu_winograd_workspace(const yc_op *op, int threads)
{
    wgeom g = wgeom_of(op, threads);
    return wplan_make(op->kind, &g, threads).bytes;
}

/* ---------------------------------------------------------------------------------------------
 * Transforms, 16 tiles (backward-filter: 16 channels) at a time.  They load and store whole
 * vectors: past a run's end they compute junk from the rows' slack, which lands in columns that
 * the next run overwrites, in the rows' slack, or in outputs nobody reads.
 * ------------------------------------------------------------------------------------------- */

static inline __attribute__((always_inline)) void vload(vf *v, const float *p)
{
    memcpy(v, p, sizeof *v);
}

static inline __attribute__((always_inline)) void vstore(float *p, const vf *v)
{
    memcpy(p, v, sizeof *v);
}

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

/* The first of the four input rows (2ty - 1 .. 2ty + 2) that run ri needs made: 2 when run ri - 1 was
 * the tile row above over the same columns, whose last two rows are this run's first two (the row
 * pointers are rotated so that rows[0], rows[1] point to them), else 0. */
static int reuse_rows(const run *runs, int ri, float *rows[4])
{
    if (ri == 0)
        return 0;
    const run *u = &runs[ri], *p = &runs[ri - 1];
    if (u->i != p->i || u->ty != p->ty + 1 || u->tx0 != p->tx0 || u->len != p->len)
        return 0;
    float *a = rows[0], *b = rows[1];
    rows[0] = rows[2], rows[1] = rows[3], rows[2] = a, rows[3] = b;
    return 2;
}

/* Input row ro of t (element offset; FP32 or FP16, W columns) for tiles [tx0, tx0 + len): xp[u] =
 * x[2*tx0 - 1 + u] for u < 2*len + 2, zero outside the row, or everywhere when the row is outside
 * the image (!inside). */
static void pad_row(const wgeom *g, const yc_hv *t, size_t ro, bool inside, int tx0, int len, float *xp)
{
    int first = 2 * tx0 - 1, n = 2 * len + 2;
    if (!inside) {
        memset(xp, 0, (size_t)n * sizeof *xp);
        return;
    }
    int lo = first < 0 ? 0 : first, hi = first + n > g->W ? g->W : first + n; /* columns read */
    memset(xp, 0, (size_t)(lo - first) * sizeof *xp);
    yc_hv_load(t, ro + (size_t)lo, xp + (lo - first), (size_t)(hi - lo));
    memset(xp + (hi - first), 0, (size_t)(first + n - hi) * sizeof *xp);
}

/* The even and odd elements of the 32 floats at p: p[0], p[2], ... p[30] and p[1], p[3], ... p[31]. */
static inline __attribute__((always_inline)) void deinterleave(vf *even, vf *odd, const float *p)
{
    vf a, b;
    vload(&a, p);
    vload(&b, p + VL);
    *even = __builtin_shuffle(a, b, (vi){0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30});
    *odd = __builtin_shuffle(a, b, (vi){1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31});
}

/* V[xi][v] (xi = 4a + b, row stride sv between the 16) = (B^T d B)[a][b] of the run's tiles v <
 * len, from the four input rows made by pad_row: tile v's patch row r is xp[r][2v .. 2v + 3]. */
YC_CPU_CLONES
static void input_transform(float *vrow, size_t sv, float *const xp[4], int len)
{
    vf c[4][4], d0, d1, d2, d3;
    for (size_t v = 0; v < (size_t)len; v += VL) {
        for (int r = 0; r < 4; r++) {
            deinterleave(&d0, &d1, xp[r] + 2 * v);
            deinterleave(&d2, &d3, xp[r] + 2 * v + 2);
            /* d B: the patch row's four columns d0 .. d3 combined */
            c[r][0] = d0 - d2;
            c[r][1] = d1 + d2;
            c[r][2] = d2 - d1;
            c[r][3] = d1 - d3;
        }
        for (int b = 0; b < 4; b++) {
            vf t0 = c[0][b] - c[2][b], t1 = c[1][b] + c[2][b], t2 = c[2][b] - c[1][b], t3 = c[1][b] - c[3][b];
            vstore(vrow + (size_t)(0 + b) * sv + v, &t0);
            vstore(vrow + (size_t)(4 + b) * sv + v, &t1);
            vstore(vrow + (size_t)(8 + b) * sv + v, &t2);
            vstore(vrow + (size_t)(12 + b) * sv + v, &t3);
        }
    }
}

/* V (16 x Cin x ldt: V[xi][c][j]) of the block's runs of t (Cin channels); n tiles in all. */
static void input_tiles(const wgeom *g, const yc_hv *t, const run *runs, int nruns, size_t n, float *V, float *scr)
{
    size_t rl = rowin(g), sv = (size_t)g->Cin * (size_t)g->ldt;
    float *xp[4];
    for (int r = 0; r < 4; r++)
        xp[r] = scr + (size_t)r * rl;
    size_t hw = (size_t)g->H * (size_t)g->W;
    for (int c = 0; c < g->Cin; c++) {
        for (int ri = 0; ri < nruns; ri++) {
            run u = runs[ri];
            size_t base = (size_t)u.i * t->ns + (size_t)c * hw;
            for (int r = reuse_rows(runs, ri, xp); r < 4; r++) {
                int ih = 2 * u.ty - 1 + r;
                bool inside = ih >= 0 && ih < g->H;
                pad_row(g, t, base + (inside ? (size_t)ih * g->W : 0), inside, u.tx0, u.len, xp[r]);
            }
            input_transform(V + (size_t)c * g->ldt + u.j0, sv, xp, u.len);
        }
    }
    /* columns past the last tile of a short block: read by the GEMM, never used */
    if (n < (size_t)g->ldt)
        for (size_t row = 0; row < 16 * (size_t)g->Cin; row++)
            memset(V + row * g->ldt + n, 0, ((size_t)g->ldt - n) * sizeof *V);
}

/* Two output rows of the run's tiles from M[xi][v] (row stride sm between the 16), A^T M A + bias,
 * interleaved: out[h][2v + w] = the output at row 2ty + h, column 2(tx0 + v) + w. */
YC_CPU_CLONES
static void output_transform(float *const out[2], const float *mrow, size_t sm, int len, float bias)
{
    const vi lo = {0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23};
    const vi hi = {8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
    vf m[16];
    for (size_t v = 0; v < (size_t)len; v += VL) {
        for (int xi = 0; xi < 16; xi++)
            vload(&m[xi], mrow + (size_t)xi * sm + v);
        vf s[4], d[4];
        for (int b = 0; b < 4; b++) {
            s[b] = m[b] + m[4 + b] + m[8 + b];
            d[b] = m[4 + b] - m[8 + b] - m[12 + b];
        }
        vf y00 = s[0] + s[1] + s[2] + bias, y01 = s[1] - s[2] - s[3] + bias;
        vf y10 = d[0] + d[1] + d[2] + bias, y11 = d[1] - d[2] - d[3] + bias;
        vf r00 = __builtin_shuffle(y00, y01, lo), r01 = __builtin_shuffle(y00, y01, hi);
        vf r10 = __builtin_shuffle(y10, y11, lo), r11 = __builtin_shuffle(y10, y11, hi);
        vstore(out[0] + 2 * v, &r00);
        vstore(out[0] + 2 * v + VL, &r01);
        vstore(out[1] + 2 * v, &r10);
        vstore(out[1] + 2 * v + VL, &r11);
    }
}

/* Output t (Kout channels; FP32 or FP16, acc: added to, FP32 only) of the block's runs from M
 * (16 x Kout x ldt), plus bias[k] (may be NULL). */
static void output_tiles(const wgeom *g, const float *M, const run *runs, int nruns, const float *bias,
                         const yc_hv *t, int acc, float *scr)
{
    size_t sm = (size_t)g->Kout * (size_t)g->ldt, hw = (size_t)g->H * (size_t)g->W;
    float *out[2] = {scr, scr + 2 * rowt(g)};
    for (int ri = 0; ri < nruns; ri++) {
        run u = runs[ri];
        int col = 2 * u.tx0, n = 2 * u.len < g->W - col ? 2 * u.len : g->W - col;
        for (int k = 0; k < g->Kout; k++) {
            output_transform(out, M + (size_t)k * g->ldt + u.j0, sm, u.len, bias ? bias[k] : 0.0f);
            for (int h = 0; h < 2 && 2 * u.ty + h < g->H; h++) {
                size_t off = (size_t)u.i * t->ns + (size_t)k * hw + (size_t)(2 * u.ty + h) * g->W + (size_t)col;
                if (acc)
                    yc_cpu_add_row(t->p + off, out[h], n);
                else
                    yc_hv_store(t, off, out[h], (size_t)n);
            }
        }
    }
}

/* Element (r, q) of the 16 matrices U[xi] (rows x cols each, row stride cols) = G g G^T for the 3x3
 * kernel g (9 floats, row-major; rot: rotated by 180 degrees first). */
static void weight_transform(float *U, size_t rows, size_t cols, size_t r, size_t q, const float *g, int rot)
{
    float k[3][3], t[4][3];
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 3; b++)
            k[a][b] = rot ? g[(2 - a) * 3 + (2 - b)] : g[a * 3 + b];
    for (int b = 0; b < 3; b++) { /* G k: rows */
        t[0][b] = k[0][b];
        t[1][b] = 0.5f * (k[0][b] + k[1][b] + k[2][b]);
        t[2][b] = 0.5f * (k[0][b] - k[1][b] + k[2][b]);
        t[3][b] = k[2][b];
    }
    for (int a = 0; a < 4; a++) { /* (G k) G^T: columns */
        float *u = U + (size_t)(4 * a) * rows * cols + r * cols + q;
        size_t s = rows * cols;
        u[0] = t[a][0];
        u[s] = 0.5f * (t[a][0] + t[a][1] + t[a][2]);
        u[2 * s] = 0.5f * (t[a][0] - t[a][1] + t[a][2]);
        u[3 * s] = t[a][2];
    }
}

/* ---------------------------------------------------------------------------------------------
 * Forward and backward-data.
 * ------------------------------------------------------------------------------------------- */

/* out (N, Kout, H, W) (=|+= with acc) = the convolution of in (N, Cin, H, W) by the 3x3 kernels w,
 * plus bias: w is (Kout, Cin, 3, 3) (forward), or (Cin, Kout, 3, 3) taken transposed and rotated
 * (flip: backward-data, U'[c, k] from W[k, c]). */
static void wino_forward(const wgeom *g, const wplan *pl, const yc_hv *in, const yc_hv *out, const float *w,
                         bool flip, const float *bias, int acc, void *ws)
{
    float *U = ws, *Up = U + pl->u;
    ptrdiff_t *offs = (ptrdiff_t *)(Up + 16 * pl->pk);
    size_t kc = (size_t)g->Kout * (size_t)g->Cin, rows = (size_t)g->Kout, cols = (size_t)g->Cin;
#pragma omp parallel for num_threads(pl->T) schedule(static)
    for (size_t r = 0; r < rows; r++)
        for (size_t q = 0; q < cols; q++)
            weight_transform(U, rows, cols, r, q, w + (flip ? q * rows + r : r * cols + q) * 9, flip);
    for (int xi = 0; xi < 16; xi++)
        yc_sgemm_pack(false, g->Kout, g->Cin, U + (size_t)xi * kc, g->Cin, Up + (size_t)xi * pl->pk);
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
            for (int xi = 0; xi < 16; xi++)
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
    wino_forward(&g, &pl, &a->src[0], &a->dst[0], a->src[1].p, false, a->src[2].p, 0, a->ws);
}

/* dx (=|+=) the convolution of dy by W transposed and rotated: Cin = K (dy's channels), Kout = C */
void yc_cpu_winograd_bwd_data(const yc_cpu_args *a)
{
    wgeom g = wgeom_of(a->op, a->threads);
    wplan pl = wplan_make(YC_OP_CONV2D_BWD_DATA, &g, a->threads);
    wino_forward(&g, &pl, &a->src[0], &a->dst[0], a->src[1].p, true, NULL, a->op->accumulate, a->ws);
}

/* ---------------------------------------------------------------------------------------------
 * Backward-filter.
 * ------------------------------------------------------------------------------------------- */

/* dw[0..8] += G^T du G for one (k, c): du[xi] at du + xi*s (16 values), in double. */
static void filter_transform(float *dw, const float *du, size_t s)
{
    double t[4][3];
    for (int a = 0; a < 4; a++) { /* du G: columns */
        double u0 = du[(size_t)(4 * a) * s], u1 = du[(size_t)(4 * a + 1) * s], u2 = du[(size_t)(4 * a + 2) * s],
               u3 = du[(size_t)(4 * a + 3) * s];
        t[a][0] = u0 + 0.5 * (u1 + u2);
        t[a][1] = 0.5 * (u1 - u2);
        t[a][2] = 0.5 * (u1 + u2) + u3;
    }
    for (int q = 0; q < 3; q++) { /* G^T (du G): rows */
        double r0 = t[0][q] + 0.5 * (t[1][q] + t[2][q]), r1 = 0.5 * (t[1][q] - t[2][q]),
               r2 = 0.5 * (t[1][q] + t[2][q]) + t[3][q];
        dw[q] = (float)((double)dw[q] + r0);
        dw[3 + q] = (float)((double)dw[3 + q] + r1);
        dw[6 + q] = (float)((double)dw[6 + q] + r2);
    }
}

/* Channel-minor rows for backward-filter: rows of `rows` channels of t (element offset base of
 * channel 0, channel stride hw), each given by pad_row (first, ncols columns) or plain columns
 * [col, col + m) zero up to ncols (dy), transposed into dst[u*rows + c] through tmp (rows x ld). */
static void minor_row(const wgeom *g, const yc_hv *t, size_t base, size_t hw, int rows, int ih, bool pad, int tx0,
                      int len, float *tmp, size_t ld, float *dst)
{
    int ncols = pad ? 2 * len + 2 : 2 * len;
    bool inside = ih >= 0 && ih < g->H;
    for (int c = 0; c < rows; c++) {
        float *d = tmp + (size_t)c * ld;
        size_t ro = base + (size_t)c * hw + (inside ? (size_t)ih * g->W : 0);
        if (pad) {
            pad_row(g, t, ro, inside, tx0, len, d);
        } else {
            int col = 2 * tx0, m = !inside ? 0 : ncols < g->W - col ? ncols : g->W - col;
            yc_hv_load(t, ro + (size_t)col, d, (size_t)m);
            memset(d + m, 0, (size_t)(ncols - m) * sizeof *d);
        }
    }
    yc_transpose(rows, ncols, tmp, (ptrdiff_t)ld, dst, rows);
}

/* V^T[xi][v][c] (xi's matrices sx floats apart, rows of C) = (B^T d B)[a][b] of the run's tiles v <
 * len from four channel-minor input rows: tile v's patch element (r, q) of channel c is
 * xr[r][(2v + q)*C + c].  C is a multiple of 16. */
YC_CPU_CLONES
static void input_transform_t(float *vt, size_t sx, float *const xr[4], int len, int C)
{
    vf c[4][4], d0, d1, d2, d3;
    for (int v = 0; v < len; v++)
        for (int c0 = 0; c0 < C; c0 += VL) {
            for (int r = 0; r < 4; r++) {
                const float *p = xr[r] + (size_t)(2 * v) * C + c0;
                vload(&d0, p);
                vload(&d1, p + C);
                vload(&d2, p + 2 * (size_t)C);
                vload(&d3, p + 3 * (size_t)C);
                c[r][0] = d0 - d2;
                c[r][1] = d1 + d2;
                c[r][2] = d2 - d1;
                c[r][3] = d1 - d3;
            }
            float *o = vt + (size_t)v * C + c0;
            for (int b = 0; b < 4; b++) {
                vf t0 = c[0][b] - c[2][b], t1 = c[1][b] + c[2][b], t2 = c[2][b] - c[1][b], t3 = c[1][b] - c[3][b];
                vstore(o + (size_t)(0 + b) * sx, &t0);
                vstore(o + (size_t)(4 + b) * sx, &t1);
                vstore(o + (size_t)(8 + b) * sx, &t2);
                vstore(o + (size_t)(12 + b) * sx, &t3);
            }
        }
}

/* Z^T[xi][v][k] (matrices sx floats apart, rows of K) = (A dY A^T)[a][b] of the run's tiles from dy's
 * two channel-minor rows: dr[h][(2v + w)*K + k] = dy[k] at row 2ty + h, column 2(tx0 + v) + w (zero
 * past the image).  K is a multiple of 16. */
YC_CPU_CLONES
static void dy_transform_t(float *zt, size_t sx, float *const dr[2], int len, int K)
{
    vf c[2][4], a, b;
    for (int v = 0; v < len; v++)
        for (int k0 = 0; k0 < K; k0 += VL) {
            for (int h = 0; h < 2; h++) {
                vload(&a, dr[h] + (size_t)(2 * v) * K + k0);
                vload(&b, dr[h] + (size_t)(2 * v + 1) * K + k0);
                c[h][0] = a;
                c[h][1] = a + b;
                c[h][2] = a - b;
                c[h][3] = -b;
            }
            float *o = zt + (size_t)v * K + k0;
            for (int q = 0; q < 4; q++) {
                vf t1 = c[0][q] + c[1][q], t2 = c[0][q] - c[1][q], t3 = -c[1][q];
                vstore(o + (size_t)(0 + q) * sx, &c[0][q]);
                vstore(o + (size_t)(4 + q) * sx, &t1);
                vstore(o + (size_t)(8 + q) * sx, &t2);
                vstore(o + (size_t)(12 + q) * sx, &t3);
            }
        }
}

/* V^T (16 x nt x Cin) and Z^T (16 x nt x Kout) of the block's runs from x and dy.  scr: the
 * channel-minor rows (four of x, two of dy) and the transposition rows (bf_scratch). */
static void filter_tiles(const wgeom *g, const yc_hv *x, const yc_hv *dy, const run *runs, int nruns, float *Vt,
                         float *Zt, float *scr)
{
    size_t C = (size_t)g->Cin, K = (size_t)g->Kout, hw = (size_t)g->H * (size_t)g->W, nc = 2 * (size_t)g->TW + 2;
    size_t ld = round16(nc);
    float *xr[4], *dr[2], *tmp = scr + 4 * nc * C + 2 * nc * K;
    for (int r = 0; r < 4; r++)
        xr[r] = scr + (size_t)r * nc * C;
    dr[0] = scr + 4 * nc * C;
    dr[1] = dr[0] + nc * K;
    for (int ri = 0; ri < nruns; ri++) {
        run u = runs[ri];
        size_t xb = (size_t)u.i * x->ns, db = (size_t)u.i * dy->ns;
        for (int r = reuse_rows(runs, ri, xr); r < 4; r++)
            minor_row(g, x, xb, hw, g->Cin, 2 * u.ty - 1 + r, true, u.tx0, u.len, tmp, ld, xr[r]);
        for (int h = 0; h < 2; h++)
            minor_row(g, dy, db, hw, g->Kout, 2 * u.ty + h, false, u.tx0, u.len, tmp, ld, dr[h]);
        input_transform_t(Vt + u.j0 * C, (size_t)g->nt * C, xr, u.len, g->Cin);
        dy_transform_t(Zt + u.j0 * K, (size_t)g->nt * K, dr, u.len, g->Kout);
    }
}

void yc_cpu_winograd_bwd_filter(const yc_cpu_args *a)
{
    const yc_hv *x = &a->src[0], *dy = &a->src[1];
    float *dw = a->dst[0].p, *db = a->dst[1].p;
    wgeom g = wgeom_of(a->op, a->threads);
    wplan pl = wplan_make(YC_OP_CONV2D_BWD_FILTER, &g, a->threads);
    size_t kc = (size_t)g.Kout * (size_t)g.Cin;
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
        memset(du, 0, 16 * kc * sizeof *du);
        float *ap = (float *)(runs) + pl.runs;
        size_t sv = (size_t)g.nt * (size_t)g.Cin, sz = (size_t)g.nt * (size_t)g.Kout;
#pragma omp for schedule(static)
        for (int b = 0; b < g.nblocks; b++) {
            size_t t0 = (size_t)b * g.nt, t1 = t0 + (size_t)g.nt < g.tiles ? t0 + (size_t)g.nt : g.tiles;
            int nr = runs_of(&g, t0, t1, runs), n = (int)(t1 - t0);
            filter_tiles(&g, x, dy, runs, nr, Vt, Zt, scr);
            /* dU_xi[K, C] += Z^T_xi[tiles, K]^T * V^T_xi[tiles, C], V^T's rows read in place */
            for (int xi = 0; xi < 16; xi++) {
                yc_sgemm_pack(true, g.Kout, n, Zt + (size_t)xi * sz, g.Kout, ap);
                yc_sgemm_offsets(g.Kout, g.Cin, n, 1.0f, Zt + (size_t)xi * sz, g.Kout, ap, Vt + (size_t)xi * sv,
                                 offs, 1.0f, du + (size_t)xi * kc, g.Cin);
            }
        }
        /* the partials into the first, in thread order; then dW += G^T dU G */
        int nt = omp_get_num_threads();
#pragma omp for schedule(static)
        for (size_t e = 0; e < 16 * kc; e++) {
            float s = parts[e];
            for (int u = 1; u < nt; u++)
                s += parts[(size_t)u * pl.part + e];
            parts[e] = s;
        }
#pragma omp for schedule(static)
        for (size_t e = 0; e < kc; e++)
            filter_transform(dw + e * 9, parts + e, kc);
    }
    if (db)
        yc_cpu_conv2d_bias_grad(dy, db, pl.T);
}
