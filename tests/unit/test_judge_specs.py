"""Judges describe themselves: one ``SPEC`` per judge file, one table every layer reads.

A judge added in a temporary module (``SPEC`` plus one line in the registry's module list) is
found by config validation, ``make_judge``, the graph, the CLI flags' help, Studio's factory
and the lab's mode parsing, with no other edit.
"""

from __future__ import annotations

import argparse
import math
import sys
import textwrap

import pytest

from langchain_specreason import SpecReasonConfig
from langchain_specreason.config import add_config_flags, judge_settings
from langchain_specreason.errors import ConfigError
from langchain_specreason.graph import create_specreason_graph
from langchain_specreason.judges import CascadeJudge
from langchain_specreason.judges import registry as judges
from langchain_specreason.judges.base import JudgeSpec
from langchain_specreason.lab.shared.modes import Run, parse_judges
from langchain_specreason.studio import graph_from_env

from .fakes import ScriptedEndpoint, partial_of, step

KEEP_SHORT = textwrap.dedent(
    '''
    """A judge that only tests write: it keeps steps of at most ``threshold`` words."""
    from langchain_specreason.judges.base import JudgeSpec, Verdict


    class KeepShort:
        def __init__(self, limit):
            self.limit = limit

        async def judge(self, ctx):
            words = len(ctx.step.split())
            return Verdict(score=-words, accept=words <= self.limit, detail={"words": words})


    SPEC = JudgeSpec(
        name="short",
        description="keeps a step of at most `threshold` words (a test's judge)",
        build=lambda settings, draft, base, fmt: KeepShort(settings["threshold"]),
        threshold_field="threshold",
        threshold_range=(0.0, 10.0),
    )
    '''
)


@pytest.fixture
def short_judge(tmp_path, monkeypatch):
    """The registry with one more judge file, ``short``, in a module outside the package."""
    (tmp_path / "keep_short_judge.py").write_text(KEEP_SHORT)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(judges, "_MODULES", (*judges._MODULES, "keep_short_judge"))
    judges.judge_specs.cache_clear()
    yield
    judges.judge_specs.cache_clear()
    sys.modules.pop("keep_short_judge", None)


def test_every_judge_declares_one_spec_whose_threshold_is_a_config_field_in_its_range():
    specs = judges.judge_specs()
    assert list(specs) == ["score", "likelihood", "confidence", "arithmetic", "learned"]
    defaults = SpecReasonConfig().as_dict()
    for name, spec in specs.items():
        assert isinstance(spec, JudgeSpec) and spec.name == name and spec.description
        if spec.threshold_field is None:
            assert spec.threshold_range is None
            continue
        low, high = spec.threshold_range or (math.nan, math.nan)
        assert low <= defaults[spec.threshold_field] <= high, name
    assert judges.threshold_field("arithmetic+likelihood") == "likelihood_threshold"
    assert judges.threshold_field("arithmetic") is None


async def test_a_new_judge_file_is_found_by_config_make_judge_and_the_graph(short_judge):
    config = SpecReasonConfig(judge="short", threshold=4, temperature=0)
    assert config.judge_threshold() == 4
    assert judge_settings("short", 3) == {"judge": "short", "threshold": 3}
    assert SpecReasonConfig(judge="arithmetic+short").judge_threshold() == 7

    def draft_step(req):  # step 0 is one word, step 1 six words; the reply ends at step 2
        index = partial_of(req).count("\n\n")
        text = ["Seven.", "One two three four five six.", "So 7."][min(index, 2)]
        return step(text, 3, end=index >= 2)

    draft = ScriptedEndpoint("draft", draft_step)
    base = ScriptedEndpoint("base", lambda req: step("Base.", 1, end=True))
    judge = judges.make_judge(config, draft, base, None)  # type: ignore[arg-type]
    assert type(judge).__name__ == "KeepShort"
    cascade = judges.make_judge(config.replace(judge="arithmetic+short"), draft, base, None)  # type: ignore[arg-type]
    assert isinstance(cascade, CascadeJudge)

    graph = create_specreason_graph(draft, base, config=config)
    out = await graph.ainvoke({"messages": [("user", "What is 3+4?")]})
    assert [s["decision"] for s in out["steps"]] == ["accepted", "rewritten"]
    assert [s["verdict"]["words"] for s in out["steps"]] == [1, 6]


def test_a_new_judge_file_is_found_by_the_flags_studio_and_the_lab(short_judge):
    parser = argparse.ArgumentParser()
    add_config_flags(parser, ["judge"])
    assert "short" in parser.format_help()
    graph_from_env(
        {"SPECREASON_DRAFT_URL": "http://d/v1", "SPECREASON_BASE_URL": "http://b/v1"},
        {"judge": "short", "threshold": 2},
    )
    assert parse_judges("short,arithmetic+short") == ["short", "arithmetic+short"]
    assert Run(mode="specreason", judge="short", threshold=3.0).setting == "threshold"


def test_an_unknown_judge_lists_the_registered_ones(short_judge):
    with pytest.raises(ConfigError, match=r"unknown judge 'vibes'.*short"):
        SpecReasonConfig(judge="vibes")


def test_a_judge_needing_prompt_logprobs_refuses_a_plain_endpoint_naming_itself():
    plain = ScriptedEndpoint("base", lambda req: step("x", 1))
    with pytest.raises(ConfigError, match="the likelihood judge needs a base endpoint"):
        judges.make_judge(SpecReasonConfig(judge="likelihood"), plain, plain, None)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="the learned judge needs a base endpoint"):
        judges.make_judge(SpecReasonConfig(judge="learned"), plain, plain, None)  # type: ignore[arg-type]


def test_describe_names_the_threshold_field_and_its_scale():
    specs = judges.judge_specs()
    assert specs["score"].describe().endswith("threshold `threshold` (0 to 10)")
    assert "likelihood_threshold` (-inf to 0)" in specs["likelihood"].describe()
    assert "threshold" not in specs["arithmetic"].describe()
    assert all(spec.name in judges.judges_help() for spec in specs.values())


def test_the_judges_docs_table_lists_every_registered_judge():
    import langchain_specreason.judges as package

    table = package.__doc__ or ""
    assert all(f"``{name}``" in table for name in judges.judge_specs())


def test_the_chat_model_and_studio_docs_name_every_registered_judge():
    # the CLI help reads the registry; these three are prose, so a test keeps them whole
    from langchain_specreason import ChatSpecReason
    from langchain_specreason.studio import StudioContext

    field_doc = ChatSpecReason.model_fields["judge"].description or ""
    guide = ChatSpecReason.__doc__ or ""
    studio = _attribute_doc(StudioContext, "judge")
    for name in judges.judge_specs():
        assert f"``{name}``" in field_doc, name
        assert f"`{name}`" in guide, name
        assert f"``{name}``" in studio, name


def _attribute_doc(cls, attribute):
    """The docstring written under ``attribute`` in ``cls``'s source."""
    import ast
    import inspect
    import itertools

    body = ast.parse(inspect.getsource(cls)).body[0].body
    for node, after in itertools.pairwise(body):
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", None) == attribute:
            return after.value.value
    raise AssertionError(f"no docstring under {attribute}")
