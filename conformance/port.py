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

from conq import __version__

from . import protocol
from .adapters import DRIVERS, ActionRejected, load_class
from .trace import hashable, jsonable


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

    for line in stdin:
        if not line.strip():
            continue
        try:
            msg = json.loads(line)
        except json.JSONDecodeError as e:
            error(0, 10, f"invalid JSON: {e.msg}")
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
                target = driver_target or DRIVERS.get(model)
                if target is None:
                    error(rid, 14, f"no driver for model {model!r}")
                    continue
                cls = load_class(target)
                driver = cls(config, msg["seed"])
                send({"type": "init_ok", "id": rid, "implementation": f"conq-reference {__version__} ({cls.__name__})"})
            elif driver is None:
                error(rid, 10, f"{kind} before init")
            elif kind == "reset":
                driver = cls(config, msg["seed"])
                send({"type": "reset_ok", "id": rid})
            elif kind == "action":
                try:
                    obs = driver.do(hashable(msg["action"]))
                except ActionRejected as e:
                    error(rid, 13, str(e) or "not enabled")
                    continue
                except (KeyError, ValueError, TypeError) as e:
                    error(rid, 12, f"cannot perform {msg['action']!r}: {e}")
                    continue
                send({"type": "action_ok", "id": rid, "observation": jsonable(obs)})
            elif kind == "snapshot":
                snap = getattr(driver, "snapshot", None)
                if snap is None:
                    error(rid, 11, "this driver has no snapshot")
                else:
                    send({"type": "snapshot_ok", "id": rid, "state": jsonable(hashable(snap()))})
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
