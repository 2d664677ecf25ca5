/* The test harness, its part in the eval layer: the tiny model for inference (tests/harness.h). */
#include "config.h"

#include "harness.h"

#include <check.h>

#include "log.h"
#include "util.h"

void yc_harness_tiny_infer(yc_backend **be, yc_infer_model *im)
{
    const char *w = yc_harness_test_data(YC_HARNESS_TINY_WEIGHTS),
               *cfg = yc_harness_test_data(YC_HARNESS_TINY_CFG);
    ck_assert_msg(yc_file_exists(w) && yc_file_exists(cfg),
                  "%s not found (set YOLOCL_TEST_DATA to the source tree's tests/data)", w);
    yc_harness_cpu(be, 1);
    ck_assert_msg(yc_infer_model_load(im, w, cfg, *be) == YC_OK, "%s", yc_last_error());
}
