"""Copy the repository named in settings.ini into _config.yml, README.md and every
notebook's set-up cell.

settings.ini is the one place a fork changes. `python tools/sync_repo.py` rewrites the
copies; `python tools/sync_repo.py --check` only reports (exit 1) when a copy differs.
"""
from __future__ import annotations

import configparser
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SETUP_MARK = "# Colab set-up"
SETUP_TAG = "remove-input"   # the page leaves the set-up cell out; the notebook keeps it
# The first code cell of every chapter (it starts with SETUP_MARK). It tries the import
# rather than testing for Colab: a fresh Jupyter or Binder lacks the package too, while
# the repository's venv (and so nbval) has it and must see no output. invalidate_caches:
# the failed import left the import system's directory listings stale.
SETUP_CELL = """\
# Colab set-up: where this book's package is missing (Colab, a fresh Jupyter),
# install it from the book's repository; where it is installed, do nothing.
try:
    import transformer_lit
except ImportError:
    import importlib, subprocess, sys
    url = "git+{git_url}@{branch}"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", url], check=True)
    importlib.invalidate_caches()"""
# README.md's generated blocks run from `<!-- sync_repo:NAME (a note) -->` to
# `<!-- /sync_repo -->`; the markers stay, so the text between can be rewritten again.
README_BLOCK = re.compile(
    r"(<!-- sync_repo:(\w+)\b.*?-->\n)(.*?)(<!-- /sync_repo -->)", re.S)


def repo_settings(root: Path = ROOT) -> dict[str, str]:
    "user, repo, branch, git_url, doc_host and doc_baseurl as settings.ini states them."
    cfg = configparser.ConfigParser()
    cfg.read(root / "settings.ini")
    d = cfg["DEFAULT"]
    keys = ("user", "repo", "branch", "git_url", "doc_host", "doc_baseurl")
    return {k: d[k] for k in keys}


def book_url(s: dict[str, str]) -> str:
    "Where GitHub Pages serves the book; html_baseurl wants the trailing slash."
    base = s["doc_baseurl"].strip("/")
    return s["doc_host"].rstrip("/") + "/" + (base + "/" if base else "")


def colab_url(s: dict[str, str], notebook: str = "nbs/01_overview.ipynb") -> str:
    "The notebook opened on Colab straight from the repository."
    return (f"https://colab.research.google.com/github/{s['user']}/{s['repo']}"
            f"/blob/{s['branch']}/{notebook}")


def setup_cell_source(s: dict[str, str]) -> str:
    "The set-up cell for the repository s names."
    return SETUP_CELL.format(git_url=s["git_url"], branch=s["branch"])


def readme_blocks(s: dict[str, str]) -> dict[str, str]:
    "The text of each generated block of README.md, by name."
    return {
        "colab": (
            f"The book is published at {book_url(s)}. Each chapter page has a\n"
            f"rocket button → *Colab*; or open {colab_url(s)}\n"
            "(any notebook in `nbs/`).\n"
        ),
        "pages": (
            f"The book is then served at {book_url(s)}\n"
            "(`doc_host` + `doc_baseurl` in `settings.ini`; `make book` also copies\n"
            "them into `_config.yml` as `html.baseurl`).\n"
        ),
    }


def _set_key(text: str, key: str, value: str) -> str:
    "Replace the value on the first `  key:` line (two-space indent) of _config.yml."
    # \S*: the value is one word (a URL, a branch), so a comment after it stays; a
    # function as replacement, so the value is never read as a backreference
    new, n = re.subn(rf"(?m)^(  {key}:[ \t]*)\S*", lambda m: m.group(1) + value, text,
                     count=1)
    if n == 0:
        raise ValueError(f"no '  {key}:' line")
    return new


def sync_config(text: str, s: dict[str, str]) -> str:
    "Rewrite the repository block and html.baseurl of _config.yml."
    text = _set_key(text, "url", s["git_url"])
    text = _set_key(text, "branch", s["branch"])
    return _set_key(text, "baseurl", book_url(s))


def sync_readme(text: str, s: dict[str, str]) -> str:
    "Rewrite README.md's generated blocks; each must be there exactly once."
    blocks = readme_blocks(s)
    found = [m.group(2) for m in README_BLOCK.finditer(text)]
    if sorted(found) != sorted(blocks):
        raise ValueError(f"generated blocks {found}, want each of {list(blocks)} once")
    fill = lambda m: m.group(1) + blocks[m.group(2)] + m.group(4)  # noqa: E731
    return README_BLOCK.sub(fill, text)


def sync_notebook(nb: dict, s: dict[str, str]) -> bool:
    """Put the set-up cell's current text into the notebook, left off the book's page (tag
    remove-input: installation, not content; Colab and Jupyter still show and run it);
    True if it changed."""
    want = setup_cell_source(s)
    for cell in nb["cells"]:
        if cell["cell_type"] != "code":
            continue
        src = "".join(cell["source"])
        if not src.startswith(SETUP_MARK):
            raise ValueError("the first code cell must be the Colab set-up cell")
        tags = cell.setdefault("metadata", {}).setdefault("tags", [])
        if src == want and SETUP_TAG in tags and "hide-input" not in tags:
            return False
        cell["source"] = want.splitlines(keepends=True)
        tags[:] = [t for t in tags if t not in ("hide-input", SETUP_TAG)] + [SETUP_TAG]
        return True
    raise ValueError("notebook has no code cell")


def main(check: bool, root: Path = ROOT) -> int:
    s = repo_settings(root)
    stale = []
    copies = ((root / "_config.yml", sync_config), (root / "README.md", sync_readme))
    for path, sync in copies:
        text = path.read_text()
        try:
            new = sync(text, s)
        except ValueError as e:
            print(f"{path.relative_to(root)}: {e}", file=sys.stderr)
            return 2
        if new != text:
            stale.append(path)
            if not check:
                path.write_text(new)
    for path in sorted((root / "nbs").glob("*.ipynb")):
        nb = json.loads(path.read_text())
        try:
            changed = sync_notebook(nb, s)
        except ValueError as e:
            print(f"{path.relative_to(root)}: {e}", file=sys.stderr)
            return 2
        if changed:
            stale.append(path)
            if not check:
                path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
    for p in stale:
        print(f"{'out of sync' if check else 'updated'}: {p.relative_to(root)}")
    return 1 if (check and stale) else 0


if __name__ == "__main__":
    sys.exit(main("--check" in sys.argv[1:]))
