"""``ralm_reranker.json`` as a typed record: every decision's export is byte-identical to the dict the
export wrote before the record existed, reads back to the same bytes, and a wrong field is refused naming
the file and the field."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch

from ralm import __version__
from ralm.errors import RalmInputError
from ralm.passage_rules import BM25, BM25_ABOVE, NO_RETRIEVAL, RULES, TRAINED, ZERO_SHOT, ZERO_SHOT_ABOVE
from ralm.rerank.export import export_reranker
from ralm.rerank.export_record import (
    DECISION_FIELDS,
    DECISIONS,
    RERANKER_FILE,
    BM25Prior,
    RecordError,
    RerankerExport,
)
from ralm.rerank.inference import PredictiveReranker
from ralm.rerank.inputs import INPUT_FORMAT, PRIOR_RULE
from ralm.train.lit_module import RerankerModule

TRAINED_ON = {"path": "/data", "format": "ralm-rerank-data/1", "lm": "tiny", "train_prefixes": 3}
EVIDENCE = {
    "rule": "a rule",
    "comparisons": {"x - y": {"difference": 0.25, "low": -0.1, "high": 0.6, "better": False}},
}


def _checkpoint(tmp_path: Path, encoder: Path, **module_args) -> tuple[Path, dict, dict]:
    """A checkpoint of a module whose scalars moved off their starting values: its path, its
    hyper-parameters and its state."""
    torch.manual_seed(2)
    module = RerankerModule(str(encoder), max_length=48, max_prefix_tokens=16, **module_args)
    with torch.no_grad():
        for name in ("prior_weight", "abstain_bias", "abstain_weight"):
            if getattr(module, name) is not None:
                getattr(module, name).add_(0.123456789)
    hparams = {**dict(module.hparams), "bm25_top_mean": 3.25, "bm25_top_std": 1.5}
    path = tmp_path / "best-step7.ckpt"
    torch.save({"state_dict": module.state_dict(), "hyper_parameters": hparams}, path)
    return path, hparams, module.state_dict()


def _as_written_before(hp: dict, state: dict, decision: str, checkpoint: str | None, **decided) -> str:
    """The record as the export built it by hand before the type existed (an independent reference)."""
    prior = None
    if hp.get("bm25_prior") and checkpoint is not None:
        prior = {"rule": PRIOR_RULE, "weight": float(state["prior_weight"])}
        if hp.get("abstain"):
            prior.update(
                abstain_bias=float(state["abstain_bias"]),
                abstain_weight=float(state["abstain_weight"]),
                bm25_top_mean=float(hp["bm25_top_mean"]),
                bm25_top_std=float(hp["bm25_top_std"]),
                anchor=hp.get("abstain_anchor", "zero"),
            )
    info = {
        "format": "ralm-reranker/1",
        "base_model": hp["encoder_name"],
        "max_length": hp["max_length"],
        "max_prefix_tokens": hp["max_prefix_tokens"],
        "input_format": INPUT_FORMAT,
        "abstain": bool(hp["abstain"]),
        "bm25_prior": prior,
        "decision": decision,
        **({"threshold": decided["threshold"]} if decision in (BM25_ABOVE, ZERO_SHOT_ABOVE) else {}),
        **({"rank_tokens": decided["rank_tokens"]} if decision in (ZERO_SHOT, ZERO_SHOT_ABOVE) else {}),
        "decision_evidence": EVIDENCE,
        "loss": hp["loss"],
        "trained_on": TRAINED_ON,
        "checkpoint": checkpoint,
        "metrics": {"best_val/gain_recovered": 0.5},
        "ralm_version": __version__,
    }
    return json.dumps(info, indent=2)


@pytest.mark.parametrize(
    ("decision", "module_args", "weights"),
    [
        (TRAINED, {"bm25_prior": True, "abstain": True, "abstain_anchor": "top"}, True),
        (TRAINED, {}, True),
        (BM25, {"bm25_prior": True}, True),
        (BM25_ABOVE, {"bm25_prior": True, "abstain": True}, True),
        (ZERO_SHOT, {"abstain": True}, True),
        (ZERO_SHOT_ABOVE, {"abstain": True}, True),
        (NO_RETRIEVAL, {"abstain": True}, False),
    ],
)
def test_each_decisions_record_is_written_as_before_and_reads_back_to_the_same_bytes(
    tmp_path, tiny_encoder_dir, decision, module_args, weights
):
    checkpoint, hp, state = _checkpoint(tmp_path, tiny_encoder_dir, **module_args)
    # Every decision is given both fields: only those its rule needs may be written.
    decided = {"threshold": 6.5, "rank_tokens": 8}
    folder = export_reranker(
        str(checkpoint) if weights else None,
        str(tmp_path / "export"),
        hyper_parameters=hp,
        trained_on=TRAINED_ON,
        metrics={"best_val/gain_recovered": 0.5},
        decision=decision,
        decision_evidence=EVIDENCE,
        **decided,
    )
    written = (Path(folder) / RERANKER_FILE).read_text()
    assert written == _as_written_before(hp, state, decision, checkpoint.name if weights else None, **decided)
    record = RerankerExport.read(folder)
    assert record.to_json() == written
    record.write(tmp_path)
    assert (tmp_path / RERANKER_FILE).read_bytes() == (Path(folder) / RERANKER_FILE).read_bytes()
    assert [key for key in DECISION_FIELDS if key in json.loads(written)] == [
        key for key in DECISION_FIELDS if key in RULES[decision].export.needs
    ]


def test_every_exportable_rule_is_a_decision_the_record_reads():
    assert set(DECISIONS) == {name for name, rule in RULES.items() if rule.export is not None}
    needs = {field for name in DECISIONS for field in RULES[name].export.needs}
    assert set(DECISION_FIELDS) <= needs  # each decision-only field belongs to a rule that needs it


def test_an_older_record_reads_with_its_missing_fields_defaulted(tmp_path):
    """Exports from before the decision, the prior and the anchor existed lack those keys."""
    old = {
        "format": "ralm-reranker/1",
        "base_model": "enc",
        "max_length": 64,
        "max_prefix_tokens": 32,
        "input_format": INPUT_FORMAT,
        "abstain": True,
        "bm25_prior": {
            "rule": PRIOR_RULE,
            "weight": 1,
            "abstain_bias": 0.5,
            "abstain_weight": -0.25,
            "bm25_top_mean": 3,
            "bm25_top_std": 2.0,
        },
        "loss": "marginal",
        "trained_on": {},
        "a_field_from_elsewhere": [1, 2],
    }
    (tmp_path / RERANKER_FILE).write_text(json.dumps(old))
    record = RerankerExport.read(tmp_path)
    assert (record.decision, record.threshold, record.rank_tokens) == (TRAINED, None, None)
    assert record.bm25_prior.anchor is None and "anchor" not in record.bm25_prior.to_dict()
    reranker = PredictiveReranker(None, None, record, torch.device("cpu"))
    assert reranker.anchor == "zero" and reranker.prior_weight == 1.0
    assert reranker.abstention == {
        "abstain_bias": 0.5,
        "abstain_weight": -0.25,
        "bm25_top_mean": 3.0,
        "bm25_top_std": 2.0,
    }


GOOD = {
    "format": "ralm-reranker/1",
    "base_model": "enc",
    "max_length": 64,
    "max_prefix_tokens": 32,
    "input_format": INPUT_FORMAT,
    "abstain": False,
    "bm25_prior": None,
    "decision": TRAINED,
}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"format": "ralm-reranker/0"}, "field 'format' is 'ralm-reranker/0', expected 'ralm-reranker/1'"),
        ({"format": None}, "field 'format' is None"),
        ({"input_format": "other"}, "field 'input_format' is 'other', this ralm reads"),
        ({"max_length": "64"}, "field 'max_length' must be an integer"),
        ({"max_prefix_tokens": None}, "field 'max_prefix_tokens' must be an integer"),
        ({"max_length": True}, "field 'max_length' must be an integer"),
        ({"abstain": "yes"}, "field 'abstain' must be true or false"),
        ({"bm25_prior": {"rule": "other", "weight": 1.0}}, "field 'bm25_prior' must be null or"),
        ({"bm25_prior": {"rule": PRIOR_RULE}}, "field 'bm25_prior' must be null or"),
        ({"bm25_prior": [1.0]}, "field 'bm25_prior' must be null or"),
        (
            {"abstain": True, "bm25_prior": {"rule": PRIOR_RULE, "weight": 1.0}},
            r"field 'bm25_prior.abstain_bias' must be a number \(abstain is true\)",
        ),
        (
            {"bm25_prior": {"rule": PRIOR_RULE, "weight": 1.0, "anchor": "middle"}},
            "field 'bm25_prior.anchor' is 'middle', expected one of",
        ),
        ({"decision": "best"}, "field 'decision' is 'best', expected one of"),
        ({"decision": None}, "field 'decision' is None"),
        ({"decision": BM25_ABOVE}, f"field 'threshold' must be a number \\(the decision is {BM25_ABOVE}\\)"),
        (
            {"decision": ZERO_SHOT, "rank_tokens": 0},
            f"field 'rank_tokens' must be a positive integer \\(the decision is {ZERO_SHOT}\\)",
        ),
    ],
)
def test_a_wrong_field_is_refused_naming_the_file_and_the_field(tmp_path, change, message):
    path = tmp_path / RERANKER_FILE
    record = {**GOOD, **change}
    path.write_text(json.dumps({k: v for k, v in record.items() if k != "format" or v is not None}))
    with pytest.raises(RalmInputError, match=f"^{re.escape(str(path))}: {message}"):
        RerankerExport.read(tmp_path)


def test_a_file_that_is_not_a_record_is_named(tmp_path):
    with pytest.raises(RalmInputError, match="no such reranker folder"):
        RerankerExport.read(tmp_path / "missing")
    with pytest.raises(RalmInputError, match=r"not an exported reranker \(no ralm_reranker.json"):
        RerankerExport.read(tmp_path)
    path = tmp_path / RERANKER_FILE
    path.write_text('{"format": "ralm-reranker/1",\n  oops}')
    with pytest.raises(RalmInputError, match=f"^{re.escape(str(path))}:2: not valid JSON"):
        RerankerExport.read(tmp_path)
    path.write_text("[1, 2]")
    with pytest.raises(RalmInputError, match=f"^{re.escape(str(path))}: not a JSON object"):
        RerankerExport.read(tmp_path)


def test_a_record_built_in_code_is_checked_as_a_file_is():
    with pytest.raises(RecordError, match="field 'rank_tokens' must be a positive integer"):
        RerankerExport(max_length=64, max_prefix_tokens=32, decision=ZERO_SHOT)
    with pytest.raises(RecordError, match="field 'bm25_prior.abstain_weight'"):
        RerankerExport(
            max_length=64,
            max_prefix_tokens=32,
            abstain=True,
            bm25_prior=BM25Prior(rule=PRIOR_RULE, weight=1.0, abstain_bias=0.0),
        )
    record = RerankerExport(max_length=64, max_prefix_tokens=32, decision=BM25_ABOVE, threshold=5)
    assert record.to_dict()["threshold"] == 5 and "rank_tokens" not in record.to_dict()
