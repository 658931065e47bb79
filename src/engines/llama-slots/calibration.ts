/**
 * Which RAM prompt cache setting the server runs with, from the runs' reported `cache_n`: the node is
 * told it (`--engine-cache-ram`), and a shadow mirror with the other setting follows the same runs.
 * Over the last CALIBRATION_RUNS reported runs, a shadow right at least CALIBRATION_SHADOW times while
 * the mirror was right at most CALIBRATION_MIRROR times says the node was told otherwise than the
 * server runs.
 */
const CALIBRATION_RUNS = 16;
const CALIBRATION_SHADOW = 14;
const CALIBRATION_MIRROR = 10;

export class RamCacheCalibration {
  /** The last runs' outcomes: [mirror exact, shadow exact]. */
  private readonly evidence: [boolean, boolean][] = [];

  /**
   * Takes one reported run; returns why the shadow (its RAM cache `on` or off) should become
   * the mirror once the runs say so, else undefined.
   */
  observe(mirrorExact: boolean, shadowExact: boolean, on: boolean): string | undefined {
    this.evidence.push([mirrorExact, shadowExact]);
    if (this.evidence.length > CALIBRATION_RUNS) this.evidence.shift();
    if (this.evidence.length < CALIBRATION_RUNS) return undefined;
    const mine = this.evidence.filter((e) => e[0]).length;
    const other = this.evidence.filter((e) => e[1]).length;
    if (other < CALIBRATION_SHADOW || mine > CALIBRATION_MIRROR) return undefined;
    return (
      `the server's RAM prompt cache looks ${on ? "on" : "off"} (${other} of the last ${CALIBRATION_RUNS} ` +
      `runs predicted right that way, ${mine} as configured): set --engine-cache-ram ${on ? "to its --cache-ram" : "0"}`
    );
  }
}
