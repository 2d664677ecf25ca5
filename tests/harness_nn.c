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
