from __future__ import annotations

import json

import torch

from torchatlas.runtime import torch_summary


def test_summary_reports_this_process() -> None:
    info = torch_summary()
    assert info.torch_version == torch.__version__
    assert info.cpu_threads == torch.get_num_threads() >= 1
    assert info.cuda_available == torch.cuda.is_available()
    assert info.cuda_built == torch.version.cuda
    assert (info.accelerator is None) == (not torch.accelerator.is_available())
    json.dumps(info.to_dict())
