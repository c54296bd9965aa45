#!/usr/bin/env bash
# The wheels of the project's runtime dependencies the service image installs (`make images`),
# as binary wheels for the image's Python (Debian 12's 3.11): containers cannot reach a package
# index on CI's machines, so the image build only copies them (deploy/docker/cdc.Dockerfile).
# The project itself is copied as source, with the hot loops `make compiled` built in place when
# this checkout's Python is a 3.11 too (else the image runs them as plain Python).
set -euo pipefail
cd "$(dirname "$0")/../.."
PYTHON=${PYTHON:-.venv/bin/python}
OUT=var/docker/wheels
rm -rf "$OUT" && mkdir -p "$OUT"
# Only the runtime dependencies (pyproject's [project] dependencies), for CPython 3.11 on x86-64.
# And mysql-replication (the test extra's): `cdc verify-binlog` reads the binlog back with it.
deps=$("$PYTHON" -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml","rb"))["project"]["dependencies"]))')
deps="$deps
mysql-replication>=1.0.9"
# shellcheck disable=SC2086
"$PYTHON" -m pip download -q --disable-pip-version-check --only-binary=:all: \
	--python-version 3.11 --implementation cp --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
	-d "$OUT" $(echo "$deps" | tr '\n' ' ')
ls "$OUT"
