"""How many of a data-gen folder's labels a learner could tell apart from label noise.

    .venv/bin/python bench/label_noise.py RUN/rerank-data-KEY [--noise 0.44]

Each row holds the frozen LM's log-prob of the prefix's targets under each of its k candidates and with no
passage. Labels that differ by less than the noise of the labelling itself carry no preference a reranker
could learn: `--noise` defaults to the mean change bf16 made to a 32-token label against fp32 on the demo's
rows, 0.44 nats (bench/RESULTS.md, "bf16 labels on a CPU without native bf16": Gemma-3-270m, the Xeon with
AMX, 12 prefixes). Per prefix: the spread of its k labels (best minus worst; with the no-passage label too)
and the gap between its best two. Prints the share of prefixes whose spread, or gap, is within the noise,
and their medians: a rule that drops or down-weights such prefixes would remove the first share.
"""

from __future__ import annotations

import argparse

import datasets
import numpy as np


def spreads_and_gaps(labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row of `labels` (prefixes x candidates): best minus worst, and best minus second best."""
    ordered = np.sort(labels, axis=1)
    return ordered[:, -1] - ordered[:, 0], ordered[:, -1] - ordered[:, -2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("data", help="a ralm data-gen folder")
    parser.add_argument("--noise", type=float, default=0.44, help="label noise in nats per target")
    args = parser.parse_args()
    rows = datasets.load_from_disk(args.data)
    candidates = np.array(rows["lm_logprobs"], dtype=float)
    labels = {"k candidates": candidates}
    if "no_retrieval_logprob" in rows.column_names:
        none = np.array(rows["no_retrieval_logprob"], dtype=float)[:, None]
        labels["k candidates and no passage"] = np.concatenate([candidates, none], axis=1)
    print(f"{len(rows)} prefixes, k = {candidates.shape[1]}, noise {args.noise} nats per target")
    header = ("spread within noise", "median spread", "best-two gap within noise", "median gap")
    print(f"{'labels':<29} " + "  ".join(header))
    for name, values in labels.items():
        spread, gap = spreads_and_gaps(values)
        print(
            f"{name:<29} {np.mean(spread < args.noise):>19.1%}  {np.median(spread):>13.2f}  "
            f"{np.mean(gap < args.noise):>25.1%}  {np.median(gap):>10.2f}"
        )


if __name__ == "__main__":
    main()
