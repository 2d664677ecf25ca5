/* The test harness, its part in the nn layer: the tiny model (tests/harness.h). */
#include "config.h"

#include "harness.h"

#include <check.h>
#include <stdint.h>

#include "log.h"
#include "modelcfg.h"

yc_model *yc_harness_tiny_model(yc_backend *be, int nc, int seed)
{
    yc_model_cfg *cfg = NULL;
    yc_model *m = NULL;
    ck_assert_msg(yc_model_cfg_load(&cfg, yc_harness_tiny_cfg(), nc) == YC_OK, "%s",
                  yc_last_error());
    ck_assert_msg(yc_model_new(&m, cfg) == YC_OK, "%s", yc_last_error());
    ck_assert_msg(yc_model_alloc(m, be) == YC_OK, "%s", yc_last_error());
    ck_assert_msg(yc_model_init_weights(m, (uint64_t)seed) == YC_OK, "%s", yc_last_error());
    return m;
}

int yc_harness_targets(int batch, float *targets)
{
    int nt = 0;
    for (int b = 0; b < batch; b++)
        for (int k = 0; k <= b % 3; k++) {
            float *r = targets + 6 * nt++;
            r[0] = (float)b;
            r[1] = (float)((b + k) % 4);
            r[2] = 0.2f + 0.1f * (float)k + 0.05f * (float)b;
            r[3] = 0.3f + 0.07f * (float)b;
            r[4] = 0.1f + 0.05f * (float)k;
            r[5] = 0.15f + 0.02f * (float)b;
        }
    return nt;
}
