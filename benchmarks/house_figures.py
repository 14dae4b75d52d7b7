"""Figures of the package's shape: parameters per function, kind dispatch, result fields, layout.

python benchmarks/house_figures.py [PACKAGE_DIR]
"""
from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

#: A decision on the kind of an analysis: a comparison of the target's string (``mode ==``/``in``/``is``), a test of
#: a result's optional part (weighting, clustering, survival) for None, or isinstance on a kind or a part.
KIND_TESTS = re.compile(
    r"\bmode\s*(==|!=|in\b|not in\b|is\b)|"
    r"\b(weighting|clustering|survival)\s+is\s+(not\s+)?None|"
    r"getattr\([^)]*[\"'](weighting|clustering|survival)[\"'][^)]*\)\s+is\b|"
    r"isinstance\([^)]*(Survival|Cluster|Weight|Grouped)")
#: A test of a loose argument's presence (``weights is None``, ``cluster is not None``, ...): a kind decision below
#: the front doors, which resolve the Design; at a front door (FRONT_DOORS) a check of what was passed.
ARGUMENT_TESTS = re.compile(r"\b(horizon|cluster|by|prevalence|weights)\s+is\s+(not\s+)?None")
#: The modules whose functions are front doors: their argument-presence checks are not kind decisions.
FRONT_DOORS = ("api/", "cli.py", "sklearn.py")
#: The issue's first measure (33), kept to compare with it: every line of KIND_TESTS or ARGUMENT_TESTS anywhere.
BROAD_KIND_TESTS = re.compile(
    r"\bmode\s*(==|!=|in\b|not in\b)|\.mode\s*(==|!=|in\b|not in\b)|"
    r"\b(horizon|weighting|clustering|survival|cluster|by|prevalence|weights)\s+is\s+(not\s+)?None|"
    r"isinstance\([^)]*(Survival|Cluster|Weight|Grouped)")


def _kind_lines(text: str, rel: str, broad: bool = False) -> int:
    """Lines of ``text`` (module ``rel`` of the package) that decide the kind of an analysis (comments left out)."""
    front = rel.startswith(FRONT_DOORS)
    lines = [ln for ln in text.splitlines() if not ln.lstrip().startswith("#")]
    if broad:
        return sum(bool(BROAD_KIND_TESTS.search(ln)) for ln in lines)
    return sum(bool(KIND_TESTS.search(ln) or (not front and ARGUMENT_TESTS.search(ln))) for ln in lines)


def _params(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    a = fn.args
    names = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs]
    names = [n for n in names if n not in ("self", "cls")]
    return len(names) + (a.vararg is not None) + (a.kwarg is not None)


def figures(pkg: Path) -> dict:
    files = sorted(p for p in pkg.rglob("*.py"))
    many, kind_files, kind_lines, n_funcs, broad_files = [], {}, 0, 0, {}
    fields = None
    for path in files:
        text = path.read_text()
        tree = ast.parse(text)
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n_funcs += 1
                if _params(node) >= 10:
                    many.append((str(path.relative_to(pkg.parent)), node.name, _params(node)))
            if isinstance(node, ast.ClassDef) and node.name == "CalibrationResult":
                fields = sum(isinstance(s, ast.AnnAssign) for s in node.body)
        rel = path.relative_to(pkg).as_posix()
        hits, broad = _kind_lines(text, rel), _kind_lines(text, rel, broad=True)
        if hits:
            kind_files[str(path.relative_to(pkg.parent))] = hits
            kind_lines += hits
        if broad:
            broad_files[str(path.relative_to(pkg.parent))] = broad
    top = [p.name for p in pkg.glob("*.py")]
    return {"functions": n_funcs, "functions_with_10_or_more_parameters": len(many),
            "largest_signatures": sorted(many, key=lambda t: -t[2])[:10],
            "files_testing_the_kind": len(kind_files), "kind_test_lines": kind_lines,
            "calibration_result_fields": fields, "top_level_modules": len(top),
            "kind_files": kind_files,
            "files_testing_the_kind_broad": len(broad_files), "kind_test_lines_broad": sum(broad_files.values()),
            "kind_files_broad": broad_files}


if __name__ == "__main__":
    import json
    print(json.dumps(figures(Path(sys.argv[1] if len(sys.argv) > 1 else "calibtest")), indent=1))
