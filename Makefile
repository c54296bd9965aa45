# Two commands matter: `make demo` and `make test`. Both run `make setup` first, which installs
# what is missing (Debian packages, the venv, the project) and is quiet when everything is there.
SHELL := /bin/bash
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO_DIR ?= var/demo
APT_PACKAGES := mariadb-server mariadb-client
NODE_DIR := tests/compat/node
NODE_STAMP := $(NODE_DIR)/node_modules/.package-lock.json

.PHONY: apt node setup demo stop test test-fast fuzz lint bench clean

setup: apt $(STAMP) node

# Debian packages: installed only when a binary is missing (root on Debian 12 is assumed).
apt:
	@if ! command -v mariadbd >/dev/null 2>&1 && [ ! -x /usr/sbin/mariadbd ] || ! command -v mariadb-binlog >/dev/null 2>&1; then \
		echo "setup: installing $(APT_PACKAGES)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(APT_PACKAGES) >/dev/null; \
	fi
	@if ! command -v java >/dev/null 2>&1 || [ ! -f /usr/share/java/mariadb-java-client.jar ]; then \
		echo "setup: installing a JRE and MariaDB Connector/J (for the Spark backfill)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq default-jre-headless libmariadb-java >/dev/null; \
	fi

# zongji (a Node binlog consumer) for tests/compat, pinned by package-lock.json; only where
# npm exists (the zongji test skips otherwise). npm ci rewrites node_modules/.package-lock.json.
node:
	@if command -v npm >/dev/null 2>&1 && { [ ! -f $(NODE_STAMP) ] || [ $(NODE_DIR)/package-lock.json -nt $(NODE_STAMP) ]; }; then \
		echo "setup: installing zongji into $(NODE_DIR)/node_modules"; \
		npm ci --prefix $(NODE_DIR) --no-audit --no-fund --loglevel=error >/dev/null; \
	fi

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	@$(BIN)/pip install -q --disable-pip-version-check -e '.[test,spark]'
	@touch $@

demo: setup
	$(BIN)/cdc demo --dir $(DEMO_DIR)

stop:
	@if [ -x $(BIN)/cdc ] && [ -f $(DEMO_DIR)/cdc.toml ]; then $(BIN)/cdc stop --config $(DEMO_DIR)/cdc.toml; fi
	@if [ -x $(BIN)/cdc ]; then $(BIN)/cdc cluster down --dir $(DEMO_DIR); fi

test: setup
	$(BIN)/python -m pytest -q -ra

test-fast: setup
	$(BIN)/python -m pytest -q -ra -m "not slow"

# The long fuzz run (issue 10): dumper packet parsing and the binlog codec, FUZZ_EXAMPLES
# hypothesis examples per test (`make test` runs a few hundred); prints RSS before/after.
FUZZ_EXAMPLES ?= 100000
fuzz: setup
	CDC_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(BIN)/python -m pytest -q -s -p no:cacheprovider \
		--timeout=0 tests/dumper/test_fuzz.py tests/cdc/binlog/test_fuzz.py

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

bench: setup
	$(BIN)/cdc bench all

clean: stop
	rm -rf $(VENV) var $(NODE_DIR)/node_modules
