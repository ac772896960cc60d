"""results/explore.html: the per-second series of chosen cells, checked on a synthetic study
(bench/explore.py's) and drawn in headless Chromium."""
import json
import subprocess
import sys

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
