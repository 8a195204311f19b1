# Two entry points (see README): `make run` and `make test`. Both are idempotent: the virtual
# environment is built once and rebuilt only when pyproject.toml changes.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
SAMPLES := data/samples

.PHONY: setup run test bench clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@

LAKE ?= lake

run: setup
	$(VENV)/bin/amqpcap run --input $(SAMPLES) --lake $(LAKE)

test: setup
	$(PY) -m pytest -q

bench: setup
	$(PY) bench/codec_bench.py
	$(PY) bench/decode_bench.py

clean:
	rm -rf $(VENV) build *.egg-info
