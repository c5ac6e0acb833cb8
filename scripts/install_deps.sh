#!/usr/bin/env bash
# Installs what building nvfp4's programs needs on Debian/Ubuntu (idempotent, quick when all is
# there). The library itself is header-only and needs only a C++20 compiler.
set -euo pipefail
# pybind11-dev, python3-dev, python3-numpy, python3-pytest: the Python module and its tests;
# python3-torch: nvfp4.torch (TE's PyTorch API) and its tests; python3-matplotlib: the studies'
# plots (python/examples); python3-pip, python3-setuptools, python3-venv: `pip install
# --no-build-isolation .` offline (pyproject.toml, setup.py).
packages=(cmake g++ make libeigen3-dev libopenblas-dev nlohmann-json3-dev libgtest-dev libbenchmark-dev
          pybind11-dev python3-dev python3-numpy python3-pytest python3-torch python3-matplotlib
          python3-pip python3-setuptools python3-venv)
if [ "${1:-}" = "--with-fuzz" ]; then packages+=(clang libclang-rt-14-dev); fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
echo "installing: ${missing[*]}" >&2
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
