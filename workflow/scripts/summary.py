"""Entry point of rule summary: the study's summary page and the report's provenance captions."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))
from dbsweep import summary  # noqa: E402

written = summary.write(snakemake.params.study, Path(snakemake.output.html).parent,
                        [Path(p) for p in [*snakemake.input.analysis, *snakemake.input.canary]], complete=True,
                        user=[Path(p) for p in snakemake.input.user])
assert {str(p) for p in written.values()} == {str(Path(p)) for p in snakemake.output}, written
