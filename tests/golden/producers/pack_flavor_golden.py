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
    print(len(cases), "cases")


if __name__ == "__main__":
    main(*sys.argv[1:5])
