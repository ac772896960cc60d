"""The docs agree with the code: the configuration reference is what the schema gives today, and every YAML
example of the docs loads with the loader the Snakefile calls, or is refused with the error the docs say.

A YAML block that is not a whole study (a fragment showing a few keys) is merged into a small valid study
before it loads: a storage study, or a database one when the fragment is about servers. A block the docs
show being refused carries `<!-- refused: text of the error -->` on the line before it; the loader must then
refuse it with a message containing that text."""
from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest
import yaml

from dbsweep import reference, workloads
from dbsweep.config import load
from dbsweep.configfile import load_yaml
from dbsweep.errors import ConfigError
from conftest import tiny_study

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", ROOT / "config" / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
BLOCK = re.compile(r"^```yaml\n(.*?)^```", re.M | re.S)
REFUSED = re.compile(r"<!--\s*refused:\s*(.*?)\s*-->\s*\Z", re.S)
# Keys of a fragment that are about a database server: the fragment then joins a database study.
SERVER_KEYS = {"server", "server_options", "topologies", "network", "networks", "proxies", "events"}
SERVER_AXES = {"engine", "version", "memory", "topology", "proxy", "network", "events", "binlog",
               "durability", "isolation"}


def database_study() -> dict:
    """A small valid study of one database cell: sysbench OLTP on InnoDB, as the fragments about servers need."""
    return {
        "study": "docs",
        "axes": {"engine": ["innodb"], "memory": ["64M"], "filesystem": ["ext4"], "threads": [1],
                 "workload": ["oltp"]},
        "filesystems": {"ext4": {"type": "ext4", "size": "256M"}},
        "workloads": {"oltp": {"tool": "sysbench", "options": {"script": "oltp_read_write", "tables": 1,
                                                             "table_size": 1000, "time": 60}}},
    }


def blocks() -> list[tuple[str, str, str | None]]:
    """Every ```yaml block of the docs: (file:line, its text, the refusal the line before it announces)."""
    found = []
    for path in DOCS:
        text = path.read_text()
        for match in BLOCK.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            before = text[:match.start()].rstrip("\n").rsplit("\n", 1)[-1]
            refused = REFUSED.search(before)
            found.append((f"{path.relative_to(ROOT)}:{line}", match.group(1), refused and refused.group(1)))
    return found


def merge(base: dict, fragment: dict) -> dict:
    """base with fragment's keys laid over it, maps merged key by key (a fragment's axes add to the base's)."""
    out = copy.deepcopy(base)
    for key, value in fragment.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def study_of(fragment: dict) -> dict:
    """A whole study for the fragment: itself when it is one, else the fragment in a small valid study. A
    workload or filesystem the fragment defines becomes the study's axis, so that it is checked in a cell."""
    if {"study", "axes", "workloads"} <= set(fragment):
        return fragment
    own = fragment.get("workloads", {})
    on_server = (SERVER_KEYS & set(fragment) or SERVER_AXES & set(fragment.get("axes", {}))
                 or any(workloads.get(w.get("tool")).database for w in own.values()
                        if w.get("tool") in workloads.registry()))
    config = merge(database_study() if on_server else tiny_study(), fragment)
    axes = fragment.get("axes", {})
    if own and "workload" not in axes:
        config["axes"]["workload"] = list(own)
    if fragment.get("filesystems") and "filesystem" not in axes:
        config["axes"]["filesystem"] = list(fragment["filesystems"])
    return config


@pytest.mark.parametrize(("where", "text", "refused"), blocks(), ids=[b[0] for b in blocks()])
def test_every_yaml_example_loads_or_is_refused_as_the_docs_say(where, text, refused):
    fragment = load_yaml(text)
    assert isinstance(fragment, dict), f"{where}: not a YAML mapping"
    config = study_of(fragment)
    if refused:
        with pytest.raises(ConfigError) as error:
            load(config, ROOT / "config")
        assert refused in str(error.value), f"{where}: refused with {error.value!r}, the docs say {refused!r}"
    else:
        try:
            load(config, ROOT / "config")
        except ConfigError as error:
            pytest.fail(f"{where}: the docs show this, but the loader refuses it: {error}")


def test_the_docs_have_yaml_examples_to_check():
    """The test above checks something: the docs' examples are found, refusals among them."""
    found = blocks()
    assert len(found) >= 15
    assert any(refused for _, _, refused in found)


@pytest.fixture(scope="module")
def rendered() -> str:
    """The reference as the generator writes it today (once: it reads the schema, the docs and the studies)."""
    return reference.render()


def test_the_configuration_reference_is_current(rendered):
    committed = (ROOT / "docs" / "reference.md").read_text()
    assert committed == rendered, (
        f"docs/reference.md is stale (the schema or the docs' examples changed): regenerate it with "
        f"`{reference.COMMAND}` and commit it")


def test_the_reference_covers_every_key_of_the_schema(rendered):
    schema = yaml.safe_load(reference.SCHEMA.read_text())
    text = rendered
    for key in reference.keys(schema):
        assert f"`{key.path}`" in text
        assert key.schema.get("description"), f"{key.path}: the schema gives it no description"
    for key in ("axes.threads", "filesystems.<name>.size", "events.<name>[].at", "noise_control.thp"):
        assert f"`{key}`" in text


LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def test_every_relative_link_of_the_docs_leads_to_a_file():
    """A section moved from one file to another leaves no link behind to where it was."""
    broken = []
    history = sorted((ROOT / "bench" / "history").glob("*.md"))
    for path in [*DOCS, ROOT / "RELIABILITY.md", ROOT / "BENCHMARKS.md", *history]:
        for target in LINK.findall(path.read_text()):
            if "://" not in target and not (path.parent / target).exists():
                broken.append(f"{path.relative_to(ROOT)}: {target}")
    assert not broken, "links to no file: " + "; ".join(broken)
