/* Detect decoding, non_max_suppression and box helpers of YOLOv5 v7.0 (docs/YOLOV5.md 1.7,
 * 6.1).  All box arithmetic is float32 in PyTorch's operation order; this file must be built
 * without floating-point contraction (GCC's -std=c11 implies -ffp-contract=off). */
#include "nms.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

/* ---------------------------------------------------------------------------------------------
 * Detect decoding
 * ------------------------------------------------------------------------------------------- */

size_t yc_detect_rows(const yc_detect_level *levels, int nl, int na)
{
    size_t n = 0;
    for (int l = 0; l < nl; l++)
        n += (size_t)na * (size_t)levels[l].ny * (size_t)levels[l].nx;
    return n;
}

/* torch.sigmoid on CPU: 1 / (1 + exp(-x)) in float32. */
static inline float sigmoidf(float x)
{
    return 1.0f / (1.0f + expf(-x));
}

int yc_detect_decode(const yc_detect_level *levels, int nl, int na, int no, const float *anchors,
                     int b, float *out)
{
    return yc_detect_decode_nm(levels, nl, na, no, 0, anchors, b, out);
}

int yc_detect_decode_nm(const yc_detect_level *levels, int nl, int na, int no, int nm,
                        const float *anchors, int b, float *out)
{
    if (!levels || !anchors || !out || nl < 1 || na < 1 || nm < 0 || no - nm < 6 || b < 0)
        return yc_error_status(YC_EFORMAT,
                               "detect decode: invalid arguments (nl %d, na %d, no %d, nm %d, "
                               "image %d)",
                               nl, na, no, nm, b);
    /* Segment's rows end with nm mask coefficients, left raw (Detect.forward's `mask`) */
    const int nsig = no - nm;
    for (int l = 0; l < nl; l++) {
        const yc_detect_level *lv = &levels[l];
        if (!lv->p || lv->ny < 1 || lv->nx < 1 || !(lv->stride > 0.0f) ||
            lv->img_stride < (size_t)na * (size_t)no * (size_t)lv->ny * (size_t)lv->nx)
            return yc_error_status(YC_EFORMAT,
                                   "detect decode: level %d: grid %dx%d, stride %g, image stride "
                                   "%zu (need >= %zu)",
                                   l, lv->ny, lv->nx, (double)lv->stride, lv->img_stride,
                                   (size_t)na * (size_t)no * (size_t)lv->ny * (size_t)lv->nx);
    }
    float *row = out;
    for (int l = 0; l < nl; l++) {
        const yc_detect_level *lv = &levels[l];
        const size_t plane = (size_t)lv->ny * (size_t)lv->nx;
        const float s = lv->stride;
        for (int a = 0; a < na; a++) {
            /* Detect._make_grid: anchor_grid = anchors[l] * stride (float32) */
            const float aw = anchors[((size_t)l * na + a) * 2] * s;
            const float ah = anchors[((size_t)l * na + a) * 2 + 1] * s;
            const float *src = lv->p + (size_t)b * lv->img_stride + (size_t)a * no * plane;
            for (int y = 0; y < lv->ny; y++) {
                /* grid = meshgrid - 0.5 (float32, exact) */
                const float gy = (float)y - 0.5f;
                for (int x = 0; x < lv->nx; x++, row += no) {
                    const size_t cell = (size_t)y * lv->nx + x;
                    const float gx = (float)x - 0.5f;
                    float v[4];
                    for (int k = 0; k < 4; k++)
                        v[k] = sigmoidf(src[k * plane + cell]);
                    /* xy = (xy * 2 + grid) * stride; wh = (wh * 2) ** 2 * anchor_grid */
                    row[0] = (v[0] * 2.0f + gx) * s;
                    row[1] = (v[1] * 2.0f + gy) * s;
                    const float tw = v[2] * 2.0f, th = v[3] * 2.0f;
                    row[2] = tw * tw * aw;
                    row[3] = th * th * ah;
                    for (int k = 4; k < nsig; k++)
                        row[k] = sigmoidf(src[(size_t)k * plane + cell]);
                    for (int k = nsig; k < no; k++)
                        row[k] = src[(size_t)k * plane + cell];
                }
            }
        }
    }
    return YC_OK;
}

/* ---------------------------------------------------------------------------------------------
 * Sorting as PyTorch 1.13 sorts on CPU: torch.argsort(descending=True) is std::sort (libstdc++'s
 * introsort) over (value, index) pairs with the comparator "a before b when a is NaN and b is
 * not, or a > b".  Reproduced step by step so that equal scores end up in PyTorch's order.
 * ------------------------------------------------------------------------------------------- */

/* one (score, candidate number) pair */
typedef struct kv {
    float v;
    uint32_t i;
} kv;

#define LIBSTDCXX_SORT_THRESHOLD 16

static inline bool kv_before(const kv *a, const kv *b)
{
    return (isnan(a->v) && !isnan(b->v)) || a->v > b->v;
}

static inline void kv_swap(kv *a, kv *b)
{
    kv t = *a;
    *a = *b;
    *b = t;
}

/* std::__move_median_to_first */
static void move_median_to_first(kv *result, kv *a, kv *b, kv *c)
{
    if (kv_before(a, b)) {
        if (kv_before(b, c))
            kv_swap(result, b);
        else if (kv_before(a, c))
            kv_swap(result, c);
        else
            kv_swap(result, a);
    } else if (kv_before(a, c)) {
        kv_swap(result, a);
    } else if (kv_before(b, c)) {
        kv_swap(result, c);
    } else {
        kv_swap(result, b);
    }
}

/* std::__unguarded_partition */
static kv *unguarded_partition(kv *first, kv *last, const kv *pivot)
{
    for (;;) {
        while (kv_before(first, pivot))
            ++first;
        --last;
        while (kv_before(pivot, last))
            --last;
        if (!(first < last))
            return first;
        kv_swap(first, last);
        ++first;
    }
}

/* std::__push_heap */
static void push_heap(kv *first, ptrdiff_t hole, ptrdiff_t top, kv value)
{
    ptrdiff_t parent = (hole - 1) / 2;
    while (hole > top && kv_before(&first[parent], &value)) {
        first[hole] = first[parent];
        hole = parent;
        parent = (hole - 1) / 2;
    }
    first[hole] = value;
}

/* std::__adjust_heap */
static void adjust_heap(kv *first, ptrdiff_t hole, ptrdiff_t len, kv value)
{
    const ptrdiff_t top = hole;
    ptrdiff_t child = hole;
    while (child < (len - 1) / 2) {
        child = 2 * (child + 1);
        if (kv_before(&first[child], &first[child - 1]))
            child--;
        first[hole] = first[child];
        hole = child;
    }
    if ((len & 1) == 0 && child == (len - 2) / 2) {
        child = 2 * (child + 1);
        first[hole] = first[child - 1];
        hole = child - 1;
    }
    push_heap(first, hole, top, value);
}

/* std::__pop_heap */
static void pop_heap(kv *first, kv *last, kv *result)
{
    kv value = *result;
    *result = *first;
    adjust_heap(first, 0, last - first, value);
}

/* std::__partial_sort(first, last, last): __make_heap then __sort_heap */
static void heap_sort(kv *first, kv *last)
{
    ptrdiff_t len = last - first;
    if (len >= 2) {
        for (ptrdiff_t parent = (len - 2) / 2;; parent--) {
            adjust_heap(first, parent, len, first[parent]);
            if (parent == 0)
                break;
        }
    }
    while (last - first > 1) {
        --last;
        pop_heap(first, last, last);
    }
}

/* std::__introsort_loop */
static void introsort_loop(kv *first, kv *last, int depth_limit)
{
    while (last - first > LIBSTDCXX_SORT_THRESHOLD) {
        if (depth_limit == 0) {
            heap_sort(first, last);
            return;
        }
        --depth_limit;
        kv *mid = first + (last - first) / 2;
        move_median_to_first(first, first + 1, mid, last - 1);
        kv *cut = unguarded_partition(first + 1, last, first);
        introsort_loop(cut, last, depth_limit);
        last = cut;
    }
}

/* std::__unguarded_linear_insert */
static void unguarded_linear_insert(kv *last)
{
    kv val = *last;
    kv *next = last - 1;
    while (kv_before(&val, next)) {
        *last = *next;
        last = next;
        --next;
    }
    *last = val;
}

/* std::__insertion_sort */
static void insertion_sort(kv *first, kv *last)
{
    if (first == last)
        return;
    for (kv *i = first + 1; i != last; ++i) {
        if (kv_before(i, first)) {
            kv val = *i;
            memmove(first + 1, first, (size_t)(i - first) * sizeof *first);
            *first = val;
        } else {
            unguarded_linear_insert(i);
        }
    }
}

/* std::sort(first, first + n, comp) */
static void torch_sort_desc(kv *first, size_t n)
{
    if (n == 0)
        return;
    kv *last = first + n;
    int lg = 0;
    for (size_t m = n; m > 1; m >>= 1)
        lg++;
    introsort_loop(first, last, 2 * lg);
    if (last - first > LIBSTDCXX_SORT_THRESHOLD) {
        insertion_sort(first, first + LIBSTDCXX_SORT_THRESHOLD);
        for (kv *i = first + LIBSTDCXX_SORT_THRESHOLD; i != last; ++i)
            unguarded_linear_insert(i);
    } else {
        insertion_sort(first, last);
    }
}

/* ---------------------------------------------------------------------------------------------
 * Non-maximum suppression
 * ------------------------------------------------------------------------------------------- */

struct yc_nms_scratch {
    /* candidates: (score, candidate number), sorted in place */
    kv *key;
    /* per candidate number: its row and class */
    uint32_t *row;
    int32_t *cls;
    size_t cap;
    /* kept boxes (offset by class): x1, y1, x2, y2, area; their class; the previous kept box of
     * the same class (-1: none) */
    float *kbox;
    int32_t *kcls;
    int32_t *kprev;
    int kcap;
    /* per class: the last kept box of that class (-1: none) */
    int32_t *head;
    int head_cap;
};

yc_nms_params yc_nms_params_val(void)
{
    yc_nms_params p = {.conf_thres = 0.001f,
                       .iou_thres = 0.6,
                       .multi_label = true,
                       .agnostic = false,
                       .classes = NULL,
                       .n_classes = 0,
                       .max_det = 300,
                       .max_nms = YC_NMS_MAX_NMS};
    return p;
}

yc_nms_params yc_nms_params_detect(void)
{
    yc_nms_params p = yc_nms_params_val();
    p.conf_thres = 0.25f;
    p.iou_thres = 0.45;
    p.multi_label = false;
    p.max_det = 1000;
    return p;
}

yc_nms_scratch *yc_nms_scratch_new(void)
{
    return yc_calloc(1, sizeof(yc_nms_scratch), "NMS scratch");
}

void yc_nms_scratch_free(yc_nms_scratch *s)
{
    if (!s)
        return;
    free(s->key);
    free(s->row);
    free(s->cls);
    free(s->kbox);
    free(s->kcls);
    free(s->kprev);
    free(s->head);
    free(s);
}

/* Makes room for n candidates (keeping the first `keep`). */
static int reserve_candidates(yc_nms_scratch *s, size_t n, size_t keep)
{
    if (n <= s->cap)
        return YC_OK;
    size_t cap = s->cap ? s->cap : 1024;
    while (cap < n)
        cap *= 2;
    kv *key = yc_malloc(cap * sizeof *key, "NMS candidates");
    uint32_t *row = yc_malloc(cap * sizeof *row, "NMS candidates");
    int32_t *cls = yc_malloc(cap * sizeof *cls, "NMS candidates");
    if (!key || !row || !cls) {
        free(key);
        free(row);
        free(cls);
        return YC_ENOMEM;
    }
    if (keep) {
        memcpy(key, s->key, keep * sizeof *key);
        memcpy(row, s->row, keep * sizeof *row);
        memcpy(cls, s->cls, keep * sizeof *cls);
    }
    free(s->key);
    free(s->row);
    free(s->cls);
    s->key = key;
    s->row = row;
    s->cls = cls;
    s->cap = cap;
    return YC_OK;
}

/* Room for one more candidate after the n there are. */
static int grow(yc_nms_scratch *s, size_t n)
{
    if (n >= (size_t)UINT32_MAX)
        return yc_error_status(YC_EFORMAT, "nms: more than %u candidates", (unsigned)UINT32_MAX);
    if (reserve_candidates(s, n + 1, n) != YC_OK)
        return yc_error_context(YC_ENOMEM, "nms");
    return YC_OK;
}

static int reserve_kept(yc_nms_scratch *s, int max_det, int nc)
{
    if (max_det > s->kcap) {
        float *kbox = yc_malloc((size_t)max_det * 5 * sizeof *kbox, "NMS kept boxes");
        int32_t *kcls = yc_malloc((size_t)max_det * sizeof *kcls, "NMS kept boxes");
        int32_t *kprev = yc_malloc((size_t)max_det * sizeof *kprev, "NMS kept boxes");
        if (!kbox || !kcls || !kprev) {
            free(kbox);
            free(kcls);
            free(kprev);
            return YC_ENOMEM;
        }
        free(s->kbox);
        free(s->kcls);
        free(s->kprev);
        s->kbox = kbox;
        s->kcls = kcls;
        s->kprev = kprev;
        s->kcap = max_det;
    }
    if (nc > s->head_cap) {
        int32_t *head = yc_malloc((size_t)nc * sizeof *head, "NMS class lists");
        if (!head)
            return YC_ENOMEM;
        free(s->head);
        s->head = head;
        s->head_cap = nc;
    }
    return YC_OK;
}

static bool class_wanted(const yc_nms_params *p, int c)
{
    if (!p->classes || p->n_classes <= 0)
        return true;
    for (int i = 0; i < p->n_classes; i++)
        if (p->classes[i] == c)
            return true;
    return false;
}

/* xywh2xyxy of one row, float32 as torch: x - w / 2, x + w / 2. */
static inline void row_xyxy(const float *r, float b[4])
{
    b[0] = r[0] - r[2] / 2.0f;
    b[1] = r[1] - r[3] / 2.0f;
    b[2] = r[0] + r[2] / 2.0f;
    b[3] = r[1] + r[3] / 2.0f;
}

/* torchvision's IoU test of box j against kept box k (both offset; area last). */
static inline bool suppresses(const float *k, const float *j, double iou_thres)
{
    float xx1 = k[0] > j[0] ? k[0] : j[0];
    float yy1 = k[1] > j[1] ? k[1] : j[1];
    float xx2 = k[2] < j[2] ? k[2] : j[2];
    float yy2 = k[3] < j[3] ? k[3] : j[3];
    float w = xx2 - xx1, h = yy2 - yy1;
    w = 0.0f > w ? 0.0f : w;
    h = 0.0f > h ? 0.0f : h;
    float inter = w * h;
    float ovr = inter / (k[4] + j[4] - inter);
    return (double)ovr > iou_thres;
}

int yc_nms(const float *pred, size_t n_rows, int no, const yc_nms_params *p, yc_nms_scratch *s,
           float *out, int *n_out)
{
    return yc_nms_src(pred, n_rows, no, p, s, out, n_out, NULL);
}

int yc_nms_src(const float *pred, size_t n_rows, int no, const yc_nms_params *p,
               yc_nms_scratch *s, float *out, int *n_out, uint32_t *src)
{
    if (n_out)
        *n_out = 0;
    if (!p || !s || !out || !n_out || (!pred && n_rows) || p->nm < 0 || no - p->nm < 6)
        return yc_error_status(YC_EFORMAT, "nms: invalid arguments (no = %d, nm = %d)", no,
                               p ? p->nm : 0);
    if (p->max_det < 1 || p->max_nms < 1)
        return yc_error_status(YC_EFORMAT, "nms: max_det %d and max_nms %d must be >= 1",
                               p->max_det, p->max_nms);
    if (!(p->conf_thres >= 0.0f && p->conf_thres <= 1.0f) ||
        !(p->iou_thres >= 0.0 && p->iou_thres <= 1.0))
        return yc_error_status(YC_EFORMAT,
                               "nms: conf_thres %g and iou_thres %g must be in [0, 1] (as "
                               "YOLOv5 asserts)",
                               (double)p->conf_thres, p->iou_thres);
    if (n_rows > UINT32_MAX)
        return yc_error_status(YC_EFORMAT, "nms: %zu rows is too many", n_rows);
    const int nc = no - 5 - p->nm;
    const bool multi = p->multi_label && nc > 1;
    const float conf = p->conf_thres;

    /* 1-2: candidates in row-major (row, class) order */
    size_t n = 0;
    int st;
    for (size_t r = 0; r < n_rows; r++) {
        const float *row = pred + r * (size_t)no;
        const float obj = row[4];
        if (!(obj > conf))
            continue;
        if (multi) {
            for (int c = 0; c < nc; c++) {
                const float sc = row[5 + c] * obj;
                if (!(sc > conf) || !class_wanted(p, c))
                    continue;
                if (n == s->cap && (st = grow(s, n)) != YC_OK)
                    return st;
                s->key[n].v = sc;
                s->key[n].i = (uint32_t)n;
                s->row[n] = (uint32_t)r;
                s->cls[n] = c;
                n++;
            }
        } else {
            /* torch.max(dim=1): the first maximum (a NaN wins and ends the scan) */
            float best = row[5] * obj;
            int bc = 0;
            for (int c = 1; c < nc && !isnan(best); c++) {
                const float sc = row[5 + c] * obj;
                if (!(sc <= best)) {
                    best = sc;
                    bc = c;
                }
            }
            if (!(best > conf) || !class_wanted(p, bc))
                continue;
            if (n == s->cap && (st = grow(s, n)) != YC_OK)
                return st;
            s->key[n].v = best;
            s->key[n].i = (uint32_t)n;
            s->row[n] = (uint32_t)r;
            s->cls[n] = bc;
            n++;
        }
    }
    if (n == 0)
        return YC_OK;

    /* 3: sort by score (PyTorch's tie order) and keep the first max_nms */
    torch_sort_desc(s->key, n);
    const size_t m = n < (size_t)p->max_nms ? n : (size_t)p->max_nms;

    if (reserve_kept(s, p->max_det, nc) != YC_OK)
        return yc_error_context(YC_ENOMEM, "nms");

    /* With the class offset, boxes of different classes cannot intersect when the boxes span at
     * most max_wh horizontally: then x2 + c1*max_wh <= x1' + c2*max_wh for c1 < c2 holds exactly
     * and stays true after float32 rounding (rounding is monotonic), so their IoU is 0 (or NaN)
     * and never above the threshold.  Comparing only with kept boxes of the same class is then
     * the same as comparing with all of them. */
    bool per_class = !p->agnostic;
    if (per_class) {
        double lo = INFINITY, hi = -INFINITY;
        for (size_t k = 0; k < m && per_class; k++) {
            float b[4];
            row_xyxy(pred + (size_t)s->row[s->key[k].i] * no, b);
            if (!isfinite(b[0]) || !isfinite(b[2]))
                per_class = false;
            lo = b[0] < lo ? b[0] : lo;
            hi = b[2] > hi ? b[2] : hi;
        }
        if (per_class && !(hi - lo <= (double)YC_NMS_MAX_WH))
            per_class = false;
        for (int c = 0; c < nc; c++)
            s->head[c] = -1;
    }

    /* 4: greedy suppression, in score order, against the boxes kept so far */
    int kept = 0;
    for (size_t k = 0; k < m && kept < p->max_det; k++) {
        const uint32_t id = s->key[k].i;
        const int c = s->cls[id];
        const float *row = pred + (size_t)s->row[id] * no;
        const float off = p->agnostic ? 0.0f : (float)c * YC_NMS_MAX_WH;
        float b[5];
        row_xyxy(row, b);
        for (int t = 0; t < 4; t++)
            b[t] += off;
        b[4] = (b[2] - b[0]) * (b[3] - b[1]);
        bool drop = false;
        if (per_class) {
            for (int32_t q = s->head[c]; q >= 0 && !drop; q = s->kprev[q])
                drop = suppresses(s->kbox + (size_t)q * 5, b, p->iou_thres);
        } else {
            for (int q = 0; q < kept && !drop; q++)
                drop = suppresses(s->kbox + (size_t)q * 5, b, p->iou_thres);
        }
        if (drop)
            continue;
        memcpy(s->kbox + (size_t)kept * 5, b, sizeof b);
        s->kcls[kept] = c;
        if (per_class) {
            s->kprev[kept] = s->head[c];
            s->head[c] = kept;
        }
        /* 5: the row without the offset */
        float *o = out + (size_t)kept * 6;
        row_xyxy(row, o);
        o[4] = s->key[k].v;
        o[5] = (float)c;
        if (src)
            src[kept] = s->row[id];
        kept++;
    }
    *n_out = kept;
    return YC_OK;
}

void yc_nms_coefficients(const float *pred, int no, int nm, const uint32_t *src, int n,
                         float *out)
{
    for (int k = 0; k < n; k++) {
        const float *row = pred + (size_t)src[k] * no;
        for (int j = 0; j < nm; j++)
            out[(size_t)k * nm + j] = row[no - nm + j] * row[4];
    }
}

/* ---------------------------------------------------------------------------------------------
 * Box helpers
 * ------------------------------------------------------------------------------------------- */

void yc_xywh2xyxy(float *boxes, size_t n, size_t stride)
{
    for (size_t i = 0; i < n; i++) {
        float *b = boxes + i * stride;
        float t[4];
        row_xyxy(b, t);
        memcpy(b, t, sizeof t);
    }
}

void yc_xyxy2xywh(float *boxes, size_t n, size_t stride)
{
    for (size_t i = 0; i < n; i++) {
        float *b = boxes + i * stride;
        const float x1 = b[0], y1 = b[1], x2 = b[2], y2 = b[3];
        b[0] = (x1 + x2) / 2.0f;
        b[1] = (y1 + y2) / 2.0f;
        b[2] = x2 - x1;
        b[3] = y2 - y1;
    }
}

/* torch.clamp_(0, hi): NaN propagates. */
static inline float clampf(float v, float hi)
{
    if (v < 0.0f)
        return 0.0f;
    if (v > hi)
        return hi;
    return v;
}

void yc_clip_boxes(float *boxes, size_t n, size_t stride, int h, int w)
{
    const float fw = (float)w, fh = (float)h;
    for (size_t i = 0; i < n; i++) {
        float *b = boxes + i * stride;
        b[0] = clampf(b[0], fw);
        b[1] = clampf(b[1], fh);
        b[2] = clampf(b[2], fw);
        b[3] = clampf(b[3], fh);
    }
}

void yc_letterbox_gain_pad(int h1, int w1, int h0, int w0, double *gain, double *pad_w,
                           double *pad_h)
{
    double gh = (double)h1 / (double)h0, gw = (double)w1 / (double)w0;
    double g = gh < gw ? gh : gw;
    *gain = g;
    *pad_w = ((double)w1 - (double)w0 * g) / 2.0;
    *pad_h = ((double)h1 - (double)h0 * g) / 2.0;
}

void yc_scale_boxes(float *boxes, size_t n, size_t stride, double gain, double pad_w,
                    double pad_h, int h0, int w0)
{
    const float pw = (float)pad_w, ph = (float)pad_h, g = (float)gain;
    for (size_t i = 0; i < n; i++) {
        float *b = boxes + i * stride;
        b[0] = (b[0] - pw) / g;
        b[1] = (b[1] - ph) / g;
        b[2] = (b[2] - pw) / g;
        b[3] = (b[3] - ph) / g;
    }
    yc_clip_boxes(boxes, n, stride, h0, w0);
}
