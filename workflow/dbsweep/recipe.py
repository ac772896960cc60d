"""The recipe: everything that shapes one cell's measurement, and nothing else.

Built once per cell by the study (study.Study.recipe), checked once here, and read as attributes by every
layer of a repetition (run, database, topology, events, collect). It crosses two boundaries as JSON:
Snakemake's params of rule run (so a changed recipe reruns its cells) and run.json (so collect, the
estimate and a later reader know what was measured); `as_dict` writes that JSON and `from_dict` reads it
back, refusing a key it does not know or a missing one.
"""
from __future__ import annotations

from dataclasses import MISSING, dataclass, fields

from dbsweep.noise import NoiseControl


@dataclass(frozen=True)
class Recipe:
    # every cell
    tool: str
    options: dict
    threads: int
    filesystem: dict  # the filesystem's declaration: type, size, mkfs and mount options, device
    dataset: dict  # what shapes the prepared files or database (the image's key)
    duration_s: float | None  # the measured window's configured length; None: bounded by size
    # a database cell
    engine: str | None = None
    version: str | None = None
    basedir: str | None = None  # the server's programs: a user's build, a fetched one; None: Debian's
    memory: str | None = None
    server_options: dict | None = None
    warmup_s: float = 0
    cold_start: bool = False
    memory_limit: int | None = None  # bytes of the server's memory cgroup
    # a topology cell (topology/settings.py): nodes, the links' round trips, the proxy (None without)
    topology: dict | None = None
    network: dict | None = None
    proxy: dict | None = None
    # a cell on the events axis: its schedule, sorted by time ([] for `none`)
    events: list | None = None
    # what the repetition sets on the host around its window (noise.py); None: nothing
    noise_control: NoiseControl | None = None

    def __post_init__(self):
        for name, kind in (("tool", str), ("options", dict), ("threads", int), ("filesystem", dict),
                           ("dataset", dict)):
            if not isinstance(getattr(self, name), kind):
                raise ValueError(f"recipe.{name}: {getattr(self, name)!r} is not a {kind.__name__}")
        if self.threads < 1:
            raise ValueError(f"recipe.threads: {self.threads!r} is below 1")
        if self.engine is None and any(getattr(self, f) is not None for f in ("version", "topology", "events")):
            raise ValueError(f"recipe: a {self.tool} cell without an engine has server parts")
        if (self.topology is None) != (self.network is None):
            raise ValueError("recipe: a topology and its network come together")
        if self.noise_control is not None and not isinstance(self.noise_control, NoiseControl):
            raise ValueError(f"recipe.noise_control: {self.noise_control!r} is not a NoiseControl")

    @property
    def database(self) -> bool:
        return self.engine is not None

    @property
    def kind(self) -> str:
        return "database" if self.database else "storage"

    @property
    def timed(self) -> bool:
        """On the events axis (with `none` too: its cells measure what a stall would show)."""
        return self.events is not None

    def as_dict(self) -> dict:
        """The JSON form, keys in the order they always had (a storage cell has no server keys, a cell
        without topology no topology keys, one without noise control no noise_control), so recipes recorded
        before stay equal."""
        out = {name: getattr(self, name) for name in ("tool", "options", "threads", "filesystem", "dataset",
                                                       "duration_s")}
        noise = {"noise_control": self.noise_control.as_dict()} if self.noise_control is not None else {}
        if not self.database:
            return out | noise
        if self.topology is not None:
            out |= {"topology": self.topology, "network": self.network, "proxy": self.proxy}
        if self.events is not None:
            out["events"] = self.events
        return out | {name: getattr(self, name) for name in ("engine", "version", "basedir", "memory",
                                                              "server_options", "warmup_s", "cold_start",
                                                              "memory_limit")} | noise

    @classmethod
    def preparing(cls, image_spec: dict) -> Recipe:
        """The recipe that prepares an image (study.Study.image_spec: filesystem, tool, dataset, and for a
        database the engine, version, basedir and the study-wide server options): no window, one thread."""
        server = {k: image_spec[k] for k in ("engine", "version", "basedir", "server_options") if k in image_spec}
        return cls(tool=image_spec["tool"], options={}, threads=1, filesystem=image_spec["filesystem"],
                   dataset=image_spec["dataset"], duration_s=None, **server)

    @classmethod
    def from_dict(cls, data: dict) -> Recipe:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"recipe: unknown key {unknown[0]!r} (written by another dbsweep version?)")
        missing = sorted(f.name for f in fields(cls) if f.default is MISSING and f.name not in data)
        if missing:
            raise ValueError(f"recipe: {missing[0]!r} is missing")
        if data.get("noise_control") is not None:
            data = data | {"noise_control": NoiseControl(**data["noise_control"])}
        return cls(**data)
