"""Training: label smoothing, the schedule, checkpoints (atomic, weights_only, bitwise resume), averaging, the loop."""
from __future__ import annotations

import random

import pytest
import torch
import torch.nn.functional as F

from transformer_lit.data import PAD_ID, EncodedPair, SubwordTokenizer, collate, train_tokenizer
from transformer_lit.model import Transformer, TransformerConfig
from transformer_lit.training import LossTerms
from transformer_lit.fast import smoothed_cross_entropy as _closed_form
from transformer_lit.recipe import (
    TrainSettings,
    preset_config,
    preset_settings,
    preset_vocab_size,
    book_run,
)
from transformer_lit.scoring import bleu
from transformer_lit.checkpoints import (
    CHECKPOINT_FORMAT,
    average_state_dicts,
    load_checkpoint,
    model_from_checkpoint,
    restore_rng_states,
    rng_states,
    run_record,
    save_checkpoint,
)
from transformer_lit.training import (
    FitOptions,
    StepOptions,
    TrainState,
    evaluate,
    fit,
    label_smoothing_loss,
    make_optimizer,
    noam_lr,
    train_step,
)

V = 40


pytestmark = pytest.mark.usefixtures("one_thread")   # conftest.py


def tiny_model(seed: int = 0, **overrides) -> Transformer:
    torch.manual_seed(seed)
    return Transformer(TransformerConfig.tiny(V, V, share_embeddings=True, **overrides))


def toy_examples(n: int = 48, seed: int = 0) -> list[EncodedPair]:
    "Pairs whose target is the source reversed and shifted: learnable, with varied lengths."
    rng = random.Random(seed)
    out = []
    for i in range(n):
        src = [rng.randrange(4, V) for _ in range(rng.randint(3, 12))]
        out.append(EncodedPair(i, src, [4 + (t - 4 + 1) % (V - 4) for t in reversed(src)]))
    return out


# --- label smoothing ------------------------------------------------------------------------------

def smoothed_cross_entropy(*args, **kwargs) -> LossTerms:
    "The fast loss, its (loss, nll) named as label_smoothing_loss names them."
    return LossTerms(*_closed_form(*args, **kwargs))


LOSSES = [label_smoothing_loss, smoothed_cross_entropy]  # autograd's gradient; closed form


@pytest.mark.parametrize("loss_fn", LOSSES)
@pytest.mark.parametrize("shape", [(5,), (3, 7), (2, 4, 6)])
@pytest.mark.parametrize("smoothing", [0.0, 0.1, 0.3])
def test_label_smoothing_matches_torch(loss_fn, shape, smoothing):
    torch.manual_seed(len(shape))
    vocab = 11
    logits = (4 * torch.randn(*shape, vocab)).requires_grad_()
    target = torch.randint(0, vocab, shape)
    target.view(-1)[::3] = PAD_ID
    terms = loss_fn(logits, target, smoothing, PAD_ID)
    flat_logits, flat_target = logits.reshape(-1, vocab), target.reshape(-1)
    loss = F.cross_entropy(flat_logits, flat_target, ignore_index=PAD_ID, label_smoothing=smoothing)
    nll = F.cross_entropy(flat_logits, flat_target, ignore_index=PAD_ID)
    torch.testing.assert_close(terms.loss, loss)
    torch.testing.assert_close(terms.nll, nll)
    for ours, torchs in ((terms.loss, loss), (terms.nll, nll), (terms.loss - 2 * terms.nll, loss - 2 * nll)):
        ours_grad, = torch.autograd.grad(ours, logits, retain_graph=True)
        torch_grad, = torch.autograd.grad(torchs, logits, retain_graph=True)
        torch.testing.assert_close(ours_grad, torch_grad)


def test_closed_form_gradient_passes_gradcheck():
    torch.manual_seed(3)
    logits = torch.randn(7, 6, dtype=torch.float64, requires_grad=True)
    target = torch.tensor([1, 0, 5, 2, 0, 3, 4])
    for term in ("loss", "nll"):
        assert torch.autograd.gradcheck(
            lambda z: getattr(smoothed_cross_entropy(z, target, 0.2, PAD_ID), term), (logits,))


def test_closed_form_gradient_all_padding_and_bf16():
    logits = torch.randn(3, 10, requires_grad=True)
    terms = smoothed_cross_entropy(logits, torch.zeros(3, dtype=torch.long), 0.1, PAD_ID)
    terms.loss.backward()
    assert terms.loss.item() == 0.0 and torch.count_nonzero(logits.grad) == 0
    logits = torch.randn(4, 10, dtype=torch.bfloat16, requires_grad=True)
    terms = smoothed_cross_entropy(logits, torch.tensor([1, 2, 0, 3]), 0.1, PAD_ID)
    terms.loss.backward()
    assert terms.loss.dtype == torch.float32 and logits.grad.dtype == torch.bfloat16


@pytest.mark.parametrize("loss_fn", LOSSES)
def test_label_smoothing_bf16_logits_are_computed_in_float32(loss_fn):
    torch.manual_seed(2)
    logits, target = torch.randn(4, 5, 30), torch.randint(1, 30, (4, 5))
    terms = loss_fn(logits.bfloat16(), target)
    assert terms.loss.dtype == torch.float32
    torch.testing.assert_close(terms.loss, loss_fn(logits.bfloat16().float(), target).loss)


@pytest.mark.parametrize("loss_fn", LOSSES)
def test_label_smoothing_bad_inputs(loss_fn):
    with pytest.raises(ValueError, match="target"):
        loss_fn(torch.randn(2, 3, 5), torch.zeros(2, 4, dtype=torch.long))
    with pytest.raises(ValueError, match="smoothing"):
        loss_fn(torch.randn(2, 5), torch.zeros(2, dtype=torch.long), smoothing=1.0)
    for dtype in (torch.float32, torch.bool):   # was an error from inside gather
        with pytest.raises(ValueError, match=f"^target must hold integer token ids, got {dtype}$"):
            loss_fn(torch.randn(2, 5), torch.zeros(2, dtype=dtype))


# --- the schedule ---------------------------------------------------------------------------------

def test_noam_lr_values_and_peak():
    assert noam_lr(1, 512) == pytest.approx(512 ** -0.5 * 4000 ** -1.5)
    assert noam_lr(4000, 512) == pytest.approx((512 * 4000) ** -0.5)
    assert noam_lr(100_000, 512) == pytest.approx(512 ** -0.5 * 100_000 ** -0.5)
    assert noam_lr(30, 64, warmup=10, factor=2.0) == pytest.approx(2 * 64 ** -0.5 * 30 ** -0.5)
    lrs = [noam_lr(s, 256, warmup=50) for s in range(1, 500)]
    assert max(range(len(lrs)), key=lrs.__getitem__) + 1 == 50
    assert all(a < b for a, b in zip(lrs[:49], lrs[1:50])) and all(a > b for a, b in zip(lrs[49:], lrs[50:]))


@pytest.mark.parametrize("step", [0, -1, 1.5, True])
def test_noam_lr_rejects_bad_steps(step):
    with pytest.raises(ValueError, match="step"):
        noam_lr(step, 512)


# --- settings and presets -------------------------------------------------------------------------

def test_settings_need_a_budget_and_positive_sizes():
    with pytest.raises(ValueError, match="max_steps or max_minutes"):
        TrainSettings()
    with pytest.raises(ValueError, match="max_tokens"):
        TrainSettings(max_steps=1, max_tokens=0)
    for betas, words in [((1.5, 0.9), r"betas\[0\] must be a number in \[0.0, 1.0\), got 1.5"),
                         ((0.9,), r"betas must be a pair of numbers in \[0, 1\)"),
                         ("ab", r"betas must be a pair of numbers in \[0, 1\)")]:
        with pytest.raises(ValueError, match=words):   # Adam refused them only at the first step
            TrainSettings(max_steps=1, betas=betas)
    assert TrainSettings(max_steps=1, betas=[0.9, 0.98]).betas == [0.9, 0.98]   # as JSON gives it
    s = TrainSettings(max_minutes=1.5)
    assert (s.betas, s.eps, s.label_smoothing, s.warmup) == ((0.9, 0.98), 1e-9, 0.1, 4000)


def test_presets():
    assert preset_config("base", 100).d_model == 512 and preset_config("big", 100).d_model == 1024
    assert preset_config("cpu", 100).share_embeddings
    assert preset_settings("cpu", max_steps=3).max_steps == 3
    with pytest.raises(ValueError, match="preset"):
        preset_config("huge", 100)
    with pytest.raises(ValueError, match="preset"):
        preset_settings("huge", max_steps=1)
    with pytest.raises(ValueError, match="preset"):
        preset_vocab_size("huge")
    assert preset_vocab_size("cpu") < preset_vocab_size("base")


def test_book_run_budgets():
    preset, settings = book_run(torch.device("cpu"))
    assert preset == "cpu" and settings.max_steps is not None and settings.max_minutes is None   # repeatable on CPU
    preset, settings = book_run(torch.device("cuda"))   # no GPU needed to ask
    assert preset == "small" and settings.max_minutes is not None


def test_run_record_is_plain_data(tmp_path):
    record = run_record(torch.device("cpu"), "tiny", preset_config("tiny", 50), preset_settings("tiny", max_steps=3))
    assert record["preset"] == "tiny" and record["config"]["d_model"] == 32 and record["settings"]["max_steps"] == 3
    assert "CPU" in record["device"]
    save_checkpoint(tmp_path / "r.pt", tiny_model(), record=record)   # accepted by the weights_only check


def test_optimizer_is_the_papers_adam():
    opt = make_optimizer(tiny_model(), TrainSettings(max_steps=1))
    group = opt.param_groups[0]
    assert isinstance(opt, torch.optim.Adam) and group["betas"] == (0.9, 0.98) and group["eps"] == 1e-9


# --- steps and the loop ---------------------------------------------------------------------------

def test_a_few_steps_reduce_the_loss_on_a_fixed_batch():
    model = tiny_model()
    settings = TrainSettings(max_steps=30, warmup=5, lr_factor=0.5)
    batch = collate(toy_examples(16))
    opt = make_optimizer(model, settings)
    model.train()
    losses = [train_step(model, batch, opt, noam_lr(s, 32, 5, 0.5), settings).loss.item() for s in range(1, 31)]
    assert losses[-1] < 0.85 * losses[0]
    assert opt.param_groups[0]["lr"] == noam_lr(30, 32, 5, 0.5)


def test_clipping_bounds_the_update():
    settings = TrainSettings(max_steps=1, clip_norm=1e-3)
    model = tiny_model()
    before = [p.detach().clone() for p in model.parameters()]
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    train_step(model, collate(toy_examples(8)), opt, 1.0, settings)   # SGD step = -lr * grad
    moved = torch.cat([(p.detach() - b).flatten() for p, b in zip(model.parameters(), before)])
    assert moved.norm() <= 1e-3 * (1 + 1e-4)


def test_train_step_calls_a_forward_without_truth_value():
    "torch.compile returns a module whose bool() raises (it has __len__ and refuses it): train_step must not test it."
    class CompiledLike:
        def __init__(self, model):
            self.model, self.calls = model, 0
        def __len__(self):
            raise TypeError("CompiledLike does not support len()")
        def __call__(self, src, tgt):
            self.calls += 1
            return self.model(src, tgt)
    model, settings = tiny_model(), TrainSettings(max_steps=1)
    forward = CompiledLike(model)
    terms = train_step(model, collate(toy_examples(8)), make_optimizer(model, settings), 1e-3, settings,
                       StepOptions(forward))
    assert forward.calls == 1 and torch.isfinite(terms.loss)


def test_fit_compiles_once_for_all_batch_shapes(monkeypatch):
    "settings.compile asks torch.compile for dynamic shapes: length-bucketed batches would recompile per shape."
    seen = {}
    def fake_compile(model, **kwargs):
        seen.update(kwargs)
        return model
    monkeypatch.setattr(torch, "compile", fake_compile)
    model, settings = tiny_model(), TrainSettings(max_steps=2, max_tokens=64, compile=True)
    fit(model, make_optimizer(model, settings), (toy_examples(8), toy_examples(8)), settings, options=FitOptions(progress=False, log=None))
    assert seen == {"dynamic": True}


def test_evaluate_is_deterministic_and_restores_mode():
    model = tiny_model()
    batches = [collate(toy_examples(8))]
    model.train()
    assert evaluate(model, batches) == evaluate(model, batches) and model.training


def test_fit_learns_and_logs():
    examples = toy_examples()
    model = tiny_model()
    settings = TrainSettings(max_steps=60, max_tokens=128, warmup=10, lr_factor=0.5, eval_every=20,
                             average_every=10, average_last=3)
    state = fit(model, make_optimizer(model, settings), (examples, examples), settings, options=FitOptions(progress=False, log=None))
    assert state.step == 60 and len(state.train_log) == 60 and state.tokens > 0
    assert [s for s, _ in state.valid_log] == [20, 40, 60] and state.valid_log[-1][1] < state.valid_log[0][1]
    assert [s for s, _ in state.snapshots] == [40, 50, 60]
    assert state.epoch >= 1   # the stream went past the end of an epoch


def test_time_budget_stops():
    examples = toy_examples(8)
    model = tiny_model()
    settings = TrainSettings(max_minutes=1e-9, max_tokens=64)
    state = fit(model, make_optimizer(model, settings), (examples, examples), settings, options=FitOptions(progress=False, log=None))
    assert state.step == 1


# --- checkpoints ----------------------------------------------------------------------------------

def tiny_tokenizer() -> SubwordTokenizer:
    texts = ["in the beginning god created the heavens and the earth",
             "au commencement dieu créa les cieux et la terre"] * 5
    return train_tokenizer(texts, vocab_size=60)


def test_checkpoint_round_trip(tmp_path):
    model = tiny_model(dropout=0.2)
    settings = TrainSettings(max_steps=2)
    opt = make_optimizer(model, settings)
    train_step(model, collate(toy_examples(8)), opt, 1e-3, settings)
    tok = tiny_tokenizer()
    random.seed(5)
    torch.manual_seed(6)
    rng = rng_states()
    path = save_checkpoint(tmp_path / "sub" / "c.pt", model, opt, step=1, tokenizer=tok.to_bytes(),
                           note={"lr": [1e-3, 2e-3], "name": "x"})
    expected = (random.random(), torch.rand(3))   # what the generators give next after the save
    ckpt = torch.load(path, weights_only=True)   # plain data only: loads without trusting pickles
    assert ckpt["format"] == CHECKPOINT_FORMAT and ckpt["note"] == {"lr": [1e-3, 2e-3], "name": "x"}
    ckpt = load_checkpoint(path)
    assert ckpt["config"] == {**model.config.__dict__} and ckpt["step"] == 1
    restored = model_from_checkpoint(ckpt)
    assert restored.config == model.config
    for a, b in zip(model.state_dict().values(), restored.state_dict().values()):
        assert torch.equal(a, b)
    assert SubwordTokenizer(ckpt["tokenizer"]).to_bytes() == tok.to_bytes()
    opt2 = make_optimizer(restored, settings)
    opt2.load_state_dict(ckpt["optimizer"])
    for i, s in opt.state_dict()["state"].items():
        assert torch.equal(opt2.state_dict()["state"][i]["exp_avg_sq"], s["exp_avg_sq"])
    random.seed(0)
    torch.manual_seed(0)
    restore_rng_states(ckpt["rng"])
    assert torch.equal(ckpt["rng"]["torch"], rng["torch"])
    got = (random.random(), torch.rand(3))
    assert got[0] == expected[0] and torch.equal(got[1], expected[1])
    assert [p.name for p in (tmp_path / "sub").iterdir()] == ["c.pt"]   # no temporary file left


def test_checkpoint_is_atomic(tmp_path, monkeypatch):
    path = tmp_path / "c.pt"
    save_checkpoint(path, tiny_model(0), step=1)
    good = path.read_bytes()

    def failing_save(obj, f, *args, **kwargs):
        f.write(b"half a checkpoint")
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", failing_save)
    with pytest.raises(OSError, match="disk full"):
        save_checkpoint(path, tiny_model(1), step=2)
    assert path.read_bytes() == good and load_checkpoint(path)["step"] == 1
    assert [p.name for p in tmp_path.iterdir()] == ["c.pt"]


def test_checkpoint_refusals(tmp_path):
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        load_checkpoint(tmp_path / "missing.pt")
    (tmp_path / "junk.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="is not a checkpoint that"):
        load_checkpoint(tmp_path / "junk.pt")
    torch.save({"weights": torch.zeros(2)}, tmp_path / "other.pt")
    with pytest.raises(ValueError, match="is not a"):
        load_checkpoint(tmp_path / "other.pt")
    ckpt = load_checkpoint(save_checkpoint(tmp_path / "c.pt", tiny_model()))
    with pytest.raises(ValueError, match="does not fit"):
        model_from_checkpoint({**ckpt, "config": {**ckpt["config"], "d_model": 64}})
    with pytest.raises(ValueError, match="does not fit"):
        model_from_checkpoint({**ckpt, "config": {**ckpt["config"], "activation": "tanh"}})
    with pytest.raises(ValueError, match="reserved"):
        save_checkpoint(tmp_path / "d.pt", tiny_model(), rng={})


def test_resume_is_bitwise_identical(tmp_path):
    "N steps, save, load into fresh objects with other RNG states, N more == 2N steps straight."
    examples = toy_examples()
    settings = TrainSettings(max_steps=12, max_tokens=128, warmup=4, lr_factor=0.5, eval_every=5, average_every=5)
    half = TrainSettings(**{**settings.__dict__, "max_steps": 6})

    straight = tiny_model(0, dropout=0.3)
    fit(straight, make_optimizer(straight, settings), (examples, examples), settings, options=FitOptions(progress=False, log=None))

    first = tiny_model(0, dropout=0.3)
    opt = make_optimizer(first, half)
    state = fit(first, opt, (examples, examples), half, options=FitOptions(progress=False, log=None))
    save_checkpoint(tmp_path / "c.pt", first, opt, state=state.to_dict())

    torch.manual_seed(123)   # a different process would start from other generator states
    random.seed(123)
    ckpt = load_checkpoint(tmp_path / "c.pt")
    resumed = model_from_checkpoint(ckpt)
    opt2 = make_optimizer(resumed, settings)
    opt2.load_state_dict(ckpt["optimizer"])
    restore_rng_states(ckpt["rng"])
    state2 = fit(resumed, opt2, (examples, examples), settings, TrainState.from_dict(ckpt["state"]), FitOptions(progress=False, log=None))
    assert state2.step == 12 and state2.train_log[:6] == state.train_log[:6]
    for (name, a), b in zip(straight.state_dict().items(), resumed.state_dict().values()):
        assert torch.equal(a, b), name


# --- averaging and BLEU ---------------------------------------------------------------------------

def test_average_state_dicts():
    torch.manual_seed(3)
    models = [tiny_model(seed) for seed in range(4)]
    avg = average_state_dicts([m.state_dict() for m in models])
    for name, value in avg.items():
        want = torch.stack([m.state_dict()[name] for m in models]).mean(0)
        torch.testing.assert_close(value, want)
    half = average_state_dicts([{"x": torch.tensor([1.0, 2.0], dtype=torch.float16)}, {"x": torch.tensor([3.0, 5.0], dtype=torch.float16)}])
    assert half["x"].dtype == torch.float16 and half["x"].tolist() == [2.0, 3.5]
    ints = average_state_dicts([{"n": torch.tensor(1)}, {"n": torch.tensor(7)}])
    assert ints["n"].item() == 7   # non-float tensors come from the last state dict
    average = tiny_model(9)
    average.load_state_dict(avg)   # loads: same keys and shapes, shared embeddings stay consistent
    with pytest.raises(ValueError, match="at least one"):
        average_state_dicts([])
    with pytest.raises(ValueError, match="same keys"):
        average_state_dicts([{"a": torch.zeros(1)}, {"b": torch.zeros(1)}])
    with pytest.raises(ValueError, match="^state_dicts disagree on the shape of a$"):
        average_state_dicts([{"a": torch.zeros(2)}, {"a": torch.zeros(3)}])   # was torch's error


def test_a_checkpoint_written_to_a_folder_is_refused_by_name(tmp_path):
    from transformer_lit.files import write_atomically
    from transformer_lit.machine import describe_device
    with pytest.raises(IsADirectoryError, match=f"^{tmp_path} is a folder: give the file's name$"):
        write_atomically(tmp_path, lambda f: f.write(b"x"))   # the rename named a temporary file
    assert list(tmp_path.iterdir()) == []   # and nothing is left behind
    assert describe_device("cpu") == describe_device(torch.device("cpu"))   # a str is a device


def test_bleu():
    assert bleu(["le roi dit à Daniel"], ["le roi dit à Daniel"]) == pytest.approx(100.0)
    assert bleu(["a b c d e"], ["v w x y z"]) == 0.0
    with pytest.raises(ValueError, match="hypotheses"):
        bleu(["a"], ["a", "b"])


def test_checkpoint_refuses_what_weights_only_cannot_load(tmp_path):
    with pytest.raises(TypeError, match=r"checkpoint\['version'\] is a torch.*TorchVersion"):
        save_checkpoint(tmp_path / "c.pt", tiny_model(), version=torch.__version__)
    with pytest.raises(TypeError, match=r"checkpoint\['extra'\]\['when'\]\[0\]"):
        save_checkpoint(tmp_path / "c.pt", tiny_model(), extra={"when": [object()]})
    assert not tmp_path.exists() or not any(tmp_path.iterdir())
    save_checkpoint(tmp_path / "c.pt", tiny_model(), extra={"ok": [1, 2.5, "x", b"y", None, (True,), torch.float16]})
    assert load_checkpoint(tmp_path / "c.pt")["extra"]["ok"][-1] is torch.float16
