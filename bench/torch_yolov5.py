#!/usr/bin/env python3
"""PyTorch YOLOv5 (v7.0 architecture) timed the way `yolocl bench` times yolocl, for a side-by-side
comparison on the same machine (bench/cpu_vs_torch.sh runs both, alternating).

    python3 bench/torch_yolov5.py --cfg data/models/yolov5s.yaml --img 640 --batch 8 --threads 2

The model is built from the same model yaml with YOLOv5's parse_model rules (depth and width
multiples, make_divisible(c * width, 8)) and v7.0's modules: Conv (conv without bias, BatchNorm2d
eps 1e-3 momentum 0.03, SiLU), Bottleneck, C3, SPPF, nn.Upsample, Concat and Detect's 1x1 convs.
Its parameter count is printed so that it can be checked against `yolocl info`.

Timed, on a random batch (median and minimum over --iters after --warmup untimed iterations):
  forward: model.eval() under torch.no_grad(), as val.py runs it (without NMS);
  train:   model.train(), forward, a loss, backward, SGD step (lr 0.01, momentum 0.937, Nesterov),
           zero_grad.  The loss is the mean square of every head output: YOLOv5's ComputeLoss
           (target assignment, CIoU, BCE) costs well under 1% of a step at these sizes, and a loss
           on every head output drives backward through the whole network as the real one does.
On a GPU (--device cuda) every timed call ends with torch.cuda.synchronize(), and --precision picks
how PyTorch computes: fp32 (TF32 off everywhere: IEEE float32 convolutions and matrix products),
tf32 (PyTorch's default: cuDNN convolutions in TF32 on tensor cores, matrix products in float32) or
amp (train.py's default on CUDA: autocast to float16 with a GradScaler).  --peak first times an
8192x8192 float32 matrix product (TF32 off, then on) as the device's measured arithmetic ceiling.
cuDNN's benchmark mode stays off, as YOLOv5's train.py leaves it.
Prints one JSON object per line with the fields of `yolocl bench --json` that both have.
"""
import argparse
import contextlib
import json
import math
import statistics
import sys
import time

import torch
import torch.nn as nn
import yaml


def autopad(k):
    return k // 2


class Conv(nn.Module):
    def __init__(self, c1, c2, k=1, s=1, p=None):
        super().__init__()
        self.conv = nn.Conv2d(c1, c2, k, s, autopad(k) if p is None else p, bias=False)
        self.bn = nn.BatchNorm2d(c2, eps=1e-3, momentum=0.03)
        self.act = nn.SiLU()

    def forward(self, x):
        return self.act(self.bn(self.conv(x)))


class Bottleneck(nn.Module):
    def __init__(self, c1, c2, shortcut=True, e=1.0):
        super().__init__()
        c_ = int(c2 * e)
        self.cv1 = Conv(c1, c_, 1, 1)
        self.cv2 = Conv(c_, c2, 3, 1)
        self.add = shortcut and c1 == c2

    def forward(self, x):
        return x + self.cv2(self.cv1(x)) if self.add else self.cv2(self.cv1(x))


class C3(nn.Module):
    def __init__(self, c1, c2, n=1, shortcut=True, e=0.5):
        super().__init__()
        c_ = int(c2 * e)
        self.cv1 = Conv(c1, c_, 1, 1)
        self.cv2 = Conv(c1, c_, 1, 1)
        self.cv3 = Conv(2 * c_, c2, 1)
        self.m = nn.Sequential(*(Bottleneck(c_, c_, shortcut, e=1.0) for _ in range(n)))

    def forward(self, x):
        return self.cv3(torch.cat((self.m(self.cv1(x)), self.cv2(x)), 1))


class SPPF(nn.Module):
    def __init__(self, c1, c2, k=5):
        super().__init__()
        c_ = c1 // 2
        self.cv1 = Conv(c1, c_, 1, 1)
        self.cv2 = Conv(c_ * 4, c2, 1, 1)
        self.m = nn.MaxPool2d(kernel_size=k, stride=1, padding=k // 2)

    def forward(self, x):
        x = self.cv1(x)
        y1 = self.m(x)
        y2 = self.m(y1)
        return self.cv2(torch.cat((x, y1, y2, self.m(y2)), 1))


class Concat(nn.Module):
    def forward(self, x):
        return torch.cat(x, 1)


class Detect(nn.Module):
    def __init__(self, nc, anchors, ch):
        super().__init__()
        self.no = nc + 5
        self.na = len(anchors[0]) // 2
        self.m = nn.ModuleList(nn.Conv2d(x, self.no * self.na, 1) for x in ch)

    def forward(self, x):
        out = []
        for i, conv in enumerate(self.m):
            y = conv(x[i])
            bs, _, ny, nx = y.shape
            out.append(y.view(bs, self.na, self.no, ny, nx).permute(0, 1, 3, 4, 2).contiguous())
        return out


def make_divisible(x, divisor):
    return math.ceil(x / divisor) * divisor


def parse_model(d, ch=3):
    gd, gw, nc, anchors = d["depth_multiple"], d["width_multiple"], d["nc"], d["anchors"]
    no = (len(anchors[0]) // 2) * (nc + 5)
    layers, save, chs = [], [], [ch]
    for i, (f, n, m, args) in enumerate(d["backbone"] + d["head"]):
        n = max(round(n * gd), 1) if n > 1 else n
        if m in ("Conv", "C3", "SPPF"):
            c1, c2 = chs[f], args[0]
            if c2 != no:
                c2 = make_divisible(c2 * gw, 8)
            rest = list(args[1:])
            if m == "Conv":
                mod = Conv(c1, c2, *rest)
            elif m == "SPPF":
                mod = SPPF(c1, c2, *rest)
            else:
                mod = C3(c1, c2, n, *rest)
        elif m == "nn.Upsample":
            mod, c2 = nn.Upsample(scale_factor=args[1], mode=args[2]), chs[f]
        elif m == "Concat":
            mod, c2 = Concat(), sum(chs[x] for x in f)
        elif m == "Detect":
            mod, c2 = Detect(nc, anchors, [chs[x] for x in f]), None
        else:
            raise SystemExit(f"torch_yolov5.py: module {m} of layer {i} is not supported")
        mod.f = f
        save.extend(x % i for x in ([f] if isinstance(f, int) else f) if x != -1)
        layers.append(mod)
        if i == 0:
            chs = []
        chs.append(c2)
    return nn.ModuleList(layers), sorted(set(save))


class Model(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        with open(cfg) as f:
            d = yaml.safe_load(f)
        self.model, self.save = parse_model(d)

    def forward(self, x):
        y = []
        for m in self.model:
            if m.f != -1:
                x = y[m.f] if isinstance(m.f, int) else [x if j == -1 else y[j] for j in m.f]
            x = m(x)
            y.append(x if (len(y) in self.save) else None)
        return x


def timed(fn, warmup, iters, sync):
    for _ in range(warmup):
        fn()
    sync()
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), min(times)


def matmul_peak(device, sync):
    """GFLOP/s of an 8192^3 float32 matrix product with TF32 off and on (the device's ceilings)."""
    n = 8192
    a = torch.rand(n, n, device=device)
    b = torch.rand(n, n, device=device)
    out = {}
    for name, tf32 in (("fp32", False), ("tf32", True)):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        med, _ = timed(lambda: a @ b, 2, 5, sync)
        out[f"matmul_{name}_gflops_per_s"] = 2 * n**3 / med / 1e9
    torch.backends.cuda.matmul.allow_tf32 = False
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cfg", default="data/models/yolov5s.yaml")
    ap.add_argument("--img", type=int, default=640)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--iters", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--device", default="cpu", help="cpu or cuda")
    ap.add_argument("--precision", choices=("fp32", "tf32", "amp"), default="fp32",
                    help="on cuda: fp32 (TF32 off), tf32 (PyTorch's default) or amp (autocast float16)")
    ap.add_argument("--peak", action="store_true", help="also time an 8192^3 float32 matrix product")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    cuda = a.device.startswith("cuda")
    if cuda and not torch.cuda.is_available():
        raise SystemExit("torch_yolov5.py: --device cuda but torch.cuda.is_available() is False")
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    amp = cuda and a.precision == "amp"
    if cuda:
        torch.backends.cudnn.benchmark = False
        torch.backends.cudnn.allow_tf32 = a.precision != "fp32"
        torch.backends.cuda.matmul.allow_tf32 = a.precision == "tf32"
    extra = {}
    if a.peak and cuda:
        extra = matmul_peak(a.device, sync)
        torch.backends.cuda.matmul.allow_tf32 = a.precision == "tf32"
    model = Model(a.cfg).to(a.device)
    nparam = sum(p.numel() for p in model.parameters())
    x = torch.rand(a.batch, 3, a.img, a.img, device=a.device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.937, nesterov=True)
    scaler = torch.amp.GradScaler("cuda", enabled=amp) if cuda else None

    def forward():
        with torch.no_grad(), torch.autocast("cuda", enabled=amp) if cuda else contextlib.nullcontext():
            model(x)

    def train():
        with torch.autocast("cuda", enabled=amp) if cuda else contextlib.nullcontext():
            out = model(x)
            loss = sum(o.float().pow(2).mean() for o in out)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
        opt.zero_grad(set_to_none=True)

    model.eval()
    fwd_med, fwd_min = timed(forward, a.warmup, a.iters, sync)
    model.train()
    tr_med, tr_min = timed(train, a.warmup, a.iters, sync)
    print(json.dumps({
        "framework": f"pytorch {torch.__version__}",
        "device": torch.cuda.get_device_name() if cuda else "cpu",
        "precision": a.precision if cuda else "fp32",
        "cfg": a.cfg, "img": a.img, "batch": a.batch, "threads": torch.get_num_threads(),
        "parameters": nparam,
        "forward_ms": fwd_med * 1e3, "forward_ms_min": fwd_min * 1e3,
        "forward_ms_per_image": fwd_med * 1e3 / a.batch,
        "train_ms": tr_med * 1e3, "train_ms_min": tr_min * 1e3,
        "train_ms_per_image": tr_med * 1e3 / a.batch,
        "train_images_per_s": a.batch / tr_med,
        **extra,
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
