"""The room's example models, as the source a visitor would paste (they run in the sandbox
like any pasted code) and the constructor the inspector builds."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Preset:
    key: str
    source: str
    model: str  # the constructor call, e.g. "MyLinear(3, 2)"


MYLINEAR_PLAIN = """import torch
import torch.nn as nn


class MyLinear(nn.Module):
    def __init__(self, input_dim=3, output_dim=2):
        super().__init__()
        self.input_dim = input_dim
        self.output_dim = output_dim
        # Plain tensors: the module does not know it holds them.
        self.W = torch.FloatTensor(input_dim, output_dim)
        self.b = torch.FloatTensor(output_dim)

    def forward(self, x):
        return torch.matmul(x, self.W) + self.b
"""

MYLINEAR_PARAMETER = """import torch
import torch.nn as nn


class MyLinear(nn.Module):
    def __init__(self, input_dim=3, output_dim=2):
        super().__init__()
        self.input_dim = input_dim
        self.output_dim = output_dim
        # nn.Parameter registers them: parameters(), state_dict(), .to() and optimisers see them.
        self.W = nn.Parameter(torch.FloatTensor(input_dim, output_dim))
        self.b = nn.Parameter(torch.FloatTensor(output_dim))

    def forward(self, x):
        return torch.matmul(x, self.W) + self.b
"""

LIST_BUG = """import torch
import torch.nn as nn


class Stack(nn.Module):
    def __init__(self, width=8, depth=3):
        super().__init__()
        # A Python list hides these layers from parameters(), state_dict() and .to().
        self.layers = [nn.Linear(width, width) for _ in range(depth)]
        self.scales = [torch.ones(width) for _ in range(depth)]
        # The fix: nn.ModuleList / nn.ParameterList register every item.
        self.fixed = nn.ModuleList([nn.Linear(width, width) for _ in range(depth)])

    def forward(self, x):
        for layer, scale in zip(self.layers, self.scales):
            x = layer(x) * scale
        for layer in self.fixed:
            x = layer(x)
        return x
"""

WITH_BUFFER = """import torch
import torch.nn as nn


class Normalised(nn.Module):
    def __init__(self, features=4):
        super().__init__()
        self.fc = nn.Linear(features, 2)
        # Buffers: saved and moved with the model, never trained.
        self.register_buffer("mean", torch.zeros(features))
        self.register_buffer("std", torch.ones(features))
        # A buffer that is moved but not saved.
        self.register_buffer("cache", torch.zeros(features), persistent=False)
        self.norm = nn.BatchNorm1d(2)

    def forward(self, x):
        return self.norm(self.fc((x - self.mean) / self.std))
"""

PRESETS: dict[str, Preset] = {
    preset.key: preset
    for preset in (
        Preset("mylinear_plain", MYLINEAR_PLAIN, "MyLinear(3, 2)"),
        Preset("mylinear_parameter", MYLINEAR_PARAMETER, "MyLinear(3, 2)"),
        Preset("list_bug", LIST_BUG, "Stack(8, 3)"),
        Preset("with_buffer", WITH_BUFFER, "Normalised(4)"),
    )
}
DEFAULT_PRESET = "mylinear_plain"
