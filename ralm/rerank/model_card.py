"""The exported reranker's model card (``README.md`` with Hugging Face hub metadata) and its checks.

Written by the export from ``ralm_reranker.json`` alone, so it always says what the folder holds: the
base encoder, the LM that labelled the data and how much data, the loss, the validation numbers and the
export decision with its evidence, the BM25-prior formula and weight, and how to use it with and
without ralm. ``check_model_card`` is what ``push_reranker`` runs before any upload.
"""

from __future__ import annotations

import json
from pathlib import Path

from ralm.errors import RalmInputError
from ralm.passage_rules import RULES, TRAINED
from ralm.rerank.cross_encoder_files import MODULE_FILES

CARD = "README.md"
REQUIRED_METADATA = ("library_name", "pipeline_tag", "base_model", "tags")
DECISION_NOTES = {name: rule.export.note for name, rule in RULES.items() if rule.export and rule.export.note}
"""What an export whose decision is not the trained model says first (the card) and refuses with
(sentence-transformers' input module; ``PredictiveReranker.score`` of a folder without weights)."""


def _fmt(value) -> str:
    return f"{value:.4f}" if isinstance(value, float) else str(value)


def hub_base_model(base: str) -> str | None:
    """The hub id of the encoder: `base` itself when it is one, else a local folder's recorded origin
    (``_name_or_path`` in its config.json, when that is an ``owner/name`` id); None when unknown."""
    if base and not Path(base).exists() and not base.startswith((".", "/")):
        from huggingface_hub.utils import HFValidationError, validate_repo_id

        try:
            validate_repo_id(base)  # "roberta-base" and "owner/name" alike
            return base
        except HFValidationError:
            return None
    config = Path(base) / "config.json"
    if config.is_file():
        origin = str(json.loads(config.read_text()).get("_name_or_path", ""))
        if origin.count("/") == 1 and not Path(origin).exists() and not origin.startswith((".", "/")):
            return origin
    return None


def _metadata(info: dict) -> dict:
    return {
        "library_name": "transformers",
        "pipeline_tag": "text-ranking",
        "base_model": hub_base_model(str(info.get("base_model", ""))),
        "tags": ["ralm", "in-context-ralm", "reranker", "cross-encoder", "text-ranking"],
    }


def _front_matter(meta: dict) -> str:
    lines = ["---"]
    for key, value in meta.items():
        if isinstance(value, list):
            lines.append(f"{key}:")
            lines += [f"- {v}" for v in value]
        elif value is not None:
            lines.append(f"{key}: {value}")
    return "\n".join([*lines, "---"])


def _prior_text(prior: dict | None) -> str:
    if not prior:
        return "None: the score is the model's logit alone."
    text = (
        f"score = logit + w * z, w = {prior['weight']:.4f}, z = the passage's BM25 score standardised within "
        "its candidate group ((s - mean) / std, 0 when all are equal); pass the BM25 scores to `rank`."
    )
    if "abstain_bias" in prior:
        text += (
            f" The empty passage (no retrieval) scores logit + b + c * t, b = {prior['abstain_bias']:.4f}, "
            f"c = {prior['abstain_weight']:.4f}, "
            f"t = (best BM25 score of the group - {prior['bm25_top_mean']:.3f}) "
            f"/ {prior['bm25_top_std']:.3f}."
        )
    return text


def _zero_shot_prior_lines(prior: dict | None) -> list[str]:
    """The stacked reranker's prior (``--zero-shot-prior``): what a caller adds to the model's logit."""
    if not prior:
        return []
    text = (
        f"score = logit + a * y', a = {prior['weight']:.4f}, y' = the frozen LM's log-probability (nats) of "
        f"the prefix's last {prior['rank_tokens']} tokens after the passage; pass them to `rank` "
        "(`rank_logprobs=`): this reranker needs the LM that labelled the data at rerank time."
    )
    if prior.get("abstain_bias") is not None:
        b = prior["abstain_bias"]
        text += f" The empty passage scores logit + a * y' + b (y' with no passage), b = {b:.4f}."
    return [f"- **Zero-shot prior (stacked on the LM's own rerank)**: {text}"]


def decision_lines(evidence: dict) -> list[str]:
    """The selection and decision parts (sizes, document overlap) and one line per comparison."""
    sel, dec = evidence.get("selection") or {}, evidence.get("decision") or {}
    lines = []
    if sel:
        lines.append(
            f"- **Checkpoint selection**: step {sel.get('step')} ({sel.get('checkpoint')}), best of "
            f"{sel.get('validations')} validations on {sel.get('prefixes')} selection prefixes from "
            f"{sel.get('documents')} documents"
        )
    if dec:
        lines.append(
            f"- **Export decided on**: {dec.get('prefixes')} decision prefixes "
            f"from {dec.get('documents')} other documents, scored once for the selected step "
            f"(documents shared with selection or training: {evidence.get('overlap')}); the rule: "
            + evidence.get("rule", "a rule replaces a simpler one only when its 95% CI is above 0")
        )
    promise = evidence.get("promise") or {}
    for name, t in (promise.get("tests") or {}).items():
        lines.append(
            f"- **Promise** {name} - {promise.get('reference')}: {t['difference']:+.3f} nats per prefix, "
            f"one-sided 95% bound {t['bound']:+.3f} against the margin {t['margin']:+.3f} "
            f"({promise.get('margin', 0):.1%} token perplexity): {'kept' if t['passes'] else 'not kept'} "
            f"({t['items']} prefixes: {t['prefixes']})"
        )
    for name, d in (evidence.get("comparisons") or {}).items():
        lines.append(
            f"- {name}: {d['difference']:+.3f} nats per prefix [{d['low']:+.3f}, {d['high']:+.3f}], "
            f"{'better' if d['better'] else 'tie or worse'} (smallest detectable difference "
            f"{d.get('detectable_difference', float('nan')):.3f}, 80% power)"
        )
    return lines


def render_model_card(info: dict) -> str:
    """The card's text from a ``ralm_reranker.json`` dict."""
    note = DECISION_NOTES.get(info.get("decision", TRAINED))
    # A decision other than the trained model changes what the folder is: said first, and in every snippet.
    first = [f"**{note}.**", ""] if note else []
    warn = [f"# {note.split(':')[0]}: see the top of this card"] if note else []
    return "\n".join(
        [
            _front_matter(_metadata(info)),
            "",
            "# ralm predictive reranker",
            "",
            *first,
            *_summary_lines(info),
            "",
            *_ralm_usage(warn),
            "",
            *_sentence_transformers_usage(info, warn),
            "",
            *_transformers_usage(info, warn),
            "",
            f"Written by ralm {info.get('ralm_version')}; all fields: `ralm_reranker.json`.",
            "",
        ]
    )


_COST_UNITS = (("lm_inputs", "LM inputs"), ("encoder_pairs", "encoder pairs"))
"""How ``cost_text`` words each cost of a rule."""


def cost_text(costs: dict) -> str:
    """Each rule's cost per retrieval, and the LM budget the decision kept to (``decision_evidence.costs``,
    ``ralm.train.decision.rule_costs``), in one line; empty for an export from before costs were recorded."""
    parts = []
    for rule, cost in (costs.get("per_retrieval") or {}).items():
        reads = [f"{cost[key]} {words}" for key, words in _COST_UNITS if cost.get(key)]
        ms = f" (~{cost['ms']:.1f} ms)" if cost.get("ms") is not None and reads else ""
        parts.append(f"{rule} {' + '.join(reads) or 'nothing beyond BM25'}{ms}")
    if not parts:
        return ""
    budget, over = costs.get("max_lm_inputs"), costs.get("over_budget") or []
    limit = "" if budget is None else f"; budget {budget} LM inputs per retrieval"
    limit += f", which excludes {', '.join(over)}" if over else ""
    return "; ".join(parts) + limit


def _summary_lines(info: dict) -> list[str]:
    """What the model is, how it was trained and validated, and the export decision with its evidence."""
    data = info.get("trained_on", {})
    at_best = info.get("metrics", {}).get("validation_at_best") or {}
    validation = ", ".join(f"{k.removeprefix('val/')} {_fmt(v)}" for k, v in sorted(at_best.items())) or "n/a"
    weights = info.get("checkpoint") is not None
    return [
        "A cross-encoder that picks, among BM25's candidates, the passage a frozen causal LM "
        "should read before a prefix (In-Context RALM, Ram et al. 2023, §6.2), "
        "trained by [ralm](https://github.com/) on the LM's own log-probabilities."
        + ("" if weights else " This folder holds no model weights."),
        "",
        f"- **Base model**: {info.get('base_model')}",
        f"- **LM that labelled the data**: {data.get('lm')}",
        f"- **Data**: {data.get('train_prefixes')} training prefixes, "
        f"{data.get('val_prefixes')} selection prefixes, "
        f"{data.get('decision_prefixes', 'n/a')} decision prefixes ({data.get('format')})",
        f"- **Loss**: {info.get('loss')}",
        f"- **Input**: `{info.get('input_format')}`: "
        f"the prefix cut to its last {info.get('max_prefix_tokens')} tokens, "
        f"the passage cut from its end to fit {info.get('max_length')} tokens",
        "- **Abstention**: "
        f"{'the empty passage is a candidate (no retrieval)' if info.get('abstain') else 'no'}",
        f"- **BM25 prior**: {_prior_text(info.get('bm25_prior'))}",
        *_zero_shot_prior_lines(info.get("zero_shot_prior")),
        f"- **Validation of the selected step**: {validation}",
        f"- **Export decision**: `{info.get('decision')}`",
        *decision_lines(info.get("decision_evidence") or {}),
        *_cost_lines(info.get("decision_evidence") or {}),
    ]


def _cost_lines(evidence: dict) -> list[str]:
    text = cost_text(evidence.get("costs") or {})
    return [f"- **Cost per retrieval** (beyond BM25's search): {text}"] if text else []


def _ralm_usage(warn: list[str]) -> list[str]:
    """Loading and ranking with ralm itself."""
    return [
        "## With ralm",
        "",
        "```python",
        *warn,
        "import ralm",
        "reranker = ralm.Reranker.from_pretrained(PATH)",
        "choice = reranker.rank(prefix, passages, bm25_scores=scores)  # index into passages, or None",
        "```",
    ]


def remote_code_note(max_prefix_tokens) -> str:
    """Why sentence-transformers must be trusted with this folder's code, and which files that runs: a
    reader decides whether to pass ``trust_remote_code=True`` from this."""
    files = " and ".join(f"`{name}`" for name in MODULE_FILES)
    return (
        "`trust_remote_code=True` is needed because ralm's cut is code: sentence-transformers hands each "
        "(prefix, passage) pair to one tokenizer call, whose one truncation rule cannot keep the prefix's "
        f"last {max_prefix_tokens} tokens and then cut only the passage. The code it runs is this folder's "
        f"{files} (read them first), and nothing else from the folder."
    )


def _sentence_transformers_usage(info: dict, warn: list[str]) -> list[str]:
    """Scoring with sentence-transformers' CrossEncoder, which runs the folder's own input module."""
    return [
        "## With sentence-transformers (>= 6)",
        "",
        "```python",
        *warn,
        "from sentence_transformers import CrossEncoder",
        "model = CrossEncoder(PATH, trust_remote_code=True)  # runs this folder's "
        + " and ".join(MODULE_FILES),
        "logits = model.predict([(prefix, passage) for passage in passages])  # whole prefixes, ralm's cut",
        "```",
        "",
        "The folder's input module (`cross_encoder_input.py`, `pair_rule.py`) "
        f"cuts each prefix to its last {info.get('max_prefix_tokens')} tokens "
        f"and then the passage to fit {info.get('max_length')} tokens, "
        "as ralm does, so `predict` returns ralm's model score; "
        "add the BM25 prior (or the zero-shot prior) above yourself when it is not "
        'None (abstention: score the empty passage `""` too).',
        "",
        remote_code_note(info.get("max_prefix_tokens")),
    ]


def _transformers_usage(info: dict, warn: list[str]) -> list[str]:
    """Scoring with transformers alone: the caller cuts the prefix with the folder's ``pair_rule.py``."""
    return [
        "## With transformers only",
        "",
        "```python",
        *warn,
        "from transformers import AutoModelForSequenceClassification, AutoTokenizer",
        "from pair_rule import prefix_tails  # this folder's file (also ralm.rerank.pair_rule)",
        "tokenizer = AutoTokenizer.from_pretrained(PATH)",
        "model = AutoModelForSequenceClassification.from_pretrained(PATH)",
        f"tail = prefix_tails(tokenizer, [prefix], {info.get('max_prefix_tokens')})[0]",
        "inputs = tokenizer([tail] * len(passages), passages, truncation='only_second', "
        f"max_length={info.get('max_length')}, "
        "padding=True, return_tensors='pt')",
        "logits = model(**inputs).logits.squeeze(-1)  # add the BM25 prior above when it is not None",
        "```",
    ]


def read_card_metadata(folder: Path) -> dict:
    """The YAML front matter of ``folder/README.md`` as a flat dict (lists for ``- item`` lines)."""
    path = Path(folder) / CARD
    if not path.is_file():
        raise RalmInputError(f"{folder}: no {CARD} model card (re-export it with `ralm train` or write one)")
    lines = path.read_text(encoding="utf-8").splitlines()
    if not lines or lines[0] != "---" or "---" not in lines[1:]:
        raise RalmInputError(f"{path}: no metadata block (a '---' ... '---' front matter) at the top")
    meta, key = {}, None
    for line in lines[1 : lines.index("---", 1)]:
        if line.startswith("- ") and key:
            meta.setdefault(key, []).append(line[2:].strip())
        elif ":" in line:
            key, value = (part.strip() for part in line.split(":", 1))
            meta[key] = value or []
    return meta


def check_model_card(folder: Path) -> dict:
    """The card's metadata; a missing required field is a RalmInputError naming it and the fix."""
    meta = read_card_metadata(folder)
    missing = [k for k in REQUIRED_METADATA if not meta.get(k)]
    if missing:
        raise RalmInputError(
            f"{Path(folder) / CARD}: metadata field(s) {', '.join(missing)} missing; add them to the front "
            "matter (base_model: the hub id the encoder came from)"
        )
    return meta


def write_model_card(folder: Path, info: dict) -> None:
    """``folder/README.md`` from the export's ``ralm_reranker.json`` fields (called before the rename)."""
    (Path(folder) / CARD).write_text(render_model_card(info), encoding="utf-8")
