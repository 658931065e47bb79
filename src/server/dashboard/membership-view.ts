/// <reference lib="dom" />
/**
 * The failure detector's panel in the page (membership.ts is its model, DOM-free): each poll's SWIM
 * counts drawn as text, with what the previous polls said kept here for the rises.
 */

import { $, el } from "./dom.js";
import {
  type MembershipItem,
  type MembershipReading,
  membershipPanel,
  noteRises,
  type RiseTimes,
  readMembership,
} from "./membership.js";

/** The previous poll's SWIM counts: the panel shows how much each rose since. */
let swimBefore: MembershipReading | undefined;
/** When each alerting SWIM count last rose (membership.ts `noteRises`). */
let swimRises: RiseTimes = {};

/** This poll's `/cluster` `membership` (taken at `t`, seconds) and `gossip`, drawn into #membership. */
export function showMembership(raw: unknown, t: number, gossip: unknown): void {
  const reading = readMembership(raw, t);
  renderMembership(reading, gossip);
  swimBefore = reading;
}

/** The failure detector's counts under the refused: the ones to alert on highlighted, rises since the last poll. */
function renderMembership(reading: MembershipReading | undefined, gossip: unknown): void {
  const box = $("membership");
  swimRises = noteRises(reading, swimBefore, swimRises);
  const panel = membershipPanel(reading, swimBefore, swimRises);
  if (!panel.shown && gossip === "full") {
    // Said, not hidden: an operator looking for the failure detector learns why there is none.
    box.hidden = false;
    const none = el(
      "span",
      "Failure detector: none under --gossip full (SWIM runs with --gossip scuttlebutt).",
      "muted",
    );
    none.id = "membership-note";
    box.replaceChildren(none);
    return;
  }
  box.hidden = !panel.shown;
  if (!panel.shown) {
    box.replaceChildren();
    return;
  }
  const span = (i: MembershipItem, cls: string) => {
    const s = el("span", null, i.alert ? `${cls} alerting` : cls);
    s.dataset.key = i.key;
    s.dataset.count = i.count === null ? "" : String(i.count);
    s.dataset.alert = String(i.alert);
    s.title = i.hint;
    s.append(`${i.label} `, el("b", i.value));
    if (i.rise) s.append(" ", el("span", i.rise, "rise"));
    return s;
  };
  const join = (xs: HTMLElement[]) => xs.flatMap((x, n) => (n > 0 ? [" · ", x] : [x]));
  const note =
    panel.alerting > 0
      ? el("span", `${panel.alerting} to alert on`, "swim alerting")
      : el("span", "nothing to alert on", "muted");
  note.id = "membership-note";
  const main = el("div");
  main.append(
    el("b", "Failure detector (SWIM)"),
    " (",
    note,
    "): ",
    ...join(panel.items.map((i) => span(i, "swim"))),
  );
  const context = el("div", null, "muted");
  context.append(...join(panel.context.map((i) => span(i, "swim context"))));
  box.replaceChildren(main, context);
}
