"""``--push-to-hub REPO``: an exported reranker onto the Hugging Face hub, checked before any upload.

The folder must be a ralm export (a ``ralm_reranker.json`` that ``RerankerExport`` reads), its model card
must carry the hub metadata (``ralm.rerank.model_card.check_model_card``) and the repo id must be a valid
``owner/name``; each failure is a one-line RalmInputError with the fix, and nothing is uploaded.
"""

from __future__ import annotations

from pathlib import Path

from ralm.errors import RalmInputError
from ralm.rerank.export_record import RERANKER_FILE, RerankerExport
from ralm.rerank.model_card import check_model_card


def check_export(folder: Path) -> RerankerExport:
    """``ralm_reranker.json`` of an export folder, or a RalmInputError saying what the folder is not (or
    which field of its record is wrong): nothing is uploaded that ralm itself would refuse to load."""
    path = Path(folder) / RERANKER_FILE
    if not path.is_file():
        raise RalmInputError(
            f"{folder}: not a ralm reranker export (no {RERANKER_FILE}; `ralm train` writes one)"
        )
    return RerankerExport.from_json(path)


def check_repo_id(repo_id: str) -> None:
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(repo_id)
    except HFValidationError as err:
        raise RalmInputError(
            f"--push-to-hub {repo_id!r}: not a valid hub repo id ({err}); use owner/name"
        ) from None
    if "/" not in repo_id:
        raise RalmInputError(f"--push-to-hub {repo_id!r}: give the owner too (owner/name)")


def push_reranker(folder: str | Path, repo_id: str, *, private: bool = True, token: str | None = None) -> str:
    """Create (or reuse) the model repo and upload the folder; returns the commit URL."""
    from huggingface_hub import HfApi

    folder = Path(folder)
    check_repo_id(repo_id)
    check_export(folder)
    check_model_card(folder)
    api = HfApi(token=token)
    api.create_repo(repo_id, repo_type="model", private=private, exist_ok=True)
    commit = api.upload_folder(
        folder_path=str(folder), repo_id=repo_id, repo_type="model", commit_message="ralm reranker export"
    )
    return str(getattr(commit, "commit_url", commit))
