/* The OpenMP wait policy of the yolocl process: what OpenMP threads do between parallel regions
 * when the user sets neither OMP_WAIT_POLICY nor GOMP_SPINCOUNT.
 *
 * libgomp reads the policy once, when it is loaded, so a policy is applied by the process
 * re-executing itself (/proc/self/exe, the same arguments) with OMP_WAIT_POLICY set and
 * YOLOCL_OMP_SET naming the policy yolocl chose; if that fails it runs on with the policy it has.
 *
 *   PASSIVE (every command): idle threads sleep at once.  Training and validation run image
 *   loader threads beside the OpenMP threads, and spinning threads take the cores the loaders
 *   need (a 64x64 training on 2 cores ran 13 times slower spinning; coco128 at 160 px, 10% slower).
 *   ACTIVE (`yolocl bench` on the CPU backend, which runs no loader; `yolocl train` on the CPU
 *   backend when the model costs at least 8 GFLOPs per image, train.c): idle threads spin, so the
 *   next parallel region starts without waking a sleeping thread (on a 2-core virtual machine a
 *   YOLOv5s training step at 640 took 3.3-4.5 s with PASSIVE and 3.0-3.1 s with ACTIVE). */
#ifndef YC_WAITPOLICY_H
#define YC_WAITPOLICY_H

#include <stdbool.h>

/* From main, before anything else: keeps argv for later re-executions and, unless the user chose
 * a policy, re-executes with PASSIVE (returns when that is done or cannot be done). */
void yc_wait_policy_start(char **argv);

/* Whether the current policy is yolocl's PASSIVE, which yc_wait_policy_spin would change (false
 * when the user chose one, or after a change). */
bool yc_wait_policy_adjustable(void);

/* Re-executes with ACTIVE when yc_wait_policy_adjustable (returns otherwise, or when the
 * re-execution fails).  Call it before printing anything or starting threads. */
void yc_wait_policy_spin(void);

/* Whether this process runs with the ACTIVE policy yc_wait_policy_spin chose. */
bool yc_wait_policy_chosen_spin(void);

/* The policy in effect, for reports: "ACTIVE", "PASSIVE", "GOMP_SPINCOUNT=N" or "default". */
const char *yc_wait_policy_name(void);

#endif
