#!/usr/bin/env bash
# Runs the device cross-checks (on a machine with an NVIDIA GPU, nvcc, g++, numpy, ml_dtypes).
# Usage: tests/device/run.sh   (from the repository root)
set -uo pipefail
here=$(dirname "$0")
out=${OUT:-/tmp/nvfp4-device}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
g++ -std=c++20 -O3 -fopenmp -shared -fPIC -Iinclude "$here/codec_shim.cpp" -o "$out/libnvfp4_codec_shim.so" || exit 1
python3 "$here/ml_dtypes_crosscheck.py" "$out/libnvfp4_codec_shim.so"; rc_py=$?
nvcc -std=c++20 -O3 -arch=sm_90 -Xcompiler -fopenmp -Iinclude "$here/codec_hardware_check.cu" -o "$out/codec_hardware_check" || exit 1
"$out/codec_hardware_check"; rc_hw=$?
exit $(( rc_py || rc_hw ))
