#!/usr/bin/python3
"""tests/data/cls/tiny-cls.pt and tiny-cls-out.safetensors: a YOLOv5 v7.0 classifier checkpoint as
classify/train.py saves it (ClassificationModel pickled whole in ckpt['model'], in FP16, with no
yaml: the file holds no model config), for test_classify's reading of a classifier from --weights
alone.  Run from a YOLOv5 v7.0 source folder with Debian's python3-torch:
    /usr/bin/python3 tests/data/make_cls_pt.py OUTDIR

The model: yolov5n.yaml at depth_multiple 0.33 and width_multiple 0.125 (a narrow yolov5n),
ClassificationModel(model, nc=3, cutoff=4) (layers 0-2 and Classify in place of layer 3: small
enough for a fixture), seed 0, BatchNorm running statistics drawn at random so that evaluation
mode differs from training mode, the Linear's weights times 30 so that the logits differ between
images, names ['blue', 'green', 'red'] as classify/train.py attaches
them.  Stored beside it: `images` (2,3,16,16) random and `logits` (2,3), the model's evaluation
output on them with the FP16 weights widened to float32."""
import sys, os, json, struct, datetime
from copy import deepcopy
import numpy as np, torch, yaml
sys.path.insert(0, os.getcwd())
from models.yolo import DetectionModel, ClassificationModel


def write_st(path, tensors, meta):
    hdr, off, blobs = {}, 0, []
    for k, t in tensors.items():
        a = t.detach().contiguous().numpy().astype(np.float32)
        b = a.tobytes(); hdr[k] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        off += len(b); blobs.append(b)
    hdr["__metadata__"] = {k: str(v) for k, v in meta.items()}
    h = json.dumps(hdr, separators=(",", ":")).encode(); h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h))); f.write(h); [f.write(b) for b in blobs]


out = sys.argv[1]
os.makedirs(out, exist_ok=True)
torch.manual_seed(0)
cfg = yaml.safe_load(open('models/yolov5n.yaml'))
cfg['width_multiple'] = 0.125
model = ClassificationModel(model=DetectionModel(cfg), nc=3, cutoff=4)
g = torch.Generator().manual_seed(1)
for m in model.modules():
    if isinstance(m, torch.nn.BatchNorm2d):
        m.running_mean.copy_(torch.randn(m.running_mean.shape, generator=g) * 0.1)
        m.running_var.copy_(torch.rand(m.running_var.shape, generator=g) + 0.5)
        m.weight.data.copy_(torch.rand(m.weight.shape, generator=g) + 0.5)
        m.bias.data.copy_(torch.randn(m.bias.shape, generator=g) * 0.1)
model.model[-1].linear.weight.data *= 30  # logits that differ between the images
model.names = ['blue', 'green', 'red']
ckpt = {'epoch': 4, 'best_fitness': 0.5, 'model': deepcopy(model).half(), 'ema': None, 'updates': 40,
        'optimizer': None, 'opt': {'model': 'yolov5n.pt', 'cutoff': 4, 'imgsz': 32}, 'git': None,
        'date': datetime.datetime(2026, 11, 27).isoformat()}
torch.save(ckpt, os.path.join(out, 'tiny-cls.pt'))

m32 = deepcopy(ckpt['model']).float().eval()
x = torch.randn(2, 3, 16, 16, generator=g)
with torch.no_grad():
    y = m32(x)
write_st(os.path.join(out, 'tiny-cls-out.safetensors'), {'images': x, 'logits': y},
         {'params': sum(p.numel() for p in model.parameters())})
print('params', sum(p.numel() for p in model.parameters()), 'logits', y.tolist())
print(list(model.state_dict().keys())[-6:])
