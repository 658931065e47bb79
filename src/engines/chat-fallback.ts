/**
 * The documented fallback chat template, for models without one (the generated models, stories260K)
 * and remote servers whose template we cannot observe:
 *   "System: …\n\nUser: …\nAssistant: …\n…\nAssistant:"
 * Plain text, so it tokenizes identically everywhere; a leading BOS comes from tokenization.
 */
import type { ChatMessage } from "../core/engine.js";

export function renderFallbackChat(messages: ChatMessage[]): string {
  const lines: string[] = [];
  for (const m of messages) {
    if (m.role === "system" || m.role === "developer") lines.push(`System: ${m.content}\n`);
    else if (m.role === "assistant") lines.push(`Assistant: ${m.content}`);
    else if (m.role === "tool") lines.push(`Tool: ${m.content}`);
    else lines.push(`User: ${m.content}`);
  }
  lines.push("Assistant:");
  return lines.join("\n");
}
