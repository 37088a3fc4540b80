"""The package's public API, listed: every name in a module's __all__ (what
`from transformer_lit.X import *` gives and the book documents). A change to it is made on
purpose: update tests/public_api.txt in the same commit and say so in its message."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "transformer_lit"


def public_api() -> list[str]:
    "module.name for every name in every module's __all__, sorted."
    names = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name.startswith("_") and path.name != "__init__.py":
            continue
        module = ".".join(path.relative_to(PACKAGE).with_suffix("").parts)
        module = module.removesuffix(".__init__").removesuffix("__init__")
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Assign) and any(
                getattr(t, "id", None) == "__all__" for t in node.targets
            ):
                names += [f"{module}.{n}" for n in ast.literal_eval(node.value)]
    return sorted(names)


def test_the_public_api_is_the_listed_one():
    listed = (ROOT / "tests" / "public_api.txt").read_text().split()
    found = public_api()
    assert found == sorted(listed), {"added": sorted(set(found) - set(listed)),
                                     "removed": sorted(set(listed) - set(found))}


def test_no_private_or_type_variable_names_are_public():
    assert not [n for n in public_api() if n.rsplit(".", 1)[1].startswith("_")
                or n.rsplit(".", 1)[1] in {"T", "K", "V"}]


def test_no_two_modules_give_one_name_to_two_things():
    """A public name means one thing in the whole package: `corpus.write_atomically` (a
    text) beside `checkpoints.write_atomically` (a writing function), or `inference.Decoder`
    (a step factory) beside `decoder.Decoder` (the layer stack), sent a reader to the wrong
    one. A module may pass on another's object under its name."""
    import importlib
    owners: dict[str, dict[int, str]] = {}
    for entry in public_api():
        module, name = entry.rsplit(".", 1)
        value = getattr(importlib.import_module(f"transformer_lit.{module}"), name)
        owners.setdefault(name, {})[id(value)] = module
    assert not {name: sorted(o.values()) for name, o in owners.items() if len(o) > 1}
