#!/usr/bin/python3
"""Prepares a Prometheus config for Debian's promtool, which is built without Kubernetes service
discovery and rejects kubernetes_sd_configs.

    promconfig.py IN.yaml OUT.yaml

Checks every kubernetes_sd_configs entry against the fields of Prometheus' documentation
(<kubernetes_sd_config>: role, namespaces, selectors, attach_metadata, api_server, kubeconfig_file and the
HTTP client settings), then writes OUT with each such block replaced by a static target, so that
`promtool check config OUT` checks the rest of the job (relabel_configs, intervals, timeouts). Exit 1 on
an unknown field or role.
"""
import sys

import yaml

ROLES = {"node", "service", "pod", "endpoints", "endpointslice", "ingress"}
FIELDS = {
    "role", "namespaces", "selectors", "attach_metadata", "api_server", "kubeconfig_file",
    # HTTP client config
    "basic_auth", "authorization", "oauth2", "bearer_token", "bearer_token_file", "tls_config",
    "proxy_url", "no_proxy", "proxy_from_environment", "proxy_connect_header", "follow_redirects",
    "enable_http2",
}
NAMESPACES = {"own_namespace", "names"}
SELECTOR = {"role", "label", "field"}
ATTACH = {"node"}


def main():
    src, dst = sys.argv[1], sys.argv[2]
    with open(src) as f:
        cfg = yaml.safe_load(f)
    errors, replaced = [], 0
    for job in cfg.get("scrape_configs") or []:
        sds = job.pop("kubernetes_sd_configs", None)
        if sds is None:
            continue
        name = job.get("job_name", "?")
        for i, sd in enumerate(sds):
            where = f"{src}: job {name}: kubernetes_sd_configs[{i}]"
            for k in set(sd) - FIELDS:
                errors.append(f"{where}: unknown field {k}")
            if sd.get("role") not in ROLES:
                errors.append(f"{where}: role {sd.get('role')!r} is not one of {sorted(ROLES)}")
            ns = sd.get("namespaces") or {}
            for k in set(ns) - NAMESPACES:
                errors.append(f"{where}: namespaces: unknown field {k}")
            if not isinstance(ns.get("names", []), list):
                errors.append(f"{where}: namespaces.names must be a list")
            for j, sel in enumerate(sd.get("selectors") or []):
                for k in set(sel) - SELECTOR:
                    errors.append(f"{where}: selectors[{j}]: unknown field {k}")
            for k in set(sd.get("attach_metadata") or {}) - ATTACH:
                errors.append(f"{where}: attach_metadata: unknown field {k}")
        job.setdefault("static_configs", []).append({"targets": ["localhost:9400"]})
        replaced += 1
    for e in errors:
        print(e)
    if errors:
        return 1
    with open(dst, "w") as f:
        yaml.safe_dump(cfg, f, sort_keys=False)
    print(f"{replaced} kubernetes_sd_configs block(s) checked and replaced by a static target for Debian's promtool")
    return 0


if __name__ == "__main__":
    sys.exit(main())
