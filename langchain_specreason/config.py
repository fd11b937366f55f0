"""The SpecReason knobs, declared and validated once.

:class:`SpecReasonConfig` is the single declaration of every knob: :class:`~.ChatSpecReason`
inherits its fields, the benchmark and the demo build their flags from it
(:func:`add_config_flags`), and Studio reads them from the environment (:meth:`from_env`).
A bad value raises :class:`~.errors.ConfigError` naming the field. Names match the paper's
reference code where it has one.
"""

from __future__ import annotations

import argparse
import json
import tomllib
from collections.abc import Callable, Iterable, Mapping
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Literal, Self, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from .agreement.registry import check_rule, rule_specs
from .errors import ConfigError
from .judges.likelihood import Aggregate
from .judges.registry import judge_specs, parse_judge, threshold_field
from .judges.score import ScoreMethod, Wording


def judge_settings(judge: str, threshold: float | None = None) -> dict[str, Any]:
    """Config fields selecting ``judge`` and, when given, its threshold on its own scale."""
    settings: dict[str, Any] = {"judge": judge}
    field = threshold_field(judge)
    if threshold is not None and field is not None:
        settings[field] = threshold
    return settings


DEFAULT_JUDGE = "arithmetic+likelihood"
"""The judge of :class:`SpecReasonConfig` when none is named: the best one measured by
`specreason bench judges` (see the README). ``score`` is SpecReason's original judge."""


class Settings(BaseModel):
    """Immutable, validated settings whose fields' docstrings are their flags' help.

    A bad value raises one :class:`~.errors.ConfigError` naming the field;
    :func:`add_settings_flags` makes a subclass's flags and :meth:`from_args` reads them back.
    :class:`SpecReasonConfig` is one; the lab's commands declare theirs the same way
    (``TrainSettings``, ``OracleSettings``, ``RolloutSettings``).
    """

    model_config = ConfigDict(
        frozen=True, extra="forbid", use_attribute_docstrings=True, validate_default=True
    )

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise ConfigError(describe_errors(exc, _FLAG_NAMES.get())) from None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Self:
        """The settings of the flags :func:`add_settings_flags` made (others: the defaults).

        A bad value is a :class:`~.errors.ConfigError` naming the flag (``--held-out``). Only
        the flags made for this class are read, not whatever else of the command shares a
        field's name; a namespace made otherwise gives the fields it has.
        """
        made = (getattr(args, _FLAGS_MADE, None) or {}).get(cls.__qualname__)
        names = made if made is not None else [n for n in cls.model_fields if n in args]
        token = _FLAG_NAMES.set(made)
        try:
            return cls(**{name: getattr(args, name) for name in names})
        finally:
            _FLAG_NAMES.reset(token)


_FLAG_NAMES: ContextVar[Mapping[str, str] | None] = ContextVar("flag_names", default=None)
"""While :meth:`Settings.from_args` builds settings: the flag of each field, for its errors."""

_FLAGS_MADE = "_settings_flags"
"""The namespace attribute where :func:`add_settings_flags` lists the flags it made:
``{settings class: {field: flag}}``."""


class SpecReasonConfig(Settings):
    """Settings of one SpecReason run (see :mod:`langchain_specreason.state` for the terms).

    Immutable; ``config.replace(threshold=5)`` returns a validated copy.
    """

    def __init__(self, **data: Any) -> None:  # settings are often built from dicts: untyped
        super().__init__(**data)

    verify: Literal["judge", "agree"] = "judge"
    """How a draft step is checked (the verifier, :mod:`~.graph.verifiers`). ``judge``: the
    judge reads it (SpecReason). ``agree``: the base model writes its own step at each of the
    ``steps_ahead`` positions the draft writes, each sent as soon as its prefix is known
    (pipelined behind the draft), and a draft step is kept where ``agree_rule`` says the two
    agree; at the first disagreement the base's step is kept and the round ends (Lookahead
    Reasoning). No judge runs; a custom judge is refused."""
    agree_rule: str = "result"
    """``agree`` mode: the rule comparing the draft's step with the base's (see
    :mod:`~.agreement`): ``result`` (the last quantity), ``numbers``, ``text``."""
    agree_overlap: float = Field(0.5, ge=0, le=1)
    """``agree`` mode, ``result`` and ``numbers`` rules: two steps without any number agree
    when their words overlap (Jaccard) by at least this."""
    steps_ahead: int = Field(3, gt=0, le=16)
    """``agree`` mode: how many steps the draft writes ahead of the trace in a round (the base
    model writes as many positions in parallel)."""
    judge: str = DEFAULT_JUDGE
    """Which judge decides whether a draft step is accepted (see :mod:`~.judges`); ``a+b`` runs the
    cheap check ``a`` first and asks ``b`` only when ``a`` does not reject."""
    threshold: float = Field(7.0, ge=0, le=10)
    """``score`` judge: keep a draft step when its score is at least this. 0 keeps every draft
    step; 10 (above the highest score, 9) rewrites every step."""
    score_method: ScoreMethod = "greedy"
    """``score`` judge: ``greedy``, the judge's sampled digit (a non-digit counts 0);
    ``average``, the probability-weighted mean of the digits among the top logprobs."""
    judge_wording: Wording = "short"
    """``score`` judge: ``short`` (our follow-up turn) or ``reference`` (the SpecReason
    reference implementation's question and prefill, word for word)."""
    judge_top_logprobs: int = Field(10, gt=0)
    """``score`` judge: how many top logprobs it asks for (``average`` scoring uses them)."""
    likelihood_threshold: float = Field(-0.55, le=0)
    """``likelihood`` judge: keep a draft step when the base model's aggregated
    log-probability of its tokens is at least this (<= 0). The default -0.55 is on the ``mean``
    scale, chosen on rollout-labelled dev steps of the ``cpu`` pair to keep 90% of the harmless
    ones (BENCHMARKS.md); with ``min`` or ``math`` give a threshold on that scale (e.g. -3.5)."""
    confidence_threshold: float = Field(-0.28, le=0)
    """``confidence`` judge: keep a draft step when the draft model's aggregated
    log-probability of its own tokens is at least this (<= 0); the default is on the ``mean``
    scale, chosen like ``likelihood_threshold`` on the same 466 dev steps."""
    logprob_aggregate: Aggregate = "mean"
    """``likelihood`` and ``confidence``: ``mean`` of the step's token log-probabilities (the
    default: it reads every token, words as well as numbers), ``min`` (the least likely token),
    or ``math`` (the least likely token holding a digit or an operator; a step without any is
    read as ``min``: no step passes for having no digit)."""
    learned_threshold: float = Field(0.5, ge=0, le=1)
    """``learned`` judge: keep a draft step when the model's P(harmless) is at least this."""
    learned_weights: str | None = None
    """``learned`` judge: a JSON file of fitted weights (the ``summary.json`` of ``specreason
    bench judges --labels`` on dev labels, or of a ``--fit-on`` read; or its
    ``learned_weights``); required by that judge. Set ``learned_threshold`` to that file's
    ``learned_threshold`` (chosen on dev to keep 90% of the harmless steps)."""
    budget: int = Field(8192, gt=0)
    """Token budget: the trace stops once it holds this many tokens."""
    step_max_tokens: int = Field(512, gt=0)
    """Cap on the tokens of one step."""
    lookahead: bool = True
    """Draft the next step while the judge reads this one (see ``lookahead`` in
    :mod:`~.state`). Same trace; faster when the two models run on separate devices."""
    first_n_base_steps: int = Field(0, ge=0)
    """The base model writes the first n steps itself, without drafting."""
    draft_cooldown: float = Field(30.0, ge=0)
    """Seconds a draft server that just failed (down, or failing after its retries) is
    skipped: runs in that time go to the base model at once and say so; 0 asks every run."""
    delimiter: str = Field("\n\n", min_length=1)
    """Text that ends a step."""
    temperature: float = Field(0.6, ge=0, le=2)
    """Sampling temperature of draft and rewritten steps (the judge is greedy)."""
    top_p: float = Field(0.95, gt=0, le=1)
    """Nucleus sampling of draft and rewritten steps."""
    seed: int | None = None
    """Sampling seed sent to both servers (``None``: the servers' default)."""
    repeat_window: int = Field(8, ge=0)
    """Stop when a new step repeats one of the trace's last ``repeat_window`` steps (0: never)."""
    answer_by: Literal["base", "draft"] = "base"
    """Which model writes the final answer after the thinking."""
    answer_max_tokens: int = Field(1024, gt=0)
    """Cap on the tokens of the final answer."""

    @model_validator(mode="after")
    def _known_judge(self) -> SpecReasonConfig:
        try:
            parse_judge(self.judge)
            check_rule(self.agree_rule)
        except ConfigError as exc:
            raise ValueError(str(exc)) from None
        return self

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> SpecReasonConfig:
        """Settings from ``SPECREASON_<FIELD>`` variables (e.g. ``SPECREASON_THRESHOLD=5``).

        Escapes such as ``\\n`` are decoded in text settings.
        """
        values: dict[str, Any] = {}
        for name, field in cls.model_fields.items():
            raw = env.get(f"SPECREASON_{name.upper()}")
            if raw is None or raw == "":
                continue
            values[name] = raw.encode().decode("unicode_escape") if field.annotation is str else raw
        return cls(**values)

    @classmethod
    def from_file(cls, path: str | Path) -> SpecReasonConfig:
        """Settings from a TOML file's ``[specreason]`` table (what ``specreason tune`` writes).

        Other tables (``[evidence]``: how the setting was chosen) are ignored here. A missing
        file, bad TOML or a bad setting is a :class:`~.errors.ConfigError` naming the file.
        """
        return cls(**read_config_file(path))

    def to_toml(self, evidence: Mapping[str, Any] | None = None) -> str:
        """The settings as TOML (``[specreason]``, every field), and ``[evidence]`` if given."""
        lines = ["[specreason]"]
        for name, value in self.as_dict().items():
            if value is not None:
                lines.append(f"{name} = {_toml_value(value)}")
        if evidence:
            lines += ["", "[evidence]"]
            lines += [f"{k} = {_toml_value(v)}" for k, v in evidence.items() if v is not None]
        return "\n".join(lines) + "\n"

    def replace(self, **changes: Any) -> SpecReasonConfig:
        """A validated copy with ``changes``."""
        return type(self)(**{**self.as_dict(), **changes})

    def judge_threshold(self) -> float | None:
        """The threshold of the judge that decides (the last part; ``None``: arithmetic)."""
        field = threshold_field(self.judge)
        return None if field is None else float(getattr(self, field))

    def as_dict(self) -> dict[str, Any]:
        """Plain dict of the settings (for run metadata and results files)."""
        return {name: getattr(self, name) for name in SpecReasonConfig.model_fields}


def read_config_file(path: str | Path) -> dict[str, Any]:
    """The ``[specreason]`` table of a TOML config file (ConfigError naming the file)."""
    where = Path(path)
    try:
        data = tomllib.loads(where.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"config file {where}: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {where}: not valid TOML ({exc})") from None
    table = data.get("specreason")
    if not isinstance(table, dict):
        raise ConfigError(f"config file {where}: no [specreason] table")
    unknown = sorted(set(table) - set(SpecReasonConfig.model_fields))
    if unknown:
        raise ConfigError(f"config file {where}: unknown setting {unknown[0]!r}")
    try:
        SpecReasonConfig(**table)
    except ConfigError as exc:
        raise ConfigError(f"config file {where}: {exc}") from None
    return dict(table)


def _toml_value(value: Any) -> str:
    """A TOML literal of a plain value (str, bool, int, float, list of those)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return json.dumps(str(value))  # a JSON string is a valid TOML basic string


def config_default(name: str) -> Any:
    """The default of the :class:`SpecReasonConfig` field ``name``."""
    return SpecReasonConfig.model_fields[name].default


def describe_errors(exc: ValidationError, flags: Mapping[str, str] | None = None) -> str:
    """The bad settings in one line: ``threshold: Input should be ... (got 12)``.

    ``flags`` names a field by its flag instead (``--threshold: ...``).
    """
    lines = []
    for error in exc.errors():
        where = ".".join(str(part) for part in error["loc"])
        message = error["msg"].removeprefix("Value error, ")
        got = f" (got {error['input']!r})" if where and "input" in error else ""
        where = (flags or {}).get(where, where)
        lines.append(f"{where}: {message}{got}" if where else message)
    return "; ".join(lines)


_NAMES = {
    "judge": lambda: f" ({', '.join(judge_specs())}; a+b cascades)",
    "agree_rule": lambda: f" ({', '.join(rule_specs())})",
}
"""The knobs that name a registered part: their flags' help lists the names (read when built)."""


def add_config_flags(parser: Any, names: Iterable[str], **defaults: Any) -> None:
    """``--name`` flags for the given :class:`SpecReasonConfig` fields on an argparse parser.

    As :func:`add_settings_flags`; the knobs that name a registered part (``judge``,
    ``agree_rule``) list the names in their help.
    """
    add_settings_flags(parser, SpecReasonConfig, names, more_help=_NAMES, **defaults)


def add_settings_flags(
    parser: Any,
    settings: type[Settings],
    names: Iterable[str] | None = None,
    *,
    flags: Mapping[str, str] | None = None,
    more_help: Mapping[str, Callable[[], str]] | None = None,
    **defaults: Any,
) -> None:
    """``--name`` flags for fields of ``settings`` (every field unless ``names`` are given).

    Help comes from the field's docstring, type from its annotation, default from the field
    or from ``defaults`` (a command's own, e.g. temperature 0 for a benchmark); ``more_help``
    adds a field's text made when the flags are (e.g. the names a registry holds). ``flags``
    spells a field's flag otherwise (``{"max_tokens": "--rollout-max-tokens"}``); the value
    lands under the field's name all the same, for :meth:`Settings.from_args`.
    """
    fields = settings.model_fields
    made: dict[str, dict[str, str]] = dict(parser.get_default(_FLAGS_MADE) or {})
    mine = made.setdefault(settings.__qualname__, {})
    parser.set_defaults(**{_FLAGS_MADE: made})
    for name in fields if names is None else names:
        field = fields[name]
        default = defaults.get(name, field.default)
        flag = (flags or {}).get(name, "--" + name.replace("_", "-"))
        mine[name] = flag
        help_text = (field.description or "").split(". ")[0].rstrip(".").replace("``", "")
        more = (more_help or {}).get(name)
        help_text = help_text.replace("%", "%%") + (more() if more else "")
        if field.annotation is bool:
            parser.add_argument(
                flag,
                dest=name,
                action=argparse.BooleanOptionalAction,
                default=default,
                help=help_text,
            )
            continue
        choices = get_args(field.annotation) if get_origin(field.annotation) is Literal else None
        kinds: dict[Any, type] = {int: int, float: float, int | None: int, float | None: float}
        kind = kinds.get(field.annotation, str)
        parser.add_argument(
            flag,
            dest=name,
            metavar=None if choices else flag.lstrip("-").replace("-", "_").upper(),
            type=kind,
            default=default,
            choices=choices,
            help=f"{help_text} (default: {default})",
        )
