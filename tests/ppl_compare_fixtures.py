"""Shared by the `ralm eval ppl --compare` tests (test_ppl_compare_*): the run on the session fixture
`ppl_setup`, the single runs' options, an LM row counter and the windows a run wrote."""

from __future__ import annotations

import json

from ralm.eval.ppl.conditions import parse_conditions
from ralm.eval.ppl.ppl_command import RerankingOptions, eval_ppl
from ralm.lm.options import LMOptions, WindowOptions
from ralm.retrieval.options import RetrievalOptions

MAX_LENGTH, MPT, N, K = 128, 64, 260, 4
SINGLE = {  # condition -> the single run's options
    "no-retrieval": {"no_retrieval": True},
    "bm25": {"reranking": RerankingOptions()},
    "zero-shot": {"reranking": RerankingOptions(reranker="zero-shot")},
    "oracle": {"reranking": RerankingOptions(reranker="oracle")},
}
WINDOW_KEYS = [
    "window",
    "begin",
    "end",
    "target_start",
    "num_targets",
    "nll",
    "query",
    "chosen_rank",
    "passage_id",
    "copies_target",
]


def _run(ppl_setup, out, cache, compare: str | None = None, **kwargs):
    """`eval_ppl` on the fixture; `compare`: ``--compare`` text, read as the command line reads it."""
    return eval_ppl(
        compare=None if compare is None else parse_conditions(compare),
        text=str(kwargs.pop("text", ppl_setup["text"])),
        output=str(out),
        lm=LMOptions(str(ppl_setup["lm_dir"]), device="cpu", dtype="float32", max_length=MAX_LENGTH),
        retrieval=RetrievalOptions(str(ppl_setup["index"]), k=K),
        max_tokens=N,
        retrieval_cache=str(cache),
        progress=False,
        window=kwargs.pop("window", WindowOptions(stride=4, max_passage_tokens=MPT)),
        reranking=kwargs.pop("reranking", RerankingOptions()),
        **kwargs,
    )


class RequestCounter:
    """Wraps the real score_continuations of a module and counts the LM rows it scores (no mocking).

    Every run, single or compared, scores its LM rows in ``ralm.eval.ppl.perplexity`` (the condition
    engine)."""

    def __init__(self, monkeypatch, module):
        self.rows = 0
        real = module.score_continuations

        def counting(lm, requests, *args, **kwargs):
            self.rows += len(requests)
            return real(lm, requests, *args, **kwargs)

        monkeypatch.setattr(module, "score_continuations", counting)


def _windows(folder):
    return [json.loads(x) for x in (folder / "windows.jsonl").read_text().splitlines()]
