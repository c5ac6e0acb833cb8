#!/usr/bin/env bash
# Builds the libFuzzer harnesses for the .npy and safetensors readers with clang
# (-fsanitize=fuzzer,address,undefined) and runs each for SECONDS (default 20) on a scratch copy
# of the seed corpus in tests/fuzz/corpus/. Exits non-zero on the first crash, leak or UB report.
# usage: tests/fuzz/run_fuzz_smoke.sh [SECONDS] [BUILD_DIR]
set -euo pipefail
seconds="${1:-20}"
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
build="${2:-$root/build/fuzz}"
cxx="${CXX_FUZZ:-clang++}"
mkdir -p "$build"
flags=(-std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -I"$root/include")
for harness in npy safetensors; do
  echo "== building ${harness}_fuzzer"
  "$cxx" "${flags[@]}" "$here/${harness}_fuzzer.cpp" -o "$build/${harness}_fuzzer"
done
for harness in npy safetensors; do
  scratch="$build/${harness}_corpus"
  rm -rf "$scratch"
  mkdir -p "$scratch"
  cp "$here/corpus/$harness/"* "$scratch/"
  echo "== running ${harness}_fuzzer for ${seconds} s"
  (cd "$build" && "./${harness}_fuzzer" -max_total_time="$seconds" -max_len=16384 -rss_limit_mb=2048 \
      -timeout=10 -print_final_stats=1 "$scratch") 2>&1 | tail -n 12
done
echo "== fuzz smoke passed"
