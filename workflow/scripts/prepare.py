"""Entry point of rule prepare: a filesystem image holding a workload's prepared dataset."""
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))
from dbsweep import storage  # noqa: E402
from dbsweep.recipe import Recipe  # noqa: E402
from dbsweep.run import fill  # noqa: E402
from dbsweep.runtime import owned  # noqa: E402
from dbsweep.runtime.signals import signals_raise  # noqa: E402
from dbsweep.stops import one_line  # noqa: E402

spec = snakemake.params.spec
image = Path(snakemake.output[0])
active = Path("results/.active")
with open(snakemake.log[0], "w") as log, one_line(f"prepare {image}", log), signals_raise(), \
        owned(f"prepare {image}", active, log), \
        storage.scratch_files(Path(tempfile.mkdtemp(dir=image.parent, prefix=".prepare-")), active) as scratch:
    scratch.chmod(0o755)  # a server's run folder goes inside, and servers run as their own users
    storage.prepare_image(spec["filesystem"], image, lambda root: fill(Recipe.preparing(spec), root, scratch, log),
                          active)
