#!/usr/bin/env python3
"""Collects the peers' outputs into golden vectors of kinds `nvfp4_flavor` and `checkpoint_layout`
(files + a manifest fragment), ready to be merged into tests/golden/golden_vectors.tar.xz by
merge_into_archive.py. numpy only.

usage: pack_flavor_golden.py INPUTS_DIR GGML_OUT_DIR DEVICE_OUT_DIR DEST_DIR
  INPUTS_DIR      make_flavor_inputs.py's output
  GGML_OUT_DIR    ggml_flavor's outputs c<id>.nvfp4 / .nvfp4_deq / .mxfp4 (run_ggml_flavor.py)
  DEVICE_OUT_DIR  run_python_peers.py's output (flavor_python.npz/.json, peer_*.safetensors)
"""
import json
import os
import shutil
import sys

import numpy as np

REVISIONS = {
    "modelopt": "NVIDIA/TensorRT-Model-Optimizer 5a4242f (modelopt/torch/quantization/qtensor/nvfp4_tensor.py)",
    "torchao": "pytorch/ao 36027d8 (torchao/prototype/mx_formats/nvfp4_tensor.py nvfp4_quantize)",
    "compressed_tensors": "vllm-project/compressed-tensors ac8e2ba + llm-compressor ab1ba3e minmax observer",
    "ggml": "ggml-org/ggml d99724f (ggml-quants.c quantize_row_nvfp4_ref / quantize_row_mxfp4_ref), gcc 12 x86-64",
}


README = """## Quantizer flavors and checkpoint layouts (kinds `nvfp4_flavor`, `checkpoint_layout`)

| kind / mode | producer | what it pins down |
|---|---|---|
| `nvfp4_flavor modelopt` | NVIDIA ModelOpt 5a4242f `NVFP4QTensor` (`get_weights_scaling_factor_2`, `get_weights_scaling_factor`, `quantize`), torch 2.11.0+cu130 on an H100 (CUDA tensors) | weight_scale_2, E4M3 block scales (zero block 1.0), packed codes |
| `nvfp4_flavor torchao` | torchao 36027d8 `nvfp4_quantize` with `per_tensor_amax_to_scale(max abs)`, same torch and GPU | per_tensor_scale, block scales (floor 2^-6), codes |
| `nvfp4_flavor compressed_tensors` | compressed-tensors ac8e2ba `generate_gparam`, `calculate_qparams`, `quantize`, `pack_fp4_to_uint8`, driven as llm-compressor ab1ba3e's memoryless min-max observer does (NVFP4 preset), same torch and GPU | weight_global_scale (bf16-rounded), block scales (zero block 0.125), codes |
| `nvfp4_flavor ggml` | ggml d99724f `quantize_row_nvfp4_ref`, `dequantize_row_nvfp4`, `quantize_row_mxfp4_ref`, gcc 12 x86-64 | GGUF type-40 and type-39 block bytes, ggml's dequantized values |
| `checkpoint_layout` | the layouts ModelOpt's export, compressed-tensors' compressor and torchao's `flatten_tensor_state_dict` write, saved by safetensors 0.8.0 | tensor names, dtypes, shapes, header order, torchao's metadata text |

The Python peers' functions were taken from their source files unmodified (no reimplementation) by
`producers/run_python_peers.py`; inputs by `producers/make_flavor_inputs.py`; packing by
`producers/pack_flavor_golden.py`. Fields: `input_bf16_as_f32` [M, N]; `data` uint8 [M, N/2];
`scale_e4m3` uint8 [M, N/16]; `tensor_scale` float32 [1] (ModelOpt / torchao: decode sense,
amax/2688; compressed-tensors: encode sense, 2688/amax); ggml: `nvfp4_blocks` uint8 [M, N/64*36],
`nvfp4_dequantized` float32 [M, N], `mxfp4_blocks` uint8 [M, N/32*17]; `cuda_equals_cpu` says
whether the peer's CPU run gave the same bytes (where not, the GPU's are stored). `checkpoint_layout`:
`file`, `module`, and the arrays of input 0 it holds.

Quirks found (documented, reproduced): on a GPU PyTorch divides by a Python number as a multiply
by its fp32 reciprocal, so ModelOpt's and torchao's amax/2688 is amax * fp32(1/2688) there (one
ulp from the CPU's quotient for some amax); torch's float8 cast is not saturating (above 464 is
NaN); for an all-zero tensor ModelOpt writes NaN scales (0x7F) and code 7, torchao NaN scales and
code 4.
"""


def main(inputs_dir, ggml_dir, device_dir, dest):
    os.makedirs(dest, exist_ok=True)
    inputs = json.load(open(os.path.join(inputs_dir, "flavor_inputs.json")))
    report = json.load(open(os.path.join(device_dir, "flavor_python.json")))
    z = np.load(os.path.join(device_dir, "flavor_python.npz"))
    torch_note = f"torch {report['torch']} on {report['device_name']} (CUDA)"
    cases = []
    for c in inputs:
        shutil.copy(os.path.join(inputs_dir, c["input"]), os.path.join(dest, c["input"]))
    status = {(e["peer"], e["id"]): e for e in report["cases"]}
    for peer in ("modelopt", "torchao", "compressed_tensors"):
        for c in inputs:
            e = status.get((peer, c["id"]))
            if not e or not e.get("ok"):
                continue
            entry = {"kind": "nvfp4_flavor", "mode": peer, "producer": REVISIONS[peer] + ", " + torch_note,
                     "dist": c["dist"], "shape": c["shape"], "input_bf16_as_f32": c["input"],
                     "cuda_equals_cpu": e.get("cuda_equals_cpu", True)}
            for field, name in (("data", "data"), ("scale", "scale_e4m3"), ("tensor_scale", "tensor_scale")):
                key = f"{peer}_{c['id']}_{field}"
                arr = z[key + "_cuda"] if key + "_cuda" in z.files else z[key]  # the GPU's result
                arr = arr.view(np.uint8) if field != "tensor_scale" else arr.astype(np.float32)
                fname = f"flavor_{peer}_{c['id']}_{field}.npy"
                np.save(os.path.join(dest, fname), np.ascontiguousarray(arr))
                entry[name] = fname
            cases.append(entry)
    for c in inputs:
        prefix = os.path.join(ggml_dir, f"c{c['id']}")
        rows, cols = c["shape"]
        if not os.path.exists(prefix + ".nvfp4"):
            continue
        entry = {"kind": "nvfp4_flavor", "mode": "ggml", "producer": REVISIONS["ggml"], "dist": c["dist"],
                 "shape": c["shape"], "input_bf16_as_f32": c["input"]}
        blocks = np.fromfile(prefix + ".nvfp4", dtype=np.uint8).reshape(rows, cols // 64 * 36)
        np.save(os.path.join(dest, f"flavor_ggml_{c['id']}_nvfp4_blocks.npy"), blocks)
        entry["nvfp4_blocks"] = f"flavor_ggml_{c['id']}_nvfp4_blocks.npy"
        deq = np.fromfile(prefix + ".nvfp4_deq", dtype=np.float32).reshape(rows, cols)
        np.save(os.path.join(dest, f"flavor_ggml_{c['id']}_nvfp4_dequantized.npy"), deq)
        entry["nvfp4_dequantized"] = f"flavor_ggml_{c['id']}_nvfp4_dequantized.npy"
        if os.path.exists(prefix + ".mxfp4"):
            mx = np.fromfile(prefix + ".mxfp4", dtype=np.uint8).reshape(rows, cols // 32 * 17)
            np.save(os.path.join(dest, f"flavor_ggml_{c['id']}_mxfp4_blocks.npy"), mx)
            entry["mxfp4_blocks"] = f"flavor_ggml_{c['id']}_mxfp4_blocks.npy"
        cases.append(entry)
    for peer, fname in sorted(report.get("files", {}).items()):
        shutil.copy(os.path.join(device_dir, fname), os.path.join(dest, "layout_" + fname))
        cases.append({"kind": "checkpoint_layout", "mode": peer, "file": "layout_" + fname,
                      "producer": REVISIONS[peer] + ", written by safetensors " + "0.8.0" + " (" + torch_note + ")",
                      "module": "model.layers.0.mlp.down_proj", "source_case": 0,
                      "data": f"flavor_{peer}_0_data.npy", "scale_e4m3": f"flavor_{peer}_0_scale.npy",
                      "tensor_scale": f"flavor_{peer}_0_tensor_scale.npy"})
    with open(os.path.join(dest, "manifest_fragment.json"), "w") as f:
        json.dump(cases, f, indent=1)
    with open(os.path.join(dest, "README.md"), "w") as f:
        f.write(README)
    print(len(cases), "cases")


if __name__ == "__main__":
    main(*sys.argv[1:5])
