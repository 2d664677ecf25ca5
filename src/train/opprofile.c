/* Per-op times summed by kind and by name (see opprofile.h). */
#include "opprofile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

static void set_row(yc_profile_row *r, const char *name, double seconds, int ops)
{
    snprintf(r->name, sizeof r->name, "%s", name);
    r->seconds = seconds;
    r->ops = ops;
}

static int by_seconds_desc(const void *a, const void *b)
{
    double x = ((const yc_profile_row *)a)->seconds, y = ((const yc_profile_row *)b)->seconds;
    return (x < y) - (x > y);
}

int yc_profile_of_graph(yc_profile *p, const yc_graph *g)
{
    memset(p, 0, sizeof *p);
    const double *sec = yc_graph_op_seconds(g);
    if (!sec)
        return yc_error("internal: profile of a graph that was not profiled");
    const int n = yc_graph_nops(g);
    double kind_sec[YC_OP_COUNT] = {0};
    int kind_ops[YC_OP_COUNT] = {0};
    yc_profile_row *names = yc_calloc((size_t)(n ? n : 1), sizeof *names, "profile rows");
    if (!names)
        return YC_ENOMEM;
    int nnames = 0;
    for (int i = 0; i < n; i++) {
        const yc_op *op = yc_graph_op(g, i);
        kind_sec[op->kind] += sec[i];
        kind_ops[op->kind]++;
        const char *name = op->name ? op->name : "(unnamed)";
        int j = 0;
        while (j < nnames && strncmp(names[j].name, name, sizeof names[j].name - 1) != 0)
            j++;
        if (j == nnames)
            set_row(&names[nnames++], name, 0.0, 0);
        names[j].seconds += sec[i];
        names[j].ops++;
    }
    for (int k = 0; k < YC_OP_COUNT; k++)
        if (kind_ops[k])
            set_row(&p->kinds[p->nkinds++], yc_op_kind_name((yc_op_kind)k), kind_sec[k],
                    kind_ops[k]);
    qsort(names, (size_t)nnames, sizeof *names, by_seconds_desc);
    p->ntop = nnames < YC_PROFILE_TOP ? nnames : YC_PROFILE_TOP;
    memcpy(p->top, names, (size_t)p->ntop * sizeof *names);
    free(names);
    return YC_OK;
}

int yc_profile_add_host(yc_profile *p, const char *name, double seconds)
{
    if (seconds <= 0.0)
        return YC_OK;
    if (p->nkinds == YC_OP_COUNT + YC_PROFILE_EXTRA)
        return yc_error("internal: more than %d host rows in a profile", YC_PROFILE_EXTRA);
    set_row(&p->kinds[p->nkinds++], name, seconds, 0);
    return YC_OK;
}

void yc_profile_finish(yc_profile *p, double total)
{
    p->total = total;
    qsort(p->kinds, (size_t)p->nkinds, sizeof p->kinds[0], by_seconds_desc);
}
