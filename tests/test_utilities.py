"""One implementation of each utility (issue 47, item 2): the package writes a file
atomically, hashes a file, finds its cache folder, names the processor, sets the GPU's
attention switch and checks an integer tensor each in one place, and every other module
calls that place. Read from the package's source, so a second copy fails here."""
from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import pytest
import torch

from transformer_lit import files, machine, validate
from transformer_lit.validate import ArgumentError, check_int_tensor

PACKAGE = Path(files.__file__).parent
SOURCES = {p.relative_to(PACKAGE).as_posix(): p.read_text() for p in PACKAGE.rglob("*.py")
           if p.name != "_modidx.py"}

# what only one module may do: (pattern, the module allowed); export.py's
# write_export_folder replaces a whole folder (os.replace of a folder), not a file
ONLY = [
    (r"os\.O_EXCL\b", {"files.py"}),
    # the umask is read in one place (without changing it where /proc has it)
    (r"os\.umask\(", {"files.py"}),
    (r"os\.fsync\(", {"files.py"}),
    (r"\bdef (write_atomically|write_text_atomically|sha256_of|cache_dir|read_small_file|"
     r"open_regular|make_folders)\b", {"files.py"}),
    (r"hashlib\.sha256\(\)\n\s*with open(_regular)?\(", {"files.py"}),
    (r"S_ISREG", {"files.py"}),
    (r"/proc/cpuinfo", {"machine.py"}),
    (r"\bdef (cpu_details|describe_device|attention_policy)\b", {"machine.py"}),
    (r"enable_cudnn_sdp\(", {"machine.py"}),
    (r"is_complex", {"validate.py"}),
    (r"os\.replace\(", {"files.py", "export.py"}),
    # an error raised with a sentence has strerror None: messages say files.reason(e)
    (r"(?<!os)\.strerror\b", {"files.py"}),
]


@pytest.mark.parametrize("pattern, allowed", ONLY, ids=[p for p, _ in ONLY])
def test_one_place_does_it(pattern, allowed):
    found = {name for name, text in SOURCES.items() if re.search(pattern, text)}
    assert found == allowed


def test_no_hand_written_protobuf_reader():
    "huggingface reads the sentencepiece model with sentencepiece's own schema."
    text = SOURCES["huggingface.py"]
    assert "sentencepiece_model_pb2" in text and "_varint" not in text


def test_check_int_tensor():
    ok = torch.tensor([[1, 2]])
    assert check_int_tensor("src", ok, "(B, L)") is ok
    assert check_int_tensor("n", torch.tensor([3, 4]), "(B,)") is not None
    assert check_int_tensor("target", torch.zeros(2, 3, 4, dtype=torch.long)) is not None
    for bad, said in [
        ([[1, 2]], "src must be a tensor of integer token ids (B, L), got list"),
        (torch.ones(1, 2), "src must hold integer token ids, got torch.float32"),
        (torch.ones(1, 2, dtype=torch.complex64), "got torch.complex64"),
        (torch.ones(1, 2, dtype=torch.bool), "got torch.bool"),
        (torch.tensor([1, 2]), "src must have shape (B, L), got (2,)"),
    ]:
        with pytest.raises(ArgumentError) as info:
            check_int_tensor("src", bad, "(B, L)")
        assert said in str(info.value)


@pytest.mark.parametrize("module, name", [
    ("masking", "padding_mask"), ("model_support", "check_token_shape"),
    ("safeguards", "check_loss_args"), ("validate", "check_generation_fields"),
])
def test_integer_tensors_are_checked_by_validate(module, name):
    "Each caller of the rule calls check_int_tensor, not a copy of it."
    text = SOURCES[f"{module}.py"]
    body = text[text.index(f"def {name}("):]
    body = body[: body.find("\ndef ", 1) if "\ndef " in body[1:] else len(body)]
    assert "check_int_tensor(" in body, (module, name)


def test_a_complex_target_is_refused_by_every_caller():
    "The rule was four copies, not alike: model's left out the complex check."
    from transformer_lit.masking import padding_mask
    from transformer_lit.model import check_token_shape
    complex_ids = torch.ones(1, 3, dtype=torch.complex64)
    for call in (lambda: padding_mask(complex_ids, 0),
                 lambda: check_token_shape("src", complex_ids, 8)):
        with pytest.raises(ArgumentError, match="complex64"):
            call()


def test_atomic_writes_keep_the_umask_and_leave_nothing_on_failure(tmp_path):
    old = os.umask(0o027)
    try:
        path = files.write_text_atomically(tmp_path / "a.txt", "one\n")
        assert stat.S_IMODE(path.stat().st_mode) == 0o640
    finally:
        os.umask(old)

    def fails(f):
        f.write(b"half")
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space"):
        files.write_atomically(path, fails)
    assert path.read_text() == "one\n" and sorted(p.name for p in tmp_path.iterdir()) == ["a.txt"]


def test_the_argos_package_is_written_by_the_one_atomic_write():
    assert "write_atomically(" in SOURCES["argos.py"] and "mkstemp" not in SOURCES["argos.py"]


def test_describe_device_says_one_thread():
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        assert machine.describe_device("cpu").endswith(", 1 thread")
        torch.set_num_threads(2)
        assert machine.describe_device("cpu").endswith(", 2 threads")
    finally:
        torch.set_num_threads(threads)


def test_validate_imports_nothing_of_the_package():
    assert "from transformer_lit" not in SOURCES["validate.py"].split("__all__")[0].replace(
        "from transformer_lit.validate", "")
    assert validate.ArgumentError
