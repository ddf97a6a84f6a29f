# Everything runs inside .venv, created on first use from the package registries.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test bench docs clean

$(STAMP): pyproject.toml
	@echo "creating $(VENV) and installing gpustack-render with its test tools" >&2
	@$(PYTHON) -m venv $(VENV)
	@$(BIN)/python -m pip install --quiet --upgrade pip >&2
	@$(BIN)/python -m pip install --quiet -e '.[test]' >&2
	@touch $(STAMP)

# stdout carries only the rendered YAML stream
run: $(STAMP)
	@$(BIN)/gpustack-render render fixtures/demo

test: $(STAMP)
	@start=$$(date +%s); env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m mypy && \
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest -q -n auto --dist worksteal --durations=10; status=$$?; \
	echo "make test: $$(( $$(date +%s) - start )) s"; exit $$status

# docs/rules.md and docs/inputs.md are generated from real runs; tests/test_docs.py and
# tests/test_inputs_doc.py fail when they are stale
docs: $(STAMP)
	$(BIN)/python docs/tools/build_rules_md.py
	$(BIN)/python docs/tools/build_inputs_md.py

bench: $(STAMP)
	$(BIN)/python tests/bench/bench.py

clean:
	rm -rf $(VENV) build dist *.egg-info
