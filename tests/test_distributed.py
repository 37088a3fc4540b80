"""Data-parallel training (chapter 21) on this CPU: torchrun, two processes, gloo."""
from __future__ import annotations

import os
import select
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch
from synthetic import COMMAND, RESUME, TINY, assert_one_line_error, run

import transformer_lit.runs as runs
from transformer_lit import files
from transformer_lit.checkpoints import load_checkpoint
from transformer_lit.data import Batch
from transformer_lit.model import Transformer, TransformerConfig
from transformer_lit.runs import RUN_MARKER, World, world_from_env
from transformer_lit.training import label_smoothing_loss, take_shard

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
    env = {**ENV, files.CACHE_ENV: str(cache)}
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


# --- from the hostile-input rounds (issues 32, 39, 47, 50) --------------------


def hand_started(monkeypatch, rank: int) -> None:
    "The variables of a process started by hand (no torchrun), rank `rank` of two, on a free port."
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    for name in ("LOCAL_RANK", "TORCHELASTIC_RUN_ID"):
        monkeypatch.delenv(name, raising=False)
    for name, value in {"RANK": str(rank), "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1",
                        "MASTER_PORT": str(port)}.items():
        monkeypatch.setenv(name, value)


@pytest.mark.parametrize("env, words", [
    ({"WORLD_SIZE": "2"}, ["WORLD_SIZE=2", "MASTER_ADDR", "torchrun"]),
    ({"WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1"}, ["MASTER_PORT", "torchrun"]),
    ({"RANK": "abc"}, ["RANK", "integers"]),
    ({"RANK": "3", "WORLD_SIZE": "2"}, ["inconsistent", "RANK=3"]),
])
def test_torchruns_variables_without_torchrun_are_one_line(tmp_path, capsys, monkeypatch, env, words):
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    argv = ["train", *TINY, "--steps", "2", "--out", str(tmp_path / "run")]
    assert_one_line_error(*run(argv, capsys), *words)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("rank, words", [(0, ["only 1 of WORLD_SIZE=2", "torchrun"]),
                                         (1, ["could not reach rank 0", "torchrun"])])
def test_a_process_started_by_hand_without_its_peer_gives_up_in_one_line(
        tmp_path, capsys, monkeypatch, rank, words):
    hand_started(monkeypatch, rank)
    monkeypatch.setattr("transformer_lit.runs.RENDEZVOUS_SECONDS", 1)   # 300 in use
    argv = ["train", *TINY, "--steps", "2", "--out", str(tmp_path / "run")]
    assert_one_line_error(*run(argv, capsys), "MASTER_PORT", *words)
    assert not (tmp_path / "run").exists()


def test_the_wait_for_a_peer_says_so_and_stops_at_ctrl_c(tmp_path, cache, monkeypatch):
    """torch's own rendezvous waited 30 minutes in C++, silent and deaf to Ctrl-C."""
    hand_started(monkeypatch, 0)
    out = tmp_path / "run"
    proc = subprocess.Popen([*COMMAND, "train", *TINY, "--steps", "2", "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        # the wait announces itself after a second
        assert select.select([proc.stderr], [], [], 30)[0], "a silent wait"
        line = proc.stderr.readline()
        assert "waiting for the other processes" in line and "Ctrl-C" in line, line
        proc.send_signal(signal.SIGINT)
        out_text, err = proc.communicate(timeout=20)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 130 and "Traceback" not in err, (proc.returncode, err)
    assert not out.exists()


def test_processes_started_by_hand_meet_and_sum(tmp_path, monkeypatch):
    """Two processes started without torchrun join one gloo group through runs.join_processes."""
    hand_started(monkeypatch, 0)
    script = ("import torch, torch.distributed as dist\n"
              "from transformer_lit.runs import join_processes, leave_processes\n"
              "w = join_processes('cpu'); t = torch.tensor([w.rank + 1.0]); dist.all_reduce(t)\n"
              "print(w.rank, t.item()); leave_processes(w)\n")
    procs = [subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True,
                              env={**os.environ, "RANK": str(rank)}) for rank in (1, 0)]
    try:
        outs = [p.communicate(timeout=120) for p in procs]
    finally:
        for p in procs:
            p.kill()
            p.wait()
    assert sorted(o.strip() for o, _ in outs) == ["0 3.0", "1 3.0"], outs


def listening_addresses(port: int) -> set[str]:
    "The local addresses (hex, as /proc/net/tcp* writes them) that listen on port."
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, hex_port = local.rsplit(":", 1)
            if state == "0A" and int(hex_port, 16) == port:   # 0A: LISTEN
                found.add(address)
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stranger(send: bytes | None) -> int:
    "A program at a port that accepts every connection and then sends `send`, or nothing."
    server = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []

    def serve() -> None:
        while True:
            conn, _ = server.accept()
            held.append(conn)   # never answered, never closed
            if send:
                conn.sendall(send)

    threading.Thread(target=serve, daemon=True).start()
    return server.getsockname()[1]


def _rendezvous_outcome(seconds: float) -> BaseException | None:
    "What rank 1's rendezvous raised, or None if it was still waiting after 20 s."
    said: list[BaseException] = []

    def join() -> None:
        try:
            runs._rendezvous(runs.World(1, 2, 1), seconds=seconds)
        except BaseException as e:   # noqa: BLE001 (returned)
            said.append(e)

    joining = threading.Thread(target=join, daemon=True)   # a hang must not hang pytest
    joining.start()
    joining.join(20)
    return said[0] if said else None


def test_rank_0_listens_at_master_addr_only(monkeypatch):
    "Any host could join a run started by hand, or feed it garbage: the store took every address."
    port = free_port()
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(port))
    store = runs._rendezvous(runs.World(0, 1, 0), seconds=5)
    try:
        assert listening_addresses(port) == {"0100007F"}   # 127.0.0.1, not 0.0.0.0 or ::
    finally:
        del store


def test_an_address_rank_0_cannot_listen_at_is_one_line(monkeypatch):
    monkeypatch.setenv("MASTER_ADDR", "no-such-host.invalid")
    monkeypatch.setenv("MASTER_PORT", str(free_port()))
    with pytest.raises(runs.RendezvousError, match=r"^rank 0 cannot listen at MASTER_ADDR=no-such-host.invalid"):
        runs._rendezvous(runs.World(0, 2, 0), seconds=5)


def test_a_port_that_accepts_and_never_answers_is_given_up_on(monkeypatch, capsys):
    "Rank 1 against such a port was silent for over 200 s (torch's client waits without end)."
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(_stranger(None)))
    said = _rendezvous_outcome(seconds=2)
    assert isinstance(said, runs.RendezvousError), said
    assert str(said).startswith("rank 1 got no answer from the store at the port after 2 s")
    assert "waiting for the other processes" in capsys.readouterr().err


def test_a_port_that_sends_garbage_is_one_line(monkeypatch, capfd):
    "torch's client printed about 120 lines of C++ stack traces around its error."
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(_stranger(b"\xff" * 64)))
    said = _rendezvous_outcome(seconds=5)
    assert isinstance(said, runs.RendezvousError), said
    assert "is not rank 0's store: it sent data unasked" in str(said)
    assert capfd.readouterr().err == ""


def test_a_stray_torchelastic_run_id_says_what_it_waits_for():
    "With TORCHELASTIC_RUN_ID set by hand and no peer, a process waited without a word."
    env = {**os.environ, "WORLD_SIZE": "2", "RANK": "1", "LOCAL_RANK": "1",
           "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()),
           "TORCHELASTIC_RUN_ID": "stray"}
    code = "import transformer_lit.runs as r; r.join_processes('cpu')"
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        # still waiting, and saying so, a second after it began (not ended with an error)
        assert select.select([proc.stderr], [], [], 30)[0], "a silent wait"
        err = proc.stderr.readline()
        assert proc.poll() is None, f"it did not wait: {err}"
    finally:
        proc.kill()
        proc.wait()
    assert "waiting for torchrun's other processes" in err and "unset TORCHELASTIC_RUN_ID" in err
