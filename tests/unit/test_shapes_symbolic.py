"""Symbolic shapes: formulas of named input dims and the constraints layers impose.

These tests pin the private PyTorch APIs the symbolic pass relies on (torch 2.14.1): if an
upgrade changes them, the first tests here fail with a message saying which one.
"""

from __future__ import annotations

import inspect
from typing import Any

import pytest
import sympy
import torch

from torchatlas.presets import PRESETS
from torchatlas.shapes import Constraint, ShapeReport, SymbolicIssue, analysis, analyze_namespace
from torchatlas.shapes.symbolic import SymbolicInputs, _drop_redundant_parens, dim_names


def namespace_of(source: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": "pasted_model"}
    exec(compile(source, "<pasted model>", "exec"), namespace)  # trusted preset code only
    return namespace


def symbolic_report(key: str, shapes: list[list[int]], **params: Any) -> ShapeReport:
    preset = PRESETS[key]
    params = {"model": preset.model, "input_dtypes": [preset.dtypes] * len(shapes), **params}
    data = analyze_namespace(
        namespace_of(preset.source), input_shapes=shapes, symbolic=True, **params
    )
    return ShapeReport.from_dict(data)


def test_private_api_is_what_the_symbolic_pass_expects() -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import (
        DimDynamic,
        ShapeEnv,
        StatelessSymbolicContext,
    )

    assert torch.__version__.split("+")[0] == "2.14.1", "re-check symbolic.py on a torch upgrade"
    assert ShapeEnv(duck_shape=False).settings.duck_shape is False
    mode_parameters = inspect.signature(FakeTensorMode.__init__).parameters
    assert {"shape_env", "static_shapes", "allow_non_fake_inputs"} <= set(mode_parameters)
    env = ShapeEnv(duck_shape=False)
    mode = FakeTensorMode(shape_env=env, static_shapes=False, allow_non_fake_inputs=True)
    fake = mode.from_tensor(
        torch.empty(2, 7, device="meta"),
        symbolic_context=StatelessSymbolicContext(dynamic_sizes=[DimDynamic.DYNAMIC] * 2),
    )
    assert all(isinstance(size, torch.SymInt) for size in fake.shape)
    assert isinstance(fake.shape[0].node.expr, sympy.Symbol)
    with mode:
        out = torch.nn.functional.linear(fake, torch.empty(3, 7, device="meta"))
    assert isinstance(out.shape[0], torch.SymInt)
    guards = [guard.expr for guard in env.guards]
    assert any(isinstance(expr, sympy.Eq) for expr in guards), guards  # in_features = 7


def test_dim_names() -> None:
    assert dim_names([[1, 3, 224, 224]], ["float32"]) == [["N", "C", "H", "W"]]
    assert dim_names([[8, 20]], ["long"]) == [["N", "L"]]
    assert dim_names([[8, 20, 64]], ["float32"]) == [["N", "L", "E"]]
    assert dim_names([[2, 8], [2, 5]], ["float32", "long"]) == [["N", "F"], ["N2", "L2"]]


def test_redundant_parentheses_go() -> None:
    assert _drop_redundant_parens("(((W - 1)//4)) + 1") == "((W - 1)//4) + 1"
    assert _drop_redundant_parens("((H//2)) - 2") == "(H//2) - 2"
    assert _drop_redundant_parens("(a + b)*(c + d)") == "(a + b)*(c + d)"


def test_recipe_net_formulas_and_the_fc1_constraint() -> None:
    report = symbolic_report("net", [[1, 3, 32, 32]])
    assert report.error is None and report.symbolic_issue is None
    assert report.dim_names == [["N", "C", "H", "W"]]
    by_name = {(row.name, row.type): row for row in report.layers}
    assert by_name[("conv1", "Conv2d")].symbolic_output_shapes == [["N", "6", "H − 4", "W − 4"]]
    pooled = [row for row in report.layers if row.name == "pool"]
    assert pooled[0].symbolic_output_shapes == [["N", "6", "(H//2) − 2", "(W//2) − 2"]]
    assert pooled[1].symbolic_output_shapes == [["N", "16", "(H//4) − 3", "(W//4) − 3"]]
    flatten = by_name[("", "torch.flatten")]
    assert flatten.symbolic_output_shapes == [["N", "16·((H//4) − 3)·((W//4) − 3)"]]
    assert by_name[("fc1", "Linear")].constraints == ["16·((H//4) − 3)·((W//4) − 3) = 400"]
    assert Constraint("conv1", "C = 3") in report.constraints
    assert Constraint("fc1", "16·((H//4) − 3)·((W//4) − 3) = 400") in report.constraints
    assert report.symbolic_outputs == [["N", "10"]]
    # The concrete table is untouched by the symbolic pass.
    assert by_name[("conv1", "Conv2d")].output_shapes == [[1, 6, 28, 28]]
    assert report.flops > 0


def test_formulas_agree_with_concrete_shapes_at_other_sizes() -> None:
    """Evaluate each formula at a second input size and compare with a meta run there."""
    report = symbolic_report("resnet_generator", [[2, 3, 64, 64]])
    other = symbolic_report("resnet_generator", [[3, 3, 96, 80]])
    values = {"N": 3, "C": 3, "H": 96, "W": 80}
    for row, concrete in zip(report.layers, other.layers, strict=True):
        for formula, shape in zip(row.symbolic_output_shapes, concrete.output_shapes, strict=True):
            evaluated = [_evaluate(size, values) for size in formula]
            assert evaluated == shape, (row.name, formula)


def _evaluate(formula: str, values: dict[str, int]) -> int:
    python = formula.replace("·", "*").replace("−", "-")
    return int(eval(python, {"__builtins__": {}}, dict(values)))  # our own formula strings


def test_builtin_models_get_formulas() -> None:
    report = symbolic_report("unet", [[1, 3, 64, 64]])
    assert report.symbolic_outputs == [["N", "2", "H", "W"]]
    assert any("H//8" in item.constraint for item in report.constraints)


def test_symbolic_inputs_keep_equal_sizes_apart() -> None:
    inputs = SymbolicInputs([[1, 3, 32, 32]], [torch.float32], [["N", "C", "H", "W"]])
    assert [inputs.size(size) for size in inputs.tensors[0].shape] == ["N", "C", "H", "W"]


def test_symbolic_failure_keeps_the_table(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("symbolic shapes changed\nsecond line")

    monkeypatch.setattr(analysis, "SymbolicInputs", broken)
    report = symbolic_report("net", [[1, 3, 32, 32]])
    assert report.error is None
    assert report.layers[1].output_shapes == [[1, 6, 28, 28]]
    assert report.layers[1].symbolic_output_shapes is None
    assert report.symbolic_issue is SymbolicIssue.FAILED
    assert report.symbolic_detail.endswith("RuntimeError: symbolic shapes changed")


def test_a_model_that_takes_another_path_with_symbols_keeps_output_formulas_only() -> None:
    """A batch of 1 is analysed as N = 2 symbolically (1 would be specialised), so a loop over
    the batch runs twice: the rows differ, and only the outputs get formulas."""

    class PerSample(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = torch.nn.Linear(4, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            for _ in range(x.shape[0]):
                x = self.fc(x)
            return x

    report = analysis.analyze_module(PerSample, [[1, 4]], symbolic=True)
    assert report.error is None and report.symbolic_issue is SymbolicIssue.PATH_DIFFERS
    assert report.symbolic_outputs and all(
        row.symbolic_output_shapes is None for row in report.layers
    )
    assert report.layers[1].output_shapes == [[1, 4]]  # the concrete table is complete
