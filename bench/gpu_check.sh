#!/usr/bin/env bash
# One command for a GPU machine lent for a few minutes: is yolocl's OpenCL backend right there, how
# fast is it, and how fast is PyTorch YOLOv5 on the same GPU, measured in one run.
#
#   bench/gpu_check.sh --pack [--yolov5 DIR] [--ref]   here, after make: fills .gpu/ (ignored)
#   bench/gpu_check.sh --run [--out DIR]                on the GPU machine, in a copy of the tree
#                                                      holding .gpu/: the checks, then the report
#   bench/gpu_check.sh --quick                         both, small, on this machine's OpenCL
#                                                      device (PoCL): tests the script itself
#
# Packing (--pack) puts into .gpu/pack.tar.xz what the GPU machine lacks: the yolocl binary and the
# test programs test_ops, test_cl, test_cl_ref, test_classify, test_classify_ref, test_segment and
# test_segment_ref, built without FFmpeg and MPI in .gpu/build from a copy of the sources (the
# first pack builds it all: minutes) and stripped, the released yolov5n.pt (../shared/weights),
# every shared library `ldd` lists for them under its soname, except the C library's own (libc,
# libm, libpthread, libdl, librt, libresolv,
# ld-linux) and the compiler's C++ runtime (libstdc++, libgcc_s), which the machine has newer and
# which NVIDIA's OpenCL driver itself loads; coco128 (../shared/data, or --coco DIR); with --ref,
# the three files of ../shared/ref behind test_cl_ref's YOLOv5n@320 golden step and the classifier's
# step of ../shared/ref/cls behind test_classify_ref and the segmentation model's step of
# ../shared/ref/seg/yolov5n-seg-160 behind test_segment_ref (55 MB: together with
# coco128 they pass the device tool's 64 MiB, so they are left out by default); with --yolov5 DIR,
# the Python sources of an Ultralytics YOLOv5 v7.0 checkout for a PyTorch epoch of coco128.
#
# Running (--run) unpacks into a temporary folder, writes /etc/OpenCL/vendors/nvidia.icd when no
# ICD file names NVIDIA's OpenCL library and the machine has libnvidia-opencl.so.1 (or points
# OCL_ICD_VENDORS at a folder of its own where /etc is read-only), then, each step under its own
# time limit and all of them under --budget seconds (default 450; a step that would pass it is
# skipped and reported so):
#   1. yolocl --version, yolocl devices, nvidia-smi;
#   2. tests/test_ops, one test case at a time: every op's forward and backward on the device
#      against the CPU backend;
#   3. tests/test_cl: the golden training step against PyTorch on the device, FP32 and FP16
#      storage, recomputation, the optimizer iteration after it; tests/test_cl_ref: YOLOv5n@320
#      (when packed with --ref; it skips without); tests/test_classify: a classifier's step on the
#      device against the CPU's, and tests/test_classify_ref against PyTorch's (with --ref);
#      tests/test_segment and tests/test_segment_ref: the same for a segmentation model's step;
#      bench/cl_ptx_probe:
#      whether the OpenCL compiler takes PTX inline assembly and tensor-core mma instructions;
#   4. yolocl bench of YOLOv5s at 640, batch 16, FP32 and FP16 storage (--json), and PyTorch's
#      YOLOv5s step on the same GPU (bench/torch_yolov5.py: fp32, tf32 as PyTorch defaults it, amp)
#      with the GPU's measured float32 matrix-product rate;
#   5. one epoch of coco128 at 640 (yolov5s from scratch, batch 16): wall time, peak resident
#      memory, peak GPU memory (nvidia-smi, sampled every 0.2 s);
#   6. batch 32 of step 4, then yolocl bench --profile (batch 16), yolocl tune and the FP16 step
#      again with the tuned tiles (timed, then profiled), then PyTorch YOLOv5 v7.0's own train.py for the same epoch
#      when packed with --yolov5.
# --quick runs the same sequence on YOLOv5n at 128 (batch 2 and 4), PyTorch on the CPU where
# python3 has torch, and a coco128 epoch at 128 (or the demo dataset without coco128).
#
# --steps LIST runs only the named ones of ops (test_ops), golden (test_cl), probe, bench, tune
# (yolocl tune, then the FP16 step again), clblast (the step once more with
# YOLOCL_CL_CONV=clblast), torch, epoch, val (yolocl val of the released YOLOv5n on coco128, plain
# and --augment, and YOLOv5's val.py likewise when packed with --yolov5), yolov5 (all by default); --ops-limit N gives each test case of test_ops N seconds (150), --device D another OpenCL device.
#
# What it writes to --out (default $OUT, else ./gpu_check_out): report.txt (the table printed
# last), log.txt (every step's output), bench.jsonl (yolocl bench --json lines), torch.jsonl
# (bench/torch_yolov5.py's lines).  Exit status: 0 when every step that ran passed, 1 otherwise.
set -u

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
pack_dir=$root/.gpu
mode= quick=0 with_ref=0 yolov5_src= coco_src= out_dir= budget= device=opencl:0
steps=ops,golden,probe,bench,tune,clblast,torch,epoch,val,yolov5 ops_limit=150

usage() {
    sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'
    exit 2
}

while [ $# -gt 0 ]; do
    case $1 in
    --pack) mode=pack ;;
    --run) mode=run ;;
    --quick) quick=1 ;;
    --ref) with_ref=1 ;;
    --yolov5) yolov5_src=$2; shift ;;
    --coco) coco_src=$2; shift ;;
    --out) out_dir=$2; shift ;;
    --budget) budget=$2; shift ;;
    --device) device=$2; shift ;;
    --steps) steps=$2; shift ;;
    --ops-limit) ops_limit=$2; shift ;;
    -h | --help) usage ;;
    *) echo "gpu_check.sh: unknown argument '$1'" >&2; usage ;;
    esac
    shift
done
if [ -z "$mode" ]; then
    if [ "$quick" = 1 ]; then mode=both; else usage; fi
fi

die() { echo "gpu_check.sh: $*" >&2; exit 1; }
want() { case ,$steps, in *,$1,*) return 0 ;; esac; return 1; }

# ---------------------------------------------------------------------------------------------
# --pack: the binaries, their libraries and the data, as one archive in .gpu/
# ---------------------------------------------------------------------------------------------
# The programs of the pack, built from a copy of the sources in .gpu/build configured without
# FFmpeg and MPI: a yolocl with video links some 250 libraries (codecs, filters, devices, 100 MiB
# and more) that no step here uses.  Files are copied when they changed (cp -u), so a second pack
# rebuilds only what changed.
packed_programs="yolocl tests/test_ops tests/test_cl tests/test_cl_ref tests/test_classify tests/test_classify_ref tests/test_segment tests/test_segment_ref bench/cl_ptx_probe"

lean_build() {
    local b=$pack_dir/build
    mkdir -p "$b" || die "mkdir $b failed"
    git -C "$root" ls-files -co --exclude-standard -z | (cd "$root" && xargs -0 cp -u --parents -t "$b") ||
        die "copying the sources to $b failed (is $root a git checkout?)"
    if [ ! -f "$b/config.status" ]; then
        (cd "$b" && autoreconf -fi >/dev/null 2>&1 && ./configure -q --without-ffmpeg --without-mpi) ||
            die "configuring $b failed"
    fi
    # shellcheck disable=SC2086
    (cd "$b" && make -s -j"$(nproc)" $packed_programs >/dev/null) || die "building in $b failed"
}

pack() {
    cd "$root" || die "cannot enter $root"
    lean_build
    local stage t
    stage=$(mktemp -d) || die "mktemp failed"
    mkdir -p "$stage/bin" "$stage/lib" "$stage/data" || die "mkdir in $stage failed"
    for t in $packed_programs; do
        strip -o "$stage/bin/$(basename "$t")" "$pack_dir/build/$t" || die "strip $t failed"
    done
    # every library ldd resolves, under the name it asks for (the soname), but the C library's
    # and the C++ runtime's, which the GPU machine has (newer) and its OpenCL driver needs
    # shellcheck disable=SC2086
    (cd "$pack_dir/build" && ldd $packed_programs) | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | sort -u |
        while read -r name path; do
            case $name in
            libc.so.* | libm.so.* | libpthread.so.* | libdl.so.* | librt.so.* | libresolv.so.* | \
                ld-linux* | libstdc++.so.* | libgcc_s.so.*) continue ;;
            esac
            cp -L "$path" "$stage/lib/$name" || exit 1
        done || die "copying the shared libraries failed"
    local coco=${coco_src:-$root/../shared/data/coco128}
    if [ -d "$coco/images" ]; then
        cp -r "$coco" "$stage/data/coco128" || die "copying $coco failed"
        # the names of ../shared/data/coco128.yaml (YOLOv5's), without its path
        { echo "path: coco128"; echo "train: images/train2017"; echo "val: images/train2017"
          sed -n '/^names:/,$p' "$root/../shared/data/coco128.yaml" 2>/dev/null ||
              echo "nc: 80"; } >"$stage/data/coco128.yaml"
        grep -q '^names:' "$stage/data/coco128.yaml" || die "coco128.yaml: no names (../shared/data/coco128.yaml missing)"
    else
        echo "gpu_check.sh: no coco128 at $coco: the epoch runs on the demo dataset" >&2
    fi
    if [ "$with_ref" = 1 ]; then
        mkdir -p "$stage/shared/ref"
        for f in train_step_io yolov5n_init_state_dict yolov5n_init_grads; do
            cp "$root/../shared/ref/$f.safetensors" "$stage/shared/ref/" || die "--ref: ../shared/ref/$f.safetensors missing"
        done
        cp -r "$root/../shared/ref/cls" "$stage/shared/ref/" || die "--ref: ../shared/ref/cls missing"
        mkdir -p "$stage/shared/ref/seg" &&
            cp -r "$root/../shared/ref/seg/yolov5n-seg-160" "$stage/shared/ref/seg/" ||
            die "--ref: ../shared/ref/seg/yolov5n-seg-160 missing"

    fi
    # the released YOLOv5n for the validation step (4 MB)
    if [ -f "$root/../shared/weights/yolov5n.pt" ]; then
        mkdir -p "$stage/weights" && cp "$root/../shared/weights/yolov5n.pt" "$stage/weights/" ||
            die "copying yolov5n.pt failed"
    fi
    if [ -n "$yolov5_src" ]; then
        [ -f "$yolov5_src/train.py" ] || die "--yolov5 $yolov5_src: no train.py there"
        mkdir -p "$stage/yolov5"
        (cd "$yolov5_src" && tar cf - --exclude=.git --exclude='*.pt' --exclude='*.ipynb' \
            --exclude=tutorial.ipynb --exclude='data/images' train.py val.py export.py requirements.txt \
            models utils data) | (cd "$stage/yolov5" && tar xf -) || die "copying $yolov5_src failed"
    fi
    mkdir -p "$pack_dir" || die "mkdir $pack_dir failed"
    tar -C "$stage" -cf - . | xz -T0 -6 >"$pack_dir/pack.tar.xz" || die "packing failed"
    rm -rf "$stage"
    grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || echo '/.gpu/' >>.git/info/exclude
    local size
    size=$(stat -c %s "$pack_dir/pack.tar.xz")
    echo "gpu_check.sh: packed $pack_dir/pack.tar.xz ($((size / 1048576)) MiB)"
    [ "$size" -lt $((56 * 1048576)) ] ||
        echo "gpu_check.sh: warning: over 56 MiB; with the tree it may pass the device tool's 64 MiB" >&2
}

# ---------------------------------------------------------------------------------------------
# --run: the checks
# ---------------------------------------------------------------------------------------------
W= T0=0 failed=0 report= log=
declare -a rows=()

now() { date +%s.%N; }
elapsed() { awk -v a="$T0" -v b="$(now)" 'BEGIN {printf "%.0f", b - a}'; }

# step NAME LIMIT CMD...: runs CMD under `timeout LIMIT`, output to the log; a row in the report.
# Skipped when the budget has less than LIMIT left.
step() {
    local name=$1 limit=$2
    shift 2
    local used
    : >"$W/last.out"
    used=$(elapsed)
    if [ -n "$budget" ] && [ $((used + limit)) -gt "$budget" ]; then
        rows+=("$(printf '%-34s %-8s %s' "$name" skipped "budget: ${used}s used of ${budget}s")")
        echo "==== $name: skipped (${used}s used of ${budget}s, needs up to ${limit}s)" >>"$log"
        return 0
    fi
    echo "==== $name ($(date -u +%H:%M:%S), limit ${limit}s): $*" >>"$log"
    local t0 rc
    t0=$(now)
    timeout --kill-after=10 "$limit" "$@" >"$W/last.out" 2>&1
    rc=$?
    cat "$W/last.out" >>"$log"
    local secs
    secs=$(awk -v a="$t0" -v b="$(now)" 'BEGIN {printf "%.1f", b - a}')
    local what=pass
    case $rc in
    0) ;;
    77) what=skip ;;
    124 | 137) what=TIMEOUT failed=1 ;;
    *) what="FAIL($rc)" failed=1 ;;
    esac
    rows+=("$(printf '%-34s %-8s %6ss' "$name" "$what" "$secs")")
    echo "==== $name: $what in ${secs}s" >>"$log"
    return $rc
}

note() { rows+=("$*"); echo "$*" >>"$log"; }

# Writes the NVIDIA ICD file when no ICD file names NVIDIA's OpenCL library and the machine has it.
nvidia_icd() {
    grep -qs nvidia /etc/OpenCL/vendors/*.icd && { echo "ICD: $(grep -ls nvidia /etc/OpenCL/vendors/*.icd)"; return; }
    local lib
    lib=$(ldconfig -p 2>/dev/null | awk '/libnvidia-opencl\.so\.1 /{print $NF; exit}')
    [ -n "$lib" ] || lib=$(find /usr/local/nvidia /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/lib /usr/local/cuda* \
        -name 'libnvidia-opencl.so.1' 2>/dev/null | head -n1)
    [ -n "$lib" ] || lib=$(find / -xdev -name 'libnvidia-opencl.so*' 2>/dev/null | head -n1)
    if [ -z "$lib" ]; then
        echo "ICD: no libnvidia-opencl.so found (not an NVIDIA machine, or its driver has no OpenCL)"
        return
    fi
    if mkdir -p /etc/OpenCL/vendors 2>/dev/null && echo "$lib" >/etc/OpenCL/vendors/nvidia.icd 2>/dev/null; then
        echo "ICD: wrote /etc/OpenCL/vendors/nvidia.icd naming $lib"
    else
        mkdir -p "$W/vendors" && echo "$lib" >"$W/vendors/nvidia.icd"
        cp /etc/OpenCL/vendors/*.icd "$W/vendors/" 2>/dev/null
        export OCL_ICD_VENDORS=$W/vendors
        echo "ICD: /etc is read-only; OCL_ICD_VENDORS=$W/vendors naming $lib"
    fi
}

# Samples the GPU's used memory every 0.2 s into FILE until killed (nvidia-smi only).
gpu_mem_sampler() {
    command -v nvidia-smi >/dev/null || return 0
    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 >"$1" 2>/dev/null
}

# python3 -c "$wall_and_rss" CMD...: runs CMD, then prints its wall seconds and the peak resident
# memory of its processes.
wall_and_rss='
import resource, subprocess, sys, time
t = time.time()
rc = subprocess.call(sys.argv[1:])
wall = time.time() - t
rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
print(f"wall {wall:.1f} s, peak resident memory {rss:.0f} MiB, exit status {rc}")
sys.exit(rc)'

# One line of a bench/torch JSON object: the fields the report compares.
summarise_json() {
    python3 - "$1" <<'EOF'
import json, sys
for line in open(sys.argv[1]):
    line = line.strip()
    if not line.startswith("{"):
        continue
    d = json.loads(line)
    who = d.get("framework") or "yolocl " + ("fp16-storage" if d.get("half") else "fp32")
    if d.get("conv"):
        who += " " + d["conv"]
    if d.get("precision"):
        who += " " + d["precision"]
    ex = "".join(f", {k} {v:.0f}" for k, v in d.items() if k.startswith("matmul_"))
    print(f"  {who:<34} {d.get('cfg','').split('/')[-1].removesuffix('.yaml')}@{d.get('img')} b{d.get('batch')}: train {d['train_ms']:.1f} ms/step"
          f" ({d['train_images_per_s']:.1f} img/s), forward {d['forward_ms']:.1f} ms{ex}")
EOF
}

run() {
    cd "$root" || die "cannot enter $root"
    [ -f "$pack_dir/pack.tar.xz" ] || die "$pack_dir/pack.tar.xz not found: run bench/gpu_check.sh --pack first"
    out_dir=${out_dir:-${OUT:-$root/gpu_check_out}}
    mkdir -p "$out_dir" || die "mkdir $out_dir failed"
    report=$out_dir/report.txt log=$out_dir/log.txt
    : >"$log"
    : >"$report.golden"
    : >"$out_dir/bench.jsonl"
    : >"$out_dir/torch.jsonl"
    T0=$(now)
    W=$(mktemp -d "${TMPDIR:-/tmp}/yolocl-gpu.XXXXXX") || die "mktemp failed"
    xz -dc "$pack_dir/pack.tar.xz" | tar -C "$W" -xf - || die "unpacking $pack_dir/pack.tar.xz failed"
    export LD_LIBRARY_PATH=$W/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    export YOLOCL_DATA_DIR=$root/data YOLOCL_TEST_DATA=$root/tests/data YOLOCL_SHARED_DIR=$W/shared
    export XDG_CACHE_HOME=$W/cache PATH=$W/bin:$PATH
    local Y=$W/bin/yolocl
    note "$(nvidia_icd 2>&1)"

    local cfg img batches iters warm tcfg epoch_args torch_dev
    if [ "$quick" = 1 ]; then
        cfg=yolov5n img=128 batches="2 4" iters=2 warm=1 torch_dev=cpu
        epoch_args="--cfg yolov5n --img 128 --batch 8"
    else
        cfg=yolov5s img=640 batches="16 32" iters=5 warm=2 torch_dev=cuda
        epoch_args="--cfg yolov5s --img 640 --batch 16"
        budget=${budget:-450}
    fi
    tcfg=$root/data/models/$cfg.yaml
    local b1=${batches%% *} b2=${batches##* }

    step "yolocl --version" 20 "$Y" --version
    step "yolocl devices" 60 "$Y" devices
    if command -v nvidia-smi >/dev/null; then
        step "nvidia-smi" 20 nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv
    fi
    note "device: $("$Y" devices 2>/dev/null | grep -A1 "^  ${device}:" | head -n1 | sed 's/^ *//')"

    if want ops; then
        # one test case at a time (CK_RUN_CASE), so that the report says which one is slow or
        # fails; on the chosen OpenCL device only (a GPU machine may have PoCL too), 64 op cases
        # per forked test (each fork starts the GPU driver again: 0.5 s)
        local tc dev_index=${device#opencl}
        dev_index=${dev_index#:}
        for tc in finite_differences backend_vs_reference special exp_paths generic_vectors api; do
            step "test_ops $tc" "$ops_limit" env CK_RUN_CASE=$tc YOLOCL_TEST_CASES_PER_FORK=64 \
                YOLOCL_TEST_OPENCL_DEVICE="${dev_index:-0}" "$W/bin/test_ops"
            grep -h 'Checks:' "$W/last.out" | sed "s/^/test_ops $tc: /" >>"$report.golden"
            grep -h ':[EF]:' "$W/last.out" | head -n 10 | sed 's/^/test_ops: /' >>"$report.golden"
        done
    fi
    if want golden; then
        step "test_cl (golden step vs PyTorch)" 120 "$W/bin/test_cl"
        grep -hE 'Checks:|golden|loss total|gradients|skipped' "$W/last.out" | sed 's/^ */test_cl: /' >>"$report.golden"
        step "test_cl_ref (YOLOv5n@320 vs PyTorch)" 120 "$W/bin/test_cl_ref"
        grep -hE 'Checks:|loss total|gradients|SKIP' "$W/last.out" | sed 's/^ */test_cl_ref: /' >>"$report.golden"
        # the classifier's step on the device against the CPU's (and, packed with --ref, PyTorch's)
        step "test_classify (classifier step, training)" 120 "$W/bin/test_classify"
        grep -hE 'Checks:|classifier' "$W/last.out" | sed 's/^ */test_classify: /' >>"$report.golden"
        step "test_classify_ref (yolov5n-cls vs PyTorch)" 120 "$W/bin/test_classify_ref"
        grep -hE 'Checks:|yolov5n-cls|gradients|SKIP' "$W/last.out" | sed 's/^ */test_classify_ref: /' >>"$report.golden"
        # the segmentation model's step: the tiny case against PyTorch's and the CPU's on the
        # device, and (packed with --ref) yolov5n-seg at 160 against PyTorch's
        step "test_segment (segmentation step)" 120 "$W/bin/test_segment"
        grep -hE 'Checks:|segmentation|yolov5n-seg|gradients' "$W/last.out" | sed 's/^ */test_segment: /' >>"$report.golden"
        step "test_segment_ref (yolov5n-seg vs PyTorch)" 120 "$W/bin/test_segment_ref"
        grep -hE 'Checks:|yolov5n-seg|gradients|SKIP' "$W/last.out" | sed 's/^ */test_segment_ref: /' >>"$report.golden"
    fi
    if want probe; then
        step "PTX inline assembly probe" 60 "$W/bin/cl_ptx_probe" "${device#opencl:}"
        grep -hE '^(laneid|mma16|mmatf32|compute units|extensions)|kernels built' "$W/last.out" | sed 's/^/cl_ptx_probe: /' >>"$report.golden"
    fi

    bench() { # bench BATCH [--half] [more args]
        want bench || return 0
        local b=$1; shift
        step "yolocl bench b$b ${1:-}" 90 "$Y" bench --cfg "$cfg" --img "$img" --batch "$b" --device "$device" \
            --iters "$iters" --warmup "$warm" --json "$@"
        grep -h '^{' "$W/last.out" >>"$out_dir/bench.jsonl"
    }
    torch() { # torch BATCH PRECISION [--peak]
        want torch || return 0
        python3 -c 'import torch' 2>/dev/null || { note "pytorch: python3 has no torch: skipped"; return; }
        local b=$1 p=$2; shift 2
        step "pytorch b$b $p" 60 python3 "$here/torch_yolov5.py" --cfg "$tcfg" --img "$img" --batch "$b" \
            --device "$torch_dev" --precision "$p" --threads "$(nproc)" --iters "$iters" --warmup "$warm" "$@"
        grep -h '^{"framework"' "$W/last.out" >>"$out_dir/torch.jsonl"
    }

    bench "$b1"
    bench "$b1" --half
    if [ "$quick" = 1 ]; then
        torch "$b1" fp32
    else
        torch "$b1" fp32 --peak
        torch "$b1" tf32
        torch "$b1" amp
    fi

    # one epoch of coco128 (or of the demo dataset), end to end
    local data
    if [ -f "$W/data/coco128.yaml" ]; then
        # an absolute path: YOLOv5 resolves a relative one against its own folder
        sed -i "s|^path: .*|path: $W/data/coco128|" "$W/data/coco128.yaml"
        data=$W/data/coco128.yaml
    elif want epoch || want yolov5; then
        step "demo dataset" 120 "$Y" demo-data "$W/data/demo" --train 64 --val 16
        data=$W/data/demo/demo.yaml
    fi
    if want epoch; then
        gpu_mem_sampler "$W/gpumem.txt" &
        local sampler=$!
        # shellcheck disable=SC2086
        step "yolocl train 1 epoch" 150 python3 -c "$wall_and_rss" "$Y" train --data "$data" $epoch_args --weights '' --epochs 1 \
            --device "$device" --project "$W/runs" --name epoch --exist-ok --noplots
        kill "$sampler" 2>/dev/null; wait "$sampler" 2>/dev/null
        note "  epoch: $(grep -h '^wall ' "$W/last.out")"
        [ -s "$W/gpumem.txt" ] && note "  epoch: peak GPU memory used $(sort -n "$W/gpumem.txt" | tail -n1) MiB (nvidia-smi, whole GPU)"
        [ -f "$W/runs/epoch/results.csv" ] && { echo "results.csv:"; cat "$W/runs/epoch/results.csv"; } >>"$log"
    fi

    bench "$b2"
    bench "$b2" --half
    if [ "$quick" = 1 ]; then torch "$b2" fp32; else torch "$b2" tf32; torch "$b2" amp; fi
    if want bench; then
        step "yolocl bench --profile b$b1" 90 "$Y" bench --cfg "$cfg" --img "$img" --batch "$b1" --device "$device" \
            --iters 2 --warmup 1 --profile
    fi
    if want tune; then
        # the convolution tiles measured for this device (FP16 storage, as training on OpenCL
        # stores), then the step again with them
        step "yolocl tune b$b1 --half" 150 "$Y" tune --cfg "$cfg" --img "$img" --batch "$b1" \
            --device "$device" --half
        step "yolocl bench b$b1 --half (tuned)" 90 "$Y" bench --cfg "$cfg" --img "$img" \
            --batch "$b1" --device "$device" --iters "$iters" --warmup "$warm" --json --half
        grep -h '^{' "$W/last.out" | sed 's/"half": true/"half": true, "conv": "tuned"/' \
            >>"$out_dir/bench.jsonl"
        step "yolocl bench --profile b$b1 --half (tuned)" 90 "$Y" bench --cfg "$cfg" --img "$img" \
            --batch "$b1" --device "$device" --iters 2 --warmup 1 --profile --half
    fi
    if want clblast; then
        # the earlier convolutions (im2col + CLBlast), side by side with the implicit GEMMs above
        step "yolocl bench b$b1 (CLBlast convolutions)" 90 env YOLOCL_CL_CONV=clblast "$Y" bench \
            --cfg "$cfg" --img "$img" --batch "$b1" --device "$device" --iters "$iters" \
            --warmup "$warm" --json
        grep -h '^{' "$W/last.out" | sed 's/"half": false/"half": false, "conv": "clblast"/' \
            >>"$out_dir/bench.jsonl"
    fi

    if want val && [ "$quick" = 0 ] && [ -f "$W/weights/yolov5n.pt" ] && [ -n "${data:-}" ]; then
        # the released YOLOv5n validated on coco128 at 640, plainly and with test-time
        # augmentation, by yolocl on the device and, packed with --yolov5, by YOLOv5's val.py
        local aug
        for aug in "" --augment; do
            step "yolocl val ${aug:-plain}" 120 "$Y" val --weights "$W/weights/yolov5n.pt" --data "$data" \
                --img 640 --device "$device" --project "$W/runs-val" --exist-ok $aug
            note "  yolocl val ${aug:-plain}: $(grep -hE '^ +all ' "$W/last.out" | head -n1 | tr -s ' ')"
            if [ -d "$W/yolov5" ] && [ "$quick" = 0 ]; then
                step "pytorch val.py ${aug:-plain}" 150 python3 "$here/yolov5_epoch.py" "$W/yolov5" --script val.py \
                    --weights "$W/weights/yolov5n.pt" --data "$data" --img 640 --device 0 \
                    --project "$W/runs-torch-val" --exist-ok $aug
                note "  pytorch val.py ${aug:-plain}: $(grep -hE '^ +all ' "$W/last.out" | head -n1 | tr -s ' ')"
            fi
        done
    fi

    if [ -d "$W/yolov5" ] && [ "$quick" = 0 ] && want yolov5; then
        step "pytorch yolov5 v7.0 train.py 1 epoch" 150 python3 -c "$wall_and_rss" python3 "$here/yolov5_epoch.py" "$W/yolov5" \
            --data "$data" --cfg models/yolov5s.yaml --weights '' --img 640 --batch 16 --epochs 1 --noplots \
            --device 0 --workers 8 --project "$W/runs-torch" --name epoch --exist-ok
        note "  pytorch epoch: $(grep -h '^wall ' "$W/last.out")"
    fi

    {
        echo "gpu_check.sh report ($(date -u +%Y-%m-%dT%H:%MZ), $(uname -n), total $(elapsed) s)"
        printf '%s\n' "${rows[@]}"
        echo "tests on the device:"
        sed 's/^/  /' "$report.golden"
        echo "step times (yolocl bench --json, bench/torch_yolov5.py):"
        summarise_json "$out_dir/bench.jsonl"
        summarise_json "$out_dir/torch.jsonl"
    } >"$report"
    rm -f "$report.golden"
    cat "$report"
    rm -rf "$W"
    return $failed
}

case $mode in
pack) pack ;;
run) run ;;
both) (pack) || exit 1; run ;;
esac
