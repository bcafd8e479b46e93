"""The second target (``--rank-weight``): the LM's preference on y', standardised per prefix, as a KL the
reranker learns from. Checked against numpy, and by training on data whose targets y carry no signal at
all, where only y' can teach the reranker the key word."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ralm.errors import RalmInputError
from ralm.rerank.inference import PredictiveReranker
from ralm.train.losses import MASKED, rank_target_loss, standardized
from ralm.train.settings import EncoderOptions, LoaderOptions, OptimOptions, RunOptions
from ralm.train.train_command import train
from tests.rerank_fixtures import CPU_TRAINER, keyword_rows, save_rows

K = 4


def _numpy_standardized(row: np.ndarray) -> np.ndarray:
    std = row.std()
    return np.zeros_like(row) if std < 1e-6 else (row - row.mean()) / std


def test_standardized_and_the_kl_agree_with_numpy():
    rng = np.random.default_rng(0)
    values = rng.normal(-30.0, 5.0, size=(6, 5))
    values[2] = -7.0  # a prefix whose candidates are all alike: no preference
    mask = np.ones((6, 5), dtype=bool)
    mask[1, 3:] = False
    mask[4, 2:] = False
    scores = rng.normal(0.0, 1.0, size=(6, 5))
    z = standardized(torch.tensor(values), torch.tensor(mask)).numpy()
    tau = 0.7
    expected_loss = 0.0
    for i in range(6):
        real = mask[i]
        want = _numpy_standardized(values[i, real])
        np.testing.assert_allclose(z[i, real], want, rtol=1e-5, atol=1e-5)
        assert (z[i, ~real] == MASKED).all()
        p = np.exp(want / tau - np.logaddexp.reduce(want / tau))
        log_q = scores[i, real] - np.logaddexp.reduce(scores[i, real])
        expected_loss += float((p * (np.log(p) - log_q)).sum())
    loss = rank_target_loss(torch.tensor(scores), torch.tensor(values), torch.tensor(mask), tau)
    assert float(loss) == pytest.approx(expected_loss / 6, rel=1e-5)
    assert z[2].tolist() == [0.0] * 5


def _uninformative_targets(real_documents, n: int, seed: int) -> list[dict]:
    """Key-word rows whose targets y say nothing (every candidate gives y the same log-prob, so the paper's
    loss has no gradient) while y' prefers the key-word candidate."""
    rows = keyword_rows(real_documents, n, k=K, seed=seed)
    for row in rows:
        key = int(np.argmax(row["lm_logprobs"]))
        row["key"] = key
        row["lm_rank_logprobs"] = [-20.0 if i == key else -23.0 for i in range(K)]
        row["no_retrieval_rank_logprob"] = -23.0
        row["lm_logprobs"] = [-10.0] * K
    return rows


def _fit(root, data, tiny_encoder_dir, rank_weight: float) -> dict:
    return train(
        str(data),
        str(root / f"out-{rank_weight}"),
        encoder=EncoderOptions(name=str(tiny_encoder_dir), max_pair_tokens=64, max_prefix_tokens=32),
        loader=LoaderOptions(batch_size=8, val_batch_size=64, val_fraction=0.2),
        optim=OptimOptions(
            lr=3e-3, warmup_steps=15, max_steps=150, weight_decay=0.0, rank_weight=rank_weight
        ),
        run=RunOptions(val_every=100, save_every=100, wandb="off"),
        trainer={**CPU_TRAINER, "log_every_n_steps": 50},
    )


def test_the_y_prime_target_alone_teaches_the_key_word(tmp_path, real_documents, tiny_encoder_dir):
    rows = _uninformative_targets(real_documents, 400, seed=1)
    data = save_rows(rows, tmp_path / "data", meta={"format": "ralm-rerank-data/2", "rank_tokens": 16})
    summary = _fit(tmp_path, data, tiny_encoder_dir, rank_weight=1.0)
    assert summary["config"]["optim"]["rank_weight"] == 1.0
    held_out = _uninformative_targets(real_documents, 200, seed=99)
    reranker = PredictiveReranker.from_pretrained(summary["reranker"])
    scores = reranker.score([r["prefix"] for r in held_out], [r["candidate_texts"] for r in held_out])
    agreement = np.mean([int(np.argmax(s)) == r["key"] for s, r in zip(scores, held_out, strict=True)])
    # Chance is 1/4: a chance-level scorer exceeds 0.36 on 200 prefixes with probability < 0.1%
    # (binomial). The paper's loss alone cannot learn here: every candidate gives y the same log-prob.
    assert agreement >= 0.7, agreement


def test_the_y_prime_target_needs_data_with_y_prime(tmp_path, real_documents, tiny_encoder_dir):
    rows = _uninformative_targets(real_documents, 40, seed=3)
    data = save_rows(rows, tmp_path / "data", drop=("lm_rank_logprobs", "no_retrieval_rank_logprob"))
    with pytest.raises(RalmInputError, match="lm_rank_logprobs"):
        _fit(tmp_path, data, tiny_encoder_dir, rank_weight=1.0)
