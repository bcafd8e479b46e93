"""`ralm prepare wikitext103`: WikiText-103 into the files the paper's configs read.

ralm prepare wikitext103 --output data/wikitext103                      # from the hub (needs network)
ralm prepare wikitext103 --output data/wikitext103 --source ./wikitext  # a saved copy
                                                                        # (save_to_disk or parquet)

Writes ``OUTPUT/train.jsonl``, ``OUTPUT/validation.jsonl`` and ``OUTPUT/test.jsonl`` (one article per line:
``{"id", "title", "text"}``, for ``ralm passages``/``ralm index``/``ralm data-gen``), ``OUTPUT/test`` and
``OUTPUT/validation`` (the split's rows as a ``datasets`` folder: what ``ralm eval ppl --text`` reads, joined
exactly as eval_lm.py joins them), ``OUTPUT/eval_titles.txt`` (the validation and test titles, one per line:
``--exclude-file`` for a Wikipedia index) and ``OUTPUT/prepare.json`` (source, counts).
"""

from __future__ import annotations

import os
from pathlib import Path

from ralm.atomic_files import (
    ensure_writable_dir,
    publish_dir,
    write_json_atomic,
    write_jsonl_atomic,
    write_text_atomic,
)
from ralm.cli.command_args import call_with_args, parser_for
from ralm.corpora.wikitext import HUB_CONFIG, HUB_ID, SPLITS, articles
from ralm.errors import RalmInputError

_OFFLINE_FIX = (
    "download it where the hub is reachable (`ralm prepare wikitext103` there, or "
    f"datasets.load_dataset('{HUB_ID}', '{HUB_CONFIG}').save_to_disk(DIR)) and pass --source DIR"
)


def _offline() -> bool:
    return any(
        os.environ.get(v, "").lower() in ("1", "true", "yes")
        for v in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")
    )


def load_splits(source: str) -> dict:
    """The three splits as ``datasets.Dataset``s with a ``text`` column; every failure names its fix."""
    import datasets

    if source == "hub":
        if _offline():
            raise RalmInputError(
                f"--source hub: the hub is switched off here (HF_HUB_OFFLINE); {_OFFLINE_FIX}"
            )
        try:
            data = datasets.load_dataset(HUB_ID, HUB_CONFIG)
        except (ConnectionError, OSError) as err:
            raise RalmInputError(
                f"--source hub: cannot reach {HUB_ID} ({type(err).__name__}); {_OFFLINE_FIX}"
            ) from None
    else:
        path = Path(source)
        if (path / "dataset_dict.json").is_file():
            data = datasets.load_from_disk(str(path))
        elif path.is_dir():
            files = {
                s: sorted(str(p) for p in path.rglob(f"{s}-*.parquet"))
                or sorted(str(p) for p in path.rglob(f"{s}.parquet"))
                for s in SPLITS
            }
            missing = [s for s, f in files.items() if not f]
            if missing:
                raise RalmInputError(
                    f"--source {source}: no save_to_disk DatasetDict and no parquet files "
                    f"for split(s) {missing} "
                    "(expected SPLIT-*.parquet or SPLIT.parquet, as on the hub)"
                )
            data = datasets.load_dataset("parquet", data_files=files)
        else:
            raise RalmInputError(f"--source {source}: no such folder (or use --source hub)")
    for split in SPLITS:
        if split not in data:
            raise RalmInputError(f"--source {source}: no {split!r} split (found {sorted(data)})")
        if "text" not in data[split].column_names:
            raise RalmInputError(
                f"--source {source}: split {split!r} has no 'text' column ({data[split].column_names})"
            )
    return {split: data[split] for split in SPLITS}


def prepare_wikitext103(output: Path = Path("data/wikitext103"), source: str = "hub") -> dict:
    """WikiText-103 (raw) as articles and as eval_lm.py's test text.

    Args:
        output: Folder to write (see the module docstring for its files).
        source: ``hub`` (Salesforce/wikitext, wikitext-103-raw-v1; needs network) or a local copy: a
            ``save_to_disk`` DatasetDict folder, or a folder of the hub's parquet files.
    """
    splits = load_splits(source)  # before anything is written
    ensure_writable_dir(output)
    counts, eval_titles = {}, []
    for split, data in splits.items():
        docs = list(articles(data["text"], split))
        counts[split] = {"rows": len(data), "articles": len(docs)}
        write_jsonl_atomic(output / f"{split}.jsonl", docs, ensure_ascii=False)
        if split != "train":
            eval_titles += [d["title"] for d in docs if d["title"]]
            partial = output / f".{split}.partial-{os.getpid()}"
            data.select_columns(["text"]).save_to_disk(str(partial))
            publish_dir(partial, output / split)
        print(f"{split}: {counts[split]['rows']:,} rows -> {counts[split]['articles']:,} articles")
    write_text_atomic(output / "eval_titles.txt", "".join(f"{t}\n" for t in dict.fromkeys(eval_titles)))
    info = {"source": source if source != "hub" else f"{HUB_ID}/{HUB_CONFIG}", "splits": counts}
    write_json_atomic(output / "prepare.json", info)
    print(
        f"wrote {output}: train.jsonl (data-gen, index), test (eval ppl --text), "
        "eval_titles.txt (--exclude-file)"
    )
    return info


def build_parser():
    return parser_for(prepare_wikitext103, prog="ralm prepare wikitext103", renamed={"out": "output"})


def main(argv: list[str] | None = None) -> None:
    call_with_args(prepare_wikitext103, build_parser(), argv)
