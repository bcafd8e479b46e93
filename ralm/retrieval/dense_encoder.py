"""Any Hugging Face encoder as a passage/query embedder: mean pooling (as RETRO's BERT) or the CLS vector.

Device and dtype are chosen at run time: CUDA with bfloat16 when available, else CPU with float32.
Embeddings always come back as float32 numpy arrays (what FAISS takes).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
import torch

from ralm.devices import resolve_device, resolve_dtype
from ralm.errors import RalmInputError
from ralm.progress import library_bars_quiet_in_logs

Pooling = Literal["mean", "cls"]


def pool(hidden: torch.Tensor, mask: torch.Tensor, pooling: Pooling) -> torch.Tensor:
    """(batch, seq, dim) hidden states -> (batch, dim): masked mean over real tokens, or position 0."""
    if pooling == "cls":
        return hidden[:, 0]
    weights = mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1e-9)


class DenseEncoder:
    """Encodes texts with a frozen HF encoder; `name_or_path` is a hub id or a local folder."""

    def __init__(
        self,
        name_or_path: str,
        pooling: Pooling = "mean",
        normalize: bool = False,
        encoder_max_length: int = 256,
        device: str = "auto",
    ) -> None:
        from transformers import AutoModel, AutoTokenizer

        if pooling not in ("mean", "cls"):
            raise RalmInputError(f"pooling: {pooling!r} is not 'mean' or 'cls'")
        self.device = resolve_device(device)
        self.dtype = resolve_dtype("auto", self.device)
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(name_or_path)
            with library_bars_quiet_in_logs():
                self.model = AutoModel.from_pretrained(name_or_path, dtype=self.dtype).to(self.device).eval()
        except OSError as err:
            raise RalmInputError(
                f"encoder: cannot load {name_or_path!r} ({str(err).splitlines()[0]})"
            ) from None
        self.pooling, self.normalize = pooling, normalize
        self.encoder_max_length = encoder_max_length
        """Tokens per text; longer ones are truncated (``ralm index --dense.encoder-max-length``)."""
        self.dim = int(self.model.config.hidden_size)

    @torch.inference_mode()
    def encode(self, texts: Sequence[str], batch_size: int = 32, progress=None) -> np.ndarray:
        """(len(texts), dim) float32 embeddings, L2-normalised if `normalize` (then inner product = cosine).

        `progress` (a tqdm bar) advances by each batch's size.
        """
        out = []
        for start in range(0, len(texts), batch_size):
            batch = self.tokenizer(
                list(texts[start : start + batch_size]),
                padding=True,
                truncation=True,
                max_length=self.encoder_max_length,
                return_tensors="pt",
            ).to(self.device)
            hidden = self.model(**batch).last_hidden_state
            vectors = pool(hidden, batch["attention_mask"], self.pooling).float()
            if self.normalize:
                vectors = torch.nn.functional.normalize(vectors, dim=-1)
            out.append(vectors.cpu().numpy())
            if progress is not None:
                progress.update(len(vectors))
        return np.concatenate(out) if out else np.zeros((0, self.dim), np.float32)
