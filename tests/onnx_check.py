"""Checks one ONNX file yolocl exported (tests/test_onnx.sh):

    onnx_check.py MODEL.onnx REFDIR NC STRIDE TOL_SCORE TOL_BOX TOL_BOX_REL [--no-cv]

1. onnx.checker.check_model(full_check=True) (the structure and the shape inference);
2. YOLOv5's contract: input `images` and output `output0`, both float32 (float16 for a file with
   FP16 weights), output0's last dimension 5 + NC, metadata `stride` = STRIDE and `names` a dict
   literal of NC names.  A segmentation model's file has `output1` too (Proto's (B, nm, H/4,
   W/4)) and output0's rows 5 + NC + nm long; a classifier's output0 is the logits (B, NC);
3. OpenCV DNN (cv2.dnn.readNetFromONNX) on REFDIR/input.npy: output0 equal to REFDIR/output0.npy
   (yolocl's own inference, tests/onnx_ref) within TOL_SCORE on the objectness and class scores
   (and the mask coefficients) and TOL_BOX + TOL_BOX_REL * |yolocl's value| pixels on the boxes;
   a classifier's logits and output1 (REFDIR/output1.npy) within TOL_SCORE times yolocl's
   largest value (skipped with --no-cv).
Prints the differences; exits 1 on any failure."""
import ast
import sys

import numpy as np
import onnx

FLOAT, FLOAT16 = 1, 10


def fail(msg):
    print("FAIL: %s: %s" % (sys.argv[1], msg))
    sys.exit(1)


def compare(name, got, want, tol_score, tol_box, tol_rel, out="output0"):
    """Max differences of boxes and scores (everything a score in a 2-D or 4-D output: logits,
    prototypes); fails beyond the tolerances."""
    if got.shape != want.shape:
        fail("%s: %s has shape %s, yolocl's %s" % (name, out, got.shape, want.shape))
    got = got.astype(np.float64)
    want = want.astype(np.float64)
    if not np.isfinite(got).all():
        fail("%s: %s has NaN or Inf" % (name, out))
    if got.ndim != 3:
        # logits and prototypes: relative to yolocl's largest value (prototypes of a model at
        # YOLOv5's initialisation are around 1e-7)
        d, top = np.abs(got - want).max(), np.abs(want).max()
        print("%s: %s %s, max |diff| %.3g (tolerance %g x max |value| %.3g)"
              % (name, out, "x".join(map(str, got.shape)), d, tol_score, top))
        if not d <= tol_score * top:
            fail("%s: %s differs from yolocl's beyond the tolerance" % (name, out))
        return
    dbox = np.abs(got[..., :4] - want[..., :4])
    over = (dbox - tol_rel * np.abs(want[..., :4])).max()
    dscore = np.abs(got[..., 4:] - want[..., 4:]).max()
    print("%s: %s, max |diff| boxes %.3g px (tolerance %g%s), scores %.3g (tolerance %g)"
          % (name, "x".join(map(str, got.shape)), dbox.max(), tol_box,
             " + %g |box|" % tol_rel if tol_rel else "", dscore, tol_score))
    if over > tol_box or dscore > tol_score:
        fail("%s: output0 differs from yolocl's beyond the tolerance" % name)


def main():
    path, ref = sys.argv[1], sys.argv[2]
    nc, stride = int(sys.argv[3]), sys.argv[4]
    tol_score, tol_box, tol_rel = float(sys.argv[5]), float(sys.argv[6]), float(sys.argv[7])
    use_cv = "--no-cv" not in sys.argv[8:]

    model = onnx.load(path)
    onnx.checker.check_model(model, full_check=True)
    g = model.graph
    outs = [o.name for o in g.output]
    if [i.name for i in g.input] != ["images"] or outs not in (["output0"], ["output0", "output1"]):
        fail("inputs %s, outputs %s (expected images, output0 [, output1])"
             % ([i.name for i in g.input], outs))
    init_types = {t.data_type for t in g.initializer if t.data_type in (FLOAT, FLOAT16)}
    elem = FLOAT16 if FLOAT16 in init_types else FLOAT
    for v in list(g.input) + list(g.output):
        if v.type.tensor_type.elem_type != elem:
            fail("%s has type %d, the weights %d" % (v.name, v.type.tensor_type.elem_type, elem))
    dims = g.output[0].type.tensor_type.shape.dim
    nm = g.output[1].type.tensor_type.shape.dim[1].dim_value if len(outs) == 2 else 0
    if len(dims) == 2:
        if dims[1].dim_value != nc:
            fail("a classifier's output0 has %d logits, not %d" % (dims[1].dim_value, nc))
    elif dims[2].dim_value != 5 + nc + nm:
        fail("output0's last dimension is %d, not 5 + %d + %d" % (dims[2].dim_value, nc, nm))
    meta = {p.key: p.value for p in model.metadata_props}
    if meta.get("stride") != stride:
        fail("metadata stride %r, expected %r" % (meta.get("stride"), stride))
    names = ast.literal_eval(meta.get("names", "None"))
    if not isinstance(names, dict) or sorted(names) != list(range(nc)):
        fail("metadata names %r is not a dict of %d names" % (meta.get("names"), nc))
    print("%s: onnx.checker accepts it (IR %d, opset %d), %d nodes, stride %s, %d names"
          % (path, model.ir_version, model.opset_import[0].version, len(g.node), stride, nc))

    if use_cv:
        import cv2
        net = cv2.dnn.readNetFromONNX(path)
        x = np.load(ref + "/input.npy")
        net.setInput(x)
        got = net.forward(outs)
        for name, y in zip(outs, got):
            compare("OpenCV %s DNN" % cv2.__version__, y, np.load("%s/%s.npy" % (ref, name)),
                    tol_score, tol_box, tol_rel, name)


main()
