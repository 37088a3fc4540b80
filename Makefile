# transformer-lit: the two commands a newcomer needs are `make book` and `make test`.
# Both create .venv if it is missing; nothing here needs network access beyond PyPI and npm.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cksum pyproject.toml | cut -d' ' -f1)
MATHJAX := _build/mathjax_static/mathjax/tex-chtml.js
PORT ?= 8000

.PHONY: translations book site test screenshots nbval-full export notebooks serve benchmarks clean \
	venv check-tools lowest

venv: $(STAMP)
$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "error: $(PYTHON) not found (Python >= 3.10 is needed)"; exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# torch first and pinned: the CPU wheel; an unpinned torch would pull GBs of CUDA packages.
	$(PY) -m pip install -q torch==2.13.0
	# dev: the tools of make test and make book; deploy: ctranslate2, which chapter 27
	# and tests/test_export.py use; huggingface: transformers, which chapter 28,
	# benchmarks/bench_peers.py and their tests use; argos: chapter 29; onnx: chapter 30
	# and the page Try the model (extras of their own, so that readers can install them
	# alone)
	$(PY) -m pip install -q -e ".[dev,deploy,huggingface,argos,onnx]"
	# LibreTranslate pins old Flask, numpy and requests: a virtual environment of its own
	# (.venv-libretranslate), which tests/test_argos.py starts the server from
	PYTHON=$(PYTHON) bash tools/libretranslate_venv.sh
	rm -f $(VENV)/.installed-*; touch $@

export: $(STAMP)
	$(PY) tools/sync_repo.py
	$(VENV)/bin/nbdev_export

# MathJax 3 from the npm registry, copied into the site so math renders offline (not committed).
$(MATHJAX):
	@command -v npm >/dev/null || { echo "error: npm not found; install Node.js (apt-get install -y nodejs npm)"; exit 1; }
	npm install --silent --no-audit --no-fund --prefix _build/npm mathjax@3
	rm -rf _build/mathjax_static && mkdir -p _build/mathjax_static
	cp -r _build/npm/node_modules/mathjax/es5 _build/mathjax_static/mathjax

# The page "Try the model" (book/try.md) runs the shipped model in the reader's browser:
# the model as ONNX (chapter 30's export) and the browser runtime (onnxruntime-web,
# tokenizers.js, pinned by web/package-lock.json and installed with npm ci), both made
# here (not committed) and copied into the site's _static/live/. The Chinese book, under
# zh/, reads the same files. Each is redone only when its inputs change; copying them
# into a new site takes seconds.
LIVE := _build/live
LIVE_MODEL := $(LIVE)/model/web.json
LIVE_RUNTIME := $(LIVE)/runtime/VERSIONS.txt
ORT := _build/web/node_modules/onnxruntime-web
TOKENIZERS := _build/web/node_modules/@huggingface/tokenizers
NAME_VERSION_LICENCE := const p = require(process.argv[1]); \
	console.log(p.name, p.version, p.license)
$(LIVE_MODEL): $(STAMP) transformer_lit/onnx_export.py transformer_lit/cli/export.py \
		$(wildcard transformer_lit/pretrained/*)
	rm -rf $(LIVE)/model
	$(VENV)/bin/transformer-lit export onnx $(LIVE)/model

$(LIVE_RUNTIME): web/package.json web/package-lock.json
	@command -v npm >/dev/null || { echo "error: npm not found; install Node.js" \
	  "(apt-get install -y nodejs npm)"; exit 1; }
	rm -rf _build/web $(LIVE)/runtime && mkdir -p _build/web $(LIVE)/runtime
	cp web/package.json web/package-lock.json _build/web/
	npm ci --silent --no-audit --no-fund --ignore-scripts --prefix _build/web
	# the WebAssembly build of onnxruntime (its ES module, the loader and the single- and
	# multi-threaded .wasm in one file) and the tokenizer, with their licences
	cp $(ORT)/dist/ort.wasm.min.mjs $(ORT)/dist/ort-wasm-simd-threaded.mjs \
	  $(ORT)/dist/ort-wasm-simd-threaded.wasm $(TOKENIZERS)/dist/tokenizers.min.mjs \
	  $(LIVE)/runtime/
	cp $(TOKENIZERS)/LICENSE $(LIVE)/runtime/LICENSE-tokenizers.txt
	# last, so that a recipe stopped half-way is run again
	for p in $(ORT) $(TOKENIZERS); do \
	  node -e '$(NAME_VERSION_LICENCE)' "$(CURDIR)/$$p/package.json"; \
	done > $@.tmp && mv $@.tmp $@

book: export
	$(MAKE) --no-print-directory site

# The book from the notebooks and package as they are (make test: its tests check that the
# package is the notebooks' export, so it does not export again).
site: $(STAMP) $(MATHJAX) $(LIVE_MODEL) $(LIVE_RUNTIME) conf.py
	rm -rf _build/html _build/zh _build/jupyter_execute _build/.doctrees _build/.doctrees-zh
	# The English book (at the root) and the Chinese one (under zh/: the same sources, their
	# markdown replaced by the translations of locales/zh_CN) are built at once, one per core.
	# Chinese search splits Chinese into character pairs (book/_ext/cjk_search.py): Sphinx's
	# own Chinese splitter needs jieba, and tripled the build.
	# The button of a hidden code cell is MyST-NB's English unless given ({type}: source).
	$(VENV)/bin/jupyter-book build . --warningiserror --keep-going --quiet & en=$$!; \
	PYTHONPATH=book/_ext $(VENV)/bin/sphinx-build -b html -q -W --keep-going \
	  -d _build/.doctrees-zh -D language=zh_CN -D html_search_language=zh \
	  -D nb_code_prompt_show=显示代码 -D nb_code_prompt_hide=隐藏代码 \
	  -D html_baseurl=$$(sed -n 's/^ *baseurl: *\([^ ]*\).*/\1/p' _config.yml)zh/ \
	  . _build/zh & zh=$$!; \
	status=0; wait $$en || status=$$?; wait $$zh || status=$$?; exit $$status
	mv _build/zh _build/html/zh
	# the model and runtime of the page "Try the model", once, for both books
	cp -r $(LIVE)/model $(LIVE)/runtime _build/html/_static/live/
	# Pages served from a branch run Jekyll, which drops _static/ and _images/.
	touch _build/html/.nojekyll
	@echo
	@echo "The book is at $(CURDIR)/_build/html/index.html (中文: _build/html/zh/index.html)"
	@echo "Serve it with: make serve   (then open http://127.0.0.1:$(PORT)/)"

# Sphinx's configuration, written from _config.yml by Jupyter Book (not committed): the
# Chinese build and the message extraction run Sphinx on it directly.
conf.py: _config.yml _toc.yml $(STAMP)
	$(VENV)/bin/jupyter-book config sphinx . >/dev/null

# The translation catalogues, one .po file per page under locales/zh_CN/LC_MESSAGES/, brought
# up to date with the English: new paragraphs come in empty, changed ones are marked fuzzy
# (msgmerge), removed ones are dropped. Prints what each catalogue still lacks.
translations: $(STAMP) conf.py
	rm -rf _build/gettext
	PYTHONPATH=book/_ext $(VENV)/bin/sphinx-build -b gettext -q . _build/gettext
	$(VENV)/bin/sphinx-intl update -p _build/gettext -l zh_CN -d locales -w 0 --no-obsolete \
	  | grep -v "^Not Changed" || true
	$(PY) tools/translations.py || true   # a report: the tests hold the reader's path complete

serve:
	@test -f _build/html/index.html || { echo "error: no book built yet; run: make book"; exit 1; }
	$(PY) -m http.server --bind 127.0.0.1 --directory _build/html $(PORT)

# The browser test needs Debian's Chromium, and a CJK font for the glossary's Chinese in
# the screenshots. Install both where we can (root with apt-get: CI, a container); else
# stop and say what to run. grep without -q reads all of fc-list (pipefail and SIGPIPE).
BROWSER_PKGS := chromium fonts-wqy-microhei
check-tools:
	@has_font() { fc-list : family 2>/dev/null | grep -i wenquanyi >/dev/null; }; \
	if command -v chromium >/dev/null && has_font; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get update -qq; apt-get install -y -qq $(BROWSER_PKGS); \
	elif ! command -v chromium >/dev/null; then \
	  echo "error: the browser test needs Chromium; run:" \
	    "sudo apt-get install -y $(BROWSER_PKGS)"; exit 1; \
	fi

# The whole suite: the book build; package == export of the notebooks, imports, unit tests and
# the browser test over the built book, in two processes; nbval over every notebook.
# nbval runs outside the repository, on copies of the notebooks each alone in a folder, with
# the package installed from its wheel (not editable): a chapter must work for a reader who
# has only `pip install`ed the package. Two notebooks run at once, each in its own kernel
# with one CPU thread, with TRANSFORMER_LIT_QUICK=1: chapters 18 and 19 shorten their long
# runs, and the cells tagged quick-ignore-output are not compared (tools/nbval_outside.py;
# `make nbval-full` runs every cell as stored). Each chapter still runs once; the folder is
# removed.
test: $(STAMP) check-tools
	@date +"make test: start %T"
	$(MAKE) --no-print-directory site
	@date +"make test: site built %T"
	# unit and browser tests in two processes: many of them wait on a subprocess or a page;
	# the screenshots are left to `make screenshots`
	TRANSFORMER_LIT_SCREENSHOTS=0 $(VENV)/bin/pytest tests -n 2 --dist loadgroup --durations=25
	@date +"make test: unit and browser tests done %T"
	$(PY) tools/nbval_outside.py
	@date +"make test: end %T"

# the browser tests with a screenshot of every page in _build/screenshots/ (look at them after
# a change to the book)
screenshots: $(STAMP) check-tools
	$(MAKE) --no-print-directory site
	$(VENV)/bin/pytest tests -m browser

# nbval over every notebook as stored, chapter 19's full training run included
nbval-full: $(STAMP)
	$(PY) tools/nbval_outside.py --full

# The package against the LOWEST version of each runtime dependency (pyproject.toml's
# lower bounds, which tools/lowest_requirements.py reads) in a fresh .venv-lowest: the
# unit tests that need only the runtime dependencies (no extra, browser or notebook),
# in two processes. PyPI's torch of that age is a CUDA build: about 3 GB to download,
# 5.3 GB in .venv-lowest, removed after a pass (a failed run leaves it for a look).
LOWEST := .venv-lowest
LOWEST_TESTS := $(patsubst %,tests/test_%.py,attention masking positional norms ffn \
	cache encoder decoder model inference training data validate scoring versions \
	pretrained precision runs cli fast_paths fast_dropout onednn_products distributed \
	requirements)
lowest:
	@date +"make lowest: start %T"
	rm -rf $(LOWEST)
	$(PYTHON) -m venv $(LOWEST)
	$(LOWEST)/bin/python -m pip install -q --upgrade pip
	$(PYTHON) tools/lowest_requirements.py > $(LOWEST)/lowest.txt
	$(PYTHON) tools/lowest_requirements.py --tools pytest pytest-xdist \
	  >> $(LOWEST)/lowest.txt
	$(LOWEST)/bin/python -m pip install -q -r $(LOWEST)/lowest.txt
	$(LOWEST)/bin/python -m pip install -q --no-deps -e .
	$(LOWEST)/bin/python tools/lowest_requirements.py --check
	@date +"make lowest: installed %T"
	# test_python_dash_m_runs_main also runs `export ctranslate2` (the deploy extra)
	$(LOWEST)/bin/pytest $(LOWEST_TESTS) -n 2 --dist loadgroup -q \
	  --deselect tests/test_cli.py::test_python_dash_m_runs_main
	rm -rf $(LOWEST)
	@date +"make lowest: end %T"

# Re-execute notebooks in place (fresh kernel, counts 1..n) after editing them, their code first
# fitted to 88 columns (tools/fit_page.py): make notebooks NB=nbs/03_attention.ipynb
notebooks: $(STAMP)
	$(PY) tools/fit_page.py $(NB)
	$(PY) tools/fold_figures.py $(NB)
	$(MAKE) --no-print-directory export
	$(PY) tools/run_notebooks.py $(NB)

benchmarks: book
	for b in benchmarks/bench_*.py; do $(PY) $$b; done

clean:
	rm -rf _build
