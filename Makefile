# streamcrawl — one entry point for the local stack, the tests, the crawler and the benchmarks.
# Everything runs on loopback; everything downloaded or built lives in .stack/ and .venv/ (git-ignored).

PY      ?= python3
VENV    := .venv
VPY     := $(VENV)/bin/python
STACK   := $(VPY) stack/stackctl.py

.PHONY: help venv stack-up stack-down stack-status stack-reset test test-unit test-integration test-e2e \
        lint schemas schemas-check run bench-core bench-crawl clean

help:
	@echo "make run            start the stack and every service, crawl the bundled synthetic web (Ctrl-C stops)"
	@echo "make test           install deps, start the stack, run unit + integration + e2e tests"
	@echo "make stack-up|stack-down|stack-status|stack-reset"
	@echo "make lint           ruff + mypy + schema drift check"
	@echo "make bench-core     core library benchmarks (docs/benchmarks.md)"
	@echo "make bench-crawl    whole crawl vs Scrapy: 2,000 hosts (CPU-bound) and 10 deep hosts (politeness-bound)"

# The venv is rebuilt when a requirements file changes.
$(VENV)/.installed: requirements.txt requirements-dev.txt pyproject.toml
	$(PY) -m venv $(VENV)
	$(VPY) -m pip install -q -r requirements-dev.txt
	$(VPY) -m pip install -q --no-deps -e .
	touch $@

venv: $(VENV)/.installed

stack-up: venv
	$(STACK) up

stack-down:
	@if [ -x $(VPY) ]; then $(STACK) down; else $(PY) stack/stackctl.py down; fi

stack-status: venv
	$(STACK) status

stack-reset: venv
	$(STACK) reset

test-unit: venv
	$(VPY) -m pytest tests/unit -q

test-integration: stack-up
	$(VPY) -m pytest tests/integration -q

test-e2e: stack-up
	$(VPY) -m pytest tests/e2e -q

# The README's test command: deps, the real stack, then every test (unit, integration, e2e).
test: stack-up
	$(VPY) -m pytest tests -q

lint: venv
	$(VPY) -m ruff check libs services tools tests stack bench
	$(VPY) -m mypy libs services tools
	$(VPY) -m streamcrawl_contracts.export --check

schemas: venv
	$(VPY) -m streamcrawl_contracts.export

run: stack-up
	$(VPY) -m streamcrawl_launcher $(if $(SEEDS),--seeds $(SEEDS),) $(RUN_ARGS)

bench-core: venv
	$(VPY) bench/core_a.py
	$(VPY) bench/core_b.py

# Whole crawl vs Scrapy on 2,000 synthetic hosts (docs/benchmarks-crawl.md). Resets the crawl's topics,
# tables and bucket on the local stack, and uses ports 8480/8553: run it when no other crawl uses them.
bench-crawl: stack-up
	$(VPY) -m pip install -q -r requirements-bench.txt
	$(VPY) bench/crawl_bench.py --hosts 2000 --duration 360 --out docs/benchmarks-crawl.md
	$(VPY) bench/crawl_bench.py --hosts 10 --profile deep --duration 300 --out docs/benchmarks-crawl-bound.md

clean: stack-down
	rm -rf $(VENV) .stack
