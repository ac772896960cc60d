"""Entry point of rule prepare: a filesystem image holding a workload's prepared file set."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))
from dbsweep import storage, workloads  # noqa: E402

spec = snakemake.params.spec
commands = workloads.module(spec["tool"]).prepare(spec["dataset"])
with open(snakemake.log[0], "w") as log:
    storage.prepare_image(spec["filesystem"], Path(snakemake.output[0]), commands, Path("results/.active"), log)
