# -*- Python -*-
# lit configuration for ampc's golden tests (see docs/textual-ir.md, "Golden tests").
#
# Substitutions:
#   %ampc-opt   build/bin/ampc-opt  (parse .ir or a model file, run passes, print)
#   %ampc       build/bin/ampc      (the user-facing CLI)
#   FileCheck, not, count           LLVM 14's test tools
#   %dot                            Graphviz's dot (checks that --emit dot lays out)
# Files under an Inputs/ folder are data for the tests, never tests themselves.

import os
import re

import lit.formats

config.name = "ampc"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".ir", ".yaml", ".test"]
config.excludes = ["Inputs", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py"]
config.test_source_root = os.path.dirname(__file__)

if not hasattr(config, "ampc_tools_dir"):
    lit_config.fatal("run lit on the build tree (build/tests/lit), not on the sources")

# Tools come from this build and LLVM 14 first, whatever else is on PATH.
path = os.pathsep.join([config.ampc_tools_dir, config.llvm_tools_dir,
                        config.environment.get("PATH", os.environ.get("PATH", ""))])
config.environment["PATH"] = path

# `REQUIRES: onnx`: this build has the ONNX frontend (AMPC_WITH_ONNX).
if getattr(config, "ampc_with_onnx", "OFF").upper() in ("ON", "1", "TRUE", "YES"):
    config.available_features.add("onnx")

# `REQUIRES: graphviz`: this build lays graphs out (AMPC_WITH_GRAPHVIZ) and
# Graphviz's dot is installed. Under CI=true a build with Graphviz has the
# feature whether or not dot is found, so a missing dot fails the tests
# rather than skipping them.
import shutil
_dot = shutil.which("dot")
if getattr(config, "ampc_with_graphviz", "OFF").upper() in ("ON", "1", "TRUE", "YES") and (
        _dot or os.environ.get("CI") == "true"):
    config.available_features.add("graphviz")

def tool_pattern(name):
    # A whole word only: not part of a path, an option or another name.
    return r"(?<![-./\w%])" + re.escape(name) + r"(?![-.\w])"

# Longest first: %ampc-opt must not be read as %ampc followed by "-opt".
config.substitutions.append(("%ampc-opt", os.path.join(config.ampc_tools_dir, "ampc-opt")))
config.substitutions.append(("%ampc", os.path.join(config.ampc_tools_dir, "ampc")))
config.substitutions.append((tool_pattern("FileCheck"), config.filecheck_path))
config.substitutions.append((tool_pattern("not"), os.path.join(config.llvm_tools_dir, "not")))
config.substitutions.append((tool_pattern("count"), os.path.join(config.llvm_tools_dir, "count")))
# %dot, not a bare `dot`: `--emit dot` must stay as written.
config.substitutions.append(("%dot", _dot or "dot"))

# "cuda-device" where a GPU answers (nvidia-smi lists one): the tests that
# expect --device auto to fall back to the CPU are then unsupported, and
# those that need a GPU run (docs/cuda.md).
import subprocess
_smi = shutil.which("nvidia-smi")
if _smi:
    try:
        _gpus = subprocess.run([_smi, "-L"], capture_output=True, text=True, timeout=60)
        if _gpus.returncode == 0 and "GPU" in _gpus.stdout:
            config.available_features.add("cuda-device")
    except (OSError, subprocess.SubprocessError):
        pass
