/* Winograd F(4x4, 3x3) transforms (winograd.h) for the 3x3 stride-1 padding-1 convolutions with
 * many channels: 36 products per 4 x 4 outputs against F(2x2, 3x3)'s 64 (16 per 2 x 2) and the
 * direct convolution's 144 multiply-adds (4x fewer), and 2.25 transformed values per output
 * (F(2x2, 3x3): 4) for the transforms to write and the GEMMs to read.
 *
 * Tile (ty, tx) has 4 x 4 outputs; its input patch d is the 6 x 6 values at rows 4ty-1 .. 4ty+4,
 * columns 4tx-1 .. 4tx+4 (zero outside the image).  With the interpolation points 0, 1, -1, 2, -2
 * and infinity:
 *   B^T = [4  0 -5  0 1 0;  0 -4 -4  1 1 0;  0  4 -4 -1 1 0;
 *          0 -2 -1  2 1 0;  0  2 -1 -2 1 0;  0  4  0 -5 0 1]
 *   G   = [1/4 0 0;  -1/6 -1/6 -1/6;  -1/6 1/6 -1/6;  1/24 1/12 1/6;  1/24 -1/12 1/6;  0 0 1]
 *   A^T = [1 1 1 1 1 0;  0 1 -1 2 -2 0;  0 1 1 4 4 0;  0 1 -1 8 -8 1]
 *   Y[k] = A^T [ sum_c U[k, c] (.) V[c] ] A,  U = G g G^T,  V = B^T d B,
 * backward-data the same with dy as input and the kernels rotated and transposed, backward-filter
 * Z[k] = A dY[k] A^T and dW[k, c] += G^T dU[k, c] G (as for F(2x2, 3x3), winograd_f23.c).
 *
 * Arithmetic: the transforms multiply by 2, 4, 5 and 8 and the kernel transform by 1/6, 1/12 and
 * 1/24 (worked out in double, rounded once), so the GEMMs' terms carry larger rounding errors than
 * F(2x2, 3x3)'s: about 4 times its error, up to about 1e-5 of the largest output on the test shapes;
 * tests/test_ops.c allows 2e-5 for it.
 *
 * Input rows: tile v's six columns are elements 4v .. 4v+5 of the padded row: the 64 floats from
 * 4v split four ways in registers, the fifth and sixth the first two shifted by one tile; the four
 * output columns are interleaved four ways. */
#include "cpu_ops.h"
#include "vec16.h"
#include "winograd.h"

/* x_j[i] = p[4i + j], j < 6: the six columns of 16 tiles 4 apart. */
static inline __attribute__((always_inline)) void columns6(vf x[6], const float *p)
{
    const vi next = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
    vf a, b, c, d;
    vload(&a, p);
    vload(&b, p + VL);
    vload(&c, p + 2 * VL);
    vload(&d, p + 3 * VL);
    vf eab = __builtin_shuffle(a, b, EVEN_LANES), oab = __builtin_shuffle(a, b, ODD_LANES);
    vf ecd = __builtin_shuffle(c, d, EVEN_LANES), ocd = __builtin_shuffle(c, d, ODD_LANES);
    x[0] = __builtin_shuffle(eab, ecd, EVEN_LANES);
    x[2] = __builtin_shuffle(eab, ecd, ODD_LANES);
    x[1] = __builtin_shuffle(oab, ocd, EVEN_LANES);
    x[3] = __builtin_shuffle(oab, ocd, ODD_LANES);
    x[4] = __builtin_shuffle(x[0], SPLAT(p[4 * VL]), next);
    x[5] = __builtin_shuffle(x[1], SPLAT(p[4 * VL + 1]), next);
}

/* v = B^T d for one dimension. */
static inline __attribute__((always_inline)) void b_t(vf v[6], const vf d[6])
{
    vf a = d[4] - 4.0f * d[2], b = d[3] - 4.0f * d[1], c = d[4] - d[2], e = 2.0f * (d[3] - d[1]);
    v[0] = 4.0f * (d[0] - d[2]) + c;
    v[1] = a + b;
    v[2] = a - b;
    v[3] = c + e;
    v[4] = c - e;
    v[5] = 4.0f * (d[1] - d[3]) + (d[5] - d[3]);
}

/* y = A^T m for one dimension. */
static inline __attribute__((always_inline)) void a_t(vf y[4], const vf m[6])
{
    vf s12 = m[1] + m[2], d12 = m[1] - m[2], s34 = m[3] + m[4], d34 = m[3] - m[4];
    y[0] = m[0] + s12 + s34;
    y[1] = d12 + 2.0f * d34;
    y[2] = s12 + 4.0f * s34;
    y[3] = d12 + 8.0f * d34 + m[5];
}

/* z = A dy for one dimension. */
static inline __attribute__((always_inline)) void a_(vf z[6], const vf d[4])
{
    vf e = d[0] + d[2], o = d[1] + d[3], e4 = d[0] + 4.0f * d[2], o8 = 2.0f * d[1] + 8.0f * d[3];
    z[0] = d[0];
    z[1] = e + o;
    z[2] = e - o;
    z[3] = e4 + o8;
    z[4] = e4 - o8;
    z[5] = d[3];
}

/* V[xi][v] (xi = 6a + b, row stride sv between the 36) = (B^T d B)[a][b] of tiles v < len from six
 * padded input rows: tile v's patch row r is xp[r][4v .. 4v + 5]. */
YC_CPU_CLONES
static void f43_input(float *vrow, size_t sv, float *const *xp, int len)
{
    vf c[6][6], x[6];
    for (size_t v = 0; v < (size_t)len; v += VL) {
        for (int r = 0; r < 6; r++) { /* d B: rows */
            columns6(x, xp[r] + 4 * v);
            b_t(c[r], x);
        }
        for (int b = 0; b < 6; b++) { /* B^T (d B): columns */
            vf col[6] = {c[0][b], c[1][b], c[2][b], c[3][b], c[4][b], c[5][b]}, t[6];
            b_t(t, col);
            for (int a = 0; a < 6; a++)
                vstore(vrow + (size_t)(6 * a + b) * sv + v, &t[a]);
        }
    }
}

/* Four output rows of tiles v < len from M[xi][v] (row stride sm between the 36), A^T M A + bias,
 * interleaved: out[h][4v + w] = output (h, w) of tile v. */
YC_CPU_CLONES
static void f43_output(float *const *out, const float *mrow, size_t sm, int len, float bias)
{
    vf t[4][6];
    for (size_t v = 0; v < (size_t)len; v += VL) {
        for (int b = 0; b < 6; b++) { /* A^T M: rows */
            vf col[6], y[4];
            for (int a = 0; a < 6; a++)
                vload(&col[a], mrow + (size_t)(6 * a + b) * sm + v);
            a_t(y, col);
            for (int h = 0; h < 4; h++)
                t[h][b] = y[h];
        }
        for (int h = 0; h < 4; h++) { /* (A^T M) A: columns */
            vf y[4];
            a_t(y, t[h]);
            vf o0 = y[0] + bias, o1 = y[1] + bias, o2 = y[2] + bias, o3 = y[3] + bias;
            /* out[4i + j] = o_j[i]: (o0, o2) and (o1, o3) zipped, then the two zipped */
            vf a0 = __builtin_shuffle(o0, o2, LOW_ZIP), a1 = __builtin_shuffle(o0, o2, HIGH_ZIP);
            vf b0 = __builtin_shuffle(o1, o3, LOW_ZIP), b1 = __builtin_shuffle(o1, o3, HIGH_ZIP);
            interleave(out[h] + 4 * v, &a0, &b0);
            interleave(out[h] + 4 * v + 2 * VL, &a1, &b1);
        }
    }
}

/* 1/6, 1/12 and 1/24 in double. */
#define SIXTH (1.0 / 6.0)
#define TWELFTH (1.0 / 12.0)
#define TWENTYFOURTH (1.0 / 24.0)

/* Vectors of 8 doubles (the kernel transform's). */
typedef double vd __attribute__((vector_size(8 * sizeof(double))));

/* u = G k for one dimension, in double. */
static inline __attribute__((always_inline)) void g_v(vd u[6], const vd k[3])
{
    u[0] = 0.25 * k[0];
    u[1] = -SIXTH * (k[0] + k[1] + k[2]);
    u[2] = -SIXTH * (k[0] - k[1] + k[2]);
    u[3] = TWENTYFOURTH * k[0] + TWELFTH * k[1] + SIXTH * k[2];
    u[4] = TWENTYFOURTH * k[0] - TWELFTH * k[1] + SIXTH * k[2];
    u[5] = k[2];
}

/* u[xi*s + j] (36 values) = G g G^T for the 3x3 kernels g + j*gs, j < n (rot: rotated by 180
 * degrees first), 8 kernels at a time in double, each value rounded once. */
YC_CPU_CLONES
static void f43_weights(float *u, size_t s, const float *g, size_t gs, int n, int rot)
{
    for (int j0 = 0; j0 < n; j0 += 8) {
        int m = n - j0 < 8 ? n - j0 : 8;
        vd k[3][3], t[3][6], w[6];
        for (int a = 0; a < 3; a++)
            for (int b = 0; b < 3; b++)
                for (int l = 0; l < 8; l++)
                    k[a][b][l] = l < m ? g[(size_t)(j0 + l) * gs + yc_wino_tap(a, b, rot)] : 0.0;
        for (int b = 0; b < 3; b++) { /* G k: column b of the kernel into t[b][0..5] */
            vd col[3] = {k[0][b], k[1][b], k[2][b]};
            g_v(t[b], col);
        }
        for (int a = 0; a < 6; a++) { /* (G k) G^T: row a */
            vd row[3] = {t[0][a], t[1][a], t[2][a]};
            g_v(w, row);
            for (int b = 0; b < 6; b++)
                for (int l = 0; l < m; l++)
                    u[(size_t)(6 * a + b) * s + (size_t)(j0 + l)] = (float)w[b][l];
        }
    }
}

/* G^T u for one dimension, in double: r[j*rs] from u[i*s], i < 6. */
static void gt_(double *r, size_t rs, const double *u, size_t s)
{
    double u0 = u[0], u1 = u[s], u2 = u[2 * s], u3 = u[3 * s], u4 = u[4 * s], u5 = u[5 * s];
    r[0] = 0.25 * u0 - SIXTH * (u1 + u2) + TWENTYFOURTH * (u3 + u4);
    r[rs] = SIXTH * (u2 - u1) + TWELFTH * (u3 - u4);
    r[2 * rs] = SIXTH * (u3 + u4 - u1 - u2) + u5;
}

/* dw[0..8] += G^T du G for one (k, c): du[xi] at du + xi*s (36 values), in double. */
static void f43_filter(float *dw, const float *du, size_t s)
{
    double d[6][6], t[6][3], r[3][3];
    for (int xi = 0; xi < 36; xi++)
        d[xi / 6][xi % 6] = du[(size_t)xi * s];
    for (int a = 0; a < 6; a++) /* du G: columns */
        gt_(&t[a][0], 1, &d[a][0], 1);
    for (int q = 0; q < 3; q++) /* G^T (du G): rows */
        gt_(&r[0][q], 3, &t[0][q], 3);
    for (int e = 0; e < 9; e++)
        dw[e] = (float)((double)dw[e] + r[e / 3][e % 3]);
}

/* V^T[xi][v][c] (matrices sx floats apart, rows of C) = (B^T d B)[a][b] of tiles v < len from six
 * channel-minor input rows: tile v's patch element (r, q) of channel c is xr[r][(4v + q)*C + c]. */
YC_CPU_CLONES
static void f43_input_t(float *vt, size_t sx, float *const *xr, int len, int C)
{
    vf c[6][6], x[6];
    for (int v = 0; v < len; v++)
        for (int c0 = 0; c0 < C; c0 += VL) {
            for (int r = 0; r < 6; r++) {
                const float *p = xr[r] + (size_t)(4 * v) * C + c0;
                for (int q = 0; q < 6; q++)
                    vload(&x[q], p + (size_t)q * C);
                b_t(c[r], x);
            }
            float *o = vt + (size_t)v * C + c0;
            for (int b = 0; b < 6; b++) {
                vf col[6] = {c[0][b], c[1][b], c[2][b], c[3][b], c[4][b], c[5][b]}, t[6];
                b_t(t, col);
                for (int a = 0; a < 6; a++)
                    vstore(o + (size_t)(6 * a + b) * sx, &t[a]);
            }
        }
}

/* Z^T[xi][v][k] (matrices sx floats apart, rows of K) = (A dY A^T)[a][b] of tiles v < len from dy's
 * four channel-minor rows: dr[h][(4v + w)*K + k] = dy (h, w) of tile v (zero past the image). */
YC_CPU_CLONES
static void f43_dy_t(float *zt, size_t sx, float *const *dr, int len, int K)
{
    vf c[4][6], d[4];
    for (int v = 0; v < len; v++)
        for (int k0 = 0; k0 < K; k0 += VL) {
            for (int h = 0; h < 4; h++) {
                for (int w = 0; w < 4; w++)
                    vload(&d[w], dr[h] + (size_t)(4 * v + w) * K + k0);
                a_(c[h], d);
            }
            float *o = zt + (size_t)v * K + k0;
            for (int q = 0; q < 6; q++) {
                vf col[4] = {c[0][q], c[1][q], c[2][q], c[3][q]}, z[6];
                a_(z, col);
                for (int a = 0; a < 6; a++)
                    vstore(o + (size_t)(6 * a + q) * sx, &z[a]);
            }
        }
}

const yc_wino_algo yc_wino_f43 = {
    .name = "F(4x4, 3x3)",
    .side = 6,
    .in = 6,
    .in_step = 4,
    .in_off = -1,
    .out = 4,
    .input = f43_input,
    .output = f43_output,
    .weights = f43_weights,
    .input_t = f43_input_t,
    .dy_t = f43_dy_t,
    .filter = f43_filter,
};
