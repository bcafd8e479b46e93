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
