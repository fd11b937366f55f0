"""Config files: what `specreason tune` writes loads back the same, and bad files are typed."""

from __future__ import annotations

import pytest

from langchain_specreason import ChatSpecReason, SpecReasonConfig
from langchain_specreason.errors import ConfigError


def test_round_trip_with_evidence(tmp_path):
    cfg = SpecReasonConfig(
        judge="arithmetic+likelihood",
        likelihood_threshold=-2.75,
        first_n_base_steps=2,
        temperature=0.0,
        seed=3,
        delimiter="\n\n",
    )
    path = tmp_path / "tuned.toml"
    path.write_text(
        cfg.to_toml(
            {"dev_accuracy": 0.6, "recommendation": "specreason", "dev_problems": ["a", "b"]}
        )
    )
    assert SpecReasonConfig.from_file(path) == cfg
    assert "[evidence]" in path.read_text()


def test_chat_model_loads_the_file_and_arguments_win(tmp_path):
    path = tmp_path / "tuned.toml"
    path.write_text(SpecReasonConfig(likelihood_threshold=-2.5, budget=900).to_toml())
    llm = ChatSpecReason(
        draft_url="http://d/v1", base_url="http://b/v1", config_file=str(path), budget=700
    )
    assert llm.spec_config().likelihood_threshold == -2.5
    assert llm.spec_config().budget == 700


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[specreason]\nthreshold = 12\n", r"tuned.toml: threshold: .*less than or equal to 10"),
        ("[specreason]\nthresh = 5\n", r"tuned.toml: unknown setting 'thresh'"),
        ("[other]\nx = 1\n", r"tuned.toml: no \[specreason\] table"),
        ("[specreason\n", r"tuned.toml: not valid TOML"),
    ],
)
def test_a_bad_file_is_a_config_error_naming_the_file_and_field(tmp_path, text, message):
    path = tmp_path / "tuned.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        SpecReasonConfig.from_file(path)


def test_a_missing_file_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match=r"config file .*nope\.toml"):
        ChatSpecReason(
            draft_url="http://d/v1", base_url="http://b/v1", config_file=str(tmp_path / "nope.toml")
        )
