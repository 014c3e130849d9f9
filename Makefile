# The two commands of the README:
#   make run    set up .venv, then the main job (model-check, conformance, Spark local[*] replay, reports/)
#   make test   set up .venv, then the whole test suite
# Both are idempotent: setup reinstalls only when pyproject.toml changed.

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.conq-installed

.PHONY: run test setup check-prereqs check-test-prereqs bench clean

run: setup
	$(BIN)/conq run

# Two worker processes, one per core of the 2-core CI machine; a test file's tests stay together
# (module fixtures such as the compiled Java port are built once).  Verdicts never depend on the
# clock, so both cores busy changes only how long the run takes.  TEST_WORKERS=0 runs serially.
TEST_WORKERS ?= 2

test: setup check-test-prereqs
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile

setup: $(STAMP)

$(STAMP): pyproject.toml setup.py model/engines/_search.c | check-prereqs
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test,bench]'
	touch $(STAMP)

# Spark needs Java 17+; the models need Python 3.11+; the search's set of seen states is a small C
# extension (model/engines/_search.c), built at install: a C compiler and Python's headers.  Say how
# to fix any of them.
check-prereqs:
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' || { \
	  echo "error: conq needs Python 3.11 or newer; found $$($(PYTHON) --version 2>&1)." >&2; \
	  echo "       On Debian/Ubuntu: sudo apt-get install -y python3.11 python3.11-venv, then PYTHON=python3.11 make ..." >&2; exit 2; }
	@v=$$(java -version 2>&1 | awk -F'"' '/version/ {print $$2; exit}' | sed -e 's/^1\.//' | cut -d. -f1); \
	if [ -z "$$v" ] || [ "$$v" -lt 17 ] 2>/dev/null; then \
	  echo "error: Spark needs Java 17 or newer; found: $${v:-no java on PATH}." >&2; \
	  echo "       On Debian/Ubuntu: sudo apt-get install -y openjdk-17-jre-headless" >&2; exit 2; fi
	@command -v $${CC:-cc} >/dev/null 2>&1 && $(PYTHON) -c 'import os, sys, sysconfig; sys.exit(0 if os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")) else 1)' || { \
	  echo "error: conq builds one C extension at install (model/engines/_search.c): it needs a C compiler ($${CC:-cc}: $$(command -v $${CC:-cc} || echo none)) and Python's headers (Python.h)." >&2; \
	  echo "       On Debian/Ubuntu: sudo apt-get install -y build-essential python3-dev" >&2; exit 2; }

# The pages people look at are tested in a real browser (tests/browser/): Debian's chromium and its
# driver, which .ci/run installs.  Say how, before the suite starts, rather than fail in it.  Node.js
# (the JavaScript ports' certification tests) is optional: those tests skip without it, saying so.
check-test-prereqs:
	@command -v $${CONQ_CHROMIUM:-chromium} >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1 || { \
	  echo "error: the browser tests need chromium and chromedriver; found: $$(command -v chromium chromedriver | tr '\n' ' ')" >&2; \
	  echo "       On Debian/Ubuntu: sudo apt-get install -y chromium chromium-driver (.ci/run does)" >&2; exit 2; }
	@command -v node >/dev/null 2>&1 || echo "note: no node on PATH: the Node.js ports' tests will skip (apt-get install -y nodejs)" >&2

bench: setup
	@for b in bench/*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) reports build dist *.egg-info .pytest_cache .hypothesis model/engines/_search.*.so
