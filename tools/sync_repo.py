"""Copy the repository named in settings.ini into _config.yml and every notebook's Colab set-up cell.

settings.ini is the one place a fork changes. `python tools/sync_repo.py` rewrites the copies;
`python tools/sync_repo.py --check` only reports (exit 1) when a copy differs.
"""
from __future__ import annotations

import configparser
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SETUP_MARK = "# Colab set-up"


def repo_settings() -> dict[str, str]:
    "user, repo, branch and git_url as settings.ini states them."
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "settings.ini")
    d = cfg["DEFAULT"]
    return {k: d[k] for k in ("user", "repo", "branch", "git_url")}


def setup_cell_source(s: dict[str, str]) -> str:
    "The first code cell of every chapter: installs the package on Colab, does nothing elsewhere."
    return (
        f"{SETUP_MARK}: on Google Colab, install this book's package from its repository;\n"
        "# anywhere else (your machine, CI) this cell does nothing.\n"
        "import subprocess, sys\n"
        'if "google.colab" in sys.modules:\n'
        "    subprocess.run([sys.executable, \"-m\", \"pip\", \"install\", \"-q\",\n"
        f"                    \"transformer_lit @ git+{s['git_url']}@{s['branch']}\"], check=True)"
    )


def sync_config(text: str, s: dict[str, str]) -> str:
    "Rewrite the repository block of _config.yml."
    text = re.sub(r"(?m)^(  url:\s*).*$", rf"\g<1>{s['git_url']}", text, count=1)
    return re.sub(r"(?m)^(  branch:\s*).*$", rf"\g<1>{s['branch']}", text, count=1)


def sync_notebook(nb: dict, s: dict[str, str]) -> bool:
    "Put the set-up cell's current text into the notebook; True if it changed."
    want = setup_cell_source(s)
    for cell in nb["cells"]:
        if cell["cell_type"] != "code":
            continue
        src = "".join(cell["source"])
        if not src.startswith(SETUP_MARK):
            raise ValueError("the first code cell must be the Colab set-up cell")
        if src == want:
            return False
        cell["source"] = want.splitlines(keepends=True)
        return True
    raise ValueError("notebook has no code cell")


def main(check: bool) -> int:
    s = repo_settings()
    stale = []
    cfg_path = ROOT / "_config.yml"
    cfg = cfg_path.read_text()
    new_cfg = sync_config(cfg, s)
    if new_cfg != cfg:
        stale.append(cfg_path)
        if not check:
            cfg_path.write_text(new_cfg)
    for path in sorted((ROOT / "nbs").glob("*.ipynb")):
        nb = json.loads(path.read_text())
        try:
            changed = sync_notebook(nb, s)
        except ValueError as e:
            print(f"{path.relative_to(ROOT)}: {e}", file=sys.stderr)
            return 2
        if changed:
            stale.append(path)
            if not check:
                path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
    for p in stale:
        print(f"{'out of sync' if check else 'updated'}: {p.relative_to(ROOT)}")
    return 1 if (check and stale) else 0


if __name__ == "__main__":
    sys.exit(main("--check" in sys.argv[1:]))
