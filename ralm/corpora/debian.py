"""Fetch a Debian package's files into a user cache, without root: `apt-get download` + `dpkg-deb -x`.

Only the package lists need root (`apt-get update`, once per machine). The downloaded `.deb` is checked
against the SHA256 that apt's signed package lists record for it, and that hash is kept in a small
manifest beside the file, so a later run verifies the cached file before trusting it (a truncated or
corrupt file is fetched again) and works offline once the cache is filled. Every step writes to a
temporary name inside the cache and renames at the end, and a file lock keeps two processes (parallel
tests, two demos) from fetching the same package at once.

Layout under the cache folder (``$RALM_CACHE``, else ``~/.cache/ralm``)::

    debs/<file>.deb            the package as apt downloaded it
    debs/<package>.json        {"package", "version", "filename", "sha256", "size"}
    pkgs/<package>/            its files, extracted (usr/share/...), with .ralm-extracted = sha256
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

from ralm.atomic_files import publish_dir, publish_file, write_json_atomic
from ralm.errors import RalmInputError
from ralm.fingerprints import file_sha256

_STAMP = ".ralm-extracted"
# Unpacked packages are a few times larger than their .deb; refuse early rather than fail half-way.
_SPACE_FACTOR = 5
_NO_APT_HINT = (
    "point ralm at your own text instead (e.g. `ralm demo --corpus DOCS.jsonl --eval-text HELD_OUT.jsonl`)"
)


class PackageFetchError(RalmInputError):
    """A corpus package could not be fetched or unpacked; the message says why and what to do."""


def cache_root() -> Path:
    """The cache folder: ``$RALM_CACHE`` when set, else ``~/.cache/ralm``."""
    return Path(os.environ.get("RALM_CACHE") or Path.home() / ".cache" / "ralm").expanduser()


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _disk_full(where: Path, err: OSError) -> PackageFetchError:
    return PackageFetchError(
        f"{where}: no space left on the device ({err.strerror}); free some or set RALM_CACHE"
    )


def _run(cmd: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, LC_ALL="C")  # English messages, so the checks below can read them
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=env, check=False)


def apt_record(package: str) -> dict:
    """Version, file name, size and SHA256 of the candidate `package` from apt's package lists."""
    if shutil.which("apt-cache") is None or shutil.which("apt-get") is None:
        raise PackageFetchError(
            f"package {package}: apt-get is not available on this machine, so ralm cannot fetch its "
            f"real corpora; {_NO_APT_HINT}"
        )
    proc = _run(["apt-cache", "show", "--no-all-versions", package])
    fields: dict[str, str] = {}
    for line in proc.stdout.splitlines():
        key, sep, value = line.partition(":")
        if sep and not line.startswith(" ") and key not in fields:
            fields[key] = value.strip()
    if proc.returncode != 0 or "SHA256" not in fields:
        raise PackageFetchError(
            f"package {package}: not in apt's package lists ({proc.stderr.strip() or 'no record'}); "
            "run `sudo apt-get update` once, or " + _NO_APT_HINT
        )
    return {
        "package": package,
        "version": fields.get("Version", ""),
        "filename": Path(fields.get("Filename", f"{package}.deb")).name,
        "sha256": fields["SHA256"].lower(),
        "size": int(fields.get("Size", "0") or 0),
    }


def _cached_deb(debs: Path, package: str) -> tuple[dict, Path] | None:
    """The manifest and .deb of an earlier fetch when the file's hash still matches; else None."""
    manifest_path = debs / f"{package}.json"
    try:
        manifest = json.loads(manifest_path.read_text())
        deb = debs / manifest["filename"]
        if deb.is_file() and file_sha256(deb) == manifest["sha256"]:
            return manifest, deb
    except (OSError, ValueError, KeyError):
        pass
    return None


def _download(package: str, debs: Path) -> tuple[dict, Path]:
    record = apt_record(package)
    free = shutil.disk_usage(debs).free
    if record["size"] and free < _SPACE_FACTOR * record["size"]:
        raise PackageFetchError(
            f"{debs}: {free // 2**20} MiB free, package {package} needs about "
            f"{_SPACE_FACTOR * record['size'] // 2**20} MiB; free some space or set RALM_CACHE"
        )
    with tempfile.TemporaryDirectory(prefix=".download-", dir=debs) as tmp:
        proc = _run(["apt-get", "download", "-q", package], cwd=Path(tmp))
        if proc.returncode != 0:
            message = (proc.stderr or proc.stdout).strip()
            if "No space left" in message:
                raise PackageFetchError(f"{debs}: no space left on the device while downloading {package}")
            if any(
                s in message
                for s in (
                    "Temporary failure resolving",
                    "Could not resolve",
                    "Failed to fetch",
                    "Could not connect",
                    "Network is unreachable",
                    "Connection failed",
                )
            ):
                raise PackageFetchError(
                    f"package {package}: apt-get download could not reach the network "
                    f"({message.splitlines()[-1][:160]}); fetch once with network access, or {_NO_APT_HINT}"
                )
            raise PackageFetchError(
                f"package {package}: apt-get download failed: {message.splitlines()[-1][:200]}"
            )
        files = sorted(Path(tmp).glob("*.deb"))
        if len(files) != 1:
            raise PackageFetchError(
                f"package {package}: apt-get download wrote {len(files)} .deb files, not one"
            )
        got = file_sha256(files[0])
        if got != record["sha256"]:
            raise PackageFetchError(
                f"{files[0].name}: SHA256 {got[:16]}... does not match apt's record "
                f"{record['sha256'][:16]}...; "
                "the mirror served a corrupt file, try again later"
            )
        deb = debs / record["filename"]
        publish_file(files[0], deb)
    write_json_atomic(debs / f"{package}.json", record, indent=1)
    return record, deb


def _extract(deb: Path, sha256: str, target: Path) -> None:
    if shutil.which("dpkg-deb") is None:
        raise PackageFetchError(f"{deb}: dpkg-deb is not available to unpack it; {_NO_APT_HINT}")
    with tempfile.TemporaryDirectory(prefix=f".{target.name}-", dir=target.parent) as tmp:
        unpacked = Path(tmp) / "root"
        proc = _run(["dpkg-deb", "-x", str(deb), str(unpacked)])
        if proc.returncode != 0:
            if "No space left" in proc.stderr:
                raise PackageFetchError(
                    f"{target.parent}: no space left on the device while unpacking {deb.name}"
                )
            raise PackageFetchError(f"{deb}: dpkg-deb -x failed: {proc.stderr.strip()[:200]}")
        (unpacked / _STAMP).write_text(sha256 + "\n")  # inside the folder published whole below
        publish_dir(
            unpacked, target
        )  # replaces an outdated extraction (another version, or an interrupted one)


def fetch_package(package: str, cache: Path | str | None = None) -> Path:
    """The folder holding `package`'s files (``.../usr/share/...``), fetching and unpacking it if needed.

    Reuses a cached download whose SHA256 matches its manifest and needs neither apt nor the network
    then. Raises `PackageFetchError` (a `RalmInputError`) for: no apt, no package lists, no network,
    a full disk, a hash mismatch.
    """
    root = Path(cache) if cache is not None else cache_root()
    debs, pkgs = root / "debs", root / "pkgs"
    target = pkgs / package
    try:
        debs.mkdir(parents=True, exist_ok=True)
        pkgs.mkdir(parents=True, exist_ok=True)
        with _locked(root / "locks" / f"{package}.lock"):
            cached = _cached_deb(debs, package)
            manifest, deb = cached if cached is not None else _download(package, debs)
            stamp = target / _STAMP
            if stamp.is_file() and stamp.read_text().strip() == manifest["sha256"]:
                return target
            _extract(deb, manifest["sha256"], target)
            return target
    except OSError as err:
        if err.errno in (errno.ENOSPC, errno.EDQUOT):
            raise _disk_full(root, err) from None
        raise
