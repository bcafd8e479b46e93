"""The exported reranker: loads without Lightning, scores like a plain per-pair forward, refuses foreign
folders."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from ralm.errors import RalmInputError
from ralm.rerank.inference import PredictiveReranker
from tests.rerank_fixtures import fit_tiny_reranker, keyword_dataset


@pytest.fixture(scope="module")
def exported(tmp_path_factory, real_documents, tiny_encoder_dir) -> Path:
    root = tmp_path_factory.mktemp("export")
    data = keyword_dataset(real_documents, root / "data", 40, k=3, seed=5)
    summary = fit_tiny_reranker(data, root / "out", tiny_encoder_dir, max_steps=3)
    return Path(summary["reranker"])


def test_scores_match_a_plain_forward_of_each_pair(exported):
    reranker = PredictiveReranker.from_pretrained(exported, batch_size=3)
    assert (reranker.max_length, reranker.max_prefix_tokens, reranker.abstain) == (40, 12, False)
    prefixes = [
        "the module provides functions for " * 6 + "pickle",
        "short prefix",
        "another one about sockets",
    ]
    candidates = [["pickle protocol details", "", "socket options " * 30], ["x"], []]
    got = reranker.score(prefixes, candidates)
    assert [len(g) for g in got] == [3, 1, 0]
    # reference: the HF folder loaded directly, one unpadded pair at a time, prefix cut by hand to 12 tokens
    tokenizer = AutoTokenizer.from_pretrained(exported)
    model = AutoModelForSequenceClassification.from_pretrained(exported).eval()
    for prefix, group, scores in zip(prefixes, candidates, got, strict=True):
        enc = tokenizer(prefix, add_special_tokens=False, return_offsets_mapping=True)
        offsets = enc["offset_mapping"]
        tail = prefix[offsets[-12][0] :] if len(offsets) > 12 else prefix
        for passage, score in zip(group, scores, strict=True):
            pair = tokenizer(tail, passage, truncation="only_second", max_length=40, return_tensors="pt")
            with torch.no_grad():
                expected = model(**pair).logits.item()
            assert score == pytest.approx(expected, abs=1e-5)
    assert reranker.best(prefixes[0], candidates[0]) == max(range(3), key=got[0].__getitem__)


def test_foreign_folders_are_refused(tmp_path, exported, tiny_encoder_dir):
    with pytest.raises(RalmInputError, match="not an exported reranker"):
        PredictiveReranker.from_pretrained(tiny_encoder_dir)
    with pytest.raises(RalmInputError, match="no such reranker folder"):
        PredictiveReranker.from_pretrained(tmp_path / "missing")
    broken = tmp_path / "broken"
    shutil.copytree(exported, broken)
    info = json.loads((broken / "ralm_reranker.json").read_text())
    (broken / "ralm_reranker.json").write_text(json.dumps({**info, "format": "ralm-reranker/0"}))
    with pytest.raises(RalmInputError, match="field 'format'"):
        PredictiveReranker.from_pretrained(broken)


def _imports(module: str) -> set[str]:
    """Every module `module` imports, following ralm's own modules (and their packages) transitively."""
    import ast
    import importlib.util

    seen, todo, external = set(), [module], set()
    while todo:
        name = todo.pop()
        parts = name.split(".")
        for package in (".".join(parts[:i]) for i in range(1, len(parts) + 1)):
            if package in seen:
                continue
            seen.add(package)
            tree = ast.parse(Path(importlib.util.find_spec(package).origin).read_text())
            for node in ast.walk(tree):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
                if isinstance(node, ast.ImportFrom) and node.module:
                    names = [node.module]
                for imported in names:
                    if imported.split(".")[0] == "ralm":
                        todo.append(imported)
                    else:
                        external.add(imported.split(".")[0])
    return external | seen


def test_inference_imports_no_lightning():
    """eval loads rerankers through this module; nothing it imports, directly or through ralm, is
    Lightning."""
    imported = _imports("ralm.rerank.inference")
    assert "transformers" in imported and "ralm.rerank.inputs" in imported  # the walk does follow imports
    assert not imported & {"lightning", "pytorch_lightning", "ralm.train.lit_module", "ralm.train.fit"}
