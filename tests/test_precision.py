"""The precision a device trains and decodes in (chapter 10): bf16 where the GPU has bf16 tensor
cores, float16 with loss scaling on older GPUs such as Colab's T4, float32 on a CPU. No GPU needed:
the device's compute capability is faked, and GradScaler's bookkeeping runs on the CPU."""
from __future__ import annotations

from pathlib import Path
from unittest import mock

import pytest
import torch

from transformer_lit.data import Batch
from transformer_lit.model import Transformer, TransformerConfig
from transformer_lit.machine import autocast_dtype, autocast_for, make_scaler
from transformer_lit.recipe import TrainSettings
from transformer_lit.training import StepOptions, TrainState, make_optimizer, train_step

GPUS = [((6, 0), torch.float16), ((7, 0), torch.float16), ((7, 5), torch.float16),
        ((8, 0), torch.bfloat16), ((8, 9), torch.bfloat16), ((9, 0), torch.bfloat16)]


@pytest.mark.parametrize("capability, dtype", GPUS)
def test_autocast_dtype_follows_the_compute_capability(capability, dtype):
    with mock.patch.object(torch.cuda, "get_device_capability", lambda device=None: capability):
        assert autocast_dtype(torch.device("cuda")) == dtype
        asked = []   # without a GPU, GradScaler("cuda") would switch itself off: record what is asked
        with mock.patch.object(torch.amp, "GradScaler", lambda device, enabled: asked.append(enabled)):
            make_scaler(torch.device("cuda"), TrainSettings(max_steps=1))
            make_scaler(torch.device("cuda"), TrainSettings(max_steps=1, amp=False))
        assert asked == [dtype == torch.float16, False]


def test_a_t4_does_not_get_emulated_bf16_even_if_torch_says_it_is_supported():
    with mock.patch.object(torch.cuda, "get_device_capability", lambda device=None: (7, 5)), \
         mock.patch.object(torch.cuda, "is_bf16_supported", lambda *a, **k: True):
        assert autocast_dtype(torch.device("cuda")) == torch.float16


def test_cpu_is_float32_and_autocast_does_nothing():
    cpu = torch.device("cpu")
    assert autocast_dtype(cpu) is None
    with autocast_for(cpu):
        assert torch.ones(2, 2).matmul(torch.ones(2, 2)).dtype == torch.float32
    assert not make_scaler(cpu, TrainSettings(max_steps=1)).is_enabled()


def batch(seed: int = 0) -> Batch:
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(4, 40, (4, 7), generator=g)
    tgt = torch.randint(4, 40, (4, 6), generator=g)
    return Batch(src, tgt, tgt.roll(-1, 1), torch.arange(4))


def model() -> Transformer:
    torch.manual_seed(0)
    return Transformer(TransformerConfig.tiny(40, 40))


def test_loss_scaled_step_equals_the_plain_step():
    settings = TrainSettings(max_steps=1)
    plain, scaled = model(), model()
    torch.manual_seed(1)   # the same dropout masks in both steps
    train_step(plain, batch(), make_optimizer(plain, settings), 1e-3, settings)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 16)
    torch.manual_seed(1)
    train_step(scaled, batch(), make_optimizer(scaled, settings), 1e-3, settings, StepOptions(scaler=scaler))
    for (name, a), b in zip(plain.state_dict().items(), scaled.state_dict().values()):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-7, msg=name)
    assert scaler.get_scale() == 2.0 ** 16   # no overflow: the scale stays


def test_an_overflow_skips_the_update_and_halves_the_scale():
    settings = TrainSettings(max_steps=1)
    m = model()
    before = {k: v.clone() for k, v in m.state_dict().items()}
    next(m.parameters()).register_hook(lambda g: g * float("inf"))   # as if float16 overflowed
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 16)
    train_step(m, batch(), make_optimizer(m, settings), 1e-3, settings, StepOptions(scaler=scaler))
    assert all(torch.equal(before[k], v) for k, v in m.state_dict().items())
    assert scaler.get_scale() == 2.0 ** 15


def test_the_scaler_state_travels_in_the_train_state():
    state = TrainState(scaler=torch.amp.GradScaler("cpu", init_scale=1024.0).state_dict())
    again = TrainState.from_dict(state.to_dict())
    restored = torch.amp.GradScaler("cpu")
    restored.load_state_dict(again.scaler)
    assert restored.get_scale() == 1024.0


def test_the_cudnn_attention_policy_is_scoped_and_restored():
    """attention_policy (chapter 35) turns cuDNN's attention off inside its block on CUDA
    only, and puts back what was there, also after an error; the command line, an entry
    point, holds it while a subcommand runs, no library function does (STYLE 26: fit and
    the decoding run what they are given), and nothing else in the package touches the
    switch (issue 47)."""
    from transformer_lit import machine
    flag = {"on": True}
    with mock.patch.object(torch.backends.cuda, "enable_cudnn_sdp",
                           lambda on: flag.update(on=on)), \
            mock.patch.object(torch.backends.cuda, "cudnn_sdp_enabled", lambda: flag["on"]):
        with machine.attention_policy(torch.device("cpu")):
            assert flag["on"]
        with machine.attention_policy("cuda"):
            assert not flag["on"]
        assert flag["on"]
        flag["on"] = False   # someone else's choice is put back, not True
        with machine.attention_policy(torch.device("cuda")):
            assert not flag["on"]
        assert not flag["on"]
        flag["on"] = True
        with pytest.raises(RuntimeError), machine.attention_policy("cuda"):
            raise RuntimeError("inside")
        assert flag["on"]
    package = Path(machine.__file__).parent
    for name in ("training.py", "inference.py"):
        assert "attention_policy(" not in (package / name).read_text(), name
    assert "attention_policy(gpu)" in (package / "cli" / "__init__.py").read_text()
    touching = sorted(p.name for p in package.rglob("*.py")
                      if "enable_cudnn_sdp(" in p.read_text())
    assert touching == ["machine.py"], touching
