"""The module room's shared link, declared once (read, written and checked by the kit:
:mod:`torchatlas.links`, ``components/kit/link_state.py``).

- ``nn_section``: the section shown; ``nn_preset``: the example loaded;
- ``nn_src``: pasted code that differs from the preset's; ``nn_model``: the model box, when
  it differs from the preset's (both default to None: "the preset's own");
- ``nn_train``, ``nn_lr``, ``nn_steps``, ``nn_forget``: the training controls (a learning
  rate and a number of steps the controls offer, written as the page writes them);
- ``nn_mode``: the train/eval model; ``nn_save``: the saved model.

The names are the room's URL names since its first shared link; lessons use them.

>>> read = LINK.read({"nn_lr": "0.3", "nn_steps": "15"})
>>> (read.values["nn_lr"], read.values["nn_steps"], read.broken)
(0.3, 100, ('nn_steps',))
"""

from __future__ import annotations

from torchatlas.links import Choice, Flag, LinkSpec, Offered, Source, Text
from torchatlas.modelcode import MAX_MODEL_CHARS
from torchatlas.modules.presets import DEFAULT_PRESET, PRESETS
from torchatlas.modules.serialization import SAVE_MODELS
from torchatlas.modules.training import MAX_STEPS, TRAINABLE, ModeModel
from torchatlas.sandbox.policy import MAX_SOURCE_CHARS

SECTIONS = ("inspect", "compare", "train", "quiz", "modes", "save", "memory")
LR_CHOICES = (0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 0.5, 1.0, 1.5, 2.0)
STEP_CHOICES = tuple(range(10, MAX_STEPS + 1, 10))
DEFAULT_LR, DEFAULT_STEPS = 0.1, 100
MAX_LINK_SOURCE_CHARS = 6000  # the longest code token the page writes into a link


LINK = LinkSpec(
    "modules",
    "modules_",
    (
        Choice("nn_section", SECTIONS[0], key="modules_section", options=SECTIONS),
        Choice("nn_preset", DEFAULT_PRESET, key="modules_preset_key", options=tuple(PRESETS)),
        Source("nn_src", None, key="modules_source", max_chars=MAX_SOURCE_CHARS,
               max_token_chars=MAX_LINK_SOURCE_CHARS),
        Text("nn_model", None, key="modules_model", max_len=MAX_MODEL_CHARS),
        Choice("nn_train", "mylinear", key="modules_train_model", options=tuple(TRAINABLE)),
        Offered("nn_lr", DEFAULT_LR, key="modules_lr", options=LR_CHOICES),
        Offered("nn_steps", DEFAULT_STEPS, key="modules_steps", options=STEP_CHOICES),
        Flag("nn_forget", False, key="modules_forget"),
        Choice("nn_mode", ModeModel.DROPOUT.value, key="modules_mode",
               options=tuple(mode.value for mode in ModeModel)),
        Choice("nn_save", "mylinear", key="modules_save_model", options=tuple(SAVE_MODELS)),
    ),
)  # fmt: skip
