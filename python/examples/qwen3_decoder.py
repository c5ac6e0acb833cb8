"""A Qwen3-style decoder for the LoRA study (lora_recipes.py), built from a Hugging Face config and
read from / written to safetensors files in Hugging Face's layout, plus LoRA adapters.

The model follows Qwen3's published architecture (transformers' modeling_qwen3): token embedding,
per layer an RMSNorm, grouped-query attention whose queries and keys are RMS-normalised per head
(q_norm, k_norm) and rotated by RoPE in the split-halves convention, an RMSNorm and a SwiGLU MLP
(down(silu(gate(x)) * up(x))); a final RMSNorm and the LM head. Every projection of the layers
(q/k/v/o/gate/up/down) is a te.Linear, so a recipe covers them; the embedding and the head are
ordinary torch modules (kept in high precision, as QLoRA keeps them).

Tensor names are Hugging Face's (model.layers.N.self_attn.q_proj.weight, ...); config.json takes
Qwen3Config's keys. Our own safetensors reader / writer (the format: an 8-byte little-endian header
length, a JSON header naming each tensor's dtype, shape and byte range, then the bytes): F32, BF16
and F16 tensors, a single file or shards listed by model.safetensors.index.json.
"""

import json
import math
import os
import struct

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import nvfp4.torch as te

CONFIG_KEYS = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
               "num_key_value_heads", "head_dim", "rms_norm_eps", "rope_theta", "tie_word_embeddings")
SMALL_CONFIG = {
    "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_act": "silu", "torch_dtype": "bfloat16",
    "vocab_size": 256, "hidden_size": 128, "intermediate_size": 384, "num_hidden_layers": 4,
    "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 16, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
    "tie_word_embeddings": False, "max_position_embeddings": 1024,
}
LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def check_config(config):
    """The config as the model needs it; a clear error for what it cannot build."""
    missing = [k for k in CONFIG_KEYS if k not in config]
    if missing:
        raise ValueError(f"config.json lacks {', '.join(missing)} (a Qwen3Config has them)")
    if config.get("model_type", "qwen3") != "qwen3":
        raise ValueError(f"config.json is a {config['model_type']!r} model; this decoder builds model_type 'qwen3'")
    if config.get("hidden_act", "silu") != "silu":
        raise ValueError(f"hidden_act {config['hidden_act']!r}: Qwen3's MLP is SwiGLU (silu)")
    for k in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
              "num_key_value_heads", "head_dim"):
        if not isinstance(config[k], int) or config[k] < 1:
            raise ValueError(f"config.json: {k} must be a positive integer, got {config[k]!r}")
    if config["num_attention_heads"] % config["num_key_value_heads"]:
        raise ValueError("config.json: num_attention_heads must be a multiple of num_key_value_heads")
    if config["head_dim"] % 2:
        raise ValueError("config.json: head_dim must be even (RoPE rotates pairs)")
    if config["vocab_size"] < 256:
        raise ValueError(f"config.json: vocab_size {config['vocab_size']} < 256; the study feeds bytes (0..255)")
    return config


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class RotaryHalves(nn.Module):
    """RoPE as Hugging Face's Llama / Qwen apply it: the head's first and second halves are the
    pairs (x_i, x_{i + d/2}), rotated by position * theta^(-2i/d)."""

    def __init__(self, head_dim, theta):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)),
                             persistent=False)

    def forward(self, q, k):  # [B, H, T, D]
        t = q.shape[-2]
        angles = torch.outer(torch.arange(t, dtype=torch.float32), self.inv_freq)
        cos, sin = torch.cat((angles, angles), -1).cos(), torch.cat((angles, angles), -1).sin()
        return ((q.float() * cos + rotate_half(q.float()) * sin).to(q.dtype),
                (k.float() * cos + rotate_half(k.float()) * sin).to(k.dtype))


class Attention(nn.Module):
    def __init__(self, c, mode):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
        h = c["hidden_size"]
        self.q_proj = te.Linear(h, self.heads * self.head_dim, bias=False, mode=mode)
        self.k_proj = te.Linear(h, self.kv_heads * self.head_dim, bias=False, mode=mode)
        self.v_proj = te.Linear(h, self.kv_heads * self.head_dim, bias=False, mode=mode)
        self.o_proj = te.Linear(self.heads * self.head_dim, h, bias=False, mode=mode)
        self.q_norm = te.RMSNorm(self.head_dim, eps=c["rms_norm_eps"])
        self.k_norm = te.RMSNorm(self.head_dim, eps=c["rms_norm_eps"])

    def forward(self, x, rotary):
        b, t, h = x.shape
        x2 = x.reshape(b * t, h)
        q = self.q_norm(self.q_proj(x2).reshape(b, t, self.heads, self.head_dim)).transpose(1, 2)
        k = self.k_norm(self.k_proj(x2).reshape(b, t, self.kv_heads, self.head_dim)).transpose(1, 2)
        v = self.v_proj(x2).reshape(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        q, k = rotary(q, k)
        repeat = self.heads // self.kv_heads
        k, v = k.repeat_interleave(repeat, dim=1), v.repeat_interleave(repeat, dim=1)
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(self.head_dim)
        scores = scores.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf"))
        out = (scores.float().softmax(-1).to(v.dtype) @ v).transpose(1, 2).reshape(b * t, self.heads * self.head_dim)
        return self.o_proj(out).reshape(b, t, h)


class MLP(nn.Module):
    def __init__(self, c, mode):
        super().__init__()
        h, i = c["hidden_size"], c["intermediate_size"]
        self.gate_proj = te.Linear(h, i, bias=False, mode=mode)
        self.up_proj = te.Linear(h, i, bias=False, mode=mode)
        self.down_proj = te.Linear(i, h, bias=False, mode=mode)

    def forward(self, x):
        b, t, h = x.shape
        x2 = x.reshape(b * t, h)
        return self.down_proj(F.silu(self.gate_proj(x2)) * self.up_proj(x2)).reshape(b, t, h)


class DecoderLayer(nn.Module):
    def __init__(self, c, mode):
        super().__init__()
        self.input_layernorm = te.RMSNorm(c["hidden_size"], eps=c["rms_norm_eps"])
        self.self_attn = Attention(c, mode)
        self.post_attention_layernorm = te.RMSNorm(c["hidden_size"], eps=c["rms_norm_eps"])
        self.mlp = MLP(c, mode)

    def forward(self, x, rotary):
        x = x + self.self_attn(self.input_layernorm(x), rotary)
        return x + self.mlp(self.post_attention_layernorm(x))


class Backbone(nn.Module):
    def __init__(self, c, mode):
        super().__init__()
        self.embed_tokens = nn.Embedding(c["vocab_size"], c["hidden_size"])
        self.layers = nn.ModuleList(DecoderLayer(c, mode) for _ in range(c["num_hidden_layers"]))
        self.norm = te.RMSNorm(c["hidden_size"], eps=c["rms_norm_eps"])


class Qwen3ForCausalLM(nn.Module):
    """The decoder, with Hugging Face's module names. `layer_call(index, layer, x)` runs one layer
    (the study wraps it for precision per layer and activation recomputation)."""

    def __init__(self, config, mode="relaxed"):
        super().__init__()
        self.config = check_config(dict(config))
        c = self.config
        self.model = Backbone(c, mode)
        self.rotary = RotaryHalves(c["head_dim"], float(c["rope_theta"]))
        self.lm_head = None if c["tie_word_embeddings"] else nn.Linear(c["hidden_size"], c["vocab_size"], bias=False)
        self.layer_call = lambda index, layer, x: layer(x, self.rotary)

    def init_weights(self, seed):
        """A fresh model for a short pretraining: normal(0, 1 / sqrt(fan_in)) matrices, normal(0,
        0.5) embeddings, unit norms. (Qwen3's own initializer_range of 0.02 suits widths of 1024 and
        more; at 128 it only slows a few hundred steps down.)"""
        g = torch.Generator().manual_seed(seed)
        for name, p in self.named_parameters():
            with torch.no_grad():
                if name.endswith("embed_tokens.weight"):
                    p.copy_(torch.randn(p.shape, generator=g) * 0.5)
                elif p.dim() == 2:
                    p.copy_(torch.randn(p.shape, generator=g) / math.sqrt(p.shape[1]))
                else:
                    p.fill_(1.0)

    def forward(self, tokens):
        b, t = tokens.shape
        x = self.model.embed_tokens(tokens)
        for i, layer in enumerate(self.model.layers):
            x = self.layer_call(i, layer, x)
        x = self.model.norm(x)
        head = self.model.embed_tokens.weight if self.lm_head is None else self.lm_head.weight
        return F.linear(x, head.to(x.dtype))

    def hf_state_dict(self):
        """Hugging Face's tensor names and values (LoRA wrappers' own names mapped back)."""
        out = {}
        for name, t in self.state_dict().items():
            if name.endswith("_extra_state") or "lora_" in name:
                continue
            out[name.replace(".base_layer.", ".")] = t
        return out

    def load_hf_state_dict(self, tensors):
        """Loads Hugging Face-named tensors; every expected tensor must be there with its shape."""
        own = self.hf_state_dict()
        missing = sorted(set(own) - set(tensors))
        if self.config["tie_word_embeddings"]:
            unexpected = sorted(set(tensors) - set(own) - {"lm_head.weight"})
        else:
            unexpected = sorted(set(tensors) - set(own))
        if missing:
            raise ValueError(f"checkpoint lacks {len(missing)} tensor(s), e.g. {', '.join(missing[:3])}")
        if unexpected:
            raise ValueError(f"checkpoint has {len(unexpected)} tensor(s) this config does not, e.g. {', '.join(unexpected[:3])}")
        params = dict(self.named_parameters())
        for name, value in tensors.items():
            if name not in own:
                continue
            target = params[name] if name in params else params[_wrapped_name(name)]
            if tuple(value.shape) != tuple(target.shape):
                raise ValueError(f"checkpoint tensor {name} has shape {tuple(value.shape)}, the config gives {tuple(target.shape)}")
            with torch.no_grad():
                target.copy_(value.to(target.dtype))


def _wrapped_name(name):
    parts = name.split(".")
    return ".".join(parts[:-1] + ["base_layer", parts[-1]])


# ---- LoRA --------------------------------------------------------------------------------------

class LoRALinear(nn.Module):
    """y = base(x) + (alpha / r) * B(A(x)): a frozen te.Linear (the recipe's GEMMs, its weight
    possibly stored quantized) and a high-precision low-rank update (A [r, in] uniform as PEFT
    initialises it, B [out, r] zero, so training starts from the base model exactly)."""

    def __init__(self, base, rank, alpha, generator):
        super().__init__()
        self.base_layer = base
        base.weight.requires_grad_(False)
        bound = 1.0 / math.sqrt(base.in_features)  # PEFT's kaiming_uniform_(a=sqrt(5)) bound
        self.lora_A = nn.Parameter((torch.rand(rank, base.in_features, generator=generator) * 2 - 1) * bound)
        self.lora_B = nn.Parameter(torch.zeros(base.out_features, rank))
        self.scaling = alpha / rank

    @property
    def in_features(self):
        return self.base_layer.in_features

    @property
    def out_features(self):
        return self.base_layer.out_features

    def forward(self, x):
        update = F.linear(F.linear(x, self.lora_A.to(x.dtype)), self.lora_B.to(x.dtype)) * self.scaling
        return self.base_layer(x) + update


def add_lora(model, rank, alpha, targets, seed):
    """Freezes every parameter and wraps each targeted te.Linear in a LoRALinear; returns the
    adapters' parameters by name."""
    for p in model.parameters():
        p.requires_grad_(False)
    g = torch.Generator().manual_seed(seed)
    for layer in model.model.layers:
        for parent in (layer.self_attn, layer.mlp):
            for name in targets:
                if hasattr(parent, name):
                    setattr(parent, name, LoRALinear(getattr(parent, name), rank, alpha, g))
    return [(n, p) for n, p in model.named_parameters() if p.requires_grad]


def adapter_state_dict(model):
    """The adapters under PEFT's names (base_model.model.<module>.lora_A.weight, ...)."""
    out = {}
    for name, t in model.state_dict().items():
        if ".lora_A" in name or ".lora_B" in name:
            module, which = name.rsplit(".", 1)
            out[f"base_model.model.{module}.{which}.weight"] = t
    return out


# ---- safetensors --------------------------------------------------------------------------------

_DTYPES = {"F32": (torch.float32, np.float32), "BF16": (torch.bfloat16, np.int16), "F16": (torch.float16, np.float16)}
_NAMES = {v[0]: k for k, v in _DTYPES.items()}


def save_safetensors(path, tensors, metadata=None):
    """Writes {name: tensor} (float32 / bfloat16 / float16) as one safetensors file, names sorted."""
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        t = tensors[name].detach().contiguous()
        if t.dtype not in _NAMES:
            raise ValueError(f"{name}: dtype {t.dtype} is not written (float32, bfloat16, float16)")
        raw = (t.view(torch.int16) if t.dtype == torch.bfloat16 else t).numpy().tobytes()
        header[name] = {"dtype": _NAMES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    header["__metadata__"] = dict(metadata or {"format": "pt"})
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for raw in blobs:
            f.write(raw)
    os.replace(tmp, path)


def load_safetensors(path):
    """{name: tensor} of one safetensors file (F32, BF16, F16), checked against its size."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise ValueError(f"{path}: not a safetensors file (shorter than its header length)")
    (n,) = struct.unpack("<Q", data[:8])
    if n > len(data) - 8:
        raise ValueError(f"{path}: header of {n} bytes runs past the end of the file ({len(data)} bytes)")
    try:
        header = json.loads(data[8:8 + n])
    except ValueError as e:
        raise ValueError(f"{path}: the header is not JSON ({e})")
    body = memoryview(data)[8 + n:]
    out = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        if entry.get("dtype") not in _DTYPES:
            raise ValueError(f"{path}: tensor {name} has dtype {entry.get('dtype')!r} (read: {', '.join(_DTYPES)})")
        torch_dtype, np_dtype = _DTYPES[entry["dtype"]]
        start, end = entry["data_offsets"]
        count = int(np.prod(entry["shape"])) if entry["shape"] else 1
        if not 0 <= start <= end <= len(body) or end - start != count * np.dtype(np_dtype).itemsize:
            raise ValueError(f"{path}: tensor {name}'s byte range [{start}, {end}) does not fit its shape or the file")
        array = np.frombuffer(body[start:end], dtype=np_dtype).reshape(entry["shape"]).copy()
        t = torch.from_numpy(array)
        out[name] = t.view(torch.bfloat16) if torch_dtype == torch.bfloat16 else t
    return out


def load_checkpoint_dir(directory):
    """(config, {name: tensor}) of a Hugging Face model directory: config.json and model.safetensors,
    or the shards listed by model.safetensors.index.json."""
    config_path = os.path.join(directory, "config.json")
    if not os.path.exists(config_path):
        raise ValueError(f"{directory}: no config.json (a Hugging Face model directory has one)")
    with open(config_path) as f:
        config = check_config(json.load(f))
    single, index = os.path.join(directory, "model.safetensors"), os.path.join(directory, "model.safetensors.index.json")
    if os.path.exists(single):
        return config, load_safetensors(single)
    if os.path.exists(index):
        with open(index) as f:
            shards = sorted(set(json.load(f)["weight_map"].values()))
        tensors = {}
        for shard in shards:
            tensors.update(load_safetensors(os.path.join(directory, shard)))
        return config, tensors
    raise ValueError(f"{directory}: neither model.safetensors nor model.safetensors.index.json")


def save_checkpoint_dir(directory, config, tensors, dtype=torch.bfloat16):
    """config.json and model.safetensors (every tensor in `dtype`, as Hugging Face checkpoints are)."""
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(config, f, indent=1)
    save_safetensors(os.path.join(directory, "model.safetensors"), {k: v.to(dtype) for k, v in tensors.items()})
