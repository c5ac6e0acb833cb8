#!/usr/bin/env bash
# `pip install --no-build-isolation --no-index .` (README, "From Python") into a fresh virtual
# environment that sees the system's packages, offline; then nvfp4 and nvfp4.torch import from
# the installed package, outside the source tree, and quantize.
# Usage: pip_install_test.sh <source root> <python>
set -euo pipefail
root="$1"
python="$2"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$python" -m venv --system-site-packages "$work/env"
# --system-site-packages shows the new environment the BASE interpreter's packages only. When
# "$python" is itself a virtual environment (numpy and torch installed in it, or seen from its own
# parent), a .pth file hands the new one the same search path, as a user's nested venv would need.
"$python" - "$work/env" <<'PY'
import pathlib, site, sys
if sys.prefix != sys.base_prefix:
    env = pathlib.Path(sys.argv[1])
    inner = next(env.glob("lib/python*/site-packages"))
    paths = [p for p in sys.path if p.endswith("-packages") and pathlib.Path(p).is_dir()]
    (inner / "parent_environment.pth").write_text("\n".join(paths) + "\n")
PY
"$work/env/bin/python" -c "import numpy" 2>/dev/null || {
  echo "pip_install_test: numpy is not importable in a virtual environment made from $python; install python3-numpy (Debian) or numpy into that interpreter" >&2
  exit 1
}
CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}" \
  "$work/env/bin/pip" install --no-build-isolation --no-index --quiet "$root"
cd "$work"
"$work/env/bin/python" - <<'PY'
import numpy as np
import nvfp4
assert "/env/lib/" in nvfp4.__file__, nvfp4.__file__
x = np.linspace(-3, 3, 16 * 64, dtype=np.float32).reshape(16, 64)
q = nvfp4.quantize(x, "nvfp4_1x16")
assert nvfp4.dequantize(q).shape == x.shape and nvfp4.sqnr_db(x, nvfp4.dequantize(q)) > 15
try:
    import torch
except ImportError:
    print("torch absent: nvfp4.torch not imported")
else:
    import nvfp4.torch as te
    y = te.Linear(64, 32)(torch.from_numpy(x))
    assert y.shape == (16, 32)
print("pip install: nvfp4 from", nvfp4.__file__)
PY
