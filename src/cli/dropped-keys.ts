/**
 * Keys a zod schema silently dropped: object schemas strip keys they do not know, so a mistyped
 * setting (`freshPeerLod`) would run the defaults unnoticed. Comparing the input with the parsed
 * output finds them, nested objects (`swim.…`) included, without making the core's schemas strict.
 */
export function droppedKeys(given: unknown, kept: unknown, path = ""): string[] {
  if (!isPlainObject(given) || !isPlainObject(kept)) return [];
  const out: string[] = [];
  for (const [k, v] of Object.entries(given)) {
    const at = path === "" ? k : `${path}.${k}`;
    if (!Object.hasOwn(kept, k)) out.push(at);
    else out.push(...droppedKeys(v, kept[k], at));
  }
  return out;
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}
