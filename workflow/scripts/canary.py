"""Entry point of rule canary_table: the canary's runs as one table (dbsweep/canary.py)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))
from dbsweep import canary  # noqa: E402

canary.write([Path(p) for p in snakemake.input], snakemake.params.every, snakemake.params.total,
             Path(snakemake.output[0]))
