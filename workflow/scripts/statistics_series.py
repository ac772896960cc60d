"""Entry point of rule statistics_series: samples.parquet as the binary columns rule statistics reads."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))
from dbsweep.statistics_series import write_series  # noqa: E402

rows = write_series(Path(snakemake.input.samples_parquet), list(snakemake.params.axes), Path(snakemake.output[0]))
Path(snakemake.log[0]).write_text(f"{rows} per-second samples written to {snakemake.output[0]}\n")
