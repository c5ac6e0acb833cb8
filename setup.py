"""Builds the nvfp4 Python package for pip (pyproject.toml): the pure-Python package python/nvfp4/
and its extension nvfp4._nvfp4, which CMake builds (target nvfp4_python) into a temporary build
directory; nothing but the Python module is configured (no tests, tools, examples, benchmarks).

    pip install --no-build-isolation .        # offline: uses the setuptools / numpy installed
    NVFP4_CMAKE_ARGS="-DNVFP4_NATIVE=OFF" pip install --no-build-isolation .   # portable build

The extension is compiled with -march=native by default (NVFP4_NATIVE), so it runs on the machine
that built it; NVFP4_CMAKE_ARGS passes further CMake arguments, CMAKE_BUILD_PARALLEL_LEVEL the jobs.
"""
import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext

ROOT = pathlib.Path(__file__).resolve().parent


def project_version():
    match = re.search(r"project\(nvfp4\s+VERSION\s+([0-9.]+)", (ROOT / "CMakeLists.txt").read_text())
    if not match:
        raise RuntimeError("cannot read the project version from CMakeLists.txt")
    return match.group(1)


class CMakeExtension(Extension):
    def __init__(self, name):
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        if shutil.which("cmake") is None:
            raise RuntimeError("cmake is needed to build nvfp4 (Debian / Ubuntu: apt install cmake, or run scripts/install_deps.sh)")
        target = pathlib.Path(self.get_ext_fullpath(ext.name)).resolve()
        build = pathlib.Path(self.build_temp).resolve() / "cmake"
        configure = ["cmake", "-S", str(ROOT), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release",
                     f"-DPython3_EXECUTABLE={sys.executable}", "-DNVFP4_BUILD_PYTHON=ON", "-DNVFP4_BUILD_TESTS=OFF",
                     "-DNVFP4_BUILD_BENCHMARKS=OFF", "-DNVFP4_BUILD_EXAMPLES=OFF", "-DNVFP4_BUILD_TOOLS=OFF"]
        configure += shlex.split(os.environ.get("NVFP4_CMAKE_ARGS", ""))
        subprocess.run(configure, check=True)
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or str(os.cpu_count() or 1)
        subprocess.run(["cmake", "--build", str(build), "--target", "nvfp4_python", "-j", jobs], check=True)
        built = sorted((build / "python" / "nvfp4").glob("_nvfp4*" + os.path.splitext(target.name)[1]))
        if not built:
            raise RuntimeError("CMake did not build the extension: pybind11 or the Python headers are missing "
                               "(Debian / Ubuntu: apt install pybind11-dev python3-dev; the configure output above says which)")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(built[0], target)


# Build products under build/pip (ignored by git), not build/ or python/ (setuptools' defaults).
BUILD_BASE = ROOT / "build" / "pip"
BUILD_BASE.mkdir(parents=True, exist_ok=True)

setup(
    version=project_version(),
    options={"build": {"build_base": str(BUILD_BASE)}, "egg_info": {"egg_base": str(BUILD_BASE)}},
    package_dir={"": "python"},
    packages=find_packages("python", include=["nvfp4", "nvfp4.*"]),
    package_data={"nvfp4": ["py.typed", "_nvfp4.pyi"]},  # the extension's committed type stub
    ext_modules=[CMakeExtension("nvfp4._nvfp4")],
    cmdclass={"build_ext": CMakeBuild},
    zip_safe=False,
)
