"""The models this distribution ships, by name, and how to load one.

A model is named on the command line by its registry name
(``consumer-lists``) or, for a user's own model, by ``FILE.py:Class`` or
``package.module:Class``.  Modules are imported lazily so that ``conq list``
stays fast and one broken model does not hide the others.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from typing import Any, Mapping

from conq.model.kernel import Model, ModelError, config_from_overrides

#: registry name -> "module:Class" (or the class itself: a model registered at run time by a
#: system of its own, conformance/systems.py)
MODELS: dict[str, Any] = {
    "consumer-lists": "conq.model.consumer_lists:ConsumerListsModel",
    "ordered-consumption": "conq.model.ordered_consumption:OrderedConsumptionModel",
    "recovery-deferral": "conq.model.recovery_deferral:RecoveryDeferralModel",
}


def model_names() -> list[str]:
    """The registered models whose module is present in this distribution."""
    return [name for name, target in MODELS.items()
            if not isinstance(target, str) or importlib.util.find_spec(target.partition(":")[0]) is not None]


def register(name: str, model: type[Model] | str) -> None:
    """Register a model under ``name`` (its class, or ``module:Class``); a name already taken by
    another model is refused."""
    if MODELS.get(name, model) != model:
        raise ModelError(f"a model named '{name}' is already registered ({MODELS[name]})")
    MODELS[name] = model


def unregister(name: str) -> None:
    MODELS.pop(name, None)


def load_object(target: str, *, user: bool = True) -> Any:
    """The object a ``module:Name`` or ``FILE.py:Name`` target names.  A ``user`` target
    that cannot be loaded (missing, a syntax error, an import that fails) is a
    :class:`ModelError` naming FILE:LINE; a shipped one (``user=False``) failing is a bug of
    conq's and propagates as it is."""
    mod_name, _, obj_name = target.rpartition(":")
    if not mod_name or not obj_name:
        raise ModelError(f"expected module:Name or FILE.py:Name, got {target!r}")
    if mod_name.endswith(".py"):
        path = Path(mod_name)
        if not path.is_file():
            raise ModelError(f"file not found: {path}" if not path.exists() else f"not a file: {path}")
        spec = importlib.util.spec_from_file_location(f"conq_user_{path.stem}", path)
        if spec is None or spec.loader is None:
            raise ModelError(f"{path}: cannot be loaded as a Python module")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        try:
            spec.loader.exec_module(module)
        except Exception as e:  # the user's file: any failure is bad input, reported where it happened
            sys.modules.pop(spec.name, None)
            raise ModelError(f"{_where(e, path)}: cannot load {path}: {type(e).__name__}: {_message(e)}") from None
    elif not user:
        module = importlib.import_module(mod_name)
    else:
        try:
            module = importlib.import_module(mod_name)
        except ImportError as e:
            raise ModelError(f"cannot import module '{mod_name}': {e}") from None
        except Exception as e:  # a module that fails while it is imported (syntax error, its own import-time error)
            raise ModelError(f"cannot import module '{mod_name}': {_where(e, None)}: {type(e).__name__}: {_message(e)}") from None
    try:
        return getattr(module, obj_name)
    except AttributeError:
        raise ModelError(f"{mod_name} has no {obj_name}") from None


def _message(e: BaseException) -> str:
    if isinstance(e, SyntaxError):
        return e.msg or "invalid syntax"
    return str(e) or type(e).__name__


def _where(e: BaseException, path: Path | None) -> str:
    """FILE:LINE of a load failure: the syntax error's own position, else the deepest frame
    in the loaded file (or, for a module, the deepest frame of the traceback)."""
    if isinstance(e, SyntaxError) and e.filename:
        return f"{e.filename}:{e.lineno}" if e.lineno else e.filename
    tb = e.__traceback__
    where = str(path) if path is not None else "?"
    target = str(path.resolve()) if path is not None else None
    while tb is not None:
        fname = tb.tb_frame.f_code.co_filename
        if target is None or fname == target or fname == str(path):
            where = f"{fname}:{tb.tb_lineno}"
        tb = tb.tb_next
    return where


def model_class(name: str) -> type[Model]:
    target = MODELS.get(name, name)
    if not isinstance(target, str):
        cls = target
    elif ":" not in target:
        raise ModelError(f"unknown model '{name}' (known: {', '.join(MODELS) or 'none'}; or give FILE.py:Class)")
    else:
        cls = load_object(target, user=name not in MODELS)
    if not (isinstance(cls, type) and issubclass(cls, Model)):
        raise ModelError(f"'{target}' is not a conq Model class")
    return cls


def load_model(name: str, config_name: str | None = None, overrides: Mapping[str, Any] | None = None) -> Model:
    """Instantiate a model with one of its named configurations plus overrides."""
    cls = model_class(name)
    configs = cls.configs()
    if config_name is None:
        config_name = next(iter(configs))
    if config_name not in configs:
        raise ModelError(f"model '{cls.name}' has no configuration '{config_name}' (known: {', '.join(configs)})")
    config = configs[config_name]
    if overrides:
        config = config_from_overrides(cls, config, overrides)
    model = cls(config)
    model.config_name = config_name  # type: ignore[attr-defined]
    return model
