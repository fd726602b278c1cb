"""Severities and the exception a stop raises: what the verdict table and the steering both
speak, in a module of its own so that neither imports the other."""
from __future__ import annotations

from typing import Any, Dict, List, Optional

SEVERITIES = ("info", "warn", "alert", "stop")
RANK = {s: i for i, s in enumerate(SEVERITIES)}
SIGNAL_KINDS = ("loop_warning", "loop_detected")


def severity_rank(severity: str) -> int:
    """info < warn < alert < stop, as eddy orders them; unknown names are rejected."""
    try:
        return RANK[severity]
    except KeyError:
        raise ValueError(f"unknown severity {severity!r}: expected one of {', '.join(SEVERITIES)}") from None


class LoopDetected(Exception):
    """eddy's verdict on a watched run reached the guard's `min_severity`: stop the run."""

    def __init__(self, signal: Dict[str, Any]):
        self.signal = signal
        self.event_id: str = signal.get("event_id", "")
        self.project_id: str = signal.get("project_id", "")
        self.run_id: str = signal.get("run_id", "")
        self.detector: str = signal.get("detector", "")
        self.severity: str = signal.get("severity", "")
        self.pattern: str = signal.get("pattern", "")
        self.step_index: Optional[int] = signal.get("step_index")
        self.step_indices: List[int] = list(signal.get("step_indices") or [])
        self.first_step_index: Optional[int] = signal.get("first_step_index")
        self.evidence: Any = signal.get("evidence")
        super().__init__(
            f"eddy stopped run {self.run_id}: {self.detector} ({self.severity}) {self.pattern} "
            f"at steps {self.step_indices}"
        )

    def __reduce__(self):  # picklable across processes (multiprocessing RL workers)
        return (LoopDetected, (self.signal,))
