/* Naive reference ops in double precision (see ref_ops.h). */
#include "ref_ops.h"

#include <math.h>

int ref_conv_P(const ref_conv *g)
{
    return (g->H + 2 * g->ph - g->R) / g->sh + 1;
}

int ref_conv_Q(const ref_conv *g)
{
    return (g->W + 2 * g->pw - g->S) / g->sw + 1;
}

/* x[n][c][h][w] of a dense NCHW array */
#define AT(a, C, H, W, n, c, h, w) (a)[(((size_t)(n) * (C) + (c)) * (H) + (h)) * (W) + (w)]

void ref_conv2d_fwd(const ref_conv *g, const double *x, const double *w, const double *b, double *y)
{
    int P = ref_conv_P(g), Q = ref_conv_Q(g);
    for (int n = 0; n < g->N; n++)
        for (int k = 0; k < g->K; k++)
            for (int p = 0; p < P; p++)
                for (int q = 0; q < Q; q++) {
                    double s = b ? b[k] : 0.0;
                    for (int c = 0; c < g->C; c++)
                        for (int r = 0; r < g->R; r++)
                            for (int t = 0; t < g->S; t++) {
                                int ih = p * g->sh - g->ph + r, iw = q * g->sw - g->pw + t;
                                if (ih >= 0 && ih < g->H && iw >= 0 && iw < g->W)
                                    s += AT(x, g->C, g->H, g->W, n, c, ih, iw) *
                                         AT(w, g->C, g->R, g->S, k, c, r, t);
                            }
                    AT(y, g->K, P, Q, n, k, p, q) = s;
                }
}

void ref_conv2d_bwd_data(const ref_conv *g, const double *dy, const double *w, double *dx)
{
    int P = ref_conv_P(g), Q = ref_conv_Q(g);
    for (size_t i = 0; i < (size_t)g->N * g->C * g->H * g->W; i++)
        dx[i] = 0.0;
    for (int n = 0; n < g->N; n++)
        for (int k = 0; k < g->K; k++)
            for (int p = 0; p < P; p++)
                for (int q = 0; q < Q; q++)
                    for (int c = 0; c < g->C; c++)
                        for (int r = 0; r < g->R; r++)
                            for (int t = 0; t < g->S; t++) {
                                int ih = p * g->sh - g->ph + r, iw = q * g->sw - g->pw + t;
                                if (ih >= 0 && ih < g->H && iw >= 0 && iw < g->W)
                                    AT(dx, g->C, g->H, g->W, n, c, ih, iw) +=
                                        AT(dy, g->K, P, Q, n, k, p, q) * AT(w, g->C, g->R, g->S, k, c, r, t);
                            }
}

void ref_conv2d_bwd_filter(const ref_conv *g, const double *x, const double *dy, double *dw, double *db)
{
    int P = ref_conv_P(g), Q = ref_conv_Q(g);
    for (size_t i = 0; i < (size_t)g->K * g->C * g->R * g->S; i++)
        dw[i] = 0.0;
    for (int k = 0; k < g->K; k++) {
        double sb = 0.0;
        for (int n = 0; n < g->N; n++)
            for (int p = 0; p < P; p++)
                for (int q = 0; q < Q; q++) {
                    double d = AT(dy, g->K, P, Q, n, k, p, q);
                    sb += d;
                    for (int c = 0; c < g->C; c++)
                        for (int r = 0; r < g->R; r++)
                            for (int t = 0; t < g->S; t++) {
                                int ih = p * g->sh - g->ph + r, iw = q * g->sw - g->pw + t;
                                if (ih >= 0 && ih < g->H && iw >= 0 && iw < g->W)
                                    AT(dw, g->C, g->R, g->S, k, c, r, t) +=
                                        d * AT(x, g->C, g->H, g->W, n, c, ih, iw);
                            }
                }
        if (db)
            db[k] = sb;
    }
}

void ref_bn_train(const double *x, int N, int C, int HW, const double *gamma, const double *beta, double eps,
                  double *y, double *mean, double *var)
{
    double M = (double)N * HW;
    for (int c = 0; c < C; c++) {
        double s = 0.0;
        for (int n = 0; n < N; n++)
            for (int i = 0; i < HW; i++)
                s += AT(x, C, 1, HW, n, c, 0, i);
        double m = s / M, v = 0.0;
        for (int n = 0; n < N; n++)
            for (int i = 0; i < HW; i++) {
                double d = AT(x, C, 1, HW, n, c, 0, i) - m;
                v += d * d;
            }
        v /= M;
        for (int n = 0; n < N; n++)
            for (int i = 0; i < HW; i++)
                AT(y, C, 1, HW, n, c, 0, i) =
                    (AT(x, C, 1, HW, n, c, 0, i) - m) / sqrt(v + eps) * gamma[c] + beta[c];
        mean[c] = m;
        var[c] = v;
    }
}

void ref_bn_apply(const double *x, int N, int C, int HW, const double *gamma, const double *beta,
                  const double *mean, const double *invstd, double *y)
{
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++)
            for (int i = 0; i < HW; i++)
                AT(y, C, 1, HW, n, c, 0, i) =
                    (AT(x, C, 1, HW, n, c, 0, i) - mean[c]) * invstd[c] * gamma[c] + beta[c];
}

void ref_bn_eval(const double *x, int N, int C, int HW, const double *gamma, const double *beta,
                 const double *rmean, const double *rvar, double eps, double *y)
{
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++)
            for (int i = 0; i < HW; i++)
                AT(y, C, 1, HW, n, c, 0, i) =
                    (AT(x, C, 1, HW, n, c, 0, i) - rmean[c]) / sqrt(rvar[c] + eps) * gamma[c] + beta[c];
}

void ref_bn_bwd(const double *dy, const double *x, int N, int C, int HW, const double *gamma,
                const double *mean, const double *invstd, double *dx, double *dgamma, double *dbeta)
{
    double M = (double)N * HW;
    for (int c = 0; c < C; c++) {
        double sdy = 0.0, sdyxh = 0.0;
        for (int n = 0; n < N; n++)
            for (int i = 0; i < HW; i++) {
                double xh = (AT(x, C, 1, HW, n, c, 0, i) - mean[c]) * invstd[c];
                sdy += AT(dy, C, 1, HW, n, c, 0, i);
                sdyxh += AT(dy, C, 1, HW, n, c, 0, i) * xh;
            }
        for (int n = 0; n < N; n++)
            for (int i = 0; i < HW; i++) {
                double xh = (AT(x, C, 1, HW, n, c, 0, i) - mean[c]) * invstd[c];
                AT(dx, C, 1, HW, n, c, 0, i) =
                    gamma[c] * invstd[c] * (AT(dy, C, 1, HW, n, c, 0, i) - sdy / M - xh * sdyxh / M);
            }
        dgamma[c] = sdyxh;
        dbeta[c] = sdy;
    }
}

void ref_silu(const double *x, size_t n, double *y)
{
    for (size_t i = 0; i < n; i++)
        y[i] = x[i] / (1.0 + exp(-x[i]));
}

void ref_silu_bwd(const double *dy, const double *x, size_t n, double *dx)
{
    for (size_t i = 0; i < n; i++) {
        double s = 1.0 / (1.0 + exp(-x[i]));
        dx[i] = dy[i] * (s + x[i] * s * (1.0 - s));
    }
}

void ref_add(const double *a, const double *b, size_t n, double *y)
{
    for (size_t i = 0; i < n; i++)
        y[i] = a[i] + b[i];
}

void ref_copy(const double *a, size_t n, double *y)
{
    for (size_t i = 0; i < n; i++)
        y[i] = a[i];
}

void ref_fill(double v, size_t n, double *y)
{
    for (size_t i = 0; i < n; i++)
        y[i] = v;
}

int ref_pool_out(int in, int k, int stride, int pad)
{
    return (in + 2 * pad - k) / stride + 1;
}

/* Index (h*W + w) of the maximum of window (p, q) in plane x, scanning the whole window and
 * skipping positions in the padding. */
static int pool_argmax(const double *x, int H, int W, int k, int stride, int pad, int p, int q)
{
    double m = -INFINITY;
    int idx = -1;
    for (int i = 0; i < k; i++)
        for (int j = 0; j < k; j++) {
            int h = p * stride - pad + i, w = q * stride - pad + j;
            if (h < 0 || h >= H || w < 0 || w >= W)
                continue;
            if (idx < 0)
                idx = h * W + w; /* the first position in the image, kept when nothing beats -inf */
            double v = x[h * W + w];
            if (v > m || isnan(v)) {
                m = v;
                idx = h * W + w;
            }
        }
    return idx;
}

void ref_maxpool_fwd(const double *x, int N, int C, int H, int W, int k, int stride, int pad, double *y)
{
    int P = ref_pool_out(H, k, stride, pad), Q = ref_pool_out(W, k, stride, pad);
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++) {
            const double *xp = x + ((size_t)n * C + c) * H * W;
            for (int p = 0; p < P; p++)
                for (int q = 0; q < Q; q++)
                    AT(y, C, P, Q, n, c, p, q) = xp[pool_argmax(xp, H, W, k, stride, pad, p, q)];
        }
}

void ref_maxpool_bwd(const double *dy, const double *x, int N, int C, int H, int W, int k, int stride,
                     int pad, double *dx)
{
    int P = ref_pool_out(H, k, stride, pad), Q = ref_pool_out(W, k, stride, pad);
    for (size_t i = 0; i < (size_t)N * C * H * W; i++)
        dx[i] = 0.0;
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++) {
            const double *xp = x + ((size_t)n * C + c) * H * W;
            double *dp = dx + ((size_t)n * C + c) * H * W;
            for (int p = 0; p < P; p++)
                for (int q = 0; q < Q; q++)
                    dp[pool_argmax(xp, H, W, k, stride, pad, p, q)] += AT(dy, C, P, Q, n, c, p, q);
        }
}

void ref_upsample_fwd(const double *x, int N, int C, int H, int W, int f, double *y)
{
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++)
            for (int h = 0; h < H * f; h++)
                for (int w = 0; w < W * f; w++)
                    AT(y, C, H * f, W * f, n, c, h, w) = AT(x, C, H, W, n, c, h / f, w / f);
}

void ref_upsample_bwd(const double *dy, int N, int C, int H, int W, int f, double *dx)
{
    for (size_t i = 0; i < (size_t)N * C * H * W; i++)
        dx[i] = 0.0;
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++)
            for (int h = 0; h < H * f; h++)
                for (int w = 0; w < W * f; w++)
                    AT(dx, C, H, W, n, c, h / f, w / f) += AT(dy, C, H * f, W * f, n, c, h, w);
}

void ref_avgpool_fwd(const double *x, int N, int C, int H, int W, double *y)
{
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++) {
            double s = 0.0;
            for (int h = 0; h < H; h++)
                for (int w = 0; w < W; w++)
                    s += AT(x, C, H, W, n, c, h, w);
            y[(size_t)n * C + c] = s / ((double)H * W);
        }
}

void ref_avgpool_bwd(const double *dy, int N, int C, int H, int W, double *dx)
{
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++)
            for (int h = 0; h < H; h++)
                for (int w = 0; w < W; w++)
                    AT(dx, C, H, W, n, c, h, w) = dy[(size_t)n * C + c] / ((double)H * W);
}

/* Chris Wellons' lowbias32 integer mix */
static uint32_t ref_lowbias32(uint32_t h)
{
    h ^= h >> 16;
    h *= 0x7feb352dU;
    h ^= h >> 15;
    h *= 0x846ca68bU;
    h ^= h >> 16;
    return h;
}

void ref_dropout(const double *x, size_t n, double p, uint32_t seed, double *y)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t h = ref_lowbias32(ref_lowbias32((uint32_t)i) ^ (uint32_t)(seed * 0x9e3779b9U));
        y[i] = (double)h < p * 4294967296.0 ? 0.0 : x[i] / (1.0 - p);
    }
}

void ref_sgd(const double *grad, size_t n, double lr, double momentum, double wd, double scale, int nesterov,
             double *w, double *buf)
{
    for (size_t i = 0; i < n; i++) {
        double g = scale * grad[i] + wd * w[i];
        buf[i] = momentum * buf[i] + g;
        double step = nesterov ? g + momentum * buf[i] : buf[i];
        w[i] -= lr * step;
    }
}

void ref_adam(const double *grad, size_t n, double lr, double beta1, double beta2, double eps, double wd,
              double scale, int t, int decoupled, double *w, double *m, double *v)
{
    double bc1 = 1.0 - pow(beta1, t), bc2 = 1.0 - pow(beta2, t);
    for (size_t i = 0; i < n; i++) {
        double g = scale * grad[i];
        if (decoupled)
            w[i] *= 1.0 - lr * wd;
        else
            g += wd * w[i];
        m[i] = beta1 * m[i] + (1.0 - beta1) * g;
        v[i] = beta2 * v[i] + (1.0 - beta2) * g * g;
        w[i] -= lr / bc1 * m[i] / (sqrt(v[i]) / sqrt(bc2) + eps);
    }
}

void ref_ema(const double *x, size_t n, double decay, double *e)
{
    for (size_t i = 0; i < n; i++)
        e[i] = decay * e[i] + (1.0 - decay) * x[i];
}

double ref_sumsq(const double *x, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += x[i] * x[i];
    return s;
}
