#!/usr/bin/env python3
"""Writes tests/data/tiny/update.safetensors: what one training iteration of Ultralytics YOLOv5 v7.0
does to the tiny fixture's model after the gradients that grads.safetensors holds.

    /usr/bin/python3 tests/data/make_tiny_update.py --yolov5 /path/to/yolov5-v7.0 [--out FILE]

Needs PyTorch (made with Debian's python3-torch 1.13.1, CPU, 2 threads) and a checkout of YOLOv5
v7.0 (tag commit 915bbf2), whose Model, ComputeLoss, smart_optimizer and ModelEMA it runs.  It
starts from tests/data/tiny/weights.safetensors and batch.safetensors, repeats the step of
expected.safetensors and grads.safetensors (and checks that it does: the same loss and gradients),
then runs what train.py runs after backward() when it is time for an optimizer step:

  - warmup at global batch ni = 40 of nw = 100 (epoch 0, lf = 1): every group's lr and momentum
    from np.interp as train.py sets them (bias lr 0.1 -> lr0, the others 0 -> lr0; momentum
    0.8 -> 0.937);
  - smart_optimizer's SGD (Nesterov) with hyp.scratch-low's lr0 0.01, momentum 0.937 and weight
    decay 0.0005 * batch 2 * accumulate 32 / nbs 64;
  - clip_grad_norm_ and optimizer.step(), with max_norm 5.0 in place of train.py's 10.0: this
    batch's gradient norm is 9.60, and at 5.0 the clipping takes part (it scales by 0.521);
  - ModelEMA.update() on an EMA made from the weights before the step whose update count is 1999
    (as a resumed run's), so that this update has decay 0.9999 (1 - exp(-2000 / 2000)) = 0.632
    and both sides of the average count.

The file holds the model's state dict after the iteration under YOLOv5's names (parameters after
the SGD step, BatchNorm running statistics after the step's train-mode forward: momentum 0.03,
unbiased variance, num_batches_tracked 2) and the EMA's state dict under "ema." + name, with the
settings above and the gradient norm in its metadata.
"""
import argparse
import json
import math
import os
import struct
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
TINY = os.path.join(HERE, 'tiny')

NI, NW = 40, 100
BATCH, NBS = 2, 64
MAX_NORM = 5.0
EMA_UPDATES_BEFORE = 1999
EPOCHS = 300  # train.py's default; at epoch 0 the schedule factor is 1 whatever it is

DTYPES = {'F32': (np.float32, torch.float32), 'I64': (np.int64, torch.int64)}


def st_read(path):
    """A safetensors file as {name: tensor}."""
    with open(path, 'rb') as f:
        n = struct.unpack('<Q', f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == '__metadata__':
            continue
        b, e = info['data_offsets']
        arr = np.frombuffer(data[b:e], dtype=DTYPES[info['dtype']][0]).reshape(info['shape'])
        out[name] = torch.from_numpy(arr.copy())
    return out


def st_write(path, tensors, metadata):
    """{name: tensor} (float32 or int64) to a safetensors file, names in the given order."""
    header, blobs, off = {'__metadata__': metadata}, [], 0
    for name, t in tensors.items():
        t = t.detach().contiguous()
        code = 'F32' if t.dtype == torch.float32 else 'I64'
        raw = t.numpy().astype(DTYPES[code][0]).tobytes()
        header[name] = {'dtype': code, 'shape': list(t.shape), 'data_offsets': [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header, separators=(',', ':')).encode()
    h += b' ' * (-len(h) % 8)
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(h)) + h + b''.join(blobs))
    back = st_read(path)
    for name, t in tensors.items():
        assert torch.equal(back[name], t.detach().to(back[name].dtype)), name


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--yolov5', required=True, help='a YOLOv5 v7.0 checkout')
    ap.add_argument('--out', default=os.path.join(TINY, 'update.safetensors'))
    a = ap.parse_args()
    sys.path.insert(0, os.path.abspath(a.yolov5))
    import yaml
    from models.yolo import Model
    from utils.loss import ComputeLoss
    from utils.torch_utils import ModelEMA, smart_optimizer

    torch.set_num_threads(2)
    model = Model(os.path.join(TINY, 'yolov5n-tiny.yaml'), ch=3, nc=3)
    weights = st_read(os.path.join(TINY, 'weights.safetensors'))
    model.load_state_dict(weights, strict=True)
    batch = st_read(os.path.join(TINY, 'batch.safetensors'))
    images, targets = batch['images'], batch['targets']
    imgsz = images.shape[-1]

    with open(os.path.join(a.yolov5, 'data', 'hyps', 'hyp.scratch-low.yaml')) as f:
        hyp = yaml.safe_load(f)
    nl, nc = model.model[-1].nl, 3
    # train.py: scale the loss gains to the layers, classes and image size; weight decay to the
    # nominal batch
    hyp['box'] *= 3 / nl
    hyp['cls'] *= nc / 80 * 3 / nl
    hyp['obj'] *= (imgsz / 640) ** 2 * 3 / nl
    hyp['label_smoothing'] = 0.0
    accumulate = max(round(NBS / BATCH), 1)
    hyp['weight_decay'] *= BATCH * accumulate / NBS
    model.nc, model.hyp = nc, hyp

    ema = ModelEMA(model)
    ema.updates = EMA_UPDATES_BEFORE
    optimizer = smart_optimizer(model, 'SGD', hyp['lr0'], hyp['momentum'], hyp['weight_decay'])
    lf = lambda x: (1 - x / EPOCHS) * (1.0 - hyp["lrf"]) + hyp["lrf"]  # train.py's linear schedule
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda=lf)  # sets initial_lr
    epoch = 0

    model.train()
    compute_loss = ComputeLoss(model)
    pred = model(images)
    loss, items = compute_loss(pred, targets)
    loss.backward()

    # the step is the fixture's own
    expected = st_read(os.path.join(TINY, 'expected.safetensors'))['loss']
    got = torch.cat([loss.detach(), items.detach()])
    print('loss', got.tolist(), 'fixture', expected.tolist())
    assert torch.allclose(got, expected, rtol=1e-6, atol=0), 'the step differs from expected.safetensors'
    ref_grads = st_read(os.path.join(TINY, 'grads.safetensors'))
    worst = 0.0
    for name, p in model.named_parameters():
        r = ref_grads[name]
        worst = max(worst, float((p.grad - r).abs().max() / r.abs().max().clamp_min(1e-30)))
    print(f'gradients against grads.safetensors: worst relative difference {worst:.2e}')
    assert worst < 1e-5, 'the gradients differ from grads.safetensors'

    # train.py's warmup for global batch ni (before the optimizer step of that batch)
    xi = [0, NW]
    for j, x in enumerate(optimizer.param_groups):
        x['lr'] = np.interp(NI, xi, [hyp['warmup_bias_lr'] if j == 0 else 0.0, x['initial_lr'] * lf(epoch)])
        if 'momentum' in x:
            x['momentum'] = np.interp(NI, xi, [hyp['warmup_momentum'], hyp['momentum']])
    grad_norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=MAX_NORM))
    optimizer.step()
    optimizer.zero_grad()
    ema.update(model)
    decay = ema.decay(ema.updates)
    groups = [(float(x['lr']), float(x['momentum']), float(x['weight_decay'])) for x in optimizer.param_groups]
    print(f'gradient norm {grad_norm:.6g}; groups (lr, momentum, weight decay) {groups}; EMA decay {decay:.6g}')

    tensors = dict(model.state_dict())
    for k, v in ema.ema.state_dict().items():
        tensors['ema.' + k] = v
    meta = {
        'made_by': 'tests/data/make_tiny_update.py (YOLOv5 v7.0, torch %s)' % torch.__version__,
        'ni': str(NI), 'nw': str(NW), 'lf': '1.0', 'max_norm': str(MAX_NORM),
        'lr0': repr(hyp['lr0']), 'momentum': repr(hyp['momentum']),
        'weight_decay': repr(hyp['weight_decay']), 'warmup_bias_lr': repr(hyp['warmup_bias_lr']),
        'warmup_momentum': repr(hyp['warmup_momentum']),
        'ema_updates_before': str(EMA_UPDATES_BEFORE), 'ema_decay': repr(decay),
        'grad_norm': repr(grad_norm),
    }
    st_write(a.out, tensors, meta)
    print(f'wrote {a.out}: {len(tensors)} tensors')


if __name__ == '__main__':
    main()
