"""Shipped configuration files (model YAMLs, hyperparameters) as torch-free package data."""

from yolotui.configs.hyp import resolve_hyp  # noqa: E402,F401  (trainer stream)
