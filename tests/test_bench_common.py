"""bench/common.py's confidence interval of a median ratio (the distribution-free one, by order statistics)."""
import sys

from conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))
from common import median_ci  # noqa: E402


def test_median_ci_takes_the_order_statistics_of_the_binomial():
    # Tables of the sign test: n=10 -> 2nd and 9th (97.9%), n=40 -> 14th and 27th (96.2%).
    assert median_ci(list(range(1, 11))) == (2, 9)
    assert median_ci([float(x) for x in range(40, 0, -1)]) == (14.0, 27.0)
    assert median_ci([1.0, 2.0, 3.0]) == (1.0, 3.0)  # too few values for 95%: the whole range
