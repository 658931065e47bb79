/**
 * A `/health` poller in a process of its own (forked by snapshot-stall.ts), so the round trips it
 * times are not delayed by the event loop of the process that builds and sends the snapshots. It polls
 * one request at a time, 5 ms apart, from the start until its parent sends "stop" (or it has the
 * number of round trips its second argument asks for), then sends back every round trip in ms and exits.
 */
import { pollLoop } from "./poll-loop.js";

const url = process.argv[2];
const count = process.argv[3] === undefined ? Number.POSITIVE_INFINITY : Number(process.argv[3]);
if (url === undefined || process.send === undefined || !(count > 0)) {
  console.error("usage: forked with IPC by snapshot-stall.ts: health-poller.js URL [COUNT]");
  process.exit(2);
}
const samples: number[] = [];
let running = true;
process.on("message", (m) => {
  if (m === "stop") running = false;
});
const loop = async () => {
  process.send?.("started");
  await pollLoop(url, samples, () => running && samples.length < count);
  process.send?.({ samples }, () => process.exit(0));
};
void loop();
