/**
 * A `/health` poller in a process of its own (forked by snapshot-stall.ts), so the round trips it
 * times are not delayed by the event loop of the process that builds and sends the snapshots. It polls
 * one request at a time, 5 ms apart, from the start until its parent sends "stop", then sends back
 * every round trip in ms and exits.
 */
import { pollLoop } from "./poll-loop.js";

const url = process.argv[2];
if (url === undefined || process.send === undefined) {
  console.error("usage: forked with IPC by snapshot-stall.ts: health-poller.js URL");
  process.exit(2);
}
const samples: number[] = [];
let running = true;
process.on("message", (m) => {
  if (m === "stop") running = false;
});
const loop = async () => {
  process.send?.("started");
  await pollLoop(url, samples, () => running);
  process.send?.({ samples }, () => process.exit(0));
};
void loop();
