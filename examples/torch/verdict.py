"""The one verdict rule docs/results-torch.md applies to every claim (results_tables.py uses it).

Two rows are compared seed by seed: run s of each row shares its initialisation and data order, so
the per-seed differences d_s = metric(row, s) - metric(reference, s) carry the comparison. With n
paired seeds, mean d and standard deviation s_d, the 95 % interval is d ± t(0.975, n-1) s_d / √n.
The row *keeps accuracy* when the interval's lower bound is above -KEEP_MARGIN points, *loses*
when its upper bound is below 0 (both can hold: a real loss smaller than the margin), and is
*inconclusive* otherwise. The minimum detectable effect is the true difference that the interval
excludes 0 for with probability POWER: (t(0.975, n-1) + t(POWER, n-1)) s_d / √n (the usual
central-t approximation of the paired t test's power).

Student's t quantiles come from mpmath (a torch dependency) by inverting the regularized
incomplete beta function; SciPy is not in the environment.
"""

from __future__ import annotations

import functools
import math
import statistics
from dataclasses import dataclass

CONFIDENCE = 0.95    # two-sided interval
POWER = 0.80         # for the minimum detectable effect
KEEP_MARGIN = 1.0    # points of accuracy


@functools.lru_cache(maxsize=None)
def t_quantile(p: float, df: int) -> float:
    """Student's t quantile: the t with P(T <= t) = p for T ~ t(df)."""
    if not 0 < p < 1 or df < 1:
        raise ValueError(f"t_quantile: need 0 < p < 1 and df >= 1, got p={p}, df={df}")
    import mpmath
    if p < 0.5:
        return -t_quantile(1 - p, df)
    if p == 0.5:
        return 0.0
    with mpmath.workdps(30):
        # P(|T| > t) = I_x(df/2, 1/2) with x = df / (df + t^2), increasing in x: bisect for x, then t.
        tail = 2 * (1 - mpmath.mpf(p))
        lo, hi = mpmath.mpf(0), mpmath.mpf(1)
        for _ in range(100):
            x = (lo + hi) / 2
            if mpmath.betainc(mpmath.mpf(df) / 2, mpmath.mpf(1) / 2, 0, x, regularized=True) < tail:
                lo = x
            else:
                hi = x
        x = (lo + hi) / 2
        return float(mpmath.sqrt(df * (1 - x) / x))


@dataclass(frozen=True)
class Paired:
    """The rule applied to one comparison (differences in points)."""
    n: int
    mean: float
    sd: float
    lo: float
    hi: float
    mde: float

    @property
    def keeps(self):
        return self.n >= 2 and self.lo > -KEEP_MARGIN

    @property
    def loses(self):
        return self.n >= 2 and self.hi < 0

    @property
    def verdict(self):
        if self.n < 2:
            return "inconclusive (fewer than 2 paired seeds)"
        if self.keeps and self.loses:
            return "keeps accuracy (a loss under the margin)"
        return "keeps accuracy" if self.keeps else "loses" if self.loses else "inconclusive"

    def text(self):
        if self.n < 2:
            return f"Δ {self.mean:+.2f} points (n = {self.n}): **{self.verdict}**"
        return (f"Δ {self.mean:+.2f} points, 95 % CI [{self.lo:+.2f}, {self.hi:+.2f}], n = {self.n}, "
                f"MDE {self.mde:.2f}: **{self.verdict}**")


def paired(differences) -> Paired:
    """The rule on per-seed differences (already in points)."""
    d = list(differences)
    n = len(d)
    if n == 0:
        return Paired(0, math.nan, math.nan, math.nan, math.nan, math.nan)
    mean = statistics.fmean(d)
    if n < 2:
        return Paired(n, mean, math.nan, math.nan, math.nan, math.nan)
    sd = statistics.stdev(d)
    se = sd / math.sqrt(n)
    t = t_quantile(0.5 + CONFIDENCE / 2, n - 1)
    return Paired(n, mean, sd, mean - t * se, mean + t * se, (t + t_quantile(POWER, n - 1)) * se)


def mde_for(sd: float, n: int) -> float:
    """The minimum detectable effect of n paired seeds whose differences spread by sd."""
    return (t_quantile(0.5 + CONFIDENCE / 2, n - 1) + t_quantile(POWER, n - 1)) * sd / math.sqrt(n)
