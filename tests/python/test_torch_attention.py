# nvfp4.torch's attention family against independent references: DotProductAttention against a
# float64 softmax(Q K^T) V written here (TE's test_numerics.py test_dpa_accuracy tolerances: output
# atol 5e-3 in fp32 / 5e-2 in bf16, gradients atol 5e-2 rtol 1e-2; plus a tighter bound, since the
# core computes in float32 and rounds once), the formats and masks against the equivalent bshd
# call, GQA against repeated K / V heads, rotary embeddings against the rotation written with
# cos / sin here, MultiheadAttention against torch.nn.MultiheadAttention (TE's test_mha_accuracy
# and its tolerances), and the FP8 casts of fp8_dpa against the casts applied by hand.
import math

import pytest

torch = pytest.importorskip("torch")

import nvfp4  # noqa: E402
import nvfp4.torch as te  # noqa: E402
from nvfp4.common import recipe as te_recipe  # noqa: E402
from nvfp4.torch.attention.rope import apply_rotary_pos_emb  # noqa: E402

# TE's test_numerics.py dtype_tols and test_dpa_accuracy / test_mha_accuracy tolerances.
TE_RTOL = {torch.float32: 1.3e-6, torch.bfloat16: 1.6e-2}
TE_OUT_ATOL = {torch.float32: 5e-3, torch.bfloat16: 5e-2}
TE_GRAD = dict(atol=5e-2, rtol=1e-2)


def te_close(actual, expected, atol, rtol):
    assert torch.allclose(actual.float(), expected.float(), atol=atol, rtol=rtol), (actual.float() - expected.float()).abs().max()


def reference_attention(q, k, v, mask=None, scale=None, zero_masked=False, bias=None):
    """float64 softmax(scale Q K^T + bias, masked) V for bshd q [b, sq, h, d], k / v [b, sk, g, d];
    mask True = masked, broadcastable to [b, h, sq, sk]. Returns [b, sq, h, dv] float64."""
    q, k, v = (t.double() for t in (q, k, v))
    h, g = q.shape[2], k.shape[2]
    k, v = k.repeat_interleave(h // g, dim=2), v.repeat_interleave(h // g, dim=2)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = torch.einsum("bqhd,bkhd->bhqk", q, k) * scale
    if bias is not None:
        s = s + bias.double()
    if mask is not None:
        s = s.masked_fill(mask, -1e30)
    p = torch.softmax(s, dim=-1)
    if zero_masked and mask is not None:
        p = p.masked_fill(mask, 0.0)
    return torch.einsum("bhqk,bkhd->bqhd", p, v)


def qkv(b, sq, sk, h, g, d, dtype=torch.float32, dv=None, seed=0):
    gen = torch.Generator().manual_seed(seed)
    make = lambda *shape: torch.randn(*shape, generator=gen).to(dtype).requires_grad_()  # noqa: E731
    return make(b, sq, h, d), make(b, sk, g, d), make(b, sk, g, dv or d)


def grads(out, *tensors, seed=1):
    gen = torch.Generator().manual_seed(seed)
    dy = torch.randn(out.shape, generator=gen).to(out.dtype)
    return torch.autograd.grad(out, tensors, dy), dy


def causal(sq, sk, bottom_right=False):
    offset = sk - sq if bottom_right else 0
    return torch.ones(sq, sk, dtype=torch.bool).triu(diagonal=1 + offset)


# ---- DotProductAttention against the float64 reference -------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("mask_type", ["causal", "no_mask"])
def test_dpa_matches_a_float64_reference(dtype, mask_type):
    b, s, h, d = 2, 24, 4, 16
    q, k, v = qkv(b, s, s, h, h, d, dtype)
    dpa = te.DotProductAttention(h, d, qkv_format="bshd", attn_mask_type=mask_type)
    out = dpa(q, k, v)
    assert out.shape == (b, s, h * d) and out.dtype == dtype
    mask = causal(s, s) if mask_type == "causal" else None
    ref_q, ref_k, ref_v = (t.detach().double().requires_grad_() for t in (q, k, v))
    ref = reference_attention(ref_q, ref_k, ref_v, mask).reshape(b, s, h * d)
    te_close(out, ref, TE_OUT_ATOL[dtype], TE_RTOL[dtype])
    # One rounding of a float32 computation: within a few float32 ulps (fp32), within one bf16 ulp (bf16).
    bound = 1e-5 if dtype == torch.float32 else 2.0 ** -8
    assert ((out.double() - ref).abs() <= bound * ref.abs() + 1e-6).all()
    (dq, dk, dv), dy = grads(out, q, k, v)
    ref_grads = torch.autograd.grad(ref, (ref_q, ref_k, ref_v), dy.double())
    for got, want in zip((dq, dk, dv), ref_grads):
        assert got.dtype == dtype
        te_close(got, want, **TE_GRAD)
        if dtype == torch.float32:
            assert torch.allclose(got.double(), want, atol=1e-5, rtol=1e-5)


def test_sbhd_is_bshd_transposed_and_softmax_scale_applies():
    b, s, h, d = 2, 10, 2, 8
    q, k, v = qkv(b, s, s, h, h, d)
    bshd = te.DotProductAttention(h, d, qkv_format="bshd", softmax_scale=0.3)(q, k, v)
    sbhd = te.DotProductAttention(h, d, softmax_scale=0.3)(*(t.transpose(0, 1) for t in (q, k, v)))
    assert sbhd.shape == (s, b, h * d)
    assert torch.equal(sbhd.transpose(0, 1), bshd)
    ref = reference_attention(q, k, v, causal(s, s), scale=0.3).reshape(b, s, h * d)
    assert torch.allclose(bshd.double(), ref, atol=1e-5)


def test_different_key_and_value_head_sizes():
    q, k, v = qkv(2, 6, 9, 2, 2, 8, dv=12)
    out = te.DotProductAttention(2, (8, 12), qkv_format="bshd", attn_mask_type="no_mask", attention_type="cross")(q, k, v)
    assert out.shape == (2, 6, 24)
    assert torch.allclose(out.double(), reference_attention(q, k, v).reshape(2, 6, 24), atol=1e-5)


@pytest.mark.parametrize("groups", [1, 2])
def test_gqa_and_mqa_equal_repeated_key_value_heads(groups):
    b, s, h, d = 2, 12, 4, 8
    q, k, v = qkv(b, s, s, h, groups, d)
    out = te.DotProductAttention(h, d, num_gqa_groups=groups, qkv_format="bshd")(q, k, v)
    k_rep = k.detach().repeat_interleave(h // groups, dim=2).requires_grad_()
    v_rep = v.detach().repeat_interleave(h // groups, dim=2).requires_grad_()
    q_rep = q.detach().clone().requires_grad_()
    rep = te.DotProductAttention(h, d, qkv_format="bshd")(q_rep, k_rep, v_rep)
    assert torch.equal(out, rep)
    (dq, dk, dv), dy = grads(out, q, k, v)
    dq_rep, dk_rep, dv_rep = torch.autograd.grad(rep, (q_rep, k_rep, v_rep), dy)
    assert torch.equal(dq, dq_rep)
    # A shared head's gradient is the sum over the query heads it serves.
    for got, rep_grad in ((dk, dk_rep), (dv, dv_rep)):
        summed = rep_grad.view(b, s, groups, h // groups, d).sum(dim=3)
        assert torch.allclose(got, summed, atol=1e-6, rtol=1e-6)


def test_key_value_heads_must_match_num_gqa_groups():
    q, k, v = qkv(1, 4, 4, 4, 2, 8)
    with pytest.raises(ValueError, match="num_gqa_group = 4 heads! Found 2"):
        te.DotProductAttention(4, 8, qkv_format="bshd")(q, k, v)
    with pytest.raises(ValueError, match="divisible by the number of GQA groups"):
        te.DotProductAttention(4, 8, num_gqa_groups=3)


# ---- masks ------------------------------------------------------------------------------------

def test_padding_mask_gives_the_reference_and_zero_padded_rows():
    b, s, h, d = 3, 8, 2, 8
    lengths = torch.tensor([8, 5, 1])
    pad = torch.arange(s).view(1, s) >= lengths.view(b, 1)  # True beyond each length
    q, k, v = qkv(b, s, s, h, h, d)
    dpa = te.DotProductAttention(h, d, qkv_format="bshd", attn_mask_type="padding")
    out = dpa(q, k, v, attention_mask=pad.view(b, 1, 1, s))
    full = pad.view(b, 1, s, 1) | pad.view(b, 1, 1, s)
    ref = reference_attention(q, k, v, full.expand(b, h, s, s), zero_masked=True).reshape(b, s, h * d)
    assert torch.allclose(out.double(), ref, atol=1e-5)
    assert torch.all(out[1, 5:] == 0) and torch.all(out[2, 1:] == 0)
    # The same mask from cu_seqlens instead of attention_mask: the same bits.
    cu = torch.cat([torch.zeros(1, dtype=torch.int32), lengths.cumsum(0).to(torch.int32)])
    assert torch.equal(dpa(q, k, v, cu_seqlens_q=cu, cu_seqlens_kv=cu), out)
    with pytest.raises(ValueError, match="Please provide attention_mask for padding!"):
        dpa(q, k, v)
    with pytest.raises(TypeError, match="boolean"):
        dpa(q, k, v, attention_mask=pad.view(b, 1, 1, s).int())


def test_padding_causal_cross_attention_with_a_pair_of_masks():
    b, sq, sk, h, d = 2, 6, 9, 2, 8
    len_q, len_k = torch.tensor([6, 3]), torch.tensor([9, 4])
    mq = (torch.arange(sq).view(1, sq) >= len_q.view(b, 1)).view(b, 1, 1, sq)
    mk = (torch.arange(sk).view(1, sk) >= len_k.view(b, 1)).view(b, 1, 1, sk)
    q, k, v = qkv(b, sq, sk, h, h, d)
    out = te.DotProductAttention(h, d, qkv_format="bshd", attn_mask_type="padding_causal", attention_type="cross")(
        q, k, v, attention_mask=(mq, mk))
    full = mq.view(b, 1, sq, 1) | mk.view(b, 1, 1, sk) | causal(sq, sk).view(1, 1, sq, sk)
    ref = reference_attention(q, k, v, full, zero_masked=True).reshape(b, sq, h * d)
    assert torch.allclose(out.double(), ref, atol=1e-5)


@pytest.mark.parametrize("mask_type", ["causal_bottom_right", "padding,causal"])
def test_causal_spellings_and_bottom_right_alignment(mask_type):
    b, sq, sk, h, d = 1, 4, 7, 2, 8
    q, k, v = qkv(b, sq, sk, h, h, d)
    dpa = te.DotProductAttention(h, d, qkv_format="bshd", attn_mask_type=mask_type, attention_type="cross")
    kwargs = {}
    if "padding" in mask_type:
        kwargs["attention_mask"] = (torch.zeros(b, 1, 1, sq, dtype=torch.bool), torch.zeros(b, 1, 1, sk, dtype=torch.bool))
    out = dpa(q, k, v, **kwargs)
    mask = causal(sq, sk, bottom_right=mask_type == "causal_bottom_right")
    ref = reference_attention(q, k, v, mask).reshape(b, sq, h * d)
    assert torch.allclose(out.double(), ref, atol=1e-5)


def test_sliding_window_and_arbitrary_mask():
    b, s, h, d = 1, 10, 2, 8
    q, k, v = qkv(b, s, s, h, h, d)
    out = te.DotProductAttention(h, d, qkv_format="bshd", attn_mask_type="causal", window_size=(2, 0))(q, k, v)
    i, j = torch.arange(s).view(s, 1), torch.arange(s).view(1, s)
    band = (j > i) | (j < i - 2)
    assert torch.allclose(out.double(), reference_attention(q, k, v, band).reshape(b, s, -1), atol=1e-5)
    gen = torch.Generator().manual_seed(3)
    arbitrary = torch.rand(b, h, s, s, generator=gen) < 0.4
    arbitrary[..., 0] = False  # no row fully masked
    out = te.DotProductAttention(h, d, qkv_format="bshd", attn_mask_type="arbitrary")(q, k, v, attention_mask=arbitrary)
    assert torch.allclose(out.double(), reference_attention(q, k, v, arbitrary).reshape(b, s, -1), atol=1e-5)
    with pytest.raises(ValueError, match="window_size should be"):
        te.DotProductAttention(h, d, attn_mask_type="causal", window_size=(-2, 3))


def test_thd_equals_the_padded_bshd_call():
    h, d = 2, 8
    lengths = [5, 2, 7]
    cu = torch.tensor([0, 5, 7, 14], dtype=torch.int32)
    b, s = len(lengths), max(lengths)
    q, k, v = qkv(b, s, s, h, h, d)
    pad = torch.arange(s).view(1, s) >= torch.tensor(lengths).view(b, 1)
    bshd = te.DotProductAttention(h, d, qkv_format="bshd", attn_mask_type="padding_causal")(
        q, k, v, attention_mask=pad.view(b, 1, 1, s))
    pack = lambda t: torch.cat([t[i, :n] for i, n in enumerate(lengths)]).detach().requires_grad_()  # noqa: E731
    tq, tk, tv = pack(q), pack(k), pack(v)
    thd = te.DotProductAttention(h, d, qkv_format="thd", attn_mask_type="padding_causal")(
        tq, tk, tv, cu_seqlens_q=cu, cu_seqlens_kv=cu)
    assert thd.shape == (14, h * d)
    assert torch.equal(thd, torch.cat([bshd[i, :n] for i, n in enumerate(lengths)]))
    (dq, _, dv), dy = grads(thd, tq, tk, tv)
    dy_padded = torch.zeros(b, s, h * d)
    for i, (start, n) in enumerate(zip(cu[:-1].tolist(), lengths)):
        dy_padded[i, :n] = dy[start:start + n]
    ref_dq, _, ref_dv = torch.autograd.grad(bshd, (q, k, v), dy_padded)
    assert torch.equal(dq, pack(ref_dq))
    assert torch.equal(dv, pack(ref_dv))
    with pytest.raises(ValueError, match="cu_seqlens_q and cu_seqlens_kv can not be None"):
        te.DotProductAttention(h, d, qkv_format="thd", attn_mask_type="padding")(tq, tk, tv)
    with pytest.raises(ValueError, match="padding or padding_causal for qkv_format=thd"):
        te.DotProductAttention(h, d, qkv_format="thd", attn_mask_type="causal")(tq, tk, tv, cu_seqlens_q=cu, cu_seqlens_kv=cu)


def test_thd_with_padding_between_sequences():
    h, d = 2, 8
    cu = torch.tensor([0, 3, 5], dtype=torch.int32)
    cu_padded = torch.tensor([0, 4, 8], dtype=torch.int32)
    x = torch.randn(8, h, d)
    out = te.DotProductAttention(h, d, qkv_format="thd", attn_mask_type="padding")(
        x, x, x, cu_seqlens_q=cu, cu_seqlens_kv=cu, cu_seqlens_q_padded=cu_padded, cu_seqlens_kv_padded=cu_padded)
    for start, n in ((0, 3), (4, 2)):
        seq = x[start:start + n].unsqueeze(0)
        ref = reference_attention(seq, seq, seq).reshape(n, h * d)
        assert torch.allclose(out[start:start + n].double(), ref, atol=1e-5)
    assert torch.all(out[3] == 0) and torch.all(out[6:] == 0)


def test_packed_qkv_layer_equals_separate_tensors():
    b, s, h, d = 2, 6, 2, 8
    q, k, v = qkv(b, s, s, h, h, d)
    dpa = te.DotProductAttention(h, d, qkv_format="bshd")
    ref = dpa(q, k, v)
    assert torch.equal(dpa(qkv_layer=torch.stack([q, k, v], dim=2)), ref)           # [b, s, 3, h, d]
    assert torch.equal(dpa(qkv_layer=torch.stack([q, k, v], dim=3), qkv_interleave_dim=-2), ref)
    assert torch.equal(dpa(q, kv_layer=torch.stack([k, v], dim=2)), ref)


def test_bias_types_and_max_logit():
    b, s, h, d = 1, 5, 2, 8
    q, k, v = qkv(b, s, s, h, h, d)
    bias = torch.randn(1, h, s, s)
    dpa = te.DotProductAttention(h, d, qkv_format="bshd", attn_mask_type="no_mask", return_max_logit=True)
    out, max_logit = dpa(q, k, v, core_attention_bias_type="post_scale_bias", core_attention_bias=bias)
    assert torch.allclose(out.double(), reference_attention(q, k, v, bias=bias).reshape(b, s, -1), atol=1e-5)
    scores = torch.einsum("bqhd,bkhd->bhqk", q.double(), k.double()) / math.sqrt(d) + bias.double()
    assert torch.allclose(max_logit.double(), scores.amax(dim=(0, 2, 3)), atol=1e-5)
    out, _ = dpa(q, k, v, core_attention_bias_type="pre_scale_bias", core_attention_bias=bias)
    assert torch.allclose(out.double(), reference_attention(q, k, v, bias=bias / math.sqrt(d)).reshape(b, s, -1), atol=1e-5)
    with pytest.raises(ValueError, match="core_attention_bias should not be None"):
        dpa(q, k, v, core_attention_bias_type="post_scale_bias")


def test_learnable_sink_is_a_parameter_and_joins_the_softmax():
    b, s, h, d = 1, 4, 2, 8
    dpa = te.DotProductAttention(h, d, qkv_format="bshd", attn_mask_type="no_mask", softmax_type="learnable")
    assert [n for n, _ in dpa.named_parameters()] == ["softmax_offset"]
    assert set(dpa.state_dict()) == {"softmax_offset", "_extra_state"}
    with torch.no_grad():
        dpa.softmax_offset.copy_(torch.tensor([0.5, -1.0]))
    q, k, v = qkv(b, s, s, h, h, d)
    out = dpa(q, k, v)
    scores = torch.einsum("bqhd,bkhd->bhqk", q.double(), k.double()) / math.sqrt(d)
    sink = torch.tensor([0.5, -1.0], dtype=torch.float64).view(1, h, 1, 1).expand(b, h, s, 1)
    p = torch.softmax(torch.cat([scores, sink], dim=-1), dim=-1)[..., :-1]
    ref = torch.einsum("bhqk,bkhd->bqhd", p, v.double()).reshape(b, s, -1)
    assert torch.allclose(out.double(), ref, atol=1e-5)
    out.sum().backward()
    assert dpa.softmax_offset.grad is not None


def test_dropout_is_seeded_by_torch_and_off_in_eval():
    b, s, h, d = 1, 16, 2, 8
    q, k, v = qkv(b, s, s, h, h, d)
    dpa = te.DotProductAttention(h, d, attention_dropout=0.5, qkv_format="bshd")
    torch.manual_seed(7)
    first = dpa(q, k, v)
    torch.manual_seed(7)
    assert torch.equal(dpa(q, k, v), first)
    plain = te.DotProductAttention(h, d, qkv_format="bshd")(q, k, v)
    assert not torch.equal(first, plain)
    dpa.eval()
    assert torch.equal(dpa(q, k, v), plain)
    with pytest.raises(ValueError, match="get_rng_state_tracker"):
        te.DotProductAttention(h, d, get_rng_state_tracker=lambda: None)


def test_input_checks_use_tes_messages():
    dpa = te.DotProductAttention(2, 8, qkv_format="bshd")
    q, k, v = qkv(1, 4, 4, 2, 2, 8)
    with pytest.raises(ValueError, match="same data type"):
        dpa(q, k.to(torch.bfloat16), v)
    with pytest.raises(ValueError, match="Keys have head_dim = 4, but expected head_dim = 8"):
        dpa(q[..., :4], k[..., :4], v)
    with pytest.raises(ValueError, match="qkv_format"):
        dpa(q, k, v, qkv_format="bhsd")
    with pytest.raises(ValueError, match="Attention mask type foo is not supported"):
        dpa(q, k, v, attn_mask_type="foo")
    with pytest.raises(TypeError, match="float32 or bfloat16 or float16"):
        dpa(q.double(), k.double(), v.double())
    with pytest.raises(ValueError, match="inference_params"):
        dpa(q, k, v, inference_params=object())


# ---- rotary position embedding -----------------------------------------------------------------

def rotate_reference(t, positions, dim, base=10000.0):
    """t [s, ..., d] (float64) with its first dim channels rotated pairwise (i, i + dim/2) by
    angle position * base^(-2i/dim)."""
    t = t.double().clone()
    half = dim // 2
    inv = base ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    angle = positions.double().view(-1, *([1] * (t.dim() - 2)), 1) * inv  # [s, ..., half]
    x1, x2 = t[..., :half].clone(), t[..., half:dim].clone()
    t[..., :half] = x1 * torch.cos(angle) - x2 * torch.sin(angle)
    t[..., half:dim] = x2 * torch.cos(angle) + x1 * torch.sin(angle)
    return t


@pytest.mark.parametrize("fused", [True, False])
def test_rotary_embedding_rotates_channel_pairs(fused):
    s, b, h, d = 6, 2, 2, 16
    t = torch.randn(s, b, h, d)
    freqs = te.RotaryPositionEmbedding(d)(s)
    assert freqs.shape == (s, 1, 1, d) and freqs.dtype == torch.float32
    out = apply_rotary_pos_emb(t, freqs, "sbhd", fused=fused)
    assert torch.allclose(out.double(), rotate_reference(t, torch.arange(s), d), atol=1e-5)
    bshd = apply_rotary_pos_emb(t.transpose(0, 1), freqs, "bshd", fused=fused)
    assert torch.equal(bshd.transpose(0, 1), out)
    partial = apply_rotary_pos_emb(t, te.RotaryPositionEmbedding(d, rotary_percent=0.5)(s), "sbhd", fused=fused)
    assert torch.allclose(partial.double(), rotate_reference(t, torch.arange(s), d // 2), atol=1e-5)
    assert torch.equal(partial[..., d // 2:], t[..., d // 2:])


def test_rotary_thd_restarts_positions_per_sequence_and_bf16_rounds_once():
    h, d = 2, 8
    cu = torch.tensor([0, 3, 7], dtype=torch.int32)
    t = torch.randn(7, h, d)
    freqs = te.RotaryPositionEmbedding(d)(8)
    out = apply_rotary_pos_emb(t, freqs, "thd", fused=True, cu_seqlens=cu)
    positions = torch.tensor([0, 1, 2, 0, 1, 2, 3])
    assert torch.allclose(out.double(), rotate_reference(t, positions, d), atol=1e-5)
    fp32 = apply_rotary_pos_emb(t.to(torch.bfloat16).float(), freqs, "thd", fused=True, cu_seqlens=cu)
    bf16 = apply_rotary_pos_emb(t.to(torch.bfloat16), freqs, "thd", fused=True, cu_seqlens=cu)
    assert bf16.dtype == torch.bfloat16 and torch.equal(bf16, fp32.to(torch.bfloat16))
    with pytest.raises(ValueError, match="cu_seqlens must not be None"):
        apply_rotary_pos_emb(t, freqs, "thd")


# ---- MultiheadAttention ------------------------------------------------------------------------

def _mha_run(block, x, mask):
    x = x.detach().clone().requires_grad_()
    out = block(x, attention_mask=mask, attn_mask_type="causal" if mask is not None else "no_mask")
    out = out[0] if isinstance(out, tuple) else out
    out.sum().backward()
    return [out, x.grad] + [p.grad for p in block.parameters()]


@pytest.mark.parametrize("mask_type", ["causal", "no_mask"])
def test_mha_matches_torch_multihead_attention(mask_type):
    # TE's test_mha_accuracy: fused QKV weight [q; k; v] = torch's in_proj_weight, eval mode.
    s, b, hidden, heads = 16, 2, 64, 4
    mha = te.MultiheadAttention(hidden, heads, fuse_qkv_params=True, qkv_weight_interleaved=False,
                                input_layernorm=False).eval()
    ref = torch.nn.MultiheadAttention(hidden, heads, dropout=0.1, bias=True).eval()
    with torch.no_grad():
        ref.in_proj_weight.copy_(mha.qkv.weight)
        ref.in_proj_bias.copy_(mha.qkv.bias)
        ref.out_proj.weight.copy_(mha.proj.weight)
        ref.out_proj.bias.copy_(mha.proj.bias)
    x = torch.randn(s, b, hidden)
    mask = causal(s, s) if mask_type == "causal" else None
    got = _mha_run(mha, x, mask)
    xr = x.detach().clone().requires_grad_()
    out = ref(xr, xr, xr, attn_mask=mask, need_weights=False)[0]
    out.sum().backward()
    want = [out, xr.grad, ref.in_proj_weight.grad, ref.in_proj_bias.grad, ref.out_proj.weight.grad, ref.out_proj.bias.grad]
    te_close(got[0], want[0], 5e-3, TE_RTOL[torch.float32])  # TE: fp32 output atol 5e-3
    for g, w in zip(got[1:], want[1:]):
        te_close(g, w, **TE_GRAD)
        assert torch.allclose(g, w, atol=1e-4, rtol=1e-4)  # both float32: much closer than TE asks


def _names(module):
    return list(module.state_dict().keys())


def test_mha_parameter_names_and_order_are_tes():
    assert _names(te.MultiheadAttention(32, 2)) == [
        "qkv.query_weight", "qkv.key_weight", "qkv.value_weight", "qkv.query_bias", "qkv.key_bias", "qkv.value_bias",
        "qkv._extra_state", "core_attention._extra_state", "proj.weight", "proj.bias", "proj._extra_state"]
    assert _names(te.MultiheadAttention(32, 2, input_layernorm=True, fuse_qkv_params=True, bias=False,
                                        normalization="RMSNorm", qk_norm_type="RMSNorm")) == [
        "q_norm.weight", "k_norm.weight", "layernorm_qkv.layer_norm_weight", "layernorm_qkv.weight",
        "layernorm_qkv._extra_state", "core_attention._extra_state", "proj.weight", "proj._extra_state"]
    assert _names(te.MultiheadAttention(32, 4, num_gqa_groups=2, attention_type="cross", input_layernorm=True)) == [
        "layernorm_query.layer_norm_weight", "layernorm_query.layer_norm_bias", "layernorm_query.query_weight",
        "layernorm_query.query_bias", "layernorm_query._extra_state", "key_value.key_weight", "key_value.value_weight",
        "key_value.key_bias", "key_value.value_bias", "key_value._extra_state", "core_attention._extra_state",
        "proj.weight", "proj.bias", "proj._extra_state"]
    gqa = te.MultiheadAttention(32, 4, num_gqa_groups=2)
    assert gqa.qkv.query_weight.shape == (32, 32) and gqa.qkv.key_weight.shape == (16, 32)


@pytest.mark.parametrize("recipe", [None, te_recipe.Float8CurrentScaling(),
                                    te_recipe.NVFP4BlockScaling(disable_rht=True)])  # float32: TE's RHT takes bf16 only
def test_split_qkv_parameters_equal_one_fused_weight(recipe):
    torch.manual_seed(0)
    split = te.MultiheadAttention(64, 4, num_gqa_groups=2, input_layernorm=True, attention_dropout=0.0)
    fused = te.MultiheadAttention(64, 4, num_gqa_groups=2, input_layernorm=True, fuse_qkv_params=True,
                                  qkv_weight_interleaved=False, attention_dropout=0.0)
    with torch.no_grad():
        fused.layernorm_qkv.weight.copy_(torch.cat([split.layernorm_qkv.query_weight, split.layernorm_qkv.key_weight,
                                                    split.layernorm_qkv.value_weight]))
        fused.layernorm_qkv.bias.copy_(torch.randn(128))
        offset = 0
        for name, size in (("query", 64), ("key", 32), ("value", 32)):
            getattr(split.layernorm_qkv, f"{name}_bias").copy_(fused.layernorm_qkv.bias[offset:offset + size])
            offset += size
        fused.proj.weight.copy_(split.proj.weight)
    x = torch.randn(32, 2, 64)
    with te.autocast(enabled=recipe is not None, recipe=recipe):
        a, b = split(x), fused(x)
    assert torch.equal(a, b)
    a.sum().backward()
    b.sum().backward()
    assert torch.equal(split.layernorm_qkv.key_weight.grad, fused.layernorm_qkv.weight.grad[64:96])


def test_interleaved_qkv_weight_is_a_permutation_of_the_plain_layout():
    torch.manual_seed(0)
    hidden, heads, groups, d = 32, 4, 2, 8
    plain = te.MultiheadAttention(hidden, heads, num_gqa_groups=groups, fuse_qkv_params=True, qkv_weight_interleaved=False,
                                  attention_dropout=0.0)
    inter = te.MultiheadAttention(hidden, heads, num_gqa_groups=groups, fuse_qkv_params=True, attention_dropout=0.0)
    w = plain.qkv.weight.detach().view(-1, d, hidden)  # rows by head: q0..q3, k0, k1, v0, v1
    per = heads // groups
    order = []
    for g in range(groups):  # interleaved: each group's queries, then its key and value
        order += [g * per + j for j in range(per)] + [heads + g, heads + groups + g]
    with torch.no_grad():
        inter.qkv.weight.copy_(w[order].reshape(-1, hidden))
        inter.qkv.bias.zero_()
        plain.qkv.bias.zero_()
        inter.proj.weight.copy_(plain.proj.weight)
    x = torch.randn(6, 2, hidden)
    assert torch.allclose(inter(x), plain(x), atol=1e-6)


def test_mha_cross_attention_and_rotary_embedding_against_a_reference():
    torch.manual_seed(0)
    hidden, heads, d = 32, 2, 16
    mha = te.MultiheadAttention(hidden, heads, attention_type="cross", attention_dropout=0.0, attn_mask_type="no_mask")
    x, enc = torch.randn(5, 1, hidden), torch.randn(7, 1, hidden)
    freqs = te.RotaryPositionEmbedding(d)(7)
    out = mha(x, encoder_output=enc, rotary_pos_emb=(freqs[:5], freqs))
    w = lambda m, n: getattr(m, n).detach().double()  # noqa: E731
    q = x.double() @ w(mha.query_layer, "weight").T + w(mha.query_layer, "bias")
    kv = enc.double() @ torch.cat([w(mha.key_value, "key_weight"), w(mha.key_value, "value_weight")]).T
    kv = kv + torch.cat([w(mha.key_value, "key_bias"), w(mha.key_value, "value_bias")])
    q, k, v = q.view(5, 1, heads, d), kv[..., :hidden].view(7, 1, heads, d), kv[..., hidden:].view(7, 1, heads, d)
    q, k = rotate_reference(q, torch.arange(5), d), rotate_reference(k, torch.arange(7), d)
    ctx = reference_attention(q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1)).transpose(0, 1).reshape(5, 1, hidden)
    ref = ctx @ w(mha.proj, "weight").T + w(mha.proj, "bias")
    assert torch.allclose(out.double(), ref, atol=1e-5)


# ---- fp8_dpa: TE's FP8 casts around the attention core ------------------------------------------

def fp8_roundtrip(t, fmt, dtype):
    """Quantize-dequantize with one per-tensor current scale (the library's quantizer), rounded to dtype."""
    if t.numel() == 0:
        return t
    q = nvfp4.quantize_fp8_current(t.detach().float().reshape(1, -1).contiguous().numpy(), fmt)
    return torch.from_numpy(nvfp4.dequantize(q)).view(t.shape).to(dtype)


def test_fp8_dpa_current_scaling_applies_tes_casts():
    b, s, h, d = 2, 8, 2, 16
    q, k, v = qkv(b, s, s, h, h, d, torch.bfloat16)
    dpa = te.DotProductAttention(h, d, qkv_format="bshd", attn_mask_type="no_mask")
    with te.autocast(recipe=te_recipe.Float8CurrentScaling(fp8_dpa=True)):
        out = dpa(q, k, v)
    (dq, dk, dv), dy = grads(out, q, k, v)
    # By hand, around the same float32 arithmetic: Q, K, V cast together (one scale), the
    # scores' gradient (dP), the probabilities (S), O, dO and dQ, dK, dV together.
    joined = fp8_roundtrip(torch.cat([t.detach().reshape(-1) for t in (q, k, v)]), "e4m3", torch.bfloat16)
    fq, fk, fv = (part.view(q.shape).float().requires_grad_() for part in torch.split(joined, q.numel()))
    qh, kh, vh = (t.transpose(1, 2) for t in (fq, fk, fv))
    scores = torch.matmul(qh, kh.transpose(-1, -2)) * (1.0 / math.sqrt(d))
    scores.register_hook(lambda g: fp8_roundtrip(g, "e5m2", torch.bfloat16).float())
    p_cast = CastForward.apply(torch.softmax(scores, dim=-1), "e4m3").float()
    o = torch.matmul(p_cast, vh).transpose(1, 2).to(torch.bfloat16).reshape(b, s, h * d)
    assert torch.equal(out, fp8_roundtrip(o, "e4m3", torch.bfloat16))
    gq, gk, gv = torch.autograd.grad(o, (fq, fk, fv), fp8_roundtrip(dy, "e5m2", torch.bfloat16))
    joined_grad = fp8_roundtrip(torch.cat([g.reshape(-1) for g in (gq, gk, gv)]), "e5m2", torch.bfloat16)
    for got, want in zip((dq, dk, dv), torch.split(joined_grad, q.numel())):
        assert torch.equal(got, want.view(q.shape))
    # Without fp8_dpa the same recipe leaves attention in high precision.
    with te.autocast(recipe=te_recipe.Float8CurrentScaling()):
        assert torch.equal(dpa(q, k, v), te.DotProductAttention(h, d, qkv_format="bshd", attn_mask_type="no_mask")(q, k, v))


class CastForward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, t, fmt):
        return fp8_roundtrip(t, fmt, torch.bfloat16)

    @staticmethod
    def backward(ctx, g):
        return g, None


@pytest.mark.parametrize("recipe", [te_recipe.DelayedScaling(fp8_dpa=True), te_recipe.MXFP8BlockScaling(fp8_dpa=True),
                                    te_recipe.NVFP4BlockScaling(fp8_dpa=True)])
def test_fp8_dpa_under_other_recipes_is_refused_before_anything_runs(recipe):
    q, k, v = qkv(1, 4, 4, 2, 2, 8)
    with pytest.raises(ValueError, match="fp8_dpa"):
        with te.autocast(recipe=recipe):
            te.DotProductAttention(2, 8, qkv_format="bshd")(q, k, v)
    with pytest.raises(ValueError, match="FP8 attention is not supported for Float8BlockScaling"):
        te_recipe.Float8BlockScaling(fp8_dpa=True)


def test_qk_layer_scaling_is_tes_fp16_only_trick(monkeypatch):
    # NVTE_APPLY_QK_LAYER_SCALING=1 scales the scores by 1 / layer_number and the softmax input back
    # by layer_number, for fp16 inputs only (TE's UnfusedDotProductAttention): float32 is untouched.
    from nvfp4.torch.attention.dot_product_attention import backends
    q, k, v = qkv(1, 6, 6, 2, 2, 8)
    plain = te.DotProductAttention(2, 8, qkv_format="bshd", layer_number=3)(q, k, v)
    monkeypatch.setenv("NVTE_APPLY_QK_LAYER_SCALING", "1")
    assert torch.equal(te.DotProductAttention(2, 8, qkv_format="bshd", layer_number=3)(q, k, v), plain)
    scaled = backends.attention(q, k, v, scale=1 / math.sqrt(8), mask=causal(6, 6), zero_masked_probs=False, dropout=0.0,
                                training=False, layer_number=3, apply_qk_layer_scaling=True)
    assert torch.allclose(scaled.reshape(plain.shape), plain, atol=1e-6)


# ---- float16 (TE's quickstart and test matrices run it) ------------------------------------------

def test_float16_attention_is_the_float32_core_rounded_once():
    # The core computes in float32 and rounds once (backends.py): on float16 values, the float32
    # call's results rounded to float16, forward and backward.
    torch.manual_seed(20)
    dpa = te.DotProductAttention(4, 16, num_gqa_groups=2, attention_dropout=0.0, qkv_format="bshd")
    q, k, v = (t.half() for t in qkv(2, 24, 24, 4, 2, 16))
    dy = torch.randn(2, 24, 64).half()
    outs = []
    for dtype in (torch.float16, torch.float32):
        inputs = [t.detach().to(dtype).requires_grad_() for t in (q, k, v)]
        y = dpa(*inputs, attn_mask_type="causal")
        y.backward(dy.to(dtype))
        outs.append([y.detach()] + [t.grad for t in inputs])
    assert all(a.dtype == torch.float16 for a in outs[0])
    for a, b in zip(*outs):
        assert torch.equal(a, b.half())


def test_float16_transformer_layer_trains_with_hidden_dropout():
    # torch 1.13 has no float16 Bernoulli on the CPU: the hidden dropout of a float16 layer is the
    # float32 dropout of the same values (the same mask from torch's generator) rounded once.
    from nvfp4.torch.transformer import dropout
    x = torch.randn(8, 2, 64).half()
    torch.manual_seed(21)
    got = dropout(x, 0.25, True)
    torch.manual_seed(21)
    assert torch.equal(got, torch.nn.functional.dropout(x.float(), p=0.25, training=True).half())
    assert torch.equal(dropout(x, 0.25, False), x)
    torch.manual_seed(22)
    layer = te.TransformerLayer(64, 128, 4, params_dtype=torch.float16)
    xi = x.clone().requires_grad_()
    with te.autocast(recipe=te_recipe.Float8CurrentScaling()):
        y = layer(xi)
    y.float().sum().backward()
    assert y.dtype == xi.grad.dtype == torch.float16
    assert torch.isfinite(y.float()).all() and torch.isfinite(xi.grad.float()).all()
    assert all(p.grad is not None and p.grad.dtype == torch.float16 for p in layer.parameters())
