"""ralm.atomic_files: a target appears whole or not at all, the temporary lives beside it, failures clean
up."""

import ast
import json
import os
import stat
from pathlib import Path

import pytest

from ralm import atomic_files
from ralm.atomic_files import (
    atomic_path,
    partial_dir,
    publish_dir,
    temp_sibling,
    write_json_atomic,
    write_jsonl_atomic,
    write_text_atomic,
)


def _listing(folder):
    return sorted(p.name for p in folder.iterdir())


def test_write_text_creates_parents_and_leaves_only_the_target(tmp_path):
    target = tmp_path / "a" / "b" / "out.txt"
    write_text_atomic(target, "héllo\nwörld\n")
    assert target.read_bytes() == "héllo\nwörld\n".encode()
    assert _listing(target.parent) == ["out.txt"]


def test_existing_target_is_replaced(tmp_path):
    target = tmp_path / "out.json"
    target.write_text("old contents that are longer than the new ones\n")
    write_json_atomic(target, {"b": 1, "a": [1, 2]})
    assert target.read_text() == '{\n  "b": 1,\n  "a": [\n    1,\n    2\n  ]\n}\n'
    assert _listing(tmp_path) == ["out.json"]


def test_json_options_reach_json_dumps(tmp_path):
    target = tmp_path / "out.json"
    value = {"z": "é", "a": tmp_path}
    write_json_atomic(target, value, sort_keys=True, default=str, ensure_ascii=False)
    expected = json.dumps(value, indent=2, sort_keys=True, default=str, ensure_ascii=False) + "\n"
    assert target.read_text(encoding="utf-8") == expected
    write_json_atomic(target, {"z": "é"}, indent=None)
    assert target.read_text() == '{"z": "\\u00e9"}\n'


def test_serialisation_failure_leaves_no_target_and_no_temporary(tmp_path):
    target = tmp_path / "out.json"
    with pytest.raises(TypeError):
        write_json_atomic(target, {"fine": 1, "bad": object()})
    assert _listing(tmp_path) == []


def test_serialisation_failure_keeps_the_old_target(tmp_path):
    target = tmp_path / "out.json"
    write_json_atomic(target, {"version": 1})
    with pytest.raises(TypeError):
        write_json_atomic(target, {"version": 2, "bad": {1, 2}})
    assert json.loads(target.read_text()) == {"version": 1}
    assert _listing(tmp_path) == ["out.json"]


def test_failure_half_way_through_a_streamed_write_leaves_the_old_file_whole(tmp_path):
    target = tmp_path / "passages.jsonl"
    target.write_text("old\n")
    with pytest.raises(RuntimeError, match="killed"):
        with atomic_path(target) as tmp, open(tmp, "w", encoding="utf-8") as f:
            f.write("new line 1\n")
            f.flush()
            assert tmp.read_text() == "new line 1\n"  # really half-written on disk at this point
            assert target.read_text() == "old\n"  # while the target is untouched
            raise RuntimeError("killed")
    assert target.read_text() == "old\n"
    assert _listing(tmp_path) == ["passages.jsonl"]


def test_failed_rename_removes_the_temporary(tmp_path, monkeypatch):
    target = tmp_path / "out.txt"
    target.write_text("old\n")

    def refuse(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(atomic_files.os, "replace", refuse)
    with pytest.raises(OSError, match="No space left"):
        write_text_atomic(target, "new\n")
    assert target.read_text() == "old\n"
    assert _listing(tmp_path) == ["out.txt"]


def test_temporary_is_a_hidden_sibling_and_is_renamed_over_the_target(tmp_path, monkeypatch):
    target = tmp_path / "sub" / "results.json"
    renames = []
    real_replace = os.replace

    def spy(src, dst):
        renames.append((os.fspath(src), os.fspath(dst)))
        assert json.loads(open(src).read()) == {"ok": True}  # complete before the rename
        assert not os.path.exists(dst)
        real_replace(src, dst)

    monkeypatch.setattr(atomic_files.os, "replace", spy)
    write_json_atomic(target, {"ok": True})
    [(src, dst)] = renames
    assert dst == os.fspath(target)
    assert os.path.dirname(src) == os.fspath(target.parent)  # same folder, so the rename is atomic
    assert os.path.basename(src).startswith(".results.json.tmp-")


def test_temporary_names_are_unique_and_keep_a_suffix(tmp_path):
    target = tmp_path / "emb-00000.npy"
    names = {temp_sibling(target, suffix=".npy") for _ in range(50)}
    assert len(names) == 50
    for name in names:
        assert name.parent == tmp_path
        assert name.name.startswith(".emb-00000.npy.tmp-") and name.name.endswith(".npy")


def test_file_mode_is_that_of_a_plainly_written_file(tmp_path):
    plain = tmp_path / "plain.txt"
    plain.write_text("x")
    target = tmp_path / "atomic.txt"
    write_text_atomic(target, "x")
    assert stat.S_IMODE(target.stat().st_mode) == stat.S_IMODE(plain.stat().st_mode)


def test_atomic_path_publishes_a_folder_and_removes_a_failed_one(tmp_path):
    target = tmp_path / "model"
    with atomic_path(target) as tmp:
        tmp.mkdir()
        (tmp / "weights.bin").write_bytes(b"\0" * 10)
    assert _listing(target) == ["weights.bin"]

    other = tmp_path / "other"
    with pytest.raises(ValueError):
        with atomic_path(other) as tmp:
            tmp.mkdir()
            (tmp / "weights.bin").write_bytes(b"\0")
            raise ValueError("half way")
    assert _listing(tmp_path) == ["model"]


def test_publish_dir_replaces_an_older_folder(tmp_path):
    final = tmp_path / "index"
    final.mkdir()
    (final / "old.txt").write_text("old")
    partial = partial_dir(final)
    assert partial == tmp_path / "index.partial"
    partial.mkdir()
    (partial / "new.txt").write_text("new")
    publish_dir(partial, final)
    assert _listing(final) == ["new.txt"]
    assert _listing(tmp_path) == ["index"]  # no .partial, no .old copy left


def test_publish_dir_without_an_older_folder(tmp_path):
    final = tmp_path / "index"
    partial = partial_dir(final)
    partial.mkdir()
    (partial / "a").write_text("a")
    publish_dir(partial, final)
    assert _listing(tmp_path) == ["index"]
    assert (final / "a").read_text() == "a"


def test_ensure_writable_dir_creates_the_folder_and_leaves_no_probe(tmp_path):
    from ralm.atomic_files import ensure_writable_dir

    out = ensure_writable_dir(tmp_path / "a" / "b")
    assert out.is_dir() and list(out.iterdir()) == []


def test_ensure_writable_dir_names_a_file_in_the_way(tmp_path):
    from ralm.atomic_files import ensure_writable_dir
    from ralm.errors import RalmInputError

    (tmp_path / "file").write_text("x")
    with pytest.raises(RalmInputError, match=r"file/out: output folder is not writable"):
        ensure_writable_dir(tmp_path / "file" / "out")


def test_jsonl_rows_are_written_whole_or_not_at_all(tmp_path):
    path = tmp_path / "rows.jsonl"
    rows = [{"id": 1, "text": "Ünïcode"}, {"id": 2, "text": "b"}]
    assert write_jsonl_atomic(path, rows, ensure_ascii=False) == 2
    assert [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()] == rows
    assert "Ünïcode" in path.read_text(encoding="utf-8")  # the kwarg reached json.dumps

    def failing():
        yield {"id": 3}
        raise RuntimeError("killed half way")

    with pytest.raises(RuntimeError):
        write_jsonl_atomic(path, failing())
    assert [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()] == rows
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rows.jsonl"]


def test_publish_first_keeps_the_first_finished_copy(tmp_path):
    from ralm.atomic_files import publish_first

    final = tmp_path / "shard"
    mine = tmp_path / ".shard.tmp-a"
    mine.mkdir()
    (mine / "rows").write_text("mine")
    assert publish_first(mine, final, lambda f: (f / "rows").exists()) is True
    theirs = tmp_path / ".shard.tmp-b"
    theirs.mkdir()
    (theirs / "rows").write_text("theirs")
    assert publish_first(theirs, final, lambda f: (f / "rows").exists()) is False
    assert (final / "rows").read_text() == "mine" and _listing(tmp_path) == ["shard"]
    late = tmp_path / ".shard.tmp-c"
    late.mkdir()
    (late / "rows").write_text("late")
    with pytest.raises(OSError):  # a folder in the way that is not a finished copy
        publish_first(late, final, lambda f: False)
    assert late.exists()


def test_publish_file_replaces_an_older_file(tmp_path):
    from ralm.atomic_files import publish_file

    (tmp_path / ".new").write_text("new")
    (tmp_path / "out").write_text("old")
    publish_file(tmp_path / ".new", tmp_path / "out")
    assert _listing(tmp_path) == ["out"] and (tmp_path / "out").read_text() == "new"


RENAMING = {("os", "replace"), ("os", "rename"), ("os", "renames"), ("shutil", "move")}
"""The standard library's renames, as module and function."""


def renames_in(source: str) -> list[int]:
    """The lines of `source` that rename a file or folder: a `RENAMING` call (also imported by name),
    ``Path.rename`` or ``Path.replace`` (one argument, where ``str.replace`` takes two)."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and any((node.module, a.name) in RENAMING for a in node.names):
            lines.append(node.lineno)
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        owner, name = node.func.value, node.func.attr
        one_argument = len(node.args) == 1 and not node.keywords
        if (
            (isinstance(owner, ast.Name) and (owner.id, name) in RENAMING)
            or name == "rename"
            or (name == "replace" and one_argument)
        ):
            lines.append(node.lineno)
    return sorted(lines)


def test_no_module_but_atomic_files_renames():
    """Every rename goes through this module (its docstring: a target appears whole, the temporary beside
    it); a rename elsewhere is a second, unchecked copy of that rule."""
    package = Path(atomic_files.__file__).parent
    found = [
        f"{path.relative_to(package.parent)}:{line}"
        for path in sorted(package.rglob("*.py"))
        if path != Path(atomic_files.__file__)
        for line in renames_in(path.read_text(encoding="utf-8"))
    ]
    assert found == []


def test_the_rename_check_sees_each_spelling():
    source = (
        "import os, shutil\nfrom os import replace\nos.replace(a, b)\nos.rename(a, b)\nshutil.move(a, b)\n"
        "path.rename(b)\npath.replace(b)\ntext.replace('a', 'b')\nreplace(config, x=1)\n"
    )
    assert renames_in(source) == [2, 3, 4, 5, 6, 7]
