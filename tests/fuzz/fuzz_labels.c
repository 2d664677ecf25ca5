/* Fuzz target: YOLO label files (yc_labels_parse and yc_labels_parse_polygons, src/data/labels.c),
 * the text the dataset scan reads for every image.  The input is the file's text.  Checked: a
 * failure explains itself in `why` (naming the line), every box kept is what the scan promises:
 * class >= 0, coordinates in [0, 1], no duplicate rows; both calls agree on the boxes, and each
 * polygon kept has points whose extent is its box. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dataset.h"
#include "fuzz.h"
#include "log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_init();
    yc_box *boxes = NULL;
    size_t n = 0, removed = 0;
    char why[256];
    fuzz_begin();
    int st = yc_labels_parse((const char *)data, size, &boxes, &n, &removed, why, sizeof why);
    if (st == YC_EFORMAT) {
        if (!why[0] || !strstr(why, "(line "))
            fuzz_fail("label parse failed without a reason naming the line");
        if (boxes || n)
            fuzz_fail("label parse failed but returned boxes");
        yc_error_clear();
        return 0;
    }
    fuzz_check(st, "yc_labels_parse");
    if (st != YC_OK)
        return 0;
    if ((n == 0) != (boxes == NULL))
        fuzz_fail("label parse: box count and array disagree");
    for (size_t i = 0; i < n; i++) {
        const yc_box *b = &boxes[i];
        if (b->cls < 0 || !(b->x >= 0 && b->x <= 1) || !(b->y >= 0 && b->y <= 1) ||
            !(b->w >= 0 && b->w <= 1) || !(b->h >= 0 && b->h <= 1))
            fuzz_fail("label parse kept a box outside [0, 1] or with a negative class");
        for (size_t j = 0; j < i; j++)
            if (boxes[j].cls == b->cls && boxes[j].x == b->x && boxes[j].y == b->y &&
                boxes[j].w == b->w && boxes[j].h == b->h)
                fuzz_fail("label parse kept a duplicate row");
    }
    yc_box *pb = NULL;
    uint32_t *counts = NULL;
    float *pts = NULL;
    size_t pn = 0, premoved = 0, npts = 0;
    st = yc_labels_parse_polygons((const char *)data, size, &pb, &pn, &premoved, &counts, &pts,
                                  &npts, why, sizeof why);
    fuzz_check(st, "yc_labels_parse_polygons");
    if (st != YC_OK || pn != n || premoved != removed ||
        (n && memcmp(pb, boxes, n * sizeof *boxes) != 0))
        fuzz_fail("label parse: the polygon parse disagrees on the boxes");
    if ((counts == NULL) != (pts == NULL) || (counts && n == 0))
        fuzz_fail("label parse: polygon arrays inconsistent");
    size_t at = 0;
    for (size_t i = 0; counts && i < n; i++) {
        if (counts[i] == 0)
            fuzz_fail("label parse kept a polygon without points");
        float x1 = pts[2 * at], x2 = x1, y1 = pts[2 * at + 1], y2 = y1;
        for (uint32_t q = 0; q < counts[i]; q++, at++) {
            x1 = fminf(x1, pts[2 * at]);
            x2 = fmaxf(x2, pts[2 * at]);
            y1 = fminf(y1, pts[2 * at + 1]);
            y2 = fmaxf(y2, pts[2 * at + 1]);
        }
        if (pb[i].w != x2 - x1 || pb[i].h != y2 - y1)
            fuzz_fail("label parse: a polygon's extent is not its box");
    }
    if (counts && at != npts)
        fuzz_fail("label parse: point count disagrees with the polygons");
    free(pb);
    free(counts);
    free(pts);
    free(boxes);
    return 0;
}
