"""The package's layout: no import circles among dbsweep's modules, and each concern's keys read only in
the concern's own module or package (as test_workloads.py checks for tool and family names)."""
from __future__ import annotations

import ast
import contextlib
import functools
import io
import tokenize
from pathlib import Path

WORKFLOW = Path(__file__).resolve().parents[1] / "workflow"
PACKAGE = WORKFLOW / "dbsweep"


def _modules() -> dict[str, Path]:
    """Each module of the package by its dotted name (a package by its __init__.py)."""
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(WORKFLOW).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def imports(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Which of the package's modules each one imports: at module level and inside functions alike (an import
    in a function is a circle deferred, not broken), `from a import b` as a.b where b is a module. A parent
    package that Python runs first is not counted (importing dbsweep.engines.mariadb is not an edge to
    dbsweep.engines unless the module names it), nor importlib's look-ups by name (the registries')."""
    graph = {}
    for name, path in modules.items():
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
                    base = ".".join(here[:len(here) - node.level + 1] + ([node.module] if node.module else []))
                found |= {f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                          for alias in node.names}
        graph[name] = {m for m in found if m in modules and m != name}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index, low, on, stack, out = {}, {}, set(), [], []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        out.append(sorted(component))
    return out


def test_circles_are_found():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


@functools.cache
def package_imports() -> dict[str, set[str]]:
    return imports(_modules())


def test_function_level_imports_count():
    graph = package_imports()
    assert "dbsweep.run" in graph["dbsweep.calibration"]  # `from dbsweep.run import repetition` in a function


def test_no_import_circles_among_the_package_modules():
    assert circles(package_imports()) == []


# Each concern's home (paths under workflow/dbsweep/) and the keys of the study it owns: nothing outside the home
# reads them (a subscript, .get or `in` with the key), as test_workloads.py checks for tool and family names.
CONCERN_KEYS = {
    "topology": (("topology/",), {"topologies", "networks", "proxies", "client_latency_ms", "node_latency_ms",
                                  "replication", "semisync_timeout_ms", "sync_standbys"}),
    "events": (("events/",), {"events", "at", "for", "action"}),
    "noise control": (("noise.py",), {"noise_control", "cpu_pinning", "drop_caches", "thp", "governor",
                                      "halt_poll_ns", "canary"}),
    "repeat_until": (("rounds.py",), {"repeat_until", "max_repetitions", "detectable_pct"}),
    "storage": (("filesystems.py", "storage.py", "fsprobe.py", "devices.py", "server_memory.py"),
                {"filesystems", "allow_oversize_memory", "mkfs_options", "mount_options", "allow_format"}),
    "versions": (("versions.py", "servers.py"), {"basedir"}),
}
# (module, key): where a module outside the home reads a key of the same name, and why that is not the concern's.
ALLOWED = {
    ("answer.py", "action"),  # a row of the events table (collect's, from raw/events.jsonl), not a schedule
    ("answer.py", "events"),  # the events axis's column of a result table, kept out of the answer's context
    ("collect.py", "events"),  # sysbench's own count of events, and the events table's output path
    ("recipe.py", "events"),  # the recipe's own field in its JSON form (Recipe.as_dict)
    ("recipe.py", "noise_control"),  # the same, read back (Recipe.from_dict)
    ("delivered.py", "noise_control"),  # run.json's record of what the run applied, checked against the recipe
    ("delivered.py", "mkfs_options"),  # the recipe's filesystem (declared) against the mount it got (delivered)
    ("delivered.py", "mount_options"),  # the same
    ("disturbances.py", "governor"),  # the host's own settings it looks at before a window, whatever the study
    ("disturbances.py", "thp"),  # the same
    ("disturbances.py", "halt_poll_ns"),  # the same
    ("summary.py", "canary"),  # the summary page's canary line (canary.line), not the study's canary
    ("topology/hosts.py", "basedir"),  # a placed node's server as its host step reports it, not versions' basedir
    # the topology's settings handed to the family's cluster module (engines.CLUSTER_INTERFACE's start_cluster)
    ("engines/mariadb_cluster.py", "semisync_timeout_ms"),
    ("engines/postgresql_cluster.py", "sync_standbys"),
}


@functools.cache
def _nodes(path: Path) -> tuple[ast.AST, ...]:
    """Every node of a module's syntax tree, parsed once per test session."""
    return tuple(ast.walk(ast.parse(path.read_text())))


def reads(path: Path, keys: set[str]) -> set[str]:
    """The keys among `keys` that a module reads: x["key"], x.get("key" …), "key" in x."""
    found = set()
    for node in _nodes(path):
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            found.add(node.slice.value)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
              and node.args and isinstance(node.args[0], ast.Constant)):
            found.add(node.args[0].value)
        elif (isinstance(node, ast.Compare) and isinstance(node.left, ast.Constant)
              and isinstance(node.ops[0], (ast.In, ast.NotIn))):
            found.add(node.left.value)
    return found & keys


def outside_reads() -> dict[str, list[str]]:
    out = {}
    for concern, (home, keys) in CONCERN_KEYS.items():
        for path in sorted(PACKAGE.rglob("*.py")):
            rel = path.relative_to(PACKAGE).as_posix()
            if rel.startswith(home):
                continue
            for key in sorted(reads(path, keys)):
                if (rel, key) not in ALLOWED:
                    out.setdefault(concern, []).append(f"{rel}: {key}")
    return out


def test_reads_are_found(tmp_path):
    module = tmp_path / "m.py"
    module.write_text('a = config["topologies"]\nb = spec.get("canary", {})\nc = "events" in config\nd = x["y"]\n')
    assert reads(module, {"topologies", "canary", "events", "z"}) == {"topologies", "canary", "events"}


def test_no_module_reads_another_concerns_keys():
    assert outside_reads() == {}


def test_every_allowed_read_is_still_there():
    """An entry of ALLOWED whose module no longer reads the key is dead: remove it."""
    every = set().union(*(keys for _, keys in CONCERN_KEYS.values()))
    assert [(rel, key) for rel, key in sorted(ALLOWED) if key not in reads(PACKAGE / rel, every)] == []


# Keys no other thing in the package is named like: a module outside the concern's home that even names one (a
# string, however it is then used: config[key] for key in (…), a key chosen by a condition) reads the concern.
NAMED_ONLY_AT_HOME = {
    "topology": {"topologies", "networks", "proxies", "client_latency_ms", "node_latency_ms"},
    "noise control": {"noise_control", "cpu_pinning"},
    "repeat_until": {"repeat_until", "max_repetitions", "detectable_pct"},
    "storage": {"allow_oversize_memory", "allow_format"},
}
NAMED_ELSEWHERE = {
    "recipe.py": {"noise_control"},  # the recipe's own field in its JSON form (Recipe.as_dict, from_dict)
    "delivered.py": {"noise_control"},  # run.json's record of what the run applied, checked against the recipe
}


def named_outside(package: Path) -> list[str]:
    out = []
    for concern, keys in NAMED_ONLY_AT_HOME.items():
        home = CONCERN_KEYS[concern][0]
        for path in sorted(package.rglob("*.py")):
            rel = path.relative_to(package).as_posix()
            if rel.startswith(home):
                continue
            names = {node.value for node in _nodes(path) if isinstance(node, ast.Constant)}
            out += [f"{rel}: {key}" for key in sorted((names & keys) - NAMED_ELSEWHERE.get(rel, set()))]
    return out


def test_no_module_names_another_concerns_own_keys():
    assert named_outside(PACKAGE) == []


# The rule files and the Snakefile read no concern's keys either, nor a concern's axes in a cell (cell["topology"],
# cell.get("version")): they ask the concern's module (topology.settings.placed_cells, versions.compared). A rule file
# is not Python that ast parses, so its reads are found in its tokens (tokenize lexes it as Python does).
RULE_FILES = sorted((WORKFLOW / "rules").glob("*.smk")) + [WORKFLOW / "Snakefile"]


def concern_axes() -> set[str]:
    """Every axis a concern declares: its server axes and the axes whose values it checks."""
    from dbsweep.concerns import CONCERNS
    return {axis for part in CONCERNS for axis in (*part.axes, *part.values)}


def rule_reads(path: Path) -> set[str]:
    """The keys a Python-like file reads, as reads() finds them in a module: x["key"], x.get("key" …),
    "key" in x; from its tokens, plain string literals only (an f-string names no key alone)."""
    tokens = [t for t in tokenize.generate_tokens(io.StringIO(path.read_text()).readline)
              if t.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT)]
    found = set()
    for i, token in enumerate(tokens[2:-1], start=2):
        if token.type != tokenize.STRING:
            continue
        before, after = [t.string for t in tokens[i - 2:i]], tokens[i + 1].string
        read = (before[1] == "[" and after == "]") or before == ["get", "("] or after in ("in", "not")
        if read:
            with contextlib.suppress(ValueError, SyntaxError):
                found.add(ast.literal_eval(token.string))
    return found


def named_in_rules(files: list[Path], keys: set[str]) -> list[str]:
    return [f"{path.name}: {key}" for path in files for key in sorted(rule_reads(path) & keys)]


def test_reads_of_a_rule_file_are_found(tmp_path):
    rules = tmp_path / "x.smk"
    rules.write_text('rule a:\n    params:\n        t=lambda w: CELLS[w.cell].get("topology"),\n'
                     '        v=lambda w: CELLS[w.cell]["version"],\n        m="memory" in STUDY.axes,\n'
                     '        s=f"{x}/events.csv",\n        r=names.append("proxy"),\n    shell:\n'
                     '        "echo \'canary\'"\n')
    assert named_in_rules([rules], {"topology", "events", "canary", "version", "memory", "proxy"}) == [
        "x.smk: memory", "x.smk: topology", "x.smk: version"]


def test_no_rule_file_reads_a_concerns_keys_or_axes():
    keys = set().union(*(keys for _, keys in CONCERN_KEYS.values())) | concern_axes()
    assert {"topology", "events", "version", "memory", "filesystem"} <= keys
    assert named_in_rules(RULE_FILES, keys) == []


def test_run_takes_the_concerns_parts_through_their_declarations():
    """run.py holds no concern's logic: it imports no concern's module (topology/, events/, noise.py …), only the
    list of concerns, whose resources it enters (Concern.resources), and the window (measure.py, database_run.py)."""
    homes = [home for concern, (homes, _) in CONCERN_KEYS.items() if concern != "storage" for home in homes]
    homes += ["filesystems.py", "server_memory.py", "devices.py"]  # storage.py: the attempt's scratch folder only
    named = {m for m in package_imports()["dbsweep.run"]
             if any(str(_modules()[m].relative_to(PACKAGE)).startswith(home) for home in homes)}
    assert named == set()
    assert "dbsweep.concerns" in package_imports()["dbsweep.run"]
