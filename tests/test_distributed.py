"""Data-parallel training (chapter 21) on this CPU: torchrun, two processes, gloo."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from transformer_lit import corpus
from transformer_lit.data import Batch
from transformer_lit.model import Transformer, TransformerConfig
from transformer_lit.runs import RUN_MARKER, World, world_from_env
from transformer_lit.training import take_shard
from transformer_lit.checkpoints import load_checkpoint
from transformer_lit.training import label_smoothing_loss

from synthetic import RESUME, TINY, run

# torchrun as PyTorch documents it, from this interpreter (no script beside it assumed)
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}

pytestmark = pytest.mark.usefixtures("one_thread")   # conftest.py: `run` sets --threads 1

STEP = '''
import sys, torch
from transformer_lit.runs import join_processes, leave_processes, data_parallel
from transformer_lit.training import take_shard
from transformer_lit.model import Transformer, TransformerConfig
from transformer_lit.training import label_smoothing_loss
sys.path.insert(0, sys.argv[2])
from test_distributed import plan
torch.set_num_threads(1)
world = join_processes("cpu")
torch.manual_seed(0 + world.rank)   # different seeds: DDP must still start every copy from rank 0's
model = Transformer(TransformerConfig.tiny(50, 50, dropout=0.0))
mine = take_shard(plan(), world.rank, world.size)[0]
ddp = data_parallel(model, world)   # kept alive: its hooks average the gradients in backward
loss = label_smoothing_loss(ddp(mine.src, mine.tgt_in), mine.tgt_out).loss
loss.backward()
torch.save({n: p.grad for n, p in model.named_parameters()}, f"{sys.argv[1]}/grad{world.rank}.pt")
leave_processes(world)
'''


def plan() -> list[Batch]:
    g = torch.Generator().manual_seed(1)
    out = []
    for _ in range(5):
        tgt = torch.randint(4, 50, (3, 5), generator=g)
        out.append(Batch(torch.randint(4, 50, (3, 6), generator=g), tgt, tgt.roll(-1, 1), torch.arange(3)))
    return out


def test_world_from_env():
    assert world_from_env({}) == World(0, 1, 0)
    assert world_from_env({"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1"}) == World(1, 2, 1)
    with pytest.raises(ValueError, match="inconsistent"):
        world_from_env({"RANK": "2", "WORLD_SIZE": "2"})


def test_shards_are_disjoint_and_equal_in_size():
    items = list(range(11))
    parts = [take_shard(items, r, 3) for r in range(3)]
    assert [len(p) for p in parts] == [3, 3, 3]
    assert sorted(sum(parts, [])) == items[:9] and take_shard(items, 0, 1) == items


@pytest.mark.parametrize("rank, world, words", [(3, 2, r"rank must be an int in \[0, 1\], got 3"),
                                                (-1, 2, r"rank must be an int in \[0, 1\], got -1"),
                                                (0, 0, "world must be a positive int, got 0")])
def test_a_rank_outside_the_world_is_refused_not_given_nothing(rank, world, words):
    with pytest.raises(ValueError, match=words):   # rank 3 of 2 used to get []
        take_shard(list(range(10)), rank, world)


def test_first_step_gradient_is_the_average_of_the_shards(tmp_path):
    (tmp_path / "step.py").write_text(STEP)
    done = subprocess.run(TORCHRUN + [str(tmp_path / "step.py"), str(tmp_path), str(Path(__file__).parent)],
                          capture_output=True, text=True, timeout=300, env=ENV)
    assert done.returncode == 0, done.stderr[-3000:]
    torch.manual_seed(0)   # rank 0's seed: DDP broadcast its weights
    single = Transformer(TransformerConfig.tiny(50, 50, dropout=0.0))
    grads = []
    for rank in range(2):
        single.zero_grad()
        b = take_shard(plan(), rank, 2)[0]
        label_smoothing_loss(single(b.src, b.tgt_in), b.tgt_out).loss.backward()
        grads.append({n: p.grad.clone() for n, p in single.named_parameters()})
    for rank in range(2):
        got = torch.load(tmp_path / f"grad{rank}.pt", weights_only=True)
        for n in got:
            torch.testing.assert_close(got[n], (grads[0][n] + grads[1][n]) / 2, rtol=1e-5, atol=1e-7)


def test_torchrun_trains_the_cli_on_two_processes(cache, tmp_path, capsys):
    env = {**ENV, corpus.CACHE_ENV: str(cache)}
    out = tmp_path / "run"
    command = TORCHRUN + ["-m", "transformer_lit.cli", "train", *TINY, "--out", str(out)]
    done = subprocess.run(command + ["--steps", "4"], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert sorted(p.name for p in out.iterdir()) == [
        RUN_MARKER, "checkpoint.pt", "config.json", "model.safetensors", "results.json",
        "tokenizer.model"]
    ckpt = load_checkpoint(out / "checkpoint.pt")
    assert ckpt["world_size"] == 2 and ckpt["state"]["step"] == 4
    assert done.stdout.count("4 steps in") == 1   # rank 0 alone reports
    resume = ["train", "--steps", "6", "--out", str(out), *RESUME]
    status, _, err = run(resume, capsys)   # one process, in this one
    assert status == 2 and "as many" in err and "Traceback" not in err
    again = subprocess.run(TORCHRUN + ["-m", "transformer_lit.cli", *resume], capture_output=True, text=True,
                           timeout=300, env=env)
    assert again.returncode == 0, again.stderr[-3000:]
    assert load_checkpoint(out / "checkpoint.pt")["state"]["step"] == 6


def test_minutes_are_refused_before_the_processes_wait_for_each_other(tmp_path, capsys, monkeypatch):
    """Rank 0 of two, started by hand with no peer: --minutes is refused at once, in one line,
    before the rendezvous (which would wait for the missing rank) and before --out is made."""
    for name, value in {"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0",
                        "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1"}.items():
        monkeypatch.setenv(name, value)
    out = tmp_path / "run"
    status, _, err = run(["train", *TINY, "--out", str(out), "--minutes", "1"], capsys)
    assert status == 2 and "--minutes cannot be used with torchrun" in err and "Traceback" not in err
    assert not out.exists()
