#!/usr/bin/env python3
"""Runs ggml_flavor (ggml's own quantizers, see ggml_flavor.c) on every nvfp4_flavor input.

Build ggml_flavor first, from ggml's sources (MIT; not part of this project), e.g. with the copy in
../shared/peers/ggml-bench/ggml (ggml-org/ggml d99724f):
  G=.../ggml-bench/ggml; gcc -O2 -c -I$G/include -I$G/src $G/src/ggml-quants.c -o ggml-quants.o
  gcc -O2 -I$G/include -I$G/src ggml_flavor.c ggml-quants.o -lm -o ggml_flavor
usage: run_ggml_flavor.py INPUTS_DIR ./ggml_flavor OUT_DIR   (numpy)
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np


def main(inputs, exe, out):
    os.makedirs(out, exist_ok=True)
    for c in json.load(open(os.path.join(inputs, "flavor_inputs.json"))):
        x = np.load(os.path.join(inputs, c["input"]))
        rows, cols = x.shape
        with tempfile.NamedTemporaryFile(suffix=".f32") as raw:
            x.astype("<f4").tofile(raw.name)
            subprocess.check_call([exe, raw.name, str(rows), str(cols), os.path.join(out, "c%d" % c["id"])])


if __name__ == "__main__":
    main(*sys.argv[1:4])
