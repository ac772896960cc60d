"""Entry point of rule user_script: one of the study's own analysis scripts (dbsweep/user_scripts.py)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))
from dbsweep import user_scripts  # noqa: E402

tables = {name: Path(path) for name, path in snakemake.input.items() if name != "script"}
study = {"study": snakemake.params.study, "axes": snakemake.params.axes, "baseline": snakemake.params.baseline}
try:
    user_scripts.run(Path(snakemake.input.script), tables, Path(snakemake.output[0]), study, Path(snakemake.log[0]))
except RuntimeError as error:
    sys.exit(f"dbsweep: {error}")
