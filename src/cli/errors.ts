/** A user-facing CLI failure: printed as one clear line, exits non-zero (2 for bad usage). */
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode = 2,
  ) {
    super(message);
    this.name = "CliError";
  }
}

/** Parses a numeric flag value, rejecting anything that is not a finite number in range. */
export function parseNumber(
  name: string,
  raw: string,
  opts: { min?: number; max?: number; integer?: boolean } = {},
): number {
  const v = Number(raw);
  if (raw.trim() === "" || !Number.isFinite(v)) throw new CliError(`${name} must be a number, got '${raw}'`);
  if (opts.integer && !Number.isInteger(v))
    throw new CliError(`${name} must be a whole number, got '${raw}'`);
  if (opts.min !== undefined && v < opts.min) throw new CliError(`${name} must be ≥ ${opts.min}, got ${raw}`);
  if (opts.max !== undefined && v > opts.max) throw new CliError(`${name} must be ≤ ${opts.max}, got ${raw}`);
  return v;
}
