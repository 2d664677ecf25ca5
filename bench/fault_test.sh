#!/bin/sh
# Fault test (issue 9): kills `yolocl train` with SIGKILL at random moments, resumes it each time
# and checks that nothing on disk is torn and that the run goes on from its last complete
# checkpoint.
#
#   bench/fault_test.sh [N]        (N kills, default 20; or N=... in the environment)
#   PT=yolov5n.pt bench/fault_test.sh [N]   the same for a fine-tune from an Ultralytics .pt given
#                                           alone (--weights, no --cfg), as YOLOv5 users start
#
# Run it in the build directory after `make bench/fault_kill bench/ckpt_check` (YOLOCL,
# FAULT_KILL and CKPT_CHECK name the programs otherwise).  It writes the demo dataset (32 training
# and 8 validation images), trains yolov5n on it at IMG (160) pixels for EPOCHS (8) epochs with a
# checkpoint every epoch (--save-period 1: best, epochN and last per epoch) once without
# interruption as the reference, then runs the same training under bench/fault_kill N times,
# killing it (in a cycle of five)
#   - twice at a random moment 0-4 s after the run started (a resumed one: after its "Resuming"
#     line),
#   - twice inside a checkpoint write: while the 1st-4th temporary file of the run is in
#     weights/, 0-3 ms after it appeared (a write lasts 20-500 ms, mostly its fsync),
#   - once at the end of the run: 0-500 ms after "epochs completed", in the final stripping of
#     best and last and the final validation,
# and after each kill checks that
#   - every checkpoint in weights/ is whole (bench/ckpt_check: header, every tensor inside the
#     file, every float finite, resume state present) and last.safetensors did not go back,
#   - results.csv has the reference's header, whole lines and epochs 0, 1, ... each once, as far
#     as last.safetensors or one further (a row is written just before its checkpoint),
#   - no temporary file of an earlier killed process is left (a resumed run removes them);
# then resumes (`train --resume RUN`) and checks that it says it continues from the epoch after
# last.safetensors'.  A fresh run starts when the previous one finished (its clock then starts
# once its first last.safetensors exists, so every kill leaves a checkpoint to resume).  After
# the N kills the last run is resumed to the end.  Every finished run must have final checkpoints
# and a results.csv equal to the reference's, byte for byte (training is deterministic).
#
# The runs' output is line-buffered (stdbuf -oL) so that the clocks start when the lines are
# printed.  Prints one line per kill and ends with
#   fault_test: N kills (K inside checkpoint writes, F after the last epoch), N successful
#   resumes, 0 torn checkpoints
# Exits 1 on any failure.  KEEP=1 keeps the work directory (WORK, default a new one under
# $TMPDIR); SEED (1) seeds the kill moments.
set -u
n=${1:-${N:-20}}
yolocl=${YOLOCL:-./yolocl}
killer=${FAULT_KILL:-./bench/fault_kill}
checker=${CKPT_CHECK:-./bench/ckpt_check}
epochs=${EPOCHS:-8}
img=${IMG:-160}
seed=${SEED:-1}

if ! command -v stdbuf >/dev/null 2>&1; then
    echo "fault_test: stdbuf (coreutils) is needed" >&2
    exit 1
fi
for p in "$yolocl" "$killer" "$checker"; do
    if [ ! -x "$p" ]; then
        echo "fault_test: $p is not built (make bench/fault_kill bench/ckpt_check)" >&2
        exit 1
    fi
done
work=${WORK:-$(mktemp -d "${TMPDIR:-/tmp}/yolocl-fault.XXXXXX")} || exit 1
mkdir -p "$work" || exit 1
if [ "${KEEP:-0}" = 1 ]; then
    echo "fault_test: work directory $work"
else
    trap 'rm -rf "$work"' EXIT
fi
trap 'exit 130' INT TERM

failures=0
fail() {
    failures=$((failures + 1))
    echo "fault_test: FAIL: $*"
}

"$yolocl" -q demo-data "$work/data" --train 32 --val 8 >/dev/null || exit 1
if [ -n "${PT:-}" ]; then
    # the model from the .pt alone (no --cfg): resumes take it from their checkpoint
    cp "$PT" "$work/start.pt" || exit 1
    set -- --weights "$work/start.pt"
    model="a fine-tune of $(basename "$PT")"
else
    set -- --cfg yolov5n
    model="yolov5n from scratch"
fi
set -- --data "$work/data/demo.yaml" "$@" --img "$img" --batch 8 --epochs "$epochs" \
    --save-period 1 --noplots --device cpu --workers 2 --project "$work/runs" --exist-ok
echo "fault_test: reference run ($epochs epochs of $model at $img on 32 images)"
"$yolocl" train "$@" --name ref >"$work/ref.log" 2>&1 || { cat "$work/ref.log"; exit 1; }
ref_csv=$work/runs/ref/results.csv
header=$(head -n 1 "$ref_csv")

# epoch_of FILE: the epoch ckpt_check reports (-1 final); empty when the file is bad or missing
epoch_of() {
    "$checker" "$1" 2>/dev/null | sed -n 's/.*: ok: epoch \(-\{0,1\}[0-9]*\),.*/\1/p'
}

torn=0
# check_run DIR KILLED_PID: the state on disk after a kill
check_run() {
    dir=$1
    if ! out=$("$checker" "$dir"/weights/*.safetensors); then
        bad=$(printf '%s\n' "$out" | grep -c ': BAD: ')
        torn=$((torn + bad))
        fail "torn or bad checkpoint: $(printf '%s\n' "$out" | grep ': BAD: ')"
    fi
    for t in "$dir"/weights/*.tmp.* "$dir"/*.tmp.*; do
        [ -e "$t" ] || continue
        case $t in
        *.tmp."$2") ;;
        *) fail "temporary file of an earlier process left: $t" ;;
        esac
    done
    last_epoch=$(epoch_of "$dir/weights/last.safetensors")
    csv=$dir/results.csv
    if [ -z "$last_epoch" ]; then
        fail "no good last.safetensors in $dir"
        return
    fi
    if [ "$last_epoch" -ne -1 ] && [ "$last_epoch" -lt "$prev_epoch" ]; then
        fail "last.safetensors went back from epoch $prev_epoch to $last_epoch"
    fi
    [ "$(head -n 1 "$csv")" = "$header" ] || fail "results.csv header differs: $(head -n 1 "$csv")"
    if [ -s "$csv" ] && [ "$(tail -c 1 "$csv" | od -An -c | tr -d ' ')" != '\n' ]; then
        fail "results.csv ends in a torn line"
    fi
    rows=$(awk -F, 'NR > 1 { if (NF != 14 || $1 + 0 != NR - 2) { print "bad"; exit } n++ }
                    END { print n + 0 }' "$csv")
    if [ "$rows" = bad ]; then
        fail "results.csv rows are torn, missing or repeated: $(cut -c 1-21 "$csv" | tr '\n' ' ')"
        return
    fi
    want=$((last_epoch + 1))
    [ "$last_epoch" -eq -1 ] && want=$epochs
    if [ "$rows" -ne "$want" ] && [ "$rows" -ne $((want + 1)) ]; then
        fail "results.csv has $rows rows, last.safetensors is at epoch $last_epoch"
    fi
    prev_epoch=$last_epoch
}

# check_finished DIR: a run that ended by itself
check_finished() {
    for f in last best; do
        e=$(epoch_of "$1/weights/$f.safetensors")
        [ "$e" = -1 ] || fail "$1/weights/$f.safetensors is not a final checkpoint (epoch '$e')"
    done
    cmp -s "$1/results.csv" "$ref_csv" || fail "$1/results.csv differs from the uninterrupted run's"
    runs_done=$((runs_done + 1))
}

# resumed_from EPOCH LOG: the run in LOG says it continues $dir's last checkpoint at EPOCH
resumed_from() {
    grep -q "Resuming training from $dir/weights/last.safetensors from epoch $1\$" "$2"
}

kills=0 in_write=0 at_end=0 resumes=0 runs_done=0 run=0 i=0
prev_epoch=-1
fresh=yes
while [ "$kills" -lt "$n" ] && [ "$failures" -eq 0 ]; do
    i=$((i + 1))
    # the moment the clock starts: a fresh run's first checkpoint, a resumed run's first line
    if [ "$fresh" = yes ]; then
        run=$((run + 1))
        dir=$work/runs/run$run
        prev_epoch=-1
        clock_opt=--after-file clock_arg=$dir/weights/last.safetensors
    else
        expect=$((prev_epoch + 1))
        clock_opt=--after clock_arg=Resuming
    fi
    case $((i % 5)) in
    0 | 3) mode="--in-write --nth $((1 + (seed + i) % 4)) --delay-us 3000" ;;
    1 | 2) mode="--at 0:4000" ;;
    4) mode="--at 0:500"
       if [ "$fresh" = no ]; then clock_arg="epochs completed"; fi ;;
    esac
    log=$work/kill$i.log
    if [ "$fresh" = yes ]; then
        # shellcheck disable=SC2086
        res=$("$killer" --log "$log" "$clock_opt" "$clock_arg" --dir "$dir/weights" $mode \
            --seed $((seed * 1000 + i)) -- stdbuf -oL "$yolocl" train "$@" --name "run$run")
        kstatus=$?
    else
        # shellcheck disable=SC2086
        res=$("$killer" --log "$log" "$clock_opt" "$clock_arg" --dir "$dir/weights" $mode \
            --seed $((seed * 1000 + i)) -- stdbuf -oL "$yolocl" train --resume "$dir")
        kstatus=$?
        if resumed_from "$expect" "$log"; then
            resumes=$((resumes + 1))
        else
            fail "resume $i did not continue from epoch $expect:" \
                "$(grep -m1 -e Resuming -e error "$log")"
        fi
    fi
    fresh=no
    case $kstatus in
    0)
        kills=$((kills + 1))
        case $res in *"during the write"*) in_write=$((in_write + 1)) ;; esac
        pid=$(printf '%s\n' "$res" | sed -n 's/^killed \([0-9]*\) .*/\1/p')
        check_run "$dir" "$pid"
        # killed after the last epoch: in the final stripping, validation and plots
        if [ "$last_epoch" = -1 ] || [ "$last_epoch" = $((epochs - 1)) ]; then
            at_end=$((at_end + 1))
        fi
        echo "kill $kills: run$run, $res; last.safetensors at epoch $last_epoch"
        if [ "$last_epoch" = -1 ]; then
            # killed after the final checkpoint was in place: the run is complete
            check_finished "$dir"
            "$yolocl" train --resume "$dir" >"$work/done$i.log" 2>&1
            st=$?
            if [ "$st" -eq 2 ] && grep -q "nothing to resume" "$work/done$i.log"; then
                resumes=$((resumes + 1))
                echo "  the run was complete: --resume says there is nothing to resume"
            else
                fail "resuming a finished run: exit $st: $(tail -n 1 "$work/done$i.log")"
            fi
            fresh=yes
        fi
        ;;
    10)
        case $res in
        "exited with status 0 "*)
            check_finished "$dir"
            echo "run$run finished before its kill ($res)"
            fresh=yes
            ;;
        *) fail "run$run: $res: $(grep -m1 'error' "$log")" ;;
        esac
        ;;
    *) fail "fault_kill: $res" ;;
    esac
done

if [ "$failures" -eq 0 ] && [ "$fresh" = no ]; then
    expect=$((prev_epoch + 1))
    "$yolocl" train --resume "$dir" >"$work/final.log" 2>&1
    st=$?
    if [ "$st" -eq 0 ] && resumed_from "$expect" "$work/final.log"; then
        resumes=$((resumes + 1))
        check_finished "$dir"
        echo "run$run resumed from epoch $expect to the end"
    else
        fail "the final resume: exit $st: $(grep -m1 -e error -e Resuming "$work/final.log")"
    fi
fi
echo "fault_test: $runs_done runs finished, each with results.csv equal to the uninterrupted run's"
echo "fault_test: $kills kills ($in_write inside checkpoint writes, $at_end after the last epoch)," \
    "$resumes successful resumes, $torn torn checkpoints"
[ "$failures" -eq 0 ] && [ "$kills" -ge "$n" ] && [ "$resumes" -eq "$kills" ] && [ "$torn" -eq 0 ]
