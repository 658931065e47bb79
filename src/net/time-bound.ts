/**
 * A wait bounded by a timer: the one shape behind a DNS lookup's timeout, a port's close grace and a
 * calibration reset's wait. The timer is cleared as soon as either side settles, so a bound holds no
 * process open after its work ended.
 */

/**
 * `work`'s outcome, or — once `ms` pass first — `onTimeout`'s: its value, or its throw as the rejection.
 * `work` is not cancelled; a caller that must stop it aborts it itself.
 */
export async function raceTimeout<T, L>(work: Promise<T>, ms: number, onTimeout: () => L): Promise<T | L> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, ms);
  }).then(onTimeout);
  try {
    return await Promise.race([work, late]);
  } finally {
    clearTimeout(timer);
  }
}
