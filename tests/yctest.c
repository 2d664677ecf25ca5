/* Test support (see yctest.h). */
#include "yctest.h"

#include <check.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

const char *yc_test_shared_dir(void)
{
    const char *env = getenv("YOLOCL_SHARED_DIR");
    return env && env[0] ? env : YC_SRCDATADIR "/../../shared";
}

const char *yc_test_shared_path(const char *rel, char *buf, size_t len)
{
    snprintf(buf, len, "%s/%s", yc_test_shared_dir(), rel);
    return buf;
}

bool yc_test_have_shared(const char *const *rels, char *missing, size_t len)
{
    char path[2048];
    for (; *rels; rels++)
        if (!yc_file_exists(yc_test_shared_path(*rels, path, sizeof path))) {
            snprintf(missing, len, "%s", path);
            return false;
        }
    return true;
}

static bool env_on(const char *name)
{
    const char *v = getenv(name);
    return v && v[0] && strcmp(v, "0") != 0;
}

bool yc_test_required(yc_test_need need)
{
    return env_on("YOLOCL_REQUIRE_SHARED") ||
           (need == YC_TEST_NEEDS_OPENCL && env_on("YOLOCL_REQUIRE_OPENCL"));
}

/* The variable that makes a skip of `need` fail. */
static const char *require_var(yc_test_need need)
{
    return need == YC_TEST_NEEDS_OPENCL && !env_on("YOLOCL_REQUIRE_SHARED")
               ? "YOLOCL_REQUIRE_OPENCL"
               : "YOLOCL_REQUIRE_SHARED";
}

int yc_test_skip(yc_test_need need, const char *fmt, ...)
{
    char why[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    if (yc_test_required(need)) {
        printf("FAIL: %s (%s=1: every test must run)\n", why, require_var(need));
        fflush(stdout);
        return YC_TEST_HARD_ERROR;
    }
    printf("SKIP: %s\n", why);
    fflush(stdout);
    return YC_TEST_SKIP;
}

void yc_test_part_skipped(yc_test_need need, const char *fmt, ...)
{
    char why[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    if (yc_test_required(need))
        ck_abort_msg("%s (%s=1: every test must run)", why, require_var(need));
    printf("note: %s\n", why);
}

double yc_test_rel_error(const float *a, const float *ref, size_t n)
{
    double diff = 0, scale = 0, amax = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(a[i]) || !isfinite(ref[i]))
            return INFINITY;
        double d = fabs((double)a[i] - ref[i]);
        diff = d > diff ? d : diff;
        scale = fabs((double)ref[i]) > scale ? fabs((double)ref[i]) : scale;
        amax = fabs((double)a[i]) > amax ? fabs((double)a[i]) : amax;
    }
    return scale > 0 ? diff / scale : amax;
}

double yc_test_rel_error_d(const double *a, const double *ref, size_t n)
{
    double diff = 0, scale = 0, amax = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(a[i]) || !isfinite(ref[i]))
            return INFINITY;
        double d = fabs(a[i] - ref[i]);
        diff = d > diff ? d : diff;
        scale = fabs(ref[i]) > scale ? fabs(ref[i]) : scale;
        amax = fabs(a[i]) > amax ? fabs(a[i]) : amax;
    }
    return scale > 0 ? diff / scale : amax;
}

double yc_test_rel_diff(double a, double ref)
{
    if (!isfinite(a) || !isfinite(ref))
        return INFINITY;
    return ref != 0 ? fabs(a - ref) / fabs(ref) : fabs(a - ref);
}

double yc_test_change_error(const float *a, const float *ref, const float *before, size_t n)
{
    double diff = 0, change = 0, scale = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(a[i]) || !isfinite(ref[i]) || !isfinite(before[i]))
            return INFINITY;
        double d = fabs((double)a[i] - ref[i]), c = fabs((double)ref[i] - before[i]);
        diff = d > diff ? d : diff;
        change = c > change ? c : change;
        scale = fabs((double)ref[i]) > scale ? fabs((double)ref[i]) : scale;
    }
    change = fmax(change, YC_TEST_CHANGE_FLOOR * scale);
    if (change > 0)
        return diff / change;
    return diff > 0 ? INFINITY : 0;
}

yc_test_similarity yc_test_similar(const float *a, const float *ref, size_t n)
{
    double dot = 0, na = 0, nr = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(a[i]) || !isfinite(ref[i]))
            return (yc_test_similarity){-INFINITY, INFINITY};
        dot += (double)a[i] * ref[i];
        na += (double)a[i] * a[i];
        nr += (double)ref[i] * ref[i];
    }
    if (na == 0 && nr == 0)
        return (yc_test_similarity){1, 1};
    if (na == 0 || nr == 0)
        return (yc_test_similarity){0, nr == 0 ? INFINITY : 0};
    return (yc_test_similarity){dot / sqrt(na * nr), sqrt(na / nr)};
}
