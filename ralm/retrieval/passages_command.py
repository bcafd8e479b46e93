"""`ralm passages`: raw documents -> 100-word passages JSONL (the corpus every index is built from).

ralm passages --input docs.jsonl --output passages.jsonl [--passage-words 100] [--exclude '[title1, id2]']
ralm passages --input docs.jsonl --output passages.jsonl --passage-words 64 --passage-stride 32  # overlapping
ralm passages --input texts/ --output passages.jsonl --exclude-file test_titles.txt
"""

from __future__ import annotations

import sys
from pathlib import Path

from ralm.atomic_files import write_json_atomic
from ralm.cli.command_args import call_with_args, parser_for
from ralm.config_types import PositiveInt
from ralm.errors import RalmInputError
from ralm.retrieval.passages import read_documents, split_passages, write_passages

# Former option names (one name, one meaning across commands: --stride is the retrieval stride s).
RENAMED = {"out": "output", "words": "passage_words", "stride": "passage_stride"}


def read_exclude_file(path: Path) -> list[str]:
    """One title or doc id per line (blank lines ignored)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise RalmInputError(f"{path}: no such exclude file") from None
    except UnicodeDecodeError as err:
        raise RalmInputError(f"{path}: not UTF-8 ({err.reason})") from None
    return [line.strip() for line in text.splitlines() if line.strip()]


def make_passages(
    input: Path,
    output: Path,
    passage_words: PositiveInt = 100,
    exclude: list[str] | None = None,
    exclude_file: Path | None = None,
    passage_stride: PositiveInt | None = None,
) -> dict:
    """Split documents (JSONL, folder of .txt, or datasets dir) into passages.

    Args:
        input: Documents: JSONL with id/title/text (or contents), a folder of .txt files, or a datasets dir.
        output: Passages JSONL to write ({"id", "contents": "title\\ntext", "title", "doc_id"}).
        passage_words: Words per passage (the paper: 100).
        exclude: Titles or doc ids to leave out (the evaluation documents); `re:PATTERN` leaves out every
            document whose id or title the regular expression matches in full. The excluded ids are
            listed in OUTPUT.excluded.json.
        exclude_file: A file with one title, doc id or re:PATTERN per line to leave out, added to `exclude`.
        passage_stride: Words between passage starts (default: `passage_words`, non-overlapping as in the
            paper); smaller
            overlaps the passages so a match and the text after it can be retrieved together.
    """
    names = list(exclude or [])
    if exclude_file is not None:
        names += read_exclude_file(exclude_file)
    stats: dict = {}
    count = write_passages(
        split_passages(
            read_documents(input), words=passage_words, exclude=names, stats=stats, stride=passage_stride
        ),
        output,
    )
    stats["passages"] = count
    write_json_atomic(Path(f"{output}.excluded.json"), {"rules": names, **stats}, indent=1)
    print(
        f"passages: {stats['documents']} documents -> {count} passages of <= {passage_words} words"
        f"{f' every {passage_stride} words' if passage_stride and passage_stride != passage_words else ''}"
        f" in {output}; "
        f"{stats['excluded']} document(s) excluded",
        file=sys.stderr,
    )
    if stats["unmatched_exclude"]:
        shown = ", ".join(map(repr, stats["unmatched_exclude"][:5]))
        print(
            f"passages: {len(stats['unmatched_exclude'])} exclude entries matched nothing: {shown}",
            file=sys.stderr,
        )
    return stats


def build_parser():
    return parser_for(make_passages, prog="ralm passages", renamed=RENAMED)


def main(argv: list[str] | None = None) -> None:
    call_with_args(make_passages, build_parser(), argv)


if __name__ == "__main__":
    main()
