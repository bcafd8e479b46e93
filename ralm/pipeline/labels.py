"""The conditions of the demo's ``ralm eval ppl --compare`` table and the words the report gives them."""

from __future__ import annotations

from ralm.pipeline.verdicts import TRAINED_PREFIX

BASELINES = (
    "no-retrieval",
    "no-retrieval-matched",
    "bm25",
    "random",
    "zero-shot",
    "oracle",
    "oracle-or-none",
)
"""The built-in conditions of the demo's one `ralm eval ppl --compare` table (trained ones go between)."""
UPPER_BOUNDS = ("oracle", "oracle-or-none")
"""Conditions that read the true targets: bounds, not methods."""
LABELS = {
    "no-retrieval": "no retrieval",
    "no-retrieval-matched": "no retrieval, context cut as BM25's passage cuts it",
    "bm25": "BM25 top-1",
    "random": "random of BM25 top-k",
    "zero-shot": "zero-shot LM rerank",
    "bm25-above": "BM25 top-1 if its score >= T",
    "oracle": "bound: best of k",
    "oracle-or-none": "bound: best of k or none",
}


def label(name: str, metrics: dict | None = None) -> str:
    if name.startswith(TRAINED_PREFIX):
        return f"trained reranker, seed {name.removeprefix(TRAINED_PREFIX)}"
    if name == "bm25-above" and metrics and metrics.get("rule"):
        return f"BM25 top-1 if score >= {float(metrics['rule']):.1f}"
    return LABELS.get(name, name)
