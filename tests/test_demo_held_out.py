"""`ralm run`'s leak rule (ralm.pipeline.held_out): which documents of the corpus and the training text are
copies of the eval documents, for each form of eval text, on hand-made files."""

from __future__ import annotations

import json
from pathlib import Path

from ralm.pipeline.held_out import eval_documents, leave_out_eval_documents
from ralm.pipeline.texts import user_texts

GENESIS = "In the beginning God created the heaven and the earth. And the earth was without form, and void."
EXODUS = (
    "Now these are the names of the children of Israel, which came into Egypt; every man and his household."
)
NUMBERS = "And the LORD spake unto Moses in the wilderness of Sinai, in the tabernacle of the congregation."


def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_copies_by_id_title_or_whole_text_leave_the_corpus_and_the_training_text(tmp_path):
    eval_text = _jsonl(
        tmp_path / "eval.jsonl",
        [
            {"id": "gen", "title": "Genesis", "text": GENESIS},
            {"id": "exo", "title": "Exodus", "text": EXODUS},
        ],
    )
    corpus = _jsonl(
        tmp_path / "corpus.jsonl",
        [
            {"id": "gen", "title": "Genesis (KJV)", "text": "another translation"},  # same id
            {"id": "kjv-2", "title": "Exodus", "text": "another translation"},  # same title
            {
                "id": "mirror-1",
                "title": "Mirror",
                "text": GENESIS.replace(" ", "\n  "),
            },  # same text, re-wrapped
            {"id": "mirror-2", "title": "Mirror", "text": GENESIS[:40]},  # part of it only: not found
            {"id": "num", "title": "Numbers", "text": NUMBERS},
        ],
    )
    left = leave_out_eval_documents(user_texts(str(corpus), None, str(eval_text), ("re:mirror-.*",)))
    assert left.corpus_copies == ["gen", "kjv-2", "mirror-1"] and left.train_copies == left.corpus_copies
    # The user's rules first, as given, then the copies by id (what `commands.sh` shows).
    assert left.texts.exclude == ("re:mirror-.*", "gen", "kjv-2", "mirror-1")
    assert left.texts.train_exclude == left.texts.exclude  # no --train-text: training is the corpus
    assert left.eval_documents == 2


def test_a_separate_training_text_gets_its_own_copies_and_the_users_rules(tmp_path):
    eval_text = _jsonl(tmp_path / "eval.jsonl", [{"id": "gen", "text": GENESIS}])
    corpus = _jsonl(tmp_path / "corpus.jsonl", [{"id": "num", "title": "Numbers", "text": NUMBERS}])
    train = _jsonl(
        tmp_path / "train.jsonl",
        [
            {"id": "t-1", "title": "Book one", "text": GENESIS},
            {"id": "t-2", "title": "Book two", "text": EXODUS},
        ],
    )
    left = leave_out_eval_documents(user_texts(str(corpus), str(train), str(eval_text), ("t-2",)))
    assert left.corpus_copies == [] and left.train_copies == ["t-1"]
    assert left.texts.exclude == ("t-2",) and left.texts.train_exclude == ("t-2", "t-1")


def test_a_plain_text_eval_file_is_one_document_found_by_its_whole_text(tmp_path):
    eval_text = tmp_path / "held_out.txt"
    eval_text.write_text(GENESIS + "\n\n" + EXODUS + "\n")
    corpus = _jsonl(
        tmp_path / "corpus.jsonl",
        [
            {"id": "whole", "title": "held_out", "text": f"{GENESIS} {EXODUS}"},
            {"id": "part", "title": "p", "text": EXODUS},  # one paragraph of it: name it with --exclude
            {"id": "num", "title": "Numbers", "text": NUMBERS},
        ],
    )
    held_out = eval_documents(eval_text)
    assert held_out.count == 1 and held_out.names == frozenset()
    assert leave_out_eval_documents(user_texts(str(corpus), None, str(eval_text))).corpus_copies == ["whole"]


def test_a_datasets_eval_folder_with_ids_is_read_row_by_row(tmp_path):
    from datasets import Dataset

    folder = tmp_path / "eval_ds"
    Dataset.from_dict({"id": ["gen", "exo"], "text": [GENESIS, EXODUS]}).save_to_disk(str(folder))
    held_out = eval_documents(folder)
    assert held_out.count == 2 and held_out.names == {"gen", "exo"}
    # Without ids the rows are lines of one text (WikiText): one document, the whole text.
    lines = tmp_path / "lines_ds"
    Dataset.from_dict({"text": [GENESIS + "\n", EXODUS + "\n"]}).save_to_disk(str(lines))
    assert eval_documents(lines).count == 1
