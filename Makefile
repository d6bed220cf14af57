# The two commands of the README:
#   make demo   set up, build the offline model, run the local cluster, ingest, search
#   make test   set up, lint, run every test
.PHONY: setup system-deps model demo up install-cli test lint protos openapi docs clean deploy-test

VENV := .venv/bin
MODEL := var/models/minilm

setup:
	@scripts/setup.sh

$(MODEL)/groundwire-model.json: | setup
	$(VENV)/groundwire models build minilm --out $(MODEL)

model: setup $(MODEL)/groundwire-model.json

demo: model
	$(VENV)/groundwire demo

up: model
	$(VENV)/groundwire up

# `groundwire` on the PATH, for every folder: a link to the checkout's command in
# ~/.local/bin (BIN=DIR to choose another folder); says how when BIN is not on the PATH
BIN ?= $(HOME)/.local/bin
install-cli: setup
	@mkdir -p "$(BIN)"
	@ln -sf "$(CURDIR)/$(VENV)/groundwire" "$(BIN)/groundwire"
	@echo "linked $(BIN)/groundwire -> $(CURDIR)/$(VENV)/groundwire"
	@case ":$$PATH:" in *":$(BIN):"*) ;; *) echo "$(BIN) is not on your PATH: run  export PATH=\"$(BIN):\$$PATH\"  (and add it to your shell's profile)";; esac

# redis-server and chromium: the tests drive them for real (apt, as root or via sudo)
system-deps:
	@bash scripts/ci_system_deps.sh

lint: setup
	$(VENV)/ruff check .
	$(VENV)/mypy libs/core/src/groundwire_core services/*/src cli/src clients/python/src

# The suite in TEST_WORKERS processes (pytest-xdist), a test file's tests in one of
# them (their module fixtures start servers once): 1348 s in one process, 890 s in two,
# on the 2-core CI machines (2026-11-28). TEST_WORKERS=0: one process.
TEST_WORKERS ?= 2

test: system-deps lint
	$(VENV)/pytest -n $(TEST_WORKERS) --dist loadfile

protos: setup
	PYTHON=$(VENV)/python scripts/gen_protos.sh

openapi: setup
	$(VENV)/python -m groundwire_gateway.openapi

# docs/settings.md from the settings classes' descriptions (a test fails while it is stale)
docs: setup
	$(VENV)/python -m groundwire_cli.settings_doc

# The images, the compose stack (journey + faults) and the Kubernetes pods, for real with
# podman (tests/deploy/run.sh; ../shared/tools/containers-here.sh sets podman up here)
deploy-test: setup
	@bash tests/deploy/run.sh

clean:
	rm -rf var .pytest_cache .mypy_cache .ruff_cache
