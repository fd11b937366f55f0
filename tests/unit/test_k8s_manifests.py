"""serve/k8s/: every manifest is valid against the Kubernetes schemas (kubernetes-validate's
bundled copies, offline, strict: an unknown field fails), and the pieces fit together."""

from __future__ import annotations

import copy
import tomllib
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from langchain_specreason.serving.replicas import DEFAULT_POLICY, FAILOVER_FLAGS

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "serve" / "k8s"
KUBERNETES = "1.33.0"
"""The Kubernetes version the manifests are checked against (pinned: schemas differ)."""
FILES = sorted(K8S.glob("*.yaml"))


def _docs(path: Path) -> list[dict]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


DOCS = [doc for path in FILES for doc in _docs(path)]


def _kind(kind: str) -> dict[str, dict]:
    return {doc["metadata"]["name"]: doc for doc in DOCS if doc["kind"] == kind}


def _container(deployment: dict) -> dict:
    return deployment["spec"]["template"]["spec"]["containers"][0]


def _flag(args: list[str], flag: str) -> list[str]:
    """The values after ``flag`` up to the next flag."""
    i = args.index(flag) + 1
    out = []
    while i < len(args) and not args[i].startswith("--"):
        out.append(args[i])
        i += 1
    return out


def test_the_folder_has_the_manifests():
    assert [p.name for p in FILES] == [
        "00-namespace.yaml",
        "10-router-rbac.yaml",
        "20-draft.yaml",
        "21-base.yaml",
        "30-router-draft.yaml",
        "31-router-base.yaml",
    ]
    assert sorted((d["kind"], d["metadata"]["name"]) for d in DOCS) == [
        ("Deployment", "specreason-base"),
        ("Deployment", "specreason-base-router"),
        ("Deployment", "specreason-draft"),
        ("Deployment", "specreason-draft-router"),
        ("Namespace", "specreason"),
        ("Role", "specreason-router-pod-reader"),
        ("RoleBinding", "specreason-router-pod-reader"),
        ("Service", "specreason-base"),
        ("Service", "specreason-base-pool"),
        ("Service", "specreason-draft"),
        ("Service", "specreason-draft-pool"),
        ("ServiceAccount", "specreason-router"),
    ]


@pytest.mark.parametrize("doc", DOCS, ids=lambda d: f"{d['kind']}/{d['metadata']['name']}")
def test_each_manifest_is_valid_against_the_pinned_kubernetes_schemas(doc):
    assert kubernetes_validate.validate(doc, KUBERNETES, strict=True) == "1.33"


def _broken(mutate) -> dict:
    doc = copy.deepcopy(_kind("Deployment")["specreason-base"])
    mutate(doc)
    return doc


@pytest.mark.parametrize(
    "mutate",
    [
        lambda d: d["spec"].__setitem__("replicas", "two"),  # wrong type
        lambda d: _container(d).__setitem__("readinesProbe", {}),  # a misspelt field (strict)
        lambda d: d["spec"].pop("selector"),  # a required field
        lambda d: _container(d)["env"][0]["valueFrom"]["secretKeyRef"].pop("key"),
    ],
    ids=["replicas-type", "misspelt-field", "no-selector", "secret-without-key"],
)
def test_a_broken_manifest_fails_validation(mutate):
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(_broken(mutate), KUBERNETES, strict=True)


@pytest.mark.parametrize("role", ["draft", "base"])
def test_each_router_discovers_its_own_pool(role):
    pool = _kind("Deployment")[f"specreason-{role}"]
    router = _kind("Deployment")[f"specreason-{role}-router"]
    args = _container(router)["args"]
    assert "--service-discovery" in args
    selector = dict(item.split("=", 1) for item in _flag(args, "--selector"))
    assert selector == pool["spec"]["template"]["metadata"]["labels"]
    assert selector == pool["spec"]["selector"]["matchLabels"]
    assert _flag(args, "--service-discovery-namespace") == [pool["metadata"]["namespace"]]
    port = _container(pool)["ports"][0]["containerPort"]
    assert _flag(args, "--service-discovery-port") == [str(port)]
    assert _flag(args, "--policy") == [DEFAULT_POLICY]
    # the same failover settings as `specreason serve --replicas`
    shown = args[args.index("--retry-max-retries") :]
    assert shown == list(FAILOVER_FLAGS)
    # the router's Service selects the router, not the pool
    service = _kind("Service")[f"specreason-{role}"]
    assert service["spec"]["selector"] == router["spec"]["selector"]["matchLabels"]
    assert service["spec"]["selector"] != pool["spec"]["selector"]["matchLabels"]


def test_the_routers_may_list_and_watch_pods_of_their_namespace_only():
    (account,) = _kind("ServiceAccount")
    role = _kind("Role")["specreason-router-pod-reader"]
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}
    ]
    binding = _kind("RoleBinding")["specreason-router-pod-reader"]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": account, "namespace": "specreason"}
    ]
    for name in ("specreason-draft-router", "specreason-base-router"):
        assert (
            _kind("Deployment")[name]["spec"]["template"]["spec"]["serviceAccountName"] == account
        )
    assert not _kind("ClusterRole")  # nothing cluster-wide


def test_every_container_is_ready_on_health_and_servers_take_the_key_from_a_secret():
    for name, deployment in _kind("Deployment").items():
        container = _container(deployment)
        assert container["readinessProbe"]["httpGet"]["path"] == "/health", name
        assert deployment["metadata"]["namespace"] == "specreason"
        if name.endswith("-router"):
            assert "VLLM_API_KEY" not in {e["name"] for e in container.get("env", [])}
            continue
        (key,) = [e for e in container["env"] if e["name"] == "VLLM_API_KEY"]
        assert key["valueFrom"] == {
            "secretKeyRef": {"name": "specreason-api-key", "key": "api-key"}
        }
        assert "--api-key" not in container["args"]


def test_the_router_version_is_the_scale_extras():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    (pinned,) = extras["scale"]
    for name in ("specreason-draft-router", "specreason-base-router"):
        init = _kind("Deployment")[name]["spec"]["template"]["spec"]["initContainers"][0]
        assert pinned in init["command"]


@pytest.mark.parametrize("role", ["draft", "base"])
def test_the_router_arguments_parse_with_the_routers_own_parser(role):
    from vllm_router.launch_router import parse_router_args

    router = _kind("Deployment")[f"specreason-{role}-router"]
    parsed = parse_router_args(_container(router)["args"])
    parsed._validate_router_args()
    assert parsed.service_discovery and parsed.service_discovery_namespace == "specreason"
    assert parsed.selector == {
        "app.kubernetes.io/part-of": "specreason",
        "app.kubernetes.io/component": role,
    }
    assert (parsed.policy, parsed.port, parsed.service_discovery_port) == (
        "consistent_hash",
        8000,
        8000,
    )
