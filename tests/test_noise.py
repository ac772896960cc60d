"""Noise control (dbsweep/noise.py): the CPU split, the recipe's part, THP, the governor and halt polling set and
restored."""
import copy
import csv
import html
import io
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from dbsweep import canary, disturbances, noise, summary
from dbsweep.config import load, read
from dbsweep.recipe import Recipe
import contextlib

ROOT = Path(__file__).resolve().parents[1]
DEMO = read(ROOT / "config" / "config.yaml")


@pytest.mark.parametrize("count", [1, 2, 3, 4, 5, 8, 64])
@pytest.mark.parametrize("server", [True, False])
def test_split_gives_disjoint_sets_covering_the_cpus_or_none_when_too_few(count, server):
    cpus = list(range(10, 10 + count))  # not from 0: the split takes the CPUs it is given
    sets = noise.split(cpus, server)
    if count < (3 if server else 2):
        assert sets is None
        return
    parts = ["monitors", "client"] + (["server"] if server else [])
    assert sorted(sets) == sorted(parts)
    assert all(sets[p] for p in parts)
    together = [c for p in parts for c in sets[p]]
    assert sorted(together) == cpus and len(set(together)) == len(together)
    assert sets["monitors"] == [10]
    if server:
        assert len(sets["server"]) >= len(sets["client"]) and min(sets["server"]) > max(sets["client"])


def test_recipe_carries_noise_control_only_when_set():
    study = load(copy.deepcopy(DEMO))
    plain = study.recipe(study.cells[0])
    assert "noise_control" not in plain.as_dict()  # recipes recorded before stay equal
    config = copy.deepcopy(DEMO) | {"noise_control": {"drop_caches": True, "thp": "never", "canary": {"every": 4}}}
    study = load(config)
    assert study.canary_every == 4
    recipe = study.recipe(study.cells[0])
    assert recipe.as_dict()["noise_control"] == {"drop_caches": True, "cpu_pinning": False, "thp": "never",
                                                 "governor": None}
    assert Recipe.from_dict(recipe.as_dict()) == recipe
    # a canary alone shapes no cell
    study = load(copy.deepcopy(DEMO) | {"noise_control": {"canary": {"every": 4}}})
    assert study.recipe(study.cells[0]) == plain


def test_cpu_pinning_on_too_few_cpus_warns_once_for_the_study(monkeypatch):
    monkeypatch.setattr(noise, "available_cpus", lambda: [0, 1])
    study = load(copy.deepcopy(DEMO) | {"noise_control": {"cpu_pinning": True}})
    warnings = [w for w in study.warnings if "cpu_pinning" in w]
    assert warnings == ["noise_control.cpu_pinning: not applied where a cell needs 3 CPUs: this host has 2"]
    monkeypatch.setattr(noise, "available_cpus", lambda: [0, 1, 2, 3])
    study = load(copy.deepcopy(DEMO) | {"noise_control": {"cpu_pinning": True}})
    assert not [w for w in study.warnings if "cpu_pinning" in w]


def test_pinning_records_not_applied_with_too_few_cpus(monkeypatch):
    monkeypatch.setattr(noise, "available_cpus", lambda: [0, 1])
    record, log = {}, io.StringIO()
    pinning = noise.Pinning(noise.NoiseControl(cpu_pinning=True), True, record, log)
    assert pinning.sets is None and pinning.client() is None
    assert record["noise_control"]["cpu_pinning"] == "not applied: 2 CPUs, 3 needed"
    assert "warning: noise_control.cpu_pinning: not applied: 2 CPUs, 3 needed" in log.getvalue()


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 CPUs")
def test_pinning_moves_real_processes_and_restores_this_one():
    own = os.sched_getaffinity(0)
    record = {}
    pinning = noise.Pinning(noise.NoiseControl(cpu_pinning=True), False, record, io.StringIO())
    sets = record["noise_control"]["cpu_pinning"]["cpus"]
    monitor = subprocess.Popen(["sleep", "30"])
    client = subprocess.Popen([sys.executable, "-c", "import os, time; os.fork(); time.sleep(30)"],
                              preexec_fn=pinning.client())
    try:
        pinning.monitors([monitor.pid])
        assert noise.allowed(monitor.pid) == str(sets["monitors"][0])
        assert noise.allowed(os.getpid()) == str(sets["monitors"][0])
        assert os.sched_getaffinity(client.pid) == set(sets["client"])
    finally:
        pinning.restore()
        monitor.kill()
        client.kill()
        monitor.wait()
        client.wait()
    assert os.sched_getaffinity(0) == own


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 CPUs")
def test_pin_tree_moves_every_thread_of_a_server_like_tree_and_what_it_starts_later():
    cpu = max(os.sched_getaffinity(0))
    script = ("import os, sys, threading, time\n"
              "threading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n"
              "if os.fork() == 0:\n    time.sleep(30)\n    sys.exit()\n"
              "print('ready', flush=True)\n"
              "sys.stdin.readline()\n"
              "threading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n"  # started after pinning
              "print(len(os.listdir('/proc/self/task')), flush=True)\n"
              "time.sleep(30)\n")
    server = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    try:
        assert server.stdout.readline() == "ready\n"
        pinned = noise.pin(server.pid, [cpu], tree=True)
        assert len(pinned) == 2  # the server and its child
        server.stdin.write("go\n")
        server.stdin.flush()
        server.stdout.readline()
        for pid in pinned:
            for tid in os.listdir(f"/proc/{pid}/task"):
                assert os.sched_getaffinity(int(tid)) == {cpu}, (pid, tid)
    finally:
        for p in psutil.Process(server.pid).children(recursive=True):
            p.kill()
        server.kill()
        server.wait()


def test_host_settings_set_thp_restore_it_and_record_before_set_after(monkeypatch, tmp_path):
    # a stand-in sysfs file: the real one is the host's, shared with whatever else runs on it
    thp = tmp_path / "enabled"
    thp.write_text("always [madvise] never\n")
    monkeypatch.setattr(noise, "THP", thp)
    monkeypatch.setattr(noise, "CPUFREQ", tmp_path / "cpu")  # no cpufreq
    record, log = {}, io.StringIO()
    with noise.host_settings(noise.NoiseControl(thp="never", governor="performance"), record, log):
        assert noise.selected(thp) == "never"
    assert noise.selected(thp) == "madvise"
    facts = record["noise_control"]
    assert facts["thp"] == {"before": "madvise", "set": "never", "after": "madvise"}
    assert facts["governor"] == "not available: no cpufreq scaling_governor"
    assert "warning: noise_control.governor: not available" in log.getvalue()


def test_host_settings_set_halt_polling_restore_it_and_say_not_available_without_it(monkeypatch, tmp_path):
    poll = tmp_path / "guest_halt_poll_ns"  # a stand-in for the haltpoll driver's parameter
    poll.write_text("0\n")
    monkeypatch.setattr(noise, "HALT_POLL", poll)
    record, log = {}, io.StringIO()
    with pytest.raises(RuntimeError), noise.host_settings(noise.NoiseControl(halt_poll_ns=200000), record, log):
        assert poll.read_text() == "200000\n"
        raise RuntimeError("the body failed")
    assert poll.read_text() == "0\n"
    assert record["noise_control"]["halt_poll_ns"] == {"before": 0, "set": 200000, "after": 0}
    monkeypatch.setattr(noise, "HALT_POLL", tmp_path / "none")  # bare metal, or another cpuidle driver
    record = {}
    with noise.host_settings(noise.NoiseControl(halt_poll_ns=200000), record, log):
        pass
    assert record["noise_control"]["halt_poll_ns"].startswith("not available: no ")
    assert "warning: noise_control.halt_poll_ns: not available" in log.getvalue()
    # a recipe without it is what it was before it existed; with it, it says so
    assert "halt_poll_ns" not in noise.NoiseControl(thp="never").as_dict()
    assert noise.NoiseControl(halt_poll_ns=0).as_dict()["halt_poll_ns"] == 0


def test_host_settings_restore_thp_when_the_body_fails_and_say_not_available_without_it(monkeypatch, tmp_path):
    monkeypatch.setattr(noise, "THP", tmp_path / "missing" / "enabled")
    record = {}
    with pytest.raises(RuntimeError), noise.host_settings(noise.NoiseControl(thp="always"), record, io.StringIO()):
        raise RuntimeError("the body failed")
    assert record["noise_control"]["thp"].startswith("not available: no ")
    thp = tmp_path / "enabled"
    thp.write_text("madvise\n")
    monkeypatch.setattr(noise, "THP", thp)
    record = {}
    with pytest.raises(RuntimeError), noise.host_settings(noise.NoiseControl(thp="always"), record, io.StringIO()):
        assert thp.read_text() == "always\n"
        raise RuntimeError("the body failed")
    assert thp.read_text() == "madvise\n"
    assert record["noise_control"]["thp"] == {"before": "madvise", "set": "always", "after": "madvise"}


KILLED_IN_BODY = """
import sys, time
from pathlib import Path
from dbsweep import noise
noise.THP = Path(sys.argv[1])
with noise.host_settings(noise.NoiseControl(thp="never"), {}, sys.stderr, Path(sys.argv[2])):
    print("set", flush=True)
    time.sleep(60)
"""


def test_host_settings_of_a_job_killed_outright_are_restored_by_the_next_sweep(tmp_path):
    """SIGKILL runs no finally: the value changed is recorded in the repetition's active folder first,
    and what releases a dead job's leftovers (its guardian, or the next repetition's sweep) writes it back."""
    from dbsweep import storage
    thp, active = tmp_path / "enabled", tmp_path / "active"
    thp.write_text("always [madvise] never\n")
    job = subprocess.Popen([sys.executable, "-c", KILLED_IN_BODY, str(thp), str(active)], stdout=subprocess.PIPE,
                           text=True, env=os.environ | {"PYTHONPATH": str(ROOT / "workflow")})
    assert job.stdout.readline() == "set\n"
    assert thp.read_text() == "never\n"
    assert storage.sweep_stale(active) == [], "the job is alive: its settings are its own"
    job.kill()
    job.wait()
    assert thp.read_text() == "never\n", "SIGKILL restored nothing"
    assert storage.sweep_stale(active) == [f"{thp} = madvise"]
    assert noise.selected(thp) == "madvise" and not list(active.glob("*.json"))


def test_host_settings_leave_no_record_after_a_clean_exit(monkeypatch, tmp_path):
    thp, active = tmp_path / "enabled", tmp_path / "active"
    thp.write_text("[always] madvise never\n")
    monkeypatch.setattr(noise, "THP", thp)
    with noise.host_settings(noise.NoiseControl(thp="never"), {}, io.StringIO(), active):
        assert len(list(active.glob("*.json"))) == 1
    assert noise.selected(thp) == "always" and not list(active.glob("*.json"))


def _watch(folder: Path, seen: dict, stop: threading.Event) -> None:
    """Poll the processes of a run in folder (fio, vmstat by their cwd) for their Cpus_allowed_list, and
    the host's THP, while the run runs; only the measured fio (--name=dbsweep), not those that check the
    options or write the data file before the window, and vmstat once that fio runs (it is pinned a moment
    after it starts, before the tool)."""
    while not stop.is_set():
        for proc in psutil.process_iter(["name", "cwd", "cmdline"]):
            if proc.info["name"] in ("fio", "vmstat") and str(folder) in (proc.info["cwd"] or "") \
                    and (proc.info["name"] != "fio" or "--name=dbsweep" in (proc.info["cmdline"] or [])) \
                    and (proc.info["name"] != "vmstat" or "fio" in seen):
                with contextlib.suppress(OSError):
                    seen.setdefault(proc.info["name"], set()).add(noise.allowed(proc.pid))
        seen.setdefault("thp", set()).add(noise.selected(noise.THP))
        seen.setdefault("halt_poll_ns", set()).add(noise.selected(noise.HALT_POLL))
        time.sleep(0.2)


@pytest.mark.workflow
def test_a_real_cell_with_noise_control_records_what_it_applied_and_restores_thp(study_factory, workdir):
    before = noise.selected(noise.THP)
    other = "never" if before != "never" else "madvise"
    polling = disturbances.halt_poll_ns()  # None: not a VM with the haltpoll cpuidle driver
    config = {
        "study": "noise", "axes": {"filesystem": ["tmpfs"], "threads": [1], "workload": ["fio-rr"]},
        "workloads": {"fio-rr": {"tool": "fio", "options": {"rw": "randread", "bs": "4k", "size": "16M",
                                                             "runtime": 2}}},
        "noise_control": {"drop_caches": True, "cpu_pinning": True, "thp": other, "governor": "performance",
                          "halt_poll_ns": 123456 if polling != 123456 else 654321},
    }
    study = study_factory(config)
    seen, stop = {}, threading.Event()
    watcher = threading.Thread(target=_watch, args=(workdir.resolve(), seen, stop))
    watcher.start()
    try:
        study.run("results/runs/filesystem~tmpfs/threads~1/workload~fio-rr/rep~1/run.json")
    finally:
        stop.set()
        watcher.join()
    record = json.loads(study.path("results/runs/filesystem~tmpfs/threads~1/workload~fio-rr/rep~1/run.json")
                        .read_text())
    facts = record["noise_control"]
    assert record["recipe"]["noise_control"] == config["noise_control"]
    assert facts["thp"] == {"before": before, "set": other, "after": before}
    assert other in seen["thp"]  # set while the cell ran
    assert noise.selected(noise.THP) == before  # and restored after
    if noise.governors():
        assert facts["governor"]["after"] == facts["governor"]["before"]
    else:
        assert facts["governor"] == "not available: no cpufreq scaling_governor"
    assert facts["drop_caches"]["at"] <= record["measure_start"]
    wanted = config["noise_control"]["halt_poll_ns"]
    if polling is None:
        assert facts["halt_poll_ns"].startswith("not available: no "), facts
    else:
        assert facts["halt_poll_ns"] == {"before": polling, "set": wanted, "after": polling}
        assert str(wanted) in seen["halt_poll_ns"] and disturbances.halt_poll_ns() == polling
        assert record["disturbances"]["settings"]["halt_poll_ns"] == wanted  # looked at inside the repetition
    host = record["disturbances"]  # looked at before the window, its steal read at both edges
    assert host["settings"]["steal_pct"] >= 0 and isinstance(host["warnings"], dict)
    assert host["settings"]["virtual_machine"] == disturbances.virtual_machine()
    cpus = noise.available_cpus()
    sets = noise.split(cpus, server=False)
    if sets is None:
        assert facts["cpu_pinning"] == f"not applied: {len(cpus)} CPUs, 2 needed"
        return
    assert facts["cpu_pinning"]["cpus"] == sets
    assert facts["cpu_pinning"]["pinned"]["client"] is True
    as_list = {name: ",".join(map(str, cpus)) if len(cpus) == 1 or cpus[-1] - cpus[0] != len(cpus) - 1
               else f"{cpus[0]}-{cpus[-1]}" for name, cpus in sets.items()}
    assert seen.get("fio") == {as_list["client"]}, seen
    assert seen.get("vmstat") == {as_list["monitors"]}, seen


def test_canary_drift_and_its_summary_line(tmp_path):
    assert canary.count(28, 3) == 11 and canary.after(11, 3, 28) == 28 and canary.after(2, 3, 28) == 3
    assert canary.drift([100, 110, 105]) == pytest.approx(0.10)
    assert canary.drift([100]) is None
    table = tmp_path / "canary.csv"
    assert canary.line(table) == ""
    table.write_text("canary,after,time,metric,throughput\n1,0,1.0,iops,1000\n2,3,2.0,iops,1200\n")
    assert canary.line(table) == ("Canary drift: 20.0 % (iops max / min - 1 over 2 runs of the study's first cell, "
                                  "1,000 to 1,200; results/tables/canary.csv).")


def test_the_summary_page_states_the_canary_drift(tmp_path):
    results = tmp_path / "results"
    (results / "tables").mkdir(parents=True)
    table = results / "tables" / "canary.csv"
    table.write_text("canary,after,time,metric,throughput\n1,0,1.0,tps,50\n2,3,2.0,tps,40\n3,6,3.0,tps,45\n")
    study = summary.Study("s", "", {"threads": ["1"]}, 1, 1, [])
    written = summary.write(study, results, [table], complete=True)
    line = "Canary drift: 25.0 % (tps max / min - 1 over 3 runs of the study's first cell, 40 to 50"
    assert html.escape(line) in written["html"].read_text()
    assert summary.md_escape(line) in written["md"].read_text()
    written = summary.write(study, results, [], complete=True)  # a canary.csv the study did not ask for
    assert "Canary" not in written["md"].read_text()


def test_canary_runs_between_the_repetitions_in_priority_order():
    config = copy.deepcopy(DEMO) | {"repetitions": 2, "noise_control": {"canary": {"every": 3}}}
    study = load(config)
    total = len(study.cells) * study.repetitions
    jobs = [(study.priority(rep, cell), "run") for cell in study.cells for rep in (1, 2)]
    jobs += [(study.canary_priority(j), f"canary {j}") for j in range(1, canary.count(total, 3) + 1)]
    order = [name for _, name in sorted(jobs, reverse=True)]
    assert len({p for p, _ in jobs}) == len(jobs)  # one place each
    assert order[0] == "canary 1" and order[-1] == f"canary {canary.count(total, 3)}"
    runs_before = [order[:i].count("run") for i, name in enumerate(order) if name != "run"]
    assert runs_before == [canary.after(j, 3, total) for j in range(1, canary.count(total, 3) + 1)]
    assert study.priority(0) > max(p for p, _ in jobs)  # preparing first


def test_with_repeat_until_a_canary_ends_every_round_it_may_add():
    config = copy.deepcopy(DEMO) | {"repetitions": 2, "repeat_until": {"detectable_pct": 5, "max_repetitions": 4},
                                    "noise_control": {"canary": {"every": 7}}}
    study = load(config)
    cells = len(study.cells)
    assert cells == 14
    jobs = [(study.priority(rep, cell), f"run {rep}") for cell in study.cells for rep in range(1, 5)]
    jobs += [(study.canary_priority(j), f"canary {j}") for j in range(1, canary.count(cells * 4, 7) + 1)]
    order = [name for _, name in sorted(jobs, reverse=True)]
    assert len({p for p, _ in jobs}) == len(jobs)  # one place each
    # each round's 14 runs, a canary halfway and one at its end: places that stay when a round is added
    assert order == ["canary 1"] + [name for k in range(1, 5) for name in
                                    [f"run {k}"] * 7 + [f"canary {2 * k}"] + [f"run {k}"] * 7 + [f"canary {2 * k + 1}"]]


@pytest.mark.workflow
def test_canary_runs_the_first_cell_between_the_repetitions_and_its_table(study_factory):
    config = {
        "study": "canary", "repetitions": 2,
        "axes": {"filesystem": ["tmpfs"], "threads": [1, 2], "workload": ["fio-rr"]},
        "workloads": {"fio-rr": {"tool": "fio", "options": {"rw": "randread", "bs": "4k", "size": "16M",
                                                             "runtime": 2}}},
        "noise_control": {"canary": {"every": 2}},
    }
    study = study_factory(config)
    study.run("results/tables/canary.csv",
              *[f"results/runs/filesystem~tmpfs/threads~{t}/workload~fio-rr/rep~{r}/run.json"
                for t in (1, 2) for r in (1, 2)])
    started = []
    for path in study.path("results").glob("*/*/*/*/rep~*/run.json"):
        record = json.loads(path.read_text())
        kind = "canary" if "/canary/" in str(path) else "run"
        started.append((record["started"], kind, record["cell"]["threads"], record["rep"]))
    order = [(kind, rep) for _, kind, _, rep in sorted(started)]
    assert order == [("canary", 1), ("run", 1), ("run", 1), ("canary", 2), ("run", 2), ("run", 2), ("canary", 3)]
    assert all(threads == 1 for _, kind, threads, _ in started if kind == "canary")  # the first cell
    rows = list(csv.DictReader(study.path("results/tables/canary.csv").read_text().splitlines()))
    assert [(r["canary"], r["after"], r["metric"]) for r in rows] == [("1", "0", "iops"), ("2", "2", "iops"),
                                                                     ("3", "4", "iops")]
    assert all(float(r["throughput"]) > 100 for r in rows)
