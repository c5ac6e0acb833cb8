#!/usr/bin/env python3
"""Runs the Python peers' own NVFP4 weight quantizers on the `nvfp4_flavor` inputs and saves what
they produce, for the golden kind `nvfp4_flavor`. Needs torch (the device machine has it).

The peers are not installed there (no network, and compressed-tensors needs pydantic), so their
functions are taken from their source files as they are, with Python's ast module: each named
top-level function or class is compiled from the peer's file into a namespace that holds the names
it refers to. Decorators that only register backends are dropped (compressed-tensors registers its
Triton kernels with priority "disable", so its eager torch bodies are what runs anyway). Nothing
of a peer is re-written here except the llm-compressor min/max observer, which is two reductions
(torch.amin / torch.amax over each 16-element group) stated below.

usage: run_python_peers.py PEERS_DIR INPUTS_DIR OUT_DIR
  PEERS_DIR holds modelopt/ torchao/ compressed_tensors/ with the peer files listed in PEER_FILES.
Writes OUT_DIR/flavor_python.npz (arrays) and OUT_DIR/flavor_python.json (what ran, versions,
whether CPU and CUDA agreed, any error).
"""
import ast
import enum
import json
import math
import os
import sys
import traceback
import types
from math import ceil

import numpy as np
import torch
import torch.nn.functional as F

PEER_FILES = {
    "modelopt": ["nvfp4_tensor.py", "base_qtensor.py", "utils.py"],
    "torchao": ["nvfp4_tensor.py", "kernels.py", "custom_fp_utils.py", "constants.py", "utils.py",
                "safetensors_support.py", "safetensors_utils.py"],
    "compressed_tensors": ["helpers.py", "quant_args.py", "forward.py", "forward_helpers.py",
                           "fp4_utils.py", "nvfp4_helpers.py", "mxfp_utils.py"],
}

KEEP_DECORATORS = {"staticmethod", "classmethod"}


def strip_annotations(node):
    """Type annotations name classes (pydantic models) that are not loaded; they change nothing."""
    for sub in ast.walk(node):
        if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)):
            sub.returns = None
            for a in sub.args.args + sub.args.kwonlyargs + sub.args.posonlyargs:
                a.annotation = None
            if sub.args.vararg:
                sub.args.vararg.annotation = None
            if sub.args.kwarg:
                sub.args.kwarg.annotation = None


def extract(path, names, namespace):
    """Compiles the top-level definitions `names` of the Python file at `path` into `namespace`."""
    with open(path) as f:
        tree = ast.parse(f.read(), filename=path)
    wanted = []
    found = set()
    for node in tree.body:
        name = None
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            name = node.name
            node.decorator_list = [d for d in node.decorator_list
                                   if isinstance(d, ast.Name) and d.id in KEEP_DECORATORS]
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, ast.FunctionDef):
                        item.decorator_list = [d for d in item.decorator_list
                                               if isinstance(d, ast.Name) and d.id in KEEP_DECORATORS]
        elif isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            targets = target.elts if isinstance(target, ast.Tuple) else [target]
            defined = {t.id for t in targets if isinstance(t, ast.Name)}
            if defined & set(names):
                wanted.append(node)
                found.update(defined)
            continue
        if name in names:
            strip_annotations(node)
            wanted.append(node)
            found.add(name)
    missing = set(names) - found
    if missing:
        raise KeyError(f"{path}: not found: {sorted(missing)}")
    # Keep the file's order so that later definitions see earlier ones.
    module = ast.Module(body=wanted, type_ignores=[])
    exec(compile(module, path, "exec"), namespace)


def base_namespace():
    return {"torch": torch, "F": F, "math": math, "ceil": ceil, "enum": enum, "Enum": enum.Enum,
            "Optional": __import__("typing").Optional, "Tuple": tuple, "Tensor": torch.Tensor,
            "FloatTensor": torch.Tensor, "IntTensor": torch.Tensor, "Any": object, "__name__": "peer"}


# ----------------------------------------------------------------------------------------------
# ModelOpt: NVFP4QTensor (modelopt/torch/quantization/qtensor/nvfp4_tensor.py)

def load_modelopt(d):
    ns = base_namespace()
    ns["fp4_compatible"] = lambda: False  # only gates the TensorRT-LLM kernel, which is off by default
    extract(os.path.join(d, "utils.py"), ["reduce_block_amax", "reduce_block_padding", "reduce_amax"], ns)
    # reduce_amax is wrapped in @torch.no_grad() in the source; the ast copy drops it, so run all
    # peer code under torch.no_grad() below.
    extract(os.path.join(d, "base_qtensor.py"), ["BaseQuantizedTensor"], ns)
    extract(os.path.join(d, "nvfp4_tensor.py"), ["e2m1_bounds", "e2m1_values", "NVFP4QTensor"], ns)
    return ns


def run_modelopt(ns, x):
    cls = ns["NVFP4QTensor"]
    # What ModelOpt's HF export does for a weight: weight_scale_2 from the weight's amax, the
    # per-block scales from it, then the packed data (quant_utils.to_quantized_weight).
    wsf2 = cls.get_weights_scaling_factor_2(x)
    ws, _ = cls.get_weights_scaling_factor(x, 16, wsf2)
    packed = cls.quantize(x, 16, ws, wsf2)[0]._quantized_data
    # The plain entry point (scales computed inside) must give the same bytes.
    q2, ws2, wsf2_2 = cls.quantize(x, 16)
    same = torch.equal(q2._quantized_data, packed) and torch.equal(ws2.view(torch.uint8), ws.view(torch.uint8)) \
        and torch.equal(wsf2_2, wsf2)
    return {"data": packed.view(torch.uint8), "scale": ws.view(torch.uint8),
            "tensor_scale": wsf2.float().reshape(1)}, {"quantize_entry_point_agrees": bool(same)}


# ----------------------------------------------------------------------------------------------
# torchao: nvfp4_quantize (torchao/prototype/mx_formats/nvfp4_tensor.py), weight path of
# NVFP4DynamicActivationNVFP4WeightConfig: per_tensor_scale = per_tensor_amax_to_scale(max|W|)

def load_torchao(d):
    ns = base_namespace()
    extract(os.path.join(d, "constants.py"), ["F8E4M3_MAX", "F4_E2M1_MAX"], ns)
    extract(os.path.join(d, "custom_fp_utils.py"), ["_n_ones", "EBITS_F32", "F32_EXP_BIAS",
                                                   "_f32_to_floatx_unpacked"], ns)
    extract(os.path.join(d, "kernels.py"), ["EBITS_F4_E2M1", "f32_to_f4_unpacked", "pack_uint4", "down_size"], ns)
    extract(os.path.join(d, "nvfp4_tensor.py"), ["E4M3_EPS", "per_tensor_amax_to_scale", "nvfp4_quantize"], ns)
    return ns


def run_torchao(ns, x):
    tensor_amax = torch.max(torch.abs(x))
    per_tensor_scale = ns["per_tensor_amax_to_scale"](tensor_amax)
    scales, data = ns["nvfp4_quantize"](x.contiguous(), 16, per_tensor_scale)
    single_scales, single_data = ns["nvfp4_quantize"](x.contiguous(), 16, None)
    return {"data": data.view(torch.uint8), "scale": scales.view(torch.uint8).reshape(x.shape[0], -1),
            "tensor_scale": per_tensor_scale.float().reshape(1),
            "single_data": single_data.view(torch.uint8),
            "single_scale": single_scales.view(torch.uint8).reshape(x.shape[0], -1)}, {}


# ----------------------------------------------------------------------------------------------
# compressed-tensors (quantization/utils/helpers.py, lifecycle/forward*.py, compressors/nvfp4/),
# driven the way llm-compressor quantizes a weight with the NVFP4 preset scheme:
# MemorylessMinMaxObserver (min/max per 16-element group), Observer.get_global_scale ->
# generate_gparam, calculate_qparams, then NVFP4PackedCompressor.compress -> quantize +
# pack_fp4_to_uint8, weight_scale cast to float8_e4m3fn.

def load_compressed_tensors(d):
    ns = base_namespace()
    extract(os.path.join(d, "quant_args.py"), ["FloatArgs", "FP4_E2M1_DATA", "FP8_E4M3_DATA", "QuantizationType",
                                              "QuantizationStrategy", "round_to_quantized_type_dtype",
                                              "round_to_quantized_type_args"], ns)
    extract(os.path.join(d, "fp4_utils.py"), ["cast_to_fp4"], ns)
    # FP4_E2M1_DATA.cast_to_fp4 imports cast_to_fp4 from its module path: provide that module.
    for mod in ["compressed_tensors", "compressed_tensors.quantization", "compressed_tensors.quantization.utils",
                "compressed_tensors.quantization.utils.fp4_utils"]:
        sys.modules.setdefault(mod, types.ModuleType(mod))
    sys.modules["compressed_tensors.quantization.utils.fp4_utils"].cast_to_fp4 = ns["cast_to_fp4"]
    extract(os.path.join(d, "mxfp_utils.py"), ["should_generate_mx_scales", "maybe_convert_from_mx_exp"], ns)
    extract(os.path.join(d, "helpers.py"), ["calculate_qparams", "calculate_range", "generate_gparam",
                                           "_get_dtype_eps"], ns)
    extract(os.path.join(d, "forward_helpers.py"), ["_apply_quantize_op", "_process_group", "_quantize"], ns)
    extract(os.path.join(d, "forward.py"), ["quantize", "_process_quantization"], ns)
    extract(os.path.join(d, "nvfp4_helpers.py"), ["kE2M1ToFloat", "pack_fp4_to_uint8"], ns)
    return ns


def ct_weight_args(ns):
    QT, QS = ns["QuantizationType"], ns["QuantizationStrategy"]
    return types.SimpleNamespace(num_bits=4, type=QT.FLOAT, strategy=QS.TENSOR_GROUP, symmetric=True,
                                 dynamic=False, group_size=16, scale_dtype=torch.float8_e4m3fn,
                                 zp_dtype=torch.float8_e4m3fn, block_structure=None, actorder=None,
                                 observer="memoryless_minmax", observer_kwargs={})


def run_compressed_tensors(ns, x):
    args = ct_weight_args(ns)
    # Observer (llm-compressor observers/helpers.py _flatten_weight, min_max.py _get_min_max):
    observed = x.unflatten(-1, (-1, 16)).unsqueeze(0)
    min_vals = torch.amin(observed, dim=(0, -1))
    max_vals = torch.amax(observed, dim=(0, -1))
    # Observer.get_global_scale for one (unfused) observer:
    global_absmax = max_vals.max()
    global_absmax = torch.max(global_absmax, -min_vals.min())
    global_absmax = torch.max(global_absmax, max_vals.max())
    global_scale = ns["generate_gparam"](-global_absmax.reshape(1), global_absmax.reshape(1))
    scale, zero_point = ns["calculate_qparams"](min_vals=min_vals, max_vals=max_vals, quantization_args=args,
                                                global_scale=global_scale)
    # The module's weight_scale parameter has the weight's dtype until compression
    # (compressed_tensors/quantization/lifecycle/initialize.py), so the scale passes through it.
    scale_param = scale.to(x.dtype)
    quantized = ns["quantize"](x=x, scale=scale_param, zero_point=None, args=args, global_scale=global_scale)
    packed = ns["pack_fp4_to_uint8"](quantized)
    stored_scale = scale_param.to(torch.float8_e4m3fn)
    return {"data": packed.view(torch.uint8), "scale": stored_scale.view(torch.uint8),
            "tensor_scale": global_scale.float().reshape(1)}, \
           {"scale_param_exact": bool(torch.equal(scale_param.float(), scale.float()))}


# ----------------------------------------------------------------------------------------------
# Checkpoint files as the peers' own writers lay them out, for the readers' tests:
#  - ModelOpt: its HF export saves the state dict with safetensors (W.weight U8, W.weight_scale
#    F8_E4M3, W.weight_scale_2 F32 scalar, W.input_scale F32 scalar);
#  - compressed-tensors: W.weight_packed, W.weight_scale, W.weight_global_scale (shape [1]);
#  - torchao: flatten_tensor_state_dict (prototype/safetensors) of an NVFP4Tensor with swizzled
#    scales, i.e. "<module>._weight_qdata" etc. plus the JSON metadata its encoder writes.

def class_list_attributes(path, class_name, names):
    """The literal list attributes `names` of class `class_name` in the file at `path`."""
    with open(path) as f:
        tree = ast.parse(f.read())
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            out = {}
            for item in node.body:
                if isinstance(item, ast.Assign) and isinstance(item.targets[0], ast.Name) and item.targets[0].id in names:
                    out[item.targets[0].id] = ast.literal_eval(item.value)
            return out
    raise KeyError(class_name)


def write_peer_files(peers_dir, ns_by_peer, outputs, x, out_dir):
    from safetensors.torch import save_file
    written = {}
    mo = outputs.get("modelopt")
    if mo:
        save_file({"model.layers.0.mlp.down_proj.weight": torch.from_numpy(mo["data"]),
                   "model.layers.0.mlp.down_proj.weight_scale": torch.from_numpy(mo["scale"]).view(torch.float8_e4m3fn),
                   "model.layers.0.mlp.down_proj.weight_scale_2": torch.from_numpy(mo["tensor_scale"]).reshape(()),
                   "model.layers.0.mlp.down_proj.input_scale": torch.tensor(0.0625, dtype=torch.float32),
                   "model.norm.weight": x[0].to(torch.bfloat16).cpu()},
                  os.path.join(out_dir, "peer_modelopt.safetensors"), metadata={"format": "pt"})
        written["modelopt"] = "peer_modelopt.safetensors"
    ct = outputs.get("compressed_tensors")
    if ct:
        save_file({"model.layers.0.mlp.down_proj.weight_packed": torch.from_numpy(ct["data"]),
                   "model.layers.0.mlp.down_proj.weight_scale": torch.from_numpy(ct["scale"]).view(torch.float8_e4m3fn),
                   "model.layers.0.mlp.down_proj.weight_global_scale": torch.from_numpy(ct["tensor_scale"]).reshape(1),
                   "model.layers.0.mlp.down_proj.input_global_scale": torch.tensor([16.0], dtype=torch.float32),
                   "model.norm.weight": x[0].to(torch.bfloat16).cpu()},
                  os.path.join(out_dir, "peer_compressed_tensors.safetensors"), metadata={"format": "pt"})
        written["compressed_tensors"] = "peer_compressed_tensors.safetensors"
    ao = outputs.get("torchao")
    if ao:
        d = os.path.join(peers_dir, "torchao")
        ns = ns_by_peer["torchao"]
        ns["json"] = json
        ns["dataclasses"] = __import__("dataclasses")
        extract(os.path.join(d, "utils.py"), ["ceil_div", "to_blocked"], ns)
        extract(os.path.join(d, "safetensors_utils.py"), ["ALLOWED_TENSORS_SUBCLASSES", "TensorSubclassAttributeJSONEncoder"], ns)
        extract(os.path.join(d, "safetensors_support.py"), ["flatten_tensor_state_dict"], ns)
        lists = class_list_attributes(os.path.join(d, "nvfp4_tensor.py"), "NVFP4Tensor",
                                      {"tensor_data_names", "tensor_attribute_names", "optional_tensor_data_names",
                                       "optional_tensor_attribute_names"})
        rows, cols = ao["data"].shape[0], ao["data"].shape[1] * 2
        # NVFP4Tensor.to_nvfp4(is_swizzled_scales=True): to_blocked(scales).flatten(), viewed as
        # hp_data_dims_to_swizzled_scale_dims_nvfp4(M, K) = (ceil(M/128)*32, ceil(K/64)*16).
        # (the bytes are moved as uint8, which to_blocked treats the same as float8_e4m3fn)
        swizzled = ns["to_blocked"](torch.from_numpy(ao["scale"]).reshape(rows, cols // 16)).flatten()
        swizzled = swizzled.view(-(-rows // 128) * 32, -(-cols // 64) * 16).view(torch.float8_e4m3fn)
        fake_cls = type("NVFP4Tensor", (), dict(lists))
        t = fake_cls()
        t.qdata = torch.from_numpy(ao["data"])
        t.scale = swizzled
        t.per_tensor_scale = torch.from_numpy(ao["tensor_scale"]).reshape(())
        t.act_per_tensor_scale = None
        t.block_size = 16
        t.orig_dtype = torch.bfloat16
        t.is_swizzled_scales = True
        t.use_triton_kernel = False
        t.act_quant_kwargs = None
        tensors, metadata = ns["flatten_tensor_state_dict"]({"model.layers.0.mlp.down_proj.weight": t,
                                                             "model.norm.weight": x[0].to(torch.bfloat16).cpu()})
        save_file(tensors, os.path.join(out_dir, "peer_torchao.safetensors"), metadata=metadata)
        written["torchao"] = "peer_torchao.safetensors"
    return written


PEERS = {
    "modelopt": (load_modelopt, run_modelopt),
    "torchao": (load_torchao, run_torchao),
    "compressed_tensors": (load_compressed_tensors, run_compressed_tensors),
}


def main(peers_dir, inputs_dir, out_dir):
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(inputs_dir, "flavor_inputs.json")) as f:
        inputs = json.load(f)
    report = {"torch": torch.__version__, "cuda": torch.cuda.is_available(),
              "device_name": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
              "peers": {}, "cases": []}
    arrays = {}
    namespaces = {}
    file_case = {}  # peer -> outputs of case 0, for the checkpoint files
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    for peer, (load, run) in PEERS.items():
        try:
            ns = load(os.path.join(peers_dir, peer))
            namespaces[peer] = ns
            report["peers"][peer] = "loaded"
        except Exception:
            report["peers"][peer] = "load failed: " + traceback.format_exc()
            print(report["peers"][peer], flush=True)
            continue
        for case in inputs:
            entry = {"peer": peer, "id": case["id"]}
            x_np = np.load(os.path.join(inputs_dir, case["input"]))
            try:
                results = {}
                for dev in devices:
                    x = torch.from_numpy(x_np).to(torch.bfloat16).to(dev)
                    assert torch.equal(x.float().cpu(), torch.from_numpy(x_np)), "input is not bf16-exact"
                    with torch.no_grad():
                        out, extra = run(ns, x)
                    results[dev] = ({k: v.detach().cpu().numpy() for k, v in out.items()}, extra)
                cpu_out, extra = results["cpu"]
                entry.update(extra)
                if "cuda" in results:
                    cuda_out = results["cuda"][0]
                    entry["cuda_equals_cpu"] = all(np.array_equal(cpu_out[k].view(np.uint8), cuda_out[k].view(np.uint8))
                                                   for k in cpu_out)
                    for k in cpu_out:
                        if not np.array_equal(cpu_out[k].view(np.uint8), cuda_out[k].view(np.uint8)):
                            arrays[f"{peer}_{case['id']}_{k}_cuda"] = cuda_out[k]
                for k, v in cpu_out.items():
                    arrays[f"{peer}_{case['id']}_{k}"] = v
                if case["id"] == 0:
                    file_case[peer] = cpu_out
                entry["ok"] = True
            except Exception:
                entry["ok"] = False
                entry["error"] = traceback.format_exc()
                print(f"{peer} case {case['id']}: {entry['error']}", flush=True)
            report["cases"].append(entry)
            print(json.dumps({k: v for k, v in entry.items() if k != "error"}), flush=True)
    np.savez_compressed(os.path.join(out_dir, "flavor_python.npz"), **arrays)
    try:
        x0 = torch.from_numpy(np.load(os.path.join(inputs_dir, inputs[0]["input"])))
        report["files"] = write_peer_files(peers_dir, namespaces, file_case, x0, out_dir)
    except Exception:
        report["files_error"] = traceback.format_exc()
        print(report["files_error"], flush=True)
    with open(os.path.join(out_dir, "flavor_python.json"), "w") as f:
        json.dump(report, f, indent=1)
    print(json.dumps({k: report[k] for k in ("torch", "cuda", "device_name", "peers")}), flush=True)
    print("files:", report.get("files"), flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:4])
