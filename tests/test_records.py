"""ralm.jsonl.JsonlLog (the one resumable log) and ralm.fingerprints.fingerprint, against hand-written
files."""

import hashlib
import re

import pytest

from ralm.errors import RalmInputError
from ralm.fingerprints import fingerprint
from ralm.jsonl import JsonlLog, read_jsonl


def _by_id(record):
    return record["id"]


def test_a_new_log_appends_one_line_per_record(tmp_path):
    log = JsonlLog(tmp_path / "sub" / "log.jsonl", _by_id)
    log.append([{"id": 1, "x": "é"}])
    log.append([{"id": 2}, {"id": 3}])
    assert (tmp_path / "sub" / "log.jsonl").read_bytes() == (
        '{"id": 1, "x": "é"}\n{"id": 2}\n{"id": 3}\n'.encode()
    )
    assert log.records == {1: {"id": 1, "x": "é"}, 2: {"id": 2}, 3: {"id": 3}}


def test_resume_drops_a_torn_last_line_and_appends_on_a_clean_line(tmp_path):
    path = tmp_path / "log.jsonl"
    path.write_text('{"id": "a", "v": 1}\n{"id": "b", "v": 2}\n{"id": "c", "v"')
    log = JsonlLog(path, _by_id)
    assert log.records == {"a": {"id": "a", "v": 1}, "b": {"id": "b", "v": 2}}
    log.append([{"id": "c", "v": 3}])
    assert path.read_text() == '{"id": "a", "v": 1}\n{"id": "b", "v": 2}\n{"id": "c", "v": 3}\n'


def test_a_complete_record_without_its_newline_is_torn_too(tmp_path):
    path = tmp_path / "log.jsonl"
    path.write_text('{"id": 1}\n{"id": 2}')
    assert JsonlLog(path, _by_id).records == {1: {"id": 1}}
    assert path.read_text() == '{"id": 1}\n'


def test_a_later_record_with_the_same_key_replaces_the_earlier(tmp_path):
    path = tmp_path / "log.jsonl"
    path.write_text('{"id": 1, "v": "old"}\n{"id": 2, "v": "b"}\n{"id": 1, "v": "new"}\n')
    log = JsonlLog(path, _by_id)
    assert log.records == {1: {"id": 1, "v": "new"}, 2: {"id": 2, "v": "b"}}
    log.append([{"id": 2, "v": "newer"}])
    assert log.records[2] == {"id": 2, "v": "newer"}
    assert JsonlLog(path, _by_id).records == {1: {"id": 1, "v": "new"}, 2: {"id": 2, "v": "newer"}}


def test_a_complete_line_that_is_not_json_is_an_error_naming_file_and_line(tmp_path):
    path = tmp_path / "log.jsonl"
    path.write_text('{"id": 1}\nnot json\n{"id": 3}\n')
    with pytest.raises(RalmInputError, match="^" + re.escape(f"{path}:2:1: not valid JSON")):
        JsonlLog(path, _by_id)
    path.write_text('{"id": 1}\n[1, 2]\n')
    with pytest.raises(RalmInputError, match="^" + re.escape(f"{path}:2: expected a JSON object, got list")):
        JsonlLog(path, _by_id)


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        # json's own reason ends in "at", waiting for a position: the message must not stop there.
        ('{"id": "broken", "text": "no closing quote}', "Unterminated string starting at line 3, column 26"),
        ('{"id": "a" "text": "x"}', "Expecting ',' delimiter at line 3, column 12"),
        ('{"id": "a"}}', "Extra data at line 3, column 12"),
    ],
)
def test_a_bad_json_line_gives_the_whole_reason_with_the_file_line_and_column(tmp_path, line, reason):
    path = tmp_path / "docs.jsonl"
    path.write_text('{"id": 1}\n\n' + line + "\n")  # a blank line: the line number counts it
    with pytest.raises(RalmInputError) as err:
        list(read_jsonl(path))
    column = reason.rsplit(" ", 1)[-1]
    assert str(err.value) == f"{path}:3:{column}: not valid JSON ({reason})"


def test_header_is_written_first_and_another_header_starts_over(tmp_path):
    path = tmp_path / "log.jsonl.partial"
    log = JsonlLog(path, _by_id, header={"config_key": "k1"})
    log.append([{"id": 0}])
    assert path.read_text() == '{"config_key": "k1"}\n{"id": 0}\n'
    assert JsonlLog(path, _by_id, header={"config_key": "k1"}).records == {0: {"id": 0}}
    fresh = JsonlLog(path, _by_id, header={"config_key": "k2"})
    assert fresh.records == {}
    assert path.read_text() == '{"config_key": "k2"}\n'
    path.write_text('{"config_k')  # killed while writing the header
    assert JsonlLog(path, _by_id, header={"config_key": "k2"}).records == {}
    assert path.read_text() == '{"config_key": "k2"}\n'


def test_a_refused_record_and_everything_after_it_are_dropped(tmp_path):
    path = tmp_path / "run.jsonl"
    path.write_text('{"qid": "q1"}\n{"qid": "q9"}\n{"qid": "q3"}\n')
    expected = ["q1", "q2", "q3"]
    log = JsonlLog(path, lambda r: r["qid"], accept=lambda i, r: r["qid"] == expected[i])
    assert list(log.records) == ["q1"]
    assert path.read_text() == '{"qid": "q1"}\n'


def test_ensure_ascii_is_the_callers_choice(tmp_path):
    log = JsonlLog(tmp_path / "a.jsonl", _by_id, ensure_ascii=True)
    log.append([{"id": "é"}])
    assert (tmp_path / "a.jsonl").read_text() == '{"id": "\\u00e9"}\n'


def test_fingerprint_ignores_key_order_and_sees_every_value():
    a = {"k": 4, "lm": "gpt2", "window": {"stride": 4, "max_length": 1024}}
    reordered = {"window": {"max_length": 1024, "stride": 4}, "lm": "gpt2", "k": 4}
    assert fingerprint(a) == fingerprint(reordered)
    assert fingerprint(a) != fingerprint({**a, "k": 5})
    assert fingerprint(a) != fingerprint({**a, "window": {"stride": 8, "max_length": 1024}})
    # sha256 of the sorted-key JSON text, all 64 hex digits (computed by hand from the JSON below).
    text = '{"k": 4, "lm": "gpt2", "window": {"max_length": 1024, "stride": 4}}'
    assert fingerprint(a) == hashlib.sha256(text.encode()).hexdigest()
    assert len(fingerprint(a)) == 64


def test_an_index_has_one_identity_in_data_gen_and_eval():
    from ralm.data_gen.metadata import run_config
    from ralm.eval.ppl.retrieval_cache import index_key
    from ralm.retrieval.index_meta import index_fingerprint

    meta = {
        "format": "ralm-index/1",
        "backend": "bm25s",
        "num_passages": 10,
        "passages_sha256": "ab",
        "created": "t1",
        "passages_path": "/a",
        "ralm_version": "1",
        "build_seconds": 1.5,
    }
    rebuilt = {**meta, "created": "t2", "passages_path": "/b", "build_seconds": 2.0, "index_dir": "/c"}
    fields = dict(
        lm="gpt2",
        tokenizer="gpt2",
        dtype="float32",
        documents_sha256="d",
        stride=4,
        query_tokens=4,
        k=2,
        min_prefix_tokens=4,
        input_length=64,
        max_passage_tokens=16,
        seed=0,
        num_prefixes=2,
        rank_tokens=2,
        num_examples=2,
        num_shards=1,
        exclude_same_doc=True,
    )
    assert (
        index_key(meta) == index_fingerprint(rebuilt) == run_config(index_meta=meta, **fields)["index_hash"]
    )
    assert index_key(meta) != index_key({**meta, "num_passages": 11})
