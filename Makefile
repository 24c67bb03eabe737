# Each target does its own set-up, so `make serve` and `make test` work from a fresh clone.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
SAMPLE := data/sample
SAMPLE_INDEX := var/sample-index
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: setup serve test test-slow lint format bench sample-index clean

SUDO := $(shell [ "$$(id -u)" -eq 0 ] || echo sudo)

# llama-cpp-python ships only sources, and by default compiles llama.cpp for the CPU that builds
# it (-march=native); pip then caches that wheel under the same key for every build flag. Such
# a build segfaulted in its first decode on an AMX Xeon VM, and one made on another machine can
# use instructions this one lacks. So it is built portable (AVX2) once into a folder of our own
# and installed from there.
LLAMA_VERSION := $(shell sed -n 's/^llama_cpp_python==//p' requirements/constraints.txt)
LLAMA_WHEELS := $(HOME)/.cache/mmrag/wheels/llama-portable
LLAMA_WHEEL = $(wildcard $(LLAMA_WHEELS)/llama_cpp_python-$(LLAMA_VERSION)-*.whl)

# torch goes first and pinned: the CPU build on disk. Left to pip, a dependency's `torch>=…`
# would pull a newer release with GBs of CUDA wheels. torchvision is never installed on CPU.
# Debian's Chromium drives the chat page's browser test (Playwright never downloads a browser).
$(STAMP): pyproject.toml requirements/constraints.txt
	command -v chromium >/dev/null || ($(SUDO) apt-get update -qq && \
		$(SUDO) apt-get install -y -qq chromium)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q torch==2.13.0
	test -n "$(LLAMA_WHEEL)" || CMAKE_ARGS=-DGGML_NATIVE=OFF $(BIN)/python -m pip wheel -q \
		--no-cache-dir --no-deps -w $(LLAMA_WHEELS) llama-cpp-python==$(LLAMA_VERSION)
	$(BIN)/python -m pip install -q --no-deps \
		$(LLAMA_WHEELS)/llama_cpp_python-$(LLAMA_VERSION)-*.whl
	$(BIN)/python -m pip install -q -c requirements/constraints.txt -e '.[ml,eval,dev,ray]'
	# rapidocr pulls opencv-python, whose cv2 links X11/GL libraries a server may lack: the
	# headless build of the same version replaces its files.
	$(BIN)/python -m pip install -q -c requirements/constraints.txt --no-deps --force-reinstall \
		opencv-python-headless
	touch $@

setup: $(STAMP)

# BM25 + the packaged MiniLM over captions, snippets and the text PP-OCR reads in the images,
# score calibration fitted on the sample's train split.
$(SAMPLE_INDEX)/manifest.json: $(STAMP) $(SAMPLE)/WebQA_sample.json $(SAMPLE)/imgs.tsv
	$(BIN)/mmrag index build --corpus $(SAMPLE)/WebQA_sample.json --images $(SAMPLE)/imgs.tsv \
		--out $(SAMPLE_INDEX) --ocr
	$(BIN)/mmrag retrieval calibrate --index $(SAMPLE_INDEX) --questions $(SAMPLE)/WebQA_sample.json

sample-index: $(SAMPLE_INDEX)/manifest.json

serve: $(SAMPLE_INDEX)/manifest.json
	$(BIN)/mmrag serve --index $(SAMPLE_INDEX) --host $(HOST) --port $(PORT)

# One pytest-xdist worker per core (at most 4): tests/conftest.py builds what they share once.
test: $(STAMP)
	$(BIN)/python -m pytest -n auto --maxprocesses 4 --dist loadgroup --durations 30

test-slow: $(STAMP)
	$(BIN)/python -m pytest -m slow

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/hadolint docker/Dockerfile.*

format: $(STAMP)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

bench: $(STAMP)
	$(BIN)/python -m bench.bm25 --n 100000

clean:
	rm -rf var .pytest_cache .ruff_cache
