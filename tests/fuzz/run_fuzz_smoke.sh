#!/usr/bin/env bash
# Builds every libFuzzer harness of tests/fuzz/ (the .npy, safetensors and GGUF readers, and the
# command-line pipeline of tools/) with clang -fsanitize=fuzzer,address,undefined plus
# float-cast-overflow (an out-of-range float-to-int conversion; GCC's and clang's `undefined`
# group leaves it out) and runs each for SECONDS (default 20) on a scratch copy of its seed
# corpus in tests/fuzz/corpus/ (the cli seeds hold the hand-made pathological files of issue 10;
# tests/fuzz/make_pathological_corpus.py writes them). Every seed is run first, so each file of
# the corpus is checked even when SECONDS is small. Exits non-zero on the first crash, leak,
# UB report, uncaught exception or time-out (a run over 10 s). large_input_fuzzer expands its
# small inputs into large files (JSON nested 200,000 deep, 100,000 tensors, 4 MB names: issue
# 34's large-input mode), so its time-outs catch quadratic steps. The mutations follow FUZZ_SEED
# (default 1), so a CI run repeats the same inputs and a red one can be replayed; FUZZ_SEED=0 asks
# libFuzzer for a fresh seed each run (what a long hunt wants).
# usage: [FUZZ_SEED=N] tests/fuzz/run_fuzz_smoke.sh [SECONDS] [BUILD_DIR]
set -euo pipefail
seconds="${1:-20}"
seed="${FUZZ_SEED:-1}"
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
build="${2:-$root/build/fuzz}"
cxx="${CXX_FUZZ:-clang++}"
mkdir -p "$build"
eigen_include="$(pkg-config --cflags-only-I eigen3 2>/dev/null || echo -I/usr/include/eigen3)"
flags=(-std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined,float-cast-overflow -fno-sanitize-recover=all
       -I"$root/include" -I"$root/tools" $eigen_include)
harnesses=(npy safetensors gguf cli large_input)
# Two builds at a time (CI has 2 cores); a failed build fails the script.
pids=()
for harness in "${harnesses[@]}"; do
  echo "== building ${harness}_fuzzer"
  "$cxx" "${flags[@]}" "$here/${harness}_fuzzer.cpp" -o "$build/${harness}_fuzzer" &
  pids+=($!)
  if (( ${#pids[@]} == 2 )); then wait "${pids[0]}"; wait "${pids[1]}"; pids=(); fi
done
for pid in "${pids[@]}"; do wait "$pid"; done
for harness in "${harnesses[@]}"; do
  scratch="$build/${harness}_corpus"
  rm -rf "$scratch"
  mkdir -p "$scratch"
  corpus="${harness%_input}"  # large_input_fuzzer's seeds are in corpus/large/
  cp "$here/corpus/$corpus/"* "$scratch/"
  echo "== running ${harness}_fuzzer for ${seconds} s"
  (cd "$build" && "./${harness}_fuzzer" -max_total_time="$seconds" -seed="$seed" -max_len=16384 -rss_limit_mb=2048 -malloc_limit_mb=1024 \
      -timeout=10 -print_final_stats=1 "$scratch") 2>&1 | tail -n 12
done
# nvfp4.torch's property fuzzing (tests/python/fuzz_torch_layers.py: the layers' autograd
# contracts against a replay of each call, the optimizers' resume and atomic steps) for 4 x
# SECONDS on the Python module the README's test command built (NVFP4_PYTHON_DIR overrides),
# cases seeded from FUZZ_SEED like the mutations above (0: a fresh seed).
python="${PYTHON3:-/usr/bin/python3}"
pydir="${NVFP4_PYTHON_DIR:-$root/build/release/python}"
if "$python" -c "import torch" 2>/dev/null; then
  [ -d "$pydir/nvfp4" ] || { echo "fuzz_torch_layers: no nvfp4 module in $pydir (build the nvfp4_python target or set NVFP4_PYTHON_DIR)"; exit 1; }
  echo "== running fuzz_torch_layers for $(( seconds * 4 )) s"
  PYTHONPATH="$pydir" "$python" "$root/tests/python/fuzz_torch_layers.py" --seconds "$(( seconds * 4 ))" \
      --seed "$(( seed == 0 ? RANDOM + 1 : seed ))"
else
  echo "== fuzz_torch_layers skipped: $python has no torch"
fi
echo "== fuzz smoke passed"
