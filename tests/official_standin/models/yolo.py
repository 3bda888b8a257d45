"""Stand-in model class: pickled whole into checkpoints, as the official DetectionModel is."""

import torch


class DetectionModel(torch.nn.Module):
    def __init__(self, nc=5):
        super().__init__()
        self.head = torch.nn.Linear(4, nc)
        self.yaml = {"nc": nc}
