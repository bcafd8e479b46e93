"""`ralm train`: fine-tune the predictive reranker on `ralm data-gen` output and export it.

    ralm train --config configs/train/cpu.yaml --data runs/data --output runs/reranker
    ralm train ... --ckpt-path last        # continue a killed run
    ralm train ... --strategy ddp --devices 2 --accelerator cpu
    ralm train ... --trainer.limit_val_batches 0.5 --print_config   # any pl.Trainer setting

Writes ``OUTPUT/checkpoints`` (best by validation gain recovered, and last), ``OUTPUT/logs``, the exported
Hugging Face folder ``OUTPUT/reranker`` (docs/formats.md §5) and ``OUTPUT/summary.json``.

The ``trainer`` group is ``pl.Trainer``'s own signature, as LightningCLI builds it, with ralm's values
(``ralm.rerank.settings``: TRAINER_DEFAULTS; TRAINER_SKIPPED are set by ralm, TRAINER_FIXED may not change).
"""

from __future__ import annotations

from typing import Any, Literal

from jsonargparse import ArgumentParser

from ralm.command_args import ClassGroup, call_with_args, parser_for
from ralm.errors import RalmInputError
from ralm.rerank.settings import (
    TRAINER_DEFAULTS,
    TRAINER_LINKS,
    TRAINER_SKIPPED,
    EncoderArgs,
    LoaderArgs,
    OptimArgs,
    RunArgs,
)

# Former option names (README, "Usage"): the output folder is --output in every command, and the Trainer's
# settings ralm re-declared are the trainer group's, under Lightning's names (their leaf spellings,
# ``--log-every``, are former too: ``command_args.option_names`` derives them).
RENAMED = {
    "out_dir": "output",
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
    encoder: EncoderArgs = EncoderArgs(),  # noqa: B008 - frozen-by-convention defaults are the schema
    loader: LoaderArgs = LoaderArgs(),  # noqa: B008
    optim: OptimArgs = OptimArgs(),  # noqa: B008
    run: RunArgs = RunArgs(),  # noqa: B008
    trainer: dict[str, Any] | None = None,
    abstain: bool = False,
    bm25_prior: bool = False,
    ckpt_path: str | None = None,
    seed: int = 0,
    push_to_hub: str | None = None,
) -> dict:
    """Train the predictive reranker (In-Context RALM §6.2) and export the best checkpoint.

    Args:
        data: A `ralm data-gen` dataset folder (format ralm-rerank-data/1).
        output: Output folder for checkpoints, logs, the exported reranker and summary.json.
        encoder: The cross-encoder and its input lengths.
        loader: Batching and the train/validation split.
        optim: Loss, optimizer and schedule.
        run: Validation and checkpoint cadence, loggers, what is kept.
        trainer: pl.Trainer keyword arguments (hardware, strategy, precision, accumulation, clipping, ...)
            over ralm's values; on the command line every one is an option (--print_config lists them).
        abstain: Add the empty passage (no retrieval) to every candidate group.
        bm25_prior: Score = f + w * (BM25 score standardised in its group), f starting at 0 and w at 1,
            so the untrained reranker ranks like BM25 and training learns corrections.
        ckpt_path: Resume from this checkpoint; `last` means OUTPUT/checkpoints/last.ckpt.
        seed: Seed for the split, the batch order and initialisation.
        push_to_hub: Upload the exported reranker (with its model card) to this hub repo (owner/name,
            private; needs `huggingface-cli login`). The repo id is checked before training starts.
    """
    from ralm.rerank.fit import fit_reranker  # Lightning and torch load only when training runs

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
        ckpt_path=ckpt_path,
        seed=seed,
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


def _print_summary(summary: dict) -> None:
    val = summary["last_validation"]
    at_best = summary.get("validation_at_best") or val

    def fmt(key: str) -> str:
        return _fmt(val, key)

    lines = [
        "ralm train: done",
        f"  data          {summary['data']}",
        f"  steps         {summary['steps']} in {summary['seconds']:.1f} s ({summary['accelerator']}, "
        f"{summary['precision']}, {summary['world_size']} process(es))",
        f"  validation    top-1 agreement {fmt('val/top1_agreement')}, gain recovered {fmt('val/gain_recovered')}, "
        f"retrieval rate {fmt('val/retrieval_rate')}",
        f"  best          {summary['best_checkpoint']} (gain recovered {summary['best_gain_recovered']})",
        f"  decision      {summary.get('decision', 'trained')} (validation mean log-prob: best step "
        f"{_fmt(at_best, 'val/pick_logprob')}, BM25 {_fmt(at_best, 'val/bm25_logprob')}, no retrieval "
        f"{_fmt(at_best, 'val/none_logprob')}; a rule replaces a simpler one only when its 95% CI is above 0)",
        *_evidence_lines(summary.get("decision_evidence") or {}),
        f"  reranker      {summary['reranker']}",
    ]
    print("\n".join(lines))


def _evidence_lines(evidence: dict) -> list[str]:
    """One line per paired comparison behind the export decision (mean log-prob difference per prefix)."""
    lines = []
    for name, d in evidence.items():
        if isinstance(d, dict):
            verdict = "better" if d["better"] else "tie or worse"
            lines.append(
                f"                {name}: {d['difference']:+.3f} nats [{d['low']:+.3f}, {d['high']:+.3f}] "
                f"over {d['items']} validation prefixes, {verdict}"
            )
    return lines


def build_parser() -> ArgumentParser:
    import lightning.pytorch as pl  # the trainer group is its signature: Lightning loads for the parser

    # "auto" is ralm's rule for precision (bf16-mixed on a GPU that computes bf16, else 32-true), as null.
    trainer = ClassGroup(pl.Trainer, frozenset(TRAINER_SKIPPED), TRAINER_DEFAULTS, TRAINER_LINKS,
                         widened={"precision": Literal["auto"]})  # fmt: skip
    return parser_for(train, prog="ralm train", renamed=RENAMED, class_groups={"trainer": trainer})


def main(argv: list[str] | None = None) -> None:
    call_with_args(train, build_parser(), argv)


if __name__ == "__main__":
    main()
