// Package palimpsest is the Go client of Palimpsest, the session-log service for
// AI agents: a thin layer over the generated SessionService stub
// (palimpsest.dev/go/gen/palimpsest/v1) with the same shape as the Python and
// TypeScript clients.
//
//   - Every failure is returned as *Error, with the google.rpc.Status details
//     decoded (Code, Reason, Metadata, Violations).
//   - UNAVAILABLE is retried with backoff. Debian's grpc-go (1.33) applies a
//     service config's retry policy only with GRPC_GO_RETRY=on, so the policy is
//     a unary interceptor here; it is safe for appends because every append
//     carries an idempotency key (the caller's or a generated one).
//   - SubscribeSurface returns a Subscription whose Next reconnects after a
//     dropped connection or a server restart and resumes from its last cursor.
//   - NewEvent, UserMessage, AssistantMessage, ToolCall, ToolResult, TurnStart,
//     ... build the events the engine accepts.
//   - Builders called without an id leave it to Append, which derives it from the
//     idempotency key and the event's index (DerivedID): a retry that rebuilds its
//     batch with the same key is answered with the stored seqs.
//   - ListSessions (all pages), Fork, Repair, ExportSession and ImportSession
//     (streamed) wrap the session RPCs. Every seq is an int64 (PlanCompaction,
//     Compact and PruneToolResults return Plan, Compacted and Pruned).
//   - PlanCompaction, Compact (plan + a Compact conditional on the planned
//     head, or a given Plan) and PruneToolResults wrap the server-side
//     compaction and pruning; AsOf(seq) reads GetSurface/Messages as of an
//     event; WithPairingGuard(false) turns the tool-pairing guard off.
//
// The module is palimpsest.dev/go (clients/go/go.mod); it builds offline with
// -mod=vendor after clients/run.sh vendor go (see clients/go/README.md).
package palimpsest // import "palimpsest.dev/go/palimpsest"
