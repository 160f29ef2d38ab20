"""Standard modules a library imports as it loads but a command never reads, loaded on first use instead.

websockets imports ``importlib.metadata`` (and with it ``zipfile``, ``csv`` and ``tempfile``) to learn
its own version in a development checkout; a released websockets never reads it. It imports
``urllib.request`` (and with it ``http.client`` and ``email``) to find a proxy in the environment, and
a session connects without one (as the object transfers do). Loading the two was 49 M of an
up-to-date pull's 571 M instructions (callgrind), 8.5%. The console script puts a stand-in in each one's
place: the import system takes the stand-in as loaded (it carries the module's
spec), and the first attribute anything reads from it loads the real module, whose attributes the
stand-in then takes on, so a holder of either sees the same module. (``importlib.util.LazyLoader`` does
not serve here: on Python 3.11 an import statement reads the module's ``__spec__``, which loads it.)
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from types import ModuleType

#: What the console script defers.
DEFERRED = ("importlib.metadata", "urllib.request")


class DeferredModule(ModuleType):
    """Stands in for a module until an attribute is read from it."""

    def __getattr__(self, name: str) -> object:
        # only called for an attribute the stand-in lacks: anything but its name and spec, until loaded
        name_of_module = self.__name__
        if sys.modules.get(name_of_module) is self:
            del sys.modules[name_of_module]
        real = importlib.import_module(name_of_module)
        self.__dict__.update(real.__dict__)
        return getattr(real, name)


def defer(name: str) -> None:
    """Put a stand-in for ``name`` (a module not yet imported) in ``sys.modules`` and on its package."""
    if name in sys.modules:
        return
    spec = importlib.util.find_spec(name)
    if spec is None:
        return
    stand_in = DeferredModule(name)
    stand_in.__spec__ = spec
    sys.modules[name] = stand_in
    package, _, attribute = name.rpartition(".")
    if package:
        setattr(sys.modules[package], attribute, stand_in)


def defer_unread_modules() -> None:
    """Defer every module of :data:`DEFERRED`."""
    for name in DEFERRED:
        defer(name)
