/* Naive reference ops in double precision, for tests: dense NCHW arrays, the simplest loops that
 * are obviously right.  Every function overwrites its outputs (the optimizer steps update theirs in
 * place); accumulation into existing values (op->accumulate, parameter gradients, running
 * statistics) is the caller's business. */
#ifndef YC_REF_OPS_H
#define YC_REF_OPS_H

#include <stddef.h>
#include <stdint.h>

/* A convolution's shapes: x (N,C,H,W), W (K,C,R,S), y (N,K,P,Q). */
typedef struct ref_conv {
    int N, C, H, W;
    int K, R, S;
    int sh, sw, ph, pw;
} ref_conv;

/* Output rows and columns of a convolution. */
int ref_conv_P(const ref_conv *g);
int ref_conv_Q(const ref_conv *g);

/* y = conv(x, w) + b (b may be NULL) */
void ref_conv2d_fwd(const ref_conv *g, const double *x, const double *w, const double *b, double *y);
/* dx = conv^T(dy, w) */
void ref_conv2d_bwd_data(const ref_conv *g, const double *dy, const double *w, double *dx);
/* dw = dy (*) x;  db = sum of dy per output channel (db may be NULL) */
void ref_conv2d_bwd_filter(const ref_conv *g, const double *x, const double *dy, double *dw, double *db);

/* Training batch norm over (N, HW) per channel: y, and the batch mean and biased variance. */
void ref_bn_train(const double *x, int N, int C, int HW, const double *gamma, const double *beta, double eps,
                  double *y, double *mean, double *var);
/* y = (x - mean) * invstd * gamma + beta per channel (batch norm with given statistics). */
void ref_bn_apply(const double *x, int N, int C, int HW, const double *gamma, const double *beta,
                  const double *mean, const double *invstd, double *y);
/* Evaluation batch norm with running statistics. */
void ref_bn_eval(const double *x, int N, int C, int HW, const double *gamma, const double *beta,
                 const double *rmean, const double *rvar, double eps, double *y);
/* Backward of ref_bn_train given its mean and invstd = 1/sqrt(var + eps). */
void ref_bn_bwd(const double *dy, const double *x, int N, int C, int HW, const double *gamma,
                const double *mean, const double *invstd, double *dx, double *dgamma, double *dbeta);

/* y = x * sigmoid(x) */
void ref_silu(const double *x, size_t n, double *y);
/* dx = dy * d/dx (x * sigmoid(x)) */
void ref_silu_bwd(const double *dy, const double *x, size_t n, double *dx);

/* y = a + b;  y = a;  y = v */
void ref_add(const double *a, const double *b, size_t n, double *y);
void ref_copy(const double *a, size_t n, double *y);
void ref_fill(double v, size_t n, double *y);

/* Max pooling (padding is -inf): output size, forward, and backward to the window's maximum
 * (first in row-major order; a NaN counts as the maximum, the last one when there are several) */
int ref_pool_out(int in, int k, int stride, int pad);
void ref_maxpool_fwd(const double *x, int N, int C, int H, int W, int k, int stride, int pad, double *y);
void ref_maxpool_bwd(const double *dy, const double *x, int N, int C, int H, int W, int k, int stride,
                     int pad, double *dx);

/* Nearest upsampling by f: y (N,C,H*f,W*f);  backward: dx (N,C,H,W) = sums over f x f blocks */
void ref_upsample_fwd(const double *x, int N, int C, int H, int W, int f, double *y);
void ref_upsample_bwd(const double *dy, int N, int C, int H, int W, int f, double *dx);
/* global average pooling: y (N,C) = the mean of each (H,W) plane of x; dx = dy / (H*W) */
void ref_avgpool_fwd(const double *x, int N, int C, int H, int W, double *y);
void ref_avgpool_bwd(const double *dy, int N, int C, int H, int W, double *dx);
/* dropout over n values (row-major (N,C,H,W)): y[i] = x[i] / (1 - p), or 0 where the element's
 * hash (backend.h's definition: lowbias32 of i, xor seed * 0x9e3779b9, lowbias32 again) is below
 * p * 2^32; also its backward (the same formula on dy) */
void ref_dropout(const double *x, size_t n, double p, uint32_t seed, double *y);

/* Optimizer steps over n values, in place (w, buf, m, v and e are read and updated):
 * SGD (dampening 0): g = scale*grad + wd*w; buf = momentum*buf + g;
 *   w -= lr * (nesterov ? g + momentum*buf : buf) */
void ref_sgd(const double *grad, size_t n, double lr, double momentum, double wd, double scale, int nesterov,
             double *w, double *buf);
/* Adam at step t >= 1 (decoupled: AdamW, w *= 1 - lr*wd instead of g += wd*w):
 * m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g^2; w -= lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps) */
void ref_adam(const double *grad, size_t n, double lr, double beta1, double beta2, double eps, double wd,
              double scale, int t, int decoupled, double *w, double *m, double *v);
/* e = decay*e + (1-decay)*x */
void ref_ema(const double *x, size_t n, double decay, double *e);
/* sum of x^2 */
double ref_sumsq(const double *x, size_t n);

#endif
