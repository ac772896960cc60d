"""Helpers shared by the benchmarks in bench/: paths, timing, tables, study files.

Every benchmark works in a temp dir and writes nothing into the repository but, with
--live, workflow/'s __pycache__ (ignored by git). Child processes write bytecode, as a
user's do (PYTHONDONTWRITEBYTECODE is removed from their environment): into the temp
dir's copy of workflow/. (A PYTHONPYCACHEPREFIX would also compile the venv's packages
again, into the prefix: 10-20 s of CPU per benchmark run.)
"""
from __future__ import annotations

import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = ROOT / "workflow"
SNAKEFILE = WORKFLOW / "Snakefile"
SNAKEMAKE = ROOT / ".venv" / "bin" / "snakemake"
PYTHON = ROOT / ".venv" / "bin" / "python"

sys.dont_write_bytecode = True


def snapshot(tmp: Path, live: bool = False) -> Path:
    """The workflow folder to benchmark: a copy of workflow/ in tmp, taken now (as tests/conftest.py
    does), so that edits made to the tree while a benchmark runs cannot mix two versions in one
    measurement; or, with live, workflow/ itself."""
    if live:
        return WORKFLOW
    import shutil
    copy = tmp / "workflow"
    shutil.copytree(WORKFLOW, copy, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


def use_pipeline_code(workflow: Path = WORKFLOW) -> None:
    """Make `import dbsweep` load the pipeline's own package (workflow/dbsweep)."""
    if str(workflow) not in sys.path:
        sys.path.insert(0, str(workflow))


def tempdir(prefix: str, keep: bool = False, where: str | None = None) -> Path:
    """A fresh temp dir (under `where`, default $TMPDIR or /tmp), removed at exit unless keep."""
    path = Path(tempfile.mkdtemp(prefix=f"dbsweep-bench-{prefix}-", dir=where))
    if not keep:
        import atexit
        import shutil
        atexit.register(shutil.rmtree, path, True)
    return path


def env(tmp: Path) -> dict:
    """Environment for child processes: bytecode written beside the code they import, C locale."""
    out = dict(os.environ)
    out.pop("PYTHONDONTWRITEBYTECODE", None)
    out.update({"LC_ALL": "C.UTF-8"})
    return out


def run(argv: list, cwd: Path, environ: dict, log: Path | None = None, check: bool = True) -> tuple[float, int]:
    """Run argv, stdout+stderr to log (or /dev/null); return (wall seconds, exit status)."""
    out = open(log, "w") if log else subprocess.DEVNULL
    try:
        start = time.perf_counter()
        rc = subprocess.run([str(a) for a in argv], cwd=cwd, env=environ, stdout=out,
                            stderr=subprocess.STDOUT).returncode
        elapsed = time.perf_counter() - start
    finally:
        if log:
            out.close()
    if check and rc != 0:
        tail = "".join(Path(log).read_text().splitlines(True)[-40:]) if log else ""
        raise RuntimeError(f"{' '.join(map(str, argv))} exited with {rc}\n{tail}")
    return elapsed, rc


def run_cpu(argv: list, cwd: Path, environ: dict, log: Path | None = None) -> tuple[float, float]:
    """Run argv as run() does; return (wall seconds, CPU seconds: user + system of it and its children).
    CPU time is less disturbed than wall time by other work on a shared machine."""
    import resource
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    elapsed, _ = run(argv, cwd, environ, log)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return elapsed, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def median(values) -> float:
    return statistics.median(values)


def median_ci(values: list[float], level: float = 0.95) -> tuple[float, float]:
    """Distribution-free CI of the median: order statistics k and n-k+1, k the largest with
    P(Binomial(n, 1/2) < k) <= (1 - level) / 2."""
    xs, n = sorted(values), len(values)
    below, k = 0.0, 0
    while k < n and below + math.comb(n, k) / 2 ** n <= (1 - level) / 2:
        below += math.comb(n, k) / 2 ** n
        k += 1
    if k == 0:
        return xs[0], xs[-1]
    return xs[k - 1], xs[n - k]


def table(headers: list[str], rows: list[list]) -> str:
    """A Markdown table, numbers formatted to 3 significant digits."""
    def fmt(v):
        if isinstance(v, float):
            return f"{v:.3g}" if abs(v) < 1000 else f"{v:.0f}"
        return str(v)

    cells = [[fmt(v) for v in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(headers)]
    line = lambda items: "| " + " | ".join(s.ljust(w) for s, w in zip(items, widths, strict=False)) + " |"  # noqa: E731
    return "\n".join([line(headers), "|" + "|".join("-" * (w + 2) for w in widths) + "|"] + [line(r) for r in cells])


def job_counts(dry_run_output: str) -> dict[str, int]:
    """Rule -> job count from Snakemake's 'Job stats' table."""
    if "Job stats:" not in dry_run_output:
        return {}
    counts = {}
    for line in dry_run_output.split("Job stats:", 1)[1].splitlines()[3:]:
        parts = line.split()
        if len(parts) != 2 or parts[0] == "total":
            break
        counts[parts[0]] = int(parts[1])
    return counts


def write_yaml(path: Path, data: dict) -> None:
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def snakemake_argv(workdir: Path, *args, snakefile: Path = SNAKEFILE) -> list:
    """The real workflow on the study in workdir/study.yaml."""
    return [SNAKEMAKE, "-s", snakefile, "-d", workdir, "--configfile", workdir / "study.yaml", *args]


def leftovers(folder: Path) -> list[str]:
    """Mounts and loop devices that still refer to folder (should be none after a benchmark)."""
    folder = str(folder.resolve())
    mounts = [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()
              if line.split()[1].startswith(folder)]
    loops = [line for line in subprocess.run(["losetup", "-a"], capture_output=True, text=True).stdout.splitlines()
             if folder in line]
    return mounts + loops


def data_image(tmp: Path, size: str, file_mib: int) -> tuple[dict, Path, Path]:
    """An ext4 image under tmp prepared as dbsweep prepares a cell's, holding one file `data` of file_mib
    MiB of random bytes written direct (reads of a hole or an unwritten extent never reach the device):
    (its filesystem spec, the image, the folder of its active records). The device benches read and write
    that file."""
    from dbsweep import storage
    from dbsweep.filesystems import FS_DEFAULTS

    def fill(root: Path) -> list[list[str]]:
        argv = ["dd", "if=/dev/urandom", f"of={root}/data", "bs=1M", f"count={file_mib}", "oflag=direct",
                "status=none"]
        subprocess.run(argv, check=True)
        return [argv]

    spec = FS_DEFAULTS | {"type": "ext4", "size": size,
                          "mkfs_options": ["-E", "lazy_itable_init=0,lazy_journal_init=0"]}
    active, image = tmp / "active", tmp / "image.img"
    storage.prepare_image(spec, image, fill, active)
    return spec, image, active
