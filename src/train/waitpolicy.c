/* The OpenMP wait policy chosen by re-execution (see waitpolicy.h). */
#include "waitpolicy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* YOLOCL_OMP_SET: the policy yolocl set ("1": PASSIVE, "spin": ACTIVE); absent when the user's. */
#define MARK "YOLOCL_OMP_SET"

static char **saved_argv;

/* Re-executes with OMP_WAIT_POLICY=policy and YOLOCL_OMP_SET=mark; on failure puts back the
 * variables of the running process (old_policy and old_mark, NULL: unset) and returns. */
static void reexec(const char *policy, const char *mark, const char *old_policy, const char *old_mark)
{
    if (!saved_argv)
        return;
    if (setenv("OMP_WAIT_POLICY", policy, 1) == 0 && setenv(MARK, mark, 1) == 0) {
        fflush(NULL);
        execv("/proc/self/exe", saved_argv);
    }
    if (old_policy)
        setenv("OMP_WAIT_POLICY", old_policy, 1);
    else
        unsetenv("OMP_WAIT_POLICY");
    if (old_mark)
        setenv(MARK, old_mark, 1);
    else
        unsetenv(MARK);
}

void yc_wait_policy_start(char **argv)
{
    saved_argv = argv;
    if (getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT") || getenv(MARK))
        return;
    reexec("PASSIVE", "1", NULL, NULL);
}

bool yc_wait_policy_adjustable(void)
{
    const char *mark = getenv(MARK);
    return mark && strcmp(mark, "1") == 0;
}

void yc_wait_policy_spin(void)
{
    if (yc_wait_policy_adjustable())
        reexec("ACTIVE", "spin", "PASSIVE", "1");
}

bool yc_wait_policy_chosen_spin(void)
{
    const char *mark = getenv(MARK);
    return mark && strcmp(mark, "spin") == 0;
}

const char *yc_wait_policy_name(void)
{
    static char buf[64];
    const char *policy = getenv("OMP_WAIT_POLICY"), *spin = getenv("GOMP_SPINCOUNT");
    if (policy && (strcasecmp(policy, "active") == 0 || strcasecmp(policy, "passive") == 0))
        return strcasecmp(policy, "active") == 0 ? "ACTIVE" : "PASSIVE";
    if (spin) {
        snprintf(buf, sizeof buf, "GOMP_SPINCOUNT=%.40s", spin);
        return buf;
    }
    return "default";
}
