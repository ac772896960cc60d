"""Entry point of rule explore: results/explore.html, the per-second series of chosen cells."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))
from dbsweep import explore  # noqa: E402

with open(snakemake.log[0], "w") as log:
    tables = Path(snakemake.input.samples).parent
    steady = Path(snakemake.input.steady_state[0]) if snakemake.input.steady_state else None
    data = explore.build(tables, list(snakemake.params.axes), steady)
    explore.write(data, Path(snakemake.output[0]), snakemake.params.study)
    print(f"{len(data['series'])} repetitions, {len(data['counters'])} counters, "
          f"{Path(snakemake.output[0]).stat().st_size / 1e6:.1f} MB", file=log)
