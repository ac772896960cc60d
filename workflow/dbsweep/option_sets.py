"""Server options when the study loads: the study-wide ones (server.options.<family>) and the option sets an
axis chooses (server_options.<axis>.<value>.<family>, and the built-in binlog, durability, isolation), each
checked as its family's config would take it (engines.check_options)."""
from __future__ import annotations

from dbsweep import engines, servers
from dbsweep.concern import Concern, Draft
from dbsweep.errors import ConfigError, shown
from dbsweep.matrix import Cell


def check_options(config: dict, axes: dict) -> None:
    """Every server option the study names, study-wide and in its option sets; with Debian's servers only,
    against their own lists of option names."""
    installed = _debian_only(axes)
    for family, options in config.get("server", {}).get("options", {}).items():
        engines.check_options(family, options, f"server.options.{family}", installed)
    for axis, sets in config.get("server_options", {}).items():
        for value, families in sets.items():
            for family, options in families.items():
                engines.check_options(family, options, f"server_options.{axis}.{word(value)}.{family}", installed)


def keys(config: dict, builtin: set[str]) -> None:
    """server_options.<axis>.<value>: each value is one of the axis's values, which YAML reads as a number or
    a boolean when bare (`1:`, `on:`); as a key it is the value as text (a bare on / off the word, as on the
    axis: word), in place. Only the study's own axes and the built-in option-set axes choose options (builtin: the
    axes dbsweep gives a meaning to)."""
    sets = config.get("server_options")
    if not isinstance(sets, dict):
        return  # the schema says what it should be
    for axis, values in sets.items():
        if axis in builtin:
            raise ConfigError(f"server_options.{axis}: {shown(values)}: {axis} is a built-in axis; option sets "
                              "are chosen by an axis of your own (or binlog, durability, isolation)")
        if not isinstance(values, dict):
            continue
        words = {}
        for value, spec in values.items():
            text = str(word(value)) if isinstance(value, (bool, int, float)) else value
            if text in words:
                raise ConfigError(f"server_options.{axis}.{text}: {shown(value)} names the value {text!r} again")
            words[text] = spec
        sets[axis] = words


def sets(user: dict, axes: dict) -> dict[str, dict]:
    """Built-in option sets, with the study's own added by axis and value. YAML reads a bare
    on / off as a boolean; on option-set axes it means the words (binlog: [off, sync1])."""
    sets = {axis: dict(values) for axis, values in engines.option_sets().items()}
    for axis, values in user.items():
        sets.setdefault(axis, {}).update({word(value): spec for value, spec in values.items()})
    for axis, values in axes.items():
        if axis in sets:
            values[:] = [word(v) for v in values]
            for value in values:
                if str(value) not in sets[axis]:
                    raise ConfigError(f"axes.{axis}: {value!r} is not an option set ({', '.join(sets[axis])}); "
                                      f"define it under server_options.{axis}")
    return sets


def value(axis: str, sets: dict, value, where: str) -> None:
    if str(word(value)) not in sets:
        raise ConfigError(f"{where}: {shown(value)} is not an option set ({', '.join(sets)}); "
                          f"define it under server_options.{axis}")


def _debian_only(axes: dict) -> bool:
    """Every database cell runs Debian's installed servers (no version axis, or only their versions), so
    their own lists of option names apply."""
    for value in axes.get("version", []):
        if isinstance(value, dict):
            return False
        for family in engines.FAMILIES:
            if str(value) in servers.available(family) and not servers.is_debian(family, str(value)):
                return False
    return True


def check_cells(draft: Draft, cells: list[Cell]) -> None:
    """A database workload's cells have an engine, and each option set they choose has their family's part."""
    for cell in cells:
        values = cell.as_dict()
        if not draft.workload(cell).database:
            continue
        if "engine" not in values:
            raise ConfigError(f"axes.engine: missing, and workload {values['workload']!r} needs a database server")
        family = engines.ENGINES[values["engine"]]
        for axis, value in values.items():
            if axis in draft.option_sets and family not in draft.option_sets[axis][str(value)]:
                raise ConfigError(f"server_options.{axis}.{value}: nothing for {family} (cell {cell.path}); "
                                  f"give it `{family}: {{}}` or exclude those cells")


def word(value):
    """A bare YAML on / off (a boolean) as the word, as option-set axes and their keys mean it."""
    return {True: "on", False: "off"}.get(value, value) if isinstance(value, bool) else value


CONCERN = Concern(name="server options", check_cells=check_cells)
