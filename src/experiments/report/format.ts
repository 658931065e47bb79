/** The report's number formats and its Markdown table: one place, so every table reads alike. */

export const pct = (x: number | undefined) => (x === undefined ? "—" : `${(x * 100).toFixed(1)}`);
export const sec = (x: number | undefined) => (x === undefined ? "—" : x.toFixed(3));
export const signed = (x: number | undefined) =>
  x === undefined ? "—" : `${x >= 0 ? "+" : "−"}${Math.abs(x).toFixed(3)}`;
export const ratio = (ours: number | undefined, paper: number | undefined) =>
  ours === undefined || paper === undefined || paper === 0 ? "—" : `${(ours / paper).toFixed(2)}×`;
export const int = (x: number) => Math.round(x).toLocaleString("en-US");
export const check = (ok: boolean | undefined) =>
  ok === undefined ? "n/a (run not in this grid)" : ok ? "**reproduced**" : "**not reproduced**";

/** A Δcomm as the prose names it: "2 ms", "1 s". */
export const delay = (ms: number) => (ms >= 1000 ? `${ms / 1000} s` : `${ms} ms`);

export function table(head: string[], rows: string[][]): string {
  const line = (cells: string[]) => `| ${cells.join(" | ")} |`;
  return [line(head), line(head.map(() => "---")), ...rows.map(line)].join("\n");
}
