"""Mirrors OpenReg's test_testing.py: a PrivateUse1 test class that sets bypass_device_restrictions runs @onlyCUDA / @onlyOn tests.

Each mirror builds a test class, instantiates it for the chip only and runs it
(``device_type_runs.outcomes``); without the opt-in the same tests are skipped.
"""
import torch
from device_type_runs import RAN, SKIPPED, outcomes
from torch.testing._internal.common_device_type import onlyCUDA, onlyOn
from torch.testing._internal.common_utils import TestCase

CUDA_ONLY = {"onlyCUDA": onlyCUDA, "onlyOn": onlyOn(["cuda"])}


def _cuda_only_tests(opted_in: bool, *decorators: str):
    """A class of CUDA-only tests that check they run on the chip and note it in ``ran`` (a list all copies share)."""
    def make_test(name):
        def test(self, device):
            self.assertEqual(torch.device(device).type, "toychip")
            self.ran.append(name)
        test.__name__ = f"test_{name}"
        return CUDA_ONLY[name](test)

    def setUp(self):
        if opted_in:
            self.bypass_device_restrictions = True   # an instance attribute over PrivateUse1TestBase's False
        TestCase.setUp(self)
    members = {f"test_{name}": make_test(name) for name in decorators}
    return type("TestBypass", (TestCase,), {"ran": [], "setUp": setUp, **members})


def test_bypass_only_cuda():
    assert outcomes(_cuda_only_tests(True, "onlyCUDA"), only_for="toychip") == {"test_onlyCUDA_toychip": (RAN, "")}
    assert outcomes(_cuda_only_tests(False, "onlyCUDA"), only_for="toychip") == {
        "test_onlyCUDA_toychip": (SKIPPED, "Only runs on cuda")}


def test_bypass_only_on():
    assert outcomes(_cuda_only_tests(True, "onlyOn"), only_for="toychip") == {"test_onlyOn_toychip": (RAN, "")}
    assert outcomes(_cuda_only_tests(False, "onlyOn"), only_for="toychip")["test_onlyOn_toychip"][0] == SKIPPED


def test_vaildate_bypass_execution():
    """Both bypassed tests really executed their bodies (a skip-free outcome alone could hide a no-op)."""
    generic = _cuda_only_tests(True, "onlyCUDA", "onlyOn")
    assert set(outcomes(generic, only_for="toychip").values()) == {(RAN, "")}
    assert sorted(generic.ran) == ["onlyCUDA", "onlyOn"]
