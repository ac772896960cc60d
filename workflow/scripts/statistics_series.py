"""Entry point of rule statistics_series: samples.parquet as the binary columns rule statistics reads."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))
from dbsweep.statistics_series import write_series  # noqa: E402

written = write_series(Path(snakemake.input.samples_parquet), list(snakemake.params.axes), Path(snakemake.output[0]),
                       cache=Path(snakemake.params.cache))
Path(snakemake.log[0]).write_text(f"{written.rows} per-second samples written to {snakemake.output[0]}; "
                                  f"{written.read_back} of {written.groups} row groups read back from the cache\n")
