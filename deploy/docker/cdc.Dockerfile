# The service image: the `cdc` command (pipeline + dumper, `cdc check`, `verify-binlog`, the
# reference CN's `cdc cn` and `cdc workload` for the demo). Built by `make images` from the
# repository root (it first fetches the dependency wheels into var/docker/wheels; .dockerignore
# sends only the packages, those wheels and the entry point).
# Config: a cdc.toml mounted at /etc/cdc/cdc.toml, or CDC_* environment variables
# (deploy/docker/cdc-entrypoint.py; docs/deploy.md, "Containers"). State: the volume /var/lib/cdc.
# Two layers only (one COPY, one RUN): the engine CI runs stores each layer as a full copy (vfs).
ARG BASE=debian:bookworm-slim
FROM ${BASE}
# Three layers: the dependencies' wheels, the venv and user (both kept in the build cache while
# the wheels are the same), then the source, the only layer a change of the code rebuilds. The
# engine CI runs stores every layer as a full copy (vfs): each one costs seconds.
COPY var/docker/wheels /tmp/wheels
# A pulled debian:bookworm-slim lacks python3-venv; the base `make base-image` makes where no
# registry answers has it already (its containers cannot reach the mirror): no apt-get there.
RUN set -e; \
    if ! python3 -c 'import ensurepip' 2>/dev/null || ! command -v pkill >/dev/null; then \
      apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        python3 python3-venv procps ca-certificates && rm -rf /var/lib/apt/lists/*; \
    fi; \
    python3 -m venv /opt/cdc/venv; \
    /opt/cdc/venv/bin/pip install -q --no-index --no-cache-dir --disable-pip-version-check /tmp/wheels/*.whl; \
    rm -rf /tmp/wheels; \
    printf '#!/bin/sh\nexec /opt/cdc/venv/bin/python -m cdc_cli.main "$@"\n' > /usr/local/bin/cdc; \
    printf '#!/bin/sh\nexec /opt/cdc/venv/bin/python /opt/cdc/src/deploy/docker/cdc-entrypoint.py "$@"\n' > /usr/local/bin/cdc-entrypoint; \
    chmod 755 /usr/local/bin/cdc /usr/local/bin/cdc-entrypoint; \
    useradd --uid 10001 --no-create-home --home-dir /var/lib/cdc --shell /usr/sbin/nologin cdc; \
    mkdir -p /var/lib/cdc /var/lib/cdc-shared /etc/cdc; chown cdc:cdc /var/lib/cdc /var/lib/cdc-shared
# The project as source (with the hot loops `make compiled` built in place, if any).
COPY . /opt/cdc/src/
ENV PYTHONPATH=/opt/cdc/src PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
USER cdc
WORKDIR /var/lib/cdc
VOLUME /var/lib/cdc
EXPOSE 3307
LABEL org.cdc.project="global-binlog" org.opencontainers.image.title="cdc"
# SIGTERM: the supervisor stops the service, which closes the binlog cleanly.
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=2s --timeout=5s --start-period=60s --retries=5 CMD ["cdc-entrypoint", "health"]
ENTRYPOINT ["cdc-entrypoint"]
CMD ["serve"]
