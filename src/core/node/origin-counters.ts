/**
 * The origin's counters: what origin.ts and its parts (admission, answering, forward attempts,
 * hedging) count of our clients' requests, its part of NodeStats. The origin keeps one object and
 * resets it in place, so the parts that hold it keep counting into the same one.
 */
/** The origin's counters, all zero (a start's and a restart's). */
export function originCounters() {
  return {
    clientRequests: 0,
    forwarded: 0,
    fallbacks: 0,
    lateReplies: 0,
    ackTimeouts: 0,
    probes: 0,
    resends: 0,
    ignoredAcks: 0,
    rejectedOverload: 0,
    /** Client requests refused because no node was expected to answer within their deadline. */
    clientDeadlineRefusals: 0,
    invalidMessages: 0,
    overdueAnswers: 0,
    forwardTimeouts: 0,
    peerErrors: 0,
    offloaded: 0,
    hedgedAnswers: 0,
    clientGoneQueued: 0,
    clientGoneForwarded: 0,
    clientGoneRunning: 0,
    clientGoneDeadlineQueued: 0,
    clientGoneDeadlineForwarded: 0,
    clientGoneDeadlineRunning: 0,
  };
}
