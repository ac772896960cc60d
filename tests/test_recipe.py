"""The recipe: typed and checked once, the same JSON as recorded runs have."""
import glob
import json
from pathlib import Path

import pytest

from conftest import ROOT
from dbsweep import config
from dbsweep.recipe import Recipe

FIXTURES = sorted(glob.glob(str(ROOT / "tests/fixtures/**/run.json"), recursive=True))
STUDIES = sorted((ROOT / "config/studies").glob("*.yaml"))


@pytest.mark.parametrize("path", FIXTURES[:12] + FIXTURES[-12:], ids=lambda p: str(Path(p).relative_to(ROOT)))
def test_a_recorded_recipe_reads_back_to_the_same_json(path):
    recorded = json.loads(Path(path).read_text())["recipe"]
    recipe = Recipe.from_dict(recorded)
    assert json.dumps(recipe.as_dict()) == json.dumps(recorded), "keys, values and their order unchanged"
    assert recipe.database == ("engine" in recorded)


@pytest.mark.parametrize("study", STUDIES, ids=lambda p: p.stem)
def test_every_shipped_study_s_recipes_go_through_json_and_back(study):
    s = config.load_file(study)
    for cell in s.cells:
        recipe = s.recipe(cell)
        assert Recipe.from_dict(json.loads(json.dumps(recipe.as_dict()))) == recipe
        assert recipe.kind == ("database" if "engine" in cell.as_dict() else "storage")
        assert (recipe.topology is not None) == any(a in cell.as_dict() for a in ("topology", "proxy", "network"))
        assert recipe.timed == ("events" in cell.as_dict())


def test_a_recipe_refuses_an_unknown_or_missing_key_and_a_wrong_type():
    storage = {"tool": "fio", "options": {}, "threads": 1, "filesystem": {"type": "tmpfs"}, "dataset": {},
               "duration_s": 5}
    assert Recipe.from_dict(storage).as_dict() == storage
    with pytest.raises(ValueError, match="unknown key 'engin'"):
        Recipe.from_dict(storage | {"engin": "innodb"})
    with pytest.raises(ValueError, match="'dataset' is missing"):
        Recipe.from_dict({k: v for k, v in storage.items() if k != "dataset"})
    with pytest.raises(ValueError, match="recipe.threads: '4' is not a int"):
        Recipe.from_dict(storage | {"threads": "4"})
    with pytest.raises(ValueError, match="without an engine has server parts"):
        Recipe.from_dict(storage | {"events": []})
