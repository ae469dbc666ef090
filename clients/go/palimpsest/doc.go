// Package palimpsest is the Go client of Palimpsest, the session-log service for
// AI agents: a thin layer over the generated SessionService stub
// (palimpsest/gen/go/palimpsest/v1) with the same shape as the Python and
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
//   - PlanCompaction, Compact (plan + a Compact conditional on the planned
//     head, or a given Plan) and PruneToolResults wrap the server-side
//     compaction and pruning; AsOf(seq) reads GetSurface/Messages as of an
//     event; WithPairingGuard(false) turns the tool-pairing guard off.
//
// Build in GOPATH mode against Debian's Go packages: clients/run.sh gen go puts
// the stubs and this package (as palimpsest/clients/go/palimpsest) in a GOPATH.
package palimpsest
