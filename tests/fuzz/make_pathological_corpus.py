#!/usr/bin/env python3
"""Writes the hand-made pathological files of the robustness campaign (issue 10) into the fuzz
seed corpora: tests/fuzz/corpus/{npy,safetensors}/bad_* as plain files, and tests/fuzz/corpus/cli/
as inputs of cli_fuzzer.cpp (byte 0 the command, byte 1 its options, bytes 2-3 the first image's
length for two-file commands). Standard library only; the files are a few hundred bytes each.
usage: make_pathological_corpus.py  (rewrites the files it owns, leaves the others)"""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus")


def npy(dict_text, payload=b"", length_change=0):
    header = dict_text
    while (10 + len(header) + 1) % 64:
        header += " "
    header += "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header) + length_change) + header.encode("latin1") + payload


def npy_f32(shape, values, dict_text=None):
    text = dict_text or "{'descr': '<f4', 'fortran_order': False, 'shape': %s, }" % (shape,)
    return npy(text, struct.pack("<%df" % len(values), *values))


def safetensors(header, buffer=b""):
    raw = header if isinstance(header, bytes) else header.encode()
    return struct.pack("<Q", len(raw)) + raw + buffer


def quantized(rows, cols, weight_shape, scale_shape, weight=b"", scales=b"", layout="compact", rht="none",
              scale_2=1.0 / 2688, meta_override=None):
    meta = json.dumps({"format": "nvfp4", "block": [1, 16], "rows": rows, "cols": cols, "shape": [rows, cols],
                       "scale_layout": layout, "rht": rht, "amax": 1.0})
    if meta_override:
        meta = meta_override(meta)
    w, s = len(weight), len(scales)
    header = {"__metadata__": {"nvfp4.W": meta},
              "W.weight": {"dtype": "U8", "shape": weight_shape, "data_offsets": [0, w]},
              "W.weight_scale": {"dtype": "F8_E4M3", "shape": scale_shape, "data_offsets": [w, w + s]},
              "W.weight_scale_2": {"dtype": "F32", "shape": [], "data_offsets": [w + s, w + s + 4]}}
    return safetensors(json.dumps(header), weight + scales + struct.pack("<f", scale_2))


R = 2 ** 40
ONES = [1.0] * 32
NPY = {
    "bad_rows_2_51": npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2251799813685248, 0), }"),
    "bad_rows_2_40": npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776, 0), }"),
    "bad_header_8_short": npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 16), }", struct.pack("<32f", *ONES), -8),
    "bad_double_quotes": npy('{"descr": "<f4", "fortran_order": False, "shape": (2, 16), }', struct.pack("<32f", *ONES)),
    "bad_structured": npy("{'descr': [('a', '<f4'), ('b', '<f4')], 'fortran_order': False, 'shape': (4,), }", bytes(32)),
    "bad_nul_in_header": npy("{'descr': '<f4',\x00 'fortran_order': False, 'shape': (1,), }", bytes(4)),
    "bad_trailing_byte": npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", bytes(5)),
    "bad_void2_bf16": npy("{'descr': '|V2', 'fortran_order': False, 'shape': (1, 16), }", struct.pack("<16H", *([0x3F80] * 16))),
    "bad_u2_bf16": npy("{'descr': '<u2', 'fortran_order': False, 'shape': (1, 16), }", struct.pack("<16H", *([0xC040] * 16))),
    "bad_nan": npy_f32("(2, 16)", [1.0] * 19 + [float("nan")] + [1.0] * 12),
    "bad_rht_overflow": npy_f32("(1, 16)", [3e38] * 16),
    "bad_alpha_overflow": npy_f32("(1, 64)", [2e19] * 64),
}
SAFETENSORS = {
    "bad_rht_huge_empty": quantized(R, 0, [R, 0], [R, 0], rht="te16_rows"),
    "bad_swizzled_huge_empty": quantized(R, 0, [R, 0], [R, 0], layout="128x4"),
    "bad_cols_int64_max": quantized(0, 2 ** 63 - 1, [0, 0], [0, 0]),
    "bad_rows_1_9e19": quantized(2, 32, [2, 16], [2, 2], bytes(32), b"\x38" * 4,
                                 meta_override=lambda m: m.replace('"rows": 2', '"rows": 1.9e19')),
    "bad_rows_32_5": quantized(2, 32, [2, 16], [2, 2], bytes(32), b"\x38" * 4,
                               meta_override=lambda m: m.replace('"rows": 2', '"rows": 32.5')),
    "bad_nan_scale": quantized(2, 32, [2, 16], [2, 2], b"\x11" * 32, b"\x38\x38\x7f\x38"),
    "bad_sign_bit_scale": quantized(2, 32, [2, 16], [2, 2], b"\x11" * 32, b"\x38\xb8\x38\x38"),
    "bad_nan_scale_2": quantized(2, 32, [2, 16], [2, 2], b"\x11" * 32, b"\x38" * 4, scale_2=float("nan")),
    "bad_inf_scale_2": quantized(2, 32, [2, 16], [2, 2], b"\x11" * 32, b"\x38" * 4, scale_2=float("inf")),
    "bad_negative_scale_2": quantized(2, 32, [2, 16], [2, 2], b"\x11" * 32, b"\x38" * 4, scale_2=-1.0),
    "bad_huge_scale_2_rht": quantized(2, 32, [2, 16], [2, 2], b"\x77" * 32, b"\x7e" * 4, rht="te16_rows", scale_2=2.0 ** 110),
    "bad_duplicate_metadata": safetensors('{"__metadata__":{"a":"1"},"__metadata__":{"b":"2"}}'),
    "bad_text_after_nul": safetensors(b'{"__metadata__":{"a":"1"}}\x00garbage'),
    "bad_modelopt_0_2_62": safetensors(
        '{"W.weight":{"dtype":"U8","shape":[0,4611686018427387904],"data_offsets":[0,0]},'
        '"W.weight_scale":{"dtype":"F8_E4M3","shape":[0,0],"data_offsets":[0,0]},'
        '"W.weight_scale_2":{"dtype":"F32","shape":[],"data_offsets":[0,4]}}', struct.pack("<f", 1.0)),
}


def two(a, b):
    return struct.pack("<H", len(a)) + a + b


ok_a = npy_f32("(2, 32)", [float(i % 7) - 3 for i in range(64)])
ok_b = npy_f32("(3, 32)", [float(i % 5) - 2 for i in range(96)])
CLI = {
    "quantize_rht_rows_2_51": b"\x00\x08" + NPY["bad_rows_2_51"],
    "quantize_rht_rows_2_40": b"\x00\x08" + NPY["bad_rows_2_40"],
    "quantize_ok_swizzle_sr": b"\x00\x30" + ok_a,
    "quantize_mxfp4_rht": b"\x00\x09" + ok_a,
    "quantize_rht_overflow": b"\x00\x08" + NPY["bad_rht_overflow"],
    "quantize_bf16_void2": b"\x00\x80" + NPY["bad_void2_bf16"],
    "dequantize_rht_huge_empty": b"\x01\x00" + SAFETENSORS["bad_rht_huge_empty"],
    "dequantize_nan_scale_forensics": b"\x01\x01" + SAFETENSORS["bad_nan_scale"],
    "dequantize_huge_scale_2_rht": b"\x01\x00" + SAFETENSORS["bad_huge_scale_2_rht"],
    "inspect_swizzled_huge_empty": b"\x02\x00" + SAFETENSORS["bad_swizzled_huge_empty"],
    "inspect_sign_bit_forensics": b"\x02\x01" + SAFETENSORS["bad_sign_bit_scale"],
    "inspect_npy_header_short": b"\x02\x00" + NPY["bad_header_8_short"],
    "stats_nan": b"\x03\x00" + two(NPY["bad_nan"], npy_f32("(2, 16)", ONES)),
    "stats_npy_vs_safetensors": b"\x03\x00" + two(ok_a, SAFETENSORS["bad_nan_scale"]),
    "gemm_ok": b"\x04\x00" + two(ok_a, ok_b),
    "gemm_dequant_b_kn": b"\x04\x06" + two(ok_a, npy_f32("(32, 3)", [0.5] * 96)),
    "gemm_alpha_overflow": b"\x04\x00" + two(NPY["bad_alpha_overflow"], NPY["bad_alpha_overflow"]),
    "gemm_huge_empty": b"\x04\x00" + two(NPY["bad_rows_2_40"], npy("{'descr': '<f4', 'fortran_order': False, 'shape': (0, 0), }")),
    "gemm_huge_output": b"\x04\x01" + two(NPY["bad_rows_2_40"], NPY["bad_rows_2_40"]),
}


# The valid seeds already in the reader corpora, as dequantize / inspect / quantize inputs.
for folder, command in (("safetensors", b"\x01\x00"), ("safetensors", b"\x02\x00"), ("npy", b"\x00\x00")):
    for name in sorted(os.listdir(os.path.join(CORPUS, folder))):
        if not name.startswith("bad_"):
            with open(os.path.join(CORPUS, folder, name), "rb") as f:
                CLI["valid_%d_%s" % (command[0], name.replace(".", "_"))] = command + f.read()


def write(folder, files, suffix):
    os.makedirs(os.path.join(CORPUS, folder), exist_ok=True)
    for name, data in files.items():
        with open(os.path.join(CORPUS, folder, name + suffix), "wb") as f:
            f.write(data)


write("npy", NPY, ".npy")
write("safetensors", SAFETENSORS, ".safetensors")
write("cli", CLI, ".bin")
