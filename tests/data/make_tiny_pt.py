#!/usr/bin/env python3
"""Writes tiny/yolov5n-tiny.pt: an Ultralytics YOLOv5 v7.0 checkpoint of the tiny model, as
train.py's strip_optimizer leaves one (a pickled DetectionModel in float16 under 'model', no
optimizer, epoch -1), holding the weights of tiny/weights.safetensors.  The tests fine-tune from it
with --weights alone, as users do with yolov5n.pt.

    python3 tests/data/make_tiny_pt.py YOLOV5_DIR

YOLOV5_DIR is a checkout of Ultralytics YOLOv5 v7.0 (the pickle refers to its classes by module
path, models.yolo.DetectionModel and so on); needs PyTorch and safetensors' file format only
(read here without the safetensors package)."""
import json
import os
import struct
import sys

import torch


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = {"F32": torch.float32, "I64": torch.int64}[info["dtype"]]
        a, b = info["data_offsets"]
        t = torch.frombuffer(bytearray(data[a:b]), dtype=dtype)
        out[name] = t.reshape(info["shape"]) if info["shape"] else t.reshape(())
    return out


def main():
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.abspath(sys.argv[1]))
    from models.yolo import DetectionModel  # noqa: E402  (YOLOv5 v7.0)

    model = DetectionModel(os.path.join(here, "tiny", "yolov5n-tiny.yaml"), ch=3, nc=3)
    sd = read_safetensors(os.path.join(here, "tiny", "weights.safetensors"))
    state = model.state_dict()
    for k in state:
        assert k in sd, f"{k} missing from weights.safetensors"
        state[k] = sd[k].to(state[k].dtype).reshape(state[k].shape)
    model.load_state_dict(state)
    model.names = {0: "zero", 1: "one", 2: "two"}
    ckpt = {"epoch": -1, "best_fitness": None, "model": model.half(), "ema": None, "updates": None,
            "optimizer": None, "opt": None, "git": None, "date": "2026-11-27T00:00:00"}
    torch.save(ckpt, os.path.join(here, "tiny", "yolov5n-tiny.pt"))


if __name__ == "__main__":
    main()
