"""Tools around a trained model: export.py (the converted model and ONNX) with parity.py (its checks that the
outputs agree), deepcheck.py (torch.load with weights_only=True, as one JSON line), probe.py (the torch
environment as JSON), weights.py (a checkpoint loaded as a model for evaluation)."""
