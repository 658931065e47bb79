/**
 * The forward channel's 101 tag in shared-secret mode (auth/channel-mac.ts): it checks only the tag
 * of this upgrade's answer (nonce, signature, both node ids, what it settles) by the node it was sent to.
 */
import { describe, expect, it } from "vitest";
import {
  type ChannelAccept,
  type ChannelBinding,
  channelAcceptTag,
  checkChannelAcceptTag,
  frameMac,
} from "../../src/net/auth/channel-mac.js";
import { SECRET } from "./fixtures.js";

const binding: ChannelBinding = { nonce: "n".repeat(32), client: "A", server: "B" };
const answer: ChannelAccept = {
  accept: "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=",
  extensions: "",
  protocol: "",
  signature: "ab".repeat(32),
};

describe("channelAcceptTag", () => {
  it("checks only the tag of this upgrade's answer by the node it was sent to", () => {
    const tag = channelAcceptTag(SECRET, binding, answer);
    expect(checkChannelAcceptTag(SECRET, binding, answer, tag)).toBe(true);
    const refused: [string, boolean][] = [
      ["another nonce", checkChannelAcceptTag(SECRET, { ...binding, nonce: "m".repeat(32) }, answer, tag)],
      ["another server", checkChannelAcceptTag(SECRET, { ...binding, server: "C" }, answer, tag)],
      ["another client", checkChannelAcceptTag(SECRET, { ...binding, client: "C" }, answer, tag)],
      ["another accept key", checkChannelAcceptTag(SECRET, binding, { ...answer, accept: "x" }, tag)],
      [
        "compression agreed",
        checkChannelAcceptTag(SECRET, binding, { ...answer, extensions: "permessage-deflate" }, tag),
      ],
      [
        "another request",
        checkChannelAcceptTag(SECRET, binding, { ...answer, signature: "cd".repeat(32) }, tag),
      ],
      ["another secret", checkChannelAcceptTag(Buffer.alloc(32, 9), binding, answer, tag)],
      [
        "a frame key's tag",
        checkChannelAcceptTag(
          SECRET,
          binding,
          answer,
          frameMac(SECRET, binding, "server").seal(Buffer.from("x")).subarray(0, 16).toString("hex"),
        ),
      ],
      ["no tag", checkChannelAcceptTag(SECRET, binding, answer, undefined)],
      ["a short tag", checkChannelAcceptTag(SECRET, binding, answer, tag.slice(2))],
      ["not hex", checkChannelAcceptTag(SECRET, binding, answer, `${tag.slice(2)}zz`)],
      ["a repeated header", checkChannelAcceptTag(SECRET, binding, answer, `${tag}, ${tag}`)],
    ];
    for (const [what, ok] of refused) expect(ok, what).toBe(false);
  });
});
