"""Every key of the schema with at least one bad value: each is refused when the study loads, before any
job, with one line naming the key and the value and no traceback. Most rows go through the loader the
Snakefile calls (dbsweep.config.load); a few through the real `./dbsweep run -n`, and the files Snakemake
itself reads (syntax errors, empty files) only there. RELIABILITY.md records the count."""
import copy
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from dbsweep.config import SCHEMA, load, read
from dbsweep.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
DEMO = read(ROOT / "config" / "config.yaml")


def put(path: str, value):
    """A change to the demo study: path is dotted."""
    def change(config):
        node = config
        *parents, last = path.split(".")
        for key in parents:
            node = node.setdefault(key, {})
        node[last] = value
    return change


def both(*changes):
    def change(config):
        for c in changes:
            c(config)
    return change


def dir_fs(config):
    config["filesystems"]["scratch"] = {"type": "dir"}
    config["axes"]["filesystem"] = ["scratch"]


def option_set(family, options):
    return both(put("axes.log", ["a"]), put("server_options", {"log": {"a": {family: options}}}))


def topology(name, spec, **more):
    """A topology axis of single and name (spec), with more top-level keys."""
    def change(config):
        config["axes"]["topology"] = ["single", name]
        config["topologies"] = {name: spec}
        config.update(more)
    return change


# (schema key, change, text that must start the message (the key), text it must contain (the value))
ROWS = [
    ("axes.topology", put("axes.topology", ["ring"]), "axes.topology:", "'ring'"),
    ("axes.proxy", put("axes.proxy", ["nginx"]), "axes.proxy:", "'nginx'"),
    ("axes.network", both(put("axes.topology", ["single"]), put("axes.network", ["wan"])), "axes.network:", "'wan'"),
    ("topologies", topology("../x", {"replicas": 1, "replication": "async"}), "topologies:", "'../x'"),
    ("topologies.*", topology("single", {"replicas": 1, "replication": "async"}), "topologies.single:", "built in"),
    ("topologies.*.replication", topology("r", {"replicas": 1, "replication": "raft"}), "topologies.r.replication:",
     "'raft'"),
    ("topologies.*.replicas", topology("r", {"replicas": -1, "replication": "async"}), "topologies.r.replicas:", "-1"),
    ("topologies.*.replicas", topology("r", {"replicas": 2, "replication": "galera"}), "topologies.r.replicas:",
     "2"),
    ("topologies.*.nodes", topology("g", {"nodes": 0, "replication": "galera"}), "topologies.g.nodes:", "0"),
    ("topologies.*.nodes", topology("g", {"replication": "galera"}), "topologies.g.nodes:", "missing"),
    ("topologies.*.semisync_timeout_ms", topology("r", {"replicas": 1, "replication": "async",
                                                        "semisync_timeout_ms": 10}),
     "topologies.r.semisync_timeout_ms:", "10"),
    ("topologies.*.semisync_timeout_ms", topology("r", {"replicas": 1, "replication": "semisync",
                                                        "semisync_timeout_ms": -5}),
     "topologies.r.semisync_timeout_ms:", "-5"),
    ("topologies.*.sync_standbys", topology("r", {"replicas": 1, "replication": "sync", "sync_standbys": 2}),
     "topologies.r.sync_standbys:", "2"),
    ("topologies.*.hosts", topology("r", {"replicas": 1, "replication": "async", "hosts": {"replica9": "n2"}}),
     "topologies.r.hosts.replica9:", "'n2'"),
    # issue 34: a placement names the host of the client and of every node, one host each
    ("topologies.*.hosts", topology("r", {"replicas": 1, "replication": "async",
                                          "hosts": {"primary": "db1", "replica1": "db2"}}),
     "topologies.r.hosts:", "client not placed"),
    ("topologies.*.hosts", topology("r", {"replicas": 1, "replication": "async",
                                          "hosts": {"client": "c1", "primary": "db[1-2]", "replica1": "db2"}}),
     "topologies.r.hosts.primary:", "'db[1-2]' does not match"),
    ("network", topology("r", {"replicas": 1, "replication": "async"}, network={"latency": 1}), "network.latency:",
     "unknown key"),
    ("network.client_latency_ms", topology("r", {"replicas": 1, "replication": "async"},
                                           network={"client_latency_ms": -1}), "network.client_latency_ms:", "-1"),
    ("network.node_latency_ms", topology("r", {"replicas": 1, "replication": "async"},
                                         network={"node_latency_ms": "1ms"}), "network.node_latency_ms:", "'1ms'"),
    # issue 32: below the least this host's delay mechanism (the user-space delayer) adds; 0.001 ms is 1 µs
    ("network.client_latency_ms", topology("r", {"replicas": 1, "replication": "async"},
                                           network={"client_latency_ms": 0.001}), "network.client_latency_ms:",
     "0.001 is below what a link delay can deliver on this host"),
    ("network.jitter_ms", topology("r", {"replicas": 1, "replication": "async"}, network={"jitter_ms": -2}),
     "network.jitter_ms:", "-2"),
    ("networks", both(put("axes.topology", ["single"]), put("axes.network", ["../x"]),
                      put("networks", {"../x": {}})), "networks:", "'../x'"),
    ("networks.*", both(put("axes.topology", ["single"]), put("axes.network", ["az"]), put("networks", {"az": 2})),
     "networks.az:", "2"),
    ("networks.*.client_latency_ms", put("networks", {"az": {"client_latency_ms": -1}}),
     "networks.az.client_latency_ms:", "-1"),
    ("networks.*.node_latency_ms", put("networks", {"az": {"node_latency_ms": -1}}), "networks.az.node_latency_ms:",
     "-1"),
    ("networks.*.jitter_ms", put("networks", {"az": {"jitter_ms": "x"}}), "networks.az.jitter_ms:", "'x'"),
    ("proxies", both(put("axes.proxy", ["none", "../x"]), put("proxies", {"../x": {"type": "haproxy"}})),
     "proxies:", "'../x'"),
    ("proxies.*", both(put("axes.proxy", ["none", "nginx"]), put("proxies", {"nginx": {}})), "proxies.nginx.type:",
     "missing"),
    ("proxies.*.type", put("proxies", {"p": {"type": "nginx"}}), "proxies.p.type:", "'nginx'"),
    ("proxies.*.balance", put("proxies", {"p": {"type": "haproxy", "balance": "random"}}), "proxies.p.balance:",
     "'random'"),
    ("proxies.*.path", put("proxies", {"p": {"type": "proxysql", "path": 5}}), "proxies.p.path:", "5"),
    ("proxies.*.path", put("proxies", {"p": {"type": "proxysql", "path": "/nonexistent/proxysql"}}), "proxies.p.path:",
     "'/nonexistent/proxysql'"),
    ("proxies.*.check_interval_ms", put("proxies", {"p": {"type": "haproxy", "check_interval_ms": 5}}),
     "proxies.p.check_interval_ms:", "5"),
    ("proxies.*.timeout_s", put("proxies", {"p": {"type": "haproxy", "timeout_s": 0}}), "proxies.p.timeout_s:", "0"),
    ("proxies.*.maxconn", put("proxies", {"p": {"type": "haproxy", "maxconn": 1}}), "proxies.p.maxconn:", "1"),
    ("proxies.*.threads", put("proxies", {"p": {"type": "haproxy", "threads": 4}}), "proxies.p.threads:", "4"),
    ("axes.events", put("axes.events", ["boom"]), "axes.events:", "'boom'"),
    ("events", put("events", {"../x": [{"at": 1, "action": "kill"}]}), "events:", "'../x'"),
    ("events.*", put("events", {"e": []}), "events.e:", "[]"),
    ("events.*", put("events", {"e": [{"at": 1, "action": "explode"}]}), "events.e[0].action:", "'explode'"),
    ("events.*", put("events", {"e": [{"at": -1, "action": "kill"}]}), "events.e[0].at:", "-1"),
    ("events.*", put("events", {"e": [{"at": 1, "for": 2, "action": "kill"}]}), "events.e[0].for:", "2"),
    ("events.*", put("events", {"e": [{"at": 1, "action": "delay", "target": "link primary-replica1"}]}),
     "events.e[0].latency_ms:", "missing"),
    ("events.*", put("events", {"e": [{"at": 1, "action": "command", "argv": "rm -rf /"}]}), "events.e[0].argv:",
     "'rm -rf /'"),
    ("events.*", put("events", {"e": [{"at": 1, "action": "io_throttle"}]}), "events.e[0]:",
     "io_throttle needs one of read_bps"),
    ("events.*", put("events", {"e": [{"at": 1, "action": "io_throttle", "read_bps": "fast"}]}),
     "events.e[0].read_bps:", "'fast'"),
    ("events.*", put("events", {"e": [{"at": 1, "action": "io_throttle", "write_iops": 0}]}),
     "events.e[0].write_iops:", "0"),
    ("events.*", put("events", {"e": [{"at": 1, "action": "kill", "statement": "x"}]}), "events.e[0].statement:",
     "'x'"),
    ("events.*", both(put("axes.events", ["late"]), put("events", {"late": [{"at": 5, "for": 60, "action": "pause"}]})),
     "events.late[0]:", "after the"),
    ("events.*", both(put("axes.events", ["far"]), put("events", {"far": [{"at": 1, "action": "kill",
                                                                              "target": "replica7"}]})),
     "events.far[0].target:", "'replica7'"),
    ("study", put("study", "../../tmp/x"), "study:", "'../../tmp/x'"),
    ("study", put("study", 5), "study:", "5"),
    ("description", put("description", ["a"]), "description:", "['a']"),
    ("repetitions", put("repetitions", 0), "repetitions:", "0"),
    ("interleave", put("interleave", "yes"), "interleave:", "'yes'"),
    ("repeat_until", put("repeat_until", {"detectable_pct": 5, "max_repetitions": 4}), "repetitions:",
     "1; repeat_until needs 2 or more"),
    ("repeat_until", both(put("repetitions", 2), put("repeat_until", {"detectable_pct": 5, "max_repetitions": 4}),
                          put("noise_control.canary", {"every": 4})), "noise_control.canary.every:",
     "4; with repeat_until it must divide the study's 14 cells"),
    ("repeat_until", both(put("repetitions", 2), put("repeat_until", {"detectable_pct": 5, "max_repetitions": 4}),
                          put("noise_control.canary", {"every": 7}), put("interleave", False)), "interleave:",
     "false; repeat_until with noise_control.canary needs the rounds interleaved"),
    ("repeat_until.detectable_pct", both(put("repetitions", 2),
                                         put("repeat_until", {"detectable_pct": 0, "max_repetitions": 4})),
     "repeat_until.detectable_pct:", "0 is less than or equal to the minimum"),
    ("repeat_until.max_repetitions", both(put("repetitions", 3),
                                          put("repeat_until", {"detectable_pct": 5, "max_repetitions": 2})),
     "repeat_until.max_repetitions:", "2 is fewer than repetitions (3)"),
    ("repeat_until.max_repetitions", both(put("repetitions", 2), put("repeat_until", {"detectable_pct": 5})),
     "repeat_until.max_repetitions:", "missing"),
    ("repeat_until.max_repetitions", both(put("repetitions", 2), put("axes.tag", list(range(8))),
                                          put("repeat_until", {"detectable_pct": 5, "max_repetitions": 1000})),
     "repeat_until.max_repetitions:", "1000 x 112 cells is 112,000 runs"),
    ("allow_oversize_memory", put("allow_oversize_memory", "yes"), "allow_oversize_memory:", "'yes'"),
    ("axes", put("axes", ["workload"]), "axes:", "['workload']"),
    ("axes.host", put("axes.host", ["-x"]), "axes.host[0]:", "'-x'"),
    ("axes.filesystem", put("axes.filesystem", ["zfs"]), "axes.filesystem:", "'zfs'"),
    ("axes.engine", put("axes.engine", ["mysql"]), "axes.engine[0]:", "'mysql'"),
    ("axes.version", put("axes.version", ["9.9"]), "axes.version:", "'9.9'"),
    ("axes.version", put("axes.version", [{"name": "../x", "basedir": "/tmp"}]), "axes.version[0].name:", "'../x'"),
    ("axes.memory", put("axes.memory", ["lots"]), "axes.memory:", "'lots'"),
    ("axes.memory", put("axes.memory", ["100T"]), "axes.memory:", "'100T'"),
    ("axes.threads", put("axes.threads", [0]), "axes.threads[0]:", "0"),
    ("axes.threads", put("axes.threads", [100000]), "axes.threads[0]:", "100000"),
    ("axes.workload", put("axes.workload", ["nope"]), "axes.workload:", "'nope'"),
    ("axes.*", put("axes.bs", [[4, 8]]), "axes.bs[0]:", "[4, 8]"),
    ("axes.*", lambda c: c["axes"].update({"../../tmp/x": [1]}), "axes:", "'../../tmp/x'"),
    ("exclude", put("exclude", [{"filesytem": "xfs"}]), "exclude[0].filesytem:", "unknown axis"),
    ("include", put("include", [{"threads": 100000}]), "include[0].threads:", "100000"),
    ("baseline", put("baseline", {"engine": "mysql"}), "baseline.engine:", "'mysql'"),
    ("analysis", put("analysis", {"trim": 3}), "analysis.trim:", "unknown key"),
    ("analysis.trim_s", put("analysis.trim_s", -1), "analysis.trim_s:", "-1"),
    ("analysis.steady_state", put("analysis.steady_state", "yes"), "analysis.steady_state:", "'yes'"),
    ("analysis.stall_share", put("analysis.stall_share", 1.5), "analysis.stall_share:", "1.5"),
    ("analysis.plots", put("analysis.plots", ["pie"]), "analysis.plots[0]:", "'pie'"),
    ("analysis.headline", put("analysis.headline", ["pie"]), "analysis.headline[0]:", "'pie'"),
    ("analysis.statistics", put("analysis.statistics", ["mode"]), "analysis.statistics[0]:", "'mode'"),
    ("analysis.include_deviated", put("analysis.include_deviated", "no"), "analysis.include_deviated:", "'no'"),
    ("analysis.scripts", put("analysis.scripts", ["nosuch/mine.R"]), "analysis.scripts[0]:", "'nosuch/mine.R'"),
    ("filesystems", lambda c: c["filesystems"].update({"../x": {"type": "ext4"}}), "filesystems:", "'../x'"),
    ("filesystems.*", put("filesystems.ext4", "big"), "filesystems.ext4:", "'big'"),
    ("filesystems.*.type", put("filesystems.ext4.type", "zfs"), "filesystems.ext4.type:", "'zfs'"),
    ("filesystems.*.size", put("filesystems.ext4.size", "5GG"), "filesystems.ext4.size:", "'5GG'"),
    ("filesystems.*.size", put("filesystems.ext4.size", "16M"), "workloads.fio-randread:", "size 16M"),
    ("filesystems.*.size", both(put("filesystems.tmpfs", {"type": "tmpfs", "size": "8M"}),
                                put("axes.filesystem", ["tmpfs"])), "workloads.fio-randread:", "size 8M"),
    ("filesystems.*.mkfs_options", put("filesystems.ext4.mkfs_options", ["-E", "bogus"]),
     "filesystems.ext4.mkfs_options:", "['-E', 'bogus']"),
    ("filesystems.*.mount_options", put("filesystems.xfs.mount_options", ["bogusopt"]),
     "filesystems.xfs.mount_options:", "['bogusopt']"),
    ("filesystems.*.device", both(put("filesystems.ext4.device", "/etc/hostname"),
                                  put("filesystems.ext4.allow_format", True)), "filesystems.ext4.device:",
     "'/etc/hostname'"),
    ("filesystems.*.allow_format", put("filesystems.ext4.allow_format", "yes"), "filesystems.ext4.allow_format:",
     "'yes'"),
    ("device_classes", put("device_classes", {"../x": {"read_iops": 1}}), "device_classes:", "'../x'"),
    ("device_classes.*", put("device_classes", {"c": "fast"}), "device_classes.c:", "'fast'"),
    ("device_classes.*", put("device_classes", {"c": {}}), "device_classes.c:", "{} caps nothing"),
    ("device_classes.*.read_iops", put("device_classes", {"c": {"read_iops": -5}}), "device_classes.c.read_iops:",
     "-5"),
    ("device_classes.*.write_iops", put("device_classes", {"c": {"write_iops": 2**32}}),
     "device_classes.c.write_iops:", "4294967296"),
    ("device_classes.*.read_bps", put("device_classes", {"c": {"read_bps": "fast"}}), "device_classes.c.read_bps:",
     "'fast'"),
    ("device_classes.*.write_bps", put("device_classes", {"c": {"write_bps": "-1M"}}), "device_classes.c.write_bps:",
     "'-1M'"),
    ("device_classes.*.burst", put("device_classes", {"c": {"read_iops": 3000, "burst": 16000}}),
     "device_classes.c.burst: 16000", "no credit bucket"),
    ("device_classes.*.latency", put("device_classes", {"c": {"read_iops": 150, "latency": "8ms"}}),
     "device_classes.c.latency:", "'8ms'"),
    ("device_classes.*.read_latency_ms", put("device_classes", {"c": {"read_latency_ms": 0}}),
     "device_classes.c.read_latency_ms:", "0 is not a whole number of milliseconds"),
    ("device_classes.*.write_latency_ms", put("device_classes", {"c": {"write_latency_ms": 1.5}}),
     "device_classes.c.write_latency_ms:", "1.5"),
    ("filesystems.*.device_class", both(put("device_classes", {"c": {"read_iops": 150}}),
                                        put("filesystems.ext4.device_class", "gp9")),
     "filesystems.ext4.device_class:", "'gp9'"),
    ("filesystems.*.device_class", both(put("device_classes", {"c": {"read_iops": 150}}),
                                        put("filesystems.tmpfs", {"type": "tmpfs", "device_class": "c"})),
     "filesystems.tmpfs.device_class: 'c'", "tmpfs is memory"),
    ("filesystems.*.device_class", both(put("device_classes", {"c": {"read_iops": 150}}),
                                        put("filesystems.ext4.device_class", "c"), put("axes.device_class", ["c"])),
     "filesystems.ext4.device_class:", "axes.device_class picks a class too"),
    ("axes.device_class", both(put("device_classes", {"c": {"read_iops": 150}}), put("axes.device_class", ["gp9"])),
     "axes.device_class:", "'gp9'"),
    ("axes.device_class", both(put("device_classes", {"c": {"read_iops": 150}}), put("axes.device_class", ["c"]),
                               put("axes.filesystem", ["ext4", "tmpfs"])),
     "axes.device_class: 'c' on filesystem 'tmpfs'", "no block device"),
    ("filesystems.*.path", both(dir_fs, put("filesystems.scratch.path", "relative/dir")), "filesystems.scratch:",
     "'relative/dir'"),
    ("workloads", put("workloads", {}), "workloads:", "{}"),
    ("workloads.*", put("workloads.oltp-rw", {"options": {}}), "workloads.oltp-rw.tool:", "missing"),
    ("workloads.*.tool", put("workloads.oltp-rw.tool", "iozone"), "workloads.oltp-rw.tool:", "'iozone'"),
    ("workloads.*.warmup", put("workloads.oltp-rw.warmup", -1), "workloads.oltp-rw.warmup:", "-1"),
    ("workloads.*.dataset_options", put("workloads.oltp-rw.dataset_options", ["tables"]),
     "workloads.oltp-rw.dataset_options:", "['tables']"),
    ("workloads.*.prepare_threads", put("workloads.oltp-rw.prepare_threads", 0), "workloads.oltp-rw.prepare_threads:",
     "0"),
    ("workloads.*.options", put("workloads.fio-randread.options.numjobs", 4),
     "workloads.fio-randread.options.numjobs:", "4"),
    ("workloads.*.options", put("workloads.fio-randread.options.rw", "bogus"),
     "workloads.fio-randread.options.rw:", "'bogus'"),
    ("workloads.*.options", put("workloads.fio-randread.options.iodepht", 4),
     "workloads.fio-randread.options.iodepht:", "4"),
    # the hostile-input audit's cases (/work/hostile/cases/NNN*.yaml): a name that is more than a name, an option
    # that runs a command or names a path of its own, a prefix fio takes for a whole name, an axis choosing one
    ("workloads.*.options", put("workloads.fio-randread.options", {"size": "64M", "filename=/dev/vda:": ""}),
     "workloads.fio-randread.options:", "'filename=/dev/vda:'"),
    ("workloads.*.options", put("workloads.fio-randread.options", {"size": "64M", "directory=/work/hostile/x": "x"}),
     "workloads.fio-randread.options:", "'directory=/work/hostile/x'"),
    ("workloads.*.options", put("workloads.fio-randread.options.runtime=5 --filename", "/tmp/x"),
     "workloads.fio-randread.options:", "'runtime=5 --filename'"),
    ("workloads.*.options", put("workloads.fio-randread.options.exec_prerun", "touch /work/hostile/PWNED"),
     "workloads.fio-randread.options.exec_prerun:", "'touch /work/hostile/PWNED' runs a command"),
    ("workloads.*.options", put("workloads.fio-randread.options.exec_pre", "touch /work/hostile/PWNED"),
     "workloads.fio-randread.options.exec_pre:", "'touch /work/hostile/PWNED' is not the whole name"),
    ("workloads.*.options", put("workloads.fio-randread.options.write_iolog", "/work/hostile/outside.iolog"),
     "workloads.fio-randread.options.write_iolog:", "'/work/hostile/outside.iolog' names a path outside"),
    ("workloads.*.options", both(put("workloads.fio-randread.options.ioengine", "exec"),
                                 put("workloads.fio-randread.options.program", "/bin/sh")),
     "workloads.fio-randread.options.ioengine:", "'exec' runs a program"),
    ("workloads.*.options", both(put("axes.engine_io", ["psync", "exec"]),
                                 put("workloads.fio-randread.options.ioengine", "{engine_io}")),
     "workloads.fio-randread.options.ioengine:", "'exec' runs a program"),
    ("workloads.*.options", put("workloads.oltp-rw.options.threads=64 ", "1"), "workloads.oltp-rw.options:",
     "'threads=64 '"),
    # an open-loop rate as a share of the host's calibrated throughput: a percentage in (0, 1000]
    ("workloads.*.options", put("workloads.oltp-rw.options.rate", "0%"), "workloads.oltp-rw.options.rate:", "'0%'"),
    ("workloads.*.options", put("workloads.oltp-rw.options.rate", "1001%"),
     "workloads.oltp-rw.options.rate:", "'1001%'"),
    ("workloads.*.options", put("workloads.oltp-rw.options.rate", "-5%"), "workloads.oltp-rw.options.rate:", "'-5%'"),
    ("workloads.*.options", put("workloads.oltp-rw.options.rate", "eighty%"),
     "workloads.oltp-rw.options.rate:", "'eighty%'"),
    ("workloads.*.options", put("workloads.oltp-rw.options.rate", "80%%"), "workloads.oltp-rw.options.rate:", "'80%%'"),
    ("workloads.*.options", both(put("axes.load", ["80%", "2000%"]), put("workloads.oltp-rw.options.rate", "{load}")),
     "workloads.oltp-rw.options.rate:", "'2000%'"),
    ("cluster", put("cluster", {"nodes": ["n1"]}), "cluster.nodes:", "unknown key"),
    ("cluster.partition", put("cluster.partition", "a b"), "cluster.partition:", "'a b'"),
    ("server", put("server", {"memory": "1G"}), "server.memory:", "unknown key"),
    ("server.options", put("server.options", {"mysql": {}}), "server.options.mysql:", "unknown key"),
    ("server.options.mariadb", put("server.options", {"mariadb": {"port": 3307}}), "server.options.mariadb.port:",
     "3307"),
    ("server.options.mariadb", put("server.options", {"mariadb": {"bind-address": "0.0.0.0"}}),
     "server.options.mariadb.bind-address:", "'0.0.0.0'"),
    ("server.options.mariadb", put("server.options", {"mariadb": {"plugin_dir": "/tmp"}}),
     "server.options.mariadb.plugin_dir:", "'/tmp'"),
    ("server.options.postgresql", put("server.options", {"postgresql": {"listen_addresses": "*"}}),
     "server.options.postgresql.listen_addresses:", "'*'"),
    ("server.options.postgresql", put("server.options", {"postgresql": {"unix_socket_directories": "/tmp"}}),
     "server.options.postgresql.unix_socket_directories:", "'/tmp'"),
    ("server.options.mariadb", put("server.options", {"mariadb": {"innodb_bufer_pool_size": "64M"}}),
     "server.options.mariadb.innodb_bufer_pool_size:", "'innodb_bufer_pool_size'"),
    ("server.options.postgresql", put("server.options", {"postgresql": {"shared_bufers": "64MB"}}),
     "server.options.postgresql.shared_bufers:", "'shared_bufers'"),
    ("server.options.postgresql", put("server.options", {"postgresql": {"archive_mode": "on",
                                                                        "archive_command": "touch /x"}}),
     "server.options.postgresql.archive_command:", "'touch /x' runs a command"),
    ("server.options.mariadb", put("server.options", {"mariadb": {"general_log_file": "/work/hostile/outside.log"}}),
     "server.options.mariadb.general_log_file:", "'/work/hostile/outside.log' names a path outside"),
    ("server.options.mariadb", put("server.options", {"mariadb": {"init_file": "/work/hostile/files/evil.sql"}}),
     "server.options.mariadb.init_file:", "'/work/hostile/files/evil.sql' runs its SQL"),
    ("server.options.mariadb", put("server.options", {"mariadb": {"innodb_io_capacity\ninit_file": 100}}),
     "server.options.mariadb.'innodb_io_capacity\\ninit_file':", "holds a line break"),
    ("server.cgroup_overhead", put("server.cgroup_overhead", "lots"), "server.cgroup_overhead:", "'lots'"),
    ("server.cold_start", put("server.cold_start", "yes"), "server.cold_start:", "'yes'"),
    ("noise_control", put("noise_control", {"isolcpus": True}), "noise_control.isolcpus:", "unknown key"),
    ("noise_control.drop_caches", put("noise_control.drop_caches", "yes"), "noise_control.drop_caches:", "'yes'"),
    ("noise_control.cpu_pinning", put("noise_control.cpu_pinning", 2), "noise_control.cpu_pinning:", "2"),
    ("noise_control.thp", put("noise_control.thp", "sometimes"), "noise_control.thp:", "'sometimes'"),
    ("noise_control.halt_poll_ns", put("noise_control.halt_poll_ns", -1), "noise_control.halt_poll_ns:", "-1"),
    ("noise_control.halt_poll_ns", put("noise_control.halt_poll_ns", "fast"), "noise_control.halt_poll_ns:",
     "'fast'"),
    ("noise_control.governor", put("noise_control.governor", "../performance"), "noise_control.governor:",
     "'../performance'"),
    ("noise_control.canary", put("noise_control.canary", {}), "noise_control.canary.every:", "missing"),
    ("noise_control.canary.every", put("noise_control.canary", {"every": 0}), "noise_control.canary.every:", "0"),
    ("server_options", put("server_options", {"../x": {"a": {"mariadb": {}}}}), "server_options:", "'../x'"),
    ("server_options.*", put("server_options", {"log": ["a"]}), "server_options.log:", "['a']"),
    ("server_options.*.*", put("server_options", {"log": {"../x": {}}}), "server_options.log:", "'../x'"),
    ("server_options.*.*.mariadb", option_set("mariadb", {"datadir": "/tmp"}), "server_options.log.a.mariadb.datadir:",
     "'/tmp'"),
    ("server_options.*.*.mariadb", option_set("mariadb", {"socket": "/tmp/s"}), "server_options.log.a.mariadb.socket:",
     "'/tmp/s'"),
    ("server_options.*.*.mariadb", option_set("mariadb", {"user": "root"}), "server_options.log.a.mariadb.user:",
     "'root'"),
    ("server_options.*.*.postgresql", option_set("postgresql", {"data_directory": "/tmp"}),
     "server_options.log.a.postgresql.data_directory:", "'/tmp'"),
    ("server_options.*.*.postgresql", option_set("postgresql", {"include_dir": "/etc"}),
     "server_options.log.a.postgresql.include_dir:", "'/etc' reads settings from another file"),
    ("server_options.*.*.mariadb", option_set("mariadb", {"log_bin": "/var/tmp/bin"}),
     "server_options.log.a.mariadb.log_bin:", "'/var/tmp/bin' names a path outside"),
    ("server_options.*.*.postgresql", option_set("postgresql", {"port": 1}),
     "server_options.log.a.postgresql.port:", "1"),
    # issue 32: values of dataset-shaping settings the bootstrap or initdb would refuse only in prepare
    ("server_options.*.*.mariadb", option_set("mariadb", {"innodb_page_size": "12k"}),
     "server_options.log.a.mariadb.innodb_page_size:", "'12k' is not an InnoDB page size"),
    ("server_options.*.*.postgresql", option_set("postgresql", {"wal_segment_size": "48MB"}),
     "server_options.log.a.postgresql.wal_segment_size:", "'48MB' is not a power of two"),
    # hostile-input audit (the case numbers are its files'): each was a traceback, a MemoryError, or accepted
    # 37, 115: a bare 1: is YAML's integer, not a name (and integer and string keys do not sort together)
    ("(top level)", lambda c: c.update({1: "x", "foo": "y"}), "1:", "the key 1 is a number"),
    ("workloads", lambda c: c["workloads"].update({1: c["workloads"]["fio-randread"]}), "workloads.1:",
     "the key 1 is a number"),
    # 111: option sets are chosen by an axis of the study's own
    ("server_options.*", put("server_options", {"threads": {1: {"mariadb": {}}}}), "server_options.threads:",
     "threads is a built-in axis"),
    # 53, 54, 55, 134: only {axis}, replaced by the value as written; str.format never sees the text
    ("workloads.*.options", put("workloads.fio-randread.options.bs", "{threads}{}"),
     "workloads.fio-randread.options.bs:", "'{threads}{}': {} names no axis"),
    ("workloads.*.options", put("workloads.fio-randread.options.bs", "4k{"), "workloads.fio-randread.options.bs:",
     "'4k{' has a brace outside a placeholder"),
    ("workloads.*.options", put("workloads.fio-randread.options.bs", "{threads:>99999999999}"),
     "workloads.fio-randread.options.bs:", "{threads:>99999999999} is not a placeholder; write {threads}"),
    ("workloads.*.options", put("workloads.fio-randread.options.bs", "{threads:s}k"),
     "workloads.fio-randread.options.bs:", "{threads:s} is not a placeholder; write {threads}"),
    ("workloads.*.options", put("workloads.fio-randread.options.bs", "{threads!r}"),
     "workloads.fio-randread.options.bs:", "{threads!r} is not a placeholder"),
    # 63, 64, 139, 141: the measured window is a whole number of seconds of at least 1 (fio may leave it out)
    ("workloads.*.options", put("workloads.oltp-rw.options.time", "abc"), "workloads.oltp-rw.options.time:",
     "'abc' is not a whole number of seconds"),
    ("workloads.*.options", put("workloads.oltp-rw.options.time", -5), "workloads.oltp-rw.options.time:", "-5 is"),
    ("workloads.*.options", put("workloads.oltp-rw.options.time", 0), "workloads.oltp-rw.options.time:", "0 is"),
    ("workloads.*.options", put("workloads.fio-randread.options.runtime", -1),
     "workloads.fio-randread.options.runtime:", "-1 is not a whole number of seconds"),
    ("workloads.*.options", both(put("axes.window", [5, "soon"]), put("workloads.oltp-rw.options.time", "{window}")),
     "workloads.oltp-rw.options.time:", "'soon' is not a whole number of seconds"),
    # 60, 133: no argv or path carries a NUL; a line break would be a second line of a server's option file
    ("workloads.*.options", put("workloads.fio-randread.options.bs", "4k\0"), "workloads.fio-randread.options.bs:",
     "'4k\\x00' holds a NUL character"),
    ("axes.*", put("axes.bs", ["4k\0"]), "axes.bs[0]:", "'4k\\x00' holds a NUL character"),
    ("server.options.mariadb", put("server.options", {"mariadb": {"innodb_io_capacity": "100\nskip-grant-tables"}}),
     "server.options.mariadb.innodb_io_capacity:", "'100\\nskip-grant-tables' holds a line break"),
    # 81, 82, 83, 86, 87, 137: an include rule's values are checked as the axes' are
    ("include", both(put("axes.host", ["a"]), put("include", [{"host": "../../../../tmp/escaped"}])),
     "include[0].host:",
     "'../../../../tmp/escaped'"),
    ("include", put("include", [{"engine": "mysql"}]), "include[0].engine:", "'mysql' is not one of"),
    ("include", put("include", [{"threads": 0}]), "include[0].threads:", "0 is below the minimum of 1"),
    ("include", put("include", [{"memory": "1.5G"}]), "include[0].memory:", "'1.5G' is not a size"),
    ("include", put("include", [{"filesystem": "zfs"}]), "include[0].filesystem:", "'zfs' is not defined"),
    ("include", put("include", [{"workload": "nope"}]), "include[0].workload:", "'nope' is not defined"),
    ("include", both(put("axes.version", ["debian"]), put("include", [{"version": "9.9"}])), "include[0].version:",
     "'9.9' is not a version"),
    ("include", both(put("axes.topology", ["single"]), put("include", [{"topology": "nosuch"}])),
     "include[0].topology:", "'nosuch' is not defined"),
    ("include", both(put("axes.events", ["none"]), put("include", [{"events": "nosuch"}])), "include[0].events:",
     "'nosuch' is not defined"),
    ("include", both(put("axes.binlog", ["off"]), put("include", [{"binlog": "sync7"}])), "include[0].binlog:",
     "'sync7' is not an option set"),
    # 31, 71, 146: sizes are whole numbers, as units.parse_size, truncate and tmpfs read them; 72: at most 1024T
    ("server.cgroup_overhead", put("server.cgroup_overhead", "1.5G"), "server.cgroup_overhead:",
     "'1.5G' is not a size like 512M or 4G (a whole number"),
    ("filesystems.*.size", put("filesystems.ext4.size", "1.5G"), "filesystems.ext4.size:", "'1.5G' is not a size"),
    ("filesystems.*.size", put("filesystems.ext4.size", "999999T"), "filesystems.ext4.size:", "'999999T' is above"),
    # 24: the memory's key is named; 138: below a size the servers run as asked
    ("axes.memory", put("axes.memory", ["1.5G"]), "axes.memory:", "'1.5G' is not a size"),
    ("axes.memory", put("axes.memory", ["1K"]), "axes.memory:", "'1K' is below the minimum of 8M"),
    # 40, 131: a folder name has at most 255 bytes; 49: Snakemake's PeriodicWildcardError; 132: a cell path
    ("axes.*", put("axes.tag", ["x" * 300]), "axes.tag:", "folder name of 304 bytes"),
    ("axes.*", put("axes.tag", ["é" * 50]), "axes.tag:", "folder name of 304 bytes"),
    ("axes.*", put("axes.tag", ["a" + "yz" * 20]), "axes.tag:", "ends in 'yz' repeated 20 times"),
    ("axes.*", lambda c: c["axes"].update({f"a{i:02d}{LONG}": [LONG] for i in range(12)}), "axes:",
     "bytes long; at most 1024"),
    # 48, 52: the matrix's size is known from the axes' before anything expands
    ("axes.*", lambda c: c["axes"].update({f"u{i}": list(range(10)) for i in range(8)}), "axes:",
     "7,200,000,000 combinations of axis values"),
    ("repetitions", put("repetitions", 100000000), "repetitions:", "100000000 is above the maximum of 1000"),
    ("repetitions", both(put("repetitions", 1000), put("axes.tag", list(range(8)))), "repetitions:",
     "1000 x 112 cells is 112,000 runs"),
    # 130: an alias bomb is refused while it is counted, not expanded or printed
    ("events.*",
     lambda c: c.update({"events": {"ev": [{"at": 1, "action": "command", "argv": ["/bin/true", bomb()]}]}}),
     "events.ev[0].argv[1]", "more than 100,000 values"),
    # 93, 94, 96, 105, 147, 148, 149: .nan and .inf pass every minimum and maximum of the schema
    ("analysis.trim_s", put("analysis.trim_s", float("inf")), "analysis.trim_s:", "inf is not a finite number"),
    ("analysis.trim_s", put("analysis.trim_s", float("nan")), "analysis.trim_s:", "nan is not a finite number"),
    ("analysis.stall_share", put("analysis.stall_share", float("nan")), "analysis.stall_share:", "nan is not"),
    ("events.*", put("events", {"e": [{"at": float("nan"), "action": "kill"}]}), "events.e[0].at:", "nan is not"),
    ("events.*", put("events", {"e": [{"at": 1, "for": float("nan"), "action": "pause"}]}), "events.e[0].for:",
     "nan is not"),
    ("network.client_latency_ms", put("network", {"client_latency_ms": float("nan")}), "network.client_latency_ms:",
     "nan is not a finite number"),
    ("axes.*", put("axes.tag", [float("inf")]), "axes.tag[0]:", "inf is not a finite number"),
    # 43, 44: a column of every result table, or a part of a run's identity, is no axis name
    ("axes.*", put("axes.rep", [1, 2]), "axes.rep:", "rep is a name dbsweep uses itself"),
    ("axes.*", put("axes.storage", ["a"]), "axes.storage:", "storage is a name dbsweep uses itself"),
    ("axes.*", put("axes.second", ["a"]), "axes.second:", "second is a name dbsweep uses itself"),
    # 20, 21: an empty axis is named; 124: every cell not applicable says one cell's reason; 84: exclude
    ("axes.threads", put("axes.threads", []), "axes.threads:", "[] has no values"),
    ("axes.workload", put("axes.workload", []), "axes.workload:", "[] has no values"),
    ("axes.workload", both(put("axes.workload", ["pg"]), put("axes.engine", ["innodb"]),
                           put("workloads.pg", {"tool": "pgbench", "options": {"scale": 1, "time": 5}})),
     "axes: no cell of the matrix can run", "pgbench runs on postgresql, not mariadb (innodb)"),
    ("exclude", put("exclude", [{"threads": [1, 4]}]), "exclude:", "excludes every cell of the matrix"),
    # 46: YAML 1.1 reads a bare on / off as a boolean
    ("baseline", both(put("axes.flag", [True, False]), put("baseline", {"flag": "on"})), "baseline.flag:",
     "quote the axis's values"),
]


LONG = "".join(chr(97 + 7 * i % 26) for i in range(90))  # 90 letters, no sequence repeated at its end


def bomb():
    """A YAML alias bomb as yaml.safe_load gives it: ten lists of ten references to one list, five deep."""
    level = ["x"] * 10
    for _ in range(5):
        level = [level] * 10
    return level


def schema_keys(node: dict, prefix: str = "") -> set[str]:
    """Every key path of the schema, `*` standing for a name the user chooses."""
    keys = set()
    for name, sub in node.get("properties", {}).items():
        path = f"{prefix}{name}"
        keys |= {path} | schema_keys(sub, path + ".")
    extra = node.get("additionalProperties")
    if isinstance(extra, dict) and (extra.get("type") == "object" or "properties" in extra
                                    or extra.get("type") == "array"):
        keys |= {f"{prefix}*"} | schema_keys(extra, f"{prefix}*.")
    return keys


def test_every_schema_key_has_a_bad_value_in_the_table():
    schema = yaml.safe_load(SCHEMA.read_text())
    missing = schema_keys(schema) - {row[0] for row in ROWS}
    assert not missing, f"schema keys without a bad-config row: {sorted(missing)}"


@pytest.mark.parametrize("key, change, where, value", ROWS, ids=[f"{r[0]}={r[3]}" for r in ROWS])
def test_bad_value_is_refused_at_load_naming_key_and_value(key, change, where, value):
    config = copy.deepcopy(DEMO)
    change(config)
    with pytest.raises(ConfigError) as error:
        load(config)
    message = str(error.value)
    assert "\n" not in message
    assert message.startswith(where), message
    assert value in message, message


# Files dbsweep reads before Snakemake does (dbsweep.configfile, the first step of `./dbsweep run`): each is
# refused with one line naming the file, no traceback (audit cases 38, 114, 151, 152). No Snakemake runs here.
FILES = [
    ("duplicate key", "study: a\naxes: {workload: [w]}\nstudy: b\n",
     "study.yaml:3:1: duplicate key 'study' (first at line 1); YAML would keep only the last"),
    ("deep nesting", "study: a\ndeep: " + "[" * 20000 + "\n", "study.yaml: nested too deeply for the YAML parser"),
    ("over 1 MB", "study: a\n#" + "x" * 2**20 + "\n", "study.yaml: 1048587 bytes, over the 1048576 bytes"),
    ("a device", "/dev/zero", "/dev/zero: not a regular file (a device)"),
    ("a directory", "", "study.yaml: not a regular file (a directory)"),
]


@pytest.mark.parametrize("name, content, line", FILES, ids=[f[0] for f in FILES])
def test_a_file_that_cannot_be_a_study_is_refused_in_one_line(tmp_path, name, content, line):
    path = tmp_path / "study.yaml"
    if name == "a device":
        path = Path(content)
    elif name == "a directory":
        path.mkdir()
    else:
        path.write_text(content)
    done = subprocess.run([sys.executable, "-m", "dbsweep.configfile", "--configfile", str(path)], capture_output=True,
                          text=True, env=os.environ | {"PYTHONPATH": str(ROOT / "workflow")}, timeout=60)
    assert done.returncode == 1 and done.stdout == "", done.stderr[-2000:]
    assert done.stderr.count("\n") == 1 and line in done.stderr, done.stderr[-2000:]
    assert done.stderr.startswith("dbsweep: config error: ")


# Through the real command: each exits non-zero before any job, one line, no traceback.
RUNS = [
    ("yaml syntax", "study: x\naxes: {workload: [a]\nfoo: [\n", "bad.yaml:3:1: YAML syntax error"),
    ("empty file", "", "empty.yaml: empty file"),
    ("reserved option", {"server": {"options": {"mariadb": {"bind-address": "0.0.0.0"}}}},
     "server.options.mariadb.bind-address: '0.0.0.0' is set by dbsweep"),
    ("memory above RAM", {"axes": DEMO["axes"] | {"memory": ["100T"]}}, "axes.memory: '100T' is above this host's RAM"),
    ("threads", {"axes": DEMO["axes"] | {"threads": [100000]}}, "axes.threads[0]: 100000 is above the maximum"),
    ("mount options", {"filesystems": DEMO["filesystems"] | {"xfs": {"type": "xfs", "mount_options": ["bogusopt"]}}},
     "filesystems.xfs.mount_options: ['bogusopt'] refused"),
    ("dataset too big", {"filesystems": DEMO["filesystems"] | {"ext4": {"type": "ext4", "size": "64M"}}},
     "does not fit filesystem ext4 (ext4, size 64M"),
    ("include engine", {"include": [{"engine": "mysql"}]}, "include[0].engine: 'mysql' is not one of"),
    ("placeholder", {"workloads": DEMO["workloads"] | {"fio-randread": {"tool": "fio", "options": {
        "rw": "randread", "bs": "{threads:>99999999999}", "size": "64M"}}}},
     "workloads.fio-randread.options.bs: '{threads:>99999999999}': {threads:>99999999999} is not a placeholder"),
    ("sysbench time", {"workloads": DEMO["workloads"] | {"oltp-rw": {"tool": "sysbench", "options": {
        "script": "oltp_read_write", "time": "abc"}}}}, "workloads.oltp-rw.options.time: 'abc' is not a whole"),
]


@pytest.mark.workflow
@pytest.mark.parametrize("name, content, line", RUNS, ids=[r[0] for r in RUNS])
def test_dbsweep_run_refuses_before_any_job(tmp_path, name, content, line):
    path = tmp_path / ("bad.yaml" if name == "yaml syntax" else "empty.yaml" if name == "empty file" else "study.yaml")
    path.write_text(content if isinstance(content, str) else yaml.safe_dump(DEMO | content))
    done = subprocess.run([str(ROOT / "dbsweep"), "run", "-n", "--configfile", str(path), "-d", str(tmp_path / "w")],
                          capture_output=True, text=True, env=os.environ | {"LC_ALL": "C.UTF-8"})
    out = done.stdout + done.stderr
    assert done.returncode != 0, out[-2000:]
    errors = [text for text in out.splitlines() if "config error" in text]
    assert len(errors) == 1 and line in errors[0], out[-2000:]
    assert "Traceback" not in out and "Job stats" not in out, out[-2000:]
