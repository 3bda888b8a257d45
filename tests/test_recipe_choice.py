"""The recipe a new run gets without --hyp: short-run under 1000 optimizer steps, official above, --hyp wins."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from yolotui.backends import ENGINE
from yolotui.configs.recipe import OFFICIAL_HYP, SHORT_RUN_HYP, choose_recipe, planned_steps
from yolotui.errors import UserError


def test_steps_are_images_seen_over_the_nominal_batch():
    assert planned_steps(30, 128) == 60
    assert planned_steps(1, 65) == 2
    assert planned_steps(0, 1000) == 0


@pytest.mark.parametrize(("epochs", "images", "hyp"), [(30, 128, SHORT_RUN_HYP), (50, 128, SHORT_RUN_HYP),
                                                       (499, 128, SHORT_RUN_HYP), (500, 128, OFFICIAL_HYP),
                                                       (100, 1000, OFFICIAL_HYP), (300, 118287, OFFICIAL_HYP)])
def test_the_boundary_is_1000_steps(epochs, images, hyp):
    assert choose_recipe(epochs, images).hyp == hyp


def test_the_reason_shows_the_sum_and_the_way_out():
    reason = choose_recipe(30, 128).reason
    assert "30 epochs x 128 training images / 64 = 60 optimizer steps" in reason
    assert f"--hyp {OFFICIAL_HYP}" in reason


def _demo_data(tmp_path: Path) -> Path:
    from yolotui.datasets import make_demo_dataset

    return Path(make_demo_dataset(tmp_path / "data", n_train=6, n_val=2, img=64))


def test_a_new_run_without_hyp_gets_the_short_run_recipe_in_opt_yaml(tmp_path):
    from yolotui.jobs.new_run import prepare_run, with_recipe

    data = _demo_data(tmp_path)
    options, notes = with_recipe({"data": str(data), "cfg": "gelan-t", "epochs": 3, "project": str(tmp_path / "runs"),
                                  "name": "short", "device": "cpu"}, ENGINE)
    assert options["hyp"] == SHORT_RUN_HYP
    assert notes and "3 epochs x 6 training images" in notes[0]
    prepared = prepare_run(options)
    opt = yaml.safe_load((prepared.run_dir / "opt.yaml").read_text())
    assert Path(opt["hyp"]).name == SHORT_RUN_HYP
    hyp = yaml.safe_load((prepared.run_dir / "hyp.yaml").read_text())
    assert hyp["nbs"] == 16 and hyp["warmup_min_iters"] == 0
    assert (opt["optimizer"], opt["close_mosaic"]) == ("AdamW", 1)  # the recipe's options: 3 epochs // 2
    assert "with optimizer AdamW, close_mosaic 1" in notes[0]


def test_the_recipe_options_give_way_to_the_command_line(tmp_path):
    from yolotui.jobs.new_run import with_recipe

    data = _demo_data(tmp_path)
    options, notes = with_recipe({"data": str(data), "epochs": 60, "optimizer": "SGD"}, ENGINE)
    assert (options["optimizer"], options["close_mosaic"], options["hyp"]) == ("SGD", 15, SHORT_RUN_HYP)
    assert "optimizer" not in notes[0].split("; with ")[1] and "close_mosaic 15" in notes[0]
    options, notes = with_recipe({"data": str(data), "epochs": 60, "optimizer": "SGD", "close_mosaic": 0}, ENGINE)
    assert options["close_mosaic"] == 0 and "; with" not in notes[0]


def test_a_given_hyp_and_the_official_backend_are_left_alone(tmp_path):
    from yolotui.jobs.new_run import with_recipe

    data = _demo_data(tmp_path)
    given = {"data": str(data), "hyp": OFFICIAL_HYP, "epochs": 3}
    assert with_recipe(given, ENGINE) == (given, [])
    bare = {"data": str(data), "epochs": 3}
    assert with_recipe(bare, "official") == (bare, [])


def test_unreadable_data_yaml_is_one_line_naming_it(tmp_path):
    from yolotui.jobs.new_run import with_recipe

    bad = tmp_path / "data.yaml"
    bad.write_text("train: [unclosed\n")
    with pytest.raises(UserError) as err:
        with_recipe({"data": str(bad), "epochs": 3}, ENGINE)
    assert str(bad) in str(err.value) and "\n" not in str(err.value)
