"""Standard modules a library imports as it loads but a command never reads, loaded on first use instead.

websockets imports ``importlib.metadata`` (and with it ``zipfile``, ``csv`` and ``tempfile``) to learn
its own version in a development checkout; a released websockets never reads it. It imports
``urllib.request`` (and with it ``http.client`` and ``email``) to find a proxy in the environment, and
a session connects without one (as the object transfers do). Loading the two was 49 M of an
up-to-date pull's 571 M instructions (callgrind), 8.5%. The console script puts a stand-in in each one's
place: the import system takes the stand-in as loaded (it carries the module's spec), and the first
attribute anything reads or writes loads the real module. From then on the stand-in passes every read
and write through to it, so a holder of either sees (and patches) the same module; the import system
itself hands out the real one. (``importlib.util.LazyLoader`` does not serve here: on Python 3.11 an
import statement reads the module's ``__spec__``, which loads it.)
"""

from __future__ import annotations

import _thread
import importlib
import importlib.util
import sys
from types import ModuleType

#: What the console script defers.
DEFERRED = ("importlib.metadata", "urllib.request")
#: One load at a time: two threads reading a stand-in at once must not both swap it out.
_LOADING = _thread.RLock()


class DeferredModule(ModuleType):
    """Stands in for a module until an attribute is read or written, then passes both through to it."""

    def _real(self) -> ModuleType:
        loaded: ModuleType | None = self.__dict__.get("_deferred_real")
        if loaded is not None:
            return loaded
        with _LOADING:
            loaded = self.__dict__.get("_deferred_real")
            if loaded is None:
                name = self.__name__
                if sys.modules.get(name) is self:
                    del sys.modules[name]
                loaded = importlib.import_module(name)
                self.__dict__["_deferred_real"] = loaded
        return loaded

    def __getattr__(self, name: str) -> object:
        # only called for what the stand-in lacks: everything but its name and spec
        return getattr(self._real(), name)

    def __setattr__(self, name: str, value: object) -> None:
        setattr(self._real(), name, value)

    def __delattr__(self, name: str) -> None:
        delattr(self._real(), name)

    def __dir__(self) -> list[str]:
        return dir(self._real())


def defer(name: str) -> None:
    """Put a stand-in for ``name`` (a module not yet imported) in ``sys.modules`` and on its package."""
    if name in sys.modules:
        return
    spec = importlib.util.find_spec(name)
    if spec is None:
        return
    stand_in = DeferredModule(name)
    stand_in.__dict__["__spec__"] = spec  # not through __setattr__, which would load the module
    sys.modules[name] = stand_in
    package, _, attribute = name.rpartition(".")
    if package:
        setattr(sys.modules[package], attribute, stand_in)


def defer_unread_modules() -> None:
    """Defer every module of :data:`DEFERRED`."""
    for name in DEFERRED:
        defer(name)
