"""The ``conq`` command line.

Exit codes, the same for every subcommand:

* 0: success;
* 1: a check found a violation (a counterexample, a divergence, a coverage gap);
* 2: bad usage or bad input, reported before any work is done (the one-line
  message names the option, file, line or field at fault);
* 3: an internal error of conq itself (a one-line message; ``conq --debug ...``
  prints the traceback);
* 4: incomplete: a limit (``--max-states``, ``--max-seconds``, ``--max-memory``)
  ended the run before it could give a verdict.  Not a violation (nothing was
  found) and not a pass: the limits are too small for this input;
* 130: interrupted (Ctrl-C).

``--json``: stdout holds exactly one JSON document, on success and on every
error (``{"ok": false, "exit_code": N, "error": {"kind": ..., "message": ...}}``);
progress and anything else goes to stderr.

The package: :mod:`.kit` (the application, its consoles, the guard and the checks every command
shares) and one module per command group, registered below in the order ``conq --help`` lists them:
:mod:`.models` (list, check, explore, prove), :mod:`.requirements`, :mod:`.conformance` (conformance,
validate, protocol), :mod:`.certify`, :mod:`.replay`, :mod:`.mutants`, :mod:`.mutate_model`, :mod:`.run`.  A system's own commands come
from its declaration (conformance/systems.py, ``System.commands``: ordered consumption's ``conq
broker`` and ``conq upstream``), given the kit.
"""

from __future__ import annotations

from conq.model.kernel import ModelError

from . import certify, conformance, kit, models, mutants, mutate_model, replay, requirements, run
from .kit import app

app.command("list")(models.list_models)
app.command("check")(models.check)
app.command("explore")(models.explore)
app.command("requirements")(requirements.requirements)
app.command("conformance")(conformance.conformance)
app.command("validate")(conformance.validate_log)
app.command("protocol")(conformance.protocol_doc)
app.command("certify")(certify.certify)
app.command("replay")(replay.replay)
app.command("prove")(models.prove)
app.command("mutants")(mutants.mutants)
app.command("mutate-model")(mutate_model.mutate_model)
app.command("run")(run.run)


def _add_system_commands() -> None:
    """Each registered system's own commands (ordered consumption's ``conq broker``, ``conq upstream``)."""
    from conq.conformance import systems

    try:
        for system in systems.systems("commands"):
            system.load("commands")(app, kit)
    except (ModelError, ValueError) as e:  # a broken CONQ_SYSTEMS target: every command exits 2 (kit)
        kit.SYSTEMS_PROBLEM.append(f"{systems.ENV}: {e}")


_add_system_commands()


def main() -> None:
    app()
