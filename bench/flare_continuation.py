"""FLARE's long-form test with the demo's passage form: `ralm demo --flare`'s prompts, theta rule and metrics,
with every retrieved passage handed on as the full demo's perplexity tables hand it (from its sentence that
best matches the query issued, on into the next passage of its document).

    OMP_NUM_THREADS=2 .venv/bin/python bench/flare_continuation.py [--output runs/demo-flare-continuation]
        [--quick]

`ralm demo --flare` gives the LM the paper's passage as retrieved (docs/results.md, "Long-form generation").
This runs ``ralm.demo.flare_demo.flare_demo`` with the same scale (``FULL_FLARE``, or ``QUICK_FLARE`` with
--quick) but ``passage_form="continuation"`` and the methods that decide the question: no retrieval, single
retrieval (the prompt as the query) and masked FLARE, theta chosen on the dev book's single-retrieval
generations exactly as the demo chooses it. It writes the demo's ``flare-report.txt``, ``.json`` and
``.png`` into the output folder; every run is a resumable ``ralm eval flare --passage-form continuation``
stage (``commands.sh``).
"""

from __future__ import annotations

import argparse
import os
from dataclasses import replace
from pathlib import Path

from ralm.passage_rules import NO_RETRIEVAL
from ralm.retrieval.passage_forms import CONTINUATION


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--output", type=Path, default=Path("runs/demo-flare-continuation"))
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    from ralm.demo.flare_demo import FULL_FLARE, QUICK_FLARE, flare_demo
    from ralm.demo.presets import BookOptions, bible_scale, resolve_books
    from ralm.pipeline.models import default_lm
    from ralm.pipeline.scale import ScaleOptions

    settings = replace(
        QUICK_FLARE if args.quick else FULL_FLARE,
        methods=(NO_RETRIEVAL, "single", "flare"),
        dev_methods=("flare",),
        passage_form=CONTINUATION,
    )
    args.output.mkdir(parents=True, exist_ok=True)
    books = resolve_books(args.quick, BookOptions())
    scale = bible_scale(args.quick, ScaleOptions())
    flare_demo(args.quick, args.output, books, default_lm(), scale, settings)


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    main()
