"""What trials prove: Clopper-Pearson intervals, the one-sided bound for zero failures, one-sided
Fisher tests against a baseline with Holm correction, trials needed, and an SPRT stop."""
from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum

ALPHA = 0.05


@dataclass(frozen=True, kw_only=True)
class CellStats:
    label: str
    trials: int
    failures: int
    rate: float
    lower: float
    upper: float
    one_sided: bool  # zero failures: [0, 1 - alpha^(1/n)] instead of the two-sided interval
    p_vs_baseline: float | None = None  # one-sided Fisher: variant rate < baseline rate
    p_holm: float | None = None

    def to_json(self) -> dict[str, object]:
        return dict(self.__dict__)


def clopper_pearson(k: int, n: int, alpha: float = ALPHA) -> tuple[float, float]:
    """Exact two-sided (1 - alpha) interval for k failures in n trials."""
    from scipy import stats  # here, not at the top: holm() serves `tracer diff`, which has no use for scipy.stats

    if n <= 0:
        raise ValueError("no trials")
    lo = 0.0 if k == 0 else float(stats.beta.ppf(alpha / 2, k, n - k + 1))
    hi = 1.0 if k == n else float(stats.beta.ppf(1 - alpha / 2, k + 1, n - k))
    return lo, hi


def zero_failure_upper(n: int, alpha: float = ALPHA) -> float:
    """One-sided (1 - alpha) upper bound after n trials without a failure: 1 - alpha^(1/n), about 3/n."""
    bound: float = 1.0 - alpha ** (1.0 / n)
    return bound


def trials_needed(p: float, alpha: float = ALPHA) -> int:
    """Failure-free trials needed to claim a rate below p at confidence 1 - alpha (299 for 1%)."""
    return math.ceil(math.log(alpha) / math.log(1.0 - p))


def cell_stats(label: str, failures: int, trials: int, alpha: float = ALPHA) -> CellStats:
    if failures == 0:
        return CellStats(label=label, trials=trials, failures=0, rate=0.0, lower=0.0, upper=zero_failure_upper(trials, alpha), one_sided=True)
    lo, hi = clopper_pearson(failures, trials, alpha)
    return CellStats(label=label, trials=trials, failures=failures, rate=failures / trials, lower=lo, upper=hi, one_sided=False)


def fisher_less(k_var: int, n_var: int, k_base: int, n_base: int) -> float:
    """One-sided Fisher exact p-value for 'the variant fails less often than the baseline'."""
    from scipy import stats

    table = [[k_var, n_var - k_var], [k_base, n_base - k_base]]
    return float(stats.fisher_exact(table, alternative="less").pvalue)


def holm(pvalues: list[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values, in the input order."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted


def check_baseline(baseline: str | None, labels: list[str]) -> None:
    """A baseline asked for by name must be one of the campaign's cells (None: the profile's)."""
    if baseline is not None and baseline not in labels:
        from tracer.errors import unknown

        raise unknown("baseline", baseline, labels)


def compare_to_baseline(cells: list[CellStats], baseline: str) -> list[CellStats]:
    base = next((c for c in cells if c.label == baseline), None)
    if base is None:
        from tracer.errors import unknown

        raise unknown("baseline", baseline, [c.label for c in cells])
    others = [c for c in cells if c.label != baseline]
    ps = [fisher_less(c.failures, c.trials, base.failures, base.trials) for c in others]
    adj = dict(zip((c.label for c in others), zip(ps, holm(ps))))
    return [CellStats(**{**c.__dict__, "p_vs_baseline": adj[c.label][0], "p_holm": adj[c.label][1]}) if c.label in adj else c
            for c in cells]


class Decision(str, Enum):
    CONTINUE = "continue"
    BELOW = "rate <= p0"  # accept H0
    ABOVE = "rate >= p1"  # accept H1


def sprt(failures: int, trials: int, p0: float, p1: float, alpha: float = ALPHA, beta: float = ALPHA) -> Decision:
    """Wald's sequential probability ratio test between failure rates p0 < p1."""
    if not 0 < p0 < p1 < 1:
        from tracer.errors import UsageError

        raise UsageError(f"SPRT needs 0 < p0 < p1 < 1, got p0={p0}, p1={p1}")
    llr = failures * math.log(p1 / p0) + (trials - failures) * math.log((1 - p1) / (1 - p0))
    if llr >= math.log((1 - beta) / alpha):
        return Decision.ABOVE
    if llr <= math.log(beta / (1 - alpha)):
        return Decision.BELOW
    return Decision.CONTINUE
