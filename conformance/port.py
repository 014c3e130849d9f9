"""The reference implementation behind the port protocol: the first "port".

``python -m conq.conformance.port`` reads requests on stdin and answers on
stdout exactly as a port in any other language must (``spec/port-protocol.md``),
using the in-process driver of the requested model.  The conformance suite
runs the reference through this path too, so the protocol is exercised end to
end.  ``--driver FILE.py:Class`` serves another driver (tests use it).
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback
from typing import Any, TextIO

from conq.spec import version

from . import protocol, systems
from .adapters import ActionRejected, load_class
from .trace import hashable, jsonable


#: ``serve``'s answer for a driver without a snapshot
NO_SNAPSHOT = object()


def serve(stdin: TextIO, stdout: TextIO, driver_target: str | None = None) -> int:
    driver: Any = None
    model: str | None = None
    config: dict[str, Any] = {}
    cls = None

    def send(obj: dict[str, Any]) -> None:
        stdout.write(json.dumps(obj) + "\n")
        stdout.flush()

    def error(rid: Any, code: int, text: str) -> None:
        send({"type": "error", "id": rid if isinstance(rid, int) else 0, "code": code, "text": text,
              "definite": protocol.BY_CODE[code].definite})

    def snapshot_of(drv: Any) -> Any:
        """The driver's snapshot as JSON text, or NO_SNAPSHOT when it has none; ``observed()`` is
        the same value as ``hashable(snapshot())``, built faster (adapters.InProcess)."""
        fast = getattr(drv, "observed", None)
        if fast is not None:
            return json.dumps(jsonable(fast()))
        snap = getattr(drv, "snapshot", None)
        return NO_SNAPSHOT if snap is None else json.dumps(jsonable(hashable(snap())))

    def asked_snapshot(msg: dict[str, Any]) -> str:
        """What an action or a reset that asked for the snapshot after it (``"snapshot": true``,
        the feature snapshot-in-reply) adds to its reply: the ``state`` field and the closing brace;
        only the brace when it did not ask or the snapshot cannot be taken (the checker then asks
        with ``snapshot``, and the failure is that request's answer)."""
        if msg.get("snapshot") is True:
            try:
                state = snapshot_of(driver)
            except Exception:
                state = NO_SNAPSHOT
            if state is not NO_SNAPSHOT:
                return f', "state": {state}}}\n'
        return "}\n"

    def answer(rid: int, kind: str, msg: dict[str, Any]) -> None:
        """Answer a well-formed action or snapshot to an initialised port (the JSON text of each
        reply is ``json.dumps`` of its message, built without the dict)."""
        if kind == "action":
            try:
                obs = driver.do(hashable(msg["action"]))
            except ActionRejected as e:
                error(rid, 13, str(e) or "not enabled")
                return
            except (KeyError, ValueError, TypeError) as e:
                error(rid, 12, f"cannot perform {msg['action']!r}: {e}")
                return
            reply = f'{{"type": "action_ok", "id": {rid}, "observation": {json.dumps(jsonable(obs))}'
            reply += asked_snapshot(msg)
        else:
            state = snapshot_of(driver)
            if state is NO_SNAPSHOT:
                error(rid, 11, "this driver has no snapshot")
                return
            reply = f'{{"type": "snapshot_ok", "id": {rid}, "state": {state}}}\n'
        stdout.write(reply)
        stdout.flush()

    for line in stdin:
        if not line.strip():
            continue
        try:
            msg = json.loads(line)
        except json.JSONDecodeError as e:
            error(0, 10, f"invalid JSON: {e.msg}")
            continue
        # the hot path: a well-formed action or snapshot to an initialised port, answered as below
        # without the general checks (which would accept it), and with the same replies and errors
        if type(msg) is dict and driver is not None and type(rid := msg.get("id")) is int \
                and ((kind := msg.get("type")) == "snapshot" or (kind == "action" and type(msg.get("action")) is list)):
            try:
                answer(rid, kind, msg)
            except Exception as e:  # the system under test crashed: indefinite
                traceback.print_exc(file=sys.stderr)
                error(rid, 20, f"{type(e).__name__}: {e}")
            continue
        problem = protocol.validate(msg, "checker")
        rid = msg.get("id") if isinstance(msg, dict) else 0
        if problem:
            error(rid, 11 if problem.startswith("unknown message type") else 10, problem)
            continue
        kind = msg["type"]
        try:
            if kind == "init":
                model, config = msg["model"], msg["config"]
                system = systems.find(model)
                target = driver_target or (system.load("driver") if system is not None else None)
                if target is None:
                    error(rid, 14, f"no driver for model {model!r}")
                    continue
                cls = load_class(target) if isinstance(target, str) else target
                level = msg.get("level", "call")
                if level not in protocol.LEVELS:
                    error(rid, 10, f"init: field 'level' must be one of {', '.join(protocol.LEVELS)}, got {level!r}")
                    continue
                if level == "thread":
                    # the thread level: its own driver over the call-level driver class, dispatched apart (its
                    # ``step`` actions go through the same ``action`` path: the call level's hot path is unchanged)
                    thread_level = system.load("thread_level") if system is not None else None
                    if thread_level is None:
                        error(rid, 14, f"no thread level for model {model!r}")
                        continue
                    cls = thread_level.thread_driver(cls)
                if driver is not None and hasattr(driver, "close") and getattr(driver, "level", None) == "thread":
                    driver.close()
                try:
                    driver = cls(config, msg["seed"])
                except ValueError as e:  # the driver refuses the configuration (or the level for it): unsupported
                    driver = None
                    error(rid, 14, f"{model}, level {level}: {e}")
                    continue
                # thread-steps confirms the level asked for (a call-level init_ok stays as it was)
                features = [protocol.SNAPSHOT_IN_REPLY] + ([protocol.THREAD_STEPS] if level == "thread" else [])
                send({"type": "init_ok", "id": rid, "implementation": f"conq-reference {version()} ({cls.__name__})",
                      "features": features})
            elif driver is None:
                error(rid, 10, f"{kind} before init")
            elif kind == "reset":
                if getattr(driver, "level", None) == "thread":
                    driver.close()  # its scheduler's threads end with it
                driver = cls(config, msg["seed"])
                stdout.write(f'{{"type": "reset_ok", "id": {rid}' + asked_snapshot(msg))
                stdout.flush()
            elif kind in ("action", "snapshot"):
                answer(rid, kind, msg)
            elif kind == "shutdown":
                send({"type": "shutdown_ok", "id": rid})
                return 0
        except Exception as e:  # the system under test crashed: indefinite
            traceback.print_exc(file=sys.stderr)
            error(rid, 20, f"{type(e).__name__}: {e}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m conq.conformance.port", description=__doc__.splitlines()[0])
    ap.add_argument("--driver", help="serve this driver (module:Class or FILE.py:Class) instead of the reference")
    args = ap.parse_args(argv)
    return serve(sys.stdin, sys.stdout, args.driver)


if __name__ == "__main__":
    sys.exit(main())
