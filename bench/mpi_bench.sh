#!/bin/sh
# Data-parallel training on MPI: throughput of 1 process against N ranks of mpirun, and the
# scaling model across machines built from a measured step time (docs/DISTRIBUTED.md).
#
#   bench/mpi_bench.sh [YOLOCL] [DATA.yaml]
#       trains MODEL (yolov5n) at IMG (320), global batch BATCH (16), for EPOCHS (2) epochs on
#       DATA (../shared/data/coco128.yaml, copied to a temporary folder: the label cache is
#       written beside the labels) once per number of ranks in RANKS ("1 2"): 1 as a plain
#       process, more under mpirun -np N; every process computes with one thread and loads with
#       one (THREADS, 1) on the CPU backend.  Prints per run: the images per second of the last
#       epoch (all ranks' images, from the progress line), the wall time, and from rank 0's
#       "data-parallel:" line the gradient allreduces, their bytes each and their mean time in
#       training (waiting for the slower rank included), then the same allreduce alone, the ranks
#       lined up first (bench/mpi_allreduce: make bench/mpi_allreduce).  EXTRA adds options to
#       every run (e.g. EXTRA="--weights yolov5n.pt").  OVERLAP ("1 0") runs each number of ranks
#       above 1 once per value: 1 sums the gradients in buckets while backward runs (the default),
#       0 in one allreduce after it (YOLOCL_DIST_OVERLAP=0); with overlap the allreduce time is
#       what the sum adds after backward (the wait for the buckets still in flight), and the
#       allreduce time hidden is the difference between the two runs' (bucket size:
#       YOLOCL_DIST_BUCKET_MB, default 2).
#
#   bench/mpi_bench.sh --model STEP_MS PARAMS BACKWARD_SHARE
#       prints the model's table: a step of STEP_MS milliseconds per GPU (the batch per GPU fixed)
#       of which BACKWARD_SHARE (0 to 1) is the backward pass, gradients of 4 x PARAMS bytes summed
#       by a ring allreduce, which sends and receives 2 (N - 1) / N x those bytes per rank; for
#       N = 2..64 and links of 10, 25 and 100 Gbit/s, the allreduce time T_ar (bandwidth term
#       alone: the per-message latency, 2 (N - 1) messages, is left out), then the step time and
#       the scaling efficiency (single step / predicted step) without overlap (the allreduce after
#       backward: step + T_ar) and with buckets overlapped with backward: step + max(T_last,
#       T_ar - backward), where T_last = T_ar x (bucket / gradient bytes) is the sum of the last
#       bucket (the first layers' gradients, final when backward ends: it cannot overlap) and
#       T_ar - backward the part of the whole sum past the backward pass; the bucket is
#       YOLOCL_DIST_BUCKET_MB (2 MiB by default, yolocl's own default).
set -u

if [ "${1:-}" = --model ]; then
    [ $# = 4 ] || { echo "usage: bench/mpi_bench.sh --model STEP_MS PARAMS BACKWARD_SHARE" >&2
                    exit 2; }
    awk -v t="$2" -v p="$3" -v f="$4" -v bk="${YOLOCL_DIST_BUCKET_MB:-2}" 'BEGIN {
        g = 4 * p
        bwd = f * t
        last = bk * 1048576 / g
        if (last > 1) last = 1
        printf "step %.1f ms (backward %.1f ms), %d parameters, gradients %.2f MB (%.2f MiB), " \
               "buckets of %g MiB (the last %.1f%% of the sum)\n", t, bwd, p, g / 1e6, g / 1048576,
               bk, 100 * last
        printf "%5s %8s | %-34s | %-34s | %-34s\n", "", "", "10 Gbit/s", "25 Gbit/s",
               "100 Gbit/s"
        printf "%5s %8s |", "ranks", "ring MB"
        for (k = 0; k < 3; k++) printf " %6s %6s %6s %6s %6s |", "ar ms", "step", "eff",
                                        "ovl", "eff"
        printf "\n"
        split("2 4 8 16 32 64", ns, " ")
        split("10 25 100", bw, " ")
        for (i = 1; i <= 6; i++) {
            n = ns[i]
            bytes = 2 * (n - 1) / n * g
            printf "%5d %8.2f |", n, bytes / 1e6
            for (k = 1; k <= 3; k++) {
                ar = bytes * 8 / (bw[k] * 1e9) * 1e3
                step = t + ar
                ovl = t + (ar - bwd > ar * last ? ar - bwd : ar * last)
                printf " %6.1f %6.1f %5.1f%% %6.1f %5.1f%% |", ar, step, 100 * t / step, ovl,
                       100 * t / ovl
            }
            printf "\n"
        }
    }'
    exit 0
fi

yolocl=${1:-./yolocl}
data=${2:-../shared/data/coco128.yaml}
model=${MODEL:-yolov5n}
img=${IMG:-320}
batch=${BATCH:-16}
epochs=${EPOCHS:-2}
ranks=${RANKS:-"1 2"}
threads=${THREADS:-1}
extra=${EXTRA:-}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/yolocl-mpi-bench.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

[ -f "$data" ] || { echo "mpi_bench: no dataset $data" >&2; exit 1; }
# the dataset yaml's folder (path: is relative to it), copied with the yaml
cp -r "$(dirname "$data")/." "$tmp/data" || exit 1
yaml=$tmp/data/$(basename "$data")
flags=
if mpirun --version 2>&1 | grep -q 'Open MPI'; then
    flags=--oversubscribe
    [ "$(id -u)" = 0 ] && flags="$flags --allow-run-as-root"
fi
echo "$("$yolocl" --version | sed -n 's/^MPI: //p'); $(nproc) cores; $model at $img, global" \
    "batch $batch, $epochs epochs, $threads thread(s) per process"
printf '%5s %7s %12s %8s %11s %12s %12s %9s %8s\n' ranks overlap images/s wall_s allreduces \
    MB_each ms_each pct_train buckets
for run in $(for n in $ranks; do
    if [ "$n" -gt 1 ]; then for o in ${OVERLAP:-1 0}; do echo "$n:$o"; done; else echo "$n:-"; fi
done); do
    n=${run%:*} ovl=${run#*:}
    launch=
    [ "$n" -gt 1 ] && launch="mpirun -np $n $flags -x YOLOCL_DIST_OVERLAP=$ovl"
    start=$(date +%s.%N)
    # shellcheck disable=SC2086
    OMP_NUM_THREADS=$threads YOLOCL_DIST_OVERLAP=$ovl $launch "$yolocl" train --data "$yaml" --cfg "$model" \
        --img "$img" --batch "$batch" --epochs "$epochs" --device cpu --threads "$threads" \
        --workers "$threads" --noplots --nosave --noval --noautoanchor --exist-ok \
        --project "$tmp/runs" --name "np$n" $extra >"$tmp/log" 2>&1 </dev/null ||
        { echo "mpi_bench: $n rank(s) failed:" >&2; tail -5 "$tmp/log" >&2; exit 1; }
    end=$(date +%s.%N)
    ips=$(tr '\r' '\n' <"$tmp/log" | sed -n 's/.* \([0-9.]*\) img\/s, elapsed.*/\1/p' | tail -1)
    line=$(grep '^data-parallel:' "$tmp/log")
    count=- mb=- ms=- pct=- buckets=-
    if [ -n "$line" ]; then
        count=$(echo "$line" | sed -n 's/.*, \([0-9]*\) gradient allreduces.*/\1/p')
        bytes=$(echo "$line" | sed -n 's/.* allreduces of \([0-9]*\) bytes.*/\1/p')
        ms=$(echo "$line" | sed -n 's/.* each, \([0-9.]*\) ms each.*/\1/p')
        pct=$(echo "$line" | sed -n 's/.* average, \([0-9.]*\)% of.*/\1/p')
        buckets=$(echo "$line" | sed -n 's/.*; \([0-9]*\) gradient buckets started during.*/\1/p')
        mb=$(awk -v b="$bytes" 'BEGIN { printf "%.2f", b / 1e6 }')
        grep -q "^$n " "$tmp/sizes" 2>/dev/null || echo "$n $bytes" >>"$tmp/sizes"
    fi
    awk -v n="$n" -v o="$ovl" -v i="$ips" -v s="$start" -v e="$end" -v c="$count" -v b="$mb" \
        -v m="$ms" -v p="$pct" -v k="$buckets" 'BEGIN { printf "%5d %7s %12s %8.1f %11s %12s %12s %9s %8s\n",
                             n, o, i, e - s, c, b, m, p, k }'
done
# the allreduce alone for each number of ranks above 1, the ranks lined up by a barrier
[ -f "$tmp/sizes" ] || exit 0
prog=$(dirname "$0")/mpi_allreduce
[ -x "$prog" ] || { echo "mpi_bench: no $prog (make bench/mpi_allreduce)" >&2; exit 1; }
while read -r n bytes; do
    # shellcheck disable=SC2086
    OMP_NUM_THREADS=1 mpirun -np "$n" $flags "$prog" $((bytes / 4)) 50 </dev/null ||
        { echo "mpi_bench: bench/mpi_allreduce on $n ranks failed" >&2; exit 1; }
done <"$tmp/sizes"
