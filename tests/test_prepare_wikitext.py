"""`ralm prepare wikitext103` offline, on a locally built dataset with the hub's schema and WikiText's
structure (a leading blank row, " = Title = " headings, " = = Section = = " headings, blank rows)."""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path

import pytest

from ralm.corpora.wikitext103_command import prepare_wikitext103
from ralm.errors import RalmInputError
from ralm.eval.ppl.eval_text import read_eval_text
from ralm.retrieval.passages import read_documents


def wikitext_rows(docs: list[dict]) -> list[str]:
    """WikiText-103-raw's layout: each article a heading, blank rows between paragraphs, one section."""
    rows = []
    for doc in docs:
        paragraphs = [p.strip() for p in doc["text"].split("\n\n") if p.strip()][:4]
        rows += ["", f" = {doc['title']} = \n", ""]
        for i, paragraph in enumerate(paragraphs):
            if i == 2:
                rows += [" = = History = = \n", ""]
            rows += [f" {' '.join(paragraph.split())} \n", ""]
    return rows


@pytest.fixture()
def hub_copy(tmp_path, real_documents):
    from datasets import Dataset, DatasetDict, Features, Value

    features = Features({"text": Value("string")})  # the hub's schema
    parts = {"train": real_documents[:6], "validation": real_documents[6:8], "test": real_documents[8:11]}
    rows = {split: wikitext_rows(docs) for split, docs in parts.items()}
    data = DatasetDict({s: Dataset.from_dict({"text": r}, features=features) for s, r in rows.items()})
    data.save_to_disk(str(tmp_path / "saved"))
    for split in rows:  # and the hub's own parquet layout
        (tmp_path / "parquet" / "wikitext-103-raw-v1").mkdir(parents=True, exist_ok=True)
        data[split].to_parquet(
            str(tmp_path / "parquet" / "wikitext-103-raw-v1" / f"{split}-00000-of-00001.parquet")
        )
    return tmp_path, parts, rows


@pytest.mark.parametrize("layout", ["saved", "parquet"])
def test_articles_for_data_gen_and_eval_lms_string_for_eval(hub_copy, layout):
    tmp_path, parts, rows = hub_copy
    out = tmp_path / f"out-{layout}"
    info = prepare_wikitext103(out, source=str(tmp_path / layout))
    train = [json.loads(line) for line in (out / "train.jsonl").read_text().splitlines()]
    assert [a["title"] for a in train] == [d["title"] for d in parts["train"]]  # one document per article
    assert [a["id"] for a in train] == [a["title"] for a in train]  # the id wikipedia-dpr passages carry
    assert all(" = = History = = \n" in a["text"] for a in train)  # sections stay inside their article
    # The articles, concatenated, are eval_lm.py's string of the split: "".join(x or " \n").
    expected = "".join(x if x else " \n" for x in rows["train"])
    assert "".join(a["text"] for a in train) == expected
    assert len(list(read_documents(out / "train.jsonl"))) == len(parts["train"])  # what data-gen reads
    # eval ppl --text OUT/test scores exactly eval_lm.py's test string.
    assert read_eval_text(out / "test") == "".join(x if x else " \n" for x in rows["test"])
    titles = (out / "eval_titles.txt").read_text().splitlines()
    assert titles == [d["title"] for d in parts["validation"] + parts["test"]]
    assert info["splits"]["test"] == {"rows": len(rows["test"]), "articles": len(parts["test"])}


def test_no_network_and_a_partial_copy_are_refused_before_anything_is_written(hub_copy, monkeypatch):
    tmp_path, _, _ = hub_copy
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(RalmInputError, match=r"--source hub: the hub is switched off.*--source DIR"):
        prepare_wikitext103(tmp_path / "a", source="hub")
    (tmp_path / "parquet" / "wikitext-103-raw-v1" / "validation-00000-of-00001.parquet").unlink()
    with pytest.raises(RalmInputError, match=r"parquet files for split\(s\) \['validation'\]"):
        prepare_wikitext103(tmp_path / "b", source=str(tmp_path / "parquet"))
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_a_repeated_title_gets_its_own_id():
    from ralm.corpora.wikitext import articles

    rows = ["", " = A = \n", "", " x \n", " = B = \n", " y \n", " = A = \n", " z \n"]
    assert [a["id"] for a in articles(rows, "train")] == ["A", "B", "A (2)"]


def test_titles_are_spelled_as_wikipedia_and_the_dpr_passages_spell_them():
    """WikiText splits punctuation off its headings; the evaluation titles must match DPR's to be excluded
    (examples from the authors' list of WikiText-103 evaluation titles)."""
    from ralm.corpora.wikitext import article_title

    assert article_title(" = M @-@ 82 ( Michigan highway ) = \n") == "M-82 (Michigan highway)"
    assert article_title(" = Meridian , Mississippi = \n") == "Meridian, Mississippi"
    assert article_title(" = Edson 's Ridge = \n") == "Edson's Ridge"
    assert article_title(" = 2 @,@ 000 Guineas Stakes = \n") == "2,000 Guineas Stakes"
    assert article_title(" = = History = = \n") is None


EVAL_TITLES = Path(__file__).parent / "data" / "wikitext103_eval_titles.tsv"


def eval_title_rows() -> list[tuple[str, str, str]]:
    """(split, WikiText heading, the authors' Wikipedia spelling) of the 120 evaluation articles
    (provenance in the file's header)."""
    lines = EVAL_TITLES.read_text(encoding="utf-8").splitlines()
    return [tuple(line.split("\t")) for line in lines if line and not line.startswith("#")]


def test_every_evaluation_heading_maps_to_the_authors_wikipedia_spelling():
    """Each of WikiText-103's 120 validation and test headings, as ralm reads it (and in Unicode NFD, the
    other form the authors' list carries), becomes the title the RALM authors exclude from the DPR index."""
    from ralm.corpora.wikitext import article_title

    rows = eval_title_rows()
    assert [split for split, _, _ in rows] == ["valid"] * 60 + ["test"] * 60
    wrong = {
        heading: article_title(f" = {form} = \n")
        for _, heading, title in rows
        for form in (heading, unicodedata.normalize("NFD", heading))
        if article_title(f" = {form} = \n") != title
    }
    assert wrong == {}


def test_eval_titles_txt_lists_the_authors_spelling_of_every_evaluation_article(tmp_path):
    """`ralm prepare wikitext103` on validation and test splits with the 120 real headings: eval_titles.txt
    (the --exclude-file of the DPR index) holds exactly the authors' titles, in order."""
    from datasets import Dataset, DatasetDict, Features, Value

    rows = eval_title_rows()
    splits = {"train": ["", " = Some article = \n", "", " Text . \n"]}
    for name, split in (("validation", "valid"), ("test", "test")):
        headings = [heading for where, heading, _ in rows if where == split]
        splits[name] = [""] + [row for h in headings for row in (f" = {h} = \n", "", " Body . \n")]
    features = Features({"text": Value("string")})
    data = DatasetDict({s: Dataset.from_dict({"text": r}, features=features) for s, r in splits.items()})
    data.save_to_disk(str(tmp_path / "saved"))
    prepare_wikitext103(tmp_path / "out", source=str(tmp_path / "saved"))
    titles = (tmp_path / "out" / "eval_titles.txt").read_text(encoding="utf-8").splitlines()
    assert titles == [title for _, _, title in rows]


def test_spaced_quotes_dashes_and_clitics_are_joined():
    from ralm.corpora.wikitext import detokenize_title

    assert detokenize_title('" Weird Al " Yankovic') == '"Weird Al" Yankovic'
    assert detokenize_title("Brown – Forman") == "Brown–Forman"
    assert detokenize_title("You 've Got Mail and I 'm Here") == "You've Got Mail and I'm Here"


def test_the_dpr_index_skips_an_evaluation_title_in_either_unicode_form(monkeypatch):
    """eval_titles.txt is NFC; a DPR passage titled in NFD (the other form the authors list) is skipped
    too. Lucene is replaced by its hits: the exclusion rule itself runs as it does on a real index."""
    from types import SimpleNamespace

    from ralm.retrieval import prebuilt

    monkeypatch.setattr(prebuilt, "open_searcher", lambda name: SimpleNamespace(set_bm25=lambda k1, b: None))
    retriever = prebuilt.PrebuiltRetriever(
        "idx", {"prebuilt": "x", "excluded_titles": ["Battle of Dürenstein"]}
    )

    def hit(docid: str, title: str):
        return SimpleNamespace(docid=docid, score=1.0, raw=json.dumps({"contents": f'"{title}"\nText.'}))

    hits = [hit("1", unicodedata.normalize("NFD", "Battle of Dürenstein")), hit("2", "Battle of Austerlitz")]
    allowed, skipped = retriever._allowed(hits, k=2)
    assert [h.id for h in allowed] == ["2"] and skipped == 1
