#!/bin/sh
# ThreadSanitizer run of a short training and a validation (issue 9): the loader threads, the
# libvips decoders and the OpenMP compute threads together.
#
#   bench/tsan.sh [BUILD]
#
# Builds yolocl out of tree in BUILD (default $TMPDIR/yolocl-tsan) with gcc's ThreadSanitizer,
#   configure CFLAGS="-O1 -g -fsanitize=thread" LDFLAGS=-fsanitize=thread && make yolocl
# (SKIP_BUILD=1 uses what BUILD holds), writes the demo dataset (16 training and 8 validation
# images; with YOLOCL_PLAIN, or ./yolocl when run in a normal build directory, since drawing it
# under TSan takes minutes) and runs, each under TSAN_OPTIONS with its reports in a log:
#   1. `train` of the tiny test model (tests/data/tiny) at 64 pixels, batch 4, 2 epochs, 2 loader
#      threads, with plots, and OMP_NUM_THREADS=1: the compute's OpenMP regions run on the
#      calling thread, so the loader threads, libvips and the compute are checked against each
#      other (only the label scan, which asks for its own threads, still has OpenMP pool
#      threads);
#   2. the same training with OMP_NUM_THREADS=2 (without plots: drawing them under TSan is slow);
#   3. `val` of the weights trained in 2, with 2 loader threads and OMP_NUM_THREADS=2.
# Suppressions: bench/tsan-libs.supp (GLib, libvips and the codecs it runs on its worker threads,
# whose futex locks TSan cannot see) and bench/tsan-gomp.supp (libgomp, not built with TSan: its
# barriers are invisible, so every access of its pool threads seems to race); each file says
# what it hides.
# Prints the number of reports of each run (and the first of them) and exits 1 if any run has
# one or fails.  Reports of races with a libgomp pool thread whose earlier access TSan could not
# restore (so that the suppression cannot see its libgomp frame) are counted apart and do not
# fail the run: see bench/tsan-gomp.supp.  Each run takes 10-30 s on 2 cores (the build, about
# 10 minutes).
#
# On kernels whose address-space randomisation TSan's memory layout does not expect (large
# vm.mmap_rnd_bits: "unexpected memory mapping" at start) the runs go through `setarch -R`.
# KEEP=1 keeps the work directory with the reports.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-${TMPDIR:-/tmp}/yolocl-tsan}
jobs=${JOBS:-2}

if [ "${SKIP_BUILD:-0}" != 1 ]; then
    mkdir -p "$build" || exit 1
    if [ ! -f "$build/Makefile" ]; then
        echo "tsan: configuring in $build"
        (cd "$build" && "$here/configure" CFLAGS="-O1 -g -fsanitize=thread" \
            LDFLAGS=-fsanitize=thread >configure.log 2>&1) ||
            { echo "tsan: configure failed: see $build/configure.log" >&2; exit 1; }
    fi
    echo "tsan: building $build/yolocl"
    make -C "$build" -j"$jobs" yolocl >"$build/make.log" 2>&1 ||
        { echo "tsan: build failed: see $build/make.log" >&2; exit 1; }
fi
yolocl=$build/yolocl
[ -x "$yolocl" ] || { echo "tsan: no $yolocl" >&2; exit 1; }
run=
"$yolocl" --version >/dev/null 2>&1 || run="setarch $(uname -m) -R"
$run "$yolocl" --version >/dev/null 2>&1 || { echo "tsan: $yolocl does not start" >&2; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/yolocl-tsan-run.XXXXXX") || exit 1
if [ "${KEEP:-0}" = 1 ]; then
    echo "tsan: work directory $work"
else
    trap 'rm -rf "$work"' EXIT
fi
cat "$here/bench/tsan-libs.supp" "$here/bench/tsan-gomp.supp" >"$work/tsan.supp"
export YOLOCL_DATA_DIR="$here/data" OMP_WAIT_POLICY=PASSIVE
# the dataset is drawn by a normal build when there is one (under TSan drawing takes minutes)
plain=${YOLOCL_PLAIN:-}
[ -z "$plain" ] && [ -x ./yolocl ] && plain=./yolocl
[ -z "$plain" ] && plain="$run $yolocl"
$plain -q demo-data "$work/data" --train 16 --val 8 >/dev/null || exit 1
tiny=$here/tests/data/tiny
train="train --data $work/data/demo.yaml --cfg $tiny/yolov5n-tiny.yaml --weights
    $tiny/weights.safetensors --img 64 --batch 4 --epochs 2 --workers 2 --device cpu
    --noautoanchor --project $work/runs --exist-ok"

status=0
# tsan_run NAME OMP_THREADS ARG...: one run; its reports are counted
tsan_run() {
    name=$1 threads=$2 supp=$work/tsan.supp
    shift 2
    log=$work/$name
    start=$(date +%s)
    # shellcheck disable=SC2086
    # suppress_equal_addresses=0: TSan otherwise checks every racy access against a list of the
    # addresses reported so far, which the suppressed libgomp races grow into the millions;
    # history_size=7: the longest access history, so that the earlier access of a race has its
    # stack (with its libgomp frame, for the suppression) restored
    TSAN_OPTIONS="halt_on_error=0 second_deadlock_stack=1 suppress_equal_addresses=0
        history_size=7 suppressions=$supp log_path=$log" \
        OMP_NUM_THREADS=$threads $run "$yolocl" -q "$@" >"$work/$name.out" 2>&1
    st=$?
    secs=$(($(date +%s) - start))
    # the reports, and those that involve a libgomp pool thread (see tsan-gomp.supp)
    cat "$log".* 2>/dev/null >"$log.all"
    counts=$(awk '/^WARNING: ThreadSanitizer/ { on = 1; gomp = 0 }
                  on && /libgomp\.so/ { gomp = 1 }
                  on && /^SUMMARY: ThreadSanitizer/ { on = 0; n++; g += gomp }
                  END { print n + 0, g + 0 }' "$log.all")
    gomp=${counts#* }
    reports=$((${counts% *} - gomp))
    echo "tsan: $name (OMP_NUM_THREADS=$threads): $reports reports ($gomp more with a libgomp" \
        "pool thread), $secs s"
    if [ "$reports" -gt 0 ]; then
        status=1
        awk '/^WARNING: ThreadSanitizer/ { on = 1; gomp = 0; n = 0 }
             on { text[n++] = $0 }
             on && /libgomp\.so/ { gomp = 1 }
             on && /^SUMMARY: ThreadSanitizer/ {
                 on = 0
                 if (!gomp) for (i = 0; i < n; i++) print text[i]
             }' "$log.all" | head -80
    fi
    # exit status 66: TSan's, when it reported anything (the libgomp reports included)
    if [ "$st" -ne 0 ] && [ "$st" -ne 66 ]; then
        status=1
        tail -5 "$work/$name.out"
    fi
}

# shellcheck disable=SC2086
tsan_run train-omp1 1 $train --name omp1
# shellcheck disable=SC2086
tsan_run train-omp2 2 $train --name omp2 --noplots
tsan_run val 2 val --data "$work/data/demo.yaml" \
    --weights "$work/runs/omp2/weights/best.safetensors" --img 64 --batch 4 --workers 2 \
    --device cpu --project "$work/runs" --name val
[ "$status" -eq 0 ] && echo "tsan: no reports"
exit "$status"
