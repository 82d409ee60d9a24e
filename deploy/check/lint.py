"""Lints a rendered manifest (stdin) for the settings every workload must have: non-root, read-only
root filesystem, no privilege escalation, every capability dropped, seccomp RuntimeDefault, resources
and probes on every container, a PodDisruptionBudget and an autoscaler for every Deployment, Services
that select pods of the manifest, and no Secret values. Prints each problem; exit 1 when there is one."""

import sys

import yaml


def pod_problems(where, spec):
    out = []
    pod_sc = spec.get("securityContext") or {}
    if (pod_sc.get("seccompProfile") or {}).get("type") != "RuntimeDefault":
        out.append(f"{where}: pod seccompProfile is not RuntimeDefault")
    if spec.get("hostNetwork") or spec.get("hostPID") or spec.get("hostIPC"):
        out.append(f"{where}: uses the host's namespaces")
    for c in spec.get("initContainers", []) + spec.get("containers", []):
        name = f"{where} container {c.get('name')}"
        sc = c.get("securityContext") or {}
        non_root = sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot"))
        user = sc.get("runAsUser", pod_sc.get("runAsUser"))
        if non_root is not True or user == 0:
            out.append(f"{name}: may run as root")
        if sc.get("allowPrivilegeEscalation") is not False:
            out.append(f"{name}: allowPrivilegeEscalation is not false")
        if sc.get("readOnlyRootFilesystem") is not True:
            out.append(f"{name}: root filesystem is writable")
        if sc.get("privileged"):
            out.append(f"{name}: privileged")
        if "ALL" not in ((sc.get("capabilities") or {}).get("drop") or []):
            out.append(f"{name}: capabilities not all dropped")
        res = c.get("resources") or {}
        for kind in ("requests", "limits"):
            for r in ("cpu", "memory"):
                if r not in (res.get(kind) or {}):
                    out.append(f"{name}: no {kind}.{r}")
        for probe in ("readinessProbe", "livenessProbe"):
            if probe not in c:
                out.append(f"{name}: no {probe}")
        if ":" not in c.get("image", "").rsplit("/", 1)[-1]:
            out.append(f"{name}: image without a tag")
    return out


def main():
    docs = [d for d in yaml.safe_load_all(sys.stdin) if d]
    problems = []
    by_kind = {}
    for d in docs:
        by_kind.setdefault(d["kind"], []).append(d)
    workloads = by_kind.get("Deployment", []) + by_kind.get("StatefulSet", [])
    if not by_kind.get("Deployment"):
        problems.append("no Deployment in the manifest")
    pod_labels = []
    for w in workloads:
        where = f"{w['kind']} {w['metadata']['name']}"
        template = w["spec"]["template"]
        pod_labels.append(template["metadata"].get("labels") or {})
        problems += pod_problems(where, template["spec"])
    covered = lambda kind, key: {  # noqa: E731
        d["spec"][key]["name"] for d in by_kind.get(kind, [])
    }
    scaled = covered("HorizontalPodAutoscaler", "scaleTargetRef") | covered(
        "ScaledObject", "scaleTargetRef"
    )
    budgets = [d["spec"]["selector"]["matchLabels"] for d in by_kind.get("PodDisruptionBudget", [])]
    for dep in by_kind.get("Deployment", []):
        name = dep["metadata"]["name"]
        labels = dep["spec"]["template"]["metadata"]["labels"]
        if name not in scaled:
            problems.append(f"Deployment {name}: no HorizontalPodAutoscaler or ScaledObject")
        if not any(all(labels.get(k) == v for k, v in b.items()) for b in budgets):
            problems.append(f"Deployment {name}: no PodDisruptionBudget")
    for svc in by_kind.get("Service", []):
        spec = svc["spec"]
        if spec.get("type") == "ExternalName":
            continue
        selector = spec.get("selector") or {}
        if not any(all(l.get(k) == v for k, v in selector.items()) for l in pod_labels):
            problems.append(f"Service {svc['metadata']['name']}: selects no pod of the manifest")
    for secret in by_kind.get("Secret", []):
        if secret.get("data") or secret.get("stringData"):
            problems.append(f"Secret {secret['metadata']['name']}: a secret value is committed")
    if not any(
        not (p["spec"].get("ingress") or p["spec"].get("egress"))
        and set(p["spec"].get("policyTypes", [])) == {"Ingress", "Egress"}
        and not p["spec"].get("podSelector")
        for p in by_kind.get("NetworkPolicy", [])
    ):
        problems.append("no default-deny NetworkPolicy")
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        sys.exit(1)
    print(f"{len(workloads)} workloads, {len(docs)} objects: security settings, resources and probes set")


if __name__ == "__main__":
    main()
