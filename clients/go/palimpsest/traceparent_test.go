package palimpsest

// Trace context propagation (issue #41), without a server: a unary
// interceptor records the outgoing metadata of each call and answers it.

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// sent dials a client whose calls never leave the process and returns the
// metadata of one GetSession call made with ctx.
func sent(t *testing.T, ctx context.Context, opts ...Option) metadata.MD {
	var md metadata.MD
	capture := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		md, _ = metadata.FromOutgoingContext(ctx)
		return status.Error(codes.Unavailable, "not sent")
	}
	c, err := Dial("127.0.0.1:1", append(opts, WithRetries(1), WithDialOptions(grpc.WithUnaryInterceptor(capture)))...)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _ = c.GetSession(ctx, "s")
	return md
}

const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

func TestNoTraceContextByDefault(t *testing.T) {
	if got := sent(t, context.Background()).Get("traceparent"); len(got) != 0 {
		t.Fatalf("traceparent sent without being asked: %v", got)
	}
}

func TestWithTraceparent(t *testing.T) {
	md := sent(t, WithTraceparent(context.Background(), tp), WithToken("tok"))
	if got := md.Get("traceparent"); len(got) != 1 || got[0] != tp {
		t.Fatalf("traceparent = %v, want [%s]", got, tp)
	}
	if got := md.Get("authorization"); len(got) != 1 || got[0] != "Bearer tok" {
		t.Fatalf("authorization = %v", got)
	}
}

func TestWithPropagator(t *testing.T) {
	p := func(ctx context.Context, set func(key, value string)) {
		set("traceparent", "00-11111111111111111111111111111111-2222222222222222-01")
		set("tracestate", "vendor=x")
		set("baggage", "ignored=1")
	}
	md := sent(t, context.Background(), WithPropagator(p))
	if got := md.Get("traceparent"); len(got) != 1 || got[0] != "00-11111111111111111111111111111111-2222222222222222-01" {
		t.Fatalf("traceparent = %v", got)
	}
	if got := md.Get("tracestate"); len(got) != 1 || got[0] != "vendor=x" {
		t.Fatalf("tracestate = %v", got)
	}
	if got := md.Get("baggage"); len(got) != 0 {
		t.Fatalf("baggage sent: %v", got)
	}
	// An explicit traceparent wins over the propagator's.
	md = sent(t, WithTraceparent(context.Background(), tp), WithPropagator(p))
	if got := md.Get("traceparent"); len(got) != 1 || got[0] != tp {
		t.Fatalf("traceparent = %v, want [%s]", got, tp)
	}
}
