"""``conq explore``: walk a model in the browser, as Stateright's explorer does.

A local page (127.0.0.1 only) shows a state split into its parts, the actions enabled in it and,
for each, who takes it and what it would change; a click takes the step, ``back`` undoes it.  A
violated property's counterexample (the explorer's shortest, a lasso with its cycle) loads as a
path to step through, and a search by a field's value (``c0.node = "notified"``) finds a
shortest path to a state that has it.  Changes are :mod:`conq.model.engines.changes`'s, the same as in
the terminal and the report.

The server is Starlette under uvicorn: every request is answered from bounded tables (a state
table of at most ``max_states`` states, searches bounded by a count of states, answers cut at
``MAX_ACTIONS`` actions), every handler catches everything and answers with an error document,
long work runs in worker threads (the model check behind "violations" once, in the background;
searches one at a time, beside it), and uvicorn bounds the connections and the size of a request.  A client that goes away
mid-answer costs nothing but that answer.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Any

from conq.model.engines.changes import jsonable, parts, step_changes
from conq.model.kernel import Kind, Model, config_dict

#: the most enabled actions one answer lists (a state with more says how many were left out)
MAX_ACTIONS = 500


class Session:
    """One model being explored: the states met so far (id <-> state, bounded), the check
    behind "violations" (run once, in the background, on first request) and searches."""

    def __init__(self, model: Model, *, max_states: int = 1_000_000, check_states: int = 2_000_000,
                 search_states: int = 200_000):
        self.model = model
        self.max_states = max_states
        self.check_states = check_states
        self.search_states = search_states
        self.states: list[Any] = []
        self.ids: dict[Any, int] = {}
        self.lock = threading.Lock()  # the state table
        self.searching = threading.Lock()  # one search at a time (the check runs beside it, once)
        self.check: dict[str, Any] | None = None
        self.check_thread: threading.Thread | None = None
        self.inits = [self.intern(s) for s in model.init_states()]

    # -- the state table ------------------------------------------------------
    def intern(self, state: Any) -> int:
        with self.lock:
            found = self.ids.get(state)
            if found is not None:
                return found
            if len(self.states) >= self.max_states:
                raise Full(f"the explorer's state table holds {self.max_states:,} states: restart it to walk further")
            self.ids[state] = len(self.states)
            self.states.append(state)
            return len(self.states) - 1

    def state(self, sid: int) -> Any:
        with self.lock:
            if not 0 <= sid < len(self.states):
                raise NotFound(f"no state {sid} (known: 0..{len(self.states) - 1})")
            return self.states[sid]

    # -- answers --------------------------------------------------------------
    def about(self) -> dict[str, Any]:
        m = self.model
        return {
            "model": m.name, "config": getattr(m, "config_name", ""), "settings": config_dict(m.config),
            "properties": [{"name": p.name, "kind": p.kind.value, "claim": p.claim} for p in m.property_list()],
            "inits": [self.describe(i, with_actions=False) for i in self.inits],
        }

    def failing(self, state: Any) -> list[str]:
        """The state invariants this state breaks."""
        out = []
        for p in self.model.property_list():
            if p.kind is Kind.ALWAYS:
                try:
                    if not p.check(state):
                        out.append(p.name)
                except Exception:  # noqa: BLE001 - a property that cannot be evaluated here is not shown failing
                    continue
        return out

    def describe(self, sid: int, *, with_actions: bool = True) -> dict[str, Any]:
        m = self.model
        s = self.state(sid)
        view = jsonable(m.view(s))
        out: dict[str, Any] = {"id": sid, "parts": parts(m, view), "failing": self.failing(s)}
        if with_actions:
            actions = []
            succ = m.successors(s)
            for a, o, t in succ[:MAX_ACTIONS]:
                src, dst = m.actors(a, o)
                target, changes = step_changes(m, view, jsonable(m.view(t)), dst)
                broken = [p.name for p in m.property_list()
                          if p.kind is Kind.ALWAYS_STEP and p.applies_to(a[0]) and not _safe(p.check, s, a, o, t)]
                actions.append({"label": m.format_action(a, o), "action": jsonable(list(a)), "actor": src,
                                "target": target, "next": self.intern(t), "changes": [c.to_json() for c in changes],
                                "breaks": broken})
            out["actions"] = actions
            out["actions_left_out"] = max(0, len(succ) - MAX_ACTIONS)
        return out

    def path_ids(self, path: Any, cycle: Any = None) -> list[dict[str, Any]]:
        """A path (and a lasso's cycle) as the page walks it: state ids and the steps between."""
        m = self.model
        out = [{"id": self.intern(path.init), "label": None}]
        runs = [path.steps] + ([cycle.steps] if cycle is not None else [])
        for k, run in enumerate(runs):
            for a, o, t in run:
                out.append({"id": self.intern(t), "label": m.format_action(a, o), "actor": m.actors(a, o)[0],
                            "cycle": k == 1})
        return out

    # -- the model check behind "violations" -----------------------------------
    def violations(self) -> dict[str, Any]:
        """The violated properties and their counterexamples; the check starts on the first call
        and runs in the background (``{"running": true}`` until it is done)."""
        with self.lock:
            if self.check is None and self.check_thread is None:
                self.check_thread = threading.Thread(target=self._run_check, name="conq-explore-check", daemon=True)
                self.check_thread.start()
            done = self.check
        return done if done is not None else {"running": True}

    def _run_check(self) -> None:
        from conq.model.engines.explorer import explore

        try:
            ex = explore(self.model, max_states=self.check_states)
            found = []
            for v in ex.verdicts:
                if v.status == "violated" and v.path is not None:
                    found.append({"name": v.prop.name, "claim": v.prop.claim, "kind": v.prop.kind.value,
                                  "detail": v.detail, "path": self.path_ids(v.path, v.cycle)})
            result = {"running": False, "states": ex.states, "complete": ex.complete, "stop_reason": ex.stop_reason,
                      "violations": found,
                      "other": [{"name": v.prop.name, "status": v.status} for v in ex.verdicts if v.status != "violated"]}
        except Exception as e:  # noqa: BLE001 - reported on the page, the server goes on
            result = {"running": False, "error": f"{type(e).__name__}: {e}", "violations": []}
        with self.lock:
            self.check = result

    # -- search by a field's value ----------------------------------------------
    def search(self, field: str, value: Any) -> dict[str, Any]:
        """A shortest path from an initial state to a state whose ``part.field`` (``c0.node``; a
        part alone for a one-value part: ``m0``) equals ``value`` (JSON; a string matches a string
        value or, failing that, any value whose JSON text contains it).  Breadth first, at most
        ``search_states`` states."""
        part, _, rest = field.partition(".")
        if not part:
            raise BadRequest("field: give PART.FIELD, e.g. c0.node (a part alone, e.g. m0, for a one-value part)")
        m = self.model
        if not self.searching.acquire(timeout=5.0):
            raise Busy("another search is running: try again in a moment")
        try:
            inits = list(dict.fromkeys(m.init_states()))
            parent: dict[Any, Any] = {s: None for s in inits}
            queue = deque(inits)
            seen = 0
            while queue and seen < self.search_states:
                s = queue.popleft()
                seen += 1
                if _matches(parts(m, m.view(s)), part, rest, value):
                    chain = []
                    x = s
                    while x is not None:
                        chain.append(x)
                        x = parent[x][0] if parent[x] is not None else None
                    chain.reverse()
                    return {"found": True, "searched": seen, "path": self._chain(chain)}
                for a, o, t in m.successors(s):
                    if t not in parent:
                        parent[t] = (s, a, o)
                        queue.append(t)
            return {"found": False, "searched": seen, "complete": not queue,
                    "message": (f"no reachable state has {field} = {jsonable(value)!r}" if not queue else
                                f"not found in the first {seen:,} states (the search is bounded)")}
        finally:
            self.searching.release()

    def _chain(self, chain: list[Any]) -> list[dict[str, Any]]:
        m = self.model
        out = [{"id": self.intern(chain[0]), "label": None}]
        for s, t in zip(chain, chain[1:]):
            a, o = next((a, o) for a, o, t2 in m.successors(s) if t2 == t)
            out.append({"id": self.intern(t), "label": m.format_action(a, o), "actor": m.actors(a, o)[0], "cycle": False})
        return out


def _safe(check, *args) -> bool:
    try:
        return bool(check(*args))
    except Exception:  # noqa: BLE001
        return True


def _matches(state_parts: dict[str, Any], part: str, field: str, value: Any) -> bool:
    if part not in state_parts:
        return False
    got: Any = state_parts[part]
    if field:
        for key in field.replace("[", ".").replace("]", "").split("."):
            if isinstance(got, dict) and key in got:
                got = got[key]
            elif isinstance(got, list) and key.isdigit() and int(key) < len(got):
                got = got[int(key)]
            else:
                return False
    elif isinstance(got, dict) and "" in got:
        got = got[""]
    if got == value:
        return True
    if isinstance(value, str):
        import json

        return value in (got if isinstance(got, str) else json.dumps(got))
    return False


class Problem(Exception):
    status = 500


class NotFound(Problem):
    status = 404


class BadRequest(Problem):
    status = 400


class Busy(Problem):
    status = 503


class Full(Problem):
    status = 507


def create_app(session: Session):
    """The Starlette application: the page and its JSON answers."""
    import json

    from starlette.applications import Starlette
    from starlette.middleware import Middleware
    from starlette.middleware.base import BaseHTTPMiddleware
    from starlette.responses import HTMLResponse, JSONResponse
    from starlette.routing import Route
    from starlette.concurrency import run_in_threadpool

    page = render_page(session)

    async def guard(request, call_next):
        # the one catch-all: whatever a handler raises, the client gets an error document and
        # the server goes on
        try:
            return await call_next(request)
        except Problem as e:
            return JSONResponse({"error": str(e)}, status_code=e.status)
        except Exception as e:  # noqa: BLE001
            return JSONResponse({"error": f"internal error: {type(e).__name__}: {e}"}, status_code=500)

    async def index(request):
        return HTMLResponse(page)

    async def about(request):
        return JSONResponse(await run_in_threadpool(session.about))

    async def state(request):
        raw = request.path_params["sid"]
        if not raw.isdigit() or len(raw) > 12:
            raise BadRequest(f"state id: a number, got {raw[:40]!r}")
        return JSONResponse(await run_in_threadpool(session.describe, int(raw)))

    async def violations(request):
        return JSONResponse(session.violations())

    async def search(request):
        field = request.query_params.get("field", "")[:200]
        raw = request.query_params.get("value", "")[:2000]
        try:
            value = json.loads(raw)
        except ValueError:
            value = raw
        return JSONResponse(await run_in_threadpool(session.search, field, value))

    return Starlette(routes=[
        Route("/", index), Route("/api/model", about), Route("/api/state/{sid}", state),
        Route("/api/violations", violations), Route("/api/search", search),
    ], middleware=[Middleware(BaseHTTPMiddleware, dispatch=guard)])


def render_page(session: Session) -> str:
    from conq.html_report import TEMPLATES, environment

    m = session.model
    return environment().get_template("explore.html.j2").render(
        title=f"conq explore: {m.name}" + (f" / {getattr(m, 'config_name', '')}" if getattr(m, "config_name", "") else ""),
        css=(TEMPLATES / "conq.css").read_text(encoding="utf-8"), js=(TEMPLATES / "conq.js").read_text(encoding="utf-8"))


class Server:
    """uvicorn serving the explorer on 127.0.0.1 in a thread of this process (``port=0``: a free
    port); bounded connections and request sizes, no access log.  ``stop()`` ends it."""

    def __init__(self, session: Session, *, host: str = "127.0.0.1", port: int = 0, concurrency: int = 32):
        import uvicorn

        if host not in ("127.0.0.1", "::1", "localhost"):
            raise ValueError(f"host: conq explore serves the loopback only (127.0.0.1 or ::1), not {host!r}")
        self.config = uvicorn.Config(create_app(session), host=host, port=port, log_level="warning", access_log=False,
                                     limit_concurrency=concurrency, timeout_keep_alive=5,
                                     h11_max_incomplete_event_size=16 * 1024, lifespan="off")
        self.server = uvicorn.Server(self.config)
        self.thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        for srv in getattr(self.server, "servers", []) or []:
            for sock in srv.sockets:
                return sock.getsockname()[1]
        raise RuntimeError("the server is not listening yet")

    @property
    def url(self) -> str:
        return f"http://{self.config.host}:{self.port}/"

    def start(self, timeout: float = 30.0) -> "Server":
        self.thread = threading.Thread(target=self.server.run, name="conq-explore", daemon=True)
        self.thread.start()
        t = threading.Event()
        for _ in range(int(timeout / 0.02)):
            if self.server.started:
                break
            if not self.thread.is_alive():
                raise RuntimeError("the explorer's server did not start (is the port taken?)")
            t.wait(0.02)
        if not self.server.started:
            raise RuntimeError("the explorer's server did not start in time")
        return self

    def serve_forever(self) -> None:
        """Run in the calling thread until Ctrl-C (uvicorn's own signal handling)."""
        self.server.run()

    def stop(self) -> None:
        self.server.should_exit = True
        if self.thread is not None:
            self.thread.join(timeout=10)
