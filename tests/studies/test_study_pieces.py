# The pieces of the studies (python/examples/*_recipes.py and their shared modules), one behaviour a
# test, in this process on tiny tensors: the measurements every report carries (spikes, smoothing,
# the GPU memory model), the hybrid model's parts (Sinkhorn, n-gram hashing, expert dispatch,
# Engram), the Qwen3 decoder's checkpoint files and LoRA, the fallback run and the command lines.
import argparse
import math
import pathlib
import struct
import sys

import pytest

torch = pytest.importorskip("torch", reason="the studies need PyTorch (Debian: apt install python3-torch)")
EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "python" / "examples"
sys.path.insert(0, str(EXAMPLES))

import study_common as sc  # noqa: E402
import study_report as sr  # noqa: E402
import study_measures as sm  # noqa: E402
import gpt_recipes  # noqa: E402
import hybrid_recipes as hy  # noqa: E402
import lora_recipes  # noqa: E402
import mae_recipes  # noqa: E402
import qwen3_decoder as qd  # noqa: E402
import nvfp4.torch as te  # noqa: E402


# ---- what every report measures ----------------------------------------------------------------

def test_centred_mean_worked_by_hand_and_ends_on_the_data():
    assert sr.centred_mean([0, 3, 0, 3, 0], 1) == [0, 1, 2, 1, 0]
    values = [5.0, 4.0, 3.5, 3.0, 2.9, 2.5]
    smooth = sr.centred_mean(values, 2)
    assert smooth[0] == values[0] and smooth[-1] == values[-1]  # no lag at either end
    assert smooth[2] == pytest.approx(sum(values[:5]) / 5)


def test_a_spike_is_a_loss_above_1_25_times_the_recent_median():
    flat = [1.0] * 10
    assert sm.is_spike(flat, 1.26) and not sm.is_spike(flat, 1.24)
    assert not sm.is_spike([1.0] * 9, 5.0)            # fewer than SPIKE_WINDOW / 2 losses before it
    assert not sm.is_spike(flat, float("nan"))        # a NaN is counted as non-finite, not as a spike
    assert sm.count_spikes([1.0] * 10 + [2.0, 1.0, 1.0, 3.0]) == 2


def test_format_bytes_by_hand():
    assert sm.format_bytes("nvfp4", 256) == 128 + 16 + 4       # 4-bit codes, an E4M3 scale per 16, fp32 per tensor
    assert sm.format_bytes("mxfp8", 64) == 64 + 2               # a byte per value, an E8M0 scale per 32
    assert sm.format_bytes("fp8", 100) == 100 + 4
    assert sm.format_bytes("fp8_1x128", 256) == 256 + 2 * 4
    assert sm.format_bytes("fp8_128x128", 16384 + 1) == 16385 + 2 * 4
    assert sm.format_bytes("bf16", 10) == 20


def test_activation_meter_counts_torch_saved_tensors_and_linear_inputs():
    torch.manual_seed(0)
    model = torch.nn.Sequential(te.Linear(16, 32, bias=False, mode="relaxed"), torch.nn.ReLU())
    x = torch.randn(8, 16)
    with sm.ActivationMeter(model) as meter:
        model(x).sum().backward()
    torch_saved, linear = meter.bytes_for(lambda name: "nvfp4")
    assert torch_saved == 8 * 32 * 4                       # ReLU keeps its float32 output
    assert linear == sm.format_bytes("nvfp4", 8 * 16)       # te.Linear's input in the recipe's format
    with sm.ActivationMeter(model) as meter:
        with meter.suspended():
            model(x)
    assert meter.linear_inputs == []


def test_gpu_memory_adds_its_parts():
    model = torch.nn.Sequential(te.Linear(32, 64, bias=False, mode="relaxed"))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    with sm.ActivationMeter(model) as meter:
        model(torch.randn(4, 32)).sum().backward()
    opt.step()
    m = sm.gpu_memory(model, [opt], meter, lambda name: "mxfp8")
    assert m["weights"] == 32 * 64 * 4 and m["gradients"] == 32 * 64 * 4
    assert m["weight_copies"] == 2 * sm.format_bytes("mxfp8", 32 * 64)  # rowwise + columnwise
    assert m["optimizer"] == 32 * 64 * 4                                  # SGD's momentum buffer
    assert m["total"] == sum(v for k, v in m.items() if k != "total")


def test_recipe_table_compares_with_the_first_fp8_run():
    def run(name, recipe, ppl):
        memory = dict(weights=2**20, weight_copies=0, activations=0, gradients=0, optimizer=0, total=2**20)
        return dict(run=name, recipe=recipe, tokens_per_s=10.0, step_ms=1.0, gpu_memory=memory, peak_rss_bytes=2**20,
                    nonfinite=0, spikes=0, val_ppl=ppl)
    meta = dict(command="c", commit="x", machine="m", isa="i")
    table = sr.recipe_table([run("bf16", "bf16", 10.0), run("fp8", "fp8_current", 8.0), run("fp4", "nvfp4", 10.0)], meta)
    assert "vs fp8 |" in table and "| fp4 | nvfp4 |" in table and "+25.00%" in table and "| bf16 | bf16 |" in table


def test_merge_ranks_keeps_rank_zero_and_says_whether_ranks_agree():
    ranks = [dict(run="r", rank=k, curve=[], step_ms=1.0, tokens_per_s=1.0, final_loss=1.0, peak_rss_bytes=1,
                  weights_digest="w", scaling_digest="s" + str(k)) for k in range(2)]
    merged = sc.merge_ranks(ranks)
    assert merged["rank"] == 0 and len(merged["ranks"]) == 2
    assert merged["ranks_hold_equal_weights"] and not merged["ranks_hold_equal_scaling_state"]


# ---- the hybrid model --------------------------------------------------------------------------

def test_sinkhorn_gives_a_doubly_stochastic_matrix_whose_products_do_not_grow():
    torch.manual_seed(1)
    # Columns are normalised last, so they sum to 1 to rounding; rows to within the iteration's
    # convergence (20 iterations, as mHC uses, on logits of mixing matrices' size).
    mats = [hy.sinkhorn(torch.randn(4, 4), 20) for _ in range(8)]
    for m in mats:
        assert torch.allclose(m.sum(0), torch.ones(4), atol=1e-6) and torch.allclose(m.sum(1), torch.ones(4), atol=1e-3)
        assert (m >= 0).all()
    product = torch.eye(4)
    for m in mats:
        product = m @ product
    assert float(product.abs().sum(0).max()) <= 1 + 1e-5 and float(product.abs().sum(1).max()) <= 1 + 1e-2
    unconstrained = torch.eye(4) + 0.3 * torch.randn(4, 4)          # HC's free matrices can amplify
    assert float(torch.linalg.matrix_power(unconstrained, 8).abs().sum(1).max()) > 1.5


def test_ngram_buckets_depend_on_the_ngram_only():
    tokens = torch.tensor([[10, 20, 30, 10, 20, 30, 99]])
    b = hy.ngram_buckets(tokens, 2, salt=5, buckets=64)
    assert b.shape == tokens.shape and int(b.min()) >= 0 and int(b.max()) < 64
    assert b[0, 1] == b[0, 4] and b[0, 2] == b[0, 5]                   # the same bigram, the same bucket
    first = hy.ngram_buckets(torch.tensor([[10, 77]]), 2, salt=5, buckets=64)[0, 0]
    assert first == b[0, 0]                                            # position 0 reads PAD before it
    assert not torch.equal(b, hy.ngram_buckets(tokens, 2, salt=6, buckets=64))  # another table, another hash


@pytest.mark.parametrize("grouped", [False, True])
def test_moe_output_is_each_tokens_weighted_experts(grouped):
    if grouped and not hasattr(te, "GroupedLinear"):
        pytest.skip("this nvfp4.torch has no te.GroupedLinear")
    torch.manual_seed(3)
    moe = hy.MoE(32, 48, experts=4, top_k=2, mode="relaxed", grouped=grouped)
    for p in moe.parameters():
        torch.nn.init.normal_(p, std=0.2)
    x = torch.randn(2, 5, 32)
    seen = []
    layers = [moe.fc] if grouped else [e.fc for e in moe.experts]
    hooks = [m.register_forward_pre_hook(lambda m, inp: seen.append(inp[0].shape[0])) for m in layers]
    out, aux = moe(x)
    for h in hooks:
        h.remove()
    assert all(rows % hy.GROUP_ROWS == 0 for rows in seen)  # groups padded for the FP8 / FP4 GEMMs
    probs = torch.nn.functional.linear(x.reshape(10, 32), moe.router.weight).softmax(-1)
    top_p, top_e = probs.topk(2, dim=-1)
    weights = top_p / top_p.sum(-1, keepdim=True)
    for t in range(10):
        expected = torch.zeros(32)
        for k in range(2):
            e = int(top_e[t, k])
            row = x.reshape(10, 32)[t:t + 1]
            if grouped:
                splits = [1 if i == e else 0 for i in range(4)]
                y = moe.fc_out(torch.nn.functional.gelu(moe.fc(row, splits)), splits)
            else:
                y = moe.experts[e](row)
            expected += y[0].float() * weights[t, k]
        assert torch.allclose(out.reshape(10, 32)[t], expected, rtol=0, atol=1e-6)
    share = torch.bincount(top_e.reshape(-1), minlength=4).float() / 20
    assert float(aux) == pytest.approx(4 * float((share * probs.mean(0)).sum()), rel=1e-6)


def test_engram_starts_switched_off_and_gates_in_0_1():
    torch.manual_seed(4)
    engram = hy.Engram(32, [2, 3], heads=2, buckets=64, mode="relaxed")
    tokens = torch.randint(0, 256, (2, 12))
    delta, gate = engram(torch.randn(2, 12, 32), tokens)
    assert torch.count_nonzero(delta) == 0                 # the value projection starts at zero
    assert gate.shape == (2, 12) and float(gate.min()) > 0 and float(gate.max()) < 1


def test_hc_and_mhc_start_as_a_residual_network_up_to_the_seeded_perturbation():
    torch.manual_seed(5)
    for sinkhorn_on in (False, True):
        pre, post, res = hy.StreamMixer(4, sinkhorn_on).weights()
        assert torch.allclose(pre, torch.full((4,), 0.25), atol=0.1)     # perturbations of std 0.02
        assert torch.allclose(post, torch.ones(4), atol=0.1)
        assert torch.allclose(res, torch.eye(4), atol=0.1)


# ---- the Qwen3 decoder, its files and LoRA ------------------------------------------------------

TINY = dict(qd.SMALL_CONFIG, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, head_dim=8)


def test_safetensors_round_trip_and_refusals(tmp_path):
    tensors = {"a": torch.randn(3, 4), "b": torch.randn(5).to(torch.bfloat16), "c": torch.randn(2, 2).half()}
    path = str(tmp_path / "t.safetensors")
    qd.save_safetensors(path, tensors)
    back = qd.load_safetensors(path)
    assert set(back) == set(tensors) and all(back[k].dtype == tensors[k].dtype and torch.equal(back[k], tensors[k])
                                             for k in tensors)
    raw = open(path, "rb").read()
    (header_len,) = struct.unpack("<Q", raw[:8])
    for bad, message in [(raw[:4], "not a safetensors"), (struct.pack("<Q", 10**9) + raw[8:], "runs past"),
                         (raw[:-4], "byte range")]:
        open(path, "wb").write(bad)
        with pytest.raises(ValueError, match=message):
            qd.load_safetensors(path)


def test_qwen3_checkpoint_round_trip_and_clear_errors(tmp_path):
    torch.manual_seed(6)
    model = qd.Qwen3ForCausalLM(TINY)
    model.init_weights(6)
    qd.save_checkpoint_dir(str(tmp_path), TINY, model.hf_state_dict(), dtype=torch.float32)
    config, tensors = qd.load_checkpoint_dir(str(tmp_path))
    assert "model.layers.1.self_attn.q_norm.weight" in tensors and "lm_head.weight" in tensors
    other = qd.Qwen3ForCausalLM(config)
    other.load_hf_state_dict(tensors)
    x = torch.randint(0, 256, (2, 9))
    assert torch.equal(other(x), model(x))
    with pytest.raises(ValueError, match="lacks 1 tensor"):
        other.load_hf_state_dict({k: v for k, v in tensors.items() if k != "model.norm.weight"})
    with pytest.raises(ValueError, match="has shape"):
        other.load_hf_state_dict(dict(tensors, **{"model.norm.weight": torch.ones(7)}))
    with pytest.raises(ValueError, match="vocab_size"):
        qd.check_config(dict(TINY, vocab_size=100))
    with pytest.raises(ValueError, match="model_type"):
        qd.check_config(dict(TINY, model_type="llama"))


def test_rotary_is_hugging_faces_split_halves_rotation():
    torch.manual_seed(7)
    q, k = torch.randn(1, 1, 5, 8, dtype=torch.float64), torch.randn(1, 1, 5, 8, dtype=torch.float64)
    rq, _ = qd.RotaryHalves(8, 10000.0)(q.float(), k.float())
    for p in range(5):
        for i in range(4):
            angle = p * 10000.0 ** (-2 * i / 8)
            a, b = q[0, 0, p, i], q[0, 0, p, i + 4]
            assert float(rq[0, 0, p, i]) == pytest.approx(float(a * math.cos(angle) - b * math.sin(angle)), abs=1e-5)
            assert float(rq[0, 0, p, i + 4]) == pytest.approx(float(b * math.cos(angle) + a * math.sin(angle)), abs=1e-5)


def test_lora_starts_from_the_base_model_exactly_and_trains_only_adapters():
    torch.manual_seed(8)
    model = qd.Qwen3ForCausalLM(TINY, mode="relaxed")
    model.init_weights(8)
    x = torch.randint(0, 256, (2, 16))
    with sc.precision(None):
        before = model(x)
    adapters = qd.add_lora(model, rank=4, alpha=8, targets=qd.LORA_TARGETS, seed=1)
    with sc.precision(None):
        after = model(x)
    assert torch.equal(before, after)                      # B starts at zero
    assert len(adapters) == 2 * 7 * TINY["num_hidden_layers"]
    assert all("lora_" in n for n, _ in adapters)
    names = set(qd.adapter_state_dict(model))
    assert "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight" in names
    assert set(model.hf_state_dict()) == set(qd.Qwen3ForCausalLM(TINY).hf_state_dict())


# ---- the runs and the command lines --------------------------------------------------------------

def tiny_gpt_args(**changes):
    args = dict(width=32, depth=1, heads=2, seq=16, batch=4, warmup=2, eval_batches=1, positions="rotary",
                activation="relu2", tied=False, gemm="relaxed", lr=3e-3, seed=1, steps=16, fallback_every=5)
    args.update(changes)
    return argparse.Namespace(**args)


def test_the_fallback_run_goes_back_to_its_checkpoint_and_on_in_fp8(monkeypatch):
    data = torch.randint(0, 256, (4000,))
    args = tiny_gpt_args()
    plain = gpt_recipes.train(sc.Run("nvfp4", "nvfp4"), args, data, data)
    real = sm.is_spike
    monkeypatch.setattr(sm, "is_spike", lambda history, loss: len(history) == 12 or real(history, loss))
    fell = gpt_recipes.train(gpt_recipes.CATALOG["nvfp4_fallback"], args, data, data)
    assert fell["fallback_step"] == 13
    assert [p["step"] for p in fell["curve"]] == list(range(1, 17))
    assert [p["train_loss"] for p in fell["curve"][:10]] == [p["train_loss"] for p in plain["curve"][:10]]
    assert {p["recipe"] for p in fell["curve"][10:]} == {"fp8_current"}
    assert fell["curve"][10]["train_loss"] != plain["curve"][10]["train_loss"]


@pytest.mark.parametrize("module", [gpt_recipes, mae_recipes, hy, lora_recipes], ids=lambda m: m.__name__)
def test_help_shows_the_whole_description_every_default_and_every_run(module):
    parser = module.arguments()
    text = parser.format_help()
    assert module.__doc__.strip().splitlines()[-1].strip() in text  # the description is not cut
    options = [a for a in parser._actions if a.dest != "help"]
    for action in options:
        assert action.help and action.help.split()[0] in text, action.dest
    assert text.count("(default:") == len(options)
    for name in module.CATALOG:
        assert f"\n  {name} " in text


def test_recipe_table_reads_the_reports_and_states_the_fallback(tmp_path):
    import json
    import recipe_table

    def run(name, recipe, ppl, tps, **extra):
        memory = dict(total=2 * 2**20)
        return dict(run=name, recipe=recipe, tokens_per_s=tps, gpu_memory=memory, nonfinite=0, spikes=1, val_ppl=ppl,
                    val_loss=math.log(ppl), **extra)
    meta = dict(command="python3 gpt_recipes.py", commit="abc", machine="m", isa="AVX2", load_average_at_end=[1.0],
                steps=300)
    runs = [run("bf16", "bf16", 10.0, 100.0), run("fp8_current", "fp8_current", 8.0, 50.0),
            run("nvfp4", "nvfp4", 10.0, 200.0), run("nvfp4_fallback", "nvfp4", 9.0, 150.0, fallback="fp8_current",
                                                    fallback_step=40)]
    (tmp_path / "gpt_recipes.json").write_text(json.dumps({"meta": meta, "runs": runs}))
    lines, sources = recipe_table.table(str(tmp_path))
    assert len(sources) == 1 and len(lines) == 2 + 3
    assert "| gpt | nvfp4 (nvfp4) | 200 | +100.0% | 2.00 | +0.0% | 0 | 1 | val ppl 10 | +25.0% |" in lines
    advice = recipe_table.fallback_lines(str(tmp_path))[0]
    assert "step 40" in advice and "fp8_current" in advice and "9.0000" in advice


@pytest.mark.parametrize("module,args,message", [
    (gpt_recipes, ["--recipes", "fp4_magic"], "unknown run"),
    (gpt_recipes, ["--recipes", "bf16,bf16"], "twice"),
    (gpt_recipes, ["--steps", "0"], "--steps must be >= 1"),
    (gpt_recipes, ["--nproc", "0"], "--nproc must be >= 1"),
    (gpt_recipes, ["--width", "30"], "--width"),
    (mae_recipes, ["--mask-ratio", "1.5"], "--mask-ratio"),
    (hy, ["--alloc-ratios", "2"], "--alloc-ratios"),
    (hy, ["--alloc-ratios", "x"], "--alloc-ratios"),
    (hy, ["--top-k", "9"], "--top-k"),
    (hy, ["--engram-orders", "2,x"], "--engram-orders"),
    (hy, ["--width", "36", "--heads", "2"], "Engram tables"),
    (lora_recipes, ["--lora-targets", "qkv"], "--lora-targets"),
    (lora_recipes, ["--lora-alpha", "0"], "--lora-alpha"),
    (lora_recipes, ["--skip-quant-first-layers", "3", "--skip-quant-last-layers", "3"], "BF16 layers"),
    (lora_recipes, ["--checkpoint", "/nonexistent"], "no config.json"),
], ids=lambda v: v.__name__ if hasattr(v, "__name__") else None)
def test_bad_options_are_refused_before_any_run(monkeypatch, tmp_path, module, args, message):
    monkeypatch.setattr(sys, "argv", [module.__name__, "--out", str(tmp_path / "out"), *args])
    monkeypatch.setattr(sc, "run_all", lambda *a, **k: pytest.fail("a run started"))
    monkeypatch.setattr(lora_recipes, "pretrain", lambda *a, **k: pytest.fail("pretraining started"))
    with pytest.raises(SystemExit) as refused:
        module.main()
    assert message in str(refused.value)


def tiny_hybrid_args(**changes):
    args = dict(width=32, depth=1, heads=2, seq=32, batch=2, gemm="relaxed", seed=3, experts=4, top_k=2,
                expert_hidden=32, experts_as="linear", sinkhorn_iterations=20, engram_buckets=64, engram_heads=2,
                engram_orders=[2, 3], streams=4)
    args.update(changes)
    return argparse.Namespace(**args)


def test_experts_as_grouped_linear_or_as_linear_pairs_compute_the_same_bits():
    if not hasattr(te, "GroupedLinear"):
        pytest.skip("this nvfp4.torch has no te.GroupedLinear")
    arch = dict(hy.CATALOG["hybrid_nvfp4"].options)
    tokens = torch.randint(0, 256, (2, 32), generator=torch.Generator().manual_seed(9))
    outs, grads = [], []
    for layout in ("linear", "grouped"):
        model = hy.HybridLM(arch, tiny_hybrid_args(experts_as=layout), 32)
        with sc.precision(sc.make_recipe("nvfp4")):
            logits, aux, _ = model(tokens)
        (logits.float().square().mean() + aux).backward()
        outs.append(logits)
        grads.append({n: (p.grad if p.grad is not None else torch.zeros_like(p)) for n, p in model.canonical_parameters()})
    assert torch.equal(outs[0], outs[1])
    assert grads[0].keys() == grads[1].keys()
    for name in grads[0]:
        assert torch.equal(grads[0][name], grads[1][name]), name


def test_the_hybrid_starts_from_the_same_weights_whatever_the_seed_of_torch():
    arch = dict(hy.CATALOG["hybrid"].options)
    torch.manual_seed(1)
    a = dict(hy.HybridLM(arch, tiny_hybrid_args(), 32).canonical_parameters())
    torch.manual_seed(2)
    b = dict(hy.HybridLM(arch, tiny_hybrid_args(), 32).canonical_parameters())
    assert all(torch.equal(a[n], b[n]) for n in a)
