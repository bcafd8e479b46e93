"""wandb: auto never stops a training, on without a key stops before any work, a run gets what the summary
says."""

from __future__ import annotations

import json
import time

import pytest

from ralm.errors import RalmInputError
from ralm.train.loggers import wandb_api_key_configured, wandb_mode
from tests.rerank_fixtures import fit_tiny_reranker, keyword_dataset


def read_offline_run(path) -> tuple[dict, dict]:
    """(config, summary) of an offline wandb run file: wandb's record log (32 KiB blocks of chunks with a
    7-byte header: crc32, length, kind 1-4 = full/first/middle/last) of ``Record`` protobufs, replayed."""
    import struct

    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    assert data[:4] == b":W&B"
    block, pos, chunk, records = 32768, 7, b"", []
    while pos + 7 <= len(data):
        if block - pos % block < 7:  # a block's tail too short for a header is padding
            pos += block - pos % block
            continue
        _, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        chunk, pos = chunk + data[pos + 7 : pos + 7 + length], pos + 7 + length
        if kind in (1, 4):
            records.append(chunk)
            chunk = b""
    config, summary = {}, {}
    for raw in records:
        record = wandb_internal_pb2.Record()
        record.ParseFromString(raw)
        kind = record.WhichOneof("record_type")
        if kind in ("config", "summary"):
            target = config if kind == "config" else summary
            for item in getattr(record, kind).update:
                target[item.key or "/".join(item.nested_key)] = json.loads(item.value_json)
    return config, summary


def test_an_api_key_is_found_in_the_environment_or_in_wandb_logins_netrc(tmp_path):
    netrc = tmp_path / "netrc"
    netrc.write_text("machine api.wandb.ai\n  login user\n  password abc123\n")
    netrc.chmod(0o600)
    assert wandb_api_key_configured({"WANDB_API_KEY": "x"})
    assert wandb_api_key_configured({"NETRC": str(netrc)})
    assert not wandb_api_key_configured({"NETRC": str(netrc), "WANDB_BASE_URL": "https://wandb.example.org"})
    assert not wandb_api_key_configured({"NETRC": str(tmp_path / "missing")})


def test_auto_falls_back_to_offline_and_on_without_a_key_names_the_fix(tmp_path):
    pytest.importorskip("wandb")
    no_key = {"NETRC": str(tmp_path / "missing")}
    assert wandb_mode("auto", no_key) == "offline"
    assert wandb_mode("off", no_key) is None
    assert wandb_mode("auto", {**no_key, "WANDB_API_KEY": "k"}) == "online"
    assert wandb_mode("on", {**no_key, "WANDB_MODE": "offline"}) == "offline"
    with pytest.raises(
        RalmInputError, match="run.wandb=on: no wandb API key .*wandb login.*WANDB_MODE=offline"
    ):
        wandb_mode("on", no_key)


def test_an_offline_wandb_run_gets_the_config_the_validation_metrics_and_the_decision(
    tmp_path, real_documents, tiny_encoder_dir, monkeypatch
):
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("NETRC", str(tmp_path / "missing"))
    data = keyword_dataset(real_documents, tmp_path / "data", 24, k=3, seed=4)
    summary = fit_tiny_reranker(
        data,
        tmp_path / "out",
        tiny_encoder_dir,
        max_steps=2,
        loader={"val_batch_size": 16},
        run={"wandb": "on"},
        bm25_prior=True,
    )
    (run_file,) = (tmp_path / "out" / "wandb").glob("offline-run-*/run-*.wandb")
    config, logged = read_offline_run(run_file)
    for _ in range(50):  # wandb's service process may still be writing the file after finish() returned
        if "decision" in logged:
            break
        time.sleep(0.2)
        config, logged = read_offline_run(run_file)
    assert logged["decision"] == summary["decision"]
    assert logged["val/gain_recovered"] == pytest.approx(summary["last_validation"]["val/gain_recovered"])
    evidence = summary["decision_evidence"]
    assert logged["selection_prefixes"] == evidence["selection"]["prefixes"] > 0
    assert logged["decision_prefixes"] == evidence["decision"]["prefixes"] > 0
    for name, d in evidence["comparisons"].items():
        assert logged[f"decision/{name}"] == pytest.approx(d["difference"])
    assert config["lr"] == pytest.approx(1e-3)  # the module's hyperparameters
    assert config["ralm"]["optim"]["max_steps"] == 2  # and ralm's whole config
