"""Entry point of rule statistics_series: samples.parquet as the binary columns rule statistics reads."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))
from dbsweep.statistics_series import write_series  # noqa: E402

write_series(Path(snakemake.input.samples_parquet), list(snakemake.params.axes), Path(snakemake.output[0]))
