"""`ralm demo --quick` on the real offline assets: the clean protocol and what it measures (slow: real
weights).

Gemma-3-270m base, the King James Bible minus the dev (Mark) and test books (2 Chronicles: related;
Ruth: unrelated) as retrieval corpus, the World English Bible's other books as training text, the first
2,560 tokens of each test set scored at the paper's proportions (a 128-token passage in a 512-token input).
The run folder is the one `ralm demo --quick` uses, under a temporary root, so a rerun of the test reuses
finished stages exactly as a user's second run does. The assertions are what this demo reaches (README),
each with its interval; no setting was chosen on a test book.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ralm.pipeline.plan import forward_rows
from ralm.retrieval.passage_forms import RETRIEVED

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def quick_demo(tmp_path_factory, gemma3_gguf, minilm_dir):
    from ralm.demo.demo_command import demo

    run_dir = os.environ.get("RALM_DEMO_TEST_RUN") or str(tmp_path_factory.mktemp("demo") / "quick")
    report = demo(quick=True, output=run_dir, lm=str(gemma3_gguf), encoder=str(minilm_dir))
    return run_dir, report


def test_the_protocol_is_clean_and_every_number_has_its_interval(quick_demo):
    run_dir, report = quick_demo
    assert set(report["sets"]) == {"related", "unrelated"}
    for name, s in report["sets"].items():
        metrics, retrieving = s["metrics"], s["retrieving"]
        # The same tokens in every condition: the first 2,560 of the set, 2,048 of them in retrieving windows.
        assert {m["scored_tokens"] for m in metrics.values()} == {2559}, name
        assert {c["scored_tokens"] for c in retrieving.values()} == {2560 - 512}, name
        # Beside the table (the quick demo's: the paper's passage), BM25's continuation and BM25 with a query
        # for the true next tokens.
        forward = [row.name for row in forward_rows(RETRIEVED)]
        assert set(forward) <= set(retrieving), name
        ppl = {n: c["token_ppl"] for n, c in retrieving.items() if n not in forward}
        # Best of k or none bounds every condition on BM25's candidates for the past query; best of k bounds
        # every such condition that always retrieves.
        assert ppl["oracle-or-none"] == pytest.approx(min(ppl.values())), (name, ppl)
        assert ppl["oracle"] <= min(ppl["bm25"], ppl["random"], ppl["zero-shot"]) * (1 + 1e-9), (name, ppl)
        for c in retrieving.values():  # every change has its interval over blocks of windows
            assert c["vs_bm25"]["low"] <= c["vs_bm25"]["change"] <= c["vs_bm25"]["high"]
            assert c["vs_bm25"]["method"] == "blocks"
    saved = json.loads(open(os.path.join(run_dir, "report.json")).read())
    assert saved["sets"]["unrelated"]["verdicts"] == report["sets"]["unrelated"]["verdicts"]
    for name in ("report.png", "commands.sh"):
        assert os.path.isfile(os.path.join(run_dir, name))


def test_retrieval_helps_related_text_and_costs_unrelated_text(quick_demo):
    """The README's reading of the two sets against a fair no retrieval (every input starts with Gemma's BOS;
    measured with Gemma-3-270m base on the retrieving windows: BM25 -17.0% [-28.2, -6.2] on 2 Chronicles,
    which the corpus retells, and +4.7% [+2.5, +6.9] on Ruth, which it does not)."""
    _, report = quick_demo
    related, unrelated = (report["sets"][n]["retrieving"] for n in ("related", "unrelated"))
    assert related["bm25"]["vs_no_retrieval"]["high"] < 0, related["bm25"]["vs_no_retrieval"]
    # The gain is the passage's content: BM25 also beats the window cut by its passage's length.
    assert related["bm25"]["vs_matched"]["high"] < 0, related["bm25"]["vs_matched"]
    # Where the corpus does not retell the text, BM25's passage costs: abstaining is the right call there.
    assert unrelated["bm25"]["vs_no_retrieval"]["low"] > 0, unrelated["bm25"]["vs_no_retrieval"]
    # Nothing in the corpus copies Ruth (any version of a test book is out of the corpus).
    assert all(m["comparison"]["copy_windows"] == 0 for m in report["sets"]["unrelated"]["metrics"].values())


def test_the_export_keeps_its_promise_and_abstains_where_the_corpus_does_not_retell(quick_demo):
    """What the decision guarantees, and what it cannot. It exports only a rule whose one-sided 95% bound
    against no retrieval clears the margin on its decision prefixes (training books); on Ruth, which the
    corpus does not retell, the export must then abstain where BM25 costs. The +1% goal on Ruth is a measured
    outcome of 25 decision prefixes, not a guarantee: the bf16 labels of one CPU (the AMD EPYC) exported a
    rule within it, those of another (the Xeon with AMX) a trained reranker at +0.7% [+0.1, +1.4]
    (docs/results.md, "The quick demo"). The report states which, and must state it truly."""
    run_dir, report = quick_demo
    summary = json.loads(next(Path(run_dir).glob("reranker-*/summary.json")).read_text())
    played = summary["decision"]
    tests = summary["decision_evidence"]["promise"]["tests"]
    assert played == "no-retrieval" or tests[played]["passes"], tests.get(played)
    trained = report["sets"]["unrelated"]["retrieving"]["trained-seed0"]
    # Below BM25's top-1 on the unrelated set (its whole interval): exporting BM25 there would fail this.
    assert trained["vs_bm25"]["high"] < 0, trained["vs_bm25"]
    # The goal's verdict line says what the interval says.
    lines = [v for v in report["sets"]["unrelated"]["verdicts"] if "vs no retrieval" in v and "+1%" in v]
    (line,) = [v for v in lines if ", no LM:" not in v]
    assert ("NOT within" in line) == (trained["vs_no_retrieval"]["high"] >= 0.01), line
    # The second export, for users without the LM at rerank time, kept its promise on the same prefixes.
    no_lm = summary["no_lm_export"]["decision"]
    assert no_lm == "no-retrieval" or tests[no_lm]["passes"], tests.get(no_lm)
    assert (
        no_lm not in ("zero-shot", "zero-shot-above")
        and no_lm in report["sets"]["related"]["metrics"]["no-lm-seed0"]["exported"]
    )
    # What it exported is what it did: an export decided as a rule the report also scores (no retrieval,
    # BM25, the zero-shot LM rerank) makes that row's picks on both sets, so its perplexity is that row's.
    assert summary["decision_evidence"]["overlap"] == 0
    if played in ("no-retrieval", "bm25", "zero-shot"):
        for s in report["sets"].values():
            assert s["metrics"]["trained-seed0"]["token_ppl"] == s["metrics"][played]["token_ppl"]
