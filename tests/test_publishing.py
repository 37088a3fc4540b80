"""CI and GitHub Pages: the workflows lint clean and run the README's commands, the
built site is ready for Pages, and each copy of the repository's address is from
settings.ini."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
HTML = ROOT / "_build" / "html"

sys.path.insert(0, str(ROOT / "tools"))
try:
    import sync_repo
finally:
    sys.path.pop(0)


def workflow(name: str) -> dict:
    wf = yaml.safe_load((ROOT / ".github" / "workflows" / name).read_text())
    wf["on"] = wf.pop(True, wf.get("on"))  # YAML 1.1 reads the key `on` as True
    return wf


def steps(wf: dict) -> list[dict]:
    return [s for job in wf["jobs"].values() for s in job.get("steps", [])]


def uses(wf: dict, action: str) -> list[dict]:
    "The steps that use `action` (any version)."
    return [s for s in steps(wf) if s.get("uses", "").split("@")[0] == action]


def test_workflows_pass_actionlint():
    "actionlint (a dev dependency, so in the venv next to python) finds nothing to say."
    exe = Path(sys.executable).with_name("actionlint")
    exe = str(exe) if exe.exists() else shutil.which("actionlint")
    assert exe is not None, "actionlint is not installed: pip install -e '.[dev]' installs it"
    assert {"pages.yml", "test.yml"} <= {p.name for p in WORKFLOWS}
    r = subprocess.run([exe, "-no-color", *map(str, WORKFLOWS)], cwd=ROOT,
                       capture_output=True, text=True)
    assert (r.returncode, r.stdout + r.stderr) == (0, "")


def test_test_workflow_runs_make_test_in_debian():
    wf = workflow("test.yml")
    assert {"push", "pull_request"} <= set(wf["on"])
    (job,) = wf["jobs"].values()
    image = job["container"]
    image = image["image"] if isinstance(image, dict) else image
    assert "bookworm" in image or "debian" in image, image
    runs = "\n".join(s.get("run", "") for s in job["steps"])
    for pkg in ("make", "npm", "chromium", "fonts-wqy-microhei"):
        assert re.search(rf"apt-get install.*\b{pkg}\b", runs, re.S), pkg
    assert re.search(r"(?m)^make test$", runs)
    cached = {s["with"]["path"] for s in uses(wf, "actions/cache")}
    # transformer_lit.data.cache_dir(): ~/.cache/transformer_lit with the env var unset
    assert cached == {"~/.cache/pip", "~/.cache/transformer_lit"}
    assert "TRANSFORMER_LIT_CACHE" not in yaml.safe_dump(wf)


def test_pages_workflow_deploys_make_book():
    wf = workflow("pages.yml")
    assert wf["on"]["push"]["branches"] == ["main"] and "workflow_dispatch" in wf["on"]
    assert wf["permissions"]["pages"] == wf["permissions"]["id-token"] == "write"
    assert wf["concurrency"]["group"]
    assert any(s.get("run") == "make book" for s in steps(wf))
    assert uses(wf, "actions/configure-pages") and uses(wf, "actions/deploy-pages")
    (upload,) = uses(wf, "actions/upload-pages-artifact")
    # the action leaves dotfiles out unless told: .nojekyll must reach Pages
    assert upload["with"] == {"path": "_build/html", "include-hidden-files": True}


def recipe(target: str) -> list[str]:
    "The recipe lines of a Makefile target, without the leading tab."
    lines = (ROOT / "Makefile").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if re.match(rf"{target}:", line))
    body = []
    for line in lines[start + 1:]:
        if not line.startswith("\t"):
            break
        body.append(line[1:])
    return body


def test_book_recipe_leaves_nojekyll():
    "Without .nojekyll, Pages served from a branch hides _static/ and _images/."
    body = recipe("site")   # make book: export, then site
    build = next(i for i, line in enumerate(body) if "jupyter-book build" in line)
    touch = [i for i, line in enumerate(body) if line == "touch _build/html/.nojekyll"]
    assert touch and touch[0] > build, body


def test_make_book_exports_and_make_test_does_not():
    "make test checks that the package is the notebooks' export (test_package.py) instead."
    lines = (ROOT / "Makefile").read_text().splitlines()
    book = next(line for line in lines if line.startswith("book:"))
    assert book.split(":")[1].split() == ["export"]
    assert recipe("book") == ["$(MAKE) --no-print-directory site"]
    test = recipe("test")
    assert "$(MAKE) --no-print-directory site" in test
    assert not any("export" in line or " book" in line for line in test), test


@pytest.mark.browser  # runs after `make test` builds the book
def test_built_site_is_ready_for_pages():
    assert (HTML / "index.html").exists(), "no built book at _build/html: run `make book` first"
    assert (HTML / ".nojekyll").is_file()
    # the root index.html is Jupyter Book's redirect to the first page, which carries the link
    assert 'url=book/intro.html' in (HTML / "index.html").read_text()
    want = sync_repo.book_url(sync_repo.repo_settings()) + "book/intro.html"
    assert f'<link rel="canonical" href="{want}"' in (HTML / "book" / "intro.html").read_text()


def test_config_baseurl_is_the_settings_site(settings):
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    base = settings["doc_baseurl"].strip("/")
    assert config["html"]["baseurl"] == f"{settings['doc_host']}/{base}/"


def test_readme_links_all_come_from_settings(settings):
    "README.md is in sync and names the repository or book only in generated blocks."
    text = (ROOT / "README.md").read_text()
    s = sync_repo.repo_settings()
    assert sync_repo.sync_readme(text, s) == text, "run: python tools/sync_repo.py"
    outside = sync_repo.README_BLOCK.sub("", text)
    for url in ("colab.research.google.com", f"github.com/{settings['user']}",
                settings["doc_host"].split("//")[-1]):
        assert url not in outside, f"README.md names {url} outside a sync_repo block"


def test_sync_repo_check_reports_a_stale_readme(tmp_path, capsys):
    "A fork's settings.ini: --check names README.md and _config.yml; a sync mends them."
    for name in ("settings.ini", "_config.yml", "README.md"):
        shutil.copy(ROOT / name, tmp_path / name)
    (tmp_path / "nbs").mkdir()  # the notebooks' set-up cells: see test_package
    ini = tmp_path / "settings.ini"
    fork = ini.read_text().replace("user = transformer-lit", "user = a-fork")
    ini.write_text(fork.replace("github.com/transformer-lit/", "github.com/a-fork/"))
    assert sync_repo.main(check=True, root=tmp_path) == 1
    assert capsys.readouterr().out.split("\n") == [
        "out of sync: _config.yml", "out of sync: README.md", ""]
    assert sync_repo.main(check=False, root=tmp_path) == 0
    assert sync_repo.main(check=True, root=tmp_path) == 0
    readme = (tmp_path / "README.md").read_text()
    assert "colab.research.google.com/github/a-fork/transformer-lit/blob/" in readme
    config = (tmp_path / "_config.yml").read_text()
    assert "url: https://github.com/a-fork/transformer-lit" in config
    # only the generated blocks changed
    strip = lambda t: sync_repo.README_BLOCK.sub("", t)  # noqa: E731
    assert strip(readme) == strip((ROOT / "README.md").read_text())


def test_sync_repo_refuses_a_readme_without_its_blocks():
    with pytest.raises(ValueError, match="generated blocks"):
        sync_repo.sync_readme("# no markers here\n", sync_repo.repo_settings())


def test_the_readme_scores_are_the_cards():
    "Every number the README gives for the shipped model's quality is one the card computed."
    import re
    root = Path(__file__).resolve().parents[1]
    readme = (root / "README.md").read_text()
    card = (root / "transformer_lit" / "pretrained" / "MODEL_CARD.md").read_text()
    paragraph = readme[readme.index("**How good is it?**"):].split("\n\n")[0]
    numbers = re.findall(r"\d+\.\d+%?", paragraph)
    assert len(numbers) >= 6, numbers
    for n in numbers:
        assert n in card, f"README says {n}, which the model card does not"
    from transformer_lit.analysis import load_modern_pairs
    modern = len(load_modern_pairs())
    assert f"On {modern} modern English sentences" in paragraph.replace("\n", " ")
