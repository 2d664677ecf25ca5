#!/bin/sh
# Data-parallel training on MPI: tests/mpi_dist (see its head comment) on 2 ranks of mpirun,
# then `mpirun -np 2 yolocl train` on the demo dataset with the tiny model: it must finish with
# status 0 and leave one run directory with rank 0's results.csv (one row per epoch); a global
# batch the ranks do not divide must be refused naming the numbers; a SIGTERM to one rank must
# stop both and leave rank 0's resumable checkpoint.  Skipped (77) without mpirun or in a build
# without MPI.
set -u
# make check runs this in the build directory, where tests/mpi_dist is built
prog=./tests/mpi_dist
if ! "${YOLOCL:-./yolocl}" --version | grep -q '^MPI: yes'; then
    echo "SKIP: yolocl is built without MPI"
    exit 77
fi
if ! command -v mpirun >/dev/null 2>&1; then
    echo "SKIP: no mpirun (Debian: openmpi-bin)"
    exit 77
fi
# Open MPI: more ranks than cores is allowed only with --oversubscribe, and root only with
# --allow-run-as-root (CI runs as root); MPICH's mpirun needs neither.
flags=
if mpirun --version 2>&1 | grep -q 'Open MPI'; then
    flags=--oversubscribe
    [ "$(id -u)" = 0 ] && flags="$flags --allow-run-as-root"
fi
# In a sanitizer build, full stacks for LeakSanitizer: Open MPI unloads the components whose
# allocations it never frees, so only the MPI entry points further up a stack can name them
# (tests/sanitizers/lsan.supp)
if [ -n "${ASAN_OPTIONS:-}" ]; then
    ASAN_OPTIONS="$ASAN_OPTIONS:fast_unwind_on_malloc=0"
    export ASAN_OPTIONS
fi
# one thread per rank; a hung rank ends the test after 300 s instead of hanging make check
OMP_NUM_THREADS=1 timeout 300 mpirun -np 2 $flags "$prog" || exit 1

yolocl=${YOLOCL:-./yolocl}
data=${YOLOCL_TEST_DATA:-tests/data}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/yolocl-dist.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
fail() {
    echo "FAIL: $*"
    for f in "$tmp"/out "$tmp"/err; do [ -f "$f" ] && { echo "==== $f"; cat "$f"; }; done
    exit 1
}
"$yolocl" demo-data "$tmp/demo" --train 6 --val 2 >/dev/null || fail "demo-data"
train="train --data $tmp/demo/demo.yaml --weights $data/tiny/weights.safetensors
    --cfg $data/tiny/yolov5n-tiny.yaml --device cpu --img 64 --noautoanchor --noplots
    --project $tmp/runs"
# shellcheck disable=SC2086
OMP_NUM_THREADS=1 timeout 300 mpirun -np 2 $flags "$yolocl" $train --epochs 2 --batch 4 \
    --name ddp >"$tmp/out" 2>"$tmp/err" </dev/null || fail "mpirun -np 2 yolocl train: status $?"
[ "$(ls "$tmp/runs")" = ddp ] || fail "run directories: $(ls "$tmp/runs" | tr '\n' ' ')"
rows=$(($(wc -l <"$tmp/runs/ddp/results.csv") - 1))
[ "$rows" = 2 ] || fail "results.csv has $rows rows, not 2 (one per epoch)"
[ -f "$tmp/runs/ddp/weights/best.safetensors" ] || fail "no best.safetensors"
[ "$(grep -c 'epochs completed' "$tmp/out")" = 1 ] || fail "the summary is not printed once"
# shellcheck disable=SC2086
OMP_NUM_THREADS=1 timeout 300 mpirun -np 2 $flags "$yolocl" $train --epochs 1 --batch 3 \
    --name odd >"$tmp/out" 2>"$tmp/err" </dev/null && fail "--batch 3 on 2 ranks was accepted"
grep -q -- "--batch 3 is the global batch and must be a multiple of the 2 ranks" "$tmp/err" ||
    fail "no message naming --batch 3 and the 2 ranks"
# SIGTERM to one rank during the epochs: both stop after the same batch (status 130) and rank 0
# writes the resumable checkpoint
# shellcheck disable=SC2086
OMP_NUM_THREADS=1 timeout 300 mpirun -np 2 $flags "$yolocl" $train --epochs 1000 --batch 4 \
    --name sig >"$tmp/out" 2>"$tmp/err" </dev/null &
job=$!
i=0
# (an epoch's row in results.csv: the ranks are in the epoch loop, their handlers installed)
while [ "$(cat "$tmp/runs/sig/results.csv" 2>/dev/null | wc -l)" -lt 2 ] && [ $i -lt 600 ]; do
    sleep 0.1
    i=$((i + 1))
done
# a rank: a yolocl process of that run (not mpirun's or timeout's command line), from /proc
rank=
for d in /proc/[0-9]*; do
    c=$(tr '\0' ' ' <"$d/cmdline" 2>/dev/null) || continue
    case $c in
    *mpirun* | timeout*) ;;
    *"yolocl train"*"--name sig"*) rank=${d#/proc/} ;;
    esac
done
[ -n "$rank" ] || fail "no rank of the signalled run"
kill -TERM "$rank"
wait $job
status=$?
[ $status = 130 ] || fail "a SIGTERM to rank pid $rank: status $status, not 130"
grep -q "interrupted: saving a resumable checkpoint" "$tmp/out" ||
    fail "rank 0 did not save the interrupted run's checkpoint"
[ "$(grep -c "training interrupted" "$tmp/err")" = 2 ] || fail "not both ranks stopped"
echo "PASS: mpirun -np 2 yolocl train"
