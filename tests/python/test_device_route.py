"""The device route (tensorbridge._device_route, python/torch_device/device.cc): tensorbridge
as torch's PrivateUse1 backend. Loading it renames torch's PrivateUse1 device and makes it the
process's accelerator, so the cases (_device_route_cases.py) run in a pytest of their own, in a
separate process; this test passes when every case there passes."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

import tensorbridge
from tensorbridge import _device_route


@pytest.mark.skipif(
    _device_route.library_path() is None,
    reason="the device route is not built: torch's CMake config was not found at build time "
    "(TB_BUILD_TORCH_DEVICE)",
)
def test_device_route_cases():
    cases = Path(__file__).with_name("_device_route_cases.py")
    # The child imports the tensorbridge this process imported (a development build or the
    # installed package).
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(tensorbridge.__file__)))
    path = os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH", "")) if p)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(cases)],
        capture_output=True,
        text=True,
        timeout=600,
        env=dict(os.environ, PYTHONPATH=path),
        cwd=str(cases.parent),
    )
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    assert " passed" in proc.stdout and "skipped" not in proc.stdout, proc.stdout[-2000:]
