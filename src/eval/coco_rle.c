/* COCO run-length encoding (see coco_rle.h); pycocotools' maskApi.c ported. */
#include "coco_rle.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "log.h"
#include "util.h"

size_t yc_rle_encode(const uint8_t *mask, int h, int w, uint32_t *counts)
{
    if (h < 1 || w < 1)
        return 0;
    size_t n = 0;
    uint32_t run = 0;
    uint8_t p = 0;
    for (int x = 0; x < w; x++)
        for (int y = 0; y < h; y++) {
            uint8_t v = mask[(size_t)y * w + x] != 0;
            if (v != p) {
                counts[n++] = run;
                run = 0;
                p = v;
            }
            run++;
        }
    counts[n++] = run;
    return n;
}

size_t yc_rle_to_string(const uint32_t *counts, size_t n, char *buf)
{
    size_t p = 0;
    for (size_t i = 0; i < n; i++) {
        /* maskApi.c: long x = cnts[i]; if (i > 2) x -= cnts[i - 2] (the first three are raw) */
        long long x = counts[i];
        if (i > 2)
            x -= (long long)counts[i - 2];
        int more = 1;
        while (more) {
            char c = (char)(x & 0x1f);
            /* arithmetic shift, as C's >> of a negative long on the platforms pycocotools runs */
            x = x >= 0 ? x >> 5 : -((-x + 31) >> 5);
            more = (c & 0x10) ? x != -1 : x != 0;
            if (more)
                c |= 0x20;
            buf[p++] = (char)(c + 48);
        }
    }
    buf[p] = 0;
    return p;
}

char *yc_rle_json(const uint8_t *mask, int h, int w)
{
    if (h < 0 || w < 0) {
        yc_error_status(YC_EFORMAT, "RLE of a mask of negative size %d x %d", h, w);
        return NULL;
    }
    size_t pixels = (size_t)h * (size_t)w;
    uint32_t *counts = yc_malloc((pixels + 1) * sizeof *counts, "mask RLE");
    if (!counts)
        return NULL;
    size_t n = yc_rle_encode(mask, h, w, counts);
    char *s = yc_malloc(yc_rle_string_cap(n), "mask RLE");
    char *q = NULL, *out = NULL;
    if (s) {
        size_t len = yc_rle_to_string(counts, n, s);
        q = yc_json_quote(s, len);
    }
    if (q) {
        size_t cap = strlen(q) + 64;
        out = yc_malloc(cap, "mask RLE");
        if (out)
            snprintf(out, cap, "{\"size\": [%d, %d], \"counts\": %s}", h, w, q);
    }
    free(counts);
    free(s);
    free(q);
    return out;
}
