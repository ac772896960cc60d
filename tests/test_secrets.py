"""Secrets stay private: another local user reads no benchmark password from anything a study leaves in
results/ or resources/ (prepared images, datadirs, attempt folders, logs)."""
import json
import subprocess

import pytest

from dbsweep import storage
from dbsweep.config import load
from dbsweep.database import CREDENTIALS
from test_database_workflow import db_study, workdir  # noqa: F401  (the fixture: a folder servers can reach)

pytestmark = pytest.mark.workflow


def passwords(study, config) -> list[str]:
    """The generated password of every prepared image, read as root from inside the image restored as a run
    restores it; the restored copy is private (0600) and so is the datadir in it (0700)."""
    s = load(config)
    found = []
    for cell in s.cells:
        image, scratch = study.path(s.image(cell)), study.path("peek")
        with storage.filesystem(s.recipe(cell).filesystem, scratch, study.path("results/.active"), image) as fs:
            found.append(json.loads((fs.path / CREDENTIALS).read_text())["password"])
            assert (scratch / "fs.img").stat().st_mode & 0o777 == 0o600
            assert (fs.path / "data").stat().st_mode & 0o777 == 0o700, s.recipe(cell).engine
    return found


def readable_by_nobody(folder, secrets: list[str]) -> list[str]:
    """Files below folder in which the user nobody finds one of secrets (given on stdin, never on a command line)."""
    done = subprocess.run(["su", "nobody", "-s", "/bin/sh", "-c", f"grep -rlaF -f - {folder} 2>/dev/null"],
                          input="\n".join(secrets) + "\n", capture_output=True, text=True)
    return done.stdout.split()


def test_nobody_reads_a_password_from_images_datadirs_or_results(study_factory):
    config = db_study(engines=("innodb", "postgresql"))
    config["workloads"]["oltp"]["options"]["time"] = 2  # what is written, not how long: a short window
    study = study_factory(config)
    study.run()
    secrets = passwords(study, config)
    assert len(secrets) == 2 and all(len(s) > 20 for s in secrets)
    images = sorted(study.path("resources", "images").rglob("*.img"))
    assert images and all(image.stat().st_mode & 0o777 == 0o600 for image in images), \
        [(str(i), oct(i.stat().st_mode)) for i in images]
    # the check itself works: root finds them in the images
    assert subprocess.run(["grep", "-rlaF", "-f", "-", str(study.path("resources"))], input="\n".join(secrets),
                          capture_output=True, text=True).stdout.split()
    for folder in ("resources", "results"):
        assert readable_by_nobody(study.path(folder), secrets) == []

