"""Entry point of rule collect: tidy files from one repetition's raw output."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))
from dbsweep.collect import collect  # noqa: E402

collect(Path(snakemake.input[0]), {name: Path(path) for name, path in snakemake.output.items()})
