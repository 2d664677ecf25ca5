#!/bin/sh
# MPI across machines, emulated: bench/mpi_hosts.sh's checks that take under a minute, on 2
# hosts (network namespaces joined by a bridge, each with its own host name) reached by Open
# MPI's rsh launcher: tests/mpi_dist with one rank per host (the summed gradient against one
# process's accumulation, the optimizer steps, resume, each rank local rank 0 of 1); the local
# ranks with 1 and 2 ranks per host (MPI_Comm_split_type SHARED); the faults across hosts
# (SIGTERM and SIGKILL to the rank on the second host, the second host's link taken down with
# mpirun's TCP retries lowered to 3).  Skipped (77, with the reason) when this machine cannot
# emulate hosts: not root, no iproute2 or network namespaces or UTS namespaces, no Open MPI, a
# yolocl without MPI (CI's container may lack the capabilities).
set -u
# make check runs this in the build directory (./yolocl, tests/mpi_dist, bench/mpi_allreduce);
# in a sanitizer build, full stacks for LeakSanitizer as tests/test_mpi.sh says
if [ -n "${ASAN_OPTIONS:-}" ]; then
    ASAN_OPTIONS="$ASAN_OPTIONS:fast_unwind_on_malloc=0"
    export ASAN_OPTIONS
fi
LOST_RETRIES=3 exec sh "${srcdir:-.}/bench/mpi_hosts.sh" dist local faults
