"""`ralm eval qa` and `ralm eval flare` take the shared option groups (`LMOptions`, `RetrievalOptions`):
every former spelling of their options parses to the same groups, the LM input length is resolved once (by
the command, with `LMOptions.input_length`) and used as given by the runners and the passage source, and
`--threads` reaches every batched search."""

from __future__ import annotations

import pytest
from flare_fixtures import RecordingRetriever, chain_lm

from ralm.cli.command_args import parse
from ralm.cli.main import load_command
from ralm.errors import RalmInputError
from ralm.eval.qa.data import QAExample
from ralm.eval.qa.flare import FlareRunner
from ralm.eval.qa.flare_options import FlareOptions
from ralm.eval.qa.odqa import QARunner
from ralm.eval.qa.retrieval import PassageSource, open_source
from ralm.lm.options import LMOptions
from ralm.retrieval.options import RetrievalOptions

COMMANDS = ("eval qa", "eval flare")
REQUIRED = ["--data", "q.jsonl", "--output", "out"]
EXPECTED = (LMOptions("gpt2", "m.gguf", "cpu", "fp32", 512), RetrievalOptions("idx", "p.jsonl", 4, 2))
SPELLINGS = {
    "leaves": [
        "--lm",
        "gpt2",
        "--gguf-file",
        "m.gguf",
        "--device",
        "cpu",
        "--dtype",
        "fp32",
        "--max-length",
        "512",
        "--index",
        "idx",
        "--passages",
        "p.jsonl",
        "--k",
        "4",
        "--threads",
        "2",
    ],
    "underscores and =": [
        "--lm=gpt2",
        "--gguf_file=m.gguf",
        "--device=cpu",
        "--dtype=fp32",
        "--max_length=512",
        "--index=idx",
        "--passages=p.jsonl",
        "--k=4",
        "--threads=2",
    ],
    "dotted": [
        "--lm.model",
        "gpt2",
        "--lm.gguf_file",
        "m.gguf",
        "--lm.device",
        "cpu",
        "--lm.dtype",
        "fp32",
        "--lm.max-length",
        "512",
        "--retrieval.index",
        "idx",
        "--retrieval.passages",
        "p.jsonl",
        "--retrieval.k",
        "4",
        "--retrieval.threads",
        "2",
    ],
}
YAML = {
    "nested": "lm: {model: gpt2, gguf_file: m.gguf, device: cpu, dtype: fp32, max_length: 512}\n"
    "retrieval: {index: idx, passages: p.jsonl, k: 4, threads: 2}\n",
    "shorthand": "lm: gpt2\nretrieval: {index: idx, passages: p.jsonl, k: 4, threads: 2}\n",
    "flat, as before the groups": "lm: gpt2\ngguf_file: m.gguf\ndevice: cpu\ndtype: fp32\nmax_length: 512\n"
    "index: idx\npassages: p.jsonl\nk: 4\nthreads: 2\n",
}
SHORTHAND_REST = ["--gguf-file", "m.gguf", "--device", "cpu", "--dtype", "fp32", "--max-length", "512"]


def groups(command: str, argv: list[str]) -> tuple[LMOptions, RetrievalOptions]:
    _, init = parse(load_command(command).build_parser(), [*REQUIRED, *argv])
    return init.lm, init.retrieval


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("spelling", list(SPELLINGS))
def test_every_command_line_spelling_gives_the_same_groups(command, spelling):
    assert groups(command, SPELLINGS[spelling]) == EXPECTED


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("form", list(YAML))
def test_a_yaml_file_gives_the_same_groups(command, form, tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text(YAML[form])
    rest = SHORTHAND_REST if form == "shorthand" else []
    assert groups(command, ["--config", str(config), *rest]) == EXPECTED
    # a later --lm replaces only the model, the file's other LM settings stay
    lm, _ = groups(command, ["--config", str(config), *rest, "--lm", "other"])
    assert lm == LMOptions("other", "m.gguf", "cpu", "fp32", 512)


@pytest.mark.parametrize("command", COMMANDS)
def test_defaults_are_the_former_ones(command):
    lm, retrieval = groups(command, ["--lm", "gpt2"])
    assert (lm.device, lm.dtype, lm.gguf_file, lm.max_length) == ("auto", "auto", None, None)
    assert lm.input_length(4096) == 1024 and lm.input_length(256) == 256  # 1024, capped at the context
    assert retrieval == RetrievalOptions(index=None, passages=None, k=16, threads=1)


@pytest.mark.parametrize("command", COMMANDS)
def test_a_former_yaml_key_names_its_new_one_which_a_yaml_file_takes_too(command, tmp_path):
    config = tmp_path / "old.yaml"
    config.write_text("candidates: 4\n")
    with pytest.raises(RalmInputError, match="key 'candidates' was renamed 'k'"):
        groups(command, ["--lm", "gpt2", "--config", str(config)])
    config.write_text("k: 4\n")
    assert groups(command, ["--lm", "gpt2", "--config", str(config)])[1] == RetrievalOptions(k=4)


def test_a_command_without_an_lm_fails_naming_the_option(tmp_path):
    from ralm.eval.qa.flare_command import eval_flare
    from ralm.eval.qa.qa_command import eval_qa

    for command in (eval_qa, eval_flare):
        with pytest.raises(RalmInputError, match="^--lm: required"):
            command(data="q.jsonl", output=str(tmp_path / "o"))
    assert not (tmp_path / "o").exists()


# ---------------------------------------------------------------- the input length, resolved once
EXAMPLE = QAExample("x", "where is the capital ?", ["paris"])
CHAIN = [("paris", 0.9)]


def lm_with_context(context: int):
    return chain_lm(CHAIN, extra_words=EXAMPLE.question.split(), context_length=context)


def flare_runner(lm, input_length=None) -> FlareRunner:
    return FlareRunner(lm, FlareOptions(method="no-retrieval"), input_length=input_length)


def qa_runner(lm, input_length=None) -> QARunner:
    return QARunner(lm, docs=0, max_new_tokens=1, input_length=input_length)


@pytest.mark.parametrize("make", [flare_runner, qa_runner], ids=["flare", "qa"])
def test_a_runner_uses_the_input_length_it_is_given(make):
    # Larger than the LM's context: used as given (the command applied the cap already), not capped again.
    runner = make(lm_with_context(8), input_length=64)
    assert runner.fitter.input_length == 64
    runner.check([EXAMPLE])
    # Smaller than the prompt: refused at that length, not the context's.
    with pytest.raises(RalmInputError, match=r"longer than the LM's context \(5\)"):
        make(lm_with_context(4096), input_length=5).check([EXAMPLE])
    # None (a Python caller's default): LMOptions' rule with its defaults, 1024 within the context.
    assert make(lm_with_context(4096)).fitter.input_length == 1024
    assert make(lm_with_context(40)).fitter.input_length == 40


def test_zero_shot_scoring_uses_the_input_length_it_is_given(monkeypatch):
    import torch

    import ralm.lm.scoring

    lengths = []

    def fake_score(lm, requests, settings):
        lengths.append(settings.input_length)
        assert all(len(r.passage) + len(r.target) <= settings.input_length for r in requests)
        return [torch.zeros(len(r.target)) for r in requests]

    monkeypatch.setattr(ralm.lm.scoring, "score_continuations", fake_score)
    lm = lm_with_context(8)
    for given, used in ((64, 64), (None, 8)):
        source = PassageSource(
            RecordingRetriever(), lm=lm, rerank="zero-shot", candidates=3, input_length=given
        )
        assert len(source.search(["where is the capital ?"], 2)[0]) == 2
        assert lengths[-1] == used


class ThreadsRetriever(RecordingRetriever):
    def __init__(self):
        super().__init__()
        self.threads: list[int] = []

    def search(self, queries, k, threads=1):
        self.threads.append(threads)
        return super().search(queries, k)


def test_threads_reach_every_batched_search(monkeypatch):
    retriever = ThreadsRetriever()
    monkeypatch.setattr(RetrievalOptions, "open", lambda self, why="": retriever)
    source = open_source(RetrievalOptions("idx", k=5, threads=3), lm=None, rerank="none")
    assert (source.candidates, source.threads) == (5, 3)
    QARunner(lm_with_context(4096), docs=2, source=source).passages(
        [EXAMPLE, QAExample("y", "paris ?", ["x"])]
    )
    assert retriever.threads == [3] and len(retriever.queries) == 2  # one search for the batch
    assert open_source(RetrievalOptions(), lm=None, rerank="none") is None
    with pytest.raises(RalmInputError, match="--reranker needs --index"):
        open_source(RetrievalOptions(), lm=None, rerank="zero-shot")
