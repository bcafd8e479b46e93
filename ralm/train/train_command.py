"""`ralm train`: fine-tune the predictive reranker on `ralm data-gen` output and export it.

    ralm train --config configs/train/cpu.yaml --data runs/data --output runs/reranker
    ralm train ... --ckpt-path last        # continue a killed run
    ralm train ... --strategy ddp --devices 2 --accelerator cpu
    ralm train ... --trainer.limit_val_batches 0.5 --print_config   # any pl.Trainer setting

Writes ``OUTPUT/checkpoints`` (best by validation gain recovered, and last), ``OUTPUT/logs``, the exported
Hugging Face folder ``OUTPUT/reranker`` (docs/formats.md §5) and ``OUTPUT/summary.json``.

The ``trainer`` group is ``pl.Trainer``'s own signature, as LightningCLI builds it, with ralm's values
(``ralm.train.settings``: TRAINER_DEFAULTS; TRAINER_SKIPPED are set by ralm, TRAINER_FIXED may not change).
"""

from __future__ import annotations

from typing import Any, Literal

from jsonargparse import ArgumentParser

from ralm.cli.command_args import ClassGroup, call_with_args, parser_for
from ralm.config_types import HalfOpenUnitInterval, NonNegativeInt, check_arguments
from ralm.errors import RalmInputError
from ralm.passage_rules import RULES, TRAINED
from ralm.rerank.model_card import cost_text
from ralm.train.decision import DEFAULT_MARGIN, RULE_SENTENCE
from ralm.train.settings import (
    TRAINER_DEFAULTS,
    TRAINER_LINKS,
    TRAINER_SKIPPED,
    EncoderOptions,
    LoaderOptions,
    OptimOptions,
    RunOptions,
)

# Former option names (CHANGELOG.md): the output folder is --output in every command, and the Trainer's
# settings ralm re-declared are the trainer group's, under Lightning's names (their leaf spellings,
# ``--log-every``, are former too: ``command_args.option_names`` derives them).
RENAMED = {
    "out_dir": "output",
    "encoder.max_length": "encoder.max_pair_tokens",  # `--max-length` is the frozen LM's input everywhere
    "run.log_every": "trainer.log_every_n_steps",
    "run.progress_bar": "trainer.enable_progress_bar",
    "optim.accumulate": "trainer.accumulate_grad_batches",
    "optim.grad_clip": "trainer.gradient_clip_val",
    **{
        f"run.{name}": f"trainer.{name}"
        for name in ("accelerator", "devices", "num_nodes", "strategy", "precision")
    },
}


def train(
    data: str,
    output: str,
    encoder: EncoderOptions = EncoderOptions(),  # noqa: B008 - frozen-by-convention defaults are the schema
    loader: LoaderOptions = LoaderOptions(),  # noqa: B008
    optim: OptimOptions = OptimOptions(),  # noqa: B008
    run: RunOptions = RunOptions(),  # noqa: B008
    trainer: dict[str, Any] | None = None,
    abstain: bool = False,
    bm25_prior: bool = False,
    zero_shot_prior: bool = False,
    ckpt_path: str | None = None,
    seed: int = 0,
    margin: HalfOpenUnitInterval = DEFAULT_MARGIN,
    max_rerank_lm_inputs: NonNegativeInt | None = None,
    no_lm_export: bool = False,
    push_to_hub: str | None = None,
) -> dict:
    """Train the predictive reranker (In-Context RALM §6.2) and export the best checkpoint.

    Args:
        data: A `ralm data-gen` dataset folder (format ralm-rerank-data/2).
        output: Output folder for checkpoints, logs, the exported reranker and summary.json.
        encoder: The cross-encoder and its input lengths.
        loader: Batching and the train/validation split.
        optim: Loss, optimizer and schedule.
        run: Validation and checkpoint cadence, loggers, what is kept.
        trainer: pl.Trainer keyword arguments (hardware, strategy, precision, accumulation, clipping, ...)
            over ralm's values; on the command line every one is an option (--print_config lists them).
        abstain: Add the empty passage (no retrieval) to every candidate group. The export is decided on
            held-out decision prefixes (loader.decision_fraction) among no retrieval, BM25's top-1, BM25's
            top-1 when its score is at least T, the LM's zero-shot pick, that pick when it raises the log-prob
            of the prefix's last tokens over no passage by at least M nats (T fitted on the training
            prefixes, M on the training and selection ones) and the trained reranker: export the rule that
            keeps the promise (its one-sided 95% block-bootstrap bound is no worse than no retrieval by more
            than the margin) and is best on the decision prefixes (the highest mean log-prob; an exact tie
            goes to the more learned rule).
            Without abstain: BM25's top-1 is the reference and the rules are BM25 and trained.
        bm25_prior: Score = f + w * (BM25 score standardised in its group), f starting at 0 and w at 1,
            so the untrained reranker ranks like BM25 and training learns corrections; with abstain it
            starts as the threshold rule (T fitted on the training prefixes), a candidate of selection.
        zero_shot_prior: The stacked reranker: score = f + a * log p(y' | [d; x]), the empty passage's
            f + a * log p(y' | x) + b (y' the prefix's last tokens, scored by the frozen LM in data-gen), f
            starting at 0, a and b so that the untrained reranker is the zero-shot rule that abstains below
            a y' gain of M (fitted on the training prefixes; without abstain the zero-shot rule). Training
            learns the encoder's correction of the LM's own rerank; the start is a candidate of selection.
            It reads the frozen LM per candidate at rerank time, as the zero-shot rule does, plus the
            encoder. Needs data with y' (ralm-rerank-data/2); not with bm25_prior.
        margin: δ, the promise's margin: the exported rule may be worse than no retrieval (without
            abstain, BM25) by at most this share of token perplexity (0.01: 1%).
        max_rerank_lm_inputs: Export only a rule that reads at most this many frozen-LM inputs per
            retrieval (0: no LM at rerank time, so not the zero-shot rules, which read one per candidate);
            summary.json gives every rule's cost per retrieval. Default: no budget.
        no_lm_export: Also export, to OUTPUT/reranker-no-lm, the best rule that reads no frozen LM at
            rerank time (the same decision under max_rerank_lm_inputs 0, from the same scores: the trained
            reranker, BM25's top-1, the threshold rule or no retrieval), beside the export of the rule the
            budget allows; summary.json's no_lm_export records it.
        ckpt_path: Resume from this checkpoint; `last` means OUTPUT/checkpoints/last.ckpt.
        seed: Seed for the split, the batch order and initialisation.
        push_to_hub: Upload the exported reranker (with its model card) to this hub repo (owner/name,
            private; needs `huggingface-cli login`). The repo id is checked before training starts.
    """
    from ralm.train.fit import fit_reranker  # Lightning and torch load only when training runs

    check_arguments(train, locals())

    if push_to_hub is not None:
        from ralm.rerank.hub import check_repo_id
        from ralm.rerank.model_card import hub_base_model

        check_repo_id(push_to_hub)  # before hours of training, not after
        if hub_base_model(encoder.name) is None:
            raise RalmInputError(
                f"--push-to-hub: encoder {encoder.name} has no hub id for the model card's base_model; "
                "use a hub encoder or a folder whose config.json records `_name_or_path`"
            )

    summary = fit_reranker(
        data,
        output,
        encoder=encoder,
        loader=loader,
        optim=optim,
        run=run,
        trainer=trainer,
        abstain=abstain,
        bm25_prior=bm25_prior,
        zero_shot_prior=zero_shot_prior,
        ckpt_path=ckpt_path,
        seed=seed,
        margin=margin,
        max_rerank_lm_inputs=max_rerank_lm_inputs,
        no_lm_export=no_lm_export,
    )
    if summary:
        _print_summary(summary)
        if push_to_hub is not None:
            from ralm.rerank.hub import push_reranker

            summary["pushed_to"] = push_reranker(summary["reranker"], push_to_hub)
            print(f"  pushed        {summary['pushed_to']}")
    return summary


def _fmt(metrics: dict, key: str) -> str:
    value = metrics.get(key)
    return "n/a" if value is None else f"{value:.3f}"


def _exported(choice: str) -> str:
    """What an export of `choice` plays, as the summary says it."""
    rule = RULES.get(choice)
    return rule.export.exported if rule and rule.export else choice


def _print_summary(summary: dict) -> None:
    val = summary["last_validation"]
    evidence = summary.get("decision_evidence") or {}
    sel, dec = evidence.get("selection") or {}, evidence.get("decision") or {}
    choice = summary.get("decision", TRAINED)
    lines = [
        "ralm train: done",
        f"  data          {summary['data']}",
        f"  steps         {summary['steps']} in {summary['seconds']:.1f} s ({summary['accelerator']}, "
        f"{summary['precision']}, {summary['world_size']} process(es))"
        + (
            f"; stopped early: {summary['config']['run']['patience']} validations without a new best"
            if summary.get("stopped_early")
            else ""
        ),
        f"  validation    last: top-1 agreement {_fmt(val, 'val/top1_agreement')}, gain recovered "
        f"{_fmt(val, 'val/gain_recovered')}, retrieval rate {_fmt(val, 'val/retrieval_rate')}",
        f"  selected      step {sel.get('step')} ({sel.get('checkpoint')}), gain recovered "
        f"{_fmt(sel, 'gain_recovered')}: the best of {sel.get('validations')} validations on "
        f"{sel.get('prefixes')} selection prefixes ({sel.get('documents')} documents)",
        f"  decision      {choice} on {dec.get('prefixes')} decision prefixes ({dec.get('documents')} other "
        f"documents, overlap {evidence.get('overlap')}; mean log-prob per prefix: "
        + ", ".join(f"{k} {v:.3f}" for k, v in (dec.get("mean_logprob") or {}).items() if v is not None)
        + ")",
        f"  rule          {RULE_SENTENCE}",
        *_promise_lines(evidence.get("promise") or {}),
        *_evidence_lines(evidence.get("comparisons") or {}, dec.get("target_tokens")),
        *([f"  cost          {costs}"] if (costs := cost_text(evidence.get("costs") or {})) else []),
        f"  exported      {_exported(choice)}: {summary['reranker']}"
        + ("" if summary.get("exported_checkpoint") else " (no model weights)"),
    ]
    if no_lm := summary.get("no_lm_export"):
        lines.append(
            f"  no LM         {_exported(no_lm['decision'])}: {no_lm['reranker']}"
            + ("" if no_lm.get("exported_checkpoint") else " (no model weights)")
            + " (the best rule that reads no frozen LM at rerank time)"
        )
    print("\n".join(lines))


def _promise_lines(promise: dict) -> list[str]:
    """One line per rule's promise test (non-inferiority to the reference within the margin)."""
    if not promise:
        return []
    threshold = promise.get("threshold")
    lines = [
        f"  promise       not worse than {promise.get('reference')} by more than "
        f"{promise['margin']:.1%} token perplexity ({promise['margin_nats']:.3f} nats per prefix); T = "
        + (
            "none (no threshold gains on the training prefixes: the rule is no retrieval)"
            if threshold is None
            else f"{threshold:.3f} (fitted on the training prefixes)"
        )
        + (
            f"; M = {m:.3f} nats of y' (fitted on the training and selection prefixes)"
            if (m := promise.get("rank_threshold")) is not None
            else ""
        )
    ]
    for rule, t in (promise.get("tests") or {}).items():
        needed = t.get("prefixes_for_power")
        verdict = "keeps it" if t["passes"] else "fails"
        lines.append(
            f"                {rule} - {promise.get('reference')}: {t['difference']:+.3f} nats, "
            f"one-sided 95% bound {t['bound']:+.3f} vs {t['margin']:+.3f}: {verdict} "
            f"({t['items']} prefixes: {t['prefixes']}, {t['blocks']} blocks; 80% power to keep it for an "
            f"equal rule needs {needed if needed is not None else 'n/a'} prefixes)"
        )
    return lines


def _evidence_lines(comparisons: dict, target_tokens: int | None) -> list[str]:
    """One line per paired comparison behind the export decision (mean log-prob difference per prefix)."""
    lines = []
    for name, d in comparisons.items():
        verdict = "better" if d["better"] else "tie or worse"
        detectable = d.get("detectable_difference")
        shown = "n/a" if detectable is None else f"{detectable:.3f}"
        per_token = f", {detectable / target_tokens:.4f} per token" if detectable and target_tokens else ""
        lines.append(
            f"                {name}: {d['difference']:+.3f} nats [{d['low']:+.3f}, {d['high']:+.3f}] over "
            f"{d['items']} decision prefixes ({d.get('blocks', d['items'])} blocks), {verdict}; smallest "
            f"detectable difference {shown}{per_token} (80% power)"
        )
    return lines


def build_parser() -> ArgumentParser:
    import lightning.pytorch as pl  # the trainer group is its signature: Lightning loads for the parser

    # "auto" is ralm's rule for precision (bf16-mixed on a GPU that computes bf16, else 32-true), as null.
    trainer = ClassGroup(
        pl.Trainer,
        frozenset(TRAINER_SKIPPED),
        TRAINER_DEFAULTS,
        TRAINER_LINKS,
        widened={"precision": Literal["auto"]},
    )
    return parser_for(train, prog="ralm train", renamed=RENAMED, class_groups={"trainer": trainer})


def main(argv: list[str] | None = None) -> None:
    call_with_args(train, build_parser(), argv)


if __name__ == "__main__":
    main()
