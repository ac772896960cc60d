"""Entry point of rules aggregate and round_tables: one long table per kind across the repetitions of the
input (their run.json and what collect made beside it), as named outputs or into one folder."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))
from dbsweep.aggregate import aggregate, tables_in  # noqa: E402

rep_dirs = [Path(path).parent for path in snakemake.input if Path(path).name == "run.json"]
if snakemake.rule == "round_tables":
    out, not_applicable = tables_in(Path(snakemake.output[0])), []
else:
    out, not_applicable = {name: Path(path) for name, path in snakemake.output.items()}, snakemake.params.not_applicable
aggregate(rep_dirs, snakemake.params.axes, snakemake.params.study, out, not_applicable)
