"""The engine's GPU options, checked on the CPU: torch.compile trains as eager does, "auto" precision
is fp32 on the CPU and bf16 on a CUDA device with it, the peak table behind MFU, and the FLOP count
of a tiny GPT against a hand computation."""
import json
import os

import pytest
import torch

from bertlab.device import peak_tflops, resolve_precision
from bertlab.models import GPT
from bertlab.training import engine
from bertlab.training.engine import fit
from bertlab.lm.objective import GPTSettings, LanguageModeling
from engine_checks import char_token_files, tiny_gpt_config

CONFIG = tiny_gpt_config()


@pytest.fixture(scope="module")
def tokens(tmp_path_factory):
    return char_token_files(tmp_path_factory.mktemp("tokens"))


def settings(data, out, **kw):
    return GPTSettings(**{**dict(data=data, out=str(out), model=CONFIG, batch_size=4, block_size=16, max_steps=3,
                                 warmup=1, eval_every=3, save_every=100, eval_tokens=200, lr=3e-3, device="cpu",
                                 progress=False, seed=3), **kw})


def train_losses(out):
    with open(os.path.join(out, "metrics.jsonl")) as f:
        return [r["loss"] for r in map(json.loads, f) if r["kind"] == "train"]


def test_flops_of_a_tiny_gpt_by_hand(tokens, tmp_path):
    """2 layers, width 32, feed-forward 128, 40 tokens, 16 positions, blocks of 16."""
    block = 4 * (32 * 32 + 32) + (32 * 128 + 128) + (128 * 32 + 32) + 2 * (32 + 32)  # attention, FFN, 2 LayerNorms
    non_embedding = 2 * block + (32 + 32)  # + the final LayerNorm; wte (tied output layer) and wpe are tables
    attention = 2 * 12 * 16 * 32  # per layer: QK^T and AV, 2 x 2 x 16 x 32 FLOPs forward, x3 with backward
    per_token = 6 * non_embedding + attention + 6 * 32 * 40  # + the output layer, 32 x 40 at every position
    assert (non_embedding, per_token) == (25472, 172800)
    s = settings(tokens, tmp_path)
    assert LanguageModeling(s).flops_per_unit(GPT(CONFIG)) == per_token
    summary = fit(LanguageModeling(s), s)
    assert summary["train_flops"] == 3 * 4 * 16 * per_token  # steps x sequences x tokens
    # summary.json rounds train_seconds to 0.1 s and TFLOP/s to 4 digits: achieved x seconds is the FLOPs within that
    achieved, tflop = summary["tflop_per_s"], summary["train_flops"] / 1e12
    assert abs(achieved * summary["train_seconds"] - tflop) <= achieved * 0.05 + 1e-3 * tflop
    assert summary["mfu"] is None and summary["peak_tflop_per_s"] is None  # no peak known for a CPU


def test_mfu_is_achieved_over_peak(tokens, tmp_path, monkeypatch):
    monkeypatch.setattr(engine, "peak_tflops", lambda device, precision: 1e-6)
    summary = fit(LanguageModeling(settings(tokens, tmp_path)), settings(tokens, tmp_path))
    assert summary["peak_tflop_per_s"] == 1e-6
    assert summary["mfu"] == pytest.approx(summary["tflop_per_s"] / 1e-6, rel=1e-3)  # both rounded to 4 digits
    postfix = engine.flops_postfix(type("R", (), {"tflop_per_s": lambda self: 0.5, "mfu": lambda self: 0.412})())
    assert postfix == {"tflop_s": "0.5", "mfu": "41.2%"}


def test_auto_precision_is_fp32_on_the_cpu_and_bf16_on_cuda_with_bf16(monkeypatch):
    assert resolve_precision("auto", torch.device("cpu")) == "fp32"
    assert resolve_precision("bf16", torch.device("cpu")) == "bf16"
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    assert resolve_precision("auto", torch.device("cuda")) == "bf16"
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: False)
    assert resolve_precision("auto", torch.device("cuda")) == "fp32"
    with pytest.raises(ValueError, match="unknown precision"):
        resolve_precision("fp8", torch.device("cpu"))


@pytest.mark.parametrize("name, bf16, fp32", [("NVIDIA H100 80GB HBM3", 989.0, 67.0), ("NVIDIA H100 PCIe", 756.0, 51.0),
                                              ("NVIDIA H200", 989.0, 67.0), ("NVIDIA A100-SXM4-80GB", 312.0, 19.5),
                                              ("NVIDIA GeForce RTX 3090", None, None)])
def test_peak_table(monkeypatch, name, bf16, fp32):
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: name)
    cuda = torch.device("cuda")
    assert (peak_tflops(cuda, "bf16"), peak_tflops(cuda, "fp16"), peak_tflops(cuda, "fp32")) == (bf16, bf16, fp32)
    assert peak_tflops(torch.device("cpu"), "bf16") is None


def _inductor_unavailable() -> str | None:
    try:
        torch.compile(lambda x: x * 2 + 1)(torch.ones(3))
    except Exception as e:  # no C compiler, an unsupported platform
        return f"torch.compile (inductor) cannot compile here: {type(e).__name__}: {str(e)[:200]}"
    return None


def test_a_compiled_run_trains_as_the_eager_run(tokens, tmp_path):
    reason = _inductor_unavailable()
    if reason:
        pytest.skip(reason)
    eager = fit(LanguageModeling(settings(tokens, tmp_path / "eager")), settings(tokens, tmp_path / "eager"))
    s = settings(tokens, tmp_path / "compiled", compile=True)
    compiled = fit(LanguageModeling(s), s)
    assert compiled["compile"] and not eager["compile"]
    # the first step compiles: its time is reported apart and kept out of the rates
    assert compiled["compile_seconds"] > 0 and "compile_seconds" not in eager
    # (at the compiled step's rate, the seconds spent compiling would have trained all three steps' tokens)
    assert compiled["tokens_per_s"] * compiled["compile_seconds"] > 3 * 4 * 16
    assert train_losses(tmp_path / "compiled") == pytest.approx(train_losses(tmp_path / "eager"), rel=1e-5)
    for (name, p), q in zip(eager["model"].state_dict().items(), compiled["model"].state_dict().values()):
        torch.testing.assert_close(q, p, atol=1e-5, rtol=1e-4, msg=name)
    checkpoint = torch.load(tmp_path / "compiled" / "checkpoint.pt", weights_only=True)
    assert checkpoint["model"].keys() == eager["model"].state_dict().keys()  # no _orig_mod. prefixes
