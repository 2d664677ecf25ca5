#!/usr/bin/env bash
# yolocl against PyTorch YOLOv5 on the same machine, in one run: the two alternate ROUNDS times
# (a busy or throttling machine slows both alike), each round timing ITERS iterations after one
# warm-up, and the table shows each side's best round.
#
#   bench/cpu_vs_torch.sh [MODEL] [IMG] [BATCH]          (default: yolov5s 640 8)
#   ROUNDS=3 ITERS=3 THREADS=2 YOLOCL=./yolocl PYTHON=/usr/bin/python3 bench/cpu_vs_torch.sh
#
# yolocl: `yolocl bench --json` (forward = inference pass, train = forward, YOLOv5's loss, backward,
# SGD and EMA).  PyTorch: bench/torch_yolov5.py, the v7.0 architecture built from the same yaml
# (its parameter count is checked against yolocl's), torch.set_num_threads(THREADS); its training
# step has a simpler loss (see the script).  Needs Debian's python3-torch and python3-yaml.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
model=${1:-yolov5s}
img=${2:-640}
batch=${3:-8}
rounds=${ROUNDS:-3}
iters=${ITERS:-3}
threads=${THREADS:-2}
yolocl=${YOLOCL:-./yolocl}
python=${PYTHON:-python3}
cfg=$here/../data/models/$model.yaml

[ -x "$yolocl" ] || { echo "cpu_vs_torch.sh: no yolocl binary at $yolocl (set YOLOCL)" >&2; exit 2; }
[ -f "$cfg" ] || { echo "cpu_vs_torch.sh: no model yaml $cfg" >&2; exit 2; }
"$python" -c 'import torch, yaml' 2>/dev/null ||
    { echo "cpu_vs_torch.sh: $python cannot import torch and yaml (apt-get install python3-torch python3-yaml)" >&2; exit 2; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for r in $(seq "$rounds"); do
    OMP_NUM_THREADS=$threads "$yolocl" bench --device cpu --cfg "$cfg" --img "$img" --batch "$batch" \
        --iters "$iters" --json >>"$tmp/yolocl.json"
    OMP_NUM_THREADS=$threads "$python" "$here/torch_yolov5.py" --cfg "$cfg" --img "$img" --batch "$batch" \
        --threads "$threads" --iters "$iters" >>"$tmp/torch.json"
    echo "round $r/$rounds done" >&2
done

"$python" - "$tmp/yolocl.json" "$tmp/torch.json" "$model" "$img" "$batch" "$threads" <<'PY'
import json, sys
yc = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
pt = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
model, img, batch, threads = sys.argv[3:7]
def best(rows, key):
    return min(r[key] for r in rows)
fy, ty = best(yc, "forward_ms_per_image"), best(yc, "train_ms_per_image")
fp, tp = best(pt, "forward_ms_per_image"), best(pt, "train_ms_per_image")
peak = max(r.get("peak_gflops_per_s", 0.0) for r in yc)
print(f"{model} {img}x{img} batch {batch}, {threads} threads, best of {len(yc)} alternating rounds")
print(f"PyTorch {pt[0]['framework']}: {pt[0]['parameters']} parameters")
print(f"{'':24}{'yolocl':>12}{'PyTorch':>12}{'speed-up':>10}")
print(f"{'forward ms/image':24}{fy:12.1f}{fp:12.1f}{fp / fy:9.2f}x")
print(f"{'train ms/image':24}{ty:12.1f}{tp:12.1f}{tp / ty:9.2f}x")
print(f"{'train images/s':24}{1000 / ty:12.2f}{1000 / tp:12.2f}")
if peak:
    gf = max(r["gflops_per_s"] for r in yc)
    print(f"yolocl training step: {gf:.1f} GFLOP/s = {100 * gf / peak:.1f}% of the measured FP32 peak {peak:.1f}")
PY
