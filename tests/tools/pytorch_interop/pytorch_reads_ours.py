import sys, json
import numpy as np, torch
from safetensors.torch import load_file
from safetensors import safe_open
print("torch", torch.__version__)
E2M1 = torch.tensor([0, .5, 1, 1.5, 2, 3, 4, 6, -0., -.5, -1, -1.5, -2, -3, -4, -6])
def unpack(w):
    lo = (w & 0xF).long(); hi = (w >> 4).long()
    return torch.stack([E2M1[lo], E2M1[hi]], -1).reshape(w.shape[0], -1)
t = load_file("nv.safetensors")
with safe_open("nv.safetensors", "pt") as f: print("metadata keys", sorted(f.metadata().keys()))
p = "model.layers.0.mlp.down_proj"
for k, v in t.items(): print(k, v.dtype, tuple(v.shape))
x = unpack(t[p + ".weight"])
s = t[p + ".weight_scale"].float().repeat_interleave(16, 1)
deq = x * s * t[p + ".weight_scale_2"]
ours = torch.from_numpy(np.load("nv_hat.npy"))
print("nvfp4 torch dequant == ours:", torch.equal(deq, ours), (deq - ours).abs().max().item())
m = load_file("mx.safetensors")
xm = unpack(m["W.weight"]); sm = torch.exp2(m["W.weight_scale"].float() - 127).repeat_interleave(32, 1)
print("mxfp4 torch dequant == ours:", torch.equal(xm * sm, torch.from_numpy(np.load("mx_hat.npy"))))
m8 = load_file("m8.safetensors")
print("mxfp8 weight dtype", m8["W.weight"].dtype)
d8 = m8["W.weight"].float() * torch.exp2(m8["W.weight_scale"].float() - 127).repeat_interleave(32, 1)
print("mxfp8 torch dequant == ours:", torch.equal(d8, torch.from_numpy(np.load("m8_hat.npy"))))
