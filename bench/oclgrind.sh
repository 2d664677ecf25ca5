#!/bin/sh
# Runs one small case of every OpenCL kernel of yolocl (bench/cl_smoke: our kernels, the CLBlast
# GEMMs behind the convolutions, FP16 storage, views, accumulation) under oclgrind, and fails when
# oclgrind reports anything: an invalid (out-of-bounds) memory access, a data race, an API error.
# oclgrind exits 0 whatever it finds, so its log is what is checked.
#
#   bench/oclgrind.sh [BUILDDIR]     BUILDDIR: a configured build tree (default: the current
#                                    directory); bench/cl_smoke is built there first
#
# Exit status: 0 clean, 1 problems found (the log is printed), 77 oclgrind or OpenCL missing.
# The program cache is off for the run (YOLOCL_CL_CACHE=0): oclgrind compiles for itself.
# Takes a few seconds (oclgrind is 250-1600x slower than PoCL; the cases are tiny).
set -u
builddir=${1:-.}
if ! command -v oclgrind >/dev/null 2>&1; then
    echo "oclgrind.sh: oclgrind not found (Debian package oclgrind): skipped"
    exit 77
fi
if ! grep -q '^#define YC_HAVE_OPENCL 1' "$builddir/config.h" 2>/dev/null; then
    echo "oclgrind.sh: $builddir is not a build tree with the OpenCL backend: skipped"
    exit 77
fi
make -C "$builddir" bench/cl_smoke >/dev/null || exit 1
log=$(mktemp "${TMPDIR:-/tmp}/yolocl-oclgrind.XXXXXX") || exit 1
trap 'rm -f "$log"' EXIT
YOLOCL_CL_CACHE=0 oclgrind --log "$log" --check-api --data-races "$builddir/bench/cl_smoke"
status=$?
if [ -s "$log" ]; then
    echo "oclgrind.sh: oclgrind reported problems:"
    grep -E '^(Invalid|Data race|OCLGRIND|Oclgrind)' "$log" | sort | uniq -c | sort -rn | head -20
    echo "--- first 60 lines of the log ---"
    head -60 "$log"
    exit 1
fi
if [ "$status" -ne 0 ]; then
    echo "oclgrind.sh: bench/cl_smoke failed under oclgrind (status $status)"
    exit 1
fi
echo "oclgrind.sh: no invalid memory access, data race or API error reported"
exit 0
