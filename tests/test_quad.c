/* Tests of the quad collate (quad.h) against hand-computed cases: the 2x bilinear enlargement
 * (PyTorch's source coordinates 0.5 i - 0.25, the clamp at the edges, truncation to uint8), the
 * 2 x 2 tiling of four images (4g top left, 4g+1 below, 4g+2 right, 4g+3 bottom right) with their
 * labels offset and halved, the labels of an enlarged group (its first image's only), images and
 * labels beyond the last whole group dropped, and a batch of fewer than 4 images. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "loader.h"
#include "log.h"
#include "quad.h"
#include "rng.h"
#include "harness.h"
#include "yctest.h"

START_TEST(test_upsample)
{
    /* one 1 x 2 channel: columns at sources 0 (clamped from -0.25), 0.25, 0.75, 1 (clamped upper
     * neighbour): 10, 10 * 0.75 + 20 * 0.25 = 12.5 -> 12, 17.5 -> 17, 20 */
    const uint8_t im[2] = {10, 20};
    uint8_t out[2 * 4];
    yc_quad_upsample(im, 1, 1, 2, out);
    const uint8_t want[4] = {10, 12, 17, 20};
    for (int y = 0; y < 2; y++)
        for (int x = 0; x < 4; x++)
            ck_assert_int_eq(out[y * 4 + x], want[x]);
    /* 2 x 2: the corner values stay, an inner output mixes 4 inputs with weights 9/16, 3/16,
     * 3/16, 1/16: (0, 1) at source (0, 0.25) = 0.75 * 0 + 0.25 * 100 = 25 */
    const uint8_t sq[4] = {0, 100, 200, 255};
    uint8_t o2[16];
    yc_quad_upsample(sq, 1, 2, 2, o2);
    ck_assert_int_eq(o2[0], 0);
    ck_assert_int_eq(o2[1], 25);
    ck_assert_int_eq(o2[3], 100);
    ck_assert_int_eq(o2[12], 200);
    ck_assert_int_eq(o2[15], 255);
    /* (1, 1) at source (0.25, 0.25): (0 * .75 + 100 * .25) * .75 + (200 * .75 + 255 * .25) * .25
     * = 18.75 + 53.4375 = 72.1875 -> 72 */
    ck_assert_int_eq(o2[5], 72);
}
END_TEST

/* A batch of n images of 1 x 2 pixels (h 1, w 2), image i's pixels all 10 * (i + 1) + channel,
 * one label per image: class i, box (0.25, 0.5, 0.5, 0.2). */
static void make_batch(yc_batch *b, int n, uint8_t *px, float *targets, int *sample,
                       yc_val_info *info)
{
    memset(b, 0, sizeof *b);
    b->n = n;
    b->h = 1;
    b->w = 2;
    b->images = px;
    b->targets = targets;
    b->sample = sample;
    b->info = info;
    for (int i = 0; i < n; i++) {
        for (int k = 0; k < 6; k++)
            px[i * 6 + k] = (uint8_t)(10 * (i + 1) + k / 2);
        float *t = targets + i * 6;
        t[0] = (float)i;
        t[1] = (float)i;
        t[2] = 0.25f;
        t[3] = 0.5f;
        t[4] = 0.5f;
        t[5] = 0.2f;
        sample[i] = 100 + i;
    }
    b->nt = n;
}

START_TEST(test_collate)
{
    /* 9 images: two groups; image 8 and its label are dropped */
    uint8_t px[9 * 6 + 64];
    float targets[9 * 6];
    int sample[9];
    yc_val_info info[9];
    yc_batch b;
    make_batch(&b, 9, px, targets, sample, info);
    /* the draws of the two groups, as yc_quad_collate will see them */
    yc_rng rng, copy;
    yc_rng_seed(&rng, 5, 1);
    copy = rng;
    bool up[2];
    for (int g = 0; g < 2; g++)
        up[g] = yc_rng_uniform(&copy) < 0.5;
    ck_assert_int_eq(yc_quad_collate(&b, &rng), YC_OK);
    ck_assert(b.n == 2 && b.h == 2 && b.w == 4);
    int row = 0;
    for (int g = 0; g < 2; g++) {
        const uint8_t *o = px + g * 3 * 8;
        ck_assert_int_eq(sample[g], 100 + 4 * g);
        for (int c = 0; c < 3; c++)
            for (int y = 0; y < 2; y++)
                for (int x = 0; x < 4; x++) {
                    /* enlarged: a constant image stays constant; tiled: quadrant q holds image
                     * 4g + q, q = (y >= 1) + 2 (x >= 2) */
                    int img = up[g] ? 4 * g : 4 * g + (y >= 1) + 2 * (x >= 2);
                    ck_assert_int_eq(o[c * 8 + y * 4 + x], 10 * (img + 1) + c);
                }
        if (up[g]) {
            const float *t = targets + row * 6;
            ck_assert(t[0] == (float)g && t[1] == (float)(4 * g) && t[2] == 0.25f &&
                      t[3] == 0.5f && t[4] == 0.5f && t[5] == 0.2f);
            row++;
        } else {
            for (int q = 0; q < 4; q++, row++) {
                const float *t = targets + row * 6;
                float x = (0.25f + (q & 2 ? 1.0f : 0.0f)) * 0.5f;
                float y = (0.5f + (q & 1 ? 1.0f : 0.0f)) * 0.5f;
                ck_assert(t[0] == (float)g && t[1] == (float)(4 * g + q));
                ck_assert(t[2] == x && t[3] == y && t[4] == 0.25f && t[5] == 0.1f);
            }
        }
    }
    ck_assert_int_eq(b.nt, row);
    /* both branches occur over seeds */
    int ups = 0, tiles = 0;
    for (int seed = 0; seed < 40; seed++) {
        make_batch(&b, 4, px, targets, sample, info);
        yc_rng_seed(&rng, (uint64_t)seed, 9);
        ck_assert_int_eq(yc_quad_collate(&b, &rng), YC_OK);
        ups += b.nt == 1;
        tiles += b.nt == 4;
    }
    ck_assert(ups > 5 && tiles > 5 && ups + tiles == 40);
    /* fewer than 4 images: one enlarged image, its first's labels */
    make_batch(&b, 2, px, targets, sample, info);
    ck_assert_int_eq(yc_quad_collate(&b, &rng), YC_OK);
    ck_assert(b.n == 1 && b.h == 2 && b.w == 4 && b.nt == 1 && targets[1] == 0.0f);
    ck_assert_int_eq(px[0], 10);
    b.n = 0;
    ck_assert_int_eq(yc_quad_collate(&b, &rng), YC_EUSAGE);
}
END_TEST

static Suite *quad_suite(void)
{
    Suite *s = suite_create("quad");
    TCase *tc = tcase_create("quad");
    tcase_add_test(tc, test_upsample);
    tcase_add_test(tc, test_collate);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return yc_harness_run(quad_suite(), false);
}
