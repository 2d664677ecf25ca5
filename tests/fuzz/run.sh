#!/usr/bin/env bash
# Builds yolocl's fuzz targets with clang's libFuzzer and runs each for a bounded time.
#
#   tests/fuzz/run.sh [-t SECONDS] [-p N] [-o DIR] [-b] [TARGET...]
#
#   TARGET   labels data_yaml model_yaml safetensors pt pickle resume image (default: all), each
#            tests/fuzz/fuzz_<TARGET>.c (its comment says what it feeds to which parser)
#   -t SECS  fuzzing time per target (default 600: libFuzzer's -max_total_time=600)
#   -p N     targets fuzzed at the same time (default 1; each runs -jobs=1, under nice -n 19)
#   -o DIR   work directory (default ${TMPDIR:-/tmp}/yolocl-fuzz): build/ (objects and the
#            fuzz_<TARGET> binaries), corpus/<TARGET>/ (the corpus grown so far: kept between
#            runs), crashes/<TARGET>/ (crash-*, leak-*, timeout-*, oom-* inputs),
#            <TARGET>.log (libFuzzer's output)
#   -b       build only
#   CC=...   the clang to use (default clang; clang 14 is what this was written with)
#
# The build compiles the library sources (src/*/*.c but the command-line layer src/cli/, and
# cpu/*.c; no OpenCL) and the target with
#   -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined
# so any AddressSanitizer or UndefinedBehaviorSanitizer report, leak, abort (the targets abort
# when a parser breaks a promise, e.g. fails without a message), libFuzzer timeout (-timeout=30)
# or allocation over 2 GiB (-rss_limit_mb=2048) stops a target and leaves the input in
# crashes/<TARGET>/.  Each target starts from its seeds (tests/fuzz/seeds/<TARGET>, plus for some
# targets files of tests/data and data/) and from the inputs that once crashed
# (tests/fuzz/regress/<TARGET>).
#
# Reproduce a finding with `DIR/build/fuzz_<TARGET> FILE`, or with the plain build's replay
# program (`tests/fuzz/replay_<TARGET> FILE`, built by make check); once fixed, copy the input
# into tests/fuzz/regress/<TARGET>/ with a name saying what it caught, so that make check replays
# it.  Exit status: 0 when no target found anything, 1 when one did, 2 on a usage or build error.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
all_targets=(labels data_yaml model_yaml safetensors pt pickle resume image)
secs=600
parallel=1
work=${TMPDIR:-/tmp}/yolocl-fuzz
build_only=false
CC=${CC:-clang}

usage() {
    sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2
    exit 2
}

while getopts "t:p:o:bh" opt; do
    case $opt in
    t) secs=$OPTARG ;;
    p) parallel=$OPTARG ;;
    o) work=$OPTARG ;;
    b) build_only=true ;;
    *) usage ;;
    esac
done
shift $((OPTIND - 1))
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=("${all_targets[@]}")
for t in "${targets[@]}"; do
    [ -f "$here/fuzz_$t.c" ] || { echo "run.sh: no target '$t' (tests/fuzz/fuzz_$t.c)" >&2; exit 2; }
done
case $secs$parallel in *[!0-9]*) usage ;; esac

# ---- build -------------------------------------------------------------------------------------
bdir=$work/build
mkdir -p "$bdir/obj"
printf '/* config.h of the fuzz build (tests/fuzz/run.sh): no OpenCL */\n#define PACKAGE_VERSION "fuzz"\n' \
    > "$bdir/config.h"
san="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined"
cflags=(-std=c11 -D_GNU_SOURCE -g -O1 -fno-omit-frame-pointer $san -fopenmp -w
    -I"$bdir" -I"$src/cpu" -I"$src/cl" -I"$here"
    -DYC_PKGDATADIR="\"$src/data\"" -DYC_SRCDATADIR="\"$src/data\""
    $(pkg-config --cflags vips yaml-0.1))
libs=($(pkg-config --libs vips yaml-0.1) -lm -lpthread)
for d in "$src"/src/*/; do cflags+=(-I"${d%/}"); done

sources=()
for f in "$src"/src/*/*.c "$src"/cpu/*.c; do
    case $f in "$src"/src/cli/*) continue ;; esac
    sources+=("$f")
done
# compile what changed (object newer than its source and every header), two at a time
newest_header=$(ls -t "$src"/src/*/*.h "$src"/cpu/*.h "$here"/*.h | head -1)
compile() {
    local f=$1 o
    o=$bdir/obj/$(echo "${f#"$src"/}" | tr / _).o
    if [ ! -e "$o" ] || [ "$f" -nt "$o" ] || [ "$newest_header" -nt "$o" ]; then
        nice -n 19 "$CC" "${cflags[@]}" -c "$f" -o "$o" || return 1
    fi
}
failed=0
pids=()
for f in "${sources[@]}" "$here/fuzz_util.c" "$here/fuzz_weights_common.c"; do
    compile "$f" &
    pids+=($!)
    if [ ${#pids[@]} -ge 2 ]; then
        wait "${pids[0]}" || failed=1
        pids=("${pids[@]:1}")
    fi
done
for p in "${pids[@]}"; do wait "$p" || failed=1; done
[ $failed = 0 ] || { echo "run.sh: build failed" >&2; exit 2; }
rm -f "$bdir/libyolocl-fuzz.a"
ar cr "$bdir/libyolocl-fuzz.a" "$bdir"/obj/src_*.o "$bdir"/obj/cpu_*.o

for t in "${targets[@]}"; do
    extra=()
    case $t in safetensors | pt | pickle) extra=("$bdir/obj/tests_fuzz_fuzz_weights_common.c.o") ;; esac
    nice -n 19 "$CC" "${cflags[@]}" -fsanitize=fuzzer "$here/fuzz_$t.c" \
        "$bdir/obj/tests_fuzz_fuzz_util.c.o" "${extra[@]}" "$bdir/libyolocl-fuzz.a" "${libs[@]}" \
        -o "$bdir/fuzz_$t" || { echo "run.sh: cannot link fuzz_$t" >&2; exit 2; }
done
echo "run.sh: built ${targets[*]} in $bdir"
$build_only && exit 0

# ---- fuzz --------------------------------------------------------------------------------------
# extra seed directories (read only) and the longest input per target
seed_dirs() {
    case $1 in
    model_yaml) echo "$src/data/models $src/tests/data/tiny" ;;
    data_yaml | resume) echo "$src/data/hyps" ;;
    safetensors) echo "$src/tests/data/tiny" ;;
    esac
}
max_len() {
    case $1 in
    labels | data_yaml | model_yaml | resume) echo 16384 ;;
    *) echo 65536 ;;
    esac
}

run_one() {
    local t=$1 dirs=()
    mkdir -p "$work/corpus/$t" "$work/crashes/$t"
    for d in "$here/seeds/$t" "$here/regress/$t" $(seed_dirs "$t"); do
        [ -d "$d" ] && dirs+=("$d")
    done
    local start=$SECONDS rc=0
    (cd "$work/crashes/$t" &&
        nice -n 19 "$bdir/fuzz_$t" -max_total_time="$secs" -jobs=1 -workers=1 -timeout=30 \
            -rss_limit_mb=2048 -max_len="$(max_len "$t")" -print_final_stats=1 \
            -artifact_prefix="$work/crashes/$t/" "$work/corpus/$t" "${dirs[@]}") \
        > "$work/$t.log" 2>&1 || rc=$?
    # with -jobs, libFuzzer writes the run's output to fuzz-0.log in the current directory
    [ -f "$work/crashes/$t/fuzz-0.log" ] && mv -f "$work/crashes/$t/fuzz-0.log" "$work/$t.log"
    local execs
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$work/$t.log" | tail -1 | grep -o '[0-9]*$' || true)
    local found
    found=$(find "$work/crashes/$t" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'leak-*' \
        -o -name 'timeout-*' -o -name 'oom-*' \) | wc -l)
    echo "$t: $((SECONDS - start)) s, ${execs:-?} executions, $found finding(s), exit $rc, log $work/$t.log"
    [ "$found" = 0 ] && [ $rc = 0 ]
}

status=0
pids=()
names=()
for t in "${targets[@]}"; do
    run_one "$t" &
    pids+=($!)
    names+=("$t")
    if [ ${#pids[@]} -ge "$parallel" ]; then
        wait "${pids[0]}" || status=1
        pids=("${pids[@]:1}")
        names=("${names[@]:1}")
    fi
done
for p in "${pids[@]}"; do wait "$p" || status=1; done
exit $status
