"""results/explore.html: the per-second series of chosen cells, checked on a synthetic study
(bench/explore.py's) and drawn in headless Chromium."""
import itertools
import json
import subprocess
import sys

from chromium import Chromium
from conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))
import explore as bench  # noqa: E402  bench/explore.py: the synthetic study
from dbsweep import explore  # noqa: E402


def test_data_per_repetition_with_its_window_and_the_counters_that_fit(tmp_path):
    bench.study(tmp_path, cells=24, seconds=40, counters=10)
    data = explore.build(tmp_path, bench.AXES, tmp_path / "steady_state.csv", counter_values=24 * 40 * 4)
    assert data["axes"] == ["engine", "memory", "threads"], "only the axes that vary name a cell"
    assert data["cells"][0] == ["innodb", "64M", "1", 1] and len(data["series"]) == 24
    s = data["series"][0]
    assert s["thr_name"] == "tps" and s["lat_name"] == "lat_pct_ms" and s["t0"] == 1 and len(s["thr"]) == 40
    assert s["st0"] == 0 and len(s["us"]) == 40 and s["win"] == [31, 40] and s["stall"] > 0
    assert len(data["counters"]) == 4 and set(data["top"]) <= set(data["counters"]), "the budget holds 4 names"
    assert sorted(s["ctr"]) == data["counters"] and len(s["ctr"][data["counters"][0]]) == 40
    assert all(isinstance(v, int) or len(repr(v)) <= 8 for v in s["thr"]), "4 significant digits"


def test_bench_smoke_draws_the_page_offline_in_chromium():
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "explore.py"), "--smoke"], capture_output=True,
                          text=True, timeout=300, check=True)
    result = json.loads(done.stdout.splitlines()[-1])
    # two repetitions picked at first: throughput, latency, stalls, 3 CPU and 2 device lines, 2 counters each
    assert result["traces"] == 2 * (3 + 3 + 2 + 2), result
    assert result["counters_in_page"] == 8 and 4 < result["size_mb"] < 20
    assert result["first_paint_s"] < result["plot_drawn_s"] < 60


def storage_study(dir) -> None:
    """A storage-only study on tmpfs as aggregate writes it: IOPS and fio's per-second latency, vmstat
    without a device (no iostat on tmpfs), no server counters."""
    import pandas as pd
    seconds = list(range(1, 11))
    cells = [("tmpfs", "1", "fio-rr"), ("tmpfs", "1", "fio-rw")]
    rows = [dict(zip(["filesystem", "threads", "workload"], c, strict=True), rep=1, second=s)
            for c in cells for s in seconds]
    pd.DataFrame(rows).assign(iops=[20000.0 + i for i in range(len(rows))], lat_ms=0.05).to_parquet(
        dir / "samples.parquet")
    pd.DataFrame(rows).assign(us=10, sy=5, wa=0, device=None, r_s=float("nan"), w_s=float("nan")).to_parquet(
        dir / "system.parquet")
    pd.DataFrame(columns=["filesystem", "threads", "workload", "rep", "second", "name", "value"]).astype(
        {"rep": int, "second": int, "value": float}).to_parquet(dir / "counters.parquet")


# The plot's panels as plotly laid them out: each y axis' title and domain, the x axis' anchor and its
# position, and whether the counters picker shows.
PANELS = """new Promise(ok => { const wait = () => window.exploreDrawn ? ok() : setTimeout(wait, 50); wait(); })
.then(() => { const l = document.getElementById('plot')._fullLayout;
  const ys = Object.keys(l).filter(k => /^yaxis\\d*$/.test(k)).sort();
  return {panels: ys.map(k => [l[k].title.text, l[k].domain]), anchor: l.xaxis.anchor,
          x_title: l.xaxis.title.text, x_y: l.xaxis._offset + l.xaxis._length,
          picker: document.getElementById('counters').offsetParent !== null,
          options: document.getElementById('counters').options.length}; })"""


def test_a_storage_only_study_draws_only_its_panels_with_the_x_axis_under_the_last(tmp_path):
    storage_study(tmp_path)
    data = explore.build(tmp_path, ["filesystem", "threads", "workload"])
    assert data["counters"] == [] and data["series"][0]["thr_name"] == "iops"
    page = tmp_path / "explore.html"
    explore.write(data, page, "storage")
    with Chromium() as browser:
        browser.open(page.as_uri(), 1366, 1000)
        shown = browser.evaluate(PANELS)
    titles = [title for title, _ in shown["panels"]]
    assert titles == ["iops", "latency, ms (lat_ms)", "CPU % (us, sy dashed, wa dotted)"], shown
    assert not shown["picker"] and shown["options"] == 0, "no counters picker with nothing in it"
    bottom = min(domain[0] for _, domain in shown["panels"])
    last = next(k for k, (_, domain) in enumerate(shown["panels"]) if domain[0] == bottom)
    assert shown["anchor"] == ("y" if last == 0 else f"y{last + 1}"), "the x axis sits under the last panel"
    assert all(d[1] <= 1 and d[0] >= 0 for _, d in shown["panels"])
    domains = sorted(d for _, d in shown["panels"])
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(domains)), "panels do not overlap"
