"""Package layout (metadata is in pyproject.toml).

isa/ at the repository root is the source of truth for the machine models: the design card,
the docs and `ptxgen calibrate -o isa/sm_90.toml` name it there. The wheel carries it inside the
package as ptxgen/isa_data/ (a data-only package mapped onto isa/), so an installed ptxgen never
looks outside site-packages; ptxgen.arch.isa_dir() finds either place. ptxgen/schedule/data/
(the shipped tune results) is a data-only package too.
"""
from setuptools import find_packages, setup

setup(packages=find_packages(include=["ptxgen", "ptxgen.*"]) + [
          "ptxgen.isa_data", "ptxgen.schedule.data"],
      package_dir={"ptxgen.isa_data": "isa"})
