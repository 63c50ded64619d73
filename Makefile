# streamcrawl — one entry point for the local stack, the tests, the crawler and the benchmarks.
# Everything runs on loopback; everything downloaded or built lives in .stack/ and .venv/ (git-ignored).

PY      ?= python3
VENV    := .venv
VPY     := $(VENV)/bin/python
STACK   := $(VPY) stack/stackctl.py

# helm, built from the Go module proxy and cached beside the engines (a version bump builds a new binary).
STACK_DIR    := $(abspath $(or $(STREAMCRAWL_STACK_DIR),.stack))
HELM_VERSION := v3.22.0
# The Kubernetes version helm assumes without a cluster (helm's own release builds set it from its client-go,
# v0.37 for v3.22.0 -> 1.37); the chart tests validate against the same version's schemas.
HELM_KUBE    := 1.37
HELM         := $(STACK_DIR)/bin/helm-$(HELM_VERSION)
export STREAMCRAWL_HELM := $(HELM)
# The image `make image` builds with buildah (not part of CI).
IMAGE        ?= streamcrawl:0.1.0

.PHONY: audit help venv stack-up stack-down stack-status stack-reset test test-unit test-integration test-e2e \
        lint schemas schemas-check run bench-core bench-crawl bench-idle bench-scale bench-memory clean helm helm-check image browser \
        screenshot test-scale bench-loop-busy test-faults test-faults-ci test-faults-ci-down bench-faults chaos fault-stack-down pywb-check bench-refresh-split

help:
	@echo "make run            start the stack and every service, crawl the bundled synthetic web (Ctrl-C stops);"
	@echo "                    INSTANCES=3 runs 3 instances of each service"
	@echo "make test           install deps, start the stack, run unit + integration + e2e tests"
	@echo "make stack-up|stack-down|stack-status|stack-reset"
	@echo "make lint           ruff + mypy + schema drift check"
	@echo "make audit          pip-audit over the pinned requirements (ADVISORY_DB=... for the offline check)"
	@echo "make helm-check     build helm, lint + render the chart (both values files), validate every manifest"
	@echo "make image          build the container image with buildah (vfs storage) and run one service from it"
	@echo "make bench-core     core library benchmarks (docs/benchmarks.md)"
	@echo "make bench-crawl    whole crawl vs Scrapy: 2,000 hosts (CPU-bound), 10 deep and 100 small hosts (politeness-bound)"
	@echo "make bench-idle     what the five services cost with nothing to fetch"
	@echo "make bench-scale    1, 2 and 3 instances of every service on 2,000 hosts: pages/s, CPU-ms per page"
	@echo "make bench-memory   frontier memory at 10M queued URLs / 1M hosts; near-dup rows per query; Bloom sizes"
	@echo "make bench-refresh-split  the discovery/refresh split of a frontier-bound crawl, discovery_share 0.3 and 0.5"
	@echo "make screenshot     retake docs/dashboard.png from the dashboard test's live crawl"
	@echo "make pywb-check     replay the bucket's WARC files with pywb (a venv of its own); PYWB_ARGS=--crawl runs a"
	@echo "                    60-host crawl first (resets the crawl on the stack)"
	@echo "make test-faults    the engine-fault e2e tests: Cassandra, S3, Kafka frozen 30 s, then restarted, in turn (private stack)"
	@echo "make test-faults-ci the engine-freeze and -restart e2e tests on a stack of their own, started and stopped (make test runs both)"
	@echo "make bench-faults   each engine frozen 30 s and restarted during a crawl vs a baseline (private stack)"
	@echo "make chaos          5 min of kill -9 every 15 s and an engine restart each during a crawl (private stack)"

# The venv's own installers, pinned: `python -m venv` seeds whatever pip and setuptools the interpreter
# bundles (3.11's carry known vulnerabilities, docs/supply-chain.md).
BOOTSTRAP_PINS := pip==26.3 setuptools==84.2.1

# The venv is rebuilt when a requirements file changes.
$(VENV)/.installed: requirements.txt requirements-dev.txt pyproject.toml
	$(PY) -m venv $(VENV)
	$(VPY) -m pip install -q $(BOOTSTRAP_PINS)
	$(VPY) -m pip install -q -r requirements-dev.txt
	$(VPY) -m pip install -q --no-deps -e .
	touch $@

# The compiled hot paths of streamcrawl_core (native/, a Rust crate built with maturin): built and installed
# when cargo is on PATH; without it, or if the build fails, the core runs its pure-Python paths (same results).
NATIVE_SRC := native/Cargo.toml native/pyproject.toml $(wildcard native/src/*.rs)
NATIVE_WARN := make: warning: streamcrawl_native not built
$(VENV)/.native: $(VENV)/.installed $(NATIVE_SRC)
	@rm -rf native/target/wheels
	@if ! command -v cargo >/dev/null 2>&1; then \
	  $(VPY) -m pip uninstall -q -y streamcrawl-native >/dev/null 2>&1; \
	  echo "$(NATIVE_WARN) (no cargo on PATH): streamcrawl_core runs pure Python, slower, same results"; \
	elif $(VPY) -m maturin build -q --release -m native/Cargo.toml -i $(VPY) -o native/target/wheels \
	  && $(VPY) -m pip install -q --force-reinstall --no-deps native/target/wheels/*.whl; then touch $@; \
	else \
	  $(VPY) -m pip uninstall -q -y streamcrawl-native >/dev/null 2>&1; \
	  echo "$(NATIVE_WARN) (the build failed, see above): streamcrawl_core runs pure Python, slower, same results"; \
	fi

venv: $(VENV)/.installed $(VENV)/.native

stack-up: venv
	$(STACK) up

stack-down:
	@if [ -x $(VPY) ]; then $(STACK) down; else $(PY) stack/stackctl.py down; fi

stack-status: venv
	$(STACK) status

stack-reset: venv
	$(STACK) reset

test-unit: venv $(HELM)
	$(VPY) -m pytest tests/unit -q

test-integration: stack-up
	$(VPY) -m pytest tests/integration -q

test-e2e: browser stack-up
	$(VPY) -m pytest tests/e2e -q

# The scale-out / scale-in / kill -9 crawl (issue 10) alone (`make test` runs it too).
test-scale: stack-up
	$(VPY) -m pytest tests/e2e/test_scale_e2e.py -q -s

# docs/dashboard.png, taken by the browser test while its crawl runs (after resume, once pages flow again).
screenshot: browser stack-up
	STREAMCRAWL_SCREENSHOT=1 $(VPY) -m pytest tests/e2e/test_operate.py -q -k dashboard

# The README's test command: deps, lint, helm, the real stack, then every test (unit with the chart checks,
# packaging, integration, e2e), then the engine-freeze and -restart e2e tests on a stack of their own
# (test-faults-ci; ~6 min).
test: lint $(HELM) browser stack-up
	$(VPY) -m pytest tests -q
	$(MAKE) --no-print-directory test-faults-ci

lint: venv
	$(VPY) -m ruff check libs services tools tests stack bench setup.py
	$(VPY) -m mypy libs services tools
	$(VPY) -m streamcrawl_contracts.export --check

# helm v3 from source (Go module proxy); a few minutes on 2 cores the first time, then reused. The lock
# keeps two checkouts sharing one stack dir from building it at once.
helm: $(HELM)
$(HELM):
	@mkdir -p $(@D)
	@echo "building helm $(HELM_VERSION) with go install (cached as $@)"
	flock $(@D)/.helm.lock sh -c 'test -x $@ || { d=$$(mktemp -d) && \
	  GOBIN=$$d GOFLAGS=-buildvcs=false CGO_ENABLED=0 go install \
	    -trimpath -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$(HELM_VERSION) \
	      $(foreach p,chartutil lint/rules,-X helm.sh/helm/v3/pkg/$(p).k8sVersionMajor=$(word 1,$(subst ., ,$(HELM_KUBE))) \
	        -X helm.sh/helm/v3/pkg/$(p).k8sVersionMinor=$(word 2,$(subst ., ,$(HELM_KUBE))))" \
	    helm.sh/helm/v3/cmd/helm@$(HELM_VERSION) && mv $$d/helm $@ && rmdir $$d; }'
	ln -sf $(@F) $(@D)/helm
	$@ version --short

# helm lint --strict, helm template (default and production values), offline validation of every manifest
# against the Kubernetes schemas, the values schema's refusals, the image and compose checks.
helm-check: venv $(HELM)
	$(VPY) -m pytest tests/unit/deploy -q

# Build the image with buildah (Debian's package, vfs storage, no daemon) and run one service from it.
# Not part of CI. Needs the base image from a container registry.
image:
	command -v buildah >/dev/null || apt-get install -y buildah
	buildah --storage-driver vfs bud --isolation chroot -t $(IMAGE) .
	buildah --storage-driver vfs from --name streamcrawl-image-check $(IMAGE)
	buildah --storage-driver vfs run --isolation chroot streamcrawl-image-check -- streamcrawl-control --help; \
	  rc=$$?; buildah --storage-driver vfs rm streamcrawl-image-check >/dev/null; exit $$rc

# Known vulnerabilities of the pinned requirements: pip-audit (pinned in requirements-dev.txt) resolves them
# in a throw-away venv and asks PyPI's vulnerability data; --strict fails on any pin it could not check.
# Where no vulnerability service answers, ADVISORY_DB=<a checkout of pypa/advisory-database> checks this
# venv's distributions against that copy instead (tools/audit/offline_audit.py; docs/supply-chain.md).
audit: venv
	@if $(VPY) -m pip_audit --strict --progress-spinner off -r requirements-dev.txt; then :; \
	elif [ -n "$(ADVISORY_DB)" ]; then \
	  echo "make audit: pip-audit could not check every pin; offline check against $(ADVISORY_DB)"; \
	  $(VPY) tools/audit/offline_audit.py $(ADVISORY_DB); \
	else echo "make audit: pip-audit could not check every pin (set ADVISORY_DB for the offline check)"; exit 1; fi

schemas: venv
	$(VPY) -m streamcrawl_contracts.export

# `streamcrawl run`: SEEDS=file (else the bundled synthetic web), INSTANCES=n processes per service.
run: stack-up
	$(VPY) -m streamcrawl_cli run $(if $(SEEDS),--seeds $(SEEDS),) $(if $(INSTANCES),--instances $(INSTANCES),) $(RUN_ARGS)

# Debian's Chromium and its driver, for the dashboard's browser test (no browser download of a test tool).
browser:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver; }

bench-core: venv
	$(VPY) bench/core_a.py
	$(VPY) bench/core_b.py

# 1, 2 and 3 instances of every service on the 2,000-host web: pages/s and CPU-ms per page (docs/benchmarks-scale-instances.md).
# Resets the crawl on the local stack and uses ports 8480/8553, like bench-crawl.
bench-scale: stack-up
	$(VPY) bench/scale_bench.py --hosts 2000 --duration 150 --instances 1 2 3 --repeats 2 \
	  --out docs/benchmarks-scale-instances.md

# The frontier's discovery/refresh split on a crawl it bottlenecks (3 leases, 150 hosts, recrawl intervals in
# seconds), judged from the synthetic web's request log: two crawls of 90 s, discovery_share 0.3 and 0.5
# (docs/benchmarks-refresh-split.md). Resets the crawl on the local stack and uses ports 8480/8553, like bench-crawl;
# HEAVY_LOCK=/tmp/streamcrawl-heavy.lock takes that lock for each crawl, not between them.
bench-refresh-split: stack-up
	$(VPY) bench/refresh_split.py --shares 0.3 0.5 --duration 90 $(if $(HEAVY_LOCK),--lock $(HEAVY_LOCK),) \
	  --out docs/benchmarks-refresh-split.md

# The frontier's memory with 10M queued URLs over 1M hosts, and the near-duplicate index's rows per query at
# 10^6 and 10^7 fingerprints (docs/benchmarks-scale.md); no stack needed.
bench-memory: venv
	$(VPY) bench/frontier_memory.py --hosts 1000000 --per-host 10 --fetches 200000
	$(VPY) bench/neardup_rows.py --sizes 1000000 10000000
	$(VPY) bench/bloom_sizing.py --partitions 64

# Whole crawl vs Scrapy on 2,000 synthetic hosts (docs/benchmarks-crawl.md). Resets the crawl's topics,
# tables and bucket on the local stack, and uses ports 8480/8553: run it when no other crawl uses them.
bench-crawl: stack-up
	$(VPY) -m pip install -q -r requirements-bench.txt
	$(VPY) bench/crawl_bench.py --hosts 2000 --duration 240 --out docs/benchmarks-crawl.md
	$(VPY) bench/crawl_bench.py --hosts 10 --profile deep --duration 300 --out docs/benchmarks-crawl-bound.md
	$(VPY) bench/crawl_bench.py --hosts 100 --profile polite --duration 240 --until-coverage \
	  --out docs/benchmarks-crawl-polite.md

# pywb over our WARC/CDXJ output (README "WARC files"): pywb is not a dependency of streamcrawl; the script
# keeps it in a venv of its own beside the engines, built on first use with the pins it names (pywb 2.10.0,
# brotlipy 0.7.0). It replays the bucket's files (the last crawl's), or with PYWB_ARGS=--crawl those of a
# 60-host crawl it runs first (that resets the crawl's topics, tables and bucket, like the e2e tests).
PYWB_ARGS ?=
pywb-check: venv
	$(VPY) bench/pywb_replay.py --pywb-venv $(STACK_DIR)/pywb-2.10.0 $(PYWB_ARGS)

# Engine faults freeze and restart engines: bench-faults and chaos run on a stack of their own (.stack-faults,
# other ports; fetched and started here, left running: `make fault-stack-down` stops it), never on one that
# others share. `make test-faults` runs the engine-fault e2e tests (tests/e2e/test_engine_faults_e2e.py; they
# run only with STREAMCRAWL_ENGINE_FAULTS=1) alone on that stack; `make test` runs both last on
# one of its own (test-faults-ci).
FAULT_ENV := STREAMCRAWL_STACK_DIR=$(abspath .stack-faults) STREAMCRAWL_KAFKA_PORT=29092 \
  STREAMCRAWL_KAFKA_CONTROLLER_PORT=29093 STREAMCRAWL_CASSANDRA_PORT=29042 STREAMCRAWL_CASSANDRA_STORAGE_PORT=27000 \
  STREAMCRAWL_S3_PORT=29000 STREAMCRAWL_KAFKA_BOOTSTRAP=127.0.0.1:29092 STREAMCRAWL_S3_ENDPOINT=127.0.0.1:29000

test-faults: venv
	$(FAULT_ENV) $(STACK) up
	$(FAULT_ENV) STREAMCRAWL_ENGINE_FAULTS=1 $(VPY) -m pytest tests/e2e/test_engine_faults_e2e.py -q -s

bench-faults: venv
	$(FAULT_ENV) $(STACK) up
	$(FAULT_ENV) $(VPY) bench/engine_faults.py --hosts 100 --freeze 30 --repeats 1 --out docs/benchmarks-faults.md

chaos: venv
	$(FAULT_ENV) $(STACK) up
	$(FAULT_ENV) $(VPY) bench/chaos.py --minutes 5 --every 15 --out docs/benchmarks-chaos.md

fault-stack-down:
	$(FAULT_ENV) $(STACK) down

# The engine-fault e2e tests: the freezes and the restarts (~6 min with the stack's start and stop; `make test`
# runs both: the freeze test's worst wait after a Kafka freeze was 6.4-15.7 s over 5 runs on 2026-12-04,
# against a limit of 30 s; docs/STATUS.md). They freeze and restart engines, so never on the
# stack the other tests used (which may be shared): on one started here (.stack-faults-ci; ports 28xxx, clear
# of the local stack's 19xxx, make test-faults' 29xxx and the 3-node profile's 39xxx), seeded with the local
# stack's fetched engines (hard links: no download), stopped afterwards whatever the outcome (.ci/run too).
# FAULT_TESTS="-k restarts" (or "-k freezes") runs one of them.
FAULT_TESTS ?=
CI_FAULT_DIR := $(abspath .stack-faults-ci)
CI_FAULT_ENV := STREAMCRAWL_STACK_DIR=$(CI_FAULT_DIR) STREAMCRAWL_KAFKA_PORT=28092 \
  STREAMCRAWL_KAFKA_CONTROLLER_PORT=28093 STREAMCRAWL_CASSANDRA_PORT=28042 STREAMCRAWL_CASSANDRA_STORAGE_PORT=28700 \
  STREAMCRAWL_S3_PORT=28000 STREAMCRAWL_KAFKA_BOOTSTRAP=127.0.0.1:28092 STREAMCRAWL_S3_ENDPOINT=127.0.0.1:28000

test-faults-ci: venv
	$(STACK) fetch
	@for e in kafka cassandra; do test -f $(CI_FAULT_DIR)/$$e/.fetched || { mkdir -p $(CI_FAULT_DIR)/$$e && \
	  { cp -al $(STACK_DIR)/$$e/lib $(CI_FAULT_DIR)/$$e/ 2>/dev/null || cp -a $(STACK_DIR)/$$e/lib $(CI_FAULT_DIR)/$$e/; } && \
	  cp $(STACK_DIR)/$$e/.fetched $(CI_FAULT_DIR)/$$e/; }; done
	@test -f $(CI_FAULT_DIR)/bin/.versitygw || { mkdir -p $(CI_FAULT_DIR)/bin && \
	  { ln -f $(STACK_DIR)/bin/versitygw $(CI_FAULT_DIR)/bin/ 2>/dev/null || cp -a $(STACK_DIR)/bin/versitygw $(CI_FAULT_DIR)/bin/; } && \
	  cp $(STACK_DIR)/bin/.versitygw $(CI_FAULT_DIR)/bin/; }
	$(CI_FAULT_ENV) $(STACK) up
	$(CI_FAULT_ENV) STREAMCRAWL_ENGINE_FAULTS=1 $(VPY) -m pytest tests/e2e/test_engine_faults_e2e.py -q -s \
	  $(FAULT_TESTS); rc=$$?; $(CI_FAULT_ENV) $(STACK) down; exit $$rc

test-faults-ci-down:
	@if [ -x $(VPY) ]; then $(CI_FAULT_ENV) $(STACK) down; else $(CI_FAULT_ENV) $(PY) stack/stackctl.py down; fi

# A busy run loop's own cost while its records wait (the poll-and-sleep cycle of before against the blocking poll).
bench-loop-busy: stack-up
	$(VPY) bench/loop_busy.py --seconds 20 --repeats 3 --out docs/benchmarks-loop-busy.md

# What a crawl with nothing to fetch costs: the five services, no seeds, 60 s (docs/benchmarks-idle.md).
bench-idle: stack-up
	$(VPY) bench/idle_cost.py --duration 60 --repeats 3 --out docs/benchmarks-idle.md

clean: stack-down
	rm -rf $(VENV) .stack
