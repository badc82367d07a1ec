"""Audit gates: `metric OP value` expressions checked against each pipeline's summary (pure)."""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from auditor.errors import BadInput
from auditor.goodput import METRICS, REVIEWED

__all__ = ["Gate", "GateResult", "evaluate_gates", "parse_gate"]

_OPS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge,
    "<=": operator.le,
    ">": operator.gt,
    "<": operator.lt,
    "==": operator.eq,
}
_GATE = re.compile(
    r"^\s*([a-z0-9_]+)\s*(>=|<=|==|>|<)\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*$"
)


@dataclass(frozen=True)
class Gate:
    """One condition every audited pipeline must meet, e.g. `faithfulness>=0.95`."""

    metric: str
    op: str
    threshold: float

    def __str__(self) -> str:
        return f"{self.metric}{self.op}{self.threshold:g}"


@dataclass(frozen=True)
class GateResult:
    """A gate on one pipeline: its value there (None when not measured) and whether it held."""

    gate: Gate
    pipeline: str
    value: float | None
    passed: bool

    def describe(self) -> str:
        shown = "not measured" if self.value is None else f"{self.value:.4g}"
        return f"{'PASS' if self.passed else 'FAIL'} {self.gate} on {self.pipeline} (value {shown})"


def parse_gate(text: str) -> Gate:
    """`faithfulness>=0.95` -> Gate; a bad expression or unknown figure is a one-line BadInput."""
    match = _GATE.match(text)
    if not match:
        raise BadInput(
            f"--gate {text!r}: expected METRIC OP NUMBER, e.g. 'faithfulness>=0.95' or 'ttft_p95_ms<=1500'"
        )
    metric, op, number = match.groups()
    if metric not in METRICS:
        raise BadInput(f"--gate {text!r}: unknown figure {metric!r}; one of {', '.join(METRICS)}")
    return Gate(metric, op, float(number))


def evaluate_gates(gates: Sequence[Gate], summaries: dict[str, dict[str, Any]]) -> list[GateResult]:
    """Every gate on every pipeline; a figure that was not measured fails its gate (a reviewed
    figure with no label counting in it was not measured: not reviewed is not 0 %)."""
    results = []
    for gate in gates:
        for pipeline, summary in summaries.items():
            value = (summary.get("metrics", {}).get(gate.metric) or {}).get("value")
            if gate.metric in REVIEWED and not (summary.get("reviewed") or {}).get("labels"):
                value = None
            passed = value is not None and _OPS[gate.op](float(value), gate.threshold)
            results.append(GateResult(gate, pipeline, value, passed))
    return results
