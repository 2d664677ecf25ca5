"""Checks one ONNX file yolocl exported (tests/test_onnx.sh):

    onnx_check.py MODEL.onnx REFDIR NC STRIDE TOL_SCORE TOL_BOX TOL_BOX_REL [--no-cv]

1. onnx.checker.check_model(full_check=True) (the structure and the shape inference);
2. YOLOv5's contract: input `images` and output `output0`, both float32 (float16 for a file with
   FP16 weights), output0's last dimension 5 + NC, metadata `stride` = STRIDE and `names` a dict
   literal of NC names;
3. OpenCV DNN (cv2.dnn.readNetFromONNX) on REFDIR/input.npy: output0 equal to REFDIR/output0.npy
   (yolocl's own inference, tests/onnx_ref) within TOL_SCORE on the objectness and class scores
   and TOL_BOX + TOL_BOX_REL * |yolocl's value| pixels on the boxes (skipped with --no-cv).
Prints the differences; exits 1 on any failure."""
import ast
import sys

import numpy as np
import onnx

FLOAT, FLOAT16 = 1, 10


def fail(msg):
    print("FAIL: %s: %s" % (sys.argv[1], msg))
    sys.exit(1)


def compare(name, got, want, tol_score, tol_box, tol_rel):
    """Max differences of boxes and scores; fails beyond the tolerances."""
    if got.shape != want.shape:
        fail("%s: output0 has shape %s, yolocl's %s" % (name, got.shape, want.shape))
    got = got.astype(np.float64)
    want = want.astype(np.float64)
    if not np.isfinite(got).all():
        fail("%s: output0 has NaN or Inf" % name)
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
    if [i.name for i in g.input] != ["images"] or [o.name for o in g.output] != ["output0"]:
        fail("inputs %s, outputs %s (expected images, output0)"
             % ([i.name for i in g.input], [o.name for o in g.output]))
    init_types = {t.data_type for t in g.initializer if t.data_type in (FLOAT, FLOAT16)}
    elem = FLOAT16 if FLOAT16 in init_types else FLOAT
    for v in (g.input[0], g.output[0]):
        if v.type.tensor_type.elem_type != elem:
            fail("%s has type %d, the weights %d" % (v.name, v.type.tensor_type.elem_type, elem))
    last = g.output[0].type.tensor_type.shape.dim[2].dim_value
    if last != 5 + nc:
        fail("output0's last dimension is %d, not 5 + %d" % (last, nc))
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
        compare("OpenCV %s DNN" % cv2.__version__, net.forward(), np.load(ref + "/output0.npy"),
                tol_score, tol_box, tol_rel)


main()
