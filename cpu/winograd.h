/* The Winograd algorithms that cpu/winograd.c runs, each described by its tile geometry and its
 * transforms (winograd_f23.c: F(2x2, 3x3); winograd_f43.c: F(4x4, 3x3)).
 *
 * A tile's input patch is `in` x `in` values of the input, patches `in_step` apart starting at
 * in_step*t + in_off (rows and columns alike; zero outside the image); its outputs are `out` x `out`
 * values at out*t.  The patch is transformed into side x side values V[xi] (xi = a*side + b), the
 * kernel into U[xi], and for every xi the sum over input channels is one GEMM over all tiles,
 * M_xi[K, tiles] = U_xi[K, C] * V_xi[C, tiles]; the output transform turns M's side x side values of
 * a tile into its outputs.  Backward-filter (side, in, in_step, in_off as the forward; dy's tile
 * is the forward's out x out outputs) transforms dy's tile into Z[xi] and sums
 * dU_xi[K, C] += Z_xi[K, tiles] * V_xi[C, tiles]^T, then dW += the kernel-shaped transpose of U's
 * transform applied to dU.
 *
 * The transforms take the rows of a run of `len` tiles along a tile row and work on 16 tiles
 * (vec16.h's vectors; backward-filter's on 16 channels) at a time; they read and write whole vectors
 * past the run's end (the driver's rows have that slack). */
#ifndef YC_WINOGRAD_H
#define YC_WINOGRAD_H

#include <stddef.h>

typedef struct yc_wino_algo {
    /* what it computes, for comments and messages */
    const char *name;
    /* transformed values per tile side; side*side products per tile */
    int side;
    /* input patch rows (= columns) per tile, step between tiles, offset of the first (-padding) */
    int in, in_step, in_off;
    /* outputs per tile side */
    int out;
    /* V[xi*sv + v] for tiles v < len, from `in` input rows xp (padded: tile v's patch row r is
     * xp[r][in_step*v + q], q < in) */
    void (*input)(float *v, size_t sv, float *const *xp, int len);
    /* the `out` output rows of tiles v < len from M[xi*sm + v] plus bias, interleaved:
     * rows[h][out*v + w] = output (h, w) of tile v */
    void (*output)(float *const *rows, const float *m, size_t sm, int len, float bias);
    /* U[xi*s + j], xi < side*side, of the n 3x3 kernels g + j*gs, j < n (9 floats each, row-major;
     * rot: rotated by 180 degrees first) */
    void (*weights)(float *u, size_t s, const float *g, size_t gs, int n, int rot);
    /* backward-filter (NULL where the algorithm has none): V^T[xi*sx + v*C + c] from `in`
     * channel-minor input rows (tile v's patch (r, q) of channel c at xr[r][(in_step*v + q)*C + c]),
     * C a multiple of 16 */
    void (*input_t)(float *vt, size_t sx, float *const *xr, int len, int C);
    /* Z^T[xi*sx + v*K + k] from dy's `out` channel-minor rows (dr[h][(out*v + w)*K + k] = dy (h, w)
     * of tile v), K a multiple of 16 */
    void (*dy_t)(float *zt, size_t sx, float *const *dr, int len, int K);
    /* dw[0..8] += the 3x3 kernel gradient of du[xi*s], xi < side*side (in double) */
    void (*filter)(float *dw, const float *du, size_t s);
} yc_wino_algo;

/* Index of element (a, b) of a row-major 3x3 kernel, rotated by 180 degrees first when rot (the
 * kernel transforms' backward-data form). */
static inline size_t yc_wino_tap(int a, int b, int rot)
{
    return (size_t)(rot ? (2 - a) * 3 + (2 - b) : a * 3 + b);
}

/* 3x3 stride-1 padding-1 convolutions, all three passes (backward-data: the kernels rotated):
 * F(2x2, 3x3) and F(4x4, 3x3) */
extern const yc_wino_algo yc_wino_f23;
extern const yc_wino_algo yc_wino_f43;

#endif
