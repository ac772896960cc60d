"""Entry point of rule run: measure one repetition of one cell."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))
from dbsweep import calibration  # noqa: E402
from dbsweep.recipe import Recipe  # noqa: E402
from dbsweep.run import repetition  # noqa: E402
from dbsweep.stops import one_line  # noqa: E402

what = f"run {snakemake.wildcards.cell}/rep~{snakemake.wildcards.rep}"
with open(snakemake.log[0], "w") as log, one_line(what, log):
    image = Path(snakemake.input.image) if "image" in snakemake.input.keys() else None
    recipe, calibrated = Recipe.from_dict(snakemake.params.recipe), None
    if "calibration" in snakemake.input.keys():  # rate: N% of the host's calibrated throughput
        recipe, calibrated = calibration.resolve(recipe, Path(snakemake.input.calibration))
        log.write(f"rate {calibrated['rate_percent']:g}% of {calibrated['tps']:.1f} tps "
                  f"({snakemake.input.calibration}): {calibrated['rate']}/s\n")
    repetition(snakemake.params.cell, int(snakemake.wildcards.rep), recipe, Path(snakemake.output[0]), image,
               Path("results/.active"), log, snakemake.resources.attempt, calibrated)
