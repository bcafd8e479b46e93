"""ralm.corpora.debian.fetch_package: cache, hash check, re-fetch and errors, on a .deb built in the test.

The real `dpkg-deb` builds and unpacks the package. The network side of apt is replaced by two small
scripts on PATH (`apt-cache show` prints the record, `apt-get download` copies the file or fails the way
apt fails), so each failure mode runs without a network; the real apt is exercised by the slow tests.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from ralm.corpora.debian import PackageFetchError, fetch_package
from ralm.errors import RalmInputError

pytestmark = pytest.mark.skipif(shutil.which("dpkg-deb") is None, reason="needs dpkg-deb")

# Tools dpkg-deb and the fake apt scripts need; apt-get and apt-cache are deliberately absent.
_TOOLS = ["dpkg-deb", "tar", "sh", "bash", "cp", "cat", "gzip", "xz", "zstd", "env", "rm", "mkdir"]


def _build_deb(tmp_path: Path, text: str) -> Path:
    root = tmp_path / "build"
    (root / "DEBIAN").mkdir(parents=True)
    (root / "DEBIAN/control").write_text(
        "Package: ralm-demo-text\nVersion: 1.0\nArchitecture: all\nMaintainer: t <t@example.org>\n"
        "Description: test text\n"
    )
    (root / "usr/share/demo").mkdir(parents=True)
    (root / "usr/share/demo/text.txt").write_text(text)
    deb = tmp_path / "ralm-demo-text_1.0_all.deb"
    subprocess.run(
        ["dpkg-deb", "--root-owner-group", "-Zgzip", "-b", str(root), str(deb)],
        check=True,
        capture_output=True,
    )
    return deb


def _bin_without_apt(tmp_path: Path) -> Path:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for tool in _TOOLS:
        found = shutil.which(tool)
        if found:
            (bindir / tool).symlink_to(found)
    return bindir


def _fake_apt(bindir: Path, deb: Path, size: int | None = None, download_error: str | None = None) -> None:
    sha = hashlib.sha256(deb.read_bytes()).hexdigest()
    (bindir / "apt-cache").write_text(
        "#!/bin/sh\n"
        f"printf 'Package: ralm-demo-text\\nVersion: 1.0\\nFilename: pool/main/r/{deb.name}\\n"
        f"Size: {size if size is not None else deb.stat().st_size}\\nSHA256: {sha}\\n'\n"
    )
    download = f"echo '{download_error}' >&2; exit 100" if download_error else f"cp '{deb}' ."
    (bindir / "apt-get").write_text(f"#!/bin/sh\n{download}\n")
    for name in ("apt-cache", "apt-get"):
        (bindir / name).chmod(0o755)


@pytest.fixture
def env(tmp_path, monkeypatch):
    bindir = _bin_without_apt(tmp_path)
    monkeypatch.setenv("PATH", str(bindir))
    monkeypatch.setenv("RALM_CACHE", str(tmp_path / "cache"))
    return bindir


def test_fetch_unpacks_verifies_and_reuses(tmp_path, env):
    deb = _build_deb(tmp_path, "In the beginning.\n")
    _fake_apt(env, deb)
    root = fetch_package("ralm-demo-text")
    assert root == tmp_path / "cache/pkgs/ralm-demo-text"
    assert (root / "usr/share/demo/text.txt").read_text() == "In the beginning.\n"
    manifest = json.loads((tmp_path / "cache/debs/ralm-demo-text.json").read_text())
    assert manifest["sha256"] == hashlib.sha256(deb.read_bytes()).hexdigest()
    assert manifest["version"] == "1.0" and manifest["filename"] == deb.name
    # No temporary folders are left in the cache.
    assert sorted(p.name for p in (tmp_path / "cache/debs").iterdir()) == sorted(
        [deb.name, "ralm-demo-text.json"]
    )
    assert sorted(p.name for p in (tmp_path / "cache/pkgs").iterdir()) == ["ralm-demo-text"]

    # A second call needs neither apt nor the network: the verified cache is enough.
    for name in ("apt-cache", "apt-get"):
        (env / name).unlink()
    assert fetch_package("ralm-demo-text") == root


def test_corrupt_cached_file_is_fetched_again(tmp_path, env):
    deb = _build_deb(tmp_path, "In the beginning.\n")
    _fake_apt(env, deb)
    root = fetch_package("ralm-demo-text")
    cached = tmp_path / "cache/debs" / deb.name
    cached.write_bytes(cached.read_bytes()[:100])  # truncated, as by a killed copy
    (root / ".ralm-extracted").write_text("interrupted\n")  # an extraction that did not finish
    (root / "usr/share/demo/text.txt").write_text("garbage")
    assert fetch_package("ralm-demo-text") == root
    assert hashlib.sha256(cached.read_bytes()).digest() == hashlib.sha256(deb.read_bytes()).digest()
    assert (root / "usr/share/demo/text.txt").read_text() == "In the beginning.\n"


def test_corrupt_cache_without_apt_is_an_error_not_a_silent_reuse(tmp_path, env):
    deb = _build_deb(tmp_path, "text\n")
    _fake_apt(env, deb)
    fetch_package("ralm-demo-text")
    cached = tmp_path / "cache/debs" / deb.name
    cached.write_bytes(b"corrupt")
    for name in ("apt-cache", "apt-get"):
        (env / name).unlink()
    with pytest.raises(PackageFetchError, match="apt-get is not available.*--corpus"):
        fetch_package("ralm-demo-text")
    assert issubclass(PackageFetchError, RalmInputError)


def test_download_with_wrong_hash_is_refused(tmp_path, env):
    deb = _build_deb(tmp_path, "text\n")
    _fake_apt(env, deb)
    deb.write_bytes(deb.read_bytes() + b"tampered")  # the mirror now serves other bytes
    with pytest.raises(PackageFetchError, match="does not match apt's record"):
        fetch_package("ralm-demo-text")
    assert not list((tmp_path / "cache/debs").glob("*.deb"))
    assert not (tmp_path / "cache/pkgs/ralm-demo-text").exists()


def test_no_network_is_named(tmp_path, env):
    deb = _build_deb(tmp_path, "text\n")
    _fake_apt(
        env,
        deb,
        download_error="E: Failed to fetch http://deb.debian.org/x.deb  Temporary failure "
        "resolving 'deb.debian.org'",
    )
    with pytest.raises(PackageFetchError, match="could not reach the network"):
        fetch_package("ralm-demo-text")
    assert not list((tmp_path / "cache/debs").glob("*.deb"))


def test_not_enough_disk_space_is_refused_before_downloading(tmp_path, env):
    deb = _build_deb(tmp_path, "text\n")
    _fake_apt(env, deb, size=2**62)
    with pytest.raises(PackageFetchError, match="MiB free.*needs about"):
        fetch_package("ralm-demo-text")


def test_missing_package_lists_say_how_to_fix(tmp_path, env):
    (env / "apt-cache").write_text("#!/bin/sh\necho 'E: No packages found' >&2\nexit 100\n")
    (env / "apt-get").write_text("#!/bin/sh\nexit 100\n")
    for name in ("apt-cache", "apt-get"):
        (env / name).chmod(0o755)
    with pytest.raises(PackageFetchError, match="apt-get update"):
        fetch_package("ralm-demo-text")


def test_cache_root_follows_ralm_cache(tmp_path, monkeypatch):
    from ralm.corpora.debian import cache_root

    monkeypatch.setenv("RALM_CACHE", str(tmp_path / "c"))
    assert cache_root() == tmp_path / "c"
    monkeypatch.delenv("RALM_CACHE")
    assert cache_root() == Path(os.path.expanduser("~")) / ".cache" / "ralm"
