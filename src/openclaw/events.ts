/**
 * ACP session updates as OpenClaw turn events:
 * - agent_message_chunk → text_delta (output); agent_thought_chunk →
 *   text_delta (thought); a chunk that is not text (an image, a resource)
 *   → status naming its type, so nothing is dropped silently;
 * - tool_call / tool_call_update → tool_call with id, status and title (an
 *   update without a title gets the one its tool call announced);
 * - plan, usage_update, current_mode_update, config_option_update,
 *   available_commands_update, session_info_update and any update a later
 *   ACP adds → status, tagged with the update's name;
 * - user_message_chunk → nothing (the user's own words, replayed by a load).
 * The end of the turn (done) and failures (error) are the turn's, turn.ts.
 */
import type { ContentBlock, SessionUpdate } from "@agentclientprotocol/sdk";
import type { OpenClawLiveEvent, OpenClawToolKind } from "./types.js";

const TOOL_KINDS: ReadonlySet<string> = new Set([
  "read",
  "edit",
  "delete",
  "move",
  "search",
  "execute",
  "fetch",
  "switch_mode",
  "think",
  "other",
]);

/** Per turn: the titles its tool calls announced, for updates that carry none. */
export class EventMapper {
  private readonly titles = new Map<string, string>();

  map(u: SessionUpdate): OpenClawLiveEvent | undefined {
    switch (u.sessionUpdate) {
      case "agent_message_chunk":
        return chunkEvent(u.content, "output", u.sessionUpdate);
      case "agent_thought_chunk":
        return chunkEvent(u.content, "thought", u.sessionUpdate);
      case "user_message_chunk":
        return undefined;
      case "tool_call": {
        this.titles.set(u.toolCallId, u.title);
        return {
          type: "tool_call",
          text: u.title,
          tag: "tool_call",
          toolCallId: u.toolCallId,
          title: u.title,
          ...(u.status ? { status: u.status } : {}),
          ...toolKind(u.kind),
        };
      }
      case "tool_call_update": {
        if (typeof u.title === "string") this.titles.set(u.toolCallId, u.title);
        const title = this.titles.get(u.toolCallId);
        const status = u.status ?? undefined;
        return {
          type: "tool_call",
          text: [title ?? u.toolCallId, status].filter((x) => x !== undefined).join(": "),
          tag: "tool_call_update",
          toolCallId: u.toolCallId,
          ...(title !== undefined ? { title } : {}),
          ...(status !== undefined ? { status } : {}),
          ...toolKind(u.kind),
        };
      }
      default:
        return statusEvent(u);
    }
  }
}

function toolKind(kind: string | null | undefined): { kind?: OpenClawToolKind } {
  return typeof kind === "string" && TOOL_KINDS.has(kind) ? { kind: kind as OpenClawToolKind } : {};
}

function chunkEvent(content: ContentBlock, stream: "output" | "thought", tag: string): OpenClawLiveEvent {
  if (content.type === "text") return { type: "text_delta", text: content.text, stream, tag };
  return { type: "status", text: `${stream === "thought" ? "thought" : "reply"}: ${describeBlock(content)}`, tag };
}

function describeBlock(b: ContentBlock): string {
  switch (b.type) {
    case "image":
    case "audio":
      return `[${b.type} ${b.mimeType}]`;
    case "resource_link":
      return `[resource ${b.uri}]`;
    case "resource":
      return `[resource ${b.resource.uri}]`;
    default:
      return `[${(b as { type: string }).type}]`;
  }
}

/** Everything that is neither text nor a tool call: one status line, tagged with the update's name. */
function statusEvent(u: SessionUpdate): OpenClawLiveEvent {
  const tag = u.sessionUpdate;
  switch (u.sessionUpdate) {
    case "plan":
      return { type: "status", tag, text: `plan: ${u.entries.map((e) => `[${e.status}] ${e.content}`).join("; ")}` };
    case "usage_update":
      return { type: "status", tag, text: `usage: ${u.used} of ${u.size}`, used: u.used, size: u.size };
    case "current_mode_update":
      return { type: "status", tag, text: `mode: ${u.currentModeId}` };
    case "config_option_update":
      return {
        type: "status",
        tag,
        text: `config: ${u.configOptions.map((o) => `${o.id}=${String(o.currentValue)}`).join(", ")}`,
      };
    case "available_commands_update":
      return { type: "status", tag, text: `commands: ${u.availableCommands.map((c) => `/${c.name}`).join(", ")}` };
    case "session_info_update":
      return { type: "status", tag, text: `title: ${u.title ?? "(none)"}` };
    case "notice":
      return { type: "status", tag, text: `${u.severity}: ${u.title}${u.description ? ` (${u.description})` : ""}` };
    case "compaction_update":
      return {
        type: "status",
        tag,
        text: `compaction ${u.compactionId}: ${u.status}${u.error ? ` (${u.error})` : ""}`,
      };
    default:
      // an update kind this SDK version does not name yet: passed on by its tag
      return { type: "status", tag, text: tag };
  }
}
