#!/usr/bin/env python3
"""An agent backend writing its session to Palimpsest, with stubs generated from proto/.

What it does, in the order an agent loop would:
  1. CreateSession.
  2. Two turns, each one atomic AppendEvents batch guarded by expected_last_seq:
     turn/start, step/start, user/message, assistant/chunk..., assistant/message citing its
     chunks (with a tool call), tool/call, tool/result citing the call, step/end, turn/end.
     Messages use the typed EventData forms (user_message / assistant_message / tool_result);
     the other events are canonical JSON.
  3. Compaction of turn 1, server-side: PlanCompaction up to turn 1's tool result (the plan
     never separates a tool call from its result), then Compact with the plan's range, head and
     the summary; the server writes compaction/start, compaction/summary, the replacing
     user/message (citing every shadowed seq) and compaction/end.
  4. Prune of turn 2's long tool result, server-side (PruneToolResults: compaction/prune, then a
     tool/result copy identical except for the inner content), conditional on the head the agent
     knows. A concurrent writer appends first, so the call fails with FAILED_PRECONDITION /
     HEAD_MISMATCH; the agent decodes the google.rpc.Status details, re-reads the head with
     GetSession and retries.
  5. GetMessages(MODEL_HISTORY): what the model sees next.
Prints one JSON summary on stdout.

Run it with `clients/run.sh python HOST:PORT` (generates the stubs first).
"""
from __future__ import annotations

import argparse
import json
import sys
import uuid

import grpc
from google.rpc import error_details_pb2, status_pb2
from palimpsest.v1 import content_pb2 as c
from palimpsest.v1 import event_pb2 as ev
from palimpsest.v1 import service_pb2 as svc
from palimpsest.v1 import service_pb2_grpc

PROVIDER, MODEL = "deepseek", "deepseek-chat"


# ---------------------------------------------------------------- error details

class PalimpsestError(Exception):
    """A failed RPC with its google.rpc.Status details decoded."""

    def __init__(self, err: grpc.RpcError):
        self.code: grpc.StatusCode = err.code()
        self.message: str = err.details() or ""
        self.reason = ""
        self.domain = ""
        self.metadata: dict[str, str] = {}
        self.precondition: list[dict[str, str]] = []
        self.bad_request: list[dict[str, str]] = []
        for key, value in err.trailing_metadata() or ():
            if key != "grpc-status-details-bin":
                continue
            status = status_pb2.Status.FromString(value)  # binary metadata arrives as bytes
            self.message = status.message or self.message
            for detail in status.details:
                if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
                    info = error_details_pb2.ErrorInfo()
                    detail.Unpack(info)
                    self.reason, self.domain, self.metadata = info.reason, info.domain, dict(info.metadata)
                elif detail.Is(error_details_pb2.PreconditionFailure.DESCRIPTOR):
                    pf = error_details_pb2.PreconditionFailure()
                    detail.Unpack(pf)
                    self.precondition = [{"type": v.type, "subject": v.subject, "description": v.description} for v in pf.violations]
                elif detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
                    br = error_details_pb2.BadRequest()
                    detail.Unpack(br)
                    self.bad_request = [{"field": v.field, "description": v.description} for v in br.field_violations]
        super().__init__(f"{self.code.name} {self.reason}: {self.message}")

    def as_json(self) -> dict:
        return {"code": self.code.name, "reason": self.reason, "domain": self.domain, "metadata": self.metadata,
                "preconditionFailure": self.precondition, "badRequest": self.bad_request, "message": self.message}


# ---------------------------------------------------------------- event builders

def js(type_: str, data: object, **kw) -> ev.EventInput:
    """A log-only (or JSON-form) event."""
    return ev.EventInput(type=type_, data=ev.EventData(json=json.dumps(data, separators=(",", ":"))), **kw)


def cites(*seqs: int) -> ev.SourceEventSeqs:
    return ev.SourceEventSeqs(seqs=list(seqs))


APPEND = ev.SurfaceAppend()


def replace(start: int, end: int) -> ev.SurfaceReplace:
    return ev.SurfaceReplace(start=start, end=end)


def text(t: str) -> c.ContentBlock:
    return c.ContentBlock(text=c.TextBlock(text=t))


def user_message(msg_id: str, t: str) -> ev.EventInput:
    msg = c.Message(id=msg_id, role="user", content=[text(t)], source=c.MessageSource(user=c.UserSource()))
    return ev.EventInput(type="user/message", data=ev.EventData(user_message=msg), append=APPEND)


def tool_result_data(turn: int, step: int, msg_id: str, call_id: str, output: str) -> c.ToolResultData:
    block = c.ToolResultBlock(tool_call_id=call_id, content=[text(output)])
    msg = c.Message(id=msg_id, role="user", content=[c.ContentBlock(tool_result=block)],
                    source=c.MessageSource(tool=c.ToolSource(call_id=call_id)))
    return c.ToolResultData(turn=turn, step=step, message=msg)


class Turn:
    """Builds one turn as a batch whose seqs are known in advance (the batch is atomic and
    guarded by expected_last_seq, so event k gets seq head+1+k)."""

    def __init__(self, head: int, turn: int):
        self.next_seq, self.turn, self.events, self.seqs = head + 1, turn, [], {}

    def add(self, name: str, event: ev.EventInput) -> int:
        seq = self.next_seq
        self.events.append(event)
        self.seqs.setdefault(name, seq)
        self.next_seq += 1
        return seq


def build_turn(head: int, n: int, prompt: str, answer: str, tool: tuple[str, str, str] | None) -> Turn:
    t = Turn(head, n)
    t.add("turn/start", js("turn/start", {"turn": n}))
    t.add("step/start", js("step/start", {"turn": n, "step": 1}))
    t.add("user", user_message(f"u{n}", prompt))
    chunks = [
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
    chunk_seqs = [t.add("chunk", js("assistant/chunk", {"turn": n, "step": 1, "chunk": ch})) for ch in chunks]
    assistant = c.AssistantMessageData(
        turn=n, step=1,
        message=c.Message(id=f"a{n}", role="assistant", content=content,
                          source=c.MessageSource(model=c.ModelSource(provider=PROVIDER, model=MODEL))),
        usage=c.TokenUsage(input_tokens=100 * n, output_tokens=20))
    t.add("assistant", ev.EventInput(type="assistant/message", data=ev.EventData(assistant_message=assistant),
                                     source_event_seqs=cites(*chunk_seqs), append=APPEND))
    if tool:
        call_id, name, args = tool
        call_seq = t.add("tool/call", js("tool/call", {"turn": n, "step": 1, "callId": call_id, "name": name, "arguments": args}))
        output = tool_output(name)
        t.add("tool", ev.EventInput(type="tool/result", data=ev.EventData(tool_result=tool_result_data(n, 1, f"r{n}", call_id, output)),
                                    source_event_seqs=cites(call_seq), append=APPEND))
    t.add("step/end", js("step/end", {"turn": n, "step": 1}))
    t.add("turn/end", js("turn/end", {"turn": n, "reason": {"kind": "completed"}}))
    return t


def tool_output(name: str) -> str:
    if name == "read_file":
        return "\n".join(f"line {i}: lorem ipsum dolor sit amet" for i in range(1, 201))  # long: pruned later
    return "README.md\nsrc/\ntest/"


# ---------------------------------------------------------------- the agent

class Agent:
    def __init__(self, stub: service_pb2_grpc.SessionServiceStub, session_id: str):
        self.stub, self.session_id = stub, session_id
        self.head = -1  # last seq this writer knows about (-1 = empty log)

    def append(self, events: list[ev.EventInput]) -> svc.AppendEventsResponse:
        """Appends atomically, guarded by expected_last_seq; raises PalimpsestError."""
        try:
            res = self.stub.AppendEvents(svc.AppendEventsRequest(
                session_id=self.session_id, events=events, expected_last_seq=self.head))
        except grpc.RpcError as e:
            raise PalimpsestError(e) from None
        self.head = res.seqs[-1]
        return res

    def refresh_head(self) -> int:
        s = self.stub.GetSession(svc.GetSessionRequest(session_id=self.session_id)).session
        self.head = s.head_seq if s.HasField("head_seq") else -1
        return self.head


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--addr", required=True, help="HOST:PORT of the Palimpsest server")
    ap.add_argument("addr_pos", nargs="?", help=argparse.SUPPRESS)
    ap.add_argument("--session", default="", help="session id (default: a fresh py-agent-<uuid>)")
    a = ap.parse_args()
    session_id = a.session or f"py-agent-{uuid.uuid4()}"
    out: dict = {"sessionId": session_id}

    with grpc.insecure_channel(a.addr) as channel:
        grpc.channel_ready_future(channel).result(timeout=10)
        stub = service_pb2_grpc.SessionServiceStub(channel)
        stub.CreateSession(svc.CreateSessionRequest(session_id=session_id, labels={"client": "python-example"}))
        agent = Agent(stub, session_id)

        # Two turns, each one guarded atomic batch.
        t1 = build_turn(agent.head, 1, "What is in this repo?", "Let me list the files.", ("call-1", "list_files", '{"path":"."}'))
        agent.append(t1.events)
        t2 = build_turn(agent.head, 2, "Show me the README.", "Reading it now.", ("call-2", "read_file", '{"path":"README.md"}'))
        agent.append(t2.events)
        out["turns"] = [t1.seqs, t2.seqs]

        # Compaction, server-side: plan up to turn 1's tool result (the plan never separates a tool
        # call from its result), summarise the planned messages, then Compact with the plan's range
        # and head. The server writes compaction/start, compaction/summary, the replacing
        # user/message and compaction/end with the right citations.
        plan = stub.PlanCompaction(svc.PlanCompactionRequest(session_id=session_id, up_to_seq=t1.seqs["tool"]))
        if plan.blockers:
            raise SystemExit(f"compaction blocked: {plan.blockers[0].reason}: {plan.blockers[0].description}")
        summary_text = f"Summary of {len(plan.messages)} messages: the user asked what is in the repo; it holds README.md, src/ and test/."
        res = stub.Compact(svc.CompactRequest(
            session_id=session_id, start=plan.start, end=plan.end, expected_last_seq=plan.expected_last_seq,
            summary_text=summary_text, provider=PROVIDER, model=MODEL, usage=c.TokenUsage(input_tokens=400, output_tokens=30)))
        agent.head = res.seqs[-1]
        out["compaction"] = {"shadowed": list(plan.shadowed_seqs), "replacementSeq": res.seqs[2], "summarySeq": res.seqs[1],
                             "shadowedTokenCount": plan.shadowed_token_count}

        # Meanwhile another writer (a title generator, say) appends: our head is now stale.
        stub.AppendEvents(svc.AppendEventsRequest(session_id=session_id, events=[js("session/title", {"title": "Repo tour"})]))

        # Prune turn 2's long tool result, server-side, conditional on the head we know: the first
        # try meets HEAD_MISMATCH (decoded from grpc-status-details-bin); re-read and retry.
        target = t2.seqs["tool"]
        attempts, conflict = 0, None
        while True:
            attempts += 1
            try:
                pres = stub.PruneToolResults(svc.PruneToolResultsRequest(session_id=session_id, seqs=[target], expected_last_seq=agent.head))
                break
            except grpc.RpcError as err:
                e = PalimpsestError(err)
                if e.code != grpc.StatusCode.FAILED_PRECONDITION or e.reason != "HEAD_MISMATCH" or attempts >= 3:
                    raise e
                conflict = e.as_json()
                conflict["headBeforeRetry"] = agent.head
                conflict["headAfterReread"] = agent.refresh_head()  # re-read, retry
        agent.head = pres.pruned[0].replacement_seq
        out["prune"] = {"target": target, "replacementSeq": pres.pruned[0].replacement_seq, "attempts": attempts,
                        "bytesSaved": pres.bytes_saved}
        out["conflict"] = conflict

        # A request the server rejects as malformed, to show BadRequest decoding too.
        try:
            stub.AppendEvents(svc.AppendEventsRequest(session_id=session_id, events=[js("turn/start", {"turn": 3}, append=APPEND)]))
            out["badRequest"] = None
        except grpc.RpcError as e:
            out["badRequest"] = PalimpsestError(e).as_json()

        # What the model sees next.
        history = stub.GetMessages(svc.GetMessagesRequest(session_id=session_id, view=svc.MESSAGE_VIEW_MODEL_HISTORY, typed=True))
        surf = stub.GetSurface(svc.GetSurfaceRequest(session_id=session_id))
        out["surface"] = list(surf.seqs)
        out["replaceGeneration"] = surf.replace_generation
        out["headSeq"] = agent.head
        out["messageCount"] = len(history.messages)
        out["messages"] = [summarize(m) for m in history.messages]
        out["prune"]["prunedText"] = out["messages"][-1]["blocks"][0]["text"]

    json.dump(out, sys.stdout)
    sys.stdout.write("\n")
    return 0


def summarize(m: svc.DerivedMessage) -> dict:
    msg = m.message
    blocks = []
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
        print(json.dumps({"error": e.as_json()}), file=sys.stderr)
        sys.exit(1)
