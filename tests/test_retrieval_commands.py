"""`ralm passages`, `ralm index`, `ralm retrieve` end to end on CPU, asserting on the files they write."""

from __future__ import annotations

import json

from retrieval_fixtures import word_window_queries, write_jsonl

from ralm.retrieval import index_command, passages_command, retrieve_command
from ralm.retrieval.index import open_index
from ralm.retrieval.passages import read_passages
from ralm.retrieval.run_files import read_trec_run


def test_passages_index_retrieve_end_to_end(tmp_path, real_documents, capsys):
    docs = write_jsonl(tmp_path / "docs.jsonl", real_documents)
    held_out = real_documents[0]["title"]
    passages_command.main(
        ["--input", str(docs), "--output", str(tmp_path / "p.jsonl"), "--exclude", f"[{held_out}]"]
    )
    assert "1 document(s) excluded" in capsys.readouterr().err
    passages = read_passages(tmp_path / "p.jsonl")
    assert held_out not in {p.title for p in passages}

    index_command.main(
        ["--passages", str(tmp_path / "p.jsonl"), "--output", str(tmp_path / "idx"), "--k1", "0.9"]
    )
    meta = json.loads((tmp_path / "idx" / "ralm_index.json").read_text())
    assert meta["backend"] == "bm25s" and meta["num_passages"] == len(passages) and meta["bm25"]["b"] == 0.4

    queries = word_window_queries(real_documents[1:], 25, seed=3)
    write_jsonl(tmp_path / "q.jsonl", [{"qid": f"q{i}", "query": q} for i, q in enumerate(queries)])
    retrieve_command.main(
        [
            "--index",
            str(tmp_path / "idx"),
            "--queries",
            str(tmp_path / "q.jsonl"),
            "--k",
            "5",
            "--output",
            str(tmp_path / "run.trec"),
            "--threads",
            "2",
        ]
    )
    err = capsys.readouterr().err
    assert "queries/s" in err and "25 queries" in err
    expected = open_index(tmp_path / "idx").search(queries, 5)
    run = read_trec_run(tmp_path / "run.trec")
    assert run == {f"q{i}": [(h.id, round(h.score, 6)) for h in hits] for i, hits in enumerate(expected)}
    lines = (tmp_path / "run.trec").read_text().splitlines()
    assert lines[0].split()[1] == "Q0" and lines[0].split()[3] == "1" and lines[0].split()[5] == "ralm"
    records = [json.loads(line) for line in (tmp_path / "run.jsonl").read_text().splitlines()]
    assert [r["query"] for r in records] == queries
    first = records[0]["hits"][0]
    assert first == {
        "id": expected[0][0].id,
        "score": expected[0][0].score,
        "title": expected[0][0].title,
        "doc_id": expected[0][0].doc_id,
        "contents": expected[0][0].contents,
    }
    # As docs/formats.md says a user reads them: pandas, no ralm.
    import pandas as pd

    trec = pd.read_csv(
        tmp_path / "run.trec", sep=" ", header=None, names=["qid", "Q0", "docid", "rank", "score", "tag"]
    )
    assert len(trec) == sum(len(h) for h in expected) and trec["rank"].max() == 5
    assert trec.groupby("qid")["score"].apply(lambda s: s.is_monotonic_decreasing).all()
    hits = pd.read_json(tmp_path / "run.jsonl", lines=True).explode("hits")
    assert len(hits) == len(trec)


def test_index_from_raw_documents_and_tsv_queries(tmp_path, real_documents, capsys):
    folder = tmp_path / "texts"
    folder.mkdir()
    for d in [d for d in real_documents if d["id"] in ("heapq", "json", "csv", "gzip")]:
        (folder / f"{d['title']}.txt").write_text(d["text"], encoding="utf-8")
    index_command.main(
        ["--documents", str(folder), "--output", str(tmp_path / "idx"), "--passage-words", "60"]
    )
    passages = read_passages(tmp_path / "idx.passages.jsonl")
    assert max(len(p.text.split()) for p in passages) == 60
    (tmp_path / "q.tsv").write_text("a\theap queue priority\nb\tzzqx\n")
    retrieve_command.main(
        [
            "--index",
            str(tmp_path / "idx"),
            "--queries",
            str(tmp_path / "q.tsv"),
            "--output",
            str(tmp_path / "r.trec"),
        ]
    )
    run = read_trec_run(tmp_path / "r.trec")
    assert run["a"][0][0].startswith("heapq-") and "b" not in run  # no hit for an unknown word
    scores = [s for _, s in run["a"]]
    assert scores == sorted(scores, reverse=True) and len(scores) <= 16


def test_killed_retrieve_resumes_after_its_last_complete_query(tmp_path, real_documents):
    from ralm.retrieval.index import build_index

    passages = tmp_path / "p.jsonl"
    passages_command.make_passages(write_jsonl(tmp_path / "d.jsonl", real_documents[:8]), passages)
    build_index(passages, tmp_path / "idx")
    queries = word_window_queries(real_documents[:8], 12, seed=4)
    (tmp_path / "q.tsv").write_text("".join(f"q{i}\t{q}\n" for i, q in enumerate(queries)))
    args = {"index": tmp_path / "idx", "queries": tmp_path / "q.tsv", "k": 4, "batch_size": 5}
    retrieve_command.retrieve(output=tmp_path / "full.trec", **args)
    full_jsonl = (tmp_path / "full.jsonl").read_text().splitlines(keepends=True)
    # a run killed while writing query 8: seven whole records and half of the next, a stale TREC partial
    (tmp_path / ".run.jsonl.partial").write_text("".join(full_jsonl[:7]) + full_jsonl[7][:40])
    (tmp_path / ".run.trec.partial").write_text("garbage that must not survive\n")
    summary = retrieve_command.retrieve(output=tmp_path / "run.trec", **args)
    assert summary["resumed_after"] == 7
    assert (tmp_path / "run.jsonl").read_text() == "".join(full_jsonl)
    assert (tmp_path / "run.trec").read_text() == (tmp_path / "full.trec").read_text()
    assert not list(tmp_path.glob(".*.partial"))


def test_index_from_documents_with_overlapping_passages(tmp_path, real_documents):
    docs = write_jsonl(tmp_path / "d.jsonl", real_documents[:4])
    index_command.main(
        [
            "--documents",
            str(docs),
            "--output",
            str(tmp_path / "idx"),
            "--passage-words",
            "60",
            "--passage-stride",
            "20",
        ]
    )
    passages = read_passages(tmp_path / "idx.passages.jsonl")
    first = real_documents[0]["text"].split()
    assert passages[1].text.split() == first[20:80]  # the second passage starts 20 words after the first
    assert sum(p.doc_id == real_documents[0]["id"] for p in passages) == 1 + -(-(len(first) - 60) // 20)
