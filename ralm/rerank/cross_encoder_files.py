"""The files that make a ralm export a sentence-transformers CrossEncoder scoring as ralm does.

``modules.json`` names one input module, ``cross_encoder_input.RalmCrossEncoderInput`` (copied from this
package with ``pair_rule.py``), whose settings in ``sentence_bert_config.json`` are ralm's lengths;
``config_sentence_transformers.json`` sets the identity activation so ``predict`` returns the model's
logit, the score ralm ranks by (without the BM25 prior, which needs BM25 scores: see the model card).
Writing them needs no sentence-transformers; loading needs ``trust_remote_code=True`` (the module is code:
sentence-transformers' stock ``Transformer`` hands every pair to one tokenizer call, whose one truncation
rule cannot keep the prefix's last tokens and then cut only the passage; the model card says so).
When the export decision is not ``trained`` the module's settings carry the decision's note (its rule's
``ExportForm.note``, as the model card's), and loading refuses with it: the folder is then not a reranker
to rank by.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from ralm.passage_rules import RULES, TRAINED

_PACKAGE = Path(__file__).parent
MODULE_FILES = ("cross_encoder_input.py", "pair_rule.py")
"""The code an export holds, which sentence-transformers runs with ``trust_remote_code=True``."""
MODULE_TYPE = "cross_encoder_input.RalmCrossEncoderInput"


def write_cross_encoder_files(
    folder: Path, *, max_length: int, max_prefix_tokens: int, decision: str = TRAINED
) -> None:
    """Write the sentence-transformers layout into an export folder (before its rename)."""

    folder = Path(folder)
    for name in MODULE_FILES:
        shutil.copyfile(_PACKAGE / name, folder / name)
    modules = [{"idx": 0, "name": "0", "path": "", "type": MODULE_TYPE}]
    module_config = {
        "transformer_task": "sequence-classification",
        "modality_config": {"text": {"method": "forward", "method_output_name": "logits"}},
        "module_output_name": "scores",
        # ralm's rule after the prefix cut: only the passage is truncated, to the export's length.
        "processing_kwargs": {"text": {"truncation": "only_second", "max_length": max_length}},
        "max_prefix_tokens": max_prefix_tokens,
        "decision": decision,
        "refusal": RULES[decision].export.note,  # the input module refuses to load with this note
    }
    model_config = {
        "model_type": "CrossEncoder",
        "activation_fn": "torch.nn.modules.linear.Identity",
        "prompts": {},
        "default_prompt_name": None,
    }
    for name, value in (
        ("modules.json", modules),
        ("sentence_bert_config.json", module_config),
        ("config_sentence_transformers.json", model_config),
    ):
        (folder / name).write_text(json.dumps(value, indent=2) + "\n", encoding="utf-8")
