// Every manifest under infra/k8s is valid against the Kubernetes API types (offline, no
// cluster), and the deployment keeps its operational rules (docs/OPERATIONS.md "Kubernetes"):
// probes, resources, non-root read-only containers, keys from Secrets, one volume per gateway.
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import { formatFinding, type ManifestDoc, typesModuleFor, validateManifests } from "./k8s-schema.js";

const K8S_DIR = fileURLToPath(new URL("../k8s/", import.meta.url));
const KUSTOMIZATION = "kustomization.yaml";

function loadDocs(): ManifestDoc[] {
  const docs: ManifestDoc[] = [];
  for (const file of readdirSync(K8S_DIR)
    .filter((f) => f.endsWith(".yaml") && f !== KUSTOMIZATION)
    .sort()) {
    parseAllDocuments(readFileSync(join(K8S_DIR, file), "utf8")).forEach((d, index) => {
      if (d.errors.length > 0) throw new Error(`${file}#${index}: ${d.errors.map((e) => e.message).join("; ")}`);
      const obj = d.toJS() as Record<string, unknown> | null;
      if (obj) docs.push({ file, index, obj });
    });
  }
  return docs;
}

const docs = loadDocs();
const applied = docs.filter((d) => !d.file.endsWith(".example.yaml"));

// ----------------------------------------------------------------------------- loose views
// The manifests are schema-checked above; these are read-only views for the rules below.
// biome-ignore lint/suspicious/noExplicitAny: walking validated manifests
type Obj = Record<string, any>;
const of = (kind: string) => applied.filter((d) => d.obj.kind === kind).map((d) => d.obj as Obj);
const one = (kind: string, name: string): Obj => {
  const found = of(kind).find((o) => o.metadata?.name === name);
  if (!found) throw new Error(`no ${kind} ${name} in infra/k8s`);
  return found;
};
const workloads = () => [...of("StatefulSet"), ...of("Deployment")];
const hermesDaemons = () => workloads().filter((w) => w.metadata.name !== "hermes-etcd");
const containersOf = (w: Obj): Obj[] => w.spec.template.spec.containers;
const matches = (selector: Record<string, string>, labels: Record<string, string> = {}) =>
  Object.entries(selector).every(([k, v]) => labels[k] === v);

describe("Kubernetes manifests: schema", () => {
  it("map apiVersions to the Kubernetes API type modules", () => {
    expect(typesModuleFor("v1")).toBe("core/v1");
    expect(typesModuleFor("apps/v1")).toBe("apps/v1");
    expect(typesModuleFor("networking.k8s.io/v1")).toBe("networking/v1");
    expect(typesModuleFor("rbac.authorization.k8s.io/v1")).toBe("rbac/v1");
  });

  it("every document in infra/k8s is valid against the Kubernetes API types", () => {
    expect(docs.length).toBeGreaterThanOrEqual(12);
    expect(validateManifests(docs).map(formatFinding)).toEqual([]);
  });

  it("the validator rejects an unknown field, a wrong type, a missing required field and an unknown kind", () => {
    const sts = docs.find((d) => d.obj.kind === "StatefulSet");
    if (!sts) throw new Error("no StatefulSet");
    const broken = (mutate: (o: Obj) => void): ManifestDoc => {
      const obj = structuredClone(sts.obj) as Obj;
      mutate(obj);
      return { ...sts, obj };
    };
    const findings = validateManifests([
      broken((o) => {
        o.spec.template.spec.containers[0].readinesProbe = o.spec.template.spec.containers[0].readinessProbe;
      }),
      broken((o) => {
        o.spec.replicas = "3";
      }),
      broken((o) => {
        delete o.spec.template.spec.containers[0].name;
      }),
      broken((o) => {
        o.kind = "StatefulSett";
      }),
    ]);
    const text = findings.map(formatFinding).join("\n");
    expect(findings.find((f) => /readinesProbe/.test(f.message))?.path).toBe("spec.template.spec.containers[0].readinesProbe");
    expect(findings.find((f) => f.path === "spec.replicas")?.message).toMatch(/string.*not assignable.*number/);
    expect(text).toMatch(/spec\.template\.spec\.containers\[0\].*name/);
    expect(text).toMatch(/StatefulSett/);
  });
});

describe("Kubernetes manifests: operational rules", () => {
  it("kustomization.yaml applies every manifest except the examples", () => {
    const k = parseAllDocuments(readFileSync(join(K8S_DIR, KUSTOMIZATION), "utf8"))[0]?.toJS() as Obj;
    const files = [...new Set(docs.map((d) => d.file))].filter((f) => !f.endsWith(".example.yaml")).sort();
    expect([...k.resources].sort()).toEqual(files);
    expect(k.namespace).toBe("hermes-mesh");
  });

  it("gateways are a StatefulSet with one volume each, a headless service and the pod name as id", () => {
    const sts = one("StatefulSet", "hermes-gateway");
    expect(sts.spec.volumeClaimTemplates).toHaveLength(1);
    expect(sts.spec.volumeClaimTemplates[0].spec.accessModes).toEqual(["ReadWriteOnce"]);
    const svc = one("Service", sts.spec.serviceName);
    expect(svc.spec.clusterIP).toBe("None");
    const c = containersOf(sts)[0] as Obj;
    expect(c.volumeMounts).toContainEqual({ name: sts.spec.volumeClaimTemplates[0].metadata.name, mountPath: "/data" });
    const podName = c.env.find((e: Obj) => e.name === "POD_NAME");
    expect(podName.valueFrom.fieldRef.fieldPath).toBe("metadata.name");
    expect(c.args.join(" ")).toMatch(/gateway start .*--home \/data .*--id "\$POD_NAME"/);
  });

  it("the relay is a single-replica Deployment (Recreate) with its queue on a PVC", () => {
    const relay = one("Deployment", "hermes-relay");
    expect(relay.spec.replicas).toBe(1);
    expect(relay.spec.strategy.type).toBe("Recreate");
    const claim = relay.spec.template.spec.volumes.find((v: Obj) => v.name === "data").persistentVolumeClaim.claimName;
    expect(one("PersistentVolumeClaim", claim).spec.accessModes).toEqual(["ReadWriteOnce"]);
  });

  it("every Hermes daemon probes /livez, /readyz and the gRPC health service", () => {
    for (const w of hermesDaemons()) {
      for (const c of containersOf(w)) {
        const grpcPort = c.ports.find((p: Obj) => p.name === "grpc").containerPort;
        expect(c.livenessProbe.httpGet.path, `${w.metadata.name}`).toBe("/livez");
        expect(c.readinessProbe.httpGet.path, `${w.metadata.name}`).toBe("/readyz");
        expect(c.startupProbe.grpc.port, `${w.metadata.name}`).toBe(grpcPort);
      }
    }
  });

  it("every container has requests and limits, runs non-root, read-only, with no capabilities", () => {
    for (const w of workloads()) {
      const pod = w.spec.template.spec;
      expect(pod.securityContext.runAsNonRoot).toBe(true);
      expect(pod.securityContext.runAsUser).toBeGreaterThan(0);
      expect(pod.securityContext.seccompProfile.type).toBe("RuntimeDefault");
      expect(pod.terminationGracePeriodSeconds).toBeGreaterThanOrEqual(30);
      expect(pod.automountServiceAccountToken).toBe(false);
      for (const c of pod.containers) {
        for (const r of ["cpu", "memory"]) {
          expect(c.resources.requests[r], `${w.metadata.name} requests.${r}`).toBeDefined();
          expect(c.resources.limits[r], `${w.metadata.name} limits.${r}`).toBeDefined();
        }
        expect(c.securityContext).toMatchObject({
          allowPrivilegeEscalation: false,
          readOnlyRootFilesystem: true,
          capabilities: { drop: ["ALL"] },
        });
      }
    }
  });

  it("keys come from Secrets by reference, never inline", () => {
    for (const w of workloads()) {
      for (const c of containersOf(w)) {
        for (const e of c.env ?? []) {
          if (/KEY|SECRET|TOKEN|PASSWORD/i.test(e.name)) {
            expect(e.value, `${w.metadata.name} env ${e.name} is inline`).toBeUndefined();
            expect(e.valueFrom?.secretKeyRef?.name, `${w.metadata.name} env ${e.name}`).toBeTruthy();
          }
        }
        // A relay key on the command line may only be read from a mounted Secret file.
        const relayKey = /--relay-key\s+"\$\(cat "([^"]+)\/\$POD_NAME"\)"/.exec((c.args ?? []).join(" "));
        if ((c.args ?? []).join(" ").includes("--relay-key")) {
          expect(relayKey, `${w.metadata.name}: --relay-key must come from a Secret file`).not.toBeNull();
          const mount = c.volumeMounts.find((m: Obj) => m.mountPath === relayKey?.[1]);
          const volume = w.spec.template.spec.volumes.find((v: Obj) => v.name === mount?.name);
          expect(volume?.secret?.secretName, `${w.metadata.name}: ${relayKey?.[1]} is not a Secret volume`).toBeTruthy();
        }
      }
    }
    expect(applied.filter((d) => d.obj.kind === "Secret")).toEqual([]);
  });

  it("services and network policies select the pods they are meant for", () => {
    const podLabels = workloads().map((w) => w.spec.template.metadata.labels as Record<string, string>);
    for (const svc of of("Service")) {
      expect(
        podLabels.some((l) => matches(svc.spec.selector, l)),
        `Service ${svc.metadata.name}`,
      ).toBe(true);
      for (const port of svc.spec.ports) {
        const targets = workloads()
          .filter((w) => matches(svc.spec.selector, w.spec.template.metadata.labels))
          .flatMap((w) => containersOf(w).flatMap((c) => c.ports.map((p: Obj) => p.name)));
        expect(targets, `Service ${svc.metadata.name} port ${port.name}`).toContain(port.targetPort);
      }
    }
    for (const w of workloads()) expect(matches(w.spec.selector.matchLabels, w.spec.template.metadata.labels)).toBe(true);
    for (const np of of("NetworkPolicy")) {
      const sel = np.spec.podSelector.matchLabels ?? {};
      expect(
        podLabels.some((l) => matches(sel, l)),
        `NetworkPolicy ${np.metadata.name}`,
      ).toBe(true);
    }
    expect(of("NetworkPolicy").some((np) => Object.keys(np.spec.podSelector).length === 0)).toBe(true); // default deny
  });
});

/** Does `policy` (of the pods it selects) let traffic to/from pods with `peerLabels` on `port`, in `direction`? */
function policyAllows(policy: Obj, direction: "ingress" | "egress", peerLabels: Record<string, string>, port: number): boolean {
  const side = direction === "ingress" ? "from" : "to";
  return (policy.spec[direction] ?? []).some((rule: Obj) => {
    const peers: Obj[] | undefined = rule[side];
    const peerOk =
      !peers || peers.some((p) => !p.namespaceSelector && p.podSelector && matches(p.podSelector.matchLabels ?? {}, peerLabels));
    const portOk = !rule.ports || rule.ports.some((p: Obj) => p.port === port);
    return peerOk && portOk;
  });
}

describe("Kubernetes manifests: the coordinated mesh (etcd)", () => {
  const etcd = one("StatefulSet", "hermes-etcd");
  const gateway = one("StatefulSet", "hermes-gateway");
  const etcdContainer = containersOf(etcd)[0] as Obj;
  const gatewayContainer = containersOf(gateway)[0] as Obj;
  const arg = (name: string) => (etcdContainer.args as string[]).find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
  const envOf = (c: Obj, name: string): Obj | undefined => c.env.find((e: Obj) => e.name === name);
  const portOf = (c: Obj, name: string): number => c.ports.find((p: Obj) => p.name === name).containerPort;
  const members = Array.from({ length: etcd.spec.replicas }, (_, i) => `${etcd.metadata.name}-${i}.${etcd.spec.serviceName}`);

  it("etcd is a 3-member StatefulSet started in parallel, one volume each, behind a headless Service that publishes not-ready members", () => {
    expect(etcd.spec.replicas).toBe(3);
    expect(etcd.spec.podManagementPolicy).toBe("Parallel");
    expect(etcd.spec.volumeClaimTemplates).toHaveLength(1);
    expect(etcd.spec.volumeClaimTemplates[0].spec.accessModes).toEqual(["ReadWriteOnce"]);
    expect(etcdContainer.volumeMounts).toContainEqual({ name: etcd.spec.volumeClaimTemplates[0].metadata.name, mountPath: "/data" });
    expect(arg("data-dir")).toMatch(/^\/data\//);
    const svc = one("Service", etcd.spec.serviceName);
    expect(svc.spec.clusterIP).toBe("None");
    expect(svc.spec.publishNotReadyAddresses).toBe(true);
    expect(one("PodDisruptionBudget", "hermes-etcd").spec.maxUnavailable).toBe(1);
  });

  it("every member is named after its pod, advertises its stable name, and the initial cluster lists exactly the StatefulSet's pods", () => {
    expect(envOf(etcdContainer, "POD_NAME")?.valueFrom.fieldRef.fieldPath).toBe("metadata.name");
    expect(arg("name")).toBe("$(POD_NAME)");
    const peer = portOf(etcdContainer, "peer");
    const client = portOf(etcdContainer, "client");
    expect(arg("initial-advertise-peer-urls")).toBe(`http://$(POD_NAME).${etcd.spec.serviceName}:${peer}`);
    expect(arg("advertise-client-urls")).toBe(`http://$(POD_NAME).${etcd.spec.serviceName}:${client}`);
    const initial = (arg("initial-cluster") ?? "").split(",");
    expect(initial).toEqual(members.map((m) => `${m.split(".")[0]}=http://${m}:${peer}`));
    expect(arg("initial-cluster-state")).toBe("new");
  });

  it("etcd's liveness does not depend on the quorum; readiness does", () => {
    const metricsPort = etcdContainer.ports.find((p: Obj) => p.name === "metrics");
    expect(arg("listen-metrics-urls")).toBe(`http://0.0.0.0:${metricsPort.containerPort}`);
    // /health answers 503 without a leader: restarting members would never bring a majority back.
    expect(etcdContainer.livenessProbe.httpGet.path).not.toBe("/health");
    expect(etcdContainer.startupProbe.httpGet.path).not.toBe("/health");
    expect(etcdContainer.readinessProbe.httpGet.path).toBe("/health");
  });

  it("the gateways name every etcd member, advertise their stable names and take the mesh key from a Secret", () => {
    const client = portOf(etcdContainer, "client");
    expect(envOf(gatewayContainer, "HERMES_COORDINATOR")?.value).toBe(`etcd://${members.map((m) => `${m}:${client}`).join(",")}`);
    const names = (gatewayContainer.env as Obj[]).map((e) => e.name);
    // $(POD_NAME) is expanded only from variables defined before it.
    expect(names.indexOf("POD_NAME")).toBeLessThan(names.indexOf("HERMES_ADVERTISE_URL"));
    expect(envOf(gatewayContainer, "HERMES_ADVERTISE_URL")?.value).toBe(
      `grpc://$(POD_NAME).${gateway.spec.serviceName}:${portOf(gatewayContainer, "grpc")}`,
    );
    expect(envOf(gatewayContainer, "HERMES_MESH_KEY")?.valueFrom.secretKeyRef).toEqual({ name: "hermes-keys", key: "mesh-key" });
    const example = docs.find((d) => d.file === "secrets.example.yaml" && d.obj.metadata && (d.obj.metadata as Obj).name === "hermes-keys");
    if (!example) throw new Error("secrets.example.yaml has no hermes-keys Secret");
    expect(Object.keys((example.obj as Obj).stringData)).toContain("mesh-key");
  });

  it("the network policies open exactly the coordinator's paths", () => {
    const policy = (name: string) => one("NetworkPolicy", name);
    const labels = (w: Obj) => w.spec.template.metadata.labels as Record<string, string>;
    const relay = one("Deployment", "hermes-relay");
    const path = (from: Obj, fromPolicy: string, to: Obj, toPolicy: string, port: number) =>
      policyAllows(policy(fromPolicy), "egress", labels(to), port) && policyAllows(policy(toPolicy), "ingress", labels(from), port);
    expect(path(gateway, "hermes-gateway", etcd, "hermes-etcd", 2379)).toBe(true);
    expect(path(etcd, "hermes-etcd", etcd, "hermes-etcd", 2380)).toBe(true);
    expect(path(gateway, "hermes-gateway", gateway, "hermes-gateway", 7440)).toBe(true);
    expect(path(gateway, "hermes-gateway", etcd, "hermes-etcd", 2380)).toBe(false);
    expect(path(relay, "hermes-relay", etcd, "hermes-etcd", 2379)).toBe(false);
  });
});
