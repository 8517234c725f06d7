/**
 * The update → event mapping for what the fixture agent does not send in a
 * turn: content that is not text, notices, an update kind this SDK version
 * does not name, the user's own chunks (replayed by a load), and a tool
 * call update whose tool call the turn never saw.
 */
import { describe, expect, it } from "vitest";
import type { SessionUpdate } from "@agentclientprotocol/sdk";
import { EventMapper } from "../../src/openclaw/events.js";

const map = (u: unknown) => new EventMapper().map(u as SessionUpdate);

describe("EventMapper", () => {
  it("names non-text content instead of dropping it, and passes the user's own words over", () => {
    expect(
      map({ sessionUpdate: "agent_message_chunk", content: { type: "image", mimeType: "image/png", data: "AAAA" } }),
    ).toEqual({ type: "status", text: "reply: [image image/png]", tag: "agent_message_chunk" });
    expect(
      map({ sessionUpdate: "agent_thought_chunk", content: { type: "resource_link", uri: "file:///x", name: "x" } }),
    ).toEqual({ type: "status", text: "thought: [resource file:///x]", tag: "agent_thought_chunk" });
    expect(map({ sessionUpdate: "user_message_chunk", content: { type: "text", text: "hi" } })).toBeUndefined();
  });

  it("tags every other update as a status line, unknown kinds by their own name", () => {
    expect(map({ sessionUpdate: "current_mode_update", currentModeId: "code" })).toEqual({
      type: "status",
      tag: "current_mode_update",
      text: "mode: code",
    });
    expect(
      map({ sessionUpdate: "available_commands_update", availableCommands: [{ name: "story", description: "d" }] }),
    ).toEqual({ type: "status", tag: "available_commands_update", text: "commands: /story" });
    expect(
      map({
        sessionUpdate: "config_option_update",
        configOptions: [{ id: "model", currentValue: "m", type: "select", name: "Model", options: [] }],
      }),
    ).toEqual({ type: "status", tag: "config_option_update", text: "config: model=m" });
    expect(map({ sessionUpdate: "session_info_update", title: "Refactor" })).toEqual({
      type: "status",
      tag: "session_info_update",
      text: "title: Refactor",
    });
    expect(map({ sessionUpdate: "notice", severity: "warning", title: "slow", description: "rate limited" })).toEqual({
      type: "status",
      tag: "notice",
      text: "warning: slow (rate limited)",
    });
    expect(map({ sessionUpdate: "future_update_kind", anything: 1 })).toEqual({
      type: "status",
      tag: "future_update_kind",
      text: "future_update_kind",
    });
  });

  it("a tool call update without a title and without a known tool call is named by its id", () => {
    expect(map({ sessionUpdate: "tool_call_update", toolCallId: "t9", status: "failed", kind: "not-a-kind" })).toEqual({
      type: "tool_call",
      text: "t9: failed",
      tag: "tool_call_update",
      toolCallId: "t9",
      status: "failed",
    });
  });
});
