"""The README's Python API examples, run in order as a user would (tiny models stand in for the real ones).

The examples are read from the README itself, so an example that stops working fails here. What they
produce is then checked against the CLI run on the same inputs: the API is the CLI's own code path.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def readme_api_blocks() -> list[str]:
    text = (REPO / "README.md").read_text()
    section = text.split("## Python API", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, flags=re.S)


def test_every_stage_has_an_example():
    code = "\n".join(readme_api_blocks())
    for name in (
        "make_passages",
        "build_index",
        "open_index",
        "generate_reranking_data",
        "train_reranker",
        "Reranker.from_pretrained",
        ".rank(",
        "evaluate_perplexity",
        "evaluate_qa",
        "evaluate_flare",
    ):
        assert name in code, name


def export_logits(folder: str, hits) -> list[float]:
    """The export's logits for the README's prefix by ralm's own encoding (no prior): CrossEncoder's
    target."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from ralm.rerank.inputs import encode_pairs

    info = json.loads(Path(folder, "ralm_reranker.json").read_text())
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForSequenceClassification.from_pretrained(folder).eval()
    passages = [h.contents for h in hits]
    batch = encode_pairs(
        tokenizer,
        ["Open the file and"] * len(passages),
        passages,
        max_length=info["max_length"],
        max_prefix_tokens=info["max_prefix_tokens"],
    )
    with torch.no_grad():
        return model(**batch).logits.squeeze(-1).tolist()


@pytest.mark.slow  # the whole pipeline on tiny models, twice for eval ppl: ~2 minutes on 2 cores
def test_the_readme_examples_run_and_agree_with_the_cli(
    tmp_path, monkeypatch, real_documents, tiny_lm_dir, tiny_encoder_dir, capsys
):
    from ppl_fixtures import build_tiny_lm

    lm_dir = build_tiny_lm(tiny_lm_dir, tmp_path / "lm", n_positions=512)  # room for a 256-token passage
    monkeypatch.chdir(tmp_path)
    docs = [{"id": d["id"], "title": d["title"], "text": d["text"]} for d in real_documents[:24]]
    held_out = {"id": "held_out", "title": "held_out", "text": real_documents[24]["text"]}
    Path("docs.jsonl").write_text("".join(json.dumps(d) + "\n" for d in [*docs, held_out]))
    Path("held_out.txt").write_text(held_out["text"][:1500])
    questions = [
        {"id": f"q{i}", "question": f"What does the {d['title']} module do?", "answers": [d["title"]]}
        for i, d in enumerate(docs[:3])
    ]
    Path("questions.jsonl").write_text("".join(json.dumps(q) + "\n" for q in questions))
    namespace: dict = {}
    for block in readme_api_blocks():
        code = block.replace('"gpt2"', repr(str(lm_dir))).replace(
            '"roberta-base"', repr(str(tiny_encoder_dir))
        )
        exec(compile(code, "README.md", "exec"), namespace)  # noqa: S102 - the README's own examples

    assert namespace["hits"] and all(h.doc_id != "held_out" for h in namespace["hits"])  # excluded
    import datasets

    assert len(datasets.load_from_disk("data")) == 24
    choice = namespace["choice"]
    hits = namespace["hits"]
    assert choice is None or 0 <= choice < len(hits)
    batch = namespace["reranker"].rank(
        ["Open the file and"], [[h.contents for h in hits]], [[h.score for h in hits]]
    )
    assert batch == [choice]  # one prefix or a list of them: the same rule
    if namespace["reranker"].decision == "trained":
        assert namespace["logits"] == pytest.approx(export_logits("runs/reranker/reranker", hits), abs=1e-5)
    else:  # the example skips it: such an export refuses to load as a CrossEncoder, saying why
        from sentence_transformers import CrossEncoder

        from ralm.rerank.model_card import DECISION_NOTES

        with pytest.raises(ValueError, match=re.escape(DECISION_NOTES[namespace["reranker"].decision][:40])):
            CrossEncoder("runs/reranker/reranker", trust_remote_code=True)
    # The API is the CLI: `ralm eval ppl` on the same inputs gives the same table.
    from ralm.cli.main import main

    main(
        [
            "eval",
            "ppl",
            "--text",
            "held_out.txt",
            "--lm",
            str(lm_dir),
            "--index",
            "idx",
            "--output",
            "cli-ppl",
            "--compare",
            "no-retrieval,bm25,trained=runs/reranker/reranker",
            "--progress",
            "false",
        ]
    )
    cli = json.loads(Path("cli-ppl/compare.json").read_text())
    for name, results in namespace["table"].items():
        assert cli["results"][name]["total_nll"] == pytest.approx(results["metrics"]["total_nll"], rel=1e-9)
    assert 0.0 <= namespace["flare"]["metrics"]["retrieval_rate"] <= 1.0
    assert namespace["qa"]["done"] == namespace["flare"]["done"] == 3
