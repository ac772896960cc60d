"""Entry point of rule aggregate: one long table per kind across all cells."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))
from dbsweep.aggregate import aggregate  # noqa: E402

out = {name: Path(path) for name, path in snakemake.output.items()}
aggregate([Path(d) for d in snakemake.params.rep_dirs], snakemake.params.axes, snakemake.params.study, out,
          snakemake.params.not_applicable)
