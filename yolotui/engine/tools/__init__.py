"""Tools around a trained model: export (ONNX, fused), the deep checkpoint check, device probe, weight loading."""
