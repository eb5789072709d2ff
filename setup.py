"""Everything else is in pyproject.toml: this only installs cafe's startup file.

`cafe-wire-hook.pth` goes to the top of site-packages, where Python runs it at every start,
`-I` and `-E` included (it does nothing unless `cafe record` or `cafe replay-run` set
CAFE_WIRE_RUN). setuptools has no declarative way to put a file there, so `build_py` copies
it: into the build directory for a wheel (`pip install .`), and into the editable wheel
(`pip install -e .`), whose files are those of the `install` command's directory.
"""

from __future__ import annotations

import os

from setuptools import setup
from setuptools.command.build_py import build_py

STARTUP_FILE = "cafe-wire-hook.pth"  # cafe.wire._hook.STARTUP_FILE
HERE = os.path.dirname(os.path.abspath(__file__))


class BuildWithStartupFile(build_py):
    def run(self) -> None:
        super().run()
        into = self.get_finalized_command("install").install_lib if self.editable_mode else self.build_lib
        self.copy_file(os.path.join(HERE, STARTUP_FILE), os.path.join(into, STARTUP_FILE))

    def get_outputs(self, include_bytecode: bool = True) -> list[str]:
        return [*super().get_outputs(include_bytecode), os.path.join(self.build_lib, STARTUP_FILE)]


setup(cmdclass={"build_py": BuildWithStartupFile})
