# Aerolite: every target sets itself up; `make run` and `make test` work on a fresh clone.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PACKAGES := broker remoting store client codec
# The RocketMQ 5 Python client's own venv (tests/proxy): its package is `rocketmq`, as is
# the 4.x client's in .venv, so the two cannot share one.
RMQ5_VENV := .venv-rmq5
RMQ5_STAMP := $(RMQ5_VENV)/.installed
LINTED := $(PACKAGES) pyspark_aerolite.py setup.py examples

.PHONY: help install browser screenshots protos fmt lint type test test-asyncio bench bench-peers check run interop cluster fuzz docker clean

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-13s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml tests/e2e/js/package-lock.json
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip setuptools
	@# The spark extra (pyspark, pyarrow) is part of the suite: tests/spark run the connector.
	$(PY) -m pip install --quiet -e '.[dev,spark]'
	@# ali-ons for tests/e2e (they skip without node); npm ci reinstalls from the lock file.
	@if command -v npm >/dev/null 2>&1; then \
		echo "npm ci (tests/e2e/js)"; \
		(cd tests/e2e/js && npm ci --no-audit --no-fund --loglevel=error); \
	fi
	@touch $(STAMP)

# The codec's compiled speedups (setup.py), rebuilt in place when a .pyx changes; without a
# C compiler the build says so and the pure-Python codec runs. The last line says which.
SPEEDUPS_STAMP := $(VENV)/.speedups

$(SPEEDUPS_STAMP): $(STAMP) setup.py $(wildcard codec/*.pyx codec/*.pxd)
	@$(PY) setup.py --quiet build_ext --inplace 2>&1 | grep -v -e '^warning: ' -e '^$$' || true
	@$(PY) -c "import codec; print('aerolite codec speedups:', codec.SPEEDUPS)"
	@touch $(SPEEDUPS_STAMP)

$(RMQ5_STAMP): tests/proxy/rmq5-requirements.txt
	@test -x $(RMQ5_VENV)/bin/python || $(PYTHON) -m venv $(RMQ5_VENV)
	$(RMQ5_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(RMQ5_VENV)/bin/python -m pip install --quiet -r tests/proxy/rmq5-requirements.txt
	@touch $(RMQ5_STAMP)

install: $(STAMP) $(SPEEDUPS_STAMP) $(RMQ5_STAMP) browser  ## create .venv and install the project with its dev extras (and build the speedups)

# The web console's browser tests (tests/dashboard) drive Debian's Chromium through
# Playwright; Playwright's own browser downloads are never used. Installed when it can be
# (root with apt), else the tests say how and skip (outside CI, where they must run).
browser:
	@if ! command -v chromium >/dev/null 2>&1; then \
		if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
			echo "apt-get install chromium (the console's browser tests)"; \
			(apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends \
				chromium fonts-dejavu-core >/dev/null) \
				|| echo "could not install chromium: the browser tests will say so"; \
		else \
			echo "not installed: chromium (apt-get install chromium); the browser tests skip"; \
		fi; \
	fi

protos: install  ## regenerate broker/proxy/apis from the vendored apache/rocketmq-apis protos
	$(PY) -m broker.proxy.apis.regenerate

fmt: install  ## format the code
	$(VENV)/bin/ruff format $(LINTED) tests
	$(VENV)/bin/ruff check --fix $(LINTED) tests

lint: install  ## ruff
	$(VENV)/bin/ruff check $(LINTED) tests
	$(VENV)/bin/ruff format --check $(LINTED) tests

type: install  ## mypy --strict on the five packages, and on the tests
	$(VENV)/bin/mypy
	$(VENV)/bin/mypy tests

# make test runs the compiled codec (a test fails if the speedups were not built); the
# second run takes the pure-Python codec (AEROLITE_NO_EXTENSIONS=1), so the fallback is
# exercised by the whole suite and can never rot.
test: lint type  ## lint, types and the whole suite on uvloop, with the codec's speedups
	AEROLITE_REQUIRE_SPEEDUPS=1 $(PY) -m pytest -q --durations=20

# Tests marked `once` run in `make test` only: a third-party client's scenarios (the C++ and
# ali-ons clients', the RocketMQ 5 Python client's), whose broker paths our own tests cover on
# both loops, and the build and benchmark tooling, which no loop or codec choice changes.
test-asyncio: install  ## the suite once more on stdlib asyncio in debug mode, pure-Python codec
	AEROLITE_NO_EXTENSIONS=1 AEROLITE_LOOP=asyncio PYTHONASYNCIODEBUG=1 $(PY) -m pytest -q -p no:cacheprovider \
		-m "not once" --durations=20

check: test test-asyncio  ## everything CI checks before interop

BENCH_STAMP := $(VENV)/.installed-bench

$(BENCH_STAMP): $(STAMP) pyproject.toml
	$(PY) -m pip install --quiet -e '.[dev,spark,bench]'
	@touch $(BENCH_STAMP)

# The peers of the side-by-side benchmark come from Debian's packages; one that cannot be
# installed here is reported as missing by the benchmark, never silently dropped.
BENCH_PEERS := redis-server nats-server

bench-peers:
	@missing=""; for p in $(BENCH_PEERS); do command -v $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
			echo "apt-get install$$missing"; \
			(apt-get update -q >/dev/null && apt-get install -y -q$$missing >/dev/null) \
				|| echo "could not install$$missing: the benchmarks report them as missing"; \
		else \
			echo "not installed:$$missing (apt-get install$$missing); the benchmarks report them as missing"; \
		fi; \
	fi

screenshots: install  ## the web console's screenshots in docs/ (headless Chromium, a demo cluster)
	$(PY) -m tests.dashboard.screenshots

bench: install $(BENCH_STAMP) bench-peers  ## benchmarks: figures as ratios to baselines measured in the same run
	$(PY) -m tests.bench

# ARGS go to the broker: make run ARGS="--set dashboardUsers=admin:change-me"
run: install  ## the standalone broker (name server + broker in one process) and its web console
	$(VENV)/bin/aerolite standalone $(ARGS)

interop: install  ## tests against Apache RocketMQ's Java remoting/client/broker (Maven), Java and Go 5.x clients
	$(PY) -m pytest -q tests/interop -m interop --run-interop

FUZZ_EXAMPLES ?= 200000
fuzz: install  ## long fuzzing: every request code on a live broker, and the frame decoders
	AEROLITE_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) AEROLITE_FUZZ_RANDOM=1 $(PY) -m pytest -q \
		--hypothesis-show-statistics tests/broker/test_fuzz_processors.py tests/remoting/test_fuzz_frames.py

cluster: install  ## run docker/docker-compose.yml as local processes (no Docker needed)
	$(VENV)/bin/aerolite cluster up -f docker/docker-compose.yml

docker:  ## build the image (needs a Docker engine)
	docker build -f docker/Dockerfile -t aerolite:latest .

clean:  ## remove the venv and caches
	rm -rf $(VENV) $(RMQ5_VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis build dist *.egg-info
	rm -f codec/_c*.c codec/_c*.so codec/_c*.html
