#!/usr/bin/env python3
"""Prints what Ultralytics YOLOv5 v7.0's val.py gives for the released YOLOv5n on coco128: the
figures test_val_ref's coco128 case holds yolocl to (within 1e-3).

    YOLOV5_CONFIG_DIR=DIR /usr/bin/python3 tests/data/val_py_coco128.py --yolov5 /path/to/yolov5-v7.0 \\
        [--shared ../shared] [--img 320] [--work /tmp/val_py_coco128]

val.run with the settings of test_val.c: --img 320, --batch 32, conf 0.001, IoU 0.6 (rectangular
batches, pad 0.5, as val.py loads a validation set), on the CPU in float32 (half=False), no plots.
coco128 is copied to --work first, because val.py writes its label cache next to the labels.  val.py
looks for a font in YOLOV5_CONFIG_DIR (Arial.ttf) and tries to download one when it is not there:
offline, put any TrueType font there under that name (it is only drawn on plots).

Made with Debian's python3-torch 1.13.1 (CPU, 2 threads), numpy 1.24, torchvision 0.14:
  320: P 0.5738205770372389, R 0.39429151713224597, mAP@0.5 0.4502441548777238,
       mAP@0.5:0.95 0.2868169636016043
  640: P 0.6067638885386004, R 0.49997114095175454, mAP@0.5 0.5626884381504207,
       mAP@0.5:0.95 0.3625510027514579
"""
import argparse
import json
import os
import shutil
import sys

import yaml


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--yolov5', required=True, help='a YOLOv5 v7.0 checkout')
    ap.add_argument('--shared', default=os.path.join(here, '..', '..', '..', 'shared'))
    ap.add_argument('--img', type=int, default=320)
    ap.add_argument('--work', default='/tmp/val_py_coco128')
    a = ap.parse_args()
    sys.path.insert(0, os.path.abspath(a.yolov5))
    import val

    data = os.path.join(a.work, 'coco128')
    if not os.path.isdir(data):
        shutil.copytree(os.path.join(a.shared, 'data', 'coco128'), data)
    with open(os.path.join(a.shared, 'data', 'coco128.yaml')) as f:
        d = yaml.safe_load(f)
    d['path'] = os.path.abspath(data)  # val.py resolves a relative path against its own folder
    data_yaml = os.path.join(a.work, 'coco128.yaml')
    with open(data_yaml, 'w') as f:
        yaml.safe_dump(d, f)
    r = val.run(data=data_yaml, weights=os.path.join(a.shared, 'weights', 'yolov5n.pt'), imgsz=a.img,
                batch_size=32, conf_thres=0.001, iou_thres=0.6, device='cpu', workers=2, plots=False,
                half=False, project=os.path.join(a.work, 'runs'), name='exp', exist_ok=True)
    p, r_, map50, map_ = r[0][:4]
    print(json.dumps({'img': a.img, 'P': p, 'R': r_, 'mAP50': map50, 'mAP50-95': map_}))


if __name__ == '__main__':
    main()
