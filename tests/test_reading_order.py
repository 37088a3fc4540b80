"""The book read in the table of contents' order: a chapter imports package code only from
itself or from chapters before it (issue 31). The chapters that still use code a later chapter
defines are listed in LATER, each with the modules it takes from ahead; the test fails when a
new such use appears, and when a listed one is gone (then the list must shrink with it), so
the list is always the work left."""
from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
IMPORT = re.compile(r"^\s*(?:from\s+transformer_lit\.([\w.]+)\s+import|"
                    r"import\s+transformer_lit\.([\w.]+)|"
                    r"from\s+transformer_lit\s+import\s+([\w, ]+))", re.M)
# chapter -> the modules it imports that a later chapter exports: the work left
LATER: dict[str, set[str]] = {}
# the overview runs the finished model before the chapters build it, by design: it is the
# tour of what they will build
TOUR = "01_overview"
# the Reference part's utilities (files, the machine) serve every chapter, as an appendix
# does: any chapter may import them (issue 48: "a core chapter may import from the
# Reference part's utility modules")
REFERENCE = "Reference"


def toc_chapters() -> list[str]:
    "The notebooks' stems in the order _toc.yml lists them."
    return re.findall(r"file:\s*nbs/(\S+)", (ROOT / "_toc.yml").read_text())


def code(stem: str) -> str:
    nb = json.loads((ROOT / "nbs" / f"{stem}.ipynb").read_text())
    return "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")


def exported_code(stem: str) -> str:
    "The cells of a notebook that nbdev exports into its module."
    nb = json.loads((ROOT / "nbs" / f"{stem}.ipynb").read_text())
    return "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"
                     and re.search(r"^#\|\s*export", "".join(c["source"]), re.M))


def exported_module(source: str) -> str | None:
    m = re.search(r"^#\|\s*default_exp\s+(\S+)", source, re.M)
    return m.group(1) if m else None


def imported_modules(source: str, known: set[str]) -> set[str]:
    found = set()
    for dotted, plain, names in IMPORT.findall(source):
        if names:   # from transformer_lit import a, b: the modules among them
            found |= {n.strip() for n in names.split(",")} & known
        else:
            found.add(dotted or plain)
    return found


def reference_chapters() -> list[str]:
    "The notebooks' stems in the table of contents' Reference part."
    part = (ROOT / "_toc.yml").read_text().split(f"caption: {REFERENCE}")[1]
    return re.findall(r"file:\s*nbs/(\S+)", part)


def uses_of_later_code() -> dict[str, set[str]]:
    chapters = toc_chapters()
    sources = {stem: code(stem) for stem in chapters}
    reference = set(reference_chapters())
    home = {exported_module(s): i for i, (stem, s) in enumerate(sources.items())
            if exported_module(s) and stem not in reference}
    later = {}
    for i, (stem, source) in enumerate(sources.items()):
        if stem == TOUR:
            continue
        ahead = {m for m in imported_modules(source, set(home)) if home.get(m, -1) > i}
        if ahead:
            later[stem] = ahead
    return later


def test_every_chapter_is_in_the_table_of_contents():
    assert sorted(toc_chapters()) == sorted(p.stem for p in (ROOT / "nbs").glob("*.ipynb"))


def test_file_order_is_the_reading_order():
    "Two digits, no letter: the notebooks' names sort in the table of contents' order."
    chapters = toc_chapters()
    assert all(re.fullmatch(r"\d\d_[a-z_]+", stem) for stem in chapters), chapters
    assert chapters == sorted(chapters)
    # numbered from 1 (the overview) with no gap
    assert [int(stem[:2]) for stem in chapters] == list(range(1, len(chapters) + 1))


def test_numbers_in_titles_and_links_are_the_file_numbers():
    "A chapter's title and every '[NN · title](NN_name.ipynb)' link give its file's number."
    for stem in toc_chapters():
        nb = json.loads((ROOT / "nbs" / f"{stem}.ipynb").read_text())
        title = "".join(nb["cells"][0]["source"]).splitlines()[0]
        assert title.startswith(f"# {stem[:2]} · "), (stem, title)
    texts = [p.read_text() for p in (ROOT / "book").glob("*.md")]
    texts += [p.read_text() for p in (ROOT / "nbs").glob("*.ipynb")] + [(ROOT / "README.md").read_text()]
    links = [m for t in texts for m in re.findall(r"\[(\d\d) · [^]]*\]\((?:\.\./nbs/)?(\d\d)_", t)]
    assert links and all(a == b for a, b in links), [m for m in links if m[0] != m[1]]


def test_chapters_use_no_code_from_later_chapters_but_the_listed():
    assert uses_of_later_code() == LATER


def test_the_reference_utilities_import_no_chapter():
    "What every chapter may use stands on nothing a chapter writes: only on the others."
    reference = reference_chapters()
    assert "34_files" in reference and "35_machine" in reference
    known = {exported_module(code(stem)) for stem in toc_chapters()} - {None}
    utilities = {exported_module(code(stem)) for stem in reference} - {None}
    for stem in reference:
        if exported_module(code(stem)):   # a utility module's chapter
            # its module's code: a Reference page's demonstrations may use any chapter
            assert imported_modules(exported_code(stem), known) <= utilities, stem


def screens_tool():
    "tools/screens.py as a module: parts() reads _toc.yml's parts, screens() counts."
    import importlib.util
    spec = importlib.util.spec_from_file_location("screens", ROOT / "tools" / "screens.py")
    screens = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(screens)
    return screens


def test_the_core_path_fits_its_screens():
    """Issue 31: the reader's path (the parts before Engineering) at most 160 screens of
    tools/screens.py's count, no chapter of it over 22."""
    screens = screens_tool()
    parts = screens.parts()
    core = [stem for caption, stems in parts[:[c for c, _ in parts].index("Engineering")]
            for stem in stems]
    counts = {stem: screens.screens(stem) for stem in core}
    assert "19_your_model" in counts and sum(counts.values()) <= 160, sum(counts.values())
    assert max(counts.values()) <= 22, counts


def package_map() -> list[tuple[str, list[tuple[str, str]]]]:
    """The map in the package's docstring (`help(transformer_lit)`): [(part, [(module,
    chapter number), ...]), ...], read from its indented 'module  NN  what' lines."""
    import transformer_lit
    captions, parts = {caption for caption, _ in screens_tool().parts()}, []
    for line in transformer_lit.__doc__.split("To translate")[0].splitlines():
        row = re.fullmatch(r"  ([a-z_.]+) +(\d\d)  \S.*", line)
        if line in captions:
            parts.append((line, []))
        elif row:
            parts[-1][1].append(row.groups())
    return parts


def test_the_package_docstring_maps_every_module_to_its_chapter_and_part():
    """help(transformer_lit) lists every exported module once, under the part of the book
    its chapter is in, with that chapter's number, in reading order."""
    expected = []
    for part, stems in screens_tool().parts():
        modules = [(exported_module(code(stem)), stem[:2]) for stem in stems]
        modules = [(m.removesuffix(".__init__"), n) for m, n in modules if m]
        if modules:
            expected.append((part, modules))
    assert expected and package_map() == expected


def test_the_package_docstring_example_runs():
    import doctest

    import transformer_lit
    result = doctest.testmod(transformer_lit, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted >= 5 and result.failed == 0, result


def test_the_readme_python_blocks_print_what_they_say():
    """Each ```python block of the README's 'Use the package' runs, and prints what its last
    comment line shows."""
    import contextlib
    import io
    section = (ROOT / "README.md").read_text().split("## Use the package")[1].split("\n## ")[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) >= 2
    for block in blocks:
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(block, {})
        shown = block.rstrip().splitlines()[-1]
        assert shown.startswith("# ") and printed.getvalue().strip() == shown[2:], block


def test_core_chapters_import_only_the_core_and_the_reference_part():
    """Issue 57: a core chapter (01-20, before the Engineering part) teaches with the core's
    modules and calls the Reference part's (the appendix any chapter may use); it imports
    nothing that the Engineering or the speed parts write (run folders, the command line,
    the fast paths, the exports)."""
    chapters = toc_chapters()
    core = chapters[:chapters.index(next(s for s in chapters if s.startswith("21_")))]
    modules = {exported_module(code(stem)) for stem in chapters} - {None}
    allowed = {exported_module(code(stem)) for stem in core + reference_chapters()}
    taken = {stem: imported_modules(code(stem), modules) - allowed for stem in core}
    assert {"training", "inference", "validate"} <= allowed
    assert not {stem: found for stem, found in taken.items() if found}


def test_the_core_import_rule_sees_an_engineering_import():
    found = imported_modules("from transformer_lit.runs import RunFolder\n"
                             "from transformer_lit import fast, model\n",
                             {"runs", "fast", "model"})
    assert found == {"runs", "fast", "model"}
