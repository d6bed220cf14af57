# The two commands of the README:
#   make demo   set up, build the offline model, run the local cluster, ingest, search
#   make test   set up, lint, run every test
.PHONY: setup model demo up test lint protos clean

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

lint: setup
	$(VENV)/ruff check .
	$(VENV)/mypy libs/core/src/groundwire_core services/*/src cli/src

test: lint
	$(VENV)/pytest

protos: setup
	PYTHON=$(VENV)/python scripts/gen_protos.sh

clean:
	rm -rf var .pytest_cache .mypy_cache .ruff_cache
