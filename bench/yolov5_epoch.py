#!/usr/bin/env python3
"""Runs Ultralytics YOLOv5 v7.0's own train.py on a machine with no network and no package registry
(the GPU machine of bench/gpu_check.sh), so that its epoch can be timed beside yolocl's.

    python3 bench/yolov5_epoch.py YOLOV5_DIR [--script val.py] [train.py arguments...]

(--script runs another of its scripts, val.py say, the same way.)

YOLOv5 v7.0 imports a few things at start-up that such a machine may lack, none of which takes part
in training:
  - IPython, for is_notebook() and for showing detections in a notebook: where it is not
    installed, a module whose get_ipython() returns None (what IPython itself returns outside a
    notebook) and whose display.display() prints, as IPython's does outside a notebook, stands in;
  - gitpython, for check_git_info(), which records the checkout's commit in the checkpoint: where
    it is not installed, a module whose Repo() raises InvalidGitRepositoryError stands in, which
    is what gitpython raises for a source tree that is not a git checkout (the result: no commit);
  - NumPy 2 has no np.trapz, which val.py's compute_ap calls: it is pointed at np.trapezoid, the
    same function under its new name;
  - tensorboard, for utils/loggers' SummaryWriter: where it is not installed, a SummaryWriter whose
    methods do nothing stands in (TensorBoard event files are not written; results.csv is);
  - its font, Arial.ttf, which check_dataset() downloads into its settings folder: matplotlib's
    DejaVuSans.ttf is copied there under that name (used for plots only; run with --noplots).
It sets YOLOv5_AUTOINSTALL=false, so that check_requirements() warns of missing packages instead of
calling pip, and TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1, so that PyTorch 2.6 and later load the
checkpoints YOLOv5 writes (whole pickled models) as the PyTorch of its day did.  Everything else is YOLOv5's code, unchanged.  The YOLOv5 source must be a v7.0
checkout (bench/gpu_check.sh --pack --yolov5 DIR copies its Python files).
"""
import importlib.util
import os
import runpy
import shutil
import sys
import tempfile
import types


def stand_ins():
    if importlib.util.find_spec("IPython") is None:
        ipython = types.ModuleType("IPython")
        display = types.ModuleType("IPython.display")
        ipython.get_ipython = lambda: None
        ipython.version_info = (0, 0, 0, "")  # matplotlib reads it before calling get_ipython
        ipython.__path__ = []
        display.display = print
        ipython.display = display
        sys.modules["IPython"], sys.modules["IPython.display"] = ipython, display
        print("yolov5_epoch.py: IPython not installed: get_ipython() returns None", file=sys.stderr)
    if importlib.util.find_spec("git") is None:
        git = types.ModuleType("git")
        exc = types.ModuleType("git.exc")

        class InvalidGitRepositoryError(Exception):
            pass

        def repo(path="."):
            raise InvalidGitRepositoryError(path)

        exc.InvalidGitRepositoryError = InvalidGitRepositoryError
        git.exc, git.Repo = exc, repo
        sys.modules["git"], sys.modules["git.exc"] = git, exc
        print("yolov5_epoch.py: gitpython not installed: the source is treated as no git checkout",
              file=sys.stderr)
    if importlib.util.find_spec("tensorboard") is None:
        # utils/loggers imports torch.utils.tensorboard.SummaryWriter, which needs tensorboard
        tb = types.ModuleType("torch.utils.tensorboard")

        class SummaryWriter:
            def __init__(self, *args, **kwargs):
                pass

            def __getattr__(self, name):
                return lambda *args, **kwargs: None

        tb.SummaryWriter = SummaryWriter
        sys.modules["torch.utils.tensorboard"] = tb
        print("yolov5_epoch.py: tensorboard not installed: SummaryWriter writes nothing",
              file=sys.stderr)
    import numpy
    if not hasattr(numpy, "trapz"):
        # val.py's compute_ap calls np.trapz, which NumPy 2 renamed trapezoid
        numpy.trapz = numpy.trapezoid
        print("yolov5_epoch.py: numpy.trapz is numpy.trapezoid (NumPy 2)", file=sys.stderr)
    if importlib.util.find_spec("pkg_resources") is None:
        raise SystemExit("yolov5_epoch.py: YOLOv5 v7.0 imports pkg_resources (setuptools before 81), "
                         "which this python lacks")


def main():
    if len(sys.argv) < 2 or not os.path.isfile(os.path.join(sys.argv[1], "train.py")):
        raise SystemExit(__doc__)
    src = os.path.abspath(sys.argv[1])
    os.environ["YOLOv5_AUTOINSTALL"] = "false"
    os.environ["TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"] = "1"
    cfg_dir = os.environ.setdefault("YOLOV5_CONFIG_DIR", tempfile.mkdtemp(prefix="yolov5-cfg-"))
    font = os.path.join(cfg_dir, "Arial.ttf")
    if not os.path.exists(font):
        import matplotlib

        shutil.copy(os.path.join(matplotlib.get_data_path(), "fonts", "ttf", "DejaVuSans.ttf"), font)
    stand_ins()
    sys.path.insert(0, src)
    os.chdir(src)
    args, script = sys.argv[2:], "train.py"
    if args[:1] == ["--script"] and len(args) > 1:
        script, args = args[1], args[2:]
    sys.argv = [os.path.join(src, script)] + args
    runpy.run_path(sys.argv[0], run_name="__main__")


if __name__ == "__main__":
    main()
