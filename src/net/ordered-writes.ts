/**
 * The answer direction of a forward under delay injection (the paper's Δcomm): the whole answer waits
 * one injected delay, then its records leave in order. Without a delay (or once it is over and the
 * queue has drained) a record is written at once, with no promise hop on the hot path.
 */
export function orderedWrites(delay: (() => Promise<void>) | undefined): (write: () => void) => void {
  let queue: Promise<void> | undefined = delay?.();
  let queued = 0;
  return (write) => {
    if (!queue) return write();
    queued++;
    const q = queue.then(() => {
      write();
      if (--queued === 0 && queue === q) queue = undefined;
    });
    queue = q;
  };
}
