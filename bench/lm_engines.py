"""Data-gen labels from LM engines (torch eager, torch compiled, llama.cpp) in one process: pairs/s and the
labels' change.

    OMP_NUM_THREADS=2 .venv/bin/python bench/lm_engines.py --data RUN/rerank-data-KEY \
        [--gguf FILE.gguf ...] [--prefixes 24] [--rounds 2] [--compiled --warm-rounds 1]

A second engine behind ``ralm.lm.interface.LanguageModel`` pays only if it scores data-gen's inputs faster
than torch on the CPU at hand, with labels close to fp32's. This measures both on data-gen's own rows: the
prefixes, targets and BM25 candidates of a finished ``ralm data-gen`` folder (re-encoded with the LM's
tokenizer), each prefix's k candidates plus the no-passage input through ``ralm.data_gen.scoring.
score_prefix``, as data-gen scores them. Engines: torch in fp32 (the exactness reference) and bf16, and
llama.cpp (``llama-cpp-python``, not a ralm dependency) on each `--gguf` file: the demo's Q4_K_M file by
default, whose weights torch reads de-quantised, and e.g. a bf16 GGUF of the same weights (llama.cpp's
``convert_hf_to_gguf.py --outtype bf16`` on the de-quantised folder in ``$RALM_CACHE/gguf``). The engines
take turns prefix by prefix, so a change in the machine's load hits them alike. `--compiled` adds torch bf16
through ``torch.compile`` (``LMOptions.compile``); `--warm-rounds 1` then scores every prefix once untimed
first, so every input shape is compiled before the clock runs (its seconds are printed).

llama.cpp runs here with the tokenizer and the protocol of the torch LM (same token ids); only ``logits``
goes to llama.cpp: one sequence per ``llama_decode``, its logits computed at the scored positions only.
Prints each engine's pairs/s (k per prefix, as data-gen counts them; a prefix costs k + 1 LM inputs) and its
ratio to torch's eager bf16, and against fp32: the mean and largest change of a summed 32-token label, and how
often the best candidate (the oracle's pick, on the targets y) and the zero-shot pick (on y') are the same.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ralm.data_gen.prefixes import PrefixTokens
from ralm.data_gen.scoring import score_prefix
from ralm.lm.loading import FrozenLM, load_lm
from ralm.lm.scoring import ScoringSettings


@dataclass
class LlamaCppLM:
    """The torch LM's tokenizer and protocol members, with ``logits`` computed by llama.cpp on a GGUF file."""

    tokenized_by: FrozenLM
    gguf: str
    threads: int
    input_length: int

    def __post_init__(self) -> None:
        import llama_cpp

        self._lib = llama_cpp
        self._llm = llama_cpp.Llama(
            self.gguf,
            n_ctx=self.input_length,
            n_batch=self.input_length,
            n_ubatch=self.input_length,
            n_threads=self.threads,
            n_threads_batch=self.threads,
            verbose=False,
        )
        self._vocab = self._llm.n_vocab()

    def __getattr__(self, name: str):  # tokenizer, lead, device, ...: the torch LM's
        return getattr(self.tokenized_by, name)

    def logits(self, input_ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        lib, ctx = self._lib, self._llm.ctx
        out = np.empty((*positions.shape, self._vocab), dtype=np.float32)
        for row, (ids, wanted) in enumerate(zip(input_ids.tolist(), positions.tolist(), strict=True)):
            length = max(wanted) + 1  # right padding after the last scored position is never fed
            lib.llama_memory_clear(lib.llama_get_memory(ctx), True)
            batch = lib.llama_batch_init(length, 0, 1)
            scored = set(wanted)
            for i in range(length):
                batch.token[i], batch.pos[i], batch.n_seq_id[i] = ids[i], i, 1
                batch.seq_id[i][0] = 0
                batch.logits[i] = i in scored
            batch.n_tokens = length
            try:
                if lib.llama_decode(ctx, batch) != 0:
                    raise RuntimeError(f"llama_decode failed on a {length}-token input")
                for j, position in enumerate(wanted):
                    pointer = lib.llama_get_logits_ith(ctx, position)
                    out[row, j] = np.ctypeslib.as_array(pointer, shape=(self._vocab,))
            finally:
                lib.llama_batch_free(batch)
        return torch.from_numpy(out)


def data_gen_prefixes(lm: FrozenLM, folder: Path, n: int, query_tokens: int):
    """(PrefixTokens, candidate passages) of the first `n` rows of a data-gen folder, re-encoded."""
    from datasets import load_from_disk

    rows = load_from_disk(str(folder)).select(range(n))
    out = []
    for row in rows:
        prefix = lm.encode(row["prefix"])
        tokens = PrefixTokens(prefix, lm.encode(row["target"]), prefix[-query_tokens:])
        out.append((tokens, lm.encode_passages(row["candidate_texts"])))
    return out


def score_in_turns(
    engines: dict, prefixes: list, settings: ScoringSettings, rounds: int = 1, warm_rounds: int = 0
):
    """Each engine's ``score_prefix`` of every (PrefixTokens, passages), the engines taking turns prefix by
    prefix so a change in the machine's load hits them alike, after one warm-up each (or `warm_rounds`
    untimed rounds over every prefix, which compile every input shape a compiled engine meets): ({name: the
    first timed round's PrefixScores per prefix}, {name: seconds over the timed rounds}, {name: warm-up
    seconds})."""
    warm = dict.fromkeys(engines, 0.0)
    for name, engine in engines.items():
        start = time.perf_counter()
        for tokens, passages in prefixes * warm_rounds if warm_rounds else prefixes[:1]:
            score_prefix(engine, tokens, passages, settings)
        warm[name] = time.perf_counter() - start
    scored = {name: [] for name in engines}
    seconds = dict.fromkeys(engines, 0.0)
    for round_ in range(rounds):
        for tokens, passages in prefixes:
            for name, engine in engines.items():
                start = time.perf_counter()
                scores = score_prefix(engine, tokens, passages, settings)
                seconds[name] += time.perf_counter() - start
                if round_ == 0:
                    scored[name].append(scores)
    return scored, seconds, warm


def _labels(scores) -> tuple[list[float], list[float]]:
    """(summed target label per candidate and no passage, y' score per candidate)."""
    return [sum(t) for t in [*scores.candidates, scores.no_retrieval]], list(scores.candidates_rank)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="a finished ralm data-gen folder")
    parser.add_argument("--lm", default=None, help="default: the demo's Gemma-3-270m Q4_K_M file")
    parser.add_argument("--gguf", nargs="*", default=None, help="llama.cpp's files (default: --lm)")
    parser.add_argument("--prefixes", type=int, default=24)
    parser.add_argument("--rounds", type=int, default=2, help="times each prefix is scored by each engine")
    parser.add_argument(
        "--compiled", action="store_true", help="add torch bf16 through torch.compile (LMOptions.compile)"
    )
    parser.add_argument("--warm-rounds", type=int, default=0, help="untimed rounds over every prefix first")
    args = parser.parse_args()
    from ralm.pipeline.models import default_lm

    config = json.loads((args.data / "ralm_data_gen.json").read_text())["config"]
    settings = ScoringSettings(
        input_length=config["max_length"],
        max_passage_tokens=config["max_passage_tokens"],
        rank_tokens=config["rank_tokens"],
    )
    lm_path = args.lm or default_lm()
    engines = {f"torch {d}": load_lm(lm_path, dtype=d, device="cpu") for d in ("fp32", "bf16")}
    if args.compiled:
        engines["torch bf16, compiled"] = load_lm(lm_path, dtype="bf16", device="cpu", compile=True)
    reference = engines["torch fp32"]
    threads = torch.get_num_threads()
    for gguf in args.gguf if args.gguf is not None else [lm_path]:
        engines[f"llama.cpp {Path(gguf).name}"] = LlamaCppLM(reference, gguf, threads, settings.input_length)
    prefixes = data_gen_prefixes(reference, args.data, args.prefixes, config["l"])
    k = len(prefixes[0][1])
    print(
        f"{len(prefixes)} data-gen prefixes of {args.data} x ({k} candidates + no passage), input "
        f"{settings.input_length} tokens, passages cut at {settings.max_passage_tokens}, {threads} threads, "
        f"torch CPU capability {torch.backends.cpu.get_cpu_capability()}, {args.rounds} timed rounds"
    )
    scored, seconds, warm = score_in_turns(engines, prefixes, settings, args.rounds, args.warm_rounds)
    print("warm-up s: " + ", ".join(f"{name} {s:.0f}" for name, s in warm.items()))
    labels = {name: [_labels(s) for s in scores] for name, scores in scored.items()}
    pairs = args.rounds * len(prefixes) * k
    eager_bf16 = seconds["torch bf16"]
    print(
        f"{'engine':<40} {'pairs/s':>8} {'vs torch bf16':>13} {'label change mean / max':>24} "
        f"{'best same':>10} {'zero-shot same':>15}"
    )
    for name in engines:
        changes, best, zero = [], 0, 0
        for (ref, ref_rank), (got, got_rank) in zip(labels["torch fp32"], labels[name], strict=True):
            changes += [abs(a - b) for a, b in zip(ref, got, strict=True)]
            best += int(np.argmax(ref[:k]) == np.argmax(got[:k]))
            zero += int(np.argmax(ref_rank) == np.argmax(got_rank))
        n = len(prefixes)
        print(
            f"{name:<40} {pairs / seconds[name]:8.2f} {eager_bf16 / seconds[name]:12.2f}x "
            f"{np.mean(changes):13.3f} / {max(changes):.3f} {best:>5} / {n} {zero:>9} / {n}"
        )


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    main()
