"""The one compiled part of conq: the search's set of seen states (model/engines/_keyset.c; why:
model/engines/keyset.py).  Everything else is declared in pyproject.toml."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("conq.model.engines._keyset", ["model/engines/_keyset.c"], extra_compile_args=["-O2"])])
