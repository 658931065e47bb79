/**
 * Chat templates for the embedded engine. When the GGUF carries `tokenizer.chat_template`,
 * node-llama-cpp's resolver picks the matching chat wrapper (or renders the Jinja template); the
 * result is flattened to plain text with special tokens written out, and the engine tokenizes that
 * text with special-token parsing on, so the rendered text is exactly what is tokenized and routed.
 * Models without a template (the generated ones, stories260K) use the fallback (chat-fallback.ts).
 */
import type { ChatHistoryItem, LlamaModel, LlamaTextJSON } from "node-llama-cpp";
import type { ChatMessage } from "../../core/engine.js";
import { renderFallbackChat } from "../chat-fallback.js";

function toHistory(messages: ChatMessage[]): ChatHistoryItem[] {
  const history: ChatHistoryItem[] = messages.map((m) => {
    if (m.role === "system" || m.role === "developer") return { type: "system", text: m.content };
    if (m.role === "assistant") return { type: "model", response: [m.content] };
    return { type: "user", text: m.content };
  });
  history.push({ type: "model", response: [] });
  return history;
}

function specialTokenText(model: LlamaModel, name: string): string {
  const t = model.tokens;
  const text =
    name === "BOS" ? t.bosString : name === "EOS" ? t.eosString : name === "EOT" ? t.eotString : t.nlString;
  return text ?? (name === "NL" ? "\n" : "");
}

/** Renders with the model's own template, or the fallback when the GGUF has none. */
export async function renderChat(
  model: LlamaModel,
  hasTemplate: boolean,
  messages: ChatMessage[],
): Promise<string> {
  if (!hasTemplate) return renderFallbackChat(messages);
  const { resolveChatWrapper } = await import("node-llama-cpp");
  const wrapper = resolveChatWrapper(model);
  const { contextText } = wrapper.generateContextState({ chatHistory: toHistory(messages) });
  const json: LlamaTextJSON = contextText.toJSON();
  if (typeof json === "string") return json;
  return json
    .map((v) =>
      typeof v === "string" ? v : v.type === "specialToken" ? specialTokenText(model, v.value) : v.value,
    )
    .join("");
}
