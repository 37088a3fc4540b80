#!/usr/bin/env bash
# Make .venv-libretranslate: LibreTranslate, the translation server of chapter 29, in a
# virtual environment of its own. LibreTranslate pins old packages (numpy 1.26, Flask 2.2,
# requests 2.31, packaging 23.1) that must not go into .venv. It needs no torch: it runs
# on argos-translate-lt, Argos Translate without stanza, and splits sentences with MiniSBD
# (onnxruntime). tests/test_argos.py skips its server tests where this venv is missing.
#
#     tools/libretranslate_venv.sh            # PYTHON=python3.11 tools/... picks the Python
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
VENV=.venv-libretranslate
VERSION=1.9.6   # the version tests/test_argos.py and chapter 29 were checked with
STAMP="$VENV/.installed-libretranslate-$VERSION"
if [ -f "$STAMP" ]; then exit 0; fi
command -v "$PYTHON" >/dev/null || { echo "error: $PYTHON not found"; exit 1; }
test -x "$VENV/bin/python" || "$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip
"$VENV/bin/python" -m pip install -q "libretranslate==$VERSION"
rm -f "$VENV"/.installed-libretranslate-*
touch "$STAMP"
