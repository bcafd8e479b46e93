"""A Pyserini prebuilt index as `--index`, tested offline on a local Lucene index with wikipedia-dpr's
stored-field layout: id + raw JSON whose contents are '"Title"\\ntext'."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest

from ralm.errors import RalmInputError
from ralm.retrieval.index import open_index
from ralm.retrieval.index_command import make_index

pytestmark = pytest.mark.slow  # a JVM and Anserini's indexer (~30 s)


@pytest.fixture(scope="module")
def dpr_layout_index(tmp_path_factory, real_documents):
    if importlib.util.find_spec("pyserini") is None:
        pytest.fail("pyserini is not installed: run scripts/setup.sh (the pyserini extra)")
    tmp = tmp_path_factory.mktemp("dpr")
    rows, n = [], 0
    for doc in real_documents[:30]:
        words = doc["text"].split()
        for start in range(0, len(words), 100):  # DPR: 100-word passages, ids "1", "2", ...
            n += 1
            rows.append(
                {"id": str(n), "contents": f'"{doc["title"]}"\n' + " ".join(words[start : start + 100])}
            )
    (tmp / "collection").mkdir()
    (tmp / "collection" / "docs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    args = ["-collection", "JsonCollection", "-generator", "DefaultLuceneDocumentGenerator", "-threads", "1"]
    args += ["-input", str(tmp / "collection"), "-index", str(tmp / "lucene"), "-storeRaw"]
    proc = subprocess.run(
        [sys.executable, "-m", "ralm.retrieval.java_runtime", *args], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return tmp, rows


def test_excluded_titles_are_never_returned_and_contents_reach_the_lm_as_stored(
    dpr_layout_index, real_documents
):
    tmp, rows = dpr_layout_index
    banned = real_documents[0]["title"]
    query = " ".join(real_documents[0]["text"].split()[:40])  # the banned article's own words
    plain = make_index(tmp / "plain", prebuilt=str(tmp / "lucene"))
    meta = make_index(tmp / "clean", prebuilt=str(tmp / "lucene"), exclude=[banned])
    assert plain["num_passages"] == meta["num_passages"] == len(rows)
    assert meta["excluded_titles"] == [banned]
    (top,) = open_index(tmp / "plain").search([query], k=1)
    assert top[0].title == banned  # without the exclusion the evaluated article is what BM25 finds

    clean = open_index(tmp / "clean")
    (hits,) = clean.search([query], k=5)
    assert len(hits) == 5 and banned not in {h.title for h in hits}
    by_id = {r["id"]: r["contents"] for r in rows}
    for hit in hits:  # as the authors' retriever gives them: quotes included; the title is the doc id
        assert hit.contents == by_id[hit.id] and hit.contents.startswith(f'"{hit.title}"\n')
        assert hit.doc_id == hit.title
    # Against Lucene's full ranking, filtered by hand: the same five passages, and the excluded ones
    # ranked above the fifth allowed passage are what was counted.
    from ralm.retrieval.java_runtime import lucene_searcher_class

    reference = lucene_searcher_class()(str(tmp / "lucene"))
    reference.set_bm25(0.9, 0.4)
    ranking = [
        (r.docid, json.loads(r.lucene_document.get("raw"))["contents"])
        for r in reference.search(query, k=len(rows))
    ]
    allowed = [i for i, (_, contents) in enumerate(ranking) if not contents.startswith(f'"{banned}"\n')][:5]
    assert [h.id for h in hits] == [ranking[i][0] for i in allowed]
    assert clean.excluded_hits == allowed[-1] - 4 > 0


def test_linking_over_another_index_needs_overwrite(dpr_layout_index, tmp_path):
    lucene, other = dpr_layout_index[0] / "lucene", tmp_path / "other"
    other.mkdir()
    (other / "engine.bin").write_text("another index's files")
    with pytest.raises(RalmInputError, match="is not a link to a prebuilt index; pass --overwrite"):
        make_index(other, prebuilt=str(lucene))
    make_index(other, prebuilt=str(lucene), overwrite=True)
    assert sorted(p.name for p in other.iterdir()) == ["ralm_index.json"]


def test_an_unknown_prebuilt_name_names_the_closest_ones(tmp_path):
    with pytest.raises(
        RalmInputError, match=r"not a Pyserini prebuilt index \(did you mean wikipedia-dpr-100w"
    ):
        make_index(tmp_path / "x", prebuilt="wikipedia-dpr-100x")
    assert not (tmp_path / "x").exists()
