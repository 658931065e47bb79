/**
 * One GET at a time, `gapMs` apart, each round trip (body read) timed in ms into `samples`, until
 * `running()` turns false: the /health poller's loop, in its own process or in the bench's.
 */
export async function pollLoop(
  url: string,
  samples: number[],
  running: () => boolean,
  gapMs = 5,
): Promise<void> {
  while (running()) {
    const t0 = performance.now();
    const r = await fetch(url);
    await r.arrayBuffer();
    samples.push(performance.now() - t0);
    await new Promise((res) => setTimeout(res, gapMs));
  }
}
