"""`ralm eval ppl --reranker FOLDER` end to end on a tiny setup: the eval prepends exactly the passage the
exported reranker prefers (or nothing, when it was trained to abstain and the empty passage wins)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from transformers import AutoTokenizer

from ralm.errors import RalmInputError
from ralm.eval.ppl.ppl_command import main as eval_ppl_main
from ralm.rerank.export import export_reranker
from ralm.rerank.inference import PredictiveReranker
from ralm.retrieval.index import build_index, open_index
from tests.rerank_fixtures import fit_tiny_reranker, keyword_rows, save_rows

K = 4
STRIDE, QUERY, CONTEXT = 32, 16, 512  # the eval hands the reranker the last 512 LM tokens as prefix text


@pytest.fixture(scope="module")
def setup(tmp_path_factory, real_documents, tiny_encoder_dir):
    from ralm.retrieval.passages import read_documents, split_passages, write_passages

    root = tmp_path_factory.mktemp("rerank_eval")
    docs = root / "docs.jsonl"
    docs.write_text("".join(json.dumps(d) + "\n" for d in real_documents[1:]))
    write_passages(split_passages(read_documents(docs), words=100), root / "passages.jsonl")
    build_index(root / "passages.jsonl", root / "index", backend="bm25s")
    text = root / "eval.txt"
    text.write_text(" ".join(real_documents[0]["text"].split()[:220]))
    # An abstaining reranker: on half the training prefixes no passage helps, so the empty one wins there.
    rows = keyword_rows(real_documents, 60, k=3, seed=2)
    for row in rows[::2]:
        row["lm_logprobs"] = [-9.0] * len(row["lm_logprobs"])
    summary = fit_tiny_reranker(
        save_rows(rows, root / "data"),
        root / "train",
        tiny_encoder_dir,
        max_steps=8,
        encoder={"max_pair_tokens": 96, "max_prefix_tokens": 48},
        optim={"lr": 2e-3, "warmup_steps": 2},
        abstain=True,
    )
    # This file checks how eval applies the reranker's own picks; whether the decision keeps them (eight
    # steps on a tiny encoder rarely beat no retrieval) is test_rerank_decision's subject: the selected
    # checkpoint is exported here as trained, whatever the decision was.
    folder = export_reranker(
        summary["best_checkpoint"], str(root / "picks"), hyper_parameters={}, trained_on={}
    )
    # The same weights under a zero-shot decision (what `ralm train` exports when the LM's y' rule won).
    export_reranker(
        summary["best_checkpoint"],
        str(root / "zero-shot-export"),
        hyper_parameters={},
        trained_on={},
        decision="zero-shot",
        rank_tokens=8,
    )
    # And under the zero-shot rule that abstains when y' gains less than M = 0.015 nats with the passage.
    export_reranker(
        summary["best_checkpoint"],
        str(root / "zero-shot-above-export"),
        hyper_parameters={},
        trained_on={},
        decision="zero-shot-above",
        threshold=0.015,
        rank_tokens=8,
    )
    return root, Path(folder)


def _eval_args(root: Path, tiny_lm_dir, out: Path, *extra: str) -> list[str]:
    return [
        "--text",
        str(root / "eval.txt"),
        "--lm",
        str(tiny_lm_dir),
        "--index",
        str(root / "index"),
        "--output",
        str(out),
        "--k",
        str(K),
        "--stride",
        str(STRIDE),
        "--query-tokens",
        str(QUERY),
        "--max-passage-tokens",
        "64",
        "--retrieval-cache",
        str(root / "cache"),
        "--progress",
        "false",
        *extra,
    ]


def test_a_zero_shot_export_is_played_by_the_evaluated_lm_as_the_zero_shot_condition(
    setup, tiny_lm_dir, capsys
):
    """Its decision, not its weights, picks: the same passage and NLL as `zero-shot` in every window; a run
    ranking another y' length is refused naming the fix; its own `order` refuses without the LM."""
    root, _ = setup
    folder = root / "zero-shot-export"
    out = root / "eval-zero-shot"
    eval_ppl_main(
        _eval_args(root, tiny_lm_dir, out, "--compare", f"zero-shot,exp={folder}", "--rank-tokens", "8")
    )
    played = [json.loads(line) for line in (out / "exp" / "windows.jsonl").read_text().splitlines()]
    zero_shot = [json.loads(line) for line in (out / "zero-shot" / "windows.jsonl").read_text().splitlines()]
    assert len(played) == len(zero_shot) > 3
    assert sum(r["passage_id"] is not None for r in played) > 0
    for mine, theirs in zip(played, zero_shot, strict=True):
        assert (mine["passage_id"], mine["chosen_rank"], mine["nll"]) == (
            theirs["passage_id"],
            theirs["chosen_rank"],
            theirs["nll"],
        )
    capsys.readouterr()
    with pytest.raises(SystemExit):
        eval_ppl_main(_eval_args(root, tiny_lm_dir, root / "refused", "--reranker", str(folder)))
    assert "y' of 8 tokens; this run ranks 16 (pass --rank-tokens 8)" in capsys.readouterr().err
    assert not (root / "refused" / "results.json").exists()
    reranker = PredictiveReranker.from_pretrained(folder)
    with pytest.raises(RalmInputError, match="ranks with the LM itself.*last 8 tokens"):
        reranker.rank(["a prefix"], [["one", "two"]])


def test_a_zero_shot_above_export_run_alone_picks_as_the_compared_rule_with_its_threshold(setup, tiny_lm_dir):
    """`--reranker FOLDER` alone (no comparison table: the run must still score y' with no passage) picks
    window by window as `--compare zero-shot-above=0.015`, and the picks follow the table: the zero-shot
    candidate where its y' log-prob beats the no-passage row's by at least 0.015 nats (the tiny LM moves y'
    little), else nothing."""
    root, _ = setup
    alone, compared = root / "eval-zsa-alone", root / "eval-zsa-compared"
    eval_ppl_main(
        _eval_args(
            root, tiny_lm_dir, alone, "--reranker", str(root / "zero-shot-above-export"), "--rank-tokens", "8"
        )
    )
    eval_ppl_main(
        _eval_args(root, tiny_lm_dir, compared, "--compare", "zero-shot-above=0.015", "--rank-tokens", "8")
    )
    mine = [json.loads(line) for line in (alone / "windows.jsonl").read_text().splitlines()]
    rule = [
        json.loads(line) for line in (compared / "zero-shot-above" / "windows.jsonl").read_text().splitlines()
    ]
    table = [json.loads(line) for line in (compared / "candidates.jsonl").read_text().splitlines()]
    assert [(r["chosen_rank"], r["nll"]) for r in mine] == [(r["chosen_rank"], r["nll"]) for r in rule]
    expected = []
    for row in table:
        ranks = [c["rank_logprob"] for c in row["candidates"]]
        best = ranks.index(max(ranks)) if ranks else None
        keep = best is not None and ranks[best] - row["no_passage_rank_logprob"] >= 0.015
        expected.append(best if keep else None)
    assert [r["chosen_rank"] for r in rule] == expected
    assert None in expected and any(e is not None for e in expected)  # the rule both retrieves and abstains


def _stacked_export(root: Path, name: str, weight: float, bias: float) -> Path:
    """The fixture's trained weights as a stacked reranker (``--zero-shot-prior``) with this (a, b)."""
    import torch

    from ralm.rerank.checkpoints import read_checkpoint

    summary = json.loads((root / "train" / "summary.json").read_text())
    checkpoint = dict(read_checkpoint(summary["best_checkpoint"]))
    checkpoint["state_dict"] = {
        **checkpoint["state_dict"],
        "zero_shot_weight": torch.tensor([weight]),
        "zero_shot_bias": torch.tensor([bias]),
    }
    checkpoint["hyper_parameters"] = {**checkpoint["hyper_parameters"], "zero_shot_prior": True}
    path = root / f"{name}.ckpt"
    torch.save(checkpoint, path)
    return Path(
        export_reranker(str(path), str(root / name), hyper_parameters={}, trained_on={}, rank_tokens=8)
    )


def test_a_stacked_export_is_the_lms_zero_shot_rule_plus_its_encoder_in_both_limits(setup, tiny_lm_dir):
    """Played on the evaluated LM's y' rows with its encoder's scores added: with a huge a (b = a M) the
    encoder cannot move a pick, and it picks as `zero-shot-above=M`; with a tiny a the LM cannot, and it
    picks as the same weights without the prior (the trained condition). Both limits in one table, each
    against an independent condition."""
    root, plain = setup
    lm_wins = _stacked_export(root, "stacked-lm", 1e4, 1e4 * 0.015)
    encoder_wins = _stacked_export(root, "stacked-encoder", 1e-7, 0.0)
    out = root / "eval-stacked"
    conditions = f"zero-shot-above=0.015,plain={plain},lm={lm_wins},encoder={encoder_wins}"
    eval_ppl_main(_eval_args(root, tiny_lm_dir, out, "--compare", conditions, "--rank-tokens", "8"))

    def picks(name: str) -> list:
        rows = [json.loads(line) for line in (out / name / "windows.jsonl").read_text().splitlines()]
        return [(r["chosen_rank"], r["nll"]) for r in rows]

    assert picks("lm") == picks("zero-shot-above")
    assert picks("encoder") == picks("plain")
    assert picks("lm") != picks("plain")  # the two limits differ, so each comparison says something
    with pytest.raises(SystemExit):
        eval_ppl_main(_eval_args(root, tiny_lm_dir, root / "stacked-refused", "--reranker", str(lm_wins)))
    assert not (root / "stacked-refused" / "results.json").exists()


def test_eval_ppl_prepends_the_rerankers_pick(setup, tiny_lm_dir):
    root, reranker_dir = setup
    out = root / "eval"
    eval_ppl_main(
        [
            "--text",
            str(root / "eval.txt"),
            "--lm",
            str(tiny_lm_dir),
            "--index",
            str(root / "index"),
            "--output",
            str(out),
            "--reranker",
            str(reranker_dir),
            "--k",
            str(K),
            "--stride",
            str(STRIDE),
            "--query-tokens",
            str(QUERY),
            "--max-passage-tokens",
            "64",
            "--retrieval-cache",
            str(root / "cache"),
            "--progress",
            "false",
        ]
    )
    results = json.loads((out / "results.json").read_text())
    rows = [json.loads(line) for line in (out / "windows.jsonl").read_text().splitlines()]
    assert results["config"]["mode"] == "trained" and len(rows) > 3

    # Independently: the same query gives the same BM25 top-k; the reranker scores them plus "".
    reranker = PredictiveReranker.from_pretrained(reranker_dir)
    assert reranker.abstain
    tokenizer = AutoTokenizer.from_pretrained(tiny_lm_dir)
    tokens = tokenizer((root / "eval.txt").read_text(), add_special_tokens=False)["input_ids"]
    retriever = open_index(root / "index")
    abstained = retrieving = 0
    for row in rows:
        if row["window"] == 0:
            assert row["passage_id"] is None  # window 0 never retrieves (eval_lm.py)
            continue
        hits = retriever.search([row["query"]], K)[0]
        if not hits:  # a query that found nothing: not a retrieving window, and no abstention either
            assert row["passage_id"] is None and row["chosen_rank"] is None
            continue
        retrieving += 1
        start = max(row["begin"], row["target_start"] - CONTEXT)
        prefix = tokenizer.decode(tokens[start : row["target_start"]])
        scores = reranker.score([prefix], [[h.contents for h in hits] + [""]])[0]
        best = max(range(len(scores)), key=lambda i: (scores[i], -i))
        if best == len(hits):
            abstained += 1
            assert row["passage_id"] is None and row["chosen_rank"] is None
        else:
            assert (row["chosen_rank"], row["passage_id"]) == (best, hits[best].id)
    print(f"abstained on {abstained} of {retrieving} retrieving windows")
    assert results["counts"]["retrieving_windows"] == retrieving
    assert results["metrics"]["retrieval_rate"] == pytest.approx((retrieving - abstained) / retrieving)
