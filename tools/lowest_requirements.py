"""The lowest versions that pyproject.toml's runtime dependencies allow: what
`make lowest` installs, to test the package against them (Python 3.11+: tomllib).

Each runtime dependency is a lower bound, NAME>=VERSION (more clauses may follow a
comma, as in "numpy>=1.23.2,<3"): the lowest version the code was tested with.

    python tools/lowest_requirements.py            # NAME==VERSION, one a line
    python tools/lowest_requirements.py --tools pytest pytest-xdist  # dev's pins
    .venv-lowest/bin/python tools/lowest_requirements.py --check

--check exits 1 unless each runtime dependency is installed at exactly its lower bound
(pip may not have raised one to satisfy another package).
"""
from __future__ import annotations

import re
import sys
import tomllib
from collections.abc import Callable, Sequence
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REQUIREMENT = re.compile(r"([A-Za-z0-9][A-Za-z0-9._-]*)\s*(.*)")
VERSION = re.compile(r"\d+(\.\d+)*")  # a final release: `==` then means that release


def project(root: Path = ROOT) -> dict:
    "pyproject.toml's [project] table; ValueError, in one line, where there is none."
    try:
        with open(root / "pyproject.toml", "rb") as f:
            spec = tomllib.load(f).get("project")
    except OSError as e:
        raise ValueError(f"cannot be read ({e.strerror or e})") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"is not TOML ({e})") from None
    if not isinstance(spec, dict) or not isinstance(spec.get("dependencies"), list):
        raise ValueError("has no [project] table with a list of dependencies")
    return spec


def normalized(name: str) -> str:
    "A distribution's name as pip compares it: lower case, runs of -_. as one -."
    return re.sub(r"[-_.]+", "-", name).lower()


def lower_bound(requirement: str) -> tuple[str, str]:
    """(name, version) of "NAME>=VERSION"; ValueError for a requirement with no lower
    bound, an exact pin, an environment marker or extras (not handled here)."""
    m = REQUIREMENT.fullmatch(requirement.strip())
    if m is None or any(c in requirement for c in ";[@"):
        raise ValueError(f"{requirement!r}: not a plain NAME>=VERSION requirement")
    name, clauses = m.group(1), [c.strip() for c in m.group(2).split(",")]
    if any(c.startswith(("==", "~=")) for c in clauses):
        raise ValueError(f"{requirement!r}: a runtime dependency is a bound, not a pin")
    lows = [c[2:].strip() for c in clauses if c.startswith(">=")]
    if len(lows) != 1 or not VERSION.fullmatch(lows[0]):
        raise ValueError(
            f"{requirement!r}: give one lower bound NAME>=VERSION, the lowest version "
            "tested (make lowest installs it)"
        )
    return name, lows[0]


def lowest(requirements: Sequence[str]) -> list[str]:
    "NAME==VERSION for each NAME>=VERSION."
    return ["{}=={}".format(*lower_bound(r)) for r in requirements]


def pins(names: Sequence[str], dev: Sequence[str]) -> list[str]:
    "The exact pins (NAME==VERSION) of names in dev (a list); ValueError if absent."
    by_name = {}
    for requirement in dev:
        m = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)", requirement.strip())
        if m:
            by_name[normalized(m.group(1))] = m.group(0)
    missing = [n for n in names if normalized(n) not in by_name]
    if missing:
        raise ValueError(f"no exact pin in the dev extra for {', '.join(missing)}")
    return [by_name[normalized(n)] for n in names]


def release(version: str) -> tuple[tuple[int, ...], str]:
    """The release numbers of version without trailing zeros, and what follows them
    but a local part: "2.5", "2.5.0" and "2.5.0+cu124" are equal; "2.5.post1" and
    "2.5rc1" are not "2.5"."""
    m = re.match(r"v?(\d+(?:\.\d+)*)(.*)", version.split("+")[0].strip().lower())
    if m is None:
        return (), version
    numbers = [int(n) for n in m.group(1).split(".")]
    while len(numbers) > 1 and numbers[-1] == 0:
        numbers.pop()
    return tuple(numbers), m.group(2)


def mismatches(
    requirements: Sequence[str], installed: Callable[[str], str] = metadata.version
) -> list[str]:
    "A line for each requirement not installed at exactly its lower bound."
    found = []
    for name, low in map(lower_bound, requirements):
        try:
            version = installed(name)
        except metadata.PackageNotFoundError:
            found.append(f"{name}: not installed, the bound is {low}")
            continue
        if release(version) != release(low):
            found.append(f"{name}: {version} is installed, the bound is {low}")
    return found


def main(argv: Sequence[str]) -> int:
    try:
        spec = project()
        if argv[:1] == ["--check"]:
            wrong = mismatches(spec["dependencies"])
            print("\n".join(wrong) or "every runtime dependency is at its lower bound")
            return 1 if wrong else 0
        if argv[:1] == ["--tools"]:
            extras = spec.get("optional-dependencies", {})
            dev = extras.get("dev", []) if isinstance(extras, dict) else []
            print("\n".join(pins(argv[1:], dev)))
        else:
            print("\n".join(lowest(spec["dependencies"])))
    except ValueError as e:
        print(f"lowest_requirements.py: pyproject.toml: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
