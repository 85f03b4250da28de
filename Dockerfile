# difflow: the server with its embedded engine and a local Spark (Java 17 for PySpark).
# Debian 12 (bookworm) pinned: it ships openjdk-17; later Debian releases may not.
FROM python:3.11-slim-bookworm

RUN apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless procps \
    && rm -rf /var/lib/apt/lists/*

ENV PYTHONUNBUFFERED=1 \
    DIFFLOW_HOST=0.0.0.0 \
    DIFFLOW_PORT=8000 \
    DIFFLOW_DATA_DIR=/data

WORKDIR /app
COPY pyproject.toml README.md ./
COPY engine ./engine
COPY service ./service
COPY api ./api
COPY clients ./clients
COPY bench ./bench
RUN pip install --no-cache-dir . \
    && python -c "import engine, service, api, clients" \
    && difflow warmup

VOLUME ["/data"]
EXPOSE 8000
HEALTHCHECK --interval=10s --timeout=3s CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz')"
CMD ["difflow", "serve"]
