"""The one compiled part of conq: the level search's kernels (model/engines/_search.c: the set of
seen states and a chunk's successors; why: model/engines/keyset.py).  Everything else is declared
in pyproject.toml."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("conq.model.engines._search", ["model/engines/_search.c"], extra_compile_args=["-O2"])])
