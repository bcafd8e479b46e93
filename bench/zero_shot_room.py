"""Does the frozen LM's zero-shot score find the room BM25 leaves, where text features did not?

    OMP_NUM_THREADS=2 .venv/bin/python bench/zero_shot_room.py RUN/rerank-data-XXXXXXXX --lm LM.gguf \
        [--dtype bf16] [--rank-tokens 16] [--folds 5] [--seed 0] [--cache scores.npz]

``bench/rerank_room.py`` showed that linear rules over BM25's score and cheap text features recover none of
the room between BM25's top-1 and the best of k. The one signal that found part of it on a test set is the
LM itself: the zero-shot rerank of §6.1, which orders the candidates by the LM's log-probability of the
last ``--rank-tokens`` prefix tokens y' given [passage; the prefix before them]. This script scores y' for
every candidate of a data-gen folder (and with no passage), in the context data-gen gave the targets (the
passage cut at the run's ``max_passage_tokens``, the input ``max_length - s`` tokens so that y' sees
exactly what precedes it in data-gen's input), and prints, in nats per target (paired bootstrap 95%
intervals, documents as blocks):

- the zero-shot pick against BM25's top-1 on the training prefixes (no fit: the rule ``eval ppl`` reports);
- the within-prefix correlation of the y' score with the target log-prob;
- cross-fitted linear rules over (BM25 z, zero-shot z) and the text features of ``rerank_room``, fitted
  with the paper's marginal loss on the other folds of documents and judged on their own fold.

The prefix text is re-tokenized from the folder's decoded ``prefix`` (data-gen keeps no token ids), which can
differ from data-gen's tokens at a few merges; a diagnostic on training books only, it chooses nothing.
"""

from __future__ import annotations

import argparse
import json
import os

import numpy as np
from rerank_room import (
    FEATURES,
    cross_fitted_picks,
    features,
    interval,
    load_groups,
    print_pick,
    within_prefix_correlations,
)

from ralm.data_gen.scoring import PassageTokens
from ralm.lm.loading import load_lm
from ralm.lm.scoring import ScoreRequest, ScoringSettings, score_continuations
from ralm.rerank.inputs import bm25_prior
from ralm.retrieval.types import Hit


def rank_requests(lm, rows: list[dict], rank_tokens: int, max_passage_tokens: int) -> list[ScoreRequest]:
    """Per row: one request per candidate, then one with no passage (the LM's lead first, as data-gen); y' =
    the prefix's last tokens. The passages are cut by data-gen's own rule (``PassageTokens``), so they are
    the tokens its labels saw."""
    passage_tokens = PassageTokens(lm, max_passage_tokens)
    prefixes = lm.encode_batch([r["prefix"] for r in rows])
    out = []
    for row, prefix in zip(rows, prefixes, strict=True):
        context, y = tuple(prefix[:-rank_tokens]), tuple(prefix[-rank_tokens:])
        hits = [
            Hit(id=pid, score=score, contents=text, title="", doc_id=doc)
            for pid, score, text, doc in zip(
                row["candidate_ids"],
                row["bm25_scores"],
                row["candidate_texts"],
                row["candidate_doc_ids"],
                strict=True,
            )
        ]
        out += [ScoreRequest(tuple(p), context, y) for p in passage_tokens(hits)]
        out.append(ScoreRequest((), context, y, tuple(lm.lead)))  # no passage: the LM's lead (its BOS) first
    return out


def zero_shot_scores(args, rows: list[dict], meta: dict) -> np.ndarray:
    """(prefixes, k + 1) summed log-prob of y' given each candidate, then given no passage; kept in
    ``--cache`` with the settings that made them, and a cache made with other settings is refused."""
    # The data's mode of special tokens decides how its no-passage row starts (ralm.lm.special_tokens).
    mode = meta["config"].get("special_tokens", "every-input")
    settings = np.array([os.path.abspath(args.data), args.lm, args.dtype, str(args.rank_tokens), mode])
    if args.cache and os.path.exists(args.cache):
        saved = np.load(args.cache)
        if "settings" not in saved or list(saved["settings"]) != list(settings):
            raise SystemExit(f"{args.cache}: made with other settings; remove it or name another --cache")
        return saved["scores"]
    lm = load_lm(args.lm, device="cpu", dtype=args.dtype, special_tokens=mode)
    requests = rank_requests(lm, rows, args.rank_tokens, meta["max_passage_tokens"])
    # max_length - s: passage + context + y' end where data-gen's input ends before its s targets.
    settings = ScoringSettings(
        input_length=meta["max_length"] - meta["s"], max_passage_tokens=meta["max_passage_tokens"]
    )
    logprobs = score_continuations(lm, requests, settings)
    scores = np.array([float(lp.sum()) for lp in logprobs]).reshape(len(rows), -1)
    if args.cache:
        np.savez(args.cache, scores=scores, settings=settings)
    return scores


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("data", help="a data-gen output folder")
    parser.add_argument("--lm", required=True, help="the LM data-gen used (a .gguf file or HF folder)")
    parser.add_argument("--dtype", default="bf16")
    parser.add_argument("--rank-tokens", type=int, default=16, help="y': eval ppl's --rank-tokens")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cache", help="an .npz file keeping the y' scores between runs")
    args = parser.parse_args()
    with open(os.path.join(args.data, "ralm_data_gen.json")) as f:
        meta = json.load(f)
    rows, docs, logprobs, total = load_groups(args.data)
    scores = zero_shot_scores(args, rows, meta)
    rank, none = scores[:, :-1], scores[:, -1]
    print(
        f"{len(rows)} prefixes with all {logprobs.shape[1]} candidates (of {total}), {len(set(docs))} "
        f"documents; y' = the last {args.rank_tokens} prefix tokens; nats per target, 95% intervals"
    )
    best = logprobs.max(axis=1)
    print(f"room: best of k - BM25 top-1 {interval(best, logprobs[:, 0], docs)}")
    picks = np.argmax(rank, axis=1)
    lm_best = np.mean(picks == np.argmax(logprobs, axis=1))
    print(f"zero-shot pick (nothing fitted), the LM's best on the targets on {lm_best:.0%} of prefixes:")
    print_pick("zero-shot pick", picks, logprobs, docs)
    corr = within_prefix_correlations(rank, logprobs)
    print(f"within-prefix correlation of the y' score and the target log-prob: mean {np.mean(corr):+.3f}")
    print(f"y' given BM25's top-1 - given no passage: {np.mean(rank[:, 0] - none):+.3f} nats")
    zs = np.array([bm25_prior(list(r)) for r in rank])  # the same within-group z as BM25's prior
    feats = np.concatenate([np.stack([features(r) for r in rows]), zs[:, :, None]], axis=2)
    print(f"cross-fitted rules ({args.folds} folds of documents), pick - BM25 top-1:")
    z_col = len(FEATURES)  # the zero-shot z follows rerank_room's features
    for label, columns in (
        ("zero-shot z", [z_col]),
        ("bm25 z + zero-shot z", [0, z_col]),
        ("all six", list(range(z_col + 1))),
    ):
        picks = cross_fitted_picks(feats, logprobs, docs, columns, args.folds, args.seed)
        print_pick(label, picks, logprobs, docs)


if __name__ == "__main__":
    main()
