/** Lower-case alphanumeric words: "NVIDIA A100-SXM4-80GB" → nvidia, a100, sxm4, 80gb. */
function words(text: string): string[] {
  return text
    .toLowerCase()
    .split(/[^a-z0-9]+/)
    .filter(Boolean);
}

/**
 * Whether a GPU model is of a requested type (a pool's allowed types, a deployment's `gpu`):
 * the type's words appear consecutively in the model's. "H100" matches "NVIDIA H100 80GB HBM3"
 * and "RTX 4090" matches "NVIDIA GeForce RTX 4090", but "A10" does not match "NVIDIA A100"
 * (a plain substring test would).
 */
export function gpuTypeMatches(model: string, type: string): boolean {
  const m = words(model);
  const t = words(type);
  if (!t.length) return false;
  for (let i = 0; i + t.length <= m.length; i++) {
    if (t.every((w, j) => m[i + j] === w)) return true;
  }
  return false;
}
