#!/bin/sh
# Data-parallel training on MPI: tests/mpi_dist (see its head comment) on 2 ranks of mpirun,
# then `mpirun -np 2 yolocl train` on the demo dataset with the tiny model: it must finish with
# status 0 and leave one run directory with rank 0's results.csv (one row per epoch), and a
# global batch the ranks do not divide must be refused naming the numbers.  Skipped (77) without
# mpirun or in a build without MPI.
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
echo "PASS: mpirun -np 2 yolocl train"
