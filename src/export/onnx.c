/* The ONNX writer of onnx.h: the model's modules (mirroring nn/modules.c's forward builders, the
 * forward() of YOLOv5's models/common.py) emitted as ONNX nodes, the fused weights as
 * initializers, encoded with pb.h.
 *
 * Field numbers are onnx.proto's (onnx 1.12, IR version 8):
 *   ModelProto       ir_version 1, producer_name 2, producer_version 3, graph 7, opset_import 8,
 *                    metadata_props 14
 *   OperatorSetIdProto  domain 1, version 2;   StringStringEntryProto  key 1, value 2
 *   GraphProto       node 1, name 2, initializer 5, input 11, output 12
 *   NodeProto        input 1, output 2, name 3, op_type 4, attribute 5
 *   AttributeProto   name 1, f 2, i 3, s 4, ints 8, type 20 (FLOAT 1, INT 2, STRING 3, INTS 7)
 *   TensorProto      dims 1, data_type 2 (FLOAT 1, INT64 7, FLOAT16 10), name 8, raw_data 9
 *                    (little-endian)
 *   ValueInfoProto   name 1, type 2;  TypeProto  tensor_type 1;  TypeProto.Tensor  elem_type 1,
 *                    shape 2;  TensorShapeProto  dim 1;  Dimension  dim_value 1, dim_param 2 */
#include "onnx.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "half.h"
#include "log.h"
#include "pb.h"
#include "strbuf.h"
#include "util.h"

/* onnx.proto's enums */
enum { DT_FLOAT = 1, DT_INT64 = 7, DT_FLOAT16 = 10 };
enum { AT_FLOAT = 1, AT_INT = 2, AT_STRING = 3, AT_INTS = 7 };

/* the longest value or node name */
#define NM 160

void yc_onnx_options_default(yc_onnx_options *o)
{
    *o = (yc_onnx_options){.batch = 1, .h = 640, .w = 640, .opset = 12};
}

/* The file being built. */
typedef struct ob {
    yc_model *m;
    const yc_onnx_options *o;
    /* the graph's nodes and initializers, as GraphProto fields */
    yc_pb nodes, inits;
    /* DT_FLOAT or DT_FLOAT16: the type of the input, the output and every float tensor */
    int elem;
    /* numbering that keeps value and node names unique */
    int seq;
    /* the ONNX name of each layer's output */
    char (*layer_out)[NM];
} ob;

/* ---- names ---------------------------------------------------------------------------------- */

static void fmt(char *out, const char *f, ...) __attribute__((format(printf, 2, 3)));

static void fmt(char *out, const char *f, ...)
{
    va_list ap;
    va_start(ap, f);
    vsnprintf(out, NM, f, ap);
    va_end(ap);
}

/* ---- initializers --------------------------------------------------------------------------- */

/* A TensorProto named `name` as a GraphProto initializer: dims, type and the raw bytes. */
static void init_raw(ob *b, const char *name, const int64_t *dims, int nd, int dtype,
                     const uint8_t *raw, size_t bytes)
{
    yc_pb t = YC_PB_INIT;
    for (int i = 0; i < nd; i++)
        yc_pb_int(&t, 1, dims[i]);
    yc_pb_int(&t, 2, dtype);
    yc_pb_string(&t, 8, name);
    yc_pb_bytes(&t, 9, raw, bytes);
    yc_pb_message(&b->inits, 5, &t);
}

static size_t dims_numel(const int64_t *dims, int nd)
{
    size_t n = 1;
    for (int i = 0; i < nd; i++)
        n *= (size_t)dims[i];
    return n;
}

/* A float initializer in the file's float type (FP16 rounded to nearest even with half), or
 * float32 whatever the file's type when `f32` (Resize's scales and roi must be float). */
static int init_float_as(ob *b, const char *name, const int64_t *dims, int nd, const float *v,
                         bool f32)
{
    size_t n = dims_numel(dims, nd);
    bool half = b->elem == DT_FLOAT16 && !f32;
    size_t bytes = n * (half ? 2 : 4);
    uint8_t *raw = yc_malloc(bytes ? bytes : 1, "an ONNX initializer");
    if (!raw)
        return YC_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        if (half) {
            uint16_t h = yc_float_to_half(v[i]);
            raw[2 * i] = (uint8_t)h;
            raw[2 * i + 1] = (uint8_t)(h >> 8);
        } else {
            uint32_t u;
            memcpy(&u, &v[i], 4);
            for (int k = 0; k < 4; k++)
                raw[4 * i + (size_t)k] = (uint8_t)(u >> (8 * k));
        }
    }
    init_raw(b, name, dims, nd, half ? DT_FLOAT16 : DT_FLOAT, raw, bytes);
    free(raw);
    return YC_OK;
}

static int init_float(ob *b, const char *name, const int64_t *dims, int nd, const float *v)
{
    return init_float_as(b, name, dims, nd, v, false);
}

/* A 1-D int64 initializer of n values, n <= 8 (the shapes and indices of Detect's decoding; n 0:
 * a 0-D scalar of v[0]). */
static void init_i64(ob *b, const char *name, int n, const int64_t *v)
{
    uint8_t raw[8 * 8];
    int count = n ? n : 1;
    for (int i = 0; i < count; i++)
        for (int k = 0; k < 8; k++)
            raw[8 * i + k] = (uint8_t)((uint64_t)v[i] >> (8 * k));
    int64_t dims[1] = {n};
    init_raw(b, name, dims, n ? 1 : 0, DT_INT64, raw, (size_t)count * 8);
}

/* ---- nodes ---------------------------------------------------------------------------------- */

typedef struct attr {
    const char *name;
    int type;
    int64_t i;
    float f;
    const char *s;
    const int64_t *ints;
    int n;
} attr;

/* A node `op` of the module `prefix` over inputs in[0..nin-1]; its output's name (`as`, or one
 * made from the node's) goes to out. */
static void node_as(ob *b, const char *op, const char *prefix, const char *const *in, int nin,
                    char *out, const attr *a, int na, const char *as)
{
    yc_pb n = YC_PB_INIT;
    int id = b->seq++;
    for (int i = 0; i < nin; i++)
        yc_pb_string(&n, 1, in[i]);
    if (as)
        fmt(out, "%s", as);
    else
        fmt(out, "/%s/%s_output_%d", prefix, op, id);
    yc_pb_string(&n, 2, out);
    char name[NM];
    fmt(name, "/%s/%s_%d", prefix, op, id);
    yc_pb_string(&n, 3, name);
    yc_pb_string(&n, 4, op);
    for (int i = 0; i < na; i++) {
        yc_pb at = YC_PB_INIT;
        yc_pb_string(&at, 1, a[i].name);
        switch (a[i].type) {
        case AT_FLOAT:
            yc_pb_float(&at, 2, a[i].f);
            break;
        case AT_INT:
            yc_pb_int(&at, 3, a[i].i);
            break;
        case AT_STRING:
            yc_pb_string(&at, 4, a[i].s);
            break;
        case AT_INTS:
            for (int j = 0; j < a[i].n; j++)
                yc_pb_int(&at, 8, a[i].ints[j]);
            break;
        }
        yc_pb_int(&at, 20, a[i].type);
        yc_pb_message(&n, 5, &at);
    }
    yc_pb_message(&b->nodes, 1, &n);
}

static void node(ob *b, const char *op, const char *prefix, const char *const *in, int nin,
                 char *out, const attr *a, int na)
{
    node_as(b, op, prefix, in, nin, out, a, na, NULL);
}

static void node1(ob *b, const char *op, const char *prefix, const char *x, char *out)
{
    node(b, op, prefix, &x, 1, out, NULL, 0);
}

static void node2(ob *b, const char *op, const char *prefix, const char *x, const char *y,
                  char *out)
{
    const char *in[2] = {x, y};
    node(b, op, prefix, in, 2, out, NULL, 0);
}

/* ---- parameters ----------------------------------------------------------------------------- */

/* The values of parameter or BatchNorm statistic `name` read back from the backend into *v
 * (malloc'ed, numel floats). */
static int read_tensor(ob *b, const char *name, bool state, float **v, size_t *numel)
{
    yc_model *m = b->m;
    int i = state ? yc_model_find_state(m, name) : yc_model_find_param(m, name);
    if (i < 0)
        return yc_error_status(YC_ERR, "internal: the model has no %s", name);
    const yc_tensor *t = state ? &m->state[i].t : &m->params[i].t;
    *numel = yc_tensor_elems(t);
    if (!(*v = yc_malloc(*numel * sizeof **v, "a weight tensor for the ONNX file")))
        return YC_ENOMEM;
    int st = yc_tensor_get_f32(m->be, t, *v);
    if (st) {
        free(*v);
        *v = NULL;
        return yc_error_context(st, "reading %s", name);
    }
    return YC_OK;
}

/* ---- modules -------------------------------------------------------------------------------- */

/* Conv(x) with the weights w (c2, c1, k, k) and bias (c2) as initializers "<prefix>.weight" and
 * "<prefix>.bias". */
static int conv_node(ob *b, const char *prefix, const char *x, const float *w, const float *bias,
                     int c2, int c1, int k, int s, int p, char *out)
{
    char wn[NM], bn[NM];
    fmt(wn, "%s.weight", prefix);
    fmt(bn, "%s.bias", prefix);
    int64_t wd[4] = {c2, c1, k, k}, bd[1] = {c2};
    int st;
    if ((st = init_float(b, wn, wd, 4, w)) || (st = init_float(b, bn, bd, 1, bias)))
        return st;
    int64_t ks[2] = {k, k}, ss[2] = {s, s}, ps[4] = {p, p, p, p}, ds[2] = {1, 1};
    attr a[] = {
        {.name = "dilations", .type = AT_INTS, .ints = ds, .n = 2},
        {.name = "group", .type = AT_INT, .i = 1},
        {.name = "kernel_shape", .type = AT_INTS, .ints = ks, .n = 2},
        {.name = "pads", .type = AT_INTS, .ints = ps, .n = 4},
        {.name = "strides", .type = AT_INTS, .ints = ss, .n = 2},
    };
    const char *in[3] = {x, wn, bn};
    node(b, "Conv", prefix, in, 3, out, a, 5);
    return YC_OK;
}

/* YOLOv5's Conv fused (fuse_conv_and_bn, then forward_fuse): SiLU(Conv_fused(x)); the channels
 * come from the weights' shape; the BatchNorm's eps is yc_model_bn_eps's (YOLOv5's 1e-3,
 * Classify's 1e-5). */
static int conv_module(ob *b, const char *prefix, const char *x, int k, int s, int p, char *out)
{
    char name[NM];
    float *w = NULL, *gamma = NULL, *beta = NULL, *mean = NULL, *var = NULL;
    size_t nw, ng, nb, nm, nv;
    int st;
    fmt(name, "%s.conv.weight", prefix);
    if (!(st = read_tensor(b, name, false, &w, &nw))) {
        fmt(name, "%s.bn.weight", prefix);
        st = read_tensor(b, name, false, &gamma, &ng);
    }
    if (!st) {
        fmt(name, "%s.bn.bias", prefix);
        st = read_tensor(b, name, false, &beta, &nb);
    }
    if (!st) {
        fmt(name, "%s.bn.running_mean", prefix);
        st = read_tensor(b, name, true, &mean, &nm);
    }
    if (!st) {
        fmt(name, "%s.bn.running_var", prefix);
        st = read_tensor(b, name, true, &var, &nv);
    }
    if (!st && (ng != nb || ng != nm || ng != nv || ng == 0 || nw % (ng * k * k)))
        st = yc_error_status(YC_ERR, "internal: %s: the conv and BatchNorm sizes differ", prefix);
    if (!st) {
        /* fuse_conv_and_bn in float32: w_bn = gamma / sqrt(eps + var) scales each output
         * channel's filter; b = beta - gamma * mean / sqrt(var + eps) (a model fused already,
         * yc_model_fuse, holds those in its conv weights and BN biases) */
        int c2 = (int)ng, c1 = (int)(nw / (ng * (size_t)k * (size_t)k));
        if (!b->m->fused)
            yc_model_fold_bn(w, beta, gamma, mean, var, ng, nw / ng,
                             yc_model_bn_eps(b->m, prefix));
        char sub[NM], y[NM], sig[NM];
        fmt(sub, "%s.conv", prefix);
        if (!(st = conv_node(b, sub, x, w, beta, c2, c1, k, s, p, y))) {
            fmt(sub, "%s.act", prefix);
            node1(b, "Sigmoid", sub, y, sig);
            node2(b, "Mul", sub, y, sig, out);
        }
    }
    free(w);
    free(gamma);
    free(beta);
    free(mean);
    free(var);
    return st;
}

/* Bottleneck(c1, c2, shortcut, e): cv2(cv1(x)) [+ x when shortcut and c1 == c2]. */
static int bottleneck(ob *b, const char *prefix, const char *x, int c1, int c2, bool shortcut,
                      char *out)
{
    char sub[NM], t[NM], u[NM];
    int st;
    fmt(sub, "%s.cv1", prefix);
    if ((st = conv_module(b, sub, x, 1, 1, 0, t)))
        return st;
    fmt(sub, "%s.cv2", prefix);
    if ((st = conv_module(b, sub, t, 3, 1, 1, u)))
        return st;
    if (shortcut && c1 == c2)
        node2(b, "Add", prefix, x, u, out);
    else
        memcpy(out, u, NM);
    return YC_OK;
}

/* Concat along channels. */
static void concat(ob *b, const char *prefix, const char *const *in, int n, int axis, char *out)
{
    attr a = {.name = "axis", .type = AT_INT, .i = axis};
    node(b, "Concat", prefix, in, n, out, &a, 1);
}

/* C3(c1, c2, n, shortcut, e): cv3(cat(m(cv1(x)), cv2(x))). */
static int c3(ob *b, const char *prefix, const char *x, const yc_layer_cfg *l, char *out)
{
    char sub[NM], a[NM], c[NM], cat[NM];
    int c_ = (int)(l->c2 * l->e), st;
    fmt(sub, "%s.cv1", prefix);
    if ((st = conv_module(b, sub, x, 1, 1, 0, a)))
        return st;
    for (int j = 0; j < l->n; j++) {
        char next[NM];
        fmt(sub, "%s.m.%d", prefix, j);
        if ((st = bottleneck(b, sub, a, c_, c_, l->shortcut, next)))
            return st;
        memcpy(a, next, NM);
    }
    fmt(sub, "%s.cv2", prefix);
    if ((st = conv_module(b, sub, x, 1, 1, 0, c)))
        return st;
    const char *in[2] = {a, c};
    concat(b, prefix, in, 2, 1, cat);
    fmt(sub, "%s.cv3", prefix);
    return conv_module(b, sub, cat, 1, 1, 0, out);
}

/* MaxPool2d(k, stride 1, padding k // 2). */
static void maxpool(ob *b, const char *prefix, const char *x, int k, char *out)
{
    int64_t ks[2] = {k, k}, ss[2] = {1, 1}, ps[4] = {k / 2, k / 2, k / 2, k / 2};
    attr a[] = {
        {.name = "ceil_mode", .type = AT_INT, .i = 0},
        {.name = "kernel_shape", .type = AT_INTS, .ints = ks, .n = 2},
        {.name = "pads", .type = AT_INTS, .ints = ps, .n = 4},
        {.name = "strides", .type = AT_INTS, .ints = ss, .n = 2},
    };
    node(b, "MaxPool", prefix, &x, 1, out, a, 4);
}

/* SPPF: cv2(cat(x, m(x), m(m(x)), m(m(m(x))))), x = cv1(input); SPP: the pools in parallel. */
static int spp(ob *b, const char *prefix, const char *x, const yc_layer_cfg *l, char *out)
{
    char sub[NM], v[5][NM], cat[NM];
    int st, nin = 0;
    fmt(sub, "%s.cv1", prefix);
    if ((st = conv_module(b, sub, x, 1, 1, 0, v[nin++])))
        return st;
    bool chained = l->module == YC_MOD_SPPF;
    int branches = chained ? 3 : l->npool;
    if (branches > 4)
        return yc_error_status(YC_EFORMAT, "%s: SPP with %d pools (at most 4)", prefix, branches);
    for (int i = 0; i < branches; i++) {
        fmt(sub, "%s.m", prefix);
        maxpool(b, sub, chained ? v[nin - 1] : v[0], chained ? l->pool[0] : l->pool[i], v[nin]);
        nin++;
    }
    const char *in[5];
    for (int i = 0; i < nin; i++)
        in[i] = v[i];
    concat(b, prefix, in, nin, 1, cat);
    fmt(sub, "%s.cv2", prefix);
    return conv_module(b, sub, cat, 1, 1, 0, out);
}

/* nn.Upsample(None, f, 'nearest') as torch exports it: Resize(x, roi = [], scales). */
static int upsample(ob *b, const char *prefix, const char *x, int f, char *out)
{
    char roi[NM], scales[NM];
    fmt(roi, "%s.roi", prefix);
    fmt(scales, "%s.scales", prefix);
    int64_t d0[1] = {0}, d4[1] = {4};
    float sv[4] = {1, 1, (float)f, (float)f};
    int st;
    if ((st = init_float_as(b, roi, d0, 1, sv, true)) ||
        (st = init_float_as(b, scales, d4, 1, sv, true)))
        return st;
    attr a[] = {
        {.name = "coordinate_transformation_mode", .type = AT_STRING, .s = "asymmetric"},
        {.name = "cubic_coeff_a", .type = AT_FLOAT, .f = -0.75f},
        {.name = "mode", .type = AT_STRING, .s = "nearest"},
        {.name = "nearest_mode", .type = AT_STRING, .s = "floor"},
    };
    const char *in[3] = {x, roi, scales};
    node(b, "Resize", prefix, in, 3, out, a, 4);
    return YC_OK;
}

/* The constants Detect's decoding shares (names "detect.*"); those of the grid's computation
 * only in a dynamic file (runtimes warn about unused initializers). */
static int detect_constants(ob *b)
{
    const float two = 2, zero = 0, minus_half = -0.5f;
    const int64_t v0 = 0, v1 = 1, v2 = 2, v3 = 3, v4 = 4, no = b->m->no;
    const int64_t flat[3] = {0, -1, no}, view[4] = {0, b->m->na, no, -1};
    int st;
    if ((st = init_float(b, "detect.two", NULL, 0, &two)))
        return st;
    init_i64(b, "detect.axis3", 1, &v3);
    init_i64(b, "detect.at0", 1, &v0);
    init_i64(b, "detect.at2", 1, &v2);
    init_i64(b, "detect.at4", 1, &v4);
    init_i64(b, "detect.at_no", 1, &no);
    if (no > b->m->nc + 5) {
        /* Segment: where the mask coefficients begin */
        const int64_t at_mask = b->m->nc + 5;
        init_i64(b, "detect.at_mask", 1, &at_mask);
    }
    init_i64(b, "detect.view", 4, view);
    init_i64(b, "detect.flat", 3, flat);
    if (!b->o->dynamic)
        return YC_OK;
    const int64_t row[2] = {1, -1}, col[2] = {-1, 1}, grid[4] = {1, 1, -1, 2};
    if ((st = init_float(b, "detect.zero", NULL, 0, &zero)) ||
        (st = init_float(b, "detect.minus_half", NULL, 0, &minus_half)))
        return st;
    init_i64(b, "detect.i0", 0, &v0);
    init_i64(b, "detect.i1", 0, &v1);
    init_i64(b, "detect.i2", 0, &v2);
    init_i64(b, "detect.i3", 0, &v3);
    init_i64(b, "detect.row", 2, row);
    init_i64(b, "detect.col", 2, col);
    init_i64(b, "detect.grid", 4, grid);
    return YC_OK;
}

/* Level l's grid and anchor grid: (x - 0.5, y - 0.5) and the anchor (w, h) in pixels of each
 * cell and anchor.  Static: stored as the grid (N, na, ny*nx, 2) and the anchor grid
 * (1, na, ny*nx, 2) (torch's export stores Detect's grid and anchor_grid at (1, na, ny, nx, 2)):
 * OpenCV DNN 4.6 adds a constant only of the other input's own shape, and multiplies by one of
 * that shape with a batch of 1 (other shapes fail its shape check, or a batch over 1 gives wrong
 * boxes).  Dynamic: the grid (1, 1, ny*nx, 2) computed from the conv output y's shape, the anchor
 * grid (1, na, 1, 2), both broadcast. */
static int detect_grid(ob *b, const char *prefix, int l, const char *y, char *grid, char *anchors)
{
    const yc_model *m = b->m;
    float ag[YC_CFG_MAX_ANCHORS * 2];
    for (int a = 0; a < m->na * 2; a++)
        ag[a] = m->anchors[l * m->na * 2 + a] * m->stride[l];
    fmt(anchors, "%s.anchor_grid", prefix);
    fmt(grid, "%s.grid", prefix);
    if (!b->o->dynamic) {
        int stride = (int)m->stride[l], ny = b->o->h / stride, nx = b->o->w / stride;
        size_t cells = (size_t)ny * (size_t)nx, per = (size_t)m->na * cells * 2;
        size_t n = per * (size_t)b->o->batch;
        float *g = yc_malloc(n * sizeof *g, "a Detect grid");
        float *ga = yc_malloc(per * sizeof *ga, "a Detect anchor grid");
        int st = YC_ENOMEM;
        if (g && ga) {
            for (int a = 0; a < m->na; a++)
                for (size_t c = 0; c < cells; c++) {
                    size_t i = ((size_t)a * cells + c) * 2;
                    g[i] = (float)(c % (size_t)nx) - 0.5f;
                    g[i + 1] = (float)(c / (size_t)nx) - 0.5f;
                    ga[i] = ag[2 * a];
                    ga[i + 1] = ag[2 * a + 1];
                }
            for (int k = 1; k < b->o->batch; k++)
                memcpy(g + (size_t)k * per, g, per * sizeof *g);
            int64_t dims[4] = {b->o->batch, m->na, (int64_t)cells, 2};
            if (!(st = init_float(b, grid, dims, 4, g))) {
                dims[0] = 1;
                st = init_float(b, anchors, dims, 4, ga);
            }
        }
        free(g);
        free(ga);
        return st;
    }
    int64_t adims[4] = {1, m->na, 1, 2};
    int st = init_float(b, anchors, adims, 4, ag);
    if (st)
        return st;
    char shape[NM], ny[NM], nx[NM], ry[NM], rx[NM], fy[NM], fx[NM], gy[NM], gx[NM], zy[NM],
        zx[NM], ex[NM], ey[NM], cx[NM], cy[NM], cat[NM], g4[NM];
    node1(b, "Shape", prefix, y, shape);
    node2(b, "Gather", prefix, shape, "detect.i2", ny);
    node2(b, "Gather", prefix, shape, "detect.i3", nx);
    const char *in[3] = {"detect.i0", ny, "detect.i1"};
    node(b, "Range", prefix, in, 3, ry, NULL, 0);
    in[1] = nx;
    node(b, "Range", prefix, in, 3, rx, NULL, 0);
    attr to = {.name = "to", .type = AT_INT, .i = b->elem};
    node(b, "Cast", prefix, (const char *[]){ry}, 1, fy, &to, 1);
    node(b, "Cast", prefix, (const char *[]){rx}, 1, fx, &to, 1);
    node2(b, "Reshape", prefix, fy, "detect.col", gy);  /* (ny, 1) */
    node2(b, "Reshape", prefix, fx, "detect.row", gx);  /* (1, nx) */
    node2(b, "Mul", prefix, gy, "detect.zero", zy);
    node2(b, "Mul", prefix, gx, "detect.zero", zx);
    node2(b, "Add", prefix, gx, zy, ex);                /* x of every cell, (ny, nx) */
    node2(b, "Add", prefix, gy, zx, ey);                /* y of every cell */
    node2(b, "Reshape", prefix, ex, "detect.col", cx);  /* (ny*nx, 1) */
    node2(b, "Reshape", prefix, ey, "detect.col", cy);
    const char *xy[2] = {cx, cy};
    concat(b, prefix, xy, 2, 1, cat);
    node2(b, "Reshape", prefix, cat, "detect.grid", g4);  /* (1, 1, ny*nx, 2) */
    char name[NM];
    node2(b, "Add", prefix, g4, "detect.minus_half", name);
    memcpy(grid, name, NM);
    return YC_OK;
}

/* Segment's Proto(c1, npr, nm) on x: cv3(cv2(Upsample(cv1(x), 2))), the graph's output1
 * (N, nm, 2H, 2W). */
static int proto(ob *b, const char *prefix, const char *x)
{
    char sub[NM], a[NM], up[NM], c[NM];
    int st;
    fmt(sub, "%s.proto.cv1", prefix);
    if ((st = conv_module(b, sub, x, 3, 1, 1, a)))
        return st;
    fmt(sub, "%s.proto.upsample", prefix);
    if ((st = upsample(b, sub, a, 2, up)))
        return st;
    fmt(sub, "%s.proto.cv2", prefix);
    if ((st = conv_module(b, sub, up, 3, 1, 1, c)))
        return st;
    fmt(sub, "%s.proto.cv3", prefix);
    char y[NM];
    if ((st = conv_module(b, sub, c, 1, 1, 0, y)))
        return st;
    node_as(b, "Identity", sub, (const char *[]){y}, 1, y, NULL, 0, "output1");
    return YC_OK;
}

/* Detect in export mode: per level the 1x1 conv, view (N, na, no, ny*nx), permute to
 * (N, na, ny*nx, no), sigmoid, decode, reshape to (N, na*ny*nx, no); the levels concatenated.
 * Segment (nm > 0) runs Proto first and leaves its nm mask coefficients raw (no sigmoid), as
 * Detect.forward's Segment branch does. */
static int detect(ob *b, const char *prefix, const yc_layer_cfg *l, char *out)
{
    yc_model *m = b->m;
    char levels[YC_CFG_MAX_LEVELS][NM];
    int st;
    if ((st = detect_constants(b)))
        return st;
    if (l->nm > 0 && (st = proto(b, prefix, b->layer_out[l->from[0]])))
        return st;
    for (int i = 0; i < l->nfrom; i++) {
        char sub[NM], name[NM];
        float *w = NULL, *bias = NULL;
        size_t nw, nb;
        fmt(sub, "%s.m.%d", prefix, i);
        fmt(name, "%s.weight", sub);
        if (!(st = read_tensor(b, name, false, &w, &nw))) {
            fmt(name, "%s.bias", sub);
            st = read_tensor(b, name, false, &bias, &nb);
        }
        int c2 = m->na * m->no;
        if (!st && (nb != (size_t)c2 || nw % (size_t)c2))
            st = yc_error_status(YC_ERR, "internal: %s has %zu outputs, not %d", sub, nb, c2);
        char y[NM];
        if (!st)
            st = conv_node(b, sub, b->layer_out[l->from[i]], w, bias, c2, (int)(nw / (size_t)c2),
                           1, 1, 0, y);
        free(w);
        free(bias);
        if (st)
            return st;

        char grid[NM], anchors[NM], stride[NM];
        fmt(stride, "%s.stride", sub);
        if ((st = detect_grid(b, sub, i, y, grid, anchors)) ||
            (st = init_float(b, stride, NULL, 0, &m->stride[i])))
            return st;

        char v[NM], t[NM], s[NM], xy[NM], wh[NM], conf[NM], xy2[NM], xyg[NM], xys[NM], wh2[NM],
            whsq[NM], whs[NM], cat[NM];
        node2(b, "Reshape", sub, y, "detect.view", v);
        int64_t perm[4] = {0, 1, 3, 2};
        attr pa = {.name = "perm", .type = AT_INTS, .ints = perm, .n = 4};
        node(b, "Transpose", sub, (const char *[]){v}, 1, t, &pa, 1);
        char mask[NM];
        if (l->nm > 0) {
            /* Segment: xy, wh, conf (obj and classes) sigmoid; the mask coefficients raw */
            char rxy[NM], rwh[NM], rconf[NM];
            const char *sl[4] = {t, "detect.at0", "detect.at2", "detect.axis3"};
            node(b, "Slice", sub, sl, 4, rxy, NULL, 0);
            sl[1] = "detect.at2";
            sl[2] = "detect.at4";
            node(b, "Slice", sub, sl, 4, rwh, NULL, 0);
            sl[1] = "detect.at4";
            sl[2] = "detect.at_mask";
            node(b, "Slice", sub, sl, 4, rconf, NULL, 0);
            sl[1] = "detect.at_mask";
            sl[2] = "detect.at_no";
            node(b, "Slice", sub, sl, 4, mask, NULL, 0);
            node1(b, "Sigmoid", sub, rxy, xy);
            node1(b, "Sigmoid", sub, rwh, wh);
            node1(b, "Sigmoid", sub, rconf, conf);
        } else {
            node1(b, "Sigmoid", sub, t, s);
            const char *sl[4] = {s, "detect.at0", "detect.at2", "detect.axis3"};
            node(b, "Slice", sub, sl, 4, xy, NULL, 0);
            sl[1] = "detect.at2";
            sl[2] = "detect.at4";
            node(b, "Slice", sub, sl, 4, wh, NULL, 0);
            sl[1] = "detect.at4";
            sl[2] = "detect.at_no";
            node(b, "Slice", sub, sl, 4, conf, NULL, 0);
        }
        /* xy = (xy * 2 + grid) * stride;  wh = (wh * 2) ** 2 * anchor_grid */
        node2(b, "Mul", sub, xy, "detect.two", xy2);
        node2(b, "Add", sub, xy2, grid, xyg);
        node2(b, "Mul", sub, xyg, stride, xys);
        node2(b, "Mul", sub, wh, "detect.two", wh2);
        node2(b, "Mul", sub, wh2, wh2, whsq);
        node2(b, "Mul", sub, whsq, anchors, whs);
        const char *parts[4] = {xys, whs, conf, mask};
        concat(b, sub, parts, l->nm > 0 ? 4 : 3, 3, cat);
        node2(b, "Reshape", sub, cat, "detect.flat", levels[i]);
    }
    const char *in[YC_CFG_MAX_LEVELS];
    for (int i = 0; i < l->nfrom; i++)
        in[i] = levels[i];
    attr axis = {.name = "axis", .type = AT_INT, .i = 1};
    node_as(b, "Concat", prefix, in, l->nfrom, out, &axis, 1, "output0");
    return YC_OK;
}

/* Classify(c1, c2) in eval mode: linear(flatten(pool(conv(x)), 1)) (dropout is the identity),
 * the logits (N, nc) as output0, as ClassificationModel's export has them (no softmax). */
static int classify(ob *b, const char *prefix, const char *x, char *out)
{
    char sub[NM], a[NM], pooled[NM], flat[NM], name[NM];
    int st;
    fmt(sub, "%s.conv", prefix);
    if ((st = conv_module(b, sub, x, 1, 1, 0, a)))
        return st;
    fmt(sub, "%s.pool", prefix);
    node1(b, "GlobalAveragePool", sub, a, pooled);
    attr axis = {.name = "axis", .type = AT_INT, .i = 1};
    node(b, "Flatten", sub, (const char *[]){pooled}, 1, flat, &axis, 1);
    float *w = NULL, *bias = NULL;
    size_t nw, nb;
    fmt(sub, "%s.linear", prefix);
    fmt(name, "%s.weight", sub);
    if (!(st = read_tensor(b, name, false, &w, &nw))) {
        fmt(name, "%s.bias", sub);
        st = read_tensor(b, name, false, &bias, &nb);
    }
    if (!st && (nb != (size_t)b->m->nc || nw != nb * YC_CLASSIFY_HIDDEN))
        st = yc_error_status(YC_ERR, "internal: %s has %zu outputs, not %d", sub, nb, b->m->nc);
    char wn[NM], bn[NM];
    fmt(wn, "%s.weight", sub);
    fmt(bn, "%s.bias", sub);
    int64_t wd[2] = {(int64_t)nb, YC_CLASSIFY_HIDDEN}, bd[1] = {(int64_t)nb};
    if (!st && !(st = init_float(b, wn, wd, 2, w)))
        st = init_float(b, bn, bd, 1, bias);
    free(w);
    free(bias);
    if (st)
        return st;
    attr ga[] = {
        {.name = "alpha", .type = AT_FLOAT, .f = 1.0f},
        {.name = "beta", .type = AT_FLOAT, .f = 1.0f},
        {.name = "transB", .type = AT_INT, .i = 1},
    };
    node_as(b, "Gemm", sub, (const char *[]){flat, wn, bn}, 3, out, ga, 3, "output0");
    return YC_OK;
}

/* Layer i of the config, as nn/modules.c's yc_graph_build_layer builds it. */
static int layer(ob *b, int i, char *out)
{
    const yc_layer_cfg *l = &b->m->cfg->layers[i];
    char prefix[NM], cur[NM];
    fmt(prefix, "model.%d", i);
    const char *x = l->from[0] < 0 ? "images" : b->layer_out[l->from[0]];
    memcpy(cur, x, strlen(x) + 1);
    int st = YC_OK;
    switch (l->module) {
    case YC_MOD_CONV:
    case YC_MOD_BOTTLENECK:
    case YC_MOD_SPP:
    case YC_MOD_SPPF:
        /* repeated modules are an nn.Sequential: model.i.0, model.i.1, ... */
        for (int r = 0; r < l->repeats && !st; r++) {
            char sub[NM], next[NM];
            if (l->repeats > 1)
                fmt(sub, "%s.%d", prefix, r);
            else
                fmt(sub, "%s", prefix);
            int c1 = r == 0 ? l->c1 : l->c2;
            if (l->module == YC_MOD_CONV) {
                st = conv_module(b, sub, cur, l->k, l->s, l->p, next);
            } else if (l->module == YC_MOD_BOTTLENECK) {
                /* the hidden width (c2 * e) comes with cv1's weights */
                st = bottleneck(b, sub, cur, c1, l->c2, l->shortcut, next);
            } else {
                yc_layer_cfg lr = *l;
                lr.c1 = c1;
                st = spp(b, sub, cur, &lr, next);
            }
            if (!st)
                memcpy(cur, next, NM);
        }
        break;
    case YC_MOD_C3:
        st = c3(b, prefix, x, l, cur);
        break;
    case YC_MOD_UPSAMPLE:
        st = upsample(b, prefix, x, l->factor, cur);
        break;
    case YC_MOD_CONCAT: {
        const char *in[YC_MAX_FROM];
        for (int j = 0; j < l->nfrom; j++)
            in[j] = l->from[j] < 0 ? "images" : b->layer_out[l->from[j]];
        concat(b, prefix, in, l->nfrom, 1, cur);
        break;
    }
    case YC_MOD_DETECT:
        st = detect(b, prefix, l, cur);
        break;
    case YC_MOD_CLASSIFY:
        st = classify(b, prefix, x, cur);
        break;
    }
    if (st)
        return yc_error_context(st, "layer %d (%s)", i, l->type_name);
    memcpy(out, cur, NM);
    return YC_OK;
}

/* ---- the model ------------------------------------------------------------------------------ */

/* A ValueInfoProto of a tensor of type elem: dims[i] when params[i] is NULL, else symbolic. */
static void value_info(yc_pb *g, int field, const char *name, int elem, const int64_t *dims,
                       const char *const *params, int nd)
{
    yc_pb shape = YC_PB_INIT, tensor = YC_PB_INIT, type = YC_PB_INIT, vi = YC_PB_INIT;
    for (int i = 0; i < nd; i++) {
        yc_pb d = YC_PB_INIT;
        if (params && params[i])
            yc_pb_string(&d, 2, params[i]);
        else
            yc_pb_int(&d, 1, dims[i]);
        yc_pb_message(&shape, 1, &d);
    }
    yc_pb_int(&tensor, 1, elem);
    yc_pb_message(&tensor, 2, &shape);
    yc_pb_message(&type, 1, &tensor);
    yc_pb_string(&vi, 1, name);
    yc_pb_message(&vi, 2, &type);
    yc_pb_message(g, field, &vi);
}

static void metadata(yc_pb *model, const char *key, const char *value)
{
    yc_pb e = YC_PB_INIT;
    yc_pb_string(&e, 1, key);
    yc_pb_string(&e, 2, value);
    yc_pb_message(model, 14, &e);
}

char *yc_onnx_names_repr(const char *const *names, int n)
{
    yc_strbuf sb = {0};
    yc_strbuf_puts(&sb, "{");
    for (int i = 0; i < n; i++) {
        char num[32], gen[32];
        snprintf(num, sizeof num, "%s%d: ", i ? ", " : "", i);
        yc_strbuf_puts(&sb, num);
        const char *s = names ? names[i] : NULL;
        if (!s) {
            snprintf(gen, sizeof gen, "class%d", i);
            s = gen;
        }
        /* Python's repr(str): single quotes unless the text has ' and no " */
        char q = strchr(s, '\'') && !strchr(s, '"') ? '"' : '\'';
        yc_strbuf_put(&sb, &q, 1);
        for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
            char esc[8];
            if (*p == '\\' || *p == (unsigned char)q)
                snprintf(esc, sizeof esc, "\\%c", *p);
            else if (*p == '\n')
                snprintf(esc, sizeof esc, "\\n");
            else if (*p == '\r')
                snprintf(esc, sizeof esc, "\\r");
            else if (*p == '\t')
                snprintf(esc, sizeof esc, "\\t");
            else if (*p < 0x20 || *p == 0x7f)
                snprintf(esc, sizeof esc, "\\x%02x", *p);
            else
                snprintf(esc, sizeof esc, "%c", *p);
            yc_strbuf_puts(&sb, esc);
        }
        yc_strbuf_put(&sb, &q, 1);
    }
    yc_strbuf_puts(&sb, "}");
    char *r = yc_strbuf_finish(&sb);
    if (!r)
        yc_error_status(YC_ENOMEM, "out of memory writing the class names of the ONNX file");
    return r;
}

/* The model's largest stride: its Detect levels', or a classifier's backbone downsampling (the
 * product of its layers' strides before Classify, as ClassificationModel keeps its detection
 * model's stride: 32 for YOLOv5's backbones cut at 10 layers). */
static int max_stride(const yc_model *m)
{
    int gs = 0;
    for (int l = 0; l < m->nl; l++)
        if ((int)m->stride[l] > gs)
            gs = (int)m->stride[l];
    if (m->cfg->task == YC_TASK_CLASSIFY) {
        gs = 1;
        for (int i = 0; i + 1 < m->cfg->nlayers; i++)
            if (m->cfg->layers[i].module == YC_MOD_CONV)
                for (int r = 0; r < m->cfg->layers[i].repeats; r++)
                    gs *= m->cfg->layers[i].s;
        gs = gs < 32 ? 32 : gs;
    }
    return gs;
}

static int check_options(const yc_model *m, const yc_onnx_options *o)
{
    int gs = max_stride(m);
    gs = gs < 32 ? 32 : gs;
    if (o->h < gs || o->w < gs || o->h % gs || o->w % gs)
        return yc_error_status(YC_EUSAGE, "the ONNX input size %dx%d must be a multiple of the "
                               "model's largest stride %d", o->h, o->w, gs);
    if (o->opset < YC_ONNX_OPSET_MIN || o->opset > YC_ONNX_OPSET_MAX)
        return yc_error_status(YC_EUSAGE, "ONNX opset %d is not supported: give %d to %d "
                               "(YOLOv5 writes 12)", o->opset, YC_ONNX_OPSET_MIN,
                               YC_ONNX_OPSET_MAX);
    if (o->batch < 1)
        return yc_error_status(YC_EUSAGE, "the ONNX batch size must be at least 1, not %d",
                               o->batch);
    if (o->names && o->nnames != m->nc)
        return yc_error_status(YC_EUSAGE, "%d class names for a model of %d classes", o->nnames,
                               m->nc);
    if (m->cfg->task != YC_TASK_CLASSIFY &&
        (m->nl < 1 || m->nl > YC_CFG_MAX_LEVELS || m->na < 1 || m->na > YC_CFG_MAX_ANCHORS))
        return yc_error_status(YC_EFORMAT, "a Detect head with %d levels of %d anchors cannot be "
                               "exported", m->nl, m->na);
    return YC_OK;
}

/* The GraphProto of the model into g: nodes, name, initializers, input, output. */
static int build_graph(ob *b, yc_pb *g)
{
    const yc_model *m = b->m;
    const yc_onnx_options *o = b->o;
    int st = YC_OK;
    for (int i = 0; i < m->cfg->nlayers && !st; i++)
        st = layer(b, i, b->layer_out[i]);
    if (st)
        return st;
    const yc_layer_cfg *last = &m->cfg->layers[m->cfg->nlayers - 1];
    if (last->module != YC_MOD_DETECT && last->module != YC_MOD_CLASSIFY)
        return yc_error_status(YC_EFORMAT, "the model's last layer is not Detect, Segment or "
                               "Classify");
    yc_pb_raw(g, &b->nodes);
    yc_pb_string(g, 2, "main_graph");
    yc_pb_raw(g, &b->inits);
    int64_t in_dims[4] = {o->batch, m->cfg->ch, o->h, o->w};
    const char *in_sym[4] = {"batch", NULL, "height", "width"};
    value_info(g, 11, "images", b->elem, in_dims, o->dynamic ? in_sym : NULL, 4);
    if (last->module == YC_MOD_CLASSIFY) {
        /* the logits (N, nc) */
        int64_t out_dims[2] = {o->batch, m->nc};
        const char *out_sym[2] = {"batch", NULL};
        value_info(g, 12, "output0", b->elem, out_dims, o->dynamic ? out_sym : NULL, 2);
        return g->status;
    }
    int64_t rows = 0;
    for (int l = 0; l < m->nl; l++)
        rows += (int64_t)m->na * (o->h / (int)m->stride[l]) * (o->w / (int)m->stride[l]);
    int64_t out_dims[3] = {o->batch, rows, m->no};
    const char *out_sym[3] = {"batch", "anchors", NULL};
    value_info(g, 12, "output0", b->elem, out_dims, o->dynamic ? out_sym : NULL, 3);
    if (last->nm > 0) {
        /* Segment's Proto at stride 4 of the input (the first level's Upsample by 2): output1 */
        int s0 = (int)m->stride[0] / 2;
        int64_t p_dims[4] = {o->batch, last->nm, o->h / s0, o->w / s0};
        const char *p_sym[4] = {"batch", NULL, "mask_height", "mask_width"};
        value_info(g, 12, "output1", b->elem, p_dims, o->dynamic ? p_sym : NULL, 4);
    }
    return g->status;
}

int yc_onnx_export(yc_model *m, const yc_onnx_options *o, const char *path, size_t *bytes)
{
    int st = check_options(m, o);
    if (st)
        return st;
    ob b = {.m = m, .o = o, .nodes = YC_PB_INIT, .inits = YC_PB_INIT,
            .elem = o->half ? DT_FLOAT16 : DT_FLOAT};
    if (!(b.layer_out = yc_calloc((size_t)m->cfg->nlayers, sizeof *b.layer_out,
                                  "the ONNX layer names")))
        return YC_ENOMEM;
    yc_pb g = YC_PB_INIT, model = YC_PB_INIT, opset = YC_PB_INIT;
    st = build_graph(&b, &g);
    yc_pb_free(&b.nodes);
    yc_pb_free(&b.inits);
    free(b.layer_out);
    char *names = NULL;
    if (!st && !(names = yc_onnx_names_repr(o->names, m->nc)))
        st = YC_ENOMEM;
    if (st) {
        yc_pb_free(&g);
        return st;
    }
    /* IR version 7 goes with opsets up to 14 (onnx 1.7 to 1.9), 8 with 15 to 17 (onnx 1.10 to
     * 1.12): a file's IR version must be one its opset's runtimes read */
    yc_pb_int(&model, 1, o->opset <= 14 ? 7 : 8);
    yc_pb_string(&model, 2, "yolocl");
    yc_pb_string(&model, 3, o->version ? o->version : "");
    yc_pb_message(&model, 7, &g);
    yc_pb_string(&opset, 1, "");
    yc_pb_int(&opset, 2, o->opset);
    yc_pb_message(&model, 8, &opset);
    /* YOLOv5's export_onnx: {'stride': int(max(model.stride)), 'names': model.names}, str() */
    char stride[32];
    snprintf(stride, sizeof stride, "%d", max_stride(m));
    metadata(&model, "stride", stride);
    metadata(&model, "names", names);
    free(names);
    if (!(st = model.status) && (st = yc_write_file_atomic(path, model.d, model.n)))
        st = yc_error_context(st, "writing the ONNX file %s", path);
    if (!st && bytes)
        *bytes = model.n;
    yc_pb_free(&model);
    return st;
}
