"""train_step's products by oneDNN (chapter 25): OneDNNLinear
equals F.linear and autograd, the rows are rounded so that few shapes reach oneDNN, the
packed step gives the same values and gradients either way, and the policy and the bad
arguments behave as documented."""

from functools import partial

import pytest
import torch
import torch.nn.functional as F

import transformer_lit.fast as fast
import transformer_lit.fast_decoding as fast_decoding
from transformer_lit.data import Batch
from transformer_lit.model import Transformer, TransformerConfig
from transformer_lit.fast import (
    ONEDNN_ROWS,
    OneDNNLinear,
    check_onednn,
    linear,
    onednn_available,
    packed_decoder_states,
    use_onednn_products,
)
from transformer_lit.recipe import TrainSettings
from transformer_lit.training import StepOptions, make_optimizer, train_step

pytestmark = pytest.mark.skipif(not onednn_available(), reason="PyTorch without oneDNN")


def both_ways(x, w, b, dy):
    "linear's output and gradients (x, w[, b]) by oneDNN and by F.linear + autograd."
    inputs = [x, w] + ([b] if b is not None else [])
    out = []
    for onednn in (True, False):
        y = linear(x, w, b, onednn)
        out.append((y, *torch.autograd.grad(y, inputs, dy)))
    return out


@pytest.mark.parametrize("rows", [1, 63, 64, 65, 129])
@pytest.mark.parametrize("bias", [True, False])
def test_onednn_linear_equals_f_linear(rows, bias):
    g = torch.Generator().manual_seed(rows)
    x = torch.randn(rows, 24, generator=g, requires_grad=True)
    w = torch.randn(40, 24, generator=g, requires_grad=True)
    b = torch.randn(40, generator=g, requires_grad=True) if bias else None
    dy = torch.randn(rows, 40, generator=g)
    ours, reference = both_ways(x, w, b, dy)
    for a, r in zip(ours, reference):
        assert a.shape == r.shape and a.dtype == r.dtype
        torch.testing.assert_close(a, r, rtol=1e-5, atol=1e-4)


def test_onednn_linear_takes_strided_inputs_and_gradients():
    "A transposed input and a non-contiguous incoming gradient give the same results."
    g = torch.Generator().manual_seed(0)
    x = torch.randn(24, 70, generator=g).t().requires_grad_()  # (70, 24), a view
    w = torch.randn(40, 24, generator=g, requires_grad=True)
    dy = torch.randn(40, 70, generator=g).t()  # (70, 40), not contiguous
    ours, reference = both_ways(x, w, None, dy)
    for a, r in zip(ours, reference):
        torch.testing.assert_close(a, r, rtol=1e-5, atol=1e-4)


def test_no_rows_falls_back_to_f_linear():
    x = torch.zeros(0, 8, requires_grad=True)
    w = torch.randn(5, 8, requires_grad=True)
    y = linear(x, w, None, onednn=True)
    assert y.shape == (0, 5)
    y.sum().backward()
    assert w.grad is not None and w.grad.abs().sum() == 0


def test_rows_are_rounded_to_a_multiple(monkeypatch):
    "N from 1000 to 1127 reaches oneDNN as three shapes, forward and backward."
    seen = []
    product = fast._onednn_product

    def recording(x, weight, bias):
        seen.append((tuple(x.shape), tuple(weight.shape)))
        return product(x, weight, bias)

    monkeypatch.setattr(fast, "_onednn_product", recording)
    w = torch.randn(12, 16, requires_grad=True)
    for n in range(1000, 1128):
        x = torch.randn(n, 16, requires_grad=True)
        y = OneDNNLinear.apply(x, w, None)
        assert y.shape == (n, 12)
        y.sum().backward()
    padded = {-(-n // ONEDNN_ROWS) * ONEDNN_ROWS for n in range(1000, 1128)}
    assert padded == {1024, 1088, 1152}
    # forward (M, 16) x (12, 16); backward dx (M, 12) x (16, 12), dW (12, M) x (16, M)
    forward = {s for s in seen if s[1] == (12, 16)}
    assert forward == {((m, 16), (12, 16)) for m in padded}
    assert len(set(seen)) == 3 * len(padded)


def test_only_the_needed_gradients_are_computed(monkeypatch):
    "A weight that needs no gradient costs no dW product; an input, no dx product."
    calls = []
    product = fast._onednn_product
    monkeypatch.setattr(fast, "_onednn_product", lambda *a: calls.append(a[0].shape) or product(*a)
    )
    x = torch.randn(70, 16)  # no gradient
    w = torch.randn(12, 16, requires_grad=True)
    OneDNNLinear.apply(x, w, None).sum().backward()
    assert len(calls) == 2  # forward, dW
    calls.clear()
    x.requires_grad_()
    OneDNNLinear.apply(x, w.detach(), None).sum().backward()
    assert len(calls) == 2  # forward, dx


def tiny_batch(seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(3, 50, (6, 9), generator=g)
    tgt = torch.randint(3, 50, (6, 8), generator=g)
    src[1, 5:] = src[4, 7:] = 0
    tgt[2, 4:] = tgt[5, 6:] = 0
    return src, tgt, tgt != 0


@pytest.mark.parametrize("config", [dict(norm_first=False), dict(norm_first=True)])
def test_packed_states_same_either_way(config):
    "Float32: the packed forward and its parameter gradients agree to rounding."
    torch.manual_seed(0)
    model = Transformer(TransformerConfig.tiny(**config)).eval()
    src, tgt, keep = tiny_batch(1)
    out = {}
    for onednn in (True, False):
        model.zero_grad(set_to_none=True)
        h = packed_decoder_states(model, src, tgt, keep, onednn)
        linear(h, model.tgt_embed.weight, None, onednn).square().mean().backward()
        out[onednn] = h.detach(), {n: p.grad for n, p in model.named_parameters()}
    torch.testing.assert_close(out[True][0], out[False][0], rtol=1e-4, atol=1e-5)
    for n, grad in out[True][1].items():
        torch.testing.assert_close(grad, out[False][1][n], rtol=1e-3, atol=1e-6)


def test_train_step_multiplies_by_the_chosen_library(monkeypatch):
    "train_step with fast_loss multiplies as fast_loss's onednn says; both give the same loss and gradients."
    src, tgt, keep = tiny_batch(2)
    batch = Batch(src, tgt, tgt.roll(-1, 1).masked_fill(~keep, 0), torch.arange(6))
    settings = TrainSettings(max_steps=1, clip_norm=1.0)
    calls = []
    product = fast._onednn_product
    monkeypatch.setattr(fast, "_onednn_product", lambda *a: calls.append(1) or product(*a)
    )
    out = {}
    for onednn in (True, False):
        calls.clear()
        torch.manual_seed(1)
        model = Transformer(TransformerConfig.tiny(dropout=0.0))
        opt = make_optimizer(model, settings)
        loss = partial(fast.fast_loss, onednn=onednn)  # fast_train_step's, products chosen
        terms = train_step(model, batch, opt, 1e-3, settings, StepOptions(loss=loss))
        out[onednn] = terms.loss, {n: p.grad for n, p in model.named_parameters()}
        # every product of the step, forward and backward, or none
        assert (len(calls) > 40) if onednn else not calls
    torch.testing.assert_close(out[True][0], out[False][0])
    for n, grad in out[True][1].items():
        torch.testing.assert_close(grad, out[False][1][n], rtol=1e-3, atol=1e-6)


def test_policy(monkeypatch):
    model = Transformer(TransformerConfig.tiny())
    monkeypatch.setattr(fast, "onednn_faster", lambda kind: kind == "train")
    monkeypatch.setattr(torch, "get_num_threads", lambda: 1)
    assert use_onednn_products(model)
    # several threads: oneDNN's waits for its threads collapse under oversubscription
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    assert not use_onednn_products(model)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 1)
    assert not use_onednn_products(model.double())
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert not use_onednn_products(model.float())
    monkeypatch.setattr(fast, "onednn_faster", lambda kind: False)  # e.g. MKL with AVX-512
    assert not use_onednn_products(model)
    assert check_onednn(model, None) is False and check_onednn(model, True) is True


def test_check_onednn_rejects_bad_values():
    model = Transformer(TransformerConfig.tiny())
    with pytest.raises(ValueError, match="onednn must be True, False or None"):
        check_onednn(model, "yes")
    with pytest.raises(ValueError, match="onednn=True needs float32 weights"):
        check_onednn(model.double(), True)
    src, tgt, keep = tiny_batch(0)
    with pytest.raises(ValueError, match="onednn=True needs float32"):
        packed_decoder_states(model.double(), src, tgt, keep, onednn=True)
    assert check_onednn(model.double(), False) is False


def test_an_internal_operator_that_changed_is_not_used(monkeypatch):
    "If the internal product fails or disagrees, onednn_available says no and train_step falls back."
    def broken(x, weight, bias):
        raise TypeError("_linear_pointwise() takes 5 arguments")

    onednn_available.cache_clear()
    try:
        monkeypatch.setattr(fast, "_onednn_product", broken)
        assert not onednn_available()
        assert not use_onednn_products(Transformer(TransformerConfig.tiny()))
        onednn_available.cache_clear()
        monkeypatch.setattr(fast, "_onednn_product", lambda x, w, b: F.linear(x, w) + 1)
        assert not onednn_available()
    finally:
        onednn_available.cache_clear()


def test_a_missing_reordering_operator_turns_onednn_off(monkeypatch):
    "Decoding's packed weights need a second internal operator; without it, no oneDNN at all."
    def missing(weight, rows):
        raise AttributeError("'_OpNamespace' 'mkldnn' object has no attribute '_reorder_linear_weight'")

    onednn_available.cache_clear()
    try:
        monkeypatch.setattr(torch.ops.mkldnn, "_reorder_linear_weight", missing)
        assert not onednn_available()
        monkeypatch.setattr(fast_decoding, "onednn_faster", lambda kind: True)
        model = Transformer(TransformerConfig.tiny()).eval()
        assert not fast_decoding.use_onednn(model, rows=32)
        decoder = fast_decoding.FastDecoder(model, rows=32)   # built on addmm, no error
        assert not decoder.onednn and not decoder.project.onednn
    finally:
        onednn_available.cache_clear()


def test_the_policy_follows_the_processor_rule(monkeypatch):
    """Chapter 35's rule, read from the processor: oneDNN on a Zen 5 EPYC, F.linear (MKL) on
    an Intel Xeon with AVX-512; the decoder's layers take oneDNN on a Zen 4, training not."""
    import transformer_lit.machine as machine
    model = Transformer(TransformerConfig.tiny()).eval()
    monkeypatch.setattr(torch, "get_num_threads", lambda: 1)
    hosts = {"GenuineIntel 6": (False, False), "AuthenticAMD 25": (False, True),
             "AuthenticAMD 26": (True, True)}
    for host, (train, decode) in hosts.items():
        vendor, family = host.split()
        details = {"vendor": vendor, "family": family, "capability": "AVX512"}
        monkeypatch.setattr(machine, "cpu_details", lambda d=details: d)
        assert use_onednn_products(model) is train, host
        assert fast_decoding.use_onednn(model, rows=8) is decode, host
        assert fast_decoding.FastDecoder(model, rows=8).onednn is decode, host
    with pytest.raises(ValueError, match="kind must be one of decode, logits, got 'train'"):
        fast_decoding.use_onednn(model, rows=8, kind="train")


def test_the_library_times_nothing_and_keeps_nothing():
    "The measurement that chose by timing, and the file it kept, left the library (issue 56)."
    for name in ("onednn_measured_faster", "_time_products", "_seconds", "MEASURED_FILE"):
        assert not hasattr(fast, name), name
        assert not hasattr(fast_decoding, name), name
