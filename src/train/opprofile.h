/* A schedule's per-op times (yc_graph_set_profiling) summed by op kind and by op name, with the
 * host work between the ops added as rows of their own, for yolocl bench --profile. */
#ifndef YC_OPPROFILE_H
#define YC_OPPROFILE_H

#include "backend.h"
#include "graph.h"

/* Rows kept by op name (the largest). */
#define YC_PROFILE_TOP 10
/* Rows by kind: every op kind plus YC_PROFILE_EXTRA host rows. */
#define YC_PROFILE_EXTRA 4
/* Bytes of a row's name, NUL included (the graph's op names are shorter). */
#define YC_PROFILE_NAME 96

typedef struct yc_profile_row {
    /* op kind name ("conv2d_bwd_filter"), op name ("model.2.m.0.cv1") or host row ("loss") */
    char name[YC_PROFILE_NAME];
    /* seconds summed over the profiled runs */
    double seconds;
    /* ops of the schedule counted in this row (0 for host rows) */
    int ops;
} yc_profile_row;

typedef struct yc_profile {
    /* seconds the rows are shares of: the whole timed work (ops, host rows and anything between) */
    double total;
    /* by op kind and host row, largest first */
    int nkinds;
    yc_profile_row kinds[YC_OP_COUNT + YC_PROFILE_EXTRA];
    /* the YC_PROFILE_TOP op names with the most time (all kinds of ops under that name), largest
     * first */
    int ntop;
    yc_profile_row top[YC_PROFILE_TOP];
} yc_profile;

/* The profile of one profiled graph (yc_graph_op_seconds): its op times by kind and by name,
 * no host rows, total 0.  YC_ERR when the graph was never profiled, YC_ENOMEM. */
int yc_profile_of_graph(yc_profile *p, const yc_graph *g);

/* Adds a host row to the kinds ("loss", "optimizer"): at most YC_PROFILE_EXTRA of them (YC_ERR
 * beyond).  Rows of no time (<= 0) are left out. */
int yc_profile_add_host(yc_profile *p, const char *name, double seconds);

/* Sets the total and sorts the rows, largest first. */
void yc_profile_finish(yc_profile *p, double total);

#endif
