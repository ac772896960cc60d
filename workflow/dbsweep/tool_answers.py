"""What a tool printed for a question whose answer depends only on the tool's build and the question: fio's
check of a study's options (`fio --parse-only`), its list of options (`fio --cmdhelp=all`).

Every Snakemake process loads the study, the main one and each job, and fio spends about 0.15 s of CPU
calibrating its clock before it answers anything (BENCHMARKS.md, planning). So the answers are kept: in
this process, and on disk for the next one where the workflow names a file (FILE) and saves them once the
study has loaded. An answer is keyed by the tool's installed file (path, size, modification time) and the
arguments, so another build of the tool is asked again.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from dbsweep import manifest

FILE: Path | None = None  # set by the workflow (rules/common.smk): resources/tool-answers.json
_KNOWN: dict[str, list] = {}
_NEW: set[str] = set()  # asked in this process, not yet in FILE


def answer(argv: list[str], timeout: float = 60) -> tuple[int, str, str] | None:
    """(exit status, stdout, stderr) of argv, with stdin closed; None where argv[0] is not installed or
    did not answer in time."""
    binary = shutil.which(argv[0])
    if binary is None:
        return None
    key = _key(binary, argv[1:])
    if key not in _KNOWN:
        _KNOWN.update(_stored())
    if key in _KNOWN:
        return tuple(_KNOWN[key])
    try:
        done = subprocess.run([binary, *argv[1:]], capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    _KNOWN[key] = [done.returncode, done.stdout, done.stderr]
    _NEW.add(key)
    return tuple(_KNOWN[key])


def _key(binary: str, args: list[str]) -> str:
    real = os.path.realpath(binary)
    st = os.stat(real)
    return json.dumps([real, st.st_size, st.st_mtime_ns, args])


def _stored() -> dict:
    return manifest.stored_json(FILE)


def save() -> None:
    """Adds this process's new answers to FILE, once the study has loaded (a refused study writes nothing).
    Written whole, then renamed: a job reading it meanwhile sees the old or the new file, and two writers at
    once lose at most an answer, asked again later."""
    if FILE is None or not _NEW:
        return
    if manifest.merge_json(FILE, {key: _KNOWN[key] for key in _NEW}):
        _NEW.clear()  # else a read-only working directory: the answers stay in this process
