"""The version axis when the study loads: catalogue names (servers.py's versions.yaml) and the user's own
builds ({name, basedir}), which a version axis may name in place of a version; the builds' families; and
why a cell cannot run its version (another family's, MyRocks on a build without its plugin)."""
from __future__ import annotations

from pathlib import Path

from dbsweep import engines, servers
from dbsweep.concern import Concern, Draft
from dbsweep.errors import ConfigError, shown
from dbsweep.matrix import Cell
from dbsweep.names import check_name

AXIS = "version"


def check(draft: Draft) -> None:
    """The version axis as names (in place), and the user's own builds by name (draft.builds)."""
    draft.builds = _builds(draft.axes)


def _builds(axes: dict) -> dict[str, dict]:
    builds = {}
    values = axes.get(AXIS, [])
    for i, value in enumerate(values):
        if isinstance(value, dict):
            basedir = Path(value["basedir"])
            try:
                family = servers.basedir_family(basedir)
            except ConfigError as e:
                raise ConfigError(f"axes.version[{i}].basedir: {value['basedir']!r}: {e}") from None
            builds[value["name"]] = {"basedir": str(basedir.resolve()), "family": family}
            values[i] = value["name"]
        else:
            values[i] = str(value)
            known = [f for f in engines.FAMILIES if values[i] in servers.available(f)]
            if not known:
                raise ConfigError(f"axes.version: {values[i]!r} is not a version dbsweep knows; available: "
                                  + "; ".join(f"{f} {', '.join(servers.available(f))}" for f in engines.FAMILIES)
                                  + "; or give {name: …, basedir: /path}")
    for family in engines.FAMILIES:
        same = {}
        for value in values:
            if value in builds or value not in servers.available(family):
                continue
            entry = servers.entry(family, value)
            key = entry.get("version") or entry["package"]
            if key in same:
                raise ConfigError(f"axes.version: {same[key]!r} and {value!r} are the same {family} build; keep one")
            same[key] = value
    if AXIS in axes:
        engines_families = {engines.ENGINES[e] for e in axes.get("engine", [])}
        for name, build in builds.items():
            if family_group(build["family"]) not in engines_families:
                raise ConfigError(f"axes.version: {name!r} is a {build['family']} build, and no engine of the "
                                  f"study runs it (engines: {', '.join(axes.get('engine', []))})")
    return builds


def _known(draft: Draft, value, where: str) -> None:
    if isinstance(value, dict) or str(value) in draft.builds:
        return  # a build of the axis (checked by check), or its name
    if not any(str(value) in servers.available(f) for f in engines.FAMILIES):
        raise ConfigError(f"{where}: {shown(value)} is not a version dbsweep knows; available: "
                          + "; ".join(f"{f} {', '.join(servers.available(f))}" for f in engines.FAMILIES)
                          + "; or a build of the version axis")


def family_group(build_family: str) -> str:
    """The family whose adapter runs a build (MySQL and Percona builds: MariaDB's; engines.BUILDS)."""
    return engines.BUILDS.get(build_family, build_family)


def not_applicable(draft: Draft, cell: Cell) -> str | None:
    """Why a database cell cannot run its version (a version of another server family, MyRocks on a build
    without its plugin, an engine only Debian's build has), or None."""
    values = cell.as_dict()
    if "engine" not in values or AXIS not in values:
        return None
    engine, version = values["engine"], str(values[AXIS])
    family = engines.ENGINES.get(engine)
    if version in draft.builds:
        build = draft.builds[version]
        if family_group(build["family"]) != family:
            return f"{version} is a {build['family']} build; {engine} runs on {family}"
        if not engines.family(engine).supports(engine, Path(build["basedir"])):
            return f"{engine} is not in the build {version} (MyRocks needs its ha_rocksdb plugin)"
        return None
    if version not in servers.available(family):
        return f"{version} is not a {family} version"
    why = engines.family(engine).DEBIAN_ONLY.get(engine)
    if why and not servers.is_debian(family, version):
        return f"{why} ({version} has not)"
    return None


def programs(builds: dict, family: str, version: str) -> str | None:
    """Where a cell's server programs are when it runs: a user's build (builds: by name), a fetched one, or
    None for Debian's."""
    if "basedir" in builds.get(version, {}):
        return builds[version]["basedir"]
    dest = servers.dest_for(family, version)
    return None if dest is None else str(dest)


def basedir(draft: Draft, family: str, version: str) -> str | None:
    """Where a cell's server programs are at load: a user's build, a fetched one's folder, or None (Debian's,
    or a version the family does not have)."""
    if version in draft.builds:
        return draft.builds[version]["basedir"]
    return servers.dest_for(family, version) if version in servers.available(family) else None


def _names(config: dict) -> None:
    """A build's name becomes a part of its cells' paths (names.py)."""
    for i, value in enumerate(config["axes"].get(AXIS, [])):
        if isinstance(value, dict):
            check_name(f"axes.version[{i}].name", value["name"])


def _files(config: dict, absolute) -> None:
    """A build's basedir, relative to the study file's folder."""
    for i, value in enumerate(config["axes"].get(AXIS, [])):
        if isinstance(value, dict):
            value["basedir"] = absolute(f"axes.version[{i}].basedir", value["basedir"])


def compared(cells: list[Cell]) -> bool:
    """The study's cells run more than one version of a server (the version axis), so its version table and
    plot are made (common.smk's analysis targets)."""
    return len({cell.get(AXIS) for cell in cells} - {None}) > 1


CONCERN = Concern(name="versions", axes=(AXIS,), names=_names, files=_files, check=check, values={AXIS: _known},
                  not_applicable=not_applicable, study=lambda draft, cells: {"versions": draft.builds})
