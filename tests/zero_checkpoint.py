"""Make a real DeepSpeed ZeRO-2 checkpoint of a RerankerModule on CPU, laid out as Lightning writes one.

Run as a script (a fresh process: DeepSpeed initialises torch.distributed, which must not leak into the
test process): ``python tests/zero_checkpoint.py ENCODER_DIR OUT_FOLDER REFERENCE.pt``. Two AdamW steps
move every weight away from its initial value; REFERENCE.pt holds the engine's fp32 weights after them,
the independent reference the export is compared with.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main(encoder_dir: str, out: str, reference: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=os.environ.get("MASTER_PORT", "29541"))
    os.environ.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1")
    import deepspeed
    import torch

    from ralm.train.lit_module import RerankerModule

    torch.manual_seed(0)
    module = RerankerModule(encoder_dir, max_length=40, max_prefix_tokens=12, bm25_prior=True, abstain=True)
    deepspeed.init_distributed(dist_backend="gloo")
    config = {
        "train_micro_batch_size_per_gpu": 1,
        "zero_optimization": {"stage": 2},
        "zero_allow_untested_optimizer": True,
    }
    optimizer = torch.optim.AdamW(module.parameters(), lr=1e-2)
    engine, *_ = deepspeed.initialize(model=module, optimizer=optimizer, config=config)
    ids = torch.randint(5, 50, (2, 10))
    for _ in range(2):
        out_scores = engine.module.encoder(input_ids=ids).logits.sum() + engine.module.prior_weight.sum()
        engine.backward(out_scores)
        engine.step()
    # Lightning's DeepSpeedStrategy.save_checkpoint: tag "checkpoint", its checkpoint dict as client state.
    engine.save_checkpoint(out, client_state={"hyper_parameters": dict(module.hparams)}, tag="checkpoint")
    torch.save({k: v.detach().float().clone() for k, v in engine.module.state_dict().items()}, reference)


if __name__ == "__main__":
    main(*sys.argv[1:4])
