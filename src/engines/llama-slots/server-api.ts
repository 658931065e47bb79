/**
 * llama-server's JSON endpoints the slot cache reads: `/props` (its slots and their context) and
 * `/slots` (what each slot holds now), each parsed within bounds a server cannot exceed.
 */
import { z } from "zod";
import { EngineInputError } from "../errors.js";
import type { HttpClient } from "../http-client.js";

const PropsShape = z.object({
  total_slots: z.number().int().min(1).max(4096),
  endpoint_slots: z.boolean().optional(),
  default_generation_settings: z.object({ n_ctx: z.number().int().min(1).max(10_000_000) }),
});
export type ServerProps = z.infer<typeof PropsShape>;

const SlotsShape = z
  .array(
    z.object({
      id: z.number().int().min(0).max(4096),
      is_processing: z.boolean().optional(),
      id_task: z.number().int().optional(),
      n_prompt_tokens: z.number().int().min(0).max(10_000_000).optional(),
    }),
  )
  .max(4096);
export type ServerSlots = z.infer<typeof SlotsShape>;

/** `/props` when it names the server's slots; undefined when it does not (not a llama.cpp server). */
export async function readProps(http: HttpClient): Promise<ServerProps | undefined> {
  try {
    const p = PropsShape.safeParse(await http.json("GET", "/props"));
    if (!p.success) return undefined;
    return p.data;
  } catch (e) {
    if (e instanceof EngineInputError) return undefined;
    throw e;
  }
}

/** `/slots`; undefined when the server does not expose it (or answers it otherwise). */
export async function readSlots(http: HttpClient, slotsEndpoint: boolean): Promise<ServerSlots | undefined> {
  if (!slotsEndpoint) return undefined;
  try {
    const p = SlotsShape.safeParse(await http.json("GET", "/slots"));
    return p.success ? p.data : undefined;
  } catch (e) {
    if (e instanceof EngineInputError) return undefined;
    throw e;
  }
}
