# The README's two commands are `make book` (the main job) and `make test` (the tests).
# Both install into .venv first (idempotent; see scripts/install.sh).
PRESET ?= cpu
SEEDS ?=
JOBS ?=
# minutes the main job may take on this machine (runs that would not fit are read from records)
BUDGET ?=
GTALIB := .venv/bin/gtalib

.PHONY: install book test gpu-check clean-book

install:
	bash scripts/install.sh

book: install
	$(GTALIB) book --preset $(PRESET) $(if $(SEEDS),--seeds $(SEEDS)) $(if $(JOBS),--jobs $(JOBS)) $(if $(BUDGET),--budget $(BUDGET))

test: install
	bash scripts/test.sh

gpu-check: install
	bash scripts/gpu_check.sh $${OUT:-benchmarks/gpu}

clean-book:
	rm -rf book/_build book/generated
