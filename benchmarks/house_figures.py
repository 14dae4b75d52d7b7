"""Figures of the package's shape: parameters per function, kind dispatch, result fields, layout.

python benchmarks/house_figures.py [PACKAGE_DIR]
"""
from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

KIND_TESTS = re.compile(
    r"\bmode\s*(==|!=|in\b|not in\b)|\.mode\s*(==|!=|in\b|not in\b)|"
    r"\b(horizon|weighting|clustering|survival|cluster|by|prevalence|weights)\s+is\s+(not\s+)?None|"
    r"isinstance\([^)]*(Survival|Cluster|Weight|Grouped)")


def _params(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    a = fn.args
    names = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs]
    names = [n for n in names if n not in ("self", "cls")]
    return len(names) + (a.vararg is not None) + (a.kwarg is not None)


def figures(pkg: Path) -> dict:
    files = sorted(p for p in pkg.rglob("*.py"))
    many, kind_files, kind_lines, n_funcs = [], {}, 0, 0
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
        hits = [ln for ln in text.splitlines() if KIND_TESTS.search(ln) and not ln.lstrip().startswith("#")]
        if hits:
            kind_files[str(path.relative_to(pkg.parent))] = len(hits)
            kind_lines += len(hits)
    top = [p.name for p in pkg.glob("*.py")]
    return {"functions": n_funcs, "functions_with_10_or_more_parameters": len(many),
            "largest_signatures": sorted(many, key=lambda t: -t[2])[:10],
            "files_testing_the_kind": len(kind_files), "kind_test_lines": kind_lines,
            "calibration_result_fields": fields, "top_level_modules": len(top),
            "kind_files": kind_files}


if __name__ == "__main__":
    import json
    print(json.dumps(figures(Path(sys.argv[1] if len(sys.argv) > 1 else "calibtest")), indent=1))
