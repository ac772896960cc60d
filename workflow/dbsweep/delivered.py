"""Declared, delivered, compared: every setting a cell declares, read back from what ran.

A repetition keeps its readings as they came (run.json, raw/variables.tsv, the tool's own report); collect
turns them into checks, one row each: the setting's kind and key, the declared and the delivered value, where
the delivered one was read (source), the kind's tolerance and the verdict. Like every tidy table this can
be rebuilt, with another tolerance, without running anything again.

Verdicts:
- equal: the reading is the declaration (after the kind's normalisation: sizes in bytes, ON/OFF, case);
- within tolerance: it differs by less than the kind's stated margin (a link's round trip, a rate);
- deviated: it differs by more, or what was declared is absent from what ran (an option the server
  ignored). A repetition with a deviation is kept, shown before the answer and, unless the study says
  analysis.include_deviated, left out of the comparisons;
- not read: what ran gives no reading of it (an option that is no server variable, a mount option the
  kernel does not print). Said so, never counted as verified.

KINDS says, for the page and RELIABILITY.md, how each kind is read and compared.
"""
from __future__ import annotations

import csv
import gzip
import math
import re
from dataclasses import asdict, dataclass
from pathlib import Path

from dbsweep import workloads
from dbsweep.engines import settings
from dbsweep.recipe import Recipe
from dbsweep.units import parse_size

EQUAL, WITHIN, DEVIATED, NOT_READ = "equal", "within tolerance", "deviated", "not read"
VERIFIED = (EQUAL, WITHIN)
COLUMNS = ["kind", "key", "declared", "delivered", "source", "tolerance", "verdict"]

# kind -> (how the delivered value is read, the tolerance)
KINDS = {
    "server option": ("the server's own variables at the window's start (MariaDB SHOW GLOBAL VARIABLES, "
                      "PostgreSQL pg_settings; raw/variables.tsv)", "exact (sizes in bytes, ON/OFF, case)"),
    "session setting": ("the workload's own session at the end of its executions (MariaDB SELECT @@SESSION.x, "
                        "PostgreSQL current_setting; raw/session.tsv)", "exact (as server options)"),
    "memory": ("the variable the memory axis sets (innodb_buffer_pool_size, rocksdb_block_cache_size, "
               "shared_buffers), as the server reports it", "exact, or rounded up by the server to its "
               "allocation unit (within tolerance; the delivered size is what counts)"),
    "dataset": ("the benchmark database's catalog before the window (information_schema, pg_database, pg_class; "
                "raw/dataset.tsv): the tables' engine, character set and collation, the page size, initdb's "
                "settings, the tables and their rows",
                "exact; rows within a factor of 3 (the engine's estimate: MyRocks' was 2x on a fresh load)"),
    "memory cap": ("the server's memory cgroup limit file, read at the window's start and end", "exact "
                   "(to the page)"),
    "server version": ("SELECT version()", "the declared version is a prefix of the delivered one"),
    "filesystem": ("/proc/self/mounts: the filesystem type", "exact"),
    "device class": ("the blkio throttle rules on the filesystem's loop device as the kernel reports them, once "
                     "set and again at the repetition's end (run.json filesystem.device_class)", "exact"),
    "device latency": ("the latency the delay server under the filesystem's loop device delivers (the declared "
                       "while it applies the calibrated holds, as it reports them), once set and again at the "
                       "repetition's end; the loop device's measured time per IO is run.json "
                       "filesystem.device_class.latency.await_ms", "exact"),
    "device latency (measured)": ("the loop device's mean time per read and per write over the repetition "
                                  "(/sys/block/<dev>/stat: ms spent over IOs done; run.json "
                                  "filesystem.device_class.latency.await_ms)",
                                  "at least the declared, less 5% and 0.1 ms (the path above the loop "
                                  "device is outside it); above is the queue behind other IOs"),
    "mount option": ("/proc/self/mounts: the options of the mount", "exact; an option the kernel does not "
                     "print (a default) is not read"),
    "mkfs option": ("the superblock: tune2fs -l (ext4), xfs_info (xfs)", "exact; options without a "
                    "superblock field are not read"),
    "link": ("ping's median round trip between the link's ends at the window's start and end (a placed "
             "topology's: less the hosts' own, measured before any delay rule)",
             "±(0.1 ms + 10% of the declared added round trip)"),
    "host": ("the hostname each node of a placed topology, and its proxy, ran on (placed by constraint: with that "
             "host's Slurm features; spread: beside the client's and every other node's)", "exact; spread: no other "
             "part on its host"),
    "connections": ("the server's connected clients, largest per-second sample in the window "
                    "(Threads_connected, pg_stat_database.numbackends)", "at least the declared threads"),
    "proxy": ("the proxy's own sessions (haproxy show stat, ProxySQL stats), largest per-second sample in "
              "the window", "at least the declared threads: the client's connections went through it"),
    "host setting": ("the host's setting as read after it was set (THP, CPU governor, halt polling: run.json "
                     "noise_control)", "exact; a setting this host does not have is not read"),
    "rate": ("the tool's achieved arrival rate (open loop)", "short of the target by more than 5% and 3 "
             "Poisson standard deviations: deviated"),
}


@dataclass(frozen=True)
class Check:
    kind: str
    key: str
    declared: str
    delivered: str
    source: str
    tolerance: str
    verdict: str

    def line(self, cell: str = "") -> str:
        where = f"{cell}: " if cell else ""
        return f"{where}{self.kind} {self.key}: declared {self.declared}, delivered {self.delivered or '(absent)'}"


def _check(kind: str, key: str, declared, delivered, verdict: str, source: str | None = None) -> Check:
    return Check(kind, key, _text(declared), _text(delivered), source or KINDS[kind][0], KINDS[kind][1], verdict)


def _text(value) -> str:
    if value is None:
        return ""
    if value is True:
        return "ON"
    if value is False:
        return "OFF"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def checks(recipe: Recipe, record: dict, raw: Path) -> list[Check]:
    """Every check of one repetition, from its recipe, its run.json (record) and its raw folder."""
    out = filesystem(recipe.filesystem, record.get("filesystem") or {})
    out += host_settings(recipe.noise_control, record.get("noise_control"))
    if recipe.database:
        out += server_settings(recipe, raw / "variables.tsv")
        out += dataset(recipe, raw / "dataset.tsv")
        out += session(recipe, raw / "session.tsv")
        out += version(recipe.version, (record.get("server") or {}).get("version"))
        out += memory_cap(recipe.memory_limit, record.get("memory_cap"))
        out += topology(recipe, record.get("topology"), record.get("host") or {})
    return out


def extra(recipe: Recipe, summary: dict, counters: list[dict]) -> list[Check]:
    """The checks that read collect's own tables: the connections the server saw, the achieved rate."""
    out = []
    if recipe.database and recipe.topology is None:
        out += connections(recipe, counters)
    if recipe.proxy is not None:
        out += proxy(recipe, counters)
    if summary.get("rate") is not None:
        out += rate(summary)
    return out


# --- the server's settings -------------------------------------------------------------------------------

def server_settings(recipe: Recipe, variables: Path) -> list[Check]:
    """The memory axis's variable and every server option the study declares, against the server's own
    variables (its family's settings module says how each is named and normalised); nothing where the
    repetition has no variables.tsv (it ran before dbsweep wrote one)."""
    if not variables.exists():
        return []
    family = settings.family(recipe.engine)
    read = family.read([line.rstrip("\n").split("\t") for line in
                        variables.read_text(errors="replace").splitlines() if "\t" in line])
    out = []
    for kind, name, value in family.declared(recipe.engine, recipe.memory, recipe.server_options or {}):
        names, want = family.variable(name, value)
        got = next((read[n] for n in names if n in read), None)
        if got is None:
            if family.known(name) is False:
                out.append(_check(kind, name, value, None, DEVIATED, "the server has no such option or variable: "
                                  "it ignored it (a loose_ prefix, or a build without it)"))
            else:
                out.append(_check(kind, name, value, None, NOT_READ, "an option the server takes but shows as no "
                                  "variable"))
            continue
        verdict = same(want, got.value)
        if verdict == DEVIATED and got.bare and re.fullmatch(r"\d+", str(want)):
            verdict = same(want, got.bare)  # a plain number of the parameter's own unit
        if verdict == DEVIATED and kind == "memory" and _rounded_up(want, got.value):
            verdict = WITHIN
        out.append(_check(kind, name, value, got.shown, verdict))
    return out


SESSION = "session."  # a workload option that is a session setting (the query workload's session.<name>)


def session(recipe: Recipe, path: Path) -> list[Check]:
    """The session settings a workload declares (its options session.<name>) against what its own session
    reported at the end of its executions (raw/session.tsv); one the session did not report is not read."""
    declared = {k[len(SESSION):]: v for k, v in recipe.options.items() if str(k).startswith(SESSION)}
    if not declared:
        return []
    read = dict(line.split("\t", 1) for line in path.read_text(errors="replace").splitlines()
                if "\t" in line) if path.exists() else {}
    family = settings.family(recipe.engine)
    out = []
    for name, value in declared.items():
        got = read.get(name)
        if got is None:
            out.append(_check("session setting", name, value, None, NOT_READ, "no raw/session.tsv reading"))
            continue
        _, want = family.variable(name, value)
        normal = settings.flag(got) or settings.size_bytes(got) or settings.time_ms(got) or got
        out.append(_check("session setting", name, value, got, same(want, normal)))
    return out


# The tables' rows are the engine's estimate (counting them would read every table into the cache right before
# the window): InnoDB's is within a few percent, MyRocks' was twice the rows of some tables of a fresh load.
ROWS_FACTOR = 3


def dataset(recipe: Recipe, path: Path) -> list[Check]:
    """What the dataset was made with, from its catalog (raw/dataset.tsv: the family's dataset_facts), against
    the engine and the dataset-shaping options the cell declares (its family's settings module), and the
    tables and rows its workload declares (recipe.dataset's tables and table_size, where it has them);
    nothing where the repetition has no dataset.tsv (it ran before dbsweep wrote one)."""
    if not path.exists():
        return []
    facts = dict(line.split("\t", 1) for line in path.read_text(errors="replace").splitlines() if "\t" in line)
    family = settings.family(recipe.engine)
    out = [_check("dataset", key, want, got, NOT_READ if got is None else EQUAL if ok else DEVIATED)
           for key, want, got, ok in family.dataset(recipe.engine, recipe.server_options or {}, facts)]
    tables = sorted(key.split(".")[1] for key in facts if key.startswith("table.") and key.endswith(".rows"))
    declared = workloads.dataset_tables(recipe.tool, recipe.dataset)  # tpcc's `tables` are sets of nine
    if declared is not None:
        out.append(_check("dataset", "tables", declared, len(tables), EQUAL if len(tables) == declared else DEVIATED))
    size = recipe.dataset.get("table_size")
    if isinstance(size, int) and size > 0:
        for table in tables:
            got = float(facts[f"table.{table}.rows"] or -1)
            verdict = (NOT_READ if got <= 0 else EQUAL if got == size else
                       WITHIN if size / ROWS_FACTOR <= got <= size * ROWS_FACTOR else DEVIATED)
            out.append(_check("dataset", f"{table} rows", size, int(got) if got > 0 else None, verdict))
    return out


def _rounded_up(declared: str, delivered: str) -> bool:
    """A size the server rounded up to its allocation unit (InnoDB's buffer pool chunks): at most 1/8 or
    8 MiB more than declared, never less."""
    try:
        want, got = float(declared), float(delivered)
    except ValueError:
        return False
    return want <= got <= want + max(want / 8, 8 << 20)


ON = {"on", "true", "yes", "1"}
OFF = {"off", "false", "no", "0"}


def same(declared: str, delivered: str) -> str:
    """EQUAL or DEVIATED for two normalised values (family.setting and read_settings give them): numbers by
    value, ON/OFF words as one, a declared list of name=value pairs (optimizer_switch) as a subset of the
    delivered one, other text without regard to case or to the order of a comma-separated list."""
    a, b = str(declared).strip(), str(delivered).strip()
    if a.lower() == b.lower():
        return EQUAL
    if (a.lower() in ON and b.lower() in ON) or (a.lower() in OFF and b.lower() in OFF):
        return EQUAL
    try:
        x, y = float(a), float(b)
        return EQUAL if math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-12) else DEVIATED
    except ValueError:
        pass
    if "=" in a:
        pairs = {p.strip().lower() for p in a.split(",") if p.strip()}
        return EQUAL if pairs <= {p.strip().lower() for p in b.split(",")} else DEVIATED
    if "," in a or "," in b:
        items = lambda s: sorted(p.strip().lower() for p in s.split(",") if p.strip())  # noqa: E731
        return EQUAL if items(a) == items(b) else DEVIATED
    return DEVIATED


def version(declared: str | None, delivered: str | None) -> list[Check]:
    """The declared version (a fetched server's, e.g. 10.6 or 16.4) against the server's own version();
    nothing where the study declares none or `debian` (Debian's build, whatever apt installed: the provenance
    names it)."""
    if not declared or not str(declared)[:1].isdigit():
        return []
    if not delivered:
        return [_check("server version", "version", declared, None, NOT_READ)]
    numbers = re.search(r"\d+(\.\d+)*", delivered)
    ran = numbers[0] if numbers else delivered
    ok = (ran + ".").startswith(str(declared) + ".")
    return [_check("server version", "version", declared, ran, EQUAL if ok else DEVIATED)]


def memory_cap(declared: int | None, readings: dict | None) -> list[Check]:
    """The server's memory cgroup limit (recipe.memory_limit, bytes) against the limit file read at the
    window's start and end (run.json memory_cap: node -> {start, end}); a node's reading that differs at
    either moment is a deviation."""
    if not declared:
        return []
    if not readings:
        return [_check("memory cap", "memory_limit", declared, None, NOT_READ, "no reading in run.json")]
    out = []
    for node, moments in sorted(readings.items()):
        for moment in ("start", "end"):
            got = moments.get(moment)
            key = f"memory_limit ({node}, window {moment})" if node != "primary" else f"memory_limit (window {moment})"
            if got is None:
                out.append(_check("memory cap", key, declared, None, NOT_READ))
                continue
            ok = abs(int(got) - int(declared)) < 4096
            out.append(_check("memory cap", key, declared, got, EQUAL if ok else DEVIATED))
    return out


# --- the filesystem -----------------------------------------------------------------------------------------

def filesystem(spec: dict, facts: dict) -> list[Check]:
    """The declared filesystem type, mount options and mkfs options against the mount as the kernel reports it
    (facts: storage.filesystem's, from /proc/self/mounts) and its superblock (facts["superblock"]). A `dir`
    filesystem is a folder on whatever the host has: nothing declared, nothing checked."""
    kind = spec.get("type")
    if kind in (None, "dir") or "fstype" not in facts:
        return []
    out = [_check("filesystem", "type", kind, facts["fstype"], EQUAL if facts["fstype"] == kind else DEVIATED)]
    mounted = facts.get("mount_options", "").split(",")
    shown = {o.split("=", 1)[0]: o for o in mounted}
    for option in spec.get("mount_options") or []:
        name = str(option).split("=", 1)[0]
        if option in mounted:
            out.append(_check("mount option", name, option, option, EQUAL))
        elif name in shown:
            out.append(_check("mount option", name, option, shown[name], DEVIATED))
        else:
            out.append(_check("mount option", name, option, None, NOT_READ,
                              "/proc/self/mounts does not print it (a default, or ignored)"))
    if kind == "tmpfs" and spec.get("size") and "size" in shown:
        want = parse_size(spec["size"])
        got = parse_size(shown["size"].split("=", 1)[1].upper().rstrip("B"))
        out.append(_check("mount option", "size", spec["size"], shown["size"].split("=", 1)[1],
                          EQUAL if want == got else DEVIATED))
    out += mkfs(kind, spec.get("mkfs_options") or [], facts.get("superblock"))
    out += device_class(spec.get("device_class"), facts.get("device_class"))
    return out


def device_class(declared: dict | None, facts: dict | None) -> list[Check]:
    """A device class's caps (bytes and IOs per second, blkio's keys) against the throttle rules read once set
    (delivered) and before removal (delivered_at_end): a rule changed or gone during the repetition deviates."""
    if not declared:
        return []
    name = declared.get("name", "device class")
    out = []
    for moment, key in (("set", "delivered"), ("end", "delivered_at_end")):
        got = (facts or {}).get(key)
        for limit, want in sorted((facts or {}).get("declared", {}).items()) if facts else []:
            value = None if got is None else got.get(limit)
            out.append(_check("device class", f"{name} {limit} ({moment})", want, value,
                              NOT_READ if got is None else EQUAL if value == want else DEVIATED))
    latency = (facts or {}).get("latency") or {}
    for moment, key in (("set", "delivered"), ("end", "delivered_at_end")):
        got = latency.get(key)
        for delay, want in sorted(latency.get("declared", {}).items()):
            value = None if got is None else got.get(delay)
            out.append(_check("device latency", f"{name} {delay} ({moment})", want, value,
                              NOT_READ if got is None else EQUAL if value == want else DEVIATED))
    out += _measured_latency(name, latency)
    if facts is None:
        out.append(_check("device class", name, "capped", None, NOT_READ, "no reading in run.json"))
    return out


# a latency class's measured mean time per IO may fall this far under the declared: the loop device's time
# misses the part of the path above it (bench/device_latency.py; tests/test_devices.py awaits)
LATENCY_SHARE = 0.05
LATENCY_FLOOR_MS = 0.1


def _measured_latency(name: str, latency: dict) -> list[Check]:
    """Each declared latency against the loop device's mean time per IO of that direction: a delay server
    that held nothing, or a calibration that took the whole latency off, falls under it. Not read where
    no IO of that direction reached the device."""
    measured = latency.get("await_ms") or {}
    out = []
    for delay, want in sorted(latency.get("declared", {}).items()):
        direction = delay.removesuffix("_latency_ms")
        got = measured.get(direction)
        key = f"{name} {direction} ms per IO (repetition)"
        if got is None:
            out.append(_check("device latency (measured)", key, want, None, NOT_READ,
                              f"no {direction} reached the device"))
            continue
        ok = got >= want * (1 - LATENCY_SHARE) - LATENCY_FLOOR_MS
        out.append(_check("device latency (measured)", key, want, got, WITHIN if ok else DEVIATED))
    return out


def mkfs(kind: str, options: list[str], superblock: dict | None) -> list[Check]:
    """mkfs options that the superblock records: ext4's -b (block size), -I (inode size), -O (features, ^ for
    off); xfs's -b size=, -i size=, -m crc=, -m reflink=. Others are not read."""
    out = []
    pairs = list(_option_pairs(options))
    for flag, value in pairs:
        wanted = _superblock_fields(kind, flag, value)
        if wanted is None:
            out.append(_check("mkfs option", flag, f"{flag} {value}".strip(), None, NOT_READ,
                              "no superblock field records it"))
            continue
        for field, want in wanted:
            got = (superblock or {}).get(field)
            if got is None and superblock and field.startswith("feature ") and kind != "xfs":
                got = "off"  # tune2fs lists the features that are on
            if got is None:
                out.append(_check("mkfs option", field, want, None, NOT_READ, "the superblock was not read"))
                continue
            ok = (got == "on") == (want == "on") if field.startswith("feature ") else str(got) == str(want)
            out.append(_check("mkfs option", field, want, got, EQUAL if ok else DEVIATED))
    return out


def _option_pairs(options: list[str]):
    """mkfs's argument list as (flag, value) pairs: ["-b", "4096", "-O", "^has_journal"] or ["-b4096"]."""
    items = [str(o) for o in options]
    i = 0
    while i < len(items):
        flag = items[i]
        if flag.startswith("-") and len(flag) > 2 and not flag.startswith("--"):
            yield flag[:2], flag[2:]
        elif flag.startswith("-") and i + 1 < len(items) and not items[i + 1].startswith("-"):
            yield flag, items[i + 1]
            i += 1
        else:
            yield flag, ""
        i += 1


def _superblock_fields(kind: str, flag: str, value: str) -> list[tuple[str, str]] | None:
    if kind in ("ext4", "ext3", "ext2"):
        if flag == "-b":
            return [("block_size", str(parse_size(value)))]
        if flag == "-I":
            return [("inode_size", value)]
        if flag == "-O":
            return [(f"feature {f.lstrip('^')}", "off" if f.startswith("^") else "on") for f in value.split(",") if f]
        return None
    if kind == "xfs":
        fields = {("-b", "size"): "block_size", ("-i", "size"): "inode_size", ("-m", "crc"): "feature crc",
                  ("-m", "reflink"): "feature reflink"}
        out = []
        for part in value.split(","):
            name, _, setting = part.partition("=")
            field = fields.get((flag, name))
            if field is None:
                return None
            if field.startswith("feature "):
                setting = "on" if setting in ("1", "") else "off"
            else:
                setting = str(parse_size(setting))
            out.append((field, setting))
        return out or None
    return None


# --- topology -------------------------------------------------------------------------------------------

LINK_FLOOR_MS = 0.1
LINK_SHARE = 0.10


def topology(recipe: Recipe, facts: dict | None, host: dict) -> list[Check]:
    """Each link's measured round trip against its declared added round trip (recipe.network), at the window's
    start and, where no timed event changes the links, its end; each node's declared host against the host
    it ran on."""
    if recipe.topology is None or not facts:
        return []
    out = []
    network = facts.get("network") or {}
    declared = {(link["a"], link["b"]): link["latency_ms"] for link in network.get("links", [])}
    # a placed topology's hosts' own round trip before any delay rule (on one host the veth's is in the floor)
    base = network.get("base_rtt_ms") or {}
    moments = [("start", network.get("rtt_ms") or {})]
    if facts.get("rtt_end_ms") is not None:
        moments.append(("end", facts["rtt_end_ms"]))
    for (a, b), want in sorted(declared.items()):
        for moment, rtts in moments:
            got = rtts.get(f"{a}-{b}")
            key = f"{a}-{b} round trip ms (window {moment})"
            if got is None or (isinstance(got, float) and math.isnan(got)):
                out.append(_check("link", key, want, None, NOT_READ, "no answer to ping"))
                continue
            own = float(base.get(f"{a}-{b}", 0.0))
            if math.isnan(own):
                out.append(_check("link", key, want, None, NOT_READ, "no answer to ping before the delay rules"))
                continue
            added = float(got) - own
            ok = abs(added - float(want)) <= LINK_FLOOR_MS + LINK_SHARE * float(want)
            out.append(_check("link", key, want, round(added, 3), EQUAL if ok else DEVIATED))
    ran = host.get("node") or host.get("hostname")
    parts = {"client": (network.get("hosts") or {}).get("client") or ran} \
        | {node["name"]: node.get("host") for node in facts.get("nodes", [])}
    if facts.get("declared_client_spread"):
        out.append(_own_host("client", parts))
    for node in facts.get("nodes", []):
        if node.get("declared_spread"):
            out.append(_own_host(node["name"], parts))
        if "declared_host" in node:
            got = node.get("host") or ran
            out.append(_check("host", node["name"], node["declared_host"], got,
                              EQUAL if got == node["declared_host"] else DEVIATED))
        if "declared_constraint" in node:  # placed by a Slurm constraint: its host has that feature
            got = f"{node.get('host')} ({','.join(node.get('features') or []) or 'no features'})"
            out.append(_check("host", node["name"], f"constraint {node['declared_constraint']}", got,
                              EQUAL if node["declared_constraint"] in (node.get("features") or []) else DEVIATED))
    proxy = facts.get("proxy") or {}
    if "declared_host" in proxy:  # a placed cell's proxy, beside the client
        out.append(_check("host", "proxy", proxy["declared_host"], proxy.get("host"),
                          EQUAL if proxy.get("host") == proxy["declared_host"] else DEVIATED))
    return out


def _own_host(role: str, parts: dict[str, str | None]) -> Check:
    """A part of a topology placed with `hosts: spread` (parts: role -> the host it ran on): no other part, the
    client or a node, ran on its host."""
    got = parts.get(role)
    sharing = [other for other, there in parts.items() if other != role and there == got]
    return _check("host", role, "a host of its own", f"{got} (also {', '.join(sharing)})" if sharing else got,
                  EQUAL if got and not sharing else DEVIATED)


# --- what collect's tables show ------------------------------------------------------------------------

MIN_SAMPLES = 3


def connections(recipe: Recipe, counters: list[dict]) -> list[Check]:
    """The declared client threads against the largest number of connected clients the server reported in the
    window (its family's CONNECTIONS counter, which counts dbsweep's own sampler too): fewer than the threads
    means the tool did not open them all. Not read with fewer than MIN_SAMPLES samples."""
    name = settings.family(recipe.engine).CONNECTIONS
    values = [float(r["value"]) for r in counters if r.get("name") == name and not r.get("node")]
    if len(values) < MIN_SAMPLES:
        return [_check("connections", "threads", recipe.threads, None, NOT_READ,
                       f"fewer than {MIN_SAMPLES} samples of the server's connections")]
    most = int(max(values))
    return [_check("connections", "threads", recipe.threads, most, EQUAL if most >= recipe.threads else DEVIATED,
                   f"{name}, largest per-second sample (dbsweep's sampler is one of them)")]


def proxy(recipe: Recipe, counters: list[dict]) -> list[Check]:
    """The client's path through the cell's proxy: the proxy's current sessions (its counters, node "proxy"),
    largest per-second sample in the window, against the declared threads. Fewer: some of the client's
    connections went elsewhere, or never came. Not read with fewer than MIN_SAMPLES samples."""
    name = recipe.proxy.get("name") or recipe.proxy.get("type")
    values = [float(r["value"]) for r in counters
              if r.get("node") == "proxy" and str(r.get("name", "")).rsplit(".", 1)[-1] == "sessions_current"]
    if len(values) < MIN_SAMPLES:
        return [_check("proxy", name, f"{recipe.threads} client connections", None, NOT_READ,
                       f"fewer than {MIN_SAMPLES} samples of the proxy's sessions")]
    most = int(max(values))
    return [_check("proxy", name, f"{recipe.threads} client connections", f"{most} sessions",
                   EQUAL if most >= recipe.threads else DEVIATED)]


def host_settings(control, facts: dict | None) -> list[Check]:
    """noise_control's THP, governor and halt polling (noise.host_settings) against what was read after each
    was set; one the host does not have ("not available: …") is not read."""
    if control is None:
        return []
    out = []
    for key in ("thp", "governor", "halt_poll_ns"):
        want = getattr(control, key, None)
        if want is None:
            continue
        got = (facts or {}).get(key)
        if not isinstance(got, dict):
            out.append(_check("host setting", key, want, None, NOT_READ, str(got or "no reading in run.json")))
            continue
        value = got.get("set")
        values = set(value.values()) if isinstance(value, dict) else {value}
        ok = {str(v) for v in values} == {str(want)}
        out.append(_check("host setting", key, want, ",".join(sorted(map(str, values))), EQUAL if ok else DEVIATED))
    return out


def rate(summary: dict) -> list[Check]:
    """An open loop's target arrival rate against the achieved one (collect.open_loop's rate_short)."""
    achieved = summary.get("rate_achieved")
    if achieved is None:
        return [_check("rate", "rate", summary["rate"], None, NOT_READ)]
    verdict = DEVIATED if summary.get("rate_short") else (EQUAL if achieved >= summary["rate"] else WITHIN)
    return [_check("rate", "rate", summary["rate"], round(float(achieved), 2), verdict)]


# --- files ------------------------------------------------------------------------------------------------

def write(path: Path, rows: list[Check]) -> None:
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, COLUMNS)
        writer.writeheader()
        writer.writerows(asdict(r) for r in rows)


def read(path: Path) -> list[Check]:
    if not path.exists():
        return []
    with open(path, newline="") as f:
        return [Check(**{k: row.get(k) or "" for k in COLUMNS}) for row in csv.DictReader(f)]


COUNT_KEYS = ["settings_checked", "settings_verified", "deviations", "settings_not_read"]


def counts(rows: list[Check]) -> dict:
    """summary.json's figures: how many settings were checked, verified, deviated and not read."""
    return {"settings_checked": len(rows), "settings_verified": sum(r.verdict in VERIFIED for r in rows),
            "deviations": sum(r.verdict == DEVIATED for r in rows), "settings_not_read": sum(r.verdict == NOT_READ
                                                                                          for r in rows)}



# --- the page -----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Report:
    """What the summary page says of the study's checks: each deviation as a line (cell, repetition,
    setting, declared, delivered), per kind how many checks were verified of how many, and the kinds with
    settings not read."""

    deviations: list[str]
    verified: list[tuple[str, int, int]]  # kind, verified, read back (the not read left out)
    not_read: list[tuple[str, int, str]]  # kind, how many, a few keys
    deviated_reps: int
    include_deviated: bool

    @property
    def lines(self) -> list[str]:
        """The section as sentences, for the HTML and the Markdown page alike."""
        out = []
        if self.deviations:
            what = ("kept in the comparisons (analysis.include_deviated: true); every answer line they shape says so"
                    if self.include_deviated else "left out of the comparisons and the answer "
                    "(analysis.include_deviated: true keeps them)")
            out.append(f"{len(self.deviations)} setting(s) ran otherwise than declared, in {self.deviated_reps} "
                       f"repetition(s), {what}:")
        return out

    def verified_line(self) -> str:
        if not self.verified and not self.not_read:
            return "No setting of this study was read back (its runs predate the checks)."
        parts = [f"{kind} {ok} of {n}" for kind, ok, n in self.verified]
        if not parts:
            parts = ["none"]
        text = "Verified against what ran (equal, or within the kind's tolerance): " + ", ".join(parts) + "."
        if self.not_read:
            text += " Not read back, so not verified: " + ", ".join(f"{kind} {n} ({keys})"
                                                                   for kind, n, keys in self.not_read) + "."
        return text


def report(path: Path, axes: list[str], include_deviated: bool = False) -> Report | None:
    """The page's report from results/tables/delivered.csv.gz (aggregate: the axes, rep, host and COLUMNS);
    None without the table."""
    if not path.exists():
        return None
    with gzip.open(path, "rt", newline="") as f:
        rows = list(csv.DictReader(f))
    deviations, reps, by_kind, unread = [], set(), {}, {}
    vary = [a for a in axes if len({row.get(a) for row in rows}) > 1] or axes  # name a cell by what differs
    for row in rows:
        kind, verdict = row["kind"], row["verdict"]
        if verdict == NOT_READ:
            unread.setdefault(kind, []).append(row["key"])
            continue
        ok, n = by_kind.get(kind, (0, 0))
        by_kind[kind] = (ok + (verdict in VERIFIED), n + 1)
        if verdict == DEVIATED:
            cell = ", ".join(f"{a} {row[a]}" for a in vary if row.get(a))
            reps.add((cell, row["rep"]))
            check = Check(**{k: row[k] for k in COLUMNS})
            deviations.append(f"{cell}, repetition {row['rep']}: {check.line()}")
    order = list(KINDS)
    verified = [(k, *by_kind[k]) for k in sorted(by_kind, key=lambda k: order.index(k) if k in order else 99)]
    not_read = [(k, len(keys), ", ".join(sorted(set(keys))[:3]) + (" …" if len(set(keys)) > 3 else ""))
                for k, keys in unread.items()]
    return Report(deviations, verified, not_read, len(reps), include_deviated)
