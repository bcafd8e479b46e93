"""Dense retrieval: pooling, exact inner-product search against a direct computation, resumable encoding."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from retrieval_fixtures import real_passages_file

from ralm.retrieval.dense_encoder import DenseEncoder, pool
from ralm.retrieval.faiss_backend import encode_in_shards
from ralm.retrieval.index import build_index, open_index
from ralm.retrieval.passages import read_passages


def test_pooling_against_a_loop():
    torch.manual_seed(0)
    hidden = torch.randn(3, 5, 4)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0]])
    expected = torch.stack([hidden[i, : int(mask[i].sum())].mean(0) for i in range(3)])
    assert torch.allclose(pool(hidden, mask, "mean"), expected, atol=1e-6)
    assert torch.equal(pool(hidden, mask, "cls"), hidden[:, 0])


def _reference_embeddings(model_dir, texts, pooling, normalize):
    """Embeddings computed directly with transformers, one text at a time (no padding, no batching)."""
    from transformers import AutoModel, AutoTokenizer

    tok, model = AutoTokenizer.from_pretrained(model_dir), AutoModel.from_pretrained(model_dir).eval()
    out = []
    with torch.no_grad():
        for text in texts:
            enc = tok(text, truncation=True, max_length=256, return_tensors="pt")
            h = model(**enc).last_hidden_state[0]
            v = h.mean(0) if pooling == "mean" else h[0]
            out.append(torch.nn.functional.normalize(v, dim=0) if normalize else v)
    return torch.stack(out).numpy()


@pytest.mark.parametrize(("pooling", "normalize"), [("mean", True), ("cls", False)])
def test_faiss_search_matches_direct_inner_products(
    tmp_path, tiny_encoder_dir, real_documents, pooling, normalize
):
    passages_path = real_passages_file(tmp_path, real_documents[:3], words=60)
    passages = read_passages(passages_path)
    meta = build_index(
        passages_path,
        tmp_path / "idx",
        backend="faiss",
        encoder=str(tiny_encoder_dir),
        pooling=pooling,
        normalize=normalize,
        shard_size=7,
        batch_size=4,
    )
    assert meta["encoder"]["dim"] == 32 and meta["num_passages"] == len(passages)
    assert not (tmp_path / "idx" / "shards").exists() and not (tmp_path / "idx.partial").exists()
    retriever = open_index(tmp_path / "idx")
    queries = [p.text[:200] for p in passages[::7]]
    doc_vecs = _reference_embeddings(tiny_encoder_dir, [p.contents for p in passages], pooling, normalize)
    query_vecs = _reference_embeddings(tiny_encoder_dir, queries, pooling, normalize)
    scores = query_vecs @ doc_vecs.T
    for q, hits in enumerate(retriever.search(queries, k=5, threads=2)):
        best = np.argsort(-scores[q], kind="stable")[:5]
        assert [h.score for h in hits] == pytest.approx(scores[q][best].tolist(), rel=1e-3, abs=1e-3)
        row_of = {p.id: i for i, p in enumerate(passages)}
        # the top hit is a best passage (a random tiny encoder makes near-ties, so compare scores, not ids)
        assert scores[q][row_of[hits[0].id]] == pytest.approx(scores[q].max(), rel=1e-3, abs=1e-3)


class _DyingEncoder:
    """Stands in for a run killed after `limit` shards: encodes like the real one, then raises."""

    def __init__(self, real: DenseEncoder, limit: int) -> None:
        self.real, self.limit, self.calls = real, limit, 0

    def encode(self, texts, batch_size=32, progress=None):
        self.calls += 1
        if self.calls > self.limit:
            raise KeyboardInterrupt("killed")
        return self.real.encode(texts, batch_size, progress)


def test_killed_encoding_resumes_from_the_first_missing_shard(tmp_path, tiny_encoder_dir, real_documents):
    texts = [p.contents for p in read_passages(real_passages_file(tmp_path, real_documents[:2], words=40))][
        :45
    ]
    real = DenseEncoder(str(tiny_encoder_dir))
    plan = {"corpus": "test", "shard_size": 10}
    shard_dir = tmp_path / "shards"
    with pytest.raises(KeyboardInterrupt):
        encode_in_shards(_DyingEncoder(real, 2), texts, shard_dir, plan, 10, 4)
    assert len(list(shard_dir.glob("emb-*.npy"))) == 2
    counting = _DyingEncoder(real, 10**6)
    vectors = encode_in_shards(counting, texts, shard_dir, plan, 10, 4)
    assert counting.calls == -(-len(texts) // 10) - 2  # only the missing shards were encoded
    np.testing.assert_allclose(vectors, real.encode(texts, 4), rtol=1e-5, atol=1e-6)
    # another plan (different corpus or encoder settings) discards the old shards
    again = _DyingEncoder(real, 10**6)
    encode_in_shards(again, texts, shard_dir, {**plan, "corpus": "other"}, 10, 4)
    assert again.calls == -(-len(texts) // 10)


@pytest.mark.slow
def test_minilm_ranks_the_source_passage_of_a_paraphrase_first(tmp_path, minilm_dir, real_documents):
    docs = {d["id"]: d for d in real_documents}
    chosen = [
        docs[m] for m in ("heapq", "json", "zipfile", "csv", "statistics", "uuid", "gzip", "wave", "shelve")
    ]
    passages_path = real_passages_file(tmp_path, chosen)
    build_index(
        passages_path,
        tmp_path / "idx",
        backend="faiss",
        encoder=str(minilm_dir),
        pooling="mean",
        normalize=True,
    )
    retriever = open_index(tmp_path / "idx")
    paraphrases = {
        (
            "a priority queue kept as a binary tree in a list, where the smallest item always comes out first"
        ): "heapq",
        "turning Python objects into the JavaScript object text format and parsing it back": "json",
        "reading and writing compressed archive files that bundle many files together": "zipfile",
        "reading and writing spreadsheet rows stored as comma separated values": "csv",
        "universally unique identifiers, random 128-bit ids": "uuid",
        "opening audio files in the RIFF sound format and reading their frames": "wave",
    }
    hits = retriever.search(list(paraphrases), k=3)
    got = {q: h[0].doc_id for q, h in zip(paraphrases, hits, strict=True)}
    assert got == paraphrases


@pytest.mark.gpu
def test_cuda_bf16_encoding_ranks_like_cpu(tmp_path, minilm_dir, real_documents):
    import faiss

    passages_path = real_passages_file(tmp_path, real_documents[:10])
    options = {"encoder": str(minilm_dir), "pooling": "mean", "normalize": True}
    build_index(passages_path, tmp_path / "cpu", backend="faiss", device="cpu", **options)
    build_index(passages_path, tmp_path / "gpu", backend="faiss", device="cuda", **options)
    queries = [p.text[:300] for p in read_passages(passages_path)[::5]]
    cpu = open_index(tmp_path / "cpu", device="cpu").search(queries, 1)
    gpu_retriever = open_index(tmp_path / "gpu", device="cuda")
    assert gpu_retriever.encoder.dtype == torch.bfloat16
    gpu = gpu_retriever.search(queries, 1)
    same = sum(a[0].id == b[0].id for a, b in zip(cpu, gpu, strict=True))
    assert same >= 0.95 * len(queries)  # bf16 embeddings: the same top passage for nearly every query
    if not hasattr(faiss, "StandardGpuResources"):
        from ralm.errors import RalmInputError

        with pytest.raises(RalmInputError, match="no GPU support"):
            build_index(passages_path, tmp_path / "x", backend="faiss", gpu_index=True, **options)
    else:  # built on the GPU, saved as a CPU index: the same exact search as the CPU-built one
        build_index(
            passages_path, tmp_path / "gpuidx", backend="faiss", device="cuda", gpu_index=True, **options
        )
        on_gpu = open_index(tmp_path / "gpuidx", device="cuda").search(queries, 1)
        assert [h[0].id for h in on_gpu] == [h[0].id for h in gpu]
