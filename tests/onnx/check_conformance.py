#!/usr/bin/env python3
"""Runs ONNX's own node tests (the conformance suite) through ampc.

Debian's libonnx-testdata ships ONNX 1.12's node tests: one folder per test
with model.onnx and test_data_set_0/{input,output}_<i>.pb (each has that one
data set). Every test whose
nodes all have op types in ampc's ONNX op table (the driver's
--list-onnx-ops) is run by tests/onnx/onnx_forward_driver.cpp (import, the
forward pipeline at O0, the cpu backend) and its outputs compared with the
test's. The others are counted as "op type not supported", by the types they
lack.

Each test that runs ends as one of:
  pass     every output has the expected shape and values within tolerance;
  refused  ampc said no with a clear error (exit code 2): an op type, an
           attribute, a dtype or an opset out of scope;
  differs  ampc ran it and an output is wrong;
  crashed  anything else (exit 1, a signal, a time-out, missing outputs).

tests/onnx/conformance-expected.txt lists the tests that are allowed not to
pass, each with its outcome and reason ("TEST | refused | CATEGORY | ampc's
message", the category derived from the message, or "TEST | differs | REASON
| explanation", written by hand). The check fails
on a test that neither passes nor ends as listed, and on a listed test that
now passes (so the list shrinks as ampc grows). A crash can never be listed.
--write-expected regenerates the list from the current build: refusals with
the reason ampc gave, listed differences that still differ with their
hand-written reason; a new difference or a crash is printed and makes the run
fail, to be fixed or explained by hand.

Tolerances, per element and per expected dtype, on |got - want| <=
tol * max(1, |want|) (the driver writes every output as f32):
  float, double  1e-5 (the result goes through f32; f32 rounding is 6e-8)
  float16        2^-10 (one f16 ulp at 1: ONNX computes in f32 and rounds)
  bfloat16       2^-7  (one bf16 ulp at 1)
  ints, bool     exact (the expected values rounded to f32 as the driver's)
NaN must meet NaN and an infinity the same infinity.

Run by CTest as `onnx-conformance`. Exits 77 (CTest's skip) when onnx or the
test data is missing, except under CI=true, where scripts/install-deps.sh has
installed them and their absence is a failure.

  python3 check_conformance.py --driver build/bin/ampc-onnx-forward-driver
      [--expected FILE] [--write-expected] [--table FILE] [--jobs 2]
      [--only REGEX] [--keep DIR] [--data DIR] [--verbose]
"""

import argparse
import collections
import concurrent.futures
import os
import re
import shutil
import subprocess
import sys
import tempfile

SKIP = 77
MISSING = 1 if os.environ.get("CI") == "true" else SKIP
HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_DATA = "/usr/share/libonnx-testdata/data/node"
DEFAULT_EXPECTED = os.path.join(HERE, "conformance-expected.txt")
TIMEOUT_S = 120

try:
    import numpy as np
    import onnx
    from onnx import TensorProto, numpy_helper
except ImportError as error:
    print(f"{'FAIL' if MISSING == 1 else 'SKIP'}: a Python package is missing ({error})")
    sys.exit(MISSING)

# Per expected float dtype: the tolerance relative to max(1, |want|)
# (integers and bools compare exactly).
TOLERANCE = {
    TensorProto.FLOAT: 1e-5,
    TensorProto.DOUBLE: 1e-5,
    TensorProto.FLOAT16: 2.0**-10,
    TensorProto.BFLOAT16: 2.0**-7,
}

PASS, REFUSED, DIFFERS, CRASHED, UNSUPPORTED = "pass", "refused", "differs", "crashed", "unsupported"
# The expected file's category of a test that passes once graph inputs are
# held constant at import (--fix-input); its reason lists them.
FIXED = "inputs fixed at import"


# --- The tests ------------------------------------------------------------


def node_op_types(graph):
    """The (domain-qualified) op types of a graph's nodes and its subgraphs'."""
    types = set()
    for n in graph.node:
        types.add(n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}.{n.op_type}")
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                types |= node_op_types(a.g)
            elif a.type == onnx.AttributeProto.GRAPHS:
                for g in a.graphs:
                    types |= node_op_types(g)
    return types


class NodeTest:
    def __init__(self, name, folder):
        self.name = name
        self.folder = folder
        self.model_path = os.path.join(folder, "model.onnx")
        model = onnx.load(self.model_path)
        self.types = node_op_types(model.graph)
        initializers = {t.name for t in model.graph.initializer}
        # IR < 4 lists initializers among the inputs; the .pb files hold
        # the others, in order.
        self.inputs = [i for i in model.graph.input if i.name not in initializers]
        self.outputs = list(model.graph.output)
        # What the test tests: its one op type other than Constant (Resize
        # takes its scales from Constant nodes), else its function's
        # (a _expanded test is the decomposition of its sibling's op).
        self.attributes = {a.name for n in model.graph.node for a in n.attribute}
        own = {n.op_type for n in model.graph.node} - {"Constant"}
        self.label = own.pop() if len(own) == 1 else None

    def data_set(self):
        return os.path.join(self.folder, "test_data_set_0")


def load_tests(data, only):
    tests = []
    for name in sorted(os.listdir(data)):
        if os.path.isfile(os.path.join(data, name, "model.onnx")):
            if not only or re.search(only, name):
                tests.append(NodeTest(name, os.path.join(data, name)))
    for t in tests:
        if t.name.endswith("_expanded"):
            # Labelled by its sibling's op type, which need not be selected.
            base = t.name[: -len("_expanded")]
            folder = os.path.join(data, base)
            has_base = os.path.isfile(os.path.join(folder, "model.onnx"))
            label = NodeTest(base, folder).label if has_base else None
            t.label = f"{label or base} (expanded)"
        elif t.label is None:
            t.label = "+".join(sorted(t.types))
    return tests


def read_value(path, value_info):
    """A .pb file as a NumPy array, or None for a non-tensor (sequence,
    optional, map) or an unreadable one."""
    if not value_info.type.HasField("tensor_type"):
        return None
    tensor = TensorProto()
    with open(path, "rb") as f:
        tensor.ParseFromString(f.read())
    try:
        value = numpy_helper.to_array(tensor)
    except Exception:  # strings, types NumPy lacks
        return None
    if value_info.type.tensor_type.elem_type == TensorProto.BFLOAT16 and value.dtype == np.uint16:
        # ONNX 1.12's test data holds bfloat16 as its bits in a UINT16
        # tensor: the top half of an f32.
        value = (value.astype(np.uint32) << 16).view(np.float32)
    return value


# --- Running one test -----------------------------------------------------


class Result:
    def __init__(self, outcome, reason="", category="", fixed=()):
        self.outcome = outcome
        self.category = category  # refused: the category of ampc's message
        self.reason = reason
        # The graph inputs held constant at import (--fix-input) for this
        # outcome: operands ampc needs when it imports, which the node test
        # feeds as inputs where an exported model holds them as initializers.
        self.fixed = tuple(fixed)


def first_error(stderr, model_path=""):
    """ampc's first error message. Its location is dropped but for a graph
    input's, output's or initializer's name ("output 'Mean': no node
    produces it"); a node's is the test's one node."""
    for line in stderr.splitlines():
        if "error: " in line:
            where, message = line.split("error: ", 1)
            where = where.strip().rstrip(":")
            if model_path and where.startswith(model_path):
                where = where[len(model_path):].lstrip(": ")
            if re.match(r"(input|output|initializer) '", where):
                message = f"{where}: {message}"
            return message.strip()
    lines = [l for l in stderr.splitlines() if l.strip()]
    return lines[0].strip() if lines else "(no message)"


# ampc's refusals, by what they refuse (the first pattern that matches).
CATEGORIES = [
    (r"^op type '.*' is not supported", "op type missing"),
    (r"data type \S+ is not supported|which ampc does not support|casting to \S+ is not supported",
     "dtype out of scope"),
    (r"only tensor inputs", "non-tensor input out of scope"),
    (r"^opset \d+ is too old", "opset older than 7"),
    (r"^opset \d+ is newer", "opset newer than ampc's"),
    (r"must be known when the model is imported|must be a scalar constant",
     "run-time operand must be constant"),
    (r"no node produces it|output is not supported|outputs are used by the graph",
     "optional output out of scope"),
    (r"computed at import time and used as data", "folded constant as data out of scope"),
    (r"attribute|padding .* kernel", "attribute out of scope"),
    (r"only \d-D|on a \d-D", "rank or layout out of scope"),
    (r"does not hold", "test data does not fit the declared input"),
    (r"is symbolic|has no shape", "symbolic shape"),
    (r"checker|cannot convert", "rejected by ONNX's checker or converter"),
]


def categorise(message, attributes):
    """The category of ampc's refusal `message` of a node with `attributes`."""
    for pattern, category in CATEGORIES:
        if re.search(pattern, message):
            return category
    # "ceil_mode=1 is not supported", "auto_pad SAME_UPPER is not ...",
    # "dilations other than 1 are not supported".
    first = re.match(r"\w+", message)
    if first and first.group(0) in attributes:
        return "attribute out of scope"
    return "other"


def clean(message):
    """A message as the expected file keeps it: one line, no '|', no
    counts that change as ops are added."""
    message = re.sub(r" \(docs/onnx\.md lists the \d+ supported ones\)", "", message)
    return message.replace("|", "/").strip()


def compare(index, got, want, elem_type):
    """None when `got` (f32) matches `want`, else what differs."""
    if got.shape != want.shape:
        return f"output {index}: shape {list(got.shape)}, expected {list(want.shape)}"
    if want.dtype == np.bool_ or np.issubdtype(want.dtype, np.integer):
        want32 = want.astype(np.float32)
        bad = got != want32
        if bad.any():
            i = np.unravel_index(np.argmax(bad), bad.shape)
            return f"output {index}: {bad.sum()} value(s) differ, first at {list(i)}: {got[i]} != {want32[i]}"
        return None
    tol = TOLERANCE.get(elem_type, 1e-5)
    want = want.astype(np.float64)
    got = got.astype(np.float64)
    nan_mismatch = np.isnan(got) != np.isnan(want)
    inf_mismatch = (np.isinf(want) | np.isinf(got)) & (got != want) & ~np.isnan(want)
    finite = np.isfinite(want) & np.isfinite(got)
    with np.errstate(invalid="ignore"):
        err = np.where(finite, np.abs(got - want) / np.maximum(1.0, np.abs(want)), 0.0)
    bad = nan_mismatch | inf_mismatch | (err > tol)
    if bad.any():
        i = np.unravel_index(np.argmax(bad), bad.shape)
        return (f"output {index}: {bad.sum()} of {bad.size} value(s) outside {tol:.3g}, "
                f"worst error {err.max():.3g}, first at {list(i)}: {got[i]} vs {want[i]}")
    return None


def run_test(test, driver, work):
    folder = os.path.join(work, test.name)
    in_dir, out_dir = os.path.join(folder, "in"), os.path.join(folder, "out")
    os.makedirs(in_dir, exist_ok=True)
    os.makedirs(out_dir, exist_ok=True)
    data = test.data_set()
    for i, info in enumerate(test.inputs):
        value = read_value(os.path.join(data, f"input_{i}.pb"), info)
        # An input NumPy cannot hold is left out: ampc refuses its dtype
        # while importing, before it reads any input.
        if value is not None and value.dtype != object:
            np.save(os.path.join(in_dir, info.name + ".npy"), value)
    fixed = []
    while True:
        cmd = [driver, test.model_path, in_dir, out_dir]
        for name in fixed:
            cmd += ["--fix-input", f"{name}={os.path.join(in_dir, name + '.npy')}"]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return Result(CRASHED, f"timed out after {TIMEOUT_S} s", fixed=fixed)
        if proc.returncode != 2:
            break
        message = first_error(proc.stderr, test.model_path)
        if in_dir in message and "does not hold" not in message:
            # The harness failed to hand an input over: not ampc's refusal.
            return Result(CRASHED, "harness: " + message, fixed=fixed)
        # An operand ampc needs at import that the test feeds as an input:
        # run again with it held constant, as a user would with --fix-input.
        wanted = re.search(r"'([^']+)' must be known when the model is imported.*--fix-input",
                           message)
        if wanted and wanted.group(1) not in fixed and \
                os.path.exists(os.path.join(in_dir, wanted.group(1) + ".npy")):
            fixed.append(wanted.group(1))
            continue
        message = clean(message.replace(in_dir + os.sep, ""))
        category = categorise(message, test.attributes)
        if fixed:
            message += f" (with {', '.join(fixed)} fixed at import)"
        return Result(REFUSED, message, category, fixed=fixed)
    if proc.returncode != 0:
        return Result(CRASHED, f"exit code {proc.returncode}: {first_error(proc.stderr)}",
                      fixed=fixed)
    problems = []
    for i, info in enumerate(test.outputs):
        got_path = os.path.join(out_dir, f"out{i}.npy")
        if not os.path.exists(got_path):
            return Result(CRASHED, f"output {i} not written")
        want = read_value(os.path.join(data, f"output_{i}.pb"), info)
        if want is None:
            problems.append(f"output {i}: the expected value is not a numeric tensor")
            continue
        problem = compare(i, np.load(got_path), want, info.type.tensor_type.elem_type)
        if problem:
            problems.append(problem)
    if os.path.exists(os.path.join(out_dir, f"out{len(test.outputs)}.npy")):
        problems.append("more outputs than the model declares")
    if problems:
        return Result(DIFFERS, "; ".join(problems)
                      + (f" (with {', '.join(fixed)} fixed at import)" if fixed else ""), fixed=fixed)
    return Result(PASS, fixed=fixed)


# --- The harness's own check ---------------------------------------------


def write_node_test(folder, model, inputs, outputs):
    """A node test in ONNX's layout: model.onnx, test_data_set_0/*.pb."""
    data = os.path.join(folder, "test_data_set_0")
    os.makedirs(data, exist_ok=True)
    onnx.save(model, os.path.join(folder, "model.onnx"))
    for kind, values in (("input", inputs), ("output", outputs)):
        for i, (name, value) in enumerate(values):
            with open(os.path.join(data, f"{kind}_{i}.pb"), "wb") as f:
                f.write(numpy_helper.from_array(value, name).SerializeToString())


def self_check(driver, work):
    """The harness on node tests of its own, which none of ONNX's exercise
    while ampc runs them: an initializer, three outputs, bool and int64
    outputs. The right outputs must pass; one f32 value off by 1e-4 and one
    bool flipped must each be caught. Returns what went wrong."""
    from onnx import helper

    x = np.array([[-1.5, 0.0, 2.7], [3.25, -0.5, 1.0]], dtype=np.float32)
    w = np.array([0.5, -1.0, 2.0], dtype=np.float32)
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "w"], ["y"]),
         helper.make_node("Cast", ["x"], ["b"], to=TensorProto.BOOL),
         helper.make_node("Cast", ["x"], ["i"], to=TensorProto.INT64)],
        "harness", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3]),
         helper.make_tensor_value_info("b", TensorProto.BOOL, [2, 3]),
         helper.make_tensor_value_info("i", TensorProto.INT64, [2, 3])],
        [numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    y, b, i = x + w, x != 0, x.astype(np.int64)
    y_off = y.copy()
    y_off[1, 2] *= 1 + 1e-4
    b_off = b.copy()
    b_off[0, 1] = True
    cases = [("harness_right", (y, b, i), PASS), ("harness_f32_off", (y_off, b, i), DIFFERS),
             ("harness_bool_off", (y, b_off, i), DIFFERS)]
    problems = []
    for name, outs, want in cases:
        folder = os.path.join(work, "self-check", name)
        write_node_test(folder, model, [("x", x)], list(zip(("y", "b", "i"), outs)))
        r = run_test(NodeTest(name, folder), driver, os.path.join(work, "self-check-run"))
        if r.outcome != want:
            problems.append(f"harness self-check {name}: {r.outcome} ({r.reason}), expected {want}")
    return problems


# --- The expected list ----------------------------------------------------


class Expected:
    def __init__(self, outcome, category, reason):
        self.outcome = outcome
        self.category = category
        self.reason = reason

    def line(self, name):
        return f"{name} | {self.outcome} | {self.category} | {self.reason}"


def read_expected(path):
    expected = {}
    if not os.path.exists(path):
        return expected
    with open(path) as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            parts = [p.strip() for p in line.split("|")]
            valid = len(parts) == 4 and parts[2] and (
                parts[1] in (REFUSED, DIFFERS) or (parts[1] == PASS and parts[2] == FIXED))
            if not valid:
                raise SystemExit(f"{path}:{number}: error: expected 'TEST | refused|differs | "
                                 f"CATEGORY | REASON' or 'TEST | pass | {FIXED} | INPUTS', "
                                 f"got '{line}'")
            expected[parts[0]] = Expected(*parts[1:])
    return expected


EXPECTED_HEADER = """\
# ONNX node tests (libonnx-testdata, ONNX 1.12) that ampc runs but does not
# pass as they are, with why: tests/onnx/check_conformance.py fails on any other test
# that does not pass, and on a test listed here that now passes.
# Tests whose op types are not all in ampc's ONNX op table are not listed:
# they are counted as "op type not supported".
#
# TEST | refused | CATEGORY | ampc's error message
# TEST | differs | REASON | (a difference out of ampc's scope, explained by hand)
# TEST | pass | inputs fixed at import | INPUT, ...
#
# The last kind passes once the inputs named are held constant at import
# (--fix-input): operands ampc needs when it imports (a Reshape's shape, a
# Clip's bounds, a Pow's exponent) that the test feeds as graph inputs,
# where an exported model holds them as initializers.
#
# Regenerate after adding ops or attributes (keeps the hand-written
# "differs" entries that still differ):
#   python3 tests/onnx/check_conformance.py \\
#       --driver build/bin/ampc-onnx-forward-driver --write-expected
"""


def write_expected(path, tests, results, old):
    lines, unexplained = [], []
    for t in tests:
        r = results.get(t.name)
        if r is None or r.outcome == UNSUPPORTED or (r.outcome == PASS and not r.fixed):
            continue
        if r.outcome == PASS:
            lines.append(Expected(PASS, FIXED, ", ".join(r.fixed)).line(t.name))
        elif r.outcome == REFUSED:
            lines.append(Expected(REFUSED, r.category, r.reason).line(t.name))
        elif r.outcome == DIFFERS and t.name in old and old[t.name].outcome == DIFFERS:
            lines.append(old[t.name].line(t.name))
        else:
            unexplained.append(f"{t.name}: {r.outcome}: {r.reason}")
    with open(path, "w") as f:
        f.write(EXPECTED_HEADER)
        for line in lines:
            f.write(line + "\n")
    return unexplained


# --- Summary and table ----------------------------------------------------


def coverage(tests, results):
    """Per label: counts of each outcome."""
    rows = collections.defaultdict(collections.Counter)
    for t in tests:
        rows[t.label][results[t.name].outcome] += 1
    return rows


def write_table(path, tests, results, missing_types):
    rows = coverage(tests, results)
    counts = collections.Counter(r.outcome for r in results.values())
    with open(path, "w") as f:
        f.write("# ONNX node test coverage\n\n")
        f.write("Generated by `tests/onnx/check_conformance.py --table` from ONNX 1.12's node tests "
                "(libonnx-testdata).\n\n")
        n_fixed = sum(1 for r in results.values() if r.outcome == PASS and r.fixed)
        f.write(f"{len(tests)} tests: {counts[PASS]} pass ({n_fixed} with inputs fixed at "
                f"import), {counts[REFUSED]} refused, "
                f"{counts[DIFFERS]} differ, {counts[CRASHED]} crashed, "
                f"{counts[UNSUPPORTED]} use an op type ampc does not map.\n\n")
        f.write("## Tests that ampc runs (every op type in its table)\n\n")
        f.write("| ONNX op | tests | pass | refused | differ | crashed | not run (op types missing) |\n")
        f.write("|---|---:|---:|---:|---:|---:|---:|\n")
        run_labels = sorted(l for l, c in rows.items() if sum(c.values()) != c[UNSUPPORTED])
        for label in run_labels:
            c = rows[label]
            f.write(f"| {label} | {sum(c.values())} | {c[PASS]} | {c[REFUSED]} | {c[DIFFERS]} | "
                    f"{c[CRASHED]} | {c[UNSUPPORTED]} |\n")
        f.write("\n## Op types ampc does not map, by the number of tests that need them\n\n")
        f.write("| ONNX op | tests |\n|---|---:|\n")
        for op, n in sorted(missing_types.items(), key=lambda kv: (-kv[1], kv[0])):
            f.write(f"| {op} | {n} |\n")


# --- Main -----------------------------------------------------------------


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--driver", required=True)
    parser.add_argument("--data", default=DEFAULT_DATA, help="the node tests' folder")
    parser.add_argument("--expected", default=DEFAULT_EXPECTED)
    parser.add_argument("--write-expected", action="store_true",
                        help="rewrite --expected from this build's results")
    parser.add_argument("--table", help="write a markdown coverage table here")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--only", help="run the tests whose name matches this regex")
    parser.add_argument("--keep", help="keep the work files in this folder")
    parser.add_argument("--verbose", action="store_true", help="print every test's result")
    args = parser.parse_args()

    if not os.path.isdir(args.data):
        print(f"{'FAIL' if MISSING == 1 else 'SKIP'}: no ONNX node tests at {args.data} "
              "(Debian's libonnx-testdata)")
        return MISSING
    if args.write_expected and args.only:
        print("error: --write-expected needs every test (drop --only)")
        return 2
    listed = subprocess.run([args.driver, "--list-onnx-ops"], capture_output=True, text=True)
    supported = set(listed.stdout.split())
    if listed.returncode != 0 or not supported:
        print(f"FAIL: '{args.driver} --list-onnx-ops' gave no op types: {listed.stderr}")
        return 1
    expected = read_expected(args.expected)
    tests = load_tests(args.data, args.only)

    results = {}
    missing_types = collections.Counter()
    runnable = []
    for t in tests:
        lacking = sorted(t.types - supported)
        if lacking:
            results[t.name] = Result(UNSUPPORTED, "op type not supported: " + ", ".join(lacking))
            missing_types.update(lacking)
        else:
            runnable.append(t)

    work = args.keep or tempfile.mkdtemp(prefix="ampc-onnx-conformance-")
    os.makedirs(work, exist_ok=True)
    try:
        failures = self_check(args.driver, work)
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            futures = {pool.submit(run_test, t, args.driver, work): t for t in runnable}
            for future in concurrent.futures.as_completed(futures):
                t = futures[future]
                try:
                    results[t.name] = future.result()
                except Exception as e:  # a harness bug must not pass as a refusal
                    results[t.name] = Result(CRASHED, f"harness: {type(e).__name__}: {e}")
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)

    for t in tests:
        r = results[t.name]
        e = expected.get(t.name)
        if args.verbose:
            print(f"{t.name}: {r.outcome}" + (f": {r.category}: {r.reason}" if r.reason else ""))
        if r.outcome == UNSUPPORTED:
            if e:
                failures.append(f"{t.name}: listed as {e.outcome}, but its op types are not all "
                                f"in the table ({r.reason}); drop it from the list")
            continue
        if r.outcome == PASS:
            fixed = ", ".join(r.fixed)
            if r.fixed and (e is None or e.outcome != PASS or e.reason != fixed):
                failures.append(f"{t.name}: passes with {fixed} fixed at import, listed "
                                + (f"as {e.outcome} ({e.category}: {e.reason})" if e else "nowhere")
                                + " (--write-expected)")
            elif e and not r.fixed:
                failures.append(f"{t.name}: passes now but is listed as {e.outcome} "
                                f"({e.category}): drop it from the list (--write-expected)")
            continue
        if r.outcome == CRASHED:
            failures.append(f"{t.name}: crashed: {r.reason}")
            continue
        if e is None:
            what = f"{r.category}: {r.reason}" if r.outcome == REFUSED else r.reason
            failures.append(f"{t.name}: {r.outcome} and not listed as expected: {what}")
        elif e.outcome != r.outcome:
            failures.append(f"{t.name}: listed as {e.outcome} ({e.category}), but {r.outcome}: {r.reason}")
        elif r.outcome == REFUSED and (e.category, e.reason) != (r.category, r.reason):
            failures.append(f"{t.name}: refused for another reason than listed: "
                            f"'{r.category} | {r.reason}', listed '{e.category} | {e.reason}'")
    if not args.only:
        names = {t.name for t in tests}
        for name in sorted(set(expected) - names):
            failures.append(f"{name}: listed, but no such node test in {args.data}")

    # The summary.
    counts = collections.Counter(r.outcome for r in results.values())
    rows = coverage(tests, results)
    table_ops = sorted(l for l in rows if l in supported)
    complete = [l for l in table_ops if rows[l][PASS] == sum(rows[l].values())]
    categories = collections.Counter(r.category for r in results.values() if r.outcome == REFUSED)
    n_fixed = sum(1 for r in results.values() if r.outcome == PASS and r.fixed)
    print(f"ONNX node tests: {len(tests)}: {counts[PASS]} pass ({n_fixed} with inputs fixed at "
          f"import), {counts[REFUSED]} refused, "
          f"{counts[DIFFERS]} differ, {counts[CRASHED]} crashed; "
          f"{counts[UNSUPPORTED]} use an op type not supported")
    for category, n in categories.most_common():
        print(f"  refused, {category}: {n}")
    print(f"op types in ampc's table with node tests: {len(table_ops)} of {len(supported)}; "
          f"passing every one of their tests: {len(complete)} ({', '.join(complete) or 'none'})")
    for label in table_ops:
        c = rows[label]
        print(f"  {label}: {c[PASS]}/{sum(c.values())} pass"
              + "".join(f", {c[k]} {k}" for k in (REFUSED, DIFFERS, CRASHED, UNSUPPORTED) if c[k]))
    if missing_types:
        top = ", ".join(f"{op} ({n})" for op, n in missing_types.most_common(12))
        print(f"op types not supported: {len(missing_types)}; the most needed: {top}")
    if args.table:
        write_table(args.table, tests, results, missing_types)
        print(f"wrote {args.table}")

    if args.write_expected:
        unexplained = write_expected(args.expected, tests, results, expected)
        print(f"wrote {args.expected}")
        for line in unexplained:
            print(f"FAIL {line} (fix it, or list it by hand as 'differs' with a reason)")
        return 1 if unexplained else 0
    for line in failures:
        print(f"FAIL {line}")
    print(f"{'FAIL' if failures else 'PASS'}: {len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
