"""Passages: 100-word DPR-style splitting, the three document readers, exclusion, JSONL round trip."""

from __future__ import annotations

import json

import pytest
from retrieval_fixtures import write_jsonl

from ralm.retrieval.passages import read_documents, read_passages, split_passages, write_passages


def test_split_is_non_overlapping_and_covers_every_word(real_documents):
    passages = list(split_passages(real_documents, words=100))
    by_doc: dict[str, list] = {}
    for p in passages:
        by_doc.setdefault(p.doc_id, []).append(p)
    assert set(by_doc) == {d["id"] for d in real_documents}
    for doc in real_documents:
        words = doc["text"].split()
        parts = by_doc[doc["id"]]
        # independent reference: ceil(len / 100) passages whose texts concatenate back to the word list
        assert len(parts) == -(-len(words) // 100)
        assert [p.id for p in parts] == [f"{doc['id']}-{n}" for n in range(len(parts))]
        assert " ".join(p.text for p in parts).split() == words
        assert all(len(p.text.split()) == 100 for p in parts[:-1]) and 1 <= len(parts[-1].text.split()) <= 100
        assert all(p.contents == f"{doc['title']}\n{p.text}" and p.title == doc["title"] for p in parts)


def test_exclude_by_title_or_id_and_report_counts(real_documents):
    first, second = real_documents[0], real_documents[1]
    stats: dict = {}
    passages = list(
        split_passages(
            real_documents, words=50, exclude=[first["title"], second["id"], "no-such-doc"], stats=stats
        )
    )
    assert {p.doc_id for p in passages} == {d["id"] for d in real_documents[2:]}
    assert stats["excluded"] == 2 and stats["documents"] == len(real_documents)
    assert stats["passages"] == len(passages) and stats["unmatched_exclude"] == ["no-such-doc"]


def test_three_readers_give_the_same_documents(tmp_path, real_documents):
    import datasets

    docs = real_documents[:5]
    from_jsonl = list(read_documents(write_jsonl(tmp_path / "d.jsonl", docs)))
    folder = tmp_path / "txt"
    folder.mkdir()
    for d in docs:
        (folder / f"{d['title']}.txt").write_text(d["text"], encoding="utf-8")
    from_folder = list(read_documents(folder))
    datasets.Dataset.from_list(docs).save_to_disk(str(tmp_path / "ds"))
    from_datasets = list(read_documents(tmp_path / "ds"))
    expected = [{"id": d["id"], "title": d["title"], "text": d["text"]} for d in docs]
    assert from_jsonl == expected and from_datasets == expected
    assert sorted(from_folder, key=lambda d: d["id"]) == sorted(expected, key=lambda d: d["id"])


def test_pyserini_style_contents_record_keeps_title(tmp_path):
    path = write_jsonl(tmp_path / "d.jsonl", [{"id": "a", "contents": "Title A\nbody words here"}])
    assert list(read_documents(path)) == [{"id": "a", "title": "Title A", "text": "body words here"}]


def test_write_read_round_trip_matches_formats_md(tmp_path, real_documents):
    passages = list(split_passages(real_documents[:3]))
    out = tmp_path / "p.jsonl"
    assert write_passages(passages, out) == len(passages)
    assert read_passages(out) == passages
    first = json.loads(out.read_text().splitlines()[0])
    assert set(first) == {"id", "contents", "title", "doc_id"}


def test_words_must_be_positive(real_documents):
    from ralm.errors import RalmInputError

    with pytest.raises(RalmInputError, match="words"):
        list(split_passages(real_documents, words=0))


def test_overlapping_passages_start_every_stride_words_and_cover_the_text(real_documents):
    words_per, stride = 64, 32
    passages = list(split_passages(real_documents, words=words_per, stride=stride))
    for doc in real_documents:
        words = doc["text"].split()
        parts = [p for p in passages if p.doc_id == doc["id"]]
        # independent reference: passage n is words[32n : 32n + 64], and passages stop once one reaches the
        # end
        n_expected = 1 if len(words) <= words_per else 1 + -(-(len(words) - words_per) // stride)
        assert len(parts) == n_expected
        for n, p in enumerate(parts):
            assert p.id == f"{doc['id']}-{n}" and p.text.split() == words[n * stride : n * stride + words_per]
        assert parts[-1].text.split()[-1] == words[-1]  # the end is covered ...
        if len(parts) > 1:  # ... and no passage lies wholly inside the one before it
            assert (len(parts) - 2) * stride + words_per < len(words)
        # any span of words_per - stride words lies wholly inside some passage
        span = words_per - stride
        for start in range(0, len(words) - span + 1, 7):
            assert any(
                n * stride <= start and start + span <= n * stride + words_per for n in range(len(parts))
            )


def test_stride_equal_to_words_is_the_non_overlapping_split(real_documents):
    plain = list(split_passages(real_documents, words=50))
    assert list(split_passages(real_documents, words=50, stride=50)) == plain


@pytest.mark.parametrize("stride", [0, 65])
def test_stride_must_be_between_1_and_words(real_documents, stride):
    from ralm.errors import RalmInputError

    with pytest.raises(RalmInputError, match="stride"):
        list(split_passages(real_documents, words=64, stride=stride))
