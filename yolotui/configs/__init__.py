"""Shipped configuration files (model YAMLs, hyperparameters) as torch-free package data."""
