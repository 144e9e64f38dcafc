"""Run a generic test class through PyTorch's device-type framework and collect what happened.

``instantiate_device_type_tests`` (torch.testing._internal.common_device_type) turns a generic
``TestCase`` into one class per device type -- ``TestFooCPU``, ``TestFooTOYCHIP`` (the chip is
PyTorch's PrivateUse1 device type) -- and its decorators (``onlyCPU``, ``skipPRIVATEUSE1If``...)
decide, per device type, whether a test runs. The OpenReg mirrors that check those decisions
build a class, instantiate it, and read the outcome of each device type's copy.
"""
from __future__ import annotations

import unittest

from torch.testing._internal.common_device_type import instantiate_device_type_tests

RAN, SKIPPED = "ran", "skipped"


def outcomes(generic: type, **instantiate_kwargs) -> dict[str, tuple[str, str]]:
    """Instantiate ``generic`` and run every copy: ``{"test_x_toychip": (RAN | SKIPPED, reason), "test_x_cpu": ...}``.

    Keyed by test name: the chip's class is ``TestFooPRIVATEUSE1`` until a chip class has run
    once, ``TestFooTOYCHIP`` after (PrivateUse1TestBase learns the backend's name in setUpClass).
    A copy that errors or fails raises, with its traceback.
    """
    scope: dict[str, type] = {generic.__name__: generic}   # the framework removes the generic class
    instantiate_device_type_tests(generic, scope, **instantiate_kwargs)
    found = {}
    for cls in scope.values():
        result = unittest.TestResult()
        unittest.defaultTestLoader.loadTestsFromTestCase(cls).run(result)
        for test, trace in result.errors + result.failures:
            raise AssertionError(f"{test.id()} did not pass:\n{trace}")
        skipped = {test.id().rsplit(".", 1)[-1]: reason for test, reason in result.skipped}
        for test_name in unittest.defaultTestLoader.getTestCaseNames(cls):
            reason = skipped.get(test_name)
            found[test_name] = (SKIPPED, reason) if reason is not None else (RAN, "")
    return found
