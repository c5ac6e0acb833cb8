# te.TransformerLayer and the attention / MLP modules as TE's own tests exercise them: the layer
# against a torch GPT block (TE's test_numerics.py test_gpt_accuracy: torch's LayerNorm,
# MultiheadAttention and a tanh-GELU MLP sharing the parameters; fp32 tolerances output atol 5e-3,
# gradients atol 5e-2 rtol 1e-2), the residual / layernorm wiring of every arrangement against the
# submodules composed by hand, TE's parameter names, the new LayerNormMLP activations against torch,
# training under each recipe (the loss falls), and TE's test_sanity.py matrix (every module x
# recipe x dtype x zero tokens: forward and backward run, shapes, dtypes and finite values).
import pytest

torch = pytest.importorskip("torch")

import nvfp4.torch as te  # noqa: E402
from nvfp4.common import recipe as te_recipe  # noqa: E402

RECIPES = {
    "none": lambda: None,
    "delayed": te_recipe.DelayedScaling,
    "current": te_recipe.Float8CurrentScaling,
    "block": te_recipe.Float8BlockScaling,
    "mxfp8": te_recipe.MXFP8BlockScaling,
    "nvfp4": te_recipe.NVFP4BlockScaling,
}


def region(recipe):
    return te.autocast(enabled=recipe is not None, recipe=recipe)


# ---- against a torch GPT block ---------------------------------------------------------------

class TorchGPT(torch.nn.Module):
    """TE's test_numerics.py TorchGPT: LN -> torch MHA -> residual, LN -> fc1 -> tanh GELU -> fc2 -> residual."""

    def __init__(self, hidden, heads, parallel):
        super().__init__()
        self.ln = torch.nn.LayerNorm(hidden, eps=1e-5)
        self.attn = torch.nn.MultiheadAttention(hidden, heads, dropout=0.1, bias=True)
        self.ln_mlp = torch.nn.LayerNorm(hidden, eps=1e-5)
        self.fc1, self.fc2 = torch.nn.Linear(hidden, 4 * hidden), torch.nn.Linear(4 * hidden, hidden)
        self.parallel = parallel

    def mlp(self, x):
        return self.fc2(torch.nn.functional.gelu(self.fc1(self.ln_mlp(x)), approximate="tanh"))

    def forward(self, x, attention_mask=None):
        a = self.ln(x)
        b = self.attn(a, a, a, attn_mask=attention_mask, need_weights=False)[0]
        if self.parallel:
            return x + b + self.mlp(x)
        x = x + b
        return x + self.mlp(x)


@pytest.mark.parametrize("parallel_attention_mlp", [False, True])
def test_transformer_layer_matches_a_torch_gpt_block(parallel_attention_mlp):
    torch.manual_seed(0)
    s, b, hidden, heads = 16, 2, 64, 4
    layer = te.TransformerLayer(hidden, 4 * hidden, heads, fuse_qkv_params=True, qkv_weight_interleaved=False,
                                parallel_attention_mlp=parallel_attention_mlp).eval()
    ref = TorchGPT(hidden, heads, parallel_attention_mlp).eval()
    with torch.no_grad():
        qkv, mlp = layer.self_attention.layernorm_qkv, layer.layernorm_mlp
        for dst, src in ((ref.ln.weight, qkv.layer_norm_weight), (ref.ln.bias, qkv.layer_norm_bias),
                         (ref.attn.in_proj_weight, qkv.weight), (ref.attn.in_proj_bias, qkv.bias),
                         (ref.attn.out_proj.weight, layer.self_attention.proj.weight),
                         (ref.attn.out_proj.bias, layer.self_attention.proj.bias), (ref.ln_mlp.weight, mlp.layer_norm_weight),
                         (ref.ln_mlp.bias, mlp.layer_norm_bias), (ref.fc1.weight, mlp.fc1_weight), (ref.fc1.bias, mlp.fc1_bias),
                         (ref.fc2.weight, mlp.fc2_weight), (ref.fc2.bias, mlp.fc2_bias)):
            dst.copy_(src)
    mask = torch.ones(s, s, dtype=torch.bool).triu(1)
    results = []
    for block in (layer, ref):
        x = torch.randn(s, b, hidden, generator=torch.Generator().manual_seed(1)).requires_grad_()
        out = block(x, attention_mask=mask)
        out.sum().backward()
        results.append([out, x.grad] + [p.grad for p in block.parameters()])
    got, want = results
    assert len(got) == len(want)
    assert torch.allclose(got[0], want[0], atol=5e-3, rtol=1.3e-6)  # TE: output atol 5e-3 (fp32)
    for g, w in zip(got[1:], want[1:]):
        assert g.shape == w.shape
        assert torch.allclose(g, w, atol=5e-2, rtol=1e-2)  # TE: gradients atol 5e-2, rtol 1e-2
        assert torch.allclose(g, w, atol=1e-4, rtol=1e-4)  # both float32: far closer than TE asks


# ---- the wiring of each arrangement, against the submodules composed by hand ----------------------

def _plus(out, bias):
    return out if bias is None or bias.numel() == 0 else out + bias


def _compose(layer, x, emb=None, enc=None):
    """The layer's forward written from TE's documentation, calling its submodules one by one
    (TE's bias-dropout-add: residual + (out + bias))."""
    post_ln = layer.apply_residual_connection_post_layernorm
    attn = layer.self_attention(x, rotary_pos_emb=emb)
    if post_ln and not layer.output_layernorm:
        out, bias, residual = attn
        x = residual + _plus(out, bias)
    elif not layer.parallel_attention_mlp:
        out, bias = attn
        x = x + _plus(out, bias)
    if layer.layer_type == "decoder":
        cross = layer.inter_attention(x, encoder_output=enc, rotary_pos_emb=emb)
        out, bias, residual = cross if post_ln else (*cross, x)
        x = residual + _plus(out, bias)
    mlp = layer.layernorm_mlp(x)
    if post_ln:
        out, bias, residual = mlp
        y = residual + _plus(out, bias)
    elif layer.parallel_attention_mlp:
        y = x + (attn + mlp)
    else:
        out, bias = mlp
        y = x + _plus(out, bias)
    return layer.layernorm(y) if layer.output_layernorm else y


@pytest.mark.parametrize("options", [
    dict(),
    dict(apply_residual_connection_post_layernorm=True),
    dict(apply_residual_connection_post_layernorm=True, output_layernorm=True),  # BERT
    dict(parallel_attention_mlp=True, normalization="RMSNorm", activation="swiglu"),
    dict(layer_type="decoder", num_gqa_groups=2),  # T5 decoder
    dict(bias=False, zero_centered_gamma=True, activation="glu", qk_norm_type="RMSNorm"),
], ids=["pre_ln", "post_ln", "bert", "parallel_rmsnorm_swiglu", "decoder_gqa", "nobias_glu_qknorm"])
def test_residual_and_layernorm_wiring(options):
    torch.manual_seed(0)
    layer = te.TransformerLayer(32, 64, 4, hidden_dropout=0.0, attention_dropout=0.0, **options).eval()
    with torch.no_grad():  # nonzero biases and gammas so that every term shows
        for p in layer.parameters():
            p.add_(0.1 * torch.randn_like(p))
    x, enc = torch.randn(6, 2, 32), torch.randn(9, 2, 32)
    emb = te.RotaryPositionEmbedding(8)(9)
    with torch.no_grad():
        out = layer(x, encoder_output=enc, rotary_pos_emb=emb)
        assert torch.equal(out, _compose(layer, x, emb, enc))


def test_transformer_layer_parameter_names_are_tes():
    names = list(te.TransformerLayer(32, 64, 2).state_dict())
    assert names == [
        "self_attention.layernorm_qkv.layer_norm_weight", "self_attention.layernorm_qkv.layer_norm_bias",
        "self_attention.layernorm_qkv.query_weight", "self_attention.layernorm_qkv.key_weight",
        "self_attention.layernorm_qkv.value_weight", "self_attention.layernorm_qkv.query_bias",
        "self_attention.layernorm_qkv.key_bias", "self_attention.layernorm_qkv.value_bias",
        "self_attention.layernorm_qkv._extra_state", "self_attention.core_attention._extra_state",
        "self_attention.proj.weight", "self_attention.proj.bias", "self_attention.proj._extra_state",
        "layernorm_mlp.layer_norm_weight", "layernorm_mlp.layer_norm_bias", "layernorm_mlp.fc1_weight",
        "layernorm_mlp.fc1_bias", "layernorm_mlp.fc2_weight", "layernorm_mlp.fc2_bias", "layernorm_mlp._extra_state"]
    bert = list(te.TransformerLayer(32, 64, 2, output_layernorm=True, fuse_qkv_params=True, layer_type="decoder").state_dict())
    assert bert[:4] == ["self_attention.qkv.weight", "self_attention.qkv.bias", "self_attention.qkv._extra_state",
                        "self_attention.core_attention._extra_state"]
    assert "inter_attention.layernorm_query.layer_norm_weight" in bert and "inter_attention.key_value.weight" in bert
    assert bert[-2:] == ["layernorm.weight", "layernorm.bias"]


def test_hidden_dropout_and_drop_path_follow_torchs_seed_and_training_mode():
    torch.manual_seed(0)
    layer = te.TransformerLayer(32, 64, 2, hidden_dropout=0.5, attention_dropout=0.5, drop_path_rate=0.5)
    x = torch.randn(4, 3, 32)
    torch.manual_seed(3)
    first = layer(x)
    torch.manual_seed(3)
    assert torch.equal(layer(x), first)
    layer.eval()
    plain = layer(x)
    assert not torch.equal(first, plain)
    layer.hidden_dropout, layer.drop_path = 0.0, None
    layer.self_attention.core_attention.attention_dropout = 0.0
    layer.train()
    assert torch.equal(layer(x), plain)


# ---- LayerNormMLP: TE's activations ---------------------------------------------------------------

def _torch_mlp(mlp, x, act):
    h = torch.nn.functional.linear(torch.nn.functional.layer_norm(x, (x.shape[-1],), mlp.layer_norm_weight, mlp.layer_norm_bias),
                                   mlp.fc1_weight, mlp.fc1_bias)
    return torch.nn.functional.linear(act(h), mlp.fc2_weight, mlp.fc2_bias)


def _clamped(h, limit=7.0, alpha=1.702, offset=1.0):
    a, b = h.chunk(2, dim=-1)
    a = torch.minimum(a, torch.tensor(limit))
    return a * torch.sigmoid(alpha * a) * (torch.clamp(b, -limit, limit) + offset)


@pytest.mark.parametrize("activation, act, params", [
    ("glu", lambda h: torch.sigmoid(h.chunk(2, -1)[0]) * h.chunk(2, -1)[1], None),
    ("clamped_swiglu", _clamped, None),
    ("clamped_swiglu", lambda h: _clamped(h, limit=0.5, alpha=1.0), {"limit": 0.5, "alpha": 1.0}),
])
def test_layernorm_mlp_new_activations_match_torch(activation, act, params):
    torch.manual_seed(0)
    mlp = te.LayerNormMLP(32, 48, activation=activation, activation_params=params)
    assert mlp.fc1_weight.shape == (96, 32)
    x = torch.randn(8, 32) * 4
    assert torch.allclose(mlp(x), _torch_mlp(mlp, x, act), atol=1e-5)
    with pytest.raises(ValueError, match="activation_params"):
        te.LayerNormMLP(32, 48, activation="gelu", activation_params={"limit": 1.0})


# ---- training under each recipe -------------------------------------------------------------------

@pytest.mark.parametrize("name", list(RECIPES))
def test_transformer_layer_trains_under_each_recipe(name):
    torch.manual_seed(0)
    layer = te.TransformerLayer(64, 128, 4, hidden_dropout=0.0, attention_dropout=0.0, normalization="RMSNorm",
                                activation="swiglu", params_dtype=torch.bfloat16, seed=1)
    optimizer = torch.optim.Adam(layer.parameters(), lr=1e-2)
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(32, 2, 64, generator=gen).to(torch.bfloat16)
    target = torch.randn(32, 2, 64, generator=gen).to(torch.bfloat16)
    emb = te.RotaryPositionEmbedding(16)(32)
    losses = []
    for _ in range(10):
        optimizer.zero_grad()
        with region(RECIPES[name]()):
            out = layer(x, rotary_pos_emb=emb)
        loss = (out.float() - target.float()).pow(2).mean()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert all(map(lambda v: v == v and v < float("inf"), losses))
    assert losses[-1] < 0.7 * losses[0], losses


# ---- TE's test_sanity matrix ---------------------------------------------------------------------

def _sanity_module(kind, dtype):
    common = dict(params_dtype=dtype)
    if kind == "dpa":
        return te.DotProductAttention(2, 32)
    if kind == "mha":
        return te.MultiheadAttention(64, 2, input_layernorm=True, **common)
    if kind == "gpt":
        return te.TransformerLayer(64, 256, 2, **common)
    if kind == "bert":
        return te.TransformerLayer(64, 256, 2, apply_residual_connection_post_layernorm=True, output_layernorm=True,
                                   **common)
    if kind == "t5":
        return te.TransformerLayer(64, 256, 2, layer_type="decoder", normalization="RMSNorm", activation="geglu", **common)
    if kind == "mlp_glu":
        return te.LayerNormMLP(64, 256, activation="glu", **common)
    if kind == "grouped":
        return te.GroupedLinear(3, 64, 256, **common)
    raise AssertionError(kind)


@pytest.mark.parametrize("batch", [0, 2])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("name", list(RECIPES))
@pytest.mark.parametrize("kind", ["dpa", "mha", "gpt", "bert", "t5", "mlp_glu", "grouped"])
def test_sanity(kind, name, dtype, batch):
    torch.manual_seed(0)
    module = _sanity_module(kind, dtype)
    s = 32
    recipe = RECIPES[name]()
    if name == "nvfp4":  # TE's test_sanity runs nvfp4_vanilla (its RHT would refuse float32)
        recipe = te_recipe.NVFP4BlockScaling(disable_rht=True, disable_stochastic_rounding=True, disable_2d_quantization=True)
    rows = s * batch
    if kind == "dpa":
        inputs = [torch.randn(s, batch, 2, 32).to(dtype).requires_grad_() for _ in range(3)]
    elif kind == "grouped":
        inputs = [torch.randn(rows, 64).to(dtype).requires_grad_()]
    else:
        inputs = [torch.randn(s, batch, 64).to(dtype).requires_grad_()]
    kwargs = {}
    if kind == "t5":  # TE's T5 sanity, with the encoder's padding mask used (a (q, kv) pair for cross attention)
        no_pad = torch.zeros(batch, 1, 1, s, dtype=torch.bool)
        kwargs = dict(encoder_output=inputs[0], enc_dec_attn_mask=(no_pad, no_pad), enc_dec_attn_mask_type="padding")
    if kind == "grouped":
        kwargs = dict(m_splits=[rows // 2, 0, rows - rows // 2])
    with region(recipe):
        out = module(*inputs, **kwargs)
    out = out[0] if isinstance(out, tuple) else out
    out.float().sum().backward()
    assert out.dtype == dtype and torch.isfinite(out.float()).all()
    assert out.shape == ((s * batch, 256) if kind == "grouped" else (s, batch, 64))
    for t in inputs:
        assert t.grad is not None and t.grad.dtype == dtype and torch.isfinite(t.grad.float()).all()
    for pname, p in module.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad.float()).all(), pname


@pytest.mark.parametrize("name", ["none", "current", "nvfp4"])
def test_sanity_amp(name):
    # TE's _test_sanity_e2e_amp: float32 parameters under torch autocast (bf16) give a bf16 output,
    # float32 input and parameter gradients.
    torch.manual_seed(0)
    layer = te.TransformerLayer(64, 256, 2)
    x = torch.randn(32, 2, 64, requires_grad=True)
    with torch.autocast("cpu", dtype=torch.bfloat16), region(RECIPES[name]()):
        out = layer(x)
    out.float().sum().backward()
    assert out.dtype == torch.bfloat16 and x.grad.dtype == torch.float32
    assert all(p.grad.dtype == torch.float32 for p in layer.parameters())


def test_constructor_refuses_what_one_cpu_process_cannot_do():
    with pytest.raises(ValueError, match="tp_size"):
        te.TransformerLayer(32, 64, 2, tp_size=2)
    with pytest.raises(ValueError, match="layer_type 'middle' is not supported"):
        te.TransformerLayer(32, 64, 2, layer_type="middle")
    with pytest.raises(ValueError, match="parallel_attention requires layer_type='encoder'"):
        te.TransformerLayer(32, 64, 2, parallel_attention_mlp=True, layer_type="decoder")
    with pytest.raises(ValueError, match="device="):
        te.TransformerLayer(32, 64, 2, device="cuda")
    layer = te.TransformerLayer(32, 64, 2)
    with pytest.raises(TypeError, match="non-bool dtypes"):
        layer(torch.randn(4, 1, 32), attention_mask=torch.zeros(1, 1, 1, 4), self_attn_mask_type="padding")


def test_state_dict_and_deepcopy_keep_every_projections_delayed_scaling_state():
    import copy
    import io
    torch.manual_seed(0)
    layer = te.TransformerLayer(64, 128, 4, hidden_dropout=0.0, attention_dropout=0.0, layer_type="decoder")
    x = torch.randn(16, 2, 64)
    for _ in range(2):
        with te.autocast(recipe=te_recipe.DelayedScaling()):
            layer(x, encoder_output=x * 2).sum().backward()
    buffer = io.BytesIO()
    torch.save(layer.state_dict(), buffer)
    buffer.seek(0)
    loaded = te.TransformerLayer(64, 128, 4, hidden_dropout=0.0, attention_dropout=0.0, layer_type="decoder")
    loaded.load_state_dict(torch.load(buffer))
    with torch.no_grad(), te.autocast(recipe=te_recipe.DelayedScaling()):
        want = layer(x, encoder_output=x * 2)
        assert torch.equal(loaded(x, encoder_output=x * 2), want)
        assert torch.equal(copy.deepcopy(layer)(x, encoder_output=x * 2), want)
    fresh = te.TransformerLayer(64, 128, 4, hidden_dropout=0.0, attention_dropout=0.0, layer_type="decoder")
    fresh.load_state_dict({k: v for k, v in layer.state_dict().items() if not k.endswith("_extra_state")}, strict=False)
    with torch.no_grad(), te.autocast(recipe=te_recipe.DelayedScaling()):
        assert not torch.equal(fresh(x, encoder_output=x * 2), want)  # the scales matter: the state is what carried them


def test_thd_layer_equals_each_sequence_alone():
    # Packed sequences (attn_input_format="thd", padding_causal, rotary positions restarting per
    # sequence) give what each sequence gives by itself in bshd with a causal mask.
    torch.manual_seed(0)
    packed = te.TransformerLayer(32, 64, 2, attn_input_format="thd", self_attn_mask_type="padding_causal",
                                 hidden_dropout=0.0, attention_dropout=0.0).eval()
    alone = te.TransformerLayer(32, 64, 2, attn_input_format="bshd", hidden_dropout=0.0, attention_dropout=0.0).eval()
    alone.load_state_dict(packed.state_dict())
    cu = torch.tensor([0, 3, 8], dtype=torch.int32)
    x = torch.randn(8, 32)
    emb = te.RotaryPositionEmbedding(16)(8)
    with torch.no_grad():
        out = packed(x, cu_seqlens_q=cu, cu_seqlens_kv=cu, rotary_pos_emb=emb)
        each = torch.cat([alone(x[None, 0:3], rotary_pos_emb=emb)[0], alone(x[None, 3:8], rotary_pos_emb=emb)[0]])
    assert torch.allclose(out, each, atol=1e-6)
