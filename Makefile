# The two front-door commands (README): `make demo` and `make test`. Both set up .venv first.
VENV := .venv/bin

.PHONY: setup demo quick test test-fast lint format bench

setup:
	@bash scripts/setup.sh

demo: setup
	$(VENV)/ralm demo

quick: setup
	$(VENV)/ralm demo --quick

# Fast tests plus the slow ones on real offline weights (what CI runs).
test: setup
	$(VENV)/python -m pytest -m "slow or not slow" -q

test-fast: setup
	$(VENV)/python -m pytest -q

lint: setup
	$(VENV)/ruff check . && $(VENV)/ruff format --check .

format: setup
	$(VENV)/ruff format . && $(VENV)/ruff check --fix .

# The benches take minutes each and most need inputs (a run folder, a GGUF LM): `make bench` only lists them
# with their first docstring line; run one as its docstring shows and record it in bench/RESULTS.md.
bench:
	@for f in bench/*.py; do printf '%-26s %s\n' "$$f" "$$(head -n 1 "$$f" | sed 's/^"""//')"; done
	@printf '%-26s %s\n' bench/gpu_check.sh "$$(sed -n 2p bench/gpu_check.sh | sed 's/^# //')"
