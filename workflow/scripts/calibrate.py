"""Entry point of rule calibrate: measure the host's closed-loop throughput for cells with `rate: N%`."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))
from dbsweep import calibration  # noqa: E402
from dbsweep.recipe import Recipe  # noqa: E402
from dbsweep.stops import one_line  # noqa: E402

out = Path(snakemake.output[0])
with open(snakemake.log[0], "w") as log, one_line(f"calibrate {out}", log):
    image = Path(snakemake.input.image) if "image" in snakemake.input.keys() else None
    result = calibration.measure(Recipe.from_dict(snakemake.params.recipe), out, image, Path("results/.active"),
                                 log, snakemake.resources.attempt)
    log.write(f"calibrated: {result['tps']:.1f} tps at {result['threads']} threads over {result['seconds']} s\n")
