# Two entry points (see README): `make run` and `make test`. Both are idempotent: the virtual
# environment is built once, and again only when the build files change or the checkout moved
# (a .venv copied from another checkout would silently run that checkout's code).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
SAMPLES := data/samples
CHECKOUT_ID := $(shell printf '%s' "$(CURDIR)" | cksum | cut -d' ' -f1)
STAMP := $(VENV)/.installed-$(CHECKOUT_ID)

.PHONY: setup run test quick bench clean

setup: $(STAMP)

# The compiled build is made from the .py files: a changed one rebuilds it (a stale extension
# would silently run the old code).
$(STAMP): pyproject.toml setup.py $(shell find amqpcap -name '*.py' -o -name '*.pxd')
	@if [ -d $(VENV) ] && [ "$$(cat $(VENV)/.checkout 2>/dev/null)" != "$(CURDIR)" ]; then \
		echo "amqpcap: $(VENV) was made for another checkout: rebuilding it"; rm -rf $(VENV); fi
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	printf '%s' "$(CURDIR)" > $(VENV)/.checkout
	$(PY) -m amqpcap.job.class_archive  # Spark's JVM classes, mapped at every start (amqpcap/job/class_archive.py)
	$(PY) -m amqpcap.job.jars > /dev/null  # the Delta jars, fetched once from Maven Central (amqpcap/job/jars.py)
	@# bytecode, as pip writes it for a regular install (an editable one does not): where Python may not
	@# write it (PYTHONDONTWRITEBYTECODE), every start would compile the sources again (20-40 ms)
	$(PY) -m compileall -q -j 0 amqpcap
	rm -f $(VENV)/.installed*
	touch $@

LAKE ?= lake

run: setup
	$(VENV)/bin/amqpcap run --input $(SAMPLES) --tls-keylog $(SAMPLES)/tls --lake $(LAKE)

# The whole suite on the installed (compiled, where a C compiler was there) build, then the
# decoder's tests (and the fuzz suite's quick part) again on the interpreted modules, the reference
# the compiled build must equal. On every core, a test file per worker (its module fixtures, such
# as a lake made by a job run, are then made once): 8.3 rather than 10.7 min on 2 cores.
PARALLEL ?= -n auto --dist loadfile
test: setup
	$(VENV)/bin/ruff check --quiet .
	$(PY) -m pytest -q $(PARALLEL)
	AMQPCAP_INTERPRETED=1 $(PY) -m pytest -q $(PARALLEL) -m "not slow" tests/protocol tests/capture tests/connection tests/columnar tests/tables tests/rules tests/onepass tests/decodeview tests/tls tests/cli/test_cli.py tests/fuzz

quick: setup  # the inner loop: everything but the Spark end-to-end tests
	$(PY) -m pytest -q $(PARALLEL) -m "not slow"

bench: setup
	$(PY) bench/codec_bench.py
	$(PY) bench/decode_bench.py

clean:
	rm -rf $(VENV) build *.egg-info
