#!/bin/sh
# Data-parallel training on MPI: tests/mpi_dist (see its head comment: gradients, optimizer
# steps, resume) on 2 ranks of mpirun, then `mpirun -np 2 yolocl train` on the demo dataset with
# the tiny model: it must finish with status 0 and leave one run directory with rank 0's
# results.csv (one row per epoch); a global batch the ranks do not divide must be refused naming
# the numbers; a SIGTERM to one rank must stop both and leave rank 0's resumable checkpoint (one
# batch on, world_size 2); resuming that 2-rank run in one process must be refused naming both
# numbers; a classifier trained on 2 ranks must finish likewise, with a global batch the ranks do
# not divide refused; a rank killed with SIGKILL must end the run with a message naming it, and a
# stopped rank (SIGSTOP) must end it after YOLOCL_DIST_TIMEOUT seconds, each within a time bound; a
# segmentation model must train on 2 ranks as a detection model does.  The
# checks of yolocl plan --ranks come first and need no MPI.  Skipped (77) without mpirun or in a
# build without MPI.
set -u
# make check runs this in the build directory, where tests/mpi_dist is built
prog=./tests/mpi_dist
yolocl=${YOLOCL:-./yolocl}
data=${YOLOCL_TEST_DATA:-tests/data}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/yolocl-dist.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
fail() {
    echo "FAIL: $*"
    for f in "$tmp"/out "$tmp"/err; do [ -f "$f" ] && { echo "==== $f"; cat "$f"; }; done
    exit 1
}
# yolocl plan --ranks N (no MPI needed): one rank's plan, batch / N per rank, the CPU's cores
# and memory shared by the ranks of a machine, the devices of a list per local rank
"$yolocl" plan --cfg yolov5n --img 320 --batch 16 --device cpu --ranks 4 --ranks-per-node 2 \
    >"$tmp/out" 2>"$tmp/err" || fail "plan --ranks 4"
grep -q '^YOLOv5n at 320x320, batch 4,' "$tmp/out" || fail "plan --ranks 4: not batch 4 per rank"
grep -q '^one of 4 data-parallel ranks (2 per machine): global batch 16, 4 per rank$' \
    "$tmp/out" || fail "plan --ranks 4: no line about the ranks"
cores=$("$yolocl" devices 2>/dev/null | sed -n 's/^ *cores *\([0-9]*\) physical.*/\1/p')
threads=$((cores / 2))
[ "$threads" -ge 1 ] || threads=1
grep -q "^each rank computes on the CPU with $threads thread" "$tmp/out" ||
    fail "plan --ranks 4: not $threads threads per rank ($cores cores, 2 ranks per machine)"
"$yolocl" plan --cfg yolov5n --batch 16 --device cpu --ranks 4 --ranks-per-node 2 --json \
    >"$tmp/out" 2>"$tmp/err" || fail "plan --ranks 4 --json"
grep -q '"batch": 4,.*"accumulate": 4,.*"ranks": 4, "ranks_per_node": 2, "global_batch": 16' \
    "$tmp/out" || fail "plan --ranks 4 --json: batch 4 per rank, accumulate round(64 / 16)"
"$yolocl" plan --cfg yolov5n --batch 15 --ranks 2 --device cpu >"$tmp/out" 2>"$tmp/err" &&
    fail "plan: --batch 15 on 2 ranks accepted"
grep -q -- "--batch 15 is the global batch and must be a multiple of the 2 ranks" "$tmp/err" ||
    fail "plan: no message naming --batch 15 and the 2 ranks"
"$yolocl" plan --cfg yolov5n --batch 12 --ranks 3 --device opencl:0,1 >"$tmp/out" \
    2>"$tmp/err" && fail "plan: 2 devices listed for 3 ranks accepted"
grep -q -- "--device opencl:0,1 lists 2 devices for the 3 ranks of this machine" "$tmp/err" ||
    fail "plan: no message naming the 2 devices and the 3 ranks"
# the devices of the local ranks, where an OpenCL device opencl:0 is there for local rank 0
if "$yolocl" devices 2>/dev/null | grep -q '^ *opencl:0:'; then
    "$yolocl" plan --cfg yolov5n --img 320 --batch 16 --ranks 2 --device opencl >"$tmp/out" \
        2>"$tmp/err" || fail "plan --ranks 2 --device opencl"
    grep -q '^devices of the local ranks: 0: opencl:0, 1: opencl:1;' "$tmp/out" ||
        fail "plan --ranks 2 --device opencl: not opencl:0 and opencl:1"
    "$yolocl" plan --cfg yolov5n --img 320 --batch 16 --ranks 4 --ranks-per-node 2 \
        --device opencl:0,0 >"$tmp/out" 2>"$tmp/err" || fail "plan --device opencl:0,0"
    grep -q '^devices of the local ranks: 0: opencl:0, 1: opencl:0;' "$tmp/out" ||
        fail "plan --ranks 4 --ranks-per-node 2 --device opencl:0,0: not opencl:0 twice"
fi
echo "PASS: yolocl plan --ranks"
if ! "$yolocl" --version | grep -q '^MPI: yes'; then
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
"$yolocl" demo-data "$tmp/demo" --train 6 --val 2 >/dev/null || fail "demo-data"
# one thread per rank; a hung rank ends the test after 300 s instead of hanging make check
mkdir "$tmp/resume" || exit 1
OMP_NUM_THREADS=1 timeout 300 mpirun -np 2 $flags "$prog" "$tmp/demo/demo.yaml" "$tmp/resume" \
    >"$tmp/out" 2>"$tmp/err" || fail "tests/mpi_dist"
grep '^rank 0:\|^PASS' "$tmp/out"
train="train --data $tmp/demo/demo.yaml --weights $data/tiny/weights.safetensors
    --cfg $data/tiny/yolov5n-tiny.yaml --device cpu --img 64 --noautoanchor --noplots
    --project $tmp/runs"
# shellcheck disable=SC2086
# (OMP_NUM_THREADS not set: each rank takes cores / 2 threads of the CPU backend itself)
timeout 300 mpirun -np 2 $flags "$yolocl" $train --epochs 2 --batch 4 \
    --name ddp >"$tmp/out" 2>"$tmp/err" </dev/null || fail "mpirun -np 2 yolocl train: status $?"
grep -q "^device: cpu (OpenMP, $threads thread" "$tmp/out" ||
    fail "the ranks do not compute with $threads threads each ($cores cores, 2 ranks)"
[ "$(ls "$tmp/runs")" = ddp ] || fail "run directories: $(ls "$tmp/runs" | tr '\n' ' ')"
rows=$(($(wc -l <"$tmp/runs/ddp/results.csv") - 1))
[ "$rows" = 2 ] || fail "results.csv has $rows rows, not 2 (one per epoch)"
[ -f "$tmp/runs/ddp/weights/best.safetensors" ] || fail "no best.safetensors"
[ "$(grep -c 'epochs completed' "$tmp/out")" = 1 ] || fail "the summary is not printed once"
# On an OpenCL device (PoCL here; both ranks on opencl:0): the gradients in buckets of 64 KiB, each
# read into its pinned host buffer from the hook while backward runs and summed when its read has
# landed, must give the results.csv of the sum after backward in one piece (YOLOCL_DIST_OVERLAP=0)
# bit for bit, every read started during backward
if "$yolocl" devices 2>/dev/null | grep -q '^ *opencl:0:'; then
    cltrain=$(echo "$train" | sed 's/--device cpu/--device opencl:0/')
    for o in 1 0; do
        # shellcheck disable=SC2086
        YOLOCL_DIST_BUCKET_MB=0.0625 YOLOCL_DIST_OVERLAP=$o OMP_NUM_THREADS=1 timeout 300 \
            mpirun -np 2 $flags "$yolocl" $cltrain --epochs 2 --batch 4 --name "cl$o" \
            >"$tmp/out" 2>"$tmp/err" </dev/null ||
            fail "mpirun -np 2 yolocl train --device opencl:0, YOLOCL_DIST_OVERLAP=$o: status $?"
        line=$(grep '^data-parallel:' "$tmp/out")
        reads='pinned host buffers: [1-9][0-9]* reads started during backward, 0 after it'
        if [ "$o" = 1 ]; then
            echo "$line" | grep -q "$reads" ||
                fail "OpenCL: the buckets were not read during backward: $line"
            bucketed=$line
        else
            echo "$line" | grep -q 'pinned' && fail "OpenCL, YOLOCL_DIST_OVERLAP=0: buckets: $line"
        fi
    done
    cmp -s "$tmp/runs/cl1/results.csv" "$tmp/runs/cl0/results.csv" ||
        fail "OpenCL: the bucketed sums' results.csv differs from the sum after backward's"
    echo "PASS: OpenCL, the same results.csv with the buckets summed during backward: ${bucketed#*; }"
fi
# --sync-bn: SyncBatchNorm on 2 ranks, said once (rank 0, as train.py's LOGGER); in one process
# it does nothing but warn: results.csv (losses, metrics) is that of the same run without it
# shellcheck disable=SC2086
OMP_NUM_THREADS=1 timeout 300 mpirun -np 2 $flags "$yolocl" $train --epochs 1 --batch 4 \
    --sync-bn --name syncbn >"$tmp/out" 2>"$tmp/err" </dev/null ||
    fail "mpirun -np 2 yolocl train --sync-bn: status $?"
[ "$(grep -c '^Using SyncBatchNorm()$' "$tmp/out")" = 1 ] ||
    fail "--sync-bn on 2 ranks: 'Using SyncBatchNorm()' not printed once"
head -c 65536 "$tmp/runs/syncbn/weights/last.safetensors" | grep -a -q 'sync_bn\\": true' ||
    fail "--sync-bn is not in the checkpoint's options"
for sb in "" --sync-bn; do
    # shellcheck disable=SC2086
    OMP_NUM_THREADS=1 timeout 300 "$yolocl" $train --epochs 1 --batch 4 --seed 3 $sb \
        --name "one$sb" >"$tmp/out" 2>"$tmp/err" </dev/null ||
        fail "yolocl train $sb in one process: status $?"
done
grep -q "warning: --sync-bn does nothing in one process" "$tmp/err" ||
    fail "--sync-bn in one process: no warning"
grep -q "SyncBatchNorm()" "$tmp/out" && fail "--sync-bn in one process said it is used"
cmp -s "$tmp/runs/one/results.csv" "$tmp/runs/one--sync-bn/results.csv" ||
    fail "--sync-bn in one process changed the losses or metrics (results.csv)"
# shellcheck disable=SC2086
OMP_NUM_THREADS=1 timeout 300 mpirun -np 2 $flags "$yolocl" $train --epochs 1 --batch 3 \
    --name odd >"$tmp/out" 2>"$tmp/err" </dev/null && fail "--batch 3 on 2 ranks was accepted"
grep -q -- "--batch 3 is the global batch and must be a multiple of the 2 ranks" "$tmp/err" ||
    fail "no message naming --batch 3 and the 2 ranks"
# a classifier under 2 ranks (classify/train.py's DDP, classify_train.h): one run directory,
# rank 0's results.csv (one row per epoch) and summary; a global batch the ranks do not divide
# is refused naming both numbers
"$yolocl" demo-data "$tmp/cls" --task classify --train 16 --val 4 --crop 32 >/dev/null ||
    fail "demo-data --task classify"
cls="train --data $tmp/cls --cfg yolov5n-cls --img 32 --device cpu --project $tmp/clsruns"
# shellcheck disable=SC2086
OMP_NUM_THREADS=1 timeout 300 mpirun -np 2 $flags "$yolocl" $cls --epochs 2 --batch 8 \
    --name ddp >"$tmp/out" 2>"$tmp/err" </dev/null ||
    fail "mpirun -np 2 yolocl train --cfg yolov5n-cls: status $?"
[ "$(ls "$tmp/clsruns")" = ddp ] || fail "classifier run directories: $(ls "$tmp/clsruns" | tr '\n' ' ')"
rows=$(($(wc -l <"$tmp/clsruns/ddp/results.csv") - 1))
[ "$rows" = 2 ] || fail "the classifier's results.csv has $rows rows, not 2 (one per epoch)"
[ "$(grep -c 'Training complete' "$tmp/out")" = 1 ] || fail "the classifier's summary is not printed once"
# shellcheck disable=SC2086
OMP_NUM_THREADS=1 timeout 300 mpirun -np 2 $flags "$yolocl" $cls --epochs 1 --batch 3 \
    --name odd >"$tmp/out" 2>"$tmp/err" </dev/null && fail "a classifier's --batch 3 on 2 ranks was accepted"
grep -q -- "--batch 3 is the global batch and must be a positive multiple of the 2 ranks" \
    "$tmp/err" || fail "no message naming the classifier's --batch 3 and the 2 ranks"
# the pid of a yolocl rank of the run named $1 of this test (its project is in $tmp: another
# test_mpi.sh may run beside this one), not mpirun's or timeout's command line, the last one
# listed, from /proc
rank_of() {
    r=
    for d in /proc/[0-9]*; do
        c=$(tr '\0' ' ' <"$d/cmdline" 2>/dev/null) || continue
        case $c in
        *mpirun* | timeout*) ;;
        *"yolocl train"*"--project $tmp/runs"*"--name $1 "*) r=${d#/proc/} ;;
        esac
    done
    echo "$r"
}
# waits (at most 60 s) until the run named $1 has written an epoch's row: its ranks are in the
# epoch loop, their signal handlers installed
wait_epoch() {
    i=0
    while [ "$(cat "$tmp/runs/$1/results.csv" 2>/dev/null | wc -l)" -lt 2 ] && [ $i -lt 600 ]; do
        sleep 0.1
        i=$((i + 1))
    done
}
# a segmentation model trains through the same path (segment/train.py's DDP): the tiny
# yolov5n-seg on a small polygon demo, rank 0's results.csv with segment/train.py's 20 columns
"$yolocl" demo-data --task segment "$tmp/segdemo" --train 8 --val 2 >/dev/null ||
    fail "demo-data --task segment"
# shellcheck disable=SC2086
OMP_NUM_THREADS=1 timeout 300 mpirun -np 2 $flags "$yolocl" train --data "$tmp/segdemo/demo.yaml" \
    --cfg "$data/seg/tiny/yolov5n-seg-tiny.yaml" --device cpu --img 64 --noautoanchor --noplots \
    --project "$tmp/runs" --name seg --epochs 2 --batch 4 >"$tmp/out" 2>"$tmp/err" </dev/null ||
    fail "mpirun -np 2 yolocl train --cfg yolov5n-seg-tiny: status $?"
[ "$(head -1 "$tmp/runs/seg/results.csv" | tr ',' '\n' | grep -c .)" = 20 ] &&
    head -1 "$tmp/runs/seg/results.csv" | grep -q 'train/seg_loss' ||
    fail "the segmentation run's results.csv has not segment/train.py's columns"
rows=$(($(wc -l <"$tmp/runs/seg/results.csv") - 1))
[ "$rows" = 2 ] || fail "the segmentation run's results.csv has $rows rows, not 2"
grep -q '^data-parallel: 2 ranks' "$tmp/out" || fail "the segmentation run was not data-parallel"
# SIGTERM to one rank during the epochs: both stop after the same batch (status 130) and rank 0
# writes the resumable checkpoint
# shellcheck disable=SC2086
OMP_NUM_THREADS=1 timeout 300 mpirun -np 2 $flags "$yolocl" $train --epochs 1000 --batch 4 \
    --name sig --exist-ok >"$tmp/out" 2>"$tmp/err" </dev/null &
job=$!
wait_epoch sig
rank=$(rank_of sig)
[ -n "$rank" ] || fail "no rank of the signalled run"
kill -TERM "$rank"
wait $job
status=$?
[ $status = 130 ] || fail "a SIGTERM to rank pid $rank: status $status, not 130"
grep -q "interrupted: saved a resumable checkpoint" "$tmp/out" ||
    fail "rank 0 did not save the interrupted run's checkpoint"
[ "$(grep -c "training interrupted" "$tmp/err")" = 2 ] || fail "not both ranks stopped"
ckpt=$tmp/runs/sig/weights/last.safetensors
head -c 65536 "$ckpt" | grep -a -q '"next_batch":"[1-9]' || fail "the interrupted checkpoint resumes no batch"
head -c 65536 "$ckpt" | grep -a -q 'world_size\\": 2,' || fail "the checkpoint does not say 2 ranks"
# SIGTERM to Open MPI's mpirun itself: mpirun sends the ranks SIGCONT, SIGTERM
# odls_base_sigkill_timeout seconds later and SIGKILL as long after that, and stops reading their
# output, a terminal: rank 0 must save the checkpoint without blocking there. 10 s leaves a
# sanitizer build time to save. timeout --foreground passes the signal to mpirun once (without it
# timeout signals its process group too, and a second signal makes mpirun exit at once, the
# ranks with it, before any checkpoint).
if [ -n "$flags" ]; then
    # shellcheck disable=SC2086
    OMP_NUM_THREADS=1 timeout --foreground 300 mpirun -np 2 $flags --mca odls_base_sigkill_timeout 10 \
        "$yolocl" $train --epochs 1000 --batch 4 --name sigrun --exist-ok \
        >"$tmp/out" 2>"$tmp/err" </dev/null &
    job=$!
    wait_epoch sigrun
    kill -TERM $job
    wait $job
    ckpt=$tmp/runs/sigrun/weights/last.safetensors
    head -c 65536 "$ckpt" | grep -a -q '"next_batch":"[1-9]' ||
        { tail -c 600 "$tmp/out"; cat "$tmp/err"; ls -la "$tmp/runs/sigrun/weights"; fail "a SIGTERM to mpirun: rank 0 saved no interrupted checkpoint"; }
fi
# that 2-rank run resumed in one process: refused, naming both numbers
"$yolocl" train --resume "$tmp/runs/sig" >"$tmp/out" 2>"$tmp/err" </dev/null &&
    fail "a 2-rank run resumed in 1 process"
grep -q "was trained by 2 ranks, this is 1 process.*mpirun -np 2 yolocl train --resume" \
    "$tmp/err" || fail "no message naming the 2 ranks and the 1 process"
# SIGKILL to a rank: mpirun ends the run naming the rank, within the 60 s bound
# shellcheck disable=SC2086
OMP_NUM_THREADS=1 timeout 60 mpirun -np 2 $flags "$yolocl" $train --epochs 1000 --batch 4 \
    --name kill --exist-ok >"$tmp/out" 2>"$tmp/err" </dev/null &
job=$!
wait_epoch kill
rank=$(rank_of kill)
[ -n "$rank" ] || fail "no rank of the run to kill"
kill -KILL "$rank"
wait $job
status=$?
[ $status != 0 ] && [ $status != 124 ] || fail "a rank killed: status $status"
# Open MPI names the rank (on stderr); MPICH 3 "RANK 1 PID ... KILLED BY SIGNAL: 9", MPICH 4.0 only
# the PID and "Killed (signal 9)", on stdout
cat "$tmp/out" "$tmp/err" |
    grep -q -i "rank [01].*signal 9\|rank [01] PID.*KILLED BY SIGNAL: 9\|EXIT STRING: Killed (signal 9)" ||
    fail "no message naming the killed rank (or, MPICH 4, its signal)"
# SIGSTOP to a rank (a hung rank): the other one gives up after YOLOCL_DIST_TIMEOUT (5 s: more
# than a loaded machine's pauses before the stop) and ends the run, within the 60 s bound
# shellcheck disable=SC2086
YOLOCL_DIST_TIMEOUT=5 OMP_NUM_THREADS=1 timeout 60 mpirun -np 2 $flags "$yolocl" $train \
    --epochs 1000 --batch 4 --name hang --exist-ok >"$tmp/out" 2>"$tmp/err" </dev/null &
job=$!
wait_epoch hang
rank=$(rank_of hang)
[ -n "$rank" ] || fail "no rank of the run to stop"
kill -STOP "$rank"
wait $job
status=$?
kill -KILL "$rank" 2>/dev/null
[ $status != 0 ] && [ $status != 124 ] || fail "a rank stopped: status $status"
grep -q "waited 5 s for the other ranks (YOLOCL_DIST_TIMEOUT): one of them has stopped or hangs" \
    "$tmp/err" || fail "no message about the rank that stopped"
echo "PASS: mpirun -np 2 yolocl train"
