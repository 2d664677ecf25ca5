/* The gradient allreduce alone: `mpirun -np N bench/mpi_allreduce ELEMS [ITERS]` sums ELEMS floats
 * over the N ranks with yc_dist_allreduce_sum_f32 (what yc_dist_allreduce_grads runs on the CPU
 * backend) ITERS times (default 20, after 3 untimed), the ranks lined up by a barrier before
 * each, so that the time is the reduction's and not a slower rank's compute.  An iteration's
 * time is the slowest rank's (a rank may hold its result before the others do theirs: on several
 * hosts rank 0's own time alone came out under the bandwidth bound).  Rank 0 prints the
 * median and the fastest time, the bytes summed, the algorithm bandwidth (bytes / time) and the
 * bus bandwidth (2 (N - 1) / N x bytes / time: what each rank's link carries in a ring, the
 * figure NCCL's tests report).  Every sum is checked.  bench/mpi_bench.sh runs it with the
 * model's gradient count.  First rank 0 prints where each rank runs: its host name and its local
 * rank among the ranks of that machine (MPI_Comm_split_type SHARED, what yolocl picks a rank's
 * device and threads by), one line per rank: bench/mpi_hosts.sh checks them across hosts. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "dist.h"
#include "log.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    if (yc_dist_init(&argc, &argv)) {
        fprintf(stderr, "mpi_allreduce: %s\n", yc_last_error());
        return 1;
    }
    long elems = argc > 1 ? atol(argv[1]) : 0;
    int iters = argc > 2 ? atoi(argv[2]) : 20;
    if (elems < 1 || iters < 1) {
        fprintf(stderr, "usage: mpirun -np N bench/mpi_allreduce ELEMS [ITERS]\n");
        yc_dist_finalize();
        return 2;
    }
    int rank = yc_dist_rank(), n = yc_dist_size();
    /* each rank's line, broadcast by that rank in turn, printed by rank 0 in rank order */
    for (int r = 0; r < n; r++) {
        char line[160] = "", host[64] = "?";
        if (r == rank) {
            if (gethostname(host, sizeof host))
                snprintf(host, sizeof host, "(gethostname failed)");
            host[sizeof host - 1] = 0;
            snprintf(line, sizeof line, "rank %d of %d on host %s: local rank %d of %d", rank, n,
                     host, yc_dist_local_rank(), yc_dist_local_size());
        }
        if (yc_dist_bcast(line, sizeof line, r))
            yc_dist_abort(1, yc_last_error());
        if (rank == 0)
            printf("%s\n", line);
    }
    float *buf = malloc((size_t)elems * sizeof *buf);
    double *t = malloc((size_t)iters * sizeof *t);
    /* every rank's times, each rank filling its row, summed over the ranks to share them */
    float *all = calloc((size_t)n * (size_t)iters, sizeof *all);
    if (!buf || !t || !all)
        yc_dist_abort(1, "out of memory for the buffer to sum");
    int bad = 0;
    for (int it = -3; it < iters; it++) {
        for (long i = 0; i < elems; i++)
            buf[i] = (float)(rank + 1);
        if (yc_dist_barrier())
            yc_dist_abort(1, yc_last_error());
        double t0 = now();
        if (yc_dist_allreduce_sum_f32(buf, (size_t)elems))
            yc_dist_abort(1, yc_last_error());
        if (it >= 0)
            t[it] = now() - t0;
        /* 1 + 2 + ... + n, exact in float for any reasonable n */
        bad += buf[0] != (float)(n * (n + 1) / 2) || buf[elems - 1] != buf[0];
    }
    if (bad)
        yc_dist_abort(1, "a sum over the ranks came out wrong");
    for (int it = 0; it < iters; it++)
        all[(size_t)rank * (size_t)iters + (size_t)it] = (float)t[it];
    if (yc_dist_allreduce_sum_f32(all, (size_t)n * (size_t)iters))
        yc_dist_abort(1, yc_last_error());
    for (int it = 0; it < iters; it++)
        for (int r = 0; r < n; r++)
            if (all[(size_t)r * (size_t)iters + (size_t)it] > t[it])
                t[it] = all[(size_t)r * (size_t)iters + (size_t)it];
    qsort(t, (size_t)iters, sizeof *t, cmp_double);
    double bytes = (double)elems * sizeof(float), med = t[iters / 2];
    if (rank == 0)
        printf("allreduce of %ld floats (%.2f MB) over %d ranks: median %.3f ms, fastest %.3f ms; "
               "algorithm bandwidth %.2f GB/s, bus bandwidth %.2f GB/s (%d iterations)\n", elems,
               bytes / 1e6, n, 1e3 * med, 1e3 * t[0], bytes / med / 1e9,
               2.0 * (n - 1) / n * bytes / med / 1e9, iters);
    free(buf);
    free(t);
    free(all);
    yc_dist_finalize();
    return 0;
}
