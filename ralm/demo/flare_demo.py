"""`ralm demo --flare [--quick]`: FLARE against its baselines on long-form generation where the corpus retells
the text: the LM continues passages of a held-out book, and each method is scored against the book's own
continuation.

The texts are the Bible demo's (``ralm.demo.assets.bible_texts``): the King James Bible minus the dev and test
books as the corpus (every held-out book left out in every translation), the World English Bible's dev book
(Mark) for choosing theta and its related test book (2 Chronicles, which Kings retells) for the table.
Prompts (``continuation_prompts``) open at a sentence start, spread evenly over the book without overlap:
``prompt_tokens`` tokens of the book, then its next ``new_tokens`` tokens are the reference.

Every method retrieves one passage at a time (``docs=1``, passages replaced, as the FLARE authors' code does
by default), generates ``new_tokens`` tokens greedily, with the same LM, input length and decoding:

- ``no-retrieval``; ``single`` (one search with the whole prompt); ``stride`` (then every ``window_tokens``
  tokens with the last ``query_tokens`` tokens of the prompt and the text so far: In-Context RALM's
  generation);
- ``flare`` (masked): the first search with the prompt, then a look-ahead sentence retrieves when a token's
  probability is <= theta, with its tokens <= beta masked; full scale adds ``flare`` with explicit questions
  and ``flare-keep`` (masked, the prompt's own passage kept before each look-ahead's: the authors'
  ``look_ahead_pre_retrieval="first-keep"``, their long-form WikiAsp setting).

theta is chosen on the dev book before any test prompt is generated: single retrieval's generations on dev
are cut into look-ahead sentences, and theta is the value at which a share ``dev_rate`` of them would
retrieve (``ralm.eval.qa.flare_sweep.theta_for_rate``); FLARE on dev then reports the rate it reached.
Metrics (fixed before any test number was read): ROUGE-L F1, SQuAD token F1 and name recall
(``ralm.eval.qa.metrics``), each method against single retrieval and against no retrieval with a paired
block-bootstrap 95% interval over the prompts in book order (neighbouring prompts may share a story).
Writes ``flare-report.txt``, ``flare-report.json`` and ``flare-report.png`` (each metric against the
retrieval rate) into the run folder, beside ``commands.sh`` (each run a `ralm eval flare` stage).
"""

from __future__ import annotations

import bisect
import json
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from ralm.atomic_files import write_json_atomic, write_jsonl_atomic, write_text_atomic
from ralm.errors import RalmInputError
from ralm.eval.qa.flare_options import FlareOptions
from ralm.eval.qa.lookahead import SENTENCE_END
from ralm.eval.qa.predictions import RESULTS
from ralm.jsonl import read_jsonl
from ralm.lm.options import LMOptions
from ralm.passage_rules import NO_RETRIEVAL
from ralm.pipeline.stage_arguments import EvalFlareArguments
from ralm.pipeline.stage_keys import identities_of
from ralm.pipeline.stages import StagePlan
from ralm.retrieval.options import RetrievalOptions
from ralm.retrieval.passage_forms import RETRIEVED, PassageForm

METRICS = ("rouge_l", "f1", "name_recall")
METRIC_NAMES = {"rouge_l": "ROUGE-L F1", "f1": "token F1", "name_recall": "name recall"}


@dataclass(frozen=True)
class FlareDemoSettings:
    """The long-form test's scale (``QUICK_FLARE``, ``FULL_FLARE``)."""

    dev_prompts: int
    test_prompts: int
    methods: tuple[str, ...]
    """Test methods, each a `METHOD_OPTIONS` name."""
    dev_methods: tuple[str, ...] = ("flare",)
    """FLARE's variants also run on the dev prompts (with single retrieval, which sets theta): the report
    shows dev's scores beside the test table, so a reader sees whether dev and test agree."""
    prompt_tokens: int = 128
    new_tokens: int = 128
    dev_rate: float = 0.6
    """The share of look-ahead sentences theta should make retrieve on dev (the paper: best at 40-80%)."""
    beta: float = 0.4
    window_tokens: int = 32
    query_tokens: int = 32
    max_length: int = 512
    batch_size: int = 8
    passage_form: PassageForm = RETRIEVED
    """What each retrieved passage hands the LM (``ralm eval flare --passage-form``): the paper's passage,
    or its continuation into the next passage of its document."""


# Cost (2-core Xeon, bf16): single and no retrieval decode 8 prompts at once, ~1.5 s a prompt; stride ~8 s
# and FLARE ~12 s a prompt (one sequence at a time, ~60 ms a token, look-aheads regenerated where unsure).
QUICK_FLARE = FlareDemoSettings(
    dev_prompts=8, test_prompts=16, methods=(NO_RETRIEVAL, "single", "stride", "flare")
)
FULL_FLARE = FlareDemoSettings(
    dev_prompts=24,
    test_prompts=48,
    methods=(NO_RETRIEVAL, "single", "stride", "flare", "flare-explicit", "flare-keep"),
    dev_methods=("flare", "flare-keep"),
)
METHOD_OPTIONS = {
    NO_RETRIEVAL: {"method": NO_RETRIEVAL},
    "single": {"method": "single"},
    "stride": {"method": "stride"},
    "flare": {"method": "flare", "query": "masked"},
    "flare-explicit": {"method": "flare", "query": "explicit"},
    # The authors' look_ahead_pre_retrieval="first-keep": the prompt's own passage stays beside each
    # look-ahead's (FLARE's look-ahead passages otherwise replace the account the prompt retrieved).
    "flare-keep": {"method": "flare", "query": "masked", "look_ahead_pre_retrieval": "first-keep"},
}
"""Each method of the table as `FlareOptions` fields (the rest: `flare_options`)."""


def sentence_starts(text: str) -> list[int]:
    """Character offsets where a sentence starts: 0, and after each sentence end (as FLARE's look-ahead
    cuts them, ``ralm.eval.qa.lookahead``) and its whitespace."""
    starts = [0]
    for match in SENTENCE_END.finditer(text):
        at = len(text) - len(text[match.end() :].lstrip())
        if at < len(text) and at != starts[-1]:
            starts.append(at)
    return starts


def continuation_prompts(
    text: str, token_starts: list[int], count: int, prompt_tokens: int, new_tokens: int, name: str
) -> list[dict]:
    """`count` prompts of `text` (tokenised with each token's first character at `token_starts`), spread
    evenly over it: each opens at the first sentence start at or after its even share, takes
    `prompt_tokens` tokens as the prompt and the next `new_tokens` as the reference continuation; no two
    overlap. Ids are ``{name}-{i}``."""
    span = prompt_tokens + new_tokens
    if count * span > len(token_starts):
        raise RalmInputError(
            f"{name}: {len(token_starts)} tokens hold at most {len(token_starts) // span} prompts of "
            f"{prompt_tokens} + {new_tokens} tokens, not {count}"
        )
    n, bounds, out, free = len(token_starts), [*token_starts, len(text)], [], 0
    # The tokens that open a sentence: the one holding each sentence's first character (a tokenizer like
    # Gemma's starts a word's token at the space before it, so the first token at or after the character
    # would drop the sentence's first word).
    openers = sorted({bisect.bisect_right(token_starts, c) - 1 for c in sentence_starts(text)} - {-1})
    step = (n - span) / max(count - 1, 1)
    for i in range(count):
        wanted = max(round(i * step), free)
        at = bisect.bisect_left(openers, wanted)
        if at < len(openers) and openers[at] + span <= n:
            first = openers[at]
        else:  # no sentence opens after it with room left: the last one that fits, else where it fits
            last = bisect.bisect_right(openers, n - span) - 1
            first = openers[last] if last >= 0 and openers[last] >= free else free
        if first + span > n:
            raise RalmInputError(
                f"{name}: no room for prompt {i + 1} of {count} after sentence starts; ask fewer"
            )
        cut, end = bounds[first + prompt_tokens], bounds[first + span]
        out.append(
            {
                "id": f"{name}-{i}",
                "prompt": text[token_starts[first] : cut].strip(),
                "continuation": text[cut:end].strip(),
                "first_token": first,
            }
        )
        free = first + span
    return out


def flare_options(settings: FlareDemoSettings, method: str, theta: float) -> FlareOptions:
    """The options of one method: the same decoding, passages and budget for every method."""
    flare = METHOD_OPTIONS[method]["method"] == "flare"
    return FlareOptions(
        **METHOD_OPTIONS[method],
        theta=theta if flare else FlareOptions.theta,  # only FLARE reads it: the others keep their keys
        beta=settings.beta,
        docs=1,
        max_new_tokens=settings.new_tokens,
        window_tokens=settings.window_tokens,
        max_query_tokens=settings.query_tokens,
    )


def _book_prompts(lm, path: Path, count: int, settings: FlareDemoSettings, name: str) -> list[dict]:
    """The prompts of the book(s) in the eval file `path` (one JSONL document per book, in order)."""
    rows = [row for _, row in read_jsonl(path)]
    per_book = [count // len(rows) + (i < count % len(rows)) for i in range(len(rows))]
    out = []
    for row, n in zip(rows, per_book, strict=True):
        encoded = lm.encode_with_offsets(row["text"])
        if encoded is None:
            raise RalmInputError(
                "--lm: its tokenizer gives no character offsets (a fast tokenizer is needed)"
            )
        out += continuation_prompts(
            row["text"], encoded[1], n, settings.prompt_tokens, settings.new_tokens, f"{name}-{row['id']}"
        )
    return out


def flare_stage(
    out: Path,
    split: str,
    data: Path,
    method: str,
    theta: float,
    lm: LMOptions,
    retrieval: RetrievalOptions,
    settings: FlareDemoSettings,
    known: dict[str, str],
) -> StagePlan:
    """The `ralm eval flare` stage of one method on one prompt file, keyed by the file's contents and the
    index's stage (`known`: the index stage's ``produced()``)."""
    arguments = EvalFlareArguments(
        data=str(data),
        lm=lm,
        retrieval=retrieval,
        format="continuation",
        flare=flare_options(settings, method, theta),
        batch_size=settings.batch_size,
        passage_form=settings.passage_form,
    )
    identities = identities_of([str(data), retrieval.index, retrieval.passages, lm.model], known)
    draft = StagePlan(f"flare {split} {method}", arguments, out, identities=identities)
    folder = out / f"flare-{split}-{method}-{draft.fingerprint[:8]}"
    return replace(draft, arguments=replace(arguments, output=str(folder)), output=folder)


def _records(folder: Path) -> list[dict]:
    return [row for _, row in read_jsonl(folder / "predictions.jsonl")]


def dev_theta(single_dev: Path, rate: float) -> tuple[float, int]:
    """theta from single retrieval's dev generations (``theta_for_rate``) and the sentences it saw."""
    from ralm.eval.qa.flare_sweep import theta_for_rate

    min_probs = [p for row in _records(single_dev) for p in row["sentence_min_probs"]]
    return theta_for_rate(min_probs, rate), len(min_probs)


def flare_demo(
    quick: bool, out: Path, books, lm_path: str, scale, settings: FlareDemoSettings | None = None
) -> dict:
    """The long-form test (the module's docstring) in `out`; returns the report. `books`: the demo's
    `BookSplit`; `scale`: its `ScaleSettings` (the index's passages, the dtype); `settings`: the test's scale
    (default: `QUICK_FLARE` or `FULL_FLARE`)."""
    from ralm.demo.assets import bible_texts
    from ralm.pipeline.dtype_check import resolved_dtype
    from ralm.pipeline.plan import index_stage
    from ralm.pipeline.stages import StageRunner

    started = time.perf_counter()
    settings = settings or (QUICK_FLARE if quick else FULL_FLARE)
    dev_texts = bible_texts(out / "data", books, "dev")
    test_texts = bible_texts(out / "data", books, "test")
    print(f"[demo] corpus: {test_texts.description['corpus']}", flush=True)
    runner = StageRunner(out, "demo")
    index = index_stage(out, test_texts, scale)
    runner.run(index)
    lm = LMOptions(model=lm_path, dtype=resolved_dtype(scale.dtype), max_length=settings.max_length)
    model = lm.load()
    data = {}
    for split, path, count in (
        ("dev", dev_texts.evals["dev"], settings.dev_prompts),
        ("test", test_texts.evals["related"], settings.test_prompts),
    ):
        data[split] = out / "flare-data" / f"{split}-prompts.jsonl"
        data[split].parent.mkdir(parents=True, exist_ok=True)
        write_jsonl_atomic(
            data[split], _book_prompts(model, path, count, settings, split), ensure_ascii=False
        )
    del model
    retrieval = RetrievalOptions(index=str(index.output), passages=str(index.arguments.passages))
    known = index.produced()

    def run(split: str, method: str, theta: float) -> Path:
        stage = flare_stage(out, split, data[split], method, theta, lm, retrieval, settings, known)
        runner.run(stage)
        return stage.output

    dev = {"single": run("dev", "single", 0.0)}
    theta, sentences = dev_theta(dev["single"], settings.dev_rate)
    print(f"[demo] theta {theta:.4f}: {settings.dev_rate:.0%} of {sentences} dev look-ahead sentences")
    dev |= {method: run("dev", method, theta) for method in settings.dev_methods}
    test = {method: run("test", method, theta) for method in settings.methods}
    book = ", ".join(books.related_books)
    report = flare_report(test, dev, theta, sentences, settings, time.perf_counter() - started, book)
    write_json_atomic(out / "flare-report.json", report)
    write_text_atomic(out / "flare-report.txt", report["table"] + "\n")
    flare_plot(report, out / "flare-report.png")
    print(report["table"], flush=True)
    return report


def _scores(folder: Path) -> dict[str, dict]:
    """Each metric's per-prompt values, by prompt id."""
    rows = _records(folder)
    return {metric: {row["id"]: row.get(metric) for row in rows} for metric in METRICS}


def _difference(a: dict, b: dict) -> dict:
    """mean(a - b) over the prompts both score, paired by id in `a`'s order (the prompts' book order), with
    a paired block-bootstrap interval (blocks of neighbouring prompts, their length from the data:
    ``ralm.statistics.dependent_blocks``)."""
    from ralm.statistics import dependent_blocks, paired_mean_difference

    if set(a) != set(b):
        raise RalmInputError(f"the methods' runs hold different prompts: {sorted(set(a) ^ set(b))[:5]}")
    pairs = [(x, b[i]) for i, x in a.items() if x is not None and b[i] is not None]
    xs, ys = [x for x, _ in pairs], [y for _, y in pairs]
    blocks = dependent_blocks([x - y for x, y in pairs])
    return paired_mean_difference(xs, ys, blocks=blocks).as_dict()


def flare_report(
    test: dict[str, Path],
    dev: dict[str, Path],
    theta: float,
    sentences: int,
    settings: FlareDemoSettings,
    seconds: float,
    book: str = "2Chr",
) -> dict:
    """The table: each method's metrics and cost, then its change against single retrieval and against no
    retrieval (FLARE's variants also against masked FLARE; 95% intervals); the dev runs (single retrieval,
    and FLARE's variants at the chosen theta, whose retrieval rate checks it). `book`: the test book(s)."""
    results = {m: json.loads((folder / RESULTS).read_text())["metrics"] for m, folder in test.items()}
    scores = {m: _scores(folder) for m, folder in test.items()}
    dev_metrics = {m: json.loads((folder / RESULTS).read_text())["metrics"] for m, folder in dev.items()}
    on_dev = "; ".join(
        f"{m} {metrics['rouge_l']:.3f}"
        + (f" (retrieved at {metrics['retrieval_rate']:.0%})" if m != "single" else "")
        for m, metrics in dev_metrics.items()
    )
    dev_prompts = len(_scores(next(iter(dev.values())))["rouge_l"])
    # Every method against single retrieval and no retrieval; FLARE's variants also against masked FLARE.
    against = {ref: [m for m in test if m != ref] for ref in ("single", NO_RETRIEVAL) if ref in test}
    variants = [m for m in test if m != "flare" and METHOD_OPTIONS[m]["method"] == "flare"]
    if "flare" in test and variants:
        against["flare"] = variants
    changes = {
        reference: {
            m: {metric: _difference(scores[m][metric], scores[reference][metric]) for metric in METRICS}
            for m in methods
        }
        for reference, methods in against.items()
    }
    prompts = len(next(iter(scores.values()))["rouge_l"])
    lines = [
        f"Long-form generation on {book}: {prompts} prompts of {settings.prompt_tokens} tokens, "
        f"{settings.new_tokens} new tokens each, one passage per search"
        + (f" ({settings.passage_form} passages)" if settings.passage_form != RETRIEVED else ""),
        f"theta {theta:.4f}, chosen on the dev book ({sentences} look-ahead sentences of single retrieval: "
        f"{settings.dev_rate:.0%} would retrieve)",
        f"on dev ({dev_prompts} prompts), ROUGE-L: {on_dev}",
        "",
        f"{'method':<16}{'ROUGE-L':>9}{'token F1':>10}{'names':>8}{'retrieval':>11}{'searches':>10}"
        f"{'s/prompt':>10}",
    ]
    for m, metrics in results.items():
        lines.append(
            f"{m:<16}{metrics['rouge_l']:>9.3f}{metrics['f1']:>10.3f}{metrics.get('name_recall') or 0:>8.3f}"
            f"{metrics['retrieval_rate']:>11.0%}{metrics['searches_per_example'] or 0:>10.2f}"
            f"{metrics['seconds_per_example']:>10.1f}"
        )
    for reference, rows in changes.items():
        lines += ["", f"against {reference} (difference in the mean, paired block-bootstrap 95% interval):"]
        for m, by_metric in rows.items():
            cells = "  ".join(
                f"{METRIC_NAMES[k]} {d['difference']:+.3f} [{d['low']:+.3f}, {d['high']:+.3f}]"
                for k, d in by_metric.items()
            )
            lines.append(f"  {m:<16}{cells}")
    lines.append(f"\nwall time {seconds / 60:.1f} min")
    return {
        "prompts": prompts,
        "settings": asdict(settings),
        "theta": theta,
        "theta_sentences": sentences,
        "dev": dev_metrics,
        "metrics": results,
        "changes": changes,
        "seconds": seconds,
        "table": "\n".join(lines),
    }


def flare_plot(report: dict, path: Path) -> None:
    """Each metric against the share of steps that retrieved, one labelled point per method."""
    from ralm.plots import pyplot, save_figure

    plt = pyplot()
    fig, axes = plt.subplots(1, len(METRICS), figsize=(4 * len(METRICS), 3.4))
    for ax, metric in zip(axes, METRICS, strict=True):
        for method, metrics in report["metrics"].items():
            x, y = metrics["retrieval_rate"], metrics.get(metric) or 0.0
            ax.scatter([x], [y])
            ax.annotate(method, (x, y), fontsize=8, xytext=(3, 3), textcoords="offset points")
        ax.set_xlabel("share of steps that retrieved")
        ax.set_title(METRIC_NAMES[metric])
    fig.tight_layout()
    save_figure(fig, path)
