"""Local: eddy's engine in this process, with no broker. Expected verdicts come from replaying the
same events (eddy_agent.replay, the `eddy replay` of the wheel), never from numbers read off the
guard itself; tests/inproc.rs holds both to the eddy binary byte for byte."""
import itertools
import json
import subprocess
import sys

import pytest

from conftest import RecordingProducer, events
from eddy_agent import Emitter, Local, LoopDetected, replay

SEARCH = {"tool_name": "web_search", "tool_input": {"query": "eddy release date"},
          "tool_output": {"results": []}}


def teed(**kw):
    """A Local whose events are also recorded, as the fleet would receive them."""
    tee = Emitter("127.0.0.1:1", project_id="acme", agent_name="bot")
    tee._producer = RecordingProducer()
    return Local(project_id="acme", agent_name="bot", tee=tee, **kw), tee


def write_events(tmp_path, evs, name="events.jsonl"):
    """The events as the Emitter puts them on the topic: compact JSON (keelwave's fingerprint
    hashes `tool_input`'s own bytes)."""
    path = tmp_path / name
    path.write_text("".join(json.dumps(e, separators=(",", ":"), ensure_ascii=False) + "\n"
                            for e in evs))
    return path


def loop_until_stopped(eddy, run, step=SEARCH, limit=100):
    """The agent's loop: check, then call the tool; returns how many calls ran."""
    for calls in itertools.count():
        if calls == limit:
            return calls
        try:
            eddy.check(run)
        except LoopDetected:
            return calls
        eddy.step(run, **step)


def test_a_repeated_call_is_stopped_before_the_next_call_with_replays_signal(tmp_path):
    eddy, tee = teed()
    run = eddy.run_started("r-1")
    calls = loop_until_stopped(eddy, run)
    assert calls < 100, "the loop was never stopped"
    stop = eddy.stopped(run)
    assert stop is not None and stop.severity == "stop"
    # The stop came from the last call made: none ran after the verdict.
    assert stop.step_index == calls
    # Exactly what eddy replay says of the same events, signal for signal.
    want = [o for o in replay(write_events(tmp_path, events(tee)))
            if o["kind"] != "run_terminated"]
    assert eddy.signals(run) == want
    assert want[-1] == stop.signal


def test_observe_returns_the_runs_signals_at_once(tmp_path):
    eddy = Local()
    seen, got = [], []
    for i in range(1, 30):
        event = dict(SEARCH, step_index=i)
        seen.append({"v": 1, "kind": "step", "project_id": "default", "run_id": "r", "ts": 1000 + i,
                     "step_type": "tool_call", **event})
        got.extend(eddy.observe("r", event, ts=1000 + i))
    want = replay(write_events(tmp_path, seen))
    assert got and got == want
    assert {s["kind"] for s in got} <= {"loop_warning", "loop_detected"}


def test_a_config_file_sets_the_thresholds_as_for_eddy_run(tmp_path):
    cfg = tmp_path / "eddy.toml"
    cfg.write_text('kafka_brokers = "unused:9092"\n'
                   "[engine.detectors.repeat]\n"
                   "normal = { warn = 0, alert = 0, stop = 4 }\n"
                   "consecutive = { warn = 0, alert = 0, stop = 0 }\n")
    default, strict = Local(), Local(cfg)
    d = loop_until_stopped(default, "r")
    s = loop_until_stopped(strict, "r")
    # Stopped at the 4th identical call, as configured: later than by default.
    assert s == 4 and d < s
    evs = [{"v": 1, "kind": "step", "project_id": "default", "run_id": "r", "ts": 1000 + i,
            "step_index": i, "step_type": "tool_call", **SEARCH} for i in range(1, s + 1)]
    stops = [o for o in replay(write_events(tmp_path, evs), config=cfg)
             if o.get("severity") == "stop"]
    assert stops and stops[0]["step_index"] == strict.stopped("r").step_index == s
    # The same TOML as text.
    assert loop_until_stopped(Local(toml=cfg.read_text()), "r") == s


@pytest.mark.parametrize("toml", ["[engine]\nno_such_key = 1\n",
                                  "[engine.detectors.repeat]\nwindow = \"many\"\n"])
def test_a_bad_config_is_refused(toml):
    with pytest.raises(ValueError):
        Local(toml=toml)


def test_a_missing_config_file_is_refused(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        Local(tmp_path / "nope.toml")


def test_an_ended_run_is_dropped():
    eddy = Local()
    run = eddy.run_started("r")
    loop_until_stopped(eddy, run)
    assert eddy.open_runs == 1 and eddy.signals(run)
    eddy.run_finished(run)
    assert eddy.open_runs == 0
    assert eddy.signals(run) == [] and eddy.stopped(run) is None
    ended = eddy.terminated(run)
    assert (ended["status"], ended["termination_reason"]) == ("failed", "loop_detected")
    assert eddy.ended_runs == 1


def test_an_idle_run_ends_by_event_time():
    eddy = Local(toml="[engine]\nidle_timeout_ms = 60000\n")
    eddy.observe("quiet", SEARCH, ts=1_000)
    assert eddy.open_runs == 1
    assert eddy.observe_event({"v": 1, "kind": "step", "project_id": "default", "run_id": "busy",
                               "ts": 30_000, "step_index": 1, "step_type": "think",
                               "content": "still working"}) == []
    outs = eddy.observe_event({"v": 1, "kind": "step", "project_id": "default", "run_id": "busy",
                               "ts": 62_000, "step_index": 2, "step_type": "think",
                               "content": "a new idea"})
    assert [(o["kind"], o["run_id"], o["termination_reason"]) for o in outs] == [
        ("run_terminated", "quiet", "timeout")]
    assert eddy.open_runs == 1


def test_an_event_eddy_rejects():
    eddy = Local()
    with pytest.raises(ValueError, match="step_index"):
        eddy.observe("r", SEARCH, step_index=-1)
    with pytest.raises(ValueError):
        eddy.observe_event('{"v": 1}')
    # The emitter's methods keep the agent going, as a delivery error would.
    eddy.step("r", step_index=-2, **SEARCH)
    assert len(eddy.errors) == 1 and "step_index" in eddy.errors[0]


def test_tee_sends_the_same_events_to_kafka():
    eddy, tee = teed()
    run = eddy.run_started("r", input="find it")
    eddy.step(run, **SEARCH)
    eddy.observe(run, {"step_type": "think", "content": "hmm"})
    eddy.run_finished(run)
    sent = events(tee)
    assert [(e["kind"], e.get("step_index")) for e in sent] == [
        ("run_started", None), ("step", 1), ("step", 2), ("run_finished", None)]
    assert all(e["project_id"] == "acme" and e["run_id"] == "r" for e in sent)
    assert sent[1]["tool_input"] == SEARCH["tool_input"]


def test_the_replay_command_prints_what_replay_returns(tmp_path):
    evs = [{"v": 1, "kind": "step", "project_id": "p", "run_id": "r", "ts": 1000 + i,
            "step_index": i, "step_type": "tool_call", **SEARCH} for i in range(12)]
    path = tmp_path / "trace.jsonl"
    lines = [json.dumps(e) for e in evs]
    lines.insert(3, "not json")
    path.write_text("\n".join(lines) + "\n")
    done = subprocess.run([sys.executable, "-m", "eddy_agent", "replay", str(path)],
                          capture_output=True, text=True, check=True)
    printed = [json.loads(line) for line in done.stdout.splitlines()]
    assert printed and printed == replay(path)
    assert "line 4: skipped: " in done.stderr
    assert done.stderr.rstrip().endswith(
        f"replayed 12 events (1 malformed lines skipped), {len(printed)} output events")
