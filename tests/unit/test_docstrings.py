"""Every public name of the SDK (client/), the protocol core (protocol/) and the stores (storage/) says
what it is: a module, class, function, method or property without a docstring fails here. A method
that overrides a documented one of its base class inherits that docstring (``inspect.getdoc``)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Iterator
from types import ModuleType

import pytest

import smart_transfer

PACKAGES = ("client", "protocol", "storage")


def _modules() -> Iterator[ModuleType]:
    for package in PACKAGES:
        root = importlib.import_module(f"smart_transfer.{package}")
        yield root
        for info in pkgutil.walk_packages(root.__path__, f"{root.__name__}."):
            yield importlib.import_module(info.name)


def _undocumented(module: ModuleType) -> Iterator[str]:
    if not inspect.getdoc(module):
        yield module.__name__
    for name, value in vars(module).items():
        if name.startswith("_") or getattr(value, "__module__", None) != module.__name__:
            continue
        if inspect.isclass(value) or inspect.isfunction(value):
            if not _own_doc(value):
                yield f"{module.__name__}.{name}"
            if inspect.isclass(value):
                yield from _undocumented_members(module, value)


def _own_doc(value: object) -> bool:
    """A docstring written for this class or function (not a base class's, nor a dataclass's generated
    signature)."""
    if not inspect.isclass(value):
        return bool(inspect.getdoc(value))
    doc = value.__dict__.get("__doc__")
    return bool(doc) and not str(doc).startswith(f"{value.__name__}(")


def _undocumented_members(module: ModuleType, cls: type) -> Iterator[str]:
    for name, member in vars(cls).items():
        if name.startswith("_") or name.startswith("model_"):
            continue
        is_member = inspect.isfunction(member) or isinstance(member, property | classmethod | staticmethod)
        if is_member and not inspect.getdoc(getattr(cls, name)):
            yield f"{module.__name__}.{cls.__name__}.{name}"


@pytest.mark.parametrize("package", PACKAGES)
def test_every_public_name_has_a_docstring(package: str) -> None:
    missing = sorted(
        name
        for module in _modules()
        if module.__name__.startswith(f"smart_transfer.{package}")
        for name in _undocumented(module)
    )
    assert not missing, "public names without a docstring:\n" + "\n".join(missing)


def test_the_package_itself_is_documented() -> None:
    assert inspect.getdoc(smart_transfer)
