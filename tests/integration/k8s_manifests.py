#!/usr/bin/python3
# SPDX-License-Identifier: MIT
# k8s_manifests.py - what can be checked of deploy/kubernetes/ without a
# cluster (test_cni.sh runs it).
#
# Usage: k8s_manifests.py DIR CONFLIST
#
# Every *.yaml in DIR parses (PyYAML, safe_load_all) into objects with
# apiVersion, kind and metadata.name; kustomization.yaml lists every other
# manifest but the example pod and the Secret's example; the conflist the init container install-cni
# writes (the ConfigMap key it copies) is CONFLIST, as JSON; that init
# container copies it from where the ConfigMap is mounted to the node's
# /etc/cni/net.d; the Secret sluice-credentials is mounted by the sluiced
# container of the DaemonSet and by nothing else; the RuntimeClass selects
# the nodes the DaemonSet runs on. Prints "Kind namespace/name" per object;
# exits 1 with a line per problem.

import json
import os
import sys

import yaml


def main():
    d, conflist = sys.argv[1:3]
    problems = []
    objs = []
    files = sorted(f for f in os.listdir(d) if f.endswith(".yaml"))
    for f in files:
        with open(os.path.join(d, f)) as fh:
            try:
                docs = [o for o in yaml.safe_load_all(fh) if o is not None]
            except yaml.YAMLError as e:
                problems.append("%s: does not parse: %s" % (f, e))
                continue
        for o in docs:
            if not isinstance(o, dict) or not o.get("apiVersion") or not o.get("kind"):
                problems.append("%s: an object without apiVersion or kind" % f)
                continue
            if o["kind"] != "Kustomization" and not o.get("metadata", {}).get("name"):
                problems.append("%s: a %s without a name" % (f, o["kind"]))
                continue
            objs.append((f, o))
    by = {}
    for f, o in objs:
        md = o.get("metadata", {})
        key = (o["kind"], md.get("namespace", ""), md.get("name", ""))
        by[key] = o
        if o["kind"] != "Kustomization":
            print("%s %s/%s" % key)

    kust = by.get(("Kustomization", "", ""))
    if not kust:
        problems.append("no kustomization.yaml")
    else:
        want = set(files) - {"kustomization.yaml", "sandbox-pod.yaml", "secret.yaml"}
        if set(kust.get("resources", [])) != want:
            problems.append("kustomization.yaml lists %s, not %s"
                            % (sorted(kust.get("resources", [])), sorted(want)))

    ds = by.get(("DaemonSet", "sluice-system", "sluice-node"))
    cm = by.get(("ConfigMap", "sluice-system", "sluice-config"))
    rc = by.get(("RuntimeClass", "", "sluice"))
    if not ds or not cm or not rc:
        problems.append("missing: DaemonSet sluice-system/sluice-node, ConfigMap "
                        "sluice-system/sluice-config or RuntimeClass sluice")
        return report(problems)
    spec = ds["spec"]["template"]["spec"]
    vols = {v["name"]: v for v in spec["volumes"]}

    # The conflist: the ConfigMap's key, copied by install-cni to the node.
    inits = {c["name"]: c for c in spec.get("initContainers", [])}
    inst = inits.get("install-cni")
    if not inst:
        problems.append("no init container install-cni")
    else:
        script = "\n".join(inst["command"])
        mounts = {m["name"]: m["mountPath"] for m in inst["volumeMounts"]}
        cfg_dir = mounts.get("config")
        conf_dir = mounts.get("cni-conf")
        if vols.get("config", {}).get("configMap", {}).get("name") != "sluice-config":
            problems.append("the volume config is not the ConfigMap sluice-config")
        if vols.get("cni-conf", {}).get("hostPath", {}).get("path") != "/etc/cni/net.d":
            problems.append("the volume cni-conf is not the node's /etc/cni/net.d")
        src = "%s/10-sluice.conflist" % cfg_dir
        dst = "%s/10-sluice.conflist" % conf_dir
        if src not in script or dst not in script:
            problems.append("install-cni does not copy %s to %s" % (src, dst))
        with open(conflist) as fh:
            want = json.load(fh)
        try:
            got = json.loads(cm["data"]["10-sluice.conflist"])
        except (KeyError, ValueError) as e:
            problems.append("ConfigMap sluice-config: no 10-sluice.conflist JSON: %s" % e)
            got = None
        if got is not None and got != want:
            problems.append("the conflist install-cni writes is not %s" % conflist)
        if got is not None and [p.get("type") for p in got.get("plugins", [])] != ["sluice-cni"]:
            problems.append("the conflist has plugins other than sluice-cni (it must be the only one)")

    # The Secret: in the sluiced container, nowhere else.
    secret_vols = {n for n, v in vols.items()
                   if v.get("secret", {}).get("secretName") == "sluice-credentials"}
    if not secret_vols:
        problems.append("the DaemonSet does not mount the Secret sluice-credentials")
    for c in spec.get("initContainers", []) + spec["containers"]:
        for m in c.get("volumeMounts", []):
            if m["name"] in secret_vols and c["name"] != "sluiced":
                problems.append("container %s mounts the credentials" % c["name"])
    for (kind, ns, name), o in by.items():
        if kind in ("Pod", "Deployment", "StatefulSet", "Job") and \
                "sluice-credentials" in json.dumps(o):
            problems.append("%s %s/%s names the credentials" % (kind, ns, name))

    # Sandbox pods land where the broker runs.
    sel = rc.get("scheduling", {}).get("nodeSelector", {})
    if not sel or spec.get("nodeSelector") != sel:
        problems.append("the RuntimeClass's nodeSelector %s is not the DaemonSet's %s"
                        % (sel, spec.get("nodeSelector")))
    return report(problems)


def report(problems):
    for p in problems:
        print("problem: " + p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
