"""Dense retrieval: exact inner-product search (FAISS ``IndexFlatIP``) over encoder embeddings.

Passages are encoded in fixed shards written atomically to ``<index>.partial/shards/``; a killed build
resumes from the first missing shard (the shard plan, keyed on the passages hash and encoder settings, must
match or the shards are discarded). With ``gpu_index`` the flat index is built and searched on this
process's GPU (``ralm.devices``) and saved as a CPU index, so any FAISS build opens it; opened with device
``auto`` it moves to the GPU only when a GPU and a GPU build of FAISS are both present. Asking for the GPU
without them is a clear error.

FAISS comes from an extra, never both builds: ``pip install 'ralm[faiss]'`` (CPU, what scripts/setup.sh
installs) or ``pip install 'ralm[gpu]'`` (``faiss-gpu-cu12``); the two wheels install the same module.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import ClassVar, Self

import numpy as np
import torch

from ralm.atomic_files import atomic_path, write_text_atomic
from ralm.errors import RalmInputError

try:
    import faiss
except ImportError:  # an optional dependency: say which extra brings it
    raise RalmInputError(
        "the faiss backend needs FAISS: pip install 'ralm[faiss]' (CPU) or 'ralm[gpu]' (CUDA 12), not both"
    ) from None
from ralm.progress import progress
from ralm.retrieval.dense_encoder import DenseEncoder, Pooling
from ralm.retrieval.passage_store import PassageStore, open_store
from ralm.retrieval.types import Hit, Passage

INDEX_NAME = "faiss.index"
SHARD_DIR = "shards"


def gpu_faiss_available() -> bool:
    return torch.cuda.is_available() and hasattr(faiss, "StandardGpuResources") and faiss.get_num_gpus() > 0


def require_gpu_faiss(where: str) -> None:
    if not torch.cuda.is_available():
        raise RalmInputError(f"{where}: GPU FAISS index requested but no CUDA GPU is visible")
    if not hasattr(faiss, "StandardGpuResources"):
        raise RalmInputError(
            f"{where}: GPU FAISS index requested but this FAISS has no GPU support (pip install 'ralm[gpu]')"
        )


def flat_index(dim: int, *, on_gpu: bool):
    """An exact inner-product index, on this process's GPU (``torch.cuda.current_device()``) or the CPU."""
    if not on_gpu:
        return faiss.IndexFlatIP(dim)
    config = faiss.GpuIndexFlatConfig()
    config.device = torch.cuda.current_device()
    return faiss.GpuIndexFlatIP(faiss.StandardGpuResources(), dim, config)


def to_gpu(index, gpu: int | None = None):
    """The CPU index copied to GPU `gpu` (default: this process's current one)."""
    gpu = torch.cuda.current_device() if gpu is None else gpu
    return faiss.index_cpu_to_gpu(faiss.StandardGpuResources(), gpu, index)


def _save_shard(path: Path, vectors: np.ndarray) -> None:
    with atomic_path(path, suffix=".npy") as tmp:  # np.save appends .npy to any other name
        np.save(tmp, vectors)


def encode_in_shards(
    encoder: DenseEncoder, texts: Sequence[str], shard_dir: Path, plan: dict, shard_size: int, batch_size: int
) -> np.ndarray:
    """All embeddings, computing only shards not already on disk from an identical earlier plan."""
    plan_path = shard_dir / "plan.json"
    if shard_dir.exists() and (not plan_path.is_file() or json.loads(plan_path.read_text()) != plan):
        shutil.rmtree(shard_dir)  # shards of another corpus or encoder: start over
    shard_dir.mkdir(parents=True, exist_ok=True)
    write_text_atomic(plan_path, json.dumps(plan))  # a torn plan would read as another corpus
    starts = range(0, len(texts), shard_size)
    done = sum((shard_dir / f"emb-{i:05d}.npy").exists() for i in range(len(starts)))
    if done:
        print(f"faiss: resuming, {done}/{len(starts)} shards already encoded")
    shards = []
    with progress(len(texts), desc="faiss: encoding", unit="passage") as bar:
        for i, start in enumerate(starts):
            path = shard_dir / f"emb-{i:05d}.npy"
            if path.exists():
                bar.update(min(shard_size, len(texts) - start))
            else:
                _save_shard(
                    path,
                    encoder.encode(texts[start : start + shard_size], batch_size=batch_size, progress=bar),
                )
            shards.append(np.load(path))
    return np.concatenate(shards)


class FaissRetriever:
    """The faiss backend (``ralm.retrieval.types.IndexBackend``): a FAISS flat inner-product index over
    encoder embeddings; queries are encoded like the passages, hits read from the passages file."""

    build_options: ClassVar[frozenset[str]] = frozenset(
        {
            "encoder",
            "pooling",
            "normalize",
            "encoder_max_length",
            "batch_size",
            "shard_size",
            "device",
            "gpu_index",
        }
    )
    recorded_as: ClassVar[Mapping[str, str]] = {"encoder_max_length": "max_length"}
    open_options: ClassVar[frozenset[str]] = frozenset({"device"})

    @classmethod
    def build(
        cls,
        passages: Sequence[Passage],
        out_dir: Path,
        *,
        passages_path: Path,
        passages_sha256: str,
        encoder: str | None = None,
        pooling: Pooling = "mean",
        normalize: bool = False,
        encoder_max_length: int = 256,
        batch_size: int = 32,
        shard_size: int = 4096,
        device: str = "auto",
        gpu_index: bool = False,
    ) -> dict:
        """Encode passages (``contents``) and write an IndexFlatIP; returns settings for ralm_index.json."""
        if not encoder:
            raise RalmInputError("encoder: the faiss backend needs an encoder (a Hugging Face id or folder)")
        if gpu_index:
            require_gpu_faiss("gpu_index")
        model = DenseEncoder(
            encoder,
            pooling=pooling,
            normalize=normalize,
            encoder_max_length=encoder_max_length,
            device=device,
        )
        # "max_length": the key ralm_index.json has always had (an index's identity is made of its keys).
        settings = {"name": encoder, "pooling": pooling, "normalize": normalize}
        settings["max_length"] = encoder_max_length
        plan = {**settings, "passages_sha256": passages_sha256, "shard_size": shard_size}
        vectors = encode_in_shards(
            model, [p.contents for p in passages], out_dir / SHARD_DIR, plan, shard_size, batch_size
        )
        index = flat_index(vectors.shape[1], on_gpu=gpu_index)
        index.add(np.ascontiguousarray(vectors, dtype=np.float32))
        if gpu_index:
            index = faiss.index_gpu_to_cpu(index)  # saved as a CPU index: every FAISS build reads it
        faiss.write_index(index, str(out_dir / INDEX_NAME))
        shutil.rmtree(out_dir / SHARD_DIR)  # the flat index holds the same vectors
        return {"encoder": {**settings, "dim": int(vectors.shape[1])}, "index": "IndexFlatIP"}

    @classmethod
    def resumable(cls, out_dir: Path) -> bool:
        """Encoded shards survive a killed build: the next one encodes only the missing ones."""
        return any((out_dir / SHARD_DIR).glob("emb-*.npy"))

    @classmethod
    def open(
        cls, index_dir: Path, meta: dict, passages_path: Path | None = None, device: str = "auto"
    ) -> Self:
        """`device`: ``auto``, ``cpu`` or ``cuda`` for the query encoder and the FAISS GPU index."""
        return cls(index_dir, meta, open_store(index_dir, meta, passages_path), device)

    def __init__(self, index_dir: Path, meta: dict, store: PassageStore, device: str = "auto") -> None:
        self.index_dir = str(index_dir)
        self.meta = meta
        self.store = store
        enc = meta["encoder"]
        self.encoder = DenseEncoder(
            enc["name"],
            pooling=enc["pooling"],
            normalize=enc["normalize"],
            encoder_max_length=enc["max_length"],
            device=device,
        )
        index = faiss.read_index(str(Path(index_dir) / INDEX_NAME))
        if device.startswith("cuda"):
            require_gpu_faiss(f"{index_dir}")
        if device != "cpu" and gpu_faiss_available():
            index = to_gpu(index, self.encoder.device.index)  # beside the query encoder
        self.index = index

    def search(self, queries: Sequence[str], k: int, threads: int = 1) -> list[list[Hit]]:
        if not queries:
            return []
        vectors = self.encoder.encode(list(queries))
        # FAISS and torch may share one OpenMP runtime: set its thread count only around the search,
        # or the encoder's later calls inherit it (measured: a 10x slowdown on a busy 2-core machine).
        previous = faiss.omp_get_max_threads()
        faiss.omp_set_num_threads(max(1, threads))
        try:
            scores, rows = self.index.search(vectors, min(k, len(self.store)))
        finally:
            faiss.omp_set_num_threads(previous)
        return [
            [self.store.hit(int(r), float(s)) for r, s in zip(row, score, strict=True) if r >= 0]
            for row, score in zip(rows, scores, strict=True)
        ]
