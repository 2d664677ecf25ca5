/* Winograd F(2x2, 3x3) transforms (winograd.h) for the 3x3 stride-1 padding-1 convolutions.
 *
 * Tile (ty, tx) has 2 x 2 outputs; its input patch d is the 4 x 4 values at rows 2ty-1 .. 2ty+2,
 * columns 2tx-1 .. 2tx+2 (zero outside the image), and with
 *   B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1],  G = [1 0 0; .5 .5 .5; .5 -.5 .5; 0 0 1],
 *   A^T = [1 1 1 0; 0 1 -1 -1]
 * its outputs are
 *   Y[k] = A^T [ sum_c U[k, c] (.) V[c] ] A,   U[k, c] = G g[k, c] G^T,   V[c] = B^T d[c] B,
 * (.) elementwise over the 16 positions xi of a 4 x 4 matrix: 16 products per 4 outputs against 36
 * multiply-adds (2.25x fewer).  Backward-data is the same algorithm with dy as input and the
 * kernels rotated and transposed (a stride-1 pad-1 3x3 convolution's transpose is one with its
 * kernel rotated).  Backward-filter: Z[k] = A dY[k] A^T (dY the tile's 2 x 2 outputs' gradient) and
 * dW[k, c] += G^T dU[k, c] G, the transpose of the forward's linear map from g to Y.
 *
 * Arithmetic: the transforms add and subtract, and halve (exact), so the GEMMs see the direct
 * convolution's products regrouped: results differ from the implicit GEMM's (conv.c) by rounding
 * only, a few units of the last place of the largest terms.
 *
 * Forward input rows: tile v's four columns are elements 2v .. 2v+3 of the padded row, split into
 * even and odd ones in registers; the outputs are interleaved back the same way. */
#include "cpu_ops.h"
#include "vec16.h"
#include "winograd.h"

/* V[xi][v] (xi = 4a + b, row stride sv between the 16) = (B^T d B)[a][b] of tiles v < len, from the
 * four padded input rows: tile v's patch row r is xp[r][2v .. 2v + 3]. */
YC_CPU_CLONES
static void input_transform(float *vrow, size_t sv, float *const *xp, int len)
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

/* Two output rows of tiles v < len from M[xi][v] (row stride sm between the 16), A^T M A + bias,
 * interleaved: out[h][2v + w] = output (h, w) of tile v. */
YC_CPU_CLONES
static void output_transform(float *const *out, const float *mrow, size_t sm, int len, float bias)
{
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
        interleave(out[0] + 2 * v, &y00, &y01);
        interleave(out[1] + 2 * v, &y10, &y11);
    }
}

/* u[xi*s + j] (16 values) = G g G^T for the 3x3 kernels g + j*gs, j < n (rot: rotated by 180
 * degrees first), 16 kernels at a time in float. */
YC_CPU_CLONES
static void weight_transform(float *u, size_t s, const float *g, size_t gs, int n, int rot)
{
    for (int j0 = 0; j0 < n; j0 += VL) {
        int m = n - j0 < VL ? n - j0 : VL;
        vf k[3][3], t[4][3];
        for (int a = 0; a < 3; a++)
            for (int b = 0; b < 3; b++)
                for (int l = 0; l < VL; l++)
                    k[a][b][l] = l < m ? g[(size_t)(j0 + l) * gs + yc_wino_tap(a, b, rot)] : 0.0f;
        for (int b = 0; b < 3; b++) { /* G k: rows */
            t[0][b] = k[0][b];
            t[1][b] = 0.5f * (k[0][b] + k[1][b] + k[2][b]);
            t[2][b] = 0.5f * (k[0][b] - k[1][b] + k[2][b]);
            t[3][b] = k[2][b];
        }
        for (int a = 0; a < 4; a++) { /* (G k) G^T: columns */
            vf r[4] = {t[a][0], 0.5f * (t[a][0] + t[a][1] + t[a][2]), 0.5f * (t[a][0] - t[a][1] + t[a][2]), t[a][2]};
            for (int b = 0; b < 4; b++)
                store_n(u + (size_t)(4 * a + b) * s + j0, &r[b], (size_t)m);
        }
    }
}

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

/* V^T[xi][v][c] (xi's matrices sx floats apart, rows of C) = (B^T d B)[a][b] of tiles v < len from
 * four channel-minor input rows: tile v's patch element (r, q) of channel c is xr[r][(2v + q)*C + c]. */
YC_CPU_CLONES
static void input_transform_t(float *vt, size_t sx, float *const *xr, int len, int C)
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

/* Z^T[xi][v][k] (matrices sx floats apart, rows of K) = (A dY A^T)[a][b] of tiles v < len from dy's
 * two channel-minor rows: dr[h][(2v + w)*K + k] = dy (h, w) of tile v (zero past the image). */
YC_CPU_CLONES
static void dy_transform_t(float *zt, size_t sx, float *const *dr, int len, int K)
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

const yc_wino_algo yc_wino_f23 = {
    .name = "F(2x2, 3x3)",
    .side = 4,
    .in = 4,
    .in_step = 2,
    .in_off = -1,
    .out = 2,
    .input = input_transform,
    .output = output_transform,
    .weights = weight_transform,
    .input_t = input_transform_t,
    .dy_t = dy_transform_t,
    .filter = filter_transform,
};
