/* Support shared by the Check test programs (tests/yctest.c):
 *
 *  - where the PyTorch reference dumps, coco128 and the released weights are ($YOLOCL_SHARED_DIR,
 *    else ../shared beside the source tree);
 *  - skipping: a program that cannot run what it is for without ../shared or an OpenCL device
 *    exits 77, which automake reports as SKIP, never PASS.  Where the whole suite must run
 *    (CI), YOLOCL_REQUIRE_SHARED=1 turns every skip into a failure (exit 99, a hard error) and
 *    YOLOCL_REQUIRE_OPENCL=1 turns a missing OpenCL device into one;
 *  - comparisons of float arrays that no NaN or infinity passes: each returns INFINITY (or, for
 *    the cosine, -INFINITY) when a value on either side is not finite, so `error < tolerance`
 *    and `cosine > bound` fail. */
#ifndef YC_TEST_H
#define YC_TEST_H

#include <stdbool.h>
#include <stddef.h>

#define YC_TEST_SKIP 77
#define YC_TEST_HARD_ERROR 99

/* What a skipped test lacks. */
typedef enum yc_test_need {
    YC_TEST_NEEDS_SHARED, /* ../shared, or a file in it */
    YC_TEST_NEEDS_OPENCL, /* an OpenCL device */
    YC_TEST_NEEDS_OTHER,  /* anything else (a tool, a binary, tests/data) */
} yc_test_need;

/* $YOLOCL_SHARED_DIR, else <source tree>/../shared (whether or not it exists). */
const char *yc_test_shared_dir(void);

/* <shared dir>/rel in buf (truncated to len); returns buf. */
const char *yc_test_shared_path(const char *rel, char *buf, size_t len);

/* Whether every file of the NULL-terminated list (paths relative to the shared dir) exists;
 * otherwise the first missing one, in full, goes to missing. */
bool yc_test_have_shared(const char *const *rels, char *missing, size_t len);

/* Whether a skip for lack of `need` must fail here (YOLOCL_REQUIRE_SHARED=1 for any skip,
 * YOLOCL_REQUIRE_OPENCL=1 for a missing OpenCL device). */
bool yc_test_required(yc_test_need need);

/* The exit status of a program that cannot run its tests: prints "SKIP: <why>" and returns 77,
 * or, where yc_test_required(need), "FAIL: <why> (<variable>=1)" and 99. */
int yc_test_skip(yc_test_need need, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* For a part of a test case that cannot run (the rest of the case passes without it): prints a
 * note, and fails the case (ck_abort) where yc_test_required(need). */
void yc_test_part_skipped(yc_test_need need, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* max|a - ref| / max|ref| (max|a| when ref is all zeros); INFINITY when any value of a or ref is
 * NaN or infinite. */
double yc_test_rel_error(const float *a, const float *ref, size_t n);

/* The same in double. */
double yc_test_rel_error_d(const double *a, const double *ref, size_t n);

/* |a - ref| / |ref| (|a - ref| when ref is 0); INFINITY when a or ref is not finite. */
double yc_test_rel_diff(double a, double ref);

/* The error of a result that changed a value, relative to the change: max|a - ref| /
 * max|ref - before| (for an optimizer step or an average, where max|ref| would hide an error in
 * a small change).  A change smaller than YC_TEST_CHANGE_FLOOR of max|ref| counts as that much:
 * float32 rounds the values themselves to 6e-8 of their size, which would be most of a change of
 * a few units in the last place.  INFINITY when any value is not finite. */
#define YC_TEST_CHANGE_FLOOR 1e-3
double yc_test_change_error(const float *a, const float *ref, const float *before, size_t n);

/* Direction and size of a against ref: cosine of the angle between them and |a| / |ref|.  Both
 * zero: 1 and 1; one zero: cosine 0 and the ratio 0 or INFINITY; any value not finite: cosine
 * -INFINITY and ratio INFINITY. */
typedef struct yc_test_similarity {
    double cosine, norm_ratio;
} yc_test_similarity;
yc_test_similarity yc_test_similar(const float *a, const float *ref, size_t n);

#endif
