"""Package list for setuptools: every package under yolotui/, plus the top-level themes/ folder shipped as yolotui.themes."""

from setuptools import find_packages, setup

setup(
    packages=[*find_packages(include=["yolotui", "yolotui.*"]), "yolotui.themes"],
    package_dir={"yolotui.themes": "themes"},
)
