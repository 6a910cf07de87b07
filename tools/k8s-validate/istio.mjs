// Validates Istio resources against Istio's CRD schemas, as the API server would on
// `kubectl apply`: types, enums, patterns (a WasmPlugin's sha256), required fields.
//
// Input (stdin): a JSON array of {"id": "...", "document": {...}}, every document an
// `*.istio.io` resource. Output: one line per document, `OK id` or `ERROR id: why`.
// Exit status 1 when any document is refused or has a kind there is no schema for.
//
// The schemas are those of the npm package @kubernetes-models/istio (generated from
// Istio's own CRD files; the version is pinned by package-lock.json). They do not refuse
// unknown fields: an API server prunes those from custom resources, or refuses them under
// `kubectl apply --validate=strict`. tests/tests/k8s_manifests.rs runs this.

import { readFileSync } from "node:fs";

const input = JSON.parse(readFileSync(0, "utf8"));
let failed = 0;
for (const { id, document } of input) {
  const [group, version] = String(document.apiVersion ?? "").split("/");
  const kind = String(document.kind ?? "");
  if (!group?.endsWith(".istio.io") || !version || !/^[A-Za-z]+$/.test(kind)) {
    console.log(`ERROR ${id}: not an Istio resource (apiVersion ${document.apiVersion}, kind ${kind})`);
    failed++;
    continue;
  }
  let model;
  try {
    model = (await import(`@kubernetes-models/istio/${group}/${version}/${kind}`))[kind];
  } catch (e) {
    console.log(`ERROR ${id}: no schema for ${group}/${version} ${kind}: ${e.message}`);
    failed++;
    continue;
  }
  try {
    new model(document).validate();
    console.log(`OK ${id}`);
  } catch (e) {
    console.log(`ERROR ${id}: ${e.message}`);
    failed++;
  }
}
process.exit(failed === 0 ? 0 : 1);
