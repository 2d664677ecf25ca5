/* Detect's eval decode with val.py's confidence filter on the device (src/eval/nms.c's
 * yc_detect_decode is the reference; cl/cl_detect.c launches it).
 *
 * detect_filter, one launch per level, one work item per (image, anchor, cell): the rows whose
 * objectness after the sigmoid is above conf are decoded as Detect decodes them in eval mode,
 *   y = sigmoid(raw); xy = (2 y_xy + (cell - 0.5)) stride; wh = (2 y_wh)^2 anchor_grid,
 * and appended to `rows` at a slot taken from `count` (atomic), with the row's id (image * rows
 * per image + its index in yc_detect_decode's order: level, anchor, y, x) in `ids`.  The slots
 * come in no fixed order; the host sorts by id, so what it sees does not depend on the order the
 * work items ran in.  Slots past `cap` are counted and not written: the host then knows the rows
 * did not fit.
 *
 * 2 y is exact in float, so contraction of 2 y + g into an fma changes nothing; the sigmoid's
 * exp and division are the device's (a few ulps from the host's expf). */

float sigmoid1(float x)
{
    return 1.0f / (1.0f + exp(-x));
}

/* Level of ny x nx cells: its rows start at row0 of an image's rows_per_image; anchor a's
 * anchor_grid (anchor * stride, as the host multiplies it) is P(anch)[2 a], P(anch)[2 a + 1]. */
__kernel void detect_filter(TENSOR(head), int batch, int na, int no, int ny, int nx, float stride,
                            PARAM(anch), float conf, uint row0,
                            uint rows_per_image, uint cap, __global uint *count,
                            __global float *rows, __global uint *ids)
{
    const uint plane = (uint)(ny * nx);
    const uint per_image = (uint)na * plane;
    uint i = get_global_id(0);
    if (i >= (uint)batch * per_image)
        return;
    uint b = i / per_image, r = i - b * per_image;
    uint a = r / plane, cell = r - a * plane;
    uint base = a * (uint)no * plane + cell;
    float obj = sigmoid1(LD(head, b, base + 4 * plane));
    if (!(obj > conf))
        return;
    uint slot = atomic_inc(count);
    if (slot >= cap)
        return;
    uint y = cell / (uint)nx, x = cell - y * (uint)nx;
    __global float *out = rows + (size_t)slot * (uint)no;
    float v0 = sigmoid1(LD(head, b, base)), v1 = sigmoid1(LD(head, b, base + plane));
    float tw = sigmoid1(LD(head, b, base + 2 * plane)) * 2.0f;
    float th = sigmoid1(LD(head, b, base + 3 * plane)) * 2.0f;
    out[0] = (v0 * 2.0f + ((float)x - 0.5f)) * stride;
    out[1] = (v1 * 2.0f + ((float)y - 0.5f)) * stride;
    out[2] = tw * tw * P(anch)[2 * a];
    out[3] = th * th * P(anch)[2 * a + 1];
    out[4] = obj;
    for (uint k = 5; k < (uint)no; k++)
        out[k] = sigmoid1(LD(head, b, base + k * plane));
    ids[slot] = b * rows_per_image + row0 + r;
}
