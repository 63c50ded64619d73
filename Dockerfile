# One image for every streamcrawl service and the provisioning one-shot; the command picks the service
# (streamcrawl-frontier, -fetcher, -parser, -dedup, -recrawl, -control, or
# `python -m streamcrawl_runtime.provision`). Used by docker-compose.yml and the Helm chart.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    STREAMCRAWL_MIGRATIONS_DIR=/app/schemas/cql

WORKDIR /app

# Dependencies first (pinned), so code changes do not reinstall them.
COPY requirements.txt ./
RUN pip install -r requirements.txt

COPY pyproject.toml README.md ./
COPY libs ./libs
COPY services ./services
COPY schemas ./schemas
RUN pip install --no-deps . \
    && rm -rf build ./*.egg-info \
    && groupadd --system --gid 10001 streamcrawl \
    && useradd --system --uid 10001 --gid 10001 --no-create-home --shell /usr/sbin/nologin streamcrawl

USER 10001:10001
CMD ["streamcrawl-control"]
