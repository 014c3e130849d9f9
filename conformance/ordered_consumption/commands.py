"""The ordered-consumption commands of ``conq`` (the system's ``commands``, conformance/systems.py):
``conq broker serve`` (the broker as a server) and ``conq upstream rocketmq-python`` (the real,
unmodified RocketMQ Python client against it).

The command line calls :func:`add_commands` with its ``app`` and its kit (conq/cli/kit.py: the
consoles, the error types, the guard every command runs under, the checks of output folders and
Spark masters), so this package never imports the command line.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, List, Optional

import typer


def add_commands(app: typer.Typer, kit: Any) -> None:
    """Add ``broker`` and ``upstream`` to ``app``; ``kit`` is the command line's kit."""
    broker_app = typer.Typer(help="The ordered-consumption broker as a server.", no_args_is_help=True)
    app.add_typer(broker_app, name="broker")

    @broker_app.command("serve")
    def broker_serve(
        port: int = typer.Option(0, "--port", min=0, max=65535, help="TCP port on the loopback interface (0: an ephemeral one)."),
        host: str = typer.Option("127.0.0.1", "--host", help="127.0.0.1, ::1 or localhost (loopback only)."),
        seed: int = typer.Option(0, "--seed", min=0, help="Seed of the fault injection."),
        faults: str = typer.Option("none", "--faults", help="none | default | RPC:KIND=P[,KIND=P...][;RPC:...] (RPC * for all)."),
        topic: Optional[List[str]] = typer.Option(None, "--topic", help="Create a topic: NAME[:QUEUES[:normal|fifo|delay|transaction]]."),
        group: Optional[List[str]] = typer.Option(None, "--group", help="Create a consumer group: NAME[:fifo|standard[:MAX_ATTEMPTS]]."),
        admin: bool = typer.Option(False, "--admin", help="Answer the administration calls too (create topics and groups, pin assignments, statistics); off: they are refused FORBIDDEN."),
        json_out: bool = kit.JsonOpt,
    ) -> None:
        """Serve the broker (newline-delimited JSON over TCP) until Ctrl-C or SIGTERM (exit 0); print the
        bound address.  If the server's I/O loop dies, the command ends with exit 3 and the reason."""

        def body() -> int:
            import signal

            from conq.impl.ordered_consumption.broker import Broker
            from conq.impl.ordered_consumption.server import LOOPBACK, BrokerServer, parse_faults, parse_group, parse_topic

            if host not in LOOPBACK:
                raise kit.UsageProblem(f"--host {host!r}: the broker listens on the loopback interface only ({', '.join(LOOPBACK)})")
            try:
                plan = parse_faults(faults, seed)
            except ValueError as e:
                raise kit.UsageProblem(f"--faults {faults!r}: {e}") from None
            specs = []
            for option, items, parse in (("--topic", topic, parse_topic), ("--group", group, parse_group)):
                for item in items or []:
                    try:
                        specs.append((option, parse(item)))
                    except ValueError as e:
                        raise kit.UsageProblem(f"{option} {e}") from None
            broker = Broker().start()
            for option, spec in specs:
                try:
                    if option == "--topic":
                        broker.create_topic(spec[0], spec[1], message_type=spec[2])
                    else:
                        broker.create_consumer_group(spec[0], fifo=spec[1], max_attempts=spec[2])
                except ValueError as e:
                    raise kit.UsageProblem(f"{option} {spec[0]}: {e}") from None
            try:
                server = BrokerServer(broker, host=host, port=port, faults=plan, admin=admin).start()
            except OSError as e:
                raise kit.UsageProblem(f"--port {port}: cannot listen on {host}: {e.strerror or e}") from None

            class _Terminated(Exception):
                pass

            def on_term(*_: Any) -> None:
                raise _Terminated

            previous = signal.signal(signal.SIGTERM, on_term)
            try:
                sys.stdout.write(f"listening on {server.url}\n")  # under --json this goes to stderr
                sys.stdout.flush()
                try:
                    server.wait()  # until the I/O loop ends: only if it dies (stop() is ours, below)
                except (KeyboardInterrupt, _Terminated):
                    pass
            finally:
                signal.signal(signal.SIGTERM, previous)
                server.stop()
                broker.stop()
            if server.failure is not None:  # serving nobody while looking alive would be worse
                raise RuntimeError(f"the server's I/O loop died: {type(server.failure).__name__}: {server.failure}")
            total = sum(server.requests.values())
            kit.err.print(f"stopped: {total} requests over {server.connections} connections")
            kit.emit_json({"ok": True, "exit_code": kit.EXIT_OK, "address": server.url, "requests": dict(server.requests),
                        "connections": server.connections})
            return kit.EXIT_OK

        kit.guard(body, json_out)

    upstream_app = typer.Typer(help="Real, unmodified upstream clients against conq's broker.",
                               no_args_is_help=True)
    app.add_typer(upstream_app, name="upstream")

    @upstream_app.command("rocketmq-python")
    def upstream_rocketmq_python(
        seeds: int = typer.Option(3, "--seeds", min=1, help="How many seeds (one run each)."),
        first_seed: int = typer.Option(0, "--first-seed", min=0, help="The first seed; seeds are consecutive."),
        workload: str = typer.Option("faults", "--workload", help="all | standard | fifo | faults (all under seeded faults) | model-push-fifo[-dlq|-faults|...], model-simple[-faults] (model-sized), a comma-separated list, or all-model (every model-sized one); every trace is validated with conq validate as far as the model holds it (whole, or per unit), coverage per configuration."),
        out_dir: Optional[Path] = typer.Option(None, "--out", help="Traces and the report go here (default reports/upstream-rocketmq-python, with --spark reports/upstream-rocketmq-python-spark)."),
        max_seconds: float = typer.Option(120.0, "--max-seconds", min=1.0, help="Safety cap per run (a run that hits it is incomplete, exit 4)."),
        spark: bool = typer.Option(False, "--spark", help="One Spark task per seed; Parquet tables runs/, divergences/, coverage/ beside the report."),
        master: Optional[str] = typer.Option(None, "--master", help="Spark master URL (with --spark; default local[*])."),
        partitions: Optional[int] = typer.Option(None, "--partitions", min=1, help="Spark tasks (with --spark; default: one per seed)."),
        json_out: bool = kit.JsonOpt,
    ) -> None:
        """The RocketMQ Python thin client (pinned in pyproject) against the broker's gRPC face: seeded
        workloads, one trace per seed, the checks of the ordered-consumption claims.  Exit 0 when
        every divergence is of a known, documented class (a deviation, a model variant), 1
        otherwise; the last line says which."""

        def body() -> int:
            from conq.conformance.ordered_consumption.upstream.campaign import run_campaign
            from conq.conformance.ordered_consumption.upstream.runner import CLIENT, CLIENT_VERSION
            from conq.conformance.ordered_consumption.upstream.workloads import workload_list

            try:
                ws = workload_list(workload)
            except ValueError as e:
                raise kit.UsageProblem(f"--workload: {e}") from None
            if spark and len(ws) > 1:
                raise kit.UsageProblem("--workload: --spark runs one workload (got a list)")
            if not spark and (master is not None or partitions is not None):
                # a Spark option without --spark would be ignored silently: refuse it (bad usage, exit 2)
                raise kit.UsageProblem(f"{'--master' if master is not None else '--partitions'} needs --spark "
                                   "(without it the campaign runs locally, one seed after another)")
            spark_master = master or "local[*]"
            w = ws[0] if len(ws) == 1 else ws
            if CLIENT_VERSION == "not installed":
                raise kit.UsageProblem(f"{CLIENT} is not installed (pip install -e . installs the pinned version)")
            where = out_dir or Path("reports/upstream-rocketmq-python" + ("-spark" if spark else ""))
            kit.check_output_dir(where, "--out")
            seed_list = list(range(first_seed, first_seed + seeds))
            if spark:
                from conq.conformance.ordered_consumption.upstream.spark_campaign import run_spark_campaign
                from conq.conformance.spark_replay import ReplayError

                kit.check_master(spark_master)
                try:
                    rep = run_spark_campaign(w, seed_list, where, master=spark_master, partitions=partitions, cap=max_seconds,
                                             say=lambda s: kit.err.print(s, markup=False))
                except ReplayError as e:
                    raise kit.UsageProblem(str(e)) from None
                where = Path(rep["spark"]["out"])
            else:
                rep = run_campaign(w, seed_list, where, cap=max_seconds, progress=lambda s: kit.err.print(s, markup=False))
            kit.out.print(f"{rep['client']}: {rep['runs']} seeds, {rep['rpc_total']} RPCs, {rep['faults_total']} faults injected, "
                      f"{rep['listener_calls']} listener calls; conq validate: {rep['validation']}", markup=False)
            for cov in rep.get("coverage_by_config") or ([rep["coverage"]] if rep.get("coverage") else []):
                kit.out.print(f"model coverage ({cov['config']} {json.dumps(cov['overrides'], sort_keys=True)}, "
                          f"{cov['accepted_logs']} accepted logs): "
                          f"{cov['states']['covered']} / {cov['states']['total'] or 'not explored'} states, "
                          f"{cov['transitions']['covered']} / {cov['transitions']['total'] or 'not explored'} transitions; "
                          f"actions never taken: {'not explored' if cov['uncovered_actions'] is None else cov['uncovered_actions'] or 'none'}",
                          markup=False)
            for claim, d in rep["divergences"].items():
                s = d["smallest"]
                kit.out.print(f"DIVERGENCE {claim} [{s['classification']}]: seeds {d['seeds']}; smallest: seed {s['seed']} {s['trace']} steps "
                          f"{s['evidence']}: {s['detail']}", markup=False)
            kit.out.print(f"report: {where / 'report.md'}", markup=False)
            # judged against the known divergence classes (runner.CLASSIFICATION, each with its evidence)
            code, line = kit.judge_divergences(rep["divergences"])
            if code == kit.EXIT_OK and rep["incomplete"]:
                code, line = kit.EXIT_INCOMPLETE, f"{line}; but {len(rep['incomplete'])} run(s) incomplete (a --max-seconds cap): no verdict"
            kit.out.print(line, markup=False, style="green" if code == kit.EXIT_OK else "bold red")
            kit.emit_json({"ok": code == kit.EXIT_OK, "exit_code": code, "verdict": line,
                           **{k: v for k, v in rep.items() if k != "per_seed"}})
            return code

        kit.guard(body, json_out)
