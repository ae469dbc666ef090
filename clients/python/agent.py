#!/usr/bin/env python3
"""An agent backend writing its session to Palimpsest, with the installed client package
(``palimpsest.client``, ``palimpsest.events``; ``pip install ./clients/python``).

What it does, in the order an agent loop would:
  1. Client.create_session.
  2. Two turns, each one atomic append guarded by expected_last_seq:
     turn/start, step/start, user/message, assistant/chunk..., assistant/message citing its
     chunks (with a tool call), tool/call, tool/result citing the call, step/end, turn/end.
     The three messages use the typed EventData forms (palimpsest.v1 content messages: the
     server stores them as the reference JSON); the other events come from palimpsest.events.
  3. Compaction of turn 1, server-side: Client.plan_compaction up to turn 1's tool result (the
     plan never separates a tool call from its result), then Client.compact with that plan and
     the summary (conditional on the planned head); the server writes compaction/start,
     compaction/summary, the replacing user/message (citing every shadowed seq) and compaction/end.
  4. Prune of turn 2's long tool result, server-side (Client.prune_tool_results), conditional on
     the head the agent knows. A concurrent writer appends first, so the call fails with
     PalimpsestError FAILED_PRECONDITION / HEAD_MISMATCH (details decoded by the package); the
     agent re-reads the head and retries.
  5. Client.derived_messages (model history, typed): what the model sees next.
Prints one JSON summary on stdout.

Run it with `clients/run.sh python HOST:PORT` (puts clients/python/src on the path), or with the
package installed: `python3 clients/python/agent.py --addr HOST:PORT`.
"""
from __future__ import annotations

import argparse
import json
import sys
import uuid
from typing import Any, Dict, List, Optional, Tuple

from palimpsest import events as pev
from palimpsest.client import Client, PalimpsestError
from palimpsest.v1 import content_pb2 as c
from palimpsest.v1 import event_pb2 as ev
from palimpsest.v1 import service_pb2 as svc

PROVIDER, MODEL = "deepseek", "deepseek-chat"


def error_json(e: PalimpsestError) -> Dict[str, Any]:
    """The decoded error, with the google.rpc detail kinds apart."""
    return {"code": e.code, "reason": e.reason, "domain": e.domain, "metadata": dict(e.metadata), "message": e.message,
            "preconditionFailure": [{"type": v.type, "subject": v.subject, "description": v.description}
                                    for v in e.violations if v.kind == "precondition"],
            "badRequest": [{"field": v.field, "description": v.description} for v in e.violations if v.kind == "field"]}


# ---------------------------------------------------------------- typed message forms

def text(t: str) -> c.ContentBlock:
    return c.ContentBlock(text=c.TextBlock(text=t))


def user_message(msg_id: str, t: str) -> ev.EventInput:
    msg = c.Message(id=msg_id, role="user", content=[text(t)], source=c.MessageSource(user=c.UserSource()))
    return ev.EventInput(type="user/message", data=ev.EventData(user_message=msg), append=ev.SurfaceAppend())


def tool_result_data(turn: int, step: int, msg_id: str, call_id: str, output: str) -> c.ToolResultData:
    block = c.ToolResultBlock(tool_call_id=call_id, content=[text(output)])
    msg = c.Message(id=msg_id, role="user", content=[c.ContentBlock(tool_result=block)],
                    source=c.MessageSource(tool=c.ToolSource(call_id=call_id)))
    return c.ToolResultData(turn=turn, step=step, message=msg)


class Turn:
    """Builds one turn as a batch whose seqs are known in advance (the batch is atomic and
    guarded by expected_last_seq, so event k gets seq head+1+k)."""

    def __init__(self, head: int, turn: int):
        self.next_seq, self.turn = head + 1, turn
        self.events: List[ev.EventInput] = []
        self.seqs: Dict[str, int] = {}

    def add(self, name: str, event: ev.EventInput) -> int:
        seq = self.next_seq
        self.events.append(event)
        self.seqs.setdefault(name, seq)
        self.next_seq += 1
        return seq


def build_turn(head: int, n: int, prompt: str, answer: str, tool: Optional[Tuple[str, str, str]]) -> Turn:
    t = Turn(head, n)
    t.add("turn/start", pev.turn_start(n))
    t.add("step/start", pev.step_start(n, 1))
    t.add("user", user_message(f"u{n}", prompt))
    chunks: List[Dict[str, Any]] = [
        {"type": "block-start", "index": 0, "blockType": "text"},
        {"type": "text-delta", "index": 0, "text": answer[: len(answer) // 2]},
        {"type": "text-delta", "index": 0, "text": answer[len(answer) // 2:]},
        {"type": "block-end", "index": 0, "block": {"type": "text", "text": answer}},
    ]
    content = [text(answer)]
    if tool:
        call_id, name, args = tool
        chunks += [
            {"type": "block-start", "index": 1, "blockType": "tool-call"},
            {"type": "tool-call-delta", "index": 1, "id": call_id, "name": name, "argumentsDelta": args},
            {"type": "block-end", "index": 1, "block": {"type": "tool-call", "id": call_id, "name": name, "arguments": args}},
        ]
        content.append(c.ContentBlock(tool_call=c.ToolCallBlock(id=call_id, name=name, arguments=args)))
    chunks.append({"type": "finish", "reason": "tool-calls" if tool else "stop"})
    chunk_seqs = [t.add("chunk", pev.chunk(n, 1, ch)) for ch in chunks]
    assistant = c.AssistantMessageData(
        turn=n, step=1,
        message=c.Message(id=f"a{n}", role="assistant", content=content,
                          source=c.MessageSource(model=c.ModelSource(provider=PROVIDER, model=MODEL))),
        usage=c.TokenUsage(input_tokens=100 * n, output_tokens=20))
    t.add("assistant", ev.EventInput(type="assistant/message", data=ev.EventData(assistant_message=assistant),
                                     source_event_seqs=ev.SourceEventSeqs(seqs=chunk_seqs), append=ev.SurfaceAppend()))
    if tool:
        call_id, name, args = tool
        call_seq = t.add("tool/call", pev.tool_call(call_id, name, args, turn=n, step=1))
        output = tool_output(name)
        t.add("tool", ev.EventInput(type="tool/result", data=ev.EventData(tool_result=tool_result_data(n, 1, f"r{n}", call_id, output)),
                                    source_event_seqs=ev.SourceEventSeqs(seqs=[call_seq]), append=ev.SurfaceAppend()))
    t.add("step/end", pev.step_end(n, 1))
    t.add("turn/end", pev.turn_end(n))
    return t


def tool_output(name: str) -> str:
    if name == "read_file":
        return "\n".join(f"line {i}: lorem ipsum dolor sit amet" for i in range(1, 201))  # long: pruned later
    # A listing long enough that a summary of turn 1 is smaller than turn 1 (the server refuses a
    # summary that is not, as the reference does).
    return "\n".join(["README.md", "src/", "test/"] + [f"src/module_{i:02d}.py" for i in range(40)])


# ---------------------------------------------------------------- the agent

def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--addr", required=True, help="HOST:PORT of the Palimpsest server")
    ap.add_argument("addr_pos", nargs="?", help=argparse.SUPPRESS)
    ap.add_argument("--session", default="", help="session id (default: a fresh py-agent-<uuid>)")
    a = ap.parse_args()
    session_id = a.session or f"py-agent-{uuid.uuid4()}"
    out: Dict[str, Any] = {"sessionId": session_id}

    with Client(a.addr) as client:
        client.create_session(session_id, {"client": "python-example"})
        head = -1  # last seq this writer knows about (-1 = empty log)

        # Two turns, each one guarded atomic batch.
        t1 = build_turn(head, 1, "What is in this repo?", "Let me list the files.", ("call-1", "list_files", '{"path":"."}'))
        head = client.append(session_id, t1.events, expected_last_seq=head)[-1]
        t2 = build_turn(head, 2, "Show me the README.", "Reading it now.", ("call-2", "read_file", '{"path":"README.md"}'))
        head = client.append(session_id, t2.events, expected_last_seq=head)[-1]
        out["turns"] = [t1.seqs, t2.seqs]

        # Compaction, server-side: plan up to turn 1's tool result (the plan never separates a tool
        # call from its result), summarise the planned messages, then compact with that plan: the
        # Compact is conditional on the planned head. The server writes compaction/start,
        # compaction/summary, the replacing user/message and compaction/end with the right citations.
        plan = client.plan_compaction(session_id, up_to_seq=t1.seqs["tool"])
        if plan.blockers:
            raise SystemExit(f"compaction blocked: {plan.blockers[0].reason}: {plan.blockers[0].description}")

        def summarise(messages: List[Dict[str, Any]]) -> str:  # an LLM call in a real agent
            return f"Summary of {len(messages)} messages: the user asked what is in the repo; it holds README.md, src/ and test/."

        res = client.compact(session_id, summarise, plan=plan, provider=PROVIDER, model=MODEL,
                             usage={"input_tokens": 400, "output_tokens": 30})
        assert res is not None  # the plan had a range
        if res.HasField("error"):  # the summary was not smaller than the range: nothing replaced
            raise SystemExit(f"compaction refused: {res.error}")
        head = res.seqs[-1]
        out["compaction"] = {"shadowed": list(plan.shadowed_seqs), "replacementSeq": res.seqs[2], "summarySeq": res.seqs[1],
                             "shadowedTokenCount": plan.shadowed_token_count}

        # Meanwhile another writer (a title generator, say) appends: our head is now stale.
        client.append(session_id, [pev.event("session/title", {"title": "Repo tour"})])

        # Prune turn 2's long tool result, server-side, conditional on the head we know: the first
        # try meets HEAD_MISMATCH (decoded by the package); re-read the head and retry.
        target = t2.seqs["tool"]
        attempts, conflict = 0, None
        while True:
            attempts += 1
            try:
                pres = client.prune_tool_results(session_id, [target], expected_last_seq=head)
                break
            except PalimpsestError as e:
                if e.code != "FAILED_PRECONDITION" or e.reason != "HEAD_MISMATCH" or attempts >= 3:
                    raise
                conflict = error_json(e)
                conflict["headBeforeRetry"] = head
                head = client.head(session_id)  # re-read, retry
                conflict["headAfterReread"] = head
        head = pres.pruned[0].replacement_seq
        out["prune"] = {"target": target, "replacementSeq": pres.pruned[0].replacement_seq, "attempts": attempts,
                        "bytesSaved": pres.bytes_saved}
        out["conflict"] = conflict

        # A request the server rejects as malformed, to show BadRequest decoding too.
        try:
            client.append(session_id, [pev.event("turn/start", {"turn": 3}, append=True)])
            out["badRequest"] = None
        except PalimpsestError as e:
            out["badRequest"] = error_json(e)

        # What the model sees next (typed: each message also as palimpsest.v1 content messages).
        history = client.derived_messages(session_id, typed=True)
        # The raw stub (client.stub) for what the client does not wrap: the replace generation.
        surf = client.stub.GetSurface(svc.GetSurfaceRequest(session_id=session_id), timeout=client.timeout)
        out["surface"] = list(surf.seqs)
        out["replaceGeneration"] = surf.replace_generation
        out["headSeq"] = head
        out["messageCount"] = len(history)
        out["messages"] = [summarize(m) for _, m in history]
        out["prune"]["prunedText"] = out["messages"][-1]["blocks"][0]["text"]

    json.dump(out, sys.stdout)
    sys.stdout.write("\n")
    return 0


def summarize(m: svc.DerivedMessage) -> Dict[str, Any]:
    msg = m.message
    blocks: List[Dict[str, Any]] = []
    for b in msg.content:
        kind = b.WhichOneof("block")
        if kind == "text":
            blocks.append({"text": b.text.text})
        elif kind == "tool_call":
            blocks.append({"toolCall": b.tool_call.id})
        elif kind == "tool_result":
            blocks.append({"toolResult": b.tool_result.tool_call_id, "text": "".join(x.text.text for x in b.tool_result.content)})
    return {"seq": m.seq, "id": msg.id, "role": msg.role, "source": msg.source.WhichOneof("kind"),
            "typed": m.HasField("message"), "blocks": blocks}


if __name__ == "__main__":
    try:
        sys.exit(main())
    except PalimpsestError as e:
        print(json.dumps({"error": error_json(e)}), file=sys.stderr)
        sys.exit(1)
