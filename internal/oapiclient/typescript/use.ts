// Compiled by CI under tsc --strict beside schema.d.ts, the types
// openapi-typescript generates from api/openapi.json: a device's calls and
// an operator's reads, typed from the document.
import type { components, paths } from "./schema";

type TaskDetail = components["schemas"]["TaskDetail"];
type ClaimAnswer = components["schemas"]["ClaimAnswer"];
type Presence = paths["/api/v1/device/heartbeat"]["post"]["requestBody"]["content"]["application/json"];
type Complete = paths["/api/v1/device/tasks/{task_id}/complete"]["post"]["requestBody"]["content"]["application/json"];

export function summary(t: TaskDetail): string {
  const claim = t.claim ? ` claimed by ${t.claim.device_id} (${t.claim.token_origin})` : "";
  const takeover = t.authorization?.takeover ?? "none";
  return `${t.id} ${t.state} v${t.version}${claim} takeover=${takeover}`;
}

export const presence: Presence = {
  device_id: "3f0c7c1e-8a52-4d5e-9b1e-6f8a2b3c4d5e",
  app_version: "1.0.0",
  os_version: "Debian 12",
  target_app_version: "1.0.0",
  checks: { accessibility_connected: true, target_app_installed: true },
};

export function complete(claim: ClaimAnswer, executionId: string): Complete {
  return {
    device_id: presence.device_id,
    claim_generation: claim.claim_generation,
    execution_id: executionId,
    expected_version: claim.version,
    result: { ok: true },
  };
}
