"""Ready-made model sources for the shape explorer (plain text: they run only in the sandbox).

Each preset is the code a student would paste, the model box (which class or builder to
build), and one input shape and dtype per forward argument.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

SOURCES_DIR = Path(__file__).resolve().parent / "sources"


@dataclass(frozen=True)
class Preset:
    key: str  # also the translation key shapes.presets.<key>
    file: str
    model: str  # constructor call for the model box; "" = the last nn.Module class
    shapes: str  # as typed in the inputs box
    dtypes: str = "float32"

    @property
    def source(self) -> str:
        return preset_source(self.file)


PRESETS: dict[str, Preset] = {
    preset.key: preset
    for preset in (
        Preset("net", "net.txt", "Net()", "1024×3×32×32"),
        Preset("net_broken", "net_broken.txt", "Net()", "1×1×28×28"),
        Preset(
            "resnet_generator", "resnet_generator.txt", "ResNetGenerator(n_blocks=6)", "1×3×256×256"
        ),
        Preset("resnet18", "resnet18.txt", "resnet18()", "1×3×224×224"),
        Preset("resnet50", "resnet50.txt", "resnet50()", "1×3×224×224"),
        Preset("vit_b_16", "vit_b_16.txt", "vit_b_16()", "1×3×224×224"),
        Preset("mobilenet_v3", "mobilenet_v3.txt", "mobilenet_v3_large()", "1×3×224×224"),
        Preset("lstm_tagger", "lstm_tagger.txt", "LSTMTagger()", "8×20", "long"),
        Preset("transformer_encoder", "transformer_encoder.txt", "TextEncoder()", "8×64", "long"),
        Preset("unet", "unet.txt", "UNet()", "1×3×128×128"),
    )
}
DEFAULT_PRESET = "net"


@cache
def preset_source(file: str) -> str:
    return (SOURCES_DIR / file).read_text(encoding="utf-8")
