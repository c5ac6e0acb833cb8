import os, numpy as np, torch
from safetensors.torch import save_file
out = os.environ["OUT"]
rng = np.random.default_rng(0)
a = rng.standard_normal((32, 64)).astype(np.float32)
np.save(f"{out}/c_f32.npy", a)
np.save(f"{out}/f_f32.npy", np.asfortranarray(a))
np.save(f"{out}/f16.npy", a.astype(np.float16))
np.save(f"{out}/f64_3d.npy", a.astype(np.float64).reshape(4, 8, 64))
np.save(f"{out}/a_f32_ref.npy", a)   # the reference values
t = torch.from_numpy(a)
save_file({"x": t, "x_bf16": t.to(torch.bfloat16), "x_f16": t.half(), "x_f8": t.to(torch.float8_e4m3fn),
           "i": torch.arange(5, dtype=torch.int64)}, f"{out}/torch.safetensors", metadata={"format": "pt"})
print("written", sorted(os.listdir(out)))
