#!/usr/bin/python3
"""Reads a container image archive (an OCI archive as `podman save --format oci-archive` and `buildah push
oci-archive:` write it, or a `docker save` archive) without any container tool, for `make release`
(scripts/release.sh) and its check (scripts/release-check.sh).

    oci-archive.py config  ARCHIVE                 the image's config (JSON: .config.Labels, .config.User, ...)
    oci-archive.py extract ARCHIVE PATH OUT        the file PATH as the image has it (the topmost layer's) to OUT
    oci-archive.py sbom    ARCHIVE VERSION OUT     an SPDX 2.3 JSON SBOM of the image's Debian packages

The SBOM: no tool Debian 12 packages writes one for an image (syft, trivy and cyclonedx-cli are not in
Debian 12; its spdx packages are license-list libraries), so it comes from the image's own dpkg database:
var/lib/dpkg/status is taken from the archive and read with `dpkg-query --admindir`, and every installed
package becomes an SPDX package with a Package URL (pkg:deb/debian/NAME@VERSION?arch=ARCH&distro=debian-12).
The gpuscale binary, which dpkg does not know, is one more package. Licenses are NOASSERTION: Debian's
copyright files are not machine-readable for every package.
"""
import datetime
import hashlib
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import urllib.parse
import uuid


def fail(msg):
    sys.stderr.write("oci-archive: %s\n" % msg)
    sys.exit(1)


class Archive:
    """An image archive: its manifest, config and layers, read from the tar without unpacking it."""

    def __init__(self, path):
        self.path = path
        self.tar = tarfile.open(path, "r:*")
        self.names = {m.name.lstrip("./"): m for m in self.tar.getmembers()}
        if "index.json" in self.names and "blobs/sha256" in {os.path.dirname(n) for n in self.names}:
            index = self._json("index.json")
            if not index.get("manifests"):
                fail("%s: index.json lists no manifest" % path)
            desc = index["manifests"][0]
            self.manifest_digest = desc["digest"]
            manifest = self._json(self._blob(desc["digest"]))
            if "manifests" in manifest:  # an index inside (Docker 25+): its first image manifest
                desc = manifest["manifests"][0]
                self.manifest_digest = desc["digest"]
                manifest = self._json(self._blob(desc["digest"]))
            self.config = self._json(self._blob(manifest["config"]["digest"]))
            self.layers = [self._blob(layer["digest"]) for layer in manifest["layers"]]
        elif "manifest.json" in self.names:  # docker save before Docker 25
            m = self._json("manifest.json")[0]
            self.manifest_digest = "sha256:" + hashlib.sha256(json.dumps(m).encode()).hexdigest()
            self.config = self._json(m["Config"])
            self.layers = m["Layers"]
        else:
            fail("%s: neither an OCI archive (index.json, blobs/) nor a docker save archive (manifest.json)" % path)

    def _blob(self, digest):
        algo, _, hexd = digest.partition(":")
        return "blobs/%s/%s" % (algo, hexd)

    def _json(self, name):
        if name not in self.names:
            fail("%s: %s is missing" % (self.path, name))
        return json.load(self.tar.extractfile(self.names[name]))

    def read(self, path):
        """The content of PATH in the image (the topmost layer that has it), or None when no layer has it or the
        topmost one deletes it."""
        path = path.lstrip("/")
        whiteout = os.path.join(os.path.dirname(path), ".wh." + os.path.basename(path))
        for layer in reversed(self.layers):
            with tarfile.open(fileobj=self.tar.extractfile(self.names[layer]), mode="r:*") as lt:
                for m in lt:
                    name = m.name.lstrip("./")
                    if name == whiteout:
                        return None
                    if name == path and m.isfile():
                        return lt.extractfile(m).read()
        return None


def sbom(archive, version, out):
    status = archive.read("var/lib/dpkg/status")
    if status is None:
        fail("%s: the image has no var/lib/dpkg/status: it is not a Debian-based image" % archive.path)
    with tempfile.TemporaryDirectory() as admin:
        with open(os.path.join(admin, "status"), "wb") as f:
            f.write(status)
        fmt = "${db:Status-Abbrev}\\t${Package}\\t${Version}\\t${Architecture}\\t${source:Package}\\t${source:Version}\\t${Homepage}\\n"
        q = subprocess.run(["dpkg-query", "--admindir=" + admin, "-W", "-f=" + fmt], capture_output=True,
                           text=True)
        if q.returncode != 0:
            fail("dpkg-query on the image's status file: %s" % q.stderr.strip())
    labels = (archive.config.get("config") or {}).get("Labels") or {}
    revision = labels.get("org.opencontainers.image.revision", "")
    created = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    image_id = "SPDXRef-Image"
    pkgs = [{
        "name": "gpuscale-image",
        "SPDXID": image_id,
        "versionInfo": version,
        "downloadLocation": "NOASSERTION",
        "filesAnalyzed": False,
        "licenseConcluded": "NOASSERTION",
        "licenseDeclared": "NOASSERTION",
        "copyrightText": "NOASSERTION",
        "primaryPackagePurpose": "CONTAINER",
        "checksums": [{"algorithm": "SHA256", "checksumValue": archive.manifest_digest.split(":", 1)[1]}],
        "externalRefs": [{
            "referenceCategory": "PACKAGE-MANAGER",
            "referenceType": "purl",
            "referenceLocator": "pkg:oci/gpuscale@%s?tag=%s" % (urllib.parse.quote(archive.manifest_digest), version),
        }],
    }, {
        "name": "gpuscale",
        "SPDXID": "SPDXRef-Package-gpuscale",
        "versionInfo": version,
        "downloadLocation": labels.get("org.opencontainers.image.source") or "NOASSERTION",
        "filesAnalyzed": False,
        "licenseConcluded": "NOASSERTION",
        "licenseDeclared": "NOASSERTION",
        "copyrightText": "NOASSERTION",
        "primaryPackagePurpose": "APPLICATION",
        "sourceInfo": "built from commit %s" % (revision or "unknown"),
    }]
    rels = [{"spdxElementId": "SPDXRef-DOCUMENT", "relationshipType": "DESCRIBES", "relatedSpdxElement": image_id},
            {"spdxElementId": image_id, "relationshipType": "CONTAINS",
             "relatedSpdxElement": "SPDXRef-Package-gpuscale"}]
    seen = set()
    for line in q.stdout.splitlines():
        st, name, ver, arch, src, srcver, home = (line.split("\t") + [""] * 7)[:7]
        if not st.startswith("ii") or (name, arch) in seen:
            continue
        seen.add((name, arch))
        spdxid = "SPDXRef-Package-deb-%s-%s" % ("".join(c if c.isalnum() or c in ".-" else "-" for c in name), arch)
        purl = "pkg:deb/debian/%s@%s?arch=%s&distro=debian-12" % (name, urllib.parse.quote(ver, safe=""), arch)
        p = {
            "name": name,
            "SPDXID": spdxid,
            "versionInfo": ver,
            "supplier": "Organization: Debian",
            "downloadLocation": "NOASSERTION",
            "filesAnalyzed": False,
            "licenseConcluded": "NOASSERTION",
            "licenseDeclared": "NOASSERTION",
            "copyrightText": "NOASSERTION",
            "externalRefs": [{"referenceCategory": "PACKAGE-MANAGER", "referenceType": "purl",
                              "referenceLocator": purl}],
        }
        if src and (src != name or srcver != ver):
            p["sourceInfo"] = "built from Debian source package %s %s" % (src, srcver)
        if home:
            p["homepage"] = home
        pkgs.append(p)
        rels.append({"spdxElementId": image_id, "relationshipType": "CONTAINS", "relatedSpdxElement": spdxid})
    if len(seen) == 0:
        fail("dpkg-query found no installed package in the image's status file")
    doc = {
        "spdxVersion": "SPDX-2.3",
        "dataLicense": "CC0-1.0",
        "SPDXID": "SPDXRef-DOCUMENT",
        "name": "gpuscale-image-%s" % version,
        "documentNamespace": "https://spdx.org/spdxdocs/gpuscale-image-%s-%s" % (version, uuid.uuid4()),
        "creationInfo": {
            "created": created,
            "creators": ["Tool: gpuscale-oci-archive.py (dpkg-query on the image's var/lib/dpkg/status)"],
        },
        "packages": pkgs,
        "relationships": rels,
    }
    with open(out, "w") as f:
        json.dump(doc, f, indent=1, sort_keys=False)
        f.write("\n")
    print("oci-archive: %s: %d Debian packages and gpuscale %s" % (out, len(seen), version))


def main():
    a = sys.argv[1:]
    if len(a) == 2 and a[0] == "config":
        json.dump(Archive(a[1]).config, sys.stdout, indent=1)
        sys.stdout.write("\n")
    elif len(a) == 4 and a[0] == "extract":
        data = Archive(a[1]).read(a[2])
        if data is None:
            fail("%s: no %s in the image" % (a[1], a[2]))
        with open(a[3], "wb") as f:
            f.write(data)
    elif len(a) == 4 and a[0] == "sbom":
        sbom(Archive(a[1]), a[2], a[3])
    else:
        sys.stderr.write(__doc__.split("\n\n")[1] + "\n")
        sys.exit(2)


if __name__ == "__main__":
    main()
