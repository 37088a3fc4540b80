"""benchmarks/bench_peers.py at tiny sizes: Hugging Face's MarianMTModel is configured as ours (same
sizes, same trainable parameters, same logits with our weights), and every case runs once and returns
finite times. No speed is asserted here: the numbers come from the benchmark itself."""
from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

pytest.importorskip("transformers", reason="transformers is not installed: pip install -e '.[huggingface]' installs it")

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))   # the benchmarks import each other as top-level modules
try:
    import bench_peers as peers
finally:
    sys.path.remove(str(BENCHMARKS))

TINY = peers.Sizes(vocab=1000, d_model=32, n_heads=4, n_layers=2, d_ff=64, max_len=64)

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def decoding():
    return peers.decode_models(TINY)   # checks the logits agree before returning


def test_marian_is_configured_as_ours(decoding):
    ours, marian = decoding
    c, m = ours.config, marian.config
    assert (m.vocab_size, m.decoder_vocab_size, m.d_model) == (c.src_vocab_size, c.tgt_vocab_size, c.d_model)
    assert (m.encoder_layers, m.decoder_layers) == (c.n_layers, c.n_layers)
    assert (m.encoder_attention_heads, m.decoder_attention_heads) == (c.n_heads, c.n_heads)
    assert (m.encoder_ffn_dim, m.decoder_ffn_dim) == (c.d_ff, c.d_ff)
    assert m.activation_function == "relu" and m.scale_embedding and m.max_position_embeddings == c.max_len
    assert m.dropout == m.attention_dropout == m.activation_dropout == c.dropout == 0.0
    assert not marian.training and not ours.training
    # one matrix for source, target and output, as ours (share_embeddings=True)
    shared = marian.model.shared.weight
    assert marian.lm_head.weight is shared
    assert marian.model.encoder.embed_tokens.weight is shared and marian.model.decoder.embed_tokens.weight is shared
    assert c.share_embeddings and ours.src_embed is ours.tgt_embed
    # eos off: both sides write exactly the tokens asked for
    assert marian.generation_config.eos_token_id is None and marian.generation_config.forced_eos_token_id is None


def test_parameter_counts_match_within_documented_differences(decoding):
    ours, marian = decoding
    o, m = peers.parameter_counts(ours), peers.parameter_counts(marian)
    assert o["trainable"] == m["trainable"] > 0 and o["frozen"] == 0
    # Marian: its two sinusoidal tables are frozen parameters, ours one buffer; its final_logits_bias is zeros
    assert m["frozen"] == 2 * TINY.max_len * TINY.d_model
    assert o["buffers"] == TINY.max_len * TINY.d_model
    assert m["buffers"] == TINY.vocab and not marian.final_logits_bias.any()
    for table in (marian.model.encoder.embed_positions, marian.model.decoder.embed_positions):
        assert not table.weight.requires_grad


def test_the_three_training_models_agree():
    models = peers.train_models(TINY)   # check_same_model inside: same logits in eval mode
    counts = {name: peers.parameter_counts(m)["trainable"] for name, m in models.items()}
    assert counts["ours"] == counts["marian"] == counts["torch"], counts
    assert all(m.training for m in models.values())


@pytest.mark.parametrize("case", [c for c in peers.SMOKE_CASES if c.kind != "train"], ids=lambda c: c.name)
def test_decoding_case_runs_once(decoding, case):
    ours, marian = decoding
    row = peers.run_decoding(case, ours, marian, repeats=1, warmup=0)
    # greedy is also timed with torch's argmax in place of the command line's two-pass one
    sides = {"ours", "marian"} | ({"ours_argmax"} if case.kind == "greedy" else set())
    assert row["tokens_written"] == {side: case.batch * case.new_tokens for side in sides}
    seconds = row["median_seconds"]
    assert set(seconds) == sides
    assert ("speedup_of_two_pass_argmax" in row) == (case.kind == "greedy")
    assert all(math.isfinite(s) and s > 0 for s in seconds.values())
    assert math.isfinite(row["ratio_ours_to_marian"]) and isinstance(row["goal"]["met"], bool)


def test_train_step_case_runs_once():
    case = next(c for c in peers.SMOKE_CASES if c.kind == "train")
    row = peers.run_train_step(case, peers.train_models(TINY), repeats=1, warmup=0)
    seconds = row["median_seconds"]
    assert set(seconds) == {"ours", "marian", "torch"}
    assert all(math.isfinite(s) and s > 0 for s in seconds.values())
    assert math.isfinite(row["ratio_ours_to_marian"]) and math.isfinite(row["ratio_ours_to_torch"])


def test_smoke_run_writes_nothing(monkeypatch, capsys):
    def refuse(*args, **kwargs):
        raise AssertionError("--smoke must not write a result file")
    monkeypatch.setattr(peers, "write_result", refuse)
    payload = peers.main(["--smoke", "--threads", "1"])
    assert [r["name"] for r in payload["cases"]] == [c.name for c in peers.SMOKE_CASES]
    assert payload["transformers"] and payload["setup_differences"]
    assert set(payload["load_average_1min"]) == {"before", "after"}
    assert "smoke run" in capsys.readouterr().out
