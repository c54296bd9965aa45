#!/usr/bin/env bash
# `make images`: the dependency wheels, then both images at once (the base must exist: `make
# base-image`). Tags: cdc:dev and cdc-mariadb:dev (docker-compose.yml's defaults). A second
# build reuses the engine's layer cache: only the source layer of cdc:dev is made again.
set -euo pipefail
cd "$(dirname "$0")/../.."
t0=$(date +%s)
deploy/docker/wheels.sh >/dev/null
t1=$(date +%s)
log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT
docker build -q -t cdc-mariadb:dev deploy/docker/mariadb >"$log/mariadb" 2>&1 & mariadb=$!
docker build -q -t cdc:dev -f deploy/docker/cdc.Dockerfile . >"$log/cdc" 2>&1 & cdc=$!
status=0
wait $mariadb || { echo "images: cdc-mariadb:dev failed:" >&2; grep -v -i "deprecated\|buildx\|^ *$" "$log/mariadb" >&2; status=1; }
wait $cdc || { echo "images: cdc:dev failed:" >&2; grep -v -i "deprecated\|buildx\|^ *$" "$log/cdc" >&2; status=1; }
t2=$(date +%s)
[ $status = 0 ] && echo "images: cdc:dev and cdc-mariadb:dev built (wheels $((t1 - t0))s, images $((t2 - t1))s)"
exit $status
