"""transformer_lit.model: the whole model against nn.Transformer (values and gradients), causality, source padding,
train vs eval, TransformerConfig, input checks, greedy_decode_uncached."""
from __future__ import annotations

import copy
import dataclasses
import json
import math
import re

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transformer_lit.ffn import FeedForward
from transformer_lit.masking import causal_mask
from transformer_lit.model import (Transformer, TransformerConfig, check_tokens, config_from_dict, config_to_dict,
                                   greedy_decode_uncached, load_torch_transformer)
from transformer_lit.norms import LayerNorm
from transformer_lit.positional import LearnedPositionalEncoding, PositionalEncoding
from transformer_lit.validate import ArgumentError

CASES = [(1, 5, 4), (3, 7, 5), (4, 6, 9)]   # (B, S, T): batch 1 and > 1, S != T
PAD, BOS, EOS = 0, 1, 2
pytestmark = [pytest.mark.filterwarnings("ignore:enable_nested_tensor is True:UserWarning"),   # nn.Transformer, pre-norm
              pytest.mark.usefixtures("no_mha_fastpath")]


class TorchReference(nn.Module):
    "Copies of our embeddings and positional encoding, then torch.nn.Transformer, then the projection tied to tgt_embed."
    def __init__(self, ours: Transformer):
        super().__init__()
        c = self.config = ours.config
        # one deepcopy call keeps a shared src/tgt embedding shared in the copy
        self.embed = copy.deepcopy(nn.ModuleDict(dict(src=ours.src_embed, tgt=ours.tgt_embed, pos=ours.pos)))
        self.core = nn.Transformer(c.d_model, c.n_heads, c.n_layers, c.n_layers, c.d_ff, c.dropout,
                                   batch_first=True, norm_first=c.norm_first)
        if not c.norm_first:                      # nn.Transformer adds final LayerNorms even for post-norm
            self.core.encoder.norm = self.core.decoder.norm = None
        with torch.no_grad():                     # PyTorch starts biases at 0 and LayerNorms at (1, 0)
            for p in self.core.parameters():
                if p.dim() == 1:
                    p.add_(0.1 * torch.randn_like(p))

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        e, scale = self.embed, math.sqrt(self.config.d_model)
        x, y = e["pos"](e["src"](src) * scale), e["pos"](e["tgt"](tgt) * scale)
        padding = src == self.config.pad_id                         # theirs: True = padding
        blocked = ~causal_mask(tgt.shape[1])                        # theirs: True = blocked
        h = self.core(x, y, tgt_mask=blocked, src_key_padding_mask=padding, memory_key_padding_mask=padding)
        return F.linear(h, e["tgt"].weight)                         # (B, T, D) -> (B, T, V)


def make_pair(seed: int, **overrides) -> tuple[Transformer, TorchReference]:
    torch.manual_seed(seed)
    ours = Transformer(TransformerConfig.tiny(**{"dropout": 0.0, **overrides}))
    ref = TorchReference(ours)
    return load_torch_transformer(ours, ref.core), ref


def tokens(B: int, S: int, T: int, config: TransformerConfig, seed: int) -> tuple[Tensor, Tensor]:
    "Random src (B, S) with a different amount of padding per row (at least one real token) and tgt (B, T)."
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(3, config.src_vocab_size, (B, S), generator=g)
    lengths = S - torch.randperm(S, generator=g)[:B]                  # distinct, in 1..S
    src[torch.arange(S) >= lengths[:, None]] = config.pad_id
    tgt = torch.randint(1, config.tgt_vocab_size, (B, T), generator=g)
    return src, tgt


def their_param(name: str, ref: TorchReference) -> tuple[nn.Parameter, int | None]:
    "The parameter of ref that holds our parameter `name`, and which third of it (q, k, v: 0, 1, 2) or None for all."
    if name in ("src_embed.weight", "tgt_embed.weight"):
        return ref.embed[name.split("_")[0]].weight, None
    res_to_norm = {"encoder": {"attn_res": "norm1", "ffn_res": "norm2"},
                   "decoder": {"self_res": "norm1", "cross_res": "norm2", "ffn_res": "norm3"}}[name.split(".")[0]]
    theirs = re.sub(r"\.(\w+_res)\.norm\.", lambda m: f".{res_to_norm[m.group(1)]}.", name)
    theirs = theirs.replace(".cross_attn.", ".multihead_attn.").replace(".ffn.", ".")
    qkv = re.search(r"\.([qkv])_proj\.(weight|bias)$", theirs)
    if qkv:   # self_attn.q_proj.weight -> self_attn.in_proj_weight, first third
        return ref.core.get_parameter(theirs[:qkv.start()] + f".in_proj_{qkv.group(2)}"), "qkv".index(qkv.group(1))
    return ref.core.get_parameter(theirs), None


# ---------------------------------------------------------------- parity with nn.Transformer

@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("share", [False, True])
def test_logits_match_torch_transformer(case, norm_first, share):
    B, S, T = case
    vocab = dict(src_vocab_size=60) if share else {}
    ours, ref = make_pair(seed=B * 10 + S, norm_first=norm_first, share_embeddings=share, **vocab)
    ours.eval(); ref.eval()
    src, tgt = tokens(B, S, T, ours.config, seed=1)
    with torch.no_grad():
        got, expected = ours(src, tgt), ref(src, tgt)
    assert got.shape == (B, T, ours.config.tgt_vocab_size)
    torch.testing.assert_close(got, expected)


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("mode", ["train", "eval"])
def test_gradients_match_torch_transformer(case, norm_first, mode):
    "Same scalar loss through both (dropout 0): every parameter's gradient, embeddings included, is equal."
    B, S, T = case
    ours, ref = make_pair(seed=T, norm_first=norm_first, share_embeddings=(B == 3), src_vocab_size=60)
    ours.train(mode == "train"); ref.train(mode == "train")
    src, tgt = tokens(B, S, T, ours.config, seed=2)
    weight = torch.randn(B, T, ours.config.tgt_vocab_size, generator=torch.Generator().manual_seed(3))
    (ours(src, tgt) * weight).sum().backward()
    (ref(src, tgt) * weight).sum().backward()
    used = set()
    for name, p in ours.named_parameters():
        theirs, third = their_param(name, ref)
        used.add(id(theirs))
        expected = theirs.grad if third is None else theirs.grad.chunk(3)[third]
        torch.testing.assert_close(p.grad, expected, msg=lambda m: f"gradient of {name}: {m}")
    assert used == {id(p) for p in ref.parameters()}, "every parameter of the reference is compared"


def test_load_torch_transformer_checks_what_it_copies():
    ours = Transformer(TransformerConfig.tiny())
    c = ours.config
    theirs = nn.Transformer(c.d_model, c.n_heads, c.n_layers, c.n_layers, c.d_ff, batch_first=True)
    with pytest.raises(ValueError, match="final LayerNorm"):       # post-norm nn.Transformer keeps its final norms
        load_torch_transformer(ours, theirs)
    theirs.encoder.norm = theirs.decoder.norm = None
    assert load_torch_transformer(ours, theirs) is ours
    deeper = nn.Transformer(c.d_model, c.n_heads, c.n_layers + 1, c.n_layers, c.d_ff, batch_first=True)
    with pytest.raises(ValueError, match="layers"):
        load_torch_transformer(ours, deeper)
    with pytest.raises(ValueError, match="d_model"):
        load_torch_transformer(ours, nn.Transformer(2 * c.d_model, c.n_heads, c.n_layers, c.n_layers, c.d_ff,
                                                    batch_first=True))
    pre_norm = Transformer(TransformerConfig.tiny(norm_first=True))
    with pytest.raises(ValueError, match="norm_first"):
        load_torch_transformer(pre_norm, theirs)


def test_load_torch_transformer_carries_final_norm_eps():
    torch.manual_seed(4)
    ours = Transformer(TransformerConfig.tiny(dropout=0.0, norm_first=True)).eval()
    c = ours.config
    core = nn.Transformer(c.d_model, c.n_heads, c.n_layers, c.n_layers, c.d_ff, 0.0, layer_norm_eps=0.5,
                          batch_first=True, norm_first=True).eval()
    load_torch_transformer(ours, core)
    x = torch.randn(2, 5, c.d_model)
    with torch.no_grad():
        torch.testing.assert_close(ours.encoder(x), core.encoder(x))


# ---------------------------------------------------------------- properties

@pytest.mark.parametrize("norm_first", [False, True])
def test_causal_changing_a_target_token_leaves_earlier_logits_bit_identical(norm_first):
    torch.manual_seed(5)
    model = Transformer(TransformerConfig.tiny(norm_first=norm_first)).eval()
    src, tgt = tokens(3, 6, 8, model.config, seed=6)
    with torch.no_grad():
        base = model(src, tgt)
        for t in range(tgt.shape[1]):
            changed = tgt.clone()
            changed[:, t] = (changed[:, t] + 7) % model.config.tgt_vocab_size
            logits = model(src, changed)
            assert torch.equal(logits[:, :t], base[:, :t]), f"logits before {t} depend on token {t}"
            assert not torch.allclose(logits[:, t], base[:, t])


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("extra", [1, 4])
def test_extra_source_padding_changes_nothing(norm_first, extra):
    torch.manual_seed(7)
    model = Transformer(TransformerConfig.tiny(norm_first=norm_first)).eval()
    src, tgt = tokens(4, 6, 5, model.config, seed=8)
    longer = F.pad(src, (0, extra), value=model.config.pad_id)           # (B, S) -> (B, S + extra)
    real = src != model.config.pad_id
    with torch.no_grad():
        torch.testing.assert_close(model.encode(longer)[:, :6][real], model.encode(src)[real])
        torch.testing.assert_close(model(longer, tgt), model(src, tgt))


def test_train_eval_changes_only_dropout():
    src, tgt = tokens(3, 6, 5, TransformerConfig.tiny(), seed=9)
    torch.manual_seed(10)
    model = Transformer(TransformerConfig.tiny(dropout=0.0))
    with torch.no_grad():
        assert torch.equal(model.train()(src, tgt), model.eval()(src, tgt))
    torch.manual_seed(10)
    model = Transformer(TransformerConfig.tiny(dropout=0.1))
    with torch.no_grad():
        model.train()
        torch.manual_seed(0); a = model(src, tgt)
        torch.manual_seed(1); b = model(src, tgt)
        torch.manual_seed(0); a_again = model(src, tgt)
        assert not torch.allclose(a, b)             # a fresh dropout mask per call
        assert torch.equal(a, a_again)              # ... drawn from the global generator
        model.eval()
        torch.manual_seed(0); c = model(src, tgt)
        torch.manual_seed(1); d = model(src, tgt)
        assert torch.equal(c, d)                    # evaluation is deterministic


def test_output_projection_is_tied_to_tgt_embed():
    for share in (False, True):
        torch.manual_seed(11)
        model = Transformer(TransformerConfig.tiny(60, 60, share_embeddings=share)).eval()
        src, tgt = tokens(2, 5, 4, model.config, seed=12)
        seen = {}
        model.decoder.register_forward_hook(lambda m, args, out: seen.setdefault("h", out))
        logits = model(src, tgt)
        torch.testing.assert_close(logits, seen["h"] @ model.tgt_embed.weight.T)
        V, D = model.config.tgt_vocab_size, model.config.d_model
        n_vocab_matrices = sum(p.shape == (V, D) for p in model.parameters())
        assert n_vocab_matrices == (1 if share else 2)      # no separate output matrix, no output bias
        assert (model.src_embed is model.tgt_embed) == share
        assert (model.src_embed.weight is model.tgt_embed.weight) == share


def test_share_embeddings_is_one_parameter():
    torch.manual_seed(13)
    shared = Transformer(TransformerConfig.tiny(60, 60, share_embeddings=True))
    separate = Transformer(TransformerConfig.tiny(60, 60))
    n = lambda m: sum(p.numel() for p in m.parameters())
    assert n(separate) - n(shared) == 60 * 32
    src, tgt = tokens(2, 5, 4, shared.config, seed=14)
    shared(src, tgt).sum().backward()
    # the one matrix receives gradient from the source side, the target side and the projection
    used = torch.zeros(60, dtype=torch.bool)
    used[src.flatten()] = True; used[tgt.flatten()] = True
    assert shared.src_embed.weight.grad[~used].abs().sum() > 0           # rows only the projection touches


def test_reset_parameters_scales():
    torch.manual_seed(15)
    model = Transformer(TransformerConfig(1000, 1000, d_model=64, n_heads=4, n_layers=1, d_ff=128))
    std = model.src_embed.weight.std().item()
    assert abs(std - 64 ** -0.5) < 0.01                                   # N(0, 1/D): embedding * sqrt(D) ~ unit scale
    w = model.encoder.layers[0].ffn.linear1.weight
    assert w.abs().max() <= math.sqrt(6 / (64 + 128)) + 1e-6              # Xavier-uniform bound


# ---------------------------------------------------------------- TransformerConfig

def test_config_defaults_and_presets():
    base = TransformerConfig(100, 120)
    assert (base.d_model, base.n_heads, base.n_layers, base.d_ff, base.dropout) == (512, 8, 6, 2048, 0.1)
    assert (base.pad_id, base.share_embeddings, base.norm_first) == (0, False, False)
    big = TransformerConfig.big(100, 120)
    assert (big.d_model, big.n_heads, big.n_layers, big.d_ff, big.dropout) == (1024, 16, 6, 4096, 0.3)
    assert TransformerConfig.big(100, 100, dropout=0.1, share_embeddings=True).dropout == 0.1
    tiny = TransformerConfig.tiny()
    assert (tiny.src_vocab_size, tiny.tgt_vocab_size) == (50, 60)
    assert (tiny.d_model, tiny.n_heads, tiny.n_layers, tiny.d_ff, tiny.max_len) == (32, 4, 2, 64, 64)
    assert TransformerConfig.tiny(norm_first=True, n_layers=3).n_layers == 3


def test_config_is_frozen():
    config = TransformerConfig.tiny()
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.d_model = 64
    assert dataclasses.replace(config, d_model=64).d_model == 64 and config.d_model == 32


@pytest.mark.parametrize("name", ["src_vocab_size", "tgt_vocab_size", "d_model", "n_heads", "n_layers", "d_ff", "max_len"])
@pytest.mark.parametrize("value", [0, -3, 2.0, True])
def test_config_rejects_non_positive_sizes(name, value):
    with pytest.raises(ValueError, match=name):
        TransformerConfig.tiny(**{name: value})


@pytest.mark.parametrize("overrides, name", [
    (dict(d_model=30, n_heads=4), "n_heads"),
    (dict(share_embeddings=True), "share_embeddings"),           # tiny: 50 and 60 words
    (dict(pad_id=-1), "pad_id"),
    (dict(pad_id=50), "pad_id"),                                   # a valid target id, not a source id
])
def test_config_rejects_inconsistent_settings(overrides, name):
    with pytest.raises(ValueError, match=name):
        TransformerConfig.tiny(**overrides)


@pytest.mark.parametrize("pad_id", [1.5, True])
def test_config_rejects_non_int_pad_id(pad_id):
    with pytest.raises((TypeError, ValueError), match="pad_id"):
        TransformerConfig.tiny(pad_id=pad_id)


@pytest.mark.parametrize("dropout", [-0.1, 1.5])
def test_model_rejects_bad_dropout(dropout):
    with pytest.raises(ValueError, match="dropout"):
        Transformer(TransformerConfig.tiny(dropout=dropout))


# ---------------------------------------------------------------- bad input

@pytest.fixture(scope="module")
def tiny_model() -> Transformer:
    torch.manual_seed(16)
    return Transformer(TransformerConfig.tiny()).eval()


def test_rejects_bad_tokens(tiny_model):
    src, tgt = tokens(2, 5, 4, tiny_model.config, seed=17)
    with pytest.raises(TypeError, match="src"):
        tiny_model(src.float(), tgt)
    with pytest.raises(TypeError, match="tgt"):
        tiny_model(src, tgt.float())
    with pytest.raises(TypeError, match="src"):
        tiny_model(src > 3, tgt)                                  # bool is not token ids
    with pytest.raises(ValueError, match="src"):
        tiny_model(src[0], tgt)                                   # (S,) instead of (B, S)


def test_ids_are_checked_where_they_enter_not_in_forward(tiny_model):
    "Ids outside the vocabulary: check_tokens (at the decoding entry points) names them; forward reads no id."
    src, tgt = tokens(2, 5, 4, tiny_model.config, seed=17)
    c = tiny_model.config
    with pytest.raises(ValueError, match=r"src must hold ids in \[0, 50\), got 50..50"):
        check_tokens("src", src.clone().fill_(50), c.src_vocab_size, c.max_len)   # src_vocab_size = 50
    with pytest.raises(ValueError, match=r"tgt must hold ids in \[0, 60\), got -1\.\."):
        check_tokens("tgt", tgt.clone().fill_(-1), c.tgt_vocab_size, c.max_len)
    with pytest.raises(ValueError, match="src must hold ids"):
        greedy_decode_uncached(tiny_model, src.clone().fill_(50), 3, bos_id=1)
    with pytest.raises(TypeError, match="src"):
        check_tokens("src", src.float(), c.src_vocab_size, c.max_len)
    check_tokens("src", src, c.src_vocab_size, c.max_len)   # good ids pass
    # forward does no look at the values (no device sync): a bad id fails in the lookup itself
    with pytest.raises(IndexError):
        tiny_model(src.clone().fill_(50), tgt)


def test_rejects_sequences_longer_than_max_len(tiny_model):
    src, tgt = tokens(2, 5, 4, tiny_model.config, seed=18)
    with pytest.raises(ValueError, match="src.*max_len"):
        tiny_model(torch.full((1, 65), 3), tgt[:1])
    with pytest.raises(ValueError, match="tgt.*max_len"):
        tiny_model(src, torch.full((2, 65), 3))
    assert tiny_model(torch.full((1, 64), 3), torch.full((1, 64), 3)).shape == (1, 64, 60)


def test_decode_rejects_memory_of_another_source(tiny_model):
    src, tgt = tokens(2, 5, 4, tiny_model.config, seed=19)
    memory = tiny_model.encode(src)
    with pytest.raises(ValueError, match="memory"):
        tiny_model.decode(tgt, memory[:, :4], src)                # S differs
    with pytest.raises(ValueError, match="memory"):
        tiny_model.decode(tgt, memory, src[:1])                   # B differs
    torch.testing.assert_close(tiny_model.decode(tgt, memory, src), tiny_model(src, tgt))


# ---------------------------------------------------------------- greedy_decode_uncached

@pytest.mark.parametrize("B, S, n", [(1, 4, 5), (3, 6, 7)])
def test_greedy_picks_the_argmax_for_each_prefix(B, S, n):
    torch.manual_seed(20 + B)
    model = Transformer(TransformerConfig.tiny()).eval()
    src, _ = tokens(B, S, 1, model.config, seed=21)
    out = greedy_decode_uncached(model, src, max_new_tokens=n, bos_id=BOS)
    assert out.shape == (B, 1 + n) and out.dtype == torch.long
    assert torch.all(out[:, 0] == BOS)
    with torch.no_grad():
        for t in range(n):
            assert torch.equal(out[:, t + 1], model(src, out[:, :t + 1])[:, -1].argmax(-1))


def test_greedy_zero_new_tokens_and_bad_count(tiny_model):
    src, _ = tokens(2, 5, 1, tiny_model.config, seed=22)
    assert torch.equal(greedy_decode_uncached(tiny_model, src, 0, bos_id=BOS), torch.full((2, 1), BOS))
    for bad in (-1, 2.0, True):
        with pytest.raises(ValueError, match="max_new_tokens"):
            greedy_decode_uncached(tiny_model, src, bad, bos_id=BOS)


@pytest.mark.parametrize("norm_first", [False, True])
def test_greedy_stops_when_every_row_has_produced_eos(norm_first):
    "Make every logit row favour EOS: the final LayerNorm outputs a constant u, and tgt_embed[EOS] points along u."
    torch.manual_seed(23)
    model = Transformer(TransformerConfig.tiny(norm_first=norm_first)).eval()
    final = model.decoder.norm if norm_first else model.decoder.layers[-1].ffn_res.norm
    with torch.no_grad():
        u = torch.randn(model.config.d_model)
        final.weight.zero_(); final.bias.copy_(u)
        model.tgt_embed.weight[EOS] = 50 * u / u.norm()
    src, _ = tokens(3, 6, 1, model.config, seed=24)
    free = greedy_decode_uncached(model, src, 6, bos_id=BOS)
    assert torch.all(free[:, 1:] == EOS)                             # the set-up works: EOS at every step
    out = greedy_decode_uncached(model, src, 6, bos_id=BOS, eos_id=EOS)
    assert torch.equal(out, torch.tensor([[BOS, EOS]] * 3))         # stopped after one step


def test_greedy_pads_rows_after_their_eos():
    "Take as EOS the token that ends row 0's free run: rows that produce it stop there, the others run on."
    torch.manual_seed(3)
    model = Transformer(TransformerConfig.tiny(dropout=0.0)).eval()
    src = torch.randint(3, 50, (3, 6))
    src[1, 4:] = PAD
    n = 6
    free = greedy_decode_uncached(model, src, n, bos_id=BOS)
    eos = int(free[0, -1])
    hits = free[:, 1:] == eos
    # the seed gives a row that produces EOS only after other tokens, and a row that never produces it
    assert not hits[0, 0] and not hits.any(1).all()
    out = greedy_decode_uncached(model, src, n, bos_id=BOS, eos_id=eos)
    assert out.shape == (3, 1 + n)                                  # not all rows finished: no early stop
    for b in range(3):
        if hits[b].any():
            stop = int(hits[b].nonzero()[0]) + 1                    # index of the first EOS in the row
            expected = torch.cat([free[b, :stop + 1], torch.full((n - stop,), PAD)])
        else:
            expected = free[b]
        assert torch.equal(out[b], expected), f"row {b}: {out[b].tolist()} != {expected.tolist()}"


# ---------------------------------------------------------------- the config names every choice (issue 56)

def test_config_names_every_choice_with_the_papers_defaults():
    base = TransformerConfig(100, 120)
    assert (base.activation, base.positional, base.norm_eps) == ("relu", "sinusoidal", 1e-5)
    model = Transformer(TransformerConfig.tiny())
    assert {type(m.activation) for m in model.modules() if isinstance(m, FeedForward)} == {nn.ReLU}
    assert {m.eps for m in model.modules() if isinstance(m, LayerNorm)} == {1e-5}
    assert type(model.pos) is PositionalEncoding


def test_the_model_is_built_from_its_config():
    torch.manual_seed(17)
    config = TransformerConfig.tiny(activation="gelu", positional="learned", norm_eps=1e-6, norm_first=True)
    model = Transformer(config)
    ffns = [m for m in model.modules() if isinstance(m, FeedForward)]
    assert len(ffns) == 4 and all(type(f.activation) is nn.GELU and f.activation.approximate == "none"
                                  for f in ffns)
    norms = [m for m in model.modules() if isinstance(m, LayerNorm)]
    assert len(norms) == 2 * 2 + 3 * 2 + 2 and {n.eps for n in norms} == {1e-6}   # with the final norms
    assert isinstance(model.pos, LearnedPositionalEncoding)
    table = model.state_dict()["pos.embedding.weight"]
    assert table.shape == (config.max_len, config.d_model)
    assert abs(table.std().item() - 0.5 ** 0.5) < 0.05   # its own N(0, 1/2), not the embeddings' 1/D
    x = torch.randn(2, 3, 32)
    f = ffns[0].eval()
    torch.testing.assert_close(f(x), f.linear2(F.gelu(f.linear1(x))))


@pytest.mark.parametrize("overrides, words", [
    (dict(activation="tanh"), "activation must be one of gelu, relu, got 'tanh'"),
    (dict(positional="rotary"), "positional must be one of learned, sinusoidal, got 'rotary'"),
    (dict(norm_eps=0.0), "norm_eps must be"),
    (dict(norm_eps="1e-5"), "norm_eps must be"),
    (dict(activation=None), "activation must be one of"),
])
def test_config_refuses_a_choice_it_cannot_build(overrides, words):
    with pytest.raises(ArgumentError, match=f"^{re.escape(words)}"):
        TransformerConfig.tiny(**overrides)


def test_config_dict_round_trip_and_refusals():
    config = TransformerConfig.tiny(activation="gelu", positional="learned", norm_eps=1e-6, share_embeddings=False)
    data = config_to_dict(config)
    assert json.loads(json.dumps(data)) == data                     # plain JSON data
    assert config_from_dict(json.loads(json.dumps(data))) == config
    older = {k: v for k, v in data.items() if k not in ("activation", "positional", "norm_eps")}
    assert config_from_dict(older) == TransformerConfig.tiny()     # an older file means the paper's choices
    with pytest.raises(ArgumentError, match="^config has unknown field 'actvation'; known: activation, "):
        config_from_dict({**data, "actvation": "gelu"})
    with pytest.raises(ArgumentError, match="^config has no src_vocab_size$"):
        config_from_dict({k: v for k, v in data.items() if k != "src_vocab_size"})
    with pytest.raises(ArgumentError, match="^a config must be a dict, got list$"):
        config_from_dict([1, 2])
    with pytest.raises(ArgumentError, match="^d_model must be"):
        config_from_dict({**data, "d_model": "32"})
