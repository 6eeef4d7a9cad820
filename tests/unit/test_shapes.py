"""The shape explorer's engine, in-process on TRUSTED code (our own presets and test models).

The sandbox path (pasted code in a worker) is tested in test_shapes_sandbox.py.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from torchatlas.i18n import LANGUAGES, has_key, translate
from torchatlas.presets import PRESETS
from torchatlas.shapes import (
    ErrorKind,
    RefusalCode,
    RowKind,
    ShapeError,
    ShapeReport,
    SymbolicIssue,
    analyze_module,
    analyze_namespace,
    format_shape,
    parse_constructor,
    parse_shapes,
    why_meta_namespace,
)
from torchatlas.shapes.analysis import AnalysisError
from torchatlas.shapes.trace import tensors_in

FILENAME = "<pasted model>"


def namespace_of(source: str) -> dict[str, Any]:
    """Trusted test code only: the app never executes source in-process."""
    namespace: dict[str, Any] = {"__name__": "pasted_model"}
    exec(compile(source, FILENAME, "exec"), namespace)
    return namespace


def analyze(source: str, shapes: list[list[int]], **params: Any) -> ShapeReport:
    data = analyze_namespace(namespace_of(source), input_shapes=shapes, **params)
    json.dumps(data)  # the job's result must survive the sandbox's JSON round trip
    return ShapeReport.from_dict(data)


def preset_report(key: str, shapes: list[list[int]] | None = None, **params: Any) -> ShapeReport:
    preset = PRESETS[key]
    shapes = shapes or parse_shapes(preset.shapes)
    params = {"model": preset.model, "input_dtypes": [preset.dtypes] * len(shapes), **params}
    return analyze(preset.source, shapes, **params)


def real_module_shapes(model: nn.Module, inputs: list[torch.Tensor]) -> list[tuple[str, list]]:
    """Ground truth: output shapes of every module call in a REAL CPU forward."""
    names = {id(module): name for name, module in model.named_modules()}
    seen: list[tuple[str, list]] = []

    def record(module: nn.Module, args: Any, output: Any) -> None:
        seen.append((names[id(module)], [list(t.shape) for t in tensors_in(output)]))

    handles = [module.register_forward_hook(record) for module in model.modules()]
    with torch.no_grad():
        model.eval()(*inputs)
    for handle in handles:
        handle.remove()
    return seen


def meta_module_shapes(report: ShapeReport) -> list[tuple[str, list]]:
    # Hooks fire children-first in a real run; the report is in call order (parents first).
    rows = [row for row in report.layers if row.kind == "module"]
    finished: list[tuple[str, list]] = []
    stack: list[Any] = []
    for row in rows:
        while stack and stack[-1].depth >= row.depth:
            done = stack.pop()
            finished.append((done.name, done.output_shapes))
        stack.append(row)
    while stack:
        done = stack.pop()
        finished.append((done.name, done.output_shapes))
    return finished


# ---------------------------------------------------------------- parsing


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1×3×224×224", [[1, 3, 224, 224]]),
        ("1, 3, 224, 224", [[1, 3, 224, 224]]),
        ("(1, 3, 224, 224), (1, 10)", [[1, 3, 224, 224], [1, 10]]),
        ("[8, 20]", [[8, 20]]),
        ("2x3 ; 4*5", [[2, 3], [4, 5]]),
        ("1024 × 3 × 65536 × 65536", [[1024, 3, 65536, 65536]]),
    ],
)
def test_parse_shapes(text: str, expected: list[list[int]]) -> None:
    assert parse_shapes(text) == expected


@pytest.mark.parametrize("text", ["", "1×a×3", "0×3", "1×" + "×".join(["2"] * 9), "-1×3"])
def test_parse_shapes_rejects_with_a_reason(text: str) -> None:
    with pytest.raises(AnalysisError) as caught:
        parse_shapes(text)
    assert caught.value.error.kind == "bad_shape"
    assert "1×3×224×224" in caught.value.error.hint


def test_format_shape() -> None:
    assert format_shape([1, 3, 224, 224]) == "1 × 3 × 224 × 224"
    assert format_shape([]) == "scalar"


def test_parse_constructor_takes_literals_only() -> None:
    assert parse_constructor("ResNetGenerator(n_blocks=6)") == (
        "ResNetGenerator",
        [],
        {"n_blocks": 6},
    )
    assert parse_constructor("Net") == ("Net", [], {})
    assert parse_constructor("M(3, [1, 2], act='relu')") == ("M", [3, [1, 2]], {"act": "relu"})
    for bad in ["Net(open('x'))", "os.system('ls')", "Net(**k)", "Net(", "Net(x)", "1 + 2"]:
        with pytest.raises(AnalysisError) as caught:
            parse_constructor(bad)
        assert caught.value.error.kind == "bad_constructor", bad


# ---------------------------------------------------------------- correctness against a real run


@pytest.mark.parametrize(
    ("key", "shapes"),
    [
        ("net", [[2, 3, 32, 32]]),
        ("resnet_generator", [[1, 3, 64, 64]]),
        ("unet", [[1, 3, 48, 40]]),
        ("lstm_tagger", [[3, 7]]),
        ("transformer_encoder", [[2, 9]]),
        ("resnet18", [[1, 3, 64, 64]]),
    ],
)
def test_every_module_shape_matches_a_real_forward(key: str, shapes: list[list[int]]) -> None:
    preset = PRESETS[key]
    report = preset_report(key, shapes)
    assert report.error is None, report.error
    namespace = namespace_of(preset.source)
    name, args, kwargs = parse_constructor(preset.model)
    torch.manual_seed(0)
    model = namespace[name](*args, **kwargs)
    dtype = torch.long if preset.dtypes == "long" else torch.float32
    inputs = [
        torch.zeros(s, dtype=dtype) if dtype == torch.long else torch.randn(s) for s in shapes
    ]
    expected = real_module_shapes(model, inputs)
    assert meta_module_shapes(report) == expected
    real_output = model(*inputs)
    assert report.outputs == [list(real_output.shape)]


def test_totals_match_the_model_and_flop_counter() -> None:
    report = preset_report("net", [[4, 3, 32, 32]])
    namespace = namespace_of(PRESETS["net"].source)
    model = namespace["Net"]()
    assert report.total_params == sum(p.numel() for p in model.parameters()) == 62006
    assert report.trainable_params == report.total_params
    assert report.param_bytes == 4 * report.total_params
    with FlopCounterMode(display=False) as counter:
        model(torch.randn(4, 3, 32, 32))
    assert report.flops == counter.get_total_flops() > 0
    # The root row includes everything; leaf FLOPs add up to the total.
    assert report.layers[0].flops == report.flops
    assert sum(row.flops for row in report.layers if row.leaf) == report.flops
    fc1 = next(row for row in report.layers if row.name == "fc1")
    assert fc1.params == 400 * 120 + 120
    assert fc1.flops == 2 * 4 * 400 * 120
    assert fc1.activation_bytes == 4 * 120 * 4
    assert report.activation_bytes == sum(r.activation_bytes for r in report.layers if r.leaf)


def test_frozen_parameters_are_not_trainable() -> None:
    class Frozen(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.body = nn.Linear(4, 4)
            self.head = nn.Linear(4, 2)
            self.body.requires_grad_(False)

        def forward(self, x):
            return self.head(self.body(x))

    report = analyze_module(Frozen, [[1, 4]])
    assert report.total_params == 20 + 10
    assert report.trainable_params == 10


def test_functional_ops_are_rows_attributed_to_their_module() -> None:
    report = preset_report("unet", [[1, 3, 100, 100]])  # 100 is not a multiple of 16
    assert report.error is None
    cats = [row for row in report.layers if row.type == "torch.cat"]
    assert [row.name for row in cats] == ["up1", "up2", "up3", "up4"]
    assert all(row.kind == "function" for row in cats)
    up1 = next(row for row in report.layers if row.name == "up1" and row.kind == "module")
    assert cats[0].depth == up1.depth + 1
    assert cats[0].input_shapes == [[1, 256, 12, 12], [1, 256, 12, 12]]
    assert cats[0].output_shapes == [[1, 512, 12, 12]]
    interpolations = [row for row in report.layers if row.type == "F.interpolate"]
    assert interpolations, "odd sizes must be matched with F.interpolate"
    assert report.outputs == [[1, 2, 100, 100]]
    net = preset_report("net", [[1, 3, 32, 32]])
    flatten = next(row for row in net.layers if row.type == "torch.flatten")
    assert (flatten.name, flatten.output_shapes, flatten.line) == ("", [[1, 400]], 20)


def test_ops_inside_builtin_layers_are_not_rows() -> None:
    report = preset_report("transformer_encoder", [[2, 9]])
    functions = {row.type for row in report.layers if row.kind == "function"}
    assert "F.linear" not in functions  # inside nn.Linear: the layer's own row covers it
    assert {"Tensor.__getitem__", "Tensor.add", "Tensor.mean"} <= functions
    assert all(row.name == "" for row in report.layers if row.kind == "function")


def test_attention_is_a_row() -> None:
    class Attention(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.qkv = nn.Linear(32, 96)

        def forward(self, x):
            q, k, v = self.qkv(x).chunk(3, dim=-1)
            return torch.nn.functional.scaled_dot_product_attention(q, k, v)

    report = analyze_module(Attention, [[2, 10, 32]])
    attention = next(r for r in report.layers if r.type == "F.scaled_dot_product_attention")
    assert attention.input_shapes == [[2, 10, 32]] * 3
    assert attention.output_shapes == [[2, 10, 32]]
    assert attention.flops == 2 * (2 * 2 * 10 * 10 * 32)  # QK^T and AV


def test_huge_inputs_cost_nothing() -> None:
    started = time.perf_counter()
    report = preset_report("net", [[1024, 3, 65536, 65536]])
    assert time.perf_counter() - started < 5
    assert report.error is not None  # fc1 cannot take that many features…
    assert report.error.kind == "linear_in_features"
    conv1 = next(row for row in report.layers if row.name == "conv1")
    assert conv1.output_shapes == [[1024, 6, 65532, 65532]]
    assert conv1.activation_bytes == 1024 * 6 * 65532 * 65532 * 4  # 105 TB, never allocated


def test_inputs_are_created_on_meta_never_on_the_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    model = nn.Linear(3, 2).to("meta")
    created: list[tuple[str, int]] = []
    factories = {name: getattr(torch, name) for name in ("empty", "zeros", "rand", "randn", "ones")}

    def spy_on(name: str) -> Any:
        def spy(*args: Any, **kwargs: Any) -> torch.Tensor:
            tensor = factories[name](*args, **kwargs)
            created.append((tensor.device.type, tensor.numel()))
            return tensor

        return spy

    for name in factories:
        monkeypatch.setattr(torch, name, spy_on(name))
    report = analyze_module(model, [[5, 3]])
    assert report.outputs == [[5, 2]]
    assert ("meta", 15) in created
    assert [entry for entry in created if entry[0] != "meta"] == []


def test_model_is_built_on_meta() -> None:
    namespace = namespace_of(PRESETS["net"].source)
    built: list[torch.device] = []

    class Spy(namespace["Net"]):
        def forward(self, x):
            built.append(self.conv1.weight.device)
            return super().forward(x)

    report = analyze_module(Spy, [[1, 3, 32, 32]])
    assert report.error is None
    assert built == [torch.device("meta")]


def test_long_inputs_for_token_ids() -> None:
    report = preset_report("lstm_tagger", [[8, 20]])
    assert report.input_dtypes == ["long"]
    assert report.outputs == [[8, 20, 17]]
    lstm = next(row for row in report.layers if row.name == "lstm")
    assert lstm.output_shapes == [[8, 20, 128], [1, 8, 128], [1, 8, 128]]


def test_multiple_inputs() -> None:
    class TwoInputs(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.image = nn.Linear(8, 4)
            self.text = nn.Embedding(100, 4)

        def forward(self, image, tokens):
            return torch.cat([self.image(image), self.text(tokens).mean(1)], dim=-1)

    report = analyze_module(TwoInputs, [[2, 8], [2, 5]], ["float32", "long"])
    assert report.error is None
    assert report.outputs == [[2, 8]]
    assert report.layers[0].input_shapes == [[2, 8], [2, 5]]


def test_report_round_trips_through_json() -> None:
    report = preset_report("net", [[1, 3, 32, 32]], symbolic=True)
    data = json.loads(json.dumps(report.to_dict()))
    assert ShapeReport.from_dict(data) == report
    totals = {"total_params", "trainable_params", "param_bytes", "activation_bytes", "flops"}
    assert set(data) >= {"layers", "outputs", "error", *totals}
    row_keys = {"name", "type", "input_shapes", "output_shapes", "params", "trainable_params"}
    assert set(data["layers"][1]) >= {"flops", "activation_bytes", "depth", *row_keys}


@pytest.mark.parametrize("key", sorted(PRESETS))
def test_every_preset_runs(key: str) -> None:
    report = preset_report(key)
    if key == "net_broken":
        assert report.error is not None and report.error.kind == "linear_in_features"
        return
    assert report.error is None, report.error
    assert report.outputs and report.layers and report.total_params > 0


# ---------------------------------------------------------------- errors that teach


def test_linear_mismatch_names_the_layer_and_the_fix() -> None:
    report = preset_report("net_broken")
    error = report.error
    assert error is not None
    assert error.kind == "linear_in_features"
    assert error.layer == "fc1"
    assert error.input_shapes == [[1, 256]]
    assert error.params["fix"] == "fc1 = nn.Linear(256, 120)"
    assert "nn.Linear(256, 120)" in error.hint
    source_lines = PRESETS["net_broken"].source.splitlines()
    assert "self.fc1(x)" in source_lines[error.line - 1]
    # The partial table runs up to the failing layer, which is marked.
    assert [row.name for row in report.layers if row.kind == "module"][-1] == "fc1"
    assert report.layers[-1].failed and report.layers[-1].name == "fc1"
    assert report.layers[-2].output_shapes == [[1, 256]]


def test_linear_inside_sequential_is_named_by_index() -> None:
    model = nn.Sequential(nn.Flatten(), nn.Linear(10, 3)).to("meta")
    error = analyze_module(model, [[1, 12]]).error
    assert error is not None and error.layer == "model[1]"
    assert error.params["fix"] == "model[1] = nn.Linear(12, 3)"


def test_conv_channel_mismatch_gives_the_channel_count() -> None:
    report = preset_report("net", [[1, 1, 32, 32]])
    error = report.error
    assert error is not None and error.kind == "conv_in_channels"
    assert (error.layer, error.params["got"], error.params["expected"]) == ("conv1", 1, 3)
    assert error.params["fix"] == "conv1 = nn.Conv2d(1, 6, kernel_size=5)"


def test_conv_fix_keeps_stride_and_padding() -> None:
    model = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1)).to("meta")
    error = analyze_module(model, [[1, 4, 16, 16]]).error
    assert error is not None
    assert error.params["fix"] == "model[0] = nn.Conv2d(4, 8, kernel_size=3, stride=2, padding=1)"
    assert error.params["fix"].endswith("nn.Conv2d(4, 8, kernel_size=3, stride=2, padding=1)")


DATA_DEPENDENT = {
    "item": "n = int(x.sum().item())\n        return x[:, :n]",
    "if_tensor": "if x.sum() > 0:\n            return x\n        return -x",
    "nonzero": "return x.nonzero()",
    "mask": "return x[x > 0]",
}


@pytest.mark.parametrize("body", list(DATA_DEPENDENT))
def test_data_dependent_ops_explain_why_meta_cannot_know(body: str) -> None:
    source = (
        "import torch\nimport torch.nn as nn\n\n\nclass M(nn.Module):\n"
        "    def forward(self, x):\n        " + DATA_DEPENDENT[body] + "\n"
    )
    error = analyze(source, [[2, 3]]).error
    assert error is not None and error.kind == "data_dependent", error
    assert "no values" in error.message
    assert "torch.where" in error.hint
    assert error.line == 7


def test_wrong_number_of_inputs_shows_the_forward_signature() -> None:
    error = preset_report("net", [[1, 3, 32, 32], [1, 10]]).error
    assert error is not None and error.kind == "inputs_mismatch"
    assert error.params["signature"] == "forward(x)"
    assert (error.params["expected"], error.params["got"]) == (1, 2)
    assert error.line == 17  # the page marks `def forward(self, x):`


def test_wrong_number_of_inputs_on_a_builtin_model_has_no_line() -> None:
    error = preset_report("resnet18", [[1, 3, 224, 224], [1, 3]]).error
    assert error is not None and error.kind == "inputs_mismatch"
    assert error.line is None  # torchvision's forward is not in the pasted code


def test_no_module_found() -> None:
    error = analyze("import math\n\nx = math.pi\n", [[1, 3]]).error
    assert error is not None and error.kind == "no_module"


def test_default_model_is_the_last_module_class() -> None:
    report = preset_report("resnet_generator", [[1, 3, 64, 64]], model=None)
    assert report.model == "ResNetGenerator()"
    assert report.error is None
    assert sum(1 for row in report.layers if row.type == "ResNetBlock") == 9


def test_constructor_that_needs_arguments() -> None:
    source = "import torch.nn as nn\n\n\nclass M(nn.Module):\n    def __init__(self, width):\n"
    source += "        super().__init__()\n        self.fc = nn.Linear(width, 2)\n\n"
    source += "    def forward(self, x):\n        return self.fc(x)\n"
    error = analyze(source, [[1, 3]]).error
    assert error is not None and error.kind == "constructor_args"
    assert error.params["signature"] == "M(width)"
    assert error.params["example"] == "M(width=…)"
    assert error.line == 5  # the page marks `def __init__(self, width):`
    assert analyze(source, [[1, 3]], model="M(width=3)").outputs == [[1, 2]]


def test_constructor_arguments_of_an_inherited_init_or_a_builder_function() -> None:
    source = "import torch.nn as nn\n\n\nclass Base(nn.Module):\n    def __init__(self, width):\n"
    source += "        super().__init__()\n        self.fc = nn.Linear(width, 2)\n\n"
    source += "    def forward(self, x):\n        return self.fc(x)\n\n\n"
    source += "class M(Base):\n    pass\n\n\n"
    source += "def make(depth):\n    return M(depth)\n"
    inherited = analyze(source, [[1, 3]], model="M()").error
    assert inherited is not None and inherited.kind == "constructor_args"
    assert inherited.line == 5  # Base.__init__ is the one that needs `width`
    builder = analyze(source, [[1, 3]], model="make()").error
    assert builder is not None and builder.kind == "constructor_args"
    assert builder.line == 17


def test_unknown_model_name_lists_the_classes() -> None:
    error = preset_report("net", model="Nett()").error
    assert error is not None and error.kind == "model_not_found"
    assert error.params["available"] == "Net"


def test_pretrained_weights_are_refused_with_a_reason() -> None:
    error = preset_report("resnet18", model="resnet18(weights='DEFAULT')").error
    assert error is not None and error.kind == "weights_not_needed"


def test_error_in_init_points_at_the_line() -> None:
    source = "import torch.nn as nn\n\n\nclass M(nn.Module):\n    def __init__(self):\n"
    source += "        super().__init__()\n        self.fc = nn.Linear(4, 'two')\n"
    error = analyze(source, [[1, 4]]).error
    assert error is not None and error.kind == "constructor_error"
    assert error.line == 7


def test_embedding_with_float_ids() -> None:
    error = preset_report("lstm_tagger", [[8, 20]], input_dtypes=["float32"]).error
    assert error is not None and error.kind == "embedding_dtype"
    assert error.layer == "word_embeddings"


def test_other_failures_still_name_the_op_and_shapes() -> None:
    source = "import torch\nimport torch.nn as nn\n\n\nclass M(nn.Module):\n"
    source += "    def forward(self, x):\n        return x.view(5, -1)\n"
    error = analyze(source, [[2, 3]]).error
    assert error is not None and error.kind == "forward_error"
    assert error.params["op"] == "Tensor.view"
    assert error.params["shapes"] == "2×3"
    assert error.line == 7


def _model(init: str = "", forward: str = "return x") -> str:
    """Source of a model ``M`` with these bodies (``init`` after ``super().__init__()``)."""
    source = "import torch\nimport torch.nn as nn\n\n\nclass M(nn.Module):\n"
    source += "    def __init__(self):\n        super().__init__()\n"
    source += "".join(f"        {line}\n" for line in init.splitlines())
    return source + f"\n    def forward(self, x):\n        {forward}\n"


ENGINE_ERRORS: dict[str, Any] = {
    "linear": lambda: preset_report("net_broken").error,
    "conv": lambda: preset_report("net", [[1, 1, 32, 32]]).error,
    "embedding": lambda: preset_report("lstm_tagger", [[8, 20]], input_dtypes=["float32"]).error,
    "inputs": lambda: preset_report("net", [[1, 3, 32, 32], [1, 10]]).error,
    "not_found": lambda: preset_report("net", model="Nett()").error,
    "weights": lambda: preset_report("resnet18", model="resnet18(weights='DEFAULT')").error,
    "no_module": lambda: analyze("import math\n", [[1, 3]]).error,
    "data_dependent": lambda: analyze(_model(forward="return x[x > 0]"), [[2, 3]]).error,
    "forward": lambda: analyze(_model(forward="return x.view(5, -1)"), [[2, 3]]).error,
    "matmul": lambda: analyze(_model(forward="return x @ torch.ones(4, 2)"), [[2, 3]]).error,
    "constructor_args": lambda: analyze(_model(), [[1, 3]], model="M(3)").error,
    "constructor_error": lambda: analyze(_model("self.fc = nn.Linear(4, 'two')"), [[1, 4]]).error,
    "not_a_module": lambda: analyze("def make():\n    return 3\n", [[1, 3]], model="make()").error,
    "norm": lambda: (
        analyze(_model("self.bn = nn.BatchNorm2d(16)", "return self.bn(x)"), [[1, 3, 8, 8]]).error
    ),
    "bad_shape": lambda: _raised(lambda: parse_shapes("1×a")),
    "no_shape": lambda: _raised(lambda: parse_shapes(";")),
    "bad_constructor": lambda: _raised(lambda: parse_constructor("Net(x)")),
    "too_many_inputs": lambda: analyze_module(nn.Identity(), [[1]] * 9).error,
    "bad_dtype": lambda: analyze_module(nn.Identity(), [[1]], ["complex"]).error,
    "too_long": lambda: _raised(lambda: parse_shapes("1" * 501)),
}


def _raised(parse: Any) -> ShapeError:
    with pytest.raises(AnalysisError) as caught:
        parse()
    return caught.value.error


@pytest.mark.parametrize("case", sorted(ENGINE_ERRORS))
def test_every_engine_error_is_a_code_whose_texts_are_complete(case: str) -> None:
    """The engine says what went wrong with a code and parameters only; the tables turn them
    into complete sentences in every language (no placeholder left unfilled)."""
    error = ENGINE_ERRORS[case]()
    assert isinstance(error, ShapeError) and isinstance(error.kind, ErrorKind), error
    assert not hasattr(error, "__dict__") or "message" not in vars(error)  # no stored sentence
    for lang in LANGUAGES:
        for part in ("title", "message", "hint"):
            text = error.text(lang, part)
            assert text and text != f"shapes.errors.{error.kind.value}.{part}", (case, part)
            assert "{" not in text.replace("{}", ""), (case, lang, part, text)
    assert str(error).startswith(error.kind.value)  # a notebook reads the English


def test_every_code_has_text_in_every_language() -> None:
    for lang in LANGUAGES:
        for kind in ErrorKind:
            for part in ("title", "message", "hint"):
                assert has_key(f"shapes.errors.{kind.value}.{part}", lang), (lang, kind, part)
        for code in RefusalCode:
            assert has_key(f"shapes.refusals.{code.value}", lang), (lang, code)
        for issue in SymbolicIssue:
            assert has_key(f"shapes.symbolic.issues.{issue.value}", lang), (lang, issue)
    assert translate("shapes.errors.bad_shape.message", "en", text="1×a", max_dims=8).startswith(
        "Could not read “1×a”"
    )


def test_rows_are_frozen_and_their_kinds_are_enums() -> None:
    report = preset_report("unet", [[1, 3, 32, 32]])
    assert {row.kind for row in report.layers} == {RowKind.MODULE, RowKind.FUNCTION}
    with pytest.raises(AttributeError):
        report.layers[0].name = "changed"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        report.error = None  # type: ignore[misc]
    assert json.loads(json.dumps(report.to_dict()))["layers"][0]["kind"] == "module"


def test_a_job_never_raises() -> None:
    data = analyze_namespace({}, input_shapes=[["x"]])  # type: ignore[list-item]
    assert data["error"]["kind"] in {"no_module", "bad_shape"}


# ---------------------------------------------------------------- why meta?


def test_why_meta_times_real_and_meta_runs() -> None:
    namespace = namespace_of(PRESETS["net"].source)
    data = why_meta_namespace(namespace, input_shapes=[[1, 3, 32, 32]], model="Net()",
                              batches=(1, 8, 64, 65536), real_budget_s=2.0)  # fmt: skip
    json.dumps(data)
    assert data["error"] is None
    points = data["points"]
    assert [p["batch"] for p in points] == [1, 8, 64, 65536]
    assert points[0]["real_s"] is not None and points[0]["real_s"] > 0
    assert points[-1]["real_s"] is None  # 805 MB of input: never run for real
    assert points[-1]["input_bytes"] == 65536 * 3 * 32 * 32 * 4
    assert all(p["meta_s"] < 1 for p in points)


@pytest.mark.parametrize("key", sorted(set(PRESETS) - {"net_broken"}))
def test_flops_equal_flop_counter_mode(key: str) -> None:
    """The tracer's own counter uses FlopCounterMode's formulas; totals must agree."""
    preset = PRESETS[key]
    report = preset_report(key)
    namespace = namespace_of(preset.source)
    name, args, kwargs = parse_constructor(preset.model)
    with torch.device("meta"):
        model = namespace[name](*args, **kwargs).eval()
    dtype = torch.long if preset.dtypes == "long" else torch.float32
    inputs = [
        torch.empty(shape, dtype=dtype, device="meta") for shape in parse_shapes(preset.shapes)
    ]
    with torch.no_grad(), torch.device("meta"), FlopCounterMode(display=False) as counter:
        model(*inputs)
    assert report.flops == counter.get_total_flops() > 0


def test_building_on_meta_skips_initialisers_only_for_meta_tensors(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from torchatlas.modelcode import build_on_meta, meta_initialisers_skipped

    initialised: list[str] = []
    real_uniform = nn.init.uniform_

    def spy(tensor: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        initialised.append(tensor.device.type)
        return real_uniform(tensor, *args, **kwargs)

    monkeypatch.setattr(nn.init, "uniform_", spy)
    model = build_on_meta(lambda: nn.Linear(4, 3), [], {}, "Linear")  # bias: uniform_
    assert model.weight.is_meta and model.weight.shape == (3, 4)
    assert initialised == []  # skipped on meta
    assert nn.init.uniform_ is spy  # restored afterwards
    with meta_initialisers_skipped():
        nn.Linear(4, 3)  # a real model built meanwhile is still initialised
        real = nn.init.constant_(torch.empty(2, 2), 7.0)
    assert initialised == ["cpu"] and torch.equal(real, torch.full((2, 2), 7.0))


@pytest.mark.parametrize("key", sorted(PRESETS))
def test_eval_batch_norm_shortcut_changes_nothing_in_the_report(
    key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torchatlas.shapes.trace as trace_module

    used: list[bool] = []
    shortcut = trace_module.eval_batch_norm_on_meta

    def counted(*args: Any, **kwargs: Any) -> Any:
        result = shortcut(*args, **kwargs)
        used.append(result is not None)
        return result

    monkeypatch.setattr(trace_module, "eval_batch_norm_on_meta", counted)
    fast = preset_report(key).to_dict()
    monkeypatch.setattr(trace_module, "eval_batch_norm_on_meta", lambda *a, **k: None)
    slow = preset_report(key).to_dict()
    for report in (fast, slow):
        report.pop("elapsed_s", None)
    assert fast == slow
    if key in {"resnet18", "resnet50", "mobilenet_v3", "unet"}:  # eval-mode BatchNorm
        assert used and all(used)  # the presets with BatchNorm take the shortcut


def test_batch_norm_with_the_wrong_channel_count_still_fails_like_pytorch() -> None:
    source = (
        "import torch.nn as nn\n\n\nclass Net(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n"
        "        self.conv = nn.Conv2d(3, 8, 3)\n        self.bn = nn.BatchNorm2d(16)\n\n"
        "    def forward(self, x):\n        return self.bn(self.conv(x))\n"
    )
    report = analyze(source, [[1, 3, 16, 16]])
    assert report.error is not None
    assert report.error.layer == "bn"
    assert "16" in report.error.message and "8" in report.error.message


def test_tensors_in_finds_what_pytree_finds_in_the_same_order() -> None:
    from collections import namedtuple

    from torch.utils._pytree import tree_leaves

    Pair = namedtuple("Pair", "first second")
    a, b, c, d = (torch.empty(n, device="meta") for n in range(1, 5))
    values = [
        a,
        (a, [b, {"x": c, "y": (d, None)}], 3, "text"),
        {"z": a, "a": [b, torch.Size([2, 3])], "m": torch.float16},
        Pair(a, (b, Pair(c, d))),
        [Pair(first=None, second=[a])],
        (torch.device("meta"), 1.5, True, None),
    ]
    for value in values:
        expected = [leaf for leaf in tree_leaves(value) if isinstance(leaf, torch.Tensor)]
        assert [id(t) for t in tensors_in(value)] == [id(t) for t in expected]
