"""The proxy in front of a topology's nodes, started on the client's host: in its namespace on one host
(cell.py), on that host itself when the nodes are placed on hosts of their own (placed.py, hosts.py), or on a
host of its own when the placement names one (hosts.proxy_on_host, from kind, settings and backends here)."""
from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path

from dbsweep import database, runtime, storage
from dbsweep.recipe import Recipe
from dbsweep.runtime.resources import Stack
from dbsweep.topology import proxies
from dbsweep.topology.nodes import NodeSpec


def front(recipe: Recipe, specs: list[NodeSpec], first: database.Database, address: str, netns: str | None, log,
          stack: Stack) -> tuple[database.Database, object]:
    """The cell's proxy, if it has one, started on the client's host (address; netns: its namespace, None on a
    host of its own) in front of the nodes that take writes (the primary, or every Galera member), inside
    stack. Returns (what the client's tool reaches: the proxy, else first; the proxy's handle or None)."""
    if recipe.proxy is None:
        return first, None
    folder = Path(tempfile.mkdtemp(prefix="dbsweep-proxy-"))
    stack.enter("service", "proxy folder", storage.scratch_files(folder, runtime.active))
    handle = stack.enter("service", recipe.proxy["name"],
                         proxies.proxy(kind(recipe), settings(recipe), (address, database.free_port()),
                                       backends(recipe, specs), folder, log, netns=netns,
                                       login=(first.conn.user, first.conn.password)))
    return through(first, handle.address, handle.port), handle


def kind(recipe: Recipe) -> str:
    return recipe.proxy["type"]


def settings(recipe: Recipe) -> dict:
    """The cell's proxy's settings, as its adapter takes them."""
    return {k: v for k, v in recipe.proxy.items() if k not in ("name", "type")}


def backends(recipe: Recipe, specs: list[NodeSpec]) -> list[proxies.Backend]:
    """The nodes that take writes, where the proxy sends clients: the primary, or every Galera member."""
    writers = specs if recipe.topology["replication"] == "galera" else specs[:1]
    return [proxies.Backend(node.name, node.address, node.port) for node in writers]


def through(db: database.Database, host: str, port: int) -> database.Database:
    """db as the client reaches it through a proxy at host:port (its own sysbench option file, 0600)."""
    conn = dataclasses.replace(db.conn, host=host, port=port)
    option_file = db.option_file.with_name("sysbench-proxy.cfg")
    database.write_secret(option_file, "\n".join(db.family.sysbench_options(conn, db.engine)) + "\n")
    return dataclasses.replace(db, conn=conn, option_file=option_file)
