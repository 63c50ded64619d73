# syntax=docker/dockerfile:1
# One image for every streamcrawl service and the provisioning one-shot. The command picks the service:
# streamcrawl-frontier, -fetcher, -parser, -dedup, -recrawl, -control, or streamcrawl-provision (or
# `streamcrawl service NAME`). Used by docker-compose.yml and the Helm chart (which sets `command`).
#
# Two stages: the builder turns the pinned requirements and the project into wheels and installs them
# into a virtualenv; the runtime stage copies only that virtualenv onto a clean base. It runs as a
# non-root user and writes nothing outside /tmp, so it works with a read-only root filesystem (the chart
# mounts an emptyDir on /tmp). Build: `make image` (buildah) or `docker build -t streamcrawl:0.1.0 .`
ARG PYTHON_IMAGE=python:3.11-slim-bookworm
# The optional compiled core (native/, Rust >= 1.85) is built in a stage of its own on the same Debian
# release (the slim rust image has the linker; bookworm's python3 is 3.11, the runtime's ABI).
ARG RUST_IMAGE=rust:1.95-slim-bookworm

FROM ${RUST_IMAGE} AS native
# hadolint ignore=DL3008
RUN apt-get update && apt-get install -y --no-install-recommends python3 python3-venv \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY native ./native
# If the build fails the image still builds and works: the core then runs its pure-Python code (same
# results, slower), and says so once at start-up.
RUN python3 -m venv /tmp/maturin && /tmp/maturin/bin/pip install --no-cache-dir maturin==1.16.0 \
    && mkdir -p /native \
    && { /tmp/maturin/bin/maturin build --release -m native/Cargo.toml -i python3 -o /native \
         || echo "streamcrawl_native not built: the image runs the pure-Python core"; }

FROM ${PYTHON_IMAGE} AS builder
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
# Dependencies first (pinned), so a code change does not rebuild them.
COPY requirements.txt ./
RUN pip wheel --no-cache-dir --wheel-dir /wheels -r requirements.txt
COPY pyproject.toml setup.py MANIFEST.in README.md ./
COPY libs ./libs
COPY services ./services
COPY schemas ./schemas
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /wheels . \
    && python -m venv /opt/streamcrawl \
    && /opt/streamcrawl/bin/pip install --no-cache-dir --no-index --find-links /wheels \
         -r requirements.txt /wheels/streamcrawl-*.whl \
    && /opt/streamcrawl/bin/pip check
# The compiled hot paths of the core (3-9x faster normalize, SimHash, Bloom probes), when the stage built them.
COPY --from=native /native /native
RUN for w in /native/*.whl; do [ -e "$w" ] && /opt/streamcrawl/bin/pip install --no-cache-dir --no-deps "$w"; done; true

FROM ${PYTHON_IMAGE}
ENV PATH=/opt/streamcrawl/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp \
    TMPDIR=/tmp
RUN groupadd --system --gid 10001 streamcrawl \
    && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /tmp \
         --shell /usr/sbin/nologin streamcrawl
COPY --from=builder /opt/streamcrawl /opt/streamcrawl
WORKDIR /tmp
USER 10001:10001
# Metrics, /healthz and /readyz of frontier, fetcher, parser, dedup, recrawl; the control plane's HTTP port.
EXPOSE 9101 9102 9103 9104 9105 8080
CMD ["streamcrawl", "--help"]
